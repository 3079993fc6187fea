//! Unit tests of `explain.rs` (a child module of it, kept in its own file
//! so that the code under test stays short).

use super::*;
use crate::findings::EvidenceValue;
use crate::rules::{RuleSource, testdata};

/// The sched rule alone (the builtin set grows; the scenarios of every
/// builtin rule are in rules/scenarios/).
fn builtin() -> RuleSet {
    testdata::sched_rule_only()
}

fn value<'a>(items: &'a [EvidenceItem], label_part: &str) -> &'a EvidenceValue {
    &items
        .iter()
        .find(|i| i.label.contains(label_part))
        .unwrap_or_else(|| panic!("no evidence labelled like {label_part:?} in {items:?}"))
        .value
}

fn as_f64(v: &EvidenceValue) -> f64 {
    match v {
        EvidenceValue::Float(f) => *f,
        EvidenceValue::Int(i) => *i as f64,
        other => panic!("not a number: {other:?}"),
    }
}

#[test]
fn wakeup_preemption_fires_on_an_oversubscribed_host() {
    let report = explain(&testdata::oversubscribed(), &builtin(), None, None).unwrap();
    let f = report
        .findings
        .iter()
        .find(|f| f.rule_id == "sched.wakeup_preemption")
        .expect("rule should fire");
    assert_eq!(f.rank, 1);
    assert_eq!(f.architecture, "x86_64");
    assert!(f.score > 0.0 && f.score <= 1.0, "{}", f.score);
    assert!(
        f.rank_reason.contains("x86_64 prior 1.00 (default)"),
        "{}",
        f.rank_reason
    );
    let share = as_f64(value(&f.evidence, "involuntary switches (%"));
    assert!((share - 90.28).abs() < 0.01, "{share}");
    let p99 = as_f64(value(&f.evidence, "p99"));
    assert!((5000.0..10_000.0).contains(&p99), "{p99}");
    assert_eq!(value(&f.evidence, "threads"), &EvidenceValue::Int(4));
    assert!(
        f.fix
            .commands
            .iter()
            .any(|c| c.contains("echo NO_WAKEUP_PREEMPTION > /sys/kernel/debug/sched/features"))
    );
    assert!(
        f.fix
            .commands
            .iter()
            .any(|c| c.contains("systemctl daemon-reload && systemctl enable --now"))
    );
    assert!(report.not_assessed.is_empty(), "{:?}", report.not_assessed);
}

#[test]
fn wakeup_preemption_does_not_fire_on_a_near_miss() {
    let report = explain(&testdata::near_miss(), &builtin(), None, None).unwrap();
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    let passed = report
        .passed
        .iter()
        .find(|p| p.rule_id == "sched.wakeup_preemption")
        .expect("evaluated and passed");
    let share = as_f64(value(&passed.evidence, "involuntary switches (%"));
    assert!((share - 10.0).abs() < 1e-9, "{share}");
    let p99 = as_f64(value(&passed.evidence, "p99"));
    assert!((40.0..60.0).contains(&p99), "{p99}");
}

#[test]
fn wakeup_preemption_is_not_applicable_on_5_15() {
    let mut rec = testdata::oversubscribed();
    rec.host.kernel_release = "5.15.0-91-generic".into();
    let report = explain(&rec, &builtin(), None, None).unwrap();
    assert!(report.findings.is_empty());
    let note = report
        .not_applicable
        .iter()
        .find(|n| n.rule_id == "sched.wakeup_preemption")
        .unwrap();
    assert!(note.reason.contains(">=6.6"), "{}", note.reason);
}

#[test]
fn wakeup_preemption_does_not_fire_when_already_disabled() {
    let mut rec = testdata::oversubscribed();
    rec.host.sched_features = Some("PLACE_LAG NO_WAKEUP_PREEMPTION".into());
    let report = explain(&rec, &builtin(), None, None).unwrap();
    assert!(report.findings.is_empty());
    assert!(
        report
            .passed
            .iter()
            .any(|p| p.rule_id == "sched.wakeup_preemption")
    );
}

#[test]
fn missing_sched_data_is_not_assessed_with_the_reason() {
    let mut rec = testdata::oversubscribed();
    rec.probes[0].programs[0].error = Some("permission denied".into());
    for s in &mut rec.slices {
        s.sched = None;
    }
    let report = explain(&rec, &builtin(), None, None).unwrap();
    assert!(report.findings.is_empty());
    let note = report
        .not_assessed
        .iter()
        .find(|n| n.rule_id == "sched.wakeup_preemption")
        .expect("listed as not assessed");
    assert!(note.reason.contains("permission denied"), "{}", note.reason);
    assert!(!report.probes[0].attached);
    let lines = top_findings_summary(&report, 3);
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0].starts_with("No findings, but no rule could be assessed"),
        "{lines:?}"
    );
    assert!(lines[0].contains("permission denied"), "{lines:?}");
}

