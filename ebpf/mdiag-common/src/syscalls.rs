//! Syscalls family: memory syscalls (mmap, munmap, madvise, brk, mremap),
//! futex waits and wakes, and rseq registrations of the observed threads.
//!
//! One fentry/fexit pair per watched syscall ([`WATCHED_SYSCALLS`]) on the
//! kernel function it enters through, so no other syscall runs a program;
//! where the kernel has no BPF trampolines, one pair of BTF tracepoints
//! (`sys_enter`/`sys_exit`) serves them all instead: those programs run on
//! every syscall of the host, drop every task that is not observed (one
//! compare), then every syscall that is not watched (a few compares against
//! numbers user space passes in for the running architecture). Aggregation
//! is per CPU and per watched syscall; rseq registrations, rare (one per
//! thread), are sent as events through a ring buffer.

use crate::hist::LOG2_BUCKETS;

pub const PROG_SYS_ENTER: &str = "mdiag_sys_enter";
pub const PROG_SYS_EXIT: &str = "mdiag_sys_exit";
pub const TRACEPOINTS: [(&str, &str); 2] =
    [(PROG_SYS_ENTER, "sys_enter"), (PROG_SYS_EXIT, "sys_exit")];

/// A watched syscall and its fentry/fexit programs (futex's pair serves
/// both futex_wait and futex_wake: the operation decides at entry).
#[derive(Debug, PartialEq, Eq)]
pub struct WatchedSyscall {
    /// Its name in the kernel's syscall table.
    pub name: &'static str,
    /// The fentry program on the function it enters through.
    pub entry: &'static str,
    /// The fexit program on the same function.
    pub exit: &'static str,
}

const fn watched(name: &'static str, entry: &'static str, exit: &'static str) -> WatchedSyscall {
    WatchedSyscall { name, entry, exit }
}

/// Every watched syscall with its programs. The names stay distinct within
/// the 15 characters the kernel keeps of a program's name.
pub const WATCHED_SYSCALLS: [WatchedSyscall; 8] = [
    watched("mmap", "mdiag_fe_mmap", "mdiag_fx_mmap"),
    watched("munmap", "mdiag_fe_munmap", "mdiag_fx_munmap"),
    watched("madvise", "mdiag_fe_madvise", "mdiag_fx_madvise"),
    watched("brk", "mdiag_fe_brk", "mdiag_fx_brk"),
    watched("mremap", "mdiag_fe_mremap", "mdiag_fx_mremap"),
    watched("futex", "mdiag_fe_futex", "mdiag_fx_futex"),
    watched("futex_waitv", "mdiag_fe_waitv", "mdiag_fx_waitv"),
    watched("rseq", "mdiag_fe_rseq", "mdiag_fx_rseq"),
];

pub const MAP_INFLIGHT: &str = "SYS_INFLIGHT";
pub const MAP_STATS: &str = "SYS_STATS";
pub const MAP_THREADS: &str = "SYS_THREADS";
pub const MAP_RSEQ_EVENTS: &str = "SYS_RSEQ_EVENTS";
pub const MAP_DROPS: &str = "SYS_DROPS";

/// Syscall number of each slot on this architecture (`NO_SYSCALL` = absent).
pub const GLOBAL_SYSCALL_NRS: &str = "MDIAG_SYSCALL_NRS";
/// Byte offsets in `struct pt_regs` of the first four syscall arguments and
/// of the user instruction pointer, resolved from BTF per architecture.
pub const GLOBAL_REGS_ARG_OFFSETS: &str = "MDIAG_REGS_ARG_OFFSETS";
pub const GLOBAL_REGS_IP_OFFSET: &str = "MDIAG_REGS_IP_OFFSET";
pub const GLOBAL_REGS_SP_OFFSET: &str = "MDIAG_REGS_SP_OFFSET";
pub const NO_SYSCALL: u64 = u64::MAX;

/// Watched syscalls, by slot. `futex` is split by operation: waits (the
/// time a thread is blocked on a lock or condition) and everything else.
pub const SLOT_MMAP: usize = 0;
pub const SLOT_MUNMAP: usize = 1;
pub const SLOT_MADVISE: usize = 2;
pub const SLOT_BRK: usize = 3;
pub const SLOT_MREMAP: usize = 4;
pub const SLOT_FUTEX_WAIT: usize = 5;
pub const SLOT_FUTEX_WAKE: usize = 6;
pub const SLOT_FUTEX_WAITV: usize = 7;
pub const SLOT_RSEQ: usize = 8;
pub const NR_SLOTS: usize = 9;
/// Slot names, as recorded.
pub const SLOT_NAMES: [&str; NR_SLOTS] = [
    "mmap",
    "munmap",
    "madvise",
    "brk",
    "mremap",
    "futex_wait",
    "futex_wake",
    "futex_waitv",
    "rseq",
];
/// Length of the syscall-number array: one per slot (futex_wake's entry is
/// `NO_SYSCALL`: it shares futex's number with futex_wait; the operation decides).
pub const NR_SYSCALL_NRS: usize = NR_SLOTS;

