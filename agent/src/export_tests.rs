//! Unit tests of `export.rs` (a child module of it, kept in its own file
//! so that the code under test stays short).

use super::*;
use crate::cli_parse::parse_time;
use crate::ftdc::FtdcFile;
use std::path::PathBuf;

fn fixture_dir() -> PathBuf {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/ftdc/mongod-7.0.0-rc6");
    assert!(
        dir.join("metrics.interim").is_file(),
        "FTDC fixtures missing at {}: the shared/ folder must sit beside the repository",
        dir.display()
    );
    dir
}

fn export(path: &Path, opts: &ExportOptions) -> (ExportStats, Vec<Value>) {
    let mut out = Vec::new();
    let stats = export_ftdc(path, &mut out, opts).expect("exports");
    let text = String::from_utf8(out).expect("utf-8");
    let lines = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {e}: {l}")))
        .collect();
    (stats, lines)
}

fn first_chunk(path: &Path) -> Chunk {
    FtdcFile::open(path)
        .expect("opens")
        .find_map(|d| match d.expect("decodes") {
            FtdcDoc::Metrics(c) => Some(c),
            _ => None,
        })
        .expect("a chunk")
}

#[test]
fn exports_the_directory_as_json_lines() {
    // Every sample, one metric (all metrics would be 2.8 GB of JSON).
    let opts = ExportOptions {
        metrics: vec!["serverStatus.uptimeMillis".into()],
        ..ExportOptions::default()
    };
    let (stats, lines) = export(&fixture_dir(), &opts);
    assert_eq!(stats.files, 2);
    assert_eq!(stats.chunks, 66);
    assert_eq!(stats.metadata, 1);
    assert_eq!(stats.samples, 19_007 + 181);
    assert_eq!(stats.duplicates + stats.out_of_range, 0);
    assert!(stats.errors.is_empty());
    assert_eq!(lines.len(), stats.samples + stats.metadata);
    // Line 0: the metadata document.
    assert_eq!(lines[0]["type"], "metadata");
    assert_eq!(lines[0]["t"], "2024-04-16T11:34:42.035Z");
    assert_eq!(lines[0]["doc"]["buildInfo"]["version"], "7.0.0-rc6");
    assert_eq!(lines[0]["doc"]["hostInfo"]["system"]["cpuArch"], "x86_64");
    assert_eq!(lines[1]["t"], "2024-04-16T11:34:43.000Z");
    assert_eq!(
        lines[1]["metrics"],
        serde_json::json!({"serverStatus.uptimeMillis": 91_260_728})
    );
    assert_eq!(lines[2]["metrics"]["serverStatus.uptimeMillis"], 91_261_728);
    // Times strictly increase; the last line comes from metrics.interim (newest).
    let times: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l["t"].as_str().expect("t"))
        .collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(lines.last().unwrap()["t"], "2025-07-10T19:22:31.500Z");
}

#[test]
fn first_line_has_every_metric_of_the_reference() {
    let file = fixture_dir().join("metrics.2024-04-16T11-34-42Z-00000");
    let opts = ExportOptions {
        to: Some(parse_time("2024-04-16T11:34:45Z").unwrap()),
        ..ExportOptions::default()
    };
    let (stats, lines) = export(&file, &opts);
    assert_eq!((stats.samples, stats.metadata, lines.len()), (2, 1, 3));
    let chunk = first_chunk(&file);
    let reference = chunk.reference_document().expect("reference");
    let first = &lines[1];
    assert_eq!(first["t"], "2024-04-16T11:34:43.000Z");
    let metrics = first["metrics"].as_object().expect("metrics object");
    assert_eq!(metrics.len(), chunk.metric_count());
    let ss = reference
        .get_document("serverStatus")
        .expect("serverStatus");
    let opcounters = ss.get_document("opcounters").expect("opcounters");
    assert_eq!(
        metrics["serverStatus.opcounters.command"],
        opcounters.get_i64("command").unwrap()
    );
    assert_eq!(
        metrics["serverStatus.uptimeMillis"],
        ss.get_i64("uptimeMillis").unwrap()
    );
    assert_eq!(
        metrics["serverStatus.uptime"],
        ss.get_f64("uptime").unwrap().trunc() as i64
    );
    assert_eq!(
        metrics["serverStatus.localTime"],
        "2024-04-16T11:34:43.000Z"
    );
    assert_eq!(metrics["start"], "2024-04-16T11:34:43.000Z");
    // Every value of the line equals the decoded reference sample.
    for (m, path) in chunk.paths().iter().enumerate() {
        let v = chunk.value(0, m).unwrap();
        let expected = match chunk.kinds()[m] {
            MetricKind::Bool => Value::Bool(v != 0),
            MetricKind::Date => Value::String(rfc3339(DateTime::from_timestamp_millis(v).unwrap())),
            _ => Value::from(v),
        };
        assert_eq!(metrics[path], expected, "{path}");
    }
    assert_eq!(lines[2]["t"], "2024-04-16T11:34:44.000Z");
}

