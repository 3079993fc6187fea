//! The softirq family in the report: softirq CPU time per CPU and vector,
//! NET_RX imbalance, the busiest CPU and the hard IRQs with most time,
//! built from the same [`SoftirqTotals`] the `softirq` facts are computed
//! from (its summary figures are the facts' own typed [`SoftirqFigures`];
//! the per-CPU and per-IRQ tables, which facts do not carry, from the
//! totals), and the view of them that the terminal and Markdown reports lay
//! out.

use serde::{Deserialize, Serialize};

use super::figures::SoftirqFigures;
use super::totals::{MAIN_VECTORS, SoftirqTotals};
use crate::findings::format_number;
use crate::kit::view::{
    Block, Cell, Column, Line, Row, Section, Table, capitalise, md_cell, percent,
};

/// Hard IRQs listed, by time.
pub const TOP_HARDIRQS: usize = 3;
/// Hosts with at most this many CPUs get one softirq row per CPU; larger ones
/// get the [`BUSIEST_CPU_ROWS`] busiest CPUs and one row for the others.
pub const MAX_CPU_ROWS: usize = 16;
pub const BUSIEST_CPU_ROWS: usize = 8;

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

/// The measurements of `t`; its summary figures are the very ones its facts
/// are written from ([`SoftirqFigures`]).
pub fn build(t: &SoftirqTotals) -> SoftirqMeasurements {
    let f = SoftirqFigures::of(t);
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
        count_per_s: f.count_per_s,
        time_ms_per_s: f.time_ms_per_s,
        cpu_mean_share: f.cpu_mean_share,
        cpu_max_share_cpu: f.cpu_max_share_cpu,
        cpu_max_share: f.cpu_max_share,
        net_rx_imbalance: f.net_rx_imbalance,
        net_rx_busiest_cpu: f.net_rx_busiest_cpu,
        net_rx_busiest_share: f.net_rx_busiest_share,
        net_rx_time_share_of_cpu: f.net_rx_time_share_of_cpu,
        hardirq_count_per_s: f.hardirq_count_per_s,
        hardirq_time_ms_per_s: f.hardirq_time_ms_per_s,
        top_hardirqs,
        drops: SoftirqDropsReport {
            unmatched_exit: d.unmatched_exit,
            irq_map_full: d.irq_map_full,
            bad_vector: d.bad_vector,
            total: f.drops,
        },
    }
}

/// "NET_RX imbalance 3.43 (busiest CPU / mean; 1.00 = even): CPU 0 has 85.7%
/// of NET_RX time, and NET_RX takes 30.0% of that CPU".
fn net_rx_line(s: &SoftirqMeasurements) -> String {
    if s.net_rx_imbalance == 0.0 {
        return "NET_RX: no time recorded".into();
    }
    format!(
        "NET_RX imbalance {:.2} (busiest CPU / mean; 1.00 = even, {} = all on one CPU): \
         CPU {} has {} of NET_RX time, and NET_RX takes {} of that CPU",
        s.net_rx_imbalance,
        s.cpu_count,
        s.net_rx_busiest_cpu,
        percent(s.net_rx_busiest_share),
        percent(s.net_rx_time_share_of_cpu)
    )
}

/// "busiest CPU in softirqs: CPU 0, 30.5% of its time (mean over 4 CPUs 9.2%)".
fn softirq_cpu_line(s: &SoftirqMeasurements) -> String {
    format!(
        "busiest CPU in softirqs: CPU {}, {} of its time (mean over {} CPUs {})",
        s.cpu_max_share_cpu,
        percent(s.cpu_max_share),
        s.cpu_count,
        percent(s.cpu_mean_share)
    )
}

/// "3 events lost (3 exits without entry, 0 IRQ map full, 0 bad vector)", or
/// `None` when nothing was lost.
fn softirq_drops_line(s: &SoftirqMeasurements) -> Option<String> {
    let d = &s.drops;
    (d.total > 0).then(|| {
        format!(
            "{} events lost ({} exits without entry, normal right after attach; \
             {} IRQ map full; {} bad vector)",
            d.total, d.unmatched_exit, d.irq_map_full, d.bad_vector
        )
    })
}

/// The softirq section: the title, the per-CPU table, the summary lines and
/// the hard IRQs with most time.
pub fn section(s: &SoftirqMeasurements) -> Section {
    let mut out = Section::new(Some("Softirq"));
    out.push(Line::title(
        "Softirq",
        Some(format!(
            "host-wide, {} CPUs, {:.1} s; CPU time in ms per second (1000 = one whole CPU)",
            s.cpu_count, s.duration_s
        )),
        false,
    ))
    .push(Block::Para(format!(
        "Host-wide, {} CPUs, {:.1} s. CPU time in ms per second (1000 = one whole CPU).",
        s.cpu_count, s.duration_s
    )));
    out.push(Block::Table(cpu_table(s)));
    let drops = softirq_drops_line(s);
    summary_lines(&mut out, s, drops.as_deref());
    out.push(Block::Table(hardirq_table(s)));
    if let Some(d) = drops {
        out.push(Line::wrapped("    ", d));
    }
    out
}

