//! The `system` fact group: the host's CPU time shares (iowait, steal),
//! memory and swap, the data directory's disk (I/O rate, latency,
//! utilisation) and the space left on its file system, from the system
//! samples of the recording's mongod slices: FTDC's `systemMetrics`, or read
//! by mdiag beside each poll of a local mongod (`mongo::system::read_live`).
//!
//! Rates and shares are taken between the first and the last sample that
//! have the figure (counters since boot); gauges (memory, space) are the
//! newest. The data disk and mount are the ones under mongod's dbPath when
//! the recording names them (live: mdiag's own mount table; FTDC: hostInfo's
//! mountInfo), else the only one there is; the mount, else, is the longest
//! mount point dbPath is under (mongod lists every mount's space in
//! systemMetrics). A disk that cannot be told apart from others is not
//! bound, so the disk rules are not assessed rather than judged on another
//! disk.

use super::{FactGroup, FactValue, float, int, text};
use crate::recording::Recording;
use crate::recording::StorageFacts;
use crate::recording::mongod::{CpuTimes, DiskCounters, MountSpace, SystemSample};

/// Why the group is absent without system samples.
pub const NOT_RECORDED: &str = "no host figures from mongod's side: record with --uri of a \
     mongod on this host, or explain --ftdc a diagnostic.data with systemMetrics";
const GIB: f64 = 1_073_741_824.0;

/// The group, or why it is absent.
pub fn system_facts(rec: &Recording) -> Result<FactGroup, String> {
    let samples = super::mongod::slice_samples(rec, |m| m.system.as_ref(), NOT_RECORDED)?;
    let (_, newest) = samples[samples.len() - 1];
    let ftdc = rec.mongod.as_ref().is_some_and(|m| m.source == "ftdc");
    let mut g = FactGroup::new();
    g.insert("samples".into(), int(samples.len() as u64));
    let mut put = |k: &str, v: Option<FactValue>| {
        if let Some(v) = v {
            g.insert(k.into(), v);
        }
    };
    let source = if ftdc {
        "mongod's FTDC systemMetrics"
    } else {
        "mdiag: /proc/stat, /proc/meminfo, /proc/vmstat, /proc/diskstats, statvfs"
    };
    put("source", Some(text(source)));
    cpu_facts(&samples, &mut put);
    memory_facts(&samples, newest, &mut put);
    let data = data_storage(rec);
    disk_facts(&samples, newest, data.as_ref(), &mut put);
    let db_path = rec
        .mongod
        .as_ref()
        .and_then(|m| m.info.as_ref()?.db_path.as_deref());
    space_facts(newest, data.as_ref(), db_path, &mut put);
    Ok(g)
}

type Put<'a> = dyn FnMut(&str, Option<FactValue>) + 'a;

