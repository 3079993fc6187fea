//! Tests of what the decoder does with damaged or unusual copies of the real
//! mongod 7.0.0-rc6 FTDC files: the zero length mongod ends a file with, a
//! corrupt chunk inside an intact frame (only that chunk is lost, in the
//! decoder, the directory reader and `export`), and a broken frame (the rest
//! of the file is lost, the next file is read).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use super::tests::{archive, fixture_dir};
use super::*;
use crate::export::{ExportOptions, export_ftdc};

/// Documents of the archive fixture: metadata at 0, then chunks.
const CHUNK_0: usize = 17_822;
const CHUNK_1: usize = 54_745;
const CHUNK_2: usize = 92_463;
/// Samples of the archive and of the interim file.
const ARCHIVE_SAMPLES: usize = 19_007;
const INTERIM_SAMPLES: usize = 181;

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write temp file");
    p
}

/// Every item of a file: the chunks decoded and the errors.
fn read_file(path: &Path) -> (Vec<Chunk>, Vec<FtdcError>) {
    let mut chunks = Vec::new();
    let mut errors = Vec::new();
    for doc in FtdcFile::open(path).expect("opens") {
        match doc {
            Ok(FtdcDoc::Metrics(c)) => chunks.push(c),
            Ok(_) => {}
            Err(e) => errors.push(e),
        }
    }
    (chunks, errors)
}

fn samples(chunks: &[Chunk]) -> usize {
    chunks.iter().map(Chunk::sample_count).sum()
}

/// `damaged` holds exactly the chunks of `clean` but those starting at the
/// times in `lost`, each with the same metrics and every value equal.
fn assert_same_chunks_but(
    damaged: &[Chunk],
    clean: &[Chunk],
    lost: &[chrono::DateTime<chrono::Utc>],
) {
    let kept: Vec<&Chunk> = clean.iter().filter(|c| !lost.contains(&c.id)).collect();
    assert_eq!(damaged.len(), kept.len());
    for (d, c) in damaged.iter().zip(kept) {
        assert_eq!(d.id, c.id);
        assert_eq!(d.paths(), c.paths(), "chunk {}", c.id);
        assert_eq!(d.kinds(), c.kinds(), "chunk {}", c.id);
        assert_eq!(d.sample_count(), c.sample_count(), "chunk {}", c.id);
        for m in 0..c.metric_count() {
            assert_eq!(d.column(m), c.column(m), "chunk {} metric {m}", c.id);
        }
    }
}

#[test]
fn a_zero_length_ends_the_file_without_error() {
    let bytes = std::fs::read(archive()).expect("fixture");
    let tmp = tempfile::tempdir().expect("tempdir");
    let (clean, _) = read_file(&archive());
    // mongod's interim sentinel (8 zero bytes), a zero-filled tail of a
    // page, and zeros followed by anything: all end the file quietly.
    let mut tails: Vec<Vec<u8>> = vec![vec![0; 4], vec![0; 8], vec![0; 4096]];
    tails.push([&[0u8; 8][..], &bytes[CHUNK_0..CHUNK_1]].concat());
    for (i, tail) in tails.iter().enumerate() {
        let p = write(
            tmp.path(),
            &format!("metrics.zeros-{i}"),
            &[&bytes[..], tail].concat(),
        );
        let (chunks, errors) = read_file(&p);
        assert!(errors.is_empty(), "tail {i}: {errors:?}");
        assert_eq!(samples(&chunks), ARCHIVE_SAMPLES, "tail {i}");
        assert_same_chunks_but(&chunks, &clean, &[]);
    }
    // Zeros in the middle end the file there, as for mongod.
    let p = write(
        tmp.path(),
        "metrics.zeros-middle",
        &[&bytes[..CHUNK_1], &[0; 8], &bytes[CHUNK_1..]].concat(),
    );
    let (chunks, errors) = read_file(&p);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(chunks.len(), 1);
    // Fewer than 4 bytes after the last document are not a length: damage.
    let p = write(
        tmp.path(),
        "metrics.two-zeros",
        &[&bytes[..], &[0, 0]].concat(),
    );
    let (chunks, errors) = read_file(&p);
    assert_eq!(samples(&chunks), ARCHIVE_SAMPLES);
    assert!(
        matches!(
            &errors[..],
            [FtdcError::Corrupt {
                kind: Corrupt::Truncated { .. },
                ..
            }]
        ),
        "{errors:?}"
    );
}

