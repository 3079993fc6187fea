//! The Prometheus alerting rules of `packaging/prometheus/`, checked by
//! Prometheus's own `promtool` (Debian's prometheus package, installed by
//! `cargo xtask setup`), no root needed:
//!
//! - `promtool check rules` accepts the rules file, the rules the binary
//!   prints (`mdiag alerts`, links moved with `--docs-url`) and the rules
//!   inside the `PrometheusRule` manifest;
//! - `promtool test rules` passes `packaging/prometheus/tests/`, which has
//!   for every alert a case where it fires and one where it does not, and
//!   fails on a rules file whose expressions were changed (so the tests
//!   hold the expressions, not just their syntax);
//! - the Helm chart's PrometheusRule (`helm template` with the rules file
//!   as values, helm as in `packaging.rs`) links where `mdiag alerts` does,
//!   by default and under `prometheusRule.docsUrl`, each link to a page of
//!   `docs/` (the check of `support/runbook_links.rs`); a docsUrl that is no
//!   URL fails to render.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers: a failure is the test failing"
)]

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

#[path = "support/helm.rs"]
mod helm;
#[path = "support/runbook_links.rs"]
mod runbook_links;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rules_file() -> PathBuf {
    repo().join("packaging/prometheus/mdiag-alerts.yaml")
}

fn test_file() -> PathBuf {
    repo().join("packaging/prometheus/tests/mdiag-alerts.test.yaml")
}

fn promtool(args: &[&std::ffi::OsStr]) -> Output {
    let bin = std::env::var_os("MDIAG_PROMTOOL").unwrap_or_else(|| "/usr/bin/promtool".into());
    Command::new(&bin).args(args).output().unwrap_or_else(|e| {
        panic!(
            "run {}: {e} (install Debian's prometheus package: cargo xtask setup)",
            bin.to_string_lossy()
        )
    })
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The alert names of a rules text.
fn alert_names(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .map(str::to_owned)
        .collect()
}

/// `promtool check rules` on `text`: the number of rules it found.
fn check_rules(text: &str) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.yaml");
    std::fs::write(&path, text).unwrap();
    let out = promtool(&["check".as_ref(), "rules".as_ref(), path.as_os_str()]);
    let said = said(&out);
    assert!(
        out.status.success(),
        "promtool check rules:\n{said}\n{text}"
    );
    said.split("SUCCESS: ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no rule count in: {said}"))
}

fn mdiag(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_mdiag"))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "mdiag {args:?}: {}", said(&out));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn promtool_accepts_the_rules_in_every_form() {
    let text = std::fs::read_to_string(rules_file()).unwrap();
    let alerts = alert_names(&text);
    assert!(alerts.len() >= 13, "{alerts:?}");
    assert_eq!(check_rules(&text), alerts.len());

    // As printed by the binary, links moved elsewhere.
    let moved = mdiag(&["alerts", "--docs-url", "https://docs.example.org/mdiag"]);
    assert_eq!(check_rules(&moved), alerts.len());
    assert!(moved.contains("https://docs.example.org/mdiag/rules/{{ $labels.rule }}.md"));

    // The manifest's spec, de-indented, is a rules file.
    let manifest = mdiag(&["alerts", "--format", "prometheus-rule"]);
    assert!(manifest.contains("kind: PrometheusRule\n"), "{manifest}");
    let spec: String = manifest
        .split("\nspec:\n")
        .nth(1)
        .unwrap()
        .lines()
        .map(|l| format!("{}\n", l.strip_prefix("  ").unwrap_or(l)))
        .collect();
    assert_eq!(check_rules(&spec), alerts.len());
    assert_eq!(alert_names(&spec), alerts);
}

#[test]
fn a_docs_url_that_is_no_url_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_mdiag"))
        .args(["alerts", "--docs-url", "docs.example.org/mdiag"])
        .output()
        .unwrap();
    let said = said(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("--docs-url") && said.contains("not an absolute URL"),
        "{said}"
    );
    assert!(out.stdout.is_empty(), "{said}");
}

/// Each alert's cases in the test file: (fires somewhere, silent somewhere).
fn cases(test_text: &str) -> std::collections::BTreeMap<String, (bool, bool)> {
    let mut cases = std::collections::BTreeMap::new();
    let lines: Vec<&str> = test_text.lines().map(str::trim).collect();
    for (i, l) in lines.iter().enumerate() {
        if let Some(name) = l.strip_prefix("alertname: ") {
            let next = lines.get(i + 1).copied().unwrap_or_default();
            let entry = cases.entry(name.to_owned()).or_insert((false, false));
            match next {
                "exp_alerts: []" => entry.1 = true,
                "exp_alerts:" => entry.0 = true,
                other => panic!("{name}: {other}"),
            }
        }
    }
    cases
}

#[test]
fn promtool_unit_tests_cover_every_alert_firing_and_not() {
    let out = promtool(&["test".as_ref(), "rules".as_ref(), test_file().as_os_str()]);
    assert!(out.status.success(), "promtool test rules:\n{}", said(&out));
    let rules = std::fs::read_to_string(rules_file()).unwrap();
    let cases = cases(&std::fs::read_to_string(test_file()).unwrap());
    for alert in alert_names(&rules) {
        let (fires, silent) = cases.get(&alert).copied().unwrap_or_default();
        assert!(
            fires && silent,
            "{alert}: a case where it fires {fires}, where it does not {silent}"
        );
    }
}

