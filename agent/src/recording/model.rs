//! The recording, format v1: what `mdiag record` writes and `mdiag explain` reads.
//!
//! Self-describing (`format` + `version` at the top level) and documented in
//! `docs/recording-format.md`. All numbers are integers (nanoseconds, counts)
//! so that a write → read round trip is exact. Every probe family has its own
//! optional section in each one-second [`Slice`]; later families (allocator,
//! rseq, WiredTiger, softirq) and mongod metrics add sections beside `sched`
//! without changing the existing ones.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Value of [`Recording::format`].
pub const FORMAT_NAME: &str = "mdiag-recording";
/// The version this build writes and the newest it reads.
pub const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recording {
    /// Always [`FORMAT_NAME`].
    pub format: String,
    /// [`FORMAT_VERSION`] at the time of writing.
    pub version: u32,
    /// Version of the mdiag that wrote the file.
    pub mdiag_version: String,
    /// Wall-clock time when the probes were attached and recording began.
    pub started_at: DateTime<Utc>,
    /// Wall-clock time when the last slice was taken.
    pub ended_at: DateTime<Utc>,
    /// Duration the user asked for, in milliseconds.
    pub requested_duration_ms: u64,
    /// Why recording stopped: "duration", "interrupted (SIGINT)", "target exited", ...
    pub stop_reason: String,
    pub host: HostFacts,
    /// `None`: host-wide recording (no target process).
    pub target: Option<Target>,
    /// Every probe family that was tried, attached or not.
    pub probes: Vec<ProbeStatus>,
    /// One-second slices in time order.
    pub slices: Vec<Slice>,
    /// Kernel-side cross-checks taken at the edges of the recording.
    pub checks: Checks,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostFacts {
    pub hostname: String,
    /// `uname -r`, e.g. "6.18.44-fc-v769".
    pub kernel_release: String,
    /// Rust's name for the architecture: "x86_64", "aarch64", "s390x", ...
    pub arch: String,
    /// Online CPUs.
    pub cpu_count: u32,
    /// Model name from /proc/cpuinfo ("unknown" when absent, e.g. some s390x).
    pub cpu_model: String,
    /// Contents of /sys/kernel/debug/sched/features when readable.
    pub sched_features: Option<String>,
    /// Receive packet / flow steering state (RPS/RFS), `None` when unreadable.
    #[serde(default)]
    pub net: Option<NetFacts>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetFacts {
    /// /proc/sys/net/core/rps_sock_flow_entries (0 = RFS off).
    pub rps_sock_flow_entries: u64,
    /// Interfaces with receive queues (the loopback interface excluded).
    pub interfaces: Vec<NetInterface>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetInterface {
    pub name: String,
    pub rx_queues: Vec<RxQueue>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RxQueue {
    /// "rx-0", ...
    pub name: String,
    /// rps_cpus as the kernel prints it (hex CPU mask; all zeros = RPS off).
    pub rps_cpus: String,
    /// rps_flow_cnt (0 = RFS off for this queue).
    pub rps_flow_cnt: u64,
}

impl NetFacts {
    /// RPS is on when any queue steers to some CPU.
    pub fn rps_enabled(&self) -> bool {
        self.interfaces.iter().flat_map(|i| &i.rx_queues).any(|q| {
            q.rps_cpus
                .chars()
                .any(|c| c.is_ascii_hexdigit() && c != '0')
        })
    }

    /// RFS needs both the global flow table and per-queue flow counts.
    pub fn rfs_enabled(&self) -> bool {
        self.rps_sock_flow_entries > 0
            && self
                .interfaces
                .iter()
                .flat_map(|i| &i.rx_queues)
                .any(|q| q.rps_flow_cnt > 0)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    pub pid: u32,
    /// /proc/PID/comm.
    pub comm: String,
    /// /proc/PID/exe target, when readable.
    pub exe: Option<String>,
    pub cmdline: Vec<String>,
    /// How it was chosen: "pid", "process", "spawned".
    pub how: String,
    /// For a spawned target: its exit status if it ended during the recording
    /// (`None` when mdiag stopped it at the end).
    pub exit_code: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeStatus {
    /// Probe family: "sched", ...
    pub family: String,
    /// Each program of the family and where it attached.
    pub programs: Vec<ProgramStatus>,
}

impl ProbeStatus {
    /// A family counts as attached when every one of its programs attached.
    pub fn attached(&self) -> bool {
        !self.programs.is_empty() && self.programs.iter().all(|p| p.error.is_none())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgramStatus {
    /// Program name in the eBPF object.
    pub name: String,
    /// Attach point, e.g. "tp_btf/sched_switch".
    pub attach_point: String,
    /// `None` when attached; the reason otherwise.
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Slice {
    /// Start of the slice, milliseconds after `started_at`.
    pub start_ms: u64,
    /// Length of the slice in milliseconds (about 1000; the last may be shorter).
    pub duration_ms: u64,
    /// Scheduler family; `None` when it was not attached.
    pub sched: Option<SchedSlice>,
    /// Softirq / hard-IRQ family; `None` when it was not attached.
    #[serde(default)]
    pub softirq: Option<SoftirqSlice>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoftirqSlice {
    /// Softirq vectors that ran in this slice (kernel names: NET_RX, TIMER, ...).
    pub vectors: Vec<SoftirqVector>,
    /// Hard IRQs that fired in this slice.
    pub hardirqs: Vec<HardIrqSlice>,
    pub drops: SoftirqDrops,
}

impl SoftirqSlice {
    /// Softirq entries plus hard IRQs, all CPUs.
    pub fn events(&self) -> u64 {
        let softirqs: u64 = self.vectors.iter().flat_map(|v| &v.count_per_cpu).sum();
        let hardirqs: u64 = self.hardirqs.iter().flat_map(|h| &h.count_per_cpu).sum();
        softirqs + hardirqs
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoftirqVector {
    pub name: String,
    /// Entries per CPU (index = CPU number), as /proc/softirqs counts them.
    pub count_per_cpu: Vec<u64>,
    /// Time in the vector's handlers per CPU, nanoseconds.
    pub time_ns_per_cpu: Vec<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HardIrqSlice {
    pub irq: u32,
    /// Handler names from /sys/kernel/irq/N/actions ("irqN" when unknown).
    pub name: String,
    pub count_per_cpu: Vec<u64>,
    pub time_ns_per_cpu: Vec<u64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoftirqDrops {
    /// Exits without a matching entry (their time is unknown; normal right after attach).
    pub unmatched_exit: u64,
    /// IRQ numbers that did not fit in the IRQ map.
    pub irq_map_full: u64,
    /// Softirq vector numbers out of range.
    pub bad_vector: u64,
}

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

/// Kernel counters read by user space at the recording's edges, to check the
/// probes against the kernel's own accounting.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checks {
    /// Change of /proc/stat `ctxt` between attach and the last slice.
    pub proc_stat_ctxt: Option<u64>,
    /// Change of the target's summed `nonvoluntary_ctxt_switches` over the
    /// same span (threads that exited in between are missing from it).
    pub target_nonvoluntary_ctxt_switches: Option<u64>,
    pub target_voluntary_ctxt_switches: Option<u64>,
}
