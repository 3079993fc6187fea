//! The stream layout (format version 2) end to end: written as `record`
//! writes it, cut at every byte, damaged (more in `damage_tests.rs`), from a
//! newer mdiag, and past the reader's memory budget.

use std::os::unix::fs::PermissionsExt;

use super::io::tests::sample;
use super::mongod::{MongodRecording, TcmallocDetail};
use super::{
    FORMAT_VERSION, Mergeable, Recording, RecordingError, StreamWriter, open, open_within,
    read_file, write_atomic,
};

/// `sample()` with `n` slices and two TCMalloc details.
pub(super) fn recording(n: u64) -> Recording {
    let mut r = sample();
    let one = r.slices[0].clone();
    r.slices = (0..n)
        .map(|i| {
            let mut s = one.clone();
            s.start_ms = i * 1000;
            if let Some(sched) = s.sched.as_mut() {
                sched.switches_total = 1000 + i;
            }
            s
        })
        .collect();
    r.mongod = Some(MongodRecording {
        source: "live".into(),
        polls_ok: n,
        tcmalloc_detail: (0..2)
            .map(|i| TcmallocDetail {
                at_ms: i * 30_000,
                metrics: [("tcmalloc.cpu_free".to_owned(), 42 + i as i64)].into(),
            })
            .collect(),
        ..MongodRecording::default()
    });
    r
}

/// Writes `r` as `record` does: the head at the start, slices in frames of
/// `per_frame`, details as they come, the end.
fn write_as_record(r: &Recording, path: &std::path::Path, per_frame: usize) {
    let mut head = r.clone();
    head.mongod = None;
    head.stop_reason = "recording".into();
    let mut w = StreamWriter::create(path, &head).unwrap();
    for chunk in r.slices.chunks(per_frame) {
        for s in chunk {
            w.push_slice(s).unwrap();
        }
        w.flush().unwrap();
    }
    w.finish(r).unwrap();
}

#[test]
fn a_stream_written_as_it_goes_reads_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.mdiag");
    let r = recording(23);
    write_as_record(&r, &path, 5);
    let opened = open(&path).unwrap();
    assert!(opened.notes.is_empty(), "{:?}", opened.notes);
    assert_eq!(opened.recording, r);
    assert_eq!(opened.recording.version, FORMAT_VERSION);
    // And written whole (the agent's flight files), the same.
    let whole = dir.path().join("w.mdiag");
    write_atomic(&r, &whole).unwrap();
    assert_eq!(read_file(&whole).unwrap(), r);
    // zstd itself reads it: JSON lines, head first, end last.
    let text =
        String::from_utf8(zstd::decode_all(&std::fs::read(&path).unwrap()[..]).unwrap()).unwrap();
    let keys: Vec<String> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v.as_object().unwrap().keys().next().unwrap().clone()
        })
        .collect();
    assert_eq!(keys.first().map(String::as_str), Some("head"));
    assert_eq!(keys.last().map(String::as_str), Some("end"));
    assert_eq!(keys.iter().filter(|k| *k == "slice").count(), 23);
    assert_eq!(keys.iter().filter(|k| *k == "detail").count(), 2);
}

