//! Reading a recording file of either layout, frame by frame, into memory
//! bounded by bytes.
//!
//! Version 1 files are one frame holding one JSON document (read whole, as
//! they were written). Version 2 files (`recording/stream.rs`) are frames of
//! JSON lines: the reader keeps every line of every complete frame, merges
//! slices past [`super::keep::KEEP_BYTES`] ([`Keeper`]), and keeps the newest
//! [`DETAIL_KEEP`] TCMalloc details. A file that ends without its end line
//! (killed, crashed, disk full, or still being written) gives the recording
//! up to its last complete frame, its `stop_reason` saying so.

use std::{io::Read, path::Path};

use super::frames::{Frames, Next};
use super::io::{RecordingError, check_header, shape_error, unknown_field};
use super::keep::{Keeper, json_size};
use super::model::Recording;
use super::mongod::TcmallocDetail;
use super::stream::Line;
use crate::stacks::{ProfileKind, table::ProfileBuilder};

/// mongod TCMalloc details kept (the newest; one every 30 s while polled).
pub const DETAIL_KEEP: usize = 64;

/// A recording as read, with what the reader has to say about it.
#[derive(Debug)]
pub struct Opened {
    pub recording: Recording,
    /// What the user should know: the file ended early, slices merged.
    pub notes: Vec<String>,
}

/// Reads the lines of a version 2 file whose first frame is `first`.
pub(crate) fn read_stream<R: Read>(
    path: &Path,
    first: Vec<u8>,
    mut frames: Frames<R>,
    budget: usize,
) -> Result<Opened, RecordingError> {
    let mut state = State::new(path, budget);
    let mut frame = first;
    let ended = loop {
        state.frame(&frame)?;
        if state.end.is_some() {
            break None;
        }
        match frames.next().map_err(|e| RecordingError::Read {
            path: path.to_owned(),
            source: e,
        })? {
            Next::Frame(f) => frame = f,
            Next::End => break Some("the file has no end line".to_owned()),
            Next::Cut { at, why } => break Some(format!("{why} at byte {at}")),
        }
    };
    state.finish(ended)
}

/// What has been read so far.
struct State<'a> {
    path: &'a Path,
    head: Option<Recording>,
    end: Option<Recording>,
    slices: Keeper,
    details: std::collections::VecDeque<TcmallocDetail>,
    details_seen: u64,
    /// The stacks, summed from every slice read: on CPU (perf family) and
    /// off CPU (contention family).
    cpu_stacks: ProfileBuilder,
    offcpu_stacks: ProfileBuilder,
    offcpu_sampled_one_in: u32,
}

impl<'a> State<'a> {
    fn new(path: &'a Path, budget: usize) -> Self {
        Self {
            path,
            head: None,
            end: None,
            slices: Keeper::new(budget),
            details: std::collections::VecDeque::new(),
            details_seen: 0,
            cpu_stacks: ProfileBuilder::default(),
            offcpu_stacks: ProfileBuilder::default(),
            offcpu_sampled_one_in: 0,
        }
    }