/// `futex` operations that block (after masking FUTEX_PRIVATE_FLAG and
/// FUTEX_CLOCK_REALTIME): WAIT, LOCK_PI, WAIT_BITSET, WAIT_REQUEUE_PI, LOCK_PI2.
pub const FUTEX_CMD_MASK: u64 = !(128 | 256);
pub const FUTEX_WAIT_OPS: [u64; 5] = [0, 6, 9, 11, 13];

/// Per-thread entries in flight (threads inside a watched syscall).
pub const MAX_INFLIGHT: u32 = 16384;
/// Threads with futex accounting.
pub const MAX_THREADS: u32 = 32768;
/// Ring buffer for rseq events, bytes (a power of two, multiple of the page size).
pub const RSEQ_RING_BYTES: u32 = 64 * 1024;

/// A watched syscall in progress, key: thread id.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Inflight {
    pub ts_ns: u64,
    pub slot: u32,
    /// 1 when a checkpoint of the target was running at entry (the
    /// WiredTiger family's counter), else 0.
    pub in_checkpoint: u32,
    pub args: [u64; 4],
    /// User instruction pointer at entry: right after the syscall instruction.
    pub ip: u64,
    /// The user stack word at the stack pointer at entry (see `RseqEvent`).
    pub sp_word: u64,
}

/// s390x `mmap` (number 90, the kernel's `old_mmap`): its one argument
/// points to this block in user memory holding the six arguments of mmap(2)
/// (`struct mmap_arg_struct`, arch/s390/kernel/sys_s390.c, all `unsigned
/// long`). The kernel side reads it at entry so that `Inflight::args` holds
/// mmap(2)'s arguments on every architecture.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MmapArgStruct {
    pub addr: u64,
    pub len: u64,
    pub prot: u64,
    pub flags: u64,
    pub fd: u64,
    pub offset: u64,
}

impl MmapArgStruct {
    /// The first four arguments, as `Inflight::args` holds them.
    #[inline(always)]
    pub fn args(&self) -> [u64; 4] {
        [self.addr, self.len, self.prot, self.flags]
    }
}

/// Per CPU and slot (a `PerCpuArray` indexed by slot).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyscallStats {
    pub count: u64,
    /// Calls that returned an error (-4095..-1).
    pub errors: u64,
    pub time_ns: u64,
    /// Length argument summed (mmap, munmap, madvise, mremap new size).
    pub bytes: u64,
    /// Latency, log2 buckets of nanoseconds.
    pub hist: [u64; LOG2_BUCKETS],
}

impl Default for SyscallStats {
    fn default() -> Self {
        Self {
            count: 0,
            errors: 0,
            time_ns: 0,
            bytes: 0,
            hist: [0; LOG2_BUCKETS],
        }
    }
}

/// Per-thread futex accounting, key: thread id.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadSyscalls {
    pub tgid: u32,
    pub _pad0: u32,
    pub futex_waits: u64,
    pub futex_wait_ns: u64,
    /// Memory syscalls (mmap family) and their time.
    pub mem_calls: u64,
    pub mem_ns: u64,
    /// The part of `futex_waits` / `futex_wait_ns` whose wait began while a
    /// checkpoint of the target was running.
    pub futex_waits_in_checkpoint: u64,
    pub futex_wait_ns_in_checkpoint: u64,
    /// Start (`Inflight::ts_ns`) of the latest futex wait counted here:
    /// user space tells from it whether a wait it saw in flight has ended
    /// in these counters (the thread's waits follow each other).
    pub last_futex_start_ns: u64,
}

/// One rseq(2) call, sent through the ring buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RseqEvent {
    pub tid: u32,
    pub tgid: u32,
    /// Return value (0, -EBUSY, -EINVAL, -EPERM, ...).
    pub ret: i64,
    /// rseq(struct rseq *rseq, u32 rseq_len, int flags, u32 sig).
    pub area: u64,
    pub len: u32,
    pub flags: u32,
    pub sig: u32,
    pub _pad0: u32,
    /// Where the call came from (user instruction pointer after `syscall`).
    pub caller_ip: u64,
    pub ts_ns: u64,
    /// The word at the user stack pointer at entry: the return address when
    /// the call went through a leaf wrapper such as glibc's `syscall()`, so
    /// the real caller can be named (user space decides whether it is one).
    pub sp_word: u64,
}

/// Per-CPU drop counters.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyscallDrops {
    /// An entry could not be remembered (in-flight map full): call not timed.
    pub inflight_full: u64,
    pub thread_map_full: u64,
    /// rseq events lost because the ring buffer was full.
    pub rseq_ring_full: u64,
}

