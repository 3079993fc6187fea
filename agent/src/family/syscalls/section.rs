//! Recording types of the syscalls family: memory syscalls and futex waits
//! per slice and per thread, and every rseq registration with its caller.
//!
//! The family's part of the recording format; `recording::model`
//! re-exports these types so `recording::model::X` still names them.

use serde::{Deserialize, Serialize};

use crate::kit::family::Section;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyscallsSlice {
    /// Watched syscalls made in this slice by observed threads.
    pub calls: Vec<SyscallCalls>,
    /// Observed threads that waited on futexes or made memory syscalls.
    pub threads: Vec<ThreadSyscallSlice>,
    /// rseq(2) calls received in this slice, in arrival order.
    pub rseq: Vec<RseqCall>,
    pub drops: SyscallDropsSlice,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyscallCalls {
    /// "mmap", "munmap", "madvise", "brk", "mremap", "futex_wait",
    /// "futex_wake", "futex_waitv", "rseq".
    pub name: String,
    pub count: u64,
    /// Calls that returned an error.
    pub errors: u64,
    /// Time inside the syscall (entry to exit), nanoseconds.
    pub time_ns: u64,
    /// Length arguments summed (mmap, munmap, madvise; mremap's new size).
    pub bytes: u64,
    /// Latency, log2 buckets of nanoseconds (as `runq_hist_log2_ns`).
    pub hist_log2_ns: Vec<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThreadSyscallSlice {
    pub tid: u32,
    pub tgid: u32,
    /// Blocking futex operations (wait, wait_bitset, lock_pi, futex_waitv...)
    /// that ended in this slice, and the time blocked in them *during this
    /// slice*: a wait is split over the slices it overlaps, so this never
    /// exceeds the slice's duration (a thread blocked since before the slice
    /// has time here and a count of 0).
    pub futex_waits: u64,
    pub futex_wait_ns: u64,
    /// Memory syscalls (mmap, munmap, madvise, brk, mremap) and their time.
    pub mem_calls: u64,
    pub mem_ns: u64,
    /// The part of `futex_waits` / `futex_wait_ns` whose wait began while a
    /// checkpoint of the target was running (0 without WiredTiger).
    #[serde(default)]
    pub futex_waits_in_checkpoint: u64,
    #[serde(default)]
    pub futex_wait_ns_in_checkpoint: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RseqCall {
    pub tid: u32,
    pub tgid: u32,
    /// 0 on success; -22 (EINVAL): another area is already registered for
    /// the thread (e.g. glibc's, when TCMalloc tries to register its own) or
    /// bad arguments; -16 (EBUSY): the same area registered twice; -1 (EPERM):
    /// signature mismatch.
    pub ret: i64,
    /// The rseq area address, its length, flags and signature as passed.
    pub area: u64,
    pub len: u32,
    pub flags: u32,
    pub sig: u32,
    /// User address right after the syscall instruction.
    pub caller_ip: u64,
    /// The mapped object containing `caller_ip` (e.g. .../libc.so.6), when known.
    pub caller_object: Option<String>,
    /// True when the call went through glibc's `syscall()` wrapper (as
    /// TCMalloc's registration does): then `origin_object` is the wrapper's caller.
    #[serde(default)]
    pub via_syscall_wrapper: bool,
    /// The object that made the call: `caller_object`, or for a call through
    /// the `syscall()` wrapper, the object the wrapper returns to. The wrapper
    /// check is made for the target process; in a host-wide recording, other
    /// processes' callers are resolved for a few processes per 50 ms (null
    /// beyond that), so bursts of new processes never stall the recording.
    #[serde(default)]
    pub origin_object: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyscallDropsSlice {
    /// Calls that could not be timed (in-flight map full).
    pub inflight_full: u64,
    pub thread_map_full: u64,
    /// rseq events lost (ring buffer full).
    pub rseq_ring_full: u64,
}

impl Section for SyscallsSlice {
    fn drops_total(&self) -> u64 {
        let d = &self.drops;
        d.inflight_full + d.thread_map_full + d.rseq_ring_full
    }
}
