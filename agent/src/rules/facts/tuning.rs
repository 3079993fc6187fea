//! The `tuning` fact group: the host's memory tuning (transparent huge pages,
//! writeback thresholds, swapping, NUMA, mappings) and the target process's
//! limits, as recorded in the host facts.
//!
//! These are settings, not measurements: the rules built on them (THP,
//! dirty-page writeback, the production-notes basics) say what the setting is
//! and what mongod's documentation or a measured study recommends. A value the
//! recording could not read is left out of the group, so a rule that reads it
//! is *not assessed* with the reason instead of being guessed.

use super::{FactGroup, FactValue, float, int, text};
use crate::recording::model::Recording;

/// Why the group is absent.
pub const TUNING_UNREADABLE: &str =
    "the host's memory settings were not recorded (older recording, or /proc/meminfo unreadable)";

const GIB: f64 = (1u64 << 30) as f64;

/// The dirty-page threshold the kernel applies, in bytes: `*_bytes` when set,
/// else `ratio` % of `available` (the kernel's base is "dirtyable" memory,
/// free plus reclaimable page cache, which MemAvailable approximates).
pub fn dirty_threshold_bytes(
    bytes: Option<u64>,
    ratio: Option<u64>,
    available: Option<u64>,
) -> Option<u64> {
    match bytes {
        Some(b) if b > 0 => Some(b),
        _ => Some(available?.saturating_mul(ratio?) / 100),
    }
}

/// The memory mongod may use, in bytes: the host's MemTotal, lowered by the
/// target's cgroup limit and by the limit mongod itself reports (hostInfo
/// memLimitMB, which is the cgroup limit when lower than RAM). `None` when
/// none is known.
pub fn memory_limit_bytes(rec: &Recording) -> Option<u64> {
    let total = rec.host.memory.as_ref().and_then(|m| m.mem_total_bytes);
    let cgroup = rec
        .host
        .target_process
        .as_ref()
        .and_then(|p| p.cgroup.as_ref())
        .and_then(|c| c.memory_limit_bytes());
    let mongod = rec
        .mongod
        .as_ref()
        .and_then(|m| m.info.as_ref())
        .and_then(|i| i.host_mem_limit_mb)
        .and_then(|mb| u64::try_from(mb).ok())
        .filter(|mb| *mb > 0)
        .map(|mb| mb << 20);
    [total, cgroup, mongod].into_iter().flatten().min()
}

/// The dirty-page limits to suggest for `limit` bytes of memory:
/// vm.dirty_background_bytes and vm.dirty_bytes in the proportion the one
/// measured study used (64 MiB and 512 MiB on a 128 GiB host, i.e. 1/2048
/// of memory and 8 times that), scaled linearly with the memory mongod may
/// use, the background value kept between 16 MiB and 1 GiB and rounded down
/// to a MiB. A linear scaling of one measured point is an assumption, said
/// so in the rule.
pub fn suggested_dirty_bytes(limit: u64) -> (u64, u64) {
    const MIB: u64 = 1 << 20;
    let background = (limit / 2048).clamp(16 * MIB, 1024 * MIB) / MIB * MIB;
    (background, background * 8)
}

/// Derives the `memory` group; `Err` with the reason when the recording has
/// no memory facts.
pub fn tuning_facts(rec: &Recording) -> Result<FactGroup, String> {
    let m = rec.host.memory.as_ref().ok_or(TUNING_UNREADABLE)?;
    let mut g = FactGroup::new();
    let mut put = |k: &str, v: Option<FactValue>| {
        if let Some(v) = v {
            g.insert(k.into(), v);
        }
    };
    memory_facts(m, &mut put);
    dirty_facts(m, &mut put);
    vm_facts(rec, m, &mut put);
    process_facts(rec, &mut put);
    system_facts(rec, &mut put);
    Ok(g)
}

/// Bytes as GiB, when known.
fn gib(b: Option<u64>) -> Option<FactValue> {
    b.map(|b| float(b as f64 / GIB))
}

