//! cgroup limits of one process: v2 `cpu.max`, `memory.max`, `memory.high`,
//! and the v1 cpu / memory controllers' limits where those are on v1.
//!
//! Only the process's own cgroup is read, not its ancestors: a tighter limit
//! higher up is not seen.

use std::path::{Path, PathBuf};

use procfs::{
    FromRead, ProcessCGroups,
    process::{MountInfo, MountInfos},
};

use super::{read_parsed, read_trimmed, under};
use crate::recording::{CgroupFacts, CgroupV1Limits};

/// The cgroup of `pid` under `root` (proc/PID/cgroup) and its limits, found
/// through the cgroup mounts of mdiag's own mount table
/// (proc/self/mountinfo). `None` when proc/PID/cgroup is unreadable.
pub fn cgroup_facts(root: &Path, pid: u32) -> Option<CgroupFacts> {
    let cgroups = ProcessCGroups::from_file(root.join(format!("proc/{pid}/cgroup"))).ok()?;
    let mounts = MountInfos::from_file(root.join("proc/self/mountinfo"))
        .map(|m| m.0)
        .unwrap_or_default();
    let path = cgroups
        .0
        .iter()
        .find(|c| c.hierarchy == 0 && c.controllers.is_empty())
        .map(|c| c.pathname.clone());
    let v2_dir = path.as_deref().and_then(|p| {
        let mount = mounts.iter().find(|m| m.fs_type == "cgroup2")?;
        cgroup_dir(root, mount, p)
    });
    let v2 = |file: &str| v2_dir.as_ref().and_then(|d| read_trimmed(d.join(file)));
    // v1: the hierarchy holding `controller`, its path and directory.
    let v1 = |controller: &str| -> Option<(String, Option<PathBuf>)> {
        let cg = cgroups
            .0
            .iter()
            .find(|c| c.hierarchy != 0 && c.controllers.iter().any(|n| n == controller))?;
        let dir = mounts
            .iter()
            .find(|m| m.fs_type == "cgroup" && m.super_options.contains_key(controller))
            .and_then(|m| cgroup_dir(root, m, &cg.pathname));
        Some((cg.pathname.clone(), dir))
    };
    let (cpu, memory) = (v1("cpu"), v1("memory"));
    let in_v1 = |ctl: &Option<(String, Option<PathBuf>)>, file: &str| {
        ctl.as_ref()
            .and_then(|(_, dir)| dir.as_ref())
            .map(|d| d.join(file))
    };
    let v1 = (cpu.is_some() || memory.is_some()).then(|| CgroupV1Limits {
        cpu_cfs_quota_us: in_v1(&cpu, "cpu.cfs_quota_us").and_then(read_parsed),
        cpu_cfs_period_us: in_v1(&cpu, "cpu.cfs_period_us").and_then(read_parsed),
        memory_limit_in_bytes: in_v1(&memory, "memory.limit_in_bytes").and_then(read_parsed),
        cpu_path: cpu.map(|(p, _)| p),
        memory_path: memory.map(|(p, _)| p),
    });
    Some(CgroupFacts {
        pid,
        cpu_max: v2("cpu.max"),
        memory_max: v2("memory.max"),
        memory_high: v2("memory.high"),
        path,
        v1,
    })
}

