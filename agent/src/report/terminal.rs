//! Terminal rendering of a [`Report`] for an SRE at a shell.
//!
//! Plain text wrapped to 100 columns: a header (host, kernel, arch, target,
//! duration), the ranked findings with their evidence, fix commands, risk,
//! verification and references, then the rules that were not assessed or do
//! not apply, the rules that passed, the measurements of each probe family
//! (whether or not a rule used them), and the probes. Colour is used only when
//! the caller asks for it (it decides from the TTY and `NO_COLOR`); without it
//! the output has no escape sequences at all, so it can be piped or pasted.
//!
//! The measurements come as a view model ([`super::view`]) built by each
//! family; this file only lays it out (indentation, wrapping, padded
//! columns, styles).

use std::fmt::Write;

use anstyle::{AnsiColor, Style};

use super::Report;
use super::measurements::Measurements;
use super::view::{
    self, Align, Block, Section, Span, Table, confidence_line, missing_lines, ranking_line,
    recorded_line, rules_line, target_line, truncate,
};
use crate::findings::{EvidenceItem, Finding, Severity};

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
        self.severity_padded(s, &s.as_str().to_ascii_uppercase())
    }

    /// `label` (the severity's name, padded) in the severity's colour.
    fn severity_padded(&self, s: Severity, label: &str) -> String {
        let style = match s {
            Severity::Critical => Style::new().bold().fg_color(Some(AnsiColor::Red.into())),
            Severity::High => Style::new().fg_color(Some(AnsiColor::Red.into())),
            Severity::Medium => Style::new().fg_color(Some(AnsiColor::Yellow.into())),
            Severity::Low => Style::new().fg_color(Some(AnsiColor::Cyan.into())),
            Severity::Info => Style::new().dimmed(),
        };
        self.paint(style, label)
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

fn write_report(out: &mut String, report: &Report, p: &Painter) -> std::fmt::Result {
    write_header(out, report, p)?;
    write_overview(out, report, p)?;
    write_rules(out, report, p)?;
    write_checklist(out, report, p)?;
    writeln!(out)?;
    write_measurements(out, &report.measurements, p)?;
    if let Some(h) = &report.hot_stacks {
        writeln!(out)?;
        super::stacks::write_text(
            out,
            h,
            &p.heading("Hottest stacks (on CPU, leaf first; [k]: kernel)"),
        )?;
    }
    if let Some(h) = &report.wait_stacks {
        writeln!(out)?;
        super::stacks::write_text(
            out,
            h,
            &p.heading("Where threads wait (off CPU, leaf first; [k]: kernel)"),
        )?;
    }
    write_probes(out, report, p)
}

/// The host, target, recording and rules the report is about.
fn write_header(out: &mut String, report: &Report, p: &Painter) -> std::fmt::Result {
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
    Ok(())
}

/// Every finding on one line, with the number that fired it beneath.
fn write_overview(out: &mut String, report: &Report, p: &Painter) -> std::fmt::Result {
    let rows = super::overview::rows(&report.findings);
    let checklist = super::overview::checklist_count(report);
    if rows.is_empty() && checklist.is_none() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "{}", p.heading("Overview"))?;
    for r in rows {
        let severity = format!("{:<8}", r.severity.as_str().to_ascii_uppercase());
        writeln!(
            out,
            "  {:>3}  {}  {:.2}  {}",
            format!("#{}", r.rank),
            p.severity_padded(r.severity, &severity),
            r.score,
            truncate(r.title, WIDTH - 23)
        )?;
        if let Some(key) = r.key {
            writeln!(out, "{}", p.dim(&wrap(&key, &" ".repeat(23), WIDTH)))?;
        }
    }
    if let Some(line) = checklist {
        writeln!(out, "{}", wrap(&line, "  ", WIDTH))?;
    }
    Ok(())
}

/// The checklist: one line per setting that differs from MongoDB's
/// production notes, then mongod's own startup warnings verbatim.
fn write_checklist(out: &mut String, report: &Report, p: &Painter) -> std::fmt::Result {
    if !report.checklist.is_empty() {
        writeln!(out)?;
        writeln!(
            out,
            "{}",
            p.heading("Checklist (settings that differ from MongoDB's production notes)")
        )?;
        for f in &report.checklist {
            let Some(c) = &f.checklist else { continue };
            writeln!(
                out,
                "{}",
                wrap(
                    &format!("{}: {} here; MongoDB: {}", c.setting, c.value, c.notes),
                    "  ",
                    WIDTH
                )
            )?;
            for w in &f.mongod_warns {
                writeln!(
                    out,
                    "{}",
                    wrap(&format!("mongod warns too: {w}"), "      ", WIDTH)
                )?;
            }
            writeln!(
                out,
                "{}",
                p.dim(&format!(
                    "      {}: fix at {}",
                    f.rule_id,
                    super::overview::rule_page(&f.rule_id)
                ))
            )?;
        }
    }
    if let Some(warnings) = &report.startup_warnings {
        writeln!(out)?;
        writeln!(out, "{}", p.heading("mongod's startup warnings (verbatim)"))?;
        if warnings.is_empty() {
            writeln!(out, "  None: mongod logged no startup warning.")?;
        }
        for w in warnings {
            writeln!(out, "{}", wrap(w, "  ", WIDTH))?;
        }
    }
    Ok(())
}

