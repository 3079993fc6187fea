//! Terminal rendering of a [`Report`] for an SRE at a shell.
//!
//! Plain text wrapped to 100 columns: a header (host, kernel, arch, target,
//! duration), the ranked findings with their evidence, fix commands, risk,
//! verification and references, then the rules that were not assessed or do
//! not apply, the rules that passed, and the probes. Colour is used only when
//! the caller asks for it (it decides from the TTY and `NO_COLOR`); without it
//! the output has no escape sequences at all, so it can be piped or pasted.

use std::fmt::Write;

use anstyle::{AnsiColor, Style};

use super::{EvidenceItem, Finding, Report, Severity};

const WIDTH: usize = 100;

struct Painter {
    color: bool,
}

impl Painter {
    fn paint(&self, style: Style, text: &str) -> String {
        if self.color {
            format!("{style}{text}{style:#}")
        } else {
            text.to_string()
        }
    }

    fn heading(&self, text: &str) -> String {
        self.paint(Style::new().bold().underline(), text)
    }

    fn bold(&self, text: &str) -> String {
        self.paint(Style::new().bold(), text)
    }

    fn dim(&self, text: &str) -> String {
        self.paint(Style::new().dimmed(), text)
    }

    fn command(&self, text: &str) -> String {
        self.paint(Style::new().fg_color(Some(AnsiColor::Green.into())), text)
    }

    fn severity(&self, s: Severity) -> String {
        let label = s.as_str().to_ascii_uppercase();
        let style = match s {
            Severity::Critical => Style::new().bold().fg_color(Some(AnsiColor::Red.into())),
            Severity::High => Style::new().fg_color(Some(AnsiColor::Red.into())),
            Severity::Medium => Style::new().fg_color(Some(AnsiColor::Yellow.into())),
            Severity::Low => Style::new().fg_color(Some(AnsiColor::Cyan.into())),
            Severity::Info => Style::new().dimmed(),
        };
        self.paint(style, &label)
    }
}

/// The report as terminal text; `color` adds ANSI styles.
pub fn render(report: &Report, color: bool) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_report(&mut out, report, &Painter { color });
    out
}

