//! A damaged stream recording costs only its damaged frames' seconds: the
//! reader goes on at the next intact frame and says which seconds are
//! missing, where the damage is and how many bytes it skipped, in the
//! recording's `stop_reason` (shown by `explain`) and in its notes.
//!
//! The recording is realistic: the golden `busy` scenario's slices (every
//! probe family, mongod's figures, stacks), stretched to 30 seconds and
//! written as `record` writes it, a frame every 5 seconds.

use std::path::{Path, PathBuf};

use super::{Opened, Recording, RecordingError, Slice, StreamWriter, open, read_file};

/// Seconds of the recording, and slices per frame (`record`'s flush).
const SECONDS: u64 = 30;
const PER_FRAME: usize = 5;

/// A recording written to a file, with where its frames begin.
struct Written {
    _dir: tempfile::TempDir,
    path: PathBuf,
    bytes: Vec<u8>,
    /// Offsets where the frames begin, the head's first, then the file's
    /// length: frame `i` is `starts[i]..starts[i + 1]`.
    starts: Vec<usize>,
    /// The slices as read from the intact file.
    slices: Vec<Slice>,
}

impl Written {
    /// The frame (0: the head; 1..: five slices each; last: the end) that
    /// byte `i` is in.
    fn frame_of(&self, i: usize) -> usize {
        self.starts.iter().rposition(|&s| s <= i).unwrap()
    }

    /// Reads `bytes` in place of the file.
    fn open_as(&self, bytes: &[u8]) -> Result<Opened, RecordingError> {
        std::fs::write(&self.path, bytes).unwrap();
        open(&self.path)
    }

    /// The slices of the intact file but those of slice frames `lost`.
    fn slices_without(&self, lost: &[usize]) -> Vec<Slice> {
        self.slices
            .chunks(PER_FRAME)
            .enumerate()
            .filter(|(i, _)| !lost.contains(&(i + 1)))
            .flat_map(|(_, c)| c.iter().cloned())
            .collect()
    }
}

/// Where each slice starts, in seconds (what a failed check shows).
fn seconds_of(slices: &[Slice]) -> Vec<u64> {
    slices.iter().map(|s| s.start_ms / 1000).collect()
}

/// `got` is `want`, slice for slice; `what` says where.
fn same_slices(got: &[Slice], want: &[Slice], what: &str) {
    assert_eq!(seconds_of(got), seconds_of(want), "{what}");
    assert!(
        got == want,
        "{what}: the slices read differ from those written"
    );
}

/// The golden `busy` scenario's slices, one after the other for 30 s.
fn realistic() -> Recording {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata/recordings/busy.mdiag");
    let mut r = read_file(&golden).unwrap();
    let pattern = std::mem::take(&mut r.slices);
    r.slices = (0..SECONDS)
        .map(|i| {
            let mut s = pattern[i as usize % pattern.len()].clone();
            s.start_ms = i * 1000;
            s.duration_ms = 1000;
            s
        })
        .collect();
    r.ended_at = r.started_at + chrono::Duration::seconds(SECONDS as i64);
    r.requested_duration_ms = SECONDS * 1000;
    r.stop_reason = "duration".into();
    r
}

/// Writes [`realistic`] as `record` does, noting where each frame begins.
fn write() -> Written {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.mdiag");
    let r = realistic();
    let mut head = r.clone();
    head.stop_reason = "recording".into();
    let size = |p: &Path| std::fs::metadata(p).unwrap().len() as usize;
    let mut w = StreamWriter::create(&path, &head).unwrap();
    let mut starts = vec![0, size(&path)];
    for chunk in r.slices.chunks(PER_FRAME) {
        for s in chunk {
            w.push_slice(s).unwrap();
        }
        w.flush().unwrap();
        starts.push(size(&path));
    }
    w.finish(&r).unwrap();
    starts.push(size(&path));
    let bytes = std::fs::read(&path).unwrap();
    let intact = open(&path).unwrap();
    assert!(intact.notes.is_empty(), "{:?}", intact.notes);
    assert_eq!(intact.recording.stop_reason, "duration");
    assert_eq!(intact.recording.slices.len(), SECONDS as usize);
    Written {
        _dir: dir,
        path,
        bytes,
        starts,
        slices: intact.recording.slices,
    }
}

/// What the reader must say of slice frames `first..=last` lost, the
/// damage starting where `first` does.
fn said_missing(w: &Written, first: usize, last: usize) -> String {
    let (from, to) = ((first - 1) * PER_FRAME, last * PER_FRAME);
    format!(
        "seconds {from}–{to} missing: damaged data at byte {} of the file ({} bytes skipped: ",
        w.starts[first],
        w.starts[last + 1] - w.starts[first]
    )
}

