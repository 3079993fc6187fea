//! The rules on mongod's own figures (queued operations, checkpoint duration
//! against the interval, cache triggers, connections near the limit,
//! connection churn, page faults, the journal's syncs, assertions) on the real
//! mongod 6.0.5 under load, live
//! (`record --uri`): each is assessed, and the figures they read agree with
//! mongod's own serverStatus read by the test through the driver (outside
//! mdiag) and with the `--syncdelay` the server was started with. The host
//! checks' figures too: the target's limits against `/proc/PID/limits`, the
//! kernel's against `/proc/sys`, and every mongod of the host (a second one
//! started for it) with the cache its command line gives.

use bson::Document;
use mdiag_tests::{
    mongod::{Load, Mongod, Options},
    require_root, run_mdiag, start_record_until,
};

/// New clients made during the recording (each opens its own connections).
const CLIENTS: usize = 150;

const RULES: &[&str] = &[
    "host.memlock",
    "host.processes_limit",
    "host.kernel_task_limits",
    "host.several_mongod",
    "mongod.queued_operations",
    "mongod.connections_limit",
    "mongod.connection_churn",
    "mongod.page_faults",
    "storage.journal_sync",
    "mongod.flow_control",
    "mongod.asserts",
    "wiredtiger.checkpoint_duration",
    "wiredtiger.cache_pressure",
];

/// The soft limit of `name` in /proc/PID/limits (the largest integer when
/// unlimited, as facts hold it).
fn soft_limit(pid: u32, name: &str) -> i64 {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits.lines().find(|l| l.starts_with(name)).unwrap();
    let soft = line[name.len()..].split_whitespace().next().unwrap();
    if soft == "unlimited" {
        i64::MAX
    } else {
        soft.parse().unwrap()
    }
}

fn sysctl(path: &str) -> i64 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

fn int(d: &Document, path: &[&str]) -> i64 {
    let mut cur = d;
    for key in &path[..path.len() - 1] {
        cur = cur
            .get_document(key)
            .unwrap_or_else(|e| panic!("{key}: {e}"));
    }
    let last = path[path.len() - 1];
    match cur.get(last) {
        Some(bson::Bson::Int32(v)) => i64::from(*v),
        Some(bson::Bson::Int64(v)) => *v,
        Some(bson::Bson::Double(v)) => *v as i64,
        other => panic!("{path:?}: {other:?}"),
    }
}

