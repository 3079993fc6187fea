//! The softirq family: per-CPU softirq counts and time per vector and
//! hard-IRQ counts and time per IRQ (host-wide: interrupts belong to CPUs).
//!
//! - [`probe`]: attaches the `softirq_*` / `irq_handler_*` tracepoints and
//!   reads the cumulative per-CPU counters into one [`SoftirqSlice`] per
//!   second;
//! - [`section`]: the recording's softirq section; [`merge`]: how sections
//!   of consecutive slices merge into a window;
//! - [`totals`]: the typed totals of a window ([`SoftirqTotals`]), and
//!   [`figures`]: the summary figures computed once from them;
//! - [`facts`]: the `softirq` fact group, [`report`]: the report's softirq
//!   measurements and their view, [`chart`]: the HTML chart, all written
//!   from the totals.

pub mod example;
pub mod chart;
pub mod facts;
pub mod figures;
mod merge;
pub mod probe;
pub mod report;
pub mod section;
#[cfg(test)]
pub(crate) mod testdata;
pub mod totals;
#[cfg(test)]
pub mod random;
pub mod unit;

pub use unit::Unit;
pub use chart::chart;
pub use figures::SoftirqFigures;
pub use probe::{FAMILY, SoftirqReader, TRACEPOINTS, attach};
pub use section::{HardIrqSlice, SoftirqDrops, SoftirqSlice, SoftirqVector};
pub use totals::{MAIN_VECTORS, SoftirqTotals};
