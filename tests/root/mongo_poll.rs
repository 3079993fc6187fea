//! mongod polling against the real mongod 6.0.5 (`tests/src/mongod.rs`)
//! under an insert load from pymongo. `mdiag record --uri` must find the server's process by
//! its port, poll it every second, and record opcounters that match the
//! number of inserts the client sent; a server that stops answering must not
//! stop the recording, and the recording must say when it stopped.

use std::{
    path::Path,
    process::{Child, Command},
};

use mdiag::recording::{Recording, read_file};
use mdiag_tests::{
    mongod::Mongod, py_venv, require_root, run_mdiag, start_record, start_record_until,
};

/// Inserts `n` documents one by one with pymongo; returns when done.
fn insert_load(uri: &str, n: u32) {
    let script = format!(
        "import pymongo\nc = pymongo.MongoClient({uri:?}, serverSelectionTimeoutMS=30000)\n\
         coll = c.loadtest.docs\nfor i in range({n}):\n    coll.insert_one({{'i': i}})\nprint('done')\n"
    );
    let out = Command::new(py_venv().join("bin/python"))
        .args(["-c", &script])
        .output()
        .expect("run the pymongo client");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("done"),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Creates `loadtest.docs` with an index on `i` (no inserts), and returns
/// (collections, indexes) summed over every database's dbStats.
fn prepare_catalogue(uri: &str) -> (u64, u64) {
    let script = format!(
        "import pymongo\nc = pymongo.MongoClient({uri:?}, serverSelectionTimeoutMS=30000)\n\
         c.loadtest.create_collection('docs')\nc.loadtest.docs.create_index('i')\n\
         cs = ix = 0\nfor name in c.list_database_names():\n    s = c[name].command('dbStats')\n\
         \x20   cs += int(s['collections'])\n    ix += int(s['indexes'])\nprint(cs, ix)\n"
    );
    let out = Command::new(py_venv().join("bin/python"))
        .args(["-c", &script])
        .output()
        .expect("run the pymongo client");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut it = text.split_whitespace().map(|n| n.parse::<u64>().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

fn finish(child: Child, stderr: std::thread::JoinHandle<String>, out: &Path) -> Recording {
    let o = child.wait_with_output().unwrap();
    let err = stderr.join().unwrap();
    assert!(
        o.status.success(),
        "mdiag record failed: {}\n{err}",
        String::from_utf8_lossy(&o.stdout)
    );
    read_file(out).unwrap()
}

#[test]
fn record_uri_finds_the_server_by_port_and_counts_its_inserts() {
    let _serial = mdiag_tests::serial();
    require_root();
    let server = Mongod::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mongo.mdiag");
    let uri = server.uri();
    // The collection and its index exist before recording; the catalogue
    // sizes mdiag reads once must match the server's own dbStats.
    let (collections, indexes) = prepare_catalogue(&uri);
    // The load starts once mdiag says mongod answers (the driver's first
    // connection to the Python server can take seconds on a busy host), so
    // answered polls see the count before it.
    let (child, stderr) = start_record_until(
        &[
            "--duration",
            "14s",
            "--uri",
            &uri,
            "-o",
            out.to_str().unwrap(),
        ],
        &["probes attached", "mongod answers serverStatus"],
    );
    const N: u32 = 400;
    insert_load(&uri, N);
    let rec = finish(child, stderr, &out);

    // The target is the process listening on the port.
    let target = rec.target.as_ref().expect("a target process");
    assert_eq!(target.pid, server.pid());
    assert_eq!(target.how, "port");
    let m = rec.mongod.as_ref().expect("mongod section");
    assert_eq!(m.source, "live");
    assert_eq!(m.uri.as_deref(), Some(uri.as_str()));
    assert_eq!(m.local, Some(true));
    let info = m.info.as_ref().expect("facts read once");
    assert_eq!(info.process.as_deref(), Some("mongod"));
    assert!(info.version.is_some());
    assert_eq!(info.collections, Some(collections), "{info:?}");
    assert_eq!(info.indexes, Some(indexes), "{info:?}");
    assert!(collections >= 1 && indexes >= 2, "{collections} {indexes}");
    // A standalone: no replication figures (replSetGetStatus says
    // NoReplicationEnabled), but the host's beside each answered poll.
    assert!(
        rec.slices
            .iter()
            .all(|s| s.mongod.as_ref().is_none_or(|m| m.repl.is_none())),
        "replication figures from a standalone"
    );
    assert!(
        rec.slices
            .iter()
            .filter_map(|s| s
                .mongod
                .as_ref()?
                .status
                .as_ref()
                .and(s.mongod.as_ref()?.system.as_ref()))
            .count()
            >= 10,
        "host figures beside the polls"
    );

    // A sample in every whole second, never a reason for none.
    let samples: Vec<_> = rec
        .slices
        .iter()
        .filter_map(|s| s.mongod.as_ref()?.status.as_ref())
        .collect();
    let missing: Vec<_> = rec
        .slices
        .iter()
        .filter(|s| s.duration_ms >= 900)
        .filter_map(|s| s.mongod.as_ref()?.missing.clone())
        .collect();
    assert!(missing.is_empty(), "{missing:?}");
    assert!(samples.len() >= 12, "{} samples", samples.len());
    // Ground truth: the client's N inserts, all between the first and last poll.
    // (The first poll came before the load, the last after it.)
    let first = samples.first().unwrap().op_insert.unwrap();
    let last = samples.last().unwrap().op_insert.unwrap();
    assert_eq!(last - first, i64::from(N));
    // The per-second counts add up and show the load spread over seconds.
    let per_second: Vec<i64> = samples
        .windows(2)
        .map(|w| w[1].op_insert.unwrap() - w[0].op_insert.unwrap())
        .collect();
    assert_eq!(per_second.iter().sum::<i64>(), i64::from(N));
    assert!(per_second.iter().all(|d| *d >= 0));

    // explain shows it, and the rules see it.
    let o = run_mdiag(&["explain", out.to_str().unwrap(), "--format", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["measurements"]["mongod"]["ops"]["insert"], u64::from(N));
    assert!(v["facts"]["mongod"]["insert_per_s"].as_f64().unwrap() > 0.0);
    let o = run_mdiag(&["explain", out.to_str().unwrap(), "--color", "never"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("mongod") && text.contains("Operations:"),
        "{text}"
    );
}

#[test]
fn a_server_that_stops_answering_is_marked_and_the_recording_completes() {
    let _serial = mdiag_tests::serial();
    require_root();
    let server = Mongod::start();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stop.mdiag");
    let uri = server.uri();
    let (child, stderr) = start_record_until(
        &[
            "--duration",
            "9s",
            "--uri",
            &uri,
            "-o",
            out.to_str().unwrap(),
        ],
        &["probes attached", "mongod answers serverStatus"],
    );
    // Stopped, not gone: connections hang, as with a wedged server. The
    // instant is taken on the wall clock, the clock of the recording's
    // started_at: on a loaded host the test may read "probes attached" well
    // after the recording's time 0, so a test-side Instant would be off.
    let stopped_wall = std::time::SystemTime::now();
    server.signal(libc::SIGSTOP);
    let rec = finish(child, stderr, &out);
    server.signal(libc::SIGCONT);

    assert_eq!(rec.stop_reason, "duration");
    // The probes went on: every second has its scheduler slice.
    assert!(rec.slices.len() >= 9, "{} slices", rec.slices.len());
    assert!(rec.slices.iter().all(|s| s.sched.is_some()));
    let m = rec.mongod.as_ref().unwrap();
    let at = m
        .stopped_answering_at_ms
        .expect("when mongod stopped answering");
    // Polls are 1 s apart and the first unanswered one is dated when it was
    // sent: at most a second after the stop, plus a second of scheduling
    // slack on a loaded host; a poll already in flight at the stop is dated
    // just before it.
    let started = std::time::SystemTime::from(rec.started_at);
    let stop_ms = stopped_wall
        .duration_since(started)
        .expect("the server stopped after the recording started")
        .as_millis() as u64;
    assert!(
        at + 500 >= stop_ms && at <= stop_ms + 2000,
        "stopped answering at {at} ms, server stopped at {stop_ms} ms (recording time)"
    );
    let answered = rec
        .slices
        .iter()
        .filter(|s| s.mongod.as_ref().is_some_and(|m| m.status.is_some()))
        .count();
    let per_slice: Vec<(u64, Option<u64>, Option<String>)> = rec
        .slices
        .iter()
        .map(|s| {
            let m = s.mongod.as_ref().unwrap();
            (s.start_ms, m.at_ms, m.missing.clone())
        })
        .collect();
    // Answered until the stop (the first poll may still be connecting).
    assert!(
        (1..=4).contains(&answered),
        "{answered} answered seconds: {per_slice:?}"
    );
    let last_answer = rec
        .slices
        .iter()
        .filter_map(|s| {
            s.mongod
                .as_ref()?
                .status
                .as_ref()
                .and(s.mongod.as_ref()?.at_ms)
        })
        .max()
        .unwrap();
    assert!(
        last_answer <= at + 200,
        "answered at {last_answer} ms after stopping at {at} ms"
    );
    let missing: Vec<String> = rec
        .slices
        .iter()
        .filter_map(|s| s.mongod.as_ref()?.missing.clone())
        .collect();
    assert!(missing.len() >= 4, "{missing:?}");
    assert!(
        missing.iter().any(|r| r.contains("no reply")),
        "{missing:?}"
    );
    let o = run_mdiag(&["explain", out.to_str().unwrap(), "--color", "never"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("stopped answering at +"), "{text}");
}

#[test]
fn an_unreachable_server_is_marked_every_second() {
    let _serial = mdiag_tests::serial();
    require_root();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("down.mdiag");
    let uri = format!("mongodb://user:hunter2@127.0.0.1:{port}/?authSource=admin");
    let (child, stderr) = start_record(&[
        "--duration",
        "4s",
        "--uri",
        &uri,
        "--host-wide",
        "-o",
        out.to_str().unwrap(),
    ]);
    let rec = finish(child, stderr, &out);
    let m = rec.mongod.as_ref().unwrap();
    assert_eq!(m.polls_ok, 0);
    assert!(
        m.last_error
            .as_deref()
            .is_some_and(|e| e.contains("unreachable")),
        "{m:?}"
    );
    assert!(
        rec.slices
            .iter()
            .all(|s| s.mongod.as_ref().is_some_and(|m| m.missing.is_some()))
    );
    // Credentials never reach the recording.
    let text = serde_json::to_string(&rec).unwrap();
    assert!(!text.contains("hunter2"), "{text}");
    assert!(text.contains(&format!("mongodb://***@127.0.0.1:{port}")));
}
