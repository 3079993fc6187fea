//! Scheduler probe family: context switches per thread and run-queue delay.
//!
//! Kernel side: BTF tracepoints `sched_switch`, `sched_wakeup`, `sched_wakeup_new`.
//! Counters are cumulative since attach; user space turns them into per-second
//! deltas, so nothing is ever reset under the kernel's feet.

use crate::hist::LOG2_BUCKETS;

/// Program names (the function names in `mdiag-ebpf/src/sched.rs`).
pub const PROG_SCHED_SWITCH: &str = "mdiag_sched_switch";
pub const PROG_SCHED_WAKEUP: &str = "mdiag_sched_wakeup";
pub const PROG_SCHED_WAKEUP_NEW: &str = "mdiag_sched_wakeup_new";
pub const PROG_SCHED_MIGRATE: &str = "mdiag_sched_migrate";
/// The kernel tracepoints those programs attach to, in the same order
/// (the first, `sched_switch`, is the one the family cannot do without).
pub const TRACEPOINTS: [(&str, &str); 4] = [
    (PROG_SCHED_SWITCH, "sched_switch"),
    (PROG_SCHED_WAKEUP, "sched_wakeup"),
    (PROG_SCHED_WAKEUP_NEW, "sched_wakeup_new"),
    (PROG_SCHED_MIGRATE, "sched_migrate_task"),
];

/// Map names (the static names in `mdiag-ebpf/src/sched.rs`).
pub const MAP_THREADS: &str = "SCHED_THREADS";
pub const MAP_CPU: &str = "SCHED_CPU";
pub const MAP_LAST_WAKEUP: &str = "SCHED_LAST_WAKEUP";
pub const MAP_RUNNING: &str = "SCHED_RUNNING";
/// One `u32` of [`FOLD_*`](FOLD_DSTATE) bits: what else the `sched_switch`
/// program does, set by the families that hand their own switch work to it
/// (one program per switch instead of two).
pub const MAP_FOLD: &str = "SCHED_FOLD";
/// `SCHED_FOLD` bit: the contention family's D-state accounting and its
/// off-CPU waits (stacks at switch-out, time at switch-in) run in
/// `mdiag_sched_switch` (its own switch program is then not attached).
pub const FOLD_DSTATE: u32 = 1;
/// `ThreadSched::flags` bit: a D-state sleep of the thread is open in the
/// contention family's in-flight map (set and cleared by the folded switch
/// program, so a switch-in looks that map up only when there is one).
pub const THREAD_DSTATE_OPEN: u32 = 1;

/// Read-only globals set by the loader before the programs are verified.
/// Thread-group id to observe; 0 = every task on the host.
pub const GLOBAL_TARGET_TGID: &str = "MDIAG_SCHED_TARGET_TGID";
/// Byte offsets in `struct task_struct`, resolved from the kernel's BTF.
pub const GLOBAL_TASK_PID_OFFSET: &str = "MDIAG_TASK_PID_OFFSET";
pub const GLOBAL_TASK_TGID_OFFSET: &str = "MDIAG_TASK_TGID_OFFSET";
pub const GLOBAL_TASK_COMM_OFFSET: &str = "MDIAG_TASK_COMM_OFFSET";
pub const GLOBAL_TASK_CPU_OFFSET: &str = "MDIAG_TASK_CPU_OFFSET";
/// Where `sched_switch`'s programs find `prev_state`: 0 = the tracepoint's
/// fourth argument (Linux 5.18+); otherwise the byte offset in `task_struct`
/// of the state field (`__state` since 5.14, `state` before) of `prev`, read
/// when the tracepoint has no such argument. Chosen by user space from BTF.
pub const GLOBAL_TASK_STATE_OFFSET: &str = "MDIAG_TASK_STATE_OFFSET";

/// Capacity of the per-thread map. A full map is counted as a drop.
pub const MAX_THREADS: u32 = 32768;

