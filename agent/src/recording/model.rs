//! The recording (format v2; v1 files are read too): what `mdiag record`
//! writes and `mdiag explain` reads. How it is laid out in the file:
//! `recording/stream.rs`.
//!
//! Self-describing (`format` + `version` at the top level) and documented in
//! `docs/recording-format.md`. All numbers are integers (nanoseconds, counts)
//! so that a write → read round trip is exact. Every probe family has its own
//! optional section in each one-second [`Slice`]; later families (allocator,
//! rseq, WiredTiger, softirq) and mongod metrics add sections beside `sched`
//! without changing the existing ones.
//!
//! This file holds what every recording shares (the header, [`Slice`]
//! itself, the checks); the host facts are in `recording/host.rs`, the probe
//! status in the probe kit (`kit/probe/status.rs`), each family's section
//! types in its folder (`family/<family>/section.rs`, named as in
//! `probes::FAMILIES`); all are re-exported here so `recording::model::X`
//! names them as before.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

// The host facts and the families' sections (`family/<family>/section.rs`),
// re-exported so that `recording::model::X` keeps naming them.
pub use super::host::{
    CgroupFacts, CgroupV1Limits, ClockFacts, CpuTopology, DbPathFacts, HostFacts, MemoryFacts,
    MongodProcess, NetFacts, NetInterface, NumaNode, ProcessFacts, ProcessMemory, ResourceLimit,
    RxQueue, StorageFacts, SysfsChoice, SystemFacts, ThpFacts, TunedFacts, VmSysctls,
};
pub use super::host_cpu::{HostCpuUsage, ProcessCpu};
pub use crate::family::alloc::section::{
    AllocCalibration, AllocDrops, AllocFunctionWindow, AllocOverhead, AllocRecord,
    AllocSizeClassWindow, AllocSlice, AllocWindow,
};
pub use crate::family::perf::section::{PerfSlice, PerfSlowPath, PerfSymbol};
pub use crate::family::sched::section::{SchedDrops, SchedSlice, ThreadSlice};
pub use crate::family::softirq::section::{
    HardIrqSlice, SoftirqDrops, SoftirqSlice, SoftirqVector,
};
pub use crate::family::syscalls::section::{
    RseqCall, SyscallCalls, SyscallDropsSlice, SyscallsSlice, ThreadSyscallSlice,
};
pub use crate::family::wiredtiger::section::{Checkpoint, WiredTigerDropsSlice, WiredTigerSlice};

pub use crate::kit::probe::status::{ProbeStatus, ProgramStatus};

/// Value of [`Recording::format`].
pub const FORMAT_NAME: &str = "mdiag-recording";
/// The version this build writes and the newest it reads.
pub const FORMAT_VERSION: u32 = 2;

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
    /// What the target's code is: mapped objects, allocator, WiredTiger,
    /// rseq symbols (`None` host-wide or when it could not be read).
    #[serde(default)]
    pub target_code: Option<crate::symbols::TargetCode>,
    /// Who owns rseq in the target, and the per-CPU-caches verdict.
    #[serde(default)]
    pub rseq: Option<crate::recording::rseq::RseqOwnership>,
    /// Allocator latency windows: what was probed, the calibration and the
    /// overhead imposed on the target (`None` when the family did not run).
    #[serde(default)]
    pub alloc: Option<AllocRecord>,
    /// Kernel stacks of D-state sleeps referenced by the slices'
    /// `contention.dstate_stacks` (contention family), by stack id.
    #[serde(default)]
    pub kernel_stacks: Vec<super::KernelStack>,
    /// The target's on-CPU stacks (perf family), summed by the reader from
    /// the slices' `perf.stack_defs` and `perf.stacks`; never written itself.
    #[serde(skip)]
    pub cpu_profile: Option<crate::stacks::Profile>,
    /// Where the target's threads waited off CPU, by stack (contention
    /// family), summed like [`Self::cpu_profile`]; never written itself.
    #[serde(skip)]
    pub offcpu_profile: Option<crate::stacks::Profile>,
    /// The off-CPU stacks' sampling at its sparsest: one switch-out in this
    /// many (0 or 1: all of them), from the slices' `wait_sample_every`.
    #[serde(skip)]
    pub offcpu_sampled_one_in: u32,
    /// mongod's own figures (polled live, or joined from FTDC) and what was
    /// missing; `None` when mongod was not polled.
    #[serde(default)]
    pub mongod: Option<crate::recording::mongod::MongodRecording>,
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
    /// How it was chosen: "pid", "process", "spawned", "port" (listening on the --uri port).
    pub how: String,
    /// For a spawned target: its exit status if it ended during the recording
    /// (`None` when mdiag stopped it at the end).
    pub exit_code: Option<i32>,
}

/// The default slice is empty (no time, no section): the identity of
/// [`super::window::Mergeable::merge`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// Syscalls family (memory syscalls, futex waits, rseq registrations);
    /// `None` when it was not attached.
    #[serde(default)]
    pub syscalls: Option<SyscallsSlice>,
    /// WiredTiger family (checkpoint windows); `None` when it was not
    /// attached (no target, or no WiredTiger in it).
    #[serde(default)]
    pub wiredtiger: Option<WiredTigerSlice>,
    /// Perf family (CPU-time sampling, allocator share); `None` when it was
    /// not attached.
    #[serde(default)]
    pub perf: Option<PerfSlice>,
    /// Allocator family: latency windows that ended in this slice; `None`
    /// when the family did not run.
    #[serde(default)]
    pub alloc: Option<AllocSlice>,
    /// Contention family (kernel lock waits, D-state sleeps, split by
    /// checkpoint window); `None` when it was not attached.
    #[serde(default)]
    pub contention: Option<super::ContentionSlice>,
    /// mongod's serverStatus sample of this second, or why there is none;
    /// `None` when mongod was not polled.
    #[serde(default)]
    pub mongod: Option<crate::recording::mongod::MongodSlice>,
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
