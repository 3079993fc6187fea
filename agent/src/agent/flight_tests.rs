use chrono::TimeDelta;

use super::*;
use crate::rules::testdata;

fn window(i: i64) -> Recording {
    let mut r = testdata::oversubscribed();
    let start = r.started_at + TimeDelta::seconds(10 * i);
    let n = r.slices.len() as i64;
    r.started_at = start;
    r.ended_at = start + TimeDelta::seconds(n);
    r
}

fn config(dir: &Path, max_files: usize) -> FlightConfig {
    FlightConfig {
        ring_dir: dir.join("ring"),
        out_dir: dir.join("flight"),
        before: Duration::from_secs(3600 * 24 * 365 * 30),
        after: Duration::ZERO,
        max_files,
        max_bytes: u64::MAX,
    }
}

#[test]
fn consecutive_windows_merge_into_one_recording() {
    let per = window(0).slices.len();
    let merged = merge(vec![window(0), window(1), window(2)]).unwrap();
    assert_eq!(merged.slices.len(), 3 * per);
    // Slices keep their time order across windows, re-based on the first.
    let starts: Vec<u64> = merged.slices.iter().map(|s| s.start_ms).collect();
    assert!(starts.windows(2).all(|w| w[0] < w[1]), "{starts:?}");
    assert_eq!(merged.started_at, window(0).started_at);
    assert_eq!(merged.ended_at, window(2).ended_at);
    assert!(merge(Vec::new()).is_none());
}

#[test]
fn a_fired_finding_saves_the_windows_before_it_and_explain_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = Flight::new(config(dir.path(), 10));
    for i in 0..3 {
        f.keep("mongod:27017", &window(i));
    }
    f.trigger(
        "mongod:27017",
        "sched.wakeup_preemption",
        window(2).ended_at,
    );
    // One pending save per target: a second finding does not add another.
    f.trigger("mongod:27017", "other.rule", window(2).ended_at);
    let saved = f.poll(false);
    assert_eq!(saved.len(), 1);
    assert!(
        saved[0]
            .to_string_lossy()
            .contains("sched.wakeup_preemption")
    );
    let rec = crate::recording::read_file(&saved[0]).unwrap();
    assert_eq!(rec.slices.len(), 3 * window(0).slices.len());
    let report = crate::explain::explain(&rec, &testdata::sched_rule_only(), None, None).unwrap();
    assert_eq!(report.findings[0].rule_id, "sched.wakeup_preemption");
    assert_eq!(f.saved, 1);
}

#[test]
fn the_directory_keeps_its_bounds_oldest_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut f = Flight::new(config(dir.path(), 2));
    f.keep("host", &window(0));
    let mut saved = Vec::new();
    for i in 0..4 {
        let at = window(0).ended_at + TimeDelta::seconds(i);
        f.trigger("host", "r", at);
        saved.extend(f.poll(true));
    }
    assert_eq!(saved.len(), 4);
    assert_eq!(f.removed, 2);
    let left: Vec<_> = std::fs::read_dir(dir.path().join("flight"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(left.len(), 2);
    // The newest two stay.
    assert!(
        left.contains(&saved[3]) && left.contains(&saved[2]),
        "{left:?}"
    );
}

#[test]
fn names_are_one_path_component() {
    assert_eq!(file_safe("mongod:27017"), "mongod_27017");
    assert_eq!(file_safe("../etc"), ".._etc");
    assert_eq!(file_safe(".."), "__");
    assert_eq!(
        file_safe("mongod@/usr/bin/mongod"),
        "mongod__usr_bin_mongod"
    );
}
