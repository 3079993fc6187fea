//! mongod's FTDC (diagnostic.data) as mongod evidence for `explain --ftdc`:
//! the serverStatus samples (through the same parser as live polls) and the
//! metadata (buildInfo, getCmdLineOpts, hostInfo), either turned into a
//! recording of their own (FTDC alone, no eBPF) or joined second by second
//! to a recording by wall-clock time. A recording of FTDC alone also gets the
//! host facts mongod's hostInfo names (memory and its limit, page size, the
//! data directory's mount), so rules on them are assessed; everything else
//! about the host stays unknown and its rules not assessed.
//!
//! What could not be used is counted and said, never silently lost: damaged
//! documents and files (`errors`), samples whose time is not after the
//! previous one of the same run of mongod (`back_in_time`, see
//! [`goes_back_in_time`]), and a directory without any metadata document
//! (then the host's architecture, kernel and mongod's allocator are unknown,
//! and the rules that depend on them are not assessed).

use std::collections::VecDeque;
use std::path::Path;

use chrono::{DateTime, Utc};

use super::ftdc_extra::ExtraColumns;
use super::info;
use super::status::FtdcColumns;
use crate::ftdc::{FtdcDir, FtdcDoc, FtdcError};
use crate::recording::model::{CgroupFacts, DbPathFacts, MemoryFacts};
use crate::recording::mongod::{
    FtdcSource, MongodInfo, MongodRecording, MongodSlice, ReplSample, SystemSample,
};
use crate::recording::server_status::ServerStatusSample;
use crate::recording::{FORMAT_NAME, FORMAT_VERSION, HostFacts, Recording, Slice};

/// Samples read at most (one day at mongod's 1 Hz); without --from/--to the
/// newest hour of them is explained ([`super::ftdc_window`]).
pub const MAX_KEEP: usize = 86_400;
/// A recording slice takes the FTDC sample nearest its middle, if this close.
pub const JOIN_TOLERANCE_MS: i64 = 1000;
/// Read errors listed one by one (the others are counted): a file that is
/// not FTDC at all can hold thousands of documents, each refused.
pub const MAX_LISTED_ERRORS: usize = 20;
/// How far apart the process start times (sample time − uptimeMillis) of two
/// samples may be for them to come from the same mongod process: sampling
/// jitter and clock slewing over a day stay well inside; a restart moves
/// the start by at least the previous run's length.
pub const SAME_PROCESS_SLACK_MS: i64 = 60_000;

/// One sample of an FTDC file: serverStatus and the other collectors.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FtdcSample {
    pub t: DateTime<Utc>,
    pub status: ServerStatusSample,
    /// replSetGetStatus and the oplog's statistics, when mongod recorded them.
    pub repl: Option<ReplSample>,
    /// systemMetrics, when mongod recorded them.
    pub system: Option<SystemSample>,
}

/// What was read from a diagnostic.data directory.
#[derive(Debug, Default)]
pub struct FtdcRead {
    pub path: String,
    /// In time order; at most the `keep` newest of the window.
    pub samples: VecDeque<FtdcSample>,
    /// Samples of the window left out because `keep` was reached (oldest first).
    pub dropped: u64,
    /// Samples left out because their time was not after the previous
    /// sample's of the same run of mongod (see [`goes_back_in_time`]).
    pub back_in_time: u64,
    /// Metadata documents (type 0: buildInfo, getCmdLineOpts, hostInfo) read.
    pub metadata_documents: u64,
    /// From the newest metadata document.
    pub info: Option<MongodInfo>,
    /// hostInfo's kernel release, when present.
    pub kernel: Option<String>,
    /// serverStatus `process` and `storageEngine.name` of the newest chunk.
    pub strings: (Option<String>, Option<String>),
    /// What could not be read and what was skipped for it (a damaged
    /// document, or the rest of a file whose framing is broken); at most
    /// [`MAX_LISTED_ERRORS`], the others counted in `errors_not_listed`.
    pub errors: Vec<String>,
    pub errors_not_listed: u64,
}

