//! Writing recordings as they are made (format version 2, the stream
//! layout): a head, then slices in compressed frames every few seconds,
//! then an end.
//!
//! Why: a recording may last a day or a week. Kept in memory and written
//! once at the end, its slices would grow without bound on the database
//! host and a `kill -9`, the OOM killer or a power cut would lose all of
//! it. Written as it goes, `record` keeps only the slices of the frame
//! being filled, and a file cut at any byte still reads up to its last
//! complete frame (`recording/read.rs`).
//!
//! The file is a sequence of independent zstd frames, each with its content
//! checksum; their decompressed contents, concatenated, are JSON lines, each
//! one object with one key ([`Line`]): `{"head": …}` first (the recording as
//! known at its start, no slices), then `{"slice": …}` lines in time order
//! and `{"detail": …}` lines (mongod's TCMalloc detail, streamed so that it
//! does not pile up either), and `{"end": …}` last (the final recording,
//! still without slices). `zstd -dc FILE | jq -c 'keys'` shows them.
//!
//! The file is created with mode 0600 under its final name (an earlier file
//! there is replaced), and every frame is `fdatasync`ed once written.
//!
//! A write that fails (the disk full, the file size limit, an I/O error)
//! leaves no partial frame: the writer knows where its last whole frame
//! ends and cuts the file back to there. Then, since a frame of five
//! seconds of a busy host may be larger than the room left, it tries each
//! of that frame's lines in a frame of its own, in order, keeping each one
//! written and synced, cutting off the first that fails, and giving up
//! there (a later, smaller slice would leave a gap in time). Unless every
//! line was written so (then nothing is lost), the error is returned, and
//! every later write returns it again without touching the file: `record`
//! stops and says why. No end line is written after a failure: it would
//! describe the whole run (its checks, its stop reason) while the file
//! holds only some of its slices; the file then reads as "ended early
//! after N slices", which is the truth. What was written before the
//! failure is never lost. The writer writes to an [`Output`] so that tests
//! can give it a file whose room runs out.

use std::{
    fs::File,
    io::{Seek, SeekFrom, Write},
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use super::io::RecordingError;
use super::model::{Recording, Slice};
use super::mongod::TcmallocDetail;

/// zstd level of the frames: fast, and already ~10× on slices.
const LEVEL: i32 = 3;
/// Slices per frame when a whole recording is written at once.
const PER_FRAME: usize = 16;

/// One line of a stream recording, as read (the head, first, is read on its
/// own: its version is checked before its shape).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum Line {
    Head(serde::de::IgnoredAny),
    Slice(Box<Slice>),
    Detail(TcmallocDetail),
    End(Box<Recording>),
}

