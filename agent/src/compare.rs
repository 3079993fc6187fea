//! `mdiag compare BEFORE AFTER`: what changed between two recordings — e.g.
//! before and after applying a fix — in the findings and in the evidence.
//!
//! Both recordings are explained with the same rules and architecture. Each
//! rule gets a verdict ("resolved": fired before, evaluated and quiet after;
//! "new"; "still firing"; "unchanged"; "not comparable" when one side could
//! not assess it), and each evidence number of a rule evaluated on both sides
//! its before/after values. The main per-second figures are compared with a
//! noise estimate from their per-slice values: a change is called "within
//! noise" when the difference of the means is under two standard errors of
//! that difference (Welch), so one noisy second does not read as a gain.

use serde::{Deserialize, Serialize};

use crate::explain::{ExplainError, explain};
use crate::findings::{EvidenceItem, EvidenceValue, format_number};
use crate::recording::Recording;
use crate::report::Report;
use crate::rules::RuleSet;

/// Everything `compare` says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub before: Side,
    pub after: Side,
    /// Architecture both were ranked for.
    pub architecture: String,
    /// One row per rule, in rule id order.
    pub rules: Vec<RuleChange>,
    /// Per-second figures with a noise estimate.
    pub metrics: Vec<MetricChange>,
    /// The on-CPU stacks that grew and shrank most (% of one CPU), when
    /// both recordings have stacks.
    #[serde(default)]
    pub cpu_stacks: Vec<crate::stacks::diff::StackChange>,
    /// The off-CPU stacks that grew and shrank most (ms of waiting per s).
    #[serde(default)]
    pub wait_stacks: Vec<crate::stacks::diff::StackChange>,
}

/// Stacks listed each way (grown, shrunk).
pub const STACK_CHANGES: usize = 5;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Side {
    pub source: String,
    pub started_at: chrono::DateTime<chrono::Utc>,
    pub duration_s: f64,
    pub host: String,
    /// Target process name, `None` host-wide.
    pub target: Option<String>,
    pub findings: usize,
}

/// What happened to one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleVerdict {
    /// Fired before; evaluated and did not fire after.
    Resolved,
    /// Did not fire before (evaluated); fires after.
    New,
    StillFiring,
    /// Evaluated on both sides, fired on neither.
    Unchanged,
    /// Not assessed or not applicable on at least one side.
    NotComparable,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleChange {
    pub rule_id: String,
    pub title: String,
    pub verdict: RuleVerdict,
    /// "fired", "passed", "not assessed: …", "not applicable: …".
    pub before: String,
    pub after: String,
    /// Evidence of a rule evaluated on both sides, label by label.
    pub evidence: Vec<EvidenceChange>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvidenceChange {
    pub label: String,
    pub before: EvidenceValue,
    pub after: EvidenceValue,
    /// after − before, for numbers.
    pub delta: Option<f64>,
    /// Relative change in percent, for numbers with a non-zero before.
    pub change_pct: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricChange {
    pub name: String,
    pub unit: String,
    /// Mean over the slices that have it; `None` when neither side has any.
    pub before: Option<f64>,
    pub after: Option<f64>,
    pub change_pct: Option<f64>,
    /// Two standard errors of the difference; `None` with fewer than two
    /// slices on a side.
    pub noise: Option<f64>,
    /// "within noise", "higher", "lower", or "not comparable" (no data, or
    /// no noise estimate).
    pub assessment: String,
}

fn state(report: &Report, id: &str) -> (String, bool, bool) {
    if report.findings.iter().any(|f| f.rule_id == id) {
        return ("fired".into(), true, true);
    }
    if report.passed.iter().any(|p| p.rule_id == id) {
        return ("passed".into(), false, true);
    }
    if let Some(n) = report.not_assessed.iter().find(|n| n.rule_id == id) {
        return (format!("not assessed: {}", n.reason), false, false);
    }
    if let Some(n) = report.not_applicable.iter().find(|n| n.rule_id == id) {
        return (format!("not applicable: {}", n.reason), false, false);
    }
    ("absent".into(), false, false)
}

fn evidence_of<'a>(report: &'a Report, id: &str) -> Option<&'a [EvidenceItem]> {
    report
        .findings
        .iter()
        .find(|f| f.rule_id == id)
        .map(|f| f.evidence.as_slice())
        .or_else(|| {
            report
                .passed
                .iter()
                .find(|p| p.rule_id == id)
                .map(|p| p.evidence.as_slice())
        })
}

