//! The `mongod` fact group: mongod's own figures over the recording (polled
//! live, or joined from FTDC), from [`MongodSummary`] so the report shows the
//! same numbers. Only figures the server reported are bound: a rule that
//! reads one the server did not have (no `wiredTiger`, no Google TCMalloc)
//! fails to evaluate and is reported as not assessed, never run on zeros.

use super::{FactGroup, FactValue, float, int, text};
use crate::mongo::summary::MongodSummary;
use crate::recording::Recording;
use crate::recording::mongod::MongodInfo;

/// mongod's `storage.syncPeriodSecs` default: a checkpoint every 60 s.
pub const DEFAULT_SYNC_PERIOD_S: f64 = 60.0;

/// Why the group is absent when mongod was not polled.
pub const NOT_POLLED: &str = "mongod was not polled: give record --uri (or MDIAG_MONGODB_URI, or [mongodb] uri in /etc/mdiag/mdiag.toml), or explain --ftdc DIR";

/// The samples of one kind that ride on the recording's mongod slices
/// (replication or host figures), with their time in ms from the
/// recording's start, in time order; `absent` when there is none, and
/// [`NOT_POLLED`] when mongod was not polled at all.
pub fn slice_samples<'a, T>(
    rec: &'a Recording,
    pick: impl Fn(&'a crate::recording::mongod::MongodSlice) -> Option<&'a T>,
    absent: &str,
) -> Result<Vec<(u64, &'a T)>, String> {
    rec.mongod.as_ref().ok_or_else(|| NOT_POLLED.to_string())?;
    let samples: Vec<(u64, &T)> = rec
        .slices
        .iter()
        .filter_map(|s| {
            let m = s.mongod.as_ref()?;
            Some((m.at_ms.unwrap_or(s.start_ms), pick(m)?))
        })
        .collect();
    if samples.is_empty() {
        return Err(absent.to_string());
    }
    Ok(samples)
}

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
    identity_facts(&mut g, &s);
    lifecycle_facts(&mut g, rec, &s);
    fcv_facts(&mut g, rec, &s);
    status_facts(&mut g, rec, &s);
    if let Some(i) = rec.mongod.as_ref().and_then(|m| m.info.as_ref()) {
        config_facts(&mut g, rec, i);
    }
    summary_figures(&mut g, &s);
    Ok(g)
}

/// Binds `k` when the server reported it.
fn put(g: &mut FactGroup, k: &str, v: Option<FactValue>) {
    if let Some(v) = v {
        g.insert(k.into(), v);
    }
}

/// A float figure, when reported.
fn fl(v: Option<f64>) -> Option<FactValue> {
    v.map(float)
}

/// A signed figure, when reported.
fn it(v: Option<i64>) -> Option<FactValue> {
    v.map(FactValue::Int)
}

/// Where the server's release series stands in MongoDB's lifecycle
/// schedule on the day of the recording (`mongo::lifecycle`): its series,
/// its end-of-life date (`""` when the schedule has none) and whether that
/// date had passed.
fn lifecycle_facts(g: &mut FactGroup, rec: &Recording, s: &MongodSummary) {
    let Some(version) = s.version.as_deref() else {
        return;
    };
    let series = crate::mongo::lifecycle::series(version);
    put(
        g,
        "release_series",
        Some(text(
            series.map_or_else(String::new, |(a, b)| format!("{a}.{b}")),
        )),
    );
    let eol = crate::mongo::lifecycle::end_of_life(version);
    put(
        g,
        "end_of_life",
        Some(text(eol.map_or_else(String::new, |d| d.to_string()))),
    );
    let day = rec.started_at.date_naive();
    put(
        g,
        "past_end_of_life",
        Some(FactValue::Bool(eol.is_some_and(|d| day > d))),
    );
}

