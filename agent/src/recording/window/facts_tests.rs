//! The facts rules see, derived from one merged window against the facts of
//! the N slices it merges: on the rules' test recordings and on the golden
//! recording files. Sums, rates and percentiles are equal; [`DIFFER`] lists
//! the facts that legitimately are not, and why, and [`FOLDED`] the ones that
//! change when rows are folded into "others".

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::*;
use crate::recording::model::Recording;
use crate::rules::facts::FACT_GROUPS;
use crate::rules::{FactValue, Facts};

/// Facts of a merged window that differ from its slices' (glob: `*` matches
/// anything), with the reason.
const DIFFER: &[(&str, &str)] = &[
    ("recording.slices", "counts slices: N, then 1"),
    // mongod's samples are snapshots: the merged slice keeps the newest, so
    // the summary sees one sample. `MongodWindow` keeps the first and the
    // last for rates (`delta` over `span_ms`), and counts the seconds.
    ("mongod.seconds_with_sample", "one slice holds one sample"),
    ("mongod.seconds_missing", "counted per slice"),
    ("mongod.*_per_s", "a rate needs two samples"),
    (
        "mongod.checkpoints",
        "a counter's increase needs two samples",
    ),
    (
        "mongod.connections_max",
        "a maximum over samples: the newest is kept",
    ),
    ("mongod.queue_max", "a maximum over samples"),
    ("mongod.queue_mean", "a mean over samples"),
    ("mongod.queued_share", "a share of samples"),
    ("mongod.flow_control_lagged_share", "a share of samples"),
    (
        "mongod.server_asserts",
        "a counter's increase needs two samples",
    ),
    (
        "mongod.asserts_regular",
        "a counter's increase needs two samples",
    ),
    (
        "mongod.asserts_msg",
        "a counter's increase needs two samples",
    ),
    (
        "mongod.asserts_tripwire",
        "a counter's increase needs two samples",
    ),
    (
        "mongod.journal_sync_ms",
        "a mean of counters' differences needs two samples",
    ),
    (
        "mongod.checkpoint_mean_ms",
        "a counter's increase needs two samples",
    ),
    (
        "mongod.connections_limit_share",
        "from a maximum over samples",
    ),
    (
        "mongod.read_tickets_available_min",
        "a minimum over samples",
    ),
    (
        "mongod.write_tickets_available_min",
        "a minimum over samples",
    ),
    ("mongod.cache_fill_max", "a maximum over samples"),
    ("mongod.cache_dirty_fill_max", "a maximum over samples"),
    // The replication and host samples ride on mongod's slices: the merged
    // slice keeps the newest, so what needs several samples (counts,
    // maxima over samples, rates and shares of counters) differs.
    ("replication.samples", "counted per sample"),
    (
        "replication.unhealthy_members_max",
        "a maximum over samples",
    ),
    (
        "replication.unhealthy_member",
        "taken from the worst sample",
    ),
    ("replication.lag_max_s", "a maximum over samples"),
    ("replication.lagging_member", "taken from the worst sample"),
    (
        "replication.lag_sustained_*",
        "held over a window of samples",
    ),
    ("replication.primary_write_gap_s", "a step between samples"),
    (
        "replication.oplog_write_bytes_per_s",
        "a rate needs two samples",
    ),
    ("replication.oplog_gb_per_hour", "a rate needs two samples"),
    ("replication.oplog_window_*", "computed from the write rate"),
    (
        "replication.suggested_oplog_size_mb",
        "computed from the window",
    ),
    ("system.samples", "counted per sample"),
    ("system.*_share", "a share of counters needs two samples"),
    ("system.steal_cpus", "a rate needs two samples"),
    ("system.*_per_s", "a rate needs two samples"),
    ("system.disk_*", "rates of counters need two samples"),
];

/// Facts that also change when a window names fewer rows than it saw.
const FOLDED: &[(&str, &str)] = &[
    ("sched.threads", "the folded threads count as one"),
    (
        "sched.busiest_thread*",
        "\"(others)\" may take more CPU than any thread",
    ),
    (
        "sched.classes.*",
        "folded threads leave their class for \"(others)\"",
    ),
    (
        "contention.conn_*",
        "folded conn threads leave the conn class",
    ),
    ("contention.checkpointer_*", "the same for the checkpointer"),
    ("softirq.hardirqs", "the folded IRQs count as one"),
    (
        "softirq.hardirq_busiest*",
        "\"(others)\" may take more time than any IRQ",
    ),
];

fn matches(pattern: &str, path: &str) -> bool {
    match pattern.split_once('*') {
        Some((head, tail)) => {
            path.len() >= head.len() + tail.len() && path.starts_with(head) && path.ends_with(tail)
        }
        None => pattern == path,
    }
}

