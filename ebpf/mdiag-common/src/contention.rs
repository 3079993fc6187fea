//! Contention family: kernel lock contention (`lock:contention_begin` /
//! `contention_end`) and off-CPU time in uninterruptible sleep (D state) with
//! the kernel stack, per observed thread, each split into "a checkpoint of the
//! target was running when the wait began" (window 1) or not (window 0).
//!
//! Off-CPU stacks: every time an observed thread leaves the CPU, its user
//! and kernel stacks and why it left (sleep, D state, preempted) are kept
//! with the time; when it comes back, the time off CPU is added to the
//! counter of (thread, stacks, why, window). User space reads one counter
//! per distinct stack and thread each slice.
//!
//! A family of its own (with its own `sched_switch` program) so that it
//! degrades alone: a kernel without the lock tracepoints still gets D-state
//! stacks, and the sched family never depends on it. The checkpoint window is
//! the WiredTiger family's `WT_CKPT_ACTIVE` counter (0 when that family is not
//! attached, so everything is then "outside").

/// Program names (functions in `mdiag-ebpf/src/contention.rs`).
pub const PROG_LOCK_BEGIN: &str = "mdiag_cont_lock_begin";
pub const PROG_LOCK_END: &str = "mdiag_cont_lock_end";
pub const PROG_SWITCH: &str = "mdiag_cont_switch";
/// `(program, tracepoint)`; each attaches on its own: the two lock programs
/// only make sense together, the switch program alone gives D-state stacks.
pub const TRACEPOINTS: [(&str, &str); 3] = [
    (PROG_SWITCH, "sched_switch"),
    (PROG_LOCK_BEGIN, "contention_begin"),
    (PROG_LOCK_END, "contention_end"),
];

pub const MAP_LOCK_INFLIGHT: &str = "CONT_LOCK_INFLIGHT";
pub const MAP_OFFCPU: &str = "CONT_OFFCPU";
pub const MAP_THREADS: &str = "CONT_THREADS";
pub const MAP_LOCK_KINDS: &str = "CONT_LOCK_KINDS";
pub const MAP_DSTACKS: &str = "CONT_DSTACKS";
pub const MAP_STACKS: &str = "CONT_STACKS";
pub const MAP_DROPS: &str = "CONT_DROPS";
pub const MAP_WAITS: &str = "CONT_WAITS";
pub const MAP_WAIT_COUNTS: &str = "CONT_WAIT_COUNTS";
pub const MAP_WAIT_STACKS: &str = "CONT_WAIT_STACKS";
/// One `u32`: take the stacks of one switch-out in this many (random), each
/// sampled wait counting for as many (1: every switch-out; 0, the default:
/// no off-CPU stacks at all). User space
/// sets it from the switch rate, so that stack walks stay near
/// [`WAIT_CAPTURES_PER_S`] whatever the load.
pub const MAP_WAIT_EVERY: &str = "CONT_WAIT_EVERY";
/// The stack captures per second the sampling aims at: each walks the user
/// and the kernel stack (5–15 µs on a busy mongod), so about 0.5 % of a CPU.
pub const WAIT_CAPTURES_PER_S: u64 = 500;
/// The most switch-outs one sample stands for.
pub const WAIT_EVERY_MAX: u32 = 4096;

/// Why a thread left the CPU ([`WaitInflight::wait`]).
pub const WAIT_SLEEP: u32 = 0;
pub const WAIT_DISK: u32 = 1;
pub const WAIT_RUNQUEUE: u32 = 2;
/// Stacks held in `CONT_WAIT_STACKS` (1016 bytes each: 8 MiB). User space
/// empties it every slice but for the stacks of waits still in progress.
pub const MAX_WAIT_STACKS: u32 = 8192;
/// Distinct (thread, stacks, why, window) counters held at once (one slice).
pub const MAX_WAIT_KEYS: u32 = 16384;
/// Threads off CPU at once.
pub const MAX_WAITS: u32 = 32768;

/// Window index: the wait began while no checkpoint of the target ran / while one ran.
pub const OUTSIDE: usize = 0;
pub const INSIDE: usize = 1;