/// Memory, swap and transparent huge pages.
fn memory_facts(
    m: &crate::recording::model::MemoryFacts,
    put: &mut dyn FnMut(&str, Option<FactValue>),
) {
    put("mem_total_gib", gib(m.mem_total_bytes));
    put("mem_available_gib", gib(m.mem_available_bytes));
    put("swap_total_gib", gib(m.swap_total_bytes));
    // A swap file for a host without swap: an eighth of memory, 1 to 8 GiB.
    put(
        "suggested_swap_gib",
        m.mem_total_bytes
            .map(|b| int(((b as f64 / GIB) / 8.0).ceil().clamp(1.0, 8.0) as u64)),
    );
    put(
        "swap_present",
        m.swap_total_bytes.map(|s| FactValue::Bool(s > 0)),
    );

    let thp = m.thp.as_ref();
    let selected = |c: Option<&crate::recording::model::SysfsChoice>| {
        c.and_then(|c| c.selected.clone()).map(text)
    };
    put(
        "thp_enabled",
        selected(thp.and_then(|t| t.enabled.as_ref())),
    );
    put("thp_defrag", selected(thp.and_then(|t| t.defrag.as_ref())));
    put(
        "thp_max_ptes_none",
        thp.and_then(|t| t.khugepaged_max_ptes_none).map(int),
    );
}

/// The dirty page limits: as set, and the thresholds they give.
fn dirty_facts(
    m: &crate::recording::model::MemoryFacts,
    put: &mut dyn FnMut(&str, Option<FactValue>),
) {
    let vm = &m.vm;
    put("dirty_ratio", vm.dirty_ratio.map(int));
    put("dirty_background_ratio", vm.dirty_background_ratio.map(int));
    put("dirty_bytes", vm.dirty_bytes.map(int));
    put("dirty_background_bytes", vm.dirty_background_bytes.map(int));
    let by_ratio = |bytes: Option<u64>| bytes.map(|b| FactValue::Bool(b == 0));
    put("dirty_uses_ratio", by_ratio(vm.dirty_bytes));
    put(
        "dirty_background_uses_ratio",
        by_ratio(vm.dirty_background_bytes),
    );
    put(
        "dirty_threshold_gib",
        gib(dirty_threshold_bytes(
            vm.dirty_bytes,
            vm.dirty_ratio,
            m.mem_available_bytes,
        )),
    );
    put(
        "dirty_background_threshold_gib",
        gib(dirty_threshold_bytes(
            vm.dirty_background_bytes,
            vm.dirty_background_ratio,
            m.mem_available_bytes,
        )),
    );
}

/// Swappiness, overcommit, zone reclaim, map count, NUMA and TCP keepalive.
fn vm_facts(
    rec: &Recording,
    m: &crate::recording::model::MemoryFacts,
    put: &mut dyn FnMut(&str, Option<FactValue>),
) {
    let vm = &m.vm;
    put("swappiness", vm.swappiness.map(int));
    put("overcommit_memory", vm.overcommit_memory.map(int));
    put("overcommit_ratio", vm.overcommit_ratio.map(int));
    put("overcommit_kbytes", vm.overcommit_kbytes.map(int));
    put("commit_limit_gib", gib(m.commit_limit_bytes));
    put("committed_as_gib", gib(m.committed_as_bytes));
    put(
        "committed_share",
        m.committed_as_bytes
            .zip(m.commit_limit_bytes)
            .filter(|(_, limit)| *limit > 0)
            .map(|(used, limit)| float(used as f64 / limit as f64)),
    );
    put("zone_reclaim_mode", vm.zone_reclaim_mode.map(int));
    put("max_map_count", vm.max_map_count.map(int));
    put("numa_balancing", m.numa_balancing.map(int));
    put("tcp_keepalive_time", rec.host.tcp_keepalive_time.map(int));

    let nodes = rec.host.numa_nodes.as_ref().map(|n| {
        n.iter()
            .filter(|n| !n.cpus.trim().is_empty() || n.mem_total_bytes.unwrap_or(0) > 0)
            .count() as u64
    });
    put("numa_nodes", nodes.map(int));
}

