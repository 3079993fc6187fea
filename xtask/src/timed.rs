//! Where a CI run's time goes: every `xtask:` line carries the time since
//! xtask started, and test runs are timed per test binary.
//!
//! Why: a run that passes its time limit (90 min, and the project's target
//! of 45) has to be cut where the time goes, and a run's log is the only
//! record of that. [`run_tests`] passes a `cargo test` (or a test
//! executable) through line by line, output unchanged, and notes when each
//! test binary starts (cargo's `Running …` lines) and ends (libtest's `test
//! result:` line); the tier's end prints the binaries slowest first. The
//! root suite also prints each test's time (`--report-time`, see
//! [`report_time`]), which the same summary ranks.
use std::{
    io::{BufRead, BufReader, Write},
    process::ExitStatus,
    sync::OnceLock,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};

use crate::cmd::Cmd;

/// When xtask started (the first call to [`since_start`] or [`start`]).
fn started() -> Instant {
    static START: OnceLock<Instant> = OnceLock::new();
    *START.get_or_init(Instant::now)
}

/// Marks xtask's start (call first thing in `main`).
pub fn start() {
    started();
}

/// `+MMmSSs` since xtask started, for log lines.
pub fn since_start() -> String {
    stamp(started().elapsed())
}

fn stamp(d: Duration) -> String {
    let s = d.as_secs();
    format!("+{:02}m{:02}s", s / 60, s % 60)
}

/// The environment that makes a libtest harness accept `-Zunstable-options
/// --report-time` (per-test times) on a stable toolchain: libtest reads it
/// at run time; nothing is compiled differently.
pub fn report_time(cmd: &mut Cmd) {
    cmd.env("RUSTC_BOOTSTRAP", "1")
        .args(["-Zunstable-options", "--report-time"]);
}

/// What one test binary took.
#[derive(Debug, Clone, PartialEq)]
struct Timed {
    name: String,
    took: Duration,
}

/// Reads a test run's merged output line by line: binaries (cargo's
/// `Running`/`Doc-tests` lines up to libtest's `test result:`) and single
/// tests (`--report-time`'s `<1.234s>`).
#[derive(Default)]
struct Clock {
    current: Option<(String, Instant)>,
    /// A test whose `test NAME ... ` line ended before its result: what
    /// the test or its children printed came in between.
    waiting: Option<String>,
    binaries: Vec<Timed>,
    tests: Vec<Timed>,
}

impl Clock {
    fn line(&mut self, line: &str, now: Instant) {
        let t = line.trim_start();
        if let Some(rest) = t
            .strip_prefix("Running ")
            .or_else(|| t.strip_prefix("Doc-tests "))
        {
            self.current = Some((binary_name(rest), now));
        } else if t.starts_with("test result:") {
            if let Some((name, since)) = self.current.take() {
                self.binaries.push(Timed {
                    name,
                    took: now - since,
                });
            }
        } else if let Some(timed) = test_time(t) {
            self.waiting = None;
            self.tests.push(timed);
        } else if let Some((name, _)) = t.strip_prefix("test ").and_then(|r| r.split_once(" ...")) {
            self.waiting = Some(name.to_owned());
        } else if let Some(name) = self.waiting.take() {
            // `ok <1.234s>` on a line of its own, or after the test's output.
            match test_time(&format!("test {name} ... {t}")) {
                Some(timed) => self.tests.push(timed),
                None => self.waiting = Some(name),
            }
        }
    }

    /// The binaries and tests, slowest first, at most `n` of each.
    fn summary(&mut self, n: usize) -> Vec<String> {
        let mut out = Vec::new();
        for (what, list) in [("binaries", &mut self.binaries), ("tests", &mut self.tests)] {
            list.sort_by_key(|a| std::cmp::Reverse(a.took));
            let total: Duration = list.iter().map(|t| t.took).sum();
            if list.is_empty() {
                continue;
            }
            out.push(format!(
                "{} {what}, {:.1} s in all; the slowest:",
                list.len(),
                total.as_secs_f64()
            ));
            for t in list.iter().take(n) {
                out.push(format!("  {:>7.1} s  {}", t.took.as_secs_f64(), t.name));
            }
        }
        out
    }
}

/// `unittests src/lib.rs (target/debug/deps/mdiag-1234)` → `mdiag-1234
/// (unittests src/lib.rs)`; other forms as they are.
fn binary_name(rest: &str) -> String {
    match rest.rsplit_once(" (") {
        Some((what, path)) => {
            let file = path
                .trim_end_matches(')')
                .rsplit('/')
                .next()
                .unwrap_or(path);
            format!("{file} ({what})")
        }
        None => rest.to_owned(),
    }
}

