//! Synthetic recordings and rule files shared by the unit tests of the rules,
//! the report renderers and `explain` (test builds only).

use chrono::{DateTime, TimeDelta, Utc};

use crate::recording::model::{
    DbPathFacts, FORMAT_NAME, FORMAT_VERSION, HostFacts, MemoryFacts, NetFacts, NetInterface,
    NumaNode, PerfSlice, PerfSlowPath, ProbeStatus, ProcessFacts, ProgramStatus, Recording,
    ResourceLimit, RxQueue, SchedDrops, SchedSlice, Slice, SoftirqSlice, SoftirqVector,
    SysfsChoice, Target, ThpFacts, ThreadSlice, VmSysctls,
};
use crate::recording::rseq::Verdict;
use crate::rules::facts::allocator::example_code;
use crate::symbols::AllocatorKind;

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
            left_out: None,
        }],
        slices: Vec::new(),
        checks: Default::default(),
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

pub(crate) fn hist(buckets: &[(usize, u64)]) -> Vec<u64> {
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
            ..Slice::default()
        })
        .collect();
    rec
}

/// Four CPU-bound mongod threads on 2 CPUs for 10 s on an EEVDF kernel:
/// A mongod connection thread `conn<tid-1000>` of pid 1000 that is mostly
/// preempted: `vol` voluntary and `invol` involuntary switches in a
/// one-second slice, 3 ms of run-queue delay each, half a CPU used.
pub(crate) fn conn_thread(tid: u32, vol: u64, invol: u64) -> ThreadSlice {
    ThreadSlice {
        tid,
        tgid: 1000,
        comm: format!("conn{}", tid - 1000),
        voluntary: vol,
        involuntary: invol,
        preempted: 160,
        runq_delay_ns: (vol + invol) * 3_000_000,
        runq_delays: vol + invol,
        oncpu_ns: 500_000_000,
        wakeup_preempted: 40,
        migrations: 0,
        wakeup_preempting: 0,
    }
}

