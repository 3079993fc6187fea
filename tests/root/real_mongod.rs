//! `mdiag record` against the real mongod 6.0.5 (`tests/src/mongod.rs`)
//! serving `mdiag-mongoload`'s requests, every figure held against ground
//! truth from outside mdiag: mongod's own serverStatus (read by the test
//! through the driver), the load's own counts, and `/proc`.
//!
//! - one serverStatus sample in every second under load, and how long each
//!   poll took (printed: the note quotes it);
//! - opcounters against the load's own counts, in total and per second;
//! - every thread of mongod classed by its real name (`/proc/PID/task/*/comm`),
//!   the list printed with the classes;
//! - the replica set's name from `--replSet` and from a config file's
//!   `replSetName`, the cluster role from the config file;
//! - the rseq verdict for its gperftools TCMalloc ("no per-CPU mode");
//! - checkpoints counted as WiredTiger counts them (`transaction
//!   checkpoints`, ±1 at each edge), and their durations against
//!   WiredTiger's own timer, which covers a part of what the probe sees.

use std::{collections::BTreeMap, process::Command};

use mdiag::recording::{Recording, read_file};
use mdiag::threads::{OTHER, mongod_class};
use mdiag_tests::{
    mongod::{Mongod, Options, load_binary},
    require_root, start_record_until,
};

/// Runs `mdiag record ARGS -o OUT` with `--uri`, waits until it says
/// mongod answers, runs `during` and returns the recording with what
/// `during` returned.
fn record_while<T>(
    uri: &str,
    secs: u32,
    out: &std::path::Path,
    during: impl FnOnce() -> T,
) -> (Recording, T) {
    let duration = format!("{secs}s");
    let (child, stderr) = start_record_until(
        &[
            "--duration",
            &duration,
            "--uri",
            uri,
            "-o",
            out.to_str().unwrap(),
        ],
        &["probes attached", "mongod answers serverStatus"],
    );
    let value = during();
    let o = child.wait_with_output().unwrap();
    let err = stderr.join().unwrap();
    assert!(
        o.status.success(),
        "mdiag record failed: {}\n{err}",
        String::from_utf8_lossy(&o.stdout)
    );
    (read_file(out).unwrap(), value)
}