/// The first and last samples having `f`, with the time between them (ms).
fn ends<'a, T>(
    samples: &[(u64, &'a SystemSample)],
    f: impl Fn(&'a SystemSample) -> Option<T>,
) -> Option<(T, T, u64)> {
    let mut with = samples.iter().filter_map(|(t, s)| Some((*t, f(s)?)));
    let (t0, a) = with.next()?;
    let (t1, b) = with.last()?;
    (t1 > t0).then_some((a, b, t1 - t0))
}

fn cpu_facts(samples: &[(u64, &SystemSample)], put: &mut Put) {
    let cpus = samples
        .iter()
        .rev()
        .find_map(|(_, s)| s.cpu.as_ref()?.num_cpus);
    put("cpus", cpus.map(FactValue::Int));
    let Some((a, b, ms)) = ends(samples, |s| s.cpu.as_ref()) else {
        return;
    };
    let total = (b.total_ms() - a.total_ms()) as f64;
    if total <= 0.0 {
        return;
    }
    let share = |f: fn(&crate::recording::mongod::CpuTimes) -> i64| {
        Some(float(((f(b) - f(a)) as f64 / total).max(0.0)))
    };
    put("user_share", share(|c| c.user_ms + c.nice_ms));
    put(
        "system_share",
        share(|c| c.system_ms + c.irq_ms + c.softirq_ms),
    );
    put("idle_share", share(|c| c.idle_ms));
    put("iowait_share", share(|c| c.iowait_ms));
    put("steal_share", share(|c| c.steal_ms));
    // CPUs' worth of time stolen: steal ms per ms of wall time.
    put(
        "steal_cpus",
        Some(float(
            ((b.steal_ms - a.steal_ms) as f64 / ms as f64).max(0.0),
        )),
    );
}

fn memory_facts(samples: &[(u64, &SystemSample)], newest: &SystemSample, put: &mut Put) {
    let kb = |v: Option<i64>| v.map(|k| k.saturating_mul(1024));
    put(
        "mem_total_bytes",
        kb(newest.mem_total_kb).map(FactValue::Int),
    );
    put(
        "mem_available_bytes",
        kb(newest.mem_available_kb).map(FactValue::Int),
    );
    if let (Some(t), Some(a)) = (newest.mem_total_kb, newest.mem_available_kb)
        && t > 0
    {
        put("mem_available_share", Some(float(a as f64 / t as f64)));
    }
    if let (Some(t), Some(f)) = (newest.swap_total_kb, newest.swap_free_kb) {
        put(
            "swap_used_bytes",
            Some(FactValue::Int((t - f).max(0).saturating_mul(1024))),
        );
    }
    let rate = |f: fn(&SystemSample) -> Option<i64>| {
        ends(samples, f).map(|(a, b, ms)| float(((b - a) as f64 * 1000.0 / ms as f64).max(0.0)))
    };
    put("swap_in_pages_per_s", rate(|s| s.pswpin));
    put("swap_out_pages_per_s", rate(|s| s.pswpout));
    put("major_faults_per_s", rate(|s| s.pgmajfault));
}

/// What the recording says of the data directory's storage (live: mdiag's
/// own view; FTDC: hostInfo's mountInfo), first found.
fn data_storage(rec: &Recording) -> Option<StorageFacts> {
    let info = rec.mongod.as_ref().and_then(|m| m.info.as_ref());
    info.and_then(|i| i.db_path_storage.clone())
        .or_else(|| rec.host.db_path.as_ref().and_then(|d| d.storage.clone()))
        .or_else(|| info.and_then(|i| i.db_path_mount.clone()))
}

/// The data disk among `names`: the one named, the one the mount's source
/// device is a partition of (`/dev/nvme0n1p2` → `nvme0n1`), else the only one.
fn pick_disk<'a>(
    names: impl Iterator<Item = &'a String> + Clone,
    data: Option<&StorageFacts>,
) -> Option<(String, &'static str)> {
    if let Some(d) = data.and_then(|d| d.disk.as_ref())
        && names.clone().any(|n| n == d)
    {
        return Some((d.clone(), "the disk under mongod's dbPath"));
    }
    let source = data
        .and_then(|d| d.source.as_deref())
        .and_then(|s| s.strip_prefix("/dev/"));
    if let Some(src) = source
        && let Some(n) = names
            .clone()
            .filter(|n| src.starts_with(n.as_str()))
            .max_by_key(|n| n.len())
    {
        return Some((n.clone(), "the device of the mount holding dbPath"));
    }
    let mut all = names;
    match (all.next(), all.next()) {
        (Some(only), None) => Some((only.clone(), "the only disk recorded")),
        _ => None,
    }
}

fn disk_facts(
    samples: &[(u64, &SystemSample)],
    newest: &SystemSample,
    data: Option<&StorageFacts>,
    put: &mut Put,
) {
    let Some((disk, found_by)) = pick_disk(newest.disks.keys(), data) else {
        return;
    };
    put("data_disk", Some(text(disk.clone())));
    put("data_disk_found_by", Some(text(found_by)));
    let Some((a, b, ms)) = ends(samples, |s| s.disks.get(&disk)) else {
        return;
    };
    let d = |f: fn(&crate::recording::mongod::DiskCounters) -> i64| (f(b) - f(a)).max(0) as f64;
    let secs = ms as f64 / 1000.0;
    let (reads, writes) = (d(|x| x.reads), d(|x| x.writes));
    let per = |t: f64, n: f64| if n > 0.0 { t / n } else { 0.0 };
    put("disk_reads_per_s", Some(float(reads / secs)));
    put("disk_writes_per_s", Some(float(writes / secs)));
    put("disk_io_per_s", Some(float((reads + writes) / secs)));
    put(
        "disk_read_await_ms",
        Some(float(per(d(|x| x.read_time_ms), reads))),
    );
    put(
        "disk_write_await_ms",
        Some(float(per(d(|x| x.write_time_ms), writes))),
    );
    put(
        "disk_await_ms",
        Some(float(per(
            d(|x| x.read_time_ms) + d(|x| x.write_time_ms),
            reads + writes,
        ))),
    );
    put(
        "disk_util",
        Some(float((d(|x| x.io_time_ms) / ms as f64).min(1.0))),
    );
}

fn space_facts(
    newest: &SystemSample,
    data: Option<&StorageFacts>,
    db_path: Option<&str>,
    put: &mut Put,
) {
    let named = data.and_then(|d| d.mount_point.clone());
    // Else the mount the data directory is under (longest prefix), from
    // mongod's dbPath (getCmdLineOpts) or the path mdiag found.
    let path = db_path.or(data.map(|d| d.path.as_str()));
    let under = || {
        let path = std::path::Path::new(path?);
        newest
            .mounts
            .keys()
            .filter(|m| path.starts_with(m.as_str()))
            .max_by_key(|m| m.len())
            .cloned()
    };
    let (mount, found_by) = match named {
        Some(m) if newest.mounts.contains_key(&m) => (Some(m), "the mount holding dbPath"),
        _ if newest.mounts.len() == 1 => (
            newest.mounts.keys().next().cloned(),
            "the only mount recorded",
        ),
        _ => (under(), "the longest mount point dbPath is under"),
    };
    let Some((mount, space)) = mount.and_then(|m| Some((m.clone(), newest.mounts.get(&m)?))) else {
        return;
    };
    put("data_mount", Some(text(mount)));
    put("data_mount_found_by", Some(text(found_by)));
    put(
        "data_fs_capacity_gb",
        Some(float(space.capacity as f64 / GIB)),
    );
    put(
        "data_fs_available_gb",
        Some(float(space.available as f64 / GIB)),
    );
    // As df counts it: used / (used + available to users).
    let used = (space.capacity - space.free).max(0) as f64;
    let room = used + space.available.max(0) as f64;
    if room > 0.0 {
        put("data_fs_used_share", Some(float(used / room)));
    }
}

/// Made-up samples a second apart (the example facts rules are checked
/// against, and tests): 2 CPUs, `steal` and `iowait` ms of each
/// second, 100 I/Os a second of `await_ms` each.
pub(crate) fn example_samples(n: i64, steal: i64, iowait: i64, await_ms: i64) -> Vec<SystemSample> {
    (0..n)
        .map(|i| SystemSample {
            cpu: Some(CpuTimes {
                user_ms: i * (1000 - steal - iowait),
                idle_ms: i * 1000,
                iowait_ms: i * iowait,
                steal_ms: i * steal,
                num_cpus: Some(2),
                ..Default::default()
            }),
            mem_total_kb: Some(8 << 20),
            mem_available_kb: Some(2 << 20),
            disks: [(
                "nvme0n1".to_owned(),
                DiskCounters {
                    reads: i * 50,
                    writes: i * 50,
                    read_time_ms: i * 50 * await_ms,
                    write_time_ms: i * 50 * await_ms,
                    io_time_ms: i * 600,
                },
            )]
            .into(),
            mounts: [(
                "/data".to_owned(),
                MountSpace {
                    capacity: 100 << 30,
                    available: 40 << 30,
                    free: 45 << 30,
                },
            )]
            .into(),
            ..Default::default()
        })
        .collect()
}
#[cfg(test)]
mod tests {

    use super::*;
    use crate::recording::mongod::{MongodRecording, MongodSlice};

    fn rec(samples: Vec<SystemSample>) -> Recording {
        let mut rec = crate::rules::testdata::baseline();
        rec.mongod.get_or_insert_with(MongodRecording::default);
        for slice in &mut rec.slices {
            slice.mongod.get_or_insert_with(MongodSlice::default).system = None;
        }
        for (i, s) in samples.into_iter().enumerate() {
            let slice = rec.slices.get_mut(i).expect("enough slices");
            slice.mongod.get_or_insert_with(MongodSlice::default).system = Some(s);
        }
        rec
    }

    #[test]
    fn shares_disk_latency_and_space() {
        let g = system_facts(&rec(example_samples(5, 200, 100, 30))).unwrap();
        // Per second over both CPUs: 700 user, 1000 idle, 100 iowait, 200 steal.
        assert_eq!(g["steal_share"], float(0.1));
        assert_eq!(g["iowait_share"], float(0.05));
        assert_eq!(g["steal_cpus"], float(0.2));
        assert_eq!(g["cpus"], FactValue::Int(2));
        assert_eq!(g["data_disk"], text("nvme0n1"));
        assert_eq!(g["disk_io_per_s"], float(100.0));
        assert_eq!(g["disk_await_ms"], float(30.0));
        assert_eq!(g["disk_util"], float(0.6));
        assert_eq!(g["data_mount"], text("/data"));
        assert_eq!(g["data_fs_available_gb"], float(40.0));
        // df: used 55 GiB of 55 + 40.
        let used = g["data_fs_used_share"].as_f64().unwrap();
        assert!((used - 55.0 / 95.0).abs() < 1e-9, "{used}");
        assert_eq!(g["mem_available_share"], float(0.25));
        // One sample: gauges only, no rates.
        let g = system_facts(&rec(example_samples(1, 200, 100, 30))).unwrap();
        assert!(!g.contains_key("steal_share") && g.contains_key("data_fs_used_share"));
        assert_eq!(system_facts(&rec(vec![])).unwrap_err(), NOT_RECORDED);
    }

    #[test]
    fn the_data_disk_is_named_found_from_the_mount_or_the_only_one() {
        let names: Vec<String> = vec!["sda".into(), "sdb".into()];
        let mut st = StorageFacts {
            source: Some("/dev/sdb2".into()),
            ..Default::default()
        };
        assert_eq!(pick_disk(names.iter(), Some(&st)).unwrap().0, "sdb");
        st.disk = Some("sda".into());
        assert_eq!(pick_disk(names.iter(), Some(&st)).unwrap().0, "sda");
        assert_eq!(pick_disk(names.iter(), None), None);
        assert_eq!(pick_disk(names[..1].iter(), None).unwrap().0, "sda");
    }

    #[test]
    fn without_a_named_mount_the_data_directory_is_found_under_the_longest_prefix() {
        let mut s = example_samples(1, 0, 0, 1).remove(0);
        let space = s.mounts["/data"].clone();
        s.mounts.insert(
            "/".into(),
            MountSpace {
                capacity: 1,
                ..space.clone()
            },
        );
        s.mounts.insert("/dev/shm".into(), space);
        let mut g = FactGroup::new();
        let mut put = |k: &str, v: Option<FactValue>| {
            if let Some(v) = v {
                g.insert(k.into(), v);
            }
        };
        space_facts(&s, None, Some("/data/db"), &mut put);
        assert_eq!(g["data_mount"], text("/data"));
        let mut g2 = FactGroup::new();
        let mut put = |k: &str, v: Option<FactValue>| {
            if let Some(v) = v {
                g2.insert(k.into(), v);
            }
        };
        space_facts(&s, None, Some("/tmp/x/db"), &mut put);
        assert_eq!(g2["data_mount"], text("/"));
        assert!(matches!(&g2["data_mount_found_by"], FactValue::Text(t) if t.contains("longest")));
    }
}