#[test]
fn filters_metrics_and_time() {
    let opts = ExportOptions {
        metrics: vec!["serverStatus.opcounters".into(), "*.uptimeMillis".into()],
        from: Some(parse_time("2024-04-16T11:40:00Z").unwrap()),
        to: Some(parse_time("2024-04-16 11:40:10").unwrap()),
        skip_metadata: true,
        dates_as_ms: true,
        ..ExportOptions::default()
    };
    let file = fixture_dir().join("metrics.2024-04-16T11-34-42Z-00000");
    let (stats, lines) = export(&file, &opts);
    assert_eq!(stats.samples, 10);
    assert_eq!(stats.metadata, 0);
    assert_eq!(stats.out_of_range, 19_007 - 10);
    assert_eq!(lines.len(), 10);
    assert_eq!(lines[0]["t"], "2024-04-16T11:40:00.000Z");
    assert_eq!(lines[9]["t"], "2024-04-16T11:40:09.000Z");
    let keys: Vec<&String> = lines[0]["metrics"].as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 7);
    // Keys keep the document order in the text.
    let mut text = Vec::new();
    export_ftdc(&file, &mut text, &opts).unwrap();
    let first = String::from_utf8(text)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_owned();
    let order = [
        "serverStatus.uptimeMillis",
        "serverStatus.opcounters.insert",
        "serverStatus.opcounters.query",
        "serverStatus.opcounters.update",
        "serverStatus.opcounters.delete",
        "serverStatus.opcounters.getmore",
        "serverStatus.opcounters.command",
    ];
    let at: Vec<usize> = order
        .iter()
        .map(|k| first.find(&format!("\"{k}\":")).expect(k))
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{first}");
    // 11:40:00 is sample 17 of the second chunk (which starts 11:39:43).
    assert_eq!(lines[0]["metrics"]["serverStatus.uptimeMillis"], 91_577_728);
}

#[test]
fn interim_repeating_an_archive_is_deduplicated() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = std::fs::read(fixture_dir().join("metrics.2024-04-16T11-34-42Z-00000")).unwrap();
    std::fs::write(
        tmp.path().join("metrics.2024-04-16T11-34-42Z-00000"),
        &archive[..92_463],
    )
    .unwrap();
    // The interim holds the last chunk again.
    std::fs::write(tmp.path().join("metrics.interim"), &archive[54_745..92_463]).unwrap();
    let (stats, lines) = export(tmp.path(), &ExportOptions::default());
    assert_eq!(stats.samples, 600);
    assert_eq!(stats.duplicates, 300);
    assert_eq!(lines.len(), 601);
}

