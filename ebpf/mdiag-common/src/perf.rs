//! Perf family: where the observed tasks spend CPU time, by sampling.
//!
//! A `perf_event` program runs on a software cpu-clock event at
//! [`DEFAULT_SAMPLE_HZ`] (or the rate the user chose, at most
//! [`MAX_SAMPLE_HZ`]) on every online CPU (one event per CPU, all tasks). For
//! a sample of an observed task it counts one hit under (tgid, user
//! instruction pointer) in a bounded hash map; user space symbolizes the
//! addresses: the leaf function alone measures the share of CPU time spent
//! *in* allocator code.
//!
//! Each sample of an observed task also takes its call stacks: the user stack
//! (frame pointers, `bpf_get_stackid` with `BPF_F_USER_STACK`) and, when it
//! was interrupted in kernel mode, the kernel stack. Stacks are stored once in
//! a stack-trace map and counted per (tgid, tid, user stack, kernel stack) in
//! a second hash map: the kernel aggregates, user space reads one count per
//! distinct stack and thread each slice.
//!
//! A sample taken while the task ran in kernel mode (syscall, page fault,
//! interrupt) is counted under ip [`KERNEL_IP`] (0): the interrupted kernel
//! address is not of interest here, and the user address where the task
//! entered the kernel would attribute syscall time to its caller.

pub const PROG_PERF_SAMPLE: &str = "mdiag_perf_sample";

pub const MAP_SAMPLES: &str = "PERF_SAMPLES";
pub const MAP_CPU: &str = "PERF_CPU";
pub const MAP_STACKS: &str = "PERF_STACKS";
pub const MAP_STACK_COUNTS: &str = "PERF_STACK_COUNTS";
/// One `u32` of `STACKS_*` bits: which stacks samples take (user space sets
/// it; 0, the default: none).
pub const MAP_STACKS_ON: &str = "PERF_STACKS_ON";
/// `PERF_STACKS_ON` bit: the user stack.
pub const STACKS_USER: u32 = 1;
/// `PERF_STACKS_ON` bit: the kernel stack (of a sample in kernel mode).
pub const STACKS_KERNEL: u32 = 2;

/// Samples per second and CPU by default (99, not 100, so sampling does not
/// run in lockstep with 10 ms timers of the workload).
pub const DEFAULT_SAMPLE_HZ: u64 = 99;
/// The highest rate a user may choose: each sample of the target walks its
/// user and kernel stacks (a few µs), so 1000 Hz costs a busy CPU about ten
/// times the default; perf's own default (4000 Hz) is meant for short runs.
pub const MAX_SAMPLE_HZ: u64 = 1000;
/// Distinct (tgid, ip) keys held at once. User space drains the map every
/// slice, so this bounds one slice: 65536 keys × 24 bytes ≈ 1.5 MiB.
pub const MAX_SAMPLE_KEYS: u32 = 65536;
/// Stacks held at once in the stack-trace map (each up to 127 frames,
/// 1016 bytes: 8 MiB). User space empties it every slice; a stack whose hash
/// bucket is taken by another one in the same slice is counted without its
/// stack ([`NO_STACK`], `PerfCpu::stack_lost`).
pub const MAX_STACKS: u32 = 8192;
/// Distinct (tgid, tid, user stack, kernel stack) counters held at once.
pub const MAX_STACK_KEYS: u32 = 16384;
pub use crate::stack::{BPF_F_USER_STACK, EFAULT, LOST_STACK, NO_STACK};
/// The ip under which kernel-mode samples are counted.
pub const KERNEL_IP: u64 = 0;

/// s390x: the PSW mask's problem-state bit (`PSW_MASK_PSTATE` in the
/// kernel's arch/s390/include/asm/ptrace.h, 64-bit value), set while the CPU
/// runs user code.
pub const S390X_PSW_MASK_PSTATE: u64 = 0x0001_0000_0000_0000;
/// aarch64: `PSR_MODE_MASK` of `pstate`; the mode is EL0t (0) in user code.
pub const AARCH64_PSR_MODE_MASK: u64 = 0xf;

/// The user ip of a sample from x86_64 registers: `rip` when the code
/// segment selector's privilege level (RPL, the low two bits) is ring 3.
#[inline(always)]
pub fn x86_64_user_ip(cs: u64, rip: u64) -> u64 {
    if cs & 3 == 3 { rip } else { KERNEL_IP }
}

/// The user ip of a sample from aarch64 registers: `pc` when `pstate`'s
/// mode is EL0t.
#[inline(always)]
pub fn aarch64_user_ip(pstate: u64, pc: u64) -> u64 {
    if pstate & AARCH64_PSR_MODE_MASK == 0 {
        pc
    } else {
        KERNEL_IP
    }
}

