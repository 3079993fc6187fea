//! Recording types of the wiredtiger family: the target's checkpoint windows
//! (`__wt_txn_checkpoint` entry to return) in each slice, and what the kernel
//! side dropped.
//!
//! The family's part of the recording format; `recording::model`
//! re-exports these types so `recording::model::X` still names them.

use serde::{Deserialize, Serialize};

use crate::kit::family::Section;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WiredTigerSlice {
    /// Checkpoints (`__wt_txn_checkpoint` calls) that returned in this slice,
    /// in return order; in the last slice, also those still running.
    pub checkpoints: Vec<Checkpoint>,
    pub drops: WiredTigerDropsSlice,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// The thread that ran it.
    pub tid: u32,
    /// Entry time, CLOCK_MONOTONIC nanoseconds (the kernel's
    /// `bpf_ktime_get_ns`; comparable with `clock_gettime(CLOCK_MONOTONIC)`
    /// on the same host, not with `start_ms`).
    pub start_ns: u64,
    /// Entry to return; for one `in_progress`, entry to the end of the recording.
    pub duration_ns: u64,
    /// The function's return value (0 = success); 0 when `in_progress`.
    pub ret: i64,
    /// Still running when the recording ended (or its thread exited inside it).
    pub in_progress: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WiredTigerDropsSlice {
    /// Completed checkpoints lost (ring buffer full).
    pub ring_full: u64,
    /// Returns without a remembered entry (attached while one was running).
    pub missing_entry: u64,
    /// Entries not remembered (start map full).
    pub start_map_full: u64,
}

impl Section for WiredTigerSlice {
    fn drops_total(&self) -> u64 {
        let d = &self.drops;
        d.ring_full + d.missing_entry + d.start_map_full
    }
}
