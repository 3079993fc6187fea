//! What a recording keeps about mongod: the facts read once (build, options,
//! host, catalogue sizes), one serverStatus sample per one-second slice, and
//! the faults (what was missing and why). Part of the recording format
//! (`docs/recording-format.md`); every field is optional or defaulted so older
//! recordings and servers without a section still read.
//!
//! Only the types live here, below everything that reads or writes a
//! recording; `mongo/` fills them (the pollers, the serverStatus,
//! replication and systemMetrics parsers, FTDC).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::host::StorageFacts;
use super::server_status::ServerStatusSample;

/// Where the mongod figures of a recording came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MongodRecording {
    /// "live" (polled during the recording through the driver) or "ftdc"
    /// (read from a diagnostic.data directory by `explain --ftdc`).
    pub source: String,
    /// The connection string with credentials removed.
    pub uri: Option<String>,
    /// Where the connection string came from: "--uri", "MDIAG_MONGODB_URI", "config file PATH".
    pub uri_from: Option<String>,
    /// True when the server runs on this host (its process can be observed).
    pub local: Option<bool>,
    /// The facts read once; `None` when they could not be read (see `info_error`).
    pub info: Option<MongodInfo>,
    /// Why `info` (or part of it) is missing.
    pub info_error: Option<String>,
    /// serverStatus polls answered / not answered.
    pub polls_ok: u64,
    pub polls_failed: u64,
    /// Milliseconds from the recording's start to the first poll that failed
    /// after the last answered one: when mongod stopped answering. `None`
    /// when it answered until the end (or never answered).
    pub stopped_answering_at_ms: Option<u64>,
    /// The last error seen, redacted.
    pub last_error: Option<String>,
    /// `serverStatus({tcmalloc: 2})` detail, taken at a lower rate.
    pub tcmalloc_detail: Vec<TcmallocDetail>,
    /// For `explain --ftdc`: the FTDC directory and how many of the
    /// recording's slices got an FTDC sample.
    pub ftdc: Option<FtdcSource>,
}

