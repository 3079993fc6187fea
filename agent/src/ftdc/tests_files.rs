//! Tests of reading FTDC files and directories as they come: truncated and
//! flipped copies of the real mongod 7.0.0-rc6 files (errors name the file
//! and offset), input that is not FTDC, a fuzz corpus (an error or a value,
//! never a panic), and a directory's order (archives, then interim).

use std::path::{Path, PathBuf};

use super::tests::{archive, chunks, fixture_dir};
use super::*;

fn write_temp(dir: &tempfile::TempDir, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.path().join(name);
    std::fs::write(&p, bytes).expect("write temp file");
    p
}

/// Reads a file to the first error, which must exist.
fn first_error(path: &Path) -> FtdcError {
    FtdcFile::open(path)
        .expect("opens")
        .find_map(Result::err)
        .unwrap_or_else(|| panic!("{} decoded without error", path.display()))
}

#[test]
fn truncated_copies_report_file_and_offset() {
    let bytes = std::fs::read(archive()).expect("fixture");
    let tmp = tempfile::tempdir().expect("tempdir");
    // (cut at, offset of the document expected in the error)
    for (cut, doc_offset) in [
        (2, 0),
        (100, 0),
        (17_822 + 3, 17_822),
        (17_822 + 500, 17_822),
        (54_745 + 30_000, 54_745),
        (bytes.len() - 1, 2_332_462),
    ] {
        let p = write_temp(&tmp, &format!("metrics.cut-{cut}"), &bytes[..cut]);
        let e = first_error(&p);
        assert_eq!(e.file(), Some(p.as_path()), "cut {cut}");
        assert_eq!(e.offset(), Some(doc_offset), "cut {cut}: {e}");
        assert!(
            matches!(
                e,
                FtdcError::Corrupt {
                    kind: Corrupt::Truncated { .. },
                    ..
                }
            ),
            "cut {cut}: {e}"
        );
        let msg = e.to_string();
        assert!(
            msg.contains(&p.display().to_string()) && msg.contains(&format!("byte {doc_offset}")),
            "{msg}"
        );
    }
    // Cut on a document boundary: a shorter, valid file.
    let p = write_temp(&tmp, "metrics.boundary", &bytes[..54_745]);
    assert_eq!(chunks(&p).len(), 1);
}

#[test]
fn flipped_byte_in_zlib_stream_is_an_error_at_that_chunk() {
    let mut bytes = std::fs::read(archive()).expect("fixture");
    let tmp = tempfile::tempdir().expect("tempdir");
    // Flip bytes at several places of the first chunk's compressed data
    // (document at 17822; its BinData payload starts ~40 bytes in).
    for at in [17_822 + 60, 17_822 + 5_000, 17_822 + 30_000] {
        let orig = bytes[at];
        bytes[at] ^= 0x5a;
        let p = write_temp(&tmp, "metrics.flipped", &bytes);
        let e = first_error(&p);
        assert_eq!(e.offset(), Some(17_822), "flip at {at}: {e}");
        assert!(
            matches!(
                e,
                FtdcError::Corrupt {
                    kind: Corrupt::Chunk(_),
                    ..
                }
            ),
            "flip at {at}: {e}"
        );
        assert!(e.to_string().contains("metrics.flipped"), "{e}");
        bytes[at] = orig;
    }
}

