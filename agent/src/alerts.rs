//! The Prometheus alerting rules of `packaging/prometheus/`: one source,
//! `mdiag-alerts.yaml` (a `rule_files:` file, tested by `promtool test
//! rules`), embedded here; the Prometheus Operator's `PrometheusRule`
//! manifest (`mdiag-prometheusrule.yaml`) is made from it, so the two
//! cannot differ (a unit test compares the committed manifest with what
//! [`prometheus_rule`] makes). `mdiag alerts` prints either.
//!
//! Each alert's `runbook_url` is one of [`PAGES`] under a docs URL: by
//! default the project's docs on the web ([`DEFAULT_DOCS_URL`], from the
//! workspace's `repository`), which an on-call engineer can open from
//! Alertmanager, Slack or PagerDuty wherever the agent runs; a team that
//! serves its own copy moves them (`mdiag alerts --docs-url URL`, the Helm
//! chart's `prometheusRule.docsUrl`). The links are rewritten by their page,
//! not by the URL the committed file holds, so that a change of the
//! repository's address is regenerated like any other.

/// The rules file as committed.
pub const RULES: &str = include_str!("../../packaging/prometheus/mdiag-alerts.yaml");

/// Where the alerts link by default: the `docs/` directory of the project's
/// repository on the web (`[workspace.package] repository` in the root
/// `Cargo.toml`, the one place the address is written), as the forge shows
/// it on the default branch. The committed files link here.
pub const DEFAULT_DOCS_URL: &str = concat!(env!("CARGO_PKG_REPOSITORY"), "/blob/main/docs");

/// A finding's alert links to its rule's runbook, `docs/rules/<id>.md`
/// (made from the rule file, `runbook.rs`); Prometheus fills in the rule.
pub const RULE_PAGE: &str = "rules/{{ $labels.rule }}.md";

/// The agent's own alerts link to the "Alerts" section of `docs/agent.md`.
pub const AGENT_PAGE: &str = "agent.md#alerts";

/// Every page the alerts link to, relative to the docs URL.
pub const PAGES: [&str; 2] = [RULE_PAGE, AGENT_PAGE];

/// The manifest's path in the repository.
pub const MANIFEST: &str = "packaging/prometheus/mdiag-prometheusrule.yaml";

/// The page of [`PAGES`] a runbook link names (whatever docs URL it is
/// under), if any.
pub fn page_of(link: &str) -> Option<&'static str> {
    PAGES.into_iter().find(|page| {
        link.strip_suffix(page)
            .is_some_and(|base| base.ends_with('/'))
    })
}

/// The `runbook_url` values of a rules file or manifest, in order.
pub fn links(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("runbook_url: "))
        .map(|v| v.trim_matches('\''))
}

/// The rules file with every link to one of [`PAGES`] under `docs_url`
/// (a trailing slash is dropped). `docs_url` holds no `'`: the command line
/// checks it (`cli_parse::parse_docs_url`).
pub fn rules(docs_url: &str) -> String {
    let base = docs_url.trim_end_matches('/');
    let mut out = String::with_capacity(RULES.len());
    for line in RULES.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let page = trimmed
            .strip_prefix("runbook_url: ")
            .and_then(|v| page_of(v.trim_end().trim_matches('\'')));
        match page {
            Some(page) => {
                out.push_str(&line[..line.len() - trimmed.len()]);
                for part in ["runbook_url: '", base, "/", page, "'"] {
                    out.push_str(part);
                }
                if line.ends_with('\n') {
                    out.push('\n');
                }
            }
            None => out.push_str(line),
        }
    }
    out
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
#[path = "../tests/support/runbook_links.rs"]
mod runbook_links;

#[cfg(test)]
mod tests {
    use super::*;