/// One line of a stream recording, as written (borrowing, the same JSON
/// as [`Line`]).
#[derive(Serialize)]
#[serde(rename_all = "snake_case")]
enum LineRef<'a> {
    Head(&'a Recording),
    Slice(&'a Slice),
    Detail(&'a TcmallocDetail),
    End(&'a Recording),
}

/// Where a recording's frames go: a file (or, in tests, one whose room runs
/// out). Frames are only appended, or cut back to the end of a whole one.
pub trait Output: Write {
    /// Waits until what was written is on the disk (`fdatasync`).
    fn sync_data(&mut self) -> std::io::Result<()>;
    /// Waits until the data and the file's metadata are on the disk.
    fn sync_all(&mut self) -> std::io::Result<()>;
    /// Cuts the output to its first `len` bytes; writes continue there.
    fn cut_to(&mut self, len: u64) -> std::io::Result<()>;
}

impl Output for File {
    fn sync_data(&mut self) -> std::io::Result<()> {
        File::sync_data(self)
    }

    fn sync_all(&mut self) -> std::io::Result<()> {
        File::sync_all(self)
    }

    fn cut_to(&mut self, len: u64) -> std::io::Result<()> {
        self.set_len(len)?;
        self.seek(SeekFrom::Start(len)).map(drop)
    }
}

/// A recording file being written. Lines are buffered until [`Self::flush`]
/// writes them as one frame.
#[derive(Debug)]
pub struct StreamWriter<O = File> {
    out: O,
    path: PathBuf,
    /// JSON lines not yet in a frame.
    pending: Vec<u8>,
    /// Where each pending line ends in `pending`, and whether it is a slice.
    lines: Vec<(usize, bool)>,
    /// Slices written in whole frames so far.
    slices: u64,
    /// Where the last whole frame ends: the file's length, but for a frame
    /// being written.
    end: u64,
    /// The write that failed: every later one fails with it, unwritten.
    failed: Option<std::io::Error>,
    /// A failed frame could not be cut off: nothing more is appended.
    uncut: bool,
}

impl StreamWriter {
    /// Creates the file at `path` (mode 0600; an earlier file there is
    /// replaced) and writes `head`, the recording as known at its start
    /// (its slices, if any, are not written), as the first frame. A head
    /// that cannot be written leaves no file.
    pub fn create(path: &Path, head: &Recording) -> Result<Self, RecordingError> {
        let file = create_private(path).map_err(|source| RecordingError::Write {
            path: path.to_owned(),
            source,
        })?;
        Self::start(file, path, head).inspect_err(|_| {
            let _ = std::fs::remove_file(path);
        })
    }
}

impl<O: Output> StreamWriter<O> {
    /// A writer of `out`, empty, for `path`, with `head` written as its
    /// first frame (see [`StreamWriter::create`]).
    pub(crate) fn start(out: O, path: &Path, head: &Recording) -> Result<Self, RecordingError> {
        let mut w = Self::on(out, path);
        w.line(&LineRef::Head(&without_slices(head)), false)?;
        w.flush()?;
        Ok(w)
    }

    /// A writer of `out`, empty, for `path`.
    fn on(out: O, path: &Path) -> Self {
        Self {
            out,
            path: path.to_owned(),
            pending: Vec::new(),
            lines: Vec::new(),
            slices: 0,
            end: 0,
            failed: None,
            uncut: false,
        }
    }

    /// Where the recording is being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Slices written to the file so far (in whole frames, synced).
    pub fn slices_written(&self) -> u64 {
        self.slices
    }

    /// Adds a slice to the frame being filled.
    pub fn push_slice(&mut self, slice: &Slice) -> Result<(), RecordingError> {
        self.line(&LineRef::Slice(slice), true)
    }

    /// Adds mongod's TCMalloc detail to the frame being filled.
    pub fn push_detail(&mut self, detail: &TcmallocDetail) -> Result<(), RecordingError> {
        self.line(&LineRef::Detail(detail), false)
    }

    /// Writes the lines added since the last frame as one frame, and waits
    /// until they are on the disk. Nothing to write: nothing done. If that
    /// fails, the lines are written each in a frame of its own as long as
    /// they can be; unless all were, the error is returned (see the
    /// header), and so is it by every later call, which writes nothing.
    pub fn flush(&mut self) -> Result<(), RecordingError> {
        if let Some(e) = &self.failed {
            return Err(self.write_error(again(e)));
        }
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        let lines = std::mem::take(&mut self.lines);
        let result = match self.frame(&pending) {
            Ok(()) => {
                self.slices += lines.iter().filter(|(_, slice)| *slice).count() as u64;
                Ok(())
            }
            Err(_) if lines.len() > 1 && self.line_by_line(&pending, &lines) => Ok(()),
            Err(e) => {
                self.failed = Some(again(&e));
                Err(self.write_error(e))
            }
        };
        // The buffers are kept for the next frame.
        self.pending = pending;
        self.pending.clear();
        self.lines = lines;
        self.lines.clear();
        result
    }

    /// Writes `data` as one frame after the last whole one and syncs it. On
    /// failure the file is cut back to the end of the last whole frame.
    fn frame(&mut self, data: &[u8]) -> std::io::Result<()> {
        let frame = compress(data)?;
        match self
            .out
            .write_all(&frame)
            .and_then(|()| self.out.sync_data())
        {
            Ok(()) => {
                self.end += frame.len() as u64;
                Ok(())
            }
            Err(e) => {
                match self.out.cut_to(self.end) {
                    // Best effort: the next frame's sync makes the length
                    // durable too, and the reader stops at a partial frame.
                    Ok(()) => drop(self.out.sync_data()),
                    Err(c) => {
                        tracing::warn!(
                            path = %self.path.display(),
                            "cannot cut a partly written frame off the recording: {c}"
                        );
                        self.uncut = true;
                    }
                }
                Err(e)
            }
        }
    }

    /// The lines of a frame that could not be written, in `data` up to the
    /// ends in `lines`: each in a frame of its own, in order, up to the
    /// first that cannot be written. True if all were written.
    fn line_by_line(&mut self, data: &[u8], lines: &[(usize, bool)]) -> bool {
        let mut start = 0;
        for &(end, slice) in lines {
            if self.uncut || self.frame(&data[start..end]).is_err() {
                return false;
            }
            self.slices += u64::from(slice);
            start = end;
        }
        true
    }

    /// Writes the end line (`end`: the final recording; its slices are not
    /// written, its mongod TCMalloc detail goes in detail lines before it),
    /// the last frame, and makes the file's name durable. After a failed
    /// write, nothing is written and that write's error is returned: the
    /// file reads as ended early.
    pub fn finish(mut self, end: &Recording) -> Result<PathBuf, RecordingError> {
        self.write_end(end)?;
        sync_dir(&self.path);
        Ok(self.path)
    }

    /// The detail lines and the end line of `end`, in the last frame, synced.
    fn write_end(&mut self, end: &Recording) -> Result<(), RecordingError> {
        if let Some(e) = &self.failed {
            return Err(self.write_error(again(e)));
        }
        let mut end = without_slices(end);
        if let Some(m) = end.mongod.as_mut() {
            for d in std::mem::take(&mut m.tcmalloc_detail) {
                self.push_detail(&d)?;
            }
        }
        self.line(&LineRef::End(&end), false)?;
        self.flush()?;
        self.out.sync_all().map_err(|e| self.write_error(e))
    }

    /// Adds `line` to the frame being filled.
    fn line(&mut self, line: &LineRef<'_>, slice: bool) -> Result<(), RecordingError> {
        serde_json::to_writer(&mut self.pending, line)
            .map_err(|e| self.write_error(std::io::Error::other(e)))?;
        self.pending.push(b'\n');
        self.lines.push((self.pending.len(), slice));
        Ok(())
    }

    fn write_error(&self, source: std::io::Error) -> RecordingError {
        RecordingError::Write {
            path: self.path.clone(),
            source,
        }
    }
}

/// The same error as `e`, again (its OS error number, else its kind and text).
fn again(e: &std::io::Error) -> std::io::Error {
    e.raw_os_error().map_or_else(
        || std::io::Error::new(e.kind(), e.to_string()),
        std::io::Error::from_raw_os_error,
    )
}

/// Writes `recording` whole to `file` (created for `path`) in the stream
/// layout: head, its slices (a frame per [`PER_FRAME`] of them), end.
pub(crate) fn write_whole(
    recording: &Recording,
    path: &Path,
    file: File,
) -> Result<(), RecordingError> {
    let mut w = StreamWriter::on(file, path);
    w.line(&LineRef::Head(&without_slices(recording)), false)?;
    for chunk in recording.slices.chunks(PER_FRAME) {
        for s in chunk {
            w.push_slice(s)?;
        }
        w.flush()?;
    }
    w.write_end(recording)
}

/// One zstd frame of `data`, with its content checksum (a damaged frame is
/// then detected, not misread).
fn compress(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut c = zstd::bulk::Compressor::new(LEVEL)?;
    c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))?;
    c.compress(data)
}

/// The header and footer fields of `r`, without its slices.
fn without_slices(r: &Recording) -> Recording {
    Recording {
        format: r.format.clone(),
        version: r.version,
        mdiag_version: r.mdiag_version.clone(),
        started_at: r.started_at,
        ended_at: r.ended_at,
        requested_duration_ms: r.requested_duration_ms,
        stop_reason: r.stop_reason.clone(),
        host: r.host.clone(),
        target: r.target.clone(),
        probes: r.probes.clone(),
        slices: Vec::new(),
        checks: r.checks.clone(),
        target_code: r.target_code.clone(),
        rseq: r.rseq.clone(),
        alloc: r.alloc.clone(),
        kernel_stacks: r.kernel_stacks.clone(),
        cpu_profile: None,
        offcpu_profile: None,
        offcpu_sampled_one_in: 0,
        mongod: r.mongod.clone(),
    }
}

/// Creates `path` with mode 0600 from its first byte, replacing a regular
/// file already there (its mode is not inherited); anything else there (a
/// directory, a device, a link) is left alone and refused.
fn create_private(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => std::fs::remove_file(path)?,
        Ok(_) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                "it exists and is not a regular file",
            ));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

/// Best effort: makes a new name in `path`'s directory durable.
pub(crate) fn sync_dir(path: &Path) {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}