#[test]
fn non_ftdc_input_is_refused_clearly() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // Text: the length field reads as a huge number.
    let licence = std::fs::read(fixture_dir().join("LICENSE")).expect("licence");
    let p = write_temp(&tmp, "licence", &licence);
    let e = first_error(&p);
    assert!(
        matches!(
            e,
            FtdcError::Corrupt {
                offset: 0,
                kind: Corrupt::DocLength { .. } | Corrupt::Truncated { .. },
                ..
            }
        ),
        "{e}"
    );
    // Valid BSON that is not FTDC.
    let not_ftdc = bson::rawdoc! { "hello": "world" };
    let p = write_temp(&tmp, "plain.bson", not_ftdc.as_bytes());
    let e = first_error(&p);
    assert!(
        matches!(
            e,
            FtdcError::Corrupt {
                offset: 0,
                kind: Corrupt::Field { field: "_id", .. },
                ..
            }
        ),
        "{e}"
    );
    // A metric chunk whose data is not zlib.
    let bad = bson::rawdoc! {
        "_id": bson::DateTime::from_millis(0),
        "type": 1_i32,
        "data": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![9, 0, 0, 0, 1, 2, 3, 4, 5] },
    };
    let p = write_temp(&tmp, "bad-zlib", bad.as_bytes());
    let e = first_error(&p);
    assert!(
        matches!(
            e,
            FtdcError::Corrupt {
                offset: 0,
                kind: Corrupt::Chunk(ChunkError::Zlib { .. }),
                ..
            }
        ),
        "{e}"
    );
    // An empty file has no documents and no error; a missing one is an I/O error naming it.
    let p = write_temp(&tmp, "empty", &[]);
    assert_eq!(FtdcFile::open(&p).expect("opens").count(), 0);
    let missing = tmp.path().join("missing");
    let e = FtdcFile::open(&missing).err().expect("missing file");
    assert_eq!(e.file(), Some(missing.as_path()));
    // A directory without metrics files.
    let empty_dir = tempfile::tempdir().expect("tempdir");
    assert!(matches!(
        FtdcDir::open(empty_dir.path()),
        Err(FtdcError::NoFiles { .. })
    ));
}

#[test]
fn directory_reads_archives_then_interim_and_skips_temp() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let archive_bytes = std::fs::read(archive()).expect("fixture");
    let interim_bytes = std::fs::read(fixture_dir().join("metrics.interim")).expect("fixture");
    // Two archives (second sorts later), the interim, a temp file and junk.
    std::fs::write(
        tmp.path().join("metrics.2024-04-17T00-00-00Z-00000"),
        &archive_bytes[..54_745],
    )
    .expect("w");
    std::fs::write(
        tmp.path().join("metrics.2024-04-16T11-34-42Z-00000"),
        &archive_bytes,
    )
    .expect("w");
    std::fs::write(tmp.path().join("metrics.interim"), &interim_bytes).expect("w");
    std::fs::write(tmp.path().join("metrics.interim.temp"), b"partial").expect("w");
    std::fs::write(tmp.path().join("notes.txt"), b"x").expect("w");
    let dir = FtdcDir::open(tmp.path()).expect("lists");
    let names: Vec<String> = dir
        .files()
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "metrics.2024-04-16T11-34-42Z-00000",
            "metrics.2024-04-17T00-00-00Z-00000",
            "metrics.interim"
        ]
    );
    assert_eq!(
        dir.total_bytes(),
        (archive_bytes.len() + 54_745 + interim_bytes.len()) as u64
    );
    let mut per_file = [0usize; 3];
    for item in dir {
        let item = item.expect("decodes");
        per_file[item.file] += 1;
    }
    assert_eq!(per_file, [66, 2, 1]);
    // A single file works as a "directory" too.
    assert_eq!(FtdcDir::open(archive()).expect("file").files(), [archive()]);
}

#[test]
fn directory_goes_on_after_a_damaged_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let archive_bytes = std::fs::read(archive()).expect("fixture");
    std::fs::write(tmp.path().join("metrics.a"), &archive_bytes[..17_822 + 100]).expect("w");
    std::fs::write(tmp.path().join("metrics.b"), &archive_bytes[..54_745]).expect("w");
    let items: Vec<_> = FtdcDir::open(tmp.path()).expect("lists").collect();
    // metrics.a: metadata, then the truncated chunk; metrics.b: metadata + 1 chunk.
    assert_eq!(items.len(), 4);
    let e = items[1].as_ref().expect_err("error");
    assert!(
        e.file().is_some_and(|f| f.ends_with("metrics.a")) && e.offset() == Some(17_822),
        "{e}"
    );
    assert!(items[2..].iter().all(Result::is_ok));
}

