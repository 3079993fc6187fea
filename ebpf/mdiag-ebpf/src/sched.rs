//! Scheduler probe family (kernel side): voluntary / involuntary switches per
//! thread, wakeup → on-CPU run-queue delay, all aggregated in maps.
//!
//! A switch where neither side is observed costs one per-CPU counter and
//! two task reads; the run-queue wait start lives in the thread's own entry
//! (`runnable_since_ns`), so an observed switch costs two hash lookups and
//! no insert or delete. When the contention family folds its D-state work
//! in (`SCHED_FOLD`), it runs here too: one program per switch.
//!
//! Every switch also records, per CPU, which observed thread runs there and
//! since when (`SCHED_RUNNING`): user space credits runs in progress to the
//! slices they overlap from it. A per-CPU record is rewritten at every
//! switch on its CPU, so it never outlives the run it describes even when a
//! switch-out goes unseen (a thread's own `last_in_ns` would).
//!
//! `sched_switch` is the BTF tracepoint so we get the raw `prev_state` and the
//! `preempt` flag (the classic tracepoint folds preemption into
//! `TASK_REPORT_MAX`). A switch is involuntary exactly when the kernel adds it
//! to `nivcsw`: `preempt || prev_state == TASK_RUNNING`. `prev` is the current
//! task, so its ids come from `bpf_get_current_pid_tgid`; `next` and woken
//! tasks are read through `task_struct` offsets resolved from BTF by user space.

use aya_ebpf::{
    helpers::{
        bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_get_smp_processor_id, bpf_ktime_get_ns,
        bpf_probe_read_kernel,
    },
    macros::{btf_tracepoint, map},
    maps::{Array, HashMap, PerCpuArray},
    programs::BtfTracePointContext,
};
use mdiag_common::{
    hist::log2_bucket,
    sched::{
        FOLD_DSTATE, LastWakeup, MAX_CPUS, MAX_THREADS, Running, SchedCpu, TASK_COMM_LEN,
        THREAD_DSTATE_OPEN, ThreadSched,
    },
};

#[unsafe(no_mangle)]
static MDIAG_SCHED_TARGET_TGID: u32 = 0;
#[unsafe(no_mangle)]
pub(crate) static MDIAG_TASK_PID_OFFSET: u32 = 0;
#[unsafe(no_mangle)]
pub(crate) static MDIAG_TASK_TGID_OFFSET: u32 = 0;
#[unsafe(no_mangle)]
static MDIAG_TASK_COMM_OFFSET: u32 = 0;
#[unsafe(no_mangle)]
static MDIAG_TASK_CPU_OFFSET: u32 = 0;
#[unsafe(no_mangle)]
static MDIAG_TASK_STATE_OFFSET: u32 = 0;

#[map]
static SCHED_THREADS: HashMap<u32, ThreadSched> = HashMap::with_max_entries(MAX_THREADS, 0);
#[map]
static SCHED_CPU: PerCpuArray<SchedCpu> = PerCpuArray::with_max_entries(1, 0);
/// Per CPU: the observed thread running there now, and since when.
#[map]
static SCHED_RUNNING: PerCpuArray<Running> = PerCpuArray::with_max_entries(1, 0);
/// Indexed by CPU: the last observed thread woken onto that CPU.
#[map]
static SCHED_LAST_WAKEUP: Array<LastWakeup> = Array::with_max_entries(MAX_CPUS, 0);
/// `FOLD_*` bits: work of other families done by `mdiag_sched_switch`.
#[map]
static SCHED_FOLD: Array<u32> = Array::with_max_entries(1, 0);

const BPF_NOEXIST: u64 = 1;
const TASK_RUNNING: u32 = 0;

#[inline(always)]
pub(crate) fn global(v: &u32) -> u32 {
    // SAFETY: reading a global through a volatile read so the compiler keeps
    // the load: the loader patches the value in .rodata before verification.
    unsafe { core::ptr::read_volatile(v) }
}

#[inline(always)]
pub(crate) fn now_ns() -> u64 {
    // SAFETY: bpf_ktime_get_ns has no preconditions; it is only `unsafe`
    // because every raw helper binding is.
    unsafe { bpf_ktime_get_ns() }
}

#[inline(always)]
pub(crate) fn observed(tgid: u32) -> bool {
    let target = global(&MDIAG_SCHED_TARGET_TGID);
    target == 0 || tgid == target
}

