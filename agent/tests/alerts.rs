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
//!   hold the expressions, not just their syntax).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers: a failure is the test failing"
)]

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

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