/// Threads waiting on a lock / sleeping in D state at once.
pub const MAX_INFLIGHT: u32 = 16384;
pub const MAX_THREADS: u32 = 32768;
/// Distinct (kernel stack, window) pairs with D-state time.
pub const MAX_DSTACKS: u32 = 4096;
/// Distinct kernel stacks kept by the stack-trace map.
pub const MAX_STACKS: u32 = 2048;
/// Lock kinds are indexed by `flags & LOCK_FLAGS_MASK` (the kernel's `LCB_F_*`).
pub const LOCK_KINDS: u32 = 64;
pub const LOCK_FLAGS_MASK: u32 = 63;
/// `D_STACK_NONE`: the stack could not be taken (map full or error).
pub const D_STACK_NONE: u32 = u32::MAX;

/// `include/trace/events/lock.h`.
pub const LCB_F_SPIN: u32 = 1 << 0;
pub const LCB_F_READ: u32 = 1 << 1;
pub const LCB_F_WRITE: u32 = 1 << 2;
pub const LCB_F_RT: u32 = 1 << 3;
pub const LCB_F_PERCPU: u32 = 1 << 4;
pub const LCB_F_MUTEX: u32 = 1 << 5;

/// `task_struct.__state` bits (`include/linux/sched.h`).
pub const TASK_UNINTERRUPTIBLE: u32 = 0x2;
/// `TASK_DEAD` and the exit states: a thread leaving the CPU for good.
pub const TASK_DEAD_MASK: u32 = 0x80 | 0x10 | 0x20;
/// `TASK_IDLE` = UNINTERRUPTIBLE | NOLOAD: idle kernel waits, not D state in
/// the load-average sense; left out.
pub const TASK_NOLOAD: u32 = 0x400;

pub const TASK_COMM_LEN: usize = 16;

/// A lock wait in progress, key: thread id.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockInflight {
    pub lock: u64,
    pub ts_ns: u64,
    /// `LCB_F_*` of the latest `contention_begin` for this lock.
    pub flags: u32,
    /// [`OUTSIDE`] or [`INSIDE`] when the wait began.
    pub window: u32,
}

/// A D-state sleep in progress, key: thread id.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OffCpu {
    pub ts_ns: u64,
    /// Stack id in `CONT_STACKS`, or [`D_STACK_NONE`].
    pub stack_id: u32,
    pub window: u32,
}

/// A thread off CPU, key: thread id.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitInflight {
    pub ts_ns: u64,
    /// Ids in `CONT_WAIT_STACKS`, or `stack::NO_STACK` / `stack::LOST_STACK`
    /// / `stack::UNSAMPLED_STACK`.
    pub user_stack: u32,
    pub kernel_stack: u32,
    /// `WAIT_*`.
    pub wait: u32,
    /// [`OUTSIDE`] or [`INSIDE`] when the wait began.
    pub window: u32,
    /// 1: its stacks were sampled; 0: not (every switch-out is timed, one in
    /// `CONT_WAIT_EVERY` has its stacks taken).
    pub sampled: u32,
    pub _pad0: u32,
}

/// Key of the off-CPU counters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WaitKey {
    pub tgid: u32,
    pub tid: u32,
    pub user_stack: u32,
    pub kernel_stack: u32,
    pub wait: u32,
    pub window: u32,
}

/// Waits that ended, and their whole time: every wait counted once, exactly,
/// under its stacks when they were sampled, else under
/// `stack::UNSAMPLED_STACK`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WaitStats {
    pub waits: u64,
    pub ns: u64,
}

/// Per-thread totals, key: thread id. Arrays are indexed by window.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadContention {
    pub tgid: u32,
    pub _pad0: u32,
    pub comm: [u8; TASK_COMM_LEN],
    /// Kernel lock waits (contention_begin → end) and their time.
    pub lock_waits: [u64; 2],
    pub lock_wait_ns: [u64; 2],
    /// Sleeps in D state (switched out uninterruptible → switched in) and their time.
    pub dstate_sleeps: [u64; 2],
    pub dstate_ns: [u64; 2],
    /// Start of the latest lock wait / D-state sleep counted here: user
    /// space tells from it whether one it saw in flight has ended in these
    /// counters (a thread's waits follow each other).
    pub last_lock_start_ns: u64,
    pub last_dstate_start_ns: u64,
}

