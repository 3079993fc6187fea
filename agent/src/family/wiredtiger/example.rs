//! The WiredTiger family's section of the example recording
//! (`rules::facts::example`): made up, every number non-zero, so that every
//! fact the family derives is present when rules are checked at load.

use super::section::{Checkpoint, WiredTigerSlice};

/// One 300 ms checkpoint.
pub fn example() -> WiredTigerSlice {
    WiredTigerSlice {
        checkpoints: vec![Checkpoint {
            tid: 103,
            start_ns: 1_000,
            duration_ns: 300_000_000,
            ret: 0,
            in_progress: false,
        }],
        drops: Default::default(),
    }
}