/// The findings, then the rules not assessed, not applicable and passed.
fn write_rules(out: &mut String, report: &Report, p: &Painter) -> std::fmt::Result {
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
        writeln!(
            out,
            "{}",
            p.heading("Not applicable to this host or process")
        )?;
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
    Ok(())
}

/// Each probe family's status, drops and attach errors.
fn write_probes(out: &mut String, report: &Report, p: &Painter) -> std::fmt::Result {
    writeln!(out)?;
    writeln!(out, "{}", p.heading("Probes"))?;
    if report.probes.is_empty() {
        writeln!(out, "  No probe was tried.")?;
    }
    for probe in &report.probes {
        let status_style = if probe.attached {
            Style::new().fg_color(Some(AnsiColor::Green.into()))
        } else if probe.left_out.is_some() {
            // Left out by the user's choice: not a problem to flag.
            Style::new()
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

fn write_measurements(out: &mut String, m: &Measurements, p: &Painter) -> std::fmt::Result {
    writeln!(out, "{}", p.heading("Measurements"))?;
    write_sections(out, &view::measurements(m), p)
}

/// The sections as terminal text, each after a blank line (for tests of a
/// family's section).
#[cfg(test)]
pub(crate) fn render_sections(sections: &[Section], color: bool) -> String {
    let mut out = String::new();
    let _ = write_sections(&mut out, sections, &Painter { color });
    out
}

/// Lays out the terminal blocks of `sections` (Markdown ones are skipped).
fn write_sections(out: &mut String, sections: &[Section], p: &Painter) -> std::fmt::Result {
    for section in sections {
        writeln!(out)?;
        for block in &section.blocks {
            match block {
                Block::Line(l) => {
                    let text: String = l
                        .spans
                        .iter()
                        .map(|s| match s {
                            Span::Plain(t) => t.clone(),
                            Span::Bold(t) => p.bold(t),
                        })
                        .collect();
                    if l.wrap {
                        writeln!(out, "{}", wrap(&text, l.indent, WIDTH))?;
                    } else {
                        writeln!(out, "{}{text}", l.indent)?;
                    }
                }
                Block::Hanging { lead, label, text } => {
                    let hang = " ".repeat(lead.chars().count() + label.chars().count() + 2);
                    let text = wrap(text, &hang, WIDTH);
                    let label =
                        p.paint(Style::new().fg_color(Some(AnsiColor::Yellow.into())), label);
                    writeln!(out, "{lead} {label} {}", text.trim_start_matches(' '))?;
                }
                Block::Table(t) => write_table(out, t, p)?,
                Block::Para(_) | Block::Bullets(_) | Block::MdTable(_) => {}
            }
        }
    }
    Ok(())
}

/// A table in padded columns: the header (dimmed when asked), then the rows.
fn write_table(out: &mut String, t: &Table, p: &Painter) -> std::fmt::Result {
    if t.rows.is_empty() && !t.header_when_empty {
        return Ok(());
    }
    let header = table_line(t, t.columns.iter().map(|c| c.term.as_str()));
    if t.dim_header {
        writeln!(out, "{}", p.dim(&header))?;
    } else {
        writeln!(out, "{header}")?;
    }
    for row in &t.rows {
        let line = table_line(t, row.cells.iter().map(|c| c.term.as_str()));
        if row.bold {
            writeln!(out, "{}", p.bold(&line))?;
        } else {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// One row: each cell after its column's gap, padded (and cut when the
/// column says so); a row with fewer cells ends early, trailing blanks go.
fn table_line<'a>(t: &Table, cells: impl Iterator<Item = &'a str>) -> String {
    let mut line = t.indent.to_string();
    for (column, text) in t.columns.iter().zip(cells) {
        line.push_str(column.gap);
        let w = column.width;
        let text = if column.clip && w > 0 {
            truncate(text, w)
        } else {
            text.to_owned()
        };
        let _ = match column.align {
            Align::Left => write!(line, "{text:<w$}"),
            Align::Right => write!(line, "{text:>w$}"),
        };
    }
    line.truncate(line.trim_end().len());
    line
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
    for w in &f.mongod_warns {
        writeln!(
            out,
            "{}",
            wrap(
                &format!("mongod warns about this at startup too: {w}"),
                "    ",
                WIDTH
            )
        )?;
        writeln!(out)?;
    }
    writeln!(out, "    {}", p.bold("Evidence"))?;
    write_evidence(out, &f.evidence, p)?;
    writeln!(out)?;
    writeln!(out, "{}", wrap(&confidence_line(f), "    ", WIDTH))?;
    for line in missing_lines(f) {
        writeln!(out, "{}", wrap(&line, "    ", WIDTH))?;
    }
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
    for file in &f.fix.files {
        writeln!(out)?;
        writeln!(
            out,
            "{}",
            wrap(&format!("In {} ({}):", file.path, file.how), "    ", WIDTH)
        )?;
        // Verbatim and flush left: copied, it is the file's content.
        for line in file.content.trim_end().lines() {
            writeln!(out, "{}", p.command(line))?;
        }
    }
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
mod tests;