#[inline(always)]
fn cpu_counters() -> Option<&'static mut SchedCpu> {
    let ptr = SCHED_CPU.get_ptr_mut(0)?;
    // SAFETY: the per-CPU slot is only touched by programs on this CPU and
    // tracing programs do not nest on the same CPU for these tracepoints.
    Some(unsafe { &mut *ptr })
}

/// Reads a `u32`-sized field of `task` at `offset`.
#[inline(always)]
pub(crate) fn task_u32(task: *const u8, offset: u32) -> Option<u32> {
    // SAFETY: bpf_probe_read_kernel copes with any address (it fails cleanly);
    // `task` comes from the tracepoint arguments and `offset` from BTF.
    unsafe { bpf_probe_read_kernel(task.wrapping_add(offset as usize) as *const u32).ok() }
}

/// `sched_switch`'s `prev_state`: its fourth argument where the kernel has
/// it (5.18+), else `prev->__state` (`state` before 5.14) at the switch,
/// which is what the kernel passed on to the tracepoint's older form. The
/// global is a constant of the loaded program, so the verifier only sees
/// the branch this kernel takes (older verifiers reject the read of a
/// fourth argument that does not exist).
#[inline(always)]
pub(crate) fn switch_prev_state(ctx: &BtfTracePointContext) -> u32 {
    let offset = global(&MDIAG_TASK_STATE_OFFSET);
    if offset == 0 {
        let state: u64 = ctx.arg(3);
        state as u32
    } else {
        let prev: *const u8 = ctx.arg(1);
        task_u32(prev, offset).unwrap_or(0)
    }
}

/// The `comm` (thread name) of `task`; zeros when it cannot be read.
#[inline(always)]
pub(crate) fn task_comm(task: *const u8) -> [u8; TASK_COMM_LEN] {
    // SAFETY: reads the fixed-size comm array of a live task; a failed read
    // leaves zeros.
    unsafe {
        bpf_probe_read_kernel(task.wrapping_add(global(&MDIAG_TASK_COMM_OFFSET) as usize)
            as *const [u8; TASK_COMM_LEN])
        .unwrap_or([0; TASK_COMM_LEN])
    }
}

/// The thread's entry, created on first sight. `None` when the map is full.
#[inline(always)]
fn thread_entry(
    tid: u32,
    tgid: u32,
    comm: &[u8; TASK_COMM_LEN],
    cpu: &mut SchedCpu,
) -> Option<&'static mut ThreadSched> {
    if let Some(ptr) = SCHED_THREADS.get_ptr_mut(&tid) {
        // SAFETY: map values stay valid while the program runs; a thread's
        // entry is only written on the CPU the thread is switching on.
        return Some(unsafe { &mut *ptr });
    }
    let fresh = ThreadSched {
        tgid,
        comm: *comm,
        ..ThreadSched::default()
    };
    if SCHED_THREADS.insert(&tid, &fresh, BPF_NOEXIST).is_err()
        && SCHED_THREADS.get_ptr_mut(&tid).is_none()
    {
        cpu.drop_thread_map_full += 1;
        return None;
    }
    let ptr = SCHED_THREADS.get_ptr_mut(&tid)?;
    // SAFETY: as above.
    Some(unsafe { &mut *ptr })
}

