//! Recording types of the host's facts: the kernel, CPU topology, memory,
//! cgroups, the target process, the network, system-wide settings, the
//! data directory and the storage under it, read once when recording.
//! `host/` reads them from /proc and /sys and fills these; the types are
//! the recording format's (`docs/recording-format.md`), so they live here,
//! below everything that reads or writes a recording.

use serde::{Deserialize, Serialize};

use super::host_cpu::HostCpuUsage;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostFacts {
    pub hostname: String,
    /// `uname -r`, e.g. "6.18.44-fc-v769".
    pub kernel_release: String,
    /// Rust's name for the architecture: "x86_64", "aarch64", "s390x", ...
    pub arch: String,
    /// Online CPUs.
    pub cpu_count: u32,
    /// Model name from /proc/cpuinfo ("unknown" when absent, e.g. some s390x).
    pub cpu_model: String,
    /// Contents of /sys/kernel/debug/sched/features when readable.
    pub sched_features: Option<String>,
    /// Why it was not readable ("permission denied", "not found", ...), or
    /// `None` when it was (or in files of older versions).
    #[serde(default)]
    pub sched_features_error: Option<String>,
    /// The kernel's lockdown mode (the bracketed word of
    /// /sys/kernel/security/lockdown: "none", "integrity", "confidentiality"),
    /// `None` when that file is absent.
    #[serde(default)]
    pub lockdown: Option<String>,
    /// Receive packet / flow steering state (RPS/RFS), `None` when unreadable.
    #[serde(default)]
    pub net: Option<NetFacts>,
    /// The kernel's fair scheduler, derived from `kernel_release` (not measured):
    /// "eevdf" from 6.6 on, "cfs" before; `None` when the release does not parse.
    #[serde(default)]
    pub sched_class: Option<String>,
    /// SMT, cores and sockets of the online CPUs.
    #[serde(default)]
    pub cpu_topology: Option<CpuTopology>,
    /// Memory sizes, transparent huge pages and memory sysctls.
    #[serde(default)]
    pub memory: Option<MemoryFacts>,
    /// NUMA nodes (/sys/devices/system/node), `None` when the kernel shows none.
    #[serde(default)]
    pub numa_nodes: Option<Vec<NumaNode>>,
    /// cgroup limits of the target process, or of mdiag itself when there is
    /// no target (see [`CgroupFacts::pid`]).
    #[serde(default)]
    pub cgroup: Option<CgroupFacts>,
    /// Allocator settings, glibc, limits and NUMA policy of the target process;
    /// `None` for a host-wide recording.
    #[serde(default)]
    pub target_process: Option<ProcessFacts>,
    /// Where the target keeps its data files and the storage under them;
    /// `None` for a host-wide recording (or an older one).
    #[serde(default)]
    pub db_path: Option<DbPathFacts>,
    /// The kernel's base page size in bytes (4096; 16384 or 65536 on some
    /// aarch64 kernels); `None` in older recordings.
    #[serde(default)]
    pub page_size: Option<u64>,
    /// net.ipv4.tcp_keepalive_time in seconds (applies to IPv6 too); `None`
    /// when unreadable or in older recordings.
    #[serde(default)]
    pub tcp_keepalive_time: Option<u64>,
    /// The host's CPU time and the busiest processes between the start and
    /// the end of the recording (`/proc`); `None` when unreadable or in
    /// older recordings.
    #[serde(default)]
    pub cpu_usage: Option<HostCpuUsage>,
    /// Kernel-wide limits, clock synchronisation, the tuned profile and the
    /// mongod processes of the host; `None` in older recordings.
    #[serde(default)]
    pub system: Option<SystemFacts>,
}

/// Host-wide settings a MongoDB support engineer checks first, read when
/// recording; each `None` when it could not be read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SystemFacts {
    /// fs.file-max: file handles the kernel allocates at most.
    pub file_max: Option<u64>,
    /// File handles allocated now (first field of fs.file-nr).
    pub file_handles: Option<u64>,
    /// kernel.pid_max: the highest process / thread id, so the most tasks.
    pub pid_max: Option<u64>,
    /// kernel.threads-max: the most threads (tasks) the kernel creates.
    pub threads_max: Option<u64>,
    /// Tasks (processes and threads) on the host now (/proc/loadavg).
    pub tasks: Option<u64>,
    pub clock: Option<ClockFacts>,
    pub tuned: Option<TunedFacts>,
    /// Every process named mongod on the host.
    pub mongods: Option<Vec<MongodProcess>>,
    /// The anonymous resident memory (`RssAnon`) of every other process,
    /// summed: what swap would hold for the software beside mongod.
    pub other_anon_bytes: Option<u64>,
    /// The largest of those processes, largest first (three at most).
    pub largest_others: Option<Vec<ProcessMemory>>,
    /// A kubelet runs on the host or its configuration is in place.
    pub kubernetes_node: Option<bool>,
}

