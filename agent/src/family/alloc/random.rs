//! Random allocator sections for the windows' property tests (test builds
//! only; `recording/window/random.rs` draws a slice of every family), with
//! keys drawn from small sets so that rows of different slices meet.

use super::section::{AllocDrops, AllocFunctionWindow, AllocSizeClassWindow, AllocSlice, AllocWindow};
use crate::kit::random::Rng;

/// Up to three windows of up to three functions, from `start_ms` on.
pub fn random(r: &mut Rng, start_ms: u64) -> AllocSlice {
    let function = |r: &mut Rng, symbol: &str| AllocFunctionWindow {
        symbol: symbol.into(),
        count: r.below(1000),
        sum_ns: r.below(1_000_000),
        buckets: r.vec(12, 100),
        size_classes: r
            .ids(3, 4)
            .into_iter()
            .map(|c| AllocSizeClassWindow {
                min_bytes: 1 << c,
                count: r.below(100),
                sum_ns: r.below(10_000),
                buckets: r.vec(12, 10),
            })
            .collect(),
    };
    AllocSlice {
        windows: (0..r.below(3))
            .map(|i| {
                let start_ns = (start_ms + i * 300) * 1_000_000;
                AllocWindow {
                    start_ns,
                    end_ns: start_ns + r.below(200) * 1_000_000,
                    start_ms: start_ms + i * 300,
                    end_ms: start_ms + i * 300 + r.below(200),
                    probe_hits: r.below(5000),
                    functions: {
                        let mut fs = Vec::new();
                        for symbol in ["malloc", "free", "calloc"] {
                            if r.chance(70) {
                                fs.push(function(r, symbol));
                            }
                        }
                        fs
                    },
                    drops: AllocDrops {
                        missing_entry: r.below(3),
                        mismatched: r.below(3),
                        too_deep: r.below(3),
                        stack_full: r.below(3),
                    },
                }
            })
            .collect(),
    }
}
