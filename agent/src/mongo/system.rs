//! The host's CPU times, memory, disks and file-system space in one sample:
//! mongod's own `systemMetrics` from FTDC (what it reads from /proc/stat,
//! /proc/meminfo, /proc/vmstat, /proc/diskstats and statvfs of its mounts,
//! `src/mongo/util/procparser.cpp`), or the same figures read live by mdiag
//! beside the serverStatus poll of a local mongod ([`read_live`]).
//!
//! Counters (CPU ms, I/O counts and times) are cumulative since boot; rates
//! come from differences between samples (`rules::facts::system`).
use std::path::Path;

use crate::recording::mongod::{CpuTimes, DiskCounters, MountSpace, SystemSample};

/// Prefix of systemMetrics in FTDC samples.
pub const PREFIX: &str = "systemMetrics.";
/// Disks and mounts kept at most per sample.
pub const MAX_DEVICES: usize = 64;

const DISK_FIELDS: [&str; 5] = [
    "reads",
    "writes",
    "read_time_ms",
    "write_time_ms",
    "io_time_ms",
];
const MOUNT_FIELDS: [&str; 3] = ["capacity", "available", "free"];

/// Whether an FTDC metric path is one [`SystemSample::parse_with`] reads.
pub fn is_ftdc_path(path: &str) -> bool {
    let Some(rest) = path.strip_prefix(PREFIX) else {
        return false;
    };
    if let Some(f) = rest.strip_prefix("cpu.") {
        return f.ends_with("_ms") || f == "num_cpus";
    }
    if let Some(f) = rest.strip_prefix("memory.") {
        return [
            "MemTotal_kb",
            "MemAvailable_kb",
            "SwapTotal_kb",
            "SwapFree_kb",
        ]
        .contains(&f);
    }
    if let Some(f) = rest.strip_prefix("vmstat.") {
        return ["pswpin", "pswpout", "pgmajfault"].contains(&f);
    }
    if let Some(d) = rest.strip_prefix("disks.") {
        return d
            .rsplit_once('.')
            .is_some_and(|(_, f)| DISK_FIELDS.contains(&f));
    }
    rest.strip_prefix("mounts.")
        .and_then(|m| m.rsplit_once('.'))
        .is_some_and(|(_, f)| MOUNT_FIELDS.contains(&f))
}

impl SystemSample {
    /// Reads a sample from `(path, value)` pairs of FTDC metrics (only those
    /// [`is_ftdc_path`] accepts matter); `None` when there is no systemMetrics.
    pub fn parse_with<'a>(metrics: impl Iterator<Item = (&'a str, i64)>) -> Option<Self> {
        let mut s = SystemSample::default();
        let mut any = false;
        for (path, v) in metrics {
            let Some(rest) = path.strip_prefix(PREFIX) else {
                continue;
            };
            any = true;
            if let Some(f) = rest.strip_prefix("cpu.") {
                let cpu = s.cpu.get_or_insert_with(CpuTimes::default);
                match f {
                    "user_ms" => cpu.user_ms = v,
                    "nice_ms" => cpu.nice_ms = v,
                    "system_ms" => cpu.system_ms = v,
                    "idle_ms" => cpu.idle_ms = v,
                    "iowait_ms" => cpu.iowait_ms = v,
                    "irq_ms" => cpu.irq_ms = v,
                    "softirq_ms" => cpu.softirq_ms = v,
                    "steal_ms" => cpu.steal_ms = v,
                    "num_cpus" => cpu.num_cpus = Some(v),
                    _ => {}
                }
            } else if let Some(f) = rest.strip_prefix("memory.") {
                match f {
                    "MemTotal_kb" => s.mem_total_kb = Some(v),
                    "MemAvailable_kb" => s.mem_available_kb = Some(v),
                    "SwapTotal_kb" => s.swap_total_kb = Some(v),
                    "SwapFree_kb" => s.swap_free_kb = Some(v),
                    _ => {}
                }
            } else if let Some(f) = rest.strip_prefix("vmstat.") {
                match f {
                    "pswpin" => s.pswpin = Some(v),
                    "pswpout" => s.pswpout = Some(v),
                    "pgmajfault" => s.pgmajfault = Some(v),
                    _ => {}
                }
            } else if let Some((disk, f)) =
                rest.strip_prefix("disks.").and_then(|d| d.rsplit_once('.'))
            {
                if !s.disks.contains_key(disk) && s.disks.len() >= MAX_DEVICES {
                    continue;
                }
                let d = s.disks.entry(disk.to_owned()).or_default();
                match f {
                    "reads" => d.reads = v,
                    "writes" => d.writes = v,
                    "read_time_ms" => d.read_time_ms = v,
                    "write_time_ms" => d.write_time_ms = v,
                    "io_time_ms" => d.io_time_ms = v,
                    _ => {}
                }
            } else if let Some((mount, f)) = rest
                .strip_prefix("mounts.")
                .and_then(|m| m.rsplit_once('.'))
            {
                if !s.mounts.contains_key(mount) && s.mounts.len() >= MAX_DEVICES {
                    continue;
                }
                let m = s.mounts.entry(mount.to_owned()).or_default();
                match f {
                    "capacity" => m.capacity = v,
                    "available" => m.available = v,
                    "free" => m.free = v,
                    _ => {}
                }
            }
        }
        any.then_some(s)
    }
}