/// Whether a sample taken at `t` (ms) with uptime `uptime_ms` goes back in
/// time after the previous kept sample `prev` (time, uptime) of the same run:
/// its time is not after `prev`'s. A restart is not going back in time: when
/// uptimeMillis went down and the two samples' process start times (time −
/// uptime) differ by more than [`SAME_PROCESS_SLACK_MS`], a new process
/// started (even if the clock was set back meanwhile) and its samples are
/// kept ([`super::ftdc_window`] then cuts the runs apart). The same process
/// seen again (a repeated file, `metrics.interim` repeating an archive) has
/// the same start time and goes back in time.
pub fn goes_back_in_time(prev: (i64, Option<i64>), t: i64, uptime_ms: Option<i64>) -> bool {
    let (prev_t, prev_uptime) = prev;
    if t > prev_t {
        return false;
    }
    match (prev_uptime, uptime_ms) {
        (Some(a), Some(b)) if b < a => {
            let moved = (t.saturating_sub(b)).saturating_sub(prev_t.saturating_sub(a));
            moved.abs() <= SAME_PROCESS_SLACK_MS
        }
        _ => true,
    }
}

/// Reads the serverStatus samples in [`from`, `to`) of `path` (a directory
/// or one file), keeping the newest `keep`. What cannot be read is skipped
/// and listed in `errors` (a damaged document costs only itself; a broken
/// length, the rest of its file); an error is returned only when nothing
/// could be read. Samples going back in time are left out and counted.
pub fn read(
    path: &Path,
    from: Option<DateTime<Utc>>,
    to: Option<DateTime<Utc>>,
    keep: usize,
) -> Result<FtdcRead, FtdcError> {
    let mut dir = FtdcDir::open(path)?;
    let mut out = FtdcRead {
        path: path.display().to_string(),
        ..Default::default()
    };
    let mut first_error = None;
    // Time and uptime of the previous sample kept.
    let mut previous: Option<(i64, Option<i64>)> = None;
    while let Some(item) = dir.next() {
        let item = match item {
            Ok(i) => i,
            Err(e) => {
                if out.errors.len() < MAX_LISTED_ERRORS {
                    out.errors.push(format!("{e} (skipped {})", e.skipped()));
                } else {
                    out.errors_not_listed += 1;
                }
                first_error.get_or_insert(e);
                continue;
            }
        };
        match item.doc {
            FtdcDoc::Metadata { doc, .. } => {
                out.metadata_documents += 1;
                let sub = |k: &str| doc.get_document(k).ok();
                out.info = Some(info::from_documents(
                    sub("buildInfo"),
                    sub("getCmdLineOpts"),
                    sub("hostInfo"),
                ));
                if let Some(k) = sub("hostInfo").and_then(info::kernel_version) {
                    out.kernel = Some(k);
                }
            }
            FtdcDoc::Metrics(chunk) => {
                let (first, last) = chunk.time_range();
                let outside = to.is_some_and(|to| first >= to) || from.is_some_and(|f| last < f);
                if !outside {
                    let cols = FtdcColumns::new(chunk.paths().iter());
                    // Strings are not metrics: the server's name and storage
                    // engine come from the chunk's reference document.
                    if let Ok(ss) = chunk.reference().get_document("serverStatus") {
                        let process = ss.get_str("process").ok().map(str::to_owned);
                        let engine = ss
                            .get_document("storageEngine")
                            .ok()
                            .and_then(|e| e.get_str("name").ok())
                            .map(str::to_owned);
                        if process.is_some() || engine.is_some() {
                            out.strings = (process, engine);
                        }
                    }
                    if cols.has_server_status() {
                        let extra = ExtraColumns::new(&chunk);
                        for s in 0..chunk.sample_count() {
                            let Some(t) = chunk.timestamp(s) else {
                                continue;
                            };
                            if from.is_some_and(|f| t < f) || to.is_some_and(|to| t >= to) {
                                continue;
                            }
                            let status = cols.sample(&chunk, s);
                            let ms = t.timestamp_millis();
                            if previous.is_some_and(|p| goes_back_in_time(p, ms, status.uptime_ms))
                            {
                                out.back_in_time += 1;
                                continue;
                            }
                            previous = Some((ms, status.uptime_ms));
                            if out.samples.len() == keep {
                                out.samples.pop_front();
                                out.dropped += 1;
                            }
                            if keep > 0 {
                                out.samples.push_back(FtdcSample {
                                    t,
                                    status,
                                    repl: extra.repl(&chunk, s),
                                    system: extra.system(&chunk, s),
                                });
                            }
                        }
                    }
                }
                dir.recycle(chunk);
            }
            _ => {}
        }
    }
    if out.strings.0.is_some() || out.strings.1.is_some() {
        let info = out.info.get_or_insert_with(MongodInfo::default);
        info.process = out.strings.0.clone();
        info.storage_engine = out.strings.1.clone();
    }
    match first_error {
        Some(e) if out.samples.is_empty() && out.info.is_none() => Err(e),
        _ => Ok(out),
    }
}

