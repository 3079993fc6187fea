//! The verdict on one kernel: each family's status in each recording
//! against the expectation table (the mongod run's with its own rows), the
//! ground-truth checks (`checks.rs`), the mongod run (`mongod_check.rs`,
//! where the line has it), the agent run (`agent.rs`), and the table printed
//! from them.
use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use serde_json::Value;

use super::{
    Line,
    agent::{AgentCheck, agent_check},
    checks::{PerfCheck, SwitchCheck, perf_check, switch_check},
    console::{GuestLog, RunLog},
    expect::{EXPECTATIONS, Expectation, MONGOD_EXPECTATIONS, Need, need_in_run},
    initramfs::{RUNS, SPAWNED_PROGRAM},
    mongod_check::{MongodCheck, mongod_check},
    status::{Status, statuses, summarize, syscalls_fallback},
};
use crate::say;

struct Row {
    family: String,
    /// One per run of the kernel ([`RUNS`], the mongod run only where the
    /// line has it), and what each needs.
    cells: Vec<Status>,
    needs: Vec<Option<Need>>,
    ok: bool,
}

impl Row {
    /// The table's "expected" cell: the need of the first runs, and the
    /// mongod run's where it differs.
    fn expected(&self, runs: &[&str]) -> String {
        let first = self.needs.first().copied().flatten();
        let show = |n: Option<Need>| n.map_or("-".to_owned(), |n| n.to_string());
        let mut out = show(first);
        for (run, need) in runs.iter().zip(&self.needs).skip(1) {
            if *need != first {
                out.push_str(&format!(" ({run}: {})", show(*need)));
            }
        }
        out
    }
}

