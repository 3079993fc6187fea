//! The `cross` test tier: mdiag built for aarch64 and s390x says exactly what
//! the x86_64 build says.
//!
//! Why: an SRE may run `explain` on a laptop for a recording made on an s390x
//! mainframe, or the other way round; and big-endian s390x is where byte-order
//! mistakes in decoding (zstd, BSON, FTDC's varints, our own JSON) show. So
//! every case of [`cases`] (explain of the committed golden recordings in
//! every format and ranked for other architectures, compare, export and
//! explain of real FTDC fixtures, `--help`, bad input, and a real recording
//! made here when running as root) is run by the x86_64 binary natively and
//! by the aarch64 and s390x binaries under qemu-user, and their stdout,
//! stderr and exit status must be identical byte for byte. Outputs are kept
//! in `<target>/cross/<arch>/<case>.{out,err}`.
//!
//! Then, in `cargo xtask cross-check` (not in `./x test`'s cross tier, see
//! [`UnitTests`]), the library's unit tests run for s390x under qemu-user
//! (`MDIAG_EMULATED=qemu-user` tells the few tests that read the host's
//! `/proc` or BTF to skip, loudly).
use std::{
    fs,
    path::{Path, PathBuf},
    process::Output,
    time::Instant,
};

use anyhow::{Context, Result, bail};

use crate::{
    arch::{ARCHES, Arch, DebugBuild, build, host},
    cmd::{Cmd, is_root, target_dir, workspace_root},
    say,
};

/// What the library's tests read to know they run under an emulator, and
/// where they list the tests they skip there (agent/src/emulation.rs).
const EMULATED_ENV: &str = "MDIAG_EMULATED";
const SKIP_LOG_ENV: &str = "MDIAG_SKIP_LOG";

/// One invocation of mdiag.
#[derive(Debug, Clone)]
struct Case {
    name: String,
    args: Vec<String>,
}

fn case(name: impl Into<String>, args: &[&str]) -> Case {
    Case {
        name: name.into(),
        args: args.iter().map(|&a| a.to_owned()).collect(),
    }
}

/// The real FTDC fixtures (../shared/fixtures, see its README), if present.
fn ftdc_fixture() -> Option<PathBuf> {
    let dir = workspace_root().join("../shared/fixtures/ftdc/mongod-7.0.0-rc6");
    dir.is_dir().then_some(dir)
}

/// Every case, in order. `real` is a recording made on this host, if any.
fn cases(real: Option<&Path>) -> Result<Vec<Case>> {
    let mut cases = vec![
        case("help", &["--help"]),
        case("explain-help", &["explain", "--help"]),
        case("export-help", &["export", "--help"]),
        case("compare-help", &["compare", "--help"]),
        case("record-help", &["record", "--help"]),
        case(
            "explain-missing-file",
            &["explain", "no-such-recording.mdiag"],
        ),
        case("explain-not-a-recording", &["explain", "Cargo.toml"]),
        case(
            "explain-bad-arch",
            &["explain", "--arch", "sparc", "x.mdiag"],
        ),
    ];
    let explained = explained(real)?;
    cases.extend(recording_cases(&explained));
    cases.extend(ftdc_cases());
    Ok(cases)
}

/// The golden recordings (and `real`, a recording made on this host) to
/// explain: by name, their path.
fn explained(real: Option<&Path>) -> Result<Vec<(String, String)>> {
    let recordings = workspace_root().join("agent/testdata/recordings");
    let mut files: Vec<PathBuf> = fs::read_dir(&recordings)
        .with_context(|| format!("listing {}", recordings.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "mdiag"))
        .collect();
    files.sort();
    if files.is_empty() {
        bail!("no golden recordings in {}", recordings.display());
    }
    let rel = |p: &Path| {
        p.strip_prefix(workspace_root())
            .unwrap_or(p)
            .to_string_lossy()
            .into_owned()
    };
    let mut explained: Vec<(String, String)> = files
        .iter()
        .map(|f| {
            let stem = f
                .file_stem()
                .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
            (stem, rel(f))
        })
        .collect();
    if let Some(real) = real {
        explained.push((
            "host-recording".to_owned(),
            real.to_string_lossy().into_owned(),
        ));
    }
    Ok(explained)
}

