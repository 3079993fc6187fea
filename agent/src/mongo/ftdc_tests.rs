//! Tests of `explain --ftdc`'s reading on altered copies of the real mongod
//! 7.0.0-rc6 FTDC directory: a corrupt chunk (only its samples are lost),
//! samples that go back in time (counted and said, a restart is not one),
//! and a directory without metadata (the rules that depend on the host or
//! the build are not assessed, with the reason).

use std::path::{Path, PathBuf};

use super::ftdc::{FtdcRead, MAX_KEEP, goes_back_in_time, read, recording_from_ftdc};
use super::ftdc_window::keep_newest_run;
use super::status::tests::fixtures;
use super::summary::MongodSummary;

/// The chunk after the first in the archive file (300 samples).
const CHUNK_1: usize = 54_745;
const ARCHIVE: &str = "metrics.2024-04-16T11-34-42Z-00000";
const ARCHIVE_SAMPLES: u64 = 19_007;
const INTERIM_SAMPLES: u64 = 181;

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(fixtures().join("ftdc/mongod-7.0.0-rc6").join(name)).expect("FTDC fixture")
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).expect("write temp file");
    p
}

fn read_all(path: &Path) -> FtdcRead {
    read(path, None, None, MAX_KEEP).expect("reads")
}

#[test]
fn a_corrupt_chunk_loses_only_its_samples() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let clean = read_all(&write(tmp.path(), "metrics.clean", &fixture(ARCHIVE)));
    let mut bytes = fixture(ARCHIVE);
    bytes[CHUNK_1 + 5_000] ^= 0x5a;
    let damaged = read_all(&write(tmp.path(), "metrics.damaged", &bytes));
    assert_eq!(clean.samples.len() as u64, ARCHIVE_SAMPLES);
    assert!(clean.errors.is_empty(), "{:?}", clean.errors);
    // Samples 300..600 were chunk 1's; every other one is there, equal.
    let expected: Vec<_> = clean
        .samples
        .iter()
        .enumerate()
        .filter(|(i, _)| !(300..600).contains(i))
        .map(|(_, s)| s)
        .collect();
    assert_eq!(damaged.samples.iter().collect::<Vec<_>>(), expected);
    let [e] = &damaged.errors[..] else {
        panic!("{:?}", damaged.errors)
    };
    assert!(
        e.contains("metrics.damaged")
            && e.contains(&format!("byte {CHUNK_1}"))
            && e.contains("metric chunk")
            && e.ends_with("(skipped this document only)"),
        "{e}"
    );
    assert_eq!(damaged.back_in_time, 0);
    // The report says it.
    let rec = recording_from_ftdc(&damaged);
    let lines = MongodSummary::of(&rec).expect("summary").lines().join("\n");
    assert!(
        lines.contains("read errors: ") && lines.contains("skipped this document only"),
        "{lines}"
    );
    assert!(damaged.notes().iter().any(|n| n == e));
}

#[test]
fn repeated_samples_are_dropped_counted_and_said() {
    let tmp = tempfile::tempdir().expect("tempdir");
    // The same file twice under two names: its times come again.
    write(
        tmp.path(),
        "metrics.2024-04-16T11-34-42Z-00000",
        &fixture(ARCHIVE),
    );
    write(
        tmp.path(),
        "metrics.2024-04-16T11-34-42Z-00001",
        &fixture(ARCHIVE),
    );
    let mut r = read_all(tmp.path());
    assert_eq!(r.back_in_time, ARCHIVE_SAMPLES);
    assert_eq!(r.samples.len() as u64, ARCHIVE_SAMPLES);
    assert!(
        r.samples
            .iter()
            .zip(r.samples.iter().skip(1))
            .all(|(a, b)| a.t < b.t)
    );
    // Not taken for a restart: the whole run is kept.
    assert_eq!(keep_newest_run(&mut r.samples, false), None);
    assert_eq!(r.samples.len() as u64, ARCHIVE_SAMPLES);
    let notes = r.notes();
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("19007 FTDC samples left out for going back in time")),
        "{notes:?}"
    );
    let rec = recording_from_ftdc(&r);
    let source = rec
        .mongod
        .as_ref()
        .and_then(|m| m.ftdc.as_ref())
        .expect("source");
    assert_eq!(source.back_in_time, ARCHIVE_SAMPLES);
    let lines = MongodSummary::of(&rec).expect("summary").lines().join("\n");
    assert!(
        lines.contains("19007 samples left out for going back in time"),
        "{lines}"
    );

    // The interim copy repeating the archive's last chunk: those 300 only.
    let tmp = tempfile::tempdir().expect("tempdir");
    let archive = fixture(ARCHIVE);
    write(tmp.path(), ARCHIVE, &archive[..92_463]);
    write(tmp.path(), "metrics.interim", &archive[CHUNK_1..92_463]);
    let r = read_all(tmp.path());
    assert_eq!((r.samples.len(), r.back_in_time), (600, 300));
    // The real directory repeats nothing.
    let r = read_all(&fixtures().join("ftdc/mongod-7.0.0-rc6"));
    assert_eq!(r.back_in_time, 0);
    assert_eq!(r.samples.len() as u64, ARCHIVE_SAMPLES + INTERIM_SAMPLES);
}