/// The feature compatibility version, when it was read: `fcv`,
/// `fcv_target` (`""` unless a change of it is unfinished), and the fix's
/// `--eval` arguments that set it to the binary's series
/// (`fcv_set_eval`) and back to the recorded value (`fcv_revert_eval`).
fn fcv_facts(g: &mut FactGroup, rec: &Recording, s: &MongodSummary) {
    let Some(info) = rec.mongod.as_ref().and_then(|m| m.info.as_ref()) else {
        return;
    };
    let Some(fcv) = info.fcv.as_deref() else {
        return;
    };
    put(g, "fcv", Some(text(fcv.to_owned())));
    put(
        g,
        "fcv_target",
        Some(text(info.fcv_target.clone().unwrap_or_default())),
    );
    let Some(version) = s.version.as_deref() else {
        return;
    };
    let eval = crate::mongo::fcv::set_eval;
    put(g, "fcv_set_eval", eval(version, version).map(text));
    put(g, "fcv_revert_eval", eval(version, fcv).map(text));
}

/// What the server is: version, allocator, process, storage engine and
/// TCMalloc's per-CPU caches.
fn identity_facts(g: &mut FactGroup, s: &MongodSummary) {
    put(g, "source", Some(text(s.source.clone())));
    put(g, "version", s.version.clone().map(text));
    put(g, "allocator", s.allocator.clone().map(text));
    put(g, "process", s.process.clone().map(text));
    put(g, "storage_engine", s.storage_engine.clone().map(text));
    put(
        g,
        "using_per_cpu_caches",
        s.using_per_cpu_caches.map(FactValue::Bool),
    );
    put(
        g,
        "per_cpu_caches_active",
        s.per_cpu_caches_active.map(FactValue::Bool),
    );
    put(g, "tcmalloc_cpu_free_bytes", it(s.tcmalloc_cpu_free_bytes));
    put(
        g,
        "max_per_cpu_cache_bytes",
        it(s.tcmalloc_max_per_cpu_cache_bytes),
    );
}

/// From the newest serverStatus samples: the connection limit, resident
/// memory and the data handles' hash buckets.
fn status_facts(g: &mut FactGroup, rec: &Recording, s: &MongodSummary) {
    let newest = rec
        .slices
        .iter()
        .rev()
        .filter_map(|sl| sl.mongod.as_ref()?.status.as_ref())
        .find(|st| st.connections_current.is_some() && st.connections_available.is_some());
    if let Some(st) = newest {
        let max = st.connections_current.unwrap_or(0) + st.connections_available.unwrap_or(0);
        put(g, "max_incoming_connections", Some(FactValue::Int(max)));
        if let (Some(most), true) = (s.connections_max, max > 0) {
            put(
                g,
                "connections_limit_share",
                Some(float(most as f64 / max as f64)),
            );
        }
        // mongod's own startup check wants at least two mappings per connection.
        put(
            g,
            "max_map_count_wanted",
            Some(FactValue::Int(max.saturating_mul(2))),
        );
    }
    // mongod's resident memory (serverStatus mem.resident, MiB) in the
    // newest sample that has it: what the WiredTiger cache and everything
    // else of mongod hold now, against its memory limit.
    let resident = rec
        .slices
        .iter()
        .rev()
        .filter_map(|sl| sl.mongod.as_ref()?.status.as_ref()?.mem_resident_mb)
        .next();
    put(
        g,
        "resident_gb",
        resident.map(|mb| float((mb as f64 / 1024.0 * 100.0).round() / 100.0)),
    );
    if let Some(d) = s.dhandles_active_last {
        put(
            g,
            "suggested_dhandle_buckets",
            Some(FactValue::Int(suggested_hash_buckets(d))),
        );
    }
}

