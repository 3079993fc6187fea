use std::collections::BTreeSet;

use super::*;
use crate::agent::probe_reason::ProbeReason;

fn figure(name: &'static str, kind: FigureKind) -> Figure {
    Figure {
        name,
        help: "a figure",
        unit: None,
        kind,
        labels: Vec::new(),
    }
}

fn target_view(id: &str) -> TargetView {
    TargetView {
        id: id.into(),
        rs_nm: "rs0".into(),
        up: true,
        probes: vec![
            ("sched".into(), ProbeReason::Attached),
            ("alloc".into(), ProbeReason::NotApplicable),
        ],
        drops: vec![("sched".into(), 3)],
        figures: vec![
            figure("sched_involuntary_share", FigureKind::Gauge(0.3)),
            figure("checkpoints", FigureKind::Counter(7.0)),
            figure(
                "checkpoint_duration_seconds",
                FigureKind::Histogram(Buckets::from_log2_ns(&[0, 2, 1], Some(9.0))),
            ),
        ],
        ..TargetView::default()
    }
}

fn view(targets: usize, max_series: usize) -> View {
    View {
        host: "db1".into(),
        arch: "x86_64".into(),
        kernel: "6.18".into(),
        targets: (0..targets)
            .map(|i| target_view(&format!("mongod:{}", 27017 + i)))
            .collect(),
        findings: vec![FindingView {
            rule: "sched.wakeup_preemption".into(),
            target: "mongod:27017".into(),
            severity: "high",
            state: "firing",
            class: crate::findings::RuleClass::Finding,
        }],
        agent: SelfView {
            max_series,
            process: crate::agent::process::ProcessView {
                max_fds: Some(1024),
                ..Default::default()
            },
            ..SelfView::default()
        },
    }
}

/// Sample lines (not comments): (metric name, labels text).
fn samples(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let end = l.find(['{', ' ']).unwrap();
            let labels = l[end..].split_once('}').map_or("", |(a, _)| a);
            (l[..end].to_owned(), labels.to_owned())
        })
        .collect()
}

/// The families every Prometheus client names so (no `mdiag_`).
const STANDARD: [&str; 6] = [
    "process_cpu_seconds",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_open_fds",
    "process_max_fds",
    "process_start_time_seconds",
];

#[test]
fn names_follow_prometheus_conventions() {
    let text = render(&view(2, 250));
    assert!(text.ends_with("# EOF\n"), "{text}");
    let mut families = BTreeSet::new();
    for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        let name = line.split(' ').nth(2).unwrap();
        assert!(
            families.insert(name.to_owned()),
            "family {name} twice:\n{text}"
        );
        assert!(
            name.starts_with("mdiag_") || STANDARD.contains(&name),
            "{name}"
        );
        if line.ends_with(" counter") {
            assert!(
                text.contains(&format!("\n{name}_total")),
                "{name}: counter samples end in _total"
            );
        }
    }
    for name in STANDARD {
        assert!(families.contains(name), "no {name}:\n{text}");
    }
    for (name, labels) in samples(&text) {
        assert!(
            name.starts_with("mdiag_") || name.starts_with("process_"),
            "{name}"
        );
        for forbidden in ["pid=", "tid=", "cpu="] {
            assert!(!labels.contains(forbidden), "{name}{labels}");
        }
    }
    // Both targets' figures are rows of one family each.
    assert!(text.contains("mdiag_sched_involuntary_share{target=\"mongod:27017\"} 0.3"));
    assert!(text.contains("mdiag_sched_involuntary_share{target=\"mongod:27018\"} 0.3"));
    assert!(text.contains("mdiag_target_info{target=\"mongod:27017\",rs_nm=\"rs0\""));
    assert!(text.contains(
        "mdiag_probe_up{target=\"mongod:27017\",family=\"alloc\",reason=\"not_applicable\"} 0"
    ));
    assert!(text.contains(
        "mdiag_probe_up{target=\"mongod:27017\",family=\"sched\",reason=\"attached\"} 1"
    ));
    assert!(text.contains(
        "mdiag_finding_state{rule=\"sched.wakeup_preemption\",target=\"mongod:27017\",severity=\"high\",state=\"firing\"} 1"
    ));
    // A classic histogram: cumulative buckets ending with +Inf, sum and count.
    assert!(
        text.contains(
            "mdiag_checkpoint_duration_seconds_bucket{le=\"+Inf\",target=\"mongod:27017\"} 3"
        ) || text.contains(
            "mdiag_checkpoint_duration_seconds_bucket{target=\"mongod:27017\",le=\"+Inf\"} 3"
        ),
        "{text}"
    );
    assert!(text.contains("mdiag_checkpoint_duration_seconds_count{target=\"mongod:27017\"} 3"));
}

