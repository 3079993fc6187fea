//! The scheduler family as the hubs see it ([`FamilyUnit`]).

use aya::Ebpf;

use super::{SchedFigures, SchedReader, SchedSlice, report::SchedMeasurements};
use crate::hist::log2_hist_percentile_ns;
use crate::kit::fact::FactGroup;
use crate::kit::family::{Family, FamilyWindow, OfFamily};
use crate::kit::probe::{AttachContext, ProbeStatus};
use crate::kit::unit::{FamilyUnit, Measured, Series};
use crate::kit::view;

/// The scheduler family.
pub struct Unit;

impl OfFamily for SchedSlice {
    const FAMILY: Family = Family::Sched;
}

impl FamilyUnit for Unit {
    const FAMILY: Family = Family::Sched;
    const TRACEPOINTS: &'static [(&'static str, &'static str)] = super::TRACEPOINTS;
    const READ_RANK: u8 = 1;
    const CYCLED: bool = true;
    /// Its figures say why it is missing (a partial attach included).
    const STATUS_NOTES: bool = false;

    const FACTS: bool = true;

    type Section = SchedSlice;
    type Reader = SchedReader;
    type Measurements = SchedMeasurements;

    fn attach(ebpf: &mut Ebpf, cx: &AttachContext) -> (Option<ProbeStatus>, Option<SchedReader>) {
        let (status, reader) = super::attach(ebpf, cx);
        (Some(status), reader)
    }

    fn facts(w: &FamilyWindow<'_, SchedSlice>) -> Result<FactGroup, String> {
        super::facts::facts(w)
    }

    fn example() -> Option<SchedSlice> {
        Some(super::example::example())
    }

    fn measure(w: &FamilyWindow<'_, SchedSlice>) -> Measured<SchedMeasurements> {
        match SchedFigures::of(w) {
            Ok(f) => Measured::Yes(super::report::build(&f)),
            Err(why) => Measured::No(why),
        }
    }

    #[cfg(test)]
    fn random(r: &mut crate::kit::random::Rng, start_ms: u64) -> SchedSlice {
        super::random::random(r, start_ms)
    }

    fn view(m: &SchedMeasurements) -> view::Section {
        super::report::section(m)
    }

    fn chart(out: &mut String, m: Option<&SchedMeasurements>, why_missing: &str) {
        super::chart(out, m, why_missing);
    }

    fn series(slices: &[(u64, Option<&SchedSlice>)]) -> Vec<Series> {
        let involuntary = crate::kit::unit::per_second(slices, |s| s.involuntary as f64);
        let runq_p99 = slices
            .iter()
            .map(|(_, s)| {
                s.and_then(|x| {
                    log2_hist_percentile_ns(&x.runq_hist_log2_ns, 0.99).map(|ns| ns / 1000.0)
                })
            })
            .collect();
        vec![
            ("involuntary switches", "per s", involuntary),
            ("run-queue delay p99", "µs", runq_p99),
        ]
    }
}
