//! The report's "Measurements" laid out from the view model
//! ([`crate::kit::view`]): every family's section in the order the reports
//! show it, mongod's and the host's, and the report's heading lines.

use super::{Measurements, Report};
use crate::findings::Finding;
use crate::kit::family::Family;
use crate::kit::unit::FamilyUnit;
pub use crate::kit::view::*;

/// Generates [`family_sections`] from the registry.
macro_rules! family_sections {
    ($($variant:ident $module:ident,)*) => {
        /// Every family's part of the Measurements section, in the
        /// registry's order, rseq ownership after the syscalls family (whose
        /// rseq registrations it reads).
        fn family_sections(m: &Measurements, out: &mut Vec<Section>) {
            $(
                out.extend(m.$module.as_ref().map(
                    <crate::family::$module::Unit as FamilyUnit>::view,
                ));
                if Family::$variant == Family::Syscalls {
                    out.extend(m.rseq.as_ref().map(super::rseq::rseq_section));
                }
            )*
        }
    };
}
crate::kit::family::for_each_family!(family_sections);

/// The Measurements section, in the order the reports show it.
pub fn measurements(m: &Measurements) -> Vec<Section> {
    let mut out = Vec::new();
    family_sections(m, &mut out);
    out.push(mongod(m));
    out.extend(m.host_settings.as_ref().map(|h| {
        let mut s = Section::new(Some("Host settings"));
        s.push(Line::title("host settings", None, false));
        lines(&mut s, h.lines());
        s
    }));
    let mut net = Section::new(None);
    let line = super::measurements::net_line(m.net.as_ref());
    net.push(Line::wrapped("  ", line.clone()))
        .push(Block::Para(format!("{line}.")));
    out.push(net);
    if !m.not_recorded.is_empty() {
        let mut s = Section::new(None);
        s.push(Block::Para("Not measured:".into()));
        let mut bullets = Vec::new();
        for n in &m.not_recorded {
            // "  softirq    not measured: reason...", the reason wrapped under
            // itself; "measured in part:" for a family whose numbers are
            // shown above but are incomplete.
            s.push(Block::Hanging {
                lead: format!("  {:<10}", n.family),
                label: format!("{}:", m.note_label(&n.family)),
                text: n.reason.clone(),
            });
            bullets.push(if m.has(&n.family) {
                format!("{} (measured in part): {}", md_code(&n.family), n.reason)
            } else {
                format!("{}: {}", md_code(&n.family), n.reason)
            });
        }
        s.push(Block::Bullets(bullets));
        out.push(s);
    }
    out
}

/// mongod's figures, or why there are none.
fn mongod(m: &Measurements) -> Section {
    let mut s = Section::new(Some("mongod"));
    match &m.mongod {
        Some(mongod) => {
            s.push(Line::title("mongod", None, false));
            lines(&mut s, mongod.lines());
        }
        None => {
            let why = crate::rules::facts::mongod::NOT_POLLED;
            s.push(Line::title("mongod", Some(why.into()), true))
                .push(Block::Para(format!("{why}.")));
        }
    }
    s
}

/// Lines of text: wrapped terminal lines, Markdown bullets.
fn lines(s: &mut Section, lines: Vec<String>) {
    let bullets = lines
        .iter()
        .map(|l| md_cell(l).replace('*', "\\*"))
        .collect();
    for l in lines {
        s.push(Line::wrapped("    ", l));
    }
    s.push(Block::Bullets(bullets));
}

pub(crate) fn target_line(report: &Report) -> String {
    match &report.recording.target {
        None => "host-wide: no target process".to_string(),
        Some(t) => {
            let mut s = format!("{} (pid {}", t.comm, t.pid);
            if let Some(exe) = &t.exe {
                s.push_str(&format!(", {exe}"));
            }
            if let Some(code) = t.exit_code {
                s.push_str(&format!(", exited with status {code}"));
            }
            s.push(')');
            s
        }
    }
}

pub(crate) fn recorded_line(report: &Report) -> String {
    let r = &report.recording;
    format!(
        "{} for {:.1} s (stopped: {}), {} slices",
        r.started_at.format("%Y-%m-%d %H:%M:%S UTC"),
        r.duration_s,
        r.stop_reason,
        r.slices
    )
}

pub(crate) fn ranking_line(report: &Report) -> String {
    if report.architecture_overridden {
        format!(
            "for {} (--arch; recorded on {})",
            report.architecture, report.recording.host.arch
        )
    } else {
        format!("for {}", report.architecture)
    }
}

pub(crate) fn rules_line(report: &Report) -> String {
    let n = report.rules.count;
    let checklist = match report.checklist.len() {
        0 => String::new(),
        1 => ", 1 checklist item".to_owned(),
        c => format!(", {c} checklist items"),
    };
    format!(
        "{}, {n} rule{}: {} finding{}{checklist}, {} not assessed, {} not applicable, {} passed",
        report.rules.source,
        if n == 1 { "" } else { "s" },
        report.findings.len(),
        if report.findings.len() == 1 { "" } else { "s" },
        report.not_assessed.len(),
        report.not_applicable.len(),
        report.passed.len()
    )
}

/// "Confidence: 0.80 (how directly the evidence shows the cause)".
pub(crate) fn confidence_line(f: &Finding) -> String {
    format!(
        "Confidence: {:.2} (0 to 1: how directly the evidence shows the cause)",
        f.confidence
    )
}

/// One line per optional evidence group the finding was made without:
/// "Made without mongod data: mongod was not polled: ...". Nothing when the
/// rule saw everything it can use.
pub(crate) fn missing_lines(f: &Finding) -> Vec<String> {
    f.missing
        .iter()
        .map(|m| format!("Made without {} data: {}", m.group, m.reason))
        .collect()
}