fn as_number(v: &EvidenceValue) -> Option<f64> {
    match v {
        EvidenceValue::Int(i) => Some(*i as f64),
        EvidenceValue::Float(f) => Some(*f),
        _ => None,
    }
}

fn side(report: &Report, source: &str) -> Side {
    Side {
        source: source.into(),
        started_at: report.recording.started_at,
        duration_s: report.recording.duration_s,
        host: report.recording.host.hostname.clone(),
        target: report.recording.target.as_ref().map(|t| t.comm.clone()),
        findings: report.findings.len(),
    }
}

/// Mean and sample variance of the present values.
fn stats(values: &[Option<f64>]) -> Option<(f64, f64, usize)> {
    let v: Vec<f64> = values.iter().flatten().copied().collect();
    if v.is_empty() {
        return None;
    }
    let n = v.len();
    let mean = v.iter().sum::<f64>() / n as f64;
    let var = if n > 1 {
        v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
    } else {
        f64::NAN
    };
    Some((mean, var, n))
}

/// Compares the per-slice values of one figure.
pub fn metric_change(
    name: &str,
    unit: &str,
    before: &[Option<f64>],
    after: &[Option<f64>],
) -> MetricChange {
    let (b, a) = (stats(before), stats(after));
    let change_pct = match (b, a) {
        (Some((mb, _, _)), Some((ma, _, _))) if mb != 0.0 => Some((ma - mb) / mb.abs() * 100.0),
        _ => None,
    };
    let noise = match (b, a) {
        (Some((_, vb, nb)), Some((_, va, na))) if nb > 1 && na > 1 => {
            Some(2.0 * (vb / nb as f64 + va / na as f64).sqrt())
        }
        _ => None,
    };
    let assessment = match (b, a, noise) {
        (Some((mb, _, _)), Some((ma, _, _)), Some(noise)) => {
            let d = ma - mb;
            if d.abs() <= noise {
                "within noise"
            } else if d > 0.0 {
                "higher"
            } else {
                "lower"
            }
        }
        _ => "not comparable",
    };
    MetricChange {
        name: name.into(),
        unit: unit.into(),
        before: b.map(|s| s.0),
        after: a.map(|s| s.0),
        change_pct,
        noise,
        assessment: assessment.into(),
    }
}

use crate::kit::unit::Series;

/// Generates [`series`] from the registry.
macro_rules! family_series {
    ($($variant:ident $module:ident,)*) => {
        /// The per-second figures compared, each as per-slice values,
        /// family by family in the registry's order
        /// ([`FamilyUnit::series`](crate::kit::unit::FamilyUnit::series)).
        fn series(rec: &Recording) -> Vec<Series> {
            let mut out = Vec::new();
            $({
                let slices: Vec<_> = rec
                    .slices
                    .iter()
                    .map(|s| (s.duration_ms, s.$module.as_ref()))
                    .collect();
                out.extend(
                    <crate::family::$module::Unit as crate::kit::unit::FamilyUnit>::series(&slices),
                );
            })*
            out
        }
    };
}
crate::kit::family::for_each_family!(family_series);

