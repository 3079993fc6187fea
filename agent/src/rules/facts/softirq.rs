//! The `softirq` and `net` fact groups: interrupt work per CPU, and receive
//! packet / flow steering (RPS/RFS).
//!
//! Softirqs and hard IRQs belong to CPUs, not to processes, so these facts are
//! host-wide even when a target process was recorded. Sums are over every
//! slice with softirq data; rates are per second of that time ("ms/s" is
//! milliseconds of CPU time per second of wall time, so 1000 ms/s is one full
//! CPU).
//!
//! Per-CPU numbers cover [`SoftirqTotals::cpus`] CPUs: the host's online CPUs,
//! or more when data was recorded on a higher CPU number. The kernel's per-CPU
//! maps have one entry per *possible* CPU, which on virtual machines is often
//! many more than the online ones; those always-zero entries are left out so
//! that they do not lower the means.

use std::collections::BTreeMap;

use mdiag_common::softirq::VECTOR_NAMES;

use super::{FactGroup, FactValue, float, int, ratio, text};
use crate::recording::model::{NetFacts, Recording, SoftirqDrops};

/// The vectors with their own facts and report columns, in display order.
pub const MAIN_VECTORS: [&str; 6] = ["NET_RX", "NET_TX", "TIMER", "RCU", "SCHED", "BLOCK"];

/// Counts and time of one softirq vector or hard IRQ, per CPU (summed over slices).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PerCpu {
    /// Index = CPU number; length = [`SoftirqTotals::cpus`].
    pub count: Vec<u64>,
    pub time_ns: Vec<u64>,
}

impl PerCpu {
    fn new(cpus: usize) -> PerCpu {
        PerCpu {
            count: vec![0; cpus],
            time_ns: vec![0; cpus],
        }
    }

    fn add(&mut self, count: &[u64], time_ns: &[u64]) {
        for (acc, &n) in self.count.iter_mut().zip(count) {
            *acc = acc.saturating_add(n);
        }
        for (acc, &n) in self.time_ns.iter_mut().zip(time_ns) {
            *acc = acc.saturating_add(n);
        }
    }

    pub fn count_total(&self) -> u64 {
        self.count.iter().fold(0, |a, &n| a.saturating_add(n))
    }

    pub fn time_total_ns(&self) -> u64 {
        self.time_ns.iter().fold(0, |a, &n| a.saturating_add(n))
    }

    /// The CPU with the most time (the lowest number on ties) and its time;
    /// `None` when no time was recorded.
    pub fn busiest(&self) -> Option<(usize, u64)> {
        let (cpu, &ns) = self
            .time_ns
            .iter()
            .enumerate()
            .max_by_key(|&(cpu, &ns)| (ns, std::cmp::Reverse(cpu)))?;
        (ns > 0).then_some((cpu, ns))
    }

    /// Busiest CPU's time / mean time over all CPUs: 1.0 when even, up to the
    /// number of CPUs when one CPU does everything; 0 without time.
    pub fn imbalance(&self) -> f64 {
        let total = self.time_total_ns();
        match self.busiest() {
            Some((_, max)) if total > 0 => max as f64 * self.time_ns.len() as f64 / total as f64,
            _ => 0.0,
        }
    }

    /// Share of the time that the busiest CPU has (0..=1; 0 without time).
    pub fn busiest_share(&self) -> f64 {
        self.busiest().map_or(0.0, |(_, max)| {
            ratio(max as f64, self.time_total_ns() as f64)
        })
    }
}

/// One hard IRQ, summed over slices.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IrqTotals {
    pub irq: u32,
    /// Handler names as last recorded ("eth0-TxRx-0", "irq45" when unknown).
    pub name: String,
    pub per_cpu: PerCpu,
}

/// Softirq and hard-IRQ work of a recording, summed over every slice with
/// softirq data. Shared by the facts and the report's measurements.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SoftirqTotals {
    /// Seconds covered by softirq data.
    pub duration_s: f64,
    /// CPUs in the per-CPU numbers (see the module docs).
    pub cpus: usize,
    /// Vector name → per-CPU totals, for every vector this build knows
    /// (zeros when it did not run) and any other name found in the recording.
    pub vectors: BTreeMap<String, PerCpu>,
    /// IRQ number → totals.
    pub hardirqs: BTreeMap<u32, IrqTotals>,
    pub drops: SoftirqDrops,
}

