//! Memory facts: sizes, transparent huge pages, memory sysctls, NUMA nodes.

use std::path::Path;

use procfs::FromRead;

use super::{read_choice, read_parsed, read_trimmed, sorted_names};
use crate::recording::{MemoryFacts, NumaNode, ThpFacts, VmSysctls};

const THP: &str = "sys/kernel/mm/transparent_hugepage";

/// Memory sizes (proc/meminfo), THP and the memory sysctls under `root`.
pub fn memory_facts(root: &Path) -> MemoryFacts {
    let meminfo = procfs::Meminfo::from_file(root.join("proc/meminfo")).ok();
    let thp = root.join(THP);
    let thp = thp.is_dir().then(|| ThpFacts {
        enabled: read_choice(thp.join("enabled")),
        defrag: read_choice(thp.join("defrag")),
        khugepaged_max_ptes_none: read_parsed(thp.join("khugepaged/max_ptes_none")),
    });
    let vm = root.join("proc/sys/vm");
    let sysctl = |name: &str| read_parsed::<u64>(vm.join(name));
    MemoryFacts {
        mem_total_bytes: meminfo.as_ref().map(|m| m.mem_total),
        mem_available_bytes: meminfo.as_ref().and_then(|m| m.mem_available),
        swap_total_bytes: meminfo.as_ref().map(|m| m.swap_total),
        thp,
        vm: VmSysctls {
            dirty_ratio: sysctl("dirty_ratio"),
            dirty_background_ratio: sysctl("dirty_background_ratio"),
            dirty_bytes: sysctl("dirty_bytes"),
            dirty_background_bytes: sysctl("dirty_background_bytes"),
            dirty_expire_centisecs: sysctl("dirty_expire_centisecs"),
            dirty_writeback_centisecs: sysctl("dirty_writeback_centisecs"),
            swappiness: sysctl("swappiness"),
            overcommit_memory: sysctl("overcommit_memory"),
            zone_reclaim_mode: sysctl("zone_reclaim_mode"),
            max_map_count: sysctl("max_map_count"),
            overcommit_ratio: sysctl("overcommit_ratio"),
            overcommit_kbytes: sysctl("overcommit_kbytes"),
        },
        numa_balancing: read_parsed(root.join("proc/sys/kernel/numa_balancing")),
        commit_limit_bytes: meminfo.as_ref().and_then(|m| m.commit_limit),
        committed_as_bytes: meminfo.as_ref().map(|m| m.committed_as),
    }
}

/// The NUMA nodes under `root` (sys/devices/system/node/nodeN), by id;
/// `None` when there is no node directory (a kernel without NUMA).
pub fn numa_nodes(root: &Path) -> Option<Vec<NumaNode>> {
    let dir = root.join("sys/devices/system/node");
    let mut nodes: Vec<NumaNode> = sorted_names(&dir)
        .into_iter()
        .filter_map(|name| {
            let id: u32 = name.strip_prefix("node")?.parse().ok()?;
            let node = dir.join(&name);
            Some(NumaNode {
                id,
                cpus: read_trimmed(node.join("cpulist"))?,
                mem_total_bytes: read_trimmed(node.join("meminfo"))
                    .and_then(|m| node_mem_total(&m)),
            })
        })
        .collect();
    nodes.sort_by_key(|n| n.id);
    (!nodes.is_empty()).then_some(nodes)
}

