//! `mdiag explain --ftdc` as a user runs it (no root needed): FTDC alone,
//! and joined by time to a recording that has no mongod data. The join is
//! checked against sample times decoded without mdiag (`py/ftdc_times.py`,
//! with pymongo's bson from the venv `cargo xtask setup` makes).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers: a failure is the test failing"
)]

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

fn mdiag(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mdiag"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("running mdiag")
}

/// The venv with pymongo: `MDIAG_PY_VENV` (set by `cargo xtask test`), or
/// `target/py-venv`.
fn py_venv() -> PathBuf {
    let p = std::env::var_os("MDIAG_PY_VENV").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/py-venv"),
        PathBuf::from,
    );
    assert!(
        p.join("bin/python").exists(),
        "no Python venv at {}: run `cargo xtask setup`",
        p.display()
    );
    p
}

/// The shared FTDC fixture (`shared/fixtures` beside, or above, the repository).
fn ftdc_fixture() -> std::path::PathBuf {
    let manifest = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .map(|a| a.join("shared/fixtures/ftdc/mongod-7.0.0-rc6"))
        .find(|p| p.is_dir())
        .expect("shared/fixtures/ftdc/mongod-7.0.0-rc6 beside the repository")
}

#[test]
fn explain_ftdc_alone_and_joined_to_a_recording() {
    let ftdc = ftdc_fixture();
    let dir = ftdc.to_str().unwrap();
    // FTDC alone: no recording needed.
    let o = mdiag(&["explain", "--ftdc", dir, "--format", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let m = &v["measurements"]["mongod"];
    assert_eq!(m["source"], "ftdc");
    assert_eq!(m["version"], "7.0.0-rc6");
    assert!(m["seconds_with_sample"].as_u64().unwrap() > 100);
    assert_eq!(m["seconds_missing"], 0);
    assert!(m["checkpoint_most_recent_ms"].is_i64(), "{m}");
    assert!(m["cache_fill_last"].is_f64(), "{m}");
    assert!(
        m["per_cpu_caches_active"].is_null(),
        "gperftools TCMalloc has none"
    );
    let o = mdiag(&["explain", "--ftdc", dir, "--color", "never"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("version 7.0.0-rc6") && text.contains("Checkpoints:"),
        "{text}"
    );
    // A bad directory is a usage error naming it.
    let o = mdiag(&["explain", "--ftdc", "/nonexistent/diagnostic.data"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/diagnostic.data"));

    // Joined: a recording without mongod data gets it from FTDC by time.
    // Ground truth read without mdiag (tests/py/ftdc_times.py decodes
    // the chunks with pymongo's bson): every sample's time, and the version.
    let truth = ftdc_times(&ftdc);
    let starts: Vec<i64> = truth["starts_ms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert_eq!(truth["version"], "7.0.0-rc6");
    // The newest 20 samples, as an old recording of those seconds would be.
    let read = mdiag::mongo::ftdc::read(&ftdc, None, None, 20).unwrap();
    let mut rec = mdiag::mongo::ftdc::recording_from_ftdc(&read);
    let t0 = rec.started_at.timestamp_millis();
    assert_eq!(t0, starts[starts.len() - 20], "the 20th newest sample");
    // 20 one-second slices from there, past the last sample: only the first
    // few have a sample within mdiag's join tolerance of their middle.
    let mut template = rec.slices[0].clone();
    template.mongod = None;
    rec.mongod = None;
    rec.slices = (0..20u64)
        .map(|i| {
            let mut s = template.clone();
            s.start_ms = i * 1000;
            s.duration_ms = 1000;
            s
        })
        .collect();
    let tolerance = mdiag::mongo::ftdc::JOIN_TOLERANCE_MS;
    let expected = rec
        .slices
        .iter()
        .filter(|s| {
            let mid = t0 + (s.start_ms + s.duration_ms / 2) as i64;
            starts.iter().any(|&t| (t - mid).abs() <= tolerance)
        })
        .count();
    assert!(
        (2..20).contains(&expected),
        "{expected} of 20 slices near a sample: the layout no longer straddles the end"
    );
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("old.mdiag");
    mdiag::recording::write_atomic(&rec, &file).unwrap();
    let o = mdiag(&[
        "explain",
        file.to_str().unwrap(),
        "--ftdc",
        dir,
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let m = &v["measurements"]["mongod"];
    assert_eq!(m["seconds_with_sample"], expected, "{m}");
    assert_eq!(m["ftdc"]["joined_slices"], expected);
    assert_eq!(m["version"], truth["version"]);
}

/// What tests/py/ftdc_times.py reads from an FTDC directory.
fn ftdc_times(dir: &Path) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/ftdc_times.py");
    let out = Command::new(py_venv().join("bin/python"))
        .arg(script)
        .arg(dir)
        .output()
        .expect("running ftdc_times.py");
    assert!(
        out.status.success(),
        "ftdc_times.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("ftdc_times.py's JSON")
}
