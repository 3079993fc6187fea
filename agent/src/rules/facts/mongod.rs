//! The `mongod` fact group: mongod's own figures over the recording (polled
//! live, or joined from FTDC), from [`MongodSummary`] so the report shows the
//! same numbers. Only figures the server reported are bound: a rule that
//! reads one the server did not have (no `wiredTiger`, no Google TCMalloc)
//! fails to evaluate and is reported as not assessed, never run on zeros.

use super::{FactGroup, FactValue, float, int, text};
use crate::mongo::summary::MongodSummary;
use crate::recording::Recording;

/// Why the group is absent when mongod was not polled.
pub const NOT_POLLED: &str = "mongod was not polled: give record --uri (or MDIAG_MONGODB_URI, or [mongodb] uri in /etc/mdiag/mdiag.toml), or explain --ftdc DIR";

/// The `mongod` group, or why it is absent.
pub fn mongod_facts(rec: &Recording) -> Result<FactGroup, String> {
    let s = MongodSummary::of(rec).ok_or_else(|| NOT_POLLED.to_string())?;
    if s.seconds_with_sample == 0 {
        let why = s
            .missing_reasons
            .first()
            .map_or("no serverStatus sample was recorded", |r| r.reason.as_str());
        return Err(format!("mongod did not answer: {why}"));
    }
    let mut g = FactGroup::new();
    let mut put = |k: &str, v: Option<FactValue>| {
        if let Some(v) = v {
            g.insert(k.into(), v);
        }
    };
    let fl = |v: Option<f64>| v.map(float);
    let it = |v: Option<i64>| v.map(FactValue::Int);
    let un = |v: Option<u64>| v.map(int);
    put("source", Some(text(s.source.clone())));
    put("version", s.version.clone().map(text));
    put("allocator", s.allocator.clone().map(text));
    put("process", s.process.clone().map(text));
    put("storage_engine", s.storage_engine.clone().map(text));
    put(
        "using_per_cpu_caches",
        s.using_per_cpu_caches.map(FactValue::Bool),
    );
    put(
        "per_cpu_caches_active",
        s.per_cpu_caches_active.map(FactValue::Bool),
    );
    put("tcmalloc_cpu_free_bytes", it(s.tcmalloc_cpu_free_bytes));
    put("ops_per_s", fl(s.total_ops_per_s()));
    for (kind, rate) in &s.ops_per_s {
        put(&format!("{kind}_per_s"), Some(float(*rate)));
    }
    put("connections", it(s.connections_last));
    put("connections_max", it(s.connections_max));
    put("queue_max", it(s.queue_max));
    put(
        "read_tickets_available_min",
        it(s.read_tickets_available_min),
    );
    put(
        "write_tickets_available_min",
        it(s.write_tickets_available_min),
    );
    put("cache_max_bytes", it(s.cache_max_bytes));
    put("cache_fill", fl(s.cache_fill_last));
    put("cache_fill_max", fl(s.cache_fill_max));
    put("cache_dirty_fill_max", fl(s.cache_dirty_fill_max));
    put("cache_size_gb", fl(s.cache_size_gb));
    put("app_evicted_pages_per_s", fl(s.app_evicted_pages_per_s));
    put("app_evict_ms_per_s", fl(s.app_evict_ms_per_s));
    put("app_cache_wait_ms_per_s", fl(s.app_cache_wait_ms_per_s));
    put("checkpoints", it(s.checkpoints));
    put("checkpoint_most_recent_ms", it(s.checkpoint_most_recent_ms));
    put("checkpoint_max_ms", it(s.checkpoint_max_ms));
    put(
        "checkpoint_lock_wait_ms_per_s",
        fl(s.checkpoint_lock_wait_ms_per_s),
    );
    put(
        "dhandle_lock_wait_ms_per_s",
        fl(s.dhandle_lock_wait_ms_per_s),
    );
    put("dhandles_active", it(s.dhandles_active_last));
    put("collections", un(s.collections));
    put("indexes", un(s.indexes));
    put("seconds_with_sample", Some(int(s.seconds_with_sample)));
    put("seconds_missing", Some(int(s.seconds_missing)));
    put(
        "stopped_answering",
        Some(FactValue::Bool(s.stopped_answering_at_s.is_some())),
    );
    Ok(g)
}

