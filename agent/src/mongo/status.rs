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
//! `wiredTiger.concurrentTransactions` or `queues.execution`. The figures
//! and their paths are declared with the type, in
//! `recording/server_status.rs`.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::LazyLock;

use bson::{RawDocument, raw::RawBsonRef};

use crate::ftdc::metrics::{ExtractError, extract_under, holds_metric, is_metric_type};
use crate::recording::server_status::{PATHS, ServerStatusSample};

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
