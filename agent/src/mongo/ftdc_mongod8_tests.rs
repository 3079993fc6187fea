//! `explain --ftdc` on a mongod 8 diagnostic.data directory: which rules
//! FTDC alone can assess. The directory is written here in mongod's own
//! format (metadata document with buildInfo, getCmdLineOpts and hostInfo,
//! then metric chunks of serverStatus), with the key names of a real
//! mongod 8.2 on Linux (see ../shared/fixtures/serverStatus for the shapes):
//! the shared fixtures hold FTDC of 7.0 only.

use std::io::Write;
use std::path::Path;

use bson::{Bson, DateTime, doc};
use flate2::{Compression, write::ZlibEncoder};

use super::ftdc::{MAX_KEEP, read, recording_from_ftdc};
use crate::report::Report;
use crate::rules::RuleSet;

const T0: i64 = 1_793_000_000_000;

/// What differs between the test servers.
struct Server {
    kernel: &'static str,
    libc: &'static str,
    using_per_cpu: bool,
    max_per_cpu_cache: i64,
    cpu_free: i64,
    fs: &'static str,
    options: &'static str,
    max_open_files: i32,
}

impl Default for Server {
    fn default() -> Self {
        Server {
            kernel: "6.8.0-1021-aws",
            libc: "2.39",
            using_per_cpu: true,
            max_per_cpu_cache: 67_108_864,
            cpu_free: 180_000_000,
            fs: "xfs",
            options: "rw,noatime",
            max_open_files: 64_000,
        }
    }
}

fn metadata(s: &Server) -> bson::Document {
    doc! {
        "start": DateTime::from_millis(T0 - 1000),
        "buildInfo": { "version": "8.2.1", "allocator": "tcmalloc-google", "modules": [],
            "buildEnvironment": { "target_os": "linux", "target_arch": "x86_64" } },
        "getCmdLineOpts": { "argv": ["/usr/bin/mongod", "--config", "/etc/mongod.conf"],
            "parsed": { "config": "/etc/mongod.conf",
                "storage": { "dbPath": "/var/lib/mongodb" }, "net": { "port": 27017 } } },
        "hostInfo": {
            "system": { "hostname": "db8", "cpuAddrSize": 64, "memSizeMB": 32_000_i64,
                "memLimitMB": 32_000_i64, "numCores": 16, "numPhysicalCores": 8,
                "numCpuSockets": 1, "cpuArch": "x86_64", "numaEnabled": false, "numNumaNodes": 1 },
            "os": { "type": "Linux", "name": "Ubuntu", "version": "24.04" },
            "extra": { "versionString": format!("Linux version {}", s.kernel),
                "libcVersion": s.libc, "kernelVersion": s.kernel, "pageSize": 4096_i64,
                "numPages": 8_192_000_i64, "maxOpenFiles": s.max_open_files,
                "mountInfo": [
                    { "mountId": 24, "parentId": 1, "major": 259, "minor": 1, "root": "/",
                      "mountPoint": "/", "options": "rw,relatime", "fields": "shared:1",
                      "type": "ext4", "source": "/dev/nvme0n1p1", "superOpt": "rw" },
                    { "mountId": 30, "parentId": 24, "major": 259, "minor": 3, "root": "/",
                      "mountPoint": "/var/lib/mongodb", "options": s.options, "fields": "shared:7",
                      "type": s.fs, "source": "/dev/nvme1n1", "superOpt": "rw,attr2,inode64" },
                ] },
        },
        "end": DateTime::from_millis(T0 - 900),
    }
}

