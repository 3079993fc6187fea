//! Recording types of the softirq family: softirq time and count per CPU and
//! vector, and hard-IRQ time per IRQ, in each slice.
//!
//! The family's part of the recording format; `recording::model`
//! re-exports these types so `recording::model::X` still names them.

use serde::{Deserialize, Serialize};

use crate::kit::family::Section;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoftirqSlice {
    /// Softirq vectors that ran in this slice (kernel names: NET_RX, TIMER, ...).
    pub vectors: Vec<SoftirqVector>,
    /// Hard IRQs that fired in this slice.
    pub hardirqs: Vec<HardIrqSlice>,
    pub drops: SoftirqDrops,
}

impl SoftirqSlice {
    /// Softirq entries plus hard IRQs, all CPUs.
    pub fn events(&self) -> u64 {
        let softirqs: u64 = self.vectors.iter().flat_map(|v| &v.count_per_cpu).sum();
        let hardirqs: u64 = self.hardirqs.iter().flat_map(|h| &h.count_per_cpu).sum();
        softirqs + hardirqs
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoftirqVector {
    pub name: String,
    /// Entries per CPU (index = CPU number), as /proc/softirqs counts them.
    pub count_per_cpu: Vec<u64>,
    /// Time in the vector's handlers per CPU, nanoseconds.
    pub time_ns_per_cpu: Vec<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HardIrqSlice {
    pub irq: u32,
    /// Handler names from /sys/kernel/irq/N/actions ("irqN" when unknown).
    pub name: String,
    pub count_per_cpu: Vec<u64>,
    pub time_ns_per_cpu: Vec<u64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoftirqDrops {
    /// Exits without a matching entry (their time is unknown; normal right after attach).
    pub unmatched_exit: u64,
    /// IRQ numbers that did not fit in the IRQ map.
    pub irq_map_full: u64,
    /// Softirq vector numbers out of range.
    pub bad_vector: u64,
}

impl Section for SoftirqSlice {
    fn drops_total(&self) -> u64 {
        let d = &self.drops;
        d.unmatched_exit + d.irq_map_full + d.bad_vector
    }
}
