//! Contention family (kernel side): kernel lock waits (`contention_begin` →
//! `contention_end`) and uninterruptible sleeps (D state, at `sched_switch`)
//! of observed threads, each charged to the window
//! (inside / outside a checkpoint of the target) in which the wait began.
//!
//! Lock waits: one open wait per thread. A `contention_begin` for the lock
//! already open only updates its flags (a mutex first spins, then sleeps:
//! the wait is timed from the first begin and named by the last flags); one
//! for another lock while a wait is open (a spinlock taken inside the slow
//! path) is counted as `nested` and not timed, so time is never counted twice.
//!
//! D state: when an observed task leaves the CPU in TASK_UNINTERRUPTIBLE
//! (not TASK_IDLE, not preempted), its kernel stack is stored in the stack
//! map and (time, stack id, window) remembered; when it is switched back in,
//! the sleep's length is added to its thread totals and to per-CPU totals by
//! (stack id, window). Nothing goes to user space per event. This runs in
//! the scheduler family's switch program when that one is attached
//! (`FOLD_DSTATE`, so a switch runs one program, not two), else in this
//! family's own.
//!
//! Off-CPU stacks: every switch-out of an observed thread opens its wait
//! (time, why, window) in `CONT_WAITS`, and one in `CONT_WAIT_EVERY` also
//! stores its user and kernel stacks (`CONT_WAIT_STACKS`; the others name
//! `UNSAMPLED_STACK`); its switch-in adds the time to the counter of
//! (thread, stacks, why, window) and deletes the wait. Every wait's time is
//! so counted exactly, and user space spreads a thread's unsampled time
//! over its sampled stacks. Same program, same folding as the D-state work.
//!
//! User space credits waits still in flight to the slices they overlap: a
//! thread's totals name the start of its latest counted lock wait and
//! sleep, and an in-flight entry is deleted only after its wait is counted,
//! so a reader never sees a wait neither in flight nor counted.

use aya_ebpf::{
    helpers::{bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_get_prandom_u32},
    macros::{btf_tracepoint, map},
    maps::{Array, HashMap, PerCpuArray, PerCpuHashMap, StackTrace},
    programs::{BtfTracePointContext, tracing::StackIdContext},
};
use mdiag_common::contention::{
    ContentionDrops, D_STACK_NONE, DStackKey, DStackStats, LOCK_FLAGS_MASK, LOCK_KINDS,
    LockInflight, LockKindStats, MAX_DSTACKS, MAX_INFLIGHT, MAX_STACKS, MAX_THREADS, MAX_WAIT_KEYS,
    MAX_WAIT_STACKS, MAX_WAITS, OffCpu, TASK_COMM_LEN, TASK_DEAD_MASK, TASK_NOLOAD,
    TASK_UNINTERRUPTIBLE, ThreadContention, WAIT_DISK, WAIT_EVERY_MAX, WAIT_RUNQUEUE, WAIT_SLEEP,
    WaitInflight, WaitKey, WaitStats,
};
use mdiag_common::stack::{BPF_F_USER_STACK, EFAULT, LOST_STACK, NO_STACK, UNSAMPLED_STACK};

use crate::{
    sched::{
        MDIAG_TASK_PID_OFFSET, MDIAG_TASK_TGID_OFFSET, global, now_ns, observed, switch_prev_state,
        task_u32,
    },
    wiredtiger::checkpoint_window,
};

#[map]
static CONT_LOCK_INFLIGHT: HashMap<u32, LockInflight> = HashMap::with_max_entries(MAX_INFLIGHT, 0);
#[map]
static CONT_OFFCPU: HashMap<u32, OffCpu> = HashMap::with_max_entries(MAX_INFLIGHT, 0);
#[map]
static CONT_THREADS: HashMap<u32, ThreadContention> = HashMap::with_max_entries(MAX_THREADS, 0);
#[map]
static CONT_LOCK_KINDS: PerCpuArray<LockKindStats> = PerCpuArray::with_max_entries(LOCK_KINDS, 0);
#[map]
static CONT_DSTACKS: PerCpuHashMap<DStackKey, DStackStats> =
    PerCpuHashMap::with_max_entries(MAX_DSTACKS, 0);
#[map]
static CONT_STACKS: StackTrace = StackTrace::with_max_entries(MAX_STACKS, 0);
#[map]
static CONT_DROPS: PerCpuArray<ContentionDrops> = PerCpuArray::with_max_entries(1, 0);
#[map]
static CONT_WAITS: HashMap<u32, WaitInflight> = HashMap::with_max_entries(MAX_WAITS, 0);
#[map]
static CONT_WAIT_COUNTS: HashMap<WaitKey, WaitStats> = HashMap::with_max_entries(MAX_WAIT_KEYS, 0);
#[map]
static CONT_WAIT_STACKS: StackTrace = StackTrace::with_max_entries(MAX_WAIT_STACKS, 0);
#[map]
static CONT_WAIT_EVERY: Array<u32> = Array::with_max_entries(1, 0);

