//! Tests of the measurements: which families are measured or noted and
//! why, the host's RPS/RFS state, and the families summed over a recording
//! (syscalls, rseq, perf, WiredTiger) as every report format shows them.
//! `build` and `close` are shared with the families' own tests.

#![allow(
    clippy::too_many_lines,
    reason = "a test builds its case and checks every figure in one place"
)]

use super::*;
use crate::family::softirq::testdata::{net_rx_on_cpu0, softirq_probe};

pub(crate) fn build(rec: &Recording) -> Measurements {
    Measurements::build(rec, &rec.window(), &Facts::derive(rec))
}

pub(crate) fn close(got: f64, want: f64) {
    assert!((got - want).abs() < 1e-9, "{got}, expected {want}");
}

pub(crate) fn close_all(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-9, "{got:?}, expected {want:?}");
    }
}

#[test]
fn families_without_data_are_listed_with_the_reason() {
    let mut rec = net_rx_on_cpu0();
    rec.probes[1] = softirq_probe(Some("tracepoint softirq_entry not found"));
    rec.probes[0].programs[0].error = Some("permission denied".into());
    rec.probes.push(crate::recording::model::ProbeStatus {
        family: "alloc".into(),
        programs: vec![crate::recording::model::ProgramStatus {
            name: "malloc".into(),
            attach_point: "uprobe/malloc".into(),
            error: Some("no such symbol".into()),
        }],
        left_out: None,
    });
    let m = build(&rec);
    assert_eq!(m.sched, None);
    assert_eq!(m.softirq, None);
    let notes: Vec<(&str, &str)> = m
        .not_recorded
        .iter()
        .map(|n| (n.family.as_str(), n.reason.as_str()))
        .collect();
    assert_eq!(notes.len(), 3, "{notes:?}");
    assert_eq!(notes[0].0, "sched");
    assert!(
        notes[0]
            .1
            .contains("sched_switch (tp_btf/sched_switch): permission denied"),
        "{notes:?}"
    );
    assert_eq!(notes[1].0, "softirq");
    assert!(
        notes[1]
            .1
            .starts_with("the softirq probe attached only partly"),
        "{notes:?}"
    );
    assert_eq!(
        notes[2],
        (
            "alloc",
            "the alloc probe did not attach: malloc (uprobe/malloc): no such symbol"
        )
    );
    // The host's RPS/RFS state does not depend on any probe.
    assert!(m.net.is_some());
}

#[test]
fn net_measurements_per_interface() {
    let m = build(&net_rx_on_cpu0());
    let n = m.net.expect("net state readable");
    assert!(!n.rps_enabled);
    assert!(n.rfs_enabled);
    assert_eq!(n.rps_sock_flow_entries, 32_768);
    assert_eq!(
        n.interfaces,
        [
            InterfaceMeasurement {
                name: "eth0".into(),
                rx_queues: 4,
                rps_queues: 0,
                rfs_queues: 4
            },
            InterfaceMeasurement {
                name: "eth1".into(),
                rx_queues: 2,
                rps_queues: 0,
                rfs_queues: 0
            },
        ]
    );
    let mut rec = net_rx_on_cpu0();
    rec.host.net = None;
    assert_eq!(build(&rec).net, None);
}