/// Each recording explained in every format and ranked for two other
/// architectures; the first two compared.
fn recording_cases(explained: &[(String, String)]) -> Vec<Case> {
    let mut cases = Vec::new();
    for (stem, file) in explained {
        for format in ["terminal", "markdown", "json", "html"] {
            cases.push(case(
                format!("explain-{stem}-{format}"),
                &["explain", "--color", "never", "-f", format, file],
            ));
        }
        for arch in ["aarch64", "s390x"] {
            cases.push(case(
                format!("explain-{stem}-ranked-{arch}"),
                &["explain", "-f", "json", "--arch", arch, file],
            ));
        }
    }
    if let [first, second, ..] = explained {
        for format in ["text", "json"] {
            cases.push(case(
                format!("compare-{}-{}-{format}", first.0, second.0),
                &["compare", "-f", format, &first.1, &second.1],
            ));
        }
    }
    cases
}

/// FTDC exported and explained, from the real fixtures when present.
fn ftdc_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    if let Some(dir) = ftdc_fixture() {
        let dir = dir.to_string_lossy().into_owned();
        let interim = format!("{dir}/metrics.interim");
        // The big file decodes in ~30 s under qemu in a debug build: a
        // one-minute window for export, ten for explain, and the small
        // interim file whole.
        let (from, to) = ("2024-04-16 14:00:00", "2024-04-16 14:01:00");
        cases.extend([
            case("export-interim", &["export", &interim]),
            case(
                "export-interim-filtered",
                &[
                    "export",
                    "--dates-as-ms",
                    "--no-metadata",
                    "--metrics",
                    "serverStatus.tcmalloc,serverStatus.wiredTiger.cache*",
                    &interim,
                ],
            ),
            case(
                "export-dir-window",
                &["export", "--from", from, "--to", to, &dir],
            ),
            case(
                "explain-ftdc-interim-terminal",
                &["explain", "--color", "never", "--ftdc", &interim],
            ),
            case(
                "explain-ftdc-window-json",
                &[
                    "explain",
                    "-f",
                    "json",
                    "--ftdc",
                    &dir,
                    "--from",
                    from,
                    "--to",
                    "2024-04-16 14:10:00",
                ],
            ),
        ]);
    } else {
        say!("cross: no ../shared/fixtures: the FTDC cases are left out");
    }
    cases
}

/// A recording of this host (a few seconds, host-wide) by the x86_64 build,
/// when running as root; `None` (said) otherwise.
fn record_here(bin: &Path, dir: &Path) -> Result<Option<PathBuf>> {
    if !is_root() {
        say!("cross: not root, so no real recording is explained (golden ones only)");
        return Ok(None);
    }
    let out = dir.join("host.mdiag");
    let _ = fs::remove_file(&out);
    Cmd::new(bin)
        .args([
            "record",
            "--host-wide",
            "--duration",
            "2s",
            "--no-progress",
            "-o",
        ])
        .arg(&out)
        .run()
        .context("recording this host for the cross check")?;
    Ok(Some(out))
}

/// Runner threads per architecture in [`cross`].
const RUNNERS: usize = 2;

/// One runner thread's runs, each with its case's index.
type IndexedRuns = Result<Vec<(usize, Run)>>;