fn flatten(prefix: String, v: &FactValue, out: &mut BTreeMap<String, FactValue>) {
    match v {
        FactValue::Map(m) => {
            for (k, v) in m {
                flatten(format!("{prefix}.{k}"), v, out);
            }
        }
        v => {
            out.insert(prefix, v.clone());
        }
    }
}

/// Every fact by dotted path, and every absent group's reason (without the
/// slice count some reasons give).
fn all(f: &Facts) -> BTreeMap<String, FactValue> {
    let mut out = BTreeMap::new();
    for (group, facts) in f.groups() {
        for (k, v) in facts {
            flatten(format!("{group}.{k}"), v, &mut out);
        }
    }
    for group in FACT_GROUPS.iter() {
        if let Some(why) = f.absent_reason(group) {
            let why = match why.rfind(" (") {
                Some(i) if why.ends_with(" slices)") => &why[..i],
                _ => why,
            };
            out.insert(format!("absent.{group}"), FactValue::Text(why.into()));
        }
    }
    out
}

fn same(a: &FactValue, b: &FactValue) -> bool {
    match (a, b) {
        (FactValue::Float(x), FactValue::Float(y)) => {
            (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0)
        }
        _ => a == b,
    }
}

/// Paths whose values differ or that only one side has; and how many agree.
fn differences(a: &Facts, b: &Facts) -> (Vec<String>, usize) {
    let (a, b) = (all(a), all(b));
    let mut differ: Vec<String> = Vec::new();
    let mut agree = 0;
    for path in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
        match (a.get(path), b.get(path)) {
            (Some(x), Some(y)) if same(x, y) => agree += 1,
            _ => differ.push(path.clone()),
        }
    }
    (differ, agree)
}

/// `rec` with its slices merged into one window, bounded to `top_n`.
fn merged(rec: &Recording, top_n: usize) -> Recording {
    let mut m = rec.clone();
    m.slices = vec![merge_window(&rec.slices, top_n).slice];
    m
}

fn golden(name: &str) -> Recording {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/recordings")
        .join(format!("{name}.mdiag"));
    crate::recording::read_file(&path).expect("a golden recording")
}

fn recordings() -> Vec<(&'static str, Recording)> {
    use crate::rules::testdata;
    vec![
        ("oversubscribed", testdata::oversubscribed()),
        ("near_miss", testdata::near_miss()),
        ("baseline", testdata::baseline()),
        (
            "net_rx_on_cpu0",
            crate::family::softirq::testdata::net_rx_on_cpu0(),
        ),
        (
            "contention",
            crate::family::contention::report::tests::recording(),
        ),
        ("mongod", crate::mongo::summary::tests::recording()),
        ("golden baseline", golden("baseline")),
        ("golden busy", golden("busy")),
        ("golden probe-failures", golden("probe-failures")),
    ]
}

fn unexplained<'a>(differ: &'a [String], allowed: &[&[(&str, &str)]]) -> Vec<&'a String> {
    differ
        .iter()
        .filter(|p| {
            !allowed
                .iter()
                .flat_map(|l| l.iter())
                .any(|(pat, _)| matches(pat, p))
        })
        .collect()
}

#[test]
fn facts_of_a_merged_window_equal_the_facts_of_its_slices() {
    for (name, rec) in recordings() {
        for top_n in [usize::MAX, DEFAULT_TOP_N] {
            let (whole, one) = (Facts::derive(&rec), Facts::derive(&merged(&rec, top_n)));
            let (differ, agree) = differences(&whole, &one);
            let bad = unexplained(&differ, &[DIFFER]);
            assert!(bad.is_empty(), "{name}, top {top_n}: {bad:?} differ");
            assert!(agree > 30, "{name}: only {agree} facts compared");
            assert!(differ.iter().any(|p| p == "recording.slices"), "{name}");
        }
        // The sums and percentiles named, so that a group gone missing on
        // both sides cannot pass unnoticed.
        let one = Facts::derive(&merged(&rec, DEFAULT_TOP_N));
        for path in ["sched.runq_p99_us", "sched.involuntary", "sched.oncpu_s"] {
            if rec.slices.iter().any(|s| s.sched.is_some()) {
                assert_eq!(
                    Facts::derive(&rec).get(path),
                    one.get(path),
                    "{name} {path}"
                );
                assert!(one.get(path).is_some(), "{name} {path}");
            }
        }
    }
}