/// Runs the load for `secs` seconds with `threads` connections; returns its
/// per-second lines and its total line.
fn run_load(uri: &str, threads: usize, secs: u32) -> (Vec<serde_json::Value>, serde_json::Value) {
    let out = Command::new(load_binary())
        .args([
            "--uri",
            uri,
            "--threads",
            &threads.to_string(),
            "--secs",
            &secs.to_string(),
        ])
        .output()
        .expect("run mdiag-mongoload");
    assert!(
        out.status.success(),
        "mdiag-mongoload failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut seconds = Vec::new();
    let mut total = serde_json::Value::Null;
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if line.trim() == "ready" {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        if v.get("total").is_some() {
            total = v;
        } else {
            seconds.push(v);
        }
    }
    (seconds, total)
}

fn count(v: &serde_json::Value, key: &str) -> i64 {
    v[key].as_i64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// Every thread name of `pid` now, from `/proc`.
fn thread_names(pid: u32) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .map(|c| c.trim().to_owned())
        .collect();
    names.sort();
    names
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn a_sample_every_second_under_load_with_opcounters_threads_and_replica_set_right() {
    let _serial = mdiag_tests::serial();
    require_root();
    let server = Mongod::start_with(Options {
        repl_set: Some("rs0".into()),
        sync_delay: Some(5),
        ..Options::default()
    });
    let uri = server.uri();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("real.mdiag");
    // The load runs inside the recording, with answered polls before and after it.
    let (rec, ((seconds, total), names)) = record_while(&uri, 16, &out, || {
        let load = std::thread::spawn({
            let uri = uri.clone();
            move || run_load(&uri, 4, 9)
        });
        // mongod's threads while it serves the load (connections included).
        let mut names = thread_names(server.pid());
        while !load.is_finished() {
            names.extend(thread_names(server.pid()));
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        names.sort();
        names.dedup();
        (load.join().unwrap(), names)
    });
    let target = rec.target.as_ref().expect("a target");
    assert_eq!(
        target.pid,
        server.pid(),
        "the process listening on the URI's port"
    );

    // One sample in every whole second, under load.
    let m = rec.mongod.as_ref().expect("mongod polled");
    let whole: Vec<_> = rec.slices.iter().filter(|s| s.duration_ms >= 900).collect();
    let missing: Vec<_> = whole
        .iter()
        .filter(|s| s.mongod.as_ref().is_none_or(|m| m.status.is_none()))
        .map(|s| {
            (
                s.start_ms,
                s.mongod.as_ref().and_then(|m| m.missing.clone()),
            )
        })
        .collect();
    let timing: Vec<_> = rec
        .slices
        .iter()
        .map(|s| {
            let m = s.mongod.as_ref();
            (
                s.start_ms,
                m.and_then(|m| m.at_ms),
                m.and_then(|m| m.poll_ms),
            )
        })
        .collect();
    assert!(
        missing.is_empty(),
        "seconds without a sample: {missing:?}; (slice start, reply at, poll ms): {timing:?}"
    );
    assert!(whole.len() >= 14, "{} whole slices of 16 s", whole.len());
    let polls: Vec<f64> = rec
        .slices
        .iter()
        .filter_map(|s| s.mongod.as_ref()?.poll_ms)
        .map(|ms| ms as f64)
        .collect();
    let slowest = polls.iter().copied().fold(0.0, f64::max);
    eprintln!(
        "serverStatus under the load: {} polls, median {} ms, slowest {slowest} ms",
        polls.len(),
        median(polls.clone())
    );
    assert!(slowest < 1000.0, "a poll took {slowest} ms");

    // opcounters against the load's own counts: every operation the load
    // made falls between the first and the last sample.
    let samples: Vec<_> = rec
        .slices
        .iter()
        .filter_map(|s| {
            let m = s.mongod.as_ref()?;
            Some((m.at_ms?, m.status.as_ref()?))
        })
        .collect();
    let (first, last) = (samples[0].1, samples[samples.len() - 1].1);
    let t = &total["total"];
    for (what, mdiag_first, mdiag_last, load) in [
        (
            "insert",
            first.op_insert,
            last.op_insert,
            count(t, "insert"),
        ),
        (
            "update",
            first.op_update,
            last.op_update,
            count(t, "update"),
        ),
        ("query", first.op_query, last.op_query, count(t, "find")),
    ] {
        let delta = mdiag_last.unwrap() - mdiag_first.unwrap();
        // mongod's own work adds a few (a replica set member reads its own
        // collections: 8 queries in 9 s here); never fewer than the load made.
        assert!(
            delta >= load && delta <= load + load / 100 + 10,
            "opcounters.{what}: mongod counted {delta}, the load made {load}"
        );
    }
    // Per second: mongod's insert rate between samples taken while the
    // load ran at full speed, against the load's own seconds.
    let load_median = median(seconds.iter().map(|s| count(s, "insert") as f64).collect());
    let busy: Vec<f64> = samples
        .windows(2)
        .map(|w| {
            let d = (w[1].1.op_insert.unwrap() - w[0].1.op_insert.unwrap()) as f64;
            d * 1000.0 / (w[1].0 - w[0].0) as f64
        })
        .filter(|rate| *rate > load_median * 0.3)
        .collect();
    assert!(busy.len() >= 5, "{busy:?} against {load_median}/s");
    let ratio = median(busy.clone()) / load_median;
    assert!(
        (0.8..1.25).contains(&ratio),
        "mongod's inserts per second {busy:?}, the load's median {load_median}"
    );

    // Every thread of mongod 6.0 has a class of its own.
    let classes: BTreeMap<&str, Vec<&str>> = names.iter().fold(BTreeMap::new(), |mut m, n| {
        m.entry(mongod_class(n)).or_default().push(n.as_str());
        m
    });
    eprintln!("mongod 6.0.5's threads by class: {classes:#?}");
    assert!(
        !classes.contains_key(OTHER),
        "thread names mdiag does not know: {:?}",
        classes.get(OTHER)
    );
    assert!(classes.contains_key("conn") && classes.contains_key("checkpointer"));
    // And mdiag saw those threads under those names.
    let seen: std::collections::BTreeSet<&str> = rec
        .slices
        .iter()
        .filter_map(|s| s.sched.as_ref())
        .flat_map(|s| s.threads.iter().filter(|t| t.tgid == server.pid()))
        .map(|t| t.comm.as_str())
        .collect();
    for busy_thread in ["Checkpointer", "JournalFlusher", "ftdc"] {
        assert!(seen.contains(busy_thread), "{busy_thread} not in {seen:?}");
    }
    assert!(seen.iter().any(|c| mongod_class(c) == "conn"), "{seen:?}");

    // What mongod says of itself: the replica set named on the command line.
    let info = m.info.as_ref().expect("facts read once");
    assert_eq!(info.replica_set.as_deref(), Some("rs0"), "--replSet rs0");
    assert_eq!(info.version.as_deref(), Some("6.0.5"));

    // gperftools' TCMalloc has no per-CPU mode, whoever owns rseq.
    let rseq = rec.rseq.as_ref().expect("an rseq verdict");
    assert_eq!(
        serde_json::to_value(rseq.verdict).unwrap(),
        "allocator_has_no_per_cpu_mode",
        "{rseq:?}"
    );

    // The profile names mongod's C++ functions as people read them: the
    // recording keeps the linkage names (`_ZN5mongo…`), the report shows
    // them demangled.
    let mangled: Vec<&str> = rec
        .slices
        .iter()
        .filter_map(|s| s.perf.as_ref())
        .flat_map(|p| &p.by_symbol)
        .filter_map(|s| s.symbol.as_deref())
        .filter(|n| n.starts_with("_ZN5mongo"))
        .collect();
    assert!(!mangled.is_empty(), "no sample in mongo:: code");
    let rules = mdiag::rules::RuleSet::builtin().unwrap();
    let report = mdiag::explain::explain(&rec, &rules, None, None).unwrap();
    let top = &report
        .measurements
        .perf
        .as_ref()
        .expect("perf measured")
        .top_symbols;
    eprintln!("mongod's most sampled functions: {top:#?}");
    assert!(
        top.iter().all(|s| !s.symbol.starts_with("_Z")),
        "mangled names in the report: {top:?}"
    );
    let readable = mdiag::symbols::demangle::readable(mangled[0]);
    assert!(
        readable.starts_with("mongo::"),
        "{} → {readable}",
        mangled[0]
    );
    connection_stacks_read_down_to_the_kernel(&rec);
}

/// The first three stacks, each as its frames joined root first.
fn top_stacks<'a>(stacks: impl Iterator<Item = &'a mdiag::stacks::ProfileStack>) -> Vec<String> {
    stacks
        .take(3)
        .map(|s| {
            s.frames
                .iter()
                .map(|f| f.function.as_str())
                .collect::<Vec<_>>()
                .join(" → ")
        })
        .collect()
}

/// The connection threads' on-CPU stacks: demangled `mongo::` frames
/// several levels deep, with the kernel's frames below them (mongod sends
/// and receives through syscalls).
fn connection_stacks_read_down_to_the_kernel(rec: &Recording) {
    let profile = rec.cpu_profile.as_ref().expect("on-CPU stacks of mongod");
    let conn: Vec<_> = profile.of_class("conn").collect();
    let conn_samples: u64 = conn.iter().map(|s| s.value).sum();
    assert!(conn_samples >= 20, "{conn_samples} samples of conn threads");
    let deep = conn.iter().find(|s| {
        let mongo = s
            .frames
            .iter()
            .filter(|f| f.function.starts_with("mongo::"))
            .count();
        let last_mongo = s
            .frames
            .iter()
            .rposition(|f| f.function.starts_with("mongo::"));
        let first_kernel = s.frames.iter().position(|f| f.kernel());
        mongo >= 5 && matches!((last_mongo, first_kernel), (Some(m), Some(k)) if m < k)
    });
    let hottest = top_stacks(conn.iter().copied());
    eprintln!("mongod's hottest conn stacks: {hottest:#?}");
    let deep = deep.unwrap_or_else(|| {
        panic!("no conn stack with 5 mongo:: frames above kernel frames: {hottest:#?}")
    });
    assert!(
        deep.frames.iter().all(|f| !f.function.starts_with("_Z")),
        "mangled frames: {:?}",
        deep.frames
    );
    // Off CPU: where the connection threads wait between and during
    // requests, through mongod's code into the kernel's.
    let off = rec
        .offcpu_profile
        .as_ref()
        .expect("off-CPU stacks of mongod");
    let waiting = top_stacks(off.of_class("conn"));
    eprintln!("where mongod's conn threads wait most: {waiting:#?}");
    assert!(
        off.of_class("conn").any(|s| {
            s.frames.iter().any(|f| f.function.starts_with("mongo::"))
                && s.frames.last().is_some_and(|f| f.kernel())
        }),
        "no conn wait with mongo:: frames and a kernel leaf: {waiting:#?}"
    );
    // The HTML report draws both, per class.
    let rules = mdiag::rules::RuleSet::builtin().unwrap();
    let report = mdiag::explain::explain(rec, &rules, None, None).unwrap();
    let html = mdiag::report::html::render(&report);
    for title in ["On CPU: conn threads", "Off CPU: all threads", "mongo::"] {
        assert!(html.contains(title), "{title} not in the HTML report");
    }
    // What a reader sees: Chromium renders every graph and runs its script,
    // and a search for mongod's own code lights up a share of the conn
    // threads' CPU and of the waits.
    let dir = tempfile::tempdir().unwrap();
    let graphs = mdiag_tests::browser::search_flame_graphs(&html, "mongo::", dir.path());
    eprintln!("the report's flame graphs in Chromium, searched for mongo:: {graphs:#?}");
    let graph = |prefix: &str| {
        graphs
            .iter()
            .find(|g| g.title.starts_with(prefix))
            .unwrap_or_else(|| panic!("no rendered graph {prefix}: {graphs:#?}"))
    };
    let (on, off) = (graph("On CPU: conn threads"), graph("Off CPU: all threads"));
    assert!(graphs.iter().all(|g| g.scripted), "{graphs:#?}");
    // Connection threads run mongod's code between their syscalls: most of
    // their samples have mongo:: frames (the stacks above had at least 5).
    assert!(on.matched_pct >= 20.0, "{on:?}");
    assert!(off.matched_pct > 0.0, "{off:?}");
    // A screenshot, kept in target/ for a human to look at.
    let page = dir.path().join("mongod-report.html");
    std::fs::write(&page, &html).unwrap();
    let shot = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("mdiag-mongod-report.png");
    let _ = std::fs::remove_file(&shot);
    let s = mdiag_tests::browser::browser(&[
        &format!("--screenshot={}", shot.display()),
        "--window-size=1200,6000",
        "--virtual-time-budget=5000",
        &format!("file://{}", page.display()),
    ]);
    assert!(s.status.success(), "{}", String::from_utf8_lossy(&s.stderr));
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 50_000,
        "{} bytes",
        png.len()
    );
    eprintln!("screenshot: {}", shot.display());
}

#[test]
fn checkpoints_are_counted_as_wiredtiger_counts_them() {
    let _serial = mdiag_tests::serial();
    require_root();
    // The replica set and the cluster role spelled in a config file.
    let server = Mongod::start_with(Options {
        repl_set: Some("rs9".into()),
        repl_set_in_config: true,
        cluster_role: Some("shardsvr".into()),
        sync_delay: Some(1),
        ..Options::default()
    });
    let uri = server.uri();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ckpt.mdiag");
    let (rec, ()) = record_while(&uri, 14, &out, || {
        run_load(&uri, 2, 10);
    });
    // WiredTiger's own count, as mongod's serverStatus gives it in the
    // recording's samples: `transaction checkpoints` goes up when a
    // checkpoint starts. Between the first and the last sample it counts the
    // checkpoints that started in (first, last]; the probe's of the slices
    // after the first sample's up to the last sample's started in a span
    // that differs from it by under a second at each end: at most one
    // checkpoint (one a second at --syncdelay 1) either way.
    let samples: Vec<(usize, &mdiag::recording::server_status::ServerStatusSample)> = rec
        .slices
        .iter()
        .enumerate()
        .filter_map(|(i, s)| Some((i, s.mongod.as_ref()?.status.as_ref()?)))
        .collect();
    let (a, first) = samples[0];
    let (b, last) = samples[samples.len() - 1];
    let counted = last.checkpoints.unwrap() - first.checkpoints.unwrap();
    let seen: Vec<_> = rec.slices[a + 1..=b]
        .iter()
        .filter_map(|s| s.wiredtiger.as_ref())
        .flat_map(|w| w.checkpoints.iter().filter(|c| !c.in_progress))
        .collect();
    let n = seen.len() as i64;
    // At least two to compare: a checkpoint a second when the disk keeps
    // up, fewer when it does not (a CI run saw one take 9.1 s of a 14 s
    // recording while builds wrote to the same disk: 3 seen, 4 counted).
    assert!(
        n >= 2 && (n - counted).abs() <= 1,
        "the probe saw {n} checkpoints in slices {a}..={b}, WiredTiger counted {counted}: {seen:?}"
    );
    // Durations: the probe times the whole `__wt_txn_checkpoint` call;
    // WiredTiger's own timer starts once the checkpoint lock is held and the
    // call's configuration is read, and stops after the metadata sync,
    // before the clean-up (txn_ckpt.c, `__checkpoint_stats`). So the
    // probe's mean is at least WiredTiger's (whose milliseconds are
    // truncated), and longer by the lock wait and the clean-up.
    let wt_ms = last.checkpoint_total_ms.unwrap() - first.checkpoint_total_ms.unwrap();
    let wt_mean = wt_ms as f64 / counted.max(1) as f64;
    let probe_mean = seen.iter().map(|c| c.duration_ns as f64 / 1e6).sum::<f64>() / n.max(1) as f64;
    let probe_max = seen
        .iter()
        .map(|c| c.duration_ns as f64 / 1e6)
        .fold(0.0, f64::max);
    eprintln!(
        "checkpoints: probe {n} (mean {probe_mean:.1} ms, max {probe_max:.1} ms), WiredTiger {counted} \
         (mean {wt_mean:.1} ms, most recent {:?} ms, max since start {:?} ms)",
        last.checkpoint_most_recent_ms, last.checkpoint_max_ms,
    );
    assert!(
        probe_mean + 1.0 >= wt_mean * 0.9,
        "the probe's mean {probe_mean:.1} ms is below WiredTiger's {wt_mean:.1} ms"
    );
    // Every checkpoint ran on mongod's Checkpointer thread.
    let tids: std::collections::BTreeSet<u32> = seen.iter().map(|c| c.tid).collect();
    for tid in tids {
        let comm = std::fs::read_to_string(format!("/proc/{}/task/{tid}/comm", server.pid()))
            .unwrap_or_default();
        assert_eq!(comm.trim(), "Checkpointer", "tid {tid}");
    }
    // The names mongod was given in its config file.
    let info = rec
        .mongod
        .as_ref()
        .and_then(|m| m.info.as_ref())
        .expect("facts");
    assert_eq!(
        info.replica_set.as_deref(),
        Some("rs9"),
        "replication.replSetName"
    );
    assert_eq!(info.cluster_role.as_deref(), Some("shardsvr"));
}
