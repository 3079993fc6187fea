//! Softirq and hard-IRQ time per CPU (kernel side).
//!
//! BTF tracepoints, so no tracefs is needed. Softirqs do not nest on a CPU
//! and hard-IRQ handlers run with interrupts off, so one entry timestamp per
//! CPU and kind is enough.

use aya_ebpf::{
    helpers::bpf_ktime_get_ns,
    macros::{btf_tracepoint, map},
    maps::{PerCpuArray, PerCpuHashMap},
    programs::BtfTracePointContext,
};
use mdiag_common::softirq::{IrqStat, MAX_IRQS, NR_SOFTIRQS, SoftirqCpu};

#[map]
static SOFTIRQ_CPU: PerCpuArray<SoftirqCpu> = PerCpuArray::with_max_entries(1, 0);
#[map]
static HARDIRQ_STATS: PerCpuHashMap<u32, IrqStat> = PerCpuHashMap::with_max_entries(MAX_IRQS, 0);

const BPF_NOEXIST: u64 = 1;

#[inline(always)]
fn now_ns() -> u64 {
    // SAFETY: no preconditions; `unsafe` only because raw helpers are.
    unsafe { bpf_ktime_get_ns() }
}

#[inline(always)]
fn cpu() -> Option<&'static mut SoftirqCpu> {
    let ptr = SOFTIRQ_CPU.get_ptr_mut(0)?;
    // SAFETY: per-CPU slot, only touched by these programs on this CPU, which
    // do not nest for the same kind of event.
    Some(unsafe { &mut *ptr })
}

#[btf_tracepoint(function = "softirq_entry")]
pub fn mdiag_softirq_entry(ctx: BtfTracePointContext) -> i32 {
    // TP_PROTO(unsigned int vec_nr)
    let vec: u64 = ctx.arg(0);
    let Some(c) = cpu() else { return 0 };
    let vec = (vec as u32) as usize;
    if vec >= NR_SOFTIRQS {
        c.drop_bad_vector += 1;
        return 0;
    }
    if let Some(n) = c.count.get_mut(vec) {
        *n += 1;
    }
    c.softirq_entry_ts = now_ns();
    0
}

#[btf_tracepoint(function = "softirq_exit")]
pub fn mdiag_softirq_exit(ctx: BtfTracePointContext) -> i32 {
    let vec: u64 = ctx.arg(0);
    let Some(c) = cpu() else { return 0 };
    let vec = (vec as u32) as usize;
    let start = c.softirq_entry_ts;
    c.softirq_entry_ts = 0;
    if start == 0 {
        c.drop_unmatched_exit += 1;
        return 0;
    }
    let now = now_ns();
    if let Some(t) = c.time_ns.get_mut(vec) {
        *t += now.saturating_sub(start);
    }
    0
}

#[btf_tracepoint(function = "irq_handler_entry")]
pub fn mdiag_hardirq_entry(ctx: BtfTracePointContext) -> i32 {
    // TP_PROTO(int irq, struct irqaction *action)
    let irq: u64 = ctx.arg(0);
    let irq = irq as u32;
    let Some(c) = cpu() else { return 0 };
    c.hardirq_entry_ts = now_ns();
    if let Some(s) = HARDIRQ_STATS.get_ptr_mut(&irq) {
        // SAFETY: per-CPU value of this CPU, valid during the program.
        unsafe { (*s).count += 1 };
    } else if HARDIRQ_STATS
        .insert(
            &irq,
            &IrqStat {
                count: 1,
                time_ns: 0,
            },
            BPF_NOEXIST,
        )
        .is_err()
    {
        c.drop_irq_map_full += 1;
    }
    0
}

#[btf_tracepoint(function = "irq_handler_exit")]
pub fn mdiag_hardirq_exit(ctx: BtfTracePointContext) -> i32 {
    // TP_PROTO(int irq, struct irqaction *action, int ret)
    let irq: u64 = ctx.arg(0);
    let irq = irq as u32;
    let Some(c) = cpu() else { return 0 };
    let start = c.hardirq_entry_ts;
    c.hardirq_entry_ts = 0;
    if start == 0 {
        c.drop_unmatched_exit += 1;
        return 0;
    }
    let now = now_ns();
    if let Some(s) = HARDIRQ_STATS.get_ptr_mut(&irq) {
        // SAFETY: as above.
        unsafe { (*s).time_ns += now.saturating_sub(start) };
    }
    0
}