#[test]
fn a_directory_of_files_ending_in_zeros_is_read_to_the_end() {
    let bytes = std::fs::read(archive()).expect("fixture");
    let interim = std::fs::read(fixture_dir().join("metrics.interim")).expect("fixture");
    let tmp = tempfile::tempdir().expect("tempdir");
    // Three archives (the same chunks: a directory reader does not judge
    // time), each ending in zeros, then the interim file with its sentinel.
    for name in ["metrics.a", "metrics.b", "metrics.c"] {
        write(tmp.path(), name, &[&bytes[..], &[0; 8]].concat());
    }
    write(
        tmp.path(),
        "metrics.interim",
        &[&interim[..], &[0; 8]].concat(),
    );
    let dir = FtdcDir::open(tmp.path()).expect("lists");
    assert_eq!(dir.files().len(), 4);
    let mut per_file = [0usize; 4];
    for item in dir {
        let item = item.expect("no error in any file");
        if let FtdcDoc::Metrics(c) = &item.doc {
            per_file[item.file] += c.sample_count();
        }
    }
    assert_eq!(
        per_file,
        [
            ARCHIVE_SAMPLES,
            ARCHIVE_SAMPLES,
            ARCHIVE_SAMPLES,
            INTERIM_SAMPLES
        ]
    );
}

/// The archive with one byte of chunk 1's zlib stream flipped.
fn flipped_archive() -> Vec<u8> {
    let mut bytes = std::fs::read(archive()).expect("fixture");
    bytes[CHUNK_1 + 5_000] ^= 0x5a;
    bytes
}

/// A chunk document rebuilt the way mongod writes it, with `edit` applied
/// to its inflated content (reference document, counts, deltas).
fn rebuilt_chunk(doc: &[u8], edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let raw = bson::RawDocument::from_bytes(doc).expect("chunk document");
    let id = raw.get_datetime("_id").expect("_id");
    let data = raw.get_binary("data").expect("data").bytes;
    let mut inflated = Vec::new();
    flate2::read::ZlibDecoder::new(&data[4..])
        .read_to_end(&mut inflated)
        .expect("inflates");
    edit(&mut inflated);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(&inflated).expect("compress");
    let mut payload = (inflated.len() as u32).to_le_bytes().to_vec();
    payload.extend(z.finish().expect("compress"));
    bson::rawdoc! {
        "_id": id, "type": 1_i32,
        "data": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: payload },
    }
    .into_bytes()
}

/// The archive with chunk 1's sample count changed (its frame is rebuilt
/// and intact; the documents after it move).
fn bad_sample_count_archive() -> Vec<u8> {
    let bytes = std::fs::read(archive()).expect("fixture");
    let chunk = rebuilt_chunk(&bytes[CHUNK_1..CHUNK_2], |raw| {
        let ref_len = u32::from_le_bytes(raw[..4].try_into().expect("4 bytes")) as usize;
        let at = ref_len + 4;
        let deltas = u32::from_le_bytes(raw[at..at + 4].try_into().expect("4 bytes"));
        raw[at..at + 4].copy_from_slice(&(deltas + 100).to_le_bytes());
    });
    [&bytes[..CHUNK_1], &chunk[..], &bytes[CHUNK_2..]].concat()
}

#[test]
fn a_corrupt_chunk_costs_only_itself() {
    let (clean, _) = read_file(&archive());
    let lost = clean[1].id;
    let lost_samples = clean[1].sample_count();
    assert_eq!(lost_samples, 300);
    let tmp = tempfile::tempdir().expect("tempdir");
    for (name, bytes) in [
        ("metrics.flipped", flipped_archive()),
        ("metrics.bad-count", bad_sample_count_archive()),
    ] {
        let p = write(tmp.path(), name, &bytes);
        let (chunks, errors) = read_file(&p);
        let [e] = &errors[..] else {
            panic!("{name}: {errors:?}")
        };
        assert_eq!(e.offset(), Some(CHUNK_1 as u64), "{name}: {e}");
        assert!(
            matches!(
                e,
                FtdcError::Corrupt {
                    kind: Corrupt::Chunk(_),
                    ..
                }
            ),
            "{name}: {e}"
        );
        assert!(!e.ends_file(), "{name}: {e}");
        assert_eq!(e.skipped(), "this document only");
        assert!(e.to_string().contains(name), "{e}");
        // Every other chunk is read, value for value.
        assert_eq!(samples(&chunks), ARCHIVE_SAMPLES - lost_samples, "{name}");
        assert_same_chunks_but(&chunks, &clean, &[lost]);
    }
}

