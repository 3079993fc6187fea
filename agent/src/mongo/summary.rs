//! mongod's figures over a whole recording: what it is (version, allocator,
//! per-CPU caches), how busy it was (operation rates), its cache and
//! checkpoints, and which seconds are missing and why. Computed once here
//! from the per-slice samples; the rules' facts (`mongod` group) and the
//! report's measurements both come from this, so they cannot disagree.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::recording::Recording;
use crate::recording::mongod::{FtdcSource, MongodRecording};
use crate::recording::server_status::ServerStatusSample;

/// Consecutive samples further apart than this are a gap: the time between
/// them and their counter differences are left out of rates.
pub const MAX_GAP_MS: u64 = 10_000;
/// Reasons listed for missing seconds, most frequent first.
pub const TOP_MISSING_REASONS: usize = 3;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MongodSummary {
    /// "live" or "ftdc".
    pub source: String,
    /// Redacted connection string (live).
    pub uri: Option<String>,
    /// The server runs on this host (`false`: remote, polled only).
    pub local: Option<bool>,
    pub version: Option<String>,
    pub allocator: Option<String>,
    pub process: Option<String>,
    pub storage_engine: Option<String>,
    pub db_path: Option<String>,
    pub cache_size_gb: Option<f64>,
    pub wt_config_string: Option<String>,
    pub collections: Option<u64>,
    pub indexes: Option<u64>,
    /// tcmalloc.usingPerCPUCaches in the newest sample that has it.
    pub using_per_cpu_caches: Option<bool>,
    /// tcmalloc.tcmalloc.cpu_free in that sample, bytes.
    pub tcmalloc_cpu_free_bytes: Option<i64>,
    /// tcmalloc.maxPerCPUCacheSizeBytes in that sample, bytes.
    pub tcmalloc_max_per_cpu_cache_bytes: Option<i64>,
    /// usingPerCPUCaches and cpu_free > 0 (MongoDB's own check).
    pub per_cpu_caches_active: Option<bool>,
    /// Seconds (slices) of the recording, with a sample and without one.
    pub seconds: u64,
    pub seconds_with_sample: u64,
    pub seconds_missing: u64,
    /// Why seconds are missing, with how many, most frequent first.
    pub missing_reasons: Vec<MissingReason>,
    /// When mongod stopped answering (seconds from the start), if it did.
    pub stopped_answering_at_s: Option<f64>,
    /// Why the once-per-recording facts are missing, if they are.
    pub info_error: Option<String>,
    /// Seconds covered by consecutive samples at most [`MAX_GAP_MS`] apart
    /// (rates are over this).
    pub span_s: f64,
    /// Operations per second by kind (opcounters), over `span_s`.
    pub ops_per_s: BTreeMap<String, f64>,
    /// Operations of each kind counted over `span_s` (restarts handled).
    pub ops: BTreeMap<String, i64>,
    pub connections_last: Option<i64>,
    pub connections_max: Option<i64>,
    /// Most operations queued (globalLock.currentQueue.total) in a sample.
    pub queue_max: Option<i64>,
    /// Operations queued, mean over the samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_mean: Option<f64>,
    /// Share of the samples with at least one operation queued (0..1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queued_share: Option<f64>,
    /// Connections opened per second (connections.totalCreated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections_created_per_s: Option<f64>,
    /// Documents examined per second (metrics.queryExecutor.scannedObjects).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scanned_objects_per_s: Option<f64>,
    /// Index keys examined per second (metrics.queryExecutor.scanned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scanned_keys_per_s: Option<f64>,
    /// Documents returned per second (metrics.document.returned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub returned_per_s: Option<f64>,
    /// Queries that scanned a whole collection, per second
    /// (metrics.queryExecutor.collectionScans.total, 4.4+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collection_scans_per_s: Option<f64>,
    /// Sorts done in memory for want of an index, per second
    /// (metrics.operation.scanAndOrder).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scan_and_order_per_s: Option<f64>,
    /// Time writes waited for flow-control tickets, ms per second
    /// (flowControl.timeAcquiringMicros, summed over operations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_control_wait_ms_per_s: Option<f64>,
    /// Share of samples in which flow control saw the majority commit
    /// point lagging (flowControl.isLagged).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_control_lagged_share: Option<f64>,
    /// Journal syncs per second (wiredTiger.log "log sync operations").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_syncs_per_s: Option<f64>,
    /// Mean time of one journal sync, ms ("log sync time duration (usecs)"
    /// over "log sync operations"); 0 when the journal never synced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_sync_ms: Option<f64>,
    /// Time operations waited for an execution ticket (admission), ms per
    /// second summed over operations: reads and writes, both priorities
    /// (`totalTimeQueuedMicros`, 6.1+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_wait_ms_per_s: Option<f64>,
    /// Of which writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_write_wait_ms_per_s: Option<f64>,
    /// Assertions of the server's own checks raised during the recording:
    /// `asserts.regular`, `msg` and `tripwire` (what mongod's `verify`,
    /// `massert` and `tassert` count), summed over those reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_asserts: Option<i64>,
    /// Of those, each kind: regular, msg, tripwire.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asserts_regular: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asserts_msg: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asserts_tripwire: Option<i64>,
    /// User assertions per second (`asserts.user`: errors of requests,
    /// such as duplicate keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_asserts_per_s: Option<f64>,
    /// Major page faults of mongod per second (extra_info.page_faults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_faults_per_s: Option<f64>,
    /// Fewest execution tickets available in a sample.
    pub read_tickets_available_min: Option<i64>,
    pub write_tickets_available_min: Option<i64>,
    pub cache_max_bytes: Option<i64>,
    /// Cache bytes / maximum (0..1): newest sample and largest.
    pub cache_fill_last: Option<f64>,
    pub cache_fill_max: Option<f64>,
    /// Dirty bytes / maximum, largest (0..1).
    pub cache_dirty_fill_max: Option<f64>,
    /// Pages evicted by application threads per second.
    pub app_evicted_pages_per_s: Option<f64>,
    /// Time application threads spent evicting / waiting for cache, ms per second.
    pub app_evict_ms_per_s: Option<f64>,
    pub app_cache_wait_ms_per_s: Option<f64>,
    /// Checkpoints completed during the samples.
    pub checkpoints: Option<i64>,
    pub checkpoint_most_recent_ms: Option<i64>,
    pub checkpoint_max_ms: Option<i64>,
    /// Mean duration of the checkpoints completed during the samples, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint_mean_ms: Option<f64>,
    /// Application threads' wait on WiredTiger's checkpoint / dhandle locks, ms per second.
    pub checkpoint_lock_wait_ms_per_s: Option<f64>,
    pub dhandle_lock_wait_ms_per_s: Option<f64>,
    pub dhandles_active_last: Option<i64>,
    /// Sections present in at least one sample.
    pub sections: Vec<String>,
    /// FTDC joined or read, when any.
    pub ftdc: Option<FtdcSource>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingReason {
    pub reason: String,
    pub seconds: u64,
}

/// Opcounter kinds, in report order.
/// Reads one figure of a sample.
type Figure = fn(&ServerStatusSample) -> Option<i64>;

const OPS: &[(&str, Figure)] = &[
    ("insert", |s| s.op_insert),
    ("query", |s| s.op_query),
    ("update", |s| s.op_update),
    ("delete", |s| s.op_delete),
    ("getmore", |s| s.op_getmore),
    ("command", |s| s.op_command),
];

impl MongodSummary {
    /// The summary of `rec`; `None` when mongod was not polled nor joined.
    pub fn of(rec: &Recording) -> Option<MongodSummary> {
        let m: &MongodRecording = rec.mongod.as_ref()?;
        let mut s = MongodSummary {
            source: m.source.clone(),
            uri: m.uri.clone(),
            local: m.local,
            info_error: m.info_error.clone(),
            ftdc: m.ftdc.clone(),
            stopped_answering_at_s: m.stopped_answering_at_ms.map(|ms| ms as f64 / 1000.0),
            ..Default::default()
        };
        if let Some(i) = &m.info {
            s.version = i.version.clone();
            s.allocator = i.allocator.clone();
            s.process = i.process.clone();
            s.storage_engine = i.storage_engine.clone();
            s.db_path = i.db_path.clone();
            s.cache_size_gb = i.cache_size_gb;
            s.wt_config_string = i.wt_config_string.clone();
            s.collections = i.collections;
            s.indexes = i.indexes;
        }
        let mut reasons: BTreeMap<String, u64> = BTreeMap::new();
        let mut samples: Vec<(u64, &ServerStatusSample)> = Vec::new();
        for slice in &rec.slices {
            s.seconds += 1;
            match slice.mongod.as_ref() {
                Some(ms) => match (&ms.status, ms.at_ms) {
                    (Some(st), Some(at)) => samples.push((at, st)),
                    (Some(st), None) => samples.push((slice.start_ms, st)),
                    _ => {
                        let why = ms.missing.clone().unwrap_or_else(|| "no sample".into());
                        *reasons.entry(why).or_default() += 1;
                    }
                },
                None => {
                    *reasons
                        .entry("mongod was not polled in this second".into())
                        .or_default() += 1
                }
            }
        }
        s.seconds_with_sample = samples.len() as u64;
        s.seconds_missing = s.seconds - s.seconds_with_sample;
        let mut reasons: Vec<MissingReason> = reasons
            .into_iter()
            .map(|(reason, seconds)| MissingReason { reason, seconds })
            .collect();
        reasons.sort_by(|a, b| b.seconds.cmp(&a.seconds).then(a.reason.cmp(&b.reason)));
        reasons.truncate(TOP_MISSING_REASONS);
        s.missing_reasons = reasons;
        if samples.is_empty() && m.last_error.is_some() && s.missing_reasons.is_empty() {
            s.missing_reasons.push(MissingReason {
                reason: m.last_error.clone().unwrap_or_default(),
                seconds: 0,
            });
        }
        s.figures(&samples);
        Some(s)
    }

    /// The figures over the samples: rates of counters, newest, largest
    /// and smallest gauges.
    fn figures(&mut self, samples: &[(u64, &ServerStatusSample)]) {
        if samples.is_empty() {
            return;
        }
        let series = Series::new(samples);
        self.span_s = series.span_s;
        let mut sections: Vec<String> = samples
            .iter()
            .flat_map(|(_, s)| s.sections.clone())
            .collect();
        sections.sort();
        sections.dedup();
        self.sections = sections;
        for (name, f) in OPS {
            if let Some(d) = series.delta(f) {
                self.ops.insert((*name).to_owned(), d);
                if series.span_s > 0.0 {
                    self.ops_per_s
                        .insert((*name).to_owned(), d as f64 / series.span_s);
                }
            }
        }
        self.connection_figures(&series);
        self.query_figures(&series);
        self.write_path_figures(&series);
        self.assert_figures(&series);
        self.admission_figures(&series);
        self.cache_figures(&series);
        self.checkpoint_figures(&series);
        self.tcmalloc_figures(samples);
    }

    /// Connections, queued operations, tickets and page faults.
    fn connection_figures(&mut self, v: &Series<'_>) {
        self.connections_last = v.newest(&|s| s.connections_current);
        self.connections_max = v.max(&|s| s.connections_current);
        self.queue_max = v.max(&|s| s.queue_total);
        let queues: Vec<i64> = v
            .samples
            .iter()
            .filter_map(|(_, s)| s.queue_total)
            .collect();
        if !queues.is_empty() {
            let n = queues.len() as f64;
            self.queue_mean = Some(queues.iter().sum::<i64>() as f64 / n);
            self.queued_share = Some(queues.iter().filter(|q| **q > 0).count() as f64 / n);
        }
        self.connections_created_per_s = v.rate(v.delta(&|s| s.connections_total_created), 1.0);
        self.page_faults_per_s = v.rate(v.delta(&|s| s.page_faults), 1.0);
        self.read_tickets_available_min = v.min(&|s| s.tickets_read_available);
        self.write_tickets_available_min = v.min(&|s| s.tickets_write_available);
    }

    /// How well queries are targeted: documents and keys examined against
    /// documents returned, collection scans, in-memory sorts.
    fn query_figures(&mut self, v: &Series<'_>) {
        self.scanned_objects_per_s = v.rate(v.delta(&|s| s.query_scanned_objects), 1.0);
        self.scanned_keys_per_s = v.rate(v.delta(&|s| s.query_scanned_keys), 1.0);
        self.returned_per_s = v.rate(v.delta(&|s| s.docs_returned), 1.0);
        self.collection_scans_per_s = v.rate(v.delta(&|s| s.query_collection_scans), 1.0);
        self.scan_and_order_per_s = v.rate(v.delta(&|s| s.scan_and_order), 1.0);
    }

    /// What writes wait for besides locks: flow control (the majority
    /// commit point lagging) and the journal's syncs.
    fn write_path_figures(&mut self, v: &Series<'_>) {
        self.flow_control_wait_ms_per_s = v.rate(v.delta(&|s| s.flow_control_acquiring_us), 1000.0);
        let lagged: Vec<i64> = v
            .samples
            .iter()
            .filter_map(|(_, s)| s.flow_control_lagged)
            .collect();
        if !lagged.is_empty() {
            let n = lagged.len() as f64;
            self.flow_control_lagged_share =
                Some(lagged.iter().filter(|l| **l != 0).count() as f64 / n);
        }
        let syncs = v.delta(&|s| s.journal_syncs);
        self.journal_syncs_per_s = v.rate(syncs, 1.0);
        self.journal_sync_ms = match (syncs, v.delta(&|s| s.journal_sync_us)) {
            (Some(n), Some(us)) if n > 0 => Some(us as f64 / 1000.0 / n as f64),
            (Some(_), Some(_)) => Some(0.0),
            _ => None,
        };
    }

    /// Time operations queued for execution tickets, in all and of writes.
    fn admission_figures(&mut self, v: &Series<'_>) {
        let sum = sum_present;
        let reads = sum(&[
            v.delta(&|s| s.admission_read_queued_us),
            v.delta(&|s| s.admission_read_low_queued_us),
        ]);
        let writes = sum(&[
            v.delta(&|s| s.admission_write_queued_us),
            v.delta(&|s| s.admission_write_low_queued_us),
        ]);
        self.admission_wait_ms_per_s = v.rate(sum(&[reads, writes]), 1000.0);
        self.admission_write_wait_ms_per_s = v.rate(writes, 1000.0);
    }

    /// Assertions raised during the recording, by kind.
    fn assert_figures(&mut self, v: &Series<'_>) {
        self.asserts_regular = v.delta(&|s| s.asserts_regular);
        self.asserts_msg = v.delta(&|s| s.asserts_msg);
        self.asserts_tripwire = v.delta(&|s| s.asserts_tripwire);
        self.server_asserts = sum_present(&[
            self.asserts_regular,
            self.asserts_msg,
            self.asserts_tripwire,
        ]);
        self.user_asserts_per_s = v.rate(v.delta(&|s| s.asserts_user), 1.0);
    }

    /// The WiredTiger cache: size, fill, and the application threads'
    /// eviction work.
    fn cache_figures(&mut self, v: &Series<'_>) {
        let samples = v.samples;
        self.cache_max_bytes = v.newest(&|s| s.cache_max_bytes);
        let fill = |s: &ServerStatusSample, v: Option<i64>| match (v, s.cache_max_bytes) {
            (Some(v), Some(m)) if m > 0 => Some(v as f64 / m as f64),
            _ => None,
        };
        self.cache_fill_last = samples
            .iter()
            .rev()
            .find_map(|(_, s)| fill(s, s.cache_bytes));
        self.cache_fill_max = samples
            .iter()
            .filter_map(|(_, s)| fill(s, s.cache_bytes))
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
        self.cache_dirty_fill_max = samples
            .iter()
            .filter_map(|(_, s)| fill(s, s.cache_dirty_bytes))
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
        self.app_evicted_pages_per_s = v.rate(v.delta(&|s| s.cache_app_evicted_pages), 1.0);
        self.app_evict_ms_per_s = v.rate(v.delta(&|s| s.cache_app_evict_time_us), 1000.0);
        self.app_cache_wait_ms_per_s = v.rate(v.delta(&|s| s.cache_app_wait_time_us), 1000.0);
    }

    /// Checkpoints, and the lock waits around them and the data handles.
    fn checkpoint_figures(&mut self, v: &Series<'_>) {
        self.checkpoints = v.delta(&|s| s.checkpoints);
        self.checkpoint_most_recent_ms = v.newest(&|s| s.checkpoint_most_recent_ms);
        self.checkpoint_max_ms = v.newest(&|s| s.checkpoint_max_ms);
        self.checkpoint_mean_ms = v
            .delta(&|s| s.checkpoint_total_ms)
            .zip(self.checkpoints)
            .filter(|(_, n)| *n > 0)
            .map(|(ms, n)| ms as f64 / n as f64);
        self.checkpoint_lock_wait_ms_per_s =
            v.rate(v.delta(&|s| s.lock_checkpoint_wait_us), 1000.0);
        self.dhandle_lock_wait_ms_per_s = v.rate(v.delta(&|s| s.lock_dhandle_wait_us), 1000.0);
        self.dhandles_active_last = v.newest(&|s| s.dhandles_active);
    }

    /// TCMalloc's per-CPU caches, from the newest sample that has them.
    fn tcmalloc_figures(&mut self, samples: &[(u64, &ServerStatusSample)]) {
        if let Some(st) = samples
            .iter()
            .rev()
            .map(|(_, s)| s)
            .find(|s| s.tcmalloc_per_cpu_caches.is_some())
        {
            self.using_per_cpu_caches = st.tcmalloc_per_cpu_caches.map(|v| v != 0);
            self.tcmalloc_cpu_free_bytes = st.tcmalloc_cpu_free;
            self.tcmalloc_max_per_cpu_cache_bytes = st.tcmalloc_max_per_cpu_cache;
            self.per_cpu_caches_active = st.per_cpu_caches_active();
        }
    }

    /// Total operations per second (all opcounters).
    pub fn total_ops_per_s(&self) -> Option<f64> {
        (!self.ops_per_s.is_empty()).then(|| self.ops_per_s.values().sum())
    }

    /// The summary in plain sentences, for the terminal and markdown reports.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![self.server_line()];
        out.extend(self.ftdc_line());
        out.extend(self.tcmalloc_line());
        out.extend(self.ops_line());
        out.extend(self.connections_line());
        out.extend(self.cache_line());
        out.extend(self.checkpoint_line());
        out.extend(self.catalog_line());
        out.push(self.samples_line());
        out
    }

    /// What the server is and where its figures come from.
    fn server_line(&self) -> String {
        let what = [
            self.process.clone().unwrap_or_else(|| "server".into()),
            self.version
                .as_ref()
                .map_or_else(|| "version unknown".into(), |v| format!("version {v}")),
            self.allocator
                .as_ref()
                .map_or_else(|| "allocator unknown".into(), |a| format!("allocator {a}")),
        ];
        let mut first = what.join(", ");
        if let Some(e) = &self.storage_engine {
            first.push_str(&format!(", storage engine {e}"));
        }
        match self.source.as_str() {
            "ftdc" => first.push_str("; from FTDC"),
            _ => {
                if let Some(u) = &self.uri {
                    first.push_str(&format!("; polled at {u}"));
                }
                if self.local == Some(false) {
                    first.push_str(" (a remote server: polled only, its process is not observed)");
                }
            }
        }
        first
    }

    /// The FTDC directory read, when the figures come from FTDC.
    fn ftdc_line(&self) -> Option<String> {
        let f = self.ftdc.as_ref()?;
        let mut l = format!("FTDC {}: {} seconds with a sample", f.path, f.joined_slices);
        if let (Some(a), Some(b)) = (f.first, f.last) {
            l.push_str(&format!(
                " ({} to {} UTC)",
                a.format("%Y-%m-%d %H:%M:%S"),
                b.format("%Y-%m-%d %H:%M:%S")
            ));
        }
        if f.back_in_time > 0 {
            l.push_str(&format!(
                    "; {} left out for going back in time (not after the previous sample of the same mongod process)",
                    plural(f.back_in_time, "sample", "samples")
                ));
        }
        if f.no_metadata {
            l.push_str("; no metadata document (buildInfo, hostInfo): architecture, kernel, allocator and version unknown");
        }
        if !f.errors.is_empty() {
            l.push_str(&format!("; read errors: {}", f.errors.join("; ")));
        }
        Some(l)
    }

    /// Whether TCMalloc's per-CPU caches work.
    fn tcmalloc_line(&self) -> Option<String> {
        match (self.using_per_cpu_caches, self.per_cpu_caches_active) {
            (Some(using), Some(active)) => Some(format!(
                "TCMalloc per-CPU caches: usingPerCPUCaches {using}, cpu_free {} → {}",
                self.tcmalloc_cpu_free_bytes
                    .map_or_else(|| "absent".into(), bytes),
                if active { "working" } else { "NOT working" }
            )),
            _ => self.sections.iter().any(|s| s == "tcmalloc").then(|| {
                "TCMalloc without per-CPU caches (no usingPerCPUCaches: gperftools TCMalloc)".into()
            }),
        }
    }

    /// Operations per second, by kind.
    fn ops_line(&self) -> Option<String> {
        let total = self.total_ops_per_s()?;
        let kinds: Vec<String> = self
            .ops_per_s
            .iter()
            .filter(|(_, v)| **v > 0.0)
            .map(|(k, v)| format!("{k} {}", num(*v)))
            .collect();
        Some(format!(
            "Operations: {}/s over {:.0} s{}",
            num(total),
            self.span_s,
            if kinds.is_empty() {
                String::new()
            } else {
                format!(" ({})", kinds.join(", "))
            }
        ))
    }

    /// Connections, queued operations and tickets.
    fn connections_line(&self) -> Option<String> {
        let mut conn = Vec::new();
        if let Some(c) = self.connections_last {
            conn.push(format!(
                "{c} connections (max {})",
                self.connections_max.unwrap_or(c)
            ));
        }
        if let Some(q) = self.queue_max {
            conn.push(format!("queued operations max {q}"));
        }
        if let (Some(r), Some(w)) = (
            self.read_tickets_available_min,
            self.write_tickets_available_min,
        ) {
            conn.push(format!("fewest tickets available: read {r}, write {w}"));
        }
        (!conn.is_empty()).then(|| capital(&conn.join("; ")))
    }

    /// The WiredTiger cache and the application threads' eviction work.
    fn cache_line(&self) -> Option<String> {
        let max = self.cache_max_bytes?;
        let mut l = format!("WiredTiger cache {}", bytes(max));
        if let (Some(last), Some(peak)) = (self.cache_fill_last, self.cache_fill_max) {
            l.push_str(&format!(", {} full (max {})", pct(last), pct(peak)));
        }
        if let Some(d) = self.cache_dirty_fill_max {
            l.push_str(&format!(", dirty max {}", pct(d)));
        }
        if let Some(p) = self.app_evicted_pages_per_s {
            l.push_str(&format!("; application threads evicted {} pages/s", num(p)));
        }
        if let Some(t) = self.app_evict_ms_per_s {
            l.push_str(&format!(", spent {} ms/s evicting", num(t)));
        }
        if let Some(t) = self.app_cache_wait_ms_per_s {
            l.push_str(&format!(", {} ms/s waiting for cache", num(t)));
        }
        Some(l)
    }

    /// Checkpoints and the waits on their lock.
    fn checkpoint_line(&self) -> Option<String> {
        if self.checkpoints.is_none() && self.checkpoint_most_recent_ms.is_none() {
            return None;
        }
        let mut l = format!(
            "Checkpoints: {} completed",
            self.checkpoints
                .map_or_else(|| "?".into(), |c| c.to_string())
        );
        if let Some(r) = self.checkpoint_most_recent_ms {
            l.push_str(&format!(", most recent took {r} ms"));
        }
        if let Some(m) = self.checkpoint_max_ms {
            l.push_str(&format!(", longest since start {m} ms"));
        }
        if let Some(w) = self.checkpoint_lock_wait_ms_per_s {
            l.push_str(&format!(
                "; application threads waited {} ms/s on the checkpoint lock",
                num(w)
            ));
        }
        Some(l)
    }

    /// Data handles, collections, indexes, cache size and dbPath.
    fn catalog_line(&self) -> Option<String> {
        let mut cat = Vec::new();
        if let Some(d) = self.dhandles_active_last {
            cat.push(format!("{d} data handles open"));
        }
        if let (Some(c), Some(i)) = (self.collections, self.indexes) {
            cat.push(format!("{c} collections, {i} indexes"));
        }
        if let Some(g) = self.cache_size_gb {
            cat.push(format!("cacheSizeGB {g}"));
        }
        if let Some(p) = &self.db_path {
            cat.push(format!("dbPath {p}"));
        }
        (!cat.is_empty()).then(|| capital(&cat.join("; ")))
    }

    /// How many seconds have a sample, and why the others do not.
    fn samples_line(&self) -> String {
        let mut gaps = format!(
            "{} of {} seconds have a serverStatus sample",
            self.seconds_with_sample, self.seconds
        );
        if let Some(t) = self.stopped_answering_at_s {
            gaps.push_str(&format!("; mongod stopped answering at +{t:.1} s"));
        }
        for r in &self.missing_reasons {
            if r.seconds > 0 {
                gaps.push_str(&format!(
                    "; {} missing: {}",
                    plural(r.seconds, "second", "seconds"),
                    r.reason
                ));
            } else {
                gaps.push_str(&format!("; {}", r.reason));
            }
        }
        if let Some(e) = &self.info_error {
            gaps.push_str(&format!("; not read: {e}"));
        }
        gaps
    }
}