fn server_status(s: &Server, i: i64) -> bson::Document {
    let gib = 1_i64 << 30;
    doc! {
        "host": "db8", "version": "8.2.1", "process": "mongod", "pid": 4242_i64,
        "uptime": 3600.0 + i as f64, "uptimeMillis": 3_600_000_i64 + i * 1000,
        "localTime": DateTime::from_millis(T0 + i * 1000),
        "connections": { "current": 120, "available": 838_740, "totalCreated": 500_i64, "active": 40 },
        "opcounters": { "insert": 10_000_i64 + 200 * i, "query": 50_000_i64 + 2000 * i,
            "update": 5_000_i64 + 100 * i, "delete": 0_i64, "getmore": 0_i64, "command": 9_000_i64 + 300 * i },
        "globalLock": { "currentQueue": { "total": 0, "readers": 0, "writers": 0 } },
        "queues": { "execution": {
            "read": { "out": 2, "available": 126,
                "normalPriority": { "queueLength": 0, "totalTimeQueuedMicros": 0_i64 } },
            "write": { "out": 1, "available": 127,
                "normalPriority": { "queueLength": 0, "totalTimeQueuedMicros": 0_i64 } } } },
        "catalogStats": { "collections": 120, "capped": 0, "views": 0 },
        // The application's duplicate keys (user); no failed server check.
        "asserts": { "regular": 0, "warning": 0, "msg": 0, "user": 700_i64 + i,
            "tripwire": 0, "rollovers": 0 },
        // Targeted queries: about what they return is examined.
        "metrics": { "queryExecutor": { "scanned": 4_000_000_i64 + 2500 * i,
                "scannedObjects": 4_000_000_i64 + 2500 * i,
                "collectionScans": { "total": 10_i64, "nonTailable": 10_i64 } },
            "document": { "returned": 4_000_000_i64 + 2000 * i },
            "operation": { "scanAndOrder": 100_i64 } },
        "storageEngine": { "name": "wiredTiger" },
        "tcmalloc": { "usingPerCPUCaches": s.using_per_cpu,
            "maxPerCPUCacheSizeBytes": s.max_per_cpu_cache,
            "generic": { "current_allocated_bytes": 9 * gib, "heap_size": 10 * gib },
            "tcmalloc": { "cpu_free": s.cpu_free, "thread_cache_free": 1_000_000_i64,
                "central_cache_free": 50_000_000_i64, "transfer_cache_free": 20_000_000_i64,
                "pageheap_free_bytes": 100_000_000_i64, "pageheap_unmapped_bytes": 0_i64 } },
        "wiredTiger": {
            "cache": { "maximum bytes configured": 15 * gib, "bytes currently in the cache": 9 * gib,
                "tracked dirty bytes in the cache": gib / 4,
                "pages evicted by application threads": 0_i64,
                "application thread time evicting (usecs)": 0_i64 },
            "checkpoint": { "total succeed number of checkpoints": 60_i64 + i / 60,
                "most recent time (msecs)": 800_i64, "max time (msecs)": 2100_i64,
                "total time (msecs)": 50_000_i64 },
            "lock": { "checkpoint lock application thread wait time (usecs)": 1000_i64,
                "dhandle lock application thread time waiting (usecs)": 500_i64 },
            "data-handle": { "connection data handles currently active": 400_i64 },
            // The journal synced ten times a second, 0.4 ms each.
            "log": { "log sync operations": 36_000_i64 + 10 * i,
                "log sync time duration (usecs)": 14_400_000_i64 + 4000 * i },
        },
    }
}

fn bson_doc(d: &bson::Document) -> Vec<u8> {
    let mut v = Vec::new();
    d.to_writer(&mut v).expect("bson");
    v
}

/// Writes a diagnostic.data directory: one metadata document, then one
/// chunk per second (a reference sample and no deltas) for `seconds`.
fn write_dir(dir: &Path, s: &Server, seconds: i64) {
    let mut file = bson_doc(&doc! {
        "_id": DateTime::from_millis(T0 - 1000), "type": 0_i32, "doc": metadata(s),
    });
    for i in 0..seconds {
        let reference = doc! {
            "start": DateTime::from_millis(T0 + i * 1000),
            "serverStatus": server_status(s, i),
            "end": DateTime::from_millis(T0 + i * 1000 + 5),
        };
        let mut raw = bson_doc(&reference);
        let metrics =
            crate::ftdc::metrics::extract(bson::RawDocument::from_bytes(&raw).expect("raw"))
                .expect("metrics")
                .values
                .len();
        raw.extend(u32::try_from(metrics).expect("count").to_le_bytes());
        raw.extend(0u32.to_le_bytes());
        let mut z = ZlibEncoder::new(Vec::new(), Compression::fast());
        z.write_all(&raw).expect("compress");
        let mut data = u32::try_from(raw.len())
            .expect("len")
            .to_le_bytes()
            .to_vec();
        data.extend(z.finish().expect("compress"));
        file.extend(bson_doc(&doc! {
            "_id": DateTime::from_millis(T0 + i * 1000), "type": 1_i32,
            "data": Bson::Binary(bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: data }),
        }));
    }
    std::fs::write(dir.join("metrics.2026-10-27T08-53-20Z-00000"), file).expect("write");
}

fn explain_dir(s: &Server) -> Report {
    let tmp = tempfile::tempdir().expect("tempdir");
    write_dir(tmp.path(), s, 30);
    let r = read(tmp.path(), None, None, MAX_KEEP).expect("reads");
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.samples.len(), 30);
    let rec = recording_from_ftdc(&r);
    crate::explain::explain(&rec, &RuleSet::builtin().expect("rules"), None, None).expect("explain")
}