/// Where the cgroup `path` of `mount`'s hierarchy lives under `root`; `None`
/// when the mount does not show that part of the hierarchy.
fn cgroup_dir(root: &Path, mount: &MountInfo, path: &str) -> Option<PathBuf> {
    let rel = Path::new(path).strip_prefix(&mount.root).ok()?;
    Some(under(root, &mount.mount_point).join(rel))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::write_tree;

    const MOUNTINFO: &str = "\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn cgroup_v2_limits_from_a_fake_tree() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let cg = "sys/fs/cgroup/system.slice/mongod.service";
        write_tree(
            r,
            &[
                (
                    "proc/self/mountinfo",
                    "27 1 254:0 / / rw - ext4 /dev/vda rw\n\
                     31 23 0:28 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
                ),
                ("proc/42/cgroup", "0::/system.slice/mongod.service\n"),
                (&format!("{cg}/cpu.max"), "200000 100000\n"),
                (&format!("{cg}/memory.max"), "8589934592\n"),
                (&format!("{cg}/memory.high"), "max\n"),
            ],
        );
        let f = cgroup_facts(r, 42).unwrap();
        assert_eq!(
            f,
            CgroupFacts {
                pid: 42,
                path: Some("/system.slice/mongod.service".into()),
                cpu_max: Some("200000 100000".into()),
                memory_max: Some("8589934592".into()),
                memory_high: Some("max".into()),
                v1: None,
            }
        );
        assert_eq!(f.memory_limit_bytes(), Some(8 << 30));
        assert_eq!(f.cpu_limit_millicpus(), Some(2000));
        let unlimited = CgroupFacts {
            cpu_max: Some("max 100000".into()),
            memory_max: Some("max".into()),
            ..f
        };
        assert_eq!(unlimited.memory_limit_bytes(), None);
        assert_eq!(unlimited.cpu_limit_millicpus(), None);
        assert!(cgroup_facts(r, 43).is_none(), "no such process");
    }

    #[test]
    fn a_container_mount_shows_only_its_subtree() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write_tree(
            r,
            &[
                (
                    "proc/self/mountinfo",
                    "31 23 0:28 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
                ),
                ("proc/7/cgroup", "0::/kubepods/pod1/mongod\n"),
                ("proc/8/cgroup", "0::/elsewhere\n"),
                ("sys/fs/cgroup/mongod/memory.max", "1073741824\n"),
            ],
        );
        let f = cgroup_facts(r, 7).unwrap();
        assert_eq!(f.memory_max.as_deref(), Some("1073741824"));
        let f = cgroup_facts(r, 8).unwrap();
        assert_eq!(f.path.as_deref(), Some("/elsewhere"));
        assert_eq!(f.memory_max, None, "outside the mounted subtree: unknown");
    }

    #[test]
    fn cgroup_v1_limits_from_a_hybrid_fake_tree() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write_tree(
            r,
            &[
                ("proc/self/mountinfo", MOUNTINFO),
                (
                    "proc/9/cgroup",
                    "9:name=systemd:/\n4:memory:/db\n2:cpu,cpuacct:/db\n0::/\n",
                ),
                ("sys/fs/cgroup/cpu,cpuacct/db/cpu.cfs_quota_us", "150000\n"),
                ("sys/fs/cgroup/cpu,cpuacct/db/cpu.cfs_period_us", "100000\n"),
                (
                    "sys/fs/cgroup/memory/db/memory.limit_in_bytes",
                    "9223372036854771712\n",
                ),
                // The unified hierarchy has no controllers here: no limit files.
                ("sys/fs/cgroup/unified/cgroup.procs", "9\n"),
            ],
        );
        let f = cgroup_facts(r, 9).unwrap();
        assert_eq!(f.path.as_deref(), Some("/"));
        assert_eq!(
            (&f.cpu_max, &f.memory_max, &f.memory_high),
            (&None, &None, &None)
        );
        assert_eq!(
            f.v1,
            Some(CgroupV1Limits {
                cpu_path: Some("/db".into()),
                cpu_cfs_quota_us: Some(150_000),
                cpu_cfs_period_us: Some(100_000),
                memory_path: Some("/db".into()),
                memory_limit_in_bytes: Some(9_223_372_036_854_771_712),
            })
        );
        assert_eq!(f.cpu_limit_millicpus(), Some(1500));
        assert_eq!(f.memory_limit_bytes(), None, "v1 'unlimited'");
        let mut limited = f.clone();
        limited.v1.as_mut().unwrap().memory_limit_in_bytes = Some(4 << 30);
        limited.v1.as_mut().unwrap().cpu_cfs_quota_us = Some(-1);
        assert_eq!(limited.memory_limit_bytes(), Some(4 << 30));
        assert_eq!(limited.cpu_limit_millicpus(), None);
    }

    #[test]
    fn cgroup_of_this_process() {
        let f = cgroup_facts(Path::new("/"), std::process::id()).unwrap();
        assert_eq!(f.pid, std::process::id());
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        match own.lines().find_map(|l| l.strip_prefix("0::")) {
            Some(p) => assert_eq!(f.path.as_deref(), Some(p)),
            None => assert_eq!(f.path, None),
        }
        if let Some(m) = own.lines().find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, ctl, path) = (parts.next()?, parts.next()?, parts.next()?);
            ctl.split(',').any(|c| c == "memory").then_some(path)
        }) {
            assert_eq!(f.v1.unwrap().memory_path.as_deref(), Some(m));
        }
    }
}