impl SoftirqTotals {
    /// Sums the softirq sections of `rec`. `Err` with the reason when the
    /// softirq probe did not (fully) attach or recorded nothing.
    pub fn from_recording(rec: &Recording) -> Result<SoftirqTotals, String> {
        if let Some(reason) = super::family_unavailable(rec, "softirq") {
            return Err(reason);
        }
        let slices: Vec<_> = rec
            .slices
            .iter()
            .filter_map(|s| s.softirq.as_ref().map(|x| (s.duration_ms, x)))
            .collect();
        if slices.is_empty() {
            return Err(format!(
                "the softirq probe attached but the recording has no softirq data ({} slices)",
                rec.slices.len()
            ));
        }
        // Highest CPU with any data, so that always-zero possible CPUs are left out.
        let active = |v: &[u64]| v.iter().rposition(|&n| n > 0).map_or(0, |i| i + 1);
        let mut cpus = usize::try_from(rec.host.cpu_count).unwrap_or(0);
        for (_, s) in &slices {
            for v in &s.vectors {
                cpus = cpus
                    .max(active(&v.count_per_cpu))
                    .max(active(&v.time_ns_per_cpu));
            }
            for h in &s.hardirqs {
                cpus = cpus
                    .max(active(&h.count_per_cpu))
                    .max(active(&h.time_ns_per_cpu));
            }
        }
        let cpus = cpus.max(1);

        let mut totals = SoftirqTotals {
            duration_s: slices.iter().map(|(ms, _)| ms).sum::<u64>() as f64 / 1000.0,
            cpus,
            vectors: VECTOR_NAMES
                .iter()
                .map(|name| ((*name).to_string(), PerCpu::new(cpus)))
                .collect(),
            ..SoftirqTotals::default()
        };
        for (_, s) in &slices {
            for v in &s.vectors {
                totals
                    .vectors
                    .entry(v.name.clone())
                    .or_insert_with(|| PerCpu::new(cpus))
                    .add(&v.count_per_cpu, &v.time_ns_per_cpu);
            }
            for h in &s.hardirqs {
                let acc = totals.hardirqs.entry(h.irq).or_insert_with(|| IrqTotals {
                    irq: h.irq,
                    name: String::new(),
                    per_cpu: PerCpu::new(cpus),
                });
                if !h.name.is_empty() {
                    acc.name.clone_from(&h.name);
                }
                acc.per_cpu.add(&h.count_per_cpu, &h.time_ns_per_cpu);
            }
            let d = &mut totals.drops;
            d.unmatched_exit = d.unmatched_exit.saturating_add(s.drops.unmatched_exit);
            d.irq_map_full = d.irq_map_full.saturating_add(s.drops.irq_map_full);
            d.bad_vector = d.bad_vector.saturating_add(s.drops.bad_vector);
        }
        for irq in totals.hardirqs.values_mut() {
            if irq.name.is_empty() {
                irq.name = format!("irq{}", irq.irq);
            }
        }
        Ok(totals)
    }

    /// A vector's totals (zeros when it never ran).
    pub fn vector(&self, name: &str) -> PerCpu {
        self.vectors
            .get(name)
            .cloned()
            .unwrap_or_else(|| PerCpu::new(self.cpus))
    }

    /// Count or time per second.
    pub fn per_s(&self, n: u64) -> f64 {
        ratio(n as f64, self.duration_s)
    }

    /// Nanoseconds over the recording → milliseconds of CPU time per second.
    pub fn ms_per_s(&self, ns: u64) -> f64 {
        ratio(ns as f64 / 1e6, self.duration_s)
    }

    /// Nanoseconds on one CPU → share of that CPU's wall time (0..=1).
    pub fn cpu_share(&self, ns: u64) -> f64 {
        ratio(ns as f64 / 1e9, self.duration_s)
    }

    /// Softirq time per CPU, all vectors.
    pub fn softirq_ns_per_cpu(&self) -> Vec<u64> {
        sum_per_cpu(self.cpus, self.vectors.values())
    }

    /// Hard-IRQ time per CPU, all IRQs.
    pub fn hardirq_ns_per_cpu(&self) -> Vec<u64> {
        sum_per_cpu(self.cpus, self.hardirqs.values().map(|h| &h.per_cpu))
    }

    /// Hard IRQs by time, most first (then by count, then by IRQ number).
    pub fn hardirqs_by_time(&self) -> Vec<&IrqTotals> {
        let mut irqs: Vec<&IrqTotals> = self.hardirqs.values().collect();
        irqs.sort_by_key(|h| {
            (
                std::cmp::Reverse(h.per_cpu.time_total_ns()),
                std::cmp::Reverse(h.per_cpu.count_total()),
                h.irq,
            )
        });
        irqs
    }
}

