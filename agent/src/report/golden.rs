//! Golden (snapshot) tests of every report format, and a check across formats
//! that every finding shows what it must.
//!
//! Three recordings are built in code from realistic values (the model is
//! `recording/model.rs`; the builders are in `rules/testdata.rs`):
//!
//! - [`testdata::baseline`]: a well-tuned MongoDB 8.2 host on which every
//!   builtin rule is assessed and none fires, with allocator latency windows
//!   (so the allocator chart is drawn);
//! - [`busy`]: the same host under load with several problems at once and no
//!   mongod connection nor allocator windows, so some findings say what they
//!   were made without and the rules that need mongod are "not assessed";
//!   ranked for the recording's x86_64 and, with `--arch s390x`, for IBM Z;
//! - [`probe_failures`]: the softirq probe could not attach and the contention
//!   probe attached only in part.
//!
//! Each is rendered as `mdiag explain` would print it (terminal without
//! colour, chosen explicitly rather than from the environment; Markdown; JSON;
//! HTML with its inline SVG charts, the chart contract) and compared with the
//! files in `snapshots/` next to this module. Everything rendered comes from
//! the recording (no clock, no host lookups) except the version of the mdiag
//! that builds the report, which the tests set to `0.0.0-golden`; so no insta
//! filter is needed.
//!
//! Updating the snapshots after an intended change of a report (or of the
//! builtin rules), in one command:
//!
//! ```sh
//! INSTA_UPDATE=always cargo test -p mdiag --lib report::golden
//! ```
//!
//! then read the diff (`git diff agent/src/report/snapshots`) as a user would
//! before committing it. With `cargo-insta` installed, `cargo insta test -p mdiag
//! --review` does the same interactively; it is not required. Under `CI=true`
//! insta never writes snapshots and a mismatch fails the test.
//!
//! [`every_finding_shows_its_evidence_confidence_missing_data_and_fix`] is not a
//! snapshot: it checks, for every format, that each fired finding of [`busy`]
//! shows its evidence numbers as rendered, its confidence, its fix commands and
//! what was missing, and that each not-assessed rule appears with its reason.

use crate::explain::explain;
use crate::recording::model::{
    ProbeStatus, ProgramStatus, Recording, ResourceLimit, SchedDrops, SchedSlice, SyscallCalls,
};
use crate::recording::rseq::Verdict;
use crate::recording::{
    AllocCalibration, AllocFunctionWindow, AllocOverhead, AllocRecord, AllocSlice, AllocWindow,
};
use crate::report::{Report, html, json, markdown, terminal};
use crate::rules::RuleSet;
use crate::rules::testdata::{
    self, GIB, baseline, set_allocator, set_contention, set_perf, set_softirq,
};
use crate::symbols::AllocatorKind;

/// The builtin rules on `rec`, ranked for `arch` (or the recording's), read
/// from a fixed path so that the header does not depend on where tests run.
fn report(rec: &Recording, arch: Option<&str>, file: &str) -> Report {
    let mut r = explain(
        rec,
        &RuleSet::builtin().expect("builtin rules load"),
        arch,
        Some(format!("/var/lib/mdiag/{file}")),
    )
    .expect("explain");
    // The building mdiag's version (JSON, HTML footer) is the one value not
    // from the recording; fixed so that a release does not touch the goldens.
    r.mdiag_version = "0.0.0-golden".into();
    r
}

