//! The WiredTiger family on SecantusDB: a MongoDB-wire server in Python with
//! real WiredTiger inside, loaded as a shared object (`_wiredtiger.so` of
//! the Python binding). SecantusDB stays here, not the real mongod: this
//! test needs WiredTiger in a shared object, an attach path that mongod
//! (WiredTiger linked statically) never takes; `real_mongod.rs` checks
//! mongod's. `mdiag record --pid` must find `__wt_txn_checkpoint`
//! through that object's symbols and see every checkpoint a client forces
//! with the `fsync` command, inside the client's own timing of each command.
//!
//! The server comes from the venv `cargo xtask setup` makes; its periodic
//! checkpoints are off (`SECANTUS_CHECKPOINT_SECONDS=0`), so the client's
//! `fsync` commands are the only checkpoints while mdiag records.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use mdiag::recording::read_file;
use mdiag_tests::{require_root, secantus::SecantusServer};

use crate::tcmalloc::{start_record, stop_record};

/// The client: inserts `batches` batches of documents with pymongo and
/// forces a checkpoint with `fsync` after each, timing every `fsync` on
/// CLOCK_MONOTONIC (Python's `time.monotonic_ns`, the clock of the kernel's
/// `bpf_ktime_get_ns`). Prints one JSON line.
const CLIENT: &str = r#"
import json, sys, time
from pymongo import MongoClient
port, batches, per_batch = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
c = MongoClient("127.0.0.1", port, serverSelectionTimeoutMS=20000, directConnection=True)
coll = c.mdiag_test.load
inserted, fsyncs = 0, []
for b in range(batches):
    docs = [{"b": b, "i": i, "pad": "x" * 512} for i in range(per_batch)]
    inserted += len(coll.insert_many(docs).inserted_ids)
    t0 = time.monotonic_ns()
    r = c.admin.command("fsync")
    t1 = time.monotonic_ns()
    assert r.get("ok") == 1.0, r
    fsyncs.append([t0, t1])
print(json.dumps({"inserted": inserted, "count": coll.count_documents({}), "fsyncs": fsyncs}))
"#;

fn python(venv: &Path) -> PathBuf {
    venv.join("bin/python")
}

#[test]
fn checkpoints_of_secantusdb_are_seen_through_its_shared_object() {
    let _serial = mdiag_tests::serial();
    require_root();
    let venv = mdiag_tests::py_venv();
    let server = SecantusServer::start(&[("SECANTUS_CHECKPOINT_SECONDS", "0")]);
    let pid = server.pid();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    assert!(
        maps.contains("_wiredtiger"),
        "the server maps no _wiredtiger*.so:\n{}",
        server.log()
    );

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("secantusdb.mdiag");
    let (rec, stderr) = start_record(&[
        "--duration",
        "120s",
        "--pid",
        &pid.to_string(),
        "-o",
        out.to_str().unwrap(),
    ]);
    const BATCHES: usize = 6;
    let client = Command::new(python(&venv))
        .args(["-c", CLIENT, &server.port().to_string()])
        .args([BATCHES.to_string(), "2000".to_string()])
        .output()
        .expect("run the pymongo client");
    let mdiag_log = stop_record(rec, stderr);
    assert!(
        client.status.success(),
        "client failed: {}\nserver log:\n{}",
        String::from_utf8_lossy(&client.stderr),
        server.log()
    );
    let report: serde_json::Value = serde_json::from_slice(&client.stdout).expect("client report");
    assert_eq!(report["inserted"], BATCHES * 2000, "{report}");
    assert_eq!(report["count"], BATCHES * 2000, "{report}");
    let fsyncs: Vec<(u64, u64)> = report["fsyncs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p[0].as_u64().unwrap(), p[1].as_u64().unwrap()))
        .collect();
    assert_eq!(fsyncs.len(), BATCHES);

    let rec = read_file(&out).unwrap();
    crate::physics::assert_physical(&rec);
    // Its data directory comes from the WiredTiger.lock it holds open, under --storage-path.
    let data = std::fs::canonicalize(server.data_dir()).unwrap();
    let db = rec.host.db_path.as_ref().expect("db_path recorded");
    assert!(
        db.path
            .as_deref()
            .is_some_and(|p| Path::new(p).starts_with(&data)),
        "{db:?} not under {data:?}"
    );
    assert_eq!(
        db.found_by.as_deref(),
        Some("open file WiredTiger.lock"),
        "{db:?}"
    );
    let status = rec
        .probes
        .iter()
        .find(|s| s.family == "wiredtiger")
        .unwrap_or_else(|| panic!("no wiredtiger status: {:?}\n{mdiag_log}", rec.probes));
    assert!(status.attached(), "{status:?}\n{mdiag_log}");
    assert!(
        status
            .programs
            .iter()
            .all(|p| p.attach_point.contains("_wiredtiger")
                && p.attach_point.contains("__wt_txn_checkpoint")),
        "attached through the shared object's symbols: {status:?}"
    );
    let checkpoints: Vec<_> = rec
        .slices
        .iter()
        .filter_map(|s| s.wiredtiger.as_ref())
        .flat_map(|w| {
            assert_eq!(w.drops, Default::default(), "{w:?}");
            w.checkpoints.iter()
        })
        .collect();
    let summary = format!("checkpoints {checkpoints:#?}\nclient fsyncs {fsyncs:?}");
    for (c, (t0, t1)) in checkpoints.iter().zip(&fsyncs) {
        eprintln!(
            "checkpoint {:.2} ms, {:.2} ms after the client's fsync began; fsync {:.2} ms",
            c.duration_ns as f64 / 1e6,
            c.start_ns.saturating_sub(*t0) as f64 / 1e6,
            (t1 - t0) as f64 / 1e6
        );
    }
    assert_eq!(
        checkpoints.len(),
        fsyncs.len(),
        "one checkpoint per fsync the client sent\n{summary}"
    );
    for (c, &(t0, t1)) in checkpoints.iter().zip(&fsyncs) {
        assert!(!c.in_progress && c.ret == 0, "{c:?}\n{summary}");
        // Each checkpoint ran inside the client's fsync command.
        assert!(
            c.start_ns >= t0 && c.start_ns + c.duration_ns <= t1,
            "{c:?} outside the client's fsync [{t0}, {t1}]\n{summary}"
        );
        assert!(c.duration_ns > 0, "{c:?}");
    }
}