/// The target process: THP, its memory limit, NUMA policy and resource
/// limits.
fn process_facts(rec: &Recording, put: &mut dyn FnMut(&str, Option<FactValue>)) {
    let process = rec.host.target_process.as_ref();
    put(
        "thp_process_enabled",
        process.and_then(|p| p.thp_enabled).map(FactValue::Bool),
    );
    let limit_bytes = memory_limit_bytes(rec);
    put("mem_limit_gib", gib(limit_bytes));
    if let Some(limit) = limit_bytes {
        let (background, dirty) = suggested_dirty_bytes(limit);
        put("suggested_dirty_background_bytes", Some(int(background)));
        put("suggested_dirty_bytes", Some(int(dirty)));
    }
    put(
        "numa_policy",
        process.and_then(|p| p.numa_policy.clone()).map(text),
    );
    put(
        "numa_interleaved",
        process
            .and_then(|p| p.numa_policy.as_deref())
            .map(|p| FactValue::Bool(p.starts_with("interleave"))),
    );
    // "unlimited" is the largest integer a fact holds.
    let limit = |l: Option<u64>| int(l.unwrap_or(u64::MAX));
    // mongod's own hostInfo reports its soft limit (not the hard one): the
    // fallback when the target's /proc limits were not read (FTDC, --uri).
    let from_mongod = rec
        .mongod
        .as_ref()
        .and_then(|m| m.info.as_ref())
        .and_then(|i| i.max_open_files)
        .and_then(|n| u64::try_from(n).ok());
    put(
        "open_files_soft",
        process
            .and_then(|p| p.max_open_files.as_ref())
            .map(|l| limit(l.soft))
            .or_else(|| from_mongod.map(int)),
    );
    put(
        "open_files_hard",
        process
            .and_then(|p| p.max_open_files.as_ref())
            .map(|l| limit(l.hard)),
    );
    let nproc = process.and_then(|p| p.max_processes.as_ref());
    put("nproc_soft", nproc.map(|l| limit(l.soft)));
    put("nproc_hard", nproc.map(|l| limit(l.hard)));
    put(
        "nproc_fix_value",
        nproc.map(|l| text(nproc_fix_value(l.soft))),
    );
    let memlock = process.and_then(|p| p.max_locked_memory.as_ref());
    put("memlock_soft", memlock.map(|l| limit(l.soft)));
    put("memlock_hard", memlock.map(|l| limit(l.hard)));
    let page = rec.host.page_size.unwrap_or(4096);
    put(
        "memlock_min_bytes",
        Some(int(MEMLOCK_MIN_PAGES.saturating_mul(page))),
    );
}

/// mongod's startup check (warning 22188): the soft locked-memory limit
/// must hold at least 16 pages for its secure allocator.
pub const MEMLOCK_MIN_PAGES: u64 = 16;
/// MongoDB's recommended processes / threads limit (the ulimit page's `-u`).
pub const NPROC_RECOMMENDED: u64 = 64_000;
/// The largest pid_max of 64-bit kernels (PID_MAX_LIMIT), what systemd sets.
pub const PID_MAX_LIMIT: u64 = 4_194_304;
/// fs.file-max of MongoDB's operations checklist ("for large systems, …
/// a good starting point").
pub const FILE_MAX_WANTED: u64 = 98_000;

/// The LimitNPROC= value a fix writes: the recommended 64000, or the
/// target's current soft limit when that is higher ("infinity" when
/// unlimited), so that the fix never lowers it.
pub fn nproc_fix_value(soft: Option<u64>) -> String {
    match soft {
        None => "infinity".into(),
        Some(n) => n.max(NPROC_RECOMMENDED).to_string(),
    }
}