/// The baseline host under load, with several problems at once:
/// - 16 conn threads on 8 CPUs, preempted all the time (wakeup preemption);
/// - NET_RX piled on CPU 0 with RPS and RFS off;
/// - glibc registered rseq first, so TCMalloc's per-CPU caches are off;
/// - futex waits concentrated in checkpoints (400 ms inside a 500 ms
///   checkpoint per thread per second, 20 ms outside);
/// - `vm.swappiness` 60 with swap, percentage-based writeback on 256 GiB;
/// - `nofile` soft limit 1024;
/// - the allocator is hot in the perf samples (20 %, slow path 40 % of that);
/// - the CPUs busy 99 % of the time, 5 of the 8 by another process;
///
/// and with evidence groups absent: mongod was not polled (the rules that
/// need it are not assessed; the ones that can use it say they did without)
/// and no allocator latency window ran.
pub(crate) fn busy() -> Recording {
    let mut rec = baseline();
    rec.host.hostname = "db2.example".into();
    let sched = oversubscribed_sched();
    for s in &mut rec.slices {
        s.sched = Some(sched.clone());
    }
    // NET_RX: CPU 0 takes 40 000 entries and 300 ms per second, the other
    // seven 500 entries and 1 ms each.
    let mut count = vec![500; 8];
    let mut time = vec![1_000_000; 8];
    count[0] = 40_000;
    time[0] = 300_000_000;
    set_softirq(&mut rec, &count, &time);
    if let Some(net) = rec.host.net.as_mut() {
        net.rps_sock_flow_entries = 0;
        for q in net
            .interfaces
            .iter_mut()
            .flat_map(|i| i.rx_queues.iter_mut())
        {
            q.rps_flow_cnt = 0;
        }
    }
    set_allocator(
        &mut rec,
        AllocatorKind::GoogleTcmalloc,
        Verdict::BlockedByGlibcRegistration,
        32,
    );
    set_contention(&mut rec, 400, 20, "submit_bio_wait", 5);
    // The 8 CPUs busy 99 % of the time: mongod's 2 CPUs and a batch job's 5.
    rec.host.cpu_usage = Some(crate::rules::facts::cpu::usage(
        10,
        8,
        7.92,
        &[
            (1000, "mongod", 2.0),
            (4242, "batch-report", 5.1),
            (77, "sshd", 0.02),
        ],
    ));
    // The calls behind those waits, and the allocator returning memory.
    let call = |name: &str, count: u64, each_ns: u64, bytes: u64, bucket: usize| SyscallCalls {
        name: name.into(),
        count,
        errors: 0,
        time_ns: count * each_ns,
        bytes,
        hist_log2_ns: testdata::hist(&[(bucket, count)]),
    };
    for s in &mut rec.slices {
        if let Some(sys) = s.syscalls.as_mut() {
            sys.calls = vec![
                call("futex_wait", 320, 21_000_000, 0, 24),
                call("madvise", 120, 9_000, 120 * 2 * 1_048_576, 13),
                call("mmap", 40, 12_000, 40 * 1_048_576, 13),
            ];
        }
    }
    set_perf(&mut rec, 1_000, 200, 80);
    if let Some(m) = rec.host.memory.as_mut() {
        m.mem_total_bytes = Some(256 * GIB);
        m.mem_available_bytes = Some(200 * GIB);
        m.vm.swappiness = Some(60);
        m.vm.dirty_bytes = Some(0);
        m.vm.dirty_background_bytes = Some(0);
        m.vm.dirty_ratio = Some(20);
        m.vm.dirty_background_ratio = Some(10);
    }
    if let Some(p) = rec.host.target_process.as_mut() {
        p.max_open_files = Some(ResourceLimit {
            soft: Some(1024),
            hard: Some(524_288),
        });
    }
    // No mongod connection, no allocator windows.
    rec.mongod = None;
    rec.alloc = None;
    for s in &mut rec.slices {
        s.mongod = None;
        s.alloc = None;
    }
    rec
}

/// One second of an oversubscribed 8-CPU host: 16 CPU-bound conn threads,
/// each on a CPU half the time; ~90 % of their switches involuntary and
/// run-queue delays of a few ms (p99 ≈ 8 ms). Four times the 2-CPU slice of
/// [`testdata::oversubscribed`].
fn oversubscribed_sched() -> SchedSlice {
    let thread = |tid: u32| {
        let (vol, invol) = if tid % 2 == 1 { (18, 163) } else { (17, 162) };
        testdata::conn_thread(tid, vol, invol)
    };
    SchedSlice {
        switches_total: 6000,
        switches_per_cpu: vec![750; 8],
        voluntary: 280,
        involuntary: 2600,
        preempted: 2560,
        // 40 per thread (testdata::conn_thread): a quarter of the involuntary.
        wakeups: 800,
        wakeup_preemptions: 640,
        migrations: 0,
        // 2880 delays: 240 short (4-8 µs), the rest 1-8 ms, 20 above 8 ms.
        runq_hist_log2_ns: testdata::hist(&[(12, 240), (20, 400), (21, 1600), (22, 620), (23, 20)]),
        threads: (1001..=1016).map(thread).collect(),
        drops: SchedDrops::default(),
    }
}

