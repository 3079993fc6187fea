//! The `softirq` fact group, written from the family's typed totals and
//! figures ([`SoftirqTotals`], [`SoftirqFigures`]). The host's RPS/RFS
//! state, which rules read beside it, is the `net` group
//! (`rules::facts::net`); the test recording is in [`super::testdata`].

use mdiag_common::softirq::VECTOR_NAMES;

use super::figures::SoftirqFigures;
use super::section::SoftirqSlice;
use super::totals::SoftirqTotals;
use crate::kit::fact::{FactGroup, float, int, text};
use crate::kit::family::FamilyWindow;

/// Fact-name prefix of a vector: "NET_RX" → "net_rx".
pub fn fact_prefix(vector: &str) -> String {
    vector.to_ascii_lowercase()
}

/// The `softirq` group, or why it is absent.
pub fn facts(w: &FamilyWindow<SoftirqSlice>) -> Result<FactGroup, String> {
    let t = SoftirqTotals::from_window(w)?;
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
#[cfg(test)]
mod tests {
    use super::super::testdata::*;
    use super::super::totals::PerCpu;
    use super::*;
    use crate::rules::facts::net::rps_mask_set;
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