#[test]
fn the_series_limit_holds_and_says_what_it_left_out() {
    let all = samples(&render(&view(40, 100_000)))
        .into_iter()
        .filter(|(n, _)| !n.ends_with("_bucket"))
        .count();
    assert!(all > 250, "the test needs more rows than the limit: {all}");
    let text = render(&view(40, 250));
    // Every sample line is a series, each bucket included (+1: the count
    // of what was left out is always shown).
    let rows = samples(&text);
    assert!(rows.len() <= 251, "{} series", rows.len());
    let dropped = text
        .lines()
        .find(|l| l.starts_with("mdiag_series_dropped"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap();
    assert!(dropped > 0.0, "{text}");
    // The agent's own health comes first, so the limit never hides it.
    assert!(text.contains("process_resident_memory_bytes"));
    assert!(text.contains("mdiag_finding_state{"));
}

#[test]
fn log2_buckets_become_cumulative_seconds() {
    let b = Buckets::from_log2_ns(&[1, 0, 2], None);
    assert_eq!(b.count, 3);
    let bounds: Vec<f64> = b.buckets.iter().map(|(le, _)| *le).collect();
    assert_eq!(&bounds[..3], &[2e-9, 4e-9, 8e-9]);
    assert!(bounds[3].is_infinite());
    let counts: Vec<u64> = b.buckets.iter().map(|(_, c)| *c).collect();
    assert_eq!(counts, [1, 0, 2, 0]);
    // Written cumulative.
    let text = render(&View {
        targets: vec![TargetView {
            id: "t".into(),
            figures: vec![figure("h_seconds", FigureKind::Histogram(b.clone()))],
            ..TargetView::default()
        }],
        agent: SelfView {
            max_series: 250,
            ..SelfView::default()
        },
        ..View::default()
    });
    let bucket_values: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("mdiag_h_seconds_bucket"))
        .map(|l| l.rsplit(' ').next().unwrap())
        .collect();
    assert_eq!(bucket_values, ["1", "1", "3", "3"], "{text}");
    assert!(b.sum > 0.0);
}

#[test]
fn target_info_says_the_member_state_and_a_new_state_replaces_the_row() {
    let mut v = view(1, 250);
    v.targets[0].rs_state = "1".into();
    v.targets[0].cl_id = "6560f0a1b2c3d4e5f6a7b8c9".into();
    v.targets[0].cl_role = "shardsvr".into();
    let info = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with("mdiag_target_info{"))
            .map(str::to_owned)
            .collect()
    };
    let text = render(&v);
    assert_eq!(
        info(&text),
        [
            "mdiag_target_info{target=\"mongod:27017\",rs_nm=\"rs0\",rs_state=\"1\",\
          cl_id=\"6560f0a1b2c3d4e5f6a7b8c9\",cl_role=\"shardsvr\",mongod_version=\"\",\
          build_id=\"\"} 1"
        ],
        "{text}"
    );
    // Stepped down: one row, the new state's; the old one is gone.
    v.targets[0].rs_state = "2".into();
    let text = render(&v);
    let rows = info(&text);
    assert_eq!(rows.len(), 1, "{text}");
    assert!(rows[0].contains("rs_state=\"2\""), "{text}");
    assert!(!text.contains("PRIMARY"), "{text}");
}

#[test]
fn skipped_targets_are_a_gauge_by_reason() {
    let mut v = view(1, 250);
    v.agent.skipped = vec![("unreadable", 0), ("duplicate_id", 2), ("attach_failed", 0)];
    let text = render(&v);
    assert!(
        text.contains("# TYPE mdiag_targets_skipped gauge"),
        "{text}"
    );
    for (reason, n) in [("unreadable", 0), ("duplicate_id", 2), ("attach_failed", 0)] {
        assert!(
            text.contains(&format!("mdiag_targets_skipped{{reason=\"{reason}\"}} {n}")),
            "{reason}:\n{text}"
        );
    }
}
