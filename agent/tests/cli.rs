//! The `mdiag` binary on bad input (no root needed): each mistake gets one
//! clear error line naming what is wrong, exit code 2, and never a panic.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers: a failure is the test failing"
)]

use std::process::{Command, Output};

fn mdiag(args: &[&str], cwd: &std::path::Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mdiag"))
        .args(args)
        .current_dir(cwd)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn assert_clean_usage_error(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains(needle), "expected {needle:?} in: {stderr}");
    assert!(
        out.stdout.is_empty(),
        "nothing on stdout: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

fn valid_recording_json() -> serde_json::Value {
    serde_json::json!({
        "format": "mdiag-recording", "version": 1, "mdiag_version": "0.1.0",
        "started_at": "2026-11-22T17:45:01Z", "ended_at": "2026-11-22T17:45:03Z",
        "requested_duration_ms": 2000, "stop_reason": "duration",
        "host": {"hostname": "h", "kernel_release": "6.18.0", "arch": "x86_64", "cpu_count": 2,
                 "cpu_model": "m", "sched_features": null},
        "target": null, "probes": [], "slices": [],
        "checks": {"proc_stat_ctxt": null, "target_nonvoluntary_ctxt_switches": null,
                   "target_voluntary_ctxt_switches": null}
    })
}

fn write_zst(path: &std::path::Path, json: &[u8]) {
    std::fs::write(path, zstd::encode_all(json, 3).unwrap()).unwrap();
}

#[test]
fn record_with_an_unknown_probe_family_names_the_families() {
    let dir = tempfile::tempdir().unwrap();
    let out = mdiag(&["record", "--probes", "sched,allocator"], dir.path());
    assert_clean_usage_error(&out, "unknown probe family \"allocator\"");
    // Every family is named (the list is the registry's), and `all`.
    assert_clean_usage_error(&out, "choose among sched, softirq, syscalls, ");
    assert_clean_usage_error(&out, ", or all");
    let out = mdiag(&["record", "--probes", ","], dir.path());
    assert_clean_usage_error(&out, "no probe family named");
}

#[test]
fn explain_missing_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = mdiag(&["explain", "nope.mdiag"], dir.path());
    assert_clean_usage_error(&out, "nope.mdiag not found");
}

#[test]
fn explain_without_any_recording_in_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let out = mdiag(&["explain"], dir.path());
    assert_clean_usage_error(&out, "no recording (*.mdiag)");
}

#[test]
fn explain_truncated_file() {
    let dir = tempfile::tempdir().unwrap();
    let json = serde_json::to_vec(&valid_recording_json()).unwrap();
    let full = zstd::encode_all(&json[..], 3).unwrap();
    let p = dir.path().join("t.mdiag");
    std::fs::write(&p, &full[..full.len() / 2]).unwrap();
    let out = mdiag(&["explain", "t.mdiag"], dir.path());
    assert_clean_usage_error(&out, "t.mdiag is truncated or corrupt");
}

#[test]
fn explain_corrupt_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("c.mdiag"),
        b"\x28\xb5\x2f\xfd garbage after a zstd magic",
    )
    .unwrap();
    let out = mdiag(&["explain", "c.mdiag"], dir.path());
    assert_clean_usage_error(&out, "c.mdiag is truncated or corrupt");
    std::fs::write(dir.path().join("d.mdiag"), b"plain text").unwrap();
    let out = mdiag(&["explain", "d.mdiag"], dir.path());
    assert_clean_usage_error(&out, "d.mdiag is not an mdiag recording");
}

#[test]
fn explain_future_version() {
    let dir = tempfile::tempdir().unwrap();
    let mut v = valid_recording_json();
    v["version"] = serde_json::json!(7);
    write_zst(
        &dir.path().join("f.mdiag"),
        &serde_json::to_vec(&v).unwrap(),
    );
    let out = mdiag(&["explain", "f.mdiag"], dir.path());
    assert_clean_usage_error(&out, "format version 7");
    assert!(String::from_utf8_lossy(&out.stderr).contains("upgrade mdiag"));
}

#[test]
fn explain_a_newer_builds_field() {
    let dir = tempfile::tempdir().unwrap();
    let mut v = valid_recording_json();
    v["slices_v2"] = serde_json::json!([]);
    write_zst(
        &dir.path().join("n.mdiag"),
        &serde_json::to_vec(&v).unwrap(),
    );
    let out = mdiag(&["explain", "n.mdiag"], dir.path());
    assert_clean_usage_error(&out, "`slices_v2`");
    assert!(String::from_utf8_lossy(&out.stderr).contains("upgrade mdiag"));
}

#[test]
fn explain_valid_but_empty_recording_works() {
    let dir = tempfile::tempdir().unwrap();
    write_zst(
        &dir.path().join("ok.mdiag"),
        &serde_json::to_vec(&valid_recording_json()).unwrap(),
    );
    let out = mdiag(&["explain", "--format", "json"], dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["findings"].as_array().map(Vec::len), Some(0));
    // Nothing was recorded, so the rules say so instead of staying silent.
    assert!(!report["not_assessed"].as_array().unwrap().is_empty());
}

#[test]
fn explain_bad_rules_dir() {
    let dir = tempfile::tempdir().unwrap();
    write_zst(
        &dir.path().join("ok.mdiag"),
        &serde_json::to_vec(&valid_recording_json()).unwrap(),
    );
    std::fs::create_dir(dir.path().join("rules")).unwrap();
    std::fs::write(dir.path().join("rules/broken.toml"), b"id = [").unwrap();
    let out = mdiag(&["explain", "ok.mdiag", "--rules", "rules"], dir.path());
    assert_clean_usage_error(&out, "broken.toml");
}