/// Byte `i` of `w`'s file with one bit flipped (a different bit as `i`
/// goes), read.
fn flipped(w: &Written, i: usize) -> Result<Opened, RecordingError> {
    let mut bytes = w.bytes.clone();
    bytes[i] ^= 1 << (i % 8);
    w.open_as(&bytes)
}

/// Checks what is read with byte `i` flipped: the frame it is in lost, and
/// only that frame; its seconds named. Returns the frame lost, if one was.
fn check_flip(w: &Written, i: usize) -> Option<usize> {
    let frame = w.frame_of(i);
    let last = w.starts.len() - 2;
    // The frame header descriptor's Unused_bit (0x10 of its fifth byte),
    // which decoders ignore (RFC 8878): nothing is lost.
    if i >= 4 && w.starts.contains(&(i - 4)) && 1 << (i % 8) == 0x10 {
        let o = flipped(w, i).unwrap();
        same_slices(&o.recording.slices, &w.slices, &format!("byte {i}"));
        assert_eq!(o.recording.stop_reason, "duration", "byte {i}");
        assert!(o.notes.is_empty(), "byte {i}: {:?}", o.notes);
        return None;
    }
    // A flip zstd's decoder does not see (a window descriptor made larger,
    // a bit of an entropy table's description that no code uses): the
    // frame decodes to what was written, so nothing is lost. The caller
    // bounds how often that may happen.
    let read = flipped(w, i);
    if let Ok(o) = &read
        && o.notes.is_empty()
        && o.recording.stop_reason == "duration"
        && o.recording.slices == w.slices
    {
        return None;
    }
    match read {
        Err(e) => {
            // Only the head's damage is refused, clearly and by name.
            assert_eq!(frame, 0, "byte {i} (frame {frame}): {e}");
            let text = e.to_string();
            assert!(text.contains("r.mdiag"), "byte {i}: {text}");
            assert!(
                text.contains("first frame is damaged") && text.contains("head")
                    || text.contains("does not start with a zstd frame"),
                "byte {i}: {text}"
            );
        }
        Ok(o) => {
            let got = &o.recording;
            assert_ne!(frame, 0, "byte {i} in the head was not seen");
            if frame == last {
                // The end frame: every slice, the end line lost.
                same_slices(
                    &got.slices,
                    &w.slices,
                    &format!("byte {i}: {}", got.stop_reason),
                );
                let why = format!(
                    "ended early after {SECONDS} slices: the file is damaged from byte {} to its \
                     end ({} bytes: damaged frame: ",
                    w.starts[last],
                    w.bytes.len() - w.starts[last]
                );
                assert!(
                    got.stop_reason.starts_with(&why),
                    "byte {i}: {}",
                    got.stop_reason
                );
                assert!(!got.stop_reason.contains("killed"), "{}", got.stop_reason);
            } else {
                same_slices(
                    &got.slices,
                    &w.slices_without(&[frame]),
                    &format!("byte {i} (frame {frame}): {}", got.stop_reason),
                );
                let said = format!("duration; {}", said_missing(w, frame, frame));
                assert!(
                    got.stop_reason.starts_with(&said),
                    "byte {i}: {}",
                    got.stop_reason
                );
                assert!(
                    o.notes.iter().any(|n| n.contains(&format!(
                        "damaged data at byte {} of {}",
                        w.starts[frame],
                        w.path.display()
                    ))),
                    "byte {i}: {:?}",
                    o.notes
                );
                assert!(!got.stop_reason.contains("killed"), "{}", got.stop_reason);
            }
        }
    }
    Some(frame)
}

#[test]
fn one_flipped_bit_anywhere_costs_only_its_own_frame() {
    let w = write();
    assert_eq!(w.starts.len(), SECONDS as usize / PER_FRAME + 3);
    // Every frame's first bytes (magic, header), middle, and last bytes
    // (checksum), and a sweep of the file.
    let mut offsets: Vec<usize> = w
        .starts
        .windows(2)
        .flat_map(|f| {
            let (a, b) = (f[0], f[1]);
            [a, a + 1, a + 4, a + 5, a + 6, (a + b) / 2, b - 5, b - 1]
        })
        .chain((0..w.bytes.len()).step_by(97))
        .collect();
    offsets.sort_unstable();
    offsets.dedup();
    let mut lost = vec![0; w.starts.len() - 1];
    let mut harmless = Vec::new();
    let tried = offsets.len();
    for i in offsets {
        match check_flip(&w, i) {
            Some(frame) => lost[frame] += 1,
            None => harmless.push(i),
        }
    }
    // Every frame, the head and the end included, was lost to some flip,
    // and few flips changed nothing (the decoder ignores few bits).
    assert!(lost.iter().all(|&n| n > 0), "{lost:?}");
    assert!(
        harmless.len() * 20 <= tried,
        "{} of {tried} flips changed nothing: {harmless:?}",
        harmless.len()
    );
}