    /// The lines of one complete frame.
    fn frame(&mut self, data: &[u8]) -> Result<(), RecordingError> {
        for line in data.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            if self.end.is_some() {
                return Err(self.corrupt("lines follow the end line".into()));
            }
            self.line(line)?;
        }
        Ok(())
    }

    fn line(&mut self, line: &[u8]) -> Result<(), RecordingError> {
        if self.head.is_none() {
            return self.head(line);
        }
        let parsed: Line = serde_json::from_slice(line).map_err(|e| self.bad_line(&e))?;
        match parsed {
            Line::Head(_) => return Err(self.corrupt("a second head line".into())),
            Line::Slice(mut s) => {
                // Stacks are summed now, before the slice is kept or merged.
                let mut took_stacks = false;
                if let Some(perf) = s.perf.as_mut() {
                    took_stacks |= !perf.stack_defs.is_empty() || !perf.stacks.is_empty();
                    self.cpu_stacks.defs(std::mem::take(&mut perf.stack_defs));
                    self.cpu_stacks
                        .samples(perf.freq_hz, std::mem::take(&mut perf.stacks));
                }
                if let Some(c) = s.contention.as_mut() {
                    took_stacks |= !c.wait_stack_defs.is_empty() || !c.waits.is_empty();
                    self.offcpu_sampled_one_in =
                        self.offcpu_sampled_one_in.max(c.wait_sample_every);
                    self.offcpu_stacks
                        .defs(std::mem::take(&mut c.wait_stack_defs));
                    self.offcpu_stacks.waits(std::mem::take(&mut c.waits));
                }
                // The slice is kept without its stacks: its weight is what
                // is left, not the line (a real mongod's stack definitions,
                // demangled C++ names, are over 90 % of its slices' bytes; the
                // line's length merged a 50 s recording into 2 s slices).
                let bytes = if took_stacks {
                    json_size(&s)
                } else {
                    line.len()
                };
                self.slices.push(*s, bytes);
            }
            Line::Detail(d) => {
                self.details_seen += 1;
                if self.details.len() == DETAIL_KEEP {
                    self.details.pop_front();
                }
                self.details.push_back(d);
            }
            Line::End(e) => self.end = Some(*e),
        }
        Ok(())
    }

    /// The first line: its format and version checked before its shape.
    fn head(&mut self, line: &[u8]) -> Result<(), RecordingError> {
        let mut value: serde_json::Value = serde_json::from_slice(line)
            .map_err(|e| self.corrupt(format!("the head line is not JSON: {e}")))?;
        let Some(head) = value.get_mut("head").map(serde_json::Value::take) else {
            return Err(self.corrupt("the first line is not the head".into()));
        };
        let (version, writer) = check_header(self.path, &head)?;
        let head: Recording = serde_json::from_value(head)
            .map_err(|e| shape_error(self.path, "head", version, writer, &e))?;
        self.head = Some(head);
        Ok(())
    }

    /// The recording: the end line's (or, without one, the head's), with
    /// the slices and details kept.
    fn finish(self, ended_early: Option<String>) -> Result<Opened, RecordingError> {
        let Some(head) = self.head else {
            return Err(self.corrupt("no head line".into()));
        };
        let mut notes = Vec::new();
        let group = self.slices.group();
        let pushed = self.slices.pushed();
        let slices = self.slices.finish();
        let mut recording = match (self.end, ended_early) {
            (Some(end), _) => end,
            (None, why) => {
                let why = why.unwrap_or_default();
                let mut r = head;
                let ms: u64 = slices.iter().map(|s| s.duration_ms).sum();
                r.ended_at = r.started_at + chrono::Duration::milliseconds(ms as i64);
                r.stop_reason = format!(
                    "ended early after {pushed} slices: {why}; mdiag record was killed, crashed \
                     or ran out of disk, or is still recording"
                );
                notes.push(format!("{}: {}", self.path.display(), r.stop_reason));
                r
            }
        };
        if group > 1 {
            notes.push(format!(
                "{}: {pushed} slices merged into {}-second slices to keep memory bounded \
                 (totals are exact; per-second peaks are {group}-second averages)",
                self.path.display(),
                group
            ));
        }
        recording.slices = slices;
        let ms: u64 = recording.slices.iter().map(|s| s.duration_ms).sum();
        let ns = ms.saturating_mul(1_000_000);
        recording.cpu_profile = self.cpu_stacks.finish(ProfileKind::OnCpu, ns);
        recording.offcpu_profile = self.offcpu_stacks.finish(ProfileKind::OffCpu, ns);
        recording.offcpu_sampled_one_in = self.offcpu_sampled_one_in;
        if !self.details.is_empty() {
            if self.details_seen > DETAIL_KEEP as u64 {
                notes.push(format!(
                    "{}: the newest {DETAIL_KEEP} of {} TCMalloc details kept",
                    self.path.display(),
                    self.details_seen
                ));
            }
            if let Some(m) = recording.mongod.as_mut() {
                m.tcmalloc_detail = self.details.into_iter().collect();
            }
        }
        Ok(Opened { recording, notes })
    }

    fn bad_line(&self, e: &serde_json::Error) -> RecordingError {
        let message = e.to_string();
        if let Some(field) = unknown_field(&message).or_else(|| unknown_variant(&message)) {
            return RecordingError::UnknownField {
                path: self.path.to_owned(),
                field: field.to_owned(),
                writer: self
                    .head
                    .as_ref()
                    .map_or_else(|| "?".to_owned(), |h| h.mdiag_version.clone()),
                mine: env!("CARGO_PKG_VERSION"),
            };
        }
        self.corrupt(format!(
            "a line does not have the expected shape: {message}"
        ))
    }

    fn corrupt(&self, why: String) -> RecordingError {
        RecordingError::Corrupt {
            path: self.path.to_owned(),
            why,
        }
    }
}

/// The line kind named by serde's "unknown variant `NAME`, expected ..." error.
fn unknown_variant(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown variant `")?;
    rest.split_once('`').map(|(v, _)| v)
}