/// The facts read once per recording (buildInfo, getCmdLineOpts, hostInfo,
/// catalogue sizes), each optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MongodInfo {
    /// buildInfo.version, e.g. "8.2.1".
    pub version: Option<String>,
    pub git_version: Option<String>,
    /// buildInfo.allocator: "tcmalloc-google", "tcmalloc-gperf", "tcmalloc", "system".
    pub allocator: Option<String>,
    /// buildInfo.modules ("enterprise", ...).
    pub modules: Vec<String>,
    /// serverStatus.process ("mongod", "mongos", or another server's name).
    pub process: Option<String>,
    /// storageEngine.name from serverStatus ("wiredTiger", ...).
    pub storage_engine: Option<String>,
    /// getCmdLineOpts parsed.storage.dbPath.
    pub db_path: Option<String>,
    /// parsed.storage.wiredTiger.engineConfig.cacheSizeGB.
    pub cache_size_gb: Option<f64>,
    /// parsed.storage.wiredTiger.engineConfig.configString (eviction settings, ...).
    pub wt_config_string: Option<String>,
    /// parsed.storage.syncPeriodSecs: seconds between checkpoints (`--syncdelay`);
    /// `None` when not set (mongod's default is 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_period_secs: Option<f64>,
    /// The command line mongod was started with (getCmdLineOpts.argv).
    pub argv: Vec<String>,
    /// parsed.replication.replSetName: the replica set (mongodb_exporter's
    /// `rs_nm`); absent for a standalone and in older files.
    #[serde(default)]
    pub replica_set: Option<String>,
    /// parsed.sharding.clusterRole: `shardsvr` or `configsvr`
    /// (mongodb_exporter's `cl_role`); absent otherwise and in older files.
    #[serde(default)]
    pub cluster_role: Option<String>,
    /// getCmdLineOpts parsed.net.port: the port mongod listens on (absent
    /// when mongod runs on its default 27017 without saying so, and in older
    /// files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i64>,
    /// Whether mongod requires authentication: getCmdLineOpts
    /// parsed.security.authorization is "enabled", or a keyFile is set
    /// (which turns authorization on); `None` without getCmdLineOpts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<bool>,
    /// hostInfo.system.hostname.
    pub host_name: Option<String>,
    /// hostInfo.system.numCores.
    pub host_cores: Option<i64>,
    /// hostInfo.system.memSizeMB.
    pub host_mem_mb: Option<i64>,
    /// hostInfo.system.numaEnabled.
    pub host_numa: Option<bool>,
    /// hostInfo.system.cpuArch.
    pub host_cpu_arch: Option<String>,
    /// hostInfo.os.name / version.
    pub os: Option<String>,
    /// hostInfo.system.memLimitMB: the memory mongod may use (the cgroup
    /// limit when lower than the host's memory; mongod 4.4+).
    pub host_mem_limit_mb: Option<i64>,
    /// hostInfo.extra.libcVersion ("2.36"): the glibc mongod runs with.
    pub libc_version: Option<String>,
    /// hostInfo.extra.maxOpenFiles: mongod's soft open-files limit.
    pub max_open_files: Option<i64>,
    /// hostInfo.extra.pageSize: the kernel's base page size, bytes.
    pub page_size: Option<i64>,
    /// hostInfo.system.numNumaNodes.
    pub numa_nodes: Option<i64>,
    /// The mount holding dbPath, from hostInfo.extra.mountInfo (mongod 5.0+,
    /// the server's own view): file system and options, no disk settings.
    pub db_path_mount: Option<StorageFacts>,
    /// hostInfo.os.type: "Linux", "Darwin", "Windows", ...
    pub os_type: Option<String>,
    /// buildInfo.buildEnvironment.target_os: "linux", "macOS" (or "osx"), "windows".
    pub target_os: Option<String>,
    /// Databases, collections and indexes (dbStats summed); data-handle pressure.
    pub databases: Option<u64>,
    pub collections: Option<u64>,
    pub indexes: Option<u64>,
    /// The file system and disk behind dbPath (local servers only).
    pub db_path_storage: Option<StorageFacts>,
    /// mongod's own startup warnings, the lines of `getLog:
    /// "startupWarnings"` verbatim (bounded: `mongo::startup`); `None` when
    /// not read (FTDC holds none, older files, the command refused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup_warnings: Option<Vec<String>>,
    /// getParameter featureCompatibilityVersion: its `version` ("6.0");
    /// `None` when not read (FTDC, a mongos, older files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fcv: Option<String>,
    /// Its `targetVersion`: present only while a change of it is unfinished
    /// (an upgrade or downgrade interrupted or still running).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fcv_target: Option<String>,
}

/// One slice's serverStatus sample, or why there is none.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MongodSlice {
    /// Milliseconds from the recording's start when the reply arrived (for
    /// FTDC: the sample's time).
    pub at_ms: Option<u64>,
    pub status: Option<ServerStatusSample>,
    /// Why this second has no sample ("unreachable: ...", "no reply within 2 s", ...).
    pub missing: Option<String>,
    /// How long the live serverStatus took, from sending it to its reply
    /// parsed (absent for FTDC samples and in older files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poll_ms: Option<u64>,
    /// Replication figures (replSetGetStatus, the oplog): every FTDC sample
    /// of a replica-set member; live, the seconds in which a replication
    /// poll (every `poll::REPL_EVERY` s) answered. Absent otherwise and in
    /// older files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repl: Option<ReplSample>,
    /// The host's CPU times, memory, disks and data-directory space: FTDC's
    /// systemMetrics, or read by mdiag beside each poll of a local mongod.
    /// Absent otherwise and in older files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<SystemSample>,
}

/// The flattened `tcmalloc` section of `serverStatus({tcmalloc: 2})`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TcmallocDetail {
    pub at_ms: u64,
    /// Dotted path under `tcmalloc` → value (at most `mongo::poll::DETAIL_MAX_METRICS`).
    pub metrics: std::collections::BTreeMap<String, i64>,
}