const BPF_ANY: u64 = 0;
const BPF_NOEXIST: u64 = 1;
/// `bpf_get_stackid`: compare whole stacks on hash collision (no silent mix-ups).
const BPF_F_FAST_STACK_CMP: u64 = 1 << 9;

#[inline(always)]
fn drops() -> Option<&'static mut ContentionDrops> {
    // SAFETY: per-CPU slot; these programs do not nest on one CPU.
    CONT_DROPS.get_ptr_mut(0).map(|p| unsafe { &mut *p })
}

/// The thread's totals, created on first sight (with the current task's
/// name: only called from the thread's own context). `None` when full.
#[inline(always)]
fn thread_entry(tid: u32, tgid: u32) -> Option<&'static mut ThreadContention> {
    if let Some(ptr) = CONT_THREADS.get_ptr_mut(&tid) {
        // SAFETY: map values stay valid while the program runs; a thread's
        // entry is only written from its own context or while it is off CPU.
        return Some(unsafe { &mut *ptr });
    }
    let fresh = ThreadContention {
        tgid,
        comm: bpf_get_current_comm().unwrap_or([0; TASK_COMM_LEN]),
        ..ThreadContention::default()
    };
    if CONT_THREADS.insert(&tid, &fresh, BPF_NOEXIST).is_err()
        && CONT_THREADS.get_ptr_mut(&tid).is_none()
    {
        if let Some(d) = drops() {
            d.thread_map_full += 1;
        }
        return None;
    }
    // SAFETY: as above.
    CONT_THREADS.get_ptr_mut(&tid).map(|p| unsafe { &mut *p })
}

/// The current thread's (tid, tgid) when its process is observed; `None` for
/// the idle task and for processes not observed, which the lock programs skip.
#[inline(always)]
fn current_observed() -> Option<(u32, u32)> {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    let tid = pid_tgid as u32;
    (tid != 0 && observed(tgid)).then_some((tid, tgid))
}

/// Adds one sleep of `ns` to this CPU's value of `key`; false when the map
/// has no such key yet.
#[inline(always)]
fn add_dstack(key: &DStackKey, ns: u64) -> bool {
    let Some(s) = CONT_DSTACKS.get_ptr_mut(key) else {
        return false;
    };
    // SAFETY: this CPU's value of a per-CPU hash entry, valid while the
    // program runs; these programs do not nest on one CPU.
    let s = unsafe { &mut *s };
    s.sleeps += 1;
    s.ns += ns;
    true
}

#[btf_tracepoint(function = "contention_begin")]
pub fn mdiag_cont_lock_begin(ctx: BtfTracePointContext) -> i32 {
    // TP_PROTO(void *lock, unsigned int flags)
    let Some((tid, _)) = current_observed() else {
        return 0;
    };
    let lock: u64 = ctx.arg(0);
    let flags: u64 = ctx.arg(1);
    let flags = flags as u32;
    if let Some(open) = CONT_LOCK_INFLIGHT.get_ptr_mut(&tid) {
        // SAFETY: valid map value; only this thread's context touches it.
        let open = unsafe { &mut *open };
        if open.lock == lock {
            open.flags = flags;
        } else if let Some(d) = drops() {
            d.nested += 1;
        }
        return 0;
    }
    let entry = LockInflight {
        lock,
        ts_ns: now_ns(),
        flags,
        window: checkpoint_window(),
    };
    if CONT_LOCK_INFLIGHT.insert(&tid, &entry, BPF_ANY).is_err()
        && let Some(d) = drops()
    {
        d.inflight_full += 1;
    }
    0
}

#[btf_tracepoint(function = "contention_end")]
pub fn mdiag_cont_lock_end(ctx: BtfTracePointContext) -> i32 {
    // TP_PROTO(void *lock, int ret)
    let Some((tid, tgid)) = current_observed() else {
        return 0;
    };
    let lock: u64 = ctx.arg(0);
    let Some(open) = CONT_LOCK_INFLIGHT.get_ptr(&tid) else {
        return 0;
    };
    // SAFETY: valid map value pointer; copied before the delete below.
    let open = unsafe { *open };
    if open.lock != lock {
        // The end of a nested wait that was not timed.
        return 0;
    }
    let delta = now_ns().saturating_sub(open.ts_ns);
    let w = (open.window & 1) as usize;
    if let Some(k) = CONT_LOCK_KINDS.get_ptr_mut(open.flags & LOCK_FLAGS_MASK) {
        // SAFETY: per-CPU slot of this CPU.
        let k = unsafe { &mut *k };
        k.waits[w] += 1;
        k.wait_ns[w] += delta;
    }
    if let Some(t) = thread_entry(tid, tgid) {
        t.lock_waits[w] += 1;
        t.lock_wait_ns[w] += delta;
        t.last_lock_start_ns = open.ts_ns;
    }
    // Last: while the entry is in flight, the thread's counters either do
    // not hold the wait yet or name it, never neither.
    let _ = CONT_LOCK_INFLIGHT.remove(&tid);
    0
}

