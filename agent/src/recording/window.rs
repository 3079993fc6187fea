//! Windows over slices: N consecutive one-second [`Slice`]s merged into one
//! that covers their whole time, for every probe family.
//!
//! Why: `explain` of one recording and the agent's rolling windows (the last
//! 60 s, the last hour) must say the same things about the same seconds, so
//! both sum slices with this one code path instead of each family's own loop.
//! And the agent keeps windows for hours: their memory must not grow with the
//! number of threads, IRQs or stacks seen, so every per-key map is bounded to
//! the `top_n` rows by the family's main cost plus one "others" row that keeps
//! the totals exact ([`Mergeable::bound`]).
//!
//! Two steps, kept apart so that each has clean laws:
//!
//! - [`Mergeable::merge`] adds the slice that follows into `self`, exactly:
//!   counters are summed (saturating), log2 histograms and per-CPU arrays
//!   bucket by bucket (the longer length wins), per-key rows (threads, IRQs,
//!   stacks, syscalls, functions...) are matched by key and summed, names take
//!   the newest, events (checkpoints, rseq calls, allocator windows) are
//!   appended in time order. It is associative and its identity is the
//!   type's `Default` (tested as properties in `window/tests.rs`).
//! - [`Mergeable::bound`] then keeps at most `top_n` rows per map, most costly
//!   first, and folds the rest into an "others" row ([`OTHERS_ID`],
//!   [`OTHERS_NAME`]) whose counters keep every total exact. Bounding is not
//!   associative (which rows are named depends on when it ran), so it runs
//!   once per window, or whenever memory asks; totals stay exact either way.
//!
//! A window is the merged slice ([`Window::slice`]: `start_ms` of the first,
//! `duration_ms` summed) plus what one slice cannot say: how many slices it
//! holds, how long each family's section covered (rates over a family that
//! attached late), and mongod's first and last samples ([`MongodWindow`]:
//! serverStatus samples are gauges and cumulative counters, summing them is
//! meaningless). Per-family rules are in the `window/*.rs` files.
//!
//! The merged slice has the same format as a recorded one, so facts derived
//! from it equal the facts of its N slices for sums, rates and percentiles;
//! `window/facts_tests.rs` lists the few that differ and why.

use super::model::{Recording, Slice};
use crate::kit::family::{Family, FamilyWindow, OfFamily, Sections};

mod mongod;

#[cfg(test)]
mod facts_tests;
#[cfg(test)]
mod random;
#[cfg(test)]
mod tests;

pub use mongod::MongodWindow;

pub(crate) use crate::kit::merge::add;
pub use crate::kit::merge::{DEFAULT_TOP_N, Mergeable, OTHERS_ID, OTHERS_NAME};

impl Mergeable for Slice {
    /// Sections are merged family by family (a section only one side has is
    /// kept as is); `start_ms` is the earliest, `duration_ms` the sum (for
    /// consecutive slices: the span they cover). mongod keeps the newest
    /// sample with a status (see `window/mongod.rs`).
    fn merge(&mut self, later: &Self) {
        let empty = Slice::default();
        if *later == empty {
            return;
        }
        if *self == empty {
            self.clone_from(later);
            return;
        }
        self.start_ms = self.start_ms.min(later.start_ms);
        add(&mut self.duration_ms, later.duration_ms);
        self.merge_sections(later);
        self.mongod.merge(&later.mongod);
    }

    /// Every family's section is bounded (mongod's first and last samples
    /// have no rows to bound).
    fn bound(&mut self, top_n: usize) {
        self.bound_sections(top_n);
    }
}

/// Generates the merge and bound of every family's section of a slice from
/// the registry, each destructuring the slice exhaustively.
macro_rules! merge_sections {
    ($($variant:ident $module:ident,)*) => {
        impl Slice {
            fn merge_sections(&mut self, later: &Self) {
                let Slice { start_ms: _, duration_ms: _, mongod: _, $($module,)* } = self;
                $($module.merge(&later.$module);)*
            }

            fn bound_sections(&mut self, top_n: usize) {
                let Slice { start_ms: _, duration_ms: _, mongod: _, $($module,)* } = self;
                $($module.bound(top_n);)*
            }
        }
    };
}
crate::kit::family::for_each_family!(merge_sections);