/// The same figures read on this host now: /proc/stat, /proc/meminfo,
/// /proc/vmstat, /proc/diskstats (the disk `disk` only, when named, else
/// every disk but loop and RAM devices), and statvfs of `data_path`, filed
/// under `mount` (the mount point holding it). What cannot be read is left
/// out.
pub fn read_live(data_path: Option<(&Path, &str)>, disk: Option<&str>) -> SystemSample {
    use procfs::{Current, CurrentSI};
    let mut s = SystemSample::default();
    if let Ok(stat) = procfs::KernelStats::current() {
        let ms = |ticks: u64| -> i64 {
            let hz = procfs::ticks_per_second().max(1);
            i64::try_from(ticks.saturating_mul(1000) / hz).unwrap_or(i64::MAX)
        };
        let t = &stat.total;
        s.cpu = Some(CpuTimes {
            user_ms: ms(t.user),
            nice_ms: ms(t.nice),
            system_ms: ms(t.system),
            idle_ms: ms(t.idle),
            iowait_ms: ms(t.iowait.unwrap_or(0)),
            irq_ms: ms(t.irq.unwrap_or(0)),
            softirq_ms: ms(t.softirq.unwrap_or(0)),
            steal_ms: ms(t.steal.unwrap_or(0)),
            num_cpus: i64::try_from(stat.cpu_time.len()).ok(),
        });
    }
    if let Ok(m) = procfs::Meminfo::current() {
        let kb = |b: u64| i64::try_from(b / 1024).ok();
        s.mem_total_kb = kb(m.mem_total);
        s.mem_available_kb = m.mem_available.and_then(kb);
        s.swap_total_kb = kb(m.swap_total);
        s.swap_free_kb = kb(m.swap_free);
    }
    if let Ok(v) = procfs::vmstat() {
        s.pswpin = v.get("pswpin").copied();
        s.pswpout = v.get("pswpout").copied();
        s.pgmajfault = v.get("pgmajfault").copied();
    }
    if let Ok(disks) = procfs::diskstats() {
        for d in disks {
            let keep = match disk {
                Some(name) => d.name == name,
                None => !["loop", "ram", "zram"]
                    .iter()
                    .any(|p| d.name.starts_with(p)),
            };
            if !keep || s.disks.len() >= MAX_DEVICES {
                continue;
            }
            let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
            s.disks.insert(
                d.name.clone(),
                DiskCounters {
                    reads: n(d.reads),
                    writes: n(d.writes),
                    read_time_ms: n(d.time_reading),
                    write_time_ms: n(d.time_writing),
                    io_time_ms: n(d.time_in_progress),
                },
            );
        }
    }
    if let Some((path, mount)) = data_path
        && let Ok(st) = nix::sys::statvfs::statvfs(path)
    {
        let frsize = st.fragment_size() as i64;
        let bytes = |blocks: u64| {
            i64::try_from(blocks)
                .unwrap_or(i64::MAX)
                .saturating_mul(frsize)
        };
        s.mounts.insert(
            mount.to_owned(),
            MountSpace {
                capacity: bytes(st.blocks()),
                available: bytes(st.blocks_available()),
                free: bytes(st.blocks_free()),
            },
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_systemmetrics_paths_and_ignores_the_rest() {
        let metrics = [
            ("systemMetrics.cpu.user_ms", 100),
            ("systemMetrics.cpu.steal_ms", 7),
            ("systemMetrics.cpu.num_cpus", 8),
            ("systemMetrics.memory.MemTotal_kb", 1024),
            ("systemMetrics.memory.Cached_kb", 5),
            ("systemMetrics.vmstat.pswpout", 3),
            ("systemMetrics.disks.nvme0n1.reads", 11),
            ("systemMetrics.disks.nvme0n1.io_time_ms", 12),
            ("systemMetrics.mounts./data/db.capacity", 1000),
            ("systemMetrics.mounts./data/db.available", 400),
            ("serverStatus.opcounters.insert", 1),
        ];
        let s = SystemSample::parse_with(metrics.into_iter()).unwrap();
        let cpu = s.cpu.as_ref().unwrap();
        assert_eq!((cpu.user_ms, cpu.steal_ms, cpu.num_cpus), (100, 7, Some(8)));
        assert_eq!(cpu.total_ms(), 107);
        assert_eq!(s.mem_total_kb, Some(1024));
        assert_eq!(s.pswpout, Some(3));
        assert_eq!(s.disks["nvme0n1"].reads, 11);
        assert_eq!(s.disks["nvme0n1"].io_time_ms, 12);
        assert_eq!(s.mounts["/data/db"].available, 400);
        assert!(is_ftdc_path("systemMetrics.mounts./.free"));
        assert!(!is_ftdc_path("systemMetrics.memory.Cached_kb"));
        assert!(!is_ftdc_path("systemMetrics.disks.sda.io_queued_ms"));
        assert_eq!(
            SystemSample::parse_with([("serverStatus.x", 1)].into_iter()),
            None
        );
    }

    #[test]
    fn live_figures_match_proc() {
        let s = read_live(Some((Path::new("/"), "/")), None);
        let cpu = s.cpu.as_ref().expect("/proc/stat");
        assert!(cpu.total_ms() > 0 && cpu.num_cpus.unwrap_or(0) >= 1);
        assert!(s.mem_total_kb.unwrap_or(0) > 0);
        let root = &s.mounts["/"];
        assert!(root.capacity >= root.free && root.free >= root.available);
        assert!(root.capacity > 0);
        // A disk named keeps that disk only (none here by that name).
        assert!(read_live(None, Some("no-such-disk")).disks.is_empty());
    }
}
