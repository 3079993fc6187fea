//! How the contention measurements are built from a recording's window
//! (its slices merged, `Recording::window`; the sections this family joins
//! are a [`ContentionWindow`]): the
//! checkpoint windows (their union), futex waits from the syscalls family,
//! kernel lock waits and D-state sleeps from the contention family, split by
//! window and grouped by thread class, with the scheduler figures of the
//! classes that waited and the D-state stacks with most time.

use std::collections::{BTreeMap, HashMap};

use super::measurements::{
    ClassContention, ContentionMeasurements, LockKindMeasurement, STACK_FRAMES, StackMeasurement,
    TOP_STACKS, split,
};
use super::section::{ContentionSlice, KernelStack, WindowSplit};
use crate::family::sched::SchedSlice;
use crate::family::syscalls::{SyscallsSlice, ThreadSyscallSlice};
use crate::family::wiredtiger::WiredTigerSlice;
use crate::kit::family::FamilyWindow;
use crate::threads::mongod_class;

/// What the contention measurements are built from: the sections of the
/// four families they join over one window (lock waits and D-state sleeps,
/// futex waits, the scheduler figures of the classes that waited, the
/// checkpoint windows), the time the window covers and the kernel stacks the
/// recording keeps beside its slices ([`ContentionWindow::of`]).
#[derive(Debug, Clone, Copy)]
pub struct ContentionWindow<'a> {
    pub contention: Option<&'a ContentionSlice>,
    pub syscalls: Option<&'a SyscallsSlice>,
    pub sched: Option<&'a SchedSlice>,
    pub wiredtiger: Option<&'a WiredTigerSlice>,
    /// Milliseconds the window covers.
    pub window_ms: u64,
    pub kernel_stacks: &'a [KernelStack],
}

impl<'a> ContentionWindow<'a> {
    /// What the contention measurements join over the window of `w`: its
    /// own section, the syscalls, sched and WiredTiger sections of the same
    /// window, and the kernel stacks the recording keeps for it.
    pub fn of(w: &FamilyWindow<'a, ContentionSlice>) -> Self {
        ContentionWindow {
            contention: w.section,
            syscalls: w.other(),
            sched: w.other(),
            wiredtiger: w.other(),
            window_ms: w.window_ms,
            kernel_stacks: w.kept::<Vec<KernelStack>>().map_or(&[], Vec::as_slice),
        }
    }
}

#[derive(Default)]
struct ClassTotals {
    tids: std::collections::BTreeSet<u32>,
    futex_ns: u64,
    futex: WindowSplit,
    lock_ns: u64,
    dstate_ns: u64,
    involuntary: u64,
    wakeup_preempted: u64,
    runq_ns: u64,
    runq_delays: u64,
}

/// Contention measurements of a window of a recording (threads matched by
/// tid and summed, checkpoints appended); `None` when neither the syscalls
/// nor the contention family recorded a slice.
pub fn build(w: &ContentionWindow) -> Option<ContentionMeasurements> {
    let (has_cont, has_sys) = (w.contention.is_some(), w.syscalls.is_some());
    if !has_cont && !has_sys {
        return None;
    }
    let wall_ns = w.window_ms.saturating_mul(1_000_000);
    let ckpts: Vec<_> = w.wiredtiger.iter().flat_map(|w| &w.checkpoints).collect();
    let ckpt_ns = union_ns(ckpts.iter().map(|c| (c.start_ns, c.duration_ns))).min(wall_ns);
    let duration_s = wall_ns as f64 / 1e9;
    let checkpoint_s = ckpt_ns as f64 / 1e9;
    let outside_s = (wall_ns - ckpt_ns) as f64 / 1e9;
    let sums = Sums::of(w);
    Some(ContentionMeasurements {
        duration_s,
        checkpoints: ckpts.len() as u64,
        checkpoint_s,
        futex: has_sys.then(|| split(&sums.futex, checkpoint_s, outside_s)),
        kernel_locks: has_cont.then(|| split(&sums.locks, checkpoint_s, outside_s)),
        dstate: has_cont.then(|| split(&sums.dstate, checkpoint_s, outside_s)),
        classes: class_rows(sums.classes, duration_s, checkpoint_s, outside_s),
        lock_kinds: lock_kind_rows(sums.kinds),
        top_stacks: top_stacks(w.kernel_stacks, sums.stacks),
        drops: sums.drops,
    })
}

/// What the syscalls and contention families recorded, summed: by window,
/// by thread class (with the scheduler figures of the classes that
/// waited), by lock kind and by D-state stack.
#[derive(Default)]
struct Sums {
    futex: WindowSplit,
    locks: WindowSplit,
    dstate: WindowSplit,
    classes: BTreeMap<&'static str, ClassTotals>,
    kinds: BTreeMap<String, WindowSplit>,
    stacks: BTreeMap<u32, WindowSplit>,
    drops: u64,
}