fn sum_per_cpu<'a>(cpus: usize, items: impl Iterator<Item = &'a PerCpu>) -> Vec<u64> {
    let mut sum = vec![0u64; cpus];
    for item in items {
        for (acc, &ns) in sum.iter_mut().zip(&item.time_ns) {
            *acc = acc.saturating_add(ns);
        }
    }
    sum
}

/// (max, CPU of the max) of `values`; the lowest CPU on ties; (0, 0) when empty.
fn max_with_cpu(values: &[u64]) -> (u64, usize) {
    values
        .iter()
        .enumerate()
        .max_by_key(|&(cpu, &v)| (v, std::cmp::Reverse(cpu)))
        .map_or((0, 0), |(cpu, &v)| (v, cpu))
}

/// Fact-name prefix of a vector: "NET_RX" → "net_rx".
pub fn fact_prefix(vector: &str) -> String {
    vector.to_ascii_lowercase()
}

/// The `softirq` group, or why it is absent.
pub(super) fn softirq_facts(rec: &Recording) -> Result<FactGroup, String> {
    let t = SoftirqTotals::from_recording(rec)?;
    let mut g = FactGroup::new();
    g.insert("duration_s".into(), float(t.duration_s));
    g.insert("cpus".into(), int(t.cpus as u64));

    for name in VECTOR_NAMES {
        let v = t.vector(name);
        let p = fact_prefix(name);
        g.insert(format!("{p}_count_per_s"), float(t.per_s(v.count_total())));
        g.insert(
            format!("{p}_time_ms_per_s"),
            float(t.ms_per_s(v.time_total_ns())),
        );
        g.insert(format!("{p}_imbalance"), float(v.imbalance()));
    }
    let net_rx = t.vector("NET_RX");
    let busiest = net_rx.busiest();
    g.insert(
        "net_rx_busiest_cpu".into(),
        int(busiest.map_or(0, |(cpu, _)| cpu as u64)),
    );
    g.insert("net_rx_busiest_share".into(), float(net_rx.busiest_share()));
    g.insert(
        "net_rx_time_share_of_cpu".into(),
        float(busiest.map_or(0.0, |(_, ns)| t.cpu_share(ns))),
    );

    let (count, time): (u64, u64) = t.vectors.values().fold((0, 0), |(c, n), v| {
        (
            c.saturating_add(v.count_total()),
            n.saturating_add(v.time_total_ns()),
        )
    });
    g.insert("count_per_s".into(), float(t.per_s(count)));
    g.insert("time_ms_per_s".into(), float(t.ms_per_s(time)));
    let per_cpu = t.softirq_ns_per_cpu();
    let (max, cpu) = max_with_cpu(&per_cpu);
    g.insert("cpu_max_share".into(), float(t.cpu_share(max)));
    g.insert("cpu_max_share_cpu".into(), int(cpu as u64));
    g.insert(
        "cpu_mean_share".into(),
        float(t.cpu_share(time) / t.cpus as f64),
    );

    let (hcount, htime): (u64, u64) = t.hardirqs.values().fold((0, 0), |(c, n), h| {
        (
            c.saturating_add(h.per_cpu.count_total()),
            n.saturating_add(h.per_cpu.time_total_ns()),
        )
    });
    g.insert("hardirqs".into(), int(t.hardirqs.len() as u64));
    g.insert("hardirq_count_per_s".into(), float(t.per_s(hcount)));
    g.insert("hardirq_time_ms_per_s".into(), float(t.ms_per_s(htime)));
    let (hmax, _) = max_with_cpu(&t.hardirq_ns_per_cpu());
    g.insert("hardirq_cpu_max_share".into(), float(t.cpu_share(hmax)));
    let top = t.hardirqs_by_time().into_iter().next();
    g.insert(
        "hardirq_busiest".into(),
        text(top.map_or("", |h| h.name.as_str())),
    );
    g.insert(
        "hardirq_busiest_irq".into(),
        int(top.map_or(0, |h| u64::from(h.irq))),
    );
    g.insert(
        "hardirq_busiest_count_per_s".into(),
        float(top.map_or(0.0, |h| t.per_s(h.per_cpu.count_total()))),
    );
    g.insert(
        "hardirq_busiest_time_ms_per_s".into(),
        float(top.map_or(0.0, |h| t.ms_per_s(h.per_cpu.time_total_ns()))),
    );

    let d = t.drops;
    g.insert(
        "drops".into(),
        int(d
            .unmatched_exit
            .saturating_add(d.irq_map_full)
            .saturating_add(d.bad_vector)),
    );
    g.insert("drops_unmatched_exit".into(), int(d.unmatched_exit));
    g.insert("drops_irq_map_full".into(), int(d.irq_map_full));
    g.insert("drops_bad_vector".into(), int(d.bad_vector));
    Ok(g)
}

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
pub(crate) mod testdata {
    //! A recording with softirq data: 4 CPUs, NET_RX concentrated on CPU 0.

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
}