/// From mongod's startup configuration (hostInfo, WiredTiger's
/// configString): eviction, checkpoints, the memory limit and what to
/// suggest instead.
fn config_facts(g: &mut FactGroup, rec: &Recording, i: &MongodInfo) {
    let config = i.wt_config_string.clone().unwrap_or_default();
    let threads =
        |key: &str| crate::rules::wt_config::get(&config, key).and_then(|v| v.parse::<i64>().ok());
    // mongod opens WiredTiger with eviction=(threads_min=4,threads_max=4)
    // unless configString says otherwise.
    let (tmin, tmax) = (
        threads("eviction.threads_min").unwrap_or(4),
        threads("eviction.threads_max").unwrap_or(4),
    );
    put(g, "config_string", Some(text(config.clone())));
    // WiredTiger's eviction triggers as percentages of the cache: 95 and
    // 20 unless configString sets them (a value above 100 is a size in
    // bytes, which these facts do not express: left out).
    let percent = |key: &str, default: f64| match crate::rules::wt_config::get(&config, key) {
        None => Some(default),
        Some(v) => v.parse::<f64>().ok().filter(|p| *p <= 100.0),
    };
    put(
        g,
        "eviction_trigger",
        percent("eviction_trigger", 95.0).map(float),
    );
    put(
        g,
        "eviction_dirty_trigger",
        percent("eviction_dirty_trigger", 20.0).map(float),
    );
    // Seconds between checkpoints: storage.syncPeriodSecs (--syncdelay),
    // else mongod's default of 60.
    put(
        g,
        "checkpoint_interval_s",
        Some(float(i.sync_period_secs.unwrap_or(DEFAULT_SYNC_PERIOD_S))),
    );
    put(g, "eviction_threads_min", Some(FactValue::Int(tmin)));
    put(g, "eviction_threads_max", Some(FactValue::Int(tmax)));
    let (smin, smax) = suggested_eviction_threads(tmin, tmax);
    put(
        g,
        "suggested_eviction_threads_min",
        Some(FactValue::Int(smin)),
    );
    put(
        g,
        "suggested_eviction_threads_max",
        Some(FactValue::Int(smax)),
    );
    // The memory mongod may use: its own hostInfo memLimitMB (the cgroup
    // limit when lower than RAM, mongod 4.4+), lowered by the cgroup
    // limit mdiag read from the target when that is lower (older mongod).
    let cgroup_mb = rec
        .host
        .target_process
        .as_ref()
        .and_then(|p| p.cgroup.as_ref())
        .and_then(|c| c.memory_limit_bytes())
        .and_then(|b| i64::try_from(b >> 20).ok());
    let limit_mb = i
        .host_mem_limit_mb
        .or(i.host_mem_mb)
        .filter(|m| *m > 0)
        .map(|m| cgroup_mb.map_or(m, |c| m.min(c)));
    if let Some(limit) = limit_mb {
        let gb = limit as f64 / 1024.0;
        put(g, "mem_limit_gb", Some(float((gb * 100.0).round() / 100.0)));
        put(
            g,
            "suggested_cache_size_gb",
            Some(float(suggested_cache_size_gb(gb))),
        );
        put(
            g,
            "default_cache_size_gb",
            Some(float(default_cache_size_gb(gb))),
        );
    }
    put(g, "host_mem_limit_mb", it(limit_mb));
    put(g, "host_cores", it(i.host_cores.filter(|c| *c > 0)));
    put(
        g,
        "suggested_per_cpu_cache_bytes",
        it(suggested_per_cpu_cache_bytes(limit_mb, i.host_cores)),
    );
}

