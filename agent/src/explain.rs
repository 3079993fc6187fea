//! `mdiag explain`: turns a recording and a rule set into a ranked [`Report`].
//!
//! For each rule, in order: does it apply to this host (architecture, kernel,
//! mongod, allocator)? Was the evidence it needs recorded? Does its condition
//! hold? Every rule ends up in exactly one list of the report — findings, not
//! applicable, not assessed (with the reason) or passed — so nothing is
//! silently dropped and nothing is guessed. Findings are then scored and
//! ranked for one architecture ([`crate::rules::ranking`]). Beside the rules'
//! verdicts, the report gets the [`Measurements`] of every probe family, built
//! from the same facts, so the numbers are shown even when no rule uses them.
//!
//! [`top_findings_summary`] gives the few lines `mdiag record` prints at the end.

use crate::recording::model::{FORMAT_NAME, FORMAT_VERSION, Recording};
use crate::report::{
    DropsReport, EvidenceItem, Finding, Fix, HostSummary, Impact, Measurements, MissingEvidence,
    PassedRule, ProbeReport, ProgramReport, REPORT_VERSION, RecordingSummary, Reference, Report,
    RuleNote, RulesSummary, TargetSummary,
};
use crate::rules::{Applies, Facts, Rule, RuleSet, eval, placeholders, ranking};

/// Why no report could be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExplainError {
    #[error("unknown architecture {given:?} (known: {known})")]
    UnknownArch { given: String, known: String },
    #[error(
        "unsupported recording: format {format:?} version {version} (this mdiag reads \"{FORMAT_NAME}\" up to version {FORMAT_VERSION})"
    )]
    UnsupportedRecording { format: String, version: u32 },
}

/// Evaluates `rules` on `recording` and ranks the findings for `arch_override`
/// (an architecture name such as "s390x"; aliases like "arm64" are accepted)
/// or, without it, for the recording's architecture. `source` is where the
/// recording was read from (a path), shown in the report when given.
pub fn explain(
    recording: &Recording,
    rules: &RuleSet,
    arch_override: Option<&str>,
    source: Option<String>,
) -> Result<Report, ExplainError> {
    if recording.format != FORMAT_NAME || recording.version > FORMAT_VERSION {
        return Err(ExplainError::UnsupportedRecording {
            format: recording.format.clone(),
            version: recording.version,
        });
    }
    let recorded_arch = ranking::normalise_arch(&recording.host.arch)
        .unwrap_or_else(|| recording.host.arch.trim().to_ascii_lowercase());
    let arch = match arch_override {
        Some(given) => ranking::normalise_arch(given).ok_or_else(|| ExplainError::UnknownArch {
            given: given.to_string(),
            known: ranking::KNOWN_ARCHES.join(", "),
        })?,
        None => recorded_arch.clone(),
    };

    let facts = Facts::derive(recording);
    let ctx = eval::context(&facts, None);
    let mut findings = Vec::new();
    let mut not_assessed = Vec::new();
    let mut not_applicable = Vec::new();
    let mut passed = Vec::new();
    for rule in rules.rules() {
        let note = |reason: String| RuleNote {
            rule_id: rule.id().to_string(),
            title: rule.def.title.clone(),
            reason,
        };
        match rule.applies(&facts, &arch) {
            Applies::No(reason) => not_applicable.push(note(reason)),
            Applies::Unknown(reason) => not_assessed.push(note(reason)),
            Applies::Yes => match eval::eval_bool(rule.condition(), &ctx) {
                Err(e) => not_assessed.push(note(format!(
                    "the rule could not be evaluated: condition: {e}"
                ))),
                Ok(false) => passed.push(PassedRule {
                    rule_id: rule.id().to_string(),
                    title: rule.def.title.clone(),
                    evidence: evidence(rule, &ctx).unwrap_or_else(|(items, _)| items),
                }),
                Ok(true) => match evidence(rule, &ctx) {
                    Ok(items) => findings.push(finding(rule, items, &arch, &facts)),
                    Err((_, e)) => {
                        not_assessed.push(note(format!("the rule could not be evaluated: {e}")))
                    }
                },
            },
        }
    }
    ranking::rank(&mut findings);
    let recorded_config = recording
        .mongod
        .as_ref()
        .and_then(|m| m.info.as_ref())
        .map(|i| i.wt_config_string.clone().unwrap_or_default());
    crate::rules::config_files::combine_wiredtiger_config(
        &mut findings,
        rules,
        recorded_config.as_deref(),
    );

    Ok(Report {
        report_version: REPORT_VERSION,
        mdiag_version: env!("CARGO_PKG_VERSION").to_string(),
        architecture_overridden: arch != recorded_arch,
        architecture: arch,
        recording: recording_summary(recording, &facts, source),
        rules: RulesSummary {
            source: rules.source().to_string(),
            count: rules.len(),
        },
        findings,
        not_assessed,
        not_applicable,
        passed,
        probes: probe_reports(recording),
        facts: facts.to_json(),
        measurements: Measurements::build(recording, &facts),
    })
}