/// `net_rx_on_cpu0` (10 one-second slices) plus syscalls, perf and
/// WiredTiger slices and rseq ownership, identical in every slice except
/// where said.
fn with_new_families() -> Recording {
    use crate::recording::model::{
        Checkpoint, PerfSlice, PerfSymbol, ProbeStatus, ProgramStatus, RseqCall, SyscallCalls,
        SyscallsSlice, ThreadSyscallSlice, WiredTigerSlice,
    };
    let mut rec = net_rx_on_cpu0();
    let probe = |family: &str, attach_point: &str, error: Option<&str>| ProbeStatus {
        family: family.into(),
        programs: vec![ProgramStatus {
            name: format!("mdiag_{family}"),
            attach_point: attach_point.into(),
            error: error.map(str::to_string),
        }],
        left_out: None,
    };
    rec.probes.push(probe("syscalls", "tp_btf/sys_enter", None));
    rec.probes
        .push(probe("perf", "perf_event/cpu-clock@99Hz", None));
    rec.probes.push(probe(
        "wiredtiger",
        "uprobe//usr/bin/mongod:__wt_txn_checkpoint+0x1a2b",
        None,
    ));
    let hist = |buckets: &[(usize, u64)]| {
        let mut h = vec![0; buckets.iter().map(|b| b.0 + 1).max().unwrap()];
        for &(i, n) in buckets {
            h[i] = n;
        }
        h
    };
    let n = rec.slices.len();
    for (i, s) in rec.slices.iter_mut().enumerate() {
        let thread = |tid: u32, ns: u64| ThreadSyscallSlice {
            tid,
            tgid: 1000,
            futex_waits: 100,
            futex_wait_ns: ns,
            mem_calls: 0,
            mem_ns: 0,
            ..Default::default()
        };
        let rseq = |tid: u32, ret: i64, flags: u32| RseqCall {
            tid,
            tgid: 1000,
            ret,
            flags,
            len: 32,
            sig: 0x5305_3053,
            ..RseqCall::default()
        };
        s.syscalls = Some(SyscallsSlice {
            calls: vec![
                SyscallCalls {
                    name: "mmap".into(),
                    count: 100,
                    errors: 0,
                    time_ns: 500_000,
                    bytes: 100 * 65_536,
                    hist_log2_ns: hist(&[(12, 99), (16, 1)]),
                },
                SyscallCalls {
                    name: "futex_wait".into(),
                    count: 500,
                    errors: 50,
                    time_ns: 1_050_000_000,
                    bytes: 0,
                    hist_log2_ns: hist(&[(20, 400), (21, 100)]),
                },
            ],
            threads: vec![
                thread(1001, 600_000_000),
                thread(1002, 300_000_000),
                thread(1003, 100_000_000),
                thread(1004, 50_000_000),
            ],
            rseq: if i == 0 {
                vec![
                    rseq(1001, 0, 0),
                    rseq(1001, -22, 0),
                    rseq(1002, 0, 0),
                    rseq(1002, -22, 0),
                    rseq(1003, 0, 1), // unregistration: not counted
                ]
            } else {
                Vec::new()
            },
            ..SyscallsSlice::default()
        });
        let sym = |object: Option<&str>, symbol: Option<&str>, samples: u64| PerfSymbol {
            object: object.map(str::to_string),
            symbol: symbol.map(str::to_string),
            samples,
            allocator: false,
            slow_path: None,
        };
        s.perf = Some(PerfSlice {
            freq_hz: 99,
            samples: 396,
            idle_samples: 200,
            observed_samples: 99,
            target_samples: 99,
            allocator: Some(crate::symbols::AllocatorKind::GoogleTcmalloc),
            allocator_samples: 20,
            allocator_slow_path_samples: 5,
            by_symbol: vec![
                sym(
                    Some("/usr/bin/mongod"),
                    Some("tcmalloc::CentralFreeList::Populate"),
                    10,
                ),
                sym(
                    Some("/usr/lib64/libc.so.6"),
                    Some("__memmove_avx_unaligned_erms"),
                    8,
                ),
                sym(Some("[kernel]"), Some("do_syscall_64"), 6),
                sym(Some("/usr/bin/mongod"), Some("__wt_row_search"), 5),
                sym(
                    Some("/usr/bin/mongod"),
                    Some("mongo::BSONObj::woCompare"),
                    4,
                ),
                sym(None, None, 3),
            ],
            ..PerfSlice::default()
        });
        let ckpt = |ms: u64, in_progress: bool| Checkpoint {
            tid: 1010,
            start_ns: 1_000_000_000 * i as u64,
            duration_ns: ms * 1_000_000,
            ret: 0,
            in_progress,
        };
        s.wiredtiger = Some(WiredTigerSlice {
            checkpoints: match i {
                2 => vec![ckpt(1500, false)],
                6 => vec![ckpt(2500, false)],
                _ if i == n - 1 => vec![ckpt(800, true)],
                _ => Vec::new(),
            },
            ..WiredTigerSlice::default()
        });
    }
    rec.rseq = Some(crate::recording::rseq::RseqOwnership {
        allocator: crate::symbols::AllocatorKind::GoogleTcmalloc,
        glibc_rseq_size: Some(32),
        verdict: crate::recording::rseq::Verdict::BlockedByGlibcRegistration,
        method: "glibc's __rseq_size read from the target".into(),
        confidence: "high".into(),
        threads: Vec::new(),
    });
    rec
}