/// The summary's rates and figures over the recording, by name.
fn summary_figures(g: &mut FactGroup, s: &MongodSummary) {
    let un = |v: Option<u64>| v.map(int);
    put(g, "ops_per_s", fl(s.total_ops_per_s()));
    for (kind, rate) in &s.ops_per_s {
        put(g, &format!("{kind}_per_s"), Some(float(*rate)));
    }
    // Figures bound as they are, by name (a BTreeMap: the order is free).
    let figures = [
        ("connections", it(s.connections_last)),
        ("connections_max", it(s.connections_max)),
        ("queue_max", it(s.queue_max)),
        (
            "read_tickets_available_min",
            it(s.read_tickets_available_min),
        ),
        (
            "write_tickets_available_min",
            it(s.write_tickets_available_min),
        ),
        ("cache_max_bytes", it(s.cache_max_bytes)),
        ("checkpoints", it(s.checkpoints)),
        ("checkpoint_most_recent_ms", it(s.checkpoint_most_recent_ms)),
        ("checkpoint_max_ms", it(s.checkpoint_max_ms)),
        ("checkpoint_mean_ms", fl(s.checkpoint_mean_ms)),
        ("queue_mean", fl(s.queue_mean)),
        ("queued_share", fl(s.queued_share)),
        ("connections_created_per_s", fl(s.connections_created_per_s)),
        ("page_faults_per_s", fl(s.page_faults_per_s)),
        ("scanned_objects_per_s", fl(s.scanned_objects_per_s)),
        ("scanned_keys_per_s", fl(s.scanned_keys_per_s)),
        ("returned_per_s", fl(s.returned_per_s)),
        ("collection_scans_per_s", fl(s.collection_scans_per_s)),
        ("scan_and_order_per_s", fl(s.scan_and_order_per_s)),
        (
            "flow_control_wait_ms_per_s",
            fl(s.flow_control_wait_ms_per_s),
        ),
        ("flow_control_lagged_share", fl(s.flow_control_lagged_share)),
        ("journal_syncs_per_s", fl(s.journal_syncs_per_s)),
        ("journal_sync_ms", fl(s.journal_sync_ms)),
        ("admission_wait_ms_per_s", fl(s.admission_wait_ms_per_s)),
        (
            "admission_write_wait_ms_per_s",
            fl(s.admission_write_wait_ms_per_s),
        ),
        ("server_asserts", it(s.server_asserts)),
        ("asserts_regular", it(s.asserts_regular)),
        ("asserts_msg", it(s.asserts_msg)),
        ("asserts_tripwire", it(s.asserts_tripwire)),
        ("user_asserts_per_s", fl(s.user_asserts_per_s)),
        ("dhandles_active", it(s.dhandles_active_last)),
        ("cache_fill", fl(s.cache_fill_last)),
        ("cache_fill_max", fl(s.cache_fill_max)),
        ("cache_dirty_fill_max", fl(s.cache_dirty_fill_max)),
        ("cache_size_gb", fl(s.cache_size_gb)),
        ("app_evicted_pages_per_s", fl(s.app_evicted_pages_per_s)),
        ("app_evict_ms_per_s", fl(s.app_evict_ms_per_s)),
        ("app_cache_wait_ms_per_s", fl(s.app_cache_wait_ms_per_s)),
        (
            "checkpoint_lock_wait_ms_per_s",
            fl(s.checkpoint_lock_wait_ms_per_s),
        ),
        (
            "dhandle_lock_wait_ms_per_s",
            fl(s.dhandle_lock_wait_ms_per_s),
        ),
    ];
    for (name, v) in figures {
        put(g, name, v);
    }
    put(g, "collections", un(s.collections));
    put(g, "indexes", un(s.indexes));
    put(g, "seconds_with_sample", Some(int(s.seconds_with_sample)));
    put(g, "seconds_missing", Some(int(s.seconds_missing)));
    put(
        g,
        "stopped_answering",
        Some(FactValue::Bool(s.stopped_answering_at_s.is_some())),
    );
}

/// A step up in WiredTiger's eviction threads from (`min`, `max`): at least
/// 4 and 8, else 4 more, never above WiredTiger's limit of 20.
pub fn suggested_eviction_threads(min: i64, max: i64) -> (i64, i64) {
    let new_max = if max < 8 { 8 } else { (max + 4).min(20) };
    (min.max(4).min(new_max), new_max)
}

/// 60 % of mongod's memory limit, rounded down to 0.1 GB: a step above the
/// default (50 % of the limit less 1 GB) that stays well below the 80 % at
/// which mongod warns.
pub fn suggested_cache_size_gb(limit_gb: f64) -> f64 {
    (limit_gb * 0.6 * 10.0).floor() / 10.0
}

