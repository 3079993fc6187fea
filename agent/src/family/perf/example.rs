//! The perf family's section of the example recording
//! (`rules::facts::example`): made up, every number non-zero, so that every
//! fact the family derives is present when rules are checked at load.

use super::section::{PerfSlice, PerfSlowPath};
use crate::symbols::AllocatorKind;

/// Google TCMalloc's share of the target's samples, a quarter of it in a
/// slow path.
pub fn example() -> PerfSlice {
    PerfSlice {
        freq_hz: 99,
        samples: 2000,
        target_samples: 1000,
        allocator: Some(AllocatorKind::GoogleTcmalloc),
        allocator_samples: 200,
        allocator_slow_path_samples: 50,
        slow_paths: vec![PerfSlowPath {
            label: "central_free_list".into(),
            samples: 50,
        }],
        ..PerfSlice::default()
    }
}
