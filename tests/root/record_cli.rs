//! `mdiag record` and `mdiag explain` as a user runs them, as root.

use std::{
    io::{BufRead, Write},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use mdiag::recording::{Recording, read_file};
use mdiag_tests::{
    finish, mdiag_bin, proc_stat_ctxt, rel_diff, require_root, run_mdiag, spawn_ready,
    start_record, thread_switches,
};

const SPIN: &str = env!("CARGO_BIN_EXE_mdiag-spin");
const PINGPONG: &str = env!("CARGO_BIN_EXE_mdiag-pingpong");

fn involuntary_of(rec: &Recording, tgid: u32) -> u64 {
    rec.slices
        .iter()
        .filter_map(|s| s.sched.as_ref())
        .flat_map(|s| &s.threads)
        .filter(|t| t.tgid == tgid)
        .map(|t| t.involuntary)
        .sum()
}

/// No mdiag program may stay loaded after mdiag exits. The kernel frees a
/// detached tracing program after an RCU grace period, which can take a
/// moment on a busy host: poll for up to 10 s.
pub(crate) fn assert_detached() {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<String> = aya::programs::loaded_programs()
            .flatten()
            .filter_map(|p| p.name_as_str().map(str::to_owned))
            .filter(|n| n.starts_with("mdiag_"))
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "programs still loaded 10 s after mdiag exited: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn pid_mode_recording_matches_kernel_and_oversubscription_alone_is_no_wakeup_preemption() {
    let _serial = mdiag_tests::serial();
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("spin.mdiag");
    let threads = 2 * mdiag::host::online_cpus() as usize + 2;
    let (mut spin, mut spin_out) = spawn_ready(Command::new(SPIN).args([
        "--threads",
        &threads.to_string(),
        "--spin-ms",
        "2000",
        "--wait-stdin",
        "--linger",
    ]));
    let pid = spin.id();
    let (rec_child, rec_err) = start_record(&[
        "--duration",
        "5s",
        "--pid",
        &pid.to_string(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let base: u64 = thread_switches(pid).iter().map(|t| t.2).sum();
    let mut stdin = spin.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    let mut report = String::new();
    spin_out.read_line(&mut report).unwrap();
    let (status, stdout, stderr) = finish(rec_child, rec_err);
    let end: u64 = thread_switches(pid).iter().map(|t| t.2).sum();
    drop(stdin);
    let _ = spin.wait();
    assert!(status.success(), "record failed: {stderr}");
    assert!(
        stdout.contains(out.to_str().unwrap()),
        "path not printed: {stdout}"
    );

    let rec = read_file(&out).expect("recording");
    crate::physics::assert_physical(&rec);
    assert_eq!(rec.target.as_ref().map(|t| t.pid), Some(pid));
    assert_eq!(rec.stop_reason, "duration");
    assert!(
        (4..=6).contains(&rec.slices.len()),
        "{} slices",
        rec.slices.len()
    );
    let truth = end - base;
    let recorded = involuntary_of(&rec, pid);
    // Enough switches for a 5 % comparison to mean something (fewer when
    // other work on the host takes CPU from the spinners).
    assert!(truth > 100, "too few involuntary switches: {truth}");
    assert!(
        rel_diff(recorded, truth) <= 0.05,
        "recorded {recorded} vs kernel {truth}"
    );
    // mdiag's own cross-check agrees too.
    let check = rec.checks.target_nonvoluntary_ctxt_switches.unwrap();
    assert!(
        rel_diff(recorded, check) <= 0.05,
        "recorded {recorded} vs mdiag's check {check}"
    );

    let explained = run_mdiag(&["explain", "--format", "json", out.to_str().unwrap()]);
    assert!(
        explained.status.success(),
        "{}",
        String::from_utf8_lossy(&explained.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&explained.stdout).expect("JSON report");
    crate::physics::assert_physical_report(&json);
    // Findings are ranked by score (host settings rules may fire too on this
    // machine, e.g. its dirty-page thresholds).
    let findings = json["findings"].as_array().expect("findings");
    for (i, f) in findings.iter().enumerate() {
        assert_eq!(f["rank"].as_u64(), Some(i as u64 + 1), "{json:#}");
        if let Some(next) = findings.get(i + 1) {
            assert!(f["score"].as_f64() >= next["score"].as_f64(), "{json:#}");
        }
    }
    // Spinners that outnumber the CPUs are switched out when their time
    // slice ends, not by tasks waking up: a real near miss of the wakeup
    // preemption rule, which needs wakeup preemptions proper.
    let facts = &json["facts"]["sched"];
    let share = facts["involuntary_share"].as_f64().unwrap();
    let wakeup_share = facts["wakeup_preemption_share"].as_f64().unwrap();
    assert!(
        share >= 0.25,
        "the spinners were not oversubscribed: {facts:#}"
    );
    assert!(wakeup_share < 0.2, "{facts:#}");
    assert!(
        json["passed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["rule_id"] == "sched.wakeup_preemption"),
        "wakeup preemption should be assessed and pass: {json:#}"
    );
    assert_detached();
}

#[test]
fn spawned_target_is_seen_from_its_first_instruction() {
    let _serial = mdiag_tests::serial();
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("spawn.mdiag");
    let threads = (2 * mdiag::host::online_cpus() + 2).to_string();
    let t = Instant::now();
    let done = run_mdiag(&[
        "record",
        "--duration",
        "60s",
        "-o",
        out.to_str().unwrap(),
        "--",
        SPIN,
        "--threads",
        &threads,
        "--spin-ms",
        "1500",
    ]);
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "recording did not stop when the target exited"
    );
    let stdout = String::from_utf8_lossy(&done.stdout);
    let report: serde_json::Value = serde_json::from_str(
        stdout
            .lines()
            .find(|l| l.starts_with("{\""))
            .expect("workload report"),
    )
    .unwrap();
    let rec = read_file(&out).unwrap();
    crate::physics::assert_physical(&rec);
    let target = rec.target.as_ref().unwrap();
    assert_eq!(target.how, "spawned");
    assert_eq!(u64::from(target.pid), report["pid"].as_u64().unwrap());
    assert_eq!(target.exit_code, Some(0));
    assert!(
        rec.stop_reason.starts_with("target exited"),
        "{}",
        rec.stop_reason
    );
    // Counted from the first instruction: the kernel's totals for the whole
    // life of the process, taken just before it exited.
    let truth = report["nonvoluntary"].as_u64().unwrap();
    let recorded = involuntary_of(&rec, target.pid);
    // Enough switches for a 5 % comparison to mean something (fewer when
    // other work on the host takes CPU from the spinners).
    assert!(truth > 100, "too few involuntary switches: {truth}");
    assert!(
        rel_diff(recorded, truth) <= 0.05,
        "recorded {recorded} vs the process's own {truth}"
    );
    // The recording covers the whole life of the target, not only what
    // followed mdiag's own set-up: its slices span at least the time the
    // workload measured from main to its report.
    let alive_ms = report["alive_ms"].as_u64().unwrap();
    let covered_ms: u64 = rec.slices.iter().map(|s| s.duration_ms).sum();
    assert!(
        covered_ms >= alive_ms,
        "recording covers {covered_ms} ms of a target alive {alive_ms} ms"
    );
    assert_detached();
}

#[test]
fn host_wide_recording_matches_proc_stat_per_slice() {
    let _serial = mdiag_tests::serial();
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("host.mdiag");
    // Ground truth read here, not by mdiag: /proc/stat's ctxt around the
    // whole recording (its window lies inside: an upper bound), and around
    // the load, which runs inside the recording (a lower bound).
    let ctxt_before_all = proc_stat_ctxt();
    let (rec_child, rec_err) = start_record(&[
        "--duration",
        "5s",
        "--host-wide",
        "-o",
        out.to_str().unwrap(),
    ]);
    let ctxt_before_load = proc_stat_ctxt();
    let load = Command::new(PINGPONG)
        .args(["--ms", "2500"])
        .output()
        .unwrap();
    let ctxt_after_load = proc_stat_ctxt();
    let load_ended_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert!(load.status.success());
    let (status, _, stderr) = finish(rec_child, rec_err);
    let ctxt_after_all = proc_stat_ctxt();
    assert!(status.success(), "{stderr}");
    let rec = read_file(&out).unwrap();
    crate::physics::assert_physical(&rec);
    assert!(rec.target.is_none());
    assert!(rec.probes.iter().all(|p| p.attached()), "{:?}", rec.probes);
    assert!(
        load_ended_ms < rec.ended_at.timestamp_millis(),
        "the load ended at {load_ended_ms} ms (Unix), after the recording ({}): the lower bound needs it inside",
        rec.ended_at
    );
    let recorded: u64 = rec
        .slices
        .iter()
        .filter_map(|s| s.sched.as_ref())
        .map(|s| s.switches_total)
        .sum();
    // Both count the same event (a switch to another task in __schedule).
    let (inner, outer) = (
        ctxt_after_load - ctxt_before_load,
        ctxt_after_all - ctxt_before_all,
    );
    assert!(inner > 10_000, "the load switched only {inner} times");
    assert!(
        recorded as f64 >= 0.98 * inner as f64 && recorded as f64 <= 1.02 * outer as f64,
        "recorded {recorded}; /proc/stat {inner} during the load, {outer} around the recording"
    );
    // mdiag's own /proc/stat check (attach to last slice) lies between too.
    let check = rec.checks.proc_stat_ctxt.unwrap();
    assert!(
        (inner..=outer).contains(&check),
        "mdiag's check {check} outside /proc/stat's {inner}..={outer}"
    );
    let per_cpu: u64 = rec
        .slices
        .iter()
        .filter_map(|s| s.sched.as_ref())
        .flat_map(|s| &s.switches_per_cpu)
        .sum();
    assert_eq!(per_cpu, recorded);
    // Slices follow each other without gaps and cover the 3 s asked for.
    for w in rec.slices.windows(2) {
        let end = w[0].start_ms + w[0].duration_ms;
        assert!(
            w[1].start_ms.abs_diff(end) <= 1,
            "gap between slices: {end} → {}",
            w[1].start_ms
        );
    }
    let covered: u64 = rec.slices.iter().map(|s| s.duration_ms).sum();
    assert!(
        (4900..=5200).contains(&covered),
        "slices cover {covered} ms of a 5 s recording"
    );
    assert_detached();
}

/// Kernel program names as the kernel keeps them (16 bytes with the NUL).
fn kernel_name(program: &str) -> String {
    program.chars().take(15).collect()
}

/// `--probes sched,softirq`: only those families' programs are loaded in
/// the kernel while recording (read from the kernel's own program list, not
/// from mdiag), the recording has only their sections, the others say they
/// were left out by choice, and the report says so.
#[test]
fn probes_left_out_by_choice_load_nothing_and_say_so() {
    let _serial = mdiag_tests::serial();
    require_root();
    assert_detached();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("chosen.mdiag");
    let (rec_child, rec_err) = start_record(&[
        "--duration",
        "3s",
        "--host-wide",
        "--probes",
        "sched,softirq",
        "-o",
        out.to_str().unwrap(),
    ]);
    let allowed: Vec<String> = mdiag::family::sched::TRACEPOINTS
        .iter()
        .chain(mdiag::family::softirq::TRACEPOINTS.iter())
        .map(|(prog, _)| kernel_name(prog))
        .collect();
    let loaded: Vec<String> = aya::programs::loaded_programs()
        .flatten()
        .filter_map(|p| p.name_as_str().map(str::to_owned))
        .filter(|n| n.starts_with("mdiag_"))
        .collect();
    let (status, _, stderr) = finish(rec_child, rec_err);
    assert!(status.success(), "{stderr}");
    assert!(
        loaded
            .iter()
            .any(|n| n == &kernel_name("mdiag_sched_switch")),
        "sched's switch program not loaded: {loaded:?}"
    );
    let strays: Vec<&String> = loaded.iter().filter(|n| !allowed.contains(n)).collect();
    assert!(
        strays.is_empty(),
        "programs of families left out: {strays:?}"
    );
    let rec = read_file(&out).unwrap();
    for p in &rec.probes {
        match p.family.as_str() {
            "sched" | "softirq" => assert!(p.attached() && p.left_out.is_none(), "{p:?}"),
            _ => {
                assert!(p.programs.is_empty(), "{p:?}");
                assert_eq!(
                    p.left_out.as_deref(),
                    Some("left out by choice (probes: sched,softirq)")
                );
            }
        }
    }
    assert_eq!(rec.probes.len(), 7, "{:?}", rec.probes);
    assert!(
        rec.slices
            .iter()
            .all(|s| s.sched.is_some() && s.softirq.is_some())
    );
    assert!(rec.slices.iter().all(|s| {
        s.syscalls.is_none()
            && s.perf.is_none()
            && s.contention.is_none()
            && s.wiredtiger.is_none()
            && s.alloc.is_none()
    }));
    let explained = run_mdiag(&["explain", out.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&explained.stdout);
    assert!(explained.status.success(), "{text}");
    assert!(
        text.contains("syscalls   left out by choice (probes: sched,softirq)"),
        "{text}"
    );
    assert_detached();
}

#[test]
fn sigint_and_sigterm_keep_what_was_recorded() {
    let _serial = mdiag_tests::serial();
    require_root();
    for (sig, name) in [(libc::SIGINT, "SIGINT"), (libc::SIGTERM, "SIGTERM")] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("int.mdiag");
        let (rec_child, rec_err) = start_record(&[
            "--duration",
            "10m",
            "--host-wide",
            "-o",
            out.to_str().unwrap(),
        ]);
        std::thread::sleep(Duration::from_millis(1500));
        // SAFETY: plain kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(rec_child.id() as i32, sig) }, 0);
        let (status, _, stderr) = finish(rec_child, rec_err);
        assert!(status.success(), "{name}: {stderr}");
        let rec = read_file(&out).unwrap();
        crate::physics::assert_physical(&rec);
        assert_eq!(rec.stop_reason, format!("interrupted ({name})"));
        assert!(!rec.slices.is_empty());
        let total_ms: u64 = rec.slices.iter().map(|s| s.duration_ms).sum();
        // Stopped by the signal after ~1.5 s, far before the 10 minutes asked.
        assert!(
            (1000..10_000).contains(&total_ms),
            "{name}: recorded {total_ms} ms"
        );
        assert_detached();
    }
}

#[test]
fn without_privileges_record_says_what_is_missing() {
    let _serial = mdiag_tests::serial();
    require_root();
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ])
        .arg(mdiag_bin())
        .args(["record", "--duration", "1s", "-o", "/tmp/never.mdiag"])
        .output()
        .expect("setpriv (util-linux)");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("needs root, or the capabilities CAP_BPF and CAP_PERFMON"),
        "{stderr}"
    );
    assert!(!std::path::Path::new("/tmp/never.mdiag").exists());
}

/// `record -- CMD` on a glibc program that also registers rseq itself (as
/// TCMalloc does), with and without glibc's registration.
#[test]
fn rseq_ownership_of_a_spawned_target() {
    let _serial = mdiag_tests::serial();
    require_root();
    const SYSCALLS: &str = env!("CARGO_BIN_EXE_mdiag-syscalls");
    for tunable in [None, Some("glibc.pthread.rseq=0")] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("rseq.mdiag");
        let mut cmd = Command::new(mdiag_bin());
        cmd.args([
            "record",
            "--duration",
            "30s",
            "-o",
            out.to_str().unwrap(),
            "--",
            SYSCALLS,
            "--rseq-self",
            "--linger-ms",
            "1500",
        ])
        .stdin(Stdio::null());
        if let Some(t) = tunable {
            cmd.env("GLIBC_TUNABLES", t);
        }
        let done = cmd.output().unwrap();
        assert!(
            done.status.success(),
            "{}",
            String::from_utf8_lossy(&done.stderr)
        );
        let stdout = String::from_utf8_lossy(&done.stdout);
        let report: serde_json::Value = serde_json::from_str(
            stdout
                .lines()
                .find(|l| l.starts_with("{\""))
                .expect("workload report"),
        )
        .unwrap();
        let rec = read_file(&out).unwrap();
        crate::physics::assert_physical(&rec);
        let own = rec.rseq.as_ref().expect("rseq ownership recorded");
        // glibc's registration state as the process itself sees it.
        let truth = report["glibc_rseq_size"].as_u64().unwrap() as u32;
        assert_eq!(own.glibc_rseq_size, Some(truth), "{tunable:?}");
        assert_eq!(truth == 0, tunable.is_some());
        assert_eq!(own.allocator, mdiag::symbols::AllocatorKind::Glibc);
        assert_eq!(
            own.verdict,
            mdiag::recording::rseq::Verdict::AllocatorHasNoPerCpuMode
        );
        assert!(
            rec.target_code
                .as_ref()
                .is_some_and(|c| c.pid == rec.target.as_ref().unwrap().pid)
        );
        let tid = report["rseq_tid"].as_u64().unwrap() as u32;
        let thread = own
            .threads
            .iter()
            .find(|t| t.tid == tid)
            .expect("the registering thread");
        if tunable.is_none() {
            assert_eq!(thread.owner, "glibc", "{thread:?}");
            assert_eq!(
                thread.failed_calls,
                vec![-22],
                "the program's own registration failed"
            );
        } else {
            assert_eq!(thread.owner, "program", "{thread:?}");
            assert!(
                thread
                    .object
                    .as_deref()
                    .is_some_and(|o| o.ends_with("mdiag-syscalls"))
            );
            assert!(thread.failed_calls.is_empty());
        }
    }
}
