//! FTDC decoding throughput, in MB/s of input (criterion's `thrpt`): the real
//! mongod 7.0 files of `shared/fixtures` (one 2.3 MB archive file, the
//! interim file), a synthetic `diagnostic.data` directory made of 8 copies of
//! the archive, the export to JSON lines (one metric group, and every metric),
//! and the delta-stream decoder alone.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark: a failure aborts the run"
)]
use std::hint::black_box;
use std::path::{Path, PathBuf};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mdiag::export::{ExportOptions, export_ftdc};
use mdiag::ftdc::{FtdcDir, FtdcDoc, FtdcFile, varint};

fn fixtures() -> PathBuf {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/ftdc/mongod-7.0.0-rc6");
    assert!(
        dir.join("metrics.interim").is_file(),
        "FTDC fixtures missing at {}: the shared/ folder must sit beside the repository",
        dir.display()
    );
    dir
}

/// Decodes every document; returns the number of samples (so nothing is optimised away).
fn decode_bytes(bytes: &[u8]) -> usize {
    let mut file = FtdcFile::from_bytes(bytes, "bench");
    let mut samples = 0;
    while let Some(doc) = file.next_doc() {
        if let FtdcDoc::Metrics(c) = doc.expect("decodes") {
            samples += c.sample_count();
            file.recycle(c);
        }
    }
    samples
}

fn decode_dir(dir: &Path) -> usize {
    let mut d = FtdcDir::open(dir).expect("dir");
    let mut samples = 0;
    while let Some(item) = d.next() {
        if let FtdcDoc::Metrics(c) = item.expect("decodes").doc {
            samples += c.sample_count();
            d.recycle(c);
        }
    }
    samples
}

fn bench(c: &mut Criterion) {
    let dir = fixtures();
    let archive_path = dir.join("metrics.2024-04-16T11-34-42Z-00000");
    let archive = std::fs::read(&archive_path).expect("archive fixture");
    let interim = std::fs::read(dir.join("metrics.interim")).expect("interim fixture");

    // A synthetic diagnostic.data: 8 archive files + the interim.
    let tmp = tempfile::tempdir().expect("tempdir");
    for i in 0..8 {
        std::fs::write(
            tmp.path()
                .join(format!("metrics.2024-04-16T11-34-42Z-0000{i}")),
            &archive,
        )
        .expect("write");
    }
    std::fs::write(tmp.path().join("metrics.interim"), &interim).expect("write");
    let dir_bytes = (8 * archive.len() + interim.len()) as u64;

    let mut g = c.benchmark_group("ftdc");
    g.sample_size(10);
    g.throughput(Throughput::Bytes(archive.len() as u64));
    g.bench_function("decode archive file (2.3 MB, 65 chunks)", |b| {
        b.iter(|| black_box(decode_bytes(black_box(&archive))))
    });
    g.throughput(Throughput::Bytes(interim.len() as u64));
    g.bench_function("decode metrics.interim", |b| {
        b.iter(|| black_box(decode_bytes(black_box(&interim))))
    });
    g.throughput(Throughput::Bytes(dir_bytes));
    g.bench_function("decode directory (8 archives + interim, from disk)", |b| {
        b.iter(|| black_box(decode_dir(tmp.path())))
    });
    g.throughput(Throughput::Bytes(archive.len() as u64));
    let opcounters = ExportOptions {
        metrics: vec!["serverStatus.opcounters".into(), "start".into()],
        ..ExportOptions::default()
    };
    g.bench_function("export archive file, opcounters only", |b| {
        b.iter(|| {
            black_box(
                export_ftdc(&archive_path, &mut std::io::sink(), &opcounters).expect("export"),
            )
        })
    });
    g.bench_function("export archive file, every metric (2.8 GB of JSON)", |b| {
        b.iter(|| {
            black_box(
                export_ftdc(
                    &archive_path,
                    &mut std::io::sink(),
                    &ExportOptions::default(),
                )
                .expect("export"),
            )
        })
    });

    // The delta stream alone: 3000 metrics x 300 deltas, mostly zero runs and
    // small deltas, some multi-byte, like real chunks.
    let (metrics, deltas) = (3000usize, 299usize);
    let mut stream = Vec::new();
    let mut zeros = 0u64;
    for m in 0..metrics {
        for s in 0..deltas {
            let d: u64 = match m % 4 {
                0 | 1 => 0,
                2 => (s % 7) as u64,
                _ => 1_000 + (s as u64 * 37) % 5_000,
            };
            if d == 0 {
                zeros += 1;
                continue;
            }
            if zeros > 0 {
                varint::write_varint(&mut stream, 0);
                varint::write_varint(&mut stream, zeros - 1);
                zeros = 0;
            }
            varint::write_varint(&mut stream, d);
        }
    }
    if zeros > 0 {
        varint::write_varint(&mut stream, 0);
        varint::write_varint(&mut stream, zeros - 1);
    }
    let refs = vec![5i64; metrics];
    let (mut values, mut slots) = (Vec::new(), Vec::new());
    g.throughput(Throughput::Bytes(stream.len() as u64));
    g.bench_function("delta stream (3000 metrics x 300 samples)", |b| {
        b.iter(|| {
            black_box(
                varint::decode_columns(black_box(&stream), &refs, deltas, &mut values, &mut slots)
                    .expect("decodes"),
            )
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
