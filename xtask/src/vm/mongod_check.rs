//! The mongod check of one kernel (the lines with `Line::mongod`): what
//! `mdiag record --pid` made of the real mongod 6.0.5 in the guest, against
//! what the guest and the load know.
//!
//! - wiredtiger: at least one checkpoint window (mongod runs with
//!   `--syncdelay 2`, so it checkpoints every 2 s of the recording);
//! - alloc (kernels from 5.15, where the family can attach): at least one
//!   window, with calls timed, all in gperftools' `tc_*` entry points (the
//!   TCMalloc linked into this mongod);
//! - threads: every mongod thread whose context switch count grew while mdiag
//!   recorded (`/proc/PID/task/*/status`, listed by the guest when the probes
//!   were attached and half a second before the end) is in the recording's
//!   per-thread data (its slices' `sched.threads` and `contention.threads`)
//!   under its tid with the name `/proc/PID/task/TID/comm` gives;
//! - serverStatus: the recording has samples of mongod, whose inserts are
//!   more than none and no more than the load says it made;
//! - the load ran: its total line counts operations.
//!
//! Whether the families attached is the family table's check (`verdict.rs`,
//! with the mongod run's own needs in `expect.rs`); this one asks that what
//! attached measured the real server.
use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::Value;

use super::{console::RunLog, mongod::MongodLog};

/// The first kernel on which the alloc family attaches (attach cookies).
const ALLOC_SINCE: (u32, u32) = (5, 15);

/// The verdict on the mongod run.
#[derive(Debug, Default)]
pub(super) struct MongodCheck {
    /// Facts for the table's line.
    facts: Vec<String>,
    problems: Vec<String>,
}

impl MongodCheck {
    pub(super) fn failure(&self) -> Option<String> {
        (!self.problems.is_empty()).then(|| format!("mongod: {}", self.problems.join("; ")))
    }

    pub(super) fn line(&self) -> String {
        let mut line = format!("mongod check: {}", self.facts.join("; "));
        match self.failure() {
            None => line.push_str(" (ok)"),
            Some(f) => line.push_str(&format!(" (FAIL: {f})")),
        }
        line
    }
}

/// Judges the mongod run: `log` from its marker lines, `run` its recording.
pub(super) fn mongod_check(
    log: &MongodLog,
    run: Option<&RunLog>,
    report: Option<&Value>,
    version: (u32, u32),
) -> MongodCheck {
    let mut c = MongodCheck::default();
    if !log.began {
        c.problems
            .push("not reached (the VM stopped before, or its initramfs has no mongod)".into());
        return c;
    }
    match log.up {
        Some((_, t0, t1)) => {
            let mut fact = format!("mongod up in {:.1} s", t1 - t0);
            if let Some(ready) = log.ready {
                fact.push_str(&format!(", load ready {:.1} s later", ready - t1));
                if let Some(done) = log.recorded {
                    fact.push_str(&format!(
                        ", recorded and explained in {:.1} s",
                        done - ready
                    ));
                }
            }
            c.facts.push(fact);
        }
        None => c.problems.push("mongod did not start".into()),
    }
    if let Some(why) = &log.failed {
        c.problems.push(why.clone());
    }
    if !log.ended {
        c.problems
            .push("its end was not seen (the VM stopped or hung)".into());
    }
    let load = load_check(&mut c, log.load.as_deref());
    match report {
        Some(report) => {
            let m = &report["measurements"];
            checkpoints(&mut c, &m["wiredtiger"]);
            if version >= ALLOC_SINCE {
                alloc(&mut c, &m["alloc"]);
            }
            server_status(&mut c, &m["mongod"], load.as_ref());
        }
        None => c.problems.push("no report of its recording".into()),
    }
    let mut timing = None;
    match (log.up, run.and_then(|r| r.file.as_deref())) {
        (Some((pid, ..)), Some(b64)) => match decode_recording(b64) {
            Ok(recording) => {
                threads(&mut c, log, &per_thread(&recording, pid));
                timing = loop_timing(&recording);
            }
            Err(e) => c
                .problems
                .push(format!("the recording printed cannot be read: {e}")),
        },
        (Some(_), None) => c.problems.push("the guest printed no recording".into()),
        (None, _) => {}
    }
    if !c.problems.is_empty() {
        // Where mdiag's record loop was held (one-time work at its start:
        // the first poll, symbols of the 140 MB binary) shows why a window
        // or a sample is missing.
        c.problems.extend(timing);
        for l in log.log.iter().filter(|l| !l.trim().is_empty()).take(3) {
            c.problems.push(format!("its log: {}", l.trim()));
        }
    }
    c
}

