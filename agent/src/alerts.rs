//! The Prometheus alerting rules of `packaging/prometheus/`: one source,
//! `mdiag-alerts.yaml` (a `rule_files:` file, tested by `promtool test
//! rules`), embedded here; the Prometheus Operator's `PrometheusRule`
//! manifest (`mdiag-prometheusrule.yaml`) is made from it, so the two
//! cannot differ (a unit test compares the committed manifest with what
//! [`prometheus_rule`] makes). `mdiag alerts` prints either, with the
//! runbook links pointed at another copy of the docs when asked.

/// The rules file as committed.
pub const RULES: &str = include_str!("../../packaging/prometheus/mdiag-alerts.yaml");

/// Where the committed files link: the docs as the package installs them
/// (`<base>/rules/<id>.md`, `<base>/agent.md#alerts`).
pub const DEFAULT_DOCS_URL: &str = "file:///usr/share/doc/mdiag";

/// The manifest's path in the repository.
pub const MANIFEST: &str = "packaging/prometheus/mdiag-prometheusrule.yaml";

/// The rules file with its links under `docs_url` (no trailing slash).
pub fn rules(docs_url: &str) -> String {
    let base = docs_url.trim_end_matches('/');
    RULES.replace(&format!("'{DEFAULT_DOCS_URL}/"), &format!("'{base}/"))
}

/// The same rules as a `PrometheusRule` of the Prometheus Operator (in the
/// namespace and with the labels of `packaging/kubernetes/`).
pub fn prometheus_rule(docs_url: &str) -> String {
    let text = rules(docs_url);
    // The file's own header comment is about the file; the manifest has its own.
    let body = text
        .find("\ngroups:")
        .map_or(text.as_str(), |at| &text[at + 1..]);
    let mut out = String::from(
        "# The alerting rules of mdiag-alerts.yaml for the Prometheus Operator.\n\
         # Made by `mdiag alerts --format prometheus-rule`: edit mdiag-alerts.yaml\n\
         # and run it again, not this file (a test compares them).\n\
         apiVersion: monitoring.coreos.com/v1\n\
         kind: PrometheusRule\n\
         metadata:\n  name: mdiag-agent\n  namespace: mdiag\n  labels:\n    app.kubernetes.io/name: mdiag-agent\n\
         spec:\n",
    );
    for line in body.lines() {
        if !line.is_empty() {
            out.push_str("  ");
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_file(path: &str) -> String {
        let p = format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    #[test]
    fn the_committed_manifest_is_made_from_the_rules_file() {
        assert_eq!(
            repo_file(MANIFEST),
            prometheus_rule(DEFAULT_DOCS_URL),
            "{MANIFEST} is stale: cargo run -p mdiag -- alerts --format prometheus-rule > {MANIFEST}"
        );
    }

    #[test]
    fn the_manifest_holds_every_alert_under_spec() {
        let m = prometheus_rule(DEFAULT_DOCS_URL);
        let alerts = RULES.matches("- alert: ").count();
        assert!(alerts >= 10, "{alerts}");
        assert_eq!(m.matches("\n        - alert: ").count(), alerts, "{m}");
        assert!(
            m.contains("\nspec:\n  groups:\n    - name: mdiag-findings\n"),
            "{m}"
        );
        assert!(!m.contains("rule_files"), "{m}");
    }

    #[test]
    fn links_move_to_another_docs_url() {
        let r = rules("https://docs.example.com/mdiag/");
        assert!(!r.contains(DEFAULT_DOCS_URL), "{r}");
        assert!(
            r.contains("runbook_url: 'https://docs.example.com/mdiag/rules/{{ $labels.rule }}.md'")
        );
        assert!(r.contains("runbook_url: 'https://docs.example.com/mdiag/agent.md#alerts'"));
        assert_eq!(
            r.matches("runbook_url").count(),
            RULES.matches("runbook_url").count()
        );
        assert_eq!(rules(DEFAULT_DOCS_URL), RULES);
    }

    /// Every alert links to a page that exists: a finding's to its rule's
    /// runbook (each rule has one, `runbook.rs`), the others to the
    /// "Alerts" section of docs/agent.md, which names each of them.
    #[test]
    fn every_alert_links_to_a_page_that_exists() {
        let agent_md = repo_file("docs/agent.md");
        let section = agent_md
            .split("\n## Alerts\n")
            .nth(1)
            .expect("docs/agent.md has an ## Alerts section");
        let section = section.split("\n## ").next().unwrap_or_default();
        let mut links = RULES
            .lines()
            .filter_map(|l| l.trim().strip_prefix("runbook_url: "));
        let rule_page = format!("'{DEFAULT_DOCS_URL}/rules/{{{{ $labels.rule }}}}.md'");
        let agent_page = format!("'{DEFAULT_DOCS_URL}/agent.md#alerts'");
        assert!(links.all(|l| l == rule_page || l == agent_page));
        for name in RULES
            .lines()
            .filter_map(|l| l.trim().strip_prefix("- alert: "))
            .filter(|n| !n.starts_with("MdiagFinding"))
        {
            assert!(
                section.contains(&format!("`{name}`")),
                "docs/agent.md ## Alerts lacks {name}"
            );
        }
    }
}
