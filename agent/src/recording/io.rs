//! Reading and writing recording files: the errors, and the entry points.
//!
//! Version 2 files (the stream layout, `recording/stream.rs`) are zstd
//! frames of JSON lines, written as the recording is made; version 1 files,
//! one zstd frame holding the JSON document of [`Recording`], are still
//! read. [`write_atomic`] writes a whole recording (the agent's flight
//! files, tests) in the stream layout, atomically (temporary file in the
//! destination directory, fsync, rename) with mode 0600. Reads check, in
//! order: the file exists, it is zstd, its first frame decompresses, it is
//! JSON, it is an mdiag recording, its version is one this build reads, and
//! only then its exact shape, so that each kind of bad input gets its own
//! clear error; a stream file cut after its head reads up to its last
//! complete frame, one damaged after its head reads without the damaged
//! frames (`recording/read.rs`).

use std::{
    fs::File,
    io::Read,
    path::{Path, PathBuf},
};

use chrono::{DateTime, Utc};

use super::frames::{Frames, MAGIC};
use super::model::{FORMAT_NAME, FORMAT_VERSION, Recording};
pub use super::read::Opened;

/// File name extension of recordings.
pub const EXTENSION: &str = "mdiag";
/// Largest decompressed recording we accept (a guard against zip bombs).
const MAX_DECOMPRESSED: u64 = 4 << 30;
/// How the first line of a version 2 (stream) recording starts.
const STREAM_START: &[u8] = b"{\"head\":";

#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error("recording {path} not found: pass an existing file, or run `mdiag record` first")]
    NotFound { path: PathBuf },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not an mdiag recording ({why})")]
    NotARecording { path: PathBuf, why: String },
    #[error("{path} is truncated or corrupt: {why}; record again (the file cannot be repaired)")]
    Corrupt { path: PathBuf, why: String },
    #[error(
        "{path} uses recording format version {found}, but this mdiag ({mine}) reads versions up to {FORMAT_VERSION}: upgrade mdiag to read it"
    )]
    FutureVersion {
        path: PathBuf,
        found: u64,
        mine: &'static str,
    },
    #[error(
        "{path} has a field this mdiag ({mine}) does not know, `{field}` (the file was written by mdiag {writer}): upgrade mdiag to read it"
    )]
    UnknownField {
        path: PathBuf,
        field: String,
        writer: String,
        mine: &'static str,
    },
    #[error("cannot write recording {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no recording (*.{EXTENSION}) in {dir}: pass a file, or run `mdiag record` first")]
    NoneInDir { dir: PathBuf },
}

impl RecordingError {
    fn read(path: &Path, source: std::io::Error) -> Self {
        if source.kind() == std::io::ErrorKind::NotFound {
            Self::NotFound {
                path: path.to_owned(),
            }
        } else {
            Self::Read {
                path: path.to_owned(),
                source,
            }
        }
    }
}

/// Reads and validates a recording file (either layout); see [`open`].
pub fn read_file(path: &Path) -> Result<Recording, RecordingError> {
    open(path).map(|o| o.recording)
}

/// Reads and validates a recording file, with what the reader noticed (the
/// file ended early, slices were merged to bound memory).
pub fn open(path: &Path) -> Result<Opened, RecordingError> {
    open_within(path, super::keep::KEEP_BYTES)
}

/// [`open`], keeping at most `budget` bytes of slices (JSON) unmerged.
pub fn open_within(path: &Path, budget: usize) -> Result<Opened, RecordingError> {
    let mut file = File::open(path).map_err(|e| RecordingError::read(path, e))?;
    let mut magic = [0u8; 4];
    let mut got = 0;
    while got < magic.len() {
        match file.read(&mut magic[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) => return Err(RecordingError::read(path, e)),
        }
    }
    if got < magic.len() || magic != MAGIC {
        return Err(RecordingError::NotARecording {
            path: path.to_owned(),
            why: if got == 0 {
                "the file is empty".into()
            } else {
                "it does not start with a zstd frame".into()
            },
        });
    }
    let file = File::open(path).map_err(|e| RecordingError::read(path, e))?;
    let mut frames =
        Frames::new(file, MAX_DECOMPRESSED).map_err(|e| RecordingError::read(path, e))?;
    let first = super::read::first_frame(path, &mut frames)?;
    if first.starts_with(STREAM_START) {
        super::read::read_stream(path, first, frames, budget)
    } else {
        // Version 1: one frame, one document.
        Ok(Opened {
            recording: from_json(path, &first)?,
            notes: Vec::new(),
        })
    }
}

