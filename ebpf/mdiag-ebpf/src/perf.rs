//! Perf family (kernel side): CPU-time sampling of observed tasks.
//!
//! One program on a software cpu-clock event per CPU (99 Hz by
//! default; the user may choose up to `MAX_SAMPLE_HZ`). It counts every
//! sample per CPU, drops the idle task and unobserved tasks with a compare,
//! and adds one to the (tgid, user ip) counter of the rest. The user ip comes
//! straight from the interrupted registers in the context (no stack walk, no
//! helper); a sample taken in kernel mode is counted under `KERNEL_IP`.
//! Then the sample's stacks (user, and kernel when in kernel mode) go to the
//! stack map and one is added to the (tgid, tid, stacks) counter: two stack
//! walks per sample, 99 times a second per CPU by default, only for observed tasks.

use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid,
    macros::{map, perf_event},
    maps::{Array, HashMap, PerCpuArray, StackTrace},
    programs::{PerfEventContext, tracing::StackIdContext},
};
use mdiag_common::perf::{
    BPF_F_USER_STACK, EFAULT, KERNEL_IP, LOST_STACK, MAX_SAMPLE_KEYS, MAX_STACK_KEYS, MAX_STACKS,
    NO_STACK, PerfCpu, STACKS_KERNEL, STACKS_USER, SampleKey, StackKey,
};

use crate::sched::observed;

#[map]
static PERF_SAMPLES: HashMap<SampleKey, u64> = HashMap::with_max_entries(MAX_SAMPLE_KEYS, 0);
#[map]
static PERF_CPU: PerCpuArray<PerfCpu> = PerCpuArray::with_max_entries(1, 0);
#[map]
static PERF_STACKS: StackTrace = StackTrace::with_max_entries(MAX_STACKS, 0);
#[map]
static PERF_STACK_COUNTS: HashMap<StackKey, u64> = HashMap::with_max_entries(MAX_STACK_KEYS, 0);
#[map]
static PERF_STACKS_ON: Array<u32> = Array::with_max_entries(1, 0);

const BPF_NOEXIST: u64 = 1;

/// Adds one to a shared map value. Not atomic (the BPF target has no atomic
/// read-modify-write in `core`): two CPUs sampling the same address of the
/// same process in the same instant may lose one count, a negligible error
/// at sampling rates of hundreds per second and CPU.
#[inline(always)]
fn add_one(c: *mut u64) {
    // SAFETY: `c` is a valid, aligned map value pointer.
    unsafe { *c += 1 };
}

/// The user instruction pointer of the interrupted task, or `KERNEL_IP` when
/// it was interrupted in kernel mode. Reads the context directly (the
/// verifier rewrites these loads to the sampled registers); the user-or-kernel
/// decision is the pure helper of `mdiag_common::perf` for each architecture.
#[allow(unexpected_cfgs, reason = "bpf_target_arch is set by the eBPF build")]
#[inline(always)]
fn user_ip(ctx: &PerfEventContext) -> u64 {
    #[cfg(bpf_target_arch = "x86_64")]
    {
        // SAFETY: ctx access at constant offsets inside bpf_user_pt_regs_t.
        let (cs, ip) = unsafe {
            let regs = &raw const (*ctx.ctx).regs;
            (
                core::ptr::read_volatile(&raw const (*regs).cs),
                core::ptr::read_volatile(&raw const (*regs).rip),
            )
        };
        mdiag_common::perf::x86_64_user_ip(cs, ip)
    }
    #[cfg(bpf_target_arch = "aarch64")]
    {
        // SAFETY: ctx access at constant offsets inside bpf_user_pt_regs_t.
        let (pstate, pc) = unsafe {
            let regs = &raw const (*ctx.ctx).regs;
            (
                core::ptr::read_volatile(&raw const (*regs).pstate),
                core::ptr::read_volatile(&raw const (*regs).pc),
            )
        };
        mdiag_common::perf::aarch64_user_ip(pstate, pc)
    }
    #[cfg(bpf_target_arch = "s390x")]
    {
        // bpf_user_pt_regs_t is user_pt_regs { args[1], psw { mask, addr },
        // gprs[16] }: the PSW of the interrupted code at offsets 8 and 16.
        // SAFETY: ctx access at constant offsets inside bpf_user_pt_regs_t.
        let (mask, addr) = unsafe {
            let psw = &raw const (*ctx.ctx).regs.psw;
            (
                core::ptr::read_volatile(&raw const (*psw).mask),
                core::ptr::read_volatile(&raw const (*psw).addr),
            )
        };
        mdiag_common::perf::s390x_user_ip(mask, addr)
    }
    #[cfg(not(any(
        bpf_target_arch = "x86_64",
        bpf_target_arch = "aarch64",
        bpf_target_arch = "s390x"
    )))]
    {
        // Other architectures: no user ip yet; samples still count per task.
        let _ = ctx;
        KERNEL_IP
    }
}

