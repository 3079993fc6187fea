//! What a recording keeps about mongod: the facts read once (build, options,
//! host, catalogue sizes), one serverStatus sample per one-second slice, and
//! the faults (what was missing and why). Part of the recording format
//! (`docs/recording-format.md`); every field is optional or defaulted so older
//! recordings and servers without a section still read.

use serde::{Deserialize, Serialize};

use super::status::ServerStatusSample;
use crate::host::StorageFacts;

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
    pub repl: Option<super::repl::ReplSample>,
    /// The host's CPU times, memory, disks and data-directory space: FTDC's
    /// systemMetrics, or read by mdiag beside each poll of a local mongod.
    /// Absent otherwise and in older files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<super::system::SystemSample>,
}

/// The flattened `tcmalloc` section of `serverStatus({tcmalloc: 2})`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TcmallocDetail {
    pub at_ms: u64,
    /// Dotted path under `tcmalloc` → value (at most [`super::poll::DETAIL_MAX_METRICS`]).
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
