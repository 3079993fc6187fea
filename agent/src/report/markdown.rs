//! Markdown rendering of a [`Report`], for tickets, wikis and pull requests.
//!
//! Same content and order as the terminal report: a header table, the ranked
//! findings (evidence as a table, commands in `sh` code blocks so they can be
//! copied as they are), the rules not assessed / not applicable / passed, and
//! the probes.

use std::fmt::Write;

use super::terminal::{ranking_line, recorded_line, rules_line, target_line};
use super::{Finding, Report};

/// The report as GitHub-flavoured Markdown.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_report(&mut out, report);
    out
}

/// Escapes text for a table cell (pipes and line breaks).
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// Inline code that survives backticks inside `text`.
fn code(text: &str) -> String {
    if text.contains('`') {
        format!("`` {text} ``")
    } else {
        format!("`{text}`")
    }
}

/// A fence longer than any backtick run inside the commands.
fn fence_for(commands: &[String]) -> String {
    let longest = commands
        .iter()
        .flat_map(|c| c.split(|ch| ch != '`'))
        .map(str::len)
        .max()
        .unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

fn write_commands(out: &mut String, commands: &[String]) -> std::fmt::Result {
    let fence = fence_for(commands);
    writeln!(out, "{fence}sh")?;
    for c in commands {
        writeln!(out, "{}", c.trim_end())?;
    }
    writeln!(out, "{fence}")?;
    writeln!(out)
}

fn write_report(out: &mut String, report: &Report) -> std::fmt::Result {
    let r = &report.recording;
    let h = &r.host;
    writeln!(out, "# mdiag report: {}", h.hostname)?;
    writeln!(out)?;
    writeln!(out, "| | |")?;
    writeln!(out, "|---|---|")?;
    writeln!(
        out,
        "| Host | {} ({}, {} CPUs, {}) |",
        cell(&h.hostname),
        cell(&h.arch),
        h.cpu_count,
        cell(&h.cpu_model)
    )?;
    writeln!(out, "| Kernel | {} |", cell(&h.kernel_release))?;
    writeln!(out, "| Target | {} |", cell(&target_line(report)))?;
    writeln!(out, "| Recorded | {} |", cell(&recorded_line(report)))?;
    if let Some(source) = &r.source {
        writeln!(out, "| File | {} |", code(source))?;
    }
    writeln!(out, "| Ranking | {} |", cell(&ranking_line(report)))?;
    writeln!(out, "| Rules | {} |", cell(&rules_line(report)))?;
    writeln!(out)?;

    writeln!(out, "## Findings")?;
    writeln!(out)?;
    if report.findings.is_empty() {
        writeln!(out, "No rule fired.")?;
        writeln!(out)?;
    }
    for f in &report.findings {
        write_finding(out, f)?;
    }

    if !report.not_assessed.is_empty() {
        writeln!(out, "## Not assessed (data missing)")?;
        writeln!(out)?;
        for n in &report.not_assessed {
            writeln!(out, "- {} {}: {}", code(&n.rule_id), n.title, n.reason)?;
        }
        writeln!(out)?;
    }
    if !report.not_applicable.is_empty() {
        writeln!(out, "## Not applicable to this host")?;
        writeln!(out)?;
        for n in &report.not_applicable {
            writeln!(out, "- {} {}: {}", code(&n.rule_id), n.title, n.reason)?;
        }
        writeln!(out)?;
    }
    if !report.passed.is_empty() {
        writeln!(out, "## Passed (checked, did not fire)")?;
        writeln!(out)?;
        for n in &report.passed {
            let numbers: Vec<String> = n
                .evidence
                .iter()
                .map(|e| format!("{}: {}", e.label, e.value))
                .collect();
            writeln!(
                out,
                "- {} {}: {}",
                code(&n.rule_id),
                n.title,
                numbers.join("; ")
            )?;
        }
        writeln!(out)?;
    }

    writeln!(out, "## Probes")?;
    writeln!(out)?;
    if report.probes.is_empty() {
        writeln!(out, "No probe was tried.")?;
        return Ok(());
    }
    writeln!(out, "| Probe | Status | Events dropped | Problems |")?;
    writeln!(out, "|---|---|---:|---|")?;
    for p in &report.probes {
        let status = if p.attached {
            p.status()
        } else {
            format!("**{}**", p.status())
        };
        let drops = p.drops.map_or("-".to_string(), |d| d.total.to_string());
        let problems: Vec<String> = p
            .programs
            .iter()
            .filter_map(|prog| {
                prog.error
                    .as_ref()
                    .map(|e| format!("{} at {}: {e}", prog.name, prog.attach_point))
            })
            .collect();
        writeln!(
            out,
            "| {} | {status} | {drops} | {} |",
            cell(&p.family),
            cell(&problems.join("; "))
        )?;
    }
    Ok(())
}

fn write_finding(out: &mut String, f: &Finding) -> std::fmt::Result {
    writeln!(out, "### {}. {} ({})", f.rank, f.title, f.severity)?;
    writeln!(out)?;
    writeln!(
        out,
        "Rule {}. **Score {:.2}**: {}.",
        code(&f.rule_id),
        f.score,
        f.rank_reason
    )?;
    writeln!(out)?;
    writeln!(out, "{}", f.summary)?;
    writeln!(out)?;
    writeln!(out, "| Evidence | Value |")?;
    writeln!(out, "|---|---:|")?;
    for e in &f.evidence {
        writeln!(
            out,
            "| {} | {} |",
            cell(&e.label),
            cell(&e.value.to_string())
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "**Expected impact:** {} *(source: {})*",
        f.impact.expected, f.impact.source
    )?;
    writeln!(out)?;
    writeln!(out, "**Fix:** {}", f.fix.summary)?;
    writeln!(out)?;
    if !f.fix.commands.is_empty() {
        write_commands(out, &f.fix.commands)?;
    }
    writeln!(out, "**Risk:** {}", f.fix.risk)?;
    writeln!(out)?;
    writeln!(out, "**Verify:** {}", f.fix.verify)?;
    writeln!(out)?;
    if !f.fix.revert.is_empty() {
        writeln!(out, "**Revert:**")?;
        writeln!(out)?;
        write_commands(out, &f.fix.revert)?;
    }
    if !f.references.is_empty() {
        writeln!(out, "**References:**")?;
        writeln!(out)?;
        for r in &f.references {
            match &r.url {
                Some(url) => writeln!(out, "- [{}]({url})", r.title)?,
                None => writeln!(out, "- {}", r.title)?,
            }
        }
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::explain;
    use crate::rules::{RuleSet, testdata};

    #[test]
    fn markdown_has_the_finding_evidence_and_fix() {
        let report = explain(
            &testdata::oversubscribed(),
            &RuleSet::builtin().unwrap(),
            None,
            Some("db1.mdiag".into()),
        )
        .unwrap();
        let md = render(&report);
        assert!(!md.contains('\x1b'));
        assert!(md.starts_with("# mdiag report: db1.example\n"), "{md}");
        assert!(md.contains("| Kernel | 6.18.44-fc-v769 |"), "{md}");
        assert!(
            md.contains("| Target | mongod (pid 1000, /usr/bin/mongod) |"),
            "{md}"
        );
        assert!(md.contains("| File | `db1.mdiag` |"), "{md}");
        assert!(
            md.contains("### 1. Wakeup preemption keeps interrupting busy threads (high)"),
            "{md}"
        );
        assert!(
            md.contains("**Score 0.36**: impact 0.60 × confidence 0.60"),
            "{md}"
        );
        assert!(
            md.contains("| involuntary switches (% of observed switches) | 90.3 |"),
            "{md}"
        );
        assert!(md.contains("| threads observed | 4 |"), "{md}");
        assert!(md.contains("```sh\nmountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug\necho NO_WAKEUP_PREEMPTION > /sys/kernel/debug/sched/features\n"), "{md}");
        assert!(
            md.contains("\n[Unit]\n"),
            "heredoc content kept verbatim: {md}"
        );
        assert!(md.contains("**Risk:** With wakeup preemption off"), "{md}");
        assert!(md.contains("- [EEVDF Scheduler (Linux kernel documentation)](https://docs.kernel.org/scheduler/sched-eevdf.html)"), "{md}");
        assert!(
            md.contains("| sched | attached (2 programs) | 0 |  |"),
            "{md}"
        );
    }

    #[test]
    fn markdown_lists_not_assessed_and_host_wide() {
        let mut rec = testdata::oversubscribed();
        rec.target = None;
        rec.probes.clear();
        let report = explain(&rec, &RuleSet::builtin().unwrap(), None, None).unwrap();
        let md = render(&report);
        assert!(
            md.contains("| Target | host-wide: no target process |"),
            "{md}"
        );
        assert!(md.contains("No rule fired."), "{md}");
        assert!(
            md.contains("## Not assessed (data missing)\n\n- `sched.wakeup_preemption`"),
            "{md}"
        );
        assert!(md.contains("No probe was tried."), "{md}");
    }

    #[test]
    fn cells_and_fences_are_escaped() {
        assert_eq!(cell("a|b\nc"), "a\\|b c");
        assert_eq!(code("x`y"), "`` x`y ``");
        assert_eq!(fence_for(&["echo ```".into()]), "````");
        assert_eq!(fence_for(&["echo".into()]), "```");
    }
}
