//! Allocator family (kernel side): one uprobe + uretprobe pair attached by
//! user space to every allocation / free entry point of the target during
//! sampled windows, and to mdiag's own do-nothing function while calibrating.
//!
//! The attach cookie says which function was hit and where its size argument
//! is (`mdiag_common::alloc::cookie`). Entry pushes (start, function, size
//! class) on the thread's small stack; return pops it and adds the latency to
//! the per-CPU log2 histogram of (function, size class). Only the process
//! named in `ALLOC_CONTROL` counts; only while its window is open are entries
//! timed. Anything that cannot be matched is counted, never guessed.

use aya_ebpf::{
    EbpfContext,
    helpers::{bpf_get_attach_cookie, bpf_get_current_pid_tgid},
    macros::{map, uprobe, uretprobe},
    maps::{Array, LruHashMap, PerCpuArray},
    programs::{ProbeContext, RetProbeContext},
};
use mdiag_common::alloc::{
    AllocControl, AllocCounters, AllocFrame, AllocHist, AllocStack, LAT_BUCKETS, MAX_DEPTH,
    MAX_FUNCS, MAX_THREADS, SIZE_ARG0, SIZE_ARG0_TIMES_ARG1, SIZE_ARG1, SIZE_ARG2, SIZE_CLASSES,
    cookie_func, cookie_size_mode, hist_index, size_class,
};
use mdiag_common::hist::log2_bucket;

use crate::sched::now_ns;

#[map]
static ALLOC_CONTROL: Array<AllocControl> = Array::with_max_entries(1, 0);
#[map]
static ALLOC_STACKS: LruHashMap<u32, AllocStack> = LruHashMap::with_max_entries(MAX_THREADS, 0);
#[map]
static ALLOC_HIST: PerCpuArray<AllocHist> =
    PerCpuArray::with_max_entries(MAX_FUNCS * SIZE_CLASSES, 0);
#[map]
static ALLOC_COUNTERS: PerCpuArray<AllocCounters> = PerCpuArray::with_max_entries(1, 0);

const BPF_NOEXIST: u64 = 1;

#[inline(always)]
fn counters() -> Option<&'static mut AllocCounters> {
    // SAFETY: per-CPU slot; uprobe programs do not nest on one CPU.
    ALLOC_COUNTERS.get_ptr_mut(0).map(|p| unsafe { &mut *p })
}

/// The control word when the current task belongs to the observed process.
#[inline(always)]
fn observed(pid_tgid: u64) -> Option<AllocControl> {
    let ctrl = *ALLOC_CONTROL.get(0)?;
    (ctrl.tgid != 0 && ctrl.tgid == (pid_tgid >> 32) as u32).then_some(ctrl)
}

#[inline(always)]
fn cookie_of<C: EbpfContext>(ctx: &C) -> u64 {
    // SAFETY: the context pointer is the program's own context.
    unsafe { bpf_get_attach_cookie(ctx.as_ptr()) }
}

#[inline(always)]
fn size_of_call(ctx: &ProbeContext, mode: u64) -> Option<u64> {
    match mode {
        SIZE_ARG0 => ctx.arg::<u64>(0),
        SIZE_ARG1 => ctx.arg::<u64>(1),
        SIZE_ARG2 => ctx.arg::<u64>(2),
        SIZE_ARG0_TIMES_ARG1 => {
            let n = ctx.arg::<u64>(0)?;
            let s = ctx.arg::<u64>(1)?;
            // No 128-bit multiply in BPF: two factors below 2^32 cannot
            // overflow; anything larger is in the top size class anyway.
            if (n | s) >> 32 != 0 {
                Some(u64::MAX)
            } else {
                Some(n * s)
            }
        }
        _ => None,
    }
}

/// Entry, for a uprobe_multi link (Linux ≥ 6.6): every entry point in one
/// link, detached in one step.
#[uprobe(multi)]
pub fn mdiag_alloc_enter_multi(ctx: ProbeContext) -> u32 {
    enter(&ctx)
}