/// ~90% of switches involuntary, run-queue delays of a few ms (p99 ≈ 8 ms).
pub fn oversubscribed() -> Recording {
    let rec = base("6.18.44-fc-v769", "x86_64", 2);
    let thread = conn_thread;
    let slice = SchedSlice {
        switches_total: 1500,
        switches_per_cpu: vec![750, 750],
        voluntary: 70,
        involuntary: 650,
        preempted: 640,
        // A quarter of the involuntary switches went to a task just woken.
        wakeups: 200,
        wakeup_preemptions: 160,
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

// ---------------------------------------------------------------------------
// The well-tuned baseline host and the setters that change one part of a
// recording (used by the rule scenarios and the report's golden tests).
// ---------------------------------------------------------------------------

pub(crate) const GIB: u64 = 1 << 30;

pub(crate) fn choice(sel: &str) -> Option<SysfsChoice> {
    Some(SysfsChoice {
        selected: Some(sel.into()),
        raw: format!("[{sel}]"),
    })
}

/// A host tuned as MongoDB 8 with Google TCMalloc wants it: 64 GiB, no swap
/// pressure, THP always/defer+madvise/0, byte-based writeback, one NUMA
/// node, 64000 open files, glibc leaving rseq to TCMalloc, RFS on, a quiet
/// allocator. Every builtin rule is assessed on it and none fires.
pub(crate) fn baseline() -> Recording {
    let mut rec = near_miss();
    rec.host.memory = Some(MemoryFacts {
        mem_total_bytes: Some(64 * GIB),
        mem_available_bytes: Some(40 * GIB),
        swap_total_bytes: Some(4 * GIB),
        thp: Some(ThpFacts {
            enabled: choice("always"),
            defrag: choice("defer+madvise"),
            khugepaged_max_ptes_none: Some(0),
        }),
        vm: VmSysctls {
            dirty_ratio: Some(0),
            dirty_background_ratio: Some(0),
            dirty_bytes: Some(536_870_912),
            dirty_background_bytes: Some(67_108_864),
            dirty_expire_centisecs: Some(3000),
            dirty_writeback_centisecs: Some(500),
            swappiness: Some(1),
            // MongoDB's THP unit for mongod 8 sets always-overcommit.
            overcommit_memory: Some(1),
            zone_reclaim_mode: Some(0),
            max_map_count: Some(262_144),
            overcommit_ratio: Some(50),
            overcommit_kbytes: Some(0),
        },
        numa_balancing: Some(0),
        commit_limit_bytes: Some(36 * GIB),
        committed_as_bytes: Some(30 * GIB),
    });
    // MongoDB's FAQ value.
    rec.host.tcp_keepalive_time = Some(120);
    rec.host.db_path = Some(DbPathFacts {
        path: Some("/data/db".into()),
        found_by: Some("open file WiredTiger.lock".into()),
        unknown_reason: None,
        storage: Some(crate::rules::facts::storage::example_storage(
            "/data/db", "nvme0n1", 16,
        )),
    });
    rec.host.numa_nodes = Some(vec![NumaNode {
        id: 0,
        cpus: "0-7".into(),
        mem_total_bytes: Some(64 * GIB),
    }]);
    rec.host.target_process = Some(ProcessFacts {
        pid: 1000,
        numa_policy: Some("default".into()),
        max_open_files: Some(ResourceLimit {
            soft: Some(64_000),
            hard: Some(64_000),
        }),
        thp_enabled: Some(true),
        max_processes: Some(ResourceLimit {
            soft: Some(64_000),
            hard: Some(64_000),
        }),
        max_locked_memory: Some(ResourceLimit {
            soft: None,
            hard: None,
        }),
        ..ProcessFacts::default()
    });
    rec.host.system = Some(baseline_system());
    rec.host.net = Some(NetFacts {
        rps_sock_flow_entries: 32_768,
        interfaces: vec![NetInterface {
            name: "eth0".into(),
            rx_queues: vec![RxQueue {
                name: "rx-0".into(),
                rps_cpus: "00".into(),
                rps_flow_cnt: 32_768,
            }],
        }],
    });
    set_allocator(
        &mut rec,
        AllocatorKind::GoogleTcmalloc,
        Verdict::PerCpuCachesPossible,
        0,
    );
    set_softirq(&mut rec, &[2_000; 8], &[2_000_000; 8]);
    set_perf(&mut rec, 1_000, 40, 10);
    set_contention(&mut rec, 20, 20, "submit_bio_wait", 5);
    set_mongod(&mut rec, &healthy_mongod());
    // A fifth of the 8 CPUs busy: mongod's 0.8 CPUs and a little else.
    rec.host.cpu_usage = Some(crate::rules::facts::cpu::usage(
        10,
        8,
        1.6,
        &[(1000, "mongod", 0.8), (2000, "sshd", 0.05)],
    ));
    rec
}

/// The baseline host's kernel limits (systemd's), a clock kept by chronyd,
/// no tuned, and the one mongod (the target) with the default cache.
pub(crate) fn baseline_system() -> crate::recording::SystemFacts {
    crate::recording::SystemFacts {
        file_max: Some(9_223_372_036_854_775_807),
        file_handles: Some(2_144),
        pid_max: Some(4_194_304),
        threads_max: Some(513_000),
        tasks: Some(812),
        clock: Some(crate::recording::ClockFacts {
            unsynchronised: false,
            state: 0,
            max_error_us: 12_000,
            services: vec!["chronyd".into()],
        }),
        tuned: None,
        mongods: Some(vec![crate::recording::MongodProcess {
            pid: 1000,
            cache_size_mb: None,
            cache_from: "default".into(),
            memory_limit_bytes: None,
        }]),
        // mongod has the host to itself: sshd, an exporter, mdiag.
        other_anon_bytes: Some(300 << 20),
        largest_others: Some(vec![crate::recording::ProcessMemory {
            pid: 2000,
            comm: "sshd".into(),
            anon_bytes: 8 << 20,
        }]),
        kubernetes_node: Some(false),
    }
}

/// serverStatus figures: (path, value in the first slice, change per slice).
pub(crate) type Figures = Vec<(&'static str, i64, i64)>;

/// A healthy mongod 8.2 with Google TCMalloc on the baseline host: 1000
/// queries and 100 inserts per second, a 24 GiB cache half full, per-CPU
/// caches on and used, no application eviction, 500 data handles.
pub(crate) fn healthy_mongod() -> Figures {
    vec![
        ("opcounters.query", 0, 1000),
        ("opcounters.insert", 0, 100),
        ("opcounters.getmore", 0, 0),
        ("opcounters.update", 0, 0),
        ("opcounters.delete", 0, 0),
        ("opcounters.command", 0, 0),
        // Nothing queued, 50 connections of the 51200 that 64000 open files
        // allow, pooled (none opened during the recording), few page
        // faults, sub-second checkpoints.
        ("globalLock.currentQueue.total", 0, 0),
        ("connections.current", 50, 0),
        ("connections.available", 51_150, 0),
        ("connections.totalCreated", 1_000, 0),
        ("extra_info.page_faults", 5_000, 0),
        // Targeted queries: 1000 queries a second, each examining through
        // an index about the two documents it returns.
        ("metrics.queryExecutor.scanned", 0, 2_000),
        ("metrics.queryExecutor.scannedObjects", 0, 2_000),
        ("metrics.document.returned", 0, 2_000),
        ("metrics.queryExecutor.collectionScans.total", 0, 0),
        ("metrics.operation.scanAndOrder", 0, 0),
        // No flow control (a few µs of ticket time, never lagged); the
        // journal synced ten times a second, 0.5 ms each.
        ("flowControl.timeAcquiringMicros", 0, 8),
        ("flowControl.isLagged", 0, 0),
        ("wiredTiger.log.log sync operations", 0, 10),
        ("wiredTiger.log.log sync time duration (usecs)", 0, 5_000),
        // Tickets for every operation at once: none queued.
        (
            "queues.execution.read.normalPriority.totalTimeQueuedMicros",
            0,
            0,
        ),
        (
            "queues.execution.write.normalPriority.totalTimeQueuedMicros",
            0,
            0,
        ),
        // Three regular assertions long before the recording, none in it;
        // the application's own errors (user assertions: duplicate keys)
        // two a second.
        ("asserts.regular", 3, 0),
        ("asserts.msg", 0, 0),
        ("asserts.tripwire", 0, 0),
        ("asserts.user", 1_000, 2),
        ("wiredTiger.checkpoint.most recent time (msecs)", 800, 0),
        ("tcmalloc.usingPerCPUCaches", 1, 0),
        ("tcmalloc.tcmalloc.cpu_free", 200_000_000, 0),
        ("tcmalloc.maxPerCPUCacheSizeBytes", 67_108_864, 0),
        (
            "wiredTiger.cache.maximum bytes configured",
            24 * GIB as i64,
            0,
        ),
        (
            "wiredTiger.cache.bytes currently in the cache",
            12 * GIB as i64,
            0,
        ),
        (
            "wiredTiger.cache.tracked dirty bytes in the cache",
            GIB as i64,
            0,
        ),
        (
            "wiredTiger.cache.pages evicted by application threads",
            0,
            0,
        ),
        (
            "wiredTiger.cache.application thread time evicting (usecs)",
            0,
            0,
        ),
        (
            "wiredTiger.thread-yield.application thread time waiting for cache (usecs)",
            0,
            0,
        ),
        (
            "wiredTiger.lock.checkpoint lock application thread wait time (usecs)",
            0,
            0,
        ),
        (
            "wiredTiger.lock.dhandle lock application thread time waiting (usecs)",
            0,
            0,
        ),
        (
            "wiredTiger.data-handle.connection data handles currently active",
            500,
            0,
        ),
        // 28 GiB resident (MiB): the 24 GiB cache and the rest of mongod.
        ("mem.resident", 28 * 1024, 0),
    ]
}

/// Replaces (or adds) one figure.
pub(crate) fn with_figure(mut f: Figures, path: &'static str, start: i64, step: i64) -> Figures {
    f.retain(|x| x.0 != path);
    f.push((path, start, step));
    f
}

/// mongod polled every slice with `figures`.
pub(crate) fn set_mongod(rec: &mut Recording, figures: &Figures) {
    use crate::recording::mongod::{MongodInfo, MongodRecording, MongodSlice};
    use crate::recording::server_status::ServerStatusSample;
    for (i, slice) in rec.slices.iter_mut().enumerate() {
        let i = i as i64;
        slice.mongod = Some(MongodSlice {
            at_ms: Some(slice.start_ms + 100),
            status: Some(ServerStatusSample::parse_with(
                &|path| figures.iter().find(|f| f.0 == path).map(|f| f.1 + f.2 * i),
                vec!["opcounters".into(), "tcmalloc".into(), "wiredTiger".into()],
            )),
            missing: None,
            poll_ms: None,
            ..Default::default()
        });
    }
    let cache = figures
        .iter()
        .find(|f| f.0 == "wiredTiger.cache.maximum bytes configured")
        .map(|f| f.1 as f64 / GIB as f64);
    rec.mongod = Some(MongodRecording {
        source: "live".into(),
        info: Some(MongodInfo {
            version: Some("8.2.1".into()),
            fcv: Some("8.2".into()),
            allocator: Some("tcmalloc-google".into()),
            process: Some("mongod".into()),
            storage_engine: Some("wiredTiger".into()),
            cache_size_gb: cache,
            host_mem_mb: Some(65_536),
            host_mem_limit_mb: Some(65_536),
            host_cores: Some(i64::from(rec.host.cpu_count)),
            libc_version: Some("2.36".into()),
            max_open_files: Some(64_000),
            page_size: Some(4096),
            ..Default::default()
        }),
        polls_ok: rec.slices.len() as u64,
        ..Default::default()
    });
    set_repl(rec, healthy_repl);
    set_system(
        rec,
        &crate::rules::facts::system::example_samples(20, 0, 10, 1),
    );
}

/// A healthy three-member replica set seen from its primary `i` seconds in:
/// secondaries 1 s behind, a full 50 GiB oplog whose entries span 72 hours,
/// written at 100 kB/s.
pub(crate) fn healthy_repl(i: i64) -> crate::recording::mongod::ReplSample {
    let mut s = crate::rules::facts::replication::example_sample(i);
    let mut third = s.members[1].clone();
    third.id = 2;
    third.name = Some("db2.example:27017".into());
    s.members.push(third);
    for m in &mut s.members[1..] {
        m.optime_ms = m.optime_ms.map(|t| t + 1000);
    }
    s.oplog_size_bytes = Some(50 << 30);
    s.oplog_max_bytes = Some(50 << 30);
    s.oplog_insert_bytes = Some(i * 100_000);
    s.oplog_first_s = Some(1_700_000_000 - 72 * 3600);
    s
}

/// Replication figures in every slice with a mongod sample: `sample(i)` for slice `i`.
pub(crate) fn set_repl(
    rec: &mut Recording,
    sample: impl Fn(i64) -> crate::recording::mongod::ReplSample,
) {
    for (i, slice) in rec.slices.iter_mut().enumerate() {
        if let Some(m) = slice.mongod.as_mut() {
            m.repl = Some(sample(i as i64));
        }
    }
}

/// Host figures in the slices with a mongod sample, in order (slices beyond
/// `samples` get none).
pub(crate) fn set_system(rec: &mut Recording, samples: &[crate::recording::mongod::SystemSample]) {
    let mut next = samples.iter();
    for slice in &mut rec.slices {
        if let Some(m) = slice.mongod.as_mut() {
            m.system = next.next().cloned();
        }
    }
}

/// Every slice: a 500 ms checkpoint; each of the four conn threads waits on
/// futexes `inside_ms` inside it and `outside_ms` outside it; one D-state
/// stack with `signature` takes `dstate_ms`.
pub(crate) fn set_contention(
    rec: &mut Recording,
    inside_ms: u64,
    outside_ms: u64,
    signature: &str,
    dstate_ms: u64,
) {
    use crate::recording::model::{
        Checkpoint, SyscallCalls, SyscallsSlice, ThreadSyscallSlice, WiredTigerSlice,
    };
    use crate::recording::{
        ContentionSlice, DStateStackSlice, KernelStack, ThreadContentionSlice, WindowSplit,
    };
    let ms = 1_000_000;
    for s in &mut rec.slices {
        let tids: Vec<u32> = s
            .sched
            .as_ref()
            .map(|x| x.threads.iter().map(|t| t.tid).collect())
            .unwrap_or_default();
        // The futex_wait calls behind those waits, in one log2 bucket.
        let waits = 20 * tids.len() as u64;
        let each_ns = (inside_ms + outside_ms) * ms / 20;
        let bucket = each_ns.checked_ilog2().unwrap_or(0) as usize;
        s.syscalls = Some(SyscallsSlice {
            calls: vec![SyscallCalls {
                name: "futex_wait".into(),
                count: waits,
                errors: 0,
                time_ns: waits * each_ns,
                bytes: 0,
                hist_log2_ns: hist(&[(bucket, waits)]),
            }],
            threads: tids
                .iter()
                .map(|&tid| ThreadSyscallSlice {
                    tid,
                    tgid: 1000,
                    futex_waits: 20,
                    futex_wait_ns: (inside_ms + outside_ms) * ms,
                    futex_waits_in_checkpoint: 10,
                    futex_wait_ns_in_checkpoint: inside_ms * ms,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        });
        s.wiredtiger = Some(WiredTigerSlice {
            checkpoints: vec![Checkpoint {
                tid: 2000,
                start_ns: s.start_ms * ms,
                duration_ns: 500 * ms,
                ret: 0,
                in_progress: false,
            }],
            drops: Default::default(),
        });
        // The D-state sleeps, half inside the checkpoint, by the first
        // thread and under one stack.
        let sleeps = WindowSplit::from_arrays([1, 1], [dstate_ms * ms / 2, dstate_ms * ms / 2]);
        s.contention = Some(ContentionSlice {
            threads: tids
                .first()
                .map(|&tid| ThreadContentionSlice {
                    tid,
                    tgid: 1000,
                    comm: format!("conn{}", tid - 1000),
                    lock: WindowSplit::default(),
                    dstate: sleeps,
                })
                .into_iter()
                .collect(),
            dstate_stacks: vec![DStateStackSlice {
                stack_id: 1,
                sleeps,
            }],
            ..Default::default()
        });
    }
    rec.kernel_stacks = vec![KernelStack {
        stack_id: 1,
        frames: vec!["__schedule".into(), "io_schedule".into(), signature.into()],
        signature: Some(signature.into()),
    }];
    for family in ["syscalls", "contention", "wiredtiger"] {
        rec.probes.retain(|p| p.family != family);
        rec.probes.push(ProbeStatus {
            family: family.into(),
            programs: vec![ProgramStatus {
                name: family.into(),
                attach_point: "test".into(),
                error: None,
            }],
            left_out: None,
        });
    }
}

pub(crate) fn set_allocator(
    rec: &mut Recording,
    kind: AllocatorKind,
    verdict: Verdict,
    rseq_size: u32,
) {
    let code = example_code(kind, "/usr/bin/mongod");
    // The method and confidence as `record` words them; the verdict as given.
    let mut rseq = crate::rseq::ownership_with(&code, Some(rseq_size), &[]);
    rseq.verdict = verdict;
    rec.target_code = Some(code);
    rec.rseq = Some(rseq);
}

/// NET_RX per CPU per slice: entries and handler time (ns); the softirq
/// probe is marked attached.
pub(crate) fn set_softirq(rec: &mut Recording, count: &[u64], time_ns: &[u64]) {
    rec.host.cpu_count = count.len() as u32;
    for s in &mut rec.slices {
        s.softirq = Some(SoftirqSlice {
            vectors: vec![SoftirqVector {
                name: "NET_RX".into(),
                count_per_cpu: count.to_vec(),
                time_ns_per_cpu: time_ns.to_vec(),
            }],
            hardirqs: Vec::new(),
            drops: Default::default(),
        });
    }
    rec.probes.retain(|p| p.family != "softirq");
    rec.probes.push(ProbeStatus {
        family: "softirq".into(),
        programs: vec![ProgramStatus {
            name: "softirq_entry".into(),
            attach_point: "tp_btf/softirq_entry".into(),
            error: None,
        }],
        left_out: None,
    });
}

/// Per slice: target samples, of which allocator, of which slow path.
pub(crate) fn set_perf(rec: &mut Recording, target: u64, alloc: u64, slow: u64) {
    for s in &mut rec.slices {
        s.perf = Some(PerfSlice {
            freq_hz: 99,
            samples: target * 2,
            observed_samples: target,
            target_samples: target,
            allocator_samples: alloc,
            allocator_slow_path_samples: slow,
            slow_paths: vec![PerfSlowPath {
                label: "central_free_list".into(),
                samples: slow,
            }],
            ..PerfSlice::default()
        });
    }
}
