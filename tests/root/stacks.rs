//! Call stacks against a workload with known call paths
//! (tests/workloads/stacks.c, compiled here with frame pointers): its own
//! per-function CPU clock accounting is the ground truth the profile's
//! shares are held against, through what a user runs: `mdiag record`,
//! `mdiag export --folded` / `--pprof`, `go tool pprof` and the HTML report.

use std::{
    collections::BTreeMap,
    io::{BufRead, Write},
    path::{Path, PathBuf},
    process::Command,
};

use mdiag_tests::{finish, require_root, run_mdiag, spawn_ready, start_record};

/// Compiles the workload into the target's temporary directory: frame
/// pointers kept, no inlining, no sibling calls (each function stays a
/// frame of its own).
fn workload() -> PathBuf {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("workloads/stacks.c");
    let exe = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mdiag-stacks");
    let out = Command::new("cc")
        .args([
            "-O1",
            "-g",
            "-Wall",
            "-fno-omit-frame-pointer",
            "-fno-optimize-sibling-calls",
            "-pthread",
            "-o",
        ])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("run cc (install build-essential: `./x setup`)");
    assert!(
        out.status.success(),
        "compiling {}:\n{}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// The workload's own accounting: ns per function, waits.
fn report(stdin: &mut impl Write, out: &mut impl BufRead) -> serde_json::Value {
    stdin.write_all(b"report\n").unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("workload report {line:?}: {e}"))
}

/// Samples of the burner thread by the nearest of a, b, c, d to the leaf
/// (time in `burn`, `spin` and the kernel below them is the function's own).
fn own_samples(folded: &str) -> BTreeMap<String, u64> {
    let mut own = BTreeMap::new();
    for line in folded.lines() {
        let (stack, n) = line.rsplit_once(' ').expect("folded line: STACK COUNT");
        let n: u64 = n.parse().expect("count");
        let frames: Vec<&str> = stack.split(';').collect();
        if frames.first() != Some(&"burner") {
            continue;
        }
        if let Some(f) = frames
            .iter()
            .rev()
            .find(|f| ["a", "b", "c", "d"].contains(f))
        {
            *own.entry((*f).to_owned()).or_default() += n;
        }
    }
    own
}

fn go() -> Option<PathBuf> {
    which::which("go").ok().or_else(|| {
        let p = PathBuf::from("/usr/lib/go/bin/go");
        p.exists().then_some(p)
    })
}

#[test]
fn stacks_hold_the_workloads_call_paths_on_cpu_in_its_proportions_and_off_cpu_for_its_time() {
    let _serial = mdiag_tests::serial();
    require_root();
    let exe = workload();
    let (mut child, mut out) = spawn_ready(&mut Command::new(&exe));
    let mut stdin = child.stdin.take().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("stacks.mdiag");
    let (rec_child, rec_err) = start_record(&[
        "--duration",
        "6s",
        "--pid",
        &child.id().to_string(),
        "-o",
        rec.to_str().unwrap(),
    ]);
    let before = report(&mut stdin, &mut out);
    let t0 = std::time::Instant::now();
    let (status, _, stderr) = finish(rec_child, rec_err);
    let after = report(&mut stdin, &mut out);
    let wall = t0.elapsed().as_nanos() as f64;
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();
    assert!(status.success(), "mdiag record: {stderr}");

    // The workload's own split of its CPU time between a, b, c and d.
    let delta = |k: &str| after[k].as_u64().unwrap() - before[k].as_u64().unwrap();
    let own_ns: BTreeMap<&str, u64> = ["a", "b", "c", "d"]
        .into_iter()
        .map(|f| (f, delta(&format!("{f}_ns"))))
        .collect();
    let own_total: u64 = own_ns.values().sum();

    let folded = export(&rec, "--folded", &dir.path().join("stacks.folded"));
    let text = std::fs::read_to_string(&folded).unwrap();
    let sampled = own_samples(&text);
    let sampled_total: u64 = sampled.values().sum();
    // 6 s at 99 Hz of one busy thread, however loaded the host: a few
    // hundred samples (binomial spread of a share: about 2.5 points).
    assert!(sampled_total >= 100, "too few samples: {sampled:?}\n{text}");
    for (f, ns) in &own_ns {
        let truth = *ns as f64 / own_total as f64;
        let seen = sampled.get(*f).copied().unwrap_or(0) as f64 / sampled_total as f64;
        println!(
            "{f}: workload {:.1} %, stacks {:.1} %",
            truth * 100.0,
            seen * 100.0
        );
        assert!(
            (truth - seen).abs() < 0.08,
            "{f}: {:.1} % of the CPU time by the workload's clock, {:.1} % of the samples\n{text}",
            truth * 100.0,
            seen * 100.0
        );
    }
    // The call paths, root to leaf, as written in the C file.
    for path in ["burner_main;a;b;c;", "burner_main;a;d;"] {
        assert!(text.contains(path), "no stack through {path}:\n{text}");
    }
    // spin_inline(), always inlined into d(), named from the binary's DWARF.
    assert!(
        text.contains("burner_main;a;d;spin_inline (inlined) "),
        "no inlined frame for spin_inline in d:\n{text}"
    );
    // Kernel frames under the workload's own (clock_gettime's syscalls).
    assert!(
        text.lines().any(|l| l.contains("burner_main;a;")
            && l.contains("clock_gettime")
            && l.contains("_[k]")),
        "no kernel frame below the workload's:\n{text}"
    );

    // pprof: what `go tool pprof` reads.
    let pprof = export(&rec, "--pprof", &dir.path().join("stacks.pb.gz"));
    // `./x setup` installs Go (golang-go) for helm: go tool pprof is there.
    let go = go().expect("go is not installed: run `./x setup` (it installs golang-go)");
    {
        {
            let top = Command::new(go)
                .args(["tool", "pprof", "-top", "-sample_index=samples"])
                .arg(&pprof)
                .output()
                .expect("run go tool pprof");
            let text = String::from_utf8_lossy(&top.stdout);
            assert!(
                top.status.success(),
                "go tool pprof: {}",
                String::from_utf8_lossy(&top.stderr)
            );
            for f in ["spin", "burner_main"] {
                assert!(
                    text.lines().any(|l| l.split_whitespace().last() == Some(f)),
                    "{f} missing:\n{text}"
                );
            }
        }
    }

    // Off CPU: the blocker's futex waits through its own path, with the
    // kernel's futex frames below, as long as the workload says it blocked.
    let off = dir.path().join("off.folded");
    let o = run_mdiag(&[
        "export",
        rec.to_str().unwrap(),
        "--off-cpu",
        "--folded",
        off.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let off_text = std::fs::read_to_string(&off).unwrap();
    let path = "blocker;[sleeping];start_thread;blocker_main;outer_wait;inner_wait;";
    let blocked: u64 = off_text
        .lines()
        .filter(|l| l.contains(path) && l.contains("futex_wait"))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
        .sum();
    let recording = mdiag::recording::read_file(&rec).unwrap();
    let recorded_ns: u64 = recording.slices.iter().map(|s| s.duration_ms).sum::<u64>() * 1_000_000;
    // The workload's own share of wall time blocked, applied to the recording.
    let share = delta("blocked_ns") as f64 / wall;
    let expected = share * recorded_ns as f64;
    println!(
        "blocker: {:.3} s off CPU in futex_wait through inner_wait; workload blocked {:.1} % of \
         {:.3} s recorded: {:.3} s",
        blocked as f64 / 1e9,
        share * 100.0,
        recorded_ns as f64 / 1e9,
        expected / 1e9
    );
    assert!(
        blocked <= recorded_ns + 5_000_000,
        "more time off CPU than recorded: {blocked} ns > {recorded_ns} ns"
    );
    assert!(
        (blocked as f64 - expected).abs() < 0.1 * recorded_ns as f64,
        "{blocked} ns blocked by the stacks, {expected:.0} ns by the workload's clock\n{off_text}"
    );

    // The HTML report: a flame graph of the burner threads.
    let html = run_mdiag(&["explain", "--format", "html", rec.to_str().unwrap()]);
    assert!(html.status.success());
    let html = String::from_utf8_lossy(&html.stdout);
    assert!(html.contains("<h2>Flame graphs</h2>"), "no flame graphs");
    assert!(
        html.contains("On CPU: burner threads") && html.contains("Off CPU: all threads"),
        "no flame graph of the burner class"
    );
    assert!(
        html.contains("burner_main"),
        "the flame graph lacks the workload's frames"
    );
    // The terminal report lists the hottest stacks, leaf first.
    let text = run_mdiag(&["explain", rec.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("Hottest stacks"), "{text}");
    assert!(text.contains("spin ← c ← b ← a ← burner_main"), "{text}");
    assert!(text.contains("Where threads wait"), "{text}");
    assert!(
        text.contains("[sleeping] __schedule [k] ← schedule [k]")
            && text.contains("inner_wait ← outer_wait ← blocker_main"),
        "{text}"
    );
}

/// `mdiag export REC FLAG OUT`, returning OUT.
fn export(rec: &Path, flag: &str, out: &Path) -> PathBuf {
    let o = run_mdiag(&["export", rec.to_str().unwrap(), flag, out.to_str().unwrap()]);
    assert!(
        o.status.success(),
        "mdiag export {flag}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out.to_owned()
}

#[test]
fn a_host_wide_recording_has_no_stacks_to_export_and_says_why() {
    let _serial = mdiag_tests::serial();
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("host.mdiag");
    // Host-wide by choice: without it, a mongod that happens to run on the
    // host (another test's, a developer's) would be the target.
    let o = run_mdiag(&[
        "record",
        "--host-wide",
        "--duration",
        "1s",
        "-o",
        rec.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run_mdiag(&["export", rec.to_str().unwrap(), "--folded", "-"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("holds no stacks") && err.contains("host-wide"),
        "{err}"
    );
}
