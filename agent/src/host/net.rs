//! Receive packet / flow steering (RPS/RFS) state of the network interfaces.

use super::sorted_names;
use crate::recording::{NetFacts, NetInterface, RxQueue};

/// RPS/RFS state under `root` (normally "/"; a test passes a fake tree).
pub fn net_facts(root: &std::path::Path) -> Option<NetFacts> {
    let read = |p: std::path::PathBuf| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
    let entries = read(root.join("proc/sys/net/core/rps_sock_flow_entries"))?
        .parse()
        .ok()?;
    let net = root.join("sys/class/net");
    let mut interfaces = Vec::new();
    for name in sorted_names(&net).into_iter().filter(|n| n != "lo") {
        let queues_dir = net.join(&name).join("queues");
        let mut queues: Vec<String> = sorted_names(&queues_dir)
            .into_iter()
            .filter(|q| q.starts_with("rx-"))
            .collect();
        queues.sort_by_key(|q| {
            q.trim_start_matches("rx-")
                .parse::<u32>()
                .unwrap_or(u32::MAX)
        });
        let rx_queues: Vec<RxQueue> = queues
            .into_iter()
            .map(|q| RxQueue {
                rps_cpus: read(queues_dir.join(&q).join("rps_cpus")).unwrap_or_default(),
                rps_flow_cnt: read(queues_dir.join(&q).join("rps_flow_cnt"))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
                name: q,
            })
            .collect();
        if !rx_queues.is_empty() {
            interfaces.push(NetInterface { name, rx_queues });
        }
    }
    Some(NetFacts {
        rps_sock_flow_entries: entries,
        interfaces,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rps_rfs_state_from_a_fake_tree() {
        let root = tempfile::tempdir().unwrap();
        let w = |p: &str, v: &str| {
            let p = root.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, v).unwrap();
        };
        w("proc/sys/net/core/rps_sock_flow_entries", "0\n");
        for q in ["rx-0", "rx-1", "rx-10", "tx-0"] {
            w(
                &format!("sys/class/net/eth0/queues/{q}/rps_cpus"),
                "00000000\n",
            );
            w(
                &format!("sys/class/net/eth0/queues/{q}/rps_flow_cnt"),
                "0\n",
            );
        }
        w("sys/class/net/lo/queues/rx-0/rps_cpus", "0\n");
        let n = net_facts(root.path()).unwrap();
        assert_eq!(n.interfaces.len(), 1);
        let names: Vec<&str> = n.interfaces[0]
            .rx_queues
            .iter()
            .map(|q| q.name.as_str())
            .collect();
        assert_eq!(names, ["rx-0", "rx-1", "rx-10"]);
        assert!(!n.rps_enabled() && !n.rfs_enabled());
        w("sys/class/net/eth0/queues/rx-1/rps_cpus", "0000000f\n");
        w("sys/class/net/eth0/queues/rx-1/rps_flow_cnt", "4096\n");
        let n = net_facts(root.path()).unwrap();
        assert!(
            n.rps_enabled() && !n.rfs_enabled(),
            "RFS also needs rps_sock_flow_entries"
        );
        w("proc/sys/net/core/rps_sock_flow_entries", "32768\n");
        let n = net_facts(root.path()).unwrap();
        assert!(n.rfs_enabled());
        assert_eq!(n.rps_sock_flow_entries, 32768);
        assert!(net_facts(&root.path().join("missing")).is_none());
    }
}