#[cfg(test)]
mod tests {
    use super::testdata::*;
    use super::*;
    use crate::rules::{FactValue, Facts};

    fn num(f: &Facts, path: &str) -> f64 {
        f.get(path)
            .and_then(FactValue::as_f64)
            .unwrap_or_else(|| panic!("no number at {path}"))
    }

    fn close(f: &Facts, path: &str, want: f64) {
        let got = num(f, path);
        assert!((got - want).abs() < 1e-9, "{path}: {got}, expected {want}");
    }

    #[test]
    fn softirq_facts_from_a_net_rx_heavy_host() {
        let f = Facts::derive(&net_rx_on_cpu0());
        assert_eq!(f.absent_reason("softirq"), None);
        close(&f, "softirq.duration_s", 10.0);
        assert_eq!(f.get("softirq.cpus"), Some(&FactValue::Int(4)));

        // NET_RX: 48 000 entries and 350 ms per second over 4 CPUs; CPU 0 has
        // 300 ms: max/mean = 300 / 87.5 = 3.4286, share 300/350 = 0.857,
        // and NET_RX takes 30% of CPU 0.
        close(&f, "softirq.net_rx_count_per_s", 48_000.0);
        close(&f, "softirq.net_rx_time_ms_per_s", 350.0);
        close(&f, "softirq.net_rx_imbalance", 300.0 / 87.5);
        assert_eq!(
            f.get("softirq.net_rx_busiest_cpu"),
            Some(&FactValue::Int(0))
        );
        close(&f, "softirq.net_rx_busiest_share", 300.0 / 350.0);
        close(&f, "softirq.net_rx_time_share_of_cpu", 0.3);

        // Evenly spread vectors give 1.0; RCU 0.6/0.5; SCHED 1.6/1.2.
        close(&f, "softirq.net_tx_count_per_s", 2000.0);
        close(&f, "softirq.net_tx_time_ms_per_s", 8.0);
        close(&f, "softirq.net_tx_imbalance", 1.0);
        close(&f, "softirq.timer_count_per_s", 4000.0);
        close(&f, "softirq.timer_time_ms_per_s", 4.0);
        close(&f, "softirq.timer_imbalance", 1.0);
        close(&f, "softirq.rcu_count_per_s", 1000.0);
        close(&f, "softirq.rcu_time_ms_per_s", 2.0);
        close(&f, "softirq.rcu_imbalance", 1.2);
        close(&f, "softirq.sched_count_per_s", 2400.0);
        close(&f, "softirq.sched_time_ms_per_s", 4.8);
        close(&f, "softirq.sched_imbalance", 1.6 / 1.2);
        // A vector that never ran is zero everywhere.
        close(&f, "softirq.block_count_per_s", 0.0);
        close(&f, "softirq.block_time_ms_per_s", 0.0);
        close(&f, "softirq.block_imbalance", 0.0);
        close(&f, "softirq.hrtimer_time_ms_per_s", 0.05);

        // All vectors: CPU 0 spends 305.25 ms/s, the 4 CPUs 368.85 ms/s.
        close(
            &f,
            "softirq.count_per_s",
            48_000.0 + 2000.0 + 4000.0 + 1000.0 + 2400.0 + 10.0,
        );
        close(&f, "softirq.time_ms_per_s", 368.85);
        close(&f, "softirq.cpu_max_share", 0.30525);
        assert_eq!(f.get("softirq.cpu_max_share_cpu"), Some(&FactValue::Int(0)));
        close(&f, "softirq.cpu_mean_share", 368.85 / 4000.0);

        // Hard IRQs: 22 505 per second, 45.01 ms/s; eth0-TxRx-0 is the busiest.
        assert_eq!(f.get("softirq.hardirqs"), Some(&FactValue::Int(4)));
        close(&f, "softirq.hardirq_count_per_s", 22_505.0);
        close(&f, "softirq.hardirq_time_ms_per_s", 45.01);
        close(&f, "softirq.hardirq_cpu_max_share", 0.04);
        assert_eq!(
            f.get("softirq.hardirq_busiest"),
            Some(&FactValue::Text("eth0-TxRx-0".into()))
        );
        assert_eq!(
            f.get("softirq.hardirq_busiest_irq"),
            Some(&FactValue::Int(45))
        );
        close(&f, "softirq.hardirq_busiest_count_per_s", 20_000.0);
        close(&f, "softirq.hardirq_busiest_time_ms_per_s", 40.0);

        assert_eq!(f.get("softirq.drops"), Some(&FactValue::Int(3)));
        assert_eq!(
            f.get("softirq.drops_unmatched_exit"),
            Some(&FactValue::Int(3))
        );
        assert_eq!(
            f.get("softirq.drops_irq_map_full"),
            Some(&FactValue::Int(0))
        );
    }