#[test]
fn a_broken_length_ends_its_file_and_the_next_file_is_read() {
    let bytes = std::fs::read(archive()).expect("fixture");
    let interim = std::fs::read(fixture_dir().join("metrics.interim")).expect("fixture");
    let tmp = tempfile::tempdir().expect("tempdir");
    // Chunk 1's length negative, and beyond the end of the file.
    let past_the_end = i32::try_from(bytes.len()).expect("small file");
    for (name, len) in [("metrics.a", -7_i32), ("metrics.b", past_the_end)] {
        let mut b = bytes.clone();
        b[CHUNK_1..CHUNK_1 + 4].copy_from_slice(&len.to_le_bytes());
        write(tmp.path(), name, &b);
    }
    write(tmp.path(), "metrics.interim", &interim);
    let mut samples_per_file = [0usize; 3];
    let mut errors = Vec::new();
    for item in FtdcDir::open(tmp.path()).expect("lists") {
        match item {
            Ok(DirItem {
                file,
                doc: FtdcDoc::Metrics(c),
            }) => samples_per_file[file] += c.sample_count(),
            Ok(_) => {}
            Err(e) => errors.push(e),
        }
    }
    // Chunk 0 of each damaged file, then nothing more of it; all the interim.
    assert_eq!(samples_per_file, [300, 300, INTERIM_SAMPLES]);
    assert_eq!(errors.len(), 2, "{errors:?}");
    for e in &errors {
        assert!(e.ends_file() && e.offset() == Some(CHUNK_1 as u64), "{e}");
        assert_eq!(e.skipped(), "the rest of the file");
    }
    assert!(matches!(
        errors[0],
        FtdcError::Corrupt {
            kind: Corrupt::DocLength { .. },
            ..
        }
    ));
    assert!(matches!(
        errors[1],
        FtdcError::Corrupt {
            kind: Corrupt::Truncated { .. },
            ..
        }
    ));
}

#[test]
fn export_skips_only_the_corrupt_chunk_with_keep_going() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let p = write(tmp.path(), "metrics.flipped", &flipped_archive());
    let opts = ExportOptions {
        metrics: vec!["serverStatus.uptimeMillis".into()],
        skip_metadata: true,
        ..ExportOptions::default()
    };
    let lines = |path: &Path, opts: &ExportOptions| {
        let mut out = Vec::new();
        let stats = export_ftdc(path, &mut out, opts);
        (stats, String::from_utf8(out).expect("utf-8"))
    };
    // Without --keep-going: stops at the damaged chunk, naming it, after
    // the samples before it.
    let (stats, text) = lines(&p, &opts);
    let e = stats.expect_err("stops");
    assert!(
        e.offset() == Some(CHUNK_1 as u64) && e.to_string().contains("metrics.flipped"),
        "{e}"
    );
    assert_eq!(text.lines().count(), 300);
    // With it: one error saying what was skipped, every other sample written.
    let keep = ExportOptions {
        keep_going: true,
        ..opts.clone()
    };
    let (stats, text) = lines(&p, &keep);
    let stats = stats.expect("keeps going");
    assert_eq!(stats.errors.len(), 1, "{:?}", stats.errors);
    assert!(
        stats.errors[0].contains(&format!("byte {CHUNK_1}"))
            && stats.errors[0].contains("skipped this document only"),
        "{:?}",
        stats.errors
    );
    assert_eq!((stats.chunks, stats.samples), (64, ARCHIVE_SAMPLES - 300));
    // The lines are those of the clean file without chunk 1's.
    let (clean, clean_text) = lines(&archive(), &opts);
    assert_eq!(clean.expect("clean").samples, ARCHIVE_SAMPLES);
    let expected: Vec<&str> = clean_text
        .lines()
        .enumerate()
        .filter(|(i, _)| !(300..600).contains(i))
        .map(|(_, l)| l)
        .collect();
    assert_eq!(text.lines().collect::<Vec<_>>(), expected);
}
