//! A long recording, generated (hours of one-second slices of a mongod
//! whose connections come and go, written in minutes): `mdiag explain`'s
//! peak memory does not grow with the recording's duration.
//!
//! The slices are written with the same writer `mdiag record` streams
//! through (`StreamWriter`), frame by frame; the peak resident set of each
//! `explain` is the kernel's (`wait4`'s `ru_maxrss`), not mdiag's word.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers: a failure is the test failing"
)]

use std::{
    io::Read,
    path::Path,
    process::{Command, Stdio},
};

use mdiag::recording::{
    FORMAT_NAME, FORMAT_VERSION, HostFacts, Recording, SchedSlice, Slice, StreamWriter,
    ThreadSlice, model::Checks,
};

/// Threads alive in each second; a quarter of them new every second.
const THREADS: u32 = 40;

fn header(slices: u64) -> Recording {
    let t0 = chrono::DateTime::parse_from_rfc3339("2026-11-22T00:00:00Z")
        .unwrap()
        .with_timezone(&chrono::Utc);
    Recording {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        mdiag_version: env!("CARGO_PKG_VERSION").into(),
        started_at: t0,
        ended_at: t0 + chrono::Duration::seconds(slices as i64),
        requested_duration_ms: slices * 1000,
        stop_reason: "duration".into(),
        host: HostFacts {
            hostname: "db1".into(),
            arch: "x86_64".into(),
            cpu_count: 8,
            ..HostFacts::default()
        },
        target: None,
        probes: Vec::new(),
        slices: Vec::new(),
        checks: Checks::default(),
        target_code: None,
        rseq: None,
        alloc: None,
        kernel_stacks: Vec::new(),
        cpu_profile: None,
        offcpu_profile: None,
        offcpu_sampled_one_in: 0,
        mongod: None,
    }
}

fn slice(i: u64) -> Slice {
    let churn = THREADS / 4;
    Slice {
        start_ms: i * 1000,
        duration_ms: 1000,
        sched: Some(SchedSlice {
            switches_total: 4000 + i % 97,
            switches_per_cpu: vec![500; 8],
            voluntary: 3000,
            involuntary: 1000,
            preempted: 900,
            wakeups: 3100,
            runq_hist_log2_ns: (0..24).map(|b| (b * 7 + i) % 50).collect(),
            threads: (0..THREADS)
                .map(|t| {
                    // Connection threads replaced every few seconds.
                    let generation = (i + u64::from(t)) / 4;
                    let tid = 1000 + t + churn * generation as u32 * 4 % 1_000_000;
                    ThreadSlice {
                        tid,
                        tgid: 999,
                        comm: format!("conn{tid}"),
                        voluntary: 75,
                        involuntary: 25,
                        preempted: 20,
                        runq_delay_ns: 1_000_000 + u64::from(t) * 1000,
                        runq_delays: 100,
                        oncpu_ns: 10_000_000 + u64::from(t) * 100_000,
                        ..ThreadSlice::default()
                    }
                })
                .collect(),
            ..SchedSlice::default()
        }),
        ..Slice::default()
    }
}

/// Writes a recording of `slices` seconds to `path`, as `record` does.
fn generate(path: &Path, slices: u64) {
    let head = header(slices);
    let mut w = StreamWriter::create(path, &head).unwrap();
    for i in 0..slices {
        w.push_slice(&slice(i)).unwrap();
        if i % 5 == 4 {
            w.flush().unwrap();
        }
    }
    w.finish(&head).unwrap();
}

/// `mdiag explain FILE --format json`: its stderr, the slices its report
/// counts, and its peak resident set in KiB (the kernel's, from `wait4`).
fn explain(path: &Path) -> (String, u64, i64) {
    #[allow(
        clippy::zombie_processes,
        reason = "reaped by wait4 below, which gives its peak memory"
    )]
    let mut child = Command::new(env!("CARGO_BIN_EXE_mdiag"))
        .args(["explain", "--format", "json"])
        .arg(path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            r.read_to_end(&mut v).unwrap();
            v
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, which nothing else reaps (the
    // `Child` is not waited on), writing into valid locals.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(pid, child.id() as i32);
    let (stdout, stderr) = (stdout.join().unwrap(), stderr.join().unwrap());
    let stderr = String::from_utf8_lossy(&stderr).into_owned();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "explain failed: {stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    (
        stderr,
        report["recording"]["slices"].as_u64().unwrap(),
        usage.ru_maxrss,
    )
}

/// Generates an `h`-hour recording in `dir` and explains it: (hours, peak
/// RSS in KiB, explain's stderr).
fn generate_and_explain(dir: &Path, h: u64) -> (u64, i64, String) {
    let path = dir.join(format!("{h}h.mdiag"));
    let t = std::time::Instant::now();
    generate(&path, h * 3600);
    let written = t.elapsed();
    let t = std::time::Instant::now();
    let (stderr, slices, peak_kib) = explain(&path);
    eprintln!(
        "{h} h: {} KiB on disk (written in {written:?}); explain: {slices} slices, peak RSS \
         {peak_kib} KiB, {:?}; {stderr}",
        std::fs::metadata(&path).unwrap().len() / 1024,
        t.elapsed()
    );
    std::fs::remove_file(&path).unwrap();
    (h, peak_kib, stderr)
}

#[test]
fn explains_peak_memory_does_not_grow_with_the_recordings_duration() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Each duration in a thread of its own: both are single-threaded work
    // (writing, then one explain process), so on a host with two CPUs the
    // hour costs no wall-clock time beside the twelve; each peak is its own
    // process's.
    let peaks: Vec<(u64, i64, String)> = std::thread::scope(|s| {
        let runs: Vec<_> = [1u64, 12]
            .into_iter()
            .map(|h| s.spawn(move || generate_and_explain(dir, h)))
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    let (_, one_hour, _) = &peaks[0];
    for (h, peak, stderr) in &peaks[1..] {
        // Past the reader's budget the slices are merged, and it says so.
        assert!(stderr.contains("merged"), "{h} h: {stderr}");
        // 12 times the duration, not 12 times the memory: within a budget
        // the hour already nearly fills.
        assert!(
            *peak <= one_hour * 3 / 2 + 16 * 1024,
            "{h} h: peak {peak} KiB against {one_hour} KiB for one hour"
        );
    }
}