#[test]
fn uptime_continues_across_chunk_boundaries() {
    // The next chunk's reference follows the previous chunk's last sample
    // by one period: checks the reference values and the deltas agree
    // (a double stored differently than mongod does would jump here).
    let cs = chunks(&archive());
    for pair in cs.windows(2) {
        for (path, lo, hi) in [
            ("serverStatus.uptimeMillis", 900, 1_500),
            ("serverStatus.uptime", 0, 2),
            ("start", 900, 1_500),
        ] {
            let last = pair[0]
                .column_by_path(path)
                .and_then(|c| c.last())
                .expect(path);
            let first = pair[1]
                .column_by_path(path)
                .and_then(|c| c.first())
                .expect(path);
            assert!(
                (lo..=hi).contains(&(first - last)),
                "{path}: {last} -> {first} at chunk {}",
                pair[1].offset
            );
        }
    }
    // Most metrics do not change within a chunk and are not materialised.
    let c = &cs[0];
    assert!(
        c.changing_metrics() > 50 && c.changing_metrics() < c.metric_count() / 2,
        "{}",
        c.changing_metrics()
    );
}

/// The fuzz corpus (fuzz/corpus/ftdc_file, crashes found by fuzzing
/// included) must decode to documents or errors without panicking, so CI
/// checks the fuzz findings without nightly.
#[test]
fn fuzz_corpus_decodes_or_errors_without_panicking() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/ftdc_file");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("fuzz corpus {}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    assert!(
        files.len() >= 15,
        "only {} corpus files in {}",
        files.len(),
        dir.display()
    );
    let mut outcomes = std::collections::BTreeMap::new();
    for path in &files {
        let bytes = std::fs::read(path).expect("corpus file");
        let mut docs = 0;
        let mut samples = 0;
        let mut error = None;
        let mut file = FtdcFile::from_bytes(&bytes, path);
        while let Some(doc) = file.next_doc() {
            match doc {
                Ok(FtdcDoc::Metrics(c)) => {
                    docs += 1;
                    samples += c.sample_count();
                    let mut row = Vec::new();
                    c.sample_into(c.sample_count() - 1, &mut row);
                    assert_eq!(row.len(), c.metric_count());
                    let _ = (c.time_range(), c.reference_document());
                }
                Ok(_) => docs += 1,
                Err(e) => {
                    assert_eq!(e.file(), Some(path.as_path()));
                    assert!(
                        e.offset().is_some() && e.offset() < Some(bytes.len() as u64),
                        "{e}"
                    );
                    error = Some(e.to_string());
                }
            }
        }
        let inflated = chunk::decode_inflated(&bytes, chrono::DateTime::default(), 0, Vec::new())
            .map(|c| (c.metric_count(), c.sample_count()));
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        outcomes.insert(name, (docs, samples, error, inflated.ok()));
    }
    // Known seeds decode to what they hold.
    let get = |name: &str| {
        outcomes
            .get(name)
            .unwrap_or_else(|| panic!("seed {name} missing from the corpus"))
    };
    assert_eq!(get("fixture-interim").0, 1);
    assert_eq!(get("fixture-interim").1, 181);
    assert_eq!(get("fixture-two-sample-chunk").1, 2);
    assert_eq!(get("synthetic-all-doc-types").0, 4);
    assert_eq!(get("synthetic-all-doc-types").1, 6);
    assert_eq!(get("inflated-synthetic-all-types").3, Some((11, 6)));
    assert_eq!(get("inflated-reference-only").3, Some((11, 1)));
    assert_eq!(get("inflated-all-constant").3, Some((11, 40)));
    assert!(
        get("fixture-chunk-flipped-byte")
            .2
            .as_deref()
            .is_some_and(|e| e.contains("metric chunk"))
    );
    assert!(
        get("fixture-cut-inside-chunk")
            .2
            .as_deref()
            .is_some_and(|e| e.contains("truncated"))
    );
    assert!(get("not-ftdc-text").2.is_some());
    assert!(
        get("not-ftdc-bson")
            .2
            .as_deref()
            .is_some_and(|e| e.contains("_id"))
    );
}
