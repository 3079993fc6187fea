//! Softirq family, user side: per-CPU softirq counts and time per vector, and
//! hard-IRQ counts and time per IRQ, as one [`SoftirqSlice`] per second.
//!
//! Like the scheduler family, the kernel keeps cumulative counters and a slice
//! is the difference of two snapshots. IRQ names come from
//! `/sys/kernel/irq/<N>/actions`, read once per IRQ number.

use std::collections::{BTreeMap, HashMap};

use aya::{
    Ebpf,
    maps::{MapData, PerCpuArray, PerCpuHashMap},
};
use mdiag_common::softirq::{
    self as softirq_common, IrqStat, MAP_CPU, MAP_HARDIRQ, NR_SOFTIRQS, SoftirqCpu, VECTOR_NAMES,
};

use super::section::{HardIrqSlice, SoftirqDrops, SoftirqSlice, SoftirqVector};
use crate::kit::family::Family;
use crate::kit::probe::{
    AttachContext, Counters, FamilyReader, ProbeStatus, ReadError, SectionReader, edit_per_cpu,
    read_per_cpu, reader_if, take_map,
};

/// Family name in the recording's `probes`.
pub const FAMILY: &str = Family::Softirq.name();

/// Its `(program, BTF tracepoint)` pairs, checked against the kernel's BTF
/// before anything attaches.
pub const TRACEPOINTS: &[(&str, &str)] = &softirq_common::TRACEPOINTS;

/// Host-wide by nature (interrupts belong to CPUs); no precondition;
/// `softirq_entry` (the first program) is essential: its reader only then.
pub fn attach(ebpf: &mut Ebpf, cx: &AttachContext) -> (ProbeStatus, Option<SoftirqReader>) {
    let status = cx.attach_tracepoints(ebpf, FAMILY, TRACEPOINTS, &Ok(()));
    let reader = reader_if(&status, 0, FAMILY, || SoftirqReader::new(ebpf));
    (status, reader)
}

/// Cumulative counters at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SoftirqSnapshot {
    /// Index = CPU number.
    pub cpus: Vec<SoftirqCpu>,
    /// IRQ number → per-CPU counters.
    pub irqs: BTreeMap<u32, Vec<IrqStat>>,
}

pub struct SoftirqReader {
    cpu: PerCpuArray<MapData, SoftirqCpu>,
    irqs: PerCpuHashMap<MapData, u32, IrqStat>,
    names: HashMap<u32, String>,
    last: SoftirqSnapshot,
}

impl SoftirqReader {
    pub fn new(ebpf: &mut Ebpf) -> Result<Self, ReadError> {
        let cpu: PerCpuArray<MapData, SoftirqCpu> = take_map(ebpf, MAP_CPU)?;
        let irqs: PerCpuHashMap<MapData, u32, IrqStat> = take_map(ebpf, MAP_HARDIRQ)?;
        let mut reader = Self {
            cpu,
            irqs,
            names: HashMap::new(),
            last: SoftirqSnapshot::default(),
        };
        reader.last = reader.snapshot()?;
        Ok(reader)
    }

    /// The slice since the previous call (or since attach).
    pub fn next_slice(&mut self) -> Result<SoftirqSlice, ReadError> {
        let now = self.snapshot()?;
        let mut slice = slice_between(&self.last, &now);
        for irq in &mut slice.hardirqs {
            irq.name = self
                .names
                .entry(irq.irq)
                .or_insert_with(|| irq_name(irq.irq))
                .clone();
        }
        self.last = now;
        Ok(slice)
    }
}

impl Counters for SoftirqReader {
    type Snapshot = SoftirqSnapshot;
    type Slice = SoftirqSlice;

    fn snapshot(&self) -> Result<SoftirqSnapshot, ReadError> {
        let cpus = read_per_cpu(&self.cpu, 0, MAP_CPU)?;
        let cpus: Vec<SoftirqCpu> = cpus.iter().copied().collect();
        let mut irqs = BTreeMap::new();
        for (irq, values) in self.irqs.iter().flatten() {
            irqs.insert(irq, values.iter().copied().collect());
        }
        Ok(SoftirqSnapshot { cpus, irqs })
    }

    fn slice_between(before: &SoftirqSnapshot, after: &SoftirqSnapshot) -> SoftirqSlice {
        slice_between(before, after)
    }
}

impl FamilyReader for SoftirqReader {
    fn family(&self) -> &'static str {
        FAMILY
    }

    /// No softirq or hard IRQ open on any CPU.
    fn forget_in_flight(&mut self) -> Result<(), ReadError> {
        edit_per_cpu(&mut self.cpu, 0, MAP_CPU, |c| {
            c.softirq_entry_ts = 0;
            c.hardirq_entry_ts = 0;
        })
    }

    fn rebase(&mut self) -> Result<(), ReadError> {
        self.last = self.snapshot()?;
        Ok(())
    }
}

impl SectionReader for SoftirqReader {
    type Section = SoftirqSlice;