/// The baseline with probe failures: the softirq probe could not attach (its
/// data is missing, so the RFS rule is not assessed) and one of the
/// contention probe's two programs failed.
pub(crate) fn probe_failures() -> Recording {
    let mut rec = baseline_with_alloc_windows();
    rec.host.hostname = "db3.example".into();
    for s in &mut rec.slices {
        s.softirq = None;
    }
    let failed = |name: &str, point: &str, error: &str| ProgramStatus {
        name: name.into(),
        attach_point: point.into(),
        error: Some(error.into()),
    };
    for p in &mut rec.probes {
        match p.family.as_str() {
            "softirq" => {
                p.programs = vec![
                    failed(
                        "softirq_entry",
                        "tp_btf/softirq_entry",
                        "loading the program: permission denied (EPERM): CAP_BPF missing",
                    ),
                    failed(
                        "softirq_exit",
                        "tp_btf/softirq_exit",
                        "loading the program: permission denied (EPERM): CAP_BPF missing",
                    ),
                ];
            }
            "contention" => {
                p.programs = vec![
                    ProgramStatus {
                        name: "dstate_switch".into(),
                        attach_point: "tp_btf/sched_switch".into(),
                        error: None,
                    },
                    failed(
                        "contention_begin",
                        "tp_btf/contention_begin",
                        "attaching: the kernel has no BTF tracepoint contention_begin \
                         (CONFIG_LOCK_EVENT_COUNTS?)",
                    ),
                ];
            }
            _ => {}
        }
    }
    // The probe list as `record` writes it: families in attach order.
    let order = ["sched", "softirq", "syscalls", "contention", "wiredtiger"];
    rec.probes.sort_by_key(|p: &ProbeStatus| {
        order
            .iter()
            .position(|f| *f == p.family)
            .unwrap_or(order.len())
    });
    rec
}

/// The baseline with the allocator latency windows `record` takes by default
/// (200 ms every 5 s here): Google TCMalloc's malloc and free at about
/// 100 000 calls per second each, mostly under a microsecond once the
/// probe's own 700 ns are taken off, with the overhead that cost the target.
pub(crate) fn baseline_with_alloc_windows() -> Recording {
    let mut rec = baseline();
    let pair_cost_ns = 2_200;
    let function = |symbol: &str, buckets: &[(usize, u64)], each_ns: &[u64]| {
        let count = buckets.iter().map(|b| b.1).sum();
        AllocFunctionWindow {
            symbol: symbol.into(),
            count,
            sum_ns: buckets.iter().zip(each_ns).map(|(b, ns)| b.1 * ns).sum(),
            buckets: testdata::hist(buckets),
            size_classes: vec![],
        }
    };
    let window = |start_ns: u64| AllocWindow {
        start_ns,
        end_ns: start_ns + 200_000_000,
        functions: vec![
            function(
                "malloc",
                &[(9, 15_000), (10, 4_500), (11, 500)],
                &[800, 1_300, 2_500],
            ),
            function("free", &[(9, 17_000), (10, 2_000)], &[750, 1_200]),
        ],
        ..AllocWindow::default()
    };
    let mut hits = 0;
    for s in &mut rec.slices {
        if s.start_ms % 5_000 == 1_000 {
            let w = window(s.start_ms * 1_000_000);
            hits += w.functions.iter().map(|f| f.count).sum::<u64>();
            s.alloc = Some(AllocSlice { windows: vec![w] });
        }
    }
    // 4 conn threads at 200 ms of CPU per second for 10 s.
    let target_cpu_ns = 8_000_000_000;
    rec.alloc = Some(AllocRecord {
        window_ms: 200,
        every_ms: 5_000,
        allocator: Some(AllocatorKind::GoogleTcmalloc),
        object: "/usr/bin/mongod".into(),
        calibration: Some(AllocCalibration {
            pair_cost_ns,
            inside_ns: 700,
            ..AllocCalibration::default()
        }),
        overhead: Some(AllocOverhead {
            probe_hits: hits,
            pair_cost_ns,
            target_cpu_ns,
            overhead_ppm: hits * pair_cost_ns * 1_000_000 / target_cpu_ns,
        }),
        ..AllocRecord::default()
    });
    rec.probes.push(ProbeStatus {
        family: "alloc".into(),
        programs: ["mdiag_alloc_enter", "mdiag_alloc_exit"]
            .iter()
            .map(|name| ProgramStatus {
                name: (*name).into(),
                attach_point: "uprobe/allocator entry points (resolved at the first window)".into(),
                error: None,
            })
            .collect(),
        left_out: None,
    });
    rec
}

