//! Replication and host figures of a real single-node replica set (mongod
//! 6.0.5, `tests/src/mongod.rs`) under `mdiag-mongoload`, both ways mdiag
//! reads them, each held against mongod's own answers read by the test
//! through the driver (ground truth outside mdiag):
//!
//! - `record --uri`: the polled replSetGetStatus (this member PRIMARY,
//!   healthy, its `host:port`), the oplog's configured size (collStats
//!   `maxSize`) and its first entry (`ts`, which cannot move while the
//!   oplog is not full), the figures of the host (memory from
//!   /proc/meminfo, the data file system's size from statvfs);
//! - `explain --ftdc` on the server's own `diagnostic.data`: the same
//!   replica set and oplog from FTDC's replSetGetStatus and
//!   `local.oplog.rs.stats`, and every replication and system rule
//!   assessed (found or passed, never "not assessed");
//! - a two-member set whose secondary is stopped (SIGSTOP): the primary's
//!   replSetGetStatus says DOWN, health 0, and `replication.member_unhealthy`
//!   names that member, live and from the primary's FTDC; that member is
//!   delayed, and each live sample holds every member's delay as
//!   replSetGetConfig says.
//!
//! Cost: about 40 s and 60 s (mongod starts, initial sync, 12 s and 4 s of
//! recording, the heartbeat timeout), with every CPU loaded too.

use bson::{Document, doc};
use mdiag::recording::{Recording, read_file};
use mdiag_tests::{
    mongod::{Load, Mongod, Options},
    require_root, run_mdiag, start_record_until,
};
use serde_json::Value;

/// The rules this test wants assessed, live and from FTDC.
const RULES: [&str; 6] = [
    "replication.lag",
    "replication.member_unhealthy",
    "replication.oplog_window",
    "system.disk_full",
    "system.disk_latency",
    "system.cpu_steal",
];

/// What mongod itself says of its oplog: (maxSize, size, first ts, last ts).
fn oplog_truth(uri: &str) -> (i64, i64, i64, i64) {
    let uri = format!("{uri}/?directConnection=true&serverSelectionTimeoutMS=10000");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = mongodb::Client::with_uri_str(&uri).await.unwrap();
        let local = client.database("local");
        let stats = local
            .run_command(doc! { "collStats": "oplog.rs" })
            .await
            .unwrap();
        let number = |k: &str| match stats.get(k) {
            Some(bson::Bson::Int32(i)) => i64::from(*i),
            Some(bson::Bson::Int64(i)) => *i,
            Some(bson::Bson::Double(d)) => *d as i64,
            other => panic!("collStats {k}: {other:?}"),
        };
        let oplog = local.collection::<Document>("oplog.rs");
        let mut ts = [0i64; 2];
        for (slot, order) in ts.iter_mut().zip([1, -1]) {
            let d = oplog
                .find_one(doc! {})
                .sort(doc! { "$natural": order })
                .await
                .unwrap()
                .expect("an oplog entry");
            *slot = i64::from(d.get_timestamp("ts").unwrap().time);
        }
        let out = (number("maxSize"), number("size"), ts[0], ts[1]);
        client.shutdown().await;
        out
    })
}

/// `mdiag record --duration DURATION --uri URI -o OUT`, to its end.
fn record(uri: &str, duration: &str, out: &std::path::Path) {
    let (child, stderr) = start_record_until(
        &[
            "--duration",
            duration,
            "--uri",
            uri,
            "-o",
            out.to_str().unwrap(),
        ],
        &["probes attached", "mongod answers serverStatus"],
    );
    let o = child.wait_with_output().unwrap();
    let err = stderr.join().unwrap();
    assert!(o.status.success(), "mdiag record failed:\n{err}");
}