#[perf_event]
pub fn mdiag_perf_sample(ctx: PerfEventContext) -> u32 {
    let Some(cpu) = PERF_CPU.get_ptr_mut(0) else {
        return 0;
    };
    // SAFETY: per-CPU slot; this program does not nest on one CPU and is the
    // only one using the map.
    let cpu = unsafe { &mut *cpu };
    cpu.samples += 1;
    let pid_tgid = bpf_get_current_pid_tgid();
    if pid_tgid as u32 == 0 {
        cpu.idle += 1;
        return 0;
    }
    let tgid = (pid_tgid >> 32) as u32;
    if !observed(tgid) {
        return 0;
    }
    cpu.observed += 1;
    let ip = user_ip(&ctx);
    if ip == KERNEL_IP {
        cpu.kernel += 1;
    }
    let key = SampleKey { tgid, _pad0: 0, ip };
    if !count(&PERF_SAMPLES, &key) {
        cpu.drops += 1;
    }
    let on = PERF_STACKS_ON.get(0).copied().unwrap_or(0);
    if on == 0 {
        return 0;
    }
    let key = StackKey {
        tgid,
        tid: pid_tgid as u32,
        user_stack: if on & STACKS_USER != 0 {
            stack_id(&ctx, BPF_F_USER_STACK, cpu)
        } else {
            NO_STACK
        },
        kernel_stack: if ip == KERNEL_IP && on & STACKS_KERNEL != 0 {
            stack_id(&ctx, 0, cpu)
        } else {
            NO_STACK
        },
    };
    if !count(&PERF_STACK_COUNTS, &key) {
        cpu.stack_drops += 1;
    }
    0
}

/// Adds one to `key`'s counter, creating it; false when the map is full.
#[inline(always)]
fn count<K>(map: &HashMap<K, u64>, key: &K) -> bool {
    if let Some(c) = map.get_ptr_mut(key) {
        add_one(c);
        return true;
    }
    if map.insert(key, &1, BPF_NOEXIST).is_ok() {
        return true;
    }
    // Another CPU created it meanwhile, or the map is full.
    match map.get_ptr_mut(key) {
        Some(c) => {
            add_one(c);
            true
        }
        None => false,
    }
}

/// The stack map id of the sample's user (`BPF_F_USER_STACK`) or kernel
/// stack; [`NO_STACK`] when there is none (a kernel thread's user stack),
/// [`LOST_STACK`] (counted) when its bucket holds another stack or the walk
/// failed. Whole stacks are compared (no `BPF_F_FAST_STACK_CMP`: two stacks
/// with the same 32-bit hash stay apart).
#[inline(always)]
fn stack_id(ctx: &PerfEventContext, flags: u64, cpu: &mut PerfCpu) -> u32 {
    match ctx.get_stackid(&PERF_STACKS, flags) {
        Ok(id) => id as u32,
        Err(EFAULT) => NO_STACK,
        Err(_) => {
            cpu.stack_lost += 1;
            LOST_STACK
        }
    }
}
