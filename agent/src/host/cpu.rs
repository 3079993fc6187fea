//! CPU facts: model name, the kernel's fair scheduler, SMT / cores / sockets.

use std::{collections::BTreeSet, path::Path};

use procfs::{Current, KernelVersion};

use super::{parse_cpulist, read_trimmed};
use crate::recording::CpuTopology;

/// Model name from /proc/cpuinfo ("unknown" when absent).
pub(super) fn cpu_model() -> String {
    let Ok(info) = procfs::CpuInfo::current() else {
        return "unknown".into();
    };
    // x86 "model name", arm64 sometimes "CPU part" only, s390x "machine" in the header.
    for key in ["model name", "Model", "Processor", "cpu model"] {
        if let Some(v) = info.get_field(0, key) {
            return v.trim().to_owned();
        }
    }
    info.fields
        .get("machine")
        .map(|m| format!("IBM Z machine {}", m.trim()))
        .unwrap_or_else(|| "unknown".into())
}

/// The fair scheduler of a kernel release ("6.8.0-45-generic"): EEVDF
/// replaced CFS in 6.6. `None` when the release does not parse.
pub fn sched_class(release: &str) -> Option<String> {
    let v = KernelVersion::from_str(release.trim()).ok()?;
    let class = if v >= KernelVersion::new(6, 6, 0) {
        "eevdf"
    } else {
        "cfs"
    };
    Some(class.into())
}

/// SMT, cores and sockets of the online CPUs under `root`
/// (sys/devices/system/cpu); `None` when the online list is unreadable. A
/// count is `None` when some online CPU's topology is unreadable.
pub fn cpu_topology(root: &Path) -> Option<CpuTopology> {
    let cpu_dir = root.join("sys/devices/system/cpu");
    let online = parse_cpulist(&read_trimmed(cpu_dir.join("online"))?)?;
    let mut cores = BTreeSet::new();
    let mut sockets = BTreeSet::new();
    let mut threads_per_core = 0u32;
    let (mut cores_known, mut sockets_known) = (!online.is_empty(), !online.is_empty());
    for cpu in online {
        let topo = cpu_dir.join(format!("cpu{cpu}/topology"));
        // Each core has one sibling list: distinct lists = distinct cores.
        match read_trimmed(topo.join("thread_siblings_list"))
            .and_then(|l| parse_cpulist(&l).map(|cpus| (l, cpus.len())))
        {
            Some((list, n)) => {
                threads_per_core = threads_per_core.max(u32::try_from(n).unwrap_or(u32::MAX));
                cores.insert(list);
            }
            None => cores_known = false,
        }
        match read_trimmed(topo.join("physical_package_id")) {
            Some(id) => {
                sockets.insert(id);
            }
            None => sockets_known = false,
        }
    }
    let count = |s: &BTreeSet<String>| u32::try_from(s.len()).ok();
    let threads_per_core = cores_known.then_some(threads_per_core);
    let smt_active = match read_trimmed(cpu_dir.join("smt/active")).as_deref() {
        Some("1") => Some(true),
        Some("0") => Some(false),
        _ => threads_per_core.map(|n| n > 1),
    };
    Some(CpuTopology {
        smt_active,
        threads_per_core,
        cores: if cores_known { count(&cores) } else { None },
        sockets: if sockets_known { count(&sockets) } else { None },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::write_tree;

    #[test]
    fn scheduler_class_from_the_release() {
        assert_eq!(sched_class("6.18.44-fc-v769").as_deref(), Some("eevdf"));
        assert_eq!(sched_class("6.6.0").as_deref(), Some("eevdf"));
        assert_eq!(sched_class("6.5.13-generic").as_deref(), Some("cfs"));
        assert_eq!(sched_class("5.15.0-105-generic").as_deref(), Some("cfs"));
        assert_eq!(
            sched_class("4.18.0-553.el8_10.x86_64").as_deref(),
            Some("cfs")
        );
        assert_eq!(sched_class("unknown"), None);
    }

    /// Two sockets of two cores with two threads each; CPU 7 offline.
    fn smt_tree(root: &Path) {
        let mut files = vec![(
            "sys/devices/system/cpu/online".to_string(),
            "0-6\n".to_string(),
        )];
        for cpu in 0..8u32 {
            let socket = cpu / 4;
            let core = cpu / 2;
            let siblings = format!("{}-{}\n", core * 2, core * 2 + 1);
            let t = format!("sys/devices/system/cpu/cpu{cpu}/topology");
            files.push((format!("{t}/thread_siblings_list"), siblings));
            files.push((format!("{t}/physical_package_id"), format!("{socket}\n")));
        }
        let files: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, c)| (p.as_str(), c.as_str()))
            .collect();
        write_tree(root, &files);
    }

    #[test]
    fn topology_from_a_fake_tree() {
        let root = tempfile::tempdir().unwrap();
        smt_tree(root.path());
        let t = cpu_topology(root.path()).unwrap();
        assert_eq!(
            t,
            CpuTopology {
                smt_active: Some(true),
                threads_per_core: Some(2),
                cores: Some(4),
                sockets: Some(2),
            }
        );
        // smt/active wins over the sibling lists.
        write_tree(root.path(), &[("sys/devices/system/cpu/smt/active", "0\n")]);
        assert_eq!(cpu_topology(root.path()).unwrap().smt_active, Some(false));
        // An unreadable package id leaves the socket count unknown, not wrong.
        std::fs::remove_file(
            root.path()
                .join("sys/devices/system/cpu/cpu3/topology/physical_package_id"),
        )
        .unwrap();
        let t = cpu_topology(root.path()).unwrap();
        assert_eq!((t.sockets, t.cores), (None, Some(4)));
        assert!(cpu_topology(&root.path().join("missing")).is_none());
    }
}