#[btf_tracepoint(function = "sched_switch")]
pub fn mdiag_sched_switch(ctx: BtfTracePointContext) -> i32 {
    // TP_PROTO(bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)
    let preempt: u64 = ctx.arg(0);
    let next: *const u8 = ctx.arg(2);
    let preempt = preempt & 0xff != 0;

    let Some(cpu) = cpu_counters() else { return 0 };
    cpu.switches += 1;
    // The thread last woken onto this CPU, consumed by this switch.
    // SAFETY: bpf_get_smp_processor_id has no preconditions.
    let this_cpu = unsafe { bpf_get_smp_processor_id() };
    let woken_tid = match SCHED_LAST_WAKEUP.get_ptr_mut(this_cpu) {
        // SAFETY: valid array slot; a racing wakeup on another CPU can at
        // worst make us miss or misattribute one wakeup preemption.
        Some(w) => unsafe { core::mem::replace(&mut (*w).tid, 0) },
        None => 0,
    };
    let next_ids = (
        task_u32(next, global(&MDIAG_TASK_PID_OFFSET)),
        task_u32(next, global(&MDIAG_TASK_TGID_OFFSET)),
    );
    // prev is the task running this tracepoint.
    let pid_tgid = bpf_get_current_pid_tgid();
    let prev_tid = pid_tgid as u32;
    let prev_tgid = (pid_tgid >> 32) as u32;
    let prev_observed = prev_tid != 0 && observed(prev_tgid);
    let next_observed = matches!(next_ids, (Some(tid), Some(tgid)) if tid != 0 && observed(tgid));
    // What runs on this CPU from now on (nothing observed: tid 0), written
    // after prev's run is counted below; cleared here when neither side is
    // observed, the common case on a busy host, which then costs nothing more.
    if !prev_observed && !next_observed {
        set_running(Running::default());
        if next_ids.0.is_none() || next_ids.1.is_none() {
            cpu.drop_read_failed += 1;
        }
        return 0;
    }
    let prev_state = switch_prev_state(&ctx);
    let now = now_ns();
    // prev loses the CPU while still runnable (the kernel's nivcsw).
    let involuntary = preempt || prev_state == TASK_RUNNING;
    let wakeup_preempt = woken_tid != 0 && next_ids.0 == Some(woken_tid) && involuntary;
    let fold = fold_bits();

    if prev_observed {
        let comm = bpf_get_current_comm().unwrap_or([0; TASK_COMM_LEN]);
        switch_out(
            &SwitchOut {
                tid: prev_tid,
                tgid: prev_tgid,
                comm,
                now,
                involuntary,
                preempt,
                wakeup_preempt,
            },
            cpu,
        );
        if fold & FOLD_DSTATE != 0 {
            if crate::contention::dstate_out(&ctx, prev_tid, prev_tgid, preempt, prev_state, now)
                && let Some(t) = SCHED_THREADS.get_ptr_mut(&prev_tid)
            {
                // SAFETY: valid map value; the thread is switching out on this CPU.
                unsafe { (*t).flags |= THREAD_DSTATE_OPEN };
            }
            crate::contention::wait_out(&ctx, prev_tid, preempt, prev_state, now);
        }
    }

    set_running(match next_ids {
        (Some(tid), Some(tgid)) if next_observed => Running {
            tid,
            tgid,
            since_ns: now,
        },
        _ => Running::default(),
    });
    let (Some(next_tid), Some(next_tgid)) = next_ids else {
        cpu.drop_read_failed += 1;
        return 0;
    };
    if !next_observed {
        return 0;
    }
    let comm = task_comm(next);
    let Some(t) = thread_entry(next_tid, next_tgid, &comm, cpu) else {
        return 0;
    };
    if wakeup_preempt && prev_tid != 0 {
        t.wakeup_preempting += 1;
    }
    if t.runnable_since_ns != 0 {
        let d = now.saturating_sub(t.runnable_since_ns);
        t.runnable_since_ns = 0;
        t.runq_delay_ns += d;
        t.runq_delays += 1;
        if let Some(slot) = cpu.runq_hist.get_mut(log2_bucket(d)) {
            *slot += 1;
        }
    }
    t.last_in_ns = now;
    if t.flags & THREAD_DSTATE_OPEN != 0 {
        t.flags &= !THREAD_DSTATE_OPEN;
        crate::contention::dstate_in(next_tid, now);
    }
    if fold & FOLD_DSTATE != 0 {
        crate::contention::wait_in(next_tid, next_tgid, now);
    }
    0
}

/// The side of a switch that leaves the CPU.
struct SwitchOut {
    tid: u32,
    tgid: u32,
    comm: [u8; TASK_COMM_LEN],
    now: u64,
    involuntary: bool,
    preempt: bool,
    wakeup_preempt: bool,
}

/// Counts an observed thread's switch-out: its kind, its run, and (still
/// runnable) the start of its run-queue wait.
#[inline(always)]
fn switch_out(s: &SwitchOut, cpu: &mut SchedCpu) {
    if s.involuntary {
        cpu.involuntary += 1;
        if s.preempt {
            cpu.preempted += 1;
        }
        if s.wakeup_preempt {
            cpu.wakeup_preemptions += 1;
        }
    } else {
        cpu.voluntary += 1;
    }
    let Some(t) = thread_entry(s.tid, s.tgid, &s.comm, cpu) else {
        return;
    };
    if s.involuntary {
        t.involuntary += 1;
        if s.preempt {
            t.preempted += 1;
        }
        if s.wakeup_preempt {
            t.wakeup_preempted += 1;
        }
        // Still runnable: its run-queue wait starts now.
        t.runnable_since_ns = s.now;
    } else {
        t.voluntary += 1;
        // Going to sleep: any older wakeup stamp is stale.
        t.runnable_since_ns = 0;
    }
    if t.last_in_ns != 0 && s.now > t.last_in_ns {
        t.oncpu_ns += s.now - t.last_in_ns;
        t.last_run_start_ns = t.last_in_ns;
    }
    t.last_in_ns = 0;
    // The current name: threads often rename themselves after their
    // first switch (pthread_setname_np), and thread classes go by it.
    if s.comm[0] != 0 {
        t.comm = s.comm;
    }
}