#[test]
fn new_families_are_summed_over_the_recording() {
    let rec = with_new_families();
    assert_eq!(rec.slices.len(), 10);
    let m = build(&rec);
    assert!(m.not_recorded.is_empty(), "{:?}", m.not_recorded);

    let s = m.syscalls.expect("syscalls measured");
    close(s.duration_s, 10.0);
    let names: Vec<&str> = s.calls.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["futex_wait", "mmap"]);
    let (futex, mmap) = (&s.calls[0], &s.calls[1]);
    close(mmap.count_per_s, 100.0);
    close(mmap.mean_us, 5.0);
    // 1000 calls: 990 in [4096, 8192) ns, 10 in [65536, 131072); p99 =
    // rank 990, the top of the first bucket.
    close(mmap.p99_us.unwrap(), 8.192);
    close(mmap.bytes_per_s.unwrap(), 6_553_600.0); // 6.25 MiB/s
    close(futex.count_per_s, 500.0);
    assert_eq!(futex.errors, 500);
    close(futex.mean_us, 2100.0);
    // 5000 waits: 4000 in [2^20, 2^21), 1000 in [2^21, 2^22) ns; p99 =
    // rank 4950: 950 into the 1000 of the second bucket.
    close(futex.p99_us.unwrap(), (2_097_152.0 * 1.95) / 1000.0);
    assert_eq!(futex.bytes_per_s, None);
    close(s.futex_wait_ms_per_s, 1050.0);
    let top: Vec<(u32, f64)> = s
        .top_futex_threads
        .iter()
        .map(|t| (t.tid, t.blocked_share))
        .collect();
    assert_eq!(top.len(), 3);
    assert_eq!(
        top.iter().map(|t| t.0).collect::<Vec<_>>(),
        [1001, 1002, 1003]
    );
    close_all(
        &top.iter().map(|t| t.1).collect::<Vec<_>>(),
        &[0.6, 0.3, 0.1],
    );
    assert_eq!(s.rseq_registrations, 4);
    assert_eq!(s.rseq_failed, 2);
    assert_eq!(
        s.rseq_failed_by_errno,
        [ErrnoCount {
            errno: 22,
            name: "EINVAL".into(),
            count: 2
        }]
    );

    let r = m.rseq.expect("rseq ownership");
    assert_eq!(r.verdict, "blocked_by_glibc_registration");
    assert_eq!(r.allocator, "google_tcmalloc");
    assert_eq!(r.glibc_rseq_size, Some(32));

    let p = m.perf.expect("perf measured");
    assert_eq!((p.samples, p.target_samples), (3960, 990));
    close(p.target_cpu_share, 0.25);
    assert_eq!(p.allocator.as_deref(), Some("google_tcmalloc"));
    close(p.allocator_share, 200.0 / 990.0);
    close(p.slow_path_share, 50.0 / 990.0);
    let syms: Vec<(&str, u64)> = p
        .top_symbols
        .iter()
        .map(|t| (t.symbol.as_str(), t.samples))
        .collect();
    assert_eq!(
        syms,
        [
            ("tcmalloc::CentralFreeList::Populate", 100),
            ("__memmove_avx_unaligned_erms", 80),
            ("do_syscall_64", 60),
            ("__wt_row_search", 50),
            ("mongo::BSONObj::woCompare", 40),
        ]
    );
    close(p.top_symbols[0].share, 100.0 / 990.0);

    let w = m.wiredtiger.expect("wiredtiger measured");
    assert_eq!(w.checkpoints, 3);
    close(w.total_ms, 4800.0);
    close(w.mean_ms, 1600.0);
    close(w.max_ms, 2500.0);
    assert!(w.in_progress);
    assert_eq!(w.object.as_deref(), Some("/usr/bin/mongod"));
}

fn report(rec: &Recording) -> crate::report::Report {
    crate::explain::explain(
        rec,
        &crate::rules::RuleSet::builtin().unwrap(),
        Some("x86_64"),
        None,
    )
    .unwrap()
}

