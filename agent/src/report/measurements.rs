//! The report's "Measurements": what each probe family measured, shown
//! whether or not a rule used it, so that an SRE sees the numbers behind (and
//! beside) the findings.
//!
//! Everything here is taken from the [`Facts`] (the same numbers rules see)
//! and, for per-CPU and per-IRQ tables that facts do not carry, from the same
//! [`SoftirqTotals`] the facts are computed from; so the report and the rules
//! cannot disagree. A family whose facts are absent is listed in
//! [`Measurements::not_recorded`] with the reason instead.

use serde::{Deserialize, Serialize};

use crate::recording::model::{Recording, RxQueue};
use crate::rules::FactValue;
use crate::rules::facts::softirq::{MAIN_VECTORS, SoftirqTotals, rps_mask_set};
use crate::rules::facts::{FactGroup, Facts};

/// Thread classes listed, by involuntary switches.
pub const TOP_CLASSES: usize = 5;
/// Hard IRQs listed, by time.
pub const TOP_HARDIRQS: usize = 3;
/// Hosts with at most this many CPUs get one softirq row per CPU; larger ones
/// get the [`BUSIEST_CPU_ROWS`] busiest CPUs and one row for the others.
pub const MAX_CPU_ROWS: usize = 16;
pub const BUSIEST_CPU_ROWS: usize = 8;

/// What the probes measured, by family.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Measurements {
    /// Scheduler family; `None` when its facts are absent (see `not_recorded`).
    pub sched: Option<SchedMeasurements>,
    /// Softirq / hard-IRQ family; `None` when its facts are absent.
    pub softirq: Option<SoftirqMeasurements>,
    /// RPS/RFS state of the host; `None` when it could not be read.
    pub net: Option<NetMeasurements>,
    /// Probe families without measurements, and why (not attached, attached
    /// only partly, attached but recorded nothing).
    pub not_recorded: Vec<FamilyNote>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FamilyNote {
    pub family: String,
    pub reason: String,
}

/// Scheduler measurements (`sched` facts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchedMeasurements {
    /// "target" (the target's threads) or "host" (every non-idle task).
    pub scope: String,
    pub duration_s: f64,
    /// Every context switch on every CPU.
    pub switches_per_s: f64,
    /// Switches of observed threads (voluntary + involuntary).
    pub observed_switches_per_s: f64,
    pub involuntary_per_s: f64,
    /// Involuntary / observed switches (0..1).
    pub involuntary_share: f64,
    pub runq_p50_us: f64,
    pub runq_p90_us: f64,
    pub runq_p99_us: f64,
    pub threads: i64,
    /// Up to [`TOP_CLASSES`] thread classes with the most involuntary
    /// switches, most first (classes with none are left out).
    pub top_classes: Vec<ThreadClassMeasurement>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadClassMeasurement {
    /// Thread name without trailing digits ("conn", "WTEvict", "kworker").
    pub class: String,
    pub threads: i64,
    pub involuntary_per_s: f64,
    /// Involuntary / (voluntary + involuntary) switches of the class.
    pub involuntary_share: f64,
    /// Mean run-queue delay of the class's threads, µs.
    pub runq_mean_us: f64,
}