/// A process other than mongod and its anonymous resident memory.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProcessMemory {
    pub pid: u32,
    /// Its name, as /proc/PID/status gives it.
    pub comm: String,
    /// `RssAnon`, bytes.
    pub anon_bytes: u64,
}

/// The kernel's clock discipline (adjtimex(2)) and the time services running.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClockFacts {
    /// STA_UNSYNC is set in the kernel's clock status: no time service has
    /// told the kernel the clock is synchronised.
    pub unsynchronised: bool,
    /// adjtimex's return: the clock state (5 = TIME_ERROR, unsynchronised).
    pub state: i32,
    /// The kernel's maximum error estimate, µs.
    pub max_error_us: i64,
    /// Time services running (process names: chronyd, ntpd, systemd-timesyncd, ...).
    pub services: Vec<String>,
}

/// The tuned daemon's active profile and what it sets that mongod cares about.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TunedFacts {
    /// /etc/tuned/active_profile (profiles separated by spaces).
    pub profile: String,
    /// `[vm] transparent_hugepages` of the profile (its includes followed).
    pub thp: Option<String>,
    /// `[disk] readahead` of the profile (its includes followed).
    pub readahead: Option<String>,
    /// A tuned process is running.
    pub running: bool,
}

/// One mongod process of the host and the WiredTiger cache it is sized for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MongodProcess {
    pub pid: u32,
    /// The cache size it was given (`--wiredTigerCacheSizeGB`, or
    /// `cacheSizeGB` in its config file), MB; `None` = mongod's default.
    pub cache_size_mb: Option<u64>,
    /// Where `cache_size_mb` comes from ("--wiredTigerCacheSizeGB",
    /// "config file /etc/mongod.conf", "default").
    pub cache_from: String,
    /// Its cgroup's memory limit, bytes (`None`: no limit).
    pub memory_limit_bytes: Option<u64>,
}

/// The target's data directory (mongod's dbPath, or the directory of the
/// WiredTiger files it has open) and the file system and disk under it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DbPathFacts {
    /// The directory as the target names it; `None` when it was not found.
    pub path: Option<String>,
    /// How it was found: "open file WiredTiger.lock", "--dbpath on the command line", ...
    pub found_by: Option<String>,
    /// Why the directory or its storage is unknown (`path` or `storage` is `None`).
    pub unknown_reason: Option<String>,
    /// The file system and disk behind `path`.
    pub storage: Option<StorageFacts>,
}