/// The outcome on one kernel.
pub(super) struct Verdict {
    line: &'static str,
    /// The recordings made on it.
    runs: Vec<&'static str>,
    package: String,
    release: Option<String>,
    /// The guest's uptime when its init started.
    booted: Option<f64>,
    vm_time: Duration,
    /// Runs whose recording or report failed, and why.
    run_errors: Vec<(String, String)>,
    rows: Vec<Row>,
    switches: SwitchCheck,
    perf: PerfCheck,
    /// Where the line has a mongod run.
    mongod: Option<MongodCheck>,
    agent: AgentCheck,
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

/// Whether a kernel's configuration (its package's `boot/config-*`) lets
/// BPF trampolines, which fentry/fexit attach through, exist at all: the
/// JIT writes them (`CONFIG_BPF_JIT`; without it every program runs in the
/// interpreter and loading an fexit program fails, as Debian's s390x 6.12
/// from bookworm-backports does with ENOMEM) and ftrace's direct calls jump
/// to them (`CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS`: arm64 has them only
/// from 6.4; attaching fails with ENOTSUPP, 524, before).
pub(super) fn trampolines_configured(config: &str) -> bool {
    let set = |option: &str| config.lines().any(|l| l.strip_prefix(option) == Some("=y"));
    set("CONFIG_BPF_JIT") && set("CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS")
}

/// Whether the syscalls family must hook fentry/fexit on this kernel:
/// where its configuration has trampolines (`trampolines`, from
/// [`trampolines_configured`]), except x86_64 5.10, whose BTF declares the
/// `struct pt_regs` of some syscall wrappers (`__x64_sys_madvise`) only
/// forward, which its verifier refuses to read ("arg0 type FWD is not a
/// struct"), as the matrix showed.
fn fentry_expected(line: &Line, trampolines: bool) -> bool {
    trampolines && !(line.guest.name == "x86_64" && line.version <= (5, 10))
}

pub(super) fn judge(
    line: &'static Line,
    package: String,
    guest: &GuestLog,
    overrides: &[(String, Need)],
    vm_time: Duration,
    trampolines: bool,
) -> Verdict {
    judge_with(
        line,
        package,
        guest,
        EXPECTATIONS,
        overrides,
        vm_time,
        trampolines,
    )
}

fn judge_with(
    line: &'static Line,
    package: String,
    guest: &GuestLog,
    table: &[Expectation],
    overrides: &[(String, Need)],
    vm_time: Duration,
    trampolines: bool,
) -> Verdict {
    let runs: Vec<&'static str> = RUNS
        .into_iter()
        .filter(|r| *r != "mongod" || line.mongod)
        .collect();
    let r = read_runs(line, guest, &runs, trampolines);
    let mut failures = r.fallbacks;
    let mut rows = Vec::new();
    for family in families(table, overrides, &r.per_run) {
        let (row, said) = family_row(line, table, overrides, &runs, &r.per_run, family);
        failures.extend(said);
        rows.extend(row);
    }
    failures.extend(r.switches.failure());
    failures.extend(r.perf.failure());
    let mongod = line.mongod.then(|| {
        mongod_check(
            &guest.mongod,
            guest.run("mongod"),
            r.mongod_report.as_ref(),
            line.version,
        )
    });
    failures.extend(mongod.as_ref().and_then(MongodCheck::failure));
    let agent = agent_check(&guest.agent);
    failures.extend(agent.failure());
    Verdict {
        line: line.name,
        runs,
        package,
        release: guest.release.clone(),
        booted: guest.booted,
        vm_time,
        run_errors: r.run_errors,
        rows,
        switches: r.switches,
        perf: r.perf,
        mongod,
        agent,
        failures,
        console: Vec::new(),
    }
}

/// What each run of the kernel recorded, with the checks made on single
/// runs (switches host-wide, perf spawned) and the syscalls family's
/// fallbacks from fentry/fexit.
struct Runs {
    per_run: Vec<Result<BTreeMap<String, Status>, String>>,
    run_errors: Vec<(String, String)>,
    switches: SwitchCheck,
    perf: PerfCheck,
    mongod_report: Option<Value>,
    fallbacks: Vec<String>,
}

/// Reads each run's probe statuses and report; `trampolines`: whether the
/// kernel's config has BPF trampolines ([`trampolines_configured`]).
fn read_runs(
    line: &'static Line,
    guest: &GuestLog,
    runs: &[&'static str],
    trampolines: bool,
) -> Runs {
    let mut run_errors = Vec::new();
    let mut per_run = Vec::new();
    let mut switches = SwitchCheck::Skipped("no host-wide report".into());
    let mut perf = PerfCheck::Skipped("no spawned report".into());
    let mut mongod_report = None;
    // The syscalls family must hook fentry/fexit where the kernel allows it.
    let mut fallbacks = Vec::new();
    for &name in runs {
        let run = guest.run(name);
        let (statuses, report) = run_statuses(run);
        if let Some(hook) = report.as_ref().and_then(syscalls_fallback)
            && fentry_expected(line, trampolines)
        {
            fallbacks.push(format!("syscalls fell back in the {name} run: {hook}"));
        }
        let attached =
            |family| statuses.as_ref().ok().and_then(|m| m.get(family)) == Some(&Status::Attached);
        match (name, run) {
            ("host-wide", Some(run)) if attached("sched") => {
                switches = switch_check(run, report.as_ref());
            }
            ("host-wide", Some(_)) => {
                switches = SwitchCheck::Skipped("sched did not attach".into());
            }
            ("spawned", Some(_)) if attached("perf") => {
                perf = perf_check(report.as_ref(), SPAWNED_PROGRAM);
            }
            ("spawned", Some(_)) => perf = PerfCheck::Skipped("perf did not attach".into()),
            _ => {}
        }
        if name == "mongod" {
            mongod_report = report;
        }
        if let Err(e) = &statuses {
            run_errors.push((name.to_owned(), e.clone()));
        }
        per_run.push(statuses);
    }
    Runs {
        per_run,
        run_errors,
        switches,
        perf,
        mongod_report,
        fallbacks,
    }
}

/// Families of the table first, in its order, then any other reported.
fn families(
    table: &[Expectation],
    overrides: &[(String, Need)],
    per_run: &[Result<BTreeMap<String, Status>, String>],
) -> Vec<String> {
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
    families
}

/// One family's row (none for a family without expectation that nobody
/// tried: noise), and what it failed.
fn family_row(
    line: &'static Line,
    table: &[Expectation],
    overrides: &[(String, Need)],
    runs: &[&'static str],
    per_run: &[Result<BTreeMap<String, Status>, String>],
    family: String,
) -> (Option<Row>, Vec<String>) {
    let needs: Vec<Option<Need>> = runs
        .iter()
        .map(|run| {
            let own = if *run == "mongod" {
                MONGOD_EXPECTATIONS
            } else {
                &[]
            };
            need_in_run(table, own, overrides, &family, line)
        })
        .collect();
    let cells: Vec<Status> = per_run
        .iter()
        .map(|r| match r {
            Ok(m) => m.get(&family).cloned().unwrap_or(Status::Absent),
            Err(e) => Status::NoRecording(e.clone()),
        })
        .collect();
    let mut ok = true;
    let mut said: Vec<String> = Vec::new();
    for ((run, cell), need) in runs.iter().zip(&cells).zip(&needs) {
        let Some(n) = need.filter(|n| !n.met_by(cell)) else {
            continue;
        };
        ok = false;
        let what = match *run {
            "mongod" => format!("{family} is not {n} in the mongod run"),
            _ => format!("{family} is not {n}"),
        };
        if !said.contains(&what) {
            said.push(what);
        }
    }
    // A family without expectation that nobody tried is noise.
    let row = (needs.iter().any(Option::is_some) || cells.iter().any(|c| *c != Status::Absent))
        .then_some(Row {
            family,
            cells,
            needs,
            ok,
        });
    (row, said)
}

impl Verdict {
    /// The table and its notes, on stderr.
    pub(super) fn print(&self) {
        say!(
            "vm-matrix {}: {} (uname -r {}), VM ran {} s (the kernel booted in {})",
            self.line,
            self.package,
            self.release.as_deref().unwrap_or("?"),
            self.vm_time.as_secs(),
            self.booted.map_or("?".to_owned(), |b| format!("{b:.0} s"))
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
        header.extend(self.runs.iter().map(|r| (*r).to_owned()));
        header.extend(["expected".to_owned(), "verdict".to_owned()]);
        let mut grid = vec![header];
        for row in &self.rows {
            let mut cells = vec![row.family.clone()];
            cells.extend(row.cells.iter().map(Status::cell));
            cells.push(row.expected(&self.runs));
            let checked = row.needs.iter().any(Option::is_some);
            cells.push(match (checked, row.ok) {
                (false, _) => "".into(),
                (true, true) => "ok".into(),
                (true, false) => "FAIL".into(),
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
            let errors: Vec<(&str, String)> = self
                .runs
                .iter()
                .zip(&row.cells)
                .filter_map(|(run, c)| c.error().map(|e| (*run, summarize(e))))
                .collect();
            let same = errors.windows(2).all(|w| w[0].1 == w[1].1);
            match errors.as_slice() {
                [(_, a), ..] if same && errors.len() == self.runs.len() && errors.len() > 1 => {
                    let all = if errors.len() == 2 { "both" } else { "all" };
                    out.push(format!("{} ({all}): {a}", row.family));
                }
                _ => {
                    for (run, e) in errors {
                        out.push(format!("{} ({run}): {e}", row.family));
                    }
                }
            }
        }
        out.push(self.switches.line());
        out.push(self.perf.line());
        if let Some(m) = &self.mongod {
            out.push(m.line());
        }
        out.push(self.agent.line());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vm::{
        console::parse_log,
        fixtures::{
            SCHED_ERROR, console, console_with, mongod_console, mongod_report, probes, report,
        },
        parse_line,
    };

    fn line(name: &str) -> &'static Line {
        parse_line(name).unwrap()
    }

    #[test]
    fn trampolines_need_the_jit_and_direct_calls_in_the_config() {
        let both = "CONFIG_BPF=y\nCONFIG_BPF_JIT=y\nCONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS=y\n";
        assert!(trampolines_configured(both));
        // Debian's s390x 6.12 (bookworm-backports): no JIT at all.
        let s390x = "CONFIG_BPF=y\nCONFIG_ARCH_WANT_DEFAULT_BPF_JIT=y\n\
            CONFIG_HAVE_DYNAMIC_FTRACE_WITH_DIRECT_CALLS=y\nCONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS=y\n";
        assert!(!trampolines_configured(s390x));
        // arm64 before 6.4: the JIT, no direct calls.
        assert!(!trampolines_configured(
            "CONFIG_BPF_JIT=y\n# CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS is not set\n"
        ));
        // An option that only starts with the name does not count.
        assert!(!trampolines_configured(
            "CONFIG_BPF_JIT_ALWAYS_ON=y\nCONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS=y\n"
        ));
    }

    #[test]
    fn a_syscalls_fallback_fails_only_where_trampolines_can_be_had() {
        let mut fell_back = probes(None, false);
        fell_back[2] = serde_json::json!({"family": "syscalls", "attached": true,
            "programs": [
                {"name": "mdiag_sys_enter", "attach_point":
                    "tp_btf/sys_enter (every syscall of the host runs it; fentry unavailable: ENOMEM)",
                    "attached": true, "error": null}]});
        let log = console(
            &report(fell_back.clone(), 200.0),
            &report(probes(None, true), 0.0),
        );
        let failures = |name, trampolines| {
            judge(
                line(name),
                "pkg".into(),
                &parse_log(&log),
                &[],
                Duration::ZERO,
                trampolines,
            )
            .failures
            .into_iter()
            .filter(|f| f.starts_with("syscalls fell back"))
            .collect::<Vec<_>>()
        };
        assert_eq!(
            failures("s390x-6.12", true),
            [
                "syscalls fell back in the host-wide run: tp_btf/sys_enter (every syscall of the host runs it; fentry unavailable: ENOMEM)"
            ]
        );
        assert!(failures("s390x-6.12", false).is_empty());
        assert!(failures("5.10", true).is_empty());
        assert_eq!(failures("6.12", true).len(), 1);
    }

    #[test]
    #[allow(
        clippy::too_many_lines,
        reason = "one VM log per kernel line, each with its expected verdict, side by side"
    )]
    fn verdicts_follow_the_table() {
        // 6.1: every family attached but contention's lock programs → contention fails.
        let mongod = mongod_console(&mongod_report(2, &[("tc_malloc", 9)], 50), &[330]);
        let log = console_with(
            &report(probes(None, false), 200.0),
            &report(probes(None, true), 0.0),
            &mongod,
        );
        let v = judge(
            line("6.1"),
            "pkg".into(),
            &parse_log(&log),
            &[],
            Duration::ZERO,
            true,
        );
        assert_eq!(
            v.failures,
            [
                "contention is not attached",
                "contention is not attached in the mongod run"
            ]
        );
        let table = v.table().join("\n");
        assert!(
            table
                .contains("wiredtiger  -           n/a         attached    n/a (mongod: attached)"),
            "{table}"
        );
        assert!(
            table.contains("\nmongod check: mongod up in 20.8 s")
                && table.contains("(ok)\nagent check"),
            "{table}"
        );
        // Without its mongod run, 6.1 fails each family the run needs.
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
            true,
        );
        assert!(
            v.failures
                .contains(&"wiredtiger is not attached in the mongod run".to_owned()),
            "{:?}",
            v.failures
        );
        assert!(
            v.failures
                .last()
                .unwrap()
                .starts_with("mongod: not reached")
        );
        assert!(matches!(v.perf, PerfCheck::Done { samples: 296, .. }));
        assert!(
            v.table()
                .iter()
                .any(|l| l.starts_with("perf check: ") && l.ends_with("(ok)")),
            "{:?}",
            v.table()
        );
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
            true,
        );
        assert!(
            v.failures
                .contains(&"recorded switches 50 % off /proc/stat".to_owned())
        );
        // 5.10: partly is enough for contention, and it has no mongod run.
        let v = judge(
            line("5.10"),
            "pkg".into(),
            &parse_log(&log),
            &[],
            Duration::ZERO,
            true,
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
            true,
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
            true,
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
            true,
        );
        assert!(v.failures.contains(&"sched is not attached".to_owned()));
        // wiredtiger and alloc may be absent, but not without a recording.
        assert!(v.failures.contains(&"wiredtiger is not n/a".to_owned()));
        assert!(
            v.failures
                .contains(&"alloc is not attached or -".to_owned())
        );
        assert_eq!(
            v.run_errors[0],
            (
                "host-wide".to_owned(),
                "mdiag record exited with 1, no recording: Error: no probe attached".to_owned()
            )
        );
    }
}