#[test]
fn every_format_shows_the_new_families() {
    let report = report(&with_new_families());
    let text = crate::report::terminal::render(&report, false);
    let section = &text[text.find("\nMeasurements\n").expect("section")..];
    for want in [
        "Syscalls",
        "futex_wait",
        "2100", // mean µs
        "4089", // p99 µs
        "8.19", // mmap p99 µs
        "6.25", // mmap MiB/s
        "futex wait: 1050 ms/s blocked in total",
        "tid 1001 60.0%, tid 1002 30.0%, tid 1003 10.0%",
        "rseq: 4 registrations seen, 2 failed (2 EINVAL)",
        "blocked: glibc registered rseq first — TCMalloc's per-CPU caches cannot work",
        "allocator google_tcmalloc, glibc __rseq_size 32, confidence high",
        "3960 samples; target 25.0% of the sampled CPU time",
        "(google_tcmalloc) 20.2% of the target's samples, slow paths 5.1%",
        "tcmalloc::CentralFreeList::Populate",
        "libc.so.6",
        "3 checkpoints, total 4800 ms, mean 1600 ms, max 2500 ms",
        "one still running at the end",
        "WiredTiger in /usr/bin/mongod",
    ] {
        assert!(
            section
                .replace('\n', " ")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
                .contains(want),
            "{want:?} missing in:\n{section}"
        );
    }
    for line in section.lines() {
        assert!(line.chars().count() <= 100, "too wide: {line}");
    }
    assert!(!text.contains('\u{1b}'));
    assert!(crate::report::terminal::render(&report, true).contains('\u{1b}'));

    let md = crate::report::markdown::render(&report);
    for want in [
        "### Syscalls",
        "| Syscall | Calls/s | Errors | Mean (µs) | p99 (µs) | MiB/s |",
        "| futex_wait | 500 | 500 | 2100 | 4089 | - |",
        "| mmap | 100 | 0 | 5.00 | 8.19 | 6.25 |",
        "| 1001 | 1000 | 600 | 60.0% |",
        "- Rseq: 4 registrations seen, 2 failed (2 EINVAL).",
        "### rseq ownership",
        "Blocked: glibc registered rseq first",
        "### Perf",
        "| `tcmalloc::CentralFreeList::Populate` | mongod | 100 | 10.1 |",
        "| `__memmove_avx_unaligned_erms` | libc.so.6 | 80 | 8.1 |",
        "### WiredTiger",
        "3 checkpoints, total 4800 ms, mean 1600 ms, max 2500 ms; one still running",
    ] {
        assert!(md.contains(want), "{want:?} missing in:\n{md}");
    }

    let json = crate::report::json::render(&report).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let base: serde_json::Value = serde_json::from_str(
        &crate::report::json::render(&self::report(&net_rx_on_cpu0())).unwrap(),
    )
    .unwrap();
    let keys =
        |v: &serde_json::Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(keys(&v), keys(&base));
    assert!(keys(&v).contains(&"measurements".to_string()));
    let m = &v["measurements"];
    // Every family's field, and the report's own.
    let mut want: Vec<String> = crate::kit::family::Family::ALL
        .map(|f| f.name().to_string())
        .into_iter()
        .chain(
            [
                "host_settings",
                "mongod",
                "net",
                "not_recorded",
                "rseq",
                "timeline",
            ]
            .map(String::from),
        )
        .collect();
    want.sort();
    assert_eq!(keys(m), want);
    assert!(keys(m).contains(&"wiredtiger".to_string()));
    assert_eq!(m["syscalls"]["futex_wait_ms_per_s"], 1050.0);
    assert_eq!(m["syscalls"]["calls"][1]["bytes_per_s"], 6_553_600.0);
    assert_eq!(m["perf"]["target_cpu_share"], 0.25);
    assert_eq!(
        m["perf"]["top_symbols"][1]["object"],
        "/usr/lib64/libc.so.6"
    );
    assert_eq!(m["wiredtiger"]["checkpoints"], 3);
    assert_eq!(m["wiredtiger"]["in_progress"], true);
    assert_eq!(m["rseq"]["verdict"], "blocked_by_glibc_registration");
    assert_eq!(m["rseq"]["glibc_rseq_size"], 32);
}

#[test]
fn new_families_without_data_say_why() {
    let mut rec = with_new_families();
    for s in &mut rec.slices {
        s.syscalls = None;
        s.wiredtiger = None;
    }
    let wt = rec
        .probes
        .iter_mut()
        .find(|p| p.family == "wiredtiger")
        .unwrap();
    wt.programs[0].error = Some("not applicable: no WiredTiger in the target".into());
    let m = build(&rec);
    assert_eq!(m.syscalls, None);
    assert_eq!(m.wiredtiger, None);
    assert!(m.perf.is_some());
    let notes: Vec<(&str, &str)> = m
        .not_recorded
        .iter()
        .map(|n| (n.family.as_str(), n.reason.as_str()))
        .collect();
    assert_eq!(notes.len(), 2, "{notes:?}");
    assert_eq!(
        notes[0],
        (
            "syscalls",
            "the syscalls probe attached but recorded nothing"
        )
    );
    assert_eq!(notes[1].0, "wiredtiger");
    assert!(
        notes[1].1.contains("not applicable: no WiredTiger"),
        "{notes:?}"
    );
    let text = crate::report::terminal::render(&report(&rec), false);
    assert!(text.contains("wiredtiger not measured:"), "{text}");
}
