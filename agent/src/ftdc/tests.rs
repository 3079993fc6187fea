//! Tests of the decoder on the real FTDC files of mongod 7.0.0-rc6 in
//! `shared/fixtures` (beside the repository): values checked against the
//! reference documents parsed independently, counters and clocks checked for
//! sense, and damaged copies checked for errors naming the file and offset.

use std::path::{Path, PathBuf};

use bson::{Bson, Document};

use super::*;

pub(crate) fn fixture_dir() -> PathBuf {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/ftdc/mongod-7.0.0-rc6");
    assert!(
        dir.join("metrics.interim").is_file(),
        "FTDC fixtures missing at {}: the shared/ folder must sit beside the repository (see shared/fixtures/README.md)",
        dir.display()
    );
    dir
}

pub(crate) fn archive() -> PathBuf {
    fixture_dir().join("metrics.2024-04-16T11-34-42Z-00000")
}

fn all_docs(path: &Path) -> Vec<FtdcDoc> {
    FtdcFile::open(path)
        .expect("opens")
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("decoding {}: {e}", path.display()))
}

pub(super) fn chunks(path: &Path) -> Vec<Chunk> {
    all_docs(path)
        .into_iter()
        .filter_map(|d| match d {
            FtdcDoc::Metrics(c) => Some(c),
            _ => None,
        })
        .collect()
}

/// The metrics of a reference document, computed from a parsed
/// `bson::Document` (not the raw walk the decoder uses).
fn independent_metrics(doc: &Document, prefix: &str, out: &mut Vec<(String, i64)>) {
    for (k, v) in doc {
        let path = format!("{prefix}{k}");
        match v {
            Bson::Double(f) => out.push((
                path,
                if f.is_nan() || f.abs() >= 2f64.powi(63) {
                    i64::MIN
                } else {
                    f.trunc() as i64
                },
            )),
            Bson::Int32(i) => out.push((path, i64::from(*i))),
            Bson::Int64(i) => out.push((path, *i)),
            Bson::Boolean(b) => out.push((path, if *b { 1 } else { 0 })),
            Bson::DateTime(d) => out.push((path, d.timestamp_millis())),
            Bson::Timestamp(t) => {
                out.push((format!("{path}.t"), i64::from(t.time)));
                out.push((format!("{path}.i"), i64::from(t.increment)));
            }
            Bson::Document(d) => independent_metrics(d, &format!("{path}."), out),
            Bson::Array(a) => {
                let d: Document = a
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (i.to_string(), v.clone()))
                    .collect();
                independent_metrics(&d, &format!("{path}."), out);
            }
            Bson::Decimal128(_) => panic!("no decimal expected in the fixtures ({path})"),
            _ => {}
        }
    }
}