const _: () = assert!(core::mem::size_of::<Inflight>() == 8 + 8 + 32 + 16);
const _: () = assert!(core::mem::size_of::<SyscallStats>() == 32 + 8 * LOG2_BUCKETS);
const _: () = assert!(core::mem::size_of::<ThreadSyscalls>() == 64);
const _: () = assert!(core::mem::size_of::<RseqEvent>() == 64);
const _: () = assert!(core::mem::size_of::<SyscallDrops>() == 24);
const _: () = assert!(core::mem::size_of::<MmapArgStruct>() == 48);

#[cfg(feature = "user")]
mod user {
    // SAFETY: #[repr(C)], integer fields and arrays only, explicit
    // padding fields, so there are no holes and every bit pattern is valid.
    unsafe impl aya::Pod for super::Inflight {}
    // SAFETY: as said above: #[repr(C)], integers and arrays, explicit padding.
    unsafe impl aya::Pod for super::SyscallStats {}
    // SAFETY: as said above: #[repr(C)], integers and arrays, explicit padding.
    unsafe impl aya::Pod for super::ThreadSyscalls {}
    // SAFETY: as said above: #[repr(C)], integers and arrays, explicit padding.
    unsafe impl aya::Pod for super::RseqEvent {}
    // SAFETY: as said above: #[repr(C)], integers and arrays, explicit padding.
    unsafe impl aya::Pod for super::SyscallDrops {}
}

impl RseqEvent {
    /// Decodes an event from ring-buffer bytes (`None` when too short).
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        // SAFETY: RseqEvent is plain #[repr(C)] integer data, valid for any bit pattern.
        unsafe { crate::read_plain(bytes) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rseq_event_round_trips_through_bytes() {
        let e = RseqEvent {
            tid: 7,
            tgid: 6,
            ret: -22,
            area: 0x7f00_0000_1000,
            len: 32,
            flags: 0,
            sig: 0x53053053,
            _pad0: 0,
            caller_ip: 0x7f00_0010_0000,
            ts_ns: 99,
            sp_word: 0x5555_0000_1234,
        };
        // SAFETY: plain data without padding holes.
        let bytes: [u8; 64] = unsafe { core::mem::transmute(e) };
        assert_eq!(RseqEvent::from_bytes(&bytes), Some(e));
        assert_eq!(RseqEvent::from_bytes(&bytes[..63]), None);
        assert_eq!(core::mem::offset_of!(RseqEvent, caller_ip), 40);
    }

    #[test]
    fn layouts() {
        assert_eq!(core::mem::offset_of!(Inflight, args), 16);
        assert_eq!(core::mem::offset_of!(SyscallStats, hist), 32);
        assert_eq!(
            core::mem::offset_of!(ThreadSyscalls, last_futex_start_ns),
            56
        );
        assert_eq!(SLOT_NAMES[SLOT_RSEQ], "rseq");
        assert_eq!(FUTEX_CMD_MASK & (128 | 9), 9);
        // The kernel's copy_from_user of struct mmap_arg_struct: the length
        // is the second unsigned long.
        assert_eq!(core::mem::offset_of!(MmapArgStruct, len), 8);
        assert_eq!(core::mem::offset_of!(MmapArgStruct, offset), 40);
    }

    /// One pair per syscall that has a number of its own (futex_wake shares
    /// futex's), with names the kernel keeps apart (15 characters).
    #[test]
    fn watched_syscalls_cover_the_numbered_slots() {
        for (slot, name) in SLOT_NAMES.iter().enumerate() {
            let syscall = match slot {
                SLOT_FUTEX_WAKE => continue,
                SLOT_FUTEX_WAIT => "futex",
                _ => name,
            };
            assert_eq!(
                WATCHED_SYSCALLS
                    .iter()
                    .filter(|w| w.name == syscall)
                    .count(),
                1,
                "{syscall}"
            );
        }
        assert_eq!(WATCHED_SYSCALLS.len(), NR_SLOTS - 1);
        let kept = |p: &'static str| &p[..p.len().min(15)];
        for (i, a) in WATCHED_SYSCALLS.iter().enumerate() {
            assert_ne!(kept(a.entry), kept(a.exit));
            for b in &WATCHED_SYSCALLS[i + 1..] {
                for (x, y) in [
                    (a.entry, b.entry),
                    (a.exit, b.exit),
                    (a.entry, b.exit),
                    (a.exit, b.entry),
                ] {
                    assert_ne!(kept(x), kept(y));
                }
            }
        }
    }

    #[test]
    fn mmap_arg_struct_gives_mmap_args_in_order() {
        let a = MmapArgStruct {
            addr: 0x7f00_0000_0000,
            len: 1 << 21,
            prot: 3,
            flags: 0x22,
            fd: u64::MAX,
            offset: 0,
        };
        // args[1] is the length that the exit program sums for SLOT_MMAP.
        assert_eq!(a.args(), [0x7f00_0000_0000, 1 << 21, 3, 0x22]);
    }
}