/// Each architecture's runs in case order (architectures in the order they
/// first come), from its runner threads' results: each run with its case's
/// index.
fn in_case_order(results: Vec<(&Arch, IndexedRuns)>) -> Result<Vec<(&Arch, Vec<Run>)>> {
    let mut by_arch: Vec<(&Arch, Vec<(usize, Run)>)> = Vec::new();
    for (arch, runs) in results {
        let runs = runs?;
        match by_arch.iter_mut().find(|(a, _)| *a == arch) {
            Some((_, all)) => all.extend(runs),
            None => by_arch.push((arch, runs)),
        }
    }
    Ok(by_arch
        .into_iter()
        .map(|(arch, mut runs)| {
            runs.sort_by_key(|(i, _)| *i);
            (arch, runs.into_iter().map(|(_, run)| run).collect())
        })
        .collect())
}

/// Every case on every architecture, [`RUNNERS`] threads per architecture,
/// each running every other case: an emulated case is one CPU-bound
/// qemu-user process, and the host's finish at once, so this keeps both
/// CPUs of a small host busy.
fn run_all(
    bins: &[(&'static Arch, PathBuf)],
    cases: &[Case],
    dir: &Path,
) -> Vec<(&'static Arch, IndexedRuns)> {
    std::thread::scope(|s| {
        let handles: Vec<_> = bins
            .iter()
            .flat_map(|(arch, bin)| (0..RUNNERS).map(move |first| (*arch, bin, first)))
            .map(|(arch, bin, first)| {
                let out_dir = dir.join(arch.name);
                s.spawn(move || {
                    let runs = fs::create_dir_all(&out_dir)
                        .map_err(anyhow::Error::from)
                        .and_then(|()| {
                            cases
                                .iter()
                                .enumerate()
                                .skip(first)
                                .step_by(RUNNERS)
                                .map(|(i, c)| {
                                    run_case(arch, bin, c, &out_dir)
                                        .map(|run| (i, run))
                                        .with_context(|| format!("{} on {}", c.name, arch.name))
                                })
                                .collect::<IndexedRuns>()
                        });
                    (arch, runs)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| (host(), Err(anyhow::anyhow!("a runner thread panicked"))))
            })
            .collect()
    })
}

/// The result of one case on one architecture.
#[derive(Debug, PartialEq, Eq)]
struct Run {
    status: Option<i32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

fn run_case(arch: &Arch, bin: &Path, case: &Case, out_dir: &Path) -> Result<Run> {
    let mut cmd = arch.runner(bin);
    cmd.args(&case.args)
        .env("TZ", "UTC")
        .env("LC_ALL", "C")
        .env("COLUMNS", "100")
        .env("NO_COLOR", "1")
        .env_remove("RUST_LOG")
        .env_remove("RUST_BACKTRACE");
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output()?;
    fs::write(out_dir.join(format!("{}.out", case.name)), &stdout)?;
    fs::write(out_dir.join(format!("{}.err", case.name)), &stderr)?;
    Ok(Run {
        status: status.code(),
        stdout,
        stderr,
    })
}

/// Where two outputs first differ, as a short human line.
fn first_difference(name: &str, ours: &[u8], theirs: &[u8]) -> Option<String> {
    if ours == theirs {
        return None;
    }
    let ours_text = String::from_utf8_lossy(ours);
    let theirs_text = String::from_utf8_lossy(theirs);
    let mut a = ours_text.lines();
    let mut b = theirs_text.lines();
    let mut line = 1;
    loop {
        match (a.next(), b.next()) {
            (Some(x), Some(y)) if x == y => line += 1,
            (x, y) => {
                let show = |s: Option<&str>| match s {
                    Some(s) => format!("{:?}", s.chars().take(160).collect::<String>()),
                    None => "(end)".to_owned(),
                };
                return Some(format!(
                    "{name} line {line}: x86_64 {} / this {}",
                    show(x),
                    show(y)
                ));
            }
        }
    }
}

/// Compares one architecture's runs with the host's.
fn differences(case: &Case, host_run: &Run, run: &Run) -> Vec<String> {
    let mut out = Vec::new();
    if host_run.status != run.status {
        out.push(format!(
            "exit status {:?} on x86_64, {:?} here",
            host_run.status, run.status
        ));
    }
    out.extend(first_difference("stdout", &host_run.stdout, &run.stdout));
    out.extend(first_difference("stderr", &host_run.stderr, &run.stderr));
    out.into_iter()
        .map(|d| format!("{}: {d}", case.name))
        .collect()
}

/// Whether [`cross`] also runs the library's unit tests on s390x.
///
/// `./x test` leaves them out: building them (4 min at opt-level 1) and
/// running them under qemu-user (8 min one test at a time, 4.5 min in two
/// emulators) made a CI run about 8 min longer when it had to stay under 90
/// min and would take about 82 without this cut (from the tiers' measured
/// times). The cases above still check that
/// s390x decodes recordings, FTDC and BSON exactly as x86_64 does; `./x
/// cross-check` runs the unit tests too, for a change to decoding code.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum UnitTests {
    Run,
    Skip,
}

/// The cross tier.
pub fn cross(unit_tests: UnitTests) -> Result<()> {
    let started = Instant::now();
    let mut bins = Vec::new();
    for arch in ARCHES {
        // Built for the unit tests when they run (one set of
        // dependencies for both), else as the vm tier runs them.
        let debug = match unit_tests {
            UnitTests::Run => DebugBuild::ForUnitTests,
            UnitTests::Skip => DebugBuild::Plain,
        };
        bins.push((arch, build(arch, debug)?));
    }
    let dir = target_dir()?.join("cross");
    fs::create_dir_all(&dir)?;
    let host_bin = &bins[0].1;
    let real = record_here(host_bin, &dir)?;
    let cases = cases(real.as_deref())?;
    say!(
        "cross: {} cases on {} (built in {} s)",
        cases.len(),
        ARCHES.iter().map(|a| a.name).collect::<Vec<_>>().join(", "),
        started.elapsed().as_secs()
    );
    let runs_by_arch = in_case_order(run_all(&bins, &cases, &dir))?;
    let (_, host_runs) = &runs_by_arch[0];
    let mut failures = Vec::new();
    for (arch, runs) in &runs_by_arch[1..] {
        let diffs: Vec<String> = cases
            .iter()
            .zip(host_runs.iter().zip(runs))
            .flat_map(|(c, (h, r))| differences(c, h, r))
            .collect();
        if diffs.is_empty() {
            say!(
                "cross: {}: all {} cases identical to x86_64's",
                arch.name,
                cases.len()
            );
        } else {
            for d in &diffs {
                say!("cross: {}: {d}", arch.name);
            }
            failures.push(format!("{}: {} differences", arch.name, diffs.len()));
        }
    }
    // The cases must exercise something: the golden reports must have findings.
    let busy_json = cases
        .iter()
        .position(|c| c.name == "explain-busy-json")
        .map(|i| &host_runs[i]);
    match busy_json {
        Some(run)
            if run.status == Some(0)
                && String::from_utf8_lossy(&run.stdout).contains("\"rule_id\"") => {}
        _ => failures.push("explain-busy-json did not produce findings on x86_64".to_owned()),
    }
    if !failures.is_empty() {
        bail!(
            "cross builds disagree with x86_64 ({}); outputs in {}",
            failures.join("; "),
            dir.display()
        );
    }
    if unit_tests == UnitTests::Run {
        unit_tests_big_endian()?;
    } else {
        say!("cross: the library's unit tests on s390x are left to `./x cross-check`");
    }
    say!("cross: done in {} s", started.elapsed().as_secs());
    Ok(())
}

/// `cargo test -p mdiag --lib` for the big-endian architecture, without
/// test arguments.
fn big_endian_unit_tests() -> Result<Cmd> {
    let arch = big_endian()?;
    let mut cmd = Cmd::cargo();
    cmd.args(["test", "-p", "mdiag", "--lib"]);
    arch.cargo_args(&mut cmd, DebugBuild::ForUnitTests)?;
    Ok(cmd)
}

fn big_endian() -> Result<&'static Arch> {
    ARCHES
        .iter()
        .find(|a| a.big_endian)
        .ok_or_else(|| anyhow::anyhow!("no big-endian architecture in the table"))
}

/// The library's unit tests built for s390x and run under qemu-user: in two
/// emulators side by side, the `mongo::` and `export::` tests (FTDC
/// decoding and its export: about half of the 8 min in one emulator) in
/// one and the rest in the other, each one test at a time.
///
/// One test at a time: a test that starts a child (a compiler, a `sleep` to
/// read the maps of) forks the emulated process, and a fork while other test
/// threads run under qemu-user can leave the child waiting forever on a
/// futex before its exec (seen once: the tier hung in
/// `symbols::tests::google_tcmalloc_wiredtiger_and_tcmalloc_rseq_tls_in_a_child`).
/// Two processes do not share threads, so they are free of that.
fn unit_tests_big_endian() -> Result<()> {
    let arch = big_endian()?;
    say!(
        "cross: the library's unit tests on {} under qemu-user",
        arch.name
    );
    let dir = target_dir()?.join("cross");
    fs::create_dir_all(&dir)?;
    let skip_log = dir.join("skipped-tests.txt");
    let _ = fs::remove_file(&skip_log);
    let messages = big_endian_unit_tests()?
        .args(["--no-run", "--message-format=json-render-diagnostics"])
        .stdout()?;
    let exe = lib_test_executable(&messages).ok_or_else(|| {
        anyhow::anyhow!("cargo built no unit-test executable for mdiag's library")
    })?;
    let skip_ftdc: Vec<&str> = FTDC.iter().flat_map(|f| ["--skip", f]).collect();
    let halves: [(&str, &[&str]); 2] = [("ftdc", &FTDC), ("rest", &skip_ftdc)];
    let results: Vec<Result<(PathBuf, std::process::ExitStatus)>> = std::thread::scope(|s| {
        let handles: Vec<_> = halves
            .iter()
            .map(|(name, filter)| {
                let (exe, skip_log) = (&exe, &skip_log);
                let log = dir.join(format!("unit-tests-{name}.log"));
                s.spawn(move || -> Result<(PathBuf, std::process::ExitStatus)> {
                    let file = fs::File::create(&log)
                        .with_context(|| format!("creating {}", log.display()))?;
                    let status = arch
                        .runner(exe)
                        // Where `cargo test` runs a package's tests.
                        .current_dir(workspace_root().join("agent"))
                        .env(EMULATED_ENV, "qemu-user")
                        .env(SKIP_LOG_ENV, skip_log)
                        .arg("--test-threads=1")
                        .args(*filter)
                        .spawn_logged(file)?
                        .wait()?;
                    Ok((log, status))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a test runner thread panicked")))
            })
            .collect()
    });
    let mut failures = Vec::new();
    for result in results {
        let (log, status) = result?;
        // Their output, one after the other (it went to files so that the
        // two do not interleave).
        let text = fs::read_to_string(&log).unwrap_or_default();
        print!("{text}");
        if !status.success() {
            failures.push(format!("{} ({status})", log.display()));
        }
    }
    let skipped = fs::read_to_string(&skip_log).unwrap_or_default();
    let skipped: Vec<&str> = skipped.lines().collect();
    say!(
        "cross: {} unit tests skipped on {} under qemu-user (they read the host's /proc or BTF):",
        skipped.len(),
        arch.name
    );
    for s in &skipped {
        say!("  skipped: {s}");
    }
    if failures.is_empty() {
        Ok(())
    } else {
        bail!(
            "the library's unit tests failed on {}: {}",
            arch.name,
            failures.join(", ")
        )
    }
}

/// The filters that split the unit tests in two (see
/// [`unit_tests_big_endian`]): libtest runs the tests whose names contain
/// any of them, and `--skip` each leaves exactly the others.
const FTDC: [&str; 2] = ["mongo::", "export::"];

/// The executable of mdiag's library unit tests, from cargo's JSON messages.
fn lib_test_executable(messages: &str) -> Option<PathBuf> {
    crate::run::executable(messages, |m| {
        m["target"]["name"] == "mdiag"
            && m["target"]["kind"][0] == "lib"
            && m["profile"]["test"] == true
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_architectures_runs_come_back_in_case_order() {
        let run = |n: i32| Run {
            status: Some(n),
            stdout: Vec::new(),
            stderr: Vec::new(),
        };
        let (x86, arm) = (host(), &ARCHES[1]);
        // Five cases over two runners: 0 2 4 and 1 3.
        let results = vec![
            (x86, Ok(vec![(0, run(0)), (2, run(2)), (4, run(4))])),
            (x86, Ok(vec![(1, run(1)), (3, run(3))])),
            (arm, Ok(vec![(0, run(0)), (2, run(2)), (4, run(4))])),
            (arm, Ok(vec![(1, run(1)), (3, run(3))])),
        ];
        let back = in_case_order(results).unwrap();
        assert_eq!(back.len(), 2);
        for (arch, runs) in &back {
            let order: Vec<Option<i32>> = runs.iter().map(|r| r.status).collect();
            assert_eq!(order, [0, 1, 2, 3, 4].map(Some), "{}", arch.name);
        }
        let failed = vec![
            (x86, Ok(vec![(0, run(0))])),
            (x86, Err(anyhow::anyhow!("boom"))),
        ];
        assert!(in_case_order(failed).is_err());
    }

    #[test]
    fn the_library_test_executable_is_found_among_cargos_messages() {
        let messages = [
            r#"{"reason":"compiler-artifact","target":{"name":"mdiag","kind":["lib"]},"profile":{"test":false},"executable":null}"#,
            r#"{"reason":"compiler-artifact","target":{"name":"mdiag","kind":["lib"]},"profile":{"test":true},"executable":"/t/deps/mdiag-1"}"#,
            r#"{"reason":"build-finished","success":true}"#,
        ]
        .join("\n");
        assert_eq!(
            lib_test_executable(&messages),
            Some(PathBuf::from("/t/deps/mdiag-1"))
        );
        assert_eq!(
            lib_test_executable(&messages[..messages.find('\n').unwrap()]),
            None
        );
    }

    #[test]
    fn first_difference_names_the_line() {
        assert_eq!(first_difference("stdout", b"a\nb\n", b"a\nb\n"), None);
        let d = first_difference("stdout", b"a\nb\nc\n", b"a\nB\nc\n").unwrap();
        assert!(d.starts_with("stdout line 2:"), "{d}");
        let d = first_difference("stdout", b"a\n", b"a\nextra\n").unwrap();
        assert!(d.contains("(end)"), "{d}");
        // A trailing byte alone (no new line) still differs.
        assert!(first_difference("stdout", b"a", b"a\n").is_some());
    }

    #[test]
    fn a_differing_exit_status_is_a_difference() {
        let c = case("x", &[]);
        let run = |status| Run {
            status,
            stdout: b"same".to_vec(),
            stderr: Vec::new(),
        };
        assert!(differences(&c, &run(Some(0)), &run(Some(0))).is_empty());
        let d = differences(&c, &run(Some(0)), &run(Some(2)));
        assert_eq!(d.len(), 1);
        assert!(d[0].starts_with("x: exit status"), "{d:?}");
    }

    #[test]
    fn every_golden_recording_is_explained_in_every_format() {
        let cases = cases(None).unwrap();
        for stem in ["baseline", "busy", "probe-failures"] {
            for format in ["terminal", "markdown", "json", "html"] {
                let name = format!("explain-{stem}-{format}");
                assert!(cases.iter().any(|c| c.name == name), "missing {name}");
            }
        }
        let mut names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(
            before,
            names.len(),
            "case names are unique (they name files)"
        );
    }
}