/// The host-wide facts of [`crate::recording::SystemFacts`]: kernel limits,
/// the clock, tuned, and every mongod of the host.
fn system_facts(rec: &Recording, put: &mut dyn FnMut(&str, Option<FactValue>)) {
    let Some(sys) = rec.host.system.as_ref() else {
        return;
    };
    put("file_max", sys.file_max.map(int));
    put("file_handles", sys.file_handles.map(int));
    put("pid_max", sys.pid_max.map(int));
    put("threads_max", sys.threads_max.map(int));
    put("tasks", sys.tasks.map(int));
    put(
        "suggested_pid_max",
        sys.pid_max.map(|v| int(v.max(PID_MAX_LIMIT))),
    );
    // threads-max is the kernel's own, from RAM (an eighth of it for the
    // threads' structures): raised only to twice the tasks running, when
    // the host is that close to it. file-max: MongoDB's figure, or twice
    // the handles in use.
    put(
        "suggested_threads_max",
        sys.threads_max
            .map(|v| int(v.max(sys.tasks.unwrap_or(0).saturating_mul(2)))),
    );
    put(
        "suggested_file_max",
        sys.file_max.map(|v| {
            int(v
                .max(FILE_MAX_WANTED)
                .max(sys.file_handles.unwrap_or(0).saturating_mul(2)))
        }),
    );
    if let Some(c) = &sys.clock {
        put(
            "clock_unsynchronised",
            Some(FactValue::Bool(c.unsynchronised)),
        );
        put("clock_state", Some(FactValue::Int(i64::from(c.state))));
        put(
            "clock_max_error_ms",
            Some(float(c.max_error_us as f64 / 1000.0)),
        );
        put("clock_services", Some(text(c.services.join(", "))));
        // timedatectl's NTP setting as it most likely was: on when a time
        // service ran (what the fix's revert restores).
        put(
            "clock_ntp_setting",
            Some(text(if c.services.is_empty() {
                "false"
            } else {
                "true"
            })),
        );
    }
    let tuned = sys.tuned.as_ref();
    put(
        "tuned_profile",
        Some(text(tuned.map_or("", |t| t.profile.as_str()))),
    );
    put(
        "tuned_thp",
        Some(text(tuned.and_then(|t| t.thp.as_deref()).unwrap_or(""))),
    );
    put(
        "tuned_readahead",
        Some(text(
            tuned.and_then(|t| t.readahead.as_deref()).unwrap_or(""),
        )),
    );
    put(
        "tuned_running",
        Some(FactValue::Bool(tuned.is_some_and(|t| t.running))),
    );
    if let Some(mongods) = &sys.mongods {
        mongod_instances(rec, mongods, put);
    }
    neighbour_facts(rec, sys, put);
}