/// The FTDC data joined to a recording.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FtdcSource {
    pub path: String,
    /// Time of the first and last sample used.
    pub first: Option<chrono::DateTime<chrono::Utc>>,
    pub last: Option<chrono::DateTime<chrono::Utc>>,
    /// Slices that got a sample.
    pub joined_slices: u64,
    /// What could not be read, with the reason and what was skipped for it
    /// (one damaged document, or the rest of a file whose framing is broken).
    pub errors: Vec<String>,
    /// Samples left out because their time was not after the previous
    /// sample's of the same mongod process (a repeated file, the clock set back).
    pub back_in_time: u64,
    /// The directory has no metadata document (buildInfo, hostInfo): the
    /// host's architecture and kernel and mongod's allocator are unknown.
    pub no_metadata: bool,
}

/// One member of the replica set in one sample.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemberSample {
    /// `_id` in the replica-set configuration.
    pub id: i64,
    /// `host:port` (from the reply, or the FTDC chunk's reference document).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `state`: 1 PRIMARY, 2 SECONDARY, 7 ARBITER, 8 DOWN, ... (see `mongo::repl::state_name`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<i64>,
    /// `health`: 1 up, 0 down (as the heartbeats see it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<i64>,
    /// `optimeDate`: the wall time of the last operation it applied, ms since the epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub optime_ms: Option<i64>,
    /// The member answering (`self: true`).
    pub is_self: bool,
    /// Its configured delay, s: `secondaryDelaySecs` (`slaveDelay` before
    /// 5.0) of replSetGetConfig, read live only (FTDC keeps no replica-set
    /// configuration). A delayed member lags by this much on purpose.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_s: Option<i64>,
}

/// Replication figures of one sample; `None` fields were not reported.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReplSample {
    /// `replSetGetStatus.myState`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub my_state: Option<i64>,
    /// `replSetGetStatus.members`, in the reply's order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<MemberSample>,
    /// The oplog's collStats: bytes of its documents now, and its configured maximum.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oplog_size_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oplog_max_bytes: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oplog_count: Option<i64>,
    /// WiredTiger's `cursor.insert key and value bytes` of the oplog table:
    /// bytes written into the oplog since mongod opened it (a counter).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oplog_insert_bytes: Option<i64>,
    /// The `ts` seconds of the oplog's first and last entries (live only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oplog_first_s: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oplog_last_s: Option<i64>,
}

/// CPU time summed over every CPU, ms since boot (/proc/stat `cpu`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CpuTimes {
    pub user_ms: i64,
    pub nice_ms: i64,
    pub system_ms: i64,
    pub idle_ms: i64,
    pub iowait_ms: i64,
    pub irq_ms: i64,
    pub softirq_ms: i64,
    /// Time a hypervisor ran something else while this guest's CPU wanted to run.
    pub steal_ms: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_cpus: Option<i64>,
}

impl CpuTimes {
    /// Every state summed.
    pub fn total_ms(&self) -> i64 {
        self.user_ms
            + self.nice_ms
            + self.system_ms
            + self.idle_ms
            + self.iowait_ms
            + self.irq_ms
            + self.softirq_ms
            + self.steal_ms
    }
}

/// One disk's counters (/proc/diskstats).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DiskCounters {
    pub reads: i64,
    pub writes: i64,
    pub read_time_ms: i64,
    pub write_time_ms: i64,
    /// Time with at least one I/O in flight (the basis of %util).
    pub io_time_ms: i64,
}

/// One mount's space (statvfs), bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MountSpace {
    pub capacity: i64,
    /// Free to unprivileged users (what mongod can use).
    pub available: i64,
    pub free: i64,
}

/// One sample of the host.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SystemSample {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuTimes>,
    /// /proc/meminfo, kB.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_total_kb: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_available_kb: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap_total_kb: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub swap_free_kb: Option<i64>,
    /// /proc/vmstat counters: pages swapped in and out, major faults.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pswpin: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pswpout: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pgmajfault: Option<i64>,
    /// By disk name ("sda", "nvme0n1").
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub disks: BTreeMap<String, DiskCounters>,
    /// By mount point.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub mounts: BTreeMap<String, MountSpace>,
}