fn ids<'a>(it: impl Iterator<Item = &'a String>) -> Vec<&'a str> {
    it.map(String::as_str).collect()
}

#[test]
fn a_healthy_mongod_8_is_assessed_by_at_least_ten_rules_from_ftdc_alone() {
    let r = explain_dir(&Server::default());
    let assessed: Vec<&str> = ids(r.fired().map(|f| &f.rule_id))
        .into_iter()
        .chain(ids(r.passed.iter().map(|p| &p.rule_id)))
        .collect();
    assert!(
        assessed.len() >= 10,
        "{} assessed: {assessed:?}; not assessed: {:?}",
        assessed.len(),
        r.not_assessed
    );
    // The README says how many.
    let total = RuleSet::builtin().expect("rules").rules().len();
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README");
    let said = format!("that is {} of the {total}", assessed.len());
    assert!(
        readme
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .contains(&said),
        "README.md should say \"{said}\" (rules assessed from a mongod 8 FTDC directory): {assessed:?}"
    );
    for id in [
        "allocator.tcmalloc_per_cpu_caches",
        "allocator.tcmalloc_per_cpu_cache_empty",
        "allocator.tcmalloc_kernel",
        "allocator.tcmalloc_kernel_glibc_rseq",
        "allocator.tcmalloc_kernel_no_rseq",
        "host.open_files",
        "wiredtiger.cache_size",
    ] {
        assert!(
            assessed.contains(&id),
            "{id} not assessed: {:?}",
            r.not_assessed
        );
    }
    // Healthy: nothing above low fires.
    let bad: Vec<_> = r
        .fired()
        .filter(|f| f.severity >= crate::findings::Severity::Medium)
        .map(|f| &f.rule_id)
        .collect();
    assert!(bad.is_empty(), "{bad:?}");
    // What FTDC cannot say stays not assessed, with a reason.
    let why = |id: &str| {
        r.not_assessed
            .iter()
            .find(|n| n.rule_id == id)
            .map(|n| n.reason.clone())
            .unwrap_or_else(|| panic!("{id} should be not assessed"))
    };
    assert!(why("sched.wakeup_preemption").contains("sched"));
    assert!(
        why("host.readahead").contains("FTDC"),
        "{}",
        why("host.readahead")
    );
}

#[test]
fn per_cpu_advice_from_ftdc_alone_when_glibc_took_rseq() {
    let r = explain_dir(&Server {
        using_per_cpu: false,
        cpu_free: 0,
        ..Server::default()
    });
    let f = r
        .fired()
        .find(|f| f.rule_id == "allocator.tcmalloc_per_cpu_caches")
        .unwrap_or_else(|| panic!("{:?} / {:?}", r.findings, r.not_assessed));
    assert!(
        f.fix
            .commands
            .iter()
            .any(|c| c.contains("glibc.pthread.rseq=0"))
    );
    assert!(
        !r.fired()
            .any(|f| f.rule_id == "allocator.tcmalloc_per_cpu_cache_empty")
    );
    // Near miss: glibc 2.31 does not register rseq, so FTDC cannot blame it.
    let old = explain_dir(&Server {
        using_per_cpu: false,
        cpu_free: 0,
        libc: "2.31",
        ..Server::default()
    });
    assert!(
        !old.fired()
            .any(|f| f.rule_id == "allocator.tcmalloc_per_cpu_caches")
    );
}

#[test]
fn zero_capacity_and_kernel_and_host_findings_from_ftdc_alone() {
    let r = explain_dir(&Server {
        max_per_cpu_cache: 0,
        cpu_free: 0,
        ..Server::default()
    });
    let f = r
        .fired()
        .find(|f| f.rule_id == "allocator.tcmalloc_per_cpu_cache_empty")
        .unwrap_or_else(|| panic!("{:?}", r.not_assessed));
    // 32000 MB / 4 = 8000 MiB, capped at 1 GiB, over 16 CPUs.
    assert!(
        f.fix
            .commands
            .iter()
            .any(|c| c.contains("MONGO_TCMALLOC_PER_CPU_CACHE_SIZE_BYTES=67108864")),
        "{:?}",
        f.fix.commands
    );
    let k = explain_dir(&Server {
        kernel: "6.19.3-arch1-1",
        max_open_files: 1024,
        ..Server::default()
    });
    let fired = |r: &Report, id: &str| r.fired().any(|f| f.rule_id == id);
    assert!(
        fired(&k, "allocator.tcmalloc_kernel"),
        "{:?}",
        k.not_assessed
    );
    assert!(fired(&k, "host.open_files"));
    assert!(!fired(&r, "host.open_files"));
}