/// Entry, one perf event per entry point (kernels without uprobe_multi).
#[uprobe]
pub fn mdiag_alloc_enter(ctx: ProbeContext) -> u32 {
    enter(&ctx)
}

#[inline(always)]
fn enter(ctx: &ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(ctrl) = observed(pid_tgid) else {
        return 0;
    };
    let Some(c) = counters() else { return 0 };
    c.entries += 1;
    if ctrl.open == 0 {
        return 0;
    }
    let cookie = cookie_of(ctx);
    let func = cookie_func(cookie);
    let class = size_of_call(ctx, cookie_size_mode(cookie)).map_or(0, size_class);
    let tid = pid_tgid as u32;
    let stack = match ALLOC_STACKS.get_ptr_mut(&tid) {
        Some(s) => s,
        None => {
            let _ = ALLOC_STACKS.insert(&tid, &AllocStack::default(), BPF_NOEXIST);
            match ALLOC_STACKS.get_ptr_mut(&tid) {
                Some(s) => s,
                None => {
                    c.stack_full += 1;
                    return 0;
                }
            }
        }
    };
    // SAFETY: a valid map value; only this thread touches its own entry.
    let stack = unsafe { &mut *stack };
    let depth = stack.depth;
    if depth >= MAX_DEPTH {
        c.too_deep += 1;
    } else if let Some(f) = stack.frames.get_mut(depth as usize) {
        *f = AllocFrame {
            start_ns: now_ns(),
            func,
            class,
        };
    }
    stack.depth = depth.saturating_add(1);
    0
}

/// Return, for a uprobe_multi link.
#[uretprobe(multi)]
pub fn mdiag_alloc_exit_multi(ctx: RetProbeContext) -> u32 {
    exit(&ctx)
}

/// Return, one perf event per entry point.
#[uretprobe]
pub fn mdiag_alloc_exit(ctx: RetProbeContext) -> u32 {
    exit(&ctx)
}

#[inline(always)]
fn exit(ctx: &RetProbeContext) -> u32 {
    let end = now_ns();
    let pid_tgid = bpf_get_current_pid_tgid();
    let Some(ctrl) = observed(pid_tgid) else {
        return 0;
    };
    let Some(c) = counters() else { return 0 };
    let tid = pid_tgid as u32;
    // Outside the open window no entry is remembered: nothing is missing.
    let Some(stack) = ALLOC_STACKS.get_ptr_mut(&tid) else {
        if ctrl.open != 0 {
            c.missing_entry += 1;
        }
        return 0;
    };
    // SAFETY: a valid map value; only this thread touches its own entry.
    let stack = unsafe { &mut *stack };
    if stack.depth == 0 {
        if ctrl.open != 0 {
            c.missing_entry += 1;
        }
        return 0;
    }
    stack.depth -= 1;
    let depth = stack.depth;
    if depth >= MAX_DEPTH {
        return 0; // counted as too_deep at entry
    }
    let Some(frame) = stack.frames.get(depth as usize).copied() else {
        return 0;
    };
    let func = cookie_func(cookie_of(ctx));
    if frame.func != func || func >= MAX_FUNCS || frame.class >= SIZE_CLASSES {
        c.mismatched += 1;
        stack.depth = 0;
        return 0;
    }
    let latency = end.saturating_sub(frame.start_ns);
    let Some(h) = ALLOC_HIST.get_ptr_mut(hist_index(func, frame.class)) else {
        return 0;
    };
    // SAFETY: per-CPU slot; uprobe programs do not nest on one CPU.
    let h = unsafe { &mut *h };
    h.count += 1;
    h.sum_ns += latency;
    let b = log2_bucket(latency);
    let b = if b >= LAT_BUCKETS { LAT_BUCKETS - 1 } else { b };
    if let Some(slot) = h.buckets.get_mut(b) {
        *slot += 1;
    }
    c.timed += 1;
    0
}
