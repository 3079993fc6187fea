//! The contention family: kernel lock waits by lock kind and D-state
//! sleeps with their kernel stacks, per thread, each split inside / outside
//! the target's checkpoint windows.
//!
//! - [`probe`]: attaches `contention_begin` / `contention_end` and its
//!   switch program (folded into the scheduler family's when that runs),
//!   reads the cumulative counters ([`slice`]: the difference of two
//!   snapshots; [`credit`]: waits in flight split over the slices they
//!   overlap) and symbolizes the D-state stacks once per id;
//! - [`section`]: the recording's contention section and kernel stacks;
//!   [`merge`]: how sections of consecutive slices merge into a window;
//! - [`totals`]: the contention measurements of a window
//!   ([`ContentionWindow`]: this family's section joined with the syscalls
//!   family's futex waits, the scheduler figures of the classes that waited
//!   and the WiredTiger checkpoint windows), computed once, with their model
//!   in [`measurements`];
//! - [`facts`]: the `contention` fact group, [`report`]: their view, both
//!   from those measurements.

pub mod example;
pub mod credit;
pub mod facts;
pub mod measurements;
mod merge;
pub mod probe;
pub mod report;
pub mod section;
pub mod slice;
pub mod totals;
pub mod waits;
#[cfg(test)]
pub mod random;
pub mod unit;

pub use unit::Unit;
pub use measurements::{ContentionMeasurements, SplitMeasurement};
pub use probe::{ContentionReader, FAMILY, TRACEPOINTS, attach};
pub use section::*;
pub use totals::{ContentionWindow, build};
