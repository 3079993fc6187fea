//! The perf family as the hubs see it ([`FamilyUnit`]).

use aya::Ebpf;

use super::report::PerfMeasurements;
use super::{PerfReader, PerfSlice};
use crate::kit::family::{Family, FamilyWindow, OfFamily};
use crate::kit::probe::{AttachContext, ProbeStatus};
use crate::kit::unit::{FamilyUnit, Measured, Series, per_second};
use crate::kit::view;
use crate::symbols::TargetCode;

/// The perf family.
pub struct Unit;

impl OfFamily for PerfSlice {
    const FAMILY: Family = Family::Perf;
}

impl FamilyUnit for Unit {
    const FAMILY: Family = Family::Perf;
    /// Read late: it symbolizes.
    const READ_RANK: u8 = 5;

    type Section = PerfSlice;
    type Reader = PerfReader;
    type Measurements = PerfMeasurements;

    fn attach(ebpf: &mut Ebpf, cx: &AttachContext) -> (Option<ProbeStatus>, Option<PerfReader>) {
        let (status, reader) = super::attach(ebpf, cx);
        (Some(status), reader)
    }

    fn example() -> Option<PerfSlice> {
        Some(super::example::example())
    }

    /// The allocator its shares are of: the first a slice names, else the
    /// one the target's code was found to use (kept by the recording).
    fn measure(w: &FamilyWindow<'_, PerfSlice>) -> Measured<PerfMeasurements> {
        let allocator = super::report::first_allocator(
            w.per_slice().into_iter().map(|(_, s)| s),
            w.kept::<TargetCode>().map(|c| c.allocator.kind),
        );
        super::report::build(w, allocator).into()
    }

    #[cfg(test)]
    fn random(r: &mut crate::kit::random::Rng, start_ms: u64) -> PerfSlice {
        super::random::random(r, start_ms)
    }

    fn view(m: &PerfMeasurements) -> view::Section {
        super::report::section(m)
    }

    fn series(slices: &[(u64, Option<&PerfSlice>)]) -> Vec<Series> {
        vec![
            (
                "target CPU (perf samples)",
                "samples/s",
                per_second(slices, |p| p.target_samples as f64),
            ),
            (
                "allocator CPU (perf samples)",
                "samples/s",
                per_second(slices, |p| p.allocator_samples as f64),
            ),
        ]
    }
}
