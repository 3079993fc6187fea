//! The WiredTiger family: the target's checkpoint windows, from a uprobe
//! and uretprobe on `__wt_txn_checkpoint` in whichever of its objects
//! defines it.
//!
//! - [`probe`]: resolves the function in the target, attaches, retries when
//!   the target's mappings change, and drains completed checkpoints from a
//!   ring buffer (the last slice lists the ones still running);
//! - [`section`]: the recording's WiredTiger section; [`merge`]: how
//!   sections of consecutive slices merge into a window;
//! - [`report`]: the report's WiredTiger measurements, built from a window,
//!   and their view.
//!
//! Its checkpoint windows are also read by the syscalls and contention
//! families (inside / outside a checkpoint) and by the report's timeline.

pub mod example;
mod merge;
pub mod probe;
pub mod report;
pub mod section;
#[cfg(test)]
pub mod random;
pub mod unit;

pub use unit::Unit;
pub use probe::{FAMILY, WiredTigerReader, attach};
pub use section::{Checkpoint, WiredTigerDropsSlice, WiredTigerSlice};
