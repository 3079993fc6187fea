//! `mdiag fleet` against a real store: the real mongod 6.0.5 (a single-node
//! replica set, as `crate::fleet::store` starts it; no SecantusDB) holding,
//! written through the driver with the schema's own types, two hosts with a
//! history (h1's `sched.x` fired, resolved and fired again; h2 fires and
//! flaps) and a third host whose agent went silent. The real binary's output, in every format,
//! must show what was inserted: counts per rule, architecture, version and
//! kernel, each host's episodes newest first with their transitions.
//! Also: an empty store is an answer, an unreachable one an error naming it,
//! and a closed pipe is no panic.

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use bson::{DateTime, doc};
use mdiag::fleet::schema::{
    FINDINGS, FindingDoc, HOSTS, HostDoc, HostFacts, INDEXES, TransitionDoc, finding_id,
};
use mdiag_tests::{mdiag_bin, run_mdiag};
use mongodb::Client;
use serde_json::Value;

const DB: &str = "mdiag_fleet_test";

fn ago(now: i64, minutes: i64) -> DateTime {
    DateTime::from_millis(now - minutes * 60_000)
}

fn facts(arch: &str, kernel: &str, version: &str) -> HostFacts {
    HostFacts {
        arch: arch.into(),
        kernel: kernel.into(),
        mongod_version: Some(version.into()),
        rs_nm: Some("rs0".into()),
        cl_role: None,
        agent_version: "0.1.0".into(),
    }
}

/// One episode: `(from, to, minutes ago)` transitions; state and since are the last one's.
fn episode(
    host: &str,
    rule: &str,
    facts: &HostFacts,
    now: i64,
    steps: &[(&str, &str, i64)],
) -> FindingDoc {
    let start = ago(now, steps[0].2);
    let last = steps[steps.len() - 1];
    FindingDoc {
        id: finding_id(host, rule, "mongod:27017", start),
        host: host.into(),
        rule: rule.into(),
        target: "mongod:27017".into(),
        title: format!("{rule} title"),
        facts: facts.clone(),
        episode_start: start,
        state: last.1.into(),
        since: ago(now, last.2),
        transitions: steps
            .iter()
            .map(|(f, t, m)| TransitionDoc {
                from: (*f).into(),
                to: (*t).into(),
                at: ago(now, *m),
            })
            .collect(),
        expire_at: None,
    }
}

/// Writes the fleet: h1 (x86_64, 8.0.4), h2 (aarch64, 7.0.12), h3 silent.
fn seed(uri: &str, now: i64) {
    let h1 = facts("x86_64", "6.18.0", "8.0.4");
    let h2 = facts("aarch64", "6.1.0", "7.0.12");
    let h3 = facts("x86_64", "5.15.0", "8.0.4");
    let findings = vec![
        // h1 sched.x: fired and resolved 3 h ago, then fired again 1 h ago.
        episode(
            "h1",
            "sched.x",
            &h1,
            now,
            &[
                ("inactive", "pending", 180),
                ("pending", "firing", 178),
                ("firing", "resolved", 150),
            ],
        ),
        episode(
            "h1",
            "sched.x",
            &h1,
            now,
            &[("inactive", "pending", 60), ("pending", "firing", 58)],
        ),
        episode("h1", "mem.y", &h1, now, &[("inactive", "pending", 120)]),
        episode(
            "h2",
            "sched.x",
            &h2,
            now,
            &[("inactive", "pending", 30), ("pending", "firing", 29)],
        ),
        // h2's second mongod fires the same rule: h2 is still one host.
        FindingDoc {
            target: "mongod:27018".into(),
            id: finding_id("h2", "sched.x", "mongod:27018", ago(now, 25)),
            ..episode(
                "h2",
                "sched.x",
                &h2,
                now,
                &[("inactive", "pending", 25), ("pending", "firing", 24)],
            )
        },
        episode(
            "h2",
            "net.z",
            &h2,
            now,
            &[
                ("inactive", "pending", 90),
                ("pending", "firing", 89),
                ("firing", "flapping", 20),
            ],
        ),
    ];
    let host = |name: &str, f: &HostFacts, last_seen_min: i64| HostDoc {
        host: name.into(),
        facts: f.clone(),
        targets: vec!["mongod:27017".into()],
        first_seen: ago(now, 600),
        last_seen: ago(now, last_seen_min),
    };
    let hosts = vec![host("h1", &h1, 0), host("h2", &h2, 0), host("h3", &h3, 60)];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let db = Client::with_uri_str(uri)
            .await
            .expect("client")
            .database(DB);
        for i in INDEXES {
            db.collection::<bson::Document>(i.collection)
                .create_index(mdiag::fleet::source::index_model(i))
                .await
                .expect("create index");
        }
        db.collection::<FindingDoc>(FINDINGS)
            .insert_many(findings)
            .await
            .expect("insert findings");
        db.collection::<HostDoc>(HOSTS)
            .insert_many(hosts)
            .await
            .expect("insert hosts");
        let n = db
            .collection::<bson::Document>(FINDINGS)
            .count_documents(doc! {})
            .await
            .expect("count");
        assert_eq!(n, 6);
    });
}

