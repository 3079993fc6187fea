//! The Grafana dashboards of `packaging/grafana/` against a real Prometheus
//! (Debian's 2.42) scraping a real agent every second: every query of every
//! panel, template variables substituted as Grafana would, returns at least
//! one series. The agent watches a WiredTiger workload whose threads are
//! named like mongod's (connN, Checkpointer), so the per-target families
//! (scheduler, checkpoints, connection futex waits, allocator probes) have
//! series; the template variables' selectors return series too; and a
//! planted host problem (tcp_keepalive_time at the kernel's
//! default) fires a finding, so the fleet's finding panels have one; the
//! agent writes to a fleet store (the real mongod as a single-node replica
//! set), so its delivery panels have series. The same Prometheus evaluates
//! the alerting rules of `packaging/prometheus/mdiag-alerts.yaml`: the
//! planted finding (a low-severity rule) raises `MdiagFindingLow` with its
//! labels, and none of the agent's own alerts fires.

use std::{
    io::Write,
    process::Command,
    time::{Duration, Instant},
};

use mdiag_tests::{
    agent::Agent,
    dashboards::{Query, queries, substitute, variable_queries},
    prometheus::Prometheus,
    require_root,
};

use crate::agent::{Keepalive, config, rules_dir};

/// How long a query that returns nothing yet is retried: a per-window gauge
/// (connection futex ratio, allocator cost) needs its first window with
/// data, a rate two scrapes.
const DATA_WITHIN: Duration = Duration::from_secs(120);

