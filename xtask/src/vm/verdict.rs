//! The verdict on one kernel: each family's status in each recording
//! against the expectation table, the host-wide recording's switch total
//! against the guest's `/proc/stat`, and the table printed from them.
//!
//! Why both checks: a family that attaches may still measure wrong, and the
//! context switch total is the one number the guest's kernel counts too.
use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use serde_json::Value;

use super::{
    Line,
    console::{GuestLog, RunLog},
    expect::{EXPECTATIONS, Expectation, Need, need_for},
    initramfs::RUNS,
    status::{Status, statuses, summarize},
};
use crate::say;

/// How far the recorded switch total may be from `/proc/stat`'s.
const SWITCH_TOLERANCE: f64 = 0.10;

/// The host-wide recording's switches against the guest's `/proc/stat`.
#[derive(Debug, PartialEq)]
enum SwitchCheck {
    Skipped(String),
    Done {
        /// Switches in the recording: `switches_per_s × duration_s`.
        recorded: f64,
        /// Its `duration_s`.
        secs: f64,
        /// How much `ctxt` grew in the guest's window, and how long that was.
        ctxt: u64,
        window: f64,
        /// |recorded − expected| / expected, where expected is `ctxt` scaled
        /// from the guest's window to the recording's duration (the two
        /// windows start within a poll of each other, but the guest's sleep
        /// may run long under TCG).
        off: f64,
    },
}

fn switch_check(run: &RunLog, report: Option<&Value>) -> SwitchCheck {
    let sched = report.map(|r| &r["measurements"]["sched"]);
    let (Some(per_s), Some(secs)) = (
        sched.and_then(|s| s["switches_per_s"].as_f64()),
        sched.and_then(|s| s["duration_s"].as_f64()),
    ) else {
        return SwitchCheck::Skipped("the recording has no sched measurements".into());
    };
    let (Some((start, t0)), Some((end, t1))) = (run.ctxt_start, run.ctxt_end) else {
        return SwitchCheck::Skipped("the guest printed no ctxt lines".into());
    };
    let ctxt = end.saturating_sub(start);
    let window = t1 - t0;
    if ctxt == 0 || window <= 0.0 {
        return SwitchCheck::Skipped("/proc/stat ctxt or the uptime did not move".into());
    }
    let recorded = per_s * secs;
    let expected = ctxt as f64 * secs / window;
    SwitchCheck::Done {
        recorded,
        secs,
        ctxt,
        window,
        off: (recorded - expected).abs() / expected,
    }
}

struct Row {
    family: String,
    /// One per [`RUNS`].
    cells: Vec<Status>,
    need: Option<Need>,
    ok: bool,
}

/// The outcome on one kernel.
pub(super) struct Verdict {
    line: &'static str,
    package: String,
    release: Option<String>,
    vm_time: Duration,
    /// Runs whose recording or report failed, and why.
    run_errors: Vec<(String, String)>,
    rows: Vec<Row>,
    switches: SwitchCheck,
    /// Why the kernel fails; empty when it passes.
    pub(super) failures: Vec<String>,
    /// Console lines worth showing when the VM did not finish.
    pub(super) console: Vec<String>,
}

fn run_statuses(run: Option<&RunLog>) -> (Result<BTreeMap<String, Status>, String>, Option<Value>) {
    let Some(run) = run else {
        return (
            Err("not reached (the VM stopped or hung before)".into()),
            None,
        );
    };
    if run.record_exit.is_none() {
        return (
            Err("did not end (the VM stopped or hung during it)".into()),
            None,
        );
    }
    let why = |what: String| {
        let log = run.log.iter().rev().find(|l| !l.trim().is_empty());
        match log {
            Some(l) => format!("{what}: {}", l.trim()),
            None => what,
        }
    };
    let Some(json) = &run.json else {
        return (
            Err(why(format!(
                "mdiag record exited with {}, no recording",
                run.record_exit.map_or("?".into(), |c| c.to_string())
            ))),
            None,
        );
    };
    if run.explain_exit != Some(0) {
        return (
            Err(why(format!(
                "mdiag explain exited with {}",
                run.explain_exit.map_or("?".into(), |c| c.to_string())
            ))),
            None,
        );
    }
    match serde_json::from_str::<Value>(json) {
        Ok(report) => (statuses(&report), Some(report)),
        Err(e) => (Err(format!("the report is not JSON: {e}")), None),
    }
}

pub(super) fn judge(
    line: &'static Line,
    package: String,
    guest: &GuestLog,
    overrides: &[(String, Need)],
    vm_time: Duration,
) -> Verdict {
    judge_with(line, package, guest, EXPECTATIONS, overrides, vm_time)
}