fn explain_json(args: &[&str]) -> Value {
    let mut all = vec!["explain"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--format", "json"]);
    let o = run_mdiag(&all);
    assert!(
        o.status.success(),
        "mdiag {all:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Every rule of [`RULES`] is in `findings` or `passed`.
fn assert_assessed(report: &Value, how: &str) {
    let ids = |list: &str| -> Vec<String> {
        report[list]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["rule_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let (mut found, passed) = (ids("findings"), ids("passed"));
    found.extend(ids("checklist"));
    for rule in RULES {
        assert!(
            found.iter().chain(&passed).any(|r| r == rule),
            "{how}: {rule} not assessed: {}",
            report["not_assessed"]
        );
    }
}

/// The size of the file system holding `path`, as coreutils' `stat -f`
/// reads it (total blocks times the fundamental block size).
fn statvfs_capacity(path: &std::path::Path) -> u64 {
    let o = std::process::Command::new("stat")
        .args(["-f", "-c", "%b %S"])
        .arg(path)
        .output()
        .expect("stat -f");
    let text = String::from_utf8_lossy(&o.stdout);
    let mut n = text.split_whitespace().map(|x| x.parse::<u64>().unwrap());
    n.next().unwrap() * n.next().unwrap()
}

fn mem_total_kb() -> i64 {
    let text = std::fs::read_to_string("/proc/meminfo").unwrap();
    let line = text.lines().find(|l| l.starts_with("MemTotal:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn replication_and_host_figures_of_a_real_replica_set_live_and_from_ftdc() {
    let _serial = mdiag_tests::serial();
    require_root();
    let server = Mongod::start_with(Options {
        repl_set: Some("rs0".into()),
        ..Options::default()
    });
    let uri = server.uri();
    let load = Load::start(&uri, 2);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("repl.mdiag");
    record(&uri, "12s", &out);
    let (_, total) = load.finish();
    assert!(total["ops"].as_u64().unwrap_or(0) > 0, "no load: {total}");

    // Ground truth, after the recording.
    let status = server.command(doc! { "replSetGetStatus": 1 });
    let me = status.get_array("members").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    let name = me.get_str("name").unwrap().to_owned();
    let (max_size, size_after, first_ts, last_ts) = oplog_truth(&uri);

    // The polled samples: replSetGetStatus every 10 s, so at least two in 12 s.
    let rec: Recording = read_file(&out).unwrap();
    let repl: Vec<_> = rec
        .slices
        .iter()
        .filter_map(|s| s.mongod.as_ref()?.repl.as_ref())
        .collect();
    assert!(repl.len() >= 2, "{} replication samples", repl.len());
    for r in &repl {
        assert_eq!(r.my_state, Some(1), "{r:?}");
        assert_eq!(r.members.len(), 1);
        let m = &r.members[0];
        assert_eq!(m.name.as_deref(), Some(name.as_str()));
        assert!(m.is_self && m.healthy(), "{m:?}");
        assert_eq!(r.oplog_max_bytes, Some(max_size));
        assert_eq!(
            r.oplog_first_s,
            Some(first_ts),
            "the oplog is not full: its first entry stays"
        );
        assert!(r.oplog_last_s.unwrap() <= last_ts);
        assert!(r.oplog_size_bytes.unwrap() <= size_after);
    }
    assert!(
        repl.last().unwrap().oplog_insert_bytes > repl[0].oplog_insert_bytes,
        "the load wrote no oplog bytes"
    );
    // The host beside each answered poll.
    let system: Vec<_> = rec
        .slices
        .iter()
        .filter_map(|s| s.mongod.as_ref()?.system.as_ref())
        .collect();
    assert!(system.len() >= 10, "{} host samples", system.len());
    assert_eq!(system[0].mem_total_kb, Some(mem_total_kb()));
    let space = system[0].mounts.values().next().expect("the data mount");
    assert_eq!(space.capacity as u64, statvfs_capacity(&server.db_path()));

    // The facts and rules of the live recording.
    let live = explain_json(&[out.to_str().unwrap()]);
    let f = &live["facts"]["replication"];
    assert_eq!(f["members"], 1);
    assert_eq!(f["my_state_name"], "PRIMARY");
    assert_eq!(f["unhealthy_members_max"], 0);
    assert_eq!(f["self_port"], i64::from(server.port()));
    assert_eq!(f["oplog_max_bytes"], max_size);
    assert!(f["oplog_write_bytes_per_s"].as_f64().unwrap() > 0.0, "{f}");
    assert!(f["oplog_window_hours"].as_f64().unwrap() > 0.0, "{f}");
    let s = &live["facts"]["system"];
    assert!(s["steal_share"].as_f64().is_some(), "{s}");
    assert!(s["data_fs_used_share"].as_f64().is_some(), "{s}");
    assert_assessed(&live, "record --uri");

    // mongod's own FTDC of the same seconds.
    let ftdc = explain_json(&["--ftdc", server.diagnostic_data().to_str().unwrap()]);
    let f = &ftdc["facts"]["replication"];
    assert_eq!(f["source"], "ftdc");
    assert_eq!(f["members"], 1);
    assert_eq!(f["my_state"], 1);
    assert_eq!(f["self_port"], i64::from(server.port()));
    assert_eq!(f["oplog_max_bytes"], max_size);
    let s = &ftdc["facts"]["system"];
    assert_eq!(s["mem_total_bytes"], mem_total_kb() * 1024, "{s}");
    assert_assessed(&ftdc, "explain --ftdc");
    eprintln!(
        "live: {} replication samples, oplog {} B/s, window {} h; ftdc: window {} h, \
         data disk {}, mount {}",
        repl.len(),
        live["facts"]["replication"]["oplog_write_bytes_per_s"],
        live["facts"]["replication"]["oplog_window_hours"],
        f["oplog_window_hours"],
        s["data_disk"],
        s["data_mount"],
    );
}

/// SIGCONT to a stopped mongod when dropped, so that its own drop (SIGTERM)
/// is heard even when the test failed while it was stopped.
struct Resume<'a>(&'a Mongod);

impl Drop for Resume<'_> {
    fn drop(&mut self) {
        self.0.signal(libc::SIGCONT);
    }
}

/// The primary's view of member `i`: (health, state); the state of a member
/// it cannot reach is 8 (DOWN; stateStr "(not reachable/healthy)").
fn member_view(primary: &Mongod, i: usize) -> (f64, i32) {
    let status = primary.command(doc! { "replSetGetStatus": 1 });
    let members = status.get_array("members").unwrap();
    let m = members[i].as_document().unwrap();
    let health = match m.get("health") {
        Some(bson::Bson::Double(d)) => *d,
        Some(bson::Bson::Int32(i)) => f64::from(*i),
        other => panic!("health: {other:?}"),
    };
    (health, m.get_i32("state").unwrap())
}

/// Waits until the primary sees member `i` in `state`.
fn wait_member(primary: &Mongod, i: usize, state: i32, limit: std::time::Duration) {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let (_, now) = member_view(primary, i);
        if now == state {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "member {i} is {now}, not {state}, after {limit:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
}

/// The second member's configured delay (secondaryDelaySecs), s.
const DELAY_S: i64 = 5;

#[test]
fn a_stopped_secondary_is_an_unhealthy_member_live_and_from_ftdc() {
    let _serial = mdiag_tests::serial();
    require_root();
    let set = || Options {
        repl_set: Some("rs1".into()),
        ..Options::default()
    };
    // The primary rewrites metrics.interim every 2 samples, so its FTDC
    // shows the stopped member within seconds.
    let primary = Mongod::start_with(Options {
        extra: vec![
            "--setParameter".into(),
            "diagnosticDataCollectionSamplesPerInterimUpdate=2".into(),
        ],
        ..set()
    });
    let second = Mongod::start_with(Options {
        join_later: true,
        ..set()
    });
    // Added without a vote, so the primary keeps its majority while the
    // secondary is stopped; delayed (a hidden, priority 0 member), so the
    // recording reads its configured delay from replSetGetConfig.
    let mut config = primary
        .command(doc! { "replSetGetConfig": 1 })
        .get_document("config")
        .unwrap()
        .clone();
    let version = config.get_i32("version").unwrap();
    config.insert("version", version + 1);
    let host = format!("127.0.0.1:{}", second.port());
    let mut members = config.get_array("members").unwrap().clone();
    members.push(bson::Bson::Document(
        doc! { "_id": 1, "host": &host, "votes": 0, "priority": 0, "hidden": true,
        "secondaryDelaySecs": DELAY_S },
    ));
    config.insert("members", members);
    primary.command(doc! { "replSetReconfig": config });
    wait_member(&primary, 1, 2, std::time::Duration::from_secs(90));

    // Stopped: its heartbeats stop and the primary marks it DOWN (after
    // heartbeatTimeoutSecs, 10 s by default).
    second.signal(libc::SIGSTOP);
    let _resume = Resume(&second);
    wait_member(&primary, 1, 8, std::time::Duration::from_secs(60));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("down.mdiag");
    record(&primary.uri(), "4s", &out);
    // Ground truth: still DOWN, health 0, as the primary says.
    assert_eq!(member_view(&primary, 1), (0.0, 8));

    let want = format!("{host} (DOWN, health 0)");
    let unhealthy = |report: &Value| {
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["rule_id"] == "replication.member_unhealthy")
            .map(|f| f["evidence"].to_string())
    };
    let live = explain_json(&[out.to_str().unwrap()]);
    let evidence = unhealthy(&live).unwrap_or_else(|| {
        panic!(
            "record --uri: no finding; facts {}",
            live["facts"]["replication"]
        )
    });
    assert!(evidence.contains(&want), "record --uri: {evidence}");
    assert_eq!(live["facts"]["replication"]["members"], 2);
    // Each member's delay as the set's configuration holds it.
    let config = primary.command(doc! { "replSetGetConfig": 1 });
    let configured: Vec<(i64, i64)> = config
        .get_document("config")
        .unwrap()
        .get_array("members")
        .unwrap()
        .iter()
        .map(|m| {
            let m = m.as_document().unwrap();
            let n = |k: &str| match m.get(k) {
                Some(bson::Bson::Int32(i)) => i64::from(*i),
                Some(bson::Bson::Int64(i)) => *i,
                other => panic!("{k}: {other:?}"),
            };
            (n("_id"), n("secondaryDelaySecs"))
        })
        .collect();
    assert_eq!(configured, vec![(0, 0), (1, DELAY_S)]);
    let rec: Recording = read_file(&out).unwrap();
    let samples: Vec<_> = rec
        .slices
        .iter()
        .filter_map(|s| s.mongod.as_ref()?.repl.as_ref())
        .collect();
    assert!(!samples.is_empty(), "no replication sample");
    for r in &samples {
        let recorded: Vec<(i64, i64)> = r
            .members
            .iter()
            .map(|m| (m.id, m.delay_s.expect("a delay read live")))
            .collect();
        assert_eq!(recorded, configured, "{r:?}");
    }
    assert_eq!(live["facts"]["replication"]["delays_read"], true);
    assert_eq!(live["facts"]["replication"]["delayed_members"], 1);
    // FTDC: the samples since the stop reach metrics.interim within seconds.
    let ftdc = primary.diagnostic_data();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let evidence = loop {
        let report = explain_json(&["--ftdc", ftdc.to_str().unwrap()]);
        if let Some(e) = unhealthy(&report) {
            assert_eq!(report["facts"]["replication"]["source"], "ftdc");
            break e;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "explain --ftdc: no finding after 30 s; facts {}",
            report["facts"]["replication"]
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    assert!(evidence.contains(&want), "explain --ftdc: {evidence}");
}