/// What shares the host with mongod (`host/neighbours.rs`): the share of
/// memory the other processes hold anonymously (what swap would hold for
/// them), the largest of them, and whether this is a Kubernetes node (a
/// kubelet, its configuration, or a target in a `kubepods` cgroup).
fn neighbour_facts(
    rec: &Recording,
    sys: &crate::recording::SystemFacts,
    put: &mut dyn FnMut(&str, Option<FactValue>),
) {
    let total = rec.host.memory.as_ref().and_then(|m| m.mem_total_bytes);
    put("other_anon_gib", gib(sys.other_anon_bytes));
    put(
        "other_anon_share",
        sys.other_anon_bytes
            .zip(total.filter(|t| *t > 0))
            .map(|(o, t)| float(o as f64 / t as f64)),
    );
    put(
        "largest_others",
        sys.largest_others.as_ref().map(|l| {
            text(
                l.iter()
                    .map(|p| {
                        format!(
                            "{} (pid {}) {:.1} GiB",
                            p.comm,
                            p.pid,
                            p.anon_bytes as f64 / GIB
                        )
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
            )
        }),
    );
    let in_kubepods = rec
        .host
        .target_process
        .as_ref()
        .and_then(|p| p.cgroup.as_ref())
        .and_then(|c| c.path.as_deref())
        .is_some_and(|p| p.contains("kubepods"));
    put(
        "kubernetes_node",
        match sys.kubernetes_node {
            Some(k) => Some(FactValue::Bool(k || in_kubepods)),
            None => in_kubepods.then_some(FactValue::Bool(true)),
        },
    );
}

/// `mongod_instances`, the sum of their WiredTiger caches (each the size it
/// was given, else mongod's default for its memory limit: the host's memory
/// or its cgroup's limit, whichever is lower), and a size that lets them
/// all fit in mongod's default share of the host's memory.
fn mongod_instances(
    rec: &Recording,
    mongods: &[crate::recording::MongodProcess],
    put: &mut dyn FnMut(&str, Option<FactValue>),
) {
    let total = rec
        .host
        .memory
        .as_ref()
        .and_then(|m| m.mem_total_bytes)
        .map(|b| b as f64 / GIB);
    put("mongod_instances", Some(int(mongods.len() as u64)));
    let Some(total) = total else { return };
    let mut sum = 0.0;
    let mut parts = Vec::new();
    for m in mongods {
        let limit = m
            .memory_limit_bytes
            .map_or(total, |b| (b as f64 / GIB).min(total));
        let gb = m.cache_size_mb.map_or_else(
            || crate::rules::facts::mongod::default_cache_size_gb(limit),
            |mb| mb as f64 / 1024.0,
        );
        sum += gb;
        parts.push(format!("pid {}: {gb:.1} GB ({})", m.pid, m.cache_from));
    }
    put("mongod_cache_sum_gib", Some(float(sum)));
    put(
        "mongod_default_cache_gb",
        Some(float(crate::rules::facts::mongod::default_cache_size_gb(
            total,
        ))),
    );
    put("mongod_caches", Some(text(parts.join("; "))));
    let n = mongods.len().max(1) as f64;
    put(
        "mongod_suggested_cache_gb",
        Some(float(
            ((crate::rules::facts::mongod::default_cache_size_gb(total) / n * 10.0).floor() / 10.0)
                .max(0.25),
        )),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::model::{
        MemoryFacts, NumaNode, ProcessFacts, ResourceLimit, SysfsChoice, ThpFacts, VmSysctls,
    };

    fn choice(sel: &str) -> Option<SysfsChoice> {
        Some(SysfsChoice {
            selected: Some(sel.into()),
            raw: format!("[{sel}]"),
        })
    }

    #[test]
    fn ratio_thresholds_use_available_memory_bytes_win() {
        assert_eq!(
            dirty_threshold_bytes(Some(0), Some(20), Some(100 << 30)),
            Some(20 << 30)
        );
        assert_eq!(
            dirty_threshold_bytes(Some(536_870_912), Some(20), Some(100 << 30)),
            Some(536_870_912)
        );
        assert_eq!(dirty_threshold_bytes(None, Some(20), None), None);
    }

    #[test]
    fn group_has_the_settings_and_leaves_out_what_is_unknown() {
        let mut rec = super::super::example_recording();
        rec.host.memory = Some(MemoryFacts {
            mem_total_bytes: Some(256 << 30),
            mem_available_bytes: Some(200 << 30),
            swap_total_bytes: Some(0),
            thp: Some(ThpFacts {
                enabled: choice("madvise"),
                defrag: choice("madvise"),
                khugepaged_max_ptes_none: Some(511),
            }),
            vm: VmSysctls {
                dirty_ratio: Some(20),
                dirty_background_ratio: Some(10),
                dirty_bytes: Some(0),
                dirty_background_bytes: Some(0),
                swappiness: Some(60),
                overcommit_memory: Some(2),
                overcommit_ratio: Some(50),
                ..VmSysctls::default()
            },
            numa_balancing: None,
            commit_limit_bytes: Some(128 << 30),
            committed_as_bytes: Some(120 << 30),
        });
        rec.host.numa_nodes = Some(vec![
            NumaNode {
                id: 0,
                cpus: "0-7".into(),
                mem_total_bytes: Some(128 << 30),
            },
            NumaNode {
                id: 1,
                cpus: "8-15".into(),
                mem_total_bytes: Some(128 << 30),
            },
        ]);
        rec.host.target_process = Some(ProcessFacts {
            pid: 100,
            numa_policy: Some("default".into()),
            max_open_files: Some(ResourceLimit {
                soft: Some(1024),
                hard: None,
            }),
            ..ProcessFacts::default()
        });
        let g = tuning_facts(&rec).unwrap();
        assert_eq!(g["thp_enabled"], FactValue::Text("madvise".into()));
        assert_eq!(g["thp_max_ptes_none"], FactValue::Int(511));
        assert_eq!(g["dirty_uses_ratio"], FactValue::Bool(true));
        assert_eq!(g["dirty_threshold_gib"], FactValue::Float(40.0));
        assert_eq!(g["dirty_background_threshold_gib"], FactValue::Float(20.0));
        assert_eq!(g["swap_present"], FactValue::Bool(false));
        assert_eq!(g["numa_nodes"], FactValue::Int(2));
        assert_eq!(g["numa_interleaved"], FactValue::Bool(false));
        assert_eq!(g["open_files_soft"], FactValue::Int(1024));
        assert_eq!(g["open_files_hard"], FactValue::Int(i64::MAX));
        assert_eq!(g["overcommit_memory"], FactValue::Int(2));
        assert_eq!(g["overcommit_ratio"], FactValue::Int(50));
        assert_eq!(g["commit_limit_gib"], FactValue::Float(128.0));
        assert_eq!(g["committed_as_gib"], FactValue::Float(120.0));
        assert_eq!(g["committed_share"], FactValue::Float(120.0 / 128.0));
        // Not recorded: left out, never guessed.
        assert!(!g.contains_key("zone_reclaim_mode"));
        assert!(!g.contains_key("numa_balancing"));
        assert!(!g.contains_key("overcommit_kbytes"));
    }

    #[test]
    fn dirty_limits_scale_with_the_memory_mongod_may_use() {
        const MIB: u64 = 1 << 20;
        // The study's host: 128 GiB gives its 64 MiB / 512 MiB.
        assert_eq!(suggested_dirty_bytes(128 << 30), (64 * MIB, 512 * MIB));
        assert_eq!(suggested_dirty_bytes(512 << 30), (256 * MIB, 2048 * MIB));
        // Small and huge hosts stay within the bounds.
        assert_eq!(suggested_dirty_bytes(8 << 30), (16 * MIB, 128 * MIB));
        assert_eq!(suggested_dirty_bytes(8 << 40), (1024 * MIB, 8192 * MIB));
        // A cgroup limit below RAM is the memory mongod has.
        let mut rec = super::super::example_recording();
        if let Some(m) = rec.host.memory.as_mut() {
            m.mem_total_bytes = Some(256 << 30);
        }
        rec.host.target_process = Some(ProcessFacts {
            cgroup: Some(crate::recording::model::CgroupFacts {
                memory_max: Some((32u64 << 30).to_string()),
                ..Default::default()
            }),
            ..ProcessFacts::default()
        });
        assert_eq!(memory_limit_bytes(&rec), Some(32 << 30));
        let g = tuning_facts(&rec).unwrap();
        assert_eq!(g["mem_limit_gib"], FactValue::Float(32.0));
        assert_eq!(
            g["suggested_dirty_background_bytes"],
            FactValue::Int(16 * 1024 * 1024)
        );
    }

    #[test]
    fn the_processes_limit_a_fix_writes_never_lowers_the_current_one() {
        assert_eq!(nproc_fix_value(Some(4096)), "64000");
        assert_eq!(nproc_fix_value(Some(64_000)), "64000");
        assert_eq!(nproc_fix_value(Some(200_000)), "200000");
        assert_eq!(nproc_fix_value(None), "infinity");
    }

    #[test]
    fn several_mongod_caches_are_summed_with_each_ones_default() {
        let mut rec = super::super::example_recording();
        // 64 GiB: the default for one instance is 31.5 GB; the second one
        // is in an 8 GiB cgroup (default 3.5 GB), the third was given 2 GB.
        if let Some(m) = rec.host.memory.as_mut() {
            m.mem_total_bytes = Some(64 << 30);
        }
        let mongod = |pid, mb, from: &str, limit| crate::recording::MongodProcess {
            pid,
            cache_size_mb: mb,
            cache_from: from.into(),
            memory_limit_bytes: limit,
        };
        rec.host.system.as_mut().unwrap().mongods = Some(vec![
            mongod(1, None, "default", None),
            mongod(2, None, "default", Some(8 << 30)),
            mongod(3, Some(2048), "--wiredTigerCacheSizeGB", None),
        ]);
        let g = tuning_facts(&rec).unwrap();
        assert_eq!(g["mongod_instances"], FactValue::Int(3));
        assert_eq!(
            g["mongod_cache_sum_gib"],
            FactValue::Float(31.5 + 3.5 + 2.0)
        );
        assert_eq!(g["mongod_default_cache_gb"], FactValue::Float(31.5));
        // 31.5 / 3 = 10.5.
        assert_eq!(g["mongod_suggested_cache_gb"], FactValue::Float(10.5));
        assert_eq!(
            g["mongod_caches"],
            FactValue::Text(
                "pid 1: 31.5 GB (default); pid 2: 3.5 GB (default); pid 3: 2.0 GB (--wiredTigerCacheSizeGB)"
                    .into()
            )
        );
    }

    #[test]
    fn absent_without_memory_facts() {
        let mut rec = super::super::example_recording();
        rec.host.memory = None;
        assert_eq!(tuning_facts(&rec).unwrap_err(), TUNING_UNREADABLE);
    }
}
