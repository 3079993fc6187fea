//! A recording whose writes fail (a full disk, the file size limit, an I/O
//! error): the file keeps every frame that was whole and no partial one, a
//! frame that does not fit is tried again a line at a time, and nothing
//! more is written after (`recording/stream.rs`). The output is a file that
//! holds only so many bytes, as a full disk does: no root, no tmpfs.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use super::stream::Output;
use super::stream_tests::recording;
use super::{Recording, StreamWriter, open};

/// A file that holds at most `room` bytes: a write past them writes what
/// fits, then fails with ENOSPC, as a full disk does. From its `fail_sync`th
/// sync on (counted from 1), syncs fail with EIO, as a failing disk does.
struct Small {
    file: File,
    len: u64,
    room: u64,
    syncs: usize,
    fail_sync: usize,
}

impl Small {
    fn new(path: &Path, room: u64) -> Self {
        Self {
            file: File::create(path).unwrap(),
            len: 0,
            room,
            syncs: 0,
            fail_sync: usize::MAX,
        }
    }
}

impl Write for Small {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let fits = buf.len().min((self.room - self.len) as usize);
        if fits == 0 && !buf.is_empty() {
            return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
        }
        let n = self.file.write(&buf[..fits])?;
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Output for Small {
    fn sync_data(&mut self) -> std::io::Result<()> {
        self.syncs += 1;
        if self.syncs >= self.fail_sync {
            return Err(std::io::Error::from_raw_os_error(libc::EIO));
        }
        Ok(())
    }

    fn sync_all(&mut self) -> std::io::Result<()> {
        self.sync_data()
    }

    fn cut_to(&mut self, len: u64) -> std::io::Result<()> {
        Output::cut_to(&mut self.file, len)?;
        self.len = len;
        Ok(())
    }
}

/// What became of a recording written as `record` writes it (head, frames
/// of `per_frame` slices, end) until a write failed.
struct Outcome {
    /// The first error, from `flush` or else from `finish`.
    error: Option<String>,
    /// It came from `finish` (writing the detail lines and the end).
    in_finish: bool,
    /// `slices_written()` before `finish`.
    written: u64,
    /// The file's length before `finish`.
    len_before_finish: u64,
}

/// Writes `r` to `out` as `record` does, stopping at the first failure as
/// `record` does; `None` if the head did not fit.
fn write_until_it_fails(
    r: &Recording,
    path: &Path,
    per_frame: usize,
    out: Small,
) -> Option<Outcome> {
    let mut head = r.clone();
    head.mongod = None;
    head.stop_reason = "recording".into();
    let mut w = StreamWriter::start(out, path, &head).ok()?;
    let mut error = None;
    for chunk in r.slices.chunks(per_frame) {
        for s in chunk {
            w.push_slice(s).unwrap();
        }
        if let Err(e) = w.flush() {
            // Every later write fails the same, and writes nothing.
            let len = std::fs::metadata(path).unwrap().len();
            w.push_slice(&r.slices[0]).unwrap();
            assert_eq!(w.flush().unwrap_err().to_string(), e.to_string());
            assert_eq!(std::fs::metadata(path).unwrap().len(), len);
            error = Some(e.to_string());
            break;
        }
    }
    let len_before_finish = std::fs::metadata(path).unwrap().len();
    let written = w.slices_written();
    let finished = w.finish(r).map_err(|e| e.to_string());
    let in_finish = error.is_none() && finished.is_err();
    match (&error, finished) {
        // After a failed write, finish says it again and writes nothing.
        (Some(e), Err(f)) => assert_eq!(&f, e),
        (Some(e), Ok(_)) => panic!("finish wrote the end after {e}"),
        (None, Err(f)) => error = Some(f),
        (None, Ok(_)) => {}
    }
    Some(Outcome {
        error,
        in_finish,
        written,
        len_before_finish,
    })
}

/// Where each zstd frame of `bytes` ends; panics on a partial frame.
fn frame_ends(bytes: &[u8]) -> Vec<usize> {
    let mut ends = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let n = zstd::zstd_safe::find_frame_compressed_size(&bytes[at..]).unwrap_or_else(|e| {
            let why = zstd::zstd_safe::get_error_name(e);
            panic!("no whole frame at byte {at} of {}: {why}", bytes.len())
        });
        at += n;
        assert!(at <= bytes.len(), "a partial frame at the end");
        ends.push(at);
    }
    ends
}