#[test]
fn mongod_figure_rules_are_assessed_live_and_read_mongods_own_numbers() {
    let _serial = mdiag_tests::serial();
    require_root();
    let server = Mongod::start_with(Options {
        sync_delay: Some(5),
        ..Options::default()
    });
    let second = Mongod::start();
    let load = Load::start(&server.uri(), 4);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("live.mdiag");
    let (child, stderr) = start_record_until(
        &[
            "--duration",
            "10s",
            "--uri",
            &server.uri(),
            "-o",
            out.to_str().unwrap(),
        ],
        &["probes attached", "mongod answers serverStatus"],
    );
    // Churn: a new client (new connections) for each of CLIENTS commands,
    // well inside the recording; mongod counts them in
    // connections.totalCreated, read before and after by the test. Each
    // command inserts a duplicate key: an error of the request, which
    // mongod counts as a user assertion (asserts.user).
    let dup = bson::doc! { "insert": "dups", "documents": [{ "_id": 1 }] };
    server.command(dup.clone());
    let before = server.server_status();
    let t0 = std::time::Instant::now();
    for _ in 0..CLIENTS {
        let reply = server.command(dup.clone());
        assert!(reply.get_array("writeErrors").is_ok(), "{reply}");
    }
    let after = server.server_status();
    let between_s = t0.elapsed().as_secs_f64();
    let o = child.wait_with_output().unwrap();
    drop(load);
    let err = stderr.join().unwrap();
    assert!(o.status.success(), "mdiag record failed: {err}");
    let json = run_mdiag(&["explain", out.to_str().unwrap(), "--format", "json"]);
    assert!(json.status.success());
    let r: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let m = &r["facts"]["mongod"];
    eprintln!("{}", serde_json::to_string_pretty(m).unwrap());

    // Every rule is assessed: a finding or passed, never "not assessed".
    for id in RULES {
        let listed = |list: &str| {
            r[list]
                .as_array()
                .unwrap()
                .iter()
                .any(|f| f["rule_id"] == *id)
        };
        assert!(
            listed("findings") || listed("checklist") || listed("passed"),
            "{id} not assessed: {}",
            r["not_assessed"]
        );
    }
    // The interval is the server's --syncdelay.
    assert_eq!(m["checkpoint_interval_s"].as_f64(), Some(5.0), "{m}");
    // The limit mongod reports: current + available, as the driver reads it.
    let limit =
        int(&after, &["connections", "current"]) + int(&after, &["connections", "available"]);
    assert_eq!(m["max_incoming_connections"].as_i64(), Some(limit), "{m}");
    // Connections opened: mongod's own totalCreated around the churn against
    // mdiag's rate over its samples' span (the load's pool was open before;
    // a few more for the test's own serverStatus clients).
    let created = int(&after, &["connections", "totalCreated"])
        - int(&before, &["connections", "totalCreated"]);
    let rate = m["connections_created_per_s"].as_f64().unwrap();
    let span = r["measurements"]["mongod"]["span_s"].as_f64().unwrap();
    eprintln!("{CLIENTS} clients; totalCreated +{created}; mdiag {rate:.2}/s over {span:.1} s");
    assert!(created > 0);
    let from_mdiag = rate * span;
    assert!(
        (from_mdiag - created as f64).abs() <= 0.1 * created as f64 + 10.0,
        "mdiag counts {from_mdiag:.0} new connections, serverStatus {created}"
    );
    // The churn rule's verdict follows its figures: the rate, over at
    // least ten seconds with a sample (a busy host answers fewer polls).
    let fired = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["rule_id"] == "mongod.connection_churn");
    let samples = m["seconds_with_sample"].as_f64().unwrap();
    assert_eq!(
        fired,
        rate >= 10.0 && samples >= 10.0,
        "{rate}/s, {samples} samples"
    );
    // The journal's syncs: WiredTiger's own count between the test's two
    // serverStatus reads, per second of the test's clock, against mdiag's
    // rate over the recording (the load writes all along, so the journal
    // syncs at its steady 100 ms interval in both windows).
    let path = ["wiredTiger", "log", "log sync operations"];
    let truth = (int(&after, &path) - int(&before, &path)) as f64 / between_s;
    let syncs = m["journal_syncs_per_s"].as_f64().unwrap();
    eprintln!("journal syncs: mdiag {syncs:.2}/s, serverStatus {truth:.2}/s over {between_s:.1} s");
    assert!(
        (syncs - truth).abs() <= 0.3 * truth + 1.0 / between_s,
        "journal syncs: mdiag {syncs}/s, serverStatus {truth}/s"
    );
    assert!(m["journal_sync_ms"].as_f64().unwrap() > 0.0, "{m}");
    // Assertions: user assertions counted by mongod between the test's
    // reads (the duplicate keys, and more that the load and the new
    // clients raise all along: 1660 in one run) against mdiag's rate over
    // its span; the server's own checks failed in neither.
    let user = int(&after, &["asserts", "user"]) - int(&before, &["asserts", "user"]);
    let from_mdiag = m["user_asserts_per_s"].as_f64().unwrap() * span;
    eprintln!("user assertions: mdiag {from_mdiag:.0}, serverStatus {user}");
    assert!(user >= CLIENTS as i64, "{user}");
    assert!(
        (from_mdiag - user as f64).abs() <= 0.1 * user as f64 + 10.0,
        "mdiag counts {from_mdiag:.0} user assertions, serverStatus {user}"
    );
    let server_checks = |d: &Document| {
        ["regular", "msg", "tripwire"]
            .iter()
            .map(|k| int(d, &["asserts", k]))
            .sum::<i64>()
    };
    assert_eq!(server_checks(&after), server_checks(&before));
    assert_eq!(m["server_asserts"].as_i64(), Some(0), "{m}");

    // WiredTiger's triggers are its defaults (no configString).
    assert_eq!(m["eviction_trigger"].as_f64(), Some(95.0));
    assert_eq!(m["eviction_dirty_trigger"].as_f64(), Some(20.0));
    // Page faults: mongod's own counter, never more than it counted.
    let faults =
        int(&after, &["extra_info", "page_faults"]) - int(&before, &["extra_info", "page_faults"]);
    let fault_rate = m["page_faults_per_s"].as_f64().unwrap();
    assert!(
        fault_rate * span <= faults as f64 + 1.0,
        "{fault_rate} vs {faults}"
    );
    // The queue figures are a mean and a share of the samples.
    let share = m["queued_share"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&share));
    assert!(m["queue_mean"].as_f64().unwrap() <= m["queue_max"].as_f64().unwrap() + 1e-9);

    // The host checks' figures against /proc.
    let t = &r["facts"]["tuning"];
    let pid = server.pid();
    assert_eq!(
        t["nproc_soft"].as_i64(),
        Some(soft_limit(pid, "Max processes")),
        "{t}"
    );
    assert_eq!(
        t["memlock_soft"].as_i64(),
        Some(soft_limit(pid, "Max locked memory")),
        "{t}"
    );
    assert_eq!(
        t["pid_max"].as_i64(),
        Some(sysctl("/proc/sys/kernel/pid_max"))
    );
    assert_eq!(
        t["threads_max"].as_i64(),
        Some(sysctl("/proc/sys/kernel/threads-max"))
    );
    assert_eq!(
        t["file_max"].as_i64(),
        Some(sysctl("/proc/sys/fs/file-max"))
    );
    // Both mongods of this test (other tests' may run too), each with the
    // cache its command line gives (--wiredTigerCacheSizeGB 0.25).
    let rec = mdiag::recording::read_file(&out).unwrap();
    let mongods = rec.host.system.unwrap().mongods.unwrap();
    for p in [server.pid(), second.pid()] {
        let m = mongods
            .iter()
            .find(|m| m.pid == p)
            .unwrap_or_else(|| panic!("mongod {p} not listed: {mongods:?}"));
        assert_eq!(m.cache_size_mb, Some(256), "{m:?}");
        assert_eq!(m.cache_from, "--wiredTigerCacheSizeGB");
    }
    assert!(t["mongod_instances"].as_i64().unwrap() >= 2, "{t}");
}
