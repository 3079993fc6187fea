//! The contention family as the hubs see it ([`FamilyUnit`]).

use aya::Ebpf;

use super::{ContentionMeasurements, ContentionReader, ContentionSlice, ContentionWindow};
use crate::kit::fact::FactGroup;
use crate::kit::family::{Family, FamilyWindow, OfFamily};
use crate::kit::probe::{AttachContext, ProbeStatus};
use crate::kit::unit::{FamilyUnit, Measured};
use crate::kit::view;

/// The contention family.
pub struct Unit;

impl OfFamily for ContentionSlice {
    const FAMILY: Family = Family::Contention;
}

impl FamilyUnit for Unit {
    const FAMILY: Family = Family::Contention;
    const TRACEPOINTS: &'static [(&'static str, &'static str)] = super::TRACEPOINTS;
    const READ_RANK: u8 = 2;
    const CYCLED: bool = true;

    const FACTS: bool = true;

    type Section = ContentionSlice;
    type Reader = ContentionReader;
    type Measurements = ContentionMeasurements;

    /// Folds its switch program into sched's when sched attached first.
    fn attach(
        ebpf: &mut Ebpf,
        cx: &AttachContext,
    ) -> (Option<ProbeStatus>, Option<ContentionReader>) {
        let sched_attached = cx.attached.contains(&Family::Sched);
        let (status, reader) = super::attach(ebpf, cx, sched_attached);
        (Some(status), reader)
    }

    fn facts(w: &FamilyWindow<'_, ContentionSlice>) -> Result<FactGroup, String> {
        super::facts::facts(&ContentionWindow::of(w))
    }

    fn example() -> Option<ContentionSlice> {
        Some(super::example::example())
    }

    /// Also from the syscalls family's futex waits: measured when either
    /// recorded.
    fn measure(w: &FamilyWindow<'_, ContentionSlice>) -> Measured<ContentionMeasurements> {
        super::build(&ContentionWindow::of(w)).into()
    }

    /// Its own section only: futex waits alone are the syscalls family's.
    fn recorded(
        w: &FamilyWindow<'_, ContentionSlice>,
        _m: Option<&ContentionMeasurements>,
    ) -> bool {
        w.section.is_some()
    }

    #[cfg(test)]
    fn random(r: &mut crate::kit::random::Rng, start_ms: u64) -> ContentionSlice {
        super::random::random(r, start_ms)
    }

    fn view(m: &ContentionMeasurements) -> view::Section {
        super::report::section(m)
    }
}
