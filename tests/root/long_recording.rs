//! Recordings streamed to disk as they are made (format version 2): a
//! `kill -9` of `record` leaves a file `explain` reads, and a disk that
//! fills stops the recording with a clear message, keeping what was written.

use std::{
    os::unix::fs::PermissionsExt,
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use mdiag::recording::open;
use mdiag_tests::{finish, require_root, run_mdiag, start_record};

/// Waits until the recording at `path`, read as `explain` reads it, holds
/// at least `slices` slices: the file's own contents say when, never a
/// sleep of a guessed length.
fn wait_for_slices(path: &Path, slices: usize) -> usize {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Ok(o) = open(path)
            && o.recording.slices.len() >= slices
        {
            return o.recording.slices.len();
        }
        assert!(
            Instant::now() < deadline,
            "{} never held {slices} slices",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Kills `record` with SIGKILL when dropped: a failed assertion does not
/// leave a ten-minute recording running.
struct Reaper(i32);

impl Drop for Reaper {
    fn drop(&mut self) {
        // SAFETY: plain kill(2) of our own child (already reaped or dead: ESRCH).
        unsafe { libc::kill(self.0, libc::SIGKILL) };
    }
}

#[test]
fn a_record_killed_with_sigkill_leaves_a_file_explain_reads() {
    let _serial = mdiag_tests::serial();
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("killed.mdiag");
    let (mut rec_child, rec_err) = start_record(&[
        "--duration",
        "10m",
        "--host-wide",
        "-o",
        out.to_str().unwrap(),
    ]);
    let _reaper = Reaper(rec_child.id() as i32);
    let started = Instant::now();
    // Two frames of slices on the disk, then no chance to finish.
    let seen = wait_for_slices(&out, 10);
    // Private while it records (created 0600).
    let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    rec_child.kill().unwrap();
    let elapsed = started.elapsed();
    let (status, _, _) = finish(rec_child, rec_err);
    assert!(!status.success());
    crate::record_cli::assert_detached();

    let opened = open(&out).unwrap();
    let rec = &opened.recording;
    crate::physics::assert_physical(rec);
    assert!(rec.slices.len() >= seen, "{} < {seen}", rec.slices.len());
    assert!(
        rec.stop_reason.starts_with("ended early"),
        "{}",
        rec.stop_reason
    );
    // What it holds is time that passed before the kill.
    let covered: u64 = rec.slices.iter().map(|s| s.duration_ms).sum();
    assert!(
        covered <= elapsed.as_millis() as u64 + 1000,
        "{covered} ms recorded in {elapsed:?}"
    );
    assert!(
        covered >= 900 * seen as u64,
        "{covered} ms for {seen} slices"
    );
    assert_eq!(
        (rec.ended_at - rec.started_at).num_milliseconds() as u64,
        covered
    );
    // explain reads it, and says it ended early.
    let explained = run_mdiag(&["explain", out.to_str().unwrap(), "--format", "json"]);
    let stderr = String::from_utf8_lossy(&explained.stderr);
    assert!(explained.status.success(), "{stderr}");
    assert!(stderr.contains("ended early"), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&explained.stdout).unwrap();
    assert_eq!(
        report["recording"]["slices"].as_u64(),
        Some(rec.slices.len() as u64)
    );
}

/// A tmpfs of `bytes` at a new directory, unmounted when dropped.
struct SmallDisk(tempfile::TempDir);

impl SmallDisk {
    fn new(bytes: u64) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "mdiag-test"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(ok.success(), "mount a tmpfs");
        Self(dir)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

#[test]
fn a_full_disk_stops_the_recording_and_keeps_what_was_written() {
    let _serial = mdiag_tests::serial();
    require_root();
    // Room for the head and a few frames of a host-wide recording.
    let disk = SmallDisk::new(16 << 10);
    let out = disk.0.path().join("full.mdiag");
    let (rec_child, rec_err) = start_record(&[
        "--duration",
        "10m",
        "--host-wide",
        "-o",
        out.to_str().unwrap(),
    ]);
    let _reaper = Reaper(rec_child.id() as i32);
    let (status, _, stderr) = finish(rec_child, rec_err);
    // Stopped by the full disk, long before the 10 minutes, and said why.
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert!(stderr.contains("mdiag explain"), "{stderr}");
    crate::record_cli::assert_detached();
    let opened = open(&out).unwrap();
    let rec = &opened.recording;
    crate::physics::assert_physical(rec);
    assert!(!rec.slices.is_empty());
    assert!(
        rec.stop_reason.starts_with("ended early"),
        "{}",
        rec.stop_reason
    );
}