/// Per CPU and lock kind (a `PerCpuArray` indexed by `flags & LOCK_FLAGS_MASK`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockKindStats {
    pub waits: [u64; 2],
    pub wait_ns: [u64; 2],
}

/// Key of the per-CPU D-state stack totals.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DStackKey {
    pub stack_id: u32,
    pub window: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DStackStats {
    pub sleeps: u64,
    pub ns: u64,
}

/// Per-CPU drop counters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ContentionDrops {
    /// A wait could not be remembered (in-flight map full): not timed.
    pub inflight_full: u64,
    pub thread_map_full: u64,
    /// D-state sleeps without a stack (stack map full or unwinding failed).
    pub stack_failed: u64,
    /// D-state time lost because the stack-totals map was full.
    pub dstack_map_full: u64,
    /// `contention_begin` on another lock while one wait was open (the inner
    /// wait is not timed; the outer one is).
    pub nested: u64,
    /// Off-CPU stacks the kernel could not store (bucket taken, walk failed).
    pub wait_stack_lost: u64,
    /// Off-CPU waits not timed: the in-flight map was full.
    pub wait_inflight_full: u64,
    /// Off-CPU waits timed but not counted: the counter map was full.
    pub wait_map_full: u64,
    /// Switch-outs of observed threads seen by the off-CPU work (not a drop:
    /// the rate user space sets the sampling from).
    pub wait_switch_outs: u64,
    /// Of which sampled (stacks taken, wait opened).
    pub wait_sampled: u64,
}

const _: () = assert!(core::mem::size_of::<LockInflight>() == 24);
const _: () = assert!(core::mem::size_of::<OffCpu>() == 16);
const _: () = assert!(core::mem::size_of::<ThreadContention>() == 24 + 64 + 16);
const _: () = assert!(core::mem::size_of::<LockKindStats>() == 32);
const _: () = assert!(core::mem::size_of::<DStackKey>() == 8);
const _: () = assert!(core::mem::size_of::<DStackStats>() == 16);
const _: () = assert!(core::mem::size_of::<ContentionDrops>() == 80);
const _: () = assert!(core::mem::size_of::<WaitInflight>() == 32);
const _: () = assert!(core::mem::size_of::<WaitKey>() == 24);
const _: () = assert!(core::mem::size_of::<WaitStats>() == 16);

#[cfg(feature = "user")]
mod user {
    // SAFETY: #[repr(C)], integer fields and arrays only, explicit
    // padding fields, so there are no holes and every bit pattern is valid.
    unsafe impl aya::Pod for super::LockInflight {}
    // SAFETY: as said above: #[repr(C)], integers and arrays, explicit padding.
    unsafe impl aya::Pod for super::OffCpu {}
    // SAFETY: as said above: #[repr(C)], integers and arrays, explicit padding.
    unsafe impl aya::Pod for super::ThreadContention {}
    // SAFETY: as said above: #[repr(C)], integers and arrays, explicit padding.
    unsafe impl aya::Pod for super::LockKindStats {}
    // SAFETY: as said above: #[repr(C)], integers and arrays, explicit padding.
    unsafe impl aya::Pod for super::DStackKey {}
    // SAFETY: as said above: #[repr(C)], integers and arrays, explicit padding.
    unsafe impl aya::Pod for super::DStackStats {}
    // SAFETY: as said above: #[repr(C)], integers and arrays, explicit padding.
    unsafe impl aya::Pod for super::ContentionDrops {}
    // SAFETY: as said above: #[repr(C)], u64 and u32 fields, no holes.
    unsafe impl aya::Pod for super::WaitInflight {}
    // SAFETY: as said above: #[repr(C)], six u32 fields.
    unsafe impl aya::Pod for super::WaitKey {}
    // SAFETY: as said above: #[repr(C)], two u64 fields.
    unsafe impl aya::Pod for super::WaitStats {}
}

