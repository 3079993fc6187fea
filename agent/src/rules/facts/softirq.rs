//! The `softirq` fact group: interrupt work per CPU (softirq vectors and hard
//! IRQs). The host's RPS/RFS state, which rules read beside it, is the `net`
//! group in [`super::net`]; the test recording is in [`testdata`].
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

pub use super::net::rps_mask_set;
use super::{FactGroup, float, int, ratio, text};

mod figures;
use crate::recording::Window;
use crate::recording::model::{Recording, SoftirqDrops, SoftirqSlice};
pub use figures::SoftirqFigures;

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
    /// The softirq totals of `rec`, read from `whole`, the window of all its
    /// slices (vectors matched by name, IRQs by number, per-CPU arrays
    /// summed). `Err` with the reason when the softirq probe did not (fully)
    /// attach or recorded nothing.
    pub fn from_window(rec: &Recording, whole: &Window) -> Result<SoftirqTotals, String> {
        if let Some(reason) = super::family_unavailable(rec, "softirq") {
            return Err(reason);
        }
        let Some(s) = whole.slice.softirq.as_ref() else {
            return Err(format!(
                "the softirq probe attached but the recording has no softirq data ({} slices)",
                rec.slices.len()
            ));
        };
        let cpus = active_cpus(rec, s);
        let mut totals = SoftirqTotals {
            duration_s: whole.section_ms.softirq as f64 / 1000.0,
            cpus,
            vectors: VECTOR_NAMES
                .iter()
                .map(|name| ((*name).to_string(), PerCpu::new(cpus)))
                .collect(),
            drops: s.drops,
            ..SoftirqTotals::default()
        };
        for v in &s.vectors {
            totals
                .vectors
                .entry(v.name.clone())
                .or_insert_with(|| PerCpu::new(cpus))
                .add(&v.count_per_cpu, &v.time_ns_per_cpu);
        }
        for h in &s.hardirqs {
            let mut per_cpu = PerCpu::new(cpus);
            per_cpu.add(&h.count_per_cpu, &h.time_ns_per_cpu);
            let name = if h.name.is_empty() {
                format!("irq{}", h.irq)
            } else {
                h.name.clone()
            };
            totals.hardirqs.insert(
                h.irq,
                IrqTotals {
                    irq: h.irq,
                    name,
                    per_cpu,
                },
            );
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

/// CPUs in the per-CPU numbers: the host's online CPUs, or up to the highest
/// CPU with any data in `s` (merged: a CPU has data when any second had),
/// so that always-zero possible CPUs are left out; at least one.
fn active_cpus(rec: &Recording, s: &SoftirqSlice) -> usize {
    let active = |v: &[u64]| v.iter().rposition(|&n| n > 0).map_or(0, |i| i + 1);
    let mut cpus = usize::try_from(rec.host.cpu_count).unwrap_or(0);
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
    cpus.max(1)
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
pub(super) fn softirq_facts(rec: &Recording, whole: &Window) -> Result<FactGroup, String> {
    let t = SoftirqTotals::from_window(rec, whole)?;
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
    let f = SoftirqFigures::of(&t);
    g.insert(
        "net_rx_busiest_cpu".into(),
        int(u64::from(f.net_rx_busiest_cpu)),
    );
    g.insert("net_rx_busiest_share".into(), float(f.net_rx_busiest_share));
    g.insert(
        "net_rx_time_share_of_cpu".into(),
        float(f.net_rx_time_share_of_cpu),
    );
    g.insert("count_per_s".into(), float(f.count_per_s));
    g.insert("time_ms_per_s".into(), float(f.time_ms_per_s));
    g.insert("cpu_max_share".into(), float(f.cpu_max_share));
    g.insert(
        "cpu_max_share_cpu".into(),
        int(u64::from(f.cpu_max_share_cpu)),
    );
    g.insert("cpu_mean_share".into(), float(f.cpu_mean_share));

    g.insert("hardirqs".into(), int(t.hardirqs.len() as u64));
    g.insert("hardirq_count_per_s".into(), float(f.hardirq_count_per_s));
    g.insert(
        "hardirq_time_ms_per_s".into(),
        float(f.hardirq_time_ms_per_s),
    );
    g.insert(
        "hardirq_cpu_max_share".into(),
        float(f.hardirq_cpu_max_share),
    );
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
    g.insert("drops".into(), int(f.drops));
    g.insert("drops_unmatched_exit".into(), int(d.unmatched_exit));
    g.insert("drops_irq_map_full".into(), int(d.irq_map_full));
    g.insert("drops_bad_vector".into(), int(d.bad_vector));
    Ok(g)
}

#[cfg(test)]
pub(crate) mod testdata;

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
