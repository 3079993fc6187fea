//! Recording types of the sched family: context switches, run-queue delay
//! and on-CPU time per thread, in each slice.
//!
//! The family's part of the recording format; `recording::model`
//! re-exports these types so `recording::model::X` still names them.

use serde::{Deserialize, Serialize};

use crate::kit::family::Section;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedSlice {
    /// Every context switch on every CPU, idle included (what /proc/stat `ctxt` counts).
    pub switches_total: u64,
    /// Per CPU, same meaning as `switches_total`; index = CPU number.
    pub switches_per_cpu: Vec<u64>,
    /// Observed threads (the target's, or every non-idle task host-wide).
    pub voluntary: u64,
    pub involuntary: u64,
    /// The part of `involuntary` with `sched_switch`'s preempt flag set
    /// (preempted while in the kernel).
    pub preempted: u64,
    pub wakeups: u64,
    /// Involuntary switches of observed threads to the task just woken on
    /// the same CPU (wakeup preemption).
    #[serde(default)]
    pub wakeup_preemptions: u64,
    /// Migrations of observed threads to another CPU.
    #[serde(default)]
    pub migrations: u64,
    /// Run-queue delay of observed threads: log2 buckets of nanoseconds
    /// (`[i]` counts delays in [2^i, 2^(i+1)) ns; `[0]` also holds 0 ns),
    /// trailing empty buckets removed.
    pub runq_hist_log2_ns: Vec<u64>,
    /// Threads active in this slice (any counter changed).
    pub threads: Vec<ThreadSlice>,
    pub drops: SchedDrops,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadSlice {
    pub tid: u32,
    pub tgid: u32,
    pub comm: String,
    pub voluntary: u64,
    pub involuntary: u64,
    pub preempted: u64,
    pub runq_delay_ns: u64,
    pub runq_delays: u64,
    pub oncpu_ns: u64,
    /// Involuntary switches in which this thread lost its CPU to a task
    /// just woken there.
    #[serde(default)]
    pub wakeup_preempted: u64,
    #[serde(default)]
    pub migrations: u64,
    /// The other side: times this thread, just woken, took its CPU from a
    /// still-runnable task (observed or not).
    #[serde(default)]
    pub wakeup_preempting: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedDrops {
    /// Threads that could not be tracked because the thread map was full.
    pub thread_map_full: u64,
    /// Wakeups whose timestamp could not be stored (their delay is lost).
    pub wakeup_map_full: u64,
    /// Kernel reads of `task_struct` fields that failed.
    pub read_failed: u64,
}

impl SchedDrops {
    pub fn total(&self) -> u64 {
        self.thread_map_full + self.wakeup_map_full + self.read_failed
    }
}

impl Section for SchedSlice {
    fn drops_total(&self) -> u64 {
        self.drops.total()
    }
}