#[test]
fn damaged_files_fail_or_are_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let archive = std::fs::read(fixture_dir().join("metrics.2024-04-16T11-34-42Z-00000")).unwrap();
    std::fs::write(tmp.path().join("metrics.a"), &archive[..60_000]).unwrap();
    std::fs::write(tmp.path().join("metrics.b"), &archive[..54_745]).unwrap();
    let err = export_ftdc(tmp.path(), &mut Vec::new(), &ExportOptions::default()).unwrap_err();
    assert!(
        err.to_string().contains("metrics.a") && err.offset() == Some(54_745),
        "{err}"
    );
    let opts = ExportOptions {
        keep_going: true,
        ..ExportOptions::default()
    };
    let (stats, lines) = export(tmp.path(), &opts);
    assert_eq!(stats.errors.len(), 1);
    assert!(stats.errors[0].contains("metrics.a"), "{:?}", stats.errors);
    // metrics.a: metadata + chunk 1; metrics.b: metadata + chunk 1 again (duplicates).
    assert_eq!(
        (stats.samples, stats.duplicates, stats.metadata),
        (300, 300, 2)
    );
    assert_eq!(lines.len(), 302);
}

#[test]
fn periodic_metadata_and_unknown_documents() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("metrics.synthetic");
    std::fs::write(&file, crate::ftdc::tests::synthetic_file()).unwrap();
    let (stats, lines) = export(&file, &ExportOptions::default());
    assert_eq!((stats.samples, stats.metadata, stats.chunks), (3, 2, 1));
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[0]["doc"]["buildInfo"]["version"], "8.0.4");
    assert_eq!(
        lines[1],
        serde_json::json!({"t": "2023-11-14T22:13:20.000Z", "metrics": {
            "start": "2023-11-14T22:13:20.000Z", "serverStatus.uptime": 5, "serverStatus.ok": true}})
    );
    assert_eq!(lines[3]["metrics"]["serverStatus.uptime"], 7);
    assert_eq!(
        lines[4],
        serde_json::json!({"t": "2023-11-14T22:13:22.500Z", "type": "periodicMetadata", "count": 4,
            "doc": {"getParameter": {"start": "2023-11-14T22:13:20.000Z", "x": 1}}})
    );
}

#[test]
fn patterns_and_times_parse() {
    assert!(path_matches(
        "serverStatus.opcounters",
        "serverStatus.opcounters.insert"
    ));
    assert!(path_matches(
        "serverStatus.opcounters",
        "serverStatus.opcounters"
    ));
    assert!(!path_matches(
        "serverStatus.opcounters",
        "serverStatus.opcountersRepl.insert"
    ));
    assert!(path_matches("*.insert", "serverStatus.opcounters.insert"));
    assert!(path_matches(
        "serverStatus.*.insert",
        "serverStatus.opcountersRepl.insert"
    ));
    assert!(!path_matches(
        "serverStatus.*.insert",
        "serverStatus.opcounters.inserted"
    ));
    assert!(path_matches(
        "*bytes*",
        "systemMetrics.disks.sda.read_bytes"
    ));
    assert!(path_matches("*", "anything"));
    assert!(!path_matches("a*b*c", "abx"));
    assert_eq!(parse_time("2024-04-16").unwrap().timestamp(), 1_713_225_600);
    assert_eq!(
        parse_time("2024-04-16T11:34:42+02:00").unwrap().timestamp(),
        1_713_260_082
    );
    assert_eq!(
        parse_time("2024-04-16 11:34:42.5")
            .unwrap()
            .timestamp_millis(),
        1_713_267_282_500
    );
    assert!(parse_time("yesterday").is_err());
}

#[test]
fn bson_values_become_plain_json() {
    let doc = bson::doc! {
        "d": 1.5, "nan": f64::NAN, "s": "x", "b": false, "n": bson::Bson::Null,
        "date": bson::DateTime::from_millis(0),
        "ts": bson::Timestamp { time: 3, increment: 4 },
        "arr": [1_i32, 2_i64],
        "bin": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![0xab, 1] },
    };
    let v = document_to_json(&doc, false);
    assert_eq!(
        v,
        serde_json::json!({
            "d": 1.5, "nan": "NaN", "s": "x", "b": false, "n": null,
            "date": "1970-01-01T00:00:00.000Z", "ts": {"t": 3, "i": 4},
            "arr": [1, 2], "bin": "ab01",
        })
    );
    assert_eq!(document_to_json(&doc, true)["date"], 0);
}
