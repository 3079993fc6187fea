//! The softirq family's totals over a window: interrupt work per CPU
//! (softirq vectors and hard IRQs), computed once; the facts
//! ([`super::facts`]) and the report section ([`super::report`]) are both
//! written from them.
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

use super::section::{SoftirqDrops, SoftirqSlice};
use crate::kit::fact::{family_unavailable, ratio};
use crate::kit::family::FamilyWindow;

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
    pub(crate) fn new(cpus: usize) -> PerCpu {
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
    /// The softirq totals of a window of a recording (all its slices
    /// merged: vectors matched by name, IRQs by number, per-CPU arrays
    /// summed). `Err` with the reason when the softirq probe did not (fully)
    /// attach or recorded nothing.
    pub fn from_window(w: &FamilyWindow<SoftirqSlice>) -> Result<SoftirqTotals, String> {
        if let Some(reason) = family_unavailable(w.probes, super::FAMILY) {
            return Err(reason);
        }
        let Some(s) = w.section else {
            return Err(format!(
                "the softirq probe attached but the recording has no softirq data ({} slices)",
                w.slices
            ));
        };
        let cpus = active_cpus(w.host_cpus, s);
        let mut totals = SoftirqTotals {
            duration_s: w.section_ms as f64 / 1000.0,
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
fn active_cpus(host_cpus: u32, s: &SoftirqSlice) -> usize {
    let active = |v: &[u64]| v.iter().rposition(|&n| n > 0).map_or(0, |i| i + 1);
    let mut cpus = usize::try_from(host_cpus).unwrap_or(0);
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
pub(super) fn max_with_cpu(values: &[u64]) -> (u64, usize) {
    values
        .iter()
        .enumerate()
        .max_by_key(|&(cpu, &v)| (v, std::cmp::Reverse(cpu)))
        .map_or((0, 0), |(cpu, &v)| (v, cpu))
}
