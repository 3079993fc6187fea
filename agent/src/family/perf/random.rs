//! Random perf sections for the windows' property tests (test builds
//! only; `recording/window/random.rs` draws a slice of every family), with
//! keys drawn from small sets so that rows of different slices meet.

use super::section::{PerfSlice, PerfSlowPath, PerfSymbol};
use crate::kit::random::Rng;
use crate::symbols::AllocatorKind;

/// A random section.
pub fn random(r: &mut Rng, _start_ms: u64) -> PerfSlice {
    PerfSlice {
        freq_hz: if r.chance(80) { 99 } else { 0 },
        samples: r.below(2000),
        target_samples: r.below(1000),
        allocator: r.chance(50).then_some(AllocatorKind::GoogleTcmalloc),
        allocator_samples: r.below(100),
        slow_paths: r
            .ids(2, 3)
            .into_iter()
            .map(|i| PerfSlowPath {
                label: format!("path{i}"),
                samples: r.below(50),
            })
            .collect(),
        by_symbol: r
            .ids(4, 6)
            .into_iter()
            .map(|i| PerfSymbol {
                object: Some("/usr/bin/mongod".into()),
                symbol: (i < 6).then(|| format!("f{i}")),
                samples: r.below(100),
                allocator: i % 2 == 0,
                slow_path: None,
            })
            .collect(),
        drops: r.below(3),
        ..PerfSlice::default()
    }
}
