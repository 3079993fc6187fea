//! Random WiredTiger sections for the windows' property tests (test builds
//! only; `recording/window/random.rs` draws a slice of every family), with
//! keys drawn from small sets so that rows of different slices meet.

use super::section::{Checkpoint, WiredTigerDropsSlice, WiredTigerSlice};
use crate::kit::random::Rng;

/// Up to one checkpoint.
pub fn random(r: &mut Rng, _start_ms: u64) -> WiredTigerSlice {
    WiredTigerSlice {
        checkpoints: (0..r.below(2))
            .map(|_| Checkpoint {
                tid: 7,
                start_ns: r.below(1 << 40),
                duration_ns: r.below(1 << 30),
                ..Checkpoint::default()
            })
            .collect(),
        drops: WiredTigerDropsSlice {
            ring_full: r.below(2),
            ..Default::default()
        },
    }
}
