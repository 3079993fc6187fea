//! WiredTiger family: checkpoint windows of the target, from a uprobe and a
//! uretprobe on `__wt_txn_checkpoint` (WiredTiger's checkpoint entry point,
//! not recursive) in whichever object of the target defines it.
//!
//! The entry program remembers (thread → start time); the return program
//! sends one [`CheckpointEvent`] per checkpoint through a ring buffer
//! (checkpoints are rare: a few per minute). Both filter on the target's
//! tgid (the sched family's `MDIAG_SCHED_TARGET_TGID`); uprobes are attached
//! for the target's pid anyway.

pub const PROG_CKPT_ENTER: &str = "mdiag_wt_ckpt_enter";
pub const PROG_CKPT_EXIT: &str = "mdiag_wt_ckpt_exit";
/// The probed function.
pub const CHECKPOINT_FUNCTION: &str = "__wt_txn_checkpoint";

pub const MAP_CKPT_START: &str = "WT_CKPT_START";
pub const MAP_CKPT_EVENTS: &str = "WT_CKPT_EVENTS";
pub const MAP_DROPS: &str = "WT_DROPS";
/// One `u64`: checkpoints of the target running now (entries seen minus
/// returns matched), read by the contention programs when a wait begins.
pub const MAP_CKPT_ACTIVE: &str = "WT_CKPT_ACTIVE";

/// Threads inside a checkpoint at once (one in practice: WiredTiger
/// serialises checkpoints).
pub const MAX_INFLIGHT: u32 = 1024;
/// Ring buffer for checkpoint events, bytes (a power of two, multiple of the page size).
pub const CKPT_RING_BYTES: u32 = 16 * 1024;

/// One completed `__wt_txn_checkpoint` call.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckpointEvent {
    pub tid: u32,
    pub tgid: u32,
    /// `bpf_ktime_get_ns` (CLOCK_MONOTONIC) at entry and at return.
    pub start_ns: u64,
    pub end_ns: u64,
    /// The function's return value (0, or an errno / WT_* error).
    pub ret: i64,
}

/// Per-CPU drop counters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WiredTigerDrops {
    /// Completed checkpoints lost because the ring buffer was full.
    pub ring_full: u64,
    /// Returns without a remembered entry (attached while one was running).
    pub missing_entry: u64,
    /// Entries that could not be remembered (start map full).
    pub start_map_full: u64,
}

const _: () = assert!(core::mem::size_of::<CheckpointEvent>() == 32);
const _: () = assert!(core::mem::size_of::<WiredTigerDrops>() == 24);

#[cfg(feature = "user")]
mod user {
    // SAFETY: #[repr(C)], integer fields only, no padding holes, so
    // every bit pattern is valid.
    unsafe impl aya::Pod for super::CheckpointEvent {}
    // SAFETY: as said above: #[repr(C)], integers and arrays, explicit padding.
    unsafe impl aya::Pod for super::WiredTigerDrops {}
}

impl CheckpointEvent {
    /// Decodes an event from ring-buffer bytes (`None` when too short).
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        // SAFETY: CheckpointEvent is plain #[repr(C)] integer data, valid for any bit pattern.
        unsafe { crate::read_plain(bytes) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoint_event_round_trips_through_bytes() {
        let e = CheckpointEvent {
            tid: 7,
            tgid: 6,
            start_ns: 1_000,
            end_ns: 5_000,
            ret: -16,
        };
        // SAFETY: plain data without padding holes.
        let bytes: [u8; 32] = unsafe { core::mem::transmute(e) };
        assert_eq!(CheckpointEvent::from_bytes(&bytes), Some(e));
        assert_eq!(CheckpointEvent::from_bytes(&bytes[..31]), None);
        assert_eq!(core::mem::offset_of!(CheckpointEvent, ret), 24);
    }
}
