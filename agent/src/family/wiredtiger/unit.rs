//! The WiredTiger family as the hubs see it ([`FamilyUnit`]).

use aya::Ebpf;

use super::report::WiredTigerMeasurements;
use super::{WiredTigerReader, WiredTigerSlice};
use crate::kit::family::{Family, FamilyWindow, OfFamily};
use crate::kit::probe::{AttachContext, ProbeStatus};
use crate::kit::unit::{FamilyUnit, Measured};
use crate::kit::view;
use crate::symbols::TargetCode;

/// The WiredTiger family.
pub struct Unit;

impl OfFamily for WiredTigerSlice {
    const FAMILY: Family = Family::Wiredtiger;
}

impl FamilyUnit for Unit {
    const FAMILY: Family = Family::Wiredtiger;
    const READ_RANK: u8 = 4;

    type Section = WiredTigerSlice;
    type Reader = WiredTigerReader;
    type Measurements = WiredTigerMeasurements;

    /// Uprobes in the target's objects: "not applicable" without
    /// WiredTiger in it; not tried (no status) host-wide.
    fn attach(
        ebpf: &mut Ebpf,
        cx: &AttachContext,
    ) -> (Option<ProbeStatus>, Option<WiredTigerReader>) {
        super::attach(ebpf, cx.target_tgid)
    }

    fn example() -> Option<WiredTigerSlice> {
        Some(super::example::example())
    }

    /// Names the object WiredTiger was found in (kept by the recording).
    fn measure(w: &FamilyWindow<'_, WiredTigerSlice>) -> Measured<WiredTigerMeasurements> {
        let detected = w
            .kept::<TargetCode>()
            .and_then(|c| c.wiredtiger.detected.object.clone());
        super::report::build(w, detected).into()
    }

    #[cfg(test)]
    fn random(r: &mut crate::kit::random::Rng, start_ms: u64) -> WiredTigerSlice {
        super::random::random(r, start_ms)
    }

    fn view(m: &WiredTigerMeasurements) -> view::Section {
        super::report::section(m)
    }
}