/// This CPU's record of the observed thread running on it.
#[inline(always)]
fn set_running(running: Running) {
    if let Some(r) = SCHED_RUNNING.get_ptr_mut(0) {
        // SAFETY: this CPU's slot; programs on one CPU do not nest here.
        unsafe {
            if (*r).tid != 0 || running.tid != 0 {
                *r = running;
            }
        }
    }
}

/// The `SCHED_FOLD` bits (0 when unreadable).
#[inline(always)]
fn fold_bits() -> u32 {
    match SCHED_FOLD.get(0) {
        Some(b) => *b,
        None => 0,
    }
}

#[inline(always)]
fn on_wakeup(ctx: &BtfTracePointContext) {
    // TP_PROTO(struct task_struct *p)
    let p: *const u8 = ctx.arg(0);
    let Some(cpu) = cpu_counters() else { return };
    let (Some(tid), Some(tgid)) = (
        task_u32(p, global(&MDIAG_TASK_PID_OFFSET)),
        task_u32(p, global(&MDIAG_TASK_TGID_OFFSET)),
    ) else {
        cpu.drop_read_failed += 1;
        return;
    };
    if tid == 0 || !observed(tgid) {
        return;
    }
    cpu.wakeups += 1;
    let now = now_ns();
    let comm = task_comm(p);
    if let Some(t) = thread_entry(tid, tgid, &comm, cpu) {
        // The woken thread is not running: its own switches do not write
        // the entry meanwhile.
        t.runnable_since_ns = now;
    }
    // Remember it on the CPU it was queued on, for wakeup-preemption detection.
    if let Some(target_cpu) = task_u32(p, global(&MDIAG_TASK_CPU_OFFSET))
        && let Some(w) = SCHED_LAST_WAKEUP.get_ptr_mut(target_cpu)
    {
        // SAFETY: valid array slot for the duration of the program.
        unsafe {
            *w = LastWakeup {
                tid,
                _pad0: 0,
                ts_ns: now,
            }
        };
    }
}

#[btf_tracepoint(function = "sched_migrate_task")]
pub fn mdiag_sched_migrate(ctx: BtfTracePointContext) -> i32 {
    // TP_PROTO(struct task_struct *p, int dest_cpu)
    let p: *const u8 = ctx.arg(0);
    let Some(cpu) = cpu_counters() else { return 0 };
    let (Some(tid), Some(tgid)) = (
        task_u32(p, global(&MDIAG_TASK_PID_OFFSET)),
        task_u32(p, global(&MDIAG_TASK_TGID_OFFSET)),
    ) else {
        cpu.drop_read_failed += 1;
        return 0;
    };
    if tid == 0 || !observed(tgid) {
        return 0;
    }
    // set_task_cpu() fires the tracepoint even when the CPU does not change;
    // the kernel counts a migration (se.nr_migrations) only when it does.
    let dest_cpu: u64 = ctx.arg(1);
    if task_u32(p, global(&MDIAG_TASK_CPU_OFFSET)) == Some(dest_cpu as u32) {
        return 0;
    }
    cpu.migrations += 1;
    let comm = task_comm(p);
    if let Some(t) = thread_entry(tid, tgid, &comm, cpu) {
        // A task is migrated while it is not running (or by its own CPU's
        // stopper), so its own switch accounting does not touch the entry at
        // the same time. (The BPF target has no atomic read-modify-write in
        // `core`.)
        t.migrations += 1;
    }
    0
}

#[btf_tracepoint(function = "sched_wakeup")]
pub fn mdiag_sched_wakeup(ctx: BtfTracePointContext) -> i32 {
    on_wakeup(&ctx);
    0
}

#[btf_tracepoint(function = "sched_wakeup_new")]
pub fn mdiag_sched_wakeup_new(ctx: BtfTracePointContext) -> i32 {
    on_wakeup(&ctx);
    0
}