    fn read(&mut self, _last: bool) -> Result<SoftirqSlice, ReadError> {
        self.next_slice()
    }
}

/// The handler names of an IRQ ("virtio0-input.0", "eth0-TxRx-3", ...).
fn irq_name(irq: u32) -> String {
    std::fs::read_to_string(format!("/sys/kernel/irq/{irq}/actions"))
        .map(|s| s.trim().replace('\n', ","))
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("irq{irq}"))
}

/// The counters that changed between two snapshots. Pure, so testable.
pub fn slice_between(before: &SoftirqSnapshot, after: &SoftirqSnapshot) -> SoftirqSlice {
    let zero = SoftirqCpu::default();
    let ncpu = after.cpus.len();
    let mut vectors = Vec::new();
    for (v, name) in VECTOR_NAMES.iter().enumerate().take(NR_SOFTIRQS) {
        let mut count = Vec::with_capacity(ncpu);
        let mut time = Vec::with_capacity(ncpu);
        for (i, a) in after.cpus.iter().enumerate() {
            let b = before.cpus.get(i).unwrap_or(&zero);
            count.push(a.count[v].saturating_sub(b.count[v]));
            time.push(a.time_ns[v].saturating_sub(b.time_ns[v]));
        }
        if count.iter().chain(time.iter()).any(|&x| x > 0) {
            vectors.push(SoftirqVector {
                name: (*name).to_owned(),
                count_per_cpu: count,
                time_ns_per_cpu: time,
            });
        }
    }
    let mut drops = SoftirqDrops::default();
    for (i, a) in after.cpus.iter().enumerate() {
        let b = before.cpus.get(i).unwrap_or(&zero);
        drops.unmatched_exit += a.drop_unmatched_exit.saturating_sub(b.drop_unmatched_exit);
        drops.irq_map_full += a.drop_irq_map_full.saturating_sub(b.drop_irq_map_full);
        drops.bad_vector += a.drop_bad_vector.saturating_sub(b.drop_bad_vector);
    }
    let mut hardirqs = Vec::new();
    for (&irq, a) in &after.irqs {
        let b = before.irqs.get(&irq);
        let get = |cpu: usize| b.and_then(|b| b.get(cpu)).copied().unwrap_or_default();
        let count: Vec<u64> = a
            .iter()
            .enumerate()
            .map(|(c, s)| s.count.saturating_sub(get(c).count))
            .collect();
        let time: Vec<u64> = a
            .iter()
            .enumerate()
            .map(|(c, s)| s.time_ns.saturating_sub(get(c).time_ns))
            .collect();
        if count.iter().chain(time.iter()).any(|&x| x > 0) {
            hardirqs.push(HardIrqSlice {
                irq,
                name: String::new(),
                count_per_cpu: count,
                time_ns_per_cpu: time,
            });
        }
    }
    SoftirqSlice {
        vectors,
        hardirqs,
        drops,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(net_rx: u64, net_rx_ns: u64) -> SoftirqCpu {
        let mut c = SoftirqCpu::default();
        c.count[3] = net_rx;
        c.time_ns[3] = net_rx_ns;
        c
    }

    #[test]
    fn slice_keeps_active_vectors_and_irqs() {
        let before = SoftirqSnapshot {
            cpus: vec![cpu(10, 1000), cpu(5, 500)],
            irqs: BTreeMap::from([(
                11,
                vec![
                    IrqStat {
                        count: 1,
                        time_ns: 10,
                    },
                    IrqStat::default(),
                ],
            )]),
        };
        let mut after = SoftirqSnapshot {
            cpus: vec![cpu(30, 5000), cpu(5, 500)],
            irqs: BTreeMap::from([
                (
                    11,
                    vec![
                        IrqStat {
                            count: 4,
                            time_ns: 40,
                        },
                        IrqStat {
                            count: 2,
                            time_ns: 8,
                        },
                    ],
                ),
                (
                    12,
                    vec![
                        IrqStat {
                            count: 0,
                            time_ns: 0,
                        },
                        IrqStat::default(),
                    ],
                ),
            ]),
        };
        after.cpus[1].drop_unmatched_exit = 2;
        let s = slice_between(&before, &after);
        assert_eq!(s.vectors.len(), 1);
        assert_eq!(s.vectors[0].name, "NET_RX");
        assert_eq!(s.vectors[0].count_per_cpu, vec![20, 0]);
        assert_eq!(s.vectors[0].time_ns_per_cpu, vec![4000, 0]);
        assert_eq!(s.hardirqs.len(), 1);
        assert_eq!(s.hardirqs[0].count_per_cpu, vec![3, 2]);
        assert_eq!(s.hardirqs[0].time_ns_per_cpu, vec![30, 8]);
        assert_eq!(s.drops.unmatched_exit, 2);
    }

    #[test]
    fn irq_names_fall_back_to_the_number() {
        assert_eq!(irq_name(u32::MAX), format!("irq{}", u32::MAX));
    }
}