/// "Node 0 MemTotal:  12674848 kB" of a node's meminfo, in bytes (procfs
/// has no parser for the per-node file).
fn node_mem_total(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        let (Some("Node"), Some(_), Some("MemTotal:"), Some(kb), Some("kB")) = (
            words.next(),
            words.next(),
            words.next(),
            words.next(),
            words.next(),
        ) else {
            return None;
        };
        kb.parse::<u64>().ok()?.checked_mul(1024)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::write_tree;

    const MEMINFO: &str = "MemTotal:       16384000 kB
MemFree:         1000000 kB
MemAvailable:    8192000 kB
Buffers:           35584 kB
Cached:          7220688 kB
SwapCached:            0 kB
Active:          3358924 kB
Inactive:        5846944 kB
SwapTotal:       2097152 kB
SwapFree:        2097152 kB
Dirty:               448 kB
Writeback:             0 kB
AnonPages:       1961420 kB
Mapped:           193908 kB
Slab:             342124 kB
CommitLimit:    10289152 kB
Committed_AS:    2204456 kB
VmallocTotal:   34359738367 kB
VmallocUsed:        6132 kB
VmallocChunk:          0 kB
HugePages_Total:       0
Hugepagesize:       2048 kB
";

    #[test]
    fn memory_facts_from_a_fake_tree() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write_tree(
            r,
            &[
                ("proc/meminfo", MEMINFO),
                (
                    "sys/kernel/mm/transparent_hugepage/enabled",
                    "[always] madvise never\n",
                ),
                (
                    "sys/kernel/mm/transparent_hugepage/defrag",
                    "always defer defer+madvise [madvise] never\n",
                ),
                (
                    "sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none",
                    "511\n",
                ),
                ("proc/sys/vm/dirty_ratio", "20\n"),
                ("proc/sys/vm/dirty_background_ratio", "10\n"),
                ("proc/sys/vm/dirty_bytes", "0\n"),
                ("proc/sys/vm/dirty_background_bytes", "268435456\n"),
                ("proc/sys/vm/dirty_expire_centisecs", "3000\n"),
                ("proc/sys/vm/dirty_writeback_centisecs", "500\n"),
                ("proc/sys/vm/swappiness", "1\n"),
                ("proc/sys/vm/overcommit_memory", "2\n"),
                ("proc/sys/vm/zone_reclaim_mode", "1\n"),
                ("proc/sys/vm/overcommit_ratio", "50\n"),
                ("proc/sys/vm/overcommit_kbytes", "0\n"),
                // max_map_count left out: unreadable facts stay None.
                ("proc/sys/kernel/numa_balancing", "1\n"),
            ],
        );
        let m = memory_facts(r);
        assert_eq!(m.mem_total_bytes, Some(16_384_000 * 1024));
        assert_eq!(m.mem_available_bytes, Some(8_192_000 * 1024));
        assert_eq!(m.swap_total_bytes, Some(2_097_152 * 1024));
        let thp = m.thp.unwrap();
        assert_eq!(
            thp.enabled.as_ref().unwrap().selected.as_deref(),
            Some("always")
        );
        assert_eq!(thp.enabled.unwrap().raw, "[always] madvise never");
        assert_eq!(thp.defrag.unwrap().selected.as_deref(), Some("madvise"));
        assert_eq!(thp.khugepaged_max_ptes_none, Some(511));
        assert_eq!(
            m.vm,
            VmSysctls {
                dirty_ratio: Some(20),
                dirty_background_ratio: Some(10),
                dirty_bytes: Some(0),
                dirty_background_bytes: Some(268_435_456),
                dirty_expire_centisecs: Some(3000),
                dirty_writeback_centisecs: Some(500),
                swappiness: Some(1),
                overcommit_memory: Some(2),
                zone_reclaim_mode: Some(1),
                max_map_count: None,
                overcommit_ratio: Some(50),
                overcommit_kbytes: Some(0),
            }
        );
        assert_eq!(m.numa_balancing, Some(1));
        assert_eq!(m.commit_limit_bytes, Some(10_289_152 * 1024));
        assert_eq!(m.committed_as_bytes, Some(2_204_456 * 1024));

        let empty = memory_facts(&r.join("missing"));
        assert_eq!(empty, MemoryFacts::default());
    }

    #[test]
    fn numa_nodes_from_a_fake_tree() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write_tree(
            r,
            &[
                ("sys/devices/system/node/node0/cpulist", "0-3,8-11\n"),
                (
                    "sys/devices/system/node/node0/meminfo",
                    "Node 0 MemTotal:       12674848 kB\nNode 0 MemFree:  3973892 kB\n",
                ),
                ("sys/devices/system/node/node10/cpulist", "4-7\n"),
                (
                    "sys/devices/system/node/node10/meminfo",
                    "Node 10 MemTotal:       1024 kB\n",
                ),
                ("sys/devices/system/node/node2/cpulist", "\n"),
                ("sys/devices/system/node/online", "0,2,10\n"),
                ("sys/devices/system/node/possible", "0-10\n"),
            ],
        );
        let nodes = numa_nodes(r).unwrap();
        let ids: Vec<u32> = nodes.iter().map(|n| n.id).collect();
        assert_eq!(ids, [0, 2, 10]);
        assert_eq!(nodes[0].cpus, "0-3,8-11");
        assert_eq!(nodes[0].mem_total_bytes, Some(12_674_848 * 1024));
        assert_eq!(nodes[1].cpus, "");
        assert_eq!(nodes[1].mem_total_bytes, None);
        assert_eq!(nodes[2].mem_total_bytes, Some(1024 * 1024));
        assert!(numa_nodes(&r.join("missing")).is_none());
    }
}
