//! The syscalls family as the hubs see it ([`FamilyUnit`]).

use aya::Ebpf;

use super::report::SyscallsMeasurements;
use super::{SyscallsReader, SyscallsSlice};
use crate::kit::family::{Family, FamilyWindow, OfFamily};
use crate::kit::probe::{AttachContext, ProbeStatus};
use crate::kit::unit::{FamilyUnit, Measured, Series, per_second};
use crate::kit::view;

/// The syscalls family.
pub struct Unit;

impl OfFamily for SyscallsSlice {
    const FAMILY: Family = Family::Syscalls;
}

/// Futex wait of a section's observed threads, in milliseconds (the
/// report's timeline and `compare`).
pub fn futex_wait_ms(s: &SyscallsSlice) -> f64 {
    let ns: u64 = s.threads.iter().map(|t| t.futex_wait_ns).sum();
    ns as f64 / 1e6
}

impl FamilyUnit for Unit {
    const FAMILY: Family = Family::Syscalls;
    const TRACEPOINTS: &'static [(&'static str, &'static str)] = super::TRACEPOINTS;
    /// Read first: it credits the waits in flight up to the moment it is
    /// read, closest to the slice's end.
    const READ_RANK: u8 = 0;
    const CYCLED: bool = true;

    type Section = SyscallsSlice;
    type Reader = SyscallsReader;
    type Measurements = SyscallsMeasurements;

    fn attach(
        ebpf: &mut Ebpf,
        cx: &AttachContext,
    ) -> (Option<ProbeStatus>, Option<SyscallsReader>) {
        let (status, reader) = super::attach(ebpf, cx);
        (Some(status), reader)
    }

    fn example() -> Option<SyscallsSlice> {
        Some(super::example::example())
    }

    fn measure(w: &FamilyWindow<'_, SyscallsSlice>) -> Measured<SyscallsMeasurements> {
        super::report::build(w).into()
    }

    #[cfg(test)]
    fn random(r: &mut crate::kit::random::Rng, start_ms: u64) -> SyscallsSlice {
        super::random::random(r, start_ms)
    }

    fn view(m: &SyscallsMeasurements) -> view::Section {
        super::report::section(m)
    }

    fn series(slices: &[(u64, Option<&SyscallsSlice>)]) -> Vec<Series> {
        vec![(
            "futex wait of observed threads",
            "ms/s",
            per_second(slices, futex_wait_ms),
        )]
    }
}
