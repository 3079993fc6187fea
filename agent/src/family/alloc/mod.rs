//! The allocator family (`alloc`): the latency of the target's allocation
//! and free entry points, in short sampled windows paced by a budget.
//!
//! - [`probe`]: resolves the target allocator's entry points, calibrates the
//!   uprobe pair's own cost, opens and closes the windows (its
//!   [`probe::schedule`], paced by [`probe::budget`] for the agent) and
//!   reads each window's histograms;
//! - [`section`]: the recording's allocator windows and the record kept
//!   beside the slices; [`merge`]: how sections of consecutive slices merge
//!   into a window;
//! - [`report`]: the report's allocator measurements, built from a window
//!   and the record, and their view; [`chart`]: the HTML charts.
//!
//! The family's name is `alloc` everywhere (recordings, reports, metrics);
//! the `allocator` fact group (`rules::facts::allocator`) is a different
//! thing: what the host and the target's code say about its allocator, with
//! this family's and the perf family's numbers beside it.

pub mod chart;
mod merge;
pub mod probe;
pub mod report;
pub mod section;
#[cfg(test)]
pub mod random;
pub mod unit;

pub use unit::Unit;
pub use chart::chart;
pub use probe::{AllocProbe, FAMILY, attach, budget, calibrate, schedule, stats};
pub use section::*;