/// When `prev` (the current task, an observed thread) leaves the CPU in an
/// uninterruptible sleep, opens its D-state entry: kernel stack, start,
/// window. True when the entry was stored.
#[inline(always)]
pub(crate) fn dstate_out(
    ctx: &BtfTracePointContext,
    prev_tid: u32,
    prev_tgid: u32,
    preempt: bool,
    prev_state: u32,
    now: u64,
) -> bool {
    if preempt || prev_state & TASK_UNINTERRUPTIBLE == 0 || prev_state & TASK_NOLOAD != 0 {
        return false;
    }
    let stack_id = match ctx.get_stackid(&CONT_STACKS, BPF_F_FAST_STACK_CMP) {
        Ok(id) => id as u32,
        Err(_) => {
            if let Some(d) = drops() {
                d.stack_failed += 1;
            }
            D_STACK_NONE
        }
    };
    let entry = OffCpu {
        ts_ns: now,
        stack_id,
        window: checkpoint_window(),
    };
    // Created now, in the thread's own context, so it carries its name.
    let _ = thread_entry(prev_tid, prev_tgid);
    if CONT_OFFCPU.insert(&prev_tid, &entry, BPF_ANY).is_err() {
        if let Some(d) = drops() {
            d.inflight_full += 1;
        }
        return false;
    }
    true
}

/// When `next_tid` comes back on a CPU: closes its open D-state sleep, if
/// any, into its totals and the per-stack totals.
#[inline(always)]
pub(crate) fn dstate_in(next_tid: u32, now: u64) {
    let Some(sleep) = CONT_OFFCPU.get_ptr(&next_tid) else {
        return;
    };
    // SAFETY: valid map value pointer; copied before the delete below.
    let sleep = unsafe { *sleep };
    let delta = now.saturating_sub(sleep.ts_ns);
    let w = (sleep.window & 1) as usize;
    if let Some(t) = CONT_THREADS.get_ptr_mut(&next_tid) {
        // SAFETY: valid map value; the thread is off CPU, nobody else writes it.
        let t = unsafe { &mut *t };
        t.dstate_sleeps[w] += 1;
        t.dstate_ns[w] += delta;
        t.last_dstate_start_ns = sleep.ts_ns;
    }
    let key = DStackKey {
        stack_id: sleep.stack_id,
        window: sleep.window & 1,
    };
    if !add_dstack(&key, delta) {
        let fresh = DStackStats {
            sleeps: 1,
            ns: delta,
        };
        // Another CPU may have created the key meanwhile.
        if CONT_DSTACKS.insert(&key, &fresh, BPF_NOEXIST).is_err()
            && !add_dstack(&key, delta)
            && let Some(d) = drops()
        {
            d.dstack_map_full += 1;
        }
    }
    // Last: while the entry is in flight, the counters either do not hold
    // the sleep yet or name it, never neither.
    let _ = CONT_OFFCPU.remove(&next_tid);
}

/// The id in `CONT_WAIT_STACKS` of the current task's user
/// (`BPF_F_USER_STACK`) or kernel stack; `NO_STACK` when there is none (a
/// kernel thread's user stack), `LOST_STACK` (counted) when its bucket holds
/// another stack or the walk failed.
#[inline(always)]
fn wait_stack(ctx: &BtfTracePointContext, flags: u64) -> u32 {
    match ctx.get_stackid(&CONT_WAIT_STACKS, flags) {
        Ok(id) => id as u32,
        Err(EFAULT) => NO_STACK,
        Err(_) => {
            if let Some(d) = drops() {
                d.wait_stack_lost += 1;
            }
            LOST_STACK
        }
    }
}

