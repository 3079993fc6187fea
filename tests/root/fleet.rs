//! `[fleet]` against the server MongoDB users run: the real mongod 6.0.5 as
//! a single-node replica set (so the store's `w: "majority"` is acknowledged
//! by a majority for real, and `windows` is a real time-series collection).
//! The agent's findings reach the store as one document per episode with
//! each transition once, the host and window documents and the indexes are
//! there; with the store killed (`kill -9`) mid-run the spool holds every
//! change and delivers each exactly once when the store is back, and
//! replaying the same spool again adds nothing; the TTL index removes an
//! expired episode and nothing else (mongod's own TTL monitor, made to run
//! every second). What the store holds is read with pymongo (another
//! driver): the server is the ground truth.
//!
//! SecantusDB (tests/src/secantus.rs) is not used here: nothing these tests
//! need is missing from mongod (the TTL pass SecantusDB ran on demand is
//! mongod's TTL monitor, switched on when the test is ready for it).

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use mdiag_tests::agent::{Agent, http_get, sample};
use mdiag_tests::mongod::{Mongod, Options};
use mdiag_tests::{py_venv, require_root};
use serde_json::Value;

use crate::agent::{Keepalive, rules_dir};

const RULE: &str = "host.tcp_keepalive";
/// Another rule, for episodes beside the planted one's.
const OTHER: &str = "sched.wakeup_preemption";

/// Everything the store holds for these tests, read by pymongo.
const READ_STORE: &str = r#"
import sys, json, pymongo
from bson import json_util
c = pymongo.MongoClient(sys.argv[1], serverSelectionTimeoutMS=5000)
db = c[sys.argv[2]]
names = {x["name"]: x.get("type", "collection") for x in db.list_collections()}
out = {
    "collections": names,
    "findings": list(db.findings.find()) if "findings" in names else [],
    "hosts": list(db.hosts.find()) if "hosts" in names else [],
    "windows": [{k: w[k] for k in ("at", "meta", "held", "seconds")} | {"groups": sorted(w["facts"])}
                for w in db.windows.find()] if "windows" in names else [],
    "indexes": {n: [{"name": i["name"], "key": dict(i["key"]),
                     "expireAfterSeconds": i.get("expireAfterSeconds")}
                    for i in db[n].list_indexes()] for n in names},
    "options": {x["name"]: x.get("options", {}) for x in db.list_collections()},
}
print(json_util.dumps(out, json_options=json_util.RELAXED_JSON_OPTIONS))
"#;

