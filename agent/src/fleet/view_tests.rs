//! Tests of the view model and of the three formats, from documents shaped
//! as the server returns them for `query`'s pipelines.

use bson::{DateTime, Document, doc};

use super::*;
use crate::fleet::{html, query::Fetched, render};

fn t(s: i64) -> DateTime {
    DateTime::from_millis(1_700_000_000_000 + s * 1000)
}

fn ctx() -> Context {
    Context {
        store: "mongodb://store:27017".into(),
        database: "mdiag".into(),
        now: t(10_000),
        silent_after_secs: 180,
    }
}

/// The groups `now_pipelines` return for: 3 firing `sched.x` episodes (2
/// on x86_64 8.0.4, one of them on h3 with another on aarch64 without a
/// version, so h3 counts once), 1 pending `mem.y`.
fn now_doc() -> Vec<Document> {
    let id = |state: &str, rule: &str, arch: &str, v: &str, k: &str| {
        doc! {"state": state, "rule": rule, "arch": arch, "mongod_version": v, "kernel": k}
    };
    vec![
        doc! {"_id": id("firing", "sched.x", "aarch64", "unknown", "6.1"), "title": "X <b>",
        "episodes": 1_i32, "hosts": ["h3"], "first_since": t(40), "last_since": t(40)},
        doc! {"_id": id("pending", "mem.y", "x86_64", "7.0.1", "5.15"), "title": "Y",
        "episodes": 1_i32, "hosts": ["h9"], "first_since": t(50), "last_since": t(50)},
        doc! {"_id": id("firing", "sched.x", "x86_64", "8.0.4", "6.18"), "title": "X <b>",
        "episodes": 2_i64, "hosts": ["h3", "h1"], "first_since": t(10), "last_since": t(30)},
    ]
}

fn episode_doc(start: i64, state: &str, transitions: &[(&str, &str, i64)]) -> Document {
    let tr: Vec<Document> = transitions
        .iter()
        .map(|(f, to, at)| doc! {"from": *f, "to": *to, "at": t(*at)})
        .collect();
    doc! {
        "_id": format!("h1/sched.x/mongod:27017/{start}"), "host": "h1", "rule": "sched.x",
        "target": "mongod:27017", "title": "X", "arch": "x86_64", "kernel": "6.18",
        "agent_version": "0.1.0", "episode_start": t(start), "state": state,
        "since": t(transitions.last().map_or(start, |x| x.2)), "transitions": tr,
    }
}

fn fleet() -> FleetView {
    let fetched = Fetched {
        now: Some(now_doc()),
        hosts_total: 4,
        silent_total: 1,
        silent: vec![doc! {"_id": "h7", "arch": "s390x", "kernel": "5.14", "last_seen": t(9_000)}],
        ..Fetched::default()
    };
    build(&fetched, &Filter::default(), &ctx())
}

#[test]
fn groups_come_firing_first_with_their_facts_and_sorted_hosts() {
    let v = fleet();
    let states: Vec<_> = v
        .states
        .iter()
        .map(|s| (s.state.as_str(), s.episodes))
        .collect();
    assert_eq!(states, [("firing", 3), ("pending", 1)]);
    assert_eq!(v.states[0].hosts, 2, "h3 once");
    assert_eq!(v.episodes_in("firing"), 3);
    assert_eq!(v.groups.len(), 2);
    let x = &v.groups[0];
    assert_eq!(
        (x.state.as_str(), x.rule.as_str(), x.episodes),
        ("firing", "sched.x", 3)
    );
    assert_eq!(x.hosts, ["h1", "h3"]);
    assert_eq!(x.first_since.as_deref(), Some("2023-11-14T22:13:30Z"));
    assert_eq!(x.last_since.as_deref(), Some("2023-11-14T22:14:00Z"));
    let facts: Vec<_> = x
        .by_facts
        .iter()
        .map(|f| (f.arch.as_str(), f.mongod_version.as_str(), f.episodes))
        .collect();
    assert_eq!(facts, [("x86_64", "8.0.4", 2), ("aarch64", "unknown", 1)]);
    assert_eq!(x.by_facts[0].hosts, 2);
    assert_eq!(v.groups[1].by_facts.len(), 1);
    assert_eq!(v.silent[0].silent_secs, Some(1000));
    assert!(!v.is_empty());
}