/// The lock kind of `LCB_F_*` flags, named as `perf lock contention` does.
pub fn lock_kind_name(flags: u32) -> &'static str {
    match flags & LOCK_FLAGS_MASK {
        LCB_F_SPIN => "spinlock",
        f if f == LCB_F_SPIN | LCB_F_READ => "rwlock:R",
        f if f == LCB_F_SPIN | LCB_F_WRITE => "rwlock:W",
        LCB_F_READ => "rwsem:R",
        LCB_F_WRITE => "rwsem:W",
        LCB_F_RT => "rt-mutex",
        f if f == LCB_F_RT | LCB_F_READ => "rwlock-rt:R",
        f if f == LCB_F_RT | LCB_F_WRITE => "rwlock-rt:W",
        f if f == LCB_F_PERCPU | LCB_F_READ => "pcpu-sem:R",
        f if f == LCB_F_PERCPU | LCB_F_WRITE => "pcpu-sem:W",
        LCB_F_MUTEX => "mutex",
        f if f == LCB_F_MUTEX | LCB_F_SPIN => "mutex-spin",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts() {
        assert_eq!(core::mem::offset_of!(ThreadContention, comm), 8);
        assert_eq!(core::mem::offset_of!(ThreadContention, lock_waits), 24);
        assert_eq!(core::mem::offset_of!(ThreadContention, dstate_ns), 72);
        assert_eq!(
            core::mem::offset_of!(ThreadContention, last_dstate_start_ns),
            96
        );
        assert_eq!(core::mem::offset_of!(LockInflight, flags), 16);
        assert_eq!(core::mem::offset_of!(OffCpu, window), 12);
        assert_eq!(core::mem::offset_of!(ContentionDrops, nested), 32);
        assert_eq!(core::mem::offset_of!(ContentionDrops, wait_map_full), 56);
        assert_eq!(core::mem::offset_of!(WaitInflight, window), 20);
        assert_eq!(core::mem::offset_of!(WaitInflight, sampled), 24);
        assert_eq!(core::mem::offset_of!(ContentionDrops, wait_sampled), 72);
        assert_eq!(core::mem::offset_of!(WaitKey, wait), 16);
        let k = WaitKey {
            tgid: 1,
            tid: 2,
            user_stack: 3,
            kernel_stack: 4,
            wait: WAIT_RUNQUEUE,
            window: INSIDE as u32,
        };
        // SAFETY: plain data without padding holes.
        let bytes: [u8; 24] = unsafe { core::mem::transmute(k) };
        // SAFETY: any bit pattern is a valid WaitKey.
        let back: WaitKey = unsafe { crate::read_plain(&bytes) }.unwrap();
        assert_eq!(back, k);
    }

    #[test]
    fn thread_totals_round_trip_through_bytes() {
        let t = ThreadContention {
            tgid: 42,
            _pad0: 0,
            comm: *b"conn12\0\0\0\0\0\0\0\0\0\0",
            lock_waits: [1, 2],
            lock_wait_ns: [3, 4],
            dstate_sleeps: [5, 6],
            dstate_ns: [7, 8],
            last_lock_start_ns: 9,
            last_dstate_start_ns: 10,
        };
        // SAFETY: plain data without padding holes.
        let bytes: [u8; 104] = unsafe { core::mem::transmute(t) };
        // SAFETY: any bit pattern is a valid ThreadContention.
        let back: ThreadContention = unsafe { crate::read_plain(&bytes) }.unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn lock_kinds_are_named_as_perf_names_them() {
        assert_eq!(lock_kind_name(LCB_F_SPIN), "spinlock");
        assert_eq!(lock_kind_name(LCB_F_WRITE), "rwsem:W");
        assert_eq!(lock_kind_name(LCB_F_READ), "rwsem:R");
        assert_eq!(lock_kind_name(LCB_F_MUTEX), "mutex");
        assert_eq!(lock_kind_name(LCB_F_MUTEX | LCB_F_SPIN), "mutex-spin");
        assert_eq!(lock_kind_name(LCB_F_PERCPU | LCB_F_WRITE), "pcpu-sem:W");
        assert_eq!(lock_kind_name(LCB_F_SPIN | LCB_F_READ), "rwlock:R");
        assert_eq!(lock_kind_name(LCB_F_RT), "rt-mutex");
        assert_eq!(lock_kind_name(LCB_F_PERCPU), "other");
        // Bits above the mask are ignored.
        assert_eq!(lock_kind_name(LCB_F_MUTEX | 0x100), "mutex");
    }
}