/// A field of a serverStatus sample.
type Field<'f> = &'f dyn Fn(&ServerStatusSample) -> Option<i64>;

/// The samples in time order, with the pairs of consecutive samples at
/// most [`MAX_GAP_MS`] apart and the time those cover: a gap (mongod down,
/// FTDC of another run) is neither time nor counts.
struct Series<'a> {
    samples: &'a [(u64, &'a ServerStatusSample)],
    pairs: Vec<(&'a ServerStatusSample, &'a ServerStatusSample)>,
    span_s: f64,
}

impl<'a> Series<'a> {
    fn new(samples: &'a [(u64, &'a ServerStatusSample)]) -> Self {
        let pairs = samples
            .windows(2)
            .filter(|w| w[1].0.saturating_sub(w[0].0) <= MAX_GAP_MS)
            .map(|w| (w[0].1, w[1].1))
            .collect();
        let span_s = samples
            .windows(2)
            .map(|w| w[1].0.saturating_sub(w[0].0))
            .filter(|gap| *gap <= MAX_GAP_MS)
            .sum::<u64>() as f64
            / 1000.0;
        Series {
            samples,
            pairs,
            span_s,
        }
    }

    /// Increase of a counter over the pairs; a decrease is a restart (the
    /// counter began again at 0).
    fn delta(&self, f: Field<'_>) -> Option<i64> {
        let mut total = None;
        for (a, b) in &self.pairs {
            if let (Some(a), Some(b)) = (f(a), f(b)) {
                let step = if b >= a { b - a } else { b.max(0) };
                total = Some(total.unwrap_or(0) + step);
            }
        }
        total
    }

    /// An increase per second over the covered time, divided by `scale`.
    fn rate(&self, d: Option<i64>, scale: f64) -> Option<f64> {
        d.filter(|_| self.span_s > 0.0)
            .map(|d| d as f64 / scale / self.span_s)
    }

    /// The newest sample's value.
    fn newest(&self, f: Field<'_>) -> Option<i64> {
        self.samples.iter().rev().find_map(|(_, s)| f(s))
    }

    /// The largest value.
    fn max(&self, f: Field<'_>) -> Option<i64> {
        self.samples.iter().filter_map(|(_, s)| f(s)).max()
    }

    /// The smallest value.
    fn min(&self, f: Field<'_>) -> Option<i64> {
        self.samples.iter().filter_map(|(_, s)| f(s)).min()
    }
}

/// The sum of the figures present; `None` when none is.
fn sum_present(figures: &[Option<i64>]) -> Option<i64> {
    figures
        .iter()
        .any(Option::is_some)
        .then(|| figures.iter().flatten().sum())
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map_or_else(String::new, |f| f.to_uppercase().chain(c).collect())
}

fn pct(f: f64) -> String {
    format!("{:.0}%", f * 100.0)
}

fn num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn bytes(b: i64) -> String {
    let b = b as f64;
    if b >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.1} GiB", b / (1024.0 * 1024.0 * 1024.0))
    } else if b >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / (1024.0 * 1024.0))
    } else {
        format!("{b:.0} B")
    }
}

#[cfg(test)]
#[path = "summary_tests.rs"]
pub(crate) mod tests;