#[test]
fn fixture_files_have_the_expected_shape() {
    let docs = all_docs(&archive());
    let metadata = docs
        .iter()
        .filter(|d| matches!(d, FtdcDoc::Metadata { .. }))
        .count();
    let chunks: Vec<&Chunk> = docs
        .iter()
        .filter_map(|d| match d {
            FtdcDoc::Metrics(c) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(metadata, 1);
    assert_eq!(chunks.len(), 65);
    assert_eq!(docs.first().map(FtdcDoc::offset), Some(0));
    assert_eq!(chunks[0].offset, 17_822);
    assert_eq!(
        chunks.iter().map(|c| c.sample_count()).sum::<usize>(),
        19_007
    );
    assert_eq!(chunks[0].metric_count(), 2323);
    // A schema change (3 more metrics) makes mongod start a new chunk early.
    assert_eq!(
        (chunks[12].metric_count(), chunks[12].sample_count()),
        (2326, 2)
    );
    let interim = self::chunks(&fixture_dir().join("metrics.interim"));
    assert_eq!(interim.len(), 1);
    assert_eq!(
        (interim[0].metric_count(), interim[0].sample_count()),
        (2348, 181)
    );
    for c in chunks.iter().copied().chain(&interim) {
        assert_eq!(c.metric_count(), c.paths().len());
        assert_eq!(c.metric_count(), c.kinds().len());
        assert_eq!(c.trailing_bytes(), 0, "chunk at {}", c.offset);
        assert_eq!(
            c.paths().get(c.time_metric().expect("time metric")),
            Some("start")
        );
    }
}

#[test]
fn first_sample_of_every_chunk_equals_its_reference_document() {
    let mut checked = 0;
    for path in [archive(), fixture_dir().join("metrics.interim")] {
        for c in chunks(&path) {
            let doc = c.reference_document().expect("reference parses");
            let mut expected = Vec::new();
            independent_metrics(&doc, "", &mut expected);
            assert_eq!(expected.len(), c.metric_count(), "chunk at {}", c.offset);
            for (m, (p, v)) in expected.iter().enumerate() {
                assert_eq!(
                    c.paths().get(m),
                    Some(p.as_str()),
                    "chunk at {} metric {m}",
                    c.offset
                );
                assert_eq!(c.value(0, m), Some(*v), "chunk at {} metric {p}", c.offset);
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 66);
}

#[test]
fn known_values_of_the_first_chunk() {
    let c = chunks(&archive()).remove(0);
    let col = |p: &str| {
        c.column_by_path(p)
            .unwrap_or_else(|| panic!("{p} missing"))
            .to_vec()
    };
    assert_eq!(
        col("start")[..3],
        [1_713_267_283_000, 1_713_267_284_000, 1_713_267_285_000]
    );
    assert_eq!(
        col("serverStatus.uptimeMillis")[..3],
        [91_260_728, 91_261_728, 91_262_728]
    );
    // A double, stored truncated to int64.
    assert_eq!(col("serverStatus.uptime")[..3], [91_260, 91_261, 91_262]);
    assert_eq!(col("serverStatus.opcounters.command")[0], 737);
    assert_eq!(c.id, c.timestamp(0).expect("time"));
    let kinds = |k: MetricKind| c.kinds().iter().filter(|&&x| x == k).count();
    assert_eq!(kinds(MetricKind::Double), 21);
    assert_eq!(kinds(MetricKind::Bool), 13);
    assert_eq!(
        kinds(MetricKind::TimestampTime),
        kinds(MetricKind::TimestampIncrement)
    );
}

#[test]
fn counters_never_decrease_and_clocks_tick() {
    let counters = [
        "serverStatus.opcounters.insert",
        "serverStatus.opcounters.query",
        "serverStatus.opcounters.update",
        "serverStatus.opcounters.delete",
        "serverStatus.opcounters.getmore",
        "serverStatus.opcounters.command",
        "serverStatus.uptime",
        "serverStatus.uptimeMillis",
        "serverStatus.network.bytesIn",
        "serverStatus.network.numRequests",
        "serverStatus.connections.totalCreated",
    ];
    let cs = chunks(&archive());
    let mut last: Vec<Option<i64>> = vec![None; counters.len()];
    let mut grew = vec![false; counters.len()];
    for c in &cs {
        for (i, p) in counters.iter().enumerate() {
            let col = c
                .column_by_path(p)
                .unwrap_or_else(|| panic!("{p} missing in chunk at {}", c.offset))
                .to_vec();
            for (s, pair) in col.windows(2).enumerate() {
                assert!(
                    pair[1] >= pair[0],
                    "{p} decreased at sample {s} of chunk at {}: {pair:?}",
                    c.offset
                );
            }
            // Across chunks too (same process: no restart in this file).
            if let (Some(prev), Some(&first)) = (last[i], col.first()) {
                assert!(
                    first >= prev,
                    "{p} decreased between chunks at {}",
                    c.offset
                );
            }
            grew[i] |= col.last() > col.first();
            last[i] = col.last().copied();
        }
        // uptimeMillis advances about one second per sample.
        let up = c
            .column_by_path("serverStatus.uptimeMillis")
            .expect("uptimeMillis")
            .to_vec();
        for pair in up.windows(2) {
            let d = pair[1] - pair[0];
            assert!(
                (900..=1_500).contains(&d),
                "uptimeMillis step {d} in chunk at {}",
                c.offset
            );
        }
    }
    for (p, g) in counters.iter().zip(grew) {
        if !p.ends_with("delete") && !p.ends_with("getmore") {
            assert!(g, "{p} never grew: deltas are not being applied");
        }
    }
}

#[test]
fn sample_timestamps_increase() {
    for path in [archive(), fixture_dir().join("metrics.interim")] {
        let mut prev = i64::MIN;
        let mut n = 0;
        for c in chunks(&path) {
            for s in 0..c.sample_count() {
                let t = c.timestamp_ms(s).expect("every sample has a time");
                assert!(
                    t > prev,
                    "{}: time went back at sample {s} of chunk at {}",
                    path.display(),
                    c.offset
                );
                prev = t;
                n += 1;
            }
            let (first, last) = c.time_range();
            assert!(first <= last && first == c.id, "chunk at {}", c.offset);
        }
        assert!(n > 100);
    }
}

#[test]
fn metadata_holds_build_host_and_command_line() {
    let docs = all_docs(&archive());
    let Some(FtdcDoc::Metadata { doc, id, offset }) = docs.first() else {
        panic!("first document is not metadata");
    };
    assert_eq!(*offset, 0);
    assert_eq!(id.timestamp_millis(), 1_713_267_282_035);
    let keys: Vec<&str> = doc.keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "start",
            "sysMaxOpenFiles",
            "ulimits",
            "buildInfo",
            "getCmdLineOpts",
            "hostInfo",
            "end"
        ]
    );
    let build = doc.get_document("buildInfo").expect("buildInfo");
    assert_eq!(build.get_str("version").ok(), Some("7.0.0-rc6"));
    let host = doc.get_document("hostInfo").expect("hostInfo");
    let system = host.get_document("system").expect("hostInfo.system");
    assert_eq!(
        system.get_str("hostname").ok(),
        Some("byron-ThinkCentre-M910q")
    );
    assert_eq!(system.get_str("cpuArch").ok(), Some("x86_64"));
    assert!(
        doc.get_document("getCmdLineOpts")
            .expect("getCmdLineOpts")
            .contains_key("argv")
    );
}

/// A file with every document type, built in code: metadata, a chunk,
/// periodic metadata (type 2, `count` + delta `doc`) and a future type.
pub(crate) fn synthetic_file() -> Vec<u8> {
    use flate2::{Compression, write::ZlibEncoder};
    use std::io::Write;
    let t0 = 1_700_000_000_000_i64;
    let reference = bson::rawdoc! {
        "start": bson::DateTime::from_millis(t0),
        "serverStatus": { "uptime": 5.9, "ok": true, "host": "h" },
    };
    // 3 metrics x 2 deltas: start +1000 +1000, uptime +1 +1, ok 0 0 -> [0, 1].
    let mut raw = reference.as_bytes().to_vec();
    raw.extend(3u32.to_le_bytes());
    raw.extend(2u32.to_le_bytes());
    for v in [1000u64, 1000, 1, 1, 0, 1] {
        varint::write_varint(&mut raw, v);
    }
    let mut z = ZlibEncoder::new(Vec::new(), Compression::fast());
    z.write_all(&raw).expect("compress");
    let mut data = (raw.len() as u32).to_le_bytes().to_vec();
    data.extend(z.finish().expect("compress"));
    let mut file = bson::rawdoc! {
        "_id": bson::DateTime::from_millis(t0 - 500), "type": 0_i32,
        "doc": { "buildInfo": { "version": "8.0.4" } },
    }
    .into_bytes();
    file.extend(
        bson::rawdoc! {
            "_id": bson::DateTime::from_millis(t0), "type": 1_i32,
            "data": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: data },
        }
        .into_bytes(),
    );
    file.extend(
        bson::rawdoc! {
            "_id": bson::DateTime::from_millis(t0 + 2_500), "type": 2_i32, "count": 4_i32,
            "doc": { "getParameter": { "start": bson::DateTime::from_millis(t0), "x": 1_i32 } },
        }
        .into_bytes(),
    );
    file.extend(
        bson::rawdoc! { "_id": bson::DateTime::from_millis(t0 + 3_000), "type": 7_i64 }
            .into_bytes(),
    );
    file
}

#[test]
fn every_document_type_decodes() {
    let file = synthetic_file();
    let docs: Vec<FtdcDoc> = FtdcFile::from_bytes(&file, "synthetic")
        .collect::<Result<_, _>>()
        .expect("decodes");
    assert_eq!(docs.len(), 4);
    let FtdcDoc::Metadata { doc, .. } = &docs[0] else {
        panic!("{:?}", docs[0])
    };
    assert_eq!(
        doc.get_document("buildInfo")
            .ok()
            .and_then(|b| b.get_str("version").ok()),
        Some("8.0.4")
    );
    let FtdcDoc::Metrics(c) = &docs[1] else {
        panic!("{:?}", docs[1])
    };
    assert_eq!(
        c.paths().iter().collect::<Vec<_>>(),
        ["start", "serverStatus.uptime", "serverStatus.ok"]
    );
    assert_eq!(c.column(1).map(|c| c.to_vec()), Some(vec![5, 6, 7]));
    assert_eq!(c.column(2), Some(Column::Constant { value: 1, len: 3 }));
    assert_eq!(c.timestamp_ms(2), Some(1_700_000_002_000));
    let FtdcDoc::PeriodicMetadata {
        count,
        doc,
        id,
        offset,
    } = &docs[2]
    else {
        panic!("{:?}", docs[2])
    };
    assert_eq!(*count, Some(4));
    assert_eq!(id.timestamp_millis(), 1_700_000_002_500);
    let len_at = |at: usize| {
        u64::from(u32::from_le_bytes(
            file[at..at + 4].try_into().expect("4 bytes"),
        ))
    };
    let (first, second) = (len_at(0), len_at(len_at(0) as usize));
    assert_eq!((docs[1].offset(), *offset), (first, first + second));
    assert!(doc.get_document("getParameter").is_ok());
    assert!(matches!(docs[3], FtdcDoc::Unknown { kind: 7, .. }));
    assert_eq!(docs[3].id().timestamp_millis(), 1_700_000_003_000);
}