#[test]
fn folding_rows_changes_only_per_row_facts() {
    // busy: 16 conn threads, 4 of them waiting; keep 2 rows per map.
    let rec = golden("busy");
    let (whole, one) = (Facts::derive(&rec), Facts::derive(&merged(&rec, 2)));
    let (differ, _) = differences(&whole, &one);
    let bad = unexplained(&differ, &[DIFFER, FOLDED]);
    assert!(bad.is_empty(), "{bad:?} differ");
    assert!(differ.iter().any(|p| p == "sched.threads"), "{differ:?}");
    for path in [
        "sched.voluntary",
        "sched.involuntary",
        "sched.oncpu_s",
        "sched.cpu_busy_share",
        "sched.runq_mean_us",
        "sched.runq_p99_us",
        "sched.processes",
        "contention.futex_inside_ms_per_s",
        "contention.futex_ratio",
        "contention.dstate_inside_ms_per_s",
        "contention.top_dstate_signature",
        "softirq.net_rx_time_ms_per_s",
        "allocator.cpu_share",
    ] {
        assert!(whole.get(path).is_some(), "{path}");
        assert!(
            whole
                .get(path)
                .zip(one.get(path))
                .is_some_and(|(a, b)| same(a, b)),
            "{path}: {:?} then {:?}",
            whole.get(path),
            one.get(path)
        );
    }
}

#[test]
fn a_family_missing_from_some_slices_has_its_own_time() {
    // The sched probe's data in every other second only: its rates are
    // over 5 s, the merged slice lasts 10 s.
    let mut rec = crate::rules::testdata::oversubscribed();
    for s in rec.slices.iter_mut().skip(1).step_by(2) {
        s.sched = None;
    }
    let w = merge_window(&rec.slices, DEFAULT_TOP_N);
    assert_eq!(
        (
            w.duration_ms(),
            w.section_ms.of_family(crate::kit::family::Family::Sched)
        ),
        (10_000, 5_000)
    );
    let (whole, one) = (Facts::derive(&rec), Facts::derive(&merged(&rec, 64)));
    assert_eq!(whole.get("sched.involuntary"), one.get("sched.involuntary"));
    assert_eq!(whole.get("sched.runq_p99_us"), one.get("sched.runq_p99_us"));
    let rate = |f: &Facts| f.get("sched.involuntary_per_s").and_then(FactValue::as_f64);
    assert_eq!(rate(&whole), Some(650.0));
    // A recording of the merged slice alone has lost the section's own time
    // (its one slice lasts 10 s); the facts of the window keep it.
    assert_eq!(rate(&one), Some(325.0));
    assert_eq!(rate(&Facts::derive_from(&rec, &w)), Some(650.0));
}

#[test]
fn mongod_rates_come_from_the_first_and_last_samples() {
    // Ten seconds: samples at 0..=5 (1000 + 100 i inserts), then 4 missing.
    let rec = crate::mongo::summary::tests::recording();
    let summary = crate::mongo::summary::MongodSummary::of(&rec).expect("a summary");
    let w = merge_window(&rec.slices, DEFAULT_TOP_N);
    let m = &w.mongod;
    assert_eq!(m.seconds_with_sample, summary.seconds_with_sample);
    assert_eq!(m.missing.values().sum::<u64>(), summary.seconds_missing);
    let span_s = m.span_ms().expect("two samples") as f64 / 1000.0;
    assert_eq!(span_s, summary.span_s);
    let inserts = m.delta(|s| s.op_insert).expect("op_insert");
    assert_eq!(Some(&inserts), summary.ops.get("insert"));
    assert_eq!(inserts as f64 / span_s, summary.ops_per_s["insert"]);
    assert_eq!(m.delta(|s| s.checkpoints), summary.checkpoints);
    // The merged slice holds the newest sample: its gauges are the summary's last.
    let newest = w.slice.mongod.as_ref().and_then(|s| s.status.as_ref());
    assert_eq!(
        newest.and_then(|s| s.connections_current),
        summary.connections_last
    );
    assert_eq!(m.last.as_ref().and_then(|s| s.status.as_ref()), newest);
}

#[test]
fn facts_of_random_windows_equal_the_facts_of_their_slices() {
    // Every family in every slice, with threads, IRQs, stacks and
    // histograms of different lengths coming and going.
    let mut r = super::random::Rng(0x5eed);
    for n in [1, 2, 5, 20] {
        let mut rec = crate::rules::testdata::base("6.18.0", "x86_64", 4);
        rec.probes
            .push(crate::family::softirq::testdata::softirq_probe(None));
        crate::rules::testdata::set_allocator(
            &mut rec,
            crate::symbols::AllocatorKind::GoogleTcmalloc,
            crate::recording::rseq::Verdict::PerCpuCachesPossible,
            0,
        );
        rec.mongod = Some(crate::recording::mongod::MongodRecording {
            source: "live".into(),
            ..Default::default()
        });
        rec.slices = super::random::slices_with(&mut r, n, 100);
        let (whole, one) = (
            Facts::derive(&rec),
            Facts::derive(&merged(&rec, usize::MAX)),
        );
        let (differ, agree) = differences(&whole, &one);
        let bad = unexplained(&differ, &[DIFFER]);
        assert!(bad.is_empty(), "{n} slices: {bad:?} differ");
        assert!(agree > 150, "{n} slices: only {agree} facts compared");
    }
}
