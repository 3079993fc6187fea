//! Contention measurements: futex waits, kernel lock waits and D-state time
//! inside vs outside the target's checkpoint windows (the evidence for the
//! checkpoint-lock-contention rule), per thread class, lock kinds and the
//! top D-state kernel stacks, over the whole recording.
//!
//! The split: a wait is "inside" when a checkpoint of the target was running
//! when it began (decided in the kernel). Inside waits are divided by the
//! checkpoint time (sum of the checkpoints' durations), outside waits by the
//! rest of the wall time; both are "ms of waiting per second", and their
//! ratio says how much more the threads wait while a checkpoint runs.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::format_number;
use crate::recording::model::Recording;
use crate::recording::{KernelStack, WindowSplit};
use crate::threads::thread_class;

/// D-state stacks listed, by time.
pub const TOP_STACKS: usize = 5;
/// Frames shown per listed stack (after the plumbing).
pub const STACK_FRAMES: usize = 6;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContentionMeasurements {
    /// Wall time of the recording, seconds.
    pub duration_s: f64,
    /// Checkpoints seen and their summed duration (the "inside" time), seconds.
    pub checkpoints: u64,
    pub checkpoint_s: f64,
    /// Futex waits (syscalls family), kernel lock waits and D-state sleeps
    /// (contention family); `None` when that family recorded nothing.
    pub futex: Option<SplitMeasurement>,
    pub kernel_locks: Option<SplitMeasurement>,
    pub dstate: Option<SplitMeasurement>,
    /// Per thread class, classes with any figure, most waiting first.
    pub classes: Vec<ClassContention>,
    /// Kernel lock waits by kind, most time first.
    pub lock_kinds: Vec<LockKindMeasurement>,
    /// The [`TOP_STACKS`] D-state stacks with most time.
    pub top_stacks: Vec<StackMeasurement>,
    /// Waits lost or not timed (all drop counters of the family).
    pub drops: u64,
}