/// mongod's default WiredTiger cache for a memory limit: 50 % of (limit -
/// 1 GB), at least 0.25 GB, rounded down to 0.1 GB.
pub fn default_cache_size_gb(limit_gb: f64) -> f64 {
    (((limit_gb - 1.0) * 0.5).max(0.25) * 10.0).floor() / 10.0
}

/// Data-handle hash buckets for `handles` open handles: a power of two near
/// an eighth of them (short chains), from WiredTiger's 512 up to 65536.
pub fn suggested_hash_buckets(handles: i64) -> i64 {
    let want = (handles / 8).clamp(512, 65_536);
    let mut b = 512;
    while b < want {
        b *= 2;
    }
    b
}

/// The per-CPU cache capacity MongoDB's TCMalloc gives each CPU when it can
/// read the memory limit: a quarter of the memory limit, at most 1 GiB, spread
/// over the CPUs (`getMongoMaxCpuCacheSize` in mongod's vendored
/// `tcmalloc/cpu_cache.cc`), from mongod's own hostInfo figures. `None` when
/// either figure is missing.
pub fn suggested_per_cpu_cache_bytes(limit_mb: Option<i64>, cores: Option<i64>) -> Option<i64> {
    let (mb, cpus) = (limit_mb.filter(|m| *m > 0)?, cores.filter(|c| *c > 0)?);
    let quarter = (mb / 4).saturating_mul(1 << 20);
    Some(quarter.min(1 << 30) / cpus)
}

/// The allocator kind rules' `applies_to.allocator` matches (see
/// [`super::allocator::KIND_NAMES`]), from buildInfo.allocator:
/// "tcmalloc-google" is Google's TCMalloc; "tcmalloc-gperf" and plain
/// "tcmalloc" (mongod before 8.0) are gperftools; "system" is glibc's malloc
/// on Linux (or when neither buildInfo nor hostInfo names the operating
/// system: mongod's supported systems are Linux, macOS and Windows, and
/// servers are Linux), but the system's own allocator elsewhere (macOS's
/// libmalloc, Windows' heap): "unknown", so no rule about glibc applies.
/// `None` for anything else.
pub fn allocator_kind(info: &MongodInfo) -> Option<String> {
    let kind = match info.allocator.as_deref()? {
        "tcmalloc-google" => "google_tcmalloc",
        "tcmalloc-gperf" | "tcmalloc" => "gperftools",
        "system" if info.is_linux() == Some(false) => "unknown",
        "system" => "glibc",
        "jemalloc" => "jemalloc",
        _ => return None,
    };
    Some(kind.into())
}

