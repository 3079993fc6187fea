//! Recording types of the host's CPU use over the recording: `/proc/stat`'s
//! CPU time and every process's CPU time (`/proc/PID/stat` utime + stime),
//! read when the recording starts and when it ends.
//!
//! The scheduler probe watches only the target's threads when there is a
//! target, so it cannot say who else kept the CPUs busy; these two readings
//! can, for any process that lived through the end of the recording. All
//! values are clock ticks (`ticks_per_s` of them per second), integers, so a
//! write → read round trip is exact.

use serde::{Deserialize, Serialize};

/// The host's CPU time between the start and the end of the recording.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HostCpuUsage {
    /// Wall time between the two readings, ms.
    pub interval_ms: u64,
    /// Clock ticks per second (`sysconf(_SC_CLK_TCK)`).
    pub ticks_per_s: u64,
    /// Online CPUs when read.
    pub cpus: u32,
    /// `/proc/stat` `cpu` line deltas, all CPUs: every state together.
    pub total_ticks: u64,
    /// user + nice + system + irq + softirq (guest time is inside user).
    pub busy_ticks: u64,
    pub idle_ticks: u64,
    pub iowait_ticks: u64,
    /// Time the hypervisor ran something else while a CPU wanted to run.
    pub steal_ticks: u64,
    /// The busiest processes over the interval, most CPU first (at most
    /// [`HostCpuUsage::TOP`]), and the target wherever it ranks.
    pub top: Vec<ProcessCpu>,
    /// CPU time of every process seen at the end, all of them together.
    pub process_ticks: u64,
}

impl HostCpuUsage {
    /// Processes kept in [`HostCpuUsage::top`].
    pub const TOP: usize = 8;
}

/// One process's CPU time over the recording.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProcessCpu {
    pub pid: u32,
    /// `/proc/PID/comm` at the end.
    pub comm: String,
    /// utime + stime of all its threads over the interval (the whole of it
    /// for a process started during the recording).
    pub ticks: u64,
    /// Threads at the end.
    pub threads: u64,
    /// Its nice value at the end (-20..19).
    pub nice: i64,
}
