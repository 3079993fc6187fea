//! Rules about mongod's own settings, judged on real processes.
//!
//! - The real mongod 6.0.5 (gperftools TCMalloc): `memory.thp_legacy_tcmalloc`
//!   must say what mongod's own startup check says for this host's THP
//!   setting (read by the test from /sys/kernel/mm/transparent_hugepage and
//!   /proc/PID/status, outside mdiag): a finding only for "always" with the
//!   process not opted out; on a `madvise` host, passed. The fix's mongosh
//!   reaches this mongod's port, from the recording and from its FTDC
//!   directory alone.
//! - A CPU spinner named `spin`: every rule that speaks of mongod's own
//!   settings is not applicable, naming the process; none fires.

use std::io::Write;
use std::process::Command;

use mdiag_tests::{
    finish, mongod::Mongod, require_root, run_mdiag, spawn_ready, start_record_until,
};

const SPIN: &str = env!("CARGO_BIN_EXE_mdiag-spin");

/// The selected word of a THP sysfs file ("always [madvise] never" → "madvise").
fn thp(file: &str) -> String {
    let s = std::fs::read_to_string(format!("/sys/kernel/mm/transparent_hugepage/{file}"))
        .expect("THP sysfs file");
    let start = s.find('[').expect("a selected value") + 1;
    let end = s[start..].find(']').expect("closing bracket") + start;
    s[start..end].to_owned()
}

/// The process's `THP_enabled` line of /proc/PID/status, if the kernel has it.
fn thp_enabled(pid: u32) -> Option<bool> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:"))
        .map(|v| v.trim() == "1")
}

/// `mdiag explain --format json` of `rec`.
fn explain(rec: &std::path::Path) -> serde_json::Value {
    let out = run_mdiag(&["explain", rec.to_str().unwrap(), "--format", "json"]);
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The list ("findings", "passed", ...) holding `id`, and its entry.
pub(crate) fn where_is(report: &serde_json::Value, id: &str) -> (String, serde_json::Value) {
    for list in [
        "findings",
        "checklist",
        "passed",
        "not_assessed",
        "not_applicable",
    ] {
        if let Some(e) = report[list]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["rule_id"] == id)
        {
            return (list.to_owned(), e.clone());
        }
    }
    panic!("{id} in no list");
}

#[test]
fn legacy_thp_rule_says_what_mongod_says_for_this_hosts_setting() {
    let _serial = mdiag_tests::serial();
    require_root();
    let mongod = Mongod::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rec.json");
    let pid = mongod.pid().to_string();
    let uri = mongod.uri();
    let (child, stderr) = start_record_until(
        &[
            "--pid",
            &pid,
            "--uri",
            &uri,
            "--duration",
            "2s",
            "-o",
            out.to_str().unwrap(),
        ],
        &["probes attached", "mongod answers serverStatus"],
    );
    let (status, _, err) = finish(child, stderr);
    assert!(status.success(), "{err}");
    // Ground truth, outside mdiag, read after the recording (settings).
    let enabled = thp("enabled");
    let process = thp_enabled(mongod.pid());
    let report = explain(&out);
    let facts = &report["facts"];
    assert_eq!(facts["tuning"]["thp_enabled"], enabled.as_str());
    match process {
        Some(p) => assert_eq!(facts["tuning"]["thp_process_enabled"], p),
        None => assert!(facts["tuning"].get("thp_process_enabled").is_none()),
    }
    assert_eq!(facts["target"]["process"], "mongod");
    // mongosh in fixes reaches this mongod's own port.
    let args = facts["target"]["mongosh_args"].as_str().unwrap();
    assert!(
        args.contains(&format!(":{}", mongod.port())),
        "{args} does not name port {}",
        mongod.port()
    );
    // From FTDC alone (no --uri, no target): the port mongod reports in
    // its getCmdLineOpts (argv --port here), on 127.0.0.1, no credentials.
    let ftdc = run_mdiag(&[
        "explain",
        "--ftdc",
        mongod.diagnostic_data().to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(ftdc.status.success(), "{ftdc:?}");
    let ftdc: serde_json::Value = serde_json::from_slice(&ftdc.stdout).unwrap();
    assert_eq!(
        ftdc["facts"]["target"]["mongosh_args"],
        format!("mongodb://127.0.0.1:{}/", mongod.port()),
        "{}",
        ftdc["facts"]["target"]
    );
    assert_eq!(ftdc["facts"]["target"]["process"], "mongod");
    let (list, entry) = where_is(&report, "memory.thp_legacy_tcmalloc");
    // mongod 6.0 warns (22178) only when enabled is "always"; a process
    // that turned THP off for itself is not affected.
    let expected = if enabled == "always" && process != Some(false) {
        "findings"
    } else {
        "passed"
    };
    eprintln!("THP enabled [{enabled}], mongod THP_enabled {process:?}: {list}");
    assert_eq!(list, expected, "{entry}");
}

#[test]
fn mongod_rules_are_not_applicable_to_a_spinner_named_spin() {
    let _serial = mdiag_tests::serial();
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let spin = dir.path().join("spin");
    std::fs::copy(SPIN, &spin).unwrap();
    let (mut child, _out) = spawn_ready(Command::new(&spin).args([
        "--threads",
        "3",
        "--spin-ms",
        "3000",
        "--wait-stdin",
        "--linger",
    ]));
    let pid = child.id();
    assert_eq!(
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .unwrap()
            .trim(),
        "spin"
    );
    let out = dir.path().join("rec.json");
    let (rec, stderr) = start_record_until(
        &[
            "--pid",
            &pid.to_string(),
            "--duration",
            "2s",
            "-o",
            out.to_str().unwrap(),
        ],
        &["probes attached"],
    );
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    let (status, _, err) = finish(rec, stderr);
    drop(stdin);
    let _ = child.wait();
    assert!(status.success(), "{err}");
    let report = explain(&out);
    assert_eq!(report["facts"]["target"]["process"], "spin");
    assert_eq!(report["facts"]["target"]["is_mongod"], false);
    let mongod_rules = [
        "host.open_files",
        "host.swappiness",
        "host.numa",
        "host.overcommit",
        "host.tcp_keepalive",
        "memory.dirty_writeback",
        "memory.thp_legacy_tcmalloc",
        "memory.thp_google_tcmalloc",
        "allocator.cpu_hot",
    ];
    for id in mongod_rules {
        let (list, entry) = where_is(&report, id);
        assert_eq!(list, "not_applicable", "{id}: {entry}");
        let reason = entry["reason"].as_str().unwrap();
        assert!(
            reason.starts_with(&format!(
                "about mongod's own settings; the target is `spin` (pid {pid}"
            )),
            "{id}: {reason}"
        );
    }
}