fn judge_with(
    line: &'static Line,
    package: String,
    guest: &GuestLog,
    table: &[Expectation],
    overrides: &[(String, Need)],
    vm_time: Duration,
) -> Verdict {
    let mut run_errors = Vec::new();
    let mut per_run = Vec::new();
    let mut switches = SwitchCheck::Skipped("no host-wide report".into());
    for name in RUNS {
        let run = guest.run(name);
        let (statuses, report) = run_statuses(run);
        if name == "host-wide"
            && let Some(run) = run
        {
            let sched = statuses.as_ref().ok().and_then(|m| m.get("sched"));
            switches = if sched == Some(&Status::Attached) {
                switch_check(run, report.as_ref())
            } else {
                SwitchCheck::Skipped("sched did not attach".into())
            };
        }
        if let Err(e) = &statuses {
            run_errors.push((name.to_owned(), e.clone()));
        }
        per_run.push(statuses);
    }
    // Families of the table first, in its order, then any other reported.
    let mut families: Vec<String> = Vec::new();
    let known = table
        .iter()
        .map(|e| e.family.to_owned())
        .chain(overrides.iter().map(|(f, _)| f.clone()))
        .chain(
            per_run
                .iter()
                .flatten()
                .flat_map(|m| m.keys().cloned())
                .collect::<BTreeSet<_>>(),
        );
    for family in known {
        if !families.contains(&family) {
            families.push(family);
        }
    }
    let mut failures = Vec::new();
    let mut rows = Vec::new();
    for family in families {
        let need = need_for(table, overrides, &family, line.version);
        let cells: Vec<Status> = per_run
            .iter()
            .map(|r| match r {
                Ok(m) => m.get(&family).cloned().unwrap_or(Status::Absent),
                Err(e) => Status::NoRecording(e.clone()),
            })
            .collect();
        let ok = need.is_none_or(|n| cells.iter().all(|c| n.met_by(c)));
        if let (false, Some(n)) = (ok, need) {
            failures.push(format!("{family} is not {n}"));
        }
        // A family without expectation that nobody tried is noise.
        if need.is_some() || cells.iter().any(|c| *c != Status::Absent) {
            rows.push(Row {
                family,
                cells,
                need,
                ok,
            });
        }
    }
    if let SwitchCheck::Done { off, .. } = switches
        && off > SWITCH_TOLERANCE
    {
        failures.push(format!(
            "recorded switches {:.0} % off /proc/stat",
            off * 100.0
        ));
    }
    Verdict {
        line: line.name,
        package,
        release: guest.release.clone(),
        vm_time,
        run_errors,
        rows,
        switches,
        failures,
        console: Vec::new(),
    }
}

impl Verdict {
    /// The table and its notes, on stderr.
    pub(super) fn print(&self) {
        say!(
            "vm-matrix {}: {} (uname -r {}), VM ran {} s",
            self.line,
            self.package,
            self.release.as_deref().unwrap_or("?"),
            self.vm_time.as_secs()
        );
        for line in self.table() {
            say!("  {line}");
        }
        if !self.console.is_empty() {
            say!("  the VM did not finish; its console says:");
            for line in &self.console {
                say!("    | {line}");
            }
        }
    }