/// The user ip of a sample from the s390x PSW (`psw.mask`, `psw.addr`):
/// the address when the problem-state bit is set (the kernel's `user_mode`).
#[inline(always)]
pub fn s390x_user_ip(psw_mask: u64, psw_addr: u64) -> u64 {
    if psw_mask & S390X_PSW_MASK_PSTATE != 0 {
        psw_addr
    } else {
        KERNEL_IP
    }
}

/// Key of the sample map: one process and one user instruction pointer.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SampleKey {
    pub tgid: u32,
    pub _pad0: u32,
    /// User instruction pointer, or [`KERNEL_IP`].
    pub ip: u64,
}

/// Per-CPU counters (cumulative, never reset).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PerfCpu {
    /// Every sample taken on this CPU.
    pub samples: u64,
    /// Samples of the idle task (pid 0).
    pub idle: u64,
    /// Samples of observed tasks (counted in the map, or dropped).
    pub observed: u64,
    /// Observed samples taken in kernel mode (counted under [`KERNEL_IP`]).
    pub kernel: u64,
    /// Observed samples lost because the map was full.
    pub drops: u64,
    /// Observed samples counted without their user or kernel stack (hash
    /// bucket taken by another stack, or the unwinder failed).
    pub stack_lost: u64,
    /// Observed samples whose stack counter could not be created (map full).
    pub stack_drops: u64,
}

/// Key of the stack counters: one thread and one pair of stacks.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StackKey {
    pub tgid: u32,
    pub tid: u32,
    /// Id in the stack map of the user stack, [`NO_STACK`] or [`LOST_STACK`].
    pub user_stack: u32,
    /// Id of the kernel stack, [`NO_STACK`] (sample in user mode) or
    /// [`LOST_STACK`].
    pub kernel_stack: u32,
}

const _: () = assert!(core::mem::size_of::<SampleKey>() == 16);
const _: () = assert!(core::mem::size_of::<PerfCpu>() == 56);
const _: () = assert!(core::mem::size_of::<StackKey>() == 16);

#[cfg(feature = "user")]
mod user {
    // SAFETY: #[repr(C)], integer fields only, explicit padding fields,
    // so there are no holes and every bit pattern is valid.
    unsafe impl aya::Pod for super::SampleKey {}
    // SAFETY: as said above: #[repr(C)], integers and arrays, explicit padding.
    unsafe impl aya::Pod for super::PerfCpu {}
    // SAFETY: #[repr(C)], four u32 fields, no padding.
    unsafe impl aya::Pod for super::StackKey {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_or_kernel_from_registers() {
        let ip = 0x7f00_0000_1234;
        // x86_64: __USER_CS is 0x33 (RPL 3), __KERNEL_CS 0x10 (RPL 0).
        assert_eq!(x86_64_user_ip(0x33, ip), ip);
        assert_eq!(x86_64_user_ip(0x10, ip), KERNEL_IP);
        // aarch64: PSR_MODE_EL0t 0x0 (with flags above the mode bits), EL1h 0x5.
        assert_eq!(aarch64_user_ip(0x6000_0000, ip), ip);
        assert_eq!(aarch64_user_ip(0x6000_0005, ip), KERNEL_IP);
        // s390x: a user PSW (DAT, I/O, EXT, machine check, problem state,
        // primary space, 64-bit addressing) and a kernel one (the same
        // without problem state, home space).
        assert_eq!(s390x_user_ip(0x0705_0001_8000_0000, ip), ip);
        assert_eq!(s390x_user_ip(0x0704_c001_8000_0000, ip), KERNEL_IP);
        // The problem-state bit alone decides, not the other mask bits.
        assert_eq!(s390x_user_ip(S390X_PSW_MASK_PSTATE, ip), ip);
        assert_eq!(s390x_user_ip(!S390X_PSW_MASK_PSTATE, ip), KERNEL_IP);
    }

    #[test]
    fn layouts() {
        assert_eq!(core::mem::offset_of!(SampleKey, ip), 8);
        assert_eq!(core::mem::offset_of!(PerfCpu, drops), 32);
        assert_eq!(core::mem::offset_of!(PerfCpu, stack_drops), 48);
        assert_eq!(core::mem::offset_of!(StackKey, kernel_stack), 12);
        // SAFETY: plain data without padding holes.
        let bytes: [u8; 16] = unsafe {
            core::mem::transmute(StackKey {
                tgid: 1,
                tid: 2,
                user_stack: 3,
                kernel_stack: NO_STACK,
            })
        };
        assert_eq!(&bytes[4..8], &2u32.to_ne_bytes());
        assert_eq!(&bytes[12..], &u32::MAX.to_ne_bytes());
        // SAFETY: plain data without padding holes.
        let bytes: [u8; 16] = unsafe {
            core::mem::transmute(SampleKey {
                tgid: 7,
                _pad0: 0,
                ip: 0x7f00_0000_1234,
            })
        };
        assert_eq!(&bytes[..4], &7u32.to_ne_bytes());
        assert_eq!(&bytes[8..], &0x7f00_0000_1234u64.to_ne_bytes());
    }
}