/// Gives `rec` mongod data in which every figure is present and non-zero
/// (for [`super::Facts::example`], against which rules are checked on load).
pub(crate) fn fill_example(rec: &mut Recording) {
    use crate::recording::mongod::{MongodRecording, MongodSlice};
    use crate::recording::server_status::ServerStatusSample;
    let n = rec.slices.len() as i64;
    let system = super::system::example_samples(n, 10, 10, 1);
    for ((i, slice), system) in rec.slices.iter_mut().enumerate().zip(system) {
        let v = 100 * (i as i64 + 1);
        slice.mongod = Some(MongodSlice {
            at_ms: Some(slice.start_ms + 100),
            status: Some(ServerStatusSample::parse_with(
                &|_| Some(v),
                vec!["opcounters".into(), "tcmalloc".into(), "wiredTiger".into()],
            )),
            repl: Some(super::replication::example_sample(i as i64)),
            system: Some(system),
            ..Default::default()
        });
    }
    rec.mongod = Some(MongodRecording {
        source: "live".into(),
        uri: Some("mongodb://127.0.0.1:27017".into()),
        info: Some(MongodInfo {
            version: Some("8.2.1".into()),
            fcv: Some("8.2".into()),
            allocator: Some("tcmalloc-google".into()),
            process: Some("mongod".into()),
            storage_engine: Some("wiredTiger".into()),
            cache_size_gb: Some(4.0),
            wt_config_string: Some("eviction=(threads_min=4,threads_max=4)".into()),
            collections: Some(10),
            indexes: Some(20),
            host_mem_mb: Some(16_000),
            host_mem_limit_mb: Some(8_000),
            host_cores: Some(8),
            libc_version: Some("2.36".into()),
            max_open_files: Some(64_000),
            page_size: Some(4096),
            numa_nodes: Some(1),
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
        let kind = |a: &str| {
            allocator_kind(&MongodInfo {
                allocator: Some(a.into()),
                ..Default::default()
            })
        };
        assert_eq!(kind("tcmalloc-gperf").as_deref(), Some("gperftools"));
        assert_eq!(kind("tcmalloc").as_deref(), Some("gperftools"));
        assert_eq!(kind("system").as_deref(), Some("glibc"));
        assert_eq!(kind("mimalloc"), None);
        assert_eq!(allocator_kind(&MongodInfo::default()), None);
    }

    /// buildInfo and hostInfo as mongod answers them on macOS, Windows and
    /// Linux (the fields mdiag reads, shaped and spelled as in the replies).
    fn replies(target_os: &str, os_type: &str, os_name: &str) -> MongodInfo {
        let build = bson::doc! {
            "version": "7.0.14", "allocator": "system", "javascriptEngine": "mozjs",
            "buildEnvironment": { "distmod": "", "distarch": "x86_64", "cc": "clang",
                "target_arch": "x86_64", "target_os": target_os },
        };
        let host = bson::doc! {
            "system": { "hostname": "laptop.local", "cpuArch": "x86_64", "numCores": 8_i32,
                "memSizeMB": 16384_i64, "numaEnabled": false },
            "os": { "type": os_type, "name": os_name, "version": "23.6.0" },
            "extra": { "versionString": "Darwin Kernel Version 23.6.0", "alwaysFullSync": 0_i32 },
        };
        crate::mongo::info::from_documents(Some(&build), None, Some(&host))
    }

    #[test]
    fn the_system_allocator_is_glibc_only_on_linux() {
        let mac = replies("macOS", "Darwin", "Mac OS X");
        assert_eq!(mac.target_os.as_deref(), Some("macOS"));
        assert_eq!(mac.os_type.as_deref(), Some("Darwin"));
        assert_eq!(mac.is_linux(), Some(false));
        assert_eq!(allocator_kind(&mac).as_deref(), Some("unknown"));
        // Older macOS builds say "osx"; either reply alone is enough.
        let mut osx = replies("osx", "Darwin", "Mac OS X");
        osx.os_type = None;
        assert_eq!(allocator_kind(&osx).as_deref(), Some("unknown"));
        let mut darwin = replies("macOS", "Darwin", "Mac OS X");
        darwin.target_os = None;
        assert_eq!(allocator_kind(&darwin).as_deref(), Some("unknown"));
        let windows = replies("windows", "Windows", "Microsoft Windows Server 2022");
        assert_eq!(allocator_kind(&windows).as_deref(), Some("unknown"));
        let linux = replies("linux", "Linux", "Ubuntu");
        assert_eq!(linux.is_linux(), Some(true));
        assert_eq!(allocator_kind(&linux).as_deref(), Some("glibc"));
        // The rules' allocator comes from it: no glibc rule applies on macOS.
        let mut rec = crate::mongo::summary::tests::recording();
        if let Some(m) = rec.mongod.as_mut() {
            m.info = Some(mac);
        }
        let facts = crate::rules::Facts::derive(&rec);
        assert_eq!(facts.allocator.as_deref(), Some("unknown"));
        let rule = crate::rules::RuleSet::builtin()
            .expect("builtin rules")
            .rules()
            .iter()
            .find(|r| r.id() == "memory.thp_legacy_tcmalloc")
            .map(|r| r.applies(&facts, "x86_64"));
        assert!(
            matches!(&rule, Some(crate::rules::Applies::No(r)) if r.ends_with("the target uses another one (e.g. macOS's or Windows' own)")),
            "{rule:?}"
        );
    }
}