/// Compares `before` with `after` under `rules`, ranked for `arch` (or the
/// `before` recording's architecture).
pub fn compare(
    before: &Recording,
    after: &Recording,
    sources: (&str, &str),
    rules: &RuleSet,
    arch: Option<&str>,
) -> Result<Comparison, ExplainError> {
    // Both ranked for one architecture: --arch, else the "before" one's.
    let rb = explain(before, rules, arch, Some(sources.0.into()))?;
    let arch = rb.architecture.clone();
    let ra = explain(after, rules, Some(&arch), Some(sources.1.into()))?;
    let mut ids: Vec<(&str, &str)> = rules
        .rules()
        .iter()
        .map(|r| (r.id(), r.def.title.as_str()))
        .collect();
    ids.sort_unstable();
    let rule_changes = ids
        .into_iter()
        .map(|(id, title)| {
            let (bs, bf, be) = state(&rb, id);
            let (as_, af, ae) = state(&ra, id);
            let verdict = match (be && ae, bf, af) {
                (false, _, _) => RuleVerdict::NotComparable,
                (true, true, false) => RuleVerdict::Resolved,
                (true, false, true) => RuleVerdict::New,
                (true, true, true) => RuleVerdict::StillFiring,
                (true, false, false) => RuleVerdict::Unchanged,
            };
            let evidence = match (evidence_of(&rb, id), evidence_of(&ra, id)) {
                (Some(eb), Some(ea)) => eb
                    .iter()
                    .filter_map(|b| {
                        let a = ea.iter().find(|a| a.label == b.label)?;
                        let (nb, na) = (as_number(&b.value), as_number(&a.value));
                        let delta = nb.zip(na).map(|(x, y)| y - x);
                        let change_pct = nb
                            .zip(na)
                            .filter(|(x, _)| *x != 0.0)
                            .map(|(x, y)| (y - x) / x.abs() * 100.0);
                        Some(EvidenceChange {
                            label: b.label.clone(),
                            before: b.value.clone(),
                            after: a.value.clone(),
                            delta,
                            change_pct,
                        })
                    })
                    .collect(),
                _ => Vec::new(),
            };
            RuleChange {
                rule_id: id.into(),
                title: title.into(),
                verdict,
                before: bs,
                after: as_,
                evidence,
            }
        })
        .collect();
    let (sb, sa) = (series(before), series(after));
    let metrics = sb
        .iter()
        .zip(&sa)
        .map(|((name, unit, b), (_, _, a))| metric_change(name, unit, b, a))
        .collect();
    Ok(Comparison {
        before: side(&rb, sources.0),
        after: side(&ra, sources.1),
        architecture: arch,
        rules: rule_changes,
        metrics,
        cpu_stacks: changes(&before.cpu_profile, &after.cpu_profile),
        wait_stacks: changes(&before.offcpu_profile, &after.offcpu_profile),
    })
}

/// The stacks that changed most, when both sides have stacks of the kind.
fn changes(
    before: &Option<crate::stacks::Profile>,
    after: &Option<crate::stacks::Profile>,
) -> Vec<crate::stacks::diff::StackChange> {
    match (before, after) {
        (Some(b), Some(a)) => crate::stacks::diff::stack_changes(b, a, STACK_CHANGES),
        _ => Vec::new(),
    }
}

/// `mdiag compare --format html`: the text comparison, then the differential
/// flame graphs (on CPU and off CPU) of the two recordings' stacks, in one
/// self-contained page.
pub fn render_html(c: &Comparison, before: &Recording, after: &Recording) -> String {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    };
    let mut body = format!("<pre>{}</pre>\n", esc(&render_text(c)));
    body.push_str("<h2>Differential flame graphs</h2>\n<p>The second recording's stacks; a frame is red where it takes more of the total than in the first recording, blue where less (both normalized to the same total).</p>\n");
    let pairs = [
        ("On CPU", &before.cpu_profile, &after.cpu_profile),
        ("Off CPU", &before.offcpu_profile, &after.offcpu_profile),
    ];
    for (name, b, a) in pairs {
        match (b, a) {
            (Some(b), Some(a)) => {
                let title = format!("{name}: {} → {}", c.before.source, c.after.source);
                match crate::stacks::diff::diff_flame_svg(&title, b, a) {
                    Ok(svg) => body.push_str(&crate::stacks::flame::flame_iframe(&title, &svg, 0)),
                    Err(e) => body.push_str(&format!(
                        "<p>{name}: no graph ({})</p>",
                        esc(&e.to_string())
                    )),
                }
            }
            _ => body.push_str(&format!(
                "<p>{name}: not both recordings have stacks of this kind.</p>"
            )),
        }
        body.push('\n');
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>mdiag compare</title>\
         <style>body{{font-family:system-ui,sans-serif;max-width:1240px;margin:2em auto;padding:0 1em}}\
         pre{{white-space:pre-wrap}}</style></head><body>\n<h1>mdiag compare</h1>\n{body}</body></html>\n"
    )
}

/// One stack change as a line: `+1.2 % of a CPU  a ← b ← c (conn)`.
fn stack_change_line(s: &crate::stacks::diff::StackChange, unit: &str) -> String {
    let mut parts = s.stack.split(';');
    let class = parts.next().unwrap_or("");
    let frames: Vec<&str> = parts.collect();
    let shown: Vec<&str> = frames.iter().rev().take(6).copied().collect();
    let more = frames.len().saturating_sub(shown.len());
    format!(
        "{}{} {unit} ({} → {})  {}{} [{class}]",
        if s.change > 0.0 { "+" } else { "" },
        format_number(s.change),
        format_number(s.before),
        format_number(s.after),
        shown.join(" ← "),
        if more > 0 {
            format!(" ← … {more} more")
        } else {
            String::new()
        }
    )
}