impl FtdcRead {
    fn source(&self, joined: u64) -> FtdcSource {
        let mut errors = self.errors.clone();
        if self.errors_not_listed > 0 {
            errors.push(format!("{} more not listed", self.errors_not_listed));
        }
        FtdcSource {
            path: self.path.clone(),
            first: self.samples.front().map(|s| s.t),
            last: self.samples.back().map(|s| s.t),
            joined_slices: joined,
            errors,
            back_in_time: self.back_in_time,
            no_metadata: self.metadata_documents == 0,
        }
    }

    /// The lines `explain` says on stderr about what was not used.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = self.errors.clone();
        if self.errors_not_listed > 0 {
            notes.push(format!(
                "{} more read errors not listed (each skipped a damaged document or the rest of a file)",
                self.errors_not_listed
            ));
        }
        if self.back_in_time > 0 {
            notes.push(format!(
                "{} FTDC samples left out for going back in time: {BACK_IN_TIME}",
                self.back_in_time
            ));
        }
        if self.metadata_documents == 0 {
            notes.push(format!("{}: {NO_METADATA}", self.path));
        }
        notes
    }
}

/// Why samples that go back in time are left out, in words.
pub const BACK_IN_TIME: &str = "their time is not after the previous sample's of the same mongod process (the same seconds again: a repeated file, metrics.interim repeating an archive, or the clock set back)";
/// What a directory without metadata means for the report.
pub const NO_METADATA: &str = "no metadata document (buildInfo, getCmdLineOpts, hostInfo): what they tell (architecture, kernel, allocator, version) is unknown, and the rules that depend on it are not assessed";

/// A recording made of FTDC alone: one slice per sample, no probes. What
/// hostInfo does not say (no metadata document at all, or an old reply) is
/// "unknown", and the rules that depend on it are not assessed.
pub fn recording_from_ftdc(read: &FtdcRead) -> Recording {
    let first = read.samples.front().map_or_else(Utc::now, |s| s.t);
    let last = read.samples.back().map_or(first, |s| s.t);
    let info = read.info.clone();
    let host = HostFacts {
        hostname: info
            .as_ref()
            .and_then(|i| i.host_name.clone())
            .unwrap_or_else(|| "unknown".into()),
        kernel_release: read.kernel.clone().unwrap_or_else(|| "unknown".into()),
        arch: info
            .as_ref()
            .and_then(|i| i.host_cpu_arch.clone())
            .unwrap_or_else(|| "unknown".into()),
        cpu_count: info
            .as_ref()
            .and_then(|i| i.host_cores)
            .and_then(|c| u32::try_from(c).ok())
            .unwrap_or(0),
        cpu_model: "unknown".into(),
        ..Default::default()
    };
    let host = match &info {
        Some(i) => host_from_info(host, i),
        None => host,
    };
    let ms = |t: DateTime<Utc>| u64::try_from((t - first).num_milliseconds()).unwrap_or(0);
    let samples: Vec<&FtdcSample> = read.samples.iter().collect();
    let slices = samples
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let next = samples.get(i + 1).map(|n| ms(n.t));
            let start = ms(s.t);
            Slice {
                start_ms: start,
                duration_ms: next.map_or(1000, |n| n.saturating_sub(start)),
                mongod: Some(MongodSlice {
                    at_ms: Some(start),
                    status: Some(s.status.clone()),
                    repl: s.repl.clone(),
                    system: s.system.clone(),
                    ..Default::default()
                }),
                ..Slice::default()
            }
        })
        .collect::<Vec<_>>();
    let end_ms = slices.last().map_or(0, |s| s.start_ms + s.duration_ms);
    let mut mongod = MongodRecording {
        source: "ftdc".into(),
        info,
        polls_ok: samples.len() as u64,
        ftdc: Some(read.source(samples.len() as u64)),
        ..Default::default()
    };
    if samples.is_empty() {
        mongod.last_error = Some("no serverStatus samples in the chosen time window".into());
    }
    Recording {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        mdiag_version: env!("CARGO_PKG_VERSION").into(),
        started_at: first,
        ended_at: last.max(first + chrono::Duration::milliseconds(end_ms as i64)),
        requested_duration_ms: end_ms,
        stop_reason: "FTDC only (no eBPF recording)".into(),
        host,
        target: None,
        probes: Vec::new(),
        slices,
        checks: Default::default(),
        target_code: None,
        rseq: None,
        alloc: None,
        kernel_stacks: Vec::new(),
        cpu_profile: None,
        offcpu_profile: None,
        offcpu_sampled_one_in: 0,
        mongod: Some(mongod),
    }
}

