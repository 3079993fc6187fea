//! Windows of the perf family: sample counts are summed; `freq_hz` and the
//! allocator kind are settings, the newest known one is kept; slow paths by
//! label (a fixed, small set: never bounded, most samples first after
//! bounding); symbols by (object, symbol, allocator, slow path), bounded to
//! `top_n` without an "others" row: each slice lists only its 20 most sampled
//! functions, so the rows never summed to a total (the totals are the
//! sample counters) and dropping the least sampled ones loses nothing exact.
//!
//! Stacks are not windowed: a recording's reader sums every slice's stacks
//! into the recording's profile (`stacks::table::ProfileBuilder`) before slices are
//! kept or merged, so a merged window holds none (their lost counts are
//! summed).

use super::section::{PerfSlice, PerfSlowPath, PerfSymbol};
use crate::kit::merge::{Mergeable, Row, add, merge_rows};

impl Mergeable for PerfSlice {
    fn merge(&mut self, later: &Self) {
        if later.freq_hz != 0 {
            self.freq_hz = later.freq_hz;
        }
        add(&mut self.samples, later.samples);
        add(&mut self.idle_samples, later.idle_samples);
        add(&mut self.observed_samples, later.observed_samples);
        add(&mut self.target_samples, later.target_samples);
        add(&mut self.target_kernel_samples, later.target_kernel_samples);
        add(&mut self.unknown_samples, later.unknown_samples);
        if later.allocator.is_some() {
            self.allocator = later.allocator;
        }
        add(&mut self.allocator_samples, later.allocator_samples);
        add(
            &mut self.allocator_slow_path_samples,
            later.allocator_slow_path_samples,
        );
        merge_rows(&mut self.slow_paths, &later.slow_paths);
        merge_rows(&mut self.by_symbol, &later.by_symbol);
        add(&mut self.drops, later.drops);
        add(&mut self.stack_lost, later.stack_lost);
        add(&mut self.stack_drops, later.stack_drops);
        self.stack_defs.clear();
        self.stacks.clear();
    }

    fn bound(&mut self, top_n: usize) {
        self.slow_paths.sort_by(|a, b| {
            b.samples
                .cmp(&a.samples)
                .then_with(|| a.label.cmp(&b.label))
        });
        self.by_symbol
            .sort_by_cached_key(|s| (std::cmp::Reverse(s.samples), s.key()));
        self.by_symbol.truncate(top_n);
    }
}

impl Row for PerfSlowPath {
    type Key = String;

    fn key(&self) -> String {
        self.label.clone()
    }

    fn add(&mut self, later: &Self) {
        add(&mut self.samples, later.samples);
    }
}

impl Row for PerfSymbol {
    type Key = (Option<String>, Option<String>, bool, Option<String>);

    fn key(&self) -> Self::Key {
        (
            self.object.clone(),
            self.symbol.clone(),
            self.allocator,
            self.slow_path.clone(),
        )
    }

    fn add(&mut self, later: &Self) {
        add(&mut self.samples, later.samples);
    }
}
