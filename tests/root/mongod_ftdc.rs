//! FTDC written by the real mongod 6.0.5, decoded by `mdiag export`, against
//! an independent decoder (agent/tests/py/ftdc_samples.py: pymongo's `bson`,
//! zlib and the varint delta format, nothing of mdiag's).
//!
//! The server is a single-node replica set under `mdiag-mongoload`, told to
//! sample every 100 ms, to close a chunk every 10 samples and to rewrite
//! `metrics.interim` every 3, so that in a few seconds its `diagnostic.data`
//! holds several complete chunks (with the schema change of the set becoming
//! primary among them) and an interim file. A copy taken while mongod is
//! stopped (SIGSTOP: no file half-written) is decoded both ways: the whole
//! directory and `metrics.interim` alone. Every sample's time and every
//! metric of it, in order and duplicates included (a container can list one
//! mount twice in `systemMetrics.mounts`), must be equal.
//!
//! Cost: 6-8 s (mongod start and initiate, 4 s of load, decoding), with both
//! CPUs loaded too.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use mdiag_tests::{
    mongod::{Load, Mongod, Options},
    py_venv, require_root, run_mdiag,
};
use serde_json::Value;

/// Complete chunks begun under load that the test waits for.
const CHUNKS_UNDER_LOAD: usize = 3;
/// Samples among those chunks that the test waits for (a chunk closes at 10
/// samples, or sooner on a schema change).
const SAMPLES_UNDER_LOAD: usize = CHUNKS_UNDER_LOAD * 10;

fn ftdc_options() -> Options {
    let set = |p: &str| ["--setParameter".to_owned(), p.to_owned()];
    Options {
        repl_set: Some("rs0".into()),
        extra: [
            set("diagnosticDataCollectionPeriodMillis=100"),
            set("diagnosticDataCollectionSamplesPerChunk=10"),
            set("diagnosticDataCollectionSamplesPerInterimUpdate=3"),
        ]
        .concat(),
        ..Options::default()
    }
}