/// When `prev` (the current task, an observed thread) leaves the CPU: opens
/// its wait, timed from now, with why it leaves; for one switch-out in
/// `CONT_WAIT_EVERY` (chosen at random) also with its stacks, the others
/// under `UNSAMPLED_STACK`. Every wait is timed (a map write, cheap); only
/// the stack walks, the costly part, are sampled. A thread leaving for good
/// (exiting) opens none.
#[inline(always)]
pub(crate) fn wait_out(
    ctx: &BtfTracePointContext,
    prev_tid: u32,
    preempt: bool,
    prev_state: u32,
    now: u64,
) {
    if prev_state & TASK_DEAD_MASK != 0 {
        return;
    }
    // 0, the default: no off-CPU stacks (user space turns them on).
    let every = CONT_WAIT_EVERY.get(0).copied().unwrap_or(0);
    if every == 0 {
        return;
    }
    let every = every.min(WAIT_EVERY_MAX);
    if let Some(d) = drops() {
        d.wait_switch_outs += 1;
    }
    // SAFETY: bpf_get_prandom_u32 has no preconditions.
    let sampled = every <= 1 || unsafe { bpf_get_prandom_u32() } % every == 0;
    if sampled && let Some(d) = drops() {
        d.wait_sampled += 1;
    }
    let wait = if preempt || prev_state == 0 {
        WAIT_RUNQUEUE
    } else if prev_state & TASK_UNINTERRUPTIBLE != 0 && prev_state & TASK_NOLOAD == 0 {
        WAIT_DISK
    } else {
        WAIT_SLEEP
    };
    let (user_stack, kernel_stack) = if sampled {
        (wait_stack(ctx, BPF_F_USER_STACK), wait_stack(ctx, 0))
    } else {
        (UNSAMPLED_STACK, UNSAMPLED_STACK)
    };
    let entry = WaitInflight {
        ts_ns: now,
        user_stack,
        kernel_stack,
        wait,
        window: checkpoint_window() & 1,
        sampled: u32::from(sampled),
        _pad0: 0,
    };
    if CONT_WAITS.insert(&prev_tid, &entry, BPF_ANY).is_err()
        && let Some(d) = drops()
    {
        d.wait_inflight_full += 1;
    }
}

/// When an observed thread comes back on a CPU: adds its time off CPU to
/// its (thread, stacks, why, window) counter and closes the wait. Only this
/// thread's switch-in writes its counters, one CPU at a time: plain adds.
#[inline(always)]
pub(crate) fn wait_in(next_tid: u32, next_tgid: u32, now: u64) {
    let Some(open) = CONT_WAITS.get_ptr(&next_tid) else {
        return;
    };
    // SAFETY: valid map value pointer; copied before the delete below.
    let open = unsafe { *open };
    let _ = CONT_WAITS.remove(&next_tid);
    let ns = now.saturating_sub(open.ts_ns);
    let key = WaitKey {
        tgid: next_tgid,
        tid: next_tid,
        user_stack: open.user_stack,
        kernel_stack: open.kernel_stack,
        wait: open.wait,
        window: open.window,
    };
    if let Some(s) = CONT_WAIT_COUNTS.get_ptr_mut(&key) {
        // SAFETY: valid map value; only this thread's switch-in writes it.
        let s = unsafe { &mut *s };
        s.waits += 1;
        s.ns += ns;
        return;
    }
    let fresh = WaitStats { waits: 1, ns };
    if CONT_WAIT_COUNTS.insert(&key, &fresh, BPF_NOEXIST).is_err()
        && let Some(d) = drops()
    {
        d.wait_map_full += 1;
    }
}

/// The family's own switch program, attached only when the scheduler
/// family's `mdiag_sched_switch` is not (it then does this work itself,
/// `FOLD_DSTATE`): one program per switch, not two.
#[btf_tracepoint(function = "sched_switch")]
pub fn mdiag_cont_switch(ctx: BtfTracePointContext) -> i32 {
    // TP_PROTO(bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int prev_state)
    let preempt: u64 = ctx.arg(0);
    let next: *const u8 = ctx.arg(2);
    let preempt = preempt & 0xff != 0;

    // prev (the current task) going to sleep uninterruptibly.
    let pid_tgid = bpf_get_current_pid_tgid();
    let prev_tid = pid_tgid as u32;
    let prev_tgid = (pid_tgid >> 32) as u32;
    if prev_tid != 0 && observed(prev_tgid) {
        let prev_state = switch_prev_state(&ctx);
        let now = now_ns();
        dstate_out(&ctx, prev_tid, prev_tgid, preempt, prev_state, now);
        wait_out(&ctx, prev_tid, preempt, prev_state, now);
    }

    // next coming back: a map lookup only for observed threads.
    let (Some(next_tid), Some(next_tgid)) = (
        task_u32(next, global(&MDIAG_TASK_PID_OFFSET)),
        task_u32(next, global(&MDIAG_TASK_TGID_OFFSET)),
    ) else {
        return 0;
    };
    if next_tid == 0 || !observed(next_tgid) {
        return 0;
    }
    let now = now_ns();
    dstate_in(next_tid, now);
    wait_in(next_tid, next_tgid, now);
    0
}