/// A sysfs "choice" file such as THP `enabled` or a block queue's `scheduler`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SysfsChoice {
    /// The value in brackets ("madvise" in "always [madvise] never"); a file
    /// holding a single word selects that word; `None` otherwise.
    pub selected: Option<String>,
    /// The line as the kernel prints it.
    pub raw: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CpuTopology {
    /// /sys/devices/system/cpu/smt/active, else "some core has more than one thread".
    pub smt_active: Option<bool>,
    /// Most hardware threads seen on one core (thread_siblings_list).
    pub threads_per_core: Option<u32>,
    /// Distinct cores among the online CPUs.
    pub cores: Option<u32>,
    /// Distinct physical packages among the online CPUs.
    pub sockets: Option<u32>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemoryFacts {
    /// MemTotal from /proc/meminfo, in bytes.
    pub mem_total_bytes: Option<u64>,
    /// MemAvailable from /proc/meminfo, in bytes.
    pub mem_available_bytes: Option<u64>,
    /// SwapTotal from /proc/meminfo, in bytes (0: no swap).
    pub swap_total_bytes: Option<u64>,
    /// Transparent huge pages (/sys/kernel/mm/transparent_hugepage).
    pub thp: Option<ThpFacts>,
    /// vm.* sysctls (/proc/sys/vm).
    pub vm: VmSysctls,
    /// kernel.numa_balancing (absent without CONFIG_NUMA_BALANCING).
    pub numa_balancing: Option<u64>,
    /// CommitLimit from /proc/meminfo, in bytes: what vm.overcommit_memory = 2 allows.
    #[serde(default)]
    pub commit_limit_bytes: Option<u64>,
    /// Committed_AS from /proc/meminfo, in bytes: address space committed so far.
    #[serde(default)]
    pub committed_as_bytes: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ThpFacts {
    pub enabled: Option<SysfsChoice>,
    pub defrag: Option<SysfsChoice>,
    /// khugepaged/max_ptes_none.
    pub khugepaged_max_ptes_none: Option<u64>,
}

/// The vm.* sysctls that decide writeback, swapping and mappings; each
/// `None` when unreadable.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VmSysctls {
    pub dirty_ratio: Option<u64>,
    pub dirty_background_ratio: Option<u64>,
    pub dirty_bytes: Option<u64>,
    pub dirty_background_bytes: Option<u64>,
    pub dirty_expire_centisecs: Option<u64>,
    pub dirty_writeback_centisecs: Option<u64>,
    pub swappiness: Option<u64>,
    pub overcommit_memory: Option<u64>,
    pub zone_reclaim_mode: Option<u64>,
    pub max_map_count: Option<u64>,
    /// vm.overcommit_ratio (% of RAM in CommitLimit; used when overcommit_kbytes is 0).
    #[serde(default)]
    pub overcommit_ratio: Option<u64>,
    /// vm.overcommit_kbytes (0: overcommit_ratio applies).
    #[serde(default)]
    pub overcommit_kbytes: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NumaNode {
    /// N of /sys/devices/system/node/nodeN.
    pub id: u32,
    /// The node's CPUs as the kernel lists them ("0-7,16-23"; empty: memory-only node).
    pub cpus: String,
    /// MemTotal of the node's meminfo, in bytes.
    pub mem_total_bytes: Option<u64>,
}

/// One process's cgroup and the limits set on it (not on its ancestors).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CgroupFacts {
    /// The process these facts are about (the target, or mdiag itself).
    pub pid: u32,
    /// cgroup v2 path (the `0::` line of /proc/PID/cgroup); `None` without one.
    pub path: Option<String>,
    /// v2 `cpu.max` as printed: "max 100000" (no limit) or "QUOTA PERIOD" (µs).
    pub cpu_max: Option<String>,
    /// v2 `memory.max`: "max" or bytes.
    pub memory_max: Option<String>,
    /// v2 `memory.high`: "max" or bytes.
    pub memory_high: Option<String>,
    /// cgroup v1 limits, when the cpu or memory controller is on a v1 hierarchy.
    pub v1: Option<CgroupV1Limits>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CgroupV1Limits {
    /// Path in the hierarchy holding the cpu controller.
    pub cpu_path: Option<String>,
    /// `cpu.cfs_quota_us` (-1: no limit).
    pub cpu_cfs_quota_us: Option<i64>,
    /// `cpu.cfs_period_us`.
    pub cpu_cfs_period_us: Option<u64>,
    /// Path in the hierarchy holding the memory controller.
    pub memory_path: Option<String>,
    /// `memory.limit_in_bytes` (a huge page-rounded value: no limit).
    pub memory_limit_in_bytes: Option<u64>,
}

impl CgroupFacts {
    /// v1 `memory.limit_in_bytes` at or above this means "no limit" (the
    /// kernel prints LONG_MAX rounded down to a page).
    pub const V1_UNLIMITED: u64 = 1 << 62;

    /// The memory limit in bytes (v2 `memory.max`, else v1), `None` when
    /// there is none or it is unknown.
    pub fn memory_limit_bytes(&self) -> Option<u64> {
        if let Some(m) = &self.memory_max {
            return m.parse().ok();
        }
        self.v1
            .as_ref()?
            .memory_limit_in_bytes
            .filter(|&b| b < Self::V1_UNLIMITED)
    }

    /// The CPU limit in thousandths of a CPU (v2 `cpu.max`, else v1 CFS
    /// quota), `None` when there is none or it is unknown.
    pub fn cpu_limit_millicpus(&self) -> Option<u64> {
        let (quota, period) = match &self.cpu_max {
            Some(m) => {
                let mut it = m.split_whitespace();
                (
                    it.next()?.parse::<u64>().ok()?,
                    it.next()?.parse::<u64>().ok()?,
                )
            }
            None => {
                let v1 = self.v1.as_ref()?;
                (
                    u64::try_from(v1.cpu_cfs_quota_us?).ok()?,
                    v1.cpu_cfs_period_us?,
                )
            }
        };
        (period > 0).then(|| quota.saturating_mul(1000) / period)
    }
}

/// Facts about the target process that change how mongod behaves.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProcessFacts {
    pub pid: u32,
    /// The allow-listed variables of /proc/PID/environ (GLIBC_TUNABLES,
    /// LD_PRELOAD, TCMALLOC_*, MALLOC_*); no other variable is ever kept.
    /// `None` when unreadable.
    pub environ: Option<std::collections::BTreeMap<String, String>>,
    /// The mapped glibc (`libc.so.6` / `libc-X.Y.so`) as /proc/PID/maps names
    /// it; `None` when none is mapped (static binary, musl) or maps is unreadable.
    pub libc_path: Option<String>,
    /// glibc release ("2.36"), from the file name or the library's banner.
    pub glibc_version: Option<String>,
    /// "Max open files" of /proc/PID/limits.
    pub max_open_files: Option<ResourceLimit>,
    /// "Max processes" of /proc/PID/limits (RLIMIT_NPROC: processes and
    /// threads of the user).
    pub max_processes: Option<ResourceLimit>,
    /// "Max locked memory" of /proc/PID/limits (RLIMIT_MEMLOCK), bytes.
    pub max_locked_memory: Option<ResourceLimit>,
    /// NUMA memory policy from /proc/PID/numa_maps: the heap's, else the most
    /// common one ("default", "interleave:0-1", "bind:0", ...).
    pub numa_policy: Option<String>,
    /// The process's cgroup limits.
    pub cgroup: Option<CgroupFacts>,
    /// The `THP_enabled` line of /proc/PID/status (Linux 5.0+): `false` when
    /// the process opted out of transparent huge pages with
    /// prctl(PR_SET_THP_DISABLE), as mongod before 8.0 does itself in recent
    /// releases; `None` when the kernel has no such line or it was not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thp_enabled: Option<bool>,
}

/// A soft/hard resource limit; `None` = unlimited.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceLimit {
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetFacts {
    /// /proc/sys/net/core/rps_sock_flow_entries (0 = RFS off).
    pub rps_sock_flow_entries: u64,
    /// Interfaces with receive queues (the loopback interface excluded).
    pub interfaces: Vec<NetInterface>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetInterface {
    pub name: String,
    pub rx_queues: Vec<RxQueue>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RxQueue {
    /// "rx-0", ...
    pub name: String,
    /// rps_cpus as the kernel prints it (hex CPU mask; all zeros = RPS off).
    pub rps_cpus: String,
    /// rps_flow_cnt (0 = RFS off for this queue).
    pub rps_flow_cnt: u64,
}

impl NetFacts {
    /// RPS is on when any queue steers to some CPU.
    pub fn rps_enabled(&self) -> bool {
        self.interfaces.iter().flat_map(|i| &i.rx_queues).any(|q| {
            q.rps_cpus
                .chars()
                .any(|c| c.is_ascii_hexdigit() && c != '0')
        })
    }

    /// RFS needs both the global flow table and per-queue flow counts.
    pub fn rfs_enabled(&self) -> bool {
        self.rps_sock_flow_entries > 0
            && self
                .interfaces
                .iter()
                .flat_map(|i| &i.rx_queues)
                .any(|q| q.rps_flow_cnt > 0)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageFacts {
    /// The path asked about, with symbolic links resolved when it exists.
    pub path: String,
    /// The mount containing it (longest mount point that is a prefix).
    pub mount_point: Option<String>,
    /// File system type ("xfs", "ext4", ...).
    pub fs_type: Option<String>,
    /// Mount source ("/dev/nvme0n1p2").
    pub source: Option<String>,
    /// Per-mount options, sorted ("noatime", "rw", ...).
    pub mount_options: Option<Vec<String>>,
    /// Per-superblock options, sorted ("logbsize=256k", ...).
    pub super_options: Option<Vec<String>>,
    /// The file system's device, "major:minor" as mountinfo shows it.
    pub device: Option<String>,
    /// The whole disk behind the device ("nvme0n1" for the partition
    /// "nvme0n1p2"); `None` for devices without /sys/dev/block (tmpfs,
    /// overlay, btrfs subvolumes, ...).
    pub disk: Option<String>,
    /// The disk's queue/scheduler.
    pub scheduler: Option<SysfsChoice>,
    /// The disk's queue/read_ahead_kb.
    pub read_ahead_kb: Option<u64>,
    /// The disk's queue/rotational (true: spinning disk).
    pub rotational: Option<bool>,
}