/// Runs a Python script of the venv with `uri` and `db` as arguments;
/// returns what it printed.
fn python(script: &str, uri: &str, db: &str) -> Vec<u8> {
    let out = Command::new(py_venv().join("bin/python"))
        .args(["-c", script, uri, db])
        .output()
        .expect("run pymongo");
    assert!(
        out.status.success(),
        "pymongo: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn read_store(uri: &str, db: &str) -> Value {
    serde_json::from_slice(&python(READ_STORE, uri, db)).expect("pymongo's JSON")
}

/// Runs a pymongo statement against `db` (for setting up a case).
fn pymongo(uri: &str, db: &str, statement: &str) {
    let script = format!(
        "import sys, pymongo\ndb = pymongo.MongoClient(sys.argv[1])[sys.argv[2]]\n{statement}\n"
    );
    python(&script, uri, db);
}

/// Polls the store until `done` holds; panics with the last state.
pub(crate) fn wait_store(
    uri: &str,
    db: &str,
    within: Duration,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let v = read_store(uri, db);
        if done(&v) {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "the store never got there within {within:?}:\n{v:#}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The planted finding's episode documents.
pub(crate) fn episodes(v: &Value) -> Vec<&Value> {
    v["findings"]
        .as_array()
        .map(|a| a.iter().filter(|d| d["rule"] == RULE).collect())
        .unwrap_or_default()
}

/// The transitions of the one episode, as "from→to".
fn transitions(v: &Value) -> Vec<String> {
    let eps = episodes(v);
    let Some(ep) = eps.first() else {
        return Vec::new();
    };
    ep["transitions"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| {
                    format!(
                        "{}→{}",
                        t["from"].as_str().unwrap(),
                        t["to"].as_str().unwrap()
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The store: mongod as a single-node replica set whose TTL monitor runs
/// every second once enabled (`ttl`; mongod's default is on, every 60 s).
pub(crate) fn store(ttl: bool) -> Mongod {
    let set = |p: String| ["--setParameter".to_owned(), p];
    Mongod::start_with(Options {
        repl_set: Some("rs0".into()),
        extra: [
            set("ttlMonitorSleepSecs=1".into()),
            set(format!("ttlMonitorEnabled={ttl}")),
        ]
        .concat(),
        ..Options::default()
    })
}

fn config(dir: &Path, uri: &str, host: &str) -> PathBuf {
    let path = dir.join("mdiag.toml");
    let text = format!(
        "[agent]\nwindow = \"1s\"\nlisten = \"127.0.0.1:0\"\nstate_dir = \"{}\"\n\
         processes = [\"mdiag-no-such\"]\nflight_before = \"5s\"\nflight_after = \"1s\"\n\
         [agent.lifecycle]\nfire_in = 2\nof_last = 3\nresolve_after = 3\n\
         [fleet]\nuri = \"{uri}\"\nhost = \"{host}\"\nretention = \"2h\"\n\
         window_retention = \"1h\"\nreplay_rate = 200\n",
        dir.join("state").display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Waits for a line the agent may have logged already.
fn wait_logged(agent: &mut Agent, parts: &[&str], within: Duration) {
    if !agent
        .log
        .lines()
        .any(|l| parts.iter().all(|p| l.contains(p)))
    {
        agent.wait_for(parts, within);
    }
}

/// An agent writing to the store at `uri` as `host`, with the planted
/// problem (keepalive at the kernel's 2-hour default) firing.
pub(crate) fn start_firing(dir: &Path, uri: &str, host: &str) -> (Agent, String, Keepalive) {
    let rules = rules_dir(dir);
    let cfg = config(dir, uri, host);
    let planted = Keepalive::set(7200);
    let mut agent = Agent::start(&cfg, &["--rules", rules.to_str().unwrap()]);
    let addr = agent.metrics_addr();
    agent.wait_for(
        &["finding host.tcp_keepalive on host", "pending → firing"],
        Duration::from_secs(60),
    );
    (agent, addr, planted)
}

/// Waits until `fleet` delivered everything in its spool.
fn delivered(fleet: &mdiag::fleet::sender::Fleet) -> mdiag::fleet::sender::FleetStats {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stats = fleet.stats();
        if stats.spool_records == 0 {
            return stats;
        }
        assert!(Instant::now() < deadline, "{stats:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn metric(addr: &str, name: &str) -> Option<f64> {
    let (_, _, text) = http_get(addr, "/metrics");
    sample(&text, &format!("{name}{{}}"))
}

/// Polls /metrics until `name` satisfies `ok`.
fn wait_metric(addr: &str, name: &str, within: Duration, ok: impl Fn(f64) -> bool) -> f64 {
    let deadline = Instant::now() + within;
    loop {
        let v = metric(addr, name);
        if let Some(v) = v.filter(|v| ok(*v)) {
            return v;
        }
        assert!(Instant::now() < deadline, "{name} = {v:?} after {within:?}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn check_indexes(v: &Value) {
    let names = |coll: &str| -> Vec<String> {
        v["indexes"][coll]
            .as_array()
            .unwrap_or_else(|| panic!("no indexes of {coll}: {v:#}"))
            .iter()
            .map(|i| i["name"].as_str().unwrap().to_owned())
            .collect()
    };
    for spec in mdiag::fleet::schema::INDEXES {
        let got = names(spec.collection);
        assert!(got.iter().any(|n| n == spec.name), "{}: {got:?}", spec.name);
    }
    let ttl = v["indexes"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "expire_at_ttl")
        .unwrap();
    assert_eq!(ttl["expireAfterSeconds"], 0, "{ttl}");
    assert!(names("windows").iter().any(|n| n == "meta_at"), "{v:#}");
}

#[test]
fn fleet_an_episode_reaches_the_store_once_with_host_windows_and_indexes() {
    let _serial = mdiag_tests::serial();
    require_root();
    let server = store(true);
    let dir = tempfile::tempdir().unwrap();
    let w = Duration::from_secs(60);
    let (mut agent, addr, planted) = start_firing(dir.path(), &server.uri(), "fleet-a");
    wait_logged(&mut agent, &["fleet store", " reachable"], w);
    let fixed = Keepalive::set(120);
    agent.wait_for(
        &["finding host.tcp_keepalive on host", "firing → resolved"],
        w,
    );
    let v = wait_store(&server.uri(), "mdiag", w, |v| transitions(v).len() >= 3);
    assert_eq!(wait_metric(&addr, "mdiag_fleet_up", w, |x| x == 1.0), 1.0);
    let (status, log) = agent.stop();
    // The planted value back only now: back at 7200, it would fire again.
    drop(fixed);
    drop(planted);
    assert!(status.success(), "{status:?}\n{log}");
    // One line when the store became reachable, none per write.
    assert_eq!(log.matches("reachable").count(), 1, "{log}");

    let eps = episodes(&v);
    assert_eq!(eps.len(), 1, "{v:#}");
    let ep = eps[0];
    assert_eq!(
        transitions(&v),
        ["inactive→pending", "pending→firing", "firing→resolved"],
        "{ep:#}"
    );
    assert_eq!(ep["state"], "resolved");
    assert_eq!(ep["host"], "fleet-a");
    assert_eq!(ep["target"], "host");
    let uname_m = Command::new("uname").arg("-m").output().unwrap();
    let arch = String::from_utf8_lossy(&uname_m.stdout).trim().to_owned();
    assert_eq!(ep["arch"], arch.as_str());
    // The episode's _id is the schema's, and it expires retention after
    // its resolution.
    let date =
        |x: &Value| -> chrono_free::Millis { chrono_free::parse(x["$date"].as_str().unwrap()) };
    let since = date(&ep["since"]);
    assert_eq!(date(&ep["expire_at"]) - since, 2 * 3600 * 1000, "{ep:#}");
    let start = date(&ep["episode_start"]);
    let id = mdiag::fleet::schema::finding_id(
        "fleet-a",
        RULE,
        "host",
        bson::DateTime::from_millis(start),
    );
    assert_eq!(ep["_id"], id.as_str());

    // The host, and a window document per window with the rules' facts.
    let hosts = v["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 1, "{v:#}");
    assert_eq!(hosts[0]["_id"], "fleet-a");
    assert_eq!(hosts[0]["targets"], serde_json::json!(["host"]));
    assert!(date(&hosts[0]["first_seen"]) <= date(&hosts[0]["last_seen"]));
    let windows = v["windows"].as_array().unwrap();
    assert!(windows.len() >= 5, "{} windows", windows.len());
    let held = windows
        .iter()
        .filter(|w| w["held"].as_array().unwrap().iter().any(|r| r == RULE))
        .count();
    assert!(held >= 2, "{held} windows held {RULE}");
    assert!(
        windows.iter().all(|w| w["meta"]["host"] == "fleet-a"
            && w["groups"].as_array().is_some_and(|g| !g.is_empty())),
        "{windows:?}"
    );
    check_indexes(&v);
    // mongod makes `windows` a time-series collection (listed with type
    // "timeseries", its buckets in system.buckets.windows), with the
    // configured retention as its TTL.
    assert_eq!(v["collections"]["windows"], "timeseries", "{v:#}");
    let ts = &v["options"]["windows"]["timeseries"];
    assert_eq!(
        (&ts["timeField"], &ts["metaField"]),
        (&"at".into(), &"meta".into()),
        "{v:#}"
    );
    assert!(log.contains("window summaries: TimeSeries"), "{log}");
    assert_eq!(v["options"]["windows"]["expireAfterSeconds"], 3600, "{v:#}");
}

/// Dates of the relaxed extended JSON pymongo prints, as Unix ms (the
/// test crate has no date library; the format is fixed).
pub(crate) mod chrono_free {
    pub type Millis = i64;

    /// "2026-11-24T13:35:55.799Z" → ms since the epoch.
    pub fn parse(s: &str) -> Millis {
        let n = |a: usize, b: usize| s[a..b].parse::<i64>().unwrap();
        let (y, mo, d) = (n(0, 4), n(5, 7), n(8, 10));
        let (h, mi, sec) = (n(11, 13), n(14, 16), n(17, 19));
        let ms = if s.as_bytes().get(19) == Some(&b'.') {
            n(20, 23)
        } else {
            0
        };
        // Days from the civil date (Howard Hinnant's algorithm).
        let y = if mo <= 2 { y - 1 } else { y };
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let mp = (mo + 9) % 12;
        let doy = (153 * mp + 2) / 5 + d - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146_097 + doe - 719_468;
        ((days * 24 + h) * 60 + mi) * 60_000 + sec * 1000 + ms
    }

    #[test]
    fn parses_the_epoch_and_a_date() {
        assert_eq!(parse("1970-01-01T00:00:00Z"), 0);
        assert_eq!(parse("2023-11-14T22:13:20.123Z"), 1_700_000_000_123);
    }
}

#[test]
fn fleet_a_store_killed_mid_run_gets_each_transition_once_from_the_spool() {
    let _serial = mdiag_tests::serial();
    require_root();
    let mut server = store(true);
    let uri = server.uri();
    let dir = tempfile::tempdir().unwrap();
    let w = Duration::from_secs(60);
    let (mut agent, addr, planted) = start_firing(dir.path(), &uri, "fleet-b");
    wait_store(&uri, "mdiag", w, |v| transitions(v).len() == 2);

    // The store dies while the finding fires; the finding resolves meanwhile.
    server.kill();
    agent.wait_for(&["fleet store", "unreachable"], w);
    let fixed = Keepalive::set(120);
    agent.wait_for(
        &["finding host.tcp_keepalive on host", "firing → resolved"],
        w,
    );
    wait_metric(&addr, "mdiag_fleet_spool_records", w, |x| x >= 2.0);
    assert_eq!(metric(&addr, "mdiag_fleet_up"), Some(0.0));
    assert!(metric(&addr, "mdiag_fleet_spool_bytes").is_some_and(|b| b > 0.0));
    // The spool on disk holds the resolution: a copy of it, read by the
    // spool's own reader (a copy taken while appends go on may end in a
    // torn record, which the reader cuts).
    let spool = dir.path().join("state/spool");
    let copy = tempfile::tempdir().unwrap();
    let copied = copy.path().join("spool");
    std::fs::create_dir_all(&copied).unwrap();
    for e in std::fs::read_dir(&spool).unwrap().flatten() {
        std::fs::copy(e.path(), copied.join(e.file_name())).unwrap();
    }
    // From the start of what is kept: the same records again, delivered or not.
    let _ = std::fs::remove_file(copied.join("ack"));
    let spool_cfg = mdiag::fleet::spool::SpoolConfig {
        dir: copied.clone(),
        max_bytes: 64 << 20,
        max_age: Duration::from_secs(3600),
    };
    let (mut reader, _) = mdiag::fleet::spool::Spool::open(spool_cfg).unwrap();
    let records = reader.peek(100_000).unwrap();
    drop(reader);
    let resolved = records
        .iter()
        .filter(|(_, r)| {
            matches!(r, mdiag::fleet::spool::Record::Finding(e) if e.to == "resolved" && e.rule == RULE)
        })
        .count();
    assert_eq!(resolved, 1, "{} records in the spool", records.len());
    // Still down: nothing of the resolution reached the store.
    agent.drain_for(Duration::from_secs(2));

    server.restart();
    // The sender may be in a backoff of up to a minute.
    let w2 = Duration::from_secs(150);
    agent.wait_for(&["fleet store", " reachable"], w2);
    wait_metric(&addr, "mdiag_fleet_spool_records", w2, |x| x == 0.0);
    let v = wait_store(&uri, "mdiag", w, |v| transitions(v).len() >= 3);
    let (status, log) = agent.stop();
    // The planted value back only now: back at 7200, it would fire again.
    drop(fixed);
    drop(planted);
    assert!(status.success(), "{status:?}\n{log}");
    assert_eq!(
        transitions(&v),
        ["inactive→pending", "pending→firing", "firing→resolved"],
        "{v:#}"
    );
    assert_eq!(episodes(&v).len(), 1, "{v:#}");
    assert_eq!(episodes(&v)[0]["state"], "resolved");
    assert_eq!(log.matches("unreachable").count(), 1, "{log}");
    // Read once the agent is stopped: it wrote windows up to the end.
    let windows_before = read_store(&uri, "mdiag")["windows"]
        .as_array()
        .unwrap()
        .len();

    // The same spool replayed by a fresh sender: nothing new.
    let mut fleet_cfg = mdiag::fleet::config::FleetConfig::parse(
        &format!("[fleet]\nuri = \"{uri}\"\nhost = \"fleet-b\"\nretention = \"2h\"\nwindow_retention = \"1h\"\n"),
        Path::new("test.toml"),
    )
    .unwrap()
    .unwrap();
    fleet_cfg.replay_rate = 1000.0;
    let fleet =
        mdiag::fleet::sender::Fleet::start(fleet_cfg, copy.path(), |l| eprintln!("{l}")).unwrap();
    let stats = delivered(&fleet);
    assert_eq!(stats.delivered as usize, records.len(), "{stats:?}");
    assert_eq!(stats.dropped, 0, "{stats:?}");
    drop(fleet);
    let again = read_store(&uri, "mdiag");
    assert_eq!(transitions(&again), transitions(&v), "{again:#}");
    assert_eq!(episodes(&again).len(), 1);
    let windows = again["windows"].as_array().unwrap();
    assert_eq!(
        windows.len(),
        windows_before,
        "a replayed window was written twice"
    );
    let mut keys: Vec<String> = windows
        .iter()
        .map(|w| format!("{}|{}", w["meta"], w["at"]))
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), windows.len());
}

/// A store whose `windows` is already a plain collection (the fallback a
/// server without time-series collections gets): used as it is, with a
/// TTL index on `at` and deterministic `_id`s; a window written twice is
/// one document; a changed retention changes the TTL.
#[test]
fn fleet_windows_fall_back_to_a_plain_collection_with_a_ttl() {
    let _serial = mdiag_tests::serial();
    require_root();
    // TTL monitor off: these windows of 2023 are past the 1 h retention, and
    // mongod's monitor (every second here) would remove them before they are
    // read; what is checked is the index, not a TTL pass.
    let server = store(false);
    let uri = server.uri();
    pymongo(&uri, "plain", "db.create_collection('windows')");
    let parse = |retention: &str| {
        mdiag::fleet::config::FleetConfig::parse(
            &format!("[fleet]\nuri = \"{uri}\"\ndatabase = \"plain\"\nhost = \"h\"\nwindow_retention = \"{retention}\"\n"),
            Path::new("test.toml"),
        )
        .unwrap()
        .unwrap()
    };
    let window = |ms: i64| {
        mdiag::fleet::spool::Record::Window(mdiag::fleet::schema::WindowDoc {
            at: bson::DateTime::from_millis(ms),
            meta: mdiag::fleet::schema::WindowMeta {
                host: "h".into(),
                target: "mongod:27017".into(),
            },
            seconds: 60.0,
            facts: bson::doc! { "sched": { "involuntary_share": 0.5 } },
            held: vec![],
        })
    };
    let state = tempfile::tempdir().unwrap();
    let records = [
        window(1_700_000_000_000),
        window(1_700_000_060_000),
        window(1_700_000_000_000),
    ];
    for (retention, secs) in [("1h", 3600), ("2h", 7200)] {
        let fleet = mdiag::fleet::sender::Fleet::start(parse(retention), state.path(), |l| {
            eprintln!("{l}")
        })
        .unwrap();
        fleet.submit(&records).unwrap();
        delivered(&fleet);
        drop(fleet);
        let v = read_store(&uri, "plain");
        assert_eq!(v["collections"]["windows"], "collection", "{v:#}");
        assert_eq!(v["windows"].as_array().unwrap().len(), 2, "{v:#}");
        let ttl = v["indexes"]["windows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == "at_ttl")
            .cloned()
            .unwrap_or_else(|| panic!("no TTL index: {v:#}"));
        assert_eq!(ttl["expireAfterSeconds"], secs, "{ttl}");
        check_indexes(&v);
    }
}

/// Transitions delivered out of order and twice: each stored once, and the
/// episode's state is the latest transition's whatever the order. Then
/// mongod's TTL monitor removes that episode (resolved long ago) and no other.
#[test]
fn fleet_late_and_repeated_transitions_never_regress_an_episode() {
    let _serial = mdiag_tests::serial();
    require_root();
    // mongod's TTL monitor off until the test has read the expired episode
    // (on, it would remove it first); switched on below.
    let server = store(false);
    let uri = server.uri();
    let cfg = mdiag::fleet::config::FleetConfig::parse(
        &format!(
            "[fleet]\nuri = \"{uri}\"\ndatabase = \"order\"\nhost = \"h\"\nretention = \"1h\"\n"
        ),
        Path::new("test.toml"),
    )
    .unwrap()
    .unwrap();
    let event_of = |rule: &str, from: &str, to: &str, start: i64, at: i64| {
        mdiag::fleet::spool::Record::Finding(mdiag::fleet::schema::FindingEvent {
            host: "h".into(),
            rule: rule.into(),
            target: "mongod:27017".into(),
            title: "t".into(),
            from: from.into(),
            to: to.into(),
            at: bson::DateTime::from_millis(at),
            episode_start: bson::DateTime::from_millis(start),
            facts: mdiag::agent::outbox::host_facts(None),
        })
    };
    let event = |from: &str, to: &str, at: i64| event_of(RULE, from, to, 1_000_000, at);
    let resolved = event("firing", "resolved", 1_300_000);
    // Beside it, another rule's episodes of now: one open, one resolved
    // (both to outlive the TTL pass below).
    let now = bson::DateTime::now().timestamp_millis();
    let records = [
        resolved.clone(),
        event("pending", "firing", 1_200_000),
        event("inactive", "pending", 1_000_000),
        resolved,
        event("pending", "firing", 1_200_000),
        event_of(OTHER, "inactive", "pending", now - 1_000, now - 1_000),
        event_of(OTHER, "inactive", "firing", now - 60_000, now - 60_000),
        event_of(OTHER, "firing", "resolved", now - 60_000, now),
    ];
    let state = tempfile::tempdir().unwrap();
    let fleet =
        mdiag::fleet::sender::Fleet::start(cfg, state.path(), |l| eprintln!("{l}")).unwrap();
    fleet.submit(&records).unwrap();
    assert_eq!(delivered(&fleet).delivered, 8);
    drop(fleet);
    let v = read_store(&uri, "order");
    let eps = episodes(&v);
    assert_eq!(eps.len(), 1, "{v:#}");
    let mut t = transitions(&v);
    t.sort();
    assert_eq!(t, ["firing→resolved", "inactive→pending", "pending→firing"]);
    assert_eq!(eps[0]["state"], "resolved", "{v:#}");
    let date = |x: &Value| chrono_free::parse(x["$date"].as_str().unwrap());
    assert_eq!(date(&eps[0]["since"]), 1_300_000);
    assert_eq!(date(&eps[0]["expire_at"]), 1_300_000 + 3_600_000);

    // The TTL index removes an episode once its `expire_at` is past (an
    // hour after 1970's resolution here), and nothing else: the open
    // episode and the one resolved now stay. mongod's TTL monitor, switched
    // on now, passes every second (ttlMonitorSleepSecs=1); its own count
    // of passes (serverStatus metrics.ttl.passes) says when one has run
    // since, and its count of deletions that it removed just the one.
    let others = |v: &Value| -> Vec<String> {
        let mut s: Vec<String> = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["rule"] == OTHER)
            .map(|d| d["state"].as_str().unwrap().to_owned())
            .collect();
        s.sort();
        s
    };
    assert_eq!(others(&v), ["pending", "resolved"], "{v:#}");
    let ttl = |server: &Mongod| {
        let status = server.server_status();
        let t = status
            .get_document("metrics")
            .unwrap()
            .get_document("ttl")
            .unwrap();
        let n = |k: &str| {
            t.get_i64(k)
                .unwrap_or_else(|_| t.get_i32(k).map(i64::from).unwrap())
        };
        (n("passes"), n("deletedDocuments"))
    };
    let (passes, deleted) = ttl(&server);
    server.command(bson::doc! { "setParameter": 1, "ttlMonitorEnabled": true });
    // Two passes after: one may have begun before the episode was read.
    let deadline = Instant::now() + Duration::from_secs(30);
    while ttl(&server).0 < passes + 2 {
        assert!(
            Instant::now() < deadline,
            "no TTL pass in 30 s: {:?}",
            ttl(&server)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        ttl(&server).1 - deleted,
        1,
        "the TTL monitor deleted one document"
    );
    let v = read_store(&uri, "order");
    assert!(episodes(&v).is_empty(), "expired, still there: {v:#}");
    assert_eq!(others(&v), ["pending", "resolved"], "{v:#}");
}