/// Evaluates all evidence of `rule`. On failure, returns what could be
/// evaluated and the first error.
fn evidence(
    rule: &Rule,
    ctx: &cel::Context<'_, '_>,
) -> Result<Vec<EvidenceItem>, (Vec<EvidenceItem>, String)> {
    let mut items = Vec::new();
    let mut first_error = None;
    for e in rule.evidence() {
        match eval::eval_scalar(&e.program, ctx) {
            Ok(value) => items.push(EvidenceItem {
                label: e.label.clone(),
                value,
            }),
            Err(err) => {
                first_error.get_or_insert_with(|| format!("evidence {:?}: {err}", e.label));
            }
        }
    }
    match first_error {
        None => Ok(items),
        Some(err) => Err((items, err)),
    }
}

/// The optional groups of `rule` that were not recorded, with the reason.
fn missing(rule: &Rule, facts: &Facts) -> Vec<MissingEvidence> {
    rule.def
        .optional
        .iter()
        .filter_map(|group| {
            facts.absent_reason(group).map(|reason| MissingEvidence {
                group: group.clone(),
                reason: reason.to_string(),
            })
        })
        .collect()
}

fn finding(rule: &Rule, evidence: Vec<EvidenceItem>, arch: &str, facts: &Facts) -> Finding {
    let def = &rule.def;
    let score = ranking::score(def.impact.score, def.confidence, rule.arch_priors(), arch);
    Finding {
        rule_id: def.id.clone(),
        rank: 0,
        title: def.title.clone(),
        severity: def.severity,
        score: score.value,
        architecture: arch.to_string(),
        rank_reason: score.reason(),
        confidence: def.confidence,
        arch_prior: score.prior,
        impact: Impact {
            expected: def.impact.expected.trim().to_string(),
            score: def.impact.score,
            source: def.impact.source.trim().to_string(),
        },
        summary: def.summary.trim().to_string(),
        evidence,
        fix: Fix {
            summary: def.fix.summary.trim().to_string(),
            // {{group.fact}} placeholders filled from this recording.
            commands: fill_all(&def.fix.commands, facts),
            files: def
                .fix
                .files
                .iter()
                .map(|f| crate::report::FixFile {
                    path: f.path.clone(),
                    how: f.how.trim().to_string(),
                    // A configString addition stays as given here; it is
                    // combined with the others after ranking.
                    content: placeholders::fill(
                        f.wiredtiger_config
                            .as_deref()
                            .unwrap_or(&f.content)
                            .trim_matches('\n'),
                        facts,
                    ),
                    language: f.language.clone(),
                })
                .collect(),
            revert: fill_all(&def.fix.revert, facts),
            risk: def.fix.risk.trim().to_string(),
            verify: placeholders::fill(def.fix.verify.trim(), facts),
        },
        references: def
            .references
            .iter()
            .map(|r| Reference {
                title: r.title.clone(),
                url: r.url.clone(),
            })
            .collect(),
        missing: missing(rule, facts),
    }
}

fn fill_all(texts: &[String], facts: &Facts) -> Vec<String> {
    texts.iter().map(|t| placeholders::fill(t, facts)).collect()
}

fn recording_summary(rec: &Recording, facts: &Facts, source: Option<String>) -> RecordingSummary {
    let duration_s = facts
        .get("recording.duration_s")
        .and_then(crate::rules::FactValue::as_f64)
        .unwrap_or(0.0);
    RecordingSummary {
        source,
        format_version: rec.version,
        written_by: rec.mdiag_version.clone(),
        started_at: rec.started_at,
        ended_at: rec.ended_at,
        duration_s,
        requested_duration_s: rec.requested_duration_ms as f64 / 1000.0,
        stop_reason: rec.stop_reason.clone(),
        slices: rec.slices.len(),
        host: HostSummary {
            hostname: rec.host.hostname.clone(),
            kernel_release: rec.host.kernel_release.clone(),
            kernel_version: facts.kernel_version.as_ref().map(ToString::to_string),
            arch: rec.host.arch.clone(),
            cpu_count: rec.host.cpu_count,
            cpu_model: rec.host.cpu_model.clone(),
            sched_features: rec.host.sched_features.clone(),
        },
        target: rec.target.as_ref().map(|t| TargetSummary {
            pid: t.pid,
            comm: t.comm.clone(),
            exe: t.exe.clone(),
            cmdline: t.cmdline.clone(),
            how: t.how.clone(),
            exit_code: t.exit_code,
        }),
        host_wide: rec.target.is_none(),
    }
}

