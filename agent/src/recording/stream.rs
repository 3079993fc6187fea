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

use std::{
    fs::File,
    io::Write,
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

/// A recording file being written. Lines are buffered until [`Self::flush`]
/// writes them as one frame.
#[derive(Debug)]
pub struct StreamWriter {
    file: File,
    path: PathBuf,
    /// JSON lines not yet in a frame.
    pending: Vec<u8>,
    /// Slices written in frames so far.
    slices: u64,
    /// Slices among the pending lines.
    slices_pending: u64,
}

impl StreamWriter {
    /// Creates the file at `path` (mode 0600; an earlier file there is
    /// replaced) and writes `head`, the recording as known at its start
    /// (its slices, if any, are not written), as the first frame.
    pub fn create(path: &Path, head: &Recording) -> Result<Self, RecordingError> {
        let file = create_private(path).map_err(|source| RecordingError::Write {
            path: path.to_owned(),
            source,
        })?;
        let mut w = Self::on(file, path);
        w.line(&LineRef::Head(&without_slices(head)))?;
        w.flush()?;
        Ok(w)
    }

    /// A writer of the open, empty `file` at `path`.
    fn on(file: File, path: &Path) -> Self {
        Self {
            file,
            path: path.to_owned(),
            pending: Vec::new(),
            slices: 0,
            slices_pending: 0,
        }
    }

    /// Where the recording is being written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Slices written to the file so far (in flushed frames).
    pub fn slices_written(&self) -> u64 {
        self.slices
    }

    /// Adds a slice to the frame being filled.
    pub fn push_slice(&mut self, slice: &Slice) -> Result<(), RecordingError> {
        self.line(&LineRef::Slice(slice))?;
        self.slices_pending += 1;
        Ok(())
    }

    /// Adds mongod's TCMalloc detail to the frame being filled.
    pub fn push_detail(&mut self, detail: &TcmallocDetail) -> Result<(), RecordingError> {
        self.line(&LineRef::Detail(detail))
    }

    /// Writes the lines added since the last frame as one frame, and waits
    /// until they are on the disk. Nothing to write: nothing done.
    pub fn flush(&mut self) -> Result<(), RecordingError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let frame = compress(&self.pending).map_err(|e| self.write_error(e))?;
        self.file
            .write_all(&frame)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| self.write_error(e))?;
        self.pending.clear();
        self.slices += std::mem::take(&mut self.slices_pending);
        Ok(())
    }

    /// Writes the end line (`end`: the final recording; its slices are not
    /// written, its mongod TCMalloc detail goes in detail lines before it),
    /// the last frame, and makes the file's name durable.
    pub fn finish(mut self, end: &Recording) -> Result<PathBuf, RecordingError> {
        self.write_end(end)?;
        sync_dir(&self.path);
        Ok(self.path)
    }

    /// The detail lines and the end line of `end`, in the last frame, synced.
    fn write_end(&mut self, end: &Recording) -> Result<(), RecordingError> {
        let mut end = without_slices(end);
        if let Some(m) = end.mongod.as_mut() {
            for d in std::mem::take(&mut m.tcmalloc_detail) {
                self.push_detail(&d)?;
            }
        }
        self.line(&LineRef::End(&end))?;
        self.flush()?;
        self.file.sync_all().map_err(|e| self.write_error(e))
    }

    fn line(&mut self, line: &LineRef<'_>) -> Result<(), RecordingError> {
        serde_json::to_writer(&mut self.pending, line)
            .map_err(|e| self.write_error(std::io::Error::other(e)))?;
        self.pending.push(b'\n');
        Ok(())
    }

    fn write_error(&self, source: std::io::Error) -> RecordingError {
        RecordingError::Write {
            path: self.path.clone(),
            source,
        }
    }
}

/// Writes `recording` whole to `file` (created for `path`) in the stream
/// layout: head, its slices (a frame per [`PER_FRAME`] of them), end.
pub(crate) fn write_whole(
    recording: &Recording,
    path: &Path,
    file: File,
) -> Result<(), RecordingError> {
    let mut w = StreamWriter::on(file, path);
    w.line(&LineRef::Head(&without_slices(recording)))?;
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