#[test]
fn arch_override_changes_scores() {
    let rec = testdata::oversubscribed();
    let x86 = explain(&rec, &builtin(), None, None).unwrap();
    let s390 = explain(&rec, &builtin(), Some("s390x"), None).unwrap();
    let (a, b) = (&x86.findings[0], &s390.findings[0]);
    assert_eq!(s390.architecture, "s390x");
    assert!(s390.architecture_overridden);
    assert!(!x86.architecture_overridden);
    assert_eq!(b.architecture, "s390x");
    assert!(b.arch_prior > 1.0);
    assert!(
        (b.score - ranking::round4(a.score * b.arch_prior)).abs() < 1e-3,
        "{} vs {}",
        a.score,
        b.score
    );
    assert!(b.rank_reason.contains("s390x prior"), "{}", b.rank_reason);
    // Aliases are accepted, typos are not.
    assert_eq!(
        explain(&rec, &builtin(), Some("AMD64"), None)
            .unwrap()
            .architecture,
        "x86_64"
    );
    let err = explain(&rec, &builtin(), Some("s390"), None).unwrap_err();
    assert!(matches!(err, ExplainError::UnknownArch { .. }));
    assert!(err.to_string().contains("s390x"), "{err}");
}

fn two_rules() -> RuleSet {
    // "t.plain" scores 0.5 everywhere; "t.s390" 0.4, × 1.5 on s390x = 0.6.
    let plain = testdata::rule_toml("t.plain", "sched.involuntary > 0", 1.0, 0.5, "");
    let s390 = testdata::rule_toml(
        "t.s390",
        "sched.involuntary > 0",
        1.0,
        0.4,
        "[arch_priors]\ns390x = 1.5\n",
    );
    RuleSet::from_sources(
        RuleSource::Builtin,
        [("plain.toml".into(), plain), ("s390.toml".into(), s390)],
    )
    .unwrap()
}

#[test]
fn arch_priors_reorder_findings() {
    let rec = testdata::oversubscribed();
    let ids = |r: &Report| -> Vec<(String, usize, f64)> {
        r.findings
            .iter()
            .map(|f| (f.rule_id.clone(), f.rank, f.score))
            .collect()
    };
    let x86 = explain(&rec, &two_rules(), None, None).unwrap();
    assert_eq!(
        ids(&x86),
        [("t.plain".into(), 1, 0.5), ("t.s390".into(), 2, 0.4)]
    );
    let s390 = explain(&rec, &two_rules(), Some("s390x"), None).unwrap();
    assert_eq!(
        ids(&s390),
        [("t.s390".into(), 1, 0.6), ("t.plain".into(), 2, 0.5)]
    );
    assert_eq!(
        s390.findings[0].rank_reason,
        "impact 0.40 × confidence 1.00 × s390x prior 1.50 = 0.60"
    );

    let lines = top_findings_summary(&s390, 1);
    assert_eq!(
        lines,
        ["#1 [medium] Test rule t.s390 (score 0.60) (+1 more)"]
    );
    let lines = top_findings_summary(&s390, 3);
    assert_eq!(lines.len(), 2);
    assert!(
        lines[1].starts_with("#2 [medium] Test rule t.plain"),
        "{lines:?}"
    );
}

#[test]
fn runtime_evaluation_errors_are_not_assessed() {
    // Valid on the example facts (which have an "eviction" thread class) but
    // the near-miss host has none: the rule must be listed, not dropped.
    let text = testdata::rule_toml(
        "t.class",
        "sched.classes[\"conn\"].threads > 0",
        0.5,
        0.5,
        "",
    )
    .replace(
        "\"sched.involuntary_share\"",
        "\"sched.classes['eviction'].threads\"",
    );
    let rules = RuleSet::from_sources(RuleSource::Builtin, [("c.toml".into(), text)]).unwrap();
    let report = explain(&testdata::near_miss(), &rules, None, None).unwrap();
    assert!(report.findings.is_empty());
    assert_eq!(report.not_assessed.len(), 1);
    assert!(
        report.not_assessed[0]
            .reason
            .contains("could not be evaluated"),
        "{:?}",
        report.not_assessed
    );
    assert!(
        report.not_assessed[0].reason.contains("eviction"),
        "{:?}",
        report.not_assessed
    );
}

#[test]
fn report_summarises_the_recording_and_probes() {
    let mut rec = testdata::oversubscribed();
    rec.slices[0].sched.as_mut().unwrap().drops.wakeup_map_full = 7;
    rec.target = None;
    let report = explain(&rec, &builtin(), None, Some("/tmp/x.mdiag".into())).unwrap();
    assert_eq!(report.recording.source.as_deref(), Some("/tmp/x.mdiag"));
    assert!(report.recording.host_wide);
    assert!(report.recording.target.is_none());
    assert_eq!(report.recording.duration_s, 10.0);
    assert_eq!(
        report.recording.host.kernel_version.as_deref(),
        Some("6.18.44")
    );
    assert_eq!(report.probes[0].drops.unwrap().total, 7);
    assert_eq!(report.rules.source, "builtin");
    assert_eq!(report.facts["sched"]["threads"], 4);
}