    #[test]
    fn possible_but_offline_cpus_do_not_dilute_the_means() {
        // The kernel's per-CPU maps have an entry per possible CPU: 8 here,
        // of which 4 are online and the rest always 0.
        let mut rec = net_rx_on_cpu0();
        for s in &mut rec.slices {
            let softirq = s.softirq.as_mut().unwrap();
            for v in &mut softirq.vectors {
                v.count_per_cpu.resize(8, 0);
                v.time_ns_per_cpu.resize(8, 0);
            }
        }
        let f = Facts::derive(&rec);
        assert_eq!(f.get("softirq.cpus"), Some(&FactValue::Int(4)));
        close(&f, "softirq.net_rx_imbalance", 300.0 / 87.5);

        // Data on CPU 5 of a host said to have 4: the tables grow to 6 CPUs.
        rec.slices[0].softirq.as_mut().unwrap().vectors[0].time_ns_per_cpu[5] = 1;
        let f = Facts::derive(&rec);
        assert_eq!(f.get("softirq.cpus"), Some(&FactValue::Int(6)));
    }

    #[test]
    fn softirq_is_absent_with_reason_when_the_family_did_not_attach() {
        let mut rec = net_rx_on_cpu0();
        rec.probes[1] = softirq_probe(Some("tracepoint softirq_entry not found"));
        for s in &mut rec.slices {
            s.softirq = None;
        }
        let f = Facts::derive(&rec);
        assert!(f.group("softirq").is_none());
        let reason = f.absent_reason("softirq").unwrap();
        assert!(
            reason.starts_with("the softirq probe attached only partly"),
            "{reason}"
        );
        assert!(
            reason.contains(
                "mdiag_softirq_entry (tp_btf/softirq_entry): tracepoint softirq_entry not found"
            ),
            "{reason}"
        );
        // The scheduler facts are not affected.
        assert_eq!(f.absent_reason("sched"), None);
        assert_eq!(f.get("sched.threads"), Some(&FactValue::Int(4)));

        for p in &mut rec.probes[1].programs {
            p.error = Some("permission denied".into());
        }
        let reason = Facts::derive(&rec)
            .absent_reason("softirq")
            .unwrap()
            .to_string();
        // Every program failed for the same reason: it is said once.
        assert_eq!(
            reason,
            "the softirq probe did not attach: permission denied"
        );

        // Recordings made before the family existed.
        let old = crate::rules::testdata::oversubscribed();
        let f = Facts::derive(&old);
        assert_eq!(
            f.absent_reason("softirq"),
            Some("the softirq probe was not part of this recording")
        );

        // Attached, but no slice carries softirq data.
        let mut empty = net_rx_on_cpu0();
        for s in &mut empty.slices {
            s.softirq = None;
        }
        assert_eq!(
            Facts::derive(&empty).absent_reason("softirq"),
            Some("the softirq probe attached but the recording has no softirq data (10 slices)")
        );
    }

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

    #[test]
    fn per_cpu_helpers() {
        let v = PerCpu {
            count: vec![1, 1, 1, 1],
            time_ns: vec![5, 9, 9, 1],
        };
        assert_eq!(v.busiest(), Some((1, 9)), "lowest CPU on ties");
        assert!((v.imbalance() - 9.0 * 4.0 / 24.0).abs() < 1e-12);
        assert!((v.busiest_share() - 9.0 / 24.0).abs() < 1e-12);
        let idle = PerCpu::new(4);
        assert_eq!(idle.busiest(), None);
        assert_eq!(idle.imbalance(), 0.0);
        assert_eq!(idle.busiest_share(), 0.0);
        assert!(rps_mask_set("00000000,00000010"));
        assert!(!rps_mask_set("00000000,00000000"));
        assert_eq!(fact_prefix("NET_RX"), "net_rx");
    }
}
