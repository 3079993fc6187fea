//! The contention measurements' model: waits inside vs outside the target's
//! checkpoint windows, per thread class, lock kinds and the top D-state
//! stacks. Built once (`totals.rs`) so that the `contention` fact group and
//! the report's contention section (`report.rs`, which renders it) come from
//! one derivation. Part of the JSON contract (`measurements`).

use serde::{Deserialize, Serialize};

use super::section::WindowSplit;

/// D-state stacks listed, by time.
pub const TOP_STACKS: usize = 5;
/// Frames shown per listed stack (after the plumbing).
pub const STACK_FRAMES: usize = 6;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContentionMeasurements {
    /// Wall time of the recording, seconds.
    pub duration_s: f64,
    /// Checkpoints seen and their summed duration (the "inside" time), seconds.
    pub checkpoints: u64,
    pub checkpoint_s: f64,
    /// Futex waits (syscalls family), kernel lock waits and D-state sleeps
    /// (contention family); `None` when that family recorded nothing.
    pub futex: Option<SplitMeasurement>,
    pub kernel_locks: Option<SplitMeasurement>,
    pub dstate: Option<SplitMeasurement>,
    /// Per thread class, classes with any figure, most waiting first.
    pub classes: Vec<ClassContention>,
    /// Kernel lock waits by kind, most time first.
    pub lock_kinds: Vec<LockKindMeasurement>,
    /// The [`TOP_STACKS`] D-state stacks with most time.
    pub top_stacks: Vec<StackMeasurement>,
    /// Waits lost or not timed (all drop counters of the family).
    pub drops: u64,
}

/// One figure split by checkpoint window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SplitMeasurement {
    pub inside_count: u64,
    pub inside_ms: f64,
    pub outside_count: u64,
    pub outside_ms: f64,
    /// Wait (ms) per second of checkpoint time; `None` without checkpoint time.
    pub inside_ms_per_s: Option<f64>,
    /// Wait (ms) per second of the rest of the wall time.
    pub outside_ms_per_s: Option<f64>,
    /// `inside_ms_per_s / outside_ms_per_s`; `None` when either is missing
    /// or the outside rate is zero.
    pub ratio: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassContention {
    /// See `threads::mongod_class`: conn, checkpointer, eviction, ...
    pub class: String,
    pub threads: u64,
    /// Milliseconds of waiting per second of wall time, summed over the class.
    pub futex_wait_ms_per_s: f64,
    /// The class's futex wait per second of checkpoint time / of the rest
    /// (as [`SplitMeasurement`]); `None` without such time.
    pub futex_inside_ms_per_s: Option<f64>,
    pub futex_outside_ms_per_s: Option<f64>,
    pub lock_wait_ms_per_s: f64,
    pub dstate_ms_per_s: f64,
    /// Scheduler family figures of the class.
    pub involuntary_per_s: f64,
    pub wakeup_preempted_per_s: f64,
    pub runq_mean_us: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockKindMeasurement {
    pub kind: String,
    pub waits: u64,
    pub wait_ms: f64,
    pub inside_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackMeasurement {
    pub stack_id: u32,
    /// The first frame that is not scheduler / wait plumbing.
    pub signature: Option<String>,
    /// Up to [`STACK_FRAMES`] frames from the signature outwards.
    pub frames: Vec<String>,
    pub sleeps: u64,
    pub total_ms: f64,
    pub inside_ms: f64,
}

/// The split of `w` given the checkpoint time and the rest of the wall time.
pub fn split(w: &WindowSplit, checkpoint_s: f64, outside_s: f64) -> SplitMeasurement {
    let rate = |ns: u64, s: f64| (s > 0.0).then(|| ns as f64 / 1e6 / s);
    let inside_ms_per_s = rate(w.inside_ns, checkpoint_s);
    let outside_ms_per_s = rate(w.outside_ns, outside_s);
    let ratio = match (inside_ms_per_s, outside_ms_per_s) {
        (Some(i), Some(o)) if o > 0.0 => Some(i / o),
        _ => None,
    };
    SplitMeasurement {
        inside_count: w.inside,
        inside_ms: w.inside_ns as f64 / 1e6,
        outside_count: w.outside,
        outside_ms: w.outside_ns as f64 / 1e6,
        inside_ms_per_s,
        outside_ms_per_s,
        ratio,
    }
}