#[test]
fn newer_recording_format_is_refused() {
    let mut rec = testdata::oversubscribed();
    rec.version = FORMAT_VERSION + 1;
    assert!(matches!(
        explain(&rec, &builtin(), None, None),
        Err(ExplainError::UnsupportedRecording { .. })
    ));
}

#[test]
fn summary_when_nothing_fires() {
    let mut rec = testdata::near_miss();
    rec.host.kernel_release = "6.8.0".into();
    let report = explain(&rec, &two_rules_never(), None, None).unwrap();
    let lines = top_findings_summary(&report, 3);
    assert_eq!(lines, ["No findings: 2 rules checked, none fired."]);
    assert!(top_findings_summary(&report, 0).is_empty());
}

#[test]
fn summary_for_record_uses_the_builtin_rules() {
    assert_eq!(
        summary_for(&testdata::oversubscribed()),
        ["#1 [high] Wakeup preemption keeps interrupting busy threads (score 0.36)"]
    );
    let mut rec = testdata::oversubscribed();
    rec.host.kernel_release = "5.15.0-91-generic".into();
    // The sched rule is not applicable on 5.15; the others lack the
    // host's tuning and allocator data in this recording.
    let lines = summary_for(&rec);
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0].starts_with("No findings, but no rule could be assessed: "),
        "{lines:?}"
    );
}

#[test]
fn summary_names_what_was_not_assessed() {
    let passes = testdata::rule_toml("t.passes", "sched.involuntary < 0", 1.0, 0.5, "");
    let needs_target = testdata::rule_toml("t.target", "true", 1.0, 0.5, "").replace(
        "requires = [\"sched\"]",
        "requires = [\"sched\", \"target\"]",
    );
    let rules = RuleSet::from_sources(
        RuleSource::Builtin,
        [("p.toml".into(), passes), ("t.toml".into(), needs_target)],
    )
    .unwrap();
    let mut rec = testdata::near_miss();
    rec.target = None;
    let report = explain(&rec, &rules, None, None).unwrap();
    assert_eq!(
        top_findings_summary(&report, 3),
        [
            "No findings: 1 rule checked, none fired; 1 not assessed: needs target data: \
          host-wide recording: no target process was observed."
        ]
    );
}

fn two_rules_never() -> RuleSet {
    let a = testdata::rule_toml("t.a", "sched.involuntary < 0", 1.0, 0.5, "");
    let b = testdata::rule_toml("t.b", "sched.involuntary < 0", 1.0, 0.5, "");
    RuleSet::from_sources(
        RuleSource::Builtin,
        [("a.toml".into(), a), ("b.toml".into(), b)],
    )
    .unwrap()
}

/// The stacks' kernel leaves replace the one "[kernel]" row; user rows keep
/// their object paths (the JSON contract, the VM matrix's perf check).
#[test]
fn kernel_time_is_named_by_the_stacks_kernel_leaves() {
    use crate::family::perf::report::{PerfMeasurements, PerfSymbolMeasurement};
    use crate::stacks::{Profile, ProfileKind, test_stack};
    let row = |symbol: &str, object: &str, samples| PerfSymbolMeasurement {
        symbol: symbol.into(),
        object: Some(object.into()),
        samples,
        share: samples as f64 / 100.0,
    };
    let mut perf = PerfMeasurements {
        duration_s: 1.0,
        samples: 200,
        target_samples: 100,
        target_cpu_share: 0.5,
        allocator: None,
        allocator_samples: 0,
        allocator_share: 0.0,
        allocator_slow_path_samples: 0,
        slow_path_share: 0.0,
        top_symbols: vec![row("spin", "/usr/bin/spin", 70), row("?", "[kernel]", 30)],
    };
    let profile = Profile {
        kind: ProfileKind::OnCpu,
        freq_hz: 99,
        duration_ns: 1_000_000_000,
        stacks: vec![
            test_stack("main", &[("spin", "spin")], false, 70),
            test_stack(
                "main",
                &[("spin", "spin"), ("vfs_read", "[kernel]")],
                false,
                20,
            ),
            test_stack(
                "main",
                &[("spin", "spin"), ("do_sys_poll", "[kernel]")],
                false,
                10,
            ),
        ],
    };
    super::name_leaf_functions(&mut perf, &profile);
    let rows: Vec<(&str, &str, u64)> = perf
        .top_symbols
        .iter()
        .map(|s| {
            (
                s.symbol.as_str(),
                s.object.as_deref().unwrap_or(""),
                s.samples,
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("spin", "/usr/bin/spin", 70),
            ("vfs_read", "[kernel]", 20),
            ("do_sys_poll", "[kernel]", 10)
        ]
    );
}
