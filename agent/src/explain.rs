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

use crate::findings::{
    ChecklistLine, EvidenceItem, Finding, Fix, FixFile, Impact, MissingEvidence, Reference,
    RuleClass,
};
use crate::mongo::startup::{self, StartupWarning};
use crate::recording::Window;
use crate::recording::model::{FORMAT_NAME, FORMAT_VERSION, Recording};
use crate::report::{
    DropsReport, HostSummary, Measurements, PassedRule, ProbeReport, ProgramReport, REPORT_VERSION,
    RecordingSummary, Report, RuleNote, RulesSummary, TargetSummary,
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

    // The whole recording merged once: facts and measurements read their
    // totals from it, as the agent's rules will from its rolling windows.
    let whole = recording.window();
    let facts = Facts::derive_from(recording, &whole);
    let ctx = eval::context(&facts, None);
    let warnings = startup_warnings(recording);
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
                    in_band: rule
                        .hold()
                        .is_some_and(|h| eval::eval_bool(h, &ctx) == Ok(true)),
                }),
                Ok(true) => match evidence(rule, &ctx) {
                    Ok(items) => findings.push(finding(rule, items, &arch, &facts, &warnings)),
                    Err((_, e)) => {
                        not_assessed.push(note(format!("the rule could not be evaluated: {e}")))
                    }
                },
            },
        }
    }
    let (mut findings, checklist) = split_checklist(findings);
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

    let mut measurements = Measurements::build(recording, &whole, &facts);
    if let (Some(profile), Some(perf)) = (&recording.cpu_profile, measurements.perf.as_mut()) {
        name_leaf_functions(perf, profile);
    }
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
        checklist,
        startup_warnings: shown_startup_warnings(recording, &warnings),
        not_assessed,
        not_applicable,
        passed,
        probes: probe_reports(recording, &whole),
        facts: facts.to_json(),
        measurements,
        hot_stacks: recording
            .cpu_profile
            .as_ref()
            .map(crate::report::stacks::HotStacks::build),
        wait_stacks: recording.offcpu_profile.as_ref().map(|p| {
            let mut h = crate::report::stacks::HotStacks::build(p);
            h.sampled_one_in = recording.offcpu_sampled_one_in;
            h
        }),
        cpu_profile: recording.cpu_profile.clone(),
        offcpu_profile: recording.offcpu_profile.clone(),
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

/// The fired rules as (findings, checklist items): the checklist is listed
/// apart, most severe first, never ranked among the findings.
fn split_checklist(fired: Vec<Finding>) -> (Vec<Finding>, Vec<Finding>) {
    let (mut checklist, findings): (Vec<Finding>, Vec<Finding>) = fired
        .into_iter()
        .partition(|f| f.class == RuleClass::Checklist);
    checklist.sort_by(|a, b| b.severity.cmp(&a.severity).then(a.rule_id.cmp(&b.rule_id)));
    (findings, checklist)
}

/// The report's `startup_warnings`: each as a reader wants it, or `None`
/// when the recording holds none read (FTDC, no live mongod, older files).
fn shown_startup_warnings(
    recording: &Recording,
    warnings: &[StartupWarning],
) -> Option<Vec<String>> {
    recording
        .mongod
        .as_ref()
        .and_then(|m| m.info.as_ref())
        .and_then(|i| i.startup_warnings.as_ref())
        .map(|_| warnings.iter().map(|w| w.text.clone()).collect())
}

/// mongod's startup warnings as the recording kept them, parsed.
fn startup_warnings(recording: &Recording) -> Vec<StartupWarning> {
    recording
        .mongod
        .as_ref()
        .and_then(|m| m.info.as_ref())
        .and_then(|i| i.startup_warnings.as_ref())
        .map(|lines| lines.iter().filter_map(|l| startup::parse(l)).collect())
        .unwrap_or_default()
}

/// A checklist rule's line: its setting, the value its evidence shows, what
/// the notes say.
fn checklist_line(rule: &Rule, evidence: &[EvidenceItem]) -> Option<ChecklistLine> {
    let spec = rule.def.checklist.as_ref()?;
    Some(ChecklistLine {
        setting: spec.setting.clone(),
        value: evidence
            .iter()
            .find(|e| e.label == spec.value)
            .map_or_else(|| "not recorded".to_owned(), |e| e.value.to_string()),
        notes: spec.notes.trim().to_owned(),
    })
}

/// mongod's own startup warnings with the ids `rule` names.
fn mongod_warns(rule: &Rule, warnings: &[StartupWarning]) -> Vec<String> {
    warnings
        .iter()
        .filter(|w| {
            w.id.is_some_and(|id| rule.def.startup_warnings.contains(&id))
        })
        .map(|w| w.text.clone())
        .collect()
}

fn finding(
    rule: &Rule,
    evidence: Vec<EvidenceItem>,
    arch: &str,
    facts: &Facts,
    warnings: &[StartupWarning],
) -> Finding {
    let def = &rule.def;
    let checklist = checklist_line(rule, &evidence);
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
                .map(|f| FixFile {
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
        class: def.class,
        mongod_warns: mongod_warns(rule, warnings),
        checklist,
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

/// Each probe's status, with the sched family's drops summed over the
/// recording (read from its window `whole`).
fn probe_reports(rec: &Recording, whole: &Window) -> Vec<ProbeReport> {
    rec.probes
        .iter()
        .map(|p| {
            let drops = (p.family == "sched").then(|| {
                let s = whole.slice.sched.as_ref().map(|s| &s.drops);
                let d = s.copied().unwrap_or_default();
                DropsReport {
                    thread_map_full: d.thread_map_full,
                    wakeup_map_full: d.wakeup_map_full,
                    read_failed: d.read_failed,
                    total: d
                        .thread_map_full
                        .saturating_add(d.wakeup_map_full)
                        .saturating_add(d.read_failed),
                }
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
                left_out: p.left_out.clone(),
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
        let mut lines = vec![no_findings_line(report)];
        lines.extend(crate::report::overview::checklist_count(report));
        return lines;
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
    lines.extend(crate::report::overview::checklist_count(report));
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
    let checked = report.passed.len() + report.checklist.len();
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
#[path = "explain_tests.rs"]
mod tests;

/// With the recording's stacks, kernel time in the most sampled functions
/// is named by function: the perf family counts every kernel-mode sample
/// under one "[kernel]" row, the stacks' kernel leaves say where. User rows
/// stay as the perf family named them (object paths, allocator split).
fn name_leaf_functions(
    perf: &mut crate::family::perf::report::PerfMeasurements,
    profile: &crate::stacks::Profile,
) {
    use crate::report::measurements::{PerfSymbolMeasurement, TOP_SYMBOLS};
    use crate::stacks::KERNEL_OBJECT;
    let kernel_leaves: Vec<(String, String, u64)> =
        crate::report::stacks::leaf_functions(profile, usize::MAX)
            .into_iter()
            .filter(|(_, object, _)| object == KERNEL_OBJECT)
            .collect();
    if kernel_leaves.is_empty() {
        return;
    }
    let target = perf.target_samples.max(1) as f64;
    perf.top_symbols
        .retain(|s| s.object.as_deref() != Some(KERNEL_OBJECT));
    perf.top_symbols.extend(
        kernel_leaves
            .into_iter()
            .map(|(function, object, samples)| PerfSymbolMeasurement {
                symbol: function,
                object: Some(object),
                samples,
                share: samples as f64 / target,
            }),
    );
    perf.top_symbols.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then_with(|| a.symbol.cmp(&b.symbol))
    });
    perf.top_symbols.truncate(TOP_SYMBOLS);
}
