//! Windows of the WiredTiger family: checkpoints are events, appended in
//! arrival order and never bounded (about one a minute); drops summed.

use super::section::{WiredTigerDropsSlice, WiredTigerSlice};
use crate::kit::merge::{Mergeable, add};

impl Mergeable for WiredTigerSlice {
    /// Checkpoints are events: appended in return order (the last slice's
    /// `in_progress` ones stay last).
    fn merge(&mut self, later: &Self) {
        self.checkpoints.extend(later.checkpoints.iter().cloned());
        self.drops.merge(&later.drops);
    }
}

impl Mergeable for WiredTigerDropsSlice {
    fn merge(&mut self, later: &Self) {
        add(&mut self.ring_full, later.ring_full);
        add(&mut self.missing_entry, later.missing_entry);
        add(&mut self.start_map_full, later.start_map_full);
    }
}