fn verdict_text(v: RuleVerdict) -> &'static str {
    match v {
        RuleVerdict::Resolved => "RESOLVED",
        RuleVerdict::New => "NEW",
        RuleVerdict::StillFiring => "still firing",
        RuleVerdict::Unchanged => "unchanged (quiet)",
        RuleVerdict::NotComparable => "not comparable",
    }
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), format_number)
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(String::new, |p| {
        format!("{}{} %", if p > 0.0 { "+" } else { "" }, format_number(p))
    })
}

/// Plain text (the terminal form; also valid Markdown-ish for pasting).
pub fn render_text(c: &Comparison) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let line = |s: &Side| {
        format!(
            "{} — {} ({}), {} s, {} finding(s)",
            s.source,
            s.host,
            s.target.as_deref().unwrap_or("host-wide"),
            format_number(s.duration_s),
            s.findings
        )
    };
    let _ = writeln!(out, "mdiag compare (ranked for {})", c.architecture);
    let _ = writeln!(out, "  before: {}", line(&c.before));
    let _ = writeln!(out, "  after:  {}", line(&c.after));
    let _ = writeln!(out);
    let _ = writeln!(out, "Findings");
    let interesting: Vec<&RuleChange> = c
        .rules
        .iter()
        .filter(|r| r.verdict != RuleVerdict::Unchanged)
        .collect();
    if interesting.is_empty() {
        let _ = writeln!(out, "  No rule fired on either side.");
    }
    for r in interesting {
        let _ = writeln!(
            out,
            "  [{}] {} ({})",
            verdict_text(r.verdict),
            r.title,
            r.rule_id
        );
        if r.verdict == RuleVerdict::NotComparable {
            let _ = writeln!(out, "      before: {}", r.before);
            let _ = writeln!(out, "      after:  {}", r.after);
        }
        for e in &r.evidence {
            let _ = writeln!(
                out,
                "      {}: {} → {} {}",
                e.label,
                e.before,
                e.after,
                pct(e.change_pct)
            );
        }
    }
    let quiet = c
        .rules
        .iter()
        .filter(|r| r.verdict == RuleVerdict::Unchanged)
        .count();
    if quiet > 0 {
        let _ = writeln!(
            out,
            "  ({quiet} rule(s) evaluated on both sides fired on neither)"
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "Per-second figures (mean over slices; noise = 2 standard errors)"
    );
    for m in &c.metrics {
        if m.before.is_none() && m.after.is_none() {
            continue;
        }
        let _ = writeln!(
            out,
            "  {} ({}): {} → {} {} — {}{}",
            m.name,
            m.unit,
            opt(m.before),
            opt(m.after),
            pct(m.change_pct),
            m.assessment,
            m.noise
                .map_or_else(String::new, |n| format!(" (noise ±{})", format_number(n)))
        );
    }
    write_stack_changes(&mut out, c);
    out
}