#[test]
fn a_restart_is_not_going_back_in_time() {
    let t = 1_713_267_283_000_i64;
    let up = 91_260_728_i64;
    // Later time: never back, restart or not.
    assert!(!goes_back_in_time((t, Some(up)), t + 1000, Some(up + 1000)));
    assert!(!goes_back_in_time((t, Some(up)), t + 1000, Some(5_000)));
    // The same second again, or earlier, of the same process (its start
    // time, t - uptime, unchanged): back in time.
    assert!(goes_back_in_time((t, Some(up)), t, Some(up)));
    assert!(goes_back_in_time(
        (t, Some(up)),
        t - 300_000,
        Some(up - 300_000)
    ));
    // The clock set back within a run (uptime still growing): back in time.
    assert!(goes_back_in_time(
        (t, Some(up)),
        t - 30_000,
        Some(up + 1000)
    ));
    // A new process (uptime went down, started long after the previous
    // one) whose clock is behind: a restart, kept.
    assert!(!goes_back_in_time((t, Some(up)), t - 30_000, Some(12_000)));
    // No uptime to tell: judged by time alone.
    assert!(goes_back_in_time((t, None), t, Some(1_000)));
    assert!(!goes_back_in_time((t, None), t + 1, None));
}

/// The metric chunks (type 1) of an FTDC file, without its metadata.
fn metric_documents_only(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 4 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        let doc = &bytes[at..at + len];
        let raw = bson::RawDocument::from_bytes(doc).expect("document");
        if raw.get_i32("type").expect("type") == 1 {
            out.extend_from_slice(doc);
        }
        at += len;
    }
    assert_eq!(at, bytes.len());
    out
}

fn explain(read: &FtdcRead, arch: Option<&str>) -> crate::report::Report {
    let rules = crate::rules::RuleSet::builtin().expect("builtin rules");
    crate::explain::explain(&recording_from_ftdc(read), &rules, arch, None).expect("explains")
}

fn reason<'a>(notes: &'a [crate::report::RuleNote], id: &str) -> Option<&'a str> {
    notes
        .iter()
        .find(|n| n.rule_id == id)
        .map(|n| n.reason.as_str())
}

