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

/// The frames a host-wide recording writes on this host now, busy or not,
/// measured by a short recording to a roomy disk: (its head frame's size,
/// the size of its largest slice line alone in a frame, as `record` writes
/// a frame: zstd level 3 with its checksum).
fn host_wide_frame_sizes() -> (u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("measure.mdiag");
    let (rec_child, rec_err) = start_record(&[
        "--duration",
        "4s",
        "--host-wide",
        "-o",
        out.to_str().unwrap(),
    ]);
    let (status, _, stderr) = finish(rec_child, rec_err);
    assert!(status.success(), "{stderr}");
    let bytes = std::fs::read(&out).unwrap();
    let head = zstd::zstd_safe::find_frame_compressed_size(&bytes).unwrap() as u64;
    let text = zstd::decode_all(&bytes[..]).unwrap();
    let mut c = zstd::bulk::Compressor::new(3).unwrap();
    c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))
        .unwrap();
    let slice = text
        .split_inclusive(|&b| b == b'\n')
        .filter(|l| l.starts_with(b"{\"slice\""))
        .map(|l| c.compress(l).unwrap().len() as u64)
        .max()
        .expect("the measuring recording has slices");
    (head, slice)
}

#[test]
fn a_full_disk_stops_the_recording_and_keeps_what_was_written() {
    let _serial = mdiag_tests::serial();
    require_root();
    // A disk with room for the head (a quarter to spare) and about four
    // slices alone in a frame, as measured now on this host, busy or not:
    // a frame of five seconds may or may not fit, and the slices of one
    // that does not are written one per frame until one does not. (A
    // constant size, tuned on a quiet host, held no slice on a busy one.)
    // The kernel rounds the size up to whole pages.
    let (head, slice) = host_wide_frame_sizes();
    let room = head + head / 4 + 4 * slice;
    let disk = SmallDisk::new(room);
    let out = disk.0.path().join("full.mdiag");
    let (rec_child, rec_err) = start_record(&[
        "--duration",
        "2m",
        "--host-wide",
        "-o",
        out.to_str().unwrap(),
    ]);
    let _reaper = Reaper(rec_child.id() as i32);
    let (status, _, stderr) = finish(rec_child, rec_err);
    let what = format!("a disk of {room} bytes (head {head}, slice {slice}): {stderr}");
    // Written there (the head fitted), stopped by the full disk long before
    // the 2 minutes, and said why.
    assert!(!stderr.contains("instead"), "{what}");
    assert!(!status.success(), "{what}");
    assert!(stderr.contains("No space left on device"), "{what}");
    assert!(stderr.contains("mdiag explain"), "{what}");
    crate::record_cli::assert_detached();
    // No partial frame: every frame whole, each one's checksum good.
    let bytes = std::fs::read(&out).unwrap();
    zstd::decode_all(&bytes[..]).unwrap_or_else(|e| panic!("{what}: {e}"));
    let opened = open(&out).unwrap();
    let rec = &opened.recording;
    crate::physics::assert_physical(rec);
    assert!(!rec.slices.is_empty(), "{what}");
    eprintln!(
        "a disk of {room} bytes (head {head}, slice {slice}) held {} bytes, {} slices",
        bytes.len(),
        rec.slices.len()
    );
    let said = format!("ended early after {} slices", rec.slices.len());
    assert!(rec.stop_reason.starts_with(&said), "{}", rec.stop_reason);
}