/// The load's total line: its per-kind counts.
fn load_check(c: &mut MongodCheck, total: Option<&str>) -> Option<Value> {
    let Some(total) = total.filter(|t| !t.trim().is_empty()) else {
        c.problems.push("the load printed no total".into());
        return None;
    };
    let Ok(v) = serde_json::from_str::<Value>(total) else {
        c.problems
            .push(format!("the load's last line is not its total: {total}"));
        return None;
    };
    let ops = v["ops"].as_u64().unwrap_or(0);
    c.facts.push(format!(
        "load {ops} ops in {:.1} s ({} errors)",
        v["secs"].as_f64().unwrap_or(0.0),
        v["total"]["errors"].as_u64().unwrap_or(0)
    ));
    if ops == 0 {
        c.problems.push("the load made no operation".into());
    }
    Some(v["total"].clone())
}

fn checkpoints(c: &mut MongodCheck, wt: &Value) {
    match wt["checkpoints"].as_u64() {
        Some(n) if n >= 1 => c.facts.push(format!(
            "{n} checkpoint windows (max {:.0} ms)",
            wt["max_ms"].as_f64().unwrap_or(0.0)
        )),
        _ => c
            .problems
            .push("no WiredTiger checkpoint window (mongod checkpoints every 2 s)".into()),
    }
}

fn alloc(c: &mut MongodCheck, alloc: &Value) {
    let windows = alloc["windows"].as_u64().unwrap_or(0);
    let functions = alloc["functions"].as_array().map_or(&[][..], Vec::as_slice);
    let called: Vec<(&str, u64)> = functions
        .iter()
        .filter_map(|f| Some((f["symbol"].as_str()?, f["calls"].as_u64()?)))
        .filter(|(_, calls)| *calls > 0)
        .collect();
    let calls: u64 = called.iter().map(|(_, n)| n).sum();
    let names: Vec<&str> = called.iter().map(|(s, _)| *s).collect();
    if windows == 0 {
        c.problems.push("no allocator window".into());
    } else if calls == 0 {
        c.problems
            .push(format!("{windows} allocator windows timed no call"));
    } else if let Some(other) = names.iter().find(|s| !s.starts_with("tc_")) {
        c.problems.push(format!(
            "allocator calls timed in {other}, not gperftools' tc_* (the TCMalloc in mongod)"
        ));
    } else {
        c.facts.push(format!(
            "{windows} allocator windows, {calls} calls in {}",
            names.join(", ")
        ));
    }
}

fn server_status(c: &mut MongodCheck, mongod: &Value, load: Option<&Value>) {
    let with = mongod["seconds_with_sample"].as_u64().unwrap_or(0);
    let seconds = mongod["seconds"].as_u64().unwrap_or(0);
    if with == 0 {
        c.problems
            .push("the recording has no serverStatus sample of mongod".into());
        return;
    }
    let inserts = mongod["ops"]["insert"].as_u64().unwrap_or(0);
    c.facts.push(format!(
        "serverStatus in {with} of {seconds} s, {inserts} inserts"
    ));
    let loaded = load.and_then(|l| l["insert"].as_u64());
    match loaded {
        _ if inserts == 0 => c
            .problems
            .push("serverStatus counted no insert under the load".into()),
        Some(l) if inserts > l => c.problems.push(format!(
            "serverStatus counted {inserts} inserts, the load made only {l}"
        )),
        _ => {}
    }
}