/// The allocator kind rules' `applies_to.allocator` matches (see
/// [`super::allocator::KIND_NAMES`]), from buildInfo.allocator:
/// "tcmalloc-google" is Google's TCMalloc; "tcmalloc-gperf" and plain
/// "tcmalloc" (mongod before 8.0) are gperftools; "system" is glibc's malloc
/// on Linux. `None` for anything else.
pub fn allocator_kind(build_allocator: &str) -> Option<String> {
    let kind = match build_allocator {
        "tcmalloc-google" => "google_tcmalloc",
        "tcmalloc-gperf" | "tcmalloc" => "gperftools",
        "system" => "glibc",
        "jemalloc" => "jemalloc",
        _ => return None,
    };
    Some(kind.into())
}

/// Gives `rec` mongod data in which every figure is present and non-zero
/// (for [`super::Facts::example`], against which rules are checked on load).
pub(crate) fn fill_example(rec: &mut Recording) {
    use crate::mongo::model::{MongodInfo, MongodRecording, MongodSlice};
    use crate::mongo::status::ServerStatusSample;
    let n = rec.slices.len() as i64;
    for (i, slice) in rec.slices.iter_mut().enumerate() {
        let v = 100 * (i as i64 + 1);
        slice.mongod = Some(MongodSlice {
            at_ms: Some(slice.start_ms + 100),
            status: Some(ServerStatusSample::parse_with(
                &|_| Some(v),
                vec!["opcounters".into(), "tcmalloc".into(), "wiredTiger".into()],
            )),
            missing: None,
        });
    }
    rec.mongod = Some(MongodRecording {
        source: "live".into(),
        uri: Some("mongodb://127.0.0.1:27017".into()),
        info: Some(MongodInfo {
            version: Some("8.2.1".into()),
            allocator: Some("tcmalloc-google".into()),
            process: Some("mongod".into()),
            storage_engine: Some("wiredTiger".into()),
            cache_size_gb: Some(4.0),
            collections: Some(10),
            indexes: Some(20),
            ..Default::default()
        }),
        polls_ok: u64::try_from(n).unwrap_or(0),
        stopped_answering_at_ms: Some(1000),
        ..Default::default()
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mongo::summary::tests::recording;

    #[test]
    fn group_has_the_summary_figures_and_absent_reasons() {
        let rec = recording();
        let g = mongod_facts(&rec).unwrap();
        assert_eq!(g["insert_per_s"], FactValue::Float(100.0));
        assert_eq!(g["ops_per_s"], FactValue::Float(100.0));
        assert_eq!(g["per_cpu_caches_active"], FactValue::Bool(false));
        assert_eq!(g["cache_fill"], FactValue::Float(0.55));
        assert_eq!(g["checkpoints"], FactValue::Int(2));
        assert_eq!(g["stopped_answering"], FactValue::Bool(true));
        assert_eq!(g["seconds_missing"], FactValue::Int(4));
        assert_eq!(g["version"], FactValue::Text("8.2.1".into()));
        // Figures the server did not report are not bound.
        assert!(!g.contains_key("dhandles_active"));
        let facts = crate::rules::Facts::derive(&rec);
        assert_eq!(facts.mongod_version, Some(semver::Version::new(8, 2, 1)));
        assert_eq!(facts.allocator.as_deref(), Some("google_tcmalloc"));
        assert!(facts.group("mongod").is_some());

        let mut none = rec.clone();
        none.mongod = None;
        assert_eq!(mongod_facts(&none).unwrap_err(), NOT_POLLED);
        let mut silent = rec;
        for s in &mut silent.slices {
            if let Some(m) = s.mongod.as_mut() {
                m.status = None;
                m.missing = Some("unreachable: connection refused".into());
            }
        }
        let e = mongod_facts(&silent).unwrap_err();
        assert!(e.contains("connection refused"), "{e}");
        assert_eq!(
            allocator_kind("tcmalloc-gperf").as_deref(),
            Some("gperftools")
        );
        assert_eq!(allocator_kind("tcmalloc").as_deref(), Some("gperftools"));
        assert_eq!(allocator_kind("system").as_deref(), Some("glibc"));
        assert_eq!(allocator_kind("mimalloc"), None);
    }
}
