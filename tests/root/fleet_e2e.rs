//! The fleet end to end: two real agents on this host, named as two hosts
//! (`[fleet] host`), write into one store (the real mongod 6.0.5 as a
//! single-node replica set, `w: "majority"`, no SecantusDB); the
//! planted problem (keepalive at the kernel's 2-hour default) fires on both
//! and is then removed; `mdiag fleet` shows both hosts' findings, grouped,
//! and each host's history with its transitions. The store is read with
//! pymongo to know what it holds before `mdiag fleet` is asked.

use std::time::Duration;

use mdiag_tests::require_root;
use serde_json::Value;

use crate::agent::Keepalive;
use crate::fleet::{episodes, start_firing, store, wait_store};
use crate::fleet_view::{fleet, json};

const RULE: &str = "host.tcp_keepalive";
const HOSTS: [&str; 2] = ["fleet-alpha", "fleet-beta"];

/// The planted rule's episode of `host` in the store, if any.
fn episode_of<'a>(v: &'a Value, host: &str) -> Option<&'a Value> {
    episodes(v).into_iter().find(|e| e["host"] == host)
}

fn all_in(v: &Value, state: &str) -> bool {
    HOSTS
        .iter()
        .all(|h| episode_of(v, h).is_some_and(|e| e["state"] == state))
}

/// A JSON array of strings as a Vec.
fn strings(v: &Value) -> Vec<&str> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn two_agents_fill_one_store_and_mdiag_fleet_shows_both_with_their_history() {
    let _serial = mdiag_tests::serial();
    require_root();
    let server = store(true);
    let uri = server.uri();
    let w = Duration::from_secs(90);
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (mut alpha, _, planted_a) = start_firing(da.path(), &uri, HOSTS[0]);
    let (mut beta, _, planted_b) = start_firing(db.path(), &uri, HOSTS[1]);
    wait_store(&uri, "mdiag", w, |v| all_in(v, "firing"));

    // What fires now: one group for the rule, both hosts in it, by facts.
    let now = json(&uri, &[]);
    let groups = now["groups"].as_array().expect("groups");
    let firing = groups
        .iter()
        .find(|g| g["state"] == "firing" && g["rule"] == RULE)
        .unwrap_or_else(|| panic!("no firing group of {RULE}: {now:#}"));
    assert_eq!(strings(&firing["hosts"]), HOSTS, "{firing:#}");
    assert_eq!(firing["episodes"], 2, "{firing:#}");
    let arch = std::env::consts::ARCH;
    let facts = firing["by_facts"].as_array().expect("by_facts");
    assert!(
        facts.iter().any(|f| f["arch"] == arch && f["hosts"] == 2),
        "{facts:?}"
    );
    assert!(now["hosts_total"].as_u64() >= Some(2), "{now:#}");

    // The problem removed: both episodes resolve in the store.
    let fixed = Keepalive::set(120);
    for a in [&mut alpha, &mut beta] {
        a.wait_for(
            &["finding host.tcp_keepalive on host", "firing → resolved"],
            w,
        );
    }
    let stored = wait_store(&uri, "mdiag", w, |v| all_in(v, "resolved"));
    for a in [alpha, beta] {
        let (status, log) = a.stop();
        assert!(status.success(), "{status:?}\n{log}");
    }
    drop(fixed);
    drop(planted_b);
    drop(planted_a);

    // Each host's history: its one episode, the transitions the store holds.
    for host in HOSTS {
        let truth = episode_of(&stored, host).expect("stored episode");
        let h = json(&uri, &["--host", host]);
        let view = &h["host"];
        assert_eq!(view["known"], true, "{h:#}");
        let eps = view["episodes"].as_array().expect("episodes");
        let ep = eps
            .iter()
            .find(|e| e["rule"] == RULE)
            .unwrap_or_else(|| panic!("{host}: no {RULE} episode: {h:#}"));
        assert_eq!(ep["id"], truth["_id"], "{ep:#}");
        assert_eq!(ep["state"], "resolved");
        let tos: Vec<&str> = ep["transitions"]
            .as_array()
            .expect("transitions")
            .iter()
            .filter_map(|t| t["to"].as_str())
            .collect();
        assert_eq!(tos, ["pending", "firing", "resolved"], "{ep:#}");
        assert_eq!(
            ep["transitions"].as_array().map(Vec::len),
            truth["transitions"].as_array().map(Vec::len)
        );
    }
    // Resolved since an hour ago: both hosts again, in the text view too.
    let since = json(&uri, &["--since", "1h"]);
    let resolved = since["groups"]
        .as_array()
        .and_then(|g| {
            g.iter()
                .find(|g| g["state"] == "resolved" && g["rule"] == RULE)
        })
        .unwrap_or_else(|| panic!("no resolved group: {since:#}"));
    assert_eq!(strings(&resolved["hosts"]), HOSTS, "{resolved:#}");
    let text = fleet(&uri, &["--since", "1h"]);
    for host in HOSTS {
        assert!(text.contains(host), "{host} missing:\n{text}");
    }
}