impl Sums {
    fn of(w: &ContentionWindow) -> Sums {
        // Thread names: the contention family's (read from /proc, so current),
        // else the sched family's.
        let mut comms: HashMap<u32, &str> = HashMap::new();
        for t in w.contention.iter().flat_map(|c| &c.threads) {
            comms.insert(t.tid, &t.comm);
        }
        for t in w.sched.iter().flat_map(|s| &s.threads) {
            comms.entry(t.tid).or_insert(&t.comm);
        }
        let class_of = |tid: u32| mongod_class(comms.get(&tid).copied().unwrap_or(""));

        let mut sums = Sums::default();
        for t in w.syscalls.iter().flat_map(|s| &s.threads) {
            if t.futex_waits == 0 && t.futex_wait_ns == 0 {
                continue;
            }
            let split = futex_split(t);
            sums.futex.add(&split);
            let c = sums.classes.entry(class_of(t.tid)).or_default();
            c.tids.insert(t.tid);
            c.futex_ns += t.futex_wait_ns;
            c.futex.add(&split);
        }
        if let Some(cont) = w.contention {
            for t in &cont.threads {
                sums.locks.add(&t.lock);
                sums.dstate.add(&t.dstate);
                let c = sums.classes.entry(class_of(t.tid)).or_default();
                c.tids.insert(t.tid);
                c.lock_ns += t.lock.ns();
                c.dstate_ns += t.dstate.ns();
            }
            for k in &cont.lock_kinds {
                sums.kinds.entry(k.kind.clone()).or_default().add(&k.waits);
            }
            for st in &cont.dstate_stacks {
                sums.stacks.entry(st.stack_id).or_default().add(&st.sleeps);
            }
            let d = &cont.drops;
            sums.drops = d.inflight_full + d.thread_map_full + d.stack_failed + d.dstack_map_full;
        }
        // Scheduler figures of the classes that waited.
        for t in w.sched.iter().flat_map(|s| &s.threads) {
            if let Some(c) = sums.classes.get_mut(class_of(t.tid)) {
                c.tids.insert(t.tid);
                c.involuntary += t.involuntary;
                c.wakeup_preempted += t.wakeup_preempted;
                c.runq_ns += t.runq_delay_ns;
                c.runq_delays += t.runq_delays;
            }
        }
        sums
    }
}

/// One row per thread class that waited, rates per second of the recording,
/// the class that waited most first.
fn class_rows(
    classes: BTreeMap<&'static str, ClassTotals>,
    duration_s: f64,
    checkpoint_s: f64,
    outside_s: f64,
) -> Vec<ClassContention> {
    let per_s = |v: f64| {
        if duration_s > 0.0 {
            v / duration_s
        } else {
            0.0
        }
    };
    let mut class_rows: Vec<ClassContention> = classes
        .into_iter()
        .map(|(class, c)| {
            let f = split(&c.futex, checkpoint_s, outside_s);
            ClassContention {
                class: class.to_owned(),
                threads: c.tids.len() as u64,
                futex_wait_ms_per_s: per_s(c.futex_ns as f64 / 1e6),
                futex_inside_ms_per_s: f.inside_ms_per_s,
                futex_outside_ms_per_s: f.outside_ms_per_s,
                lock_wait_ms_per_s: per_s(c.lock_ns as f64 / 1e6),
                dstate_ms_per_s: per_s(c.dstate_ns as f64 / 1e6),
                involuntary_per_s: per_s(c.involuntary as f64),
                wakeup_preempted_per_s: per_s(c.wakeup_preempted as f64),
                runq_mean_us: if c.runq_delays > 0 {
                    c.runq_ns as f64 / c.runq_delays as f64 / 1e3
                } else {
                    0.0
                },
            }
        })
        .collect();
    let waited =
        |c: &ClassContention| c.futex_wait_ms_per_s + c.lock_wait_ms_per_s + c.dstate_ms_per_s;
    class_rows.sort_by(|a, b| waited(b).total_cmp(&waited(a)).then(a.class.cmp(&b.class)));
    class_rows
}

/// Kernel lock waits by lock kind, the most waited first.
fn lock_kind_rows(kinds: BTreeMap<String, WindowSplit>) -> Vec<LockKindMeasurement> {
    let mut lock_kinds: Vec<LockKindMeasurement> = kinds
        .into_iter()
        .map(|(kind, w)| LockKindMeasurement {
            kind,
            waits: w.count(),
            wait_ms: w.ns() as f64 / 1e6,
            inside_ms: w.inside_ns as f64 / 1e6,
        })
        .collect();
    lock_kinds.sort_by(|a, b| b.wait_ms.total_cmp(&a.wait_ms).then(a.kind.cmp(&b.kind)));
    lock_kinds
}

/// The D-state stacks with most time, with their frames.
fn top_stacks(
    kernel_stacks: &[KernelStack],
    stacks: BTreeMap<u32, WindowSplit>,
) -> Vec<StackMeasurement> {
    let by_id: HashMap<u32, &KernelStack> = kernel_stacks.iter().map(|k| (k.stack_id, k)).collect();
    let mut top_stacks: Vec<StackMeasurement> = stacks
        .into_iter()
        .map(|(stack_id, w)| {
            let k = by_id.get(&stack_id);
            StackMeasurement {
                stack_id,
                signature: k.and_then(|k| k.signature.clone()),
                frames: k.map(|k| shown_frames(k)).unwrap_or_default(),
                sleeps: w.count(),
                total_ms: w.ns() as f64 / 1e6,
                inside_ms: w.inside_ns as f64 / 1e6,
            }
        })
        .collect();
    top_stacks.sort_by(|a, b| {
        b.total_ms
            .total_cmp(&a.total_ms)
            .then(a.stack_id.cmp(&b.stack_id))
    });
    top_stacks.truncate(TOP_STACKS);
    top_stacks
}

