//! Recording types of the alloc family: the allocator latency windows that
//! ended in each slice, and the family's record over the whole recording
//! (`Recording::alloc`: what was probed, the calibration, the overhead).
//!
//! The family's part of the recording format; `recording::model`
//! re-exports these types so `recording::model::X` still names them.

use serde::{Deserialize, Serialize};

use crate::kit::family::Section;

/// Allocator latency windows that ended in one slice.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllocSlice {
    pub windows: Vec<AllocWindow>,
}

/// One sampled window: the probes were attached, the window opened at
/// `start` and closed at `end`; every call entered in between was timed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllocWindow {
    /// CLOCK_MONOTONIC ns (comparable with the target's `clock_gettime`).
    pub start_ns: u64,
    pub end_ns: u64,
    /// The same instants in recording time: ms after `started_at`.
    pub start_ms: u64,
    pub end_ms: u64,
    /// Probe hits (calls through a probe pair) while attached, including
    /// the attach and detach around the window: what the target paid.
    pub probe_hits: u64,
    /// Per probed function that was called, in probing order.
    pub functions: Vec<AllocFunctionWindow>,
    pub drops: AllocDrops,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllocFunctionWindow {
    /// The probed symbol (see `AllocRecord::functions` for its aliases).
    pub symbol: String,
    /// Calls entered in the window and returned.
    pub count: u64,
    pub sum_ns: u64,
    /// Log2 latency histogram in ns (bucket i: [2^i, 2^(i+1)); trailing
    /// zeros dropped). Raw: includes the probe's own inside cost.
    pub buckets: Vec<u64>,
    /// The same calls by size class, for functions with a size argument.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub size_classes: Vec<AllocSizeClassWindow>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllocSizeClassWindow {
    /// Sizes in [min_bytes, 2 × min_bytes) (the last class: and above;
    /// min_bytes 0 holds 0 and 1).
    pub min_bytes: u64,
    pub count: u64,
    pub sum_ns: u64,
    pub buckets: Vec<u64>,
}

/// Calls the kernel side could not time, per window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllocDrops {
    /// Returns of calls entered before the window opened.
    pub missing_entry: u64,
    /// Returns that did not match the thread's innermost entry.
    pub mismatched: u64,
    /// Entries nested deeper than the per-thread stack.
    pub too_deep: u64,
    /// Entries not remembered (per-thread map full).
    pub stack_full: u64,
}

/// The allocator family over the whole recording.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllocRecord {
    pub window_ms: u64,
    /// Period between window starts, ms.
    pub every_ms: u64,
    pub allocator: Option<crate::symbols::AllocatorKind>,
    /// The object the entry points are in.
    pub object: String,
    /// The probed entry points (one per address), in probing order.
    pub functions: Vec<crate::symbols::summary::ProbePoint>,
    pub calibration: Option<AllocCalibration>,
    pub overhead: Option<AllocOverhead>,
    /// Windows that could not open (attach failed), and the last reason.
    #[serde(default)]
    pub failed_windows: u64,
    #[serde(default)]
    pub last_error: Option<String>,
}

/// Start-up calibration on a do-nothing function in mdiag's own process.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllocCalibration {
    /// Calls per timed run.
    pub calls: u64,
    /// Median over the runs of the time for `calls` calls without / with
    /// the probe pair attached, ns.
    pub bare_ns: u64,
    pub probed_ns: u64,
    /// What a probe pair adds per call: (probed − bare) / calls.
    pub pair_cost_ns: u64,
    /// The part of it that shows inside a measured latency: the median
    /// latency measured for the do-nothing function; subtracted from
    /// percentiles to correct them.
    pub inside_ns: u64,
    /// The do-nothing function's latency histogram (log2 ns).
    pub buckets: Vec<u64>,
}

/// What mdiag's windows cost the target.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AllocOverhead {
    /// Probe hits in the target over the recording (all windows).
    pub probe_hits: u64,
    /// The calibrated cost per hit, ns.
    pub pair_cost_ns: u64,
    /// The target's CPU time (user + system) over the recording, ns.
    pub target_cpu_ns: u64,
    /// probe_hits × pair_cost_ns / target_cpu_ns, parts per million.
    pub overhead_ppm: u64,
}

impl Section for AllocSlice {
    fn drops_total(&self) -> u64 {
        self.windows
            .iter()
            .map(|w| {
                let d = &w.drops;
                d.missing_entry + d.mismatched + d.too_deep + d.stack_full
            })
            .sum()
    }
}