/// The host facts mongod's own hostInfo and getCmdLineOpts give (the FTDC
/// metadata describes the host mongod ran on): memory and its limit, page
/// size, and the data directory's mount. Everything else stays unknown, so
/// rules that need it are not assessed.
fn host_from_info(mut host: HostFacts, i: &MongodInfo) -> HostFacts {
    const MIB: u64 = 1 << 20;
    let mb = |v: Option<i64>| v.and_then(|m| u64::try_from(m).ok()).filter(|m| *m > 0);
    if let Some(total) = mb(i.host_mem_mb) {
        host.memory = Some(MemoryFacts {
            mem_total_bytes: Some(total * MIB),
            ..Default::default()
        });
        if let Some(limit) = mb(i.host_mem_limit_mb).filter(|l| *l < total) {
            host.cgroup = Some(CgroupFacts {
                memory_max: Some((limit * MIB).to_string()),
                ..Default::default()
            });
        }
    }
    host.page_size = i.page_size.and_then(|p| u64::try_from(p).ok());
    if let Some(mount) = &i.db_path_mount {
        let found_by = if i.db_path.is_some() {
            "FTDC: getCmdLineOpts storage.dbPath, its mount from hostInfo mountInfo"
        } else {
            "FTDC: mongod's default dbPath (none set), its mount from hostInfo mountInfo"
        };
        host.db_path = Some(DbPathFacts {
            path: Some(mount.path.clone()),
            found_by: Some(found_by.into()),
            unknown_reason: None,
            storage: Some(mount.clone()),
        });
    }
    host
}