/// How the recording's time went: its slices (1 s each unless mdiag's
/// record loop was held) and when its allocator windows opened.
fn loop_timing(recording: &Value) -> Option<String> {
    let slices = recording["slices"].as_array()?;
    let secs = |v: &Value| v.as_f64().unwrap_or(0.0) / 1000.0;
    let longest = slices
        .iter()
        .map(|s| secs(&s["duration_ms"]))
        .fold(0.0, f64::max);
    let end = slices
        .last()
        .map_or(0.0, |s| secs(&s["start_ms"]) + secs(&s["duration_ms"]));
    let windows: Vec<String> = slices
        .iter()
        .flat_map(|s| s["alloc"]["windows"].as_array().into_iter().flatten())
        .map(|w| format!("{:.1}", secs(&w["start_ms"])))
        .collect();
    Some(format!(
        "mdiag cut {} slices in {end:.1} s (the longest {longest:.1} s), allocator windows opened at [{}] s",
        slices.len(),
        windows.join(", ")
    ))
}

/// The names mdiag recorded for each thread of process `pid`.
fn per_thread(recording: &Value, pid: u32) -> BTreeMap<u64, Vec<String>> {
    let mut out: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    let slices = recording["slices"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    for slice in slices {
        for family in ["sched", "contention"] {
            let threads = slice[family]["threads"]
                .as_array()
                .map_or(&[][..], Vec::as_slice);
            for t in threads {
                if t["tgid"].as_u64() != Some(u64::from(pid)) {
                    continue;
                }
                let (Some(tid), Some(comm)) = (t["tid"].as_u64(), t["comm"].as_str()) else {
                    continue;
                };
                let names = out.entry(tid).or_default();
                if !names.iter().any(|n| n == comm) {
                    names.push(comm.to_owned());
                }
            }
        }
    }
    out
}

fn threads(c: &mut MongodCheck, log: &MongodLog, recorded: &BTreeMap<u64, Vec<String>>) {
    if log.threads_start.is_empty() || log.threads_end.is_empty() {
        c.problems
            .push("the guest did not list mongod's threads".into());
        return;
    }
    let active = log.active_threads();
    let mut missing = Vec::new();
    for t in &active {
        match recorded.get(&u64::from(t.tid)) {
            Some(names) if names.contains(&t.comm) => {}
            Some(names) => missing.push(format!(
                "{} {} (recorded as {})",
                t.tid,
                t.comm,
                names.join("/")
            )),
            None => missing.push(format!("{} {}", t.tid, t.comm)),
        }
    }
    let mut names: Vec<&str> = active.iter().map(|t| t.comm.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    c.facts.push(format!(
        "{} of {} threads ran, {} in mdiag's per-thread data ({})",
        active.len(),
        log.threads_end.len(),
        active.len() - missing.len(),
        names.join(" ")
    ));
    if active.is_empty() {
        c.problems
            .push("no mongod thread switched while mdiag recorded".into());
    }
    if !missing.is_empty() {
        c.problems.push(format!(
            "threads that ran are not in mdiag's per-thread data by name: {}",
            missing.join(", ")
        ));
    }
}

/// A recording printed in base64, as one JSON document
/// ([`crate::recording::document`]: either layout).
pub(super) fn decode_recording(b64: &str) -> Result<Value, String> {
    let text: String = b64.split_whitespace().collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("not base64: {e}"))?;
    let json = zstd::decode_all(bytes.as_slice()).map_err(|e| format!("not zstd: {e}"))?;
    crate::recording::document(&json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vm::{
        console::parse_log,
        fixtures::{mongod_console, mongod_report},
    };

    fn judge(console: &str, version: (u32, u32)) -> MongodCheck {
        let guest = parse_log(console);
        let run = guest.run("mongod");
        let report: Option<Value> = run
            .and_then(|r| r.json.as_deref())
            .map(|j| serde_json::from_str(j).unwrap());
        mongod_check(&guest.mongod, run, report.as_ref(), version)
    }

    #[test]
    fn a_good_mongod_run_passes() {
        let c = judge(
            &mongod_console(
                &mongod_report(3, &[("tc_malloc", 40), ("tc_free", 38)], 120),
                &[330],
            ),
            (6, 12),
        );
        assert_eq!(c.failure(), None, "{c:?}");
        assert_eq!(
            c.line(),
            "mongod check: mongod up in 20.8 s, load ready 3.0 s later, recorded and explained in 30.2 s; load 812 ops in 9.0 s (0 errors); 3 checkpoint windows (max 90 ms); \
             2 allocator windows, 78 calls in tc_malloc, tc_free; serverStatus in 5 of 6 s, 120 inserts; \
             2 of 4 threads ran, 2 in mdiag's per-thread data (Checkpointer conn3) (ok)"
        );
    }

    #[test]
    fn a_bad_mongod_run_says_why() {
        // No checkpoint, glibc's malloc timed, more inserts than the load
        // made, the new connection thread missing from the recording.
        let c = judge(
            &mongod_console(&mongod_report(0, &[("malloc", 5)], 900), &[]),
            (6, 1),
        );
        assert_eq!(
            c.failure().as_deref(),
            Some(
                "mongod: no WiredTiger checkpoint window (mongod checkpoints every 2 s); \
                 allocator calls timed in malloc, not gperftools' tc_* (the TCMalloc in mongod); \
                 serverStatus counted 900 inserts, the load made only 203; \
                 threads that ran are not in mdiag's per-thread data by name: 330 conn3; \
                 mdiag cut 2 slices in 15.1 s (the longest 14.1 s), allocator windows opened at [38.9] s"
            )
        );
        // Before 5.15 the allocator is not held to anything.
        let c = judge(
            &mongod_console(&mongod_report(2, &[], 100), &[330]),
            (5, 10),
        );
        assert_eq!(c.failure(), None, "{c:?}");
        let c = judge(&mongod_console(&mongod_report(2, &[], 100), &[330]), (6, 1));
        assert!(
            c.failure()
                .unwrap()
                .starts_with("mongod: 2 allocator windows timed no call; mdiag cut 2 slices"),
            "{c:?}"
        );
        // mongod never listened.
        let log = "MDIAG-VM-MONGOD-BEGIN\n\
                   MDIAG-VM-MONGOD-FAILED mongod did not start listening within 180 s\n\
                   MDIAG-VM-MONGOD-LOG error while loading shared libraries: libcurl.so.4\n\
                   MDIAG-VM-MONGOD-END\n";
        assert_eq!(
            judge(log, (6, 12)).failure().as_deref(),
            Some(
                "mongod: mongod did not start; mongod did not start listening within 180 s; \
                 the load printed no total; no report of its recording; \
                 its log: error while loading shared libraries: libcurl.so.4"
            )
        );
        // A guest without mongod.
        assert!(
            judge("MDIAG-VM-BEGIN 6.1\n", (6, 1))
                .failure()
                .unwrap()
                .contains("not reached")
        );
    }

    #[test]
    fn a_recording_in_base64_decodes() {
        let json = serde_json::json!({"slices": []});
        let z = zstd::encode_all(json.to_string().as_bytes(), 3).unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode(z);
        let (a, b) = b64.split_at(b64.len() / 2);
        assert_eq!(decode_recording(&format!("{a}\n{b}\n")), Ok(json));
        assert!(
            decode_recording("@@")
                .unwrap_err()
                .starts_with("not base64")
        );
        assert!(
            decode_recording("AAAA")
                .unwrap_err()
                .starts_with("not zstd")
        );
    }
}