/// One figure split by checkpoint window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SplitMeasurement {
    pub inside_count: u64,
    pub inside_ms: f64,
    pub outside_count: u64,
    pub outside_ms: f64,
    /// Wait (ms) per second of checkpoint time; `None` without checkpoint time.
    pub inside_ms_per_s: Option<f64>,
    /// Wait (ms) per second of the rest of the wall time.
    pub outside_ms_per_s: Option<f64>,
    /// `inside_ms_per_s / outside_ms_per_s`; `None` when either is missing
    /// or the outside rate is zero.
    pub ratio: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassContention {
    /// See `threads::thread_class`: conn, checkpointer, eviction, ...
    pub class: String,
    pub threads: u64,
    /// Milliseconds of waiting per second of wall time, summed over the class.
    pub futex_wait_ms_per_s: f64,
    /// The class's futex wait per second of checkpoint time / of the rest
    /// (as [`SplitMeasurement`]); `None` without such time.
    pub futex_inside_ms_per_s: Option<f64>,
    pub futex_outside_ms_per_s: Option<f64>,
    pub lock_wait_ms_per_s: f64,
    pub dstate_ms_per_s: f64,
    /// Scheduler family figures of the class.
    pub involuntary_per_s: f64,
    pub wakeup_preempted_per_s: f64,
    pub runq_mean_us: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockKindMeasurement {
    pub kind: String,
    pub waits: u64,
    pub wait_ms: f64,
    pub inside_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackMeasurement {
    pub stack_id: u32,
    /// The first frame that is not scheduler / wait plumbing.
    pub signature: Option<String>,
    /// Up to [`STACK_FRAMES`] frames from the signature outwards.
    pub frames: Vec<String>,
    pub sleeps: u64,
    pub total_ms: f64,
    pub inside_ms: f64,
}

/// The split of `w` given the checkpoint time and the rest of the wall time.
pub fn split(w: &WindowSplit, checkpoint_s: f64, outside_s: f64) -> SplitMeasurement {
    let rate = |ns: u64, s: f64| (s > 0.0).then(|| ns as f64 / 1e6 / s);
    let inside_ms_per_s = rate(w.inside_ns, checkpoint_s);
    let outside_ms_per_s = rate(w.outside_ns, outside_s);
    let ratio = match (inside_ms_per_s, outside_ms_per_s) {
        (Some(i), Some(o)) if o > 0.0 => Some(i / o),
        _ => None,
    };
    SplitMeasurement {
        inside_count: w.inside,
        inside_ms: w.inside_ns as f64 / 1e6,
        outside_count: w.outside,
        outside_ms: w.outside_ns as f64 / 1e6,
        inside_ms_per_s,
        outside_ms_per_s,
        ratio,
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

/// Contention measurements of `rec`; `None` when neither the syscalls nor
/// the contention family recorded a slice.
pub fn build(rec: &Recording) -> Option<ContentionMeasurements> {
    let has_cont = rec.slices.iter().any(|s| s.contention.is_some());
    let has_sys = rec.slices.iter().any(|s| s.syscalls.is_some());
    if !has_cont && !has_sys {
        return None;
    }
    let wall_ns: u64 = rec.slices.iter().map(|s| s.duration_ms * 1_000_000).sum();
    let ckpts: Vec<_> = rec
        .slices
        .iter()
        .filter_map(|s| s.wiredtiger.as_ref())
        .flat_map(|w| &w.checkpoints)
        .collect();
    let ckpt_ns = union_ns(ckpts.iter().map(|c| (c.start_ns, c.duration_ns))).min(wall_ns);
    let duration_s = wall_ns as f64 / 1e9;
    let checkpoint_s = ckpt_ns as f64 / 1e9;
    let outside_s = (wall_ns - ckpt_ns) as f64 / 1e9;

    // Thread names: the contention family's (read from /proc, so current),
    // else the sched family's (the name at the thread's first switch).
    let mut comms: HashMap<u32, String> = HashMap::new();
    for s in &rec.slices {
        if let Some(c) = &s.contention {
            for t in &c.threads {
                comms.insert(t.tid, t.comm.clone());
            }
        }
    }
    for s in &rec.slices {
        if let Some(sched) = &s.sched {
            for t in &sched.threads {
                comms.entry(t.tid).or_insert_with(|| t.comm.clone());
            }
        }
    }
    let class_of = |tid: u32| thread_class(comms.get(&tid).map_or("", String::as_str));

    let mut futex = WindowSplit::default();
    let mut locks = WindowSplit::default();
    let mut dstate = WindowSplit::default();
    let mut classes: BTreeMap<&'static str, ClassTotals> = BTreeMap::new();
    let mut kinds: BTreeMap<String, WindowSplit> = BTreeMap::new();
    let mut stacks: BTreeMap<u32, WindowSplit> = BTreeMap::new();
    let mut drops = 0;
    for s in &rec.slices {
        if let Some(sys) = &s.syscalls {
            for t in &sys.threads {
                if t.futex_waits == 0 && t.futex_wait_ns == 0 {
                    continue;
                }
                let inside_ns = t.futex_wait_ns_in_checkpoint.min(t.futex_wait_ns);
                let inside = t.futex_waits_in_checkpoint.min(t.futex_waits);
                let w = WindowSplit {
                    outside: t.futex_waits - inside,
                    outside_ns: t.futex_wait_ns - inside_ns,
                    inside,
                    inside_ns,
                };
                futex.add(&w);
                let c = classes.entry(class_of(t.tid)).or_default();
                c.tids.insert(t.tid);
                c.futex_ns += t.futex_wait_ns;
                c.futex.add(&w);
            }
        }
        if let Some(cont) = &s.contention {
            for t in &cont.threads {
                locks.add(&t.lock);
                dstate.add(&t.dstate);
                let c = classes.entry(class_of(t.tid)).or_default();
                c.tids.insert(t.tid);
                c.lock_ns += t.lock.ns();
                c.dstate_ns += t.dstate.ns();
            }
            for k in &cont.lock_kinds {
                kinds.entry(k.kind.clone()).or_default().add(&k.waits);
            }
            for st in &cont.dstate_stacks {
                stacks.entry(st.stack_id).or_default().add(&st.sleeps);
            }
            let d = &cont.drops;
            drops += d.inflight_full + d.thread_map_full + d.stack_failed + d.dstack_map_full;
        }
    }
    // Scheduler figures of the classes that waited.
    for s in &rec.slices {
        let Some(sched) = &s.sched else { continue };
        for t in &sched.threads {
            if let Some(c) = classes.get_mut(class_of(t.tid)) {
                c.tids.insert(t.tid);
                c.involuntary += t.involuntary;
                c.wakeup_preempted += t.wakeup_preempted;
                c.runq_ns += t.runq_delay_ns;
                c.runq_delays += t.runq_delays;
            }
        }
    }
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

    let by_id: HashMap<u32, &KernelStack> =
        rec.kernel_stacks.iter().map(|k| (k.stack_id, k)).collect();
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

    Some(ContentionMeasurements {
        duration_s,
        checkpoints: ckpts.len() as u64,
        checkpoint_s,
        futex: has_sys.then(|| split(&futex, checkpoint_s, outside_s)),
        kernel_locks: has_cont.then(|| split(&locks, checkpoint_s, outside_s)),
        dstate: has_cont.then(|| split(&dstate, checkpoint_s, outside_s)),
        classes: class_rows,
        lock_kinds,
        top_stacks,
        drops,
    })
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

/// "futex waits 120.0 ms/s inside checkpoints vs 3.0 ms/s outside (40×)".
pub fn split_line(name: &str, s: &SplitMeasurement) -> String {
    if s.inside_ms_per_s.is_none() {
        // No checkpoint time: everything is outside; say it once, plainly.
        return format!(
            "{name}: {} ms/s ({} waits, {}), all outside checkpoint windows",
            format_number(s.outside_ms_per_s.unwrap_or(0.0)),
            s.outside_count,
            total(s.outside_ms)
        );
    }
    let rate = |r: Option<f64>| {
        r.map_or_else(
            || "n/a".to_owned(),
            |v| format!("{} ms/s", format_number(v)),
        )
    };
    let ratio = match s.ratio {
        Some(r) => format!(" ({r:.1}×)"),
        None => String::new(),
    };
    format!(
        "{name}: {} inside checkpoints ({} waits, {}) vs {} outside ({} waits, {}){ratio}",
        rate(s.inside_ms_per_s),
        s.inside_count,
        total(s.inside_ms),
        rate(s.outside_ms_per_s),
        s.outside_count,
        total(s.outside_ms),
    )
}

/// A total wait: "90.0 ms", "1500 ms", or in seconds from 10 s up ("64.0 s").
fn total(ms: f64) -> String {
    if ms >= 10_000.0 {
        format!("{} s", format_number(ms / 1000.0))
    } else {
        format!("{} ms", format_number(ms))
    }
}

/// The window line: "2 checkpoints, 1.5 s of 10.0 s" or "no checkpoint windows".
pub fn windows_line(c: &ContentionMeasurements) -> String {
    if c.checkpoints == 0 {
        format!(
            "no checkpoint windows in {:.1} s: every wait counts as outside",
            c.duration_s
        )
    } else {
        format!(
            "{} checkpoints ran for {:.2} s of {:.1} s recorded",
            c.checkpoints, c.checkpoint_s, c.duration_s
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn split_divides_by_window_time_and_gives_the_ratio() {
        let w = WindowSplit {
            outside: 10,
            outside_ns: 90_000_000, // 90 ms over 9 s outside → 10 ms/s
            inside: 5,
            inside_ns: 500_000_000, // 500 ms over 1 s inside → 500 ms/s
        };
        let s = split(&w, 1.0, 9.0);
        assert_eq!(s.inside_ms_per_s, Some(500.0));
        assert_eq!(s.outside_ms_per_s, Some(10.0));
        assert_eq!(s.ratio, Some(50.0));
        assert_eq!((s.inside_count, s.outside_count), (5, 10));
        assert_eq!(
            split_line("futex waits", &s),
            "futex waits: 500 ms/s inside checkpoints (5 waits, 500 ms) vs 10.0 ms/s outside (10 waits, 90.0 ms) (50.0×)"
        );
    }

    #[test]
    fn no_checkpoint_time_means_no_inside_rate_and_no_ratio() {
        let w = WindowSplit {
            outside: 3,
            outside_ns: 30_000_000,
            ..Default::default()
        };
        let s = split(&w, 0.0, 10.0);
        assert_eq!(s.inside_ms_per_s, None);
        assert_eq!(s.outside_ms_per_s, Some(3.0));
        assert_eq!(s.ratio, None);
        assert_eq!(
            split_line("D-state sleeps", &s),
            "D-state sleeps: 3.00 ms/s (3 waits, 30.0 ms), all outside checkpoint windows"
        );
        // A quiet outside window gives no ratio either (no division by zero).
        let s = split(&WindowSplit::default(), 1.0, 9.0);
        assert_eq!(s.ratio, None);
        assert_eq!(s.inside_ms_per_s, Some(0.0));
    }

    /// 10 s of the oversubscribed conn threads, plus: one 1 s checkpoint
    /// (two overlapping calls: 1.0 s of window), futex waits of conn1001
    /// (inside 400 ms, outside 90 ms), a lock wait and D-state sleeps of a
    /// Checkpointer thread, one stack.
    pub(crate) fn recording() -> Recording {
        use crate::recording::{
            Checkpoint, ContentionSlice, DStateStackSlice, LockKindSlice, SyscallsSlice,
            ThreadContentionSlice, ThreadSyscallSlice, WiredTigerSlice,
        };
        let mut rec = crate::rules::testdata::oversubscribed();
        rec.slices[2].wiredtiger = Some(WiredTigerSlice {
            checkpoints: vec![
                Checkpoint {
                    tid: 7,
                    start_ns: 1_000_000_000,
                    duration_ns: 1_000_000_000,
                    ..Default::default()
                },
                Checkpoint {
                    tid: 8,
                    start_ns: 1_000_000_000,
                    duration_ns: 600_000_000,
                    ..Default::default()
                },
            ],
            ..Default::default()
        });
        for s in &mut rec.slices {
            s.syscalls = Some(SyscallsSlice::default());
        }
        rec.slices[2].syscalls = Some(SyscallsSlice {
            threads: vec![ThreadSyscallSlice {
                tid: 1001,
                tgid: 1000,
                futex_waits: 6,
                futex_wait_ns: 490_000_000,
                futex_waits_in_checkpoint: 4,
                futex_wait_ns_in_checkpoint: 400_000_000,
                ..Default::default()
            }],
            ..Default::default()
        });
        let w = |outside, outside_ns, inside, inside_ns| WindowSplit {
            outside,
            outside_ns,
            inside,
            inside_ns,
        };
        rec.slices[3].contention = Some(ContentionSlice {
            threads: vec![ThreadContentionSlice {
                tid: 7,
                tgid: 1000,
                comm: "Checkpointer".into(),
                lock: w(1, 1_000_000, 1, 9_000_000),
                dstate: w(2, 20_000_000, 3, 30_000_000),
            }],
            lock_kinds: vec![LockKindSlice {
                kind: "rwsem:W".into(),
                flags: 4,
                waits: w(1, 1_000_000, 1, 9_000_000),
            }],
            dstate_stacks: vec![DStateStackSlice {
                stack_id: 3,
                sleeps: w(2, 20_000_000, 3, 30_000_000),
            }],
            ..Default::default()
        });
        rec.kernel_stacks = vec![KernelStack {
            stack_id: 3,
            frames: vec!["schedule+0x1".into(), "xfs_ilock+0x2".into()],
            signature: Some("xfs_ilock".into()),
        }];
        rec
    }

    #[test]
    fn the_recording_is_split_by_window_grouped_by_class_with_stacks() {
        let c = build(&recording()).unwrap();
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
    fn every_format_shows_the_split_the_stacks_and_the_classes() {
        let rec = recording();
        let report = crate::explain::explain(
            &rec,
            &crate::rules::RuleSet::builtin().unwrap(),
            Some("x86_64"),
            None,
        )
        .unwrap();
        let term = crate::report::terminal::render(&report, false);
        let flat = term.split_whitespace().collect::<Vec<_>>().join(" ");
        for want in [
            "Contention 2 checkpoints ran for 1.00 s of 10.0 s recorded",
            "futex waits: 400 ms/s inside checkpoints (4 waits, 400 ms) vs 10.0 ms/s outside (2 waits, 90.0 ms) (40.0×)",
            "kernel locks by kind: rwsem:W 2 waits 10.0 ms",
            "D state in xfs_ilock: 5 sleeps, 50.0 ms (30.0 ms inside checkpoints); xfs_ilock+0x2",
            "checkpointer 1",
        ] {
            assert!(flat.contains(want), "{want:?} missing from:\n{term}");
        }
        let md = crate::report::markdown::render(&report);
        for want in [
            "### Contention",
            "- Futex waits: 400 ms/s inside checkpoints",
            "| `conn` | 4 | 49.0 | 400.0 / 10.0 |",
            "- D state in `xfs_ilock`: 5 sleeps",
        ] {
            assert!(md.contains(want), "{want:?} missing from:\n{md}");
        }
        let json = crate::report::json::render(&report).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["measurements"]["contention"]["futex"]["ratio"], 40.0);
    }

    #[test]
    fn without_syscalls_or_contention_there_is_nothing_to_split() {
        assert_eq!(build(&crate::rules::testdata::oversubscribed()), None);
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