/// Joins FTDC samples to `rec`: each slice without a live sample gets the
/// sample nearest its middle (within [`JOIN_TOLERANCE_MS`]). Returns how
/// many slices got one.
pub fn join(rec: &mut Recording, read: &FtdcRead) -> u64 {
    let samples: Vec<&FtdcSample> = read.samples.iter().collect();
    let mut joined = 0;
    for slice in &mut rec.slices {
        if slice.mongod.as_ref().is_some_and(|m| m.status.is_some()) {
            continue;
        }
        let mid = rec.started_at
            + chrono::Duration::milliseconds((slice.start_ms + slice.duration_ms / 2) as i64);
        let i = samples.partition_point(|s| s.t < mid);
        let near = [i.checked_sub(1), Some(i)]
            .into_iter()
            .flatten()
            .filter_map(|j| samples.get(j))
            .min_by_key(|s| (s.t - mid).num_milliseconds().abs());
        if let Some(s) = near.filter(|s| (s.t - mid).num_milliseconds().abs() <= JOIN_TOLERANCE_MS)
        {
            let at = (s.t - rec.started_at).num_milliseconds().max(0) as u64;
            slice.mongod = Some(MongodSlice {
                at_ms: Some(at),
                status: Some(s.status.clone()),
                repl: s.repl.clone(),
                system: s.system.clone(),
                ..Default::default()
            });
            joined += 1;
        }
    }
    let m = rec.mongod.get_or_insert_with(|| MongodRecording {
        source: "ftdc".into(),
        ..Default::default()
    });
    if m.info.is_none() {
        m.info = read.info.clone();
    }
    m.ftdc = Some(read.source(joined));
    joined
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mongo::status::tests::fixtures;

    fn dir() -> std::path::PathBuf {
        fixtures().join("ftdc/mongod-7.0.0-rc6")
    }

    #[test]
    fn parses_the_7_0_shape_from_ftdc() {
        let r = read(&dir(), None, None, MAX_KEEP).unwrap();
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert!(r.samples.len() > 100, "{}", r.samples.len());
        let info = r.info.as_ref().unwrap();
        assert_eq!(info.version.as_deref(), Some("7.0.0-rc6"));
        assert_eq!(info.process.as_deref(), Some("mongod"));
        assert_eq!(info.storage_engine.as_deref(), Some("wiredTiger"));
        assert!(
            info.allocator
                .as_deref()
                .is_some_and(|a| a.starts_with("tcmalloc")),
            "{info:?}"
        );
        let s = &r.samples[0].status;
        // gperftools TCMalloc: no per-CPU caches; checkpoints under wiredTiger.transaction.
        assert_eq!(s.tcmalloc_per_cpu_caches, None);
        assert!(s.tcmalloc_allocated_bytes.is_some());
        assert!(s.checkpoint_most_recent_ms.is_some() && s.checkpoints.is_some());
        assert!(s.cache_max_bytes.is_some_and(|m| m > 0));
        assert!(s.op_insert.is_some() && s.connections_current.is_some());
        assert!(s.sections.iter().any(|x| x == "wiredTiger"));
        // Counters never go down within one process's samples.
        for w in r.samples.iter().collect::<Vec<_>>().windows(2) {
            if w[1].status.uptime_ms < w[0].status.uptime_ms {
                continue; // a restart
            }
            assert!(w[0].t < w[1].t);
            assert!(w[1].status.op_command >= w[0].status.op_command);
            assert!(w[1].status.checkpoints >= w[0].status.checkpoints);
        }
    }

    #[test]
    fn ftdc_columns_and_the_document_parser_agree() {
        // The first sample of a chunk is its reference document: parsed as a
        // live reply it must give exactly the same figures.
        let mut dir = FtdcDir::open(dir()).unwrap();
        let chunk = loop {
            match dir.next().unwrap().unwrap().doc {
                FtdcDoc::Metrics(c) => break c,
                _ => continue,
            }
        };
        let cols = FtdcColumns::new(chunk.paths().iter());
        let from_columns = cols.sample(&chunk, 0);
        let reference = chunk.reference();
        let ss = reference.get_document("serverStatus").unwrap();
        let from_doc = ServerStatusSample::from_document(ss).unwrap();
        assert_eq!(from_columns, from_doc);
    }

    #[test]
    fn window_and_keep() {
        let all = read(&dir(), None, None, MAX_KEEP).unwrap();
        let n = all.samples.len();
        let newest = read(&dir(), None, None, 10).unwrap();
        assert_eq!(newest.samples.len(), 10);
        assert_eq!(newest.dropped as usize, n - 10);
        assert_eq!(newest.samples.back(), all.samples.back());
        let from = all.samples[5].t;
        let to = all.samples[15].t;
        let w = read(&dir(), Some(from), Some(to), MAX_KEEP).unwrap();
        assert_eq!(w.samples.len(), 10);
        assert_eq!(w.samples[0].t, from);
        assert!(read(Path::new("/nonexistent/diagnostic.data"), None, None, 1).is_err());
    }

    #[test]
    fn ftdc_alone_and_joined() {
        let r = read(&dir(), None, None, 30).unwrap();
        let rec = recording_from_ftdc(&r);
        assert_eq!(rec.slices.len(), 30);
        assert!(
            rec.slices
                .iter()
                .all(|s| s.mongod.as_ref().unwrap().status.is_some())
        );
        assert_eq!(rec.mongod.as_ref().unwrap().source, "ftdc");
        // Round trip through the file format.
        let json = serde_json::to_string(&rec).unwrap();
        let back: Recording = serde_json::from_str(&json).unwrap();
        assert_eq!(back, rec);

        // The same seconds without mongod data get the samples back by time.
        let mut live = rec.clone();
        live.mongod = None;
        for s in &mut live.slices {
            s.mongod = None;
        }
        let joined = join(&mut live, &r);
        assert_eq!(joined, 30);
        for (a, b) in live.slices.iter().zip(&rec.slices) {
            assert_eq!(
                a.mongod.as_ref().unwrap().status,
                b.mongod.as_ref().unwrap().status
            );
        }
        assert_eq!(
            live.mongod
                .as_ref()
                .unwrap()
                .ftdc
                .as_ref()
                .unwrap()
                .joined_slices,
            30
        );
        // A recording an hour later joins nothing.
        let mut later = live.clone();
        later.started_at += chrono::Duration::hours(1);
        for s in &mut later.slices {
            s.mongod = None;
        }
        assert_eq!(join(&mut later, &r), 0);
    }
}