/// `test a::b ... ok <1.234s>` → (`a::b`, 1.234 s).
fn test_time(line: &str) -> Option<Timed> {
    let rest = line.strip_prefix("test ")?;
    let (name, rest) = rest.split_once(" ... ")?;
    let secs = rest.rsplit_once('<')?.1.strip_suffix("s>")?;
    let secs: f64 = secs.parse().ok()?;
    Some(Timed {
        name: name.to_owned(),
        took: Duration::try_from_secs_f64(secs).ok()?,
    })
}

/// Runs `cmd` with stdout and stderr merged, passing every line through to
/// stdout unchanged, then prints (on stderr, as `xtask:` lines) the slowest
/// test binaries and tests of `what`; fails unless it exits with 0.
pub fn run_tests(cmd: &mut Cmd, what: &str) -> Result<()> {
    let (reader, writer) = std::io::pipe().context("a pipe for the test output")?;
    let mut child = cmd.spawn_with_output(writer)?;
    let mut clock = Clock::default();
    let mut out = std::io::stdout().lock();
    for line in BufReader::new(reader).split(b'\n') {
        let line = line.context("reading the test output")?;
        let text = String::from_utf8_lossy(&line);
        clock.line(&text, Instant::now());
        // A closed stdout (`| head`) must not stop the tests: lines are lost.
        let _ = out.write_all(&line).and_then(|()| out.write_all(b"\n"));
    }
    drop(out);
    let status: ExitStatus = child
        .wait()
        .with_context(|| format!("waiting for `{cmd}`"))?;
    crate::say!("{what}: where the time went ({}):", since_start());
    for l in clock.summary(12) {
        crate::say!("  {l}");
    }
    cmd.check(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binaries_are_timed_from_running_to_their_result_and_tests_from_their_times() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut c = Clock::default();
        c.line(
            "     Running unittests src/lib.rs (target/debug/deps/mdiag-0123)",
            at(0),
        );
        c.line("test a::b ... ok", at(1));
        c.line("test result: ok. 1 passed; 0 failed", at(5));
        c.line(
            "     Running tests/cli.rs (target/debug/deps/cli-99)",
            at(5),
        );
        c.line("test slow ... ok <12.500s>", at(17));
        c.line("test fast ... ok <0.001s>", at(17));
        c.line("test result: ok. 2 passed; 0 failed", at(18));
        c.line("   Doc-tests mdiag_common", at(18));
        c.line("test result: ok. 0 passed; 0 failed", at(19));
        assert_eq!(
            c.binaries,
            [
                Timed {
                    name: "mdiag-0123 (unittests src/lib.rs)".into(),
                    took: Duration::from_secs(5)
                },
                Timed {
                    name: "cli-99 (tests/cli.rs)".into(),
                    took: Duration::from_secs(13)
                },
                Timed {
                    name: "mdiag_common".into(),
                    took: Duration::from_secs(1)
                },
            ]
        );
        assert_eq!(c.tests.len(), 2);
        let s = c.summary(1);
        assert_eq!(s[0], "3 binaries, 19.0 s in all; the slowest:");
        assert!(s[1].contains("cli-99"), "{s:?}");
        assert!(s[2].starts_with("2 tests, 12.5 s"), "{s:?}");
        assert!(s[3].contains("slow"), "{s:?}");
    }

    #[test]
    fn a_test_whose_output_came_between_its_name_and_result_is_timed() {
        let now = Instant::now();
        let mut c = Clock::default();
        c.line("test readahead::a ...", now);
        c.line("blockdev: cannot open /dev/vda (cross-check skipped)", now);
        c.line("ok <9.428s>", now);
        c.line("test b ... ok <1.000s>", now);
        // The output on the test's own line.
        c.line("test c ... mdiag: warning: slow", now);
        c.line("ok <2.500s>", now);
        let names: Vec<(&str, u128)> = c
            .tests
            .iter()
            .map(|t| (t.name.as_str(), t.took.as_millis()))
            .collect();
        assert_eq!(names, [("readahead::a", 9428), ("b", 1000), ("c", 2500)]);
    }

    #[test]
    fn stamps_read_in_minutes_and_seconds() {
        assert_eq!(stamp(Duration::from_secs(0)), "+00m00s");
        assert_eq!(stamp(Duration::from_secs(3725)), "+62m05s");
    }

    #[test]
    fn a_test_line_without_a_time_is_not_timed() {
        assert_eq!(test_time("test a ... ok"), None);
        assert_eq!(test_time("test result: ok. 3 passed"), None);
        assert_eq!(
            test_time("test x::y ... FAILED <0.250s>").map(|t| t.took),
            Some(Duration::from_millis(250))
        );
    }
}