/// A thread's futex waits split by checkpoint window (the inside part
/// clamped to the whole, which the probe's crediting keeps it within).
fn futex_split(t: &ThreadSyscallSlice) -> WindowSplit {
    let inside_ns = t.futex_wait_ns_in_checkpoint.min(t.futex_wait_ns);
    let inside = t.futex_waits_in_checkpoint.min(t.futex_waits);
    WindowSplit {
        outside: t.futex_waits - inside,
        outside_ns: t.futex_wait_ns - inside_ns,
        inside,
        inside_ns,
    }
}

/// Length of the union of `(start, duration)` intervals: overlapping
/// checkpoints (a second one waiting for WiredTiger's checkpoint lock while
/// the first runs) count once.
pub fn union_ns(intervals: impl Iterator<Item = (u64, u64)>) -> u64 {
    let mut v: Vec<(u64, u64)> = intervals.map(|(s, d)| (s, s.saturating_add(d))).collect();
    v.sort_unstable();
    let mut total = 0;
    let mut cur: Option<(u64, u64)> = None;
    for (s, e) in v {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    total + cur.map_or(0, |(s, e)| e - s)
}

/// The frames from the signature outwards (the plumbing above it left out).
fn shown_frames(k: &KernelStack) -> Vec<String> {
    let start = k
        .signature
        .as_ref()
        .and_then(|sig| {
            k.frames
                .iter()
                .position(|f| f.split('+').next() == Some(sig.as_str()))
        })
        .unwrap_or(0);
    k.frames
        .iter()
        .skip(start)
        .take(STACK_FRAMES)
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::report::tests::recording;
    use super::*;

    #[test]
    fn the_recording_is_split_by_window_grouped_by_class_with_stacks() {
        let rec = recording();
        let c = build(&ContentionWindow::of(&rec.family_window(&rec.window()))).unwrap();
        assert_eq!(
            (c.duration_s, c.checkpoints, c.checkpoint_s),
            (10.0, 2, 1.0)
        );
        let f = c.futex.unwrap();
        // 400 ms in 1 s of windows vs 90 ms in 9 s outside: 400 vs 10 ms/s.
        assert_eq!(f.inside_ms_per_s, Some(400.0));
        assert_eq!(f.outside_ms_per_s, Some(10.0));
        assert_eq!(f.ratio, Some(40.0));
        let d = c.dstate.unwrap();
        assert_eq!((d.inside_count, d.outside_count), (3, 2));
        assert_eq!(d.inside_ms_per_s, Some(30.0));
        assert_eq!(c.classes[0].class, "conn");
        // 490 ms of futex wait over 10 s; the four conn threads' sched figures.
        assert_eq!(c.classes[0].futex_wait_ms_per_s, 49.0);
        assert_eq!(c.classes[0].futex_inside_ms_per_s, Some(400.0));
        assert_eq!(c.classes[0].futex_outside_ms_per_s, Some(10.0));
        assert_eq!(c.classes[0].threads, 4);
        assert!(c.classes[0].involuntary_per_s > 60.0);
        assert_eq!(c.classes[1].class, "checkpointer");
        assert_eq!(c.classes[1].dstate_ms_per_s, 5.0);
        assert_eq!(c.lock_kinds[0].kind, "rwsem:W");
        assert_eq!(c.lock_kinds[0].inside_ms, 9.0);
        assert_eq!(c.top_stacks[0].signature.as_deref(), Some("xfs_ilock"));
        assert_eq!(c.top_stacks[0].frames, vec!["xfs_ilock+0x2"]);
        assert_eq!(c.top_stacks[0].total_ms, 50.0);
    }

    #[test]
    fn without_syscalls_or_contention_there_is_nothing_to_split() {
        assert_eq!(
            {
                let rec = crate::rules::testdata::oversubscribed();
                build(&ContentionWindow::of(&rec.family_window(&rec.window())))
            },
            None
        );
    }

    #[test]
    fn overlapping_checkpoints_count_once() {
        assert_eq!(union_ns([(0, 10), (5, 10), (20, 5)].into_iter()), 15 + 5);
        assert_eq!(union_ns([(20, 5), (0, 100)].into_iter()), 100);
        assert_eq!(union_ns(std::iter::empty()), 0);
    }

    #[test]
    fn frames_are_shown_from_the_signature_outwards() {
        let k = KernelStack {
            stack_id: 1,
            frames: ["__schedule+0x1", "schedule+0x2", "xfs_ilock+0x3", "a+0x4"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            signature: Some("xfs_ilock".into()),
        };
        assert_eq!(shown_frames(&k), vec!["xfs_ilock+0x3", "a+0x4"]);
    }
}
