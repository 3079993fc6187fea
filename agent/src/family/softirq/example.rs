//! The softirq family's section of the example recording
//! (`rules::facts::example`): made up, every number non-zero, so that every
//! fact the family derives is present when rules are checked at load.

use super::section::{HardIrqSlice, SoftirqDrops, SoftirqSlice, SoftirqVector};

/// Softirq and hardirq time of the example slice.
pub fn example() -> SoftirqSlice {
    SoftirqSlice {
        vectors: super::MAIN_VECTORS
            .iter()
            .map(|name| SoftirqVector {
                name: (*name).into(),
                count_per_cpu: vec![100, 10],
                time_ns_per_cpu: vec![1_000_000, 100_000],
            })
            .collect(),
        hardirqs: vec![HardIrqSlice {
            irq: 45,
            name: "eth0-TxRx-0".into(),
            count_per_cpu: vec![50, 5],
            time_ns_per_cpu: vec![200_000, 20_000],
        }],
        drops: SoftirqDrops {
            unmatched_exit: 1,
            irq_map_full: 1,
            bad_vector: 1,
        },
    }
}