#[test]
fn the_file_is_private_from_its_first_byte_and_replaces_an_older_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.mdiag");
    std::fs::write(&path, b"an older file").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = recording(2);
    let mut w = StreamWriter::create(&path, &r).unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // Only the head so far: a recording of no slice, ended early.
    let early = open(&path).unwrap();
    assert!(early.recording.slices.is_empty());
    assert!(early.recording.stop_reason.starts_with("ended early"));
    for s in &r.slices {
        w.push_slice(s).unwrap();
    }
    w.finish(&r).unwrap();
    assert_eq!(read_file(&path).unwrap(), r);
    // What is not a regular file is never replaced.
    let err = StreamWriter::create(dir.path(), &r).unwrap_err();
    assert!(err.to_string().contains("not a regular file"), "{err}");
    let link = dir.path().join("link.mdiag");
    std::os::unix::fs::symlink("/dev/null", &link).unwrap();
    assert!(StreamWriter::create(&link, &r).is_err());
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn a_file_cut_at_any_byte_reads_up_to_its_last_complete_frame() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.mdiag");
    let r = recording(12);
    write_as_record(&r, &full, 4);
    let bytes = std::fs::read(&full).unwrap();
    let cut = dir.path().join("cut.mdiag");
    let mut seen_counts = std::collections::BTreeSet::new();
    for n in 0..bytes.len() {
        std::fs::write(&cut, &bytes[..n]).unwrap();
        match open(&cut) {
            Err(e) => {
                // Only a file without its whole head is refused, by name.
                let text = e.to_string();
                assert!(
                    matches!(
                        e,
                        RecordingError::NotARecording { .. } | RecordingError::Corrupt { .. }
                    ),
                    "cut at {n}: {text}"
                );
                assert!(text.contains("cut.mdiag"), "{text}");
            }
            Ok(o) => {
                let got = &o.recording;
                // A prefix of the slices, in whole frames.
                assert_eq!(got.slices[..], r.slices[..got.slices.len()], "cut at {n}");
                assert_eq!(got.slices.len() % 4, 0, "cut at {n}");
                assert!(got.stop_reason.starts_with("ended early"), "cut at {n}");
                assert!(
                    got.stop_reason
                        .contains(&format!("ended early after {} slices", got.slices.len())),
                    "{}",
                    got.stop_reason
                );
                assert!(o.notes.iter().any(|n| n.contains("ended early")));
                assert!(got.ended_at >= got.started_at);
                seen_counts.insert(got.slices.len());
            }
        }
    }
    // Every frame boundary was reached on the way.
    assert_eq!(
        seen_counts.into_iter().collect::<Vec<_>>(),
        vec![0, 4, 8, 12]
    );
    assert_eq!(read_file(&full).unwrap(), r);
}

#[test]
fn a_damaged_frame_costs_only_its_own_slices() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.mdiag");
    let r = recording(12);
    write_as_record(&r, &path, 4);
    let mut bytes = std::fs::read(&path).unwrap();
    // Damage the middle of the file (inside the second or third frame).
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    bytes[mid + 1] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let o = open(&path).unwrap();
    // One frame of four slices lost, the others read, in order.
    let got = &o.recording.slices;
    assert_eq!(got.len(), 8);
    let lost = got
        .iter()
        .zip(&r.slices)
        .position(|(a, b)| a != b)
        .unwrap_or(8);
    assert_eq!(lost % 4, 0);
    assert_eq!(got[..lost], r.slices[..lost]);
    assert_eq!(got[lost..], r.slices[lost + 4..]);
    let reason = &o.recording.stop_reason;
    assert!(
        reason.starts_with(&format!(
            "duration; seconds {}–{} missing: damaged data at byte",
            lost,
            lost + 4
        )),
        "{reason}"
    );
}

/// A stream whose lines are `lines` (each a JSON value), one frame.
fn stream_of(lines: &[serde_json::Value]) -> Vec<u8> {
    let mut text = Vec::new();
    for l in lines {
        serde_json::to_writer(&mut text, l).unwrap();
        text.push(b'\n');
    }
    zstd::encode_all(&text[..], 3).unwrap()
}

#[test]
fn a_newer_mdiags_stream_asks_for_an_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.mdiag");
    let mut head = serde_json::to_value(recording(0)).unwrap();
    // A newer version, with a field this build does not know.
    head["version"] = serde_json::json!(FORMAT_VERSION + 1);
    head["new_thing"] = serde_json::json!(1);
    std::fs::write(&path, stream_of(&[serde_json::json!({ "head": head })])).unwrap();
    let err = read_file(&path).unwrap_err();
    assert!(matches!(err, RecordingError::FutureVersion { .. }), "{err}");
    // The same version with a line kind from a newer build.
    let head = serde_json::to_value(recording(0)).unwrap();
    std::fs::write(
        &path,
        stream_of(&[
            serde_json::json!({ "head": head }),
            serde_json::json!({ "stacks": [] }),
        ]),
    )
    .unwrap();
    let err = read_file(&path).unwrap_err();
    assert!(
        matches!(&err, RecordingError::UnknownField { field, .. } if field == "stacks"),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade mdiag"));
    // Not a head first: damage, named.
    std::fs::write(
        &path,
        stream_of(&[
            serde_json::json!({ "head": head }),
            serde_json::json!({ "head": head }),
        ]),
    )
    .unwrap();
    let err = read_file(&path).unwrap_err();
    assert!(err.to_string().contains("second head"), "{err}");
}