    fn repo_file(path: &str) -> String {
        let p = format!("{}/../{path}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    fn rule_ids() -> Vec<String> {
        let rules = crate::rules::RuleSet::builtin().unwrap();
        rules.rules().iter().map(|r| r.id().to_owned()).collect()
    }

    #[test]
    fn the_committed_manifest_is_made_from_the_rules_file() {
        assert_eq!(
            repo_file(MANIFEST),
            prometheus_rule(DEFAULT_DOCS_URL),
            "{MANIFEST} is stale: cargo run -p mdiag -- alerts --format prometheus-rule > {MANIFEST}"
        );
    }

    /// The committed rules link to the default docs URL, which is on the
    /// web: a link Alertmanager, Slack or PagerDuty can open.
    #[test]
    fn the_committed_rules_link_to_the_docs_on_the_web() {
        assert!(
            DEFAULT_DOCS_URL.starts_with("https://") && DEFAULT_DOCS_URL.ends_with("/docs"),
            "{DEFAULT_DOCS_URL}"
        );
        assert_eq!(
            rules(DEFAULT_DOCS_URL),
            RULES,
            "packaging/prometheus/mdiag-alerts.yaml links elsewhere than {DEFAULT_DOCS_URL}: \
             cargo run -p mdiag -- alerts > packaging/prometheus/mdiag-alerts.yaml"
        );
        // The findings' alerts share one set of annotations (a YAML anchor).
        assert!(links(RULES).count() >= 9, "{RULES}");
        assert!(
            links(RULES).all(|l| l.starts_with(&format!("{DEFAULT_DOCS_URL}/"))),
            "{RULES}"
        );
    }

    /// promtool's test file expects the committed links (`exp_annotations`).
    #[test]
    fn the_promtool_tests_expect_the_committed_links() {
        let path = "packaging/prometheus/tests/mdiag-alerts.test.yaml";
        let tests = repo_file(path);
        let expected: Vec<&str> = links(&tests).collect();
        assert!(expected.len() >= 13, "{path}: {expected:?}");
        for link in expected {
            let page = link.strip_prefix(&format!("{DEFAULT_DOCS_URL}/"));
            assert!(
                page.is_some_and(|p| p == AGENT_PAGE
                    || p.strip_prefix("rules/").is_some_and(|p| p.ends_with(".md"))),
                "{path} expects {link}, not a page under {DEFAULT_DOCS_URL}"
            );
        }
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
        // Only the links changed, each to the same page.
        assert_eq!(r.lines().count(), RULES.lines().count());
        let pages = |text: &str| links(text).map(page_of).collect::<Vec<_>>();
        assert_eq!(pages(&r), pages(RULES));
        assert!(pages(RULES).iter().all(Option::is_some));
        // And back.
        let m = prometheus_rule("https://docs.example.com/mdiag");
        assert!(
            m.contains("'https://docs.example.com/mdiag/agent.md#alerts'"),
            "{m}"
        );
        assert_eq!(
            RULES.replace(DEFAULT_DOCS_URL, "https://docs.example.com/mdiag"),
            r
        );
    }

    #[test]
    fn a_link_names_a_page_only_at_a_path_boundary() {
        assert_eq!(page_of("https://x/docs/agent.md#alerts"), Some(AGENT_PAGE));
        assert_eq!(
            page_of("file:///d/rules/{{ $labels.rule }}.md"),
            Some(RULE_PAGE)
        );
        assert_eq!(page_of("https://x/docs/my-agent.md#alerts"), None);
        assert_eq!(page_of("https://x/docs/rules/host.swap.md"), None);
        assert_eq!(page_of(AGENT_PAGE), None);
    }

    /// Every link resolves to a page the project ships: the part after the
    /// docs URL is a file of `docs/` (a rule page for every built-in rule),
    /// an anchor one of its headings; and the "Alerts" section of
    /// docs/agent.md names each of the agent's own alerts.
    #[test]
    fn every_alert_links_to_a_page_that_exists() {
        let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
        let ids = rule_ids();
        for text in [rules(DEFAULT_DOCS_URL), prometheus_rule(DEFAULT_DOCS_URL)] {
            let mut pages = std::collections::BTreeSet::new();
            for link in links(&text) {
                let page = link
                    .strip_prefix(&format!("{DEFAULT_DOCS_URL}/"))
                    .unwrap_or_else(|| panic!("{link} is not under {DEFAULT_DOCS_URL}"));
                let problems = runbook_links::problems(page, &docs, &ids);
                assert!(problems.is_empty(), "{link}: {problems:?}");
                pages.insert(page);
            }
            assert_eq!(pages, PAGES.into(), "the alerts link to every page");
        }
        let agent_md = repo_file("docs/agent.md");
        let section = agent_md
            .split("\n## Alerts\n")
            .nth(1)
            .expect("docs/agent.md has an ## Alerts section");
        let section = section.split("\n## ").next().unwrap_or_default();
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

    /// The check fails where it should: a rule without a page, a missing
    /// file, a missing heading.
    #[test]
    fn the_link_check_finds_missing_pages_and_headings() {
        let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
        let mut ids = rule_ids();
        assert!(runbook_links::problems(RULE_PAGE, &docs, &ids).is_empty());
        ids.push("no.such_rule".into());
        let p = runbook_links::problems(RULE_PAGE, &docs, &ids);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("rules/no.such_rule.md"), "{p:?}");
        assert!(!runbook_links::problems(RULE_PAGE, &docs, &[]).is_empty());
        assert!(!runbook_links::problems("nowhere.md", &docs, &ids).is_empty());
        let p = runbook_links::problems("agent.md#no-such-heading", &docs, &ids);
        assert!(p[0].contains("no-such-heading"), "{p:?}");
        assert!(runbook_links::problems("agent.md#alerts", &docs, &ids).is_empty());
    }

    #[test]
    fn heading_anchors_are_github_s() {
        let md = "# `mdiag`: the agent\n\n## Alerts\n\ntext\n\n## /metrics off loopback: TLS and basic auth\n\n## Alerts\n";
        let a = runbook_links::anchors(md);
        for want in [
            "mdiag-the-agent",
            "alerts",
            "alerts-1",
            "metrics-off-loopback-tls-and-basic-auth",
        ] {
            assert!(a.contains(want), "{want}: {a:?}");
        }
        assert_eq!(a.len(), 4, "{a:?}");
    }
}