/// The unit tests fail on rules that say something else: each change
/// below is caught.
#[test]
fn promtool_unit_tests_catch_changed_expressions() {
    let rules = std::fs::read_to_string(rules_file()).unwrap();
    let tests = std::fs::read_to_string(test_file()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("tests")).unwrap();
    let copy = dir.path().join("tests/mdiag-alerts.test.yaml");
    std::fs::write(&copy, tests).unwrap();
    let changes = [
        // A pending finding would alert.
        (
            r#"state="firing", severity="high""#,
            r#"state=~"firing|pending", severity="high""#,
        ),
        // A family with nothing to probe, or left out by choice, would alert.
        (
            r#"reason!~"attached|not_applicable|left_out""#,
            r#"reason!="attached""#,
        ),
        // A family left out by choice would alert.
        (
            r#"reason!~"attached|not_applicable|left_out""#,
            r#"reason!~"attached|not_applicable""#,
        ),
        // Any exporter's restarts would count.
        (
            "changes(process_start_time_seconds[30m]) >= 2 and on (job, instance) mdiag_build_info",
            "changes(process_start_time_seconds[30m]) >= 2",
        ),
        // Any target down would be an agent down.
        (
            "max_over_time(mdiag_build_info[1d]) == 1",
            "max_over_time(up[1d]) == 1",
        ),
        // A spool that fills and drains each window would alert.
        ("min_over_time(mdiag_fleet_spool_records[30m]) > 0 and ", ""),
        // A past burst of drops would keep alerting.
        (
            "rate(mdiag_probe_drops_total[5m])",
            "increase(mdiag_probe_drops_total[1h])",
        ),
    ];
    for (from, to) in changes {
        assert!(rules.contains(from), "the rules no longer say {from}");
        std::fs::write(
            dir.path().join("mdiag-alerts.yaml"),
            rules.replacen(from, to, 1),
        )
        .unwrap();
        let out = promtool(&["test".as_ref(), "rules".as_ref(), copy.as_os_str()]);
        assert!(
            !out.status.success(),
            "the tests pass with {from:?} → {to:?}"
        );
    }
}

/// The `runbook_url` of each alert of a rules file's groups (parsed, so
/// that the findings' shared annotations count once per alert), in order.
fn alert_links(groups: &serde_json::Value) -> Vec<String> {
    let mut links = Vec::new();
    for group in groups.as_array().unwrap() {
        for rule in group["rules"].as_array().unwrap() {
            let link = rule["annotations"]["runbook_url"].as_str();
            links.push(
                link.unwrap_or_else(|| panic!("no runbook_url: {rule}"))
                    .to_owned(),
            );
        }
    }
    links
}

/// The YAML documents of `text` as JSON values.
fn yaml_docs(text: &str) -> Vec<serde_json::Value> {
    serde_norway::Deserializer::from_str(text)
        .map(|doc| <serde_json::Value as serde::Deserialize>::deserialize(doc).unwrap())
        .collect()
}

/// The links of the PrometheusRule `helm template` renders with the rules
/// file as values and `args`.
fn helm_links(args: &[&str]) -> Vec<String> {
    let rules = rules_file();
    let mut all = vec![
        "-f",
        rules.to_str().unwrap(),
        "--set",
        "prometheusRule.enabled=true",
    ];
    all.extend(args);
    let (ok, yaml) = helm::template(&all);
    assert!(ok, "helm template {all:?}: {yaml}");
    let docs = yaml_docs(&yaml);
    let rule = docs.iter().find(|d| d["kind"] == "PrometheusRule");
    alert_links(&rule.unwrap_or_else(|| panic!("no PrometheusRule: {yaml}"))["spec"]["groups"])
}

/// The links of `mdiag alerts`' rules under `docs_url`, one per alert.
fn cli_links(docs_url: &str) -> Vec<String> {
    let text = mdiag::alerts::rules(docs_url);
    alert_links(&yaml_docs(&text)[0]["groups"])
}

/// Each of `links` is under `docs_url` and names a page of `docs/`.
fn assert_pages_exist(links: &[String], docs_url: &str) {
    let ids: Vec<String> = mdiag::rules::RuleSet::builtin()
        .unwrap()
        .rules()
        .iter()
        .map(|r| r.id().to_owned())
        .collect();
    let docs = repo().join("docs");
    for link in links {
        let page = link
            .strip_prefix(&format!("{docs_url}/"))
            .unwrap_or_else(|| panic!("{link} is not under {docs_url}"));
        let problems = runbook_links::problems(page, &docs, &ids);
        assert!(problems.is_empty(), "{link}: {problems:?}");
    }
}

#[test]
fn the_helm_chart_s_rules_link_to_pages_that_exist() {
    use mdiag::alerts::{DEFAULT_DOCS_URL, RULES};
    let alerts = alert_names(RULES).len();
    // By default, the links of the rules file: the project's docs.
    let given = helm_links(&[]);
    assert_eq!(given.len(), alerts, "{given:?}");
    assert_eq!(given, cli_links(DEFAULT_DOCS_URL));
    assert_pages_exist(&given, DEFAULT_DOCS_URL);
    // Under prometheusRule.docsUrl, where `mdiag alerts --docs-url` puts them.
    let url = "https://docs.example.org/mdiag";
    let moved = helm_links(&["--set", &format!("prometheusRule.docsUrl={url}/")]);
    assert_eq!(moved.len(), alerts, "{moved:?}");
    assert_eq!(moved, cli_links(url));
    assert_pages_exist(&moved, url);
    // A docsUrl that is no URL is refused.
    let rules_path = rules_file();
    let (ok, said) = helm::template(&[
        "-f",
        rules_path.to_str().unwrap(),
        "--set",
        "prometheusRule.enabled=true,prometheusRule.docsUrl=docs.example.org",
    ]);
    assert!(
        !ok && said.contains("prometheusRule.docsUrl \"docs.example.org\" is not the absolute URL"),
        "{said}"
    );
}
