//! Windows of the softirq family: entries and handler time per CPU are
//! summed element by element; vectors by name (at most ten, never bounded);
//! hard IRQs by number, bounded by handler time with an "others" IRQ; drops
//! summed.

use super::section::{HardIrqSlice, SoftirqDrops, SoftirqSlice, SoftirqVector};
use crate::kit::merge::{
    Mergeable, OTHERS_ID, OTHERS_NAME, Ranked, Row, add, add_each, keep_top, merge_rows,
};

impl Mergeable for SoftirqSlice {
    fn merge(&mut self, later: &Self) {
        merge_rows(&mut self.vectors, &later.vectors);
        merge_rows(&mut self.hardirqs, &later.hardirqs);
        self.drops.merge(&later.drops);
    }

    fn bound(&mut self, top_n: usize) {
        keep_top(&mut self.hardirqs, top_n);
    }
}

impl Mergeable for SoftirqDrops {
    fn merge(&mut self, later: &Self) {
        add(&mut self.unmatched_exit, later.unmatched_exit);
        add(&mut self.irq_map_full, later.irq_map_full);
        add(&mut self.bad_vector, later.bad_vector);
    }
}

impl Row for SoftirqVector {
    type Key = String;

    fn key(&self) -> String {
        self.name.clone()
    }

    fn add(&mut self, later: &Self) {
        add_each(&mut self.count_per_cpu, &later.count_per_cpu);
        add_each(&mut self.time_ns_per_cpu, &later.time_ns_per_cpu);
    }
}

impl Row for HardIrqSlice {
    type Key = u32;

    fn key(&self) -> u32 {
        self.irq
    }

    /// Per-CPU counts and time summed; the newest known name (the facts keep
    /// the last non-empty one).
    fn add(&mut self, later: &Self) {
        add_each(&mut self.count_per_cpu, &later.count_per_cpu);
        add_each(&mut self.time_ns_per_cpu, &later.time_ns_per_cpu);
        if !later.name.is_empty() {
            self.name.clone_from(&later.name);
        }
    }
}

impl Ranked for HardIrqSlice {
    fn cost(&self) -> u64 {
        self.time_ns_per_cpu
            .iter()
            .fold(0u64, |a, &n| a.saturating_add(n))
    }

    fn is_others(&self) -> bool {
        self.irq == OTHERS_ID
    }

    fn into_others(mut self) -> Self {
        self.irq = OTHERS_ID;
        self.name = OTHERS_NAME.into();
        self
    }

    fn absorb(&mut self, row: &Self) {
        add_each(&mut self.count_per_cpu, &row.count_per_cpu);
        add_each(&mut self.time_ns_per_cpu, &row.time_ns_per_cpu);
    }
}
