//! Synthetic recordings and rule files shared by the unit tests of the rules,
//! the report renderers and `explain` (test builds only).

use chrono::{DateTime, TimeDelta, Utc};

use crate::recording::model::{
    FORMAT_NAME, FORMAT_VERSION, HostFacts, ProbeStatus, ProgramStatus, Recording, SchedDrops,
    SchedSlice, Slice, Target, ThreadSlice,
};

/// A recording with no slices: host facts, a mongod target and an attached sched probe.
pub fn base(kernel: &str, arch: &str, cpus: u32) -> Recording {
    let started_at: DateTime<Utc> = "2026-03-02T10:00:00Z".parse().unwrap();
    Recording {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        mdiag_version: "0.1.0".into(),
        started_at,
        ended_at: started_at + TimeDelta::seconds(10),
        requested_duration_ms: 10_000,
        stop_reason: "duration".into(),
        host: HostFacts {
            hostname: "db1.example".into(),
            kernel_release: kernel.into(),
            arch: arch.into(),
            cpu_count: cpus,
            cpu_model: "Test CPU".into(),
            sched_features: Some(
                "PLACE_LAG RUN_TO_PARITY NO_NEXT_BUDDY WAKEUP_PREEMPTION NO_HRTICK".into(),
            ),
            net: None,
            ..HostFacts::default()
        },
        target: Some(Target {
            pid: 1000,
            comm: "mongod".into(),
            exe: Some("/usr/bin/mongod".into()),
            cmdline: vec![
                "/usr/bin/mongod".into(),
                "--config".into(),
                "/etc/mongod.conf".into(),
            ],
            how: "process".into(),
            exit_code: None,
        }),
        probes: vec![ProbeStatus {
            family: "sched".into(),
            programs: vec![
                ProgramStatus {
                    name: "sched_switch".into(),
                    attach_point: "tp_btf/sched_switch".into(),
                    error: None,
                },
                ProgramStatus {
                    name: "sched_wakeup".into(),
                    attach_point: "tp_btf/sched_wakeup".into(),
                    error: None,
                },
            ],
        }],
        slices: Vec::new(),
        checks: Default::default(),
        target_code: None,
        rseq: None,
        alloc: None,
        kernel_stacks: Vec::new(),
        mongod: None,
    }
}

fn hist(buckets: &[(usize, u64)]) -> Vec<u64> {
    let len = buckets.iter().map(|(i, _)| i + 1).max().unwrap_or(0);
    let mut h = vec![0; len];
    for &(i, n) in buckets {
        h[i] = n;
    }
    h
}

fn with_slices(mut rec: Recording, slice: SchedSlice, n: u64) -> Recording {
    rec.slices = (0..n)
        .map(|i| Slice {
            start_ms: i * 1000,
            duration_ms: 1000,
            sched: Some(slice.clone()),
            softirq: None,
            syscalls: None,
            wiredtiger: None,
            perf: None,
            alloc: None,
            contention: None,
            mongod: None,
        })
        .collect();
    rec
}

/// Four CPU-bound mongod threads on 2 CPUs for 10 s on an EEVDF kernel:
/// ~90% of switches involuntary, run-queue delays of a few ms (p99 ≈ 8 ms).
pub fn oversubscribed() -> Recording {
    let rec = base("6.18.44-fc-v769", "x86_64", 2);
    let thread = |tid: u32, vol: u64, invol: u64| ThreadSlice {
        tid,
        tgid: 1000,
        comm: format!("conn{}", tid - 1000),
        voluntary: vol,
        involuntary: invol,
        preempted: 160,
        runq_delay_ns: (vol + invol) * 3_000_000,
        runq_delays: vol + invol,
        oncpu_ns: 500_000_000,
        wakeup_preempted: 0,
        migrations: 0,
        wakeup_preempting: 0,
    };
    let slice = SchedSlice {
        switches_total: 1500,
        switches_per_cpu: vec![750, 750],
        voluntary: 70,
        involuntary: 650,
        preempted: 640,
        wakeups: 75,
        wakeup_preemptions: 0,
        migrations: 0,
        // 720 delays: 60 short (4-8 µs), the rest 1-8 ms, 5 above 8 ms.
        runq_hist_log2_ns: hist(&[(12, 60), (20, 100), (21, 400), (22, 155), (23, 5)]),
        threads: vec![
            thread(1001, 18, 163),
            thread(1002, 18, 163),
            thread(1003, 17, 162),
            thread(1004, 17, 162),
        ],
        drops: SchedDrops::default(),
    };
    with_slices(rec, slice, 10)
}

/// A healthy host: 10% of switches involuntary, run-queue p99 ≈ 50 µs.
pub fn near_miss() -> Recording {
    let rec = base("6.18.44-fc-v769", "x86_64", 8);
    let thread = |tid: u32| ThreadSlice {
        tid,
        tgid: 1000,
        comm: format!("conn{}", tid - 1000),
        voluntary: 225,
        involuntary: 25,
        preempted: 20,
        runq_delay_ns: 250 * 20_000,
        runq_delays: 250,
        oncpu_ns: 200_000_000,
        wakeup_preempted: 0,
        migrations: 0,
        wakeup_preempting: 0,
    };
    let slice = SchedSlice {
        switches_total: 4000,
        switches_per_cpu: vec![500; 8],
        voluntary: 900,
        involuntary: 100,
        preempted: 80,
        wakeups: 900,
        wakeup_preemptions: 0,
        migrations: 0,
        runq_hist_log2_ns: hist(&[(13, 580), (14, 400), (15, 20)]),
        threads: (1001..=1004).map(thread).collect(),
        drops: SchedDrops::default(),
    };
    with_slices(rec, slice, 10)
}

/// A minimal valid rule file; `extra` is appended as-is (tables).
pub fn rule_toml(id: &str, condition: &str, confidence: f64, impact: f64, extra: &str) -> String {
    format!(
        r#"id = "{id}"
title = "Test rule {id}"
severity = "medium"
summary = "A rule for tests."
confidence = {confidence}
requires = ["sched"]
condition = '{condition}'

[evidence]
"involuntary share" = "sched.involuntary_share"

[impact]
expected = "something better"
score = {impact}
source = "test"

[fix]
summary = "do the thing"
commands = ["echo fix-{id}"]
risk = "none"
verify = "look"

{extra}
"#
    )
}

/// The builtin sched rule alone: for tests about the report's mechanics that
/// must not change when rules are added to the builtin set.
pub fn sched_rule_only() -> crate::rules::RuleSet {
    crate::rules::RuleSet::from_sources(
        crate::rules::RuleSource::Builtin,
        [(
            "sched-wakeup-preemption.toml".into(),
            include_str!("../../../rules/sched-wakeup-preemption.toml").to_string(),
        )],
    )
    .unwrap()
}