/// Validates and decodes the JSON document of a recording.
pub fn from_json(path: &Path, json: &[u8]) -> Result<Recording, RecordingError> {
    let value: serde_json::Value =
        serde_json::from_slice(json).map_err(|e| RecordingError::Corrupt {
            path: path.to_owned(),
            why: format!(
                "invalid JSON at line {} column {}: {e}",
                e.line(),
                e.column()
            ),
        })?;
    let (version, writer) = check_header(path, &value)?;
    serde_json::from_value(value).map_err(|e| shape_error(path, "document", version, writer, &e))
}

/// Why a recording's `what` (its document, or its head line) of format
/// `version`, written by mdiag `writer`, did not decode: a field this build
/// does not know (the format grows during 0.1: a newer build's field, not
/// damage), else damage.
pub(crate) fn shape_error(
    path: &Path,
    what: &str,
    version: u64,
    writer: String,
    e: &serde_json::Error,
) -> RecordingError {
    let message = e.to_string();
    match unknown_field(&message) {
        Some(field) => RecordingError::UnknownField {
            path: path.to_owned(),
            field: field.to_owned(),
            writer,
            mine: env!("CARGO_PKG_VERSION"),
        },
        None => RecordingError::Corrupt {
            path: path.to_owned(),
            why: format!(
                "format version {version} {what} does not have the expected shape: {message}"
            ),
        },
    }
}

/// Checks a recording document's `format` and `version` before anything
/// else; returns its version and the mdiag version that wrote it.
pub(crate) fn check_header(
    path: &Path,
    value: &serde_json::Value,
) -> Result<(u64, String), RecordingError> {
    let format = value.get("format").and_then(|f| f.as_str());
    if format != Some(FORMAT_NAME) {
        return Err(RecordingError::NotARecording {
            path: path.to_owned(),
            why: format!(
                "its \"format\" field is {:?}, expected {FORMAT_NAME:?}",
                format.unwrap_or("missing")
            ),
        });
    }
    let version = value
        .get("version")
        .and_then(|v| v.as_u64())
        .ok_or_else(|| RecordingError::Corrupt {
            path: path.to_owned(),
            why: "the \"version\" field is missing or not a number".into(),
        })?;
    if version > u64::from(FORMAT_VERSION) {
        return Err(RecordingError::FutureVersion {
            path: path.to_owned(),
            found: version,
            mine: env!("CARGO_PKG_VERSION"),
        });
    }
    let writer = value
        .get("mdiag_version")
        .and_then(|v| v.as_str())
        .unwrap_or("?")
        .to_owned();
    Ok((version, writer))
}

/// The field named by serde's "unknown field `NAME`, expected ..." error.
pub(crate) fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split_once('`').map(|(field, _)| field)
}

/// Writes `recording` to `path` atomically with mode 0600.
pub fn write_atomic(recording: &Recording, path: &Path) -> Result<(), RecordingError> {
    let err = |source| RecordingError::Write {
        path: path.to_owned(),
        source,
    };
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    // tempfile creates the file with mode 0600.
    let tmp = tempfile::Builder::new()
        .prefix(".mdiag-")
        .suffix(".tmp")
        .tempfile_in(&dir)
        .map_err(err)?;
    let file = tmp.as_file().try_clone().map_err(err)?;
    super::stream::write_whole(recording, path, file)?;
    tmp.persist(path).map_err(|e| err(e.error))?;
    super::stream::sync_dir(path);
    Ok(())
}

/// `mdiag-<host>-<UTC time>.mdiag`, e.g. `mdiag-db1-20261122T174501Z.mdiag`.
pub fn default_file_name(host: &str, at: DateTime<Utc>) -> String {
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("mdiag-{host}-{}.{EXTENSION}", at.format("%Y%m%dT%H%M%SZ"))
}

