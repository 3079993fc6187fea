//! Recording types of the contention family: kernel lock waits and D-state
//! (uninterruptible) sleeps per thread, lock kinds and kernel stacks, each
//! split by whether a checkpoint of the target was running when the wait
//! began ("inside") or not ("outside").
//!
//! Kept apart from `model.rs` so that the family's format lives in one place;
//! `Slice::contention` and `Recording::kernel_stacks` point here.

use serde::{Deserialize, Serialize};

use crate::kit::family::Section;

/// Wait count and time, split by checkpoint window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WindowSplit {
    /// Waits that began while no checkpoint of the target ran.
    pub outside: u64,
    pub outside_ns: u64,
    /// Waits that began while a checkpoint of the target ran.
    pub inside: u64,
    pub inside_ns: u64,
}

impl WindowSplit {
    pub fn from_arrays(count: [u64; 2], ns: [u64; 2]) -> Self {
        Self {
            outside: count[0],
            outside_ns: ns[0],
            inside: count[1],
            inside_ns: ns[1],
        }
    }

    pub fn count(&self) -> u64 {
        self.outside + self.inside
    }

    pub fn ns(&self) -> u64 {
        self.outside_ns + self.inside_ns
    }

    pub fn is_zero(&self) -> bool {
        self.count() == 0 && self.ns() == 0
    }

    /// `self - before`, field by field (saturating).
    pub fn since(&self, before: &Self) -> Self {
        Self {
            outside: self.outside.saturating_sub(before.outside),
            outside_ns: self.outside_ns.saturating_sub(before.outside_ns),
            inside: self.inside.saturating_sub(before.inside),
            inside_ns: self.inside_ns.saturating_sub(before.inside_ns),
        }
    }

    pub fn add(&mut self, other: &Self) {
        self.outside += other.outside;
        self.outside_ns += other.outside_ns;
        self.inside += other.inside;
        self.inside_ns += other.inside_ns;
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContentionSlice {
    /// Observed threads that waited on a kernel lock or slept in D state.
    pub threads: Vec<ThreadContentionSlice>,
    /// Kernel lock waits by lock kind (all observed threads).
    pub lock_kinds: Vec<LockKindSlice>,
    /// D-state sleeps by kernel stack (ids index `Recording::kernel_stacks`),
    /// the [`TOP_STACKS_PER_SLICE`] with most time; the rest in `other_stacks`.
    pub dstate_stacks: Vec<DStateStackSlice>,
    /// D-state sleeps of stacks left out of `dstate_stacks`, or without a stack.
    pub other_stacks: WindowSplit,
    pub drops: ContentionDropsSlice,
    /// Off-CPU stacks of the target first seen in this slice (each written
    /// once per recording, under an id `waits` count by).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub wait_stack_defs: Vec<crate::stacks::table::StackDef>,
    /// Time off CPU of the target's threads that ended in this slice, by
    /// stack, why (sleep, D state, run queue) and checkpoint window.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waits: Vec<crate::stacks::table::WaitCount>,
    /// Off-CPU stacks were taken for one switch-out in this many during the
    /// slice (chosen at random). Every wait is timed: `waits` add up to each
    /// thread's exact time per why and window, split between its sampled
    /// stacks (`waits.rs`). 0 or 1: every switch-out.
    #[serde(skip_serializing_if = "is_zero_u32")]
    pub wait_sample_every: u32,
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// Stacks listed per slice.
pub const TOP_STACKS_PER_SLICE: usize = 10;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ThreadContentionSlice {
    pub tid: u32,
    pub tgid: u32,
    /// Thread name when its first wait was seen.
    pub comm: String,
    /// Kernel lock waits (`contention_begin` → `contention_end`).
    pub lock: WindowSplit,
    /// Uninterruptible sleeps (switched out in D state → switched back in).
    pub dstate: WindowSplit,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LockKindSlice {
    /// "spinlock", "rwsem:W", "mutex", ... (as `perf lock contention` names them).
    pub kind: String,
    /// The kernel's `LCB_F_*` flags.
    pub flags: u32,
    pub waits: WindowSplit,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DStateStackSlice {
    pub stack_id: u32,
    pub sleeps: WindowSplit,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ContentionDropsSlice {
    /// Waits not timed (in-flight map full).
    pub inflight_full: u64,
    pub thread_map_full: u64,
    /// D-state sleeps without a kernel stack.
    pub stack_failed: u64,
    /// D-state time lost (stack totals map full).
    pub dstack_map_full: u64,
    /// Lock waits begun inside another open wait (not timed).
    pub nested: u64,
    /// Off-CPU stacks the kernel could not store (counted as "[stack lost]").
    #[serde(skip_serializing_if = "is_zero")]
    pub wait_stack_lost: u64,
    /// Off-CPU waits not timed (in-flight map full).
    #[serde(skip_serializing_if = "is_zero")]
    pub wait_inflight_full: u64,
    /// Off-CPU waits timed but lost (counter map full).
    #[serde(skip_serializing_if = "is_zero")]
    pub wait_map_full: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A kernel stack seen in D state, symbolized with /proc/kallsyms.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KernelStack {
    pub stack_id: u32,
    /// Innermost first: `function+0xoff`, or the address in hex when no
    /// symbol covers it.
    pub frames: Vec<String>,
    /// The first frame that is not scheduler, wait or tracing plumbing
    /// (e.g. `xfs_ilock`), the stack's name in the report.
    pub signature: Option<String>,
}

impl Section for ContentionSlice {
    fn drops_total(&self) -> u64 {
        let d = &self.drops;
        d.inflight_full
            + d.thread_map_full
            + d.stack_failed
            + d.dstack_map_full
            + d.wait_inflight_full
            + d.wait_map_full
    }
}
