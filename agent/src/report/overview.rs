//! The report's overview: every finding on one line (rank, severity,
//! score, title, the one number that fired it, a link to its details),
//! shown before anything else in every format.
//!
//! Why: a real mongod's report has several findings, each with an evidence
//! table, a fix, a unit file, its risk, verify and revert; a reader scrolled
//! several screens before seeing the second finding or a chart. The
//! overview says in a few lines what the report found, the details follow.

use crate::findings::{EvidenceValue, Finding, Severity};

/// One finding in the overview.
#[derive(Debug, Clone, PartialEq)]
pub struct Row<'a> {
    pub rank: usize,
    pub severity: Severity,
    pub score: f64,
    pub title: &'a str,
    /// The first number of its evidence, "label: value" (`None` when its
    /// evidence holds no number).
    pub key: Option<String>,
    /// The anchor of its details in the Markdown and HTML reports.
    pub anchor: String,
}

/// The overview of `findings`, in rank order.
pub fn rows(findings: &[Finding]) -> Vec<Row<'_>> {
    findings
        .iter()
        .map(|f| Row {
            rank: f.rank,
            severity: f.severity,
            score: f.score,
            title: &f.title,
            key: key_number(f),
            anchor: anchor(&heading(f)),
        })
        .collect()
}

/// The overview's line for the checklist: "checklist: 8 settings differ
/// from MongoDB's production notes (listed after the findings)"; `None`
/// when none does.
pub fn checklist_count(report: &super::Report) -> Option<String> {
    match report.checklist.len() {
        0 => None,
        1 => Some(
            "checklist: 1 setting differs from MongoDB's production notes (listed after the findings)"
                .to_owned(),
        ),
        n => Some(format!(
            "checklist: {n} settings differ from MongoDB's production notes (listed after the findings)"
        )),
    }
}

/// The page of rule `id` on the web (its runbook, with the fix, verify and
/// revert), where a checklist item's fix is.
pub fn rule_page(id: &str) -> String {
    format!("{}/rules/{id}.md", crate::alerts::DEFAULT_DOCS_URL)
}

/// The heading of a finding's details in the Markdown and HTML reports.
pub fn heading(f: &Finding) -> String {
    format!("{}. {} ({})", f.rank, f.title, f.severity)
}

/// The first numeric item of the finding's evidence, "label: value": the
/// measurement its rule's condition is about (rules list the figure that
/// fires them before the context around it).
fn key_number(f: &Finding) -> Option<String> {
    f.evidence
        .iter()
        .find(|e| matches!(e.value, EvidenceValue::Int(_) | EvidenceValue::Float(_)))
        .map(|e| format!("{}: {}", e.label, e.value))
}

/// The anchor a heading gets: GitHub's rule (lower case; letters, digits,
/// `-` and `_` kept, spaces to `-`, the rest dropped), which the HTML
/// report gives its headings too, so one link works in both.
pub fn anchor(heading: &str) -> String {
    heading
        .chars()
        .flat_map(char::to_lowercase)
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_follow_githubs_rule() {
        assert_eq!(
            anchor("1. CPUs saturated: the target's threads wait (high)"),
            "1-cpus-saturated-the-targets-threads-wait-high"
        );
        assert_eq!(
            anchor("2. RPS/RFS off — NET_RX on CPU 0"),
            "2-rpsrfs-off--net_rx-on-cpu-0"
        );
    }

    #[test]
    fn every_finding_has_a_row_with_its_first_number() {
        let report = crate::explain::explain(
            &crate::rules::testdata::oversubscribed(),
            &crate::rules::RuleSet::builtin().unwrap(),
            None,
            None,
        )
        .unwrap();
        let rows = rows(&report.findings);
        assert_eq!(rows.len(), report.findings.len());
        assert!(!rows.is_empty());
        for (row, f) in rows.iter().zip(&report.findings) {
            assert_eq!((row.rank, row.title), (f.rank, f.title.as_str()));
            if let Some(key) = &row.key {
                let first = f
                    .evidence
                    .iter()
                    .find(|e| key.starts_with(&format!("{}: ", e.label)))
                    .expect("the key is an evidence item");
                assert!(!matches!(first.value, EvidenceValue::Text(_)), "{key}");
            }
        }
        assert!(rows.iter().any(|r| r.key.is_some()));
    }
}
