//! Reading a recording file of either layout, frame by frame, into memory
//! bounded by bytes.
//!
//! Version 1 files are one frame holding one JSON document (read whole, as
//! they were written). Version 2 files (`recording/stream.rs`) are frames of
//! JSON lines: the reader keeps every line of every complete frame, merges
//! slices past [`super::keep::KEEP_BYTES`] ([`Keeper`]), and keeps the newest
//! [`DETAIL_KEEP`] TCMalloc details. A file that ends without its end line
//! (killed, crashed, disk full, or still being written) gives the recording
//! up to its last complete frame, its `stop_reason` saying so. A damaged
//! frame in the middle costs only its own seconds: the reader goes on at the
//! next intact frame (`recording/frames.rs`), and the `stop_reason` and the
//! notes say which seconds are missing, where the damage is and how many
//! bytes were skipped (damage, not a killed writer).
//!
//! Why: on a 30 s recording of a real mongod, one flipped bit in the middle
//! ended the report at slice 10, dropping the 20 good seconds after it and
//! blaming a crash that did not happen (`recording/damage_tests.rs` flips
//! bits all over a realistic recording).

use std::{
    io::{Read, Seek},
    path::Path,
};

use super::frames::{Fault, Frames, Next};
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
    /// What the user should know: the file ended early, was damaged, slices
    /// merged.
    pub notes: Vec<String>,
}

/// Why a stream ended without its end line.
enum Early {
    /// The frames end cleanly, the last without the end line.
    NoEnd,
    /// From byte `at` to the end of the file (`skipped` bytes), no frame.
    Cut { at: u64, skipped: u64, fault: Fault },
}

/// The content of the first frame of the file at `path`: the head of a
/// version 2 file, the whole document of a version 1 file. Without it
/// nothing can be read: a damaged or incomplete one is an error.
pub(crate) fn first_frame<R: Read + Seek>(
    path: &Path,
    frames: &mut Frames<R>,
) -> Result<Vec<u8>, RecordingError> {
    let next = frames.next().map_err(|source| RecordingError::Read {
        path: path.to_owned(),
        source,
    })?;
    let why = match next {
        Next::Frame(data) => return Ok(data),
        Next::End => "it holds no frame".to_owned(),
        Next::Cut {
            fault: Fault::Incomplete,
            ..
        } => "its first frame is incomplete: the file ends inside it".to_owned(),
        Next::Cut { fault, .. } | Next::Damaged { fault, .. } => format!(
            "its first frame is damaged ({fault}); it holds the recording's head (its format \
             version, host, target and probes), without which nothing after it can be read"
        ),
    };
    Err(RecordingError::Corrupt {
        path: path.to_owned(),
        why,
    })
}

/// Reads the lines of a version 2 file whose first frame is `first`.
pub(crate) fn read_stream<R: Read + Seek>(
    path: &Path,
    first: Vec<u8>,
    mut frames: Frames<R>,
    budget: usize,
) -> Result<Opened, RecordingError> {
    frames.expect(stream_lines);
    let mut state = State::new(path, budget);
    let mut frame = first;
    let ended = loop {
        state.frame(&frame)?;
        if state.end.is_some() {
            break None;
        }
        frame = Vec::new();
        match frames.next().map_err(|e| RecordingError::Read {
            path: path.to_owned(),
            source: e,
        })? {
            Next::Frame(f) => frame = f,
            // The intact frame after the damage comes next.
            Next::Damaged { at, skipped, fault } => state.damaged(at, skipped, fault),
            Next::End => break Some(Early::NoEnd),
            Next::Cut { at, skipped, fault } => break Some(Early::Cut { at, skipped, fault }),
        }
    };
    state.finish(ended)
}

/// Whether a frame found past damage holds stream lines after the head:
/// each one parses as a line this build knows, and none is a head.
fn stream_lines(data: &[u8]) -> bool {
    data.split(|&b| b == b'\n').filter(|l| !l.is_empty()).all(
        |l| matches!(serde_json::from_slice::<Line>(l), Ok(line) if !matches!(line, Line::Head(_))),
    )
}

