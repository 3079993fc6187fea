//! The `net` fact group: receive packet / flow steering (RPS/RFS) state of
//! the host, read from `/proc/sys/net/core` and `/sys/class/net/*/queues`
//! when recording.
//!
//! A host fact, not a probe family: it is bound whenever the state was
//! readable, whether or not the softirq probe attached (the rule that reads
//! both lists both groups).

use super::{FactGroup, FactValue, int};
use crate::recording::model::NetFacts;

/// Why the `net` group is absent when the host's RPS/RFS state was not read.
pub const NET_UNREADABLE: &str = "RPS/RFS state not readable (/proc/sys/net/core/rps_sock_flow_entries \
     or /sys/class/net/*/queues could not be read when recording)";

/// Whether an `rps_cpus` mask steers to any CPU.
pub fn rps_mask_set(mask: &str) -> bool {
    mask.chars().any(|c| c.is_ascii_hexdigit() && c != '0')
}

/// The `net` group (RPS/RFS state of the host).
pub(super) fn net_facts(net: &NetFacts) -> FactGroup {
    let queues = || net.interfaces.iter().flat_map(|i| &i.rx_queues);
    let mut g = FactGroup::new();
    g.insert("rps_enabled".into(), FactValue::Bool(net.rps_enabled()));
    g.insert("rfs_enabled".into(), FactValue::Bool(net.rfs_enabled()));
    g.insert(
        "rps_sock_flow_entries".into(),
        int(net.rps_sock_flow_entries),
    );
    g.insert("interfaces".into(), int(net.interfaces.len() as u64));
    g.insert("rx_queues".into(), int(queues().count() as u64));
    g.insert(
        "rps_queues".into(),
        int(queues().filter(|q| rps_mask_set(&q.rps_cpus)).count() as u64),
    );
    g.insert(
        "rfs_queues".into(),
        int(queues().filter(|q| q.rps_flow_cnt > 0).count() as u64),
    );
    g.insert(
        "rps_flow_cnt".into(),
        int(queues().fold(0u64, |a, q| a.saturating_add(q.rps_flow_cnt))),
    );
    g
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::softirq::testdata::{net_rps_off_rfs_on, net_rx_on_cpu0};
    use crate::rules::{FactValue, Facts};

    #[test]
    fn net_facts_from_rps_off_rfs_on() {
        let f = Facts::derive(&net_rx_on_cpu0());
        assert_eq!(f.absent_reason("net"), None);
        assert_eq!(f.get("host.net_readable"), Some(&FactValue::Bool(true)));
        assert_eq!(f.get("net.rps_enabled"), Some(&FactValue::Bool(false)));
        assert_eq!(f.get("net.rfs_enabled"), Some(&FactValue::Bool(true)));
        assert_eq!(
            f.get("net.rps_sock_flow_entries"),
            Some(&FactValue::Int(32_768))
        );
        assert_eq!(f.get("net.interfaces"), Some(&FactValue::Int(2)));
        assert_eq!(f.get("net.rx_queues"), Some(&FactValue::Int(6)));
        assert_eq!(f.get("net.rps_queues"), Some(&FactValue::Int(0)));
        assert_eq!(f.get("net.rfs_queues"), Some(&FactValue::Int(4)));
        assert_eq!(f.get("net.rps_flow_cnt"), Some(&FactValue::Int(4 * 4096)));

        // RPS on for one queue of eth1 ("f" = CPUs 0-3), RFS off globally.
        let mut net = net_rps_off_rfs_on();
        net.rps_sock_flow_entries = 0;
        net.interfaces[1].rx_queues[1].rps_cpus = "00000000,0000000f".into();
        let g = net_facts(&net);
        assert_eq!(g["rps_enabled"], FactValue::Bool(true));
        assert_eq!(g["rfs_enabled"], FactValue::Bool(false));
        assert_eq!(g["rps_queues"], FactValue::Int(1));

        // Not readable: the group is absent with the reason; host says so.
        let mut rec = net_rx_on_cpu0();
        rec.host.net = None;
        let f = Facts::derive(&rec);
        assert!(f.group("net").is_none());
        assert_eq!(f.absent_reason("net"), Some(NET_UNREADABLE));
        assert_eq!(f.get("host.net_readable"), Some(&FactValue::Bool(false)));
    }
}
