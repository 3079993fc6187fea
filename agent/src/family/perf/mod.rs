//! The perf family: CPU-time samples (a software cpu-clock at 99 Hz on
//! every CPU), the target's share of them, and the share of its allocator
//! and the allocator's slow paths.
//!
//! - [`probe`]: opens the sampling events and drains the samples each
//!   slice; [`attribution`] decides what counts as allocator code and which
//!   of it is a slow path, [`summary`] sums one slice's samples by it;
//! - [`section`]: the recording's perf section; [`merge`]: how sections of
//!   consecutive slices merge into a window;
//! - [`report`]: the report's perf measurements, built from a window, and
//!   their view.
//!
//! Its numbers also feed the `allocator` fact group (`rules::facts::allocator`),
//! which joins them with the target's allocator facts.

pub mod example;
pub mod attribution;
mod merge;
pub mod probe;
pub mod report;
pub mod section;
pub mod stacks;
pub mod summary;
#[cfg(test)]
pub mod random;
pub mod unit;

pub use unit::Unit;
pub use attribution::{AllocatorCode, Attribution};
pub use probe::{FAMILY, PerfReader, attach};
pub use section::{PerfSlice, PerfSlowPath, PerfSymbol, StackCount, StackDef};
pub use summary::summarize;