/// Softirq time per CPU and vector (the busiest CPUs and a mean of the
/// others on large hosts), the all-CPU total, and entries per second.
fn cpu_table(s: &SoftirqMeasurements) -> Table {
    let mut columns = vec![Column::num("CPU", "CPU", "", 10)];
    columns[0].align = crate::kit::view::Align::Left;
    for v in &s.vectors {
        columns.push(Column::num(&v.name, &v.name, "", 8));
    }
    columns.push(Column::num("all", "all", "", 8));
    columns.push(Column::num("% CPU", "% CPU", "", 7));
    let mut t = Table::new("      ", columns);
    let row = |label: Cell, times: &[f64], all: f64, share: f64| -> Vec<Cell> {
        let mut cells = vec![label];
        cells.extend(times.iter().map(|v| Cell::new(format!("{v:.1}"))));
        cells.push(Cell::new(format!("{all:.1}")));
        cells.push(Cell::new(format!("{:.1}", share * 100.0)));
        cells
    };
    for c in &s.cpus {
        let label = Cell::new(c.cpu.to_string());
        t.rows
            .push(row(label, &c.time_ms_per_s, c.all_ms_per_s, c.share).into());
    }
    if let Some(o) = &s.other_cpus {
        let label = Cell::two(
            format!("mean of {}", o.cpus),
            format!("mean of the {} others", o.cpus),
        );
        t.rows
            .push(row(label, &o.time_ms_per_s, o.all_ms_per_s, o.share).into());
    }
    let totals: Vec<f64> = s.vectors.iter().map(|v| v.time_ms_per_s).collect();
    let label = Cell::two("all CPUs", "**all CPUs**");
    t.rows.push(Row {
        cells: row(label, &totals, s.time_ms_per_s, s.cpu_mean_share),
        bold: true,
    });
    // Entries have no share: the terminal row ends early, Markdown leaves
    // the cell empty.
    let mut counts = vec![Cell::new("entries/s")];
    counts.extend(
        s.vectors
            .iter()
            .map(|v| Cell::new(format!("{:.0}", v.count_per_s))),
    );
    counts.push(Cell::new(format!("{:.0}", s.count_per_s)));
    counts.push(Cell::new(""));
    t.rows.push(counts.into());
    t
}

/// NET_RX, the busiest CPU and hard IRQs: lines for the terminal, bullets
/// for Markdown (with the drops, when any).
fn summary_lines(out: &mut Section, s: &SoftirqMeasurements, drops: Option<&str>) {
    let hard = (
        format_number(s.hardirq_count_per_s),
        format_number(s.hardirq_time_ms_per_s),
    );
    out.push(Line::wrapped("    ", net_rx_line(s)))
        .push(Line::wrapped("    ", softirq_cpu_line(s)))
        .push(Line::plain(
            "    ",
            format!(
                "hard IRQs {}/s, {} ms/s{}",
                hard.0,
                hard.1,
                if s.top_hardirqs.is_empty() {
                    ""
                } else {
                    "; most time:"
                }
            ),
        ));
    let mut bullets = vec![
        format!("{}.", net_rx_line(s)),
        format!("{}.", capitalise(&softirq_cpu_line(s))),
        format!("Hard IRQs: {}/s, {} ms/s.", hard.0, hard.1),
    ];
    if let Some(d) = drops {
        bullets.push(format!("{}.", capitalise(d)));
    }
    out.push(Block::Bullets(bullets));
}

/// The hard IRQs with most time.
fn hardirq_table(s: &SoftirqMeasurements) -> Table {
    let mut irqs = Table::new(
        "      ",
        vec![
            Column::num("IRQ", "IRQ", "", 5),
            Column::text("name", "Name", "  ", 30),
            Column::num("per s", "Per second", " ", 9),
            Column::num("ms/s", "ms/s", " ", 8),
            Column::num("busiest CPU", "Busiest CPU", " ", 12),
        ],
    );
    for h in &s.top_hardirqs {
        irqs.rows.push(
            vec![
                Cell::new(h.irq.to_string()),
                Cell::two(&h.name, md_cell(&h.name)),
                Cell::new(format!("{:.0}", h.count_per_s)),
                Cell::new(format!("{:.1}", h.time_ms_per_s)),
                Cell::new(h.busiest_cpu.to_string()),
            ]
            .into(),
        );
    }
    irqs
}

#[cfg(test)]
mod tests {
    use super::super::testdata::net_rx_on_cpu0;
    use super::*;
    use crate::report::measurements::tests::{build, close, close_all};

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
}
