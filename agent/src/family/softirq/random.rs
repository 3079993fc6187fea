//! Random softirq sections for the windows' property tests (test builds
//! only; `recording/window/random.rs` draws a slice of every family), with
//! keys drawn from small sets so that rows of different slices meet.

use super::section::{HardIrqSlice, SoftirqDrops, SoftirqSlice, SoftirqVector};
use crate::kit::random::Rng;

/// A random section.
pub fn random(r: &mut Rng, _start_ms: u64) -> SoftirqSlice {
    let names = ["NET_RX", "TIMER", "RCU"];
    SoftirqSlice {
        vectors: r
            .ids(3, 3)
            .into_iter()
            .map(|i| SoftirqVector {
                name: names[i as usize - 1].into(),
                count_per_cpu: r.vec(4, 100),
                time_ns_per_cpu: r.vec(4, 100_000),
            })
            .collect(),
        hardirqs: r
            .ids(5, 7)
            .into_iter()
            .map(|irq| HardIrqSlice {
                irq,
                name: if r.chance(80) {
                    format!("eth0-{irq}")
                } else {
                    String::new()
                },
                count_per_cpu: r.vec(4, 100),
                time_ns_per_cpu: r.vec(4, 100_000),
            })
            .collect(),
        drops: SoftirqDrops {
            unmatched_exit: r.below(3),
            irq_map_full: r.below(3),
            bad_vector: r.below(3),
        },
    }
}