/// After a failed write the file ends at the end of its last whole frame,
/// and reads back with exactly the slices written, ended early.
fn assert_whole_frames_kept(path: &Path, r: &Recording, o: &Outcome, what: &str) {
    let bytes = std::fs::read(path).unwrap();
    // Nothing after a failed flush; after a failed end, maybe detail lines.
    if !o.in_finish {
        assert_eq!(bytes.len() as u64, o.len_before_finish, "{what}");
    }
    // Every frame whole, each one's checksum good.
    assert_eq!(
        frame_ends(&bytes).last().copied(),
        Some(bytes.len()),
        "{what}"
    );
    zstd::decode_all(&bytes[..]).unwrap_or_else(|e| panic!("{what}: {e}"));
    let got = open(path).unwrap().recording;
    let n = o.written as usize;
    assert_eq!(got.slices[..], r.slices[..n], "{what}");
    let said = format!("ended early after {n} slices: the file has no end line");
    assert!(
        got.stop_reason.starts_with(&said),
        "{what}: {}",
        got.stop_reason
    );
}

#[test]
fn a_full_disk_keeps_every_whole_frame_and_cuts_off_the_partial_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.mdiag");
    let (per_frame, r) = (4, recording(12));
    // Written with room to spare: where its frames end (head, 3 of slices, end).
    let roomy = write_until_it_fails(&r, &path, per_frame, Small::new(&path, u64::MAX)).unwrap();
    assert_eq!(roomy.error, None);
    let ends = frame_ends(&std::fs::read(&path).unwrap());
    assert_eq!(ends.len(), 5);
    let mut split_frames = 0;
    // Every room from the head alone to all but the end frame's last byte.
    for room in ends[0] as u64..ends[4] as u64 {
        let what = format!("room for {room} bytes");
        let o = write_until_it_fails(&r, &path, per_frame, Small::new(&path, room)).unwrap();
        let error = o.error.as_deref().unwrap_or_default();
        assert!(error.contains("No space left on device"), "{what}: {error}");
        assert!(error.contains("r.mdiag"), "{what}: {error}");
        assert_whole_frames_kept(&path, &r, &o, &what);
        // Nothing written before the disk filled is lost: at least the
        // frames of the roomy file that fit.
        let whole = ends[1..4].iter().filter(|&&e| e as u64 <= room).count();
        assert!(
            o.written as usize >= whole * per_frame,
            "{what}: {}",
            o.written
        );
        if !(o.written as usize).is_multiple_of(per_frame) {
            split_frames += 1;
        }
    }
    // Slices of a frame too large for what was left were kept one by one.
    assert!(split_frames > 0);
    // No room for the head: an error, and an empty file.
    let none = write_until_it_fails(&r, &path, per_frame, Small::new(&path, ends[0] as u64 - 1));
    assert!(none.is_none());
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
}

#[test]
fn a_frame_that_cannot_be_synced_is_cut_off_and_nothing_follows_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.mdiag");
    let (per_frame, r) = (4, recording(12));
    let roomy = write_until_it_fails(&r, &path, per_frame, Small::new(&path, u64::MAX)).unwrap();
    assert_eq!(roomy.error, None);
    let ends = frame_ends(&std::fs::read(&path).unwrap());
    // The head and one frame of slices synced, then the disk fails: the
    // frame written but not synced is cut off, and so is each line tried
    // alone.
    let mut out = Small::new(&path, u64::MAX);
    out.fail_sync = 3;
    let o = write_until_it_fails(&r, &path, per_frame, out).unwrap();
    let error = o.error.as_deref().unwrap_or_default();
    assert!(error.contains("Input/output error"), "{error}");
    assert_eq!(o.written, per_frame as u64);
    assert_eq!(o.len_before_finish, ends[1] as u64);
    assert_whole_frames_kept(&path, &r, &o, "a failing sync");
}