#[test]
fn record_bad_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let out = mdiag(&["record", "--duration", "soon"], dir.path());
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--duration"));
    let out = mdiag(&["record", "--pid", "1", "--process", "x"], dir.path());
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn nonsense_alloc_windows_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = mdiag(
        &["record", "--alloc-window", "1s", "--alloc-every", "500ms"],
        dir.path(),
    );
    assert_clean_usage_error(&out, "--alloc-every");
    assert!(String::from_utf8_lossy(&out.stderr).contains("0 to turn"));
}

fn ftdc_fixture() -> std::path::PathBuf {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/ftdc/mongod-7.0.0-rc6");
    assert!(
        p.is_dir(),
        "FTDC fixtures missing at {} (shared/ must sit beside the repository)",
        p.display()
    );
    p
}

#[test]
fn export_ftdc_as_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = ftdc_fixture();
    let out = mdiag(
        &[
            "export",
            fixture.to_str().unwrap(),
            "--metrics",
            "serverStatus.opcounters",
            "--no-metadata",
        ],
        dir.path(),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() > 100, "{} samples", lines.len());
    let mut last_insert = 0;
    for l in &lines {
        let m = l["metrics"].as_object().unwrap();
        assert!(
            m.keys().all(|k| k.starts_with("serverStatus.opcounters.")),
            "{m:?}"
        );
        // A counter never goes backwards across samples.
        let insert = m["serverStatus.opcounters.insert"].as_i64().unwrap();
        assert!(insert >= last_insert);
        last_insert = insert;
    }
    assert!(String::from_utf8_lossy(&out.stderr).contains("exported"));
}

#[test]
fn export_rejects_a_non_ftdc_file_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("metrics.bogus"),
        b"this is not BSON at all, just text",
    )
    .unwrap();
    let out = mdiag(&["export", "metrics.bogus"], dir.path());
    assert_clean_usage_error(&out, "metrics.bogus");
}

#[test]
fn compare_two_recordings_and_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.mdiag");
    let b = dir.path().join("b.mdiag");
    write_zst(&a, valid_recording_json().to_string().as_bytes());
    write_zst(&b, valid_recording_json().to_string().as_bytes());
    let out = mdiag(&["compare", "a.mdiag", "b.mdiag"], dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("before: a.mdiag"), "{stdout}");
    assert!(stdout.contains("after:  b.mdiag"), "{stdout}");
    let json = mdiag(
        &["compare", "--format", "json", "a.mdiag", "b.mdiag"],
        dir.path(),
    );
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert!(
        v["rules"].as_array().is_some_and(|r| !r.is_empty()),
        "{v:#}"
    );
    // Every builtin rule lacks data in these empty recordings.
    assert!(
        v["rules"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["verdict"] == "not_comparable"),
        "{v:#}"
    );
    let missing = mdiag(&["compare", "a.mdiag", "nope.mdiag"], dir.path());
    assert_clean_usage_error(&missing, "nope.mdiag");
}

/// `mdiag … | head` where the reader is already gone: every command that
/// writes a report exits 0, quietly, and never panics (as ripgrep does).
#[test]
fn a_closed_stdout_ends_every_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("ok.mdiag");
    write_zst(&rec, &serde_json::to_vec(&valid_recording_json()).unwrap());
    let rec = rec.to_str().unwrap();
    let ftdc = ftdc_fixture();
    let ftdc = ftdc.to_str().unwrap();
    let commands: Vec<Vec<&str>> = vec![
        vec!["explain", rec],
        vec!["explain", rec, "--format", "markdown"],
        vec!["explain", rec, "--format", "json"],
        vec!["explain", rec, "--format", "html"],
        vec!["explain", "--ftdc", ftdc],
        vec!["compare", rec, rec],
        vec!["compare", rec, rec, "--format", "json"],
        vec!["export", ftdc],
    ];
    for args in commands {
        // A pipe whose read end is closed before mdiag starts: its first
        // write fails with EPIPE, whatever the size of the output.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_mdiag"))
            .args(&args)
            .current_dir(dir.path())
            .env("NO_COLOR", "1")
            .stdout(writer)
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("error"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    }
}

#[test]
fn check_config_names_the_wrong_key_and_prints_a_good_file() {
    let dir = tempfile::tempdir().unwrap();
    for (text, key) in [
        ("[agent]\nwindw = \"60s\"\n", "windw"),
        ("[agnet]\n", "agnet"),
        ("[agent]\nmax_series = -1\n", "max_series"),
        (
            "[fleet]\nuri = \"mongodb://s\"\nreplay_rate = -1.0\n",
            "replay_rate",
        ),
    ] {
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, text).unwrap();
        let out = mdiag(&["check-config", path.to_str().unwrap()], dir.path());
        assert_clean_usage_error(&out, key);
    }
    let missing = mdiag(&["check-config", "/nonexistent/mdiag.toml"], dir.path());
    assert_clean_usage_error(&missing, "/nonexistent/mdiag.toml");

    let good = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/mdiag.toml");
    let out = mdiag(&["check-config", good.to_str().unwrap()], dir.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("mdiag.toml: valid"), "{stdout}");
    assert!(
        stdout.contains("window: 60s") && stdout.contains("max_series: 250"),
        "{stdout}"
    );
}