#[test]
fn every_dashboard_query_returns_series_from_a_real_agent() {
    let _serial = mdiag_tests::serial();
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let rules = rules_dir(dir.path());
    // The planted keepalive is a checklist item (mdiag_checklist_item); the
    // same condition as a finding fills the panels of mdiag_finding_state
    // and the alerts that read it.
    let keepalive = std::fs::read_to_string(rules.join("host-tcp-keepalive.toml")).unwrap();
    let checklist = "[checklist]\nsetting = \"net.ipv4.tcp_keepalive_time\"\n\
                     value = \"net.ipv4.tcp_keepalive_time (s)\"\nnotes = \"120 s (FAQ: keepalive)\"\n";
    let finding = keepalive
        .replacen(
            "id = \"host.tcp_keepalive\"",
            "id = \"test.keepalive_finding\"",
            1,
        )
        .replacen("class = \"checklist\"", "class = \"finding\"", 1)
        .replacen(checklist, "", 1);
    assert!(
        finding.contains("class = \"finding\"") && !finding.contains("[checklist]"),
        "host-tcp-keepalive.toml changed shape: {finding}"
    );
    std::fs::write(rules.join("test-keepalive-finding.toml"), finding).unwrap();
    let cfg = config(dir.path(), "\"mdiag-wtcheckpo\"");
    // Allocator windows every 500 ms (50 ms at a 10 % budget), so their
    // gauges come soon; a series limit no test exposition reaches.
    // A fleet store (a real MongoDB-wire server), so the agent-health
    // dashboard's fleet panels have the agent's delivery series.
    let store = crate::fleet::store(true);
    let mut text = std::fs::read_to_string(&cfg).unwrap().replacen(
        "[agent.lifecycle]",
        "alloc_budget = 0.1\nalloc_window = \"50ms\"\nmax_series = 5000\n[agent.lifecycle]",
        1,
    );
    text.push_str(&format!(
        "[fleet]\nuri = \"{}\"\nhost = \"dashboards\"\n",
        store.uri()
    ));
    std::fs::write(&cfg, text).unwrap();
    let _planted = Keepalive::set(7200);

    // Writers keep WiredTiger's cache dirty (checkpoints of tens of ms),
    // one checkpoint every 100 ms for minutes.
    let home = tempfile::tempdir().unwrap();
    let (mut workload, _stdout) = mdiag_tests::spawn_ready(
        Command::new(crate::wiredtiger::workload())
            .arg("--home")
            .arg(home.path())
            .args(["--checkpoints", "1000", "--interval-ms", "100"])
            .args(["--writers", "4"]),
    );
    let mut agent = Agent::start(&cfg, &["--rules", rules.to_str().unwrap()]);
    let addr = agent.metrics_addr();
    let w = Duration::from_secs(90);
    let pid = workload.id();
    let pid = format!("(pid {pid}); probes attached");
    agent.wait_for(&["watching mdiag-wtcheckpo", &pid], w);
    let mut stdin = workload.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    agent.wait_for(&["finding host.tcp_keepalive", "pending → firing"], w);

    let alert_rules = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../packaging/prometheus/mdiag-alerts.yaml");
    let prometheus = Prometheus::start_with_rules(&addr, "mdiag", &[alert_rules]);
    let started = Instant::now();
    // Enough scrapes for a rate over the substituted $__rate_interval.
    wait_until(&prometheus, "count_over_time(mdiag_scrapes_total[1m]) >= 5");

    let vars = [
        ("datasource", "prometheus"),
        ("instance", addr.as_str()),
        ("rs_nm", ".*"),
        ("cl_role", ".*"),
        ("__rate_interval", "5s"),
        ("__interval", "1s"),
        ("__range", "1m"),
    ];
    let mut all = queries();
    all.extend(variable_queries());
    assert!(all.len() >= 40, "only {} queries", all.len());
    let mut pending: Vec<(Query, String)> = all
        .iter()
        .map(|q| (q.clone(), substitute(&q.expr, &vars)))
        .collect();
    let deadline = Instant::now() + DATA_WITHIN;
    let mut last: Vec<String> = Vec::new();
    while !pending.is_empty() && Instant::now() < deadline {
        last.clear();
        pending.retain(|(q, expr)| {
            let result = if q.instant {
                prometheus.query(expr)
            } else {
                prometheus.query_range(expr, started.elapsed() + Duration::from_secs(1))
            };
            match result {
                // A parse error does not go away: fail now.
                Err(e) => panic!("{q}\n  substituted: {expr}\n  Prometheus: {e}"),
                Ok(series) if series.is_empty() => {
                    last.push(format!("{q}\n  substituted: {expr}"));
                    true
                }
                Ok(_) => false,
            }
        });
        if !pending.is_empty() {
            agent.drain_for(Duration::from_secs(1));
        }
    }
    // The planted finding's alert, from the real exposition.
    wait_until(
        &prometheus,
        r#"ALERTS{alertname="MdiagFindingLow", alertstate="firing", rule="test.keepalive_finding", severity="low"}"#,
    );
    let firing = prometheus
        .query(r#"ALERTS{alertstate="firing"}"#)
        .unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = firing
        .iter()
        .filter_map(|s| s["metric"]["alertname"].as_str())
        .collect();
    assert!(
        names.iter().all(|n| n.starts_with("MdiagFinding")),
        "the agent's own alerts fire on a healthy agent: {names:?}"
    );
    // The same setting as a checklist item is exported (the Checklist
    // panel has it) but pages no one.
    assert!(
        firing
            .iter()
            .all(|s| s["metric"]["rule"] != "host.tcp_keepalive"),
        "a checklist item raised an alert: {firing:?}"
    );
    let log = prometheus.log();
    drop(prometheus);
    drop(stdin);
    let _ = workload.kill();
    let _ = workload.wait();
    let (status, agent_log) = agent.stop();
    assert!(
        last.is_empty(),
        "{} of {} dashboard queries returned no series within {DATA_WITHIN:?}:\n{}\n\nagent:\n{agent_log}\n\nprometheus:\n{log}",
        last.len(),
        all.len(),
        last.join("\n")
    );
    assert!(status.success(), "{status:?}\n{agent_log}");
    eprintln!(
        "{} dashboard queries each returned at least one series",
        all.len()
    );
    crate::record_cli::assert_detached();
}

/// Polls an instant query until it returns a series (the condition holds).
fn wait_until(p: &Prometheus, expr: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match p.query(expr) {
            Ok(s) if !s.is_empty() => return,
            Ok(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(250)),
            other => panic!("{expr}: {other:?} after 60 s\n{}", p.log()),
        }
    }
}