#[test]
fn two_damaged_frames_are_two_gaps_and_neighbours_one() {
    let w = write();
    let mid = |f: usize| (w.starts[f] + w.starts[f + 1]) / 2;
    let mut bytes = w.bytes.clone();
    bytes[mid(2)] ^= 0x04;
    bytes[w.starts[5] + 1] ^= 0x80;
    let o = w.open_as(&bytes).unwrap();
    same_slices(
        &o.recording.slices,
        &w.slices_without(&[2, 5]),
        "frames 2 and 5",
    );
    let reason = &o.recording.stop_reason;
    let expected = format!("duration; {}", said_missing(&w, 2, 2),);
    assert!(reason.starts_with(&expected), "{reason}");
    assert!(
        reason.contains(&format!("; {}", said_missing(&w, 5, 5))),
        "{reason}"
    );
    assert_eq!(
        o.notes.iter().filter(|n| n.contains("missing")).count(),
        2,
        "{:?}",
        o.notes
    );
    // Frames 3 and 4 side by side: one stretch, ten seconds.
    let mut bytes = w.bytes.clone();
    bytes[mid(3)] ^= 0x20;
    bytes[mid(4)] ^= 0x20;
    let o = w.open_as(&bytes).unwrap();
    same_slices(
        &o.recording.slices,
        &w.slices_without(&[3, 4]),
        "frames 3 and 4",
    );
    let said = format!("duration; {}", said_missing(&w, 3, 4));
    assert!(
        o.recording.stop_reason.starts_with(&said),
        "{}",
        o.recording.stop_reason
    );
    assert_eq!(o.recording.stop_reason.matches("missing").count(), 1);
}

#[test]
fn a_file_cut_after_damage_says_both() {
    let w = write();
    let mut bytes = w.bytes.clone();
    bytes[(w.starts[2] + w.starts[3]) / 2] ^= 0x02;
    // Cut inside frame 5: frames 1, 3 and 4 are read.
    bytes.truncate(w.starts[5] + 10);
    let o = w.open_as(&bytes).unwrap();
    let r = &o.recording;
    let kept = &w.slices_without(&[2])[..3 * PER_FRAME];
    same_slices(&r.slices, kept, "cut in frame 5");
    let said = format!(
        "ended early after 15 slices: the file ends inside a frame at byte {}; mdiag record was \
         killed, crashed or ran out of disk, or is still recording; {}",
        w.starts[5],
        said_missing(&w, 2, 2),
    );
    assert!(r.stop_reason.starts_with(&said), "{}", r.stop_reason);
    // Ended at the last slice read (the 20th second), not at the 15th.
    assert_eq!((r.ended_at - r.started_at).num_seconds(), 20);
    assert!(o.notes.iter().any(|n| n.contains("ended early")));
    assert!(o.notes.iter().any(|n| n.contains("seconds 5–10 missing")));
    // Cut inside the frame after the damaged one: no intact frame follows.
    let mut bytes = w.bytes.clone();
    bytes[(w.starts[2] + w.starts[3]) / 2] ^= 0x02;
    bytes.truncate(w.starts[3] + 10);
    let o = w.open_as(&bytes).unwrap();
    same_slices(
        &o.recording.slices,
        &w.slices[..PER_FRAME],
        "cut in frame 3",
    );
    assert!(
        o.recording.stop_reason.starts_with(&format!(
            "ended early after 5 slices: the file is damaged from byte {} to its end ({} bytes",
            w.starts[2],
            w.starts[3] + 10 - w.starts[2]
        )),
        "{}",
        o.recording.stop_reason
    );
}

#[test]
fn explain_shows_the_missing_seconds() {
    let w = write();
    let mut bytes = w.bytes.clone();
    bytes[(w.starts[3] + w.starts[4]) / 2] ^= 0x40;
    let o = w.open_as(&bytes).unwrap();
    let rules = crate::rules::RuleSet::builtin().unwrap();
    let report = crate::explain::explain(&o.recording, &rules, None, None).unwrap();
    let text = crate::report::terminal::render(&report, false);
    let line = text
        .lines()
        .find(|l| l.contains("stopped:"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains(&format!(
            "seconds 10–15 missing: damaged data at byte {} of the file",
            w.starts[3]
        )),
        "{line}"
    );
    assert!(line.contains(", 25 slices"), "{line}");
}
