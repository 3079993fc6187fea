//! `explain` on a 60 s recording: read + decompress + validate the file,
//! evaluate the built-in rules, render every format. The recording is built
//! in code with realistic shape (60 one-second slices, 200 active threads of
//! an oversubscribed mongod-like process).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark: a failure aborts the run"
)]
use chrono::{DateTime, Utc};
use criterion::{Criterion, criterion_group, criterion_main};
use mdiag::{
    explain::explain,
    recording::{
        Checks, FORMAT_NAME, FORMAT_VERSION, HostFacts, ProbeStatus, ProgramStatus, Recording,
        SchedDrops, SchedSlice, Slice, Target, ThreadSlice, read_file, write_atomic,
    },
    report,
    rules::RuleSet,
};

fn recording_60s() -> Recording {
    let t0: DateTime<Utc> = "2026-11-22T17:45:01Z".parse().expect("time");
    let slices = (0..60u64)
        .map(|i| {
            let threads: Vec<ThreadSlice> = (0..200u32)
                .map(|t| ThreadSlice {
                    tid: 5000 + t,
                    tgid: 5000,
                    comm: format!("conn{t}"),
                    voluntary: 40 + u64::from(t % 7),
                    involuntary: 120 + i % 13,
                    preempted: 110,
                    runq_delay_ns: 3_000_000 * 160,
                    runq_delays: 160,
                    oncpu_ns: 90_000_000,
                    wakeup_preempted: 0,
                    migrations: 0,
                    wakeup_preempting: 0,
                })
                .collect();
            Slice {
                start_ms: i * 1000,
                duration_ms: 1000,
                sched: Some(SchedSlice {
                    switches_total: 60_000 + i,
                    switches_per_cpu: vec![7_500; 8],
                    voluntary: 9_000,
                    involuntary: 25_000,
                    preempted: 22_000,
                    wakeups: 9_500,
                    wakeup_preemptions: 0,
                    migrations: 0,
                    runq_hist_log2_ns: vec![
                        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 40, 300, 900, 2000, 4000, 8000, 9000,
                        6000, 3000, 900, 300, 40, 2,
                    ],
                    threads,
                    drops: SchedDrops::default(),
                }),
                ..Slice::default()
            }
        })
        .collect();
    Recording {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        mdiag_version: "bench".into(),
        started_at: t0,
        ended_at: t0 + chrono::Duration::seconds(60),
        requested_duration_ms: 60_000,
        stop_reason: "duration".into(),
        host: HostFacts {
            hostname: "db1".into(),
            kernel_release: "6.18.44".into(),
            arch: "x86_64".into(),
            cpu_count: 8,
            cpu_model: "bench".into(),
            sched_features: None,
            net: None,
            ..HostFacts::default()
        },
        target: Some(Target {
            pid: 5000,
            comm: "mongod".into(),
            exe: Some("/usr/bin/mongod".into()),
            cmdline: vec!["mongod".into()],
            how: "process".into(),
            exit_code: None,
        }),
        probes: vec![ProbeStatus {
            family: "sched".into(),
            programs: ["sched_switch", "sched_wakeup", "sched_wakeup_new"]
                .iter()
                .map(|tp| ProgramStatus {
                    name: format!("mdiag_{tp}"),
                    attach_point: format!("tp_btf/{tp}"),
                    error: None,
                })
                .collect(),
            left_out: None,
        }],
        slices,
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

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bench.mdiag");
    write_atomic(&recording_60s(), &path).expect("write");
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    eprintln!("60 s recording with 200 active threads: {size} bytes on disk");
    let rules = RuleSet::builtin().expect("rules");
    let rec = read_file(&path).expect("read");

    let mut g = c.benchmark_group("explain");
    g.bench_function("read 60s recording", |b| {
        b.iter(|| read_file(&path).expect("read"))
    });
    g.bench_function("evaluate rules", |b| {
        b.iter(|| explain(&rec, &rules, None, None).expect("explain"))
    });
    g.bench_function("read + explain + render terminal/markdown/json", |b| {
        b.iter(|| {
            let rec = read_file(&path).expect("read");
            let r = explain(&rec, &rules, None, Some(path.display().to_string())).expect("explain");
            (
                report::terminal::render(&r, false),
                report::markdown::render(&r),
                report::json::render(&r).expect("json"),
            )
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