#[test]
fn a_host_history_is_newest_first_with_transitions_in_time_order() {
    let history = vec![
        episode_doc(
            500,
            "firing",
            &[("pending", "firing", 560), ("inactive", "pending", 500)],
        ),
        episode_doc(
            100,
            "resolved",
            &[
                ("inactive", "pending", 100),
                ("pending", "firing", 160),
                ("firing", "resolved", 400),
            ],
        ),
    ];
    let fetched = Fetched {
        host: Some(
            doc! {"_id": "h1", "arch": "x86_64", "kernel": "6.18", "mongod_version": "8.0.4",
            "agent_version": "0.1.0", "targets": ["mongod:27017"],
            "first_seen": t(0), "last_seen": t(9_990)},
        ),
        host_history: history,
        hosts_total: 2,
        ..Fetched::default()
    };
    let filter = Filter {
        host: Some("h1".into()),
        ..Filter::default()
    };
    let v = build(&fetched, &filter, &ctx());
    let h = v.host.as_ref().unwrap();
    assert!(h.known);
    assert_eq!(h.mongod_version, "8.0.4");
    assert_eq!(h.episodes.len(), 2);
    assert_eq!(h.episodes[0].state, "firing");
    let tos: Vec<_> = h.episodes[0]
        .transitions
        .iter()
        .map(|t| t.to.as_str())
        .collect();
    assert_eq!(tos, ["pending", "firing"]);
    assert_eq!(h.episodes[1].transitions.len(), 3);
    let text = render::terminal(&v);
    let (newer, older) = (
        text.find("[firing]").unwrap(),
        text.find("[resolved]").unwrap(),
    );
    assert!(newer < older, "{text}");
    assert!(text.contains("History: 2 episodes"), "{text}");
    assert!(text.contains("pending -> firing"), "{text}");
    // Unknown host: said so, not an error.
    let v = build(&Fetched::default(), &filter, &ctx());
    let text = render::terminal(&v);
    assert!(text.contains("not in the store's hosts"), "{text}");
    assert!(text.contains("No findings on h1"), "{text}");
}

#[test]
fn the_terminal_format_shows_counts_per_rule_and_facts() {
    let text = render::terminal(&fleet());
    assert!(
        text.contains("Now: 3 firing on 2 hosts, 1 pending on 1 host"),
        "{text}"
    );
    assert!(
        text.find("FIRING").unwrap() < text.find("PENDING").unwrap(),
        "{text}"
    );
    assert!(
        text.contains("sched.x  3 episodes on 2 hosts: X <b>"),
        "{text}"
    );
    assert!(text.contains("hosts: h1, h3"), "{text}");
    let row = text.lines().find(|l| l.contains("aarch64")).unwrap();
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        ["aarch64", "unknown", "6.1", "1", "1"]
    );
    assert!(text.contains("Silent hosts (1)"), "{text}");
    assert!(text.contains("16m 40s"), "{text}");
}

#[test]
fn an_empty_store_says_no_findings() {
    let v = build(&Fetched::default(), &Filter::default(), &ctx());
    assert!(v.is_empty());
    assert!(render::terminal(&v).contains("No findings: no episode in the store is open."));
    assert!(html::render(&v).contains("No findings"));
    let j: serde_json::Value = serde_json::from_str(&render::json(&v).unwrap()).unwrap();
    assert_eq!(j["groups"].as_array().unwrap().len(), 0);
    assert_eq!(j["hosts_total"], 0);
}

