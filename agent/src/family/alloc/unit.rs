//! The allocator family as the hubs see it ([`FamilyUnit`]).

use aya::Ebpf;

use super::report::AllocMeasurements;
use super::{AllocProbe, AllocRecord, AllocSlice};
use crate::kit::family::{Family, FamilyWindow, OfFamily};
use crate::kit::probe::{AttachContext, ProbeStatus};
use crate::kit::unit::{FamilyUnit, Measured};
use crate::kit::view;

/// The allocator family.
pub struct Unit;

impl OfFamily for AllocSlice {
    const FAMILY: Family = Family::Alloc;
}

impl FamilyUnit for Unit {
    const FAMILY: Family = Family::Alloc;
    const READ_RANK: u8 = 6;
    /// Its windows and budget are known only once the record loop or the
    /// agent has calibrated them (`probes::Probes::attach_later`).
    const ATTACH_LATER: bool = true;

    type Section = AllocSlice;
    type Reader = AllocProbe;
    type Measurements = AllocMeasurements;

    /// Nothing at start: see [`Self::ATTACH_LATER`].
    fn attach(_ebpf: &mut Ebpf, _cx: &AttachContext) -> (Option<ProbeStatus>, Option<AllocProbe>) {
        (None, None)
    }

    /// Its windows, with what was probed and the calibration (the record
    /// the recording keeps).
    fn measure(w: &FamilyWindow<'_, AllocSlice>) -> Measured<AllocMeasurements> {
        super::report::measurements(w.kept::<AllocRecord>(), w).into()
    }

    #[cfg(test)]
    fn random(r: &mut crate::kit::random::Rng, start_ms: u64) -> AllocSlice {
        super::random::random(r, start_ms)
    }

    fn view(m: &AllocMeasurements) -> view::Section {
        super::report::section(m)
    }

    fn chart(out: &mut String, m: Option<&AllocMeasurements>, why_missing: &str) {
        super::chart(out, m, why_missing);
    }
}
