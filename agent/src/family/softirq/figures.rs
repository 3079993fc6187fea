//! The softirq family's summary figures, typed and computed once from its
//! [`SoftirqTotals`]: the `softirq` fact group is written from them and the
//! report's softirq measurements read them as fields, so the two always
//! agree and a figure the report shows cannot be looked up by a misspelt
//! name (the report used to read these back from the fact group by string,
//! with a silent 0 for a name it did not find).

use super::totals::{SoftirqTotals, max_with_cpu};

/// Rates over [`SoftirqTotals::duration_s`]; shares of one CPU's time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SoftirqFigures {
    /// Softirq entries per second, every vector.
    pub count_per_s: f64,
    /// Softirq time, ms per second, every vector.
    pub time_ms_per_s: f64,
    /// The busiest CPU's share of its time in softirqs, and that CPU.
    pub cpu_max_share: f64,
    pub cpu_max_share_cpu: u32,
    /// The mean share of a CPU's time in softirqs.
    pub cpu_mean_share: f64,
    /// NET_RX: busiest CPU's time over the mean (1.0 = even).
    pub net_rx_imbalance: f64,
    /// NET_RX's busiest CPU, its share of NET_RX time, and NET_RX's share
    /// of that CPU's time.
    pub net_rx_busiest_cpu: u32,
    pub net_rx_busiest_share: f64,
    pub net_rx_time_share_of_cpu: f64,
    /// Hard IRQs per second and their time, ms per second, every IRQ.
    pub hardirq_count_per_s: f64,
    pub hardirq_time_ms_per_s: f64,
    /// The busiest CPU's share of its time in hard IRQs.
    pub hardirq_cpu_max_share: f64,
    /// Events the kernel side could not count, all kinds.
    pub drops: u64,
}

impl SoftirqFigures {
    /// The figures of `t`.
    pub fn of(t: &SoftirqTotals) -> SoftirqFigures {
        let cpu_u32 = |cpu: usize| u32::try_from(cpu).unwrap_or(u32::MAX);
        let net_rx = t.vector("NET_RX");
        let busiest = net_rx.busiest();
        let (count, time): (u64, u64) = t.vectors.values().fold((0, 0), |(c, n), v| {
            (
                c.saturating_add(v.count_total()),
                n.saturating_add(v.time_total_ns()),
            )
        });
        let (max, max_cpu) = max_with_cpu(&t.softirq_ns_per_cpu());
        let (hcount, htime): (u64, u64) = t.hardirqs.values().fold((0, 0), |(c, n), h| {
            (
                c.saturating_add(h.per_cpu.count_total()),
                n.saturating_add(h.per_cpu.time_total_ns()),
            )
        });
        let (hmax, _) = max_with_cpu(&t.hardirq_ns_per_cpu());
        let d = t.drops;
        SoftirqFigures {
            count_per_s: t.per_s(count),
            time_ms_per_s: t.ms_per_s(time),
            cpu_max_share: t.cpu_share(max),
            cpu_max_share_cpu: cpu_u32(max_cpu),
            cpu_mean_share: t.cpu_share(time) / t.cpus as f64,
            net_rx_imbalance: net_rx.imbalance(),
            net_rx_busiest_cpu: busiest.map_or(0, |(cpu, _)| cpu_u32(cpu)),
            net_rx_busiest_share: net_rx.busiest_share(),
            net_rx_time_share_of_cpu: busiest.map_or(0.0, |(_, ns)| t.cpu_share(ns)),
            hardirq_count_per_s: t.per_s(hcount),
            hardirq_time_ms_per_s: t.ms_per_s(htime),
            hardirq_cpu_max_share: t.cpu_share(hmax),
            drops: d
                .unmatched_exit
                .saturating_add(d.irq_map_full)
                .saturating_add(d.bad_vector),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testdata::net_rx_on_cpu0;
    use super::*;
    use crate::rules::{FactValue, Facts};

    /// The facts are written from the figures: each figure equals the fact
    /// of its name, on a recording where every figure is non-zero or named.
    #[test]
    fn the_facts_carry_the_figures() {
        let rec = net_rx_on_cpu0();
        let whole = rec.window();
        let f = SoftirqFigures::of(
            &SoftirqTotals::from_window(&rec.family_window(&whole))
            .unwrap(),
        );
        let facts = Facts::derive(&rec);
        let fact = |name: &str| match facts.get(&format!("softirq.{name}")) {
            Some(FactValue::Float(x)) => *x,
            Some(FactValue::Int(i)) => *i as f64,
            other => panic!("softirq.{name}: {other:?}"),
        };
        let figures = [
            ("count_per_s", f.count_per_s),
            ("time_ms_per_s", f.time_ms_per_s),
            ("cpu_max_share", f.cpu_max_share),
            ("cpu_max_share_cpu", f64::from(f.cpu_max_share_cpu)),
            ("cpu_mean_share", f.cpu_mean_share),
            ("net_rx_imbalance", f.net_rx_imbalance),
            ("net_rx_busiest_cpu", f64::from(f.net_rx_busiest_cpu)),
            ("net_rx_busiest_share", f.net_rx_busiest_share),
            ("net_rx_time_share_of_cpu", f.net_rx_time_share_of_cpu),
            ("hardirq_count_per_s", f.hardirq_count_per_s),
            ("hardirq_time_ms_per_s", f.hardirq_time_ms_per_s),
            ("hardirq_cpu_max_share", f.hardirq_cpu_max_share),
            ("drops", f.drops as f64),
        ];
        for (name, value) in figures {
            assert_eq!(fact(name), value, "{name}");
        }
        assert!(f.net_rx_imbalance > 3.0 && f.count_per_s > 0.0, "{f:?}");
    }
}
