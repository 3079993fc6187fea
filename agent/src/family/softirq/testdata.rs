//! A recording with softirq data: 4 CPUs, NET_RX concentrated on CPU 0.
//!
//! Shared by the softirq and net fact tests, the rule scenarios and the
//! report tests; kept out of `softirq.rs` so that the fact derivation reads
//! on its own.

use crate::recording::model::{
    HardIrqSlice, NetFacts, NetInterface, ProbeStatus, ProgramStatus, Recording, RxQueue,
    SoftirqDrops, SoftirqSlice, SoftirqVector,
};

fn vector(name: &str, count: [u64; 4], time_ns: [u64; 4]) -> SoftirqVector {
    SoftirqVector {
        name: name.into(),
        count_per_cpu: count.to_vec(),
        time_ns_per_cpu: time_ns.to_vec(),
    }
}

fn irq(irq: u32, name: &str, count: [u64; 4], time_ns: [u64; 4]) -> HardIrqSlice {
    HardIrqSlice {
        irq,
        name: name.into(),
        count_per_cpu: count.to_vec(),
        time_ns_per_cpu: time_ns.to_vec(),
    }
}

/// One second on a 4-CPU host whose NIC interrupts all land on CPU 0:
///
/// | CPU | NET_RX | NET_TX | TIMER | RCU | SCHED | HRTIMER | all (ms) |
/// |---|---|---|---|---|---|---|---|
/// | 0 | 300 | 2 | 1 | 0.6 | 1.6 | 0.05 | 305.25 |
/// | 1 | 20 | 2 | 1 | 0.4 | 1.2 | 0 | 24.6 |
/// | 2 | 20 | 2 | 1 | 0.4 | 1.2 | 0 | 24.6 |
/// | 3 | 10 | 2 | 1 | 0.6 | 0.8 | 0 | 14.4 |
///
/// BLOCK did not run. Hard IRQs: eth0-TxRx-0 (45) 40 ms on CPU 0,
/// eth0-TxRx-1 (46) 4 ms on CPU 1, nvme0q1 (24) 1 ms on CPU 2, and a tiny
/// virtio0-config (11) on CPU 3.
pub fn softirq_slice() -> SoftirqSlice {
    SoftirqSlice {
        vectors: vec![
            vector(
                "TIMER",
                [1000; 4],
                [1_000_000, 1_000_000, 1_000_000, 1_000_000],
            ),
            vector(
                "NET_TX",
                [500; 4],
                [2_000_000, 2_000_000, 2_000_000, 2_000_000],
            ),
            vector(
                "NET_RX",
                [40_000, 3_000, 3_000, 2_000],
                [300_000_000, 20_000_000, 20_000_000, 10_000_000],
            ),
            vector(
                "SCHED",
                [800, 600, 600, 400],
                [1_600_000, 1_200_000, 1_200_000, 800_000],
            ),
            vector("HRTIMER", [10, 0, 0, 0], [50_000, 0, 0, 0]),
            vector(
                "RCU",
                [300, 200, 200, 300],
                [600_000, 400_000, 400_000, 600_000],
            ),
        ],
        hardirqs: vec![
            irq(11, "virtio0-config", [0, 0, 0, 5], [0, 0, 0, 10_000]),
            irq(24, "nvme0q1", [0, 0, 500, 0], [0, 0, 1_000_000, 0]),
            irq(45, "eth0-TxRx-0", [20_000, 0, 0, 0], [40_000_000, 0, 0, 0]),
            irq(46, "eth0-TxRx-1", [0, 2_000, 0, 0], [0, 4_000_000, 0, 0]),
        ],
        drops: SoftirqDrops::default(),
    }
}

/// The softirq probe as recorded when every program attached.
pub fn softirq_probe(error: Option<&str>) -> ProbeStatus {
    let program = |name: &str, tp: &str, error: Option<&str>| ProgramStatus {
        name: name.into(),
        attach_point: format!("tp_btf/{tp}"),
        error: error.map(str::to_string),
    };
    ProbeStatus {
        family: "softirq".into(),
        programs: vec![
            program("mdiag_softirq_entry", "softirq_entry", error),
            program("mdiag_softirq_exit", "softirq_exit", error),
            program("mdiag_hardirq_entry", "irq_handler_entry", None),
            program("mdiag_hardirq_exit", "irq_handler_exit", None),
        ],
        left_out: None,
    }
}

/// RPS off (all-zero masks), RFS on: the global flow table and per-queue
/// flow counts set on eth0's 4 queues; eth1 has 2 queues with nothing set.
pub fn net_rps_off_rfs_on() -> NetFacts {
    let queue = |i: u32, flows: u64| RxQueue {
        name: format!("rx-{i}"),
        rps_cpus: "0".into(),
        rps_flow_cnt: flows,
    };
    NetFacts {
        rps_sock_flow_entries: 32_768,
        interfaces: vec![
            NetInterface {
                name: "eth0".into(),
                rx_queues: (0..4).map(|i| queue(i, 4096)).collect(),
            },
            NetInterface {
                name: "eth1".into(),
                rx_queues: (0..2).map(|i| queue(i, 0)).collect(),
            },
        ],
    }
}

/// [`crate::rules::testdata::oversubscribed`] on 4 CPUs with the softirq
/// family attached: 10 identical [`softirq_slice`]s (3 unmatched exits in
/// the first, as right after attach) and [`net_rps_off_rfs_on`].
pub fn net_rx_on_cpu0() -> Recording {
    let mut rec = crate::rules::testdata::oversubscribed();
    rec.host.cpu_count = 4;
    rec.host.net = Some(net_rps_off_rfs_on());
    rec.probes.push(softirq_probe(None));
    for (i, s) in rec.slices.iter_mut().enumerate() {
        let mut softirq = softirq_slice();
        if i == 0 {
            softirq.drops.unmatched_exit = 3;
        }
        s.softirq = Some(softirq);
        if let Some(sched) = s.sched.as_mut() {
            sched.switches_per_cpu = vec![375; 4];
        }
    }
    rec
}