#[test]
fn json_has_the_documented_fields() {
    let j: serde_json::Value = serde_json::from_str(&render::json(&fleet()).unwrap()).unwrap();
    assert_eq!(j["schema"], JSON_SCHEMA);
    for k in [
        "mdiag_version",
        "generated_at",
        "store",
        "database",
        "filter",
        "hosts_total",
        "silent_after_secs",
        "silent_total",
        "silent",
        "states",
        "groups",
        "rule_episodes",
        "host",
    ] {
        assert!(j.get(k).is_some(), "{k}");
    }
    let g = &j["groups"][0];
    assert_eq!(g["rule"], "sched.x");
    assert_eq!(g["hosts"].as_array().unwrap().len(), 2);
    assert_eq!(g["by_facts"][0]["mongod_version"], "8.0.4");
    assert_eq!(g["first_since"], "2023-11-14T22:13:30Z");
    assert!(j["host"].is_null());
}

#[test]
fn html_is_self_contained_and_escapes_store_text() {
    let page = html::render(&fleet());
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("X &lt;b&gt;"), "title escaped");
    assert!(!page.contains("X <b>"));
    for bad in [
        "src=\"http",
        "href=\"http",
        "<script",
        "url(http",
        "@import",
    ] {
        assert!(!page.contains(bad), "{bad}");
    }
    assert!(page.contains("state-firing"));
    assert!(page.contains("<td>aarch64</td>"));
}

#[test]
fn durations_read_as_people_say_them() {
    assert_eq!(render::human_secs(0), "0s");
    assert_eq!(render::human_secs(180), "3m");
    assert_eq!(render::human_secs(3_725), "1h 2m");
    assert_eq!(render::human_secs(90_061), "1d 1h");
    let many: Vec<String> = (0..12).map(|i| format!("h{i}")).collect();
    assert_eq!(
        render::host_list(&many),
        "h0, h1, h2, h3, h4, h5, h6, h7 and 4 more"
    );
}

/// Every field of the JSON output, at every level, is in `docs/fleet-json.md`.
#[test]
fn the_json_document_describes_every_field() {
    const DOC: &str = include_str!("../../../docs/fleet-json.md");
    let mut v = fleet();
    let history = vec![episode_doc(5, "firing", &[("inactive", "pending", 5)])];
    let fetched = Fetched {
        host: Some(doc! {"_id": "h1", "rs_nm": "rs0"}),
        host_history: history.clone(),
        ..Fetched::default()
    };
    let filter = Filter {
        host: Some("h1".into()),
        ..Filter::default()
    };
    v.host = build(&fetched, &filter, &ctx()).host;
    v.rule_episodes = build(
        &Fetched {
            rule_episodes: history,
            ..Fetched::default()
        },
        &Filter::default(),
        &ctx(),
    )
    .rule_episodes;
    fn walk(v: &serde_json::Value, missing: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    if !DOC.contains(&format!("`{k}`")) {
                        missing.push(k.clone());
                    }
                    walk(v, missing);
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, missing)),
            _ => {}
        }
    }
    let mut missing = Vec::new();
    walk(&serde_json::to_value(&v).unwrap(), &mut missing);
    missing.sort();
    missing.dedup();
    assert!(missing.is_empty(), "not in docs/fleet-json.md: {missing:?}");
}

#[test]
fn a_long_facts_table_is_cut_in_text_and_whole_in_json() {
    let mut v = fleet();
    let g = &mut v.groups[0];
    g.by_facts = (0..13)
        .map(|i| FactsGroup {
            arch: "x86_64".into(),
            mongod_version: format!("8.0.{i}"),
            kernel: "6.1".into(),
            episodes: 2,
            hosts: 2,
        })
        .collect();
    let text = render::terminal(&v);
    assert!(text.contains("8.0.9") && !text.contains("8.0.10"), "{text}");
    assert!(
        text.contains("and 3 more combinations with 6 episodes"),
        "{text}"
    );
    assert!(html::render(&v).contains("and 3 more combinations"));
    let j: serde_json::Value = serde_json::from_str(&render::json(&v).unwrap()).unwrap();
    assert_eq!(j["groups"][0]["by_facts"].as_array().unwrap().len(), 13);
}
