//! Markdown rendering of a [`Report`], for tickets, wikis and pull requests.
//!
//! Same content and order as the terminal report: a header table, the ranked
//! findings (evidence as a table, commands in `sh` code blocks so they can be
//! copied as they are), the rules not assessed / not applicable / passed, the
//! measurements of each probe family (as tables), and the probes.
//!
//! The measurements come as a view model ([`super::view`]) built by each
//! family; this file only lays it out (headings, paragraphs, bullets, table
//! syntax).

use std::fmt::Write;

use super::Report;
use super::measurements::Measurements;
use super::view::{
    self, Block, Section, Table, confidence_line, md_cell as cell, md_code as code, missing_lines,
    ranking_line, recorded_line, rules_line, target_line,
};
use crate::findings::Finding;

/// The report as GitHub-flavoured Markdown.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = write_report(&mut out, report);
    out
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
    write_overview(out, report)?;

    writeln!(out, "## Findings")?;
    writeln!(out)?;
    if report.findings.is_empty() {
        writeln!(out, "No rule fired.")?;
        writeln!(out)?;
    }
    for f in &report.findings {
        write_finding(out, f)?;
    }

    write_checklist(out, report)?;

    if !report.not_assessed.is_empty() {
        writeln!(out, "## Not assessed (data missing)")?;
        writeln!(out)?;
        for n in &report.not_assessed {
            writeln!(out, "- {} {}: {}", code(&n.rule_id), n.title, n.reason)?;
        }
        writeln!(out)?;
    }
    if !report.not_applicable.is_empty() {
        writeln!(out, "## Not applicable to this host or process")?;
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

    write_measurements(out, &report.measurements)?;
    for h in [&report.hot_stacks, &report.wait_stacks]
        .into_iter()
        .flatten()
    {
        super::stacks::write_markdown(out, h)?;
    }
    write_probes(out, report)
}