pub const TASK_COMM_LEN: usize = 16;
/// CPUs addressable by the last-wakeup array (larger CPU numbers are counted
/// as drops for wakeup-preemption detection only).
pub const MAX_CPUS: u32 = 4096;

/// The most recent wakeup of an observed thread onto a CPU (an `Array` indexed
/// by CPU number, written from whichever CPU ran the wakeup).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LastWakeup {
    pub tid: u32,
    pub _pad0: u32,
    pub ts_ns: u64,
}

/// The observed thread running on a CPU (a `PerCpuArray` of one element),
/// rewritten at every switch on that CPU; `tid` 0: the idle task or a task
/// that is not observed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Running {
    pub tid: u32,
    pub tgid: u32,
    /// When it was switched in (`bpf_ktime_get_ns`, as `last_in_ns`).
    pub since_ns: u64,
}

/// Per-thread counters, key: thread id (kernel `pid`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadSched {
    /// Thread-group id (process id) of the thread.
    pub tgid: u32,
    /// Kernel bookkeeping bits ([`THREAD_DSTATE_OPEN`]).
    pub flags: u32,
    /// Thread name, NUL padded.
    pub comm: [u8; TASK_COMM_LEN],
    /// Switches away while blocking (the kernel's `nvcsw`).
    pub voluntary: u64,
    /// Switches away while still runnable (the kernel's `nivcsw`).
    pub involuntary: u64,
    /// The subset of `involuntary` where `sched_switch`'s `preempt` flag was
    /// set: the thread was preempted while in the kernel. A user-space thread
    /// descheduled on its way back to user space (tick or wakeup preemption of
    /// busy user code) is involuntary without this flag.
    pub preempted: u64,
    /// Sum and count of run-queue delays: time from becoming runnable
    /// (wakeup, or preempted while runnable) to running on a CPU.
    pub runq_delay_ns: u64,
    pub runq_delays: u64,
    /// Total time on CPU, accounted at switch-out.
    pub oncpu_ns: u64,
    /// Involuntary switches where the next task was the one just woken on
    /// this CPU: the thread lost its CPU to a wakeup (wakeup preemption).
    pub wakeup_preempted: u64,
    /// Times the thread was moved to another CPU.
    pub migrations: u64,
    /// The other side of wakeup preemption: times this thread, just woken,
    /// took its CPU from a still-runnable task (any task, observed or not).
    pub wakeup_preempting: u64,
    /// Bookkeeping: when the thread last went on a CPU (0 = unknown).
    pub last_in_ns: u64,
    /// Start of the latest run counted in `oncpu_ns`: user space tells
    /// from it whether a run it saw in progress (`Running`) has ended in
    /// these counters.
    pub last_run_start_ns: u64,
    /// Bookkeeping: since when the thread waits in a run queue (woken, or
    /// switched out still runnable); 0 = not waiting. Kept in the thread's
    /// entry, not a map of its own: no insert or delete per switch.
    pub runnable_since_ns: u64,
}

/// Per-CPU counters (a `PerCpuArray` of one element).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SchedCpu {
    /// Every context switch on this CPU, idle task included: what the
    /// kernel adds to `ctxt` in `/proc/stat`.
    pub switches: u64,
    /// Switches of observed threads (target, or every non-idle task host-wide).
    pub voluntary: u64,
    pub involuntary: u64,
    pub preempted: u64,
    /// Wakeups of observed threads.
    pub wakeups: u64,
    /// Involuntary switches of observed threads to the task just woken on
    /// this CPU (wakeup preemption).
    pub wakeup_preemptions: u64,
    /// Migrations of observed threads to another CPU.
    pub migrations: u64,
    /// Drops: a thread could not be added to the full thread map.
    pub drop_thread_map_full: u64,
    /// Drops: a wakeup timestamp could not be stored. Always 0 since the
    /// timestamp lives in the thread's entry (a full thread map counts as
    /// `drop_thread_map_full`); kept so recordings keep their layout.
    pub drop_wakeup_map_full: u64,
    /// Drops: a `task_struct` field could not be read.
    pub drop_read_failed: u64,
    /// Run-queue delay of observed threads, log2 buckets of nanoseconds.
    pub runq_hist: [u64; LOG2_BUCKETS],
}