#[test]
fn export_of_real_mongod_ftdc_equals_an_independent_decoder() {
    require_root();
    let server = Mongod::start_with(ftdc_options());
    let load_start_ms = now_ms();
    let load = Load::start(&server.uri(), 4);
    let data = server.diagnostic_data();
    wait_for_chunks(&data, load_start_ms, Duration::from_secs(60));

    // A consistent copy: mongod stopped while the files are read.
    let copy = tempfile::tempdir().expect("tempdir");
    server.signal(libc::SIGSTOP);
    let copied = copy_dir(&data, copy.path());
    server.signal(libc::SIGCONT);
    let (_, total) = load.finish();
    let copied = copied.expect("copying diagnostic.data");
    assert!(
        total["ops"].as_u64().unwrap_or(0) > 0,
        "the load did nothing: {total}"
    );

    let mut archives: Vec<PathBuf> = copied
        .iter()
        .filter(|p| p.file_name().is_some_and(|n| n != "metrics.interim"))
        .cloned()
        .collect();
    archives.sort();
    let interim = copy.path().join("metrics.interim");
    assert!(interim.exists(), "no metrics.interim in {copied:?}");
    let mut files = archives;
    files.push(interim.clone());

    // The whole directory: the independent decoder's samples in file order,
    // leaving out a time not after the previous one (export's documented
    // rule for metrics.interim repeating an archive).
    let truth = keep_increasing(independent(&files));
    let exported = export(copy.path());
    compare(&truth, &exported, "the directory");
    let under_load = truth.iter().filter(|s| s.t >= load_start_ms).count();
    assert!(
        under_load >= SAMPLES_UNDER_LOAD,
        "only {under_load} samples under load"
    );
    // The load shows in the FTDC (so the samples are of a busy server).
    let inserts: Vec<i64> = truth
        .iter()
        .filter_map(|s| metric(s, "serverStatus.opcounters.insert"))
        .collect();
    assert!(
        inserts.last() > inserts.first(),
        "opcounters.insert did not grow under load: {inserts:?}"
    );
    let schemas: BTreeMap<usize, usize> = truth.iter().fold(BTreeMap::new(), |mut m, s| {
        *m.entry(s.metrics.len()).or_default() += 1;
        m
    });

    // The interim file alone: the chunk mongod is filling.
    let truth_interim = independent(std::slice::from_ref(&interim));
    assert!(!truth_interim.is_empty(), "metrics.interim has no sample");
    compare(&truth_interim, &export(&interim), "metrics.interim");
    eprintln!(
        "FTDC compared: {} files, {} samples ({under_load} under load), metric counts {schemas:?}, \
         interim {} samples",
        files.len(),
        truth.len(),
        truth_interim.len()
    );
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Waits until the archive files hold `CHUNKS_UNDER_LOAD` metric chunks
/// begun after `since_ms`, with at least `SAMPLES_UNDER_LOAD` samples among
/// them, and metrics.interim exists. Chunks are counted by samples too: a
/// schema change (a metric appearing under load, the set becoming primary)
/// closes a chunk before its 10th sample.
fn wait_for_chunks(dir: &Path, since_ms: i64, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        let seen = chunks_since(dir, since_ms);
        if seen.chunks >= CHUNKS_UNDER_LOAD && seen.samples >= SAMPLES_UNDER_LOAD && seen.interim {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "after {limit:?}, {} has {} chunks begun under load with {} samples (want \
             {CHUNKS_UNDER_LOAD} and {SAMPLES_UNDER_LOAD}), metrics.interim present: {}",
            dir.display(),
            seen.chunks,
            seen.samples,
            seen.interim
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// What the archive files of a `diagnostic.data` hold so far.
struct Seen {
    /// Metric chunks whose `_id` is at or after the time asked about.
    chunks: usize,
    /// The samples of those chunks.
    samples: usize,
    /// Whether metrics.interim exists.
    interim: bool,
}

/// The metric chunks begun at or after `since_ms` and their samples, read
/// with the bson and flate2 crates.
fn chunks_since(dir: &Path, since_ms: i64) -> Seen {
    let mut seen = Seen {
        chunks: 0,
        samples: 0,
        interim: false,
    };
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "metrics.interim" {
            seen.interim = true;
            continue;
        }
        if !name.starts_with("metrics.") || name.ends_with(".temp") {
            continue;
        }
        let Ok(bytes) = std::fs::read(entry.path()) else {
            continue;
        };
        let mut rest = &bytes[..];
        while let Ok(doc) = bson::Document::from_reader(&mut rest) {
            let begun = doc.get_datetime("_id").map_or(0, |d| d.timestamp_millis());
            if doc.get_i32("type").ok() == Some(1) && begun >= since_ms {
                seen.chunks += 1;
                seen.samples += doc
                    .get_binary_generic("data")
                    .map_or(0, |d| chunk_samples(d));
            }
        }
    }
    seen
}

/// Samples in one metric chunk's `data`: a little-endian u32 length, then
/// zlib of (the reference document, u32 metric count, u32 delta count, ...);
/// the reference is a sample, each delta row another. 0 if it cannot be read
/// (a chunk being written is counted on the next look).
fn chunk_samples(data: &[u8]) -> usize {
    use std::io::Read;
    let Some(zlib) = data.get(4..) else {
        return 0;
    };
    let mut plain = Vec::new();
    if flate2::read::ZlibDecoder::new(zlib)
        .read_to_end(&mut plain)
        .is_err()
    {
        return 0;
    }
    let mut rest = &plain[..];
    if bson::Document::from_reader(&mut rest).is_err() {
        return 0;
    }
    let Some(deltas) = rest.get(4..8) else {
        return 0;
    };
    let deltas = u32::from_le_bytes([deltas[0], deltas[1], deltas[2], deltas[3]]);
    1 + deltas as usize
}

/// Copies the `metrics.*` files of `from` into `to`; their new paths.
fn copy_dir(from: &Path, to: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        let n = name.to_string_lossy();
        if !n.starts_with("metrics.") || n.ends_with(".temp") {
            continue;
        }
        let dest = to.join(&name);
        std::fs::copy(entry.path(), &dest)?;
        out.push(dest);
    }
    Ok(out)
}

/// One decoded sample.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    t: i64,
    t_text: String,
    metrics: Vec<(String, i64)>,
}

