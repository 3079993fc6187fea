//! The sched family: context switches (voluntary and involuntary), on-CPU
//! time and run-queue delay per thread, wakeup preemptions and CPU
//! migrations, for the target's threads or every thread host-wide.
//!
//! - [`probe`]: attaches the `sched_*` BTF tracepoints and reads the
//!   cumulative per-thread and per-CPU counters into one [`SchedSlice`] per
//!   second (runs in progress credited to the slices they overlap);
//! - [`section`]: the recording's sched section; [`merge`]: how sections of
//!   consecutive slices merge into a window;
//! - [`figures`]: the typed figures of a window ([`SchedFigures`], per
//!   thread class [`ClassFigures`]), computed once;
//! - [`facts`]: the `sched` fact group, [`report`]: the report's sched
//!   measurements and their view, [`chart`]: the HTML chart, all written
//!   from the figures.

pub mod example;
pub mod chart;
pub mod facts;
pub mod figures;
mod merge;
pub mod probe;
pub mod report;
pub mod section;
#[cfg(test)]
pub mod random;
pub mod unit;

pub use unit::Unit;
pub use chart::chart;
pub use figures::{ClassFigures, SchedFigures};
pub use probe::{FAMILY, SchedReader, TRACEPOINTS, attach};
pub use section::{SchedDrops, SchedSlice, ThreadSlice};