/// Every rendering of `r`, by name.
fn formats(r: &Report) -> [(&'static str, String); 4] {
    [
        ("terminal", terminal::render(r, false)),
        ("markdown", markdown::render(r)),
        ("json", json::render(r).expect("json")),
        ("html", html::render(r)),
    ]
}

fn snapshot_all(name: &str, r: &Report) {
    for (format, text) in formats(r) {
        insta::assert_snapshot!(format!("{name}.{format}"), text);
    }
}

#[test]
fn baseline_in_every_format() {
    let r = report(&baseline_with_alloc_windows(), None, "baseline.mdiag");
    assert!(r.findings.is_empty(), "the baseline fires nothing");
    snapshot_all("baseline", &r);
}

#[test]
fn busy_in_every_format() {
    let r = report(&busy(), None, "busy.mdiag");
    assert!(r.findings.len() >= 5, "{:?}", r.findings);
    snapshot_all("busy", &r);
}

#[test]
fn busy_ranked_for_s390x() {
    let r = report(&busy(), Some("s390x"), "busy.mdiag");
    assert!(r.architecture_overridden);
    // The ranking differs from x86_64's: priors move findings.
    let x86 = report(&busy(), None, "busy.mdiag");
    let order =
        |r: &Report| -> Vec<String> { r.findings.iter().map(|f| f.rule_id.clone()).collect() };
    assert_ne!(order(&r), order(&x86));
    insta::assert_snapshot!("busy_s390x.terminal", terminal::render(&r, false));
    insta::assert_snapshot!("busy_s390x.json", json::render(&r).expect("json"));
}

#[test]
fn probe_failures_in_every_format() {
    let r = report(&probe_failures(), None, "probe-failures.mdiag");
    assert!(r.probes.iter().any(|p| !p.attached));
    snapshot_all("probe_failures", &r);
}

/// Whether `text` contains `needle` once the renderers' own line breaks,
/// indentation and Markdown/HTML escapes are folded away.
fn shows(text: &str, needle: &str) -> bool {
    let fold = |s: &str| {
        s.replace("&quot;", "\"")
            .replace("&amp;", "&")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&#39;", "'")
            .replace("\\|", "|")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    fold(text).contains(&fold(needle))
}

#[test]
fn every_finding_shows_its_evidence_confidence_missing_data_and_fix() {
    let r = report(&busy(), None, "busy.mdiag");
    // The recording is made so that each part of the check is exercised.
    assert!(r.findings.iter().any(|f| !f.missing.is_empty()));
    assert!(!r.not_assessed.is_empty());
    for (format, text) in formats(&r) {
        for f in &r.findings {
            let id = &f.rule_id;
            for e in &f.evidence {
                // JSON keeps the numbers unrounded; the others show them as
                // people read them.
                let (label, value) = if format == "json" {
                    (
                        serde_json::to_string(&e.label).expect("label"),
                        serde_json::to_string(&e.value).expect("value"),
                    )
                } else {
                    (e.label.clone(), e.value.to_string())
                };
                assert!(shows(&text, &label), "{format}: {id}: evidence {label}");
                assert!(
                    shows(&text, &value),
                    "{format}: {id}: evidence {label} = {value}"
                );
            }
            let confidence = if format == "json" {
                format!("\"confidence\": {}", f.confidence)
            } else {
                format!("Confidence: {:.2}", f.confidence)
            };
            assert!(shows(&text, &confidence), "{format}: {id}: {confidence}");
            for c in &f.fix.commands {
                let c = if format == "json" {
                    serde_json::to_string(c).expect("command")
                } else {
                    c.clone()
                };
                // Multi-line commands (heredocs) line by line.
                for line in c.lines().filter(|l| !l.trim().is_empty()) {
                    assert!(
                        shows(&text, line),
                        "{format}: {id}: fix command line {line:?}"
                    );
                }
            }
            for m in &f.missing {
                let said = if format == "json" {
                    serde_json::to_string(&m.reason).expect("reason")
                } else {
                    format!("Made without {} data: {}", m.group, m.reason)
                };
                assert!(shows(&text, &said), "{format}: {id}: missing {said}");
            }
        }
        for n in &r.not_assessed {
            for needle in [&n.rule_id, &n.reason] {
                let needle = if format == "json" {
                    serde_json::to_string(needle).expect("text")
                } else {
                    needle.clone()
                };
                assert!(
                    shows(&text, &needle),
                    "{format}: not assessed {}: {needle}",
                    n.rule_id
                );
            }
        }
    }
}