/// The most recently modified `*.mdiag` file in `dir`.
pub fn newest_in_dir(dir: &Path) -> Result<PathBuf, RecordingError> {
    let entries = std::fs::read_dir(dir).map_err(|e| RecordingError::read(dir, e))?;
    let mut best: Option<(std::time::SystemTime, PathBuf)> = None;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some(EXTENSION) {
            continue;
        }
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let modified = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
        if best
            .as_ref()
            .is_none_or(|(t, p)| (modified, &path) > (*t, p))
        {
            best = Some((modified, path));
        }
    }
    best.map(|(_, p)| p)
        .ok_or_else(|| RecordingError::NoneInDir {
            dir: dir.to_owned(),
        })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::recording::model::*;
    use std::os::unix::fs::PermissionsExt;

    #[allow(
        clippy::too_many_lines,
        reason = "test data: one recording spelling out every field"
    )]
    pub(crate) fn sample() -> Recording {
        let t0 = DateTime::parse_from_rfc3339("2026-11-22T17:45:01.123456789Z")
            .unwrap()
            .with_timezone(&Utc);
        Recording {
            format: FORMAT_NAME.into(),
            version: FORMAT_VERSION,
            mdiag_version: "0.1.0".into(),
            started_at: t0,
            ended_at: t0 + chrono::Duration::milliseconds(2001),
            requested_duration_ms: 2000,
            stop_reason: "duration".into(),
            host: HostFacts {
                hostname: "db1".into(),
                kernel_release: "6.18.44-fc-v769".into(),
                arch: "x86_64".into(),
                cpu_count: 2,
                cpu_model: "Intel(R) Xeon(R)".into(),
                sched_features: None,
                net: None,
                ..HostFacts::default()
            },
            target: Some(Target {
                pid: 4242,
                comm: "mongod".into(),
                exe: Some("/usr/bin/mongod".into()),
                cmdline: vec![
                    "mongod".into(),
                    "--config".into(),
                    "/etc/mongod.conf".into(),
                ],
                how: "pid".into(),
                exit_code: None,
            }),
            probes: vec![ProbeStatus {
                family: "sched".into(),
                programs: vec![ProgramStatus {
                    name: "mdiag_sched_switch".into(),
                    attach_point: "tp_btf/sched_switch".into(),
                    error: None,
                }],
                left_out: None,
            }],
            slices: (0..2)
                .map(|i| Slice {
                    start_ms: i * 1000,
                    duration_ms: 1000,
                    sched: Some(SchedSlice {
                        switches_total: 1000 + i,
                        switches_per_cpu: vec![600, 400 + i],
                        voluntary: 10,
                        involuntary: 900,
                        preempted: 850,
                        wakeups: 20,
                        wakeup_preemptions: 0,
                        migrations: 0,
                        runq_hist_log2_ns: vec![0, 0, 3, u64::MAX],
                        threads: vec![ThreadSlice {
                            tid: 4243,
                            tgid: 4242,
                            comm: "conn12 ü".into(),
                            voluntary: 1,
                            involuntary: 450,
                            preempted: 400,
                            runq_delay_ns: 1_234_567_890,
                            runq_delays: 451,
                            oncpu_ns: 999_999_999,
                            wakeup_preempted: 0,
                            migrations: 0,
                            wakeup_preempting: 0,
                        }],
                        drops: SchedDrops {
                            thread_map_full: 1,
                            wakeup_map_full: 2,
                            read_failed: 3,
                        },
                    }),
                    alloc: Some(AllocSlice {
                        windows: vec![AllocWindow {
                            start_ns: 5_000_000_000 + i,
                            end_ns: 5_200_000_000,
                            start_ms: 5000,
                            end_ms: 5200,
                            probe_hits: 40_000,
                            functions: vec![AllocFunctionWindow {
                                symbol: "malloc".into(),
                                count: 20_000,
                                sum_ns: 44_000_000,
                                buckets: vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 19_999],
                                size_classes: vec![AllocSizeClassWindow {
                                    min_bytes: 64,
                                    count: 20_000,
                                    sum_ns: 44_000_000,
                                    buckets: vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 19_999],
                                }],
                            }],
                            drops: AllocDrops {
                                missing_entry: 3,
                                ..AllocDrops::default()
                            },
                        }],
                    }),
                    ..Slice::default()
                })
                .collect(),
            checks: Checks {
                proc_stat_ctxt: Some(2001),
                target_nonvoluntary_ctxt_switches: Some(1800),
                target_voluntary_ctxt_switches: None,
            },
            target_code: None,
            rseq: None,
            alloc: Some(AllocRecord {
                window_ms: 200,
                every_ms: 5000,
                allocator: Some(crate::symbols::AllocatorKind::Glibc),
                object: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
                calibration: Some(AllocCalibration {
                    calls: 10_000,
                    bare_ns: 30_000,
                    probed_ns: 22_030_000,
                    pair_cost_ns: 2_200,
                    inside_ns: 900,
                    buckets: vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 10_000],
                }),
                overhead: Some(AllocOverhead {
                    probe_hits: 40_000,
                    pair_cost_ns: 2_200,
                    target_cpu_ns: 10_000_000_000,
                    overhead_ppm: 8_800,
                }),
                ..AllocRecord::default()
            }),
            kernel_stacks: Vec::new(),
            cpu_profile: None,
            offcpu_profile: None,
            offcpu_sampled_one_in: 0,
            mongod: None,
        }
    }

    #[test]
    fn round_trip_is_exact_and_file_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.mdiag");
        let rec = sample();
        write_atomic(&rec, &path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let back = read_file(&path).unwrap();
        assert_eq!(back, rec);
        // No temporary files left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn missing_file_is_not_found() {
        let err = read_file(Path::new("/nonexistent/x.mdiag")).unwrap_err();
        assert!(matches!(err, RecordingError::NotFound { .. }), "{err}");
        assert!(err.to_string().contains("/nonexistent/x.mdiag"));
    }

    #[test]
    fn a_truncated_version_1_file_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.mdiag");
        let mut v1 = sample();
        v1.version = 1;
        let json = serde_json::to_vec(&v1).unwrap();
        std::fs::write(&path, zstd::encode_all(&json[..], 3).unwrap()).unwrap();
        assert_eq!(read_file(&path).unwrap(), v1);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        let err = read_file(&path).unwrap_err();
        assert!(matches!(err, RecordingError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("truncated or corrupt"));
    }

    #[test]
    fn garbage_is_not_a_recording() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.mdiag");
        std::fs::write(&path, b"hello world, not zstd").unwrap();
        assert!(matches!(
            read_file(&path).unwrap_err(),
            RecordingError::NotARecording { .. }
        ));
        std::fs::write(&path, b"").unwrap();
        let err = read_file(&path).unwrap_err();
        assert!(err.to_string().contains("empty"), "{err}");
    }

    #[test]
    fn corrupt_payload_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.mdiag");
        let json = serde_json::to_vec(&sample()).unwrap();
        let mut broken = json.clone();
        broken.truncate(json.len() - 10);
        std::fs::write(&path, zstd::encode_all(&broken[..], 3).unwrap()).unwrap();
        let err = read_file(&path).unwrap_err();
        assert!(matches!(err, RecordingError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("invalid JSON"), "{err}");
    }

    #[test]
    fn future_version_is_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.mdiag");
        let mut v = serde_json::to_value(sample()).unwrap();
        v["version"] = serde_json::json!(FORMAT_VERSION + 1);
        v["something_new"] = serde_json::json!({"a": 1});
        std::fs::write(
            &path,
            zstd::encode_all(&serde_json::to_vec(&v).unwrap()[..], 3).unwrap(),
        )
        .unwrap();
        let err = read_file(&path).unwrap_err();
        assert!(
            matches!(err, RecordingError::FutureVersion { found, .. } if found == u64::from(FORMAT_VERSION) + 1),
            "{err}"
        );
        assert!(err.to_string().contains("upgrade mdiag"));
    }

    #[test]
    fn a_newer_builds_field_asks_for_an_upgrade() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.mdiag");
        let mut v = serde_json::to_value(sample()).unwrap();
        v["mdiag_version"] = serde_json::json!("0.1.7");
        v["host"]["something_new"] = serde_json::json!(1);
        std::fs::write(
            &path,
            zstd::encode_all(&serde_json::to_vec(&v).unwrap()[..], 3).unwrap(),
        )
        .unwrap();
        let err = read_file(&path).unwrap_err();
        assert!(
            matches!(&err, RecordingError::UnknownField { field, writer, .. }
                if field == "something_new" && writer == "0.1.7"),
            "{err}"
        );
        let text = err.to_string();
        assert!(
            text.contains("upgrade mdiag") && !text.contains("corrupt"),
            "{text}"
        );
        // A field of the wrong type is still damage, not a newer build.
        let mut v = serde_json::to_value(sample()).unwrap();
        v["requested_duration_ms"] = serde_json::json!("soon");
        std::fs::write(
            &path,
            zstd::encode_all(&serde_json::to_vec(&v).unwrap()[..], 3).unwrap(),
        )
        .unwrap();
        assert!(matches!(
            read_file(&path).unwrap_err(),
            RecordingError::Corrupt { .. }
        ));
    }

    #[test]
    fn other_json_is_not_a_recording() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.mdiag");
        std::fs::write(&path, zstd::encode_all(&b"{\"hello\": 1}"[..], 3).unwrap()).unwrap();
        let err = read_file(&path).unwrap_err();
        assert!(matches!(err, RecordingError::NotARecording { .. }), "{err}");
    }

    #[test]
    fn default_name_and_newest() {
        let t = DateTime::parse_from_rfc3339("2026-11-22T17:45:01Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(
            default_file_name("db 1", t),
            "mdiag-db_1-20261122T174501Z.mdiag"
        );
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            newest_in_dir(dir.path()).unwrap_err(),
            RecordingError::NoneInDir { .. }
        ));
        let a = dir.path().join("a.mdiag");
        let b = dir.path().join("b.mdiag");
        std::fs::write(&a, b"x").unwrap();
        std::fs::write(dir.path().join("c.txt"), b"x").unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        File::options()
            .write(true)
            .open(&a)
            .unwrap()
            .set_modified(old)
            .unwrap();
        std::fs::write(&b, b"x").unwrap();
        assert_eq!(newest_in_dir(dir.path()).unwrap(), b);
    }
}
