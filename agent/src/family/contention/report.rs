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

use super::measurements::{ContentionMeasurements, SplitMeasurement};
use crate::findings::format_number;
use crate::kit::view::{Block, Cell, Column, Line, Section, Table, md_cell, md_code, truncate};

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

/// The contention section: the windows, the inside/outside split, lock
/// kinds, D-state stacks and thread classes.
pub fn section(c: &ContentionMeasurements) -> Section {
    let mut out = Section::new(Some("Contention"));
    let windows = windows_line(c);
    out.push(Line::title("Contention", Some(windows.clone()), true))
        .push(Block::Para(format!(
            "{}.",
            crate::kit::view::capitalise(&windows)
        )));
    let mut bullets = Vec::new();
    for (name, s) in [
        ("futex waits", &c.futex),
        ("kernel lock waits", &c.kernel_locks),
        ("D-state sleeps", &c.dstate),
    ] {
        if let Some(s) = s {
            out.push(Line::wrapped("    ", split_line(name, s)));
            bullets.push(split_line(&crate::kit::view::capitalise(name), s));
        }
    }
    if !c.lock_kinds.is_empty() {
        let kinds: Vec<String> = c
            .lock_kinds
            .iter()
            .map(|k| format!("{} {} waits {:.1} ms", k.kind, k.waits, k.wait_ms))
            .collect();
        let line = format!("kernel locks by kind: {}", kinds.join(", "));
        out.push(Line::wrapped("    ", line));
    }
    for k in &c.lock_kinds {
        bullets.push(format!(
            "Kernel lock {}: {} waits, {:.1} ms ({:.1} ms inside checkpoints)",
            md_code(&k.kind),
            k.waits,
            k.wait_ms,
            k.inside_ms
        ));
    }
    for st in &c.top_stacks {
        let signature = st.signature.as_deref().unwrap_or("(unknown)");
        let frames = st.frames.join(" < ");
        let figures = format!(
            "{} sleeps, {:.1} ms ({:.1} ms inside checkpoints)",
            st.sleeps, st.total_ms, st.inside_ms
        );
        out.push(Line::wrapped(
            "    ",
            format!("D state in {signature}: {figures}; {frames}"),
        ));
        bullets.push(format!(
            "D state in {}: {figures}: {}",
            md_code(signature),
            md_cell(&frames)
        ));
    }
    out.push(Block::Bullets(bullets));
    out.push(Block::Table(class_table(c)));
    if c.drops > 0 {
        out.push(Line::plain(
            "    ",
            format!("{} waits not timed (maps full or no stack)", c.drops),
        ));
    }
    out
}

/// The thread classes that waited: their waits and scheduler figures.
fn class_table(c: &ContentionMeasurements) -> Table {
    let mut t = Table::new(
        "    ",
        vec![
            Column::text("class", "Thread class", "", 15),
            Column::num("threads", "Threads", " ", 7),
            Column::num("futex ms/s", "Futex ms/s", " ", 10),
            Column::num(
                "(in/out ckpt)",
                "Futex ms/s inside / outside checkpoints",
                " ",
                13,
            ),
            Column::num("lock ms/s", "Lock ms/s", " ", 9),
            Column::num("D ms/s", "D-state ms/s", " ", 8),
            Column::num("invol/s", "Involuntary/s", " ", 8),
            Column::num("wkpre/s", "Wakeup-preempted/s", " ", 8),
            Column::num("runq µs", "Run-queue mean µs", " ", 8),
        ],
    );
    t.dim_header = false;
    let rate = |r: Option<f64>, decimals: usize| {
        r.map_or_else(|| "-".to_owned(), |v| format!("{v:.decimals$}"))
    };
    let one = |v: f64| Cell::new(format!("{v:.1}"));
    for k in &c.classes {
        let (inside, outside) = (k.futex_inside_ms_per_s, k.futex_outside_ms_per_s);
        t.rows.push(
            vec![
                Cell::two(truncate(&k.class, 15), md_code(&k.class)),
                Cell::new(k.threads.to_string()),
                one(k.futex_wait_ms_per_s),
                Cell::two(
                    format!("{}/{}", rate(inside, 0), rate(outside, 0)),
                    format!("{} / {}", rate(inside, 1), rate(outside, 1)),
                ),
                one(k.lock_wait_ms_per_s),
                one(k.dstate_ms_per_s),
                one(k.involuntary_per_s),
                one(k.wakeup_preempted_per_s),
                one(k.runq_mean_us),
            ]
            .into(),
        );
    }
    t
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::measurements::split;
    use super::*;
    use crate::recording::{KernelStack, WindowSplit, model::Recording};

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
}