/// The stacks that changed most, on and off CPU.
fn write_stack_changes(out: &mut String, c: &Comparison) {
    use std::fmt::Write;
    for (title, unit, rows) in [
        (
            "On-CPU stacks that changed most (% of one CPU, leaf first)",
            "% CPU",
            &c.cpu_stacks,
        ),
        (
            "Off-CPU stacks that changed most (ms of waiting per s, leaf first)",
            "ms/s",
            &c.wait_stacks,
        ),
    ] {
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(out);
        let _ = writeln!(out, "{title}");
        for s in rows {
            let _ = writeln!(out, "  {}", stack_change_line(s, unit));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::testdata;

    fn rules() -> RuleSet {
        testdata::sched_rule_only()
    }

    #[test]
    fn stacks_that_changed_are_named_and_drawn_as_a_differential_graph() {
        use crate::stacks::{Frame, ProfileKind};
        let before = crate::rules::facts::example_recording();
        let mut after = before.clone();
        // The allocator's caller doubles its samples.
        if let Some(p) = after.cpu_profile.as_mut() {
            p.stacks[0].value *= 2;
            assert_eq!(
                p.stacks[0].frames.last(),
                Some(&Frame::new("tc_malloc", "mongod"))
            );
            assert_eq!(p.kind, ProfileKind::OnCpu);
        }
        let c = compare(&before, &after, ("a", "b"), &rules(), None).unwrap();
        assert_eq!(c.cpu_stacks.len(), 1, "{:?}", c.cpu_stacks);
        assert!(c.cpu_stacks[0].stack.ends_with("tc_malloc"));
        assert!(c.cpu_stacks[0].change > 0.0);
        assert!(
            c.wait_stacks.is_empty(),
            "the off-CPU stacks did not change"
        );
        let text = render_text(&c);
        assert!(
            text.contains("On-CPU stacks that changed most")
                && text.contains("tc_malloc ← mongo::BSONObjBuilder::append [conn]"),
            "{text}"
        );
        let html = render_html(&c, &before, &after);
        assert!(html.contains("<h2>Differential flame graphs</h2>"));
        assert_eq!(html.matches("<iframe").count(), 2, "on and off CPU");
    }

    #[test]
    fn fixing_preemption_is_resolved_with_evidence_deltas() {
        let c = compare(
            &testdata::oversubscribed(),
            &testdata::near_miss(),
            ("before.mdiag", "after.mdiag"),
            &rules(),
            None,
        )
        .unwrap();
        assert_eq!(c.rules.len(), 1);
        let r = &c.rules[0];
        assert_eq!(r.verdict, RuleVerdict::Resolved);
        let share = r
            .evidence
            .iter()
            .find(|e| e.label.starts_with("involuntary switches (%"))
            .unwrap();
        assert!(
            (share.delta.unwrap() - (10.0 - 90.277_777)).abs() < 0.01,
            "{share:?}"
        );
        let inv = c
            .metrics
            .iter()
            .find(|m| m.name == "involuntary switches")
            .unwrap();
        assert_eq!(inv.before, Some(650.0));
        assert_eq!(inv.after, Some(100.0));
        // Identical slices: zero variance, so any difference is a real one.
        assert_eq!(inv.assessment, "lower");
        let text = render_text(&c);
        assert!(text.contains("[RESOLVED] Wakeup preemption"), "{text}");
        assert!(
            text.contains("involuntary switches (per s): 650 → 100 -84.6 %"),
            "{text}"
        );
        // Reverse direction: a new finding.
        let back = compare(
            &testdata::near_miss(),
            &testdata::oversubscribed(),
            ("a", "b"),
            &rules(),
            None,
        )
        .unwrap();
        assert_eq!(back.rules[0].verdict, RuleVerdict::New);
    }

    #[test]
    fn same_recording_is_still_firing_and_within_noise() {
        let rec = testdata::oversubscribed();
        let c = compare(&rec, &rec, ("a", "b"), &rules(), None).unwrap();
        assert_eq!(c.rules[0].verdict, RuleVerdict::StillFiring);
        assert!(
            c.rules[0]
                .evidence
                .iter()
                .all(|e| e.delta == Some(0.0) || e.delta.is_none())
        );
        let inv = c
            .metrics
            .iter()
            .find(|m| m.name == "involuntary switches")
            .unwrap();
        assert_eq!(inv.assessment, "within noise");
    }

    #[test]
    fn noise_decides_between_a_change_and_jitter() {
        let noisy_b: Vec<Option<f64>> = [100.0, 140.0, 90.0, 130.0, 110.0].map(Some).to_vec();
        let noisy_a: Vec<Option<f64>> = [105.0, 135.0, 95.0, 125.0, 120.0].map(Some).to_vec();
        assert_eq!(
            metric_change("x", "u", &noisy_b, &noisy_a).assessment,
            "within noise"
        );
        let lower: Vec<Option<f64>> = [40.0, 45.0, 38.0, 42.0, 41.0].map(Some).to_vec();
        let m = metric_change("x", "u", &noisy_b, &lower);
        assert_eq!(m.assessment, "lower");
        assert!(m.noise.unwrap() > 0.0);
        // One slice: no noise estimate, no claim.
        assert_eq!(
            metric_change("x", "u", &[Some(1.0)], &[Some(2.0)]).assessment,
            "not comparable"
        );
        assert_eq!(metric_change("x", "u", &[None], &[None]).before, None);
    }

    #[test]
    fn missing_data_is_not_comparable_with_the_reason() {
        let mut after = testdata::near_miss();
        after.probes[0].programs[0].error = Some("permission denied".into());
        for s in &mut after.slices {
            s.sched = None;
        }
        let c = compare(
            &testdata::oversubscribed(),
            &after,
            ("a", "b"),
            &rules(),
            None,
        )
        .unwrap();
        assert_eq!(c.rules[0].verdict, RuleVerdict::NotComparable);
        assert!(
            c.rules[0].after.contains("permission denied"),
            "{}",
            c.rules[0].after
        );
        let text = render_text(&c);
        assert!(text.contains("[not comparable]"), "{text}");
    }
}
