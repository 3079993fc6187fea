//! The one serverStatus parser: the figures mdiag keeps from a serverStatus
//! document, whether it came from a live poll or from an FTDC sample.
//!
//! Both sources are first flattened into dotted metric paths with int64
//! values the way mongod's FTDC does it ([`crate::ftdc::metrics::extract`]),
//! so a live reply and an FTDC sample look the same here: a function from a
//! path such as `opcounters.insert` to a number. Every figure is optional
//! (a compatible server may have no `wiredTiger` or `tcmalloc` section), and
//! figures that moved between versions are looked up under each of their
//! names: checkpoint statistics live in `wiredTiger.checkpoint` on 8.x and in
//! `wiredTiger.transaction` on 7.0 and older; execution tickets in
//! `wiredTiger.concurrentTransactions` or `queues.execution`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::LazyLock;

use bson::{RawDocument, raw::RawBsonRef};
use serde::{Deserialize, Serialize};

use crate::ftdc::metrics::{ExtractError, extract_under, holds_metric, is_metric_type};

/// Declares [`ServerStatusSample`]: one `Option<i64>` per figure, with the
/// paths it is read from (first present wins).
macro_rules! sample_fields {
    ($( $(#[doc = $doc:literal])* $field:ident : [$($path:literal),+ $(,)?] ;)*) => {
        /// The figures of one serverStatus document that rules and the report
        /// use; `None` when the document did not have them. Doubles are
        /// truncated to integers, booleans are 0/1 (as FTDC stores them).
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct ServerStatusSample {
            /// Top-level sections of the document that hold metrics ("opcounters", "wiredTiger", ...), sorted.
            pub sections: Vec<String>,
            $( $(#[doc = $doc])* #[serde(skip_serializing_if = "Option::is_none")] pub $field: Option<i64>, )*
        }

        impl ServerStatusSample {
            /// Reads every figure through `lookup` (a dotted path → value).
            pub fn parse_with(lookup: &dyn Fn(&str) -> Option<i64>, sections: Vec<String>) -> Self {
                Self {
                    sections,
                    $( $field: [$($path),+].iter().find_map(|p| lookup(p)), )*
                }
            }
        }

        /// Every path any figure is read from.
        pub const PATHS: &[&str] = &[ $($($path),+),* ];
    };
}

sample_fields! {
    /// `uptimeMillis`.
    uptime_ms: ["uptimeMillis"];
    /// `opcounters.*`: operations since start (counters).
    op_insert: ["opcounters.insert"];
    op_query: ["opcounters.query"];
    op_update: ["opcounters.update"];
    op_delete: ["opcounters.delete"];
    op_getmore: ["opcounters.getmore"];
    op_command: ["opcounters.command"];
    /// `connections.*`.
    connections_current: ["connections.current"];
    connections_available: ["connections.available"];
    connections_total_created: ["connections.totalCreated"];
    connections_active: ["connections.active"];
    /// `globalLock.currentQueue.*`: operations queued for the global lock / tickets.
    queue_total: ["globalLock.currentQueue.total"];
    queue_readers: ["globalLock.currentQueue.readers"];
    queue_writers: ["globalLock.currentQueue.writers"];
    /// `globalLock.activeClients.*`.
    active_readers: ["globalLock.activeClients.readers"];
    active_writers: ["globalLock.activeClients.writers"];
    /// Read / write execution tickets in use and available (`wiredTiger.concurrentTransactions` up to 7.x, `queues.execution` from 7.0).
    tickets_read_out: ["wiredTiger.concurrentTransactions.read.out", "queues.execution.read.out"];
    tickets_read_available: ["wiredTiger.concurrentTransactions.read.available", "queues.execution.read.available"];
    tickets_write_out: ["wiredTiger.concurrentTransactions.write.out", "queues.execution.write.out"];
    tickets_write_available: ["wiredTiger.concurrentTransactions.write.available", "queues.execution.write.available"];
    /// `mem.resident` / `mem.virtual`, MiB.
    mem_resident_mb: ["mem.resident"];
    mem_virtual_mb: ["mem.virtual"];
    /// `extra_info.*` (Linux): CPU time, faults, threads.
    user_time_us: ["extra_info.user_time_us"];
    system_time_us: ["extra_info.system_time_us"];
    page_faults: ["extra_info.page_faults"];
    threads: ["extra_info.threads"];
    /// `tcmalloc.usingPerCPUCaches` (Google TCMalloc only; 0/1).
    tcmalloc_per_cpu_caches: ["tcmalloc.usingPerCPUCaches"];
    /// `tcmalloc.tcmalloc.cpu_free`: bytes in per-CPU caches (Google TCMalloc; > 0 when they really work).
    tcmalloc_cpu_free: ["tcmalloc.tcmalloc.cpu_free"];
    /// `tcmalloc.maxPerCPUCacheSizeBytes`: the capacity of each CPU's cache (Google TCMalloc; 0 = the caches hold nothing).
    tcmalloc_max_per_cpu_cache: ["tcmalloc.maxPerCPUCacheSizeBytes"];
    tcmalloc_allocated_bytes: ["tcmalloc.generic.current_allocated_bytes"];
    tcmalloc_heap_size: ["tcmalloc.generic.heap_size"];
    tcmalloc_pageheap_free_bytes: ["tcmalloc.tcmalloc.pageheap_free_bytes"];
    tcmalloc_pageheap_unmapped_bytes: ["tcmalloc.tcmalloc.pageheap_unmapped_bytes"];
    tcmalloc_central_cache_free: ["tcmalloc.tcmalloc.central_cache_free", "tcmalloc.tcmalloc.central_cache_free_bytes"];
    tcmalloc_transfer_cache_free: ["tcmalloc.tcmalloc.transfer_cache_free", "tcmalloc.tcmalloc.transfer_cache_free_bytes"];
    tcmalloc_thread_cache_free: ["tcmalloc.tcmalloc.thread_cache_free", "tcmalloc.tcmalloc.thread_cache_free_bytes"];
    /// gperftools: `tcmalloc.tcmalloc.spinlock_total_delay_ns`.
    tcmalloc_spinlock_delay_ns: ["tcmalloc.tcmalloc.spinlock_total_delay_ns"];
    /// `wiredTiger.cache`: size and fill.
    cache_max_bytes: ["wiredTiger.cache.maximum bytes configured"];
    cache_bytes: ["wiredTiger.cache.bytes currently in the cache"];
    cache_dirty_bytes: ["wiredTiger.cache.tracked dirty bytes in the cache"];
    cache_bytes_read: ["wiredTiger.cache.bytes read into cache"];
    cache_bytes_written: ["wiredTiger.cache.bytes written from cache"];
    /// Pages evicted by application threads (they do eviction work when the cache is too full).
    cache_app_evicted_pages: ["wiredTiger.cache.pages evicted by application threads"];
    cache_app_evict_time_us: ["wiredTiger.cache.application thread time evicting (usecs)", "wiredTiger.thread-yield.application thread time evicting (usecs)"];
    cache_app_wait_time_us: ["wiredTiger.thread-yield.application thread time waiting for cache (usecs)"];
    cache_worker_evicted_pages: ["wiredTiger.cache.eviction worker thread evicting pages"];
    cache_modified_evicted: ["wiredTiger.cache.modified pages evicted"];
    cache_unmodified_evicted: ["wiredTiger.cache.unmodified pages evicted"];
    cache_aggressive: ["wiredTiger.cache.eviction currently operating in aggressive mode"];
    /// Checkpoints (8.x `wiredTiger.checkpoint`, ≤7.0 `wiredTiger.transaction`).
    checkpoints: ["wiredTiger.checkpoint.total succeed number of checkpoints", "wiredTiger.checkpoint.number of checkpoints", "wiredTiger.transaction.transaction checkpoints"];
    checkpoint_running: ["wiredTiger.checkpoint.currently running", "wiredTiger.checkpoint.prepare currently running", "wiredTiger.transaction.transaction checkpoint currently running"];
    checkpoint_most_recent_ms: ["wiredTiger.checkpoint.most recent time (msecs)", "wiredTiger.transaction.transaction checkpoint most recent time (msecs)"];
    checkpoint_max_ms: ["wiredTiger.checkpoint.max time (msecs)", "wiredTiger.transaction.transaction checkpoint max time (msecs)"];
    checkpoint_total_ms: ["wiredTiger.checkpoint.total time (msecs)", "wiredTiger.transaction.transaction checkpoint total time (msecs)"];
    /// `wiredTiger.lock`: application threads' wait times (µs, counters).
    lock_checkpoint_wait_us: ["wiredTiger.lock.checkpoint lock application thread wait time (usecs)"];
    lock_dhandle_wait_us: ["wiredTiger.lock.dhandle lock application thread time waiting (usecs)"];
    lock_schema_wait_us: ["wiredTiger.lock.schema lock application thread wait time (usecs)"];
    lock_txn_global_wait_us: ["wiredTiger.lock.txn global lock application thread time waiting (usecs)"];
    /// `wiredTiger.data-handle`.
    dhandles_active: ["wiredTiger.data-handle.connection data handles currently active"];
    dhandle_sweeps: ["wiredTiger.data-handle.connection sweeps"];
}

/// The figures whose values only grow while mongod runs (rates are taken
/// from their differences).
pub const COUNTERS: &[&str] = &[
    "opcounters.",
    "connections.totalCreated",
    "extra_info.user_time_us",
    "extra_info.system_time_us",
    "extra_info.page_faults",
];

impl ServerStatusSample {
    /// Parses a serverStatus reply (a live poll), every second: only the
    /// sub-documents on the way to a figure's path are flattened (a reply
    /// has thousands of metrics, the parser reads about a hundred), and a
    /// section counts when it holds a metric, as [`extract`] would find.
    pub fn from_document(doc: &RawDocument) -> Result<Self, ExtractError> {
        static ON_THE_WAY: LazyLock<HashSet<&'static str>> = LazyLock::new(|| {
            PATHS
                .iter()
                .flat_map(|p| p.match_indices('.').map(|(i, _)| &p[..=i]))
                .collect()
        });
        let wanted: HashSet<&str> = PATHS.iter().copied().collect();
        let flat = extract_under(doc, &|prefix| ON_THE_WAY.contains(prefix))?;
        let values: HashMap<&str, i64> = flat
            .paths
            .iter()
            .zip(flat.values.iter())
            .filter(|(path, _)| wanted.contains(path))
            .map(|(path, value)| (path, *value))
            .collect();
        let mut sections = BTreeSet::new();
        for e in doc.iter_elements().flatten() {
            let holds = is_metric_type(e.element_type())
                || match e.value() {
                    Ok(RawBsonRef::Document(d)) => holds_metric(d),
                    Ok(RawBsonRef::Array(a)) => {
                        RawDocument::from_bytes(a.as_bytes()).is_ok_and(holds_metric)
                    }
                    _ => false,
                };
            if let Some(section) = section_of(e.key().as_str()).filter(|_| holds) {
                sections.insert(section.to_owned());
            }
        }
        Ok(Self::parse_with(
            &|p| values.get(p).copied(),
            sections.into_iter().collect(),
        ))
    }

    /// Whether per-CPU caches really work: `usingPerCPUCaches` and
    /// `cpu_free > 0` (MongoDB's own check); `None` without Google TCMalloc.
    pub fn per_cpu_caches_active(&self) -> Option<bool> {
        let using = self.tcmalloc_per_cpu_caches?;
        Some(using != 0 && self.tcmalloc_cpu_free.unwrap_or(0) > 0)
    }

    /// Operations of every kind (opcounters summed), when any is present.
    pub fn ops_total(&self) -> Option<i64> {
        let all = [
            self.op_insert,
            self.op_query,
            self.op_update,
            self.op_delete,
            self.op_getmore,
            self.op_command,
        ];
        all.iter()
            .any(Option::is_some)
            .then(|| all.iter().flatten().sum())
    }
}

/// The top-level section of a metric path; `ok` is not one.
fn section_of(path: &str) -> Option<&str> {
    path.split('.')
        .next()
        .filter(|s| *s != "ok" && !s.is_empty())
}

/// Maps FTDC metric paths (`serverStatus.opcounters.insert`) of one chunk to
/// the serverStatus paths the parser asks for, once per chunk.
#[derive(Debug, Default)]
pub struct FtdcColumns {
    /// serverStatus path → metric index in the chunk.
    index: HashMap<&'static str, usize>,
    sections: Vec<String>,
}

/// Prefix of serverStatus metrics in FTDC samples.
pub const FTDC_PREFIX: &str = "serverStatus.";

impl FtdcColumns {
    /// Finds the parser's paths among `paths` (the chunk's metric paths).
    pub fn new<'a>(paths: impl Iterator<Item = &'a str>) -> Self {
        let wanted: HashMap<&str, &'static str> = PATHS.iter().map(|p| (*p, *p)).collect();
        let mut index = HashMap::new();
        let mut sections = BTreeSet::new();
        for (i, path) in paths.enumerate() {
            let Some(rest) = path.strip_prefix(FTDC_PREFIX) else {
                continue;
            };
            if let Some(section) = section_of(rest)
                && !sections.contains(section)
            {
                sections.insert(section.to_owned());
            }
            if let Some(p) = wanted.get(rest) {
                index.entry(*p).or_insert(i);
            }
        }
        Self {
            index,
            sections: sections.into_iter().collect(),
        }
    }

    /// Whether the chunk has serverStatus metrics at all.
    pub fn has_server_status(&self) -> bool {
        !self.sections.is_empty()
    }

    /// The sample `s` of `chunk`.
    pub fn sample(&self, chunk: &crate::ftdc::Chunk, s: usize) -> ServerStatusSample {
        ServerStatusSample::parse_with(
            &|p| self.index.get(p).and_then(|&m| chunk.value(s, m)),
            self.sections.clone(),
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::PathBuf;

    /// The shared fixtures: `<repo>/../shared/fixtures` (in CI beside the
    /// clone), else the nearest `shared/fixtures` above the repository (a
    /// git worktree sits deeper than the clone).
    pub(crate) fn fixtures() -> PathBuf {
        let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        manifest
            .ancestors()
            .skip(1)
            .map(|a| a.join("shared/fixtures"))
            .find(|p| p.is_dir())
            .unwrap_or_else(|| manifest.join("../../shared/fixtures"))
    }

    /// A JSON fixture as BSON (extended-JSON wrappers such as `$date` stay
    /// sub-documents; they hold no metric the parser reads).
    pub(crate) fn json_doc(path: &std::path::Path) -> bson::RawDocumentBuf {
        let text = std::fs::read_to_string(path).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        bson::serialize_to_raw_document_buf(&v).unwrap()
    }

    #[test]
    fn parses_the_8_2_shape() {
        let doc = json_doc(&fixtures().join("serverStatus/serverStatus-8.2-shape.json"));
        let s = ServerStatusSample::from_document(&doc).unwrap();
        assert_eq!(s.op_insert, Some(1_200_000));
        assert_eq!(s.op_command, Some(5_400_000));
        assert_eq!(s.connections_current, Some(850));
        assert_eq!(s.tcmalloc_per_cpu_caches, Some(1));
        assert_eq!(s.tcmalloc_cpu_free, Some(48_000_000));
        assert_eq!(s.per_cpu_caches_active(), Some(true));
        assert_eq!(s.tcmalloc_central_cache_free, Some(90_000_000));
        assert_eq!(s.cache_max_bytes, Some(16_106_127_360));
        assert_eq!(s.cache_bytes, Some(15_200_000_000));
        assert_eq!(s.cache_app_evict_time_us, Some(91_000_000));
        // 8.x: checkpoint statistics under wiredTiger.checkpoint.
        assert_eq!(s.checkpoint_most_recent_ms, Some(4200));
        assert_eq!(s.checkpoint_max_ms, Some(9100));
        assert_eq!(s.checkpoints, Some(1440));
        assert_eq!(s.lock_checkpoint_wait_us, Some(2_300_000));
        assert_eq!(s.dhandles_active, Some(5200));
        assert_eq!(s.tickets_write_available, Some(122));
        assert_eq!(s.threads, Some(180));
        assert_eq!(s.uptime_ms, Some(86_400_000));
        assert_eq!(
            s.ops_total(),
            Some(1_200_000 + 9_800_000 + 3_100_000 + 40_000 + 220_000 + 5_400_000)
        );
        for section in [
            "opcounters",
            "tcmalloc",
            "wiredTiger",
            "extra_info",
            "uptimeMillis",
        ] {
            assert!(
                s.sections.iter().any(|x| x == section),
                "{section}: {:?}",
                s.sections
            );
        }
        assert!(!s.sections.iter().any(|x| x == "ok"));
    }

    #[test]
    fn parses_the_4_2_shape() {
        let doc = json_doc(&fixtures().join("serverStatus/getDiagnosticData-mongod-4.2.8.json"));
        let ss = doc.get_document("serverStatus").unwrap();
        let s = ServerStatusSample::from_document(ss).unwrap();
        assert_eq!(s.op_insert, Some(2083));
        assert_eq!(s.op_getmore, Some(19527));
        assert_eq!(s.connections_total_created, Some(83));
        // gperftools TCMalloc: no per-CPU caches figure at all.
        assert_eq!(s.tcmalloc_per_cpu_caches, None);
        assert_eq!(s.per_cpu_caches_active(), None);
        assert_eq!(s.tcmalloc_allocated_bytes, Some(177_288_936));
        assert!(s.tcmalloc_thread_cache_free.is_some());
        // ≤7.0: checkpoint statistics under wiredTiger.transaction.
        assert!(s.checkpoint_most_recent_ms.is_some());
        assert!(s.checkpoints.is_some());
        assert_eq!(s.cache_bytes, Some(4_148_341));
        assert_eq!(s.cache_worker_evicted_pages, Some(6));
        assert!(s.cache_app_evict_time_us.is_some());
        assert_eq!(s.tickets_read_available, Some(128));
        assert_eq!(s.mem_resident_mb, Some(123));
        assert!(s.page_faults.is_some());
    }

    /// What `from_document` gives, from every metric of the document.
    fn from_every_metric(doc: &RawDocument) -> ServerStatusSample {
        let flat = crate::ftdc::metrics::extract(doc).unwrap();
        let values: HashMap<&str, i64> = flat.paths.iter().zip(flat.values).collect();
        let sections: BTreeSet<String> = flat
            .paths
            .iter()
            .filter_map(section_of)
            .map(str::to_owned)
            .collect();
        ServerStatusSample::parse_with(&|p| values.get(p).copied(), sections.into_iter().collect())
    }

    #[test]
    fn only_the_way_to_the_figures_is_flattened_with_the_same_result() {
        let d42 = json_doc(&fixtures().join("serverStatus/getDiagnosticData-mongod-4.2.8.json"));
        let d82 = json_doc(&fixtures().join("serverStatus/serverStatus-8.2-shape.json"));
        let odd = bson::rawdoc! {
            "ok": 1.0,
            "host": "h",
            "empty": {},
            "strings": { "a": "x", "b": ["y"] },
            "deep": { "a": { "b": [ { "c": true } ] } },
            "when": bson::Timestamp { time: 5, increment: 1 },
            "opcounters": { "insert": 5_i64 },
        };
        for doc in [d42.get_document("serverStatus").unwrap(), &d82, &odd] {
            let s = ServerStatusSample::from_document(doc).unwrap();
            assert_eq!(s, from_every_metric(doc));
        }
        let s = ServerStatusSample::from_document(&odd).unwrap();
        assert_eq!(s.sections, ["deep", "opcounters", "when"]);
    }

    #[test]
    fn a_server_without_wiredtiger_or_tcmalloc_gives_none() {
        let doc = bson::rawdoc! {
            "process": "secantusd",
            "opcounters": { "insert": 5_i64, "query": 1.9_f64 },
            "ok": 1.0,
        };
        let s = ServerStatusSample::from_document(&doc).unwrap();
        assert_eq!(
            (s.op_insert, s.op_query, s.op_update),
            (Some(5), Some(1), None)
        );
        assert_eq!(s.ops_total(), Some(6));
        assert_eq!(s.cache_bytes, None);
        assert_eq!(s.per_cpu_caches_active(), None);
        assert_eq!(s.sections, vec!["opcounters"]);
        let empty = ServerStatusSample::from_document(&bson::rawdoc! {}).unwrap();
        assert_eq!(empty.ops_total(), None);
    }

    #[test]
    fn per_cpu_caches_need_cpu_free() {
        let s = ServerStatusSample {
            tcmalloc_per_cpu_caches: Some(1),
            tcmalloc_cpu_free: Some(0),
            ..Default::default()
        };
        assert_eq!(s.per_cpu_caches_active(), Some(false));
    }
}