    fn table(&self) -> Vec<String> {
        let mut header = vec!["family".to_owned()];
        header.extend(RUNS.iter().map(|r| (*r).to_owned()));
        header.extend(["expected".to_owned(), "verdict".to_owned()]);
        let mut grid = vec![header];
        for row in &self.rows {
            let mut cells = vec![row.family.clone()];
            cells.extend(row.cells.iter().map(Status::cell));
            cells.push(row.need.map_or("-".into(), |n| n.to_string()));
            cells.push(match (row.need, row.ok) {
                (None, _) => "".into(),
                (Some(_), true) => "ok".into(),
                (Some(_), false) => "FAIL".into(),
            });
            grid.push(cells);
        }
        let widths: Vec<usize> = (0..grid[0].len())
            .map(|i| grid.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
            .collect();
        let mut out: Vec<String> = grid
            .iter()
            .map(|r| {
                r.iter()
                    .zip(&widths)
                    .map(|(c, w)| format!("{c:<w$}"))
                    .collect::<Vec<_>>()
                    .join("  ")
                    .trim_end()
                    .to_owned()
            })
            .collect();
        for (run, error) in &self.run_errors {
            out.push(format!("{run} recording: {error}"));
        }
        for row in &self.rows {
            let errors: Vec<(&str, String)> = RUNS
                .iter()
                .zip(&row.cells)
                .filter_map(|(run, c)| c.error().map(|e| (*run, summarize(e))))
                .collect();
            match errors.as_slice() {
                [(_, a), (_, b)] if a == b => out.push(format!("{} (both): {a}", row.family)),
                _ => {
                    for (run, e) in errors {
                        out.push(format!("{} ({run}): {e}", row.family));
                    }
                }
            }
        }
        out.push(match &self.switches {
            SwitchCheck::Skipped(why) => format!("switch check: skipped ({why})"),
            SwitchCheck::Done {
                recorded,
                secs,
                ctxt,
                window,
                off,
            } => format!(
                "switch check: recorded {recorded:.0} in {secs:.2} s, /proc/stat ctxt +{ctxt} \
                 in {window:.2} s: {:.1} % apart ({})",
                off * 100.0,
                if *off <= SWITCH_TOLERANCE {
                    "ok"
                } else {
                    "FAIL"
                }
            ),
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vm::{
        console::parse_log,
        fixtures::{SCHED_ERROR, console, probes, report},
        parse_line,
    };

    fn line(name: &str) -> &'static Line {
        parse_line(name).unwrap()
    }

    #[test]
    fn verdicts_follow_the_table() {
        // 6.1: every family attached but contention's lock programs → contention fails.
        let log = console(
            &report(probes(None, false), 200.0),
            &report(probes(None, true), 0.0),
        );
        let v = judge(
            line("6.1"),
            "pkg".into(),
            &parse_log(&log),
            &[],
            Duration::ZERO,
        );
        assert_eq!(v.failures, ["contention is not attached"]);
        // 200/s × 3 s = 600 against ctxt +615 in 3.08 s, 599 in 3 s.
        assert!(matches!(v.switches, SwitchCheck::Done { ctxt: 615, off, .. } if off < 0.01));
        // 300 recorded where the kernel counted 599 fails.
        let fewer = console(
            &report(probes(None, false), 100.0),
            &report(probes(None, true), 0.0),
        );
        let v = judge(
            line("6.12"),
            "pkg".into(),
            &parse_log(&fewer),
            &[],
            Duration::ZERO,
        );
        assert!(
            v.failures
                .contains(&"recorded switches 50 % off /proc/stat".to_owned())
        );
        // 5.10: partly is enough for contention.
        let v = judge(
            line("5.10"),
            "pkg".into(),
            &parse_log(&log),
            &[],
            Duration::ZERO,
        );
        assert!(v.failures.is_empty(), "{:?}", v.failures);
        let table = v.table().join("\n");
        assert!(table.contains("wiredtiger  -           n/a"), "{table}");
        assert!(
            table.contains("contention (both): contention_begin (tp_btf/contention_begin): tracepoint contention_begin"),
            "{table}"
        );

        // A verifier rejection of sched on the host-wide run.
        let log = console(
            &report(probes(Some(SCHED_ERROR), false), 0.0),
            &report(probes(None, true), 0.0),
        );
        let v = judge(
            line("5.10"),
            "pkg".into(),
            &parse_log(&log),
            &[],
            Duration::ZERO,
        );
        assert_eq!(v.failures, ["sched is not attached"]);
        let table = v.table().join("\n");
        assert!(
            table.contains("sched (host-wide): sched_switch (tp_btf/sched_switch): load: the BPF_PROG_LOAD syscall returned Invalid argument (os error 22). Verifier output: 0: R1=ctx() R10=fp0 … math between map_value pointer and register with unbounded min value is not allowed"),
            "{table}"
        );
        // Overridden, it passes.
        let v = judge(
            line("5.10"),
            "pkg".into(),
            &parse_log(&log),
            &[("sched".into(), Need::Partly)],
            Duration::ZERO,
        );
        assert!(v.failures.is_empty(), "{:?}", v.failures);
    }

    #[test]
    fn a_failed_recording_fails_the_families_it_should_have() {
        let log = "MDIAG-VM-BEGIN 6.12.1\n\
                   MDIAG-VM-RECORD host-wide 1\n\
                   MDIAG-VM-LOG host-wide Error: no probe attached\n\
                   MDIAG-VM-END\n";
        let v = judge(
            line("6.12"),
            "pkg".into(),
            &parse_log(log),
            &[],
            Duration::ZERO,
        );
        assert!(v.failures.contains(&"sched is not attached".to_owned()));
        // wiredtiger and alloc may be absent, but not without a recording.
        assert!(v.failures.contains(&"wiredtiger is not n/a".to_owned()));
        assert!(!v.failures.iter().any(|f| f.starts_with("alloc")));
        assert_eq!(
            v.run_errors[0],
            (
                "host-wide".to_owned(),
                "mdiag record exited with 1, no recording: Error: no probe attached".to_owned()
            )
        );
    }
}