pub(crate) fn fleet(uri: &str, args: &[&str]) -> String {
    let mut all = vec!["fleet", "--uri", uri];
    all.extend_from_slice(args);
    let out = run_mdiag(&all);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "mdiag {all:?}: {stderr}");
    String::from_utf8(out.stdout).expect("utf-8 output")
}

pub(crate) fn json(uri: &str, args: &[&str]) -> Value {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    serde_json::from_str(&fleet(uri, &all)).expect("JSON output")
}

fn ids(v: &Value) -> Vec<(String, String)> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|e| {
            (
                e["rule"].as_str().unwrap_or("").into(),
                e["state"].as_str().unwrap_or("").into(),
            )
        })
        .collect()
}

#[test]
fn fleet_view_shows_what_the_store_holds_in_every_format() {
    let server = crate::fleet::store(true);
    let uri = format!("{}/?directConnection=true", server.uri());
    let now = DateTime::now().timestamp_millis();
    seed(&uri, now);
    let uri = uri.as_str();

    // Now: open episodes per state, rule and host facts.
    let cfg = tempfile::NamedTempFile::new().expect("config");
    std::fs::write(cfg.path(), format!("[fleet]\ndatabase = \"{DB}\"\n")).expect("config");
    let cfg = cfg.path().to_str().expect("path");
    let v = json(uri, &["--config", cfg]);
    let states: Vec<(String, u64, u64)> = v["states"]
        .as_array()
        .expect("states")
        .iter()
        .map(|s| {
            (
                s["state"].as_str().unwrap_or("").into(),
                s["episodes"].as_u64().unwrap_or(0),
                s["hosts"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("firing".into(), 3, 2),
            ("flapping".into(), 1, 1),
            ("pending".into(), 1, 1)
        ],
        "{v:#}"
    );
    let groups = &v["groups"];
    assert_eq!(
        ids(groups),
        [
            ("sched.x".into(), "firing".into()),
            ("net.z".into(), "flapping".into()),
            ("mem.y".into(), "pending".into())
        ]
    );
    let x = &groups[0];
    assert_eq!(
        (x["episodes"].as_u64(), x["hosts"].clone()),
        (Some(3), serde_json::json!(["h1", "h2"])),
        "three episodes on two distinct hosts"
    );
    let mut by: Vec<(String, String, String, u64)> = x["by_facts"]
        .as_array()
        .expect("by_facts")
        .iter()
        .map(|f| {
            (
                f["arch"].as_str().unwrap_or("").into(),
                f["mongod_version"].as_str().unwrap_or("").into(),
                f["kernel"].as_str().unwrap_or("").into(),
                f["episodes"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    by.sort();
    assert_eq!(
        by,
        [
            ("aarch64".into(), "7.0.12".into(), "6.1.0".into(), 2),
            ("x86_64".into(), "8.0.4".into(), "6.18.0".into(), 1)
        ]
    );
    assert_eq!(v["hosts_total"], 3);
    assert_eq!(v["silent_total"], 1);
    assert_eq!(v["silent"][0]["host"], "h3");
    assert_eq!(v["database"], DB);

    // Each host's history, newest first, transitions in time order.
    let h1 = json(uri, &["--config", cfg, "--host", "h1"]);
    let eps = &h1["host"]["episodes"];
    assert_eq!(
        ids(eps),
        [
            ("sched.x".into(), "firing".into()),
            ("mem.y".into(), "pending".into()),
            ("sched.x".into(), "resolved".into())
        ],
        "{h1:#}"
    );
    let tos: Vec<&str> = eps[2]["transitions"]
        .as_array()
        .expect("transitions")
        .iter()
        .filter_map(|t| t["to"].as_str())
        .collect();
    assert_eq!(tos, ["pending", "firing", "resolved"]);
    assert_eq!(h1["host"]["arch"], "x86_64");
    assert_eq!(h1["host"]["known"], true);
    let h2 = json(uri, &["--config", cfg, "--host", "h2"]);
    assert_eq!(
        ids(&h2["host"]["episodes"]),
        [
            ("sched.x".into(), "firing".into()),
            ("sched.x".into(), "firing".into()),
            ("net.z".into(), "flapping".into())
        ]
    );

    // --rule: the rule's groups and its latest episodes on every host;
    // --since: the resolution 150 min ago is in 3h, not in 1h.
    let r = json(
        uri,
        &["--config", cfg, "--rule", "sched.x", "--since", "3h"],
    );
    assert_eq!(
        ids(&r["groups"]),
        [
            ("sched.x".into(), "firing".into()),
            ("sched.x".into(), "resolved".into())
        ]
    );
    let hosts: Vec<&str> = r["rule_episodes"]
        .as_array()
        .expect("episodes")
        .iter()
        .filter_map(|e| e["host"].as_str())
        .collect();
    assert_eq!(hosts, ["h2", "h2", "h1", "h1"], "newest first");
    let r = json(
        uri,
        &["--config", cfg, "--rule", "sched.x", "--since", "1h"],
    );
    assert_eq!(r["rule_episodes"].as_array().map(Vec::len), Some(3));
    assert_eq!(
        ids(&r["groups"]),
        [("sched.x".into(), "firing".into())],
        "resolved 150 min ago: not in the last hour"
    );
    let r = json(uri, &["--config", cfg, "--host", "h1", "--since", "1h"]);
    assert_eq!(r["host"]["episodes"].as_array().map(Vec::len), Some(2));

    // Terminal: the same counts and history, in words.
    let text = fleet(uri, &["--config", cfg]);
    assert!(
        text.contains("Now: 3 firing on 2 hosts, 1 flapping on 1 host, 1 pending on 1 host"),
        "{text}"
    );
    assert!(text.contains("sched.x  3 episodes on 2 hosts"), "{text}");
    assert!(text.contains("Silent hosts (1)"), "{text}");
    let text = fleet(uri, &["--config", cfg, "--host", "h1"]);
    assert!(text.contains("History: 3 episodes, newest first"), "{text}");
    let firing = text.find("[firing] sched.x").expect("firing episode");
    let resolved = text.find("[resolved] sched.x").expect("resolved episode");
    assert!(firing < resolved, "{text}");
    assert!(text.contains("firing -> resolved"), "{text}");

    // HTML: one page, to a file, nothing fetched from elsewhere.
    let dir = tempfile::tempdir().expect("dir");
    let page_path = dir.path().join("fleet.html");
    fleet(
        uri,
        &[
            "--config",
            cfg,
            "--format",
            "html",
            "-o",
            page_path.to_str().expect("path"),
        ],
    );
    let page = std::fs::read_to_string(&page_path).expect("page");
    assert!(page.starts_with("<!DOCTYPE html>") && page.trim_end().ends_with("</html>"));
    for attr in ["src=", "href="] {
        for (at, _) in page.match_indices(attr) {
            let value = page[at + attr.len()..].trim_start_matches(['"', '\'']);
            assert!(
                !value.starts_with("http") && !value.starts_with("//"),
                "external {attr} at {at}"
            );
        }
    }
    assert!(!page.contains("@import") && !page.contains("url(http"));
    assert!(page.contains("<code>sched.x</code>") && page.contains("<td>aarch64</td>"));

    // An empty store (another database) is an answer, not an error.
    let other = tempfile::NamedTempFile::new().expect("config");
    std::fs::write(other.path(), "[fleet]\ndatabase = \"nothing_here\"\n").expect("config");
    let empty = fleet(uri, &["--config", other.path().to_str().expect("path")]);
    assert!(empty.contains("No findings"), "{empty}");
    assert!(empty.contains("Hosts: 0 known"), "{empty}");

    // A closed pipe: no panic, success.
    let mut child = Command::new(mdiag_bin())
        .args(["fleet", "--uri", uri, "--config", cfg, "--host", "h1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.status.success(), "{:?} {stderr}", out.status);
}

#[test]
fn fleet_view_names_an_unreachable_store_and_fails() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let uri = format!("mongodb://u:s3cret@127.0.0.1:{port}/?directConnection=true");
    let t0 = Instant::now();
    let out = run_mdiag(&["fleet", "--uri", &uri]);
    let took = t0.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "cannot reach the fleet store at mongodb://***@127.0.0.1:{port}"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("check that it runs"), "{stderr}");
    assert!(!stderr.contains("s3cret"), "{stderr}");
    assert!(took < Duration::from_secs(15), "took {took:?}");
    // No URI anywhere: a usage error saying what to set.
    let out = run_mdiag(&["fleet", "--config", "/dev/null"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("[fleet] uri"));
}