#[test]
fn without_metadata_host_and_build_rules_are_not_assessed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let archive = metric_documents_only(&fixture(ARCHIVE));
    assert!(archive.len() < fixture(ARCHIVE).len());
    write(tmp.path(), ARCHIVE, &archive);
    write(
        tmp.path(),
        "metrics.interim",
        &metric_documents_only(&fixture("metrics.interim")),
    );
    let r = read(tmp.path(), None, None, 600).expect("reads");
    assert_eq!(r.metadata_documents, 0);
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert!(
        r.notes().iter().any(|n| n.contains("no metadata document")),
        "{:?}",
        r.notes()
    );
    let rec = recording_from_ftdc(&r);
    assert_eq!(
        (rec.host.arch.as_str(), rec.host.kernel_release.as_str()),
        ("unknown", "unknown")
    );
    let report = explain(&r, None);
    assert_eq!(report.architecture, "unknown");
    let hostinfo = "the FTDC directory has no metadata document (hostInfo)";
    // The rules for some architectures only: not assessed, saying why.
    for id in [
        "allocator.tcmalloc_per_cpu_caches",
        "allocator.tcmalloc_kernel",
        "memory.thp_google_tcmalloc",
    ] {
        let why = reason(&report.not_assessed, id).unwrap_or_else(|| panic!("{id} not assessed"));
        assert!(
            why.starts_with(&format!("architecture unknown: {hostinfo}")),
            "{id}: {why}"
        );
    }
    let why = reason(&report.not_assessed, "memory.thp_legacy_tcmalloc").expect("thp_legacy");
    assert!(
        why.contains(
            "memory allocator unknown (the FTDC directory has no metadata document (buildInfo))"
        ),
        "{why}"
    );
    let why = reason(&report.not_assessed, "sched.wakeup_preemption").expect("wakeup");
    assert!(
        why.starts_with(&format!("kernel unknown: {hostinfo}")),
        "{why}"
    );
    // Nothing was judged against the missing names.
    for n in &report.not_applicable {
        assert!(!n.reason.contains("unknown"), "{}: {}", n.rule_id, n.reason);
    }
    // Ranked for a named architecture, the allocator is still unknown.
    let report = explain(&r, Some("x86_64"));
    let why = reason(&report.not_assessed, "memory.thp_google_tcmalloc").expect("thp_tcmalloc");
    assert!(
        why.starts_with("memory allocator unknown (the FTDC directory"),
        "{why}"
    );

    // The same samples with their metadata: the host and build are known.
    let r = read(&fixtures().join("ftdc/mongod-7.0.0-rc6"), None, None, 600).expect("reads");
    assert_eq!(r.metadata_documents, 1);
    let report = explain(&r, None);
    assert_eq!(report.architecture, "x86_64");
    for n in report.not_assessed.iter().chain(&report.not_applicable) {
        assert!(
            !n.reason.contains("no metadata"),
            "{}: {}",
            n.rule_id,
            n.reason
        );
    }
    let why = reason(&report.not_applicable, "memory.thp_google_tcmalloc").expect("thp_tcmalloc");
    assert!(why.contains("the target uses gperftools"), "{why}");
}

#[test]
fn system_metrics_of_a_real_7_0_directory_become_the_system_group() {
    use crate::rules::facts::{FactValue, Facts};
    let r = read(&fixtures().join("ftdc/mongod-7.0.0-rc6"), None, None, 120).unwrap();
    let newest = r
        .samples
        .back()
        .unwrap()
        .system
        .clone()
        .expect("systemMetrics");
    let f = Facts::derive(&recording_from_ftdc(&r));
    let get = |k: &str| f.get(k).cloned();
    assert_eq!(
        get("system.mem_total_bytes"),
        newest.mem_total_kb.map(|k| FactValue::Int(k * 1024))
    );
    let steal = get("system.steal_share").and_then(|v| v.as_f64()).unwrap();
    assert!((0.0..=1.0).contains(&steal), "{steal}");
    let cpus = newest.cpu.as_ref().unwrap().num_cpus;
    assert_eq!(get("system.cpus"), cpus.map(FactValue::Int));
    // The data directory is on / (hostInfo's mountInfo), on the disk sda;
    // its space as df counts it, from the sample's own statvfs figures.
    assert_eq!(get("system.data_disk"), Some(FactValue::Text("sda".into())));
    assert_eq!(get("system.data_mount"), Some(FactValue::Text("/".into())));
    let root = &newest.mounts["/"];
    let used = (root.capacity - root.free) as f64;
    let share = used / (used + root.available as f64);
    let got = get("system.data_fs_used_share")
        .and_then(|v| v.as_f64())
        .unwrap();
    assert!((got - share).abs() < 1e-12 && share > 0.7, "{got} {share}");
    // A standalone: no replication figures, and the reason says so.
    assert!(f.get("replication.members").is_none());
    assert!(
        f.absent_reason("replication")
            .is_some_and(|w| w.contains("replica-set member")),
        "{:?}",
        f.absent_reason("replication")
    );
}