impl Default for SchedCpu {
    fn default() -> Self {
        Self {
            switches: 0,
            voluntary: 0,
            involuntary: 0,
            preempted: 0,
            wakeups: 0,
            wakeup_preemptions: 0,
            migrations: 0,
            drop_thread_map_full: 0,
            drop_wakeup_map_full: 0,
            drop_read_failed: 0,
            runq_hist: [0; LOG2_BUCKETS],
        }
    }
}

const _: () = assert!(core::mem::size_of::<ThreadSched>() == 8 + 16 + 12 * 8);
const _: () = assert!(core::mem::size_of::<SchedCpu>() == 10 * 8 + 8 * LOG2_BUCKETS);
const _: () = assert!(core::mem::size_of::<LastWakeup>() == 16);
const _: () = assert!(core::mem::size_of::<Running>() == 16);
const _: () = assert!(core::mem::align_of::<ThreadSched>() == 8);

#[cfg(feature = "user")]
mod user {
    // SAFETY: plain old data: #[repr(C)], only integer fields and byte arrays,
    // explicit padding, so every bit pattern is valid and there are no holes.
    unsafe impl aya::Pod for super::ThreadSched {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::SchedCpu {}
    // SAFETY: as above (u32 + explicit u32 padding + u64).
    unsafe impl aya::Pod for super::LastWakeup {}
    // SAFETY: as above (two u32 + u64, no holes).
    unsafe impl aya::Pod for super::Running {}
}

impl ThreadSched {
    /// The thread name up to its first NUL, lossily decoded.
    pub fn comm_bytes(&self) -> &[u8] {
        let end = self
            .comm
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(TASK_COMM_LEN);
        &self.comm[..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_sched_round_trips_through_bytes() {
        let mut t = ThreadSched {
            tgid: 42,
            voluntary: 7,
            involuntary: 9,
            preempted: 3,
            ..Default::default()
        };
        t.comm[..4].copy_from_slice(b"conn");
        t.runq_delay_ns = 123_456;
        t.runq_delays = 12;
        t.oncpu_ns = u64::MAX;
        // SAFETY: ThreadSched is repr(C) plain data with no padding holes.
        let bytes: [u8; core::mem::size_of::<ThreadSched>()] = unsafe { core::mem::transmute(t) };
        // SAFETY: any byte pattern is a valid ThreadSched.
        let back: ThreadSched = unsafe { core::mem::transmute(bytes) };
        assert_eq!(back, t);
        assert_eq!(back.comm_bytes(), b"conn");
        // Field offsets the kernel side relies on.
        assert_eq!(core::mem::offset_of!(ThreadSched, comm), 8);
        assert_eq!(core::mem::offset_of!(ThreadSched, voluntary), 24);
        assert_eq!(core::mem::offset_of!(ThreadSched, last_in_ns), 96);
        assert_eq!(core::mem::offset_of!(ThreadSched, last_run_start_ns), 104);
        assert_eq!(core::mem::offset_of!(ThreadSched, migrations), 80);
    }

    #[test]
    fn running_layout() {
        assert_eq!(core::mem::offset_of!(Running, tgid), 4);
        assert_eq!(core::mem::offset_of!(Running, since_ns), 8);
        assert_eq!(Running::default().tid, 0);
    }

    #[test]
    fn sched_cpu_layout() {
        assert_eq!(core::mem::offset_of!(SchedCpu, runq_hist), 80);
        let c = SchedCpu::default();
        assert_eq!(c.runq_hist.iter().sum::<u64>(), 0);
    }
}