fn metric(s: &Sample, path: &str) -> Option<i64> {
    s.metrics.iter().find(|(p, _)| p == path).map(|(_, v)| *v)
}

/// The independent decoder's samples of `files`, in order.
fn independent(files: &[PathBuf]) -> Vec<Sample> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../agent/tests/py/ftdc_samples.py");
    let out = Command::new(py_venv().join("bin/python"))
        .arg(script)
        .args(files)
        .output()
        .expect("running ftdc_samples.py");
    assert!(
        out.status.success(),
        "ftdc_samples.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).expect("ftdc_samples.py's JSON");
            let metrics = v["metrics"]
                .as_array()
                .expect("metrics pairs")
                .iter()
                .map(|p| {
                    let path = p[0].as_str().expect("a path").to_owned();
                    (path, p[1].as_i64().expect("an int64"))
                })
                .collect();
            Sample {
                t: v["t"].as_i64().expect("t"),
                t_text: v["t_text"].as_str().expect("t_text").to_owned(),
                metrics,
            }
        })
        .collect()
}

/// Drops samples whose time is not after the previous one kept.
fn keep_increasing(samples: Vec<Sample>) -> Vec<Sample> {
    let mut last = i64::MIN;
    let before = samples.len();
    let kept: Vec<Sample> = samples
        .into_iter()
        .filter(|s| {
            let keep = s.t > last;
            last = last.max(s.t);
            keep
        })
        .collect();
    if kept.len() != before {
        eprintln!(
            "{} samples repeat an earlier time (left out, as export does)",
            before - kept.len()
        );
    }
    kept
}

/// `mdiag export --no-metadata --dates-as-ms PATH`, parsed keeping every
/// key of each `metrics` object in order (duplicates too).
fn export(path: &Path) -> Vec<Sample> {
    let out = run_mdiag(&[
        "export",
        "--no-metadata",
        "--dates-as-ms",
        &path.to_string_lossy(),
    ]);
    assert!(
        out.status.success(),
        "mdiag export {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|line| {
            let l: ExportLine = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("export printed {line:.200}: {e}"));
            let t = l.metrics.0.first().map_or(0, |(_, v)| *v);
            Sample {
                t,
                t_text: l.t,
                metrics: l.metrics.0,
            }
        })
        .collect()
}

#[derive(serde::Deserialize)]
struct ExportLine {
    t: String,
    metrics: Pairs,
}

/// A JSON object as its (key, value) pairs in order, duplicates kept;
/// booleans as 0/1 (export writes them as JSON booleans).
struct Pairs(Vec<(String, i64)>);

impl<'de> serde::Deserialize<'de> for Pairs {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Pairs;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of numbers and booleans")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Pairs, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = m.next_entry::<String, Value>()? {
                    let n = match &v {
                        Value::Bool(b) => i64::from(*b),
                        Value::Number(n) => n.as_i64().ok_or_else(|| {
                            serde::de::Error::custom(format!("{k}: {n} is not an int64"))
                        })?,
                        other => {
                            return Err(serde::de::Error::custom(format!("{k}: {other}")));
                        }
                    };
                    out.push((k, n));
                }
                Ok(Pairs(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Every sample equal; the first difference is named precisely.
fn compare(truth: &[Sample], exported: &[Sample], what: &str) {
    for (i, (a, b)) in truth.iter().zip(exported).enumerate() {
        assert_eq!(
            (a.t, &a.t_text),
            (b.t, &b.t_text),
            "{what}: sample {i} time differs (independent vs export)"
        );
        assert_eq!(
            a.metrics.len(),
            b.metrics.len(),
            "{what}: sample {i} at {} has {} metrics independently, {} exported",
            a.t_text,
            a.metrics.len(),
            b.metrics.len()
        );
        if let Some((x, y)) = a.metrics.iter().zip(&b.metrics).find(|(x, y)| x != y) {
            panic!(
                "{what}: sample {i} at {}: independent {x:?}, export {y:?}",
                a.t_text
            );
        }
    }
    assert_eq!(
        truth.len(),
        exported.len(),
        "{what}: {} samples independently, {} exported",
        truth.len(),
        exported.len()
    );
}