/// Wraps `text` to `width` columns, every line starting with `indent`.
/// Blank lines separate paragraphs and are kept.
pub(crate) fn wrap(text: &str, indent: &str, width: usize) -> String {
    let room = width.saturating_sub(indent.chars().count()).max(20);
    let mut lines = Vec::new();
    for paragraph in text.trim().split("\n\n") {
        if !lines.is_empty() {
            lines.push(String::new());
        }
        let mut line = String::new();
        for word in paragraph.split_whitespace() {
            if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > room {
                lines.push(format!("{indent}{line}"));
                line.clear();
            }
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        if !line.is_empty() {
            lines.push(format!("{indent}{line}"));
        }
    }
    lines.join("\n")
}

pub(crate) fn target_line(report: &Report) -> String {
    match &report.recording.target {
        None => "host-wide: no target process".to_string(),
        Some(t) => {
            let mut s = format!("{} (pid {}", t.comm, t.pid);
            if let Some(exe) = &t.exe {
                let _ = write!(s, ", {exe}");
            }
            if let Some(code) = t.exit_code {
                let _ = write!(s, ", exited with status {code}");
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
    format!(
        "{}, {n} rule{}: {} finding{}, {} not assessed, {} not applicable, {} passed",
        report.rules.source,
        if n == 1 { "" } else { "s" },
        report.findings.len(),
        if report.findings.len() == 1 { "" } else { "s" },
        report.not_assessed.len(),
        report.not_applicable.len(),
        report.passed.len()
    )
}

fn write_report(out: &mut String, report: &Report, p: &Painter) -> std::fmt::Result {
    let r = &report.recording;
    let h = &r.host;
    writeln!(out, "{}", p.bold(&format!("mdiag report: {}", h.hostname)))?;
    let field = |name: &str| p.dim(&format!("{name:<9}"));
    writeln!(
        out,
        "  {} {}, {}, {} CPUs ({})",
        field("host"),
        h.hostname,
        h.arch,
        h.cpu_count,
        h.cpu_model
    )?;
    writeln!(out, "  {} {}", field("kernel"), h.kernel_release)?;
    writeln!(out, "  {} {}", field("target"), target_line(report))?;
    writeln!(out, "  {} {}", field("recorded"), recorded_line(report))?;
    if let Some(source) = &r.source {
        writeln!(out, "  {} {source}", field("file"))?;
    }
    writeln!(out, "  {} {}", field("ranking"), ranking_line(report))?;
    writeln!(out, "  {} {}", field("rules"), rules_line(report))?;

    writeln!(out)?;
    writeln!(out, "{}", p.heading("Findings"))?;
    if report.findings.is_empty() {
        writeln!(out, "  No rule fired.")?;
    }
    for f in &report.findings {
        writeln!(out)?;
        write_finding(out, f, p)?;
    }

    if !report.not_assessed.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", p.heading("Not assessed (data missing)"))?;
        for n in &report.not_assessed {
            writeln!(out, "  {}  {}", p.bold(&n.rule_id), n.title)?;
            writeln!(out, "{}", wrap(&n.reason, "      ", WIDTH))?;
        }
    }
    if !report.not_applicable.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", p.heading("Not applicable to this host"))?;
        for n in &report.not_applicable {
            writeln!(out, "  {}  {}", p.bold(&n.rule_id), n.title)?;
            writeln!(out, "{}", wrap(&n.reason, "      ", WIDTH))?;
        }
    }
    if !report.passed.is_empty() {
        writeln!(out)?;
        writeln!(out, "{}", p.heading("Passed (checked, did not fire)"))?;
        for n in &report.passed {
            writeln!(out, "  {}  {}", p.bold(&n.rule_id), n.title)?;
            let numbers: Vec<String> = n
                .evidence
                .iter()
                .map(|e| format!("{}: {}", e.label, e.value))
                .collect();
            if !numbers.is_empty() {
                writeln!(out, "{}", wrap(&numbers.join("; "), "      ", WIDTH))?;
            }
        }
    }

    writeln!(out)?;
    writeln!(out, "{}", p.heading("Probes"))?;
    if report.probes.is_empty() {
        writeln!(out, "  No probe was tried.")?;
    }
    for probe in &report.probes {
        let status_style = if probe.attached {
            Style::new().fg_color(Some(AnsiColor::Green.into()))
        } else {
            Style::new().bold().fg_color(Some(AnsiColor::Red.into()))
        };
        let status = p.paint(status_style, &probe.status());
        let mut line = format!("  {:<10} {status}", probe.family);
        if let Some(d) = &probe.drops {
            let _ = write!(line, ", {} events dropped", d.total);
            if d.total > 0 {
                let _ = write!(
                    line,
                    " (thread map full {}, wakeup map full {}, read failed {})",
                    d.thread_map_full, d.wakeup_map_full, d.read_failed
                );
            }
        }
        writeln!(out, "{line}")?;
        for prog in &probe.programs {
            if let Some(err) = &prog.error {
                writeln!(
                    out,
                    "{}",
                    wrap(
                        &format!("{} at {}: {err}", prog.name, prog.attach_point),
                        "      ",
                        WIDTH
                    )
                )?;
            }
        }
    }
    Ok(())
}

fn write_evidence(out: &mut String, items: &[EvidenceItem], p: &Painter) -> std::fmt::Result {
    let width = items
        .iter()
        .map(|e| e.label.chars().count())
        .max()
        .unwrap_or(0);
    for e in items {
        let pad = width - e.label.chars().count();
        writeln!(
            out,
            "      {}{}  {}",
            e.label,
            " ".repeat(pad),
            p.bold(&e.value.to_string())
        )?;
    }
    Ok(())
}

/// One command per `$ ` line. The lines after the first of a multi-line
/// command (a heredoc) are printed flush left and verbatim, so that copying
/// them gives the exact file content and a terminator (`EOF`) that the shell
/// recognises.
fn write_commands(out: &mut String, commands: &[String], p: &Painter) -> std::fmt::Result {
    for c in commands {
        for (i, line) in c.trim_end().lines().enumerate() {
            if i == 0 {
                writeln!(out, "      {}", p.command(&format!("$ {line}")))?;
            } else if line.is_empty() {
                writeln!(out)?;
            } else {
                writeln!(out, "{}", p.command(line))?;
            }
        }
    }
    Ok(())
}

fn write_finding(out: &mut String, f: &Finding, p: &Painter) -> std::fmt::Result {
    writeln!(
        out,
        "{}  {}  [{}]",
        p.bold(&format!("#{}", f.rank)),
        p.bold(&f.title),
        p.severity(f.severity)
    )?;
    writeln!(out, "    rule   {}", f.rule_id)?;
    writeln!(
        out,
        "    score  {}  ({})",
        p.bold(&format!("{:.2}", f.score)),
        f.rank_reason
    )?;
    writeln!(out)?;
    writeln!(out, "{}", wrap(&f.summary, "    ", WIDTH))?;
    writeln!(out)?;
    writeln!(out, "    {}", p.bold("Evidence"))?;
    write_evidence(out, &f.evidence, p)?;
    writeln!(out)?;
    writeln!(
        out,
        "{}",
        wrap(
            &format!(
                "Expected impact: {} (source: {})",
                f.impact.expected, f.impact.source
            ),
            "    ",
            WIDTH
        )
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{}",
        wrap(&format!("Fix: {}", f.fix.summary), "    ", WIDTH)
    )?;
    write_commands(out, &f.fix.commands, p)?;
    writeln!(out)?;
    writeln!(
        out,
        "{}",
        wrap(&format!("Risk: {}", f.fix.risk), "    ", WIDTH)
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{}",
        wrap(&format!("Verify: {}", f.fix.verify), "    ", WIDTH)
    )?;
    if !f.fix.revert.is_empty() {
        writeln!(out)?;
        writeln!(out, "    Revert:")?;
        write_commands(out, &f.fix.revert, p)?;
    }
    if !f.references.is_empty() {
        writeln!(out)?;
        writeln!(out, "    References:")?;
        for r in &f.references {
            match &r.url {
                Some(url) => writeln!(out, "      - {}: {url}", r.title)?,
                None => writeln!(out, "      - {}", r.title)?,
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::explain;
    use crate::rules::{RuleSet, testdata};

    fn report() -> Report {
        explain(
            &testdata::oversubscribed(),
            &RuleSet::builtin().unwrap(),
            None,
            None,
        )
        .unwrap()
    }

    #[test]
    fn plain_output_has_the_finding_evidence_and_fix() {
        let text = render(&report(), false);
        assert!(!text.contains('\x1b'), "escape sequence without color");
        assert!(text.contains("mdiag report: db1.example"));
        assert!(text.contains("kernel    6.18.44-fc-v769"), "{text}");
        assert!(
            text.contains("target    mongod (pid 1000, /usr/bin/mongod)"),
            "{text}"
        );
        assert!(text.contains("for 10.0 s (stopped: duration)"), "{text}");
        assert!(
            text.contains("#1  Wakeup preemption keeps interrupting busy threads  [HIGH]"),
            "{text}"
        );
        assert!(
            text.contains("impact 0.60 × confidence 0.60 × x86_64 prior 1.00 (default) = 0.36"),
            "{text}"
        );
        // Evidence numbers, aligned after the longest label.
        assert!(
            text.contains("involuntary switches (% of observed switches)  90.3\n"),
            "{text}"
        );
        assert!(text.contains("threads observed"), "{text}");
        assert!(
            text.contains("$ echo NO_WAKEUP_PREEMPTION > /sys/kernel/debug/sched/features"),
            "{text}"
        );
        // A heredoc's lines are verbatim and flush left, so a copy works.
        assert!(text.contains("<<'EOF'\n[Unit]\n"), "{text}");
        assert!(text.contains("\n\n[Service]\n"), "{text}");
        assert!(
            text.contains("\nEOF\n      $ systemctl daemon-reload"),
            "{text}"
        );
        assert!(
            !text.lines().any(|l| l.ends_with(' ')),
            "trailing spaces: {text}"
        );
        assert!(text.contains("Risk: With wakeup preemption off"), "{text}");
        assert!(text.contains("Verify: "), "{text}");
        assert!(
            text.contains("https://docs.kernel.org/scheduler/sched-eevdf.html"),
            "{text}"
        );
        assert!(
            text.contains("sched      attached (2 programs), 0 events dropped"),
            "{text}"
        );
        for line in text.lines() {
            // Wrapped prose stays within the width (commands and URLs may not).
            if !line.contains("$ ") && !line.contains("http") && !line.starts_with("Exec") {
                assert!(line.chars().count() <= WIDTH, "too long: {line}");
            }
        }
    }

    #[test]
    fn color_adds_styles_only_when_asked() {
        let text = render(&report(), true);
        assert!(text.contains("\x1b["), "no escape sequence with color");
        assert!(text.contains("Wakeup preemption keeps interrupting busy threads"));
    }

    #[test]
    fn host_wide_and_failed_probes_are_explained() {
        let mut rec = testdata::oversubscribed();
        rec.target = None;
        rec.probes[0].programs[1].error = Some("tracepoint sched_wakeup not found".into());
        let report = explain(&rec, &RuleSet::builtin().unwrap(), Some("s390x"), None).unwrap();
        let text = render(&report, false);
        assert!(text.contains("host-wide: no target process"), "{text}");
        assert!(
            text.contains("for s390x (--arch; recorded on x86_64)"),
            "{text}"
        );
        assert!(text.contains("No rule fired."), "{text}");
        assert!(text.contains("Not assessed (data missing)"), "{text}");
        assert!(text.contains("attached only partly"), "{text}");
        assert!(
            text.contains("sched      partly attached (1 of 2 programs)"),
            "{text}"
        );
        assert!(
            text.contains("sched_wakeup at tp_btf/sched_wakeup: tracepoint sched_wakeup not found"),
            "{text}"
        );
    }

    #[test]
    fn passed_rules_show_their_numbers() {
        let report = explain(
            &testdata::near_miss(),
            &RuleSet::builtin().unwrap(),
            None,
            None,
        )
        .unwrap();
        let text = render(&report, false);
        assert!(text.contains("Passed (checked, did not fire)"), "{text}");
        assert!(
            text.contains("involuntary switches (% of observed switches): 10.0;"),
            "{text}"
        );
    }

    #[test]
    fn wrap_keeps_words_and_indent() {
        let w = wrap("aaa bbb ccc ddd\n\nsecond para", "  ", 29);
        assert_eq!(w, "  aaa bbb ccc ddd\n\n  second para");
        let w = wrap(&"word ".repeat(10), "> ", 22);
        assert!(
            w.lines().all(|l| l.starts_with("> ") && l.len() <= 22),
            "{w}"
        );
    }
}