/// Softirq and hard-IRQ measurements (`softirq` facts). Host-wide. Times are
/// milliseconds of CPU time per second of wall time (1000 = one whole CPU).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoftirqMeasurements {
    pub duration_s: f64,
    /// CPUs the per-CPU numbers cover.
    pub cpu_count: u32,
    /// NET_RX, NET_TX, TIMER, RCU, SCHED, BLOCK: totals over all CPUs. The
    /// per-CPU rows' `time_ms_per_s` follow this order.
    pub vectors: Vec<SoftirqVectorMeasurement>,
    /// One row per CPU, in CPU order; on hosts with more than
    /// [`MAX_CPU_ROWS`] CPUs only the [`BUSIEST_CPU_ROWS`] with the most
    /// softirq time (still in CPU order), the rest in `other_cpus`.
    pub cpus: Vec<SoftirqCpuRow>,
    /// The CPUs left out of `cpus`, as a mean per CPU; `None` when none were.
    pub other_cpus: Option<SoftirqCpuMean>,
    /// All vectors (not only the six), all CPUs.
    pub count_per_s: f64,
    pub time_ms_per_s: f64,
    /// Mean share of a CPU's time in softirqs (0..1).
    pub cpu_mean_share: f64,
    /// The CPU with the most softirq time, and its share of time in softirqs.
    pub cpu_max_share_cpu: u32,
    pub cpu_max_share: f64,
    /// NET_RX: busiest CPU time / mean CPU time (1.0 = even; 0 without time).
    pub net_rx_imbalance: f64,
    pub net_rx_busiest_cpu: u32,
    /// Share of NET_RX time on that CPU (0..1).
    pub net_rx_busiest_share: f64,
    /// NET_RX time on that CPU / wall time: how much of the CPU NET_RX takes.
    pub net_rx_time_share_of_cpu: f64,
    pub hardirq_count_per_s: f64,
    pub hardirq_time_ms_per_s: f64,
    /// Up to [`TOP_HARDIRQS`] hard IRQs with the most time, most first.
    pub top_hardirqs: Vec<HardIrqMeasurement>,
    pub drops: SoftirqDropsReport,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoftirqVectorMeasurement {
    /// Kernel name: "NET_RX", ...
    pub name: String,
    pub count_per_s: f64,
    pub time_ms_per_s: f64,
    /// Busiest CPU time / mean CPU time (1.0 = even; 0 without time).
    pub imbalance: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoftirqCpuRow {
    pub cpu: u32,
    /// Per vector of [`SoftirqMeasurements::vectors`], ms/s.
    pub time_ms_per_s: Vec<f64>,
    /// Every vector, ms/s.
    pub all_ms_per_s: f64,
    /// Share of the CPU's time in softirqs (0..1).
    pub share: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoftirqCpuMean {
    /// How many CPUs the means are over.
    pub cpus: u32,
    pub time_ms_per_s: Vec<f64>,
    pub all_ms_per_s: f64,
    pub share: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HardIrqMeasurement {
    pub irq: u32,
    /// Handler names ("eth0-TxRx-0"; "irqN" when unknown).
    pub name: String,
    pub count_per_s: f64,
    pub time_ms_per_s: f64,
    /// The CPU that spent the most time in it.
    pub busiest_cpu: u32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoftirqDropsReport {
    /// Exits without a matching entry (normal right after attach).
    pub unmatched_exit: u64,
    pub irq_map_full: u64,
    pub bad_vector: u64,
    pub total: u64,
}

/// Receive packet / flow steering of the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetMeasurements {
    /// Some receive queue has a non-zero `rps_cpus` mask.
    pub rps_enabled: bool,
    /// `rps_sock_flow_entries` > 0 and some queue has `rps_flow_cnt` > 0.
    pub rfs_enabled: bool,
    pub rps_sock_flow_entries: u64,
    /// Interfaces with receive queues (loopback excluded), most queues first.
    pub interfaces: Vec<InterfaceMeasurement>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceMeasurement {
    pub name: String,
    pub rx_queues: u32,
    /// Queues with a non-zero `rps_cpus` mask.
    pub rps_queues: u32,
    /// Queues with `rps_flow_cnt` > 0.
    pub rfs_queues: u32,
}

impl Measurements {
    /// Measurements of `rec`, whose facts are `facts`.
    pub fn build(rec: &Recording, facts: &Facts) -> Measurements {
        let mut m = Measurements::default();
        match facts.group("sched") {
            Some(g) => m.sched = Some(sched(g)),
            None => m.not_recorded.push(note(facts, "sched")),
        }
        match (
            facts.group("softirq"),
            SoftirqTotals::from_recording(rec).ok(),
        ) {
            (Some(g), Some(totals)) => m.softirq = Some(softirq(g, &totals)),
            _ => m.not_recorded.push(note(facts, "softirq")),
        }
        // Families this build has no measurements for yet, when they failed.
        for probe in &rec.probes {
            if probe.family != "sched"
                && probe.family != "softirq"
                && let Some(reason) = crate::rules::facts::family_unavailable(rec, &probe.family)
            {
                m.not_recorded.push(FamilyNote {
                    family: probe.family.clone(),
                    reason,
                });
            }
        }
        m.net = rec.host.net.as_ref().map(|net| {
            let mut interfaces: Vec<InterfaceMeasurement> = net
                .interfaces
                .iter()
                .map(|i| {
                    let count = |f: fn(&RxQueue) -> bool| {
                        u32::try_from(i.rx_queues.iter().filter(|q| f(q)).count())
                            .unwrap_or(u32::MAX)
                    };
                    InterfaceMeasurement {
                        name: i.name.clone(),
                        rx_queues: count(|_| true),
                        rps_queues: count(|q| rps_mask_set(&q.rps_cpus)),
                        rfs_queues: count(|q| q.rps_flow_cnt > 0),
                    }
                })
                .collect();
            interfaces.sort_by(|a, b| b.rx_queues.cmp(&a.rx_queues).then(a.name.cmp(&b.name)));
            NetMeasurements {
                rps_enabled: net.rps_enabled(),
                rfs_enabled: net.rfs_enabled(),
                rps_sock_flow_entries: net.rps_sock_flow_entries,
                interfaces,
            }
        });
        m
    }
}

fn note(facts: &Facts, family: &str) -> FamilyNote {
    FamilyNote {
        family: family.to_string(),
        reason: facts
            .absent_reason(family)
            .unwrap_or("no data was recorded")
            .to_string(),
    }
}

fn f64_of(g: &FactGroup, name: &str) -> f64 {
    g.get(name).and_then(FactValue::as_f64).unwrap_or(0.0)
}

fn i64_of(g: &FactGroup, name: &str) -> i64 {
    match g.get(name) {
        Some(FactValue::Int(i)) => *i,
        _ => 0,
    }
}

fn u32_of(g: &FactGroup, name: &str) -> u32 {
    u32::try_from(i64_of(g, name)).unwrap_or(0)
}

fn sched(g: &FactGroup) -> SchedMeasurements {
    let duration_s = f64_of(g, "duration_s");
    let mut top_classes: Vec<ThreadClassMeasurement> = match g.get("classes") {
        Some(FactValue::Map(classes)) => classes
            .iter()
            .filter_map(|(name, c)| match c {
                FactValue::Map(c) => Some((name, c)),
                _ => None,
            })
            .filter(|(_, c)| i64_of(c, "involuntary") > 0)
            .map(|(name, c)| ThreadClassMeasurement {
                class: name.clone(),
                threads: i64_of(c, "threads"),
                involuntary_per_s: if duration_s > 0.0 {
                    i64_of(c, "involuntary") as f64 / duration_s
                } else {
                    0.0
                },
                involuntary_share: f64_of(c, "involuntary_share"),
                runq_mean_us: f64_of(c, "runq_mean_us"),
            })
            .collect(),
        _ => Vec::new(),
    };
    top_classes.sort_by(|a, b| {
        b.involuntary_per_s
            .total_cmp(&a.involuntary_per_s)
            .then_with(|| a.class.cmp(&b.class))
    });
    top_classes.truncate(TOP_CLASSES);
    let scope = match g.get("scope") {
        Some(FactValue::Text(s)) => s.clone(),
        _ => String::new(),
    };
    SchedMeasurements {
        scope,
        duration_s,
        switches_per_s: f64_of(g, "switches_per_s"),
        observed_switches_per_s: f64_of(g, "observed_switches_per_s"),
        involuntary_per_s: f64_of(g, "involuntary_per_s"),
        involuntary_share: f64_of(g, "involuntary_share"),
        runq_p50_us: f64_of(g, "runq_p50_us"),
        runq_p90_us: f64_of(g, "runq_p90_us"),
        runq_p99_us: f64_of(g, "runq_p99_us"),
        threads: i64_of(g, "threads"),
        top_classes,
    }
}

fn softirq(g: &FactGroup, t: &SoftirqTotals) -> SoftirqMeasurements {
    let vectors: Vec<SoftirqVectorMeasurement> = MAIN_VECTORS
        .iter()
        .map(|name| {
            let v = t.vector(name);
            SoftirqVectorMeasurement {
                name: (*name).to_string(),
                count_per_s: t.per_s(v.count_total()),
                time_ms_per_s: t.ms_per_s(v.time_total_ns()),
                imbalance: v.imbalance(),
            }
        })
        .collect();
    let main: Vec<_> = MAIN_VECTORS.iter().map(|name| t.vector(name)).collect();
    let all = t.softirq_ns_per_cpu();
    let row = |cpu: usize| SoftirqCpuRow {
        cpu: u32::try_from(cpu).unwrap_or(u32::MAX),
        time_ms_per_s: main
            .iter()
            .map(|v| t.ms_per_s(v.time_ns.get(cpu).copied().unwrap_or(0)))
            .collect(),
        all_ms_per_s: t.ms_per_s(all[cpu]),
        share: t.cpu_share(all[cpu]),
    };
    let mut shown: Vec<usize> = (0..t.cpus).collect();
    let mut others: Vec<usize> = Vec::new();
    if t.cpus > MAX_CPU_ROWS {
        shown.sort_by_key(|&cpu| (std::cmp::Reverse(all[cpu]), cpu));
        others = shown.split_off(BUSIEST_CPU_ROWS);
        shown.sort_unstable();
    }
    let other_cpus = (!others.is_empty()).then(|| {
        let n = others.len() as f64;
        let sum = |per_cpu: &[u64]| -> u64 {
            others
                .iter()
                .map(|&c| per_cpu.get(c).copied().unwrap_or(0))
                .sum()
        };
        let all_sum = sum(&all);
        SoftirqCpuMean {
            cpus: u32::try_from(others.len()).unwrap_or(u32::MAX),
            time_ms_per_s: main
                .iter()
                .map(|v| t.ms_per_s(sum(&v.time_ns)) / n)
                .collect(),
            all_ms_per_s: t.ms_per_s(all_sum) / n,
            share: t.cpu_share(all_sum) / n,
        }
    });
    let top_hardirqs = t
        .hardirqs_by_time()
        .into_iter()
        .take(TOP_HARDIRQS)
        .map(|h| HardIrqMeasurement {
            irq: h.irq,
            name: h.name.clone(),
            count_per_s: t.per_s(h.per_cpu.count_total()),
            time_ms_per_s: t.ms_per_s(h.per_cpu.time_total_ns()),
            busiest_cpu: h
                .per_cpu
                .busiest()
                .map_or(0, |(cpu, _)| u32::try_from(cpu).unwrap_or(u32::MAX)),
        })
        .collect();
    let d = t.drops;
    SoftirqMeasurements {
        duration_s: t.duration_s,
        cpu_count: u32::try_from(t.cpus).unwrap_or(u32::MAX),
        vectors,
        cpus: shown.into_iter().map(row).collect(),
        other_cpus,
        count_per_s: f64_of(g, "count_per_s"),
        time_ms_per_s: f64_of(g, "time_ms_per_s"),
        cpu_mean_share: f64_of(g, "cpu_mean_share"),
        cpu_max_share_cpu: u32_of(g, "cpu_max_share_cpu"),
        cpu_max_share: f64_of(g, "cpu_max_share"),
        net_rx_imbalance: f64_of(g, "net_rx_imbalance"),
        net_rx_busiest_cpu: u32_of(g, "net_rx_busiest_cpu"),
        net_rx_busiest_share: f64_of(g, "net_rx_busiest_share"),
        net_rx_time_share_of_cpu: f64_of(g, "net_rx_time_share_of_cpu"),
        hardirq_count_per_s: f64_of(g, "hardirq_count_per_s"),
        hardirq_time_ms_per_s: f64_of(g, "hardirq_time_ms_per_s"),
        top_hardirqs,
        drops: SoftirqDropsReport {
            unmatched_exit: d.unmatched_exit,
            irq_map_full: d.irq_map_full,
            bad_vector: d.bad_vector,
            total: d
                .unmatched_exit
                .saturating_add(d.irq_map_full)
                .saturating_add(d.bad_vector),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::facts::softirq::testdata::{net_rx_on_cpu0, softirq_probe};

    fn build(rec: &Recording) -> Measurements {
        Measurements::build(rec, &Facts::derive(rec))
    }

    fn close(got: f64, want: f64) {
        assert!((got - want).abs() < 1e-9, "{got}, expected {want}");
    }

    fn close_all(got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-9, "{got:?}, expected {want:?}");
        }
    }

    #[test]
    fn sched_measurements_come_from_the_facts() {
        let m = build(&net_rx_on_cpu0());
        let s = m.sched.expect("sched measured");
        assert_eq!(s.scope, "target");
        close(s.duration_s, 10.0);
        close(s.switches_per_s, 1500.0);
        close(s.observed_switches_per_s, 720.0);
        close(s.involuntary_per_s, 650.0);
        close(s.involuntary_share, 650.0 / 720.0);
        // 720 delays per second: 60 in [4, 8) µs, 100 in [1, 2) ms, 400 in
        // [2, 4) ms, 155 in [4, 8) ms, 5 in [8, 16) ms. p50 = rank 360: 200
        // into the 400 of [2^21, 2^22) ns = 2^21 × 1.5 ns.
        close(s.runq_p50_us, 2_097_152.0 * 1.5 / 1000.0);
        // p99 = rank 712.8: 152.8 into the 155 of [2^22, 2^23) ns.
        close(
            s.runq_p99_us,
            (4_194_304.0 + 4_194_304.0 * 152.8 / 155.0) / 1000.0,
        );
        assert_eq!(s.threads, 4);
        assert_eq!(s.top_classes.len(), 1);
        let conn = &s.top_classes[0];
        assert_eq!(conn.class, "conn");
        assert_eq!(conn.threads, 4);
        close(conn.involuntary_per_s, 650.0);
        close(conn.involuntary_share, 650.0 / 720.0);
        close(conn.runq_mean_us, 3000.0);
    }

    #[test]
    fn top_classes_are_ordered_and_limited() {
        let mut rec = net_rx_on_cpu0();
        for s in &mut rec.slices {
            let sched = s.sched.as_mut().unwrap();
            let template = sched.threads[0].clone();
            for (i, name) in ["WTEvict-1", "ftdc", "repl1", "kworker/0:1", "idle0", "a1"]
                .iter()
                .enumerate()
            {
                let mut t = template.clone();
                t.tid = 2000 + i as u32;
                t.comm = (*name).into();
                t.involuntary = 10 * (i as u64 + 1);
                sched.threads.push(t);
            }
        }
        let s = build(&rec).sched.unwrap();
        let names: Vec<&str> = s.top_classes.iter().map(|c| c.class.as_str()).collect();
        // conn (650/s), then a (60), idle (50), kworker (40), repl (30).
        assert_eq!(names, ["conn", "a", "idle", "kworker", "repl"]);
        close(s.top_classes[1].involuntary_per_s, 60.0);
    }

    #[test]
    fn softirq_measurements_have_per_cpu_rows_and_top_irqs() {
        let m = build(&net_rx_on_cpu0());
        assert!(m.not_recorded.is_empty(), "{:?}", m.not_recorded);
        let s = m.softirq.expect("softirq measured");
        assert_eq!(s.cpu_count, 4);
        close(s.duration_s, 10.0);
        let names: Vec<&str> = s.vectors.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            ["NET_RX", "NET_TX", "TIMER", "RCU", "SCHED", "BLOCK"]
        );
        close_all(
            &s.vectors
                .iter()
                .map(|v| v.time_ms_per_s)
                .collect::<Vec<_>>(),
            &[350.0, 8.0, 4.0, 2.0, 4.8, 0.0],
        );
        close_all(
            &s.vectors.iter().map(|v| v.count_per_s).collect::<Vec<_>>(),
            &[48_000.0, 2000.0, 4000.0, 1000.0, 2400.0, 0.0],
        );
        close_all(
            &s.vectors.iter().map(|v| v.imbalance).collect::<Vec<_>>(),
            &[300.0 / 87.5, 1.0, 1.0, 1.2, 1.6 / 1.2, 0.0],
        );

        assert_eq!(
            s.cpus.iter().map(|c| c.cpu).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        close_all(&s.cpus[0].time_ms_per_s, &[300.0, 2.0, 1.0, 0.6, 1.6, 0.0]);
        close(s.cpus[0].all_ms_per_s, 305.25); // HRTIMER's 0.05 included
        close(s.cpus[0].share, 0.30525);
        close_all(&s.cpus[3].time_ms_per_s, &[10.0, 2.0, 1.0, 0.6, 0.8, 0.0]);
        close(s.cpus[3].all_ms_per_s, 14.4);
        assert_eq!(s.other_cpus, None);
        close(s.time_ms_per_s, 368.85);
        close(s.count_per_s, 57_410.0);
        close(s.cpu_mean_share, 368.85 / 4000.0);
        assert_eq!(s.cpu_max_share_cpu, 0);
        close(s.cpu_max_share, 0.30525);

        close(s.net_rx_imbalance, 300.0 / 87.5);
        assert_eq!(s.net_rx_busiest_cpu, 0);
        close(s.net_rx_busiest_share, 300.0 / 350.0);
        close(s.net_rx_time_share_of_cpu, 0.3);

        close(s.hardirq_count_per_s, 22_505.0);
        close(s.hardirq_time_ms_per_s, 45.01);
        let irqs: Vec<(u32, &str, u32)> = s
            .top_hardirqs
            .iter()
            .map(|h| (h.irq, h.name.as_str(), h.busiest_cpu))
            .collect();
        assert_eq!(
            irqs,
            [
                (45, "eth0-TxRx-0", 0),
                (46, "eth0-TxRx-1", 1),
                (24, "nvme0q1", 2)
            ]
        );
        close(s.top_hardirqs[0].count_per_s, 20_000.0);
        close(s.top_hardirqs[0].time_ms_per_s, 40.0);
        close(s.top_hardirqs[2].time_ms_per_s, 1.0);
        assert_eq!(
            s.drops,
            SoftirqDropsReport {
                unmatched_exit: 3,
                irq_map_full: 0,
                bad_vector: 0,
                total: 3
            }
        );
    }

    #[test]
    fn large_hosts_show_the_busiest_cpus_and_a_mean_of_the_others() {
        // 20 CPUs: NET_RX time 10 ms on CPU i for i in 0..20, 1000 ms on CPU 7.
        let mut rec = net_rx_on_cpu0();
        rec.host.cpu_count = 20;
        for s in &mut rec.slices {
            let softirq = s.softirq.as_mut().unwrap();
            softirq.hardirqs.clear();
            softirq.vectors = vec![crate::recording::model::SoftirqVector {
                name: "NET_RX".into(),
                count_per_cpu: vec![1; 20],
                time_ns_per_cpu: (0..20u64)
                    .map(|i| if i == 7 { 100_000_000 } else { i * 1_000_000 })
                    .collect(),
            }];
        }
        let s = build(&rec).softirq.unwrap();
        assert_eq!(s.cpu_count, 20);
        // The 8 busiest: 7 and 19..=13, shown in CPU order.
        assert_eq!(
            s.cpus.iter().map(|c| c.cpu).collect::<Vec<_>>(),
            [7, 13, 14, 15, 16, 17, 18, 19]
        );
        close(s.cpus[0].time_ms_per_s[0], 100.0);
        let others = s.other_cpus.expect("others summarised");
        assert_eq!(others.cpus, 12);
        // CPUs 0..=6 and 8..=12: (0+…+6 + 8+…+12) ms / 12 = 71 / 12.
        close(others.time_ms_per_s[0], 71.0 / 12.0);
        close(others.all_ms_per_s, 71.0 / 12.0);
        close(others.share, 71.0 / 12.0 / 1000.0);
        assert!(s.top_hardirqs.is_empty());
    }

    #[test]
    fn families_without_data_are_listed_with_the_reason() {
        let mut rec = net_rx_on_cpu0();
        rec.probes[1] = softirq_probe(Some("tracepoint softirq_entry not found"));
        rec.probes[0].programs[0].error = Some("permission denied".into());
        rec.probes.push(crate::recording::model::ProbeStatus {
            family: "alloc".into(),
            programs: vec![crate::recording::model::ProgramStatus {
                name: "malloc".into(),
                attach_point: "uprobe/malloc".into(),
                error: Some("no such symbol".into()),
            }],
        });
        let m = build(&rec);
        assert_eq!(m.sched, None);
        assert_eq!(m.softirq, None);
        let notes: Vec<(&str, &str)> = m
            .not_recorded
            .iter()
            .map(|n| (n.family.as_str(), n.reason.as_str()))
            .collect();
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert_eq!(notes[0].0, "sched");
        assert!(
            notes[0]
                .1
                .contains("sched_switch (tp_btf/sched_switch): permission denied"),
            "{notes:?}"
        );
        assert_eq!(notes[1].0, "softirq");
        assert!(
            notes[1]
                .1
                .starts_with("the softirq probe attached only partly"),
            "{notes:?}"
        );
        assert_eq!(
            notes[2],
            (
                "alloc",
                "the alloc probe did not attach: malloc (uprobe/malloc): no such symbol"
            )
        );
        // The host's RPS/RFS state does not depend on any probe.
        assert!(m.net.is_some());
    }

    #[test]
    fn net_measurements_per_interface() {
        let m = build(&net_rx_on_cpu0());
        let n = m.net.expect("net state readable");
        assert!(!n.rps_enabled);
        assert!(n.rfs_enabled);
        assert_eq!(n.rps_sock_flow_entries, 32_768);
        assert_eq!(
            n.interfaces,
            [
                InterfaceMeasurement {
                    name: "eth0".into(),
                    rx_queues: 4,
                    rps_queues: 0,
                    rfs_queues: 4
                },
                InterfaceMeasurement {
                    name: "eth1".into(),
                    rx_queues: 2,
                    rps_queues: 0,
                    rfs_queues: 0
                },
            ]
        );
        let mut rec = net_rx_on_cpu0();
        rec.host.net = None;
        assert_eq!(build(&rec).net, None);
    }
}