fn probe_reports(rec: &Recording) -> Vec<ProbeReport> {
    rec.probes
        .iter()
        .map(|p| {
            let drops = (p.family == "sched").then(|| {
                let mut d = DropsReport {
                    thread_map_full: 0,
                    wakeup_map_full: 0,
                    read_failed: 0,
                    total: 0,
                };
                for s in rec.slices.iter().filter_map(|s| s.sched.as_ref()) {
                    d.thread_map_full = d.thread_map_full.saturating_add(s.drops.thread_map_full);
                    d.wakeup_map_full = d.wakeup_map_full.saturating_add(s.drops.wakeup_map_full);
                    d.read_failed = d.read_failed.saturating_add(s.drops.read_failed);
                }
                d.total = d
                    .thread_map_full
                    .saturating_add(d.wakeup_map_full)
                    .saturating_add(d.read_failed);
                d
            });
            ProbeReport {
                family: p.family.clone(),
                attached: p.attached(),
                programs: p
                    .programs
                    .iter()
                    .map(|prog| ProgramReport {
                        name: prog.name.clone(),
                        attach_point: prog.attach_point.clone(),
                        attached: prog.error.is_none(),
                        error: prog.error.clone(),
                    })
                    .collect(),
                drops,
            }
        })
        .collect()
}

/// Up to `n` lines, one per top finding ("#1 [high] title (score 0.62)"),
/// or a single line saying there are no findings and why (nothing fired,
/// or what could not be assessed).
pub fn top_findings_summary(report: &Report, n: usize) -> Vec<String> {
    if n == 0 {
        return Vec::new();
    }
    if report.findings.is_empty() {
        return vec![no_findings_line(report)];
    }
    let mut lines: Vec<String> = report
        .findings
        .iter()
        .take(n)
        .map(|f| {
            format!(
                "#{} [{}] {} (score {:.2})",
                f.rank, f.severity, f.title, f.score
            )
        })
        .collect();
    let more = report.findings.len().saturating_sub(n);
    if more > 0
        && let Some(last) = lines.last_mut()
    {
        last.push_str(&format!(" (+{more} more)"));
    }
    lines
}

/// What `mdiag record` prints after recording: [`top_findings_summary`] of
/// the builtin rules on `recording`, 3 lines at most. Problems (which a
/// correct build never has) become a single line saying so.
pub fn summary_for(recording: &Recording) -> Vec<String> {
    let rules = match RuleSet::builtin() {
        Ok(rules) => rules,
        Err(e) => return vec![format!("No summary: the builtin rules did not load: {e}")],
    };
    match explain(recording, &rules, None, None) {
        Ok(report) => top_findings_summary(&report, 3),
        Err(e) => vec![format!("No summary: {e}")],
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn no_findings_line(report: &Report) -> String {
    if report.rules.count == 0 {
        return "No findings: the rule set is empty.".into();
    }
    let mut reasons: Vec<&str> = Vec::new();
    for n in &report.not_assessed {
        if !reasons.contains(&n.reason.as_str()) {
            reasons.push(&n.reason);
        }
    }
    let first_reason = match reasons.as_slice() {
        [] => String::new(),
        [one] => (*one).to_string(),
        [first, rest @ ..] => format!(
            "{first} (and {})",
            plural(rest.len(), "other reason", "other reasons")
        ),
    };
    let checked = report.passed.len();
    if checked == 0 && !report.not_assessed.is_empty() {
        return format!("No findings, but no rule could be assessed: {first_reason}");
    }
    let mut line = format!(
        "No findings: {} checked, none fired",
        plural(checked, "rule", "rules")
    );
    if !report.not_assessed.is_empty() {
        line.push_str(&format!(
            "; {} not assessed: {first_reason}",
            report.not_assessed.len()
        ));
    }
    if !report.not_applicable.is_empty() {
        line.push_str(&format!(
            "; {} not applicable to this host",
            report.not_applicable.len()
        ));
    }
    line.push('.');
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::EvidenceValue;
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
        assert!(f.fix.commands.iter().any(|c| c.contains("echo NO_WAKEUP_PREEMPTION > /sys/kernel/debug/sched/features")));
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
}
