//! Windows of the allocator family: its sampled latency windows are events,
//! appended in time order. Bounding keeps the newest `top_n` and folds the
//! older ones into one window placed first, whose functions, histograms,
//! size classes, probe hits and drops are the sums, and whose length is the
//! summed length of the windows it holds (`end_ns - start_ns`, and the same
//! in ms, from the oldest one's start): calls per second inside windows and
//! every percentile stay exact, only the count of windows and their places in
//! time are lost. A window weighs up to a few hundred kilobytes (a histogram
//! per function and size class), hence the bound.

use super::section::{
    AllocDrops, AllocFunctionWindow, AllocSizeClassWindow, AllocSlice, AllocWindow,
};
use crate::kit::merge::{Mergeable, Row, add, add_each, merge_rows};

impl Mergeable for AllocSlice {
    fn merge(&mut self, later: &Self) {
        self.windows.extend(later.windows.iter().cloned());
    }

    fn bound(&mut self, top_n: usize) {
        let keep_from = self.windows.len().saturating_sub(top_n);
        if keep_from < 2 {
            // Folding one window would change nothing.
            return;
        }
        let newest = self.windows.split_off(keep_from);
        let mut folded: Option<AllocWindow> = None;
        for w in self.windows.drain(..) {
            match folded.as_mut() {
                Some(f) => f.absorb(&w),
                None => folded = Some(w),
            }
        }
        self.windows.extend(folded);
        self.windows.extend(newest);
    }
}

impl AllocWindow {
    /// Adds `other`'s calls into this window and lengthens it by `other`'s
    /// length (see the module docs).
    fn absorb(&mut self, other: &AllocWindow) {
        let ns = other.end_ns.saturating_sub(other.start_ns);
        self.end_ns = self.end_ns.saturating_add(ns);
        let ms = other.end_ms.saturating_sub(other.start_ms);
        self.end_ms = self.end_ms.saturating_add(ms);
        add(&mut self.probe_hits, other.probe_hits);
        merge_rows(&mut self.functions, &other.functions);
        self.drops.merge(&other.drops);
    }
}

impl Mergeable for AllocDrops {
    fn merge(&mut self, later: &Self) {
        add(&mut self.missing_entry, later.missing_entry);
        add(&mut self.mismatched, later.mismatched);
        add(&mut self.too_deep, later.too_deep);
        add(&mut self.stack_full, later.stack_full);
    }
}

impl Row for AllocFunctionWindow {
    type Key = String;

    fn key(&self) -> String {
        self.symbol.clone()
    }

    fn add(&mut self, later: &Self) {
        add(&mut self.count, later.count);
        add(&mut self.sum_ns, later.sum_ns);
        add_each(&mut self.buckets, &later.buckets);
        merge_rows(&mut self.size_classes, &later.size_classes);
    }
}

impl Row for AllocSizeClassWindow {
    type Key = u64;

    fn key(&self) -> u64 {
        self.min_bytes
    }

    fn add(&mut self, later: &Self) {
        add(&mut self.count, later.count);
        add(&mut self.sum_ns, later.sum_ns);
        add_each(&mut self.buckets, &later.buckets);
    }
}