#[test]
fn past_the_budget_slices_are_merged_and_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.mdiag");
    let r = recording(400);
    write_as_record(&r, &path, 5);
    let o = open_within(&path, 16 << 10).unwrap();
    let got = &o.recording;
    assert!(got.slices.len() < 400, "{}", got.slices.len());
    assert!(
        o.notes.iter().any(|n| n.contains("400 slices merged")),
        "{:?}",
        o.notes
    );
    // The whole recording merges to the same totals.
    let (a, b) = (got.window(), r.window());
    assert_eq!(a.slice.duration_ms, b.slice.duration_ms);
    assert_eq!(
        a.slice.sched.as_ref().map(|s| s.switches_total),
        b.slice.sched.as_ref().map(|s| s.switches_total)
    );
    let mut merged = got.slices[0].clone();
    for s in &got.slices[1..] {
        merged.merge(s);
    }
    assert_eq!(merged.start_ms, 0);
}

/// A slice's stacks are moved out into the recording's profile as it is
/// read: what is kept, and weighed against the budget, is the rest. (A real
/// mongod's stack definitions, long demangled C++ names, made its slices 60
/// times as heavy, and a 70 s recording was merged into 2-second slices.)
#[test]
fn stacks_read_out_of_slices_do_not_count_against_the_budget() {
    use crate::family::perf::{StackCount, StackDef};
    use crate::stacks::Frame;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.mdiag");
    let n: u32 = 40;
    let mut r = recording(u64::from(n));
    let plain = super::keep::json_size(&r.slices[0]);
    let name = "mongo::unique_function<void ()>::makeImpl<mongo::(anonymous)::f>".repeat(4);
    for (i, s) in (0..).zip(r.slices.iter_mut()) {
        let perf = s.perf.get_or_insert_with(Default::default);
        perf.freq_hz = 99;
        perf.stack_defs = (0..10)
            .map(|j| StackDef {
                id: i * 10 + j,
                class: "conn".into(),
                frames: (0..30)
                    .map(|k| Frame {
                        function: format!("{name}{k}"),
                        object: "mongod".into(),
                    })
                    .collect(),
                truncated: false,
            })
            .collect();
        perf.stacks = vec![StackCount {
            id: i * 10,
            samples: 3,
        }];
    }
    let stacked = super::keep::json_size(&r.slices[0]);
    assert!(stacked > 20 * plain, "{stacked} vs {plain}");
    write_as_record(&r, &path, 5);
    // Room for every slice without its stacks, not for one in ten with them.
    let budget = 2 * n as usize * plain;
    assert!(budget < n as usize * stacked / 10);
    let o = open_within(&path, budget).unwrap();
    assert_eq!(o.recording.slices.len(), n as usize, "{:?}", o.notes);
    assert!(
        !o.notes.iter().any(|note| note.contains("merged")),
        "{:?}",
        o.notes
    );
    let profile = o.recording.cpu_profile.as_ref().unwrap();
    assert_eq!(profile.total(), 3 * u64::from(n));
}

/// The format document's line table names exactly the line kinds written,
/// and its numbers are the code's.
#[test]
fn the_format_document_describes_the_stream_as_written() {
    let doc = include_str!("../../../docs/recording-format.md");
    let table = doc
        .split("| line | when | holds |")
        .nth(1)
        .expect("the line table");
    let documented: std::collections::BTreeSet<String> = table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|l| l.split('`').nth(1).map(str::to_owned))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.mdiag");
    write_as_record(&recording(3), &path, 2);
    let text = zstd::decode_all(&std::fs::read(&path).unwrap()[..]).unwrap();
    let written: std::collections::BTreeSet<String> = String::from_utf8(text)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v.as_object().unwrap().keys().next().unwrap().clone()
        })
        .collect();
    assert_eq!(documented, written);
    let numbers = [
        format!("{} MiB", super::keep::KEEP_BYTES >> 20),
        format!("newest {}", super::read::DETAIL_KEEP),
        format!(
            "every {} seconds",
            crate::record::run::FLUSH_EVERY.as_secs()
        ),
        format!("its {} most costly rows", super::window::DEFAULT_TOP_N),
        format!(
            "every {} s while mongod is polled",
            crate::mongo::poll::DETAIL_EVERY
        ),
        format!("# mdiag recording format, version {FORMAT_VERSION}"),
    ];
    for n in numbers {
        assert!(
            doc.contains(&n),
            "docs/recording-format.md should say {n:?}"
        );
    }
}
