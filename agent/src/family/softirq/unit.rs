//! The softirq / hard-IRQ family as the hubs see it ([`FamilyUnit`]).

use aya::Ebpf;

use super::report::SoftirqMeasurements;
use super::{SoftirqReader, SoftirqSlice, SoftirqTotals};
use crate::kit::fact::FactGroup;
use crate::kit::family::{Family, FamilyWindow, OfFamily};
use crate::kit::probe::{AttachContext, ProbeStatus};
use crate::kit::unit::{FamilyUnit, Measured, Series, per_second};
use crate::kit::view;

/// The softirq / hard-IRQ family.
pub struct Unit;

impl OfFamily for SoftirqSlice {
    const FAMILY: Family = Family::Softirq;
}

/// NET_RX softirq time of a section, all CPUs, in milliseconds (the
/// report's timeline and `compare`).
pub fn net_rx_ms(s: &SoftirqSlice) -> f64 {
    let ns: u64 = s
        .vectors
        .iter()
        .filter(|v| v.name == "NET_RX")
        .flat_map(|v| &v.time_ns_per_cpu)
        .sum();
    ns as f64 / 1e6
}

impl FamilyUnit for Unit {
    const FAMILY: Family = Family::Softirq;
    const TRACEPOINTS: &'static [(&'static str, &'static str)] = super::TRACEPOINTS;
    const READ_RANK: u8 = 3;
    const CYCLED: bool = true;
    /// Its totals say why it is missing.
    const STATUS_NOTES: bool = false;

    const FACTS: bool = true;

    type Section = SoftirqSlice;
    type Reader = SoftirqReader;
    type Measurements = SoftirqMeasurements;

    fn attach(ebpf: &mut Ebpf, cx: &AttachContext) -> (Option<ProbeStatus>, Option<SoftirqReader>) {
        let (status, reader) = super::attach(ebpf, cx);
        (Some(status), reader)
    }

    fn facts(w: &FamilyWindow<'_, SoftirqSlice>) -> Result<FactGroup, String> {
        super::facts::facts(w)
    }

    fn example() -> Option<SoftirqSlice> {
        Some(super::example::example())
    }

    fn measure(w: &FamilyWindow<'_, SoftirqSlice>) -> Measured<SoftirqMeasurements> {
        match SoftirqTotals::from_window(w) {
            Ok(t) => Measured::Yes(super::report::build(&t)),
            Err(why) => Measured::No(why),
        }
    }

    #[cfg(test)]
    fn random(r: &mut crate::kit::random::Rng, start_ms: u64) -> SoftirqSlice {
        super::random::random(r, start_ms)
    }

    fn view(m: &SoftirqMeasurements) -> view::Section {
        super::report::section(m)
    }

    fn chart(out: &mut String, m: Option<&SoftirqMeasurements>, why_missing: &str) {
        super::chart(out, m, why_missing);
    }

    fn series(slices: &[(u64, Option<&SoftirqSlice>)]) -> Vec<Series> {
        vec![(
            "NET_RX softirq time",
            "ms/s",
            per_second(slices, net_rx_ms),
        )]
    }
}