/// Milliseconds of a window that each family's section covers: a family
/// missing from some slices (attached late, failed reads) has its rates over
/// its own time, as the facts compute them from the slices. One entry per
/// [`Family`] (in `Family::ALL`'s order), filled from
/// [`Slice::sections`], so a new family needs nothing here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SectionMs {
    families: [u64; Family::ALL.len()],
    /// mongod's serverStatus samples (not a probe family).
    pub mongod: u64,
}

impl SectionMs {
    /// The sections `slice` has, each for the slice's duration.
    pub fn of(slice: &Slice) -> SectionMs {
        let mut ms = SectionMs::default();
        for (family, section) in slice.sections() {
            if section.is_some() {
                ms.families[family.index()] = slice.duration_ms;
            }
        }
        if slice.mongod.is_some() {
            ms.mongod = slice.duration_ms;
        }
        ms
    }

    /// The milliseconds `family`'s section covers.
    pub fn of_family(&self, family: Family) -> u64 {
        self.families[family.index()]
    }
}

impl Mergeable for SectionMs {
    fn merge(&mut self, later: &Self) {
        for (a, &b) in self.families.iter_mut().zip(&later.families) {
            add(a, b);
        }
        add(&mut self.mongod, later.mongod);
    }
}

/// Consecutive slices merged into one (see the module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Window {
    /// Every family merged: the window in the recording's own format.
    pub slice: Slice,
    /// Slices merged into it (0: the empty window).
    pub slices: u64,
    /// Time each family's section covers.
    pub section_ms: SectionMs,
    /// mongod's first and last samples and its seconds with and without one.
    pub mongod: MongodWindow,
}

impl Window {
    /// The window of one slice.
    pub fn of(slice: &Slice) -> Window {
        let mut w = Window::default();
        w.push(slice);
        w
    }

    /// Adds the slice that follows the window (no bounding: call
    /// [`Mergeable::bound`] when memory asks).
    pub fn push(&mut self, slice: &Slice) {
        self.slice.merge(slice);
        self.slices = self.slices.saturating_add(1);
        self.section_ms.merge(&SectionMs::of(slice));
        self.mongod.push(slice);
    }

    /// Start of the window, ms after the recording's start.
    pub fn start_ms(&self) -> u64 {
        self.slice.start_ms
    }

    /// Time the window covers, ms (the slices' durations summed).
    pub fn duration_ms(&self) -> u64 {
        self.slice.duration_ms
    }
}

impl Mergeable for Window {
    fn merge(&mut self, later: &Self) {
        self.slice.merge(&later.slice);
        self.slices = self.slices.saturating_add(later.slices);
        self.section_ms.merge(&later.section_ms);
        self.mongod.merge(&later.mongod);
    }

    fn bound(&mut self, top_n: usize) {
        self.slice.bound(top_n);
        self.mongod.bound(top_n);
    }
}

impl Recording {
    /// The whole recording as one window, unbounded: every thread, IRQ,
    /// stack and event kept, rows in order of first appearance. The totals
    /// the facts and the report's measurements read (`Facts::derive`,
    /// `Measurements::build`), so that they sum slices with the same code as
    /// the agent's rolling windows; without [`Mergeable::bound`], because a
    /// report of one recording names every row it saw.
    pub fn window(&self) -> Window {
        let mut w = Window::default();
        for s in &self.slices {
            w.push(s);
        }
        w
    }
}

impl Recording {
    /// What the totals of the family whose section type is `S` are computed
    /// from: its section of `whole` (a window of this recording's slices),
    /// the time it covers, the recording's probe statuses and host CPUs,
    /// and the other sections of `whole` and this recording around it.
    pub fn family_window<'a, S: OfFamily>(&'a self, whole: &'a Window) -> FamilyWindow<'a, S> {
        let family = S::FAMILY;
        FamilyWindow {
            family,
            probes: &self.probes,
            section: whole.slice.section(family).and_then(|s| s.downcast_ref()),
            section_ms: whole.section_ms.of_family(family),
            window_ms: whole.duration_ms(),
            slices: self.slices.len(),
            host_cpus: self.host.cpu_count,
            targeted: self.target.is_some(),
            whole: &whole.slice,
            recording: self,
        }
    }
}

/// `slices` (consecutive, in time order) merged into one window, each map
/// bounded to `top_n` rows plus "others". The empty window for no slices.
pub fn merge_window(slices: &[Slice], top_n: usize) -> Window {
    let mut w = Window::default();
    for s in slices {
        w.push(s);
    }
    w.bound(top_n);
    w
}