/// A stretch of the file skipped as damaged, and the time it held.
#[derive(Debug)]
struct Gap {
    at: u64,
    skipped: u64,
    fault: Fault,
    /// Where the last slice before it ends (ms after the start; 0 before any).
    from_ms: u64,
    /// Where the first slice after it starts, once read.
    to_ms: Option<u64>,
}

impl Gap {
    /// "seconds 10–15 missing: damaged data at byte N of FILE (M bytes
    /// skipped: why)", FILE being `of`; `end_ms`, when known, is where the
    /// recording ends.
    fn describe(&self, end_ms: Option<u64>, of: &str) -> String {
        let what = format!(
            "damaged data at byte {} of {of} ({} bytes skipped: {})",
            self.at, self.skipped, self.fault
        );
        match self.to_ms.or(end_ms) {
            Some(to) if to <= self.from_ms => format!("{what}; no slice is missing"),
            Some(to) => format!(
                "seconds {}–{} missing: {what}",
                seconds(self.from_ms),
                seconds(to)
            ),
            None => format!("seconds from {} on missing: {what}", seconds(self.from_ms)),
        }
    }
}

/// Why a stream ended without its end line, in words.
fn early_why(early: &Early) -> String {
    const WRITER: &str =
        "mdiag record was killed, crashed or ran out of disk, or is still recording";
    match early {
        Early::NoEnd => format!("the file has no end line; {WRITER}"),
        Early::Cut {
            at,
            fault: Fault::Incomplete,
            ..
        } => format!("the file ends inside a frame at byte {at}; {WRITER}"),
        Early::Cut { at, skipped, fault } => format!(
            "the file is damaged from byte {at} to its end ({skipped} bytes: {fault}) and no \
             intact frame follows: its last seconds cannot be read"
        ),
    }
}

/// Milliseconds as seconds, to a tenth ("10", "10.5").
fn seconds(ms: u64) -> String {
    let tenths = (ms + 50) / 100;
    if tenths.is_multiple_of(10) {
        format!("{}", tenths / 10)
    } else {
        format!("{}.{}", tenths / 10, tenths % 10)
    }
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
    /// Stretches skipped as damaged, in file order.
    gaps: Vec<Gap>,
    /// Where the last slice read ends (ms after the start; 0 before any).
    last_end_ms: u64,
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
            gaps: Vec::new(),
            last_end_ms: 0,
        }
    }

    /// `skipped` bytes from `at` were skipped as damaged (`fault`).
    fn damaged(&mut self, at: u64, skipped: u64, fault: Fault) {
        self.gaps.push(Gap {
            at,
            skipped,
            fault,
            from_ms: self.last_end_ms,
            to_ms: None,
        });
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
                for gap in self.gaps.iter_mut().filter(|g| g.to_ms.is_none()) {
                    gap.to_ms = Some(s.start_ms);
                }
                self.last_end_ms = self
                    .last_end_ms
                    .max(s.start_ms.saturating_add(s.duration_ms));
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
    /// the slices and details kept, and what was missing said.
    fn finish(mut self, early: Option<Early>) -> Result<Opened, RecordingError> {
        let Some(head) = self.head.take() else {
            return Err(self.corrupt("no head line".into()));
        };
        let mut notes = Vec::new();
        let group = self.slices.group();
        let pushed = self.slices.pushed();
        let (mut recording, end_ms) = match (self.end.take(), early) {
            (Some(end), _) => {
                let ms = (end.ended_at - end.started_at).num_milliseconds().max(0);
                (end, Some(ms as u64))
            }
            (None, early) => {
                let mut r = head;
                r.ended_at = r.started_at + chrono::Duration::milliseconds(self.last_end_ms as i64);
                r.stop_reason = format!(
                    "ended early after {pushed} slices: {}",
                    early.map_or_else(|| early_why(&Early::NoEnd), |e| early_why(&e))
                );
                notes.push(format!("{}: {}", self.path.display(), r.stop_reason));
                (r, None)
            }
        };
        for gap in &self.gaps {
            recording.stop_reason = format!(
                "{}; {}",
                recording.stop_reason,
                gap.describe(end_ms, "the file")
            );
            notes.push(gap.describe(end_ms, &self.path.display().to_string()));
        }
        let slices = self.slices.finish();
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