/// Each probe family's status, drops and attach errors.
fn write_probes(out: &mut String, report: &Report) -> std::fmt::Result {
    writeln!(out, "## Probes")?;
    writeln!(out)?;
    if report.probes.is_empty() {
        writeln!(out, "No probe was tried.")?;
        return Ok(());
    }
    writeln!(out, "| Probe | Status | Events dropped | Problems |")?;
    writeln!(out, "|---|---|---:|---|")?;
    for p in &report.probes {
        let status = if p.attached || p.left_out.is_some() {
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

fn write_measurements(out: &mut String, m: &Measurements) -> std::fmt::Result {
    writeln!(out, "## Measurements")?;
    writeln!(out)?;
    writeln!(
        out,
        "What the probes measured, whether or not a rule used it."
    )?;
    writeln!(out)?;
    write_sections(out, &view::measurements(m))
}

/// The sections as Markdown (for tests of a family's section).
#[cfg(test)]
pub(crate) fn render_sections(sections: &[Section]) -> String {
    let mut out = String::new();
    let _ = write_sections(&mut out, sections);
    out
}

/// Lays out the Markdown blocks of `sections` (terminal ones are skipped):
/// a `###` heading, paragraphs, bullet lists and tables, each followed by
/// a blank line.
fn write_sections(out: &mut String, sections: &[Section]) -> std::fmt::Result {
    for section in sections {
        if let Some(title) = &section.md_title {
            writeln!(out, "### {title}")?;
            writeln!(out)?;
        }
        for block in &section.blocks {
            match block {
                Block::Para(text) => {
                    writeln!(out, "{text}")?;
                    writeln!(out)?;
                }
                Block::Bullets(items) => {
                    for item in items {
                        writeln!(out, "- {item}")?;
                    }
                    writeln!(out)?;
                }
                Block::Table(t) | Block::MdTable(t) => write_table(out, t)?,
                Block::Line(_) | Block::Hanging { .. } => {}
            }
        }
    }
    Ok(())
}

/// A table with its header and alignment rows; nothing without rows. An
/// empty cell is written as ` |`.
fn write_table(out: &mut String, t: &Table) -> std::fmt::Result {
    if t.rows.is_empty() {
        return Ok(());
    }
    let heads: Vec<&str> = t.columns.iter().map(|c| c.md.as_str()).collect();
    writeln!(out, "| {} |", heads.join(" | "))?;
    let align: String = t
        .columns
        .iter()
        .map(|c| if c.md_right { "---:|" } else { "---|" })
        .collect();
    writeln!(out, "|{align}")?;
    for row in &t.rows {
        let mut line = String::from("|");
        for c in &row.cells {
            if c.md.is_empty() {
                line.push_str(" |");
            } else {
                let _ = write!(line, " {} |", c.md);
            }
        }
        writeln!(out, "{line}")?;
    }
    writeln!(out)
}

/// The checklist: one row per setting that differs from MongoDB's
/// production notes, its fix behind a link; then mongod's own startup
/// warnings verbatim.
fn write_checklist(out: &mut String, report: &Report) -> std::fmt::Result {
    if !report.checklist.is_empty() {
        writeln!(out, "## Checklist")?;
        writeln!(out)?;
        writeln!(
            out,
            "Settings that differ from MongoDB's production notes, with no measured cost in \
             this recording: worth setting right, never ranked above a finding."
        )?;
        writeln!(out)?;
        writeln!(
            out,
            "| Setting | Here | MongoDB's notes | mongod warns too | Fix |"
        )?;
        writeln!(out, "|---|---|---|---|---|")?;
        for f in &report.checklist {
            let Some(c) = &f.checklist else { continue };
            writeln!(
                out,
                "| {} | {} | {} | {} | [{}]({}) |",
                cell(&c.setting),
                cell(&c.value),
                cell(&c.notes),
                if f.mongod_warns.is_empty() {
                    "-".to_owned()
                } else {
                    cell(&f.mongod_warns.join("; "))
                },
                f.rule_id,
                super::overview::rule_page(&f.rule_id)
            )?;
        }
        writeln!(out)?;
    }
    if let Some(warnings) = &report.startup_warnings {
        writeln!(out, "## mongod's startup warnings")?;
        writeln!(out)?;
        if warnings.is_empty() {
            writeln!(out, "None: mongod logged no startup warning.")?;
        }
        for w in warnings {
            writeln!(out, "- {}", cell(w))?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// Every finding on one line, linked to its details.
fn write_overview(out: &mut String, report: &Report) -> std::fmt::Result {
    let rows = super::overview::rows(&report.findings);
    let checklist = super::overview::checklist_count(report);
    if rows.is_empty() && checklist.is_none() {
        return Ok(());
    }
    writeln!(out, "## Overview")?;
    writeln!(out)?;
    if let Some(line) = checklist {
        // The table, when any, follows; the count says where the rest is.
        writeln!(out, "{line}")?;
        writeln!(out)?;
    }
    if rows.is_empty() {
        return Ok(());
    }
    writeln!(out, "| # | Severity | Score | Finding | Key number |")?;
    writeln!(out, "|---:|---|---:|---|---|")?;
    for r in rows {
        writeln!(
            out,
            "| {} | {} | {:.2} | [{}](#{}) | {} |",
            r.rank,
            r.severity,
            r.score,
            cell(r.title),
            r.anchor,
            cell(r.key.as_deref().unwrap_or("-"))
        )?;
    }
    writeln!(out)?;
    Ok(())
}

fn write_finding(out: &mut String, f: &Finding) -> std::fmt::Result {
    writeln!(out, "### {}", super::overview::heading(f))?;
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
    for w in &f.mongod_warns {
        writeln!(out, "mongod warns about this at startup too: {}", cell(w))?;
        writeln!(out)?;
    }
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
    writeln!(out, "{}", confidence_line(f))?;
    writeln!(out)?;
    for line in missing_lines(f) {
        writeln!(out, "{line}")?;
        writeln!(out)?;
    }
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
    for file in &f.fix.files {
        writeln!(out, "In `{}` ({}):", file.path, file.how)?;
        writeln!(out)?;
        let fence = fence_for(std::slice::from_ref(&file.content));
        writeln!(out, "{fence}{}", file.language.as_deref().unwrap_or(""))?;
        writeln!(out, "{}", file.content.trim_end())?;
        writeln!(out, "{fence}")?;
        writeln!(out)?;
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
        let report = explain(&rec, &crate::rules::testdata::sched_rule_only(), None, None).unwrap();
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
    fn markdown_measurements_are_tables() {
        let rec = crate::family::softirq::testdata::net_rx_on_cpu0();
        let report = explain(&rec, &RuleSet::builtin().unwrap(), None, None).unwrap();
        let md = render(&report);
        let start = md.find("## Measurements\n").expect("section present");
        let end = md.find("## Probes\n").unwrap();
        assert!(start < end);
        let section = &md[start..end];
        for expected in [
            "### Scheduler\n\nObserved: the target's threads, 10.0 s.\n",
            "| Measurement | Value |\n|---|---:|\n| Context switches per second (all CPUs) | 1500 |\n",
            "| Switches of observed threads per second | 720 |\n",
            "| Involuntary switches per second | 650 |\n",
            "| Involuntary share of observed switches | 90.3% |\n",
            "| Run-queue delay | p50 3146 µs, p90 6576 µs, p99 8329 µs |\n",
            "| Thread class | Threads | Involuntary/s | Involuntary % | Mean run-queue delay (µs) |\n\
             |---|---:|---:|---:|---:|\n\
             | conn | 4 | 650.0 | 90.3 | 3000 |\n",
            "### Softirq\n\nHost-wide, 4 CPUs, 10.0 s.",
            "| CPU | NET_RX | NET_TX | TIMER | RCU | SCHED | BLOCK | all | % CPU |\n\
             |---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            "| 1 | 20.0 | 2.0 | 1.0 | 0.4 | 1.2 | 0.0 | 24.6 | 2.5 |\n",
            "| 3 | 10.0 | 2.0 | 1.0 | 0.6 | 0.8 | 0.0 | 14.4 | 1.4 |\n",
            "| **all CPUs** | 350.0 | 8.0 | 4.0 | 2.0 | 4.8 | 0.0 | 368.9 | 9.2 |\n",
            "| entries/s | 48000 | 2000 | 4000 | 1000 | 2400 | 0 | 57410 | |\n",
            "- NET_RX imbalance 3.43 (busiest CPU / mean; 1.00 = even, 4 = all on one CPU): \
             CPU 0 has 85.7% of NET_RX time, and NET_RX takes 30.0% of that CPU.\n",
            "- Busiest CPU in softirqs: CPU 0, 30.5% of its time (mean over 4 CPUs 9.2%).\n",
            "- Hard IRQs: 22505/s, 45.0 ms/s.\n",
            "- 3 events lost (3 exits without entry,",
            "| IRQ | Name | Per second | ms/s | Busiest CPU |\n\
             |---:|---|---:|---:|---:|\n\
             | 45 | eth0-TxRx-0 | 20000 | 40.0 | 0 |\n\
             | 46 | eth0-TxRx-1 | 2000 | 4.0 | 1 |\n\
             | 24 | nvme0q1 | 500 | 1.0 | 2 |\n\n",
            "RPS off, RFS on (rps_sock_flow_entries 32768); \
             rx queues: eth0 4 (RPS 0, RFS 4), eth1 2 (RPS 0, RFS 0).\n",
        ] {
            assert!(
                section.contains(expected),
                "missing {expected:?} in:\n{section}"
            );
        }
        assert!(!section.contains("Not measured"), "{section}");
    }

    #[test]
    fn markdown_lists_families_not_measured() {
        let report = explain(
            &testdata::oversubscribed(),
            &RuleSet::builtin().unwrap(),
            None,
            None,
        )
        .unwrap();
        let md = render(&report);
        assert!(md.contains("### Scheduler\n"), "{md}");
        assert!(!md.contains("### Softirq\n"), "{md}");
        assert!(
            md.contains(
                "RPS/RFS: not readable when recording.\n\nNot measured:\n\n\
                 - `softirq`: the softirq probe was not part of this recording\n"
            ),
            "{md}"
        );
    }

    #[test]
    fn cells_and_fences_are_escaped() {
        assert_eq!(cell("a|b\nc"), "a\\|b c");
        assert_eq!(code("x`y"), "`` x`y ``");
        assert_eq!(fence_for(&["echo ```".into()]), "````");
        assert_eq!(fence_for(&["echo".into()]), "```");
    }
}
