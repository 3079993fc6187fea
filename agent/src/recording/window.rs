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

use std::collections::HashMap;
use std::hash::Hash;

use super::model::{Recording, Slice};

mod alloc;
mod contention;
mod mongod;
mod perf;
mod sched;
mod softirq;
mod syscalls;

#[cfg(test)]
mod facts_tests;
#[cfg(test)]
mod random;
#[cfg(test)]
mod tests;

pub use mongod::MongodWindow;

/// Rows kept per map when a caller has no reason to choose: more than any
/// report lists (3 futex threads, 5 symbols, 10 stacks), few enough that a
/// window stays small however many threads a host runs.
pub const DEFAULT_TOP_N: usize = 64;

/// The key of an "others" row: thread id, IRQ number (no thread or IRQ has it).
pub const OTHERS_ID: u32 = u32::MAX;
/// The name of an "others" row (thread comm, IRQ name, missing reason).
pub const OTHERS_NAME: &str = "(others)";

/// Data of a span of time that the data of the span right after it can be
/// added to.
pub trait Mergeable: Default {
    /// Adds `later` (the data of the time right after `self`'s) into `self`.
    /// Associative; `Default::default()` is its identity.
    fn merge(&mut self, later: &Self);

    /// Keeps at most `top_n` rows in each per-key map, most costly first,
    /// and folds the others into one row so that totals stay exact. Nothing
    /// to do for types without such maps.
    fn bound(&mut self, _top_n: usize) {}
}

/// A family section that a slice may lack: `None` is the identity.
impl<T: Mergeable + Clone> Mergeable for Option<T> {
    fn merge(&mut self, later: &Self) {
        match (self.as_mut(), later) {
            (_, None) => {}
            (None, Some(l)) => *self = Some(l.clone()),
            (Some(s), Some(l)) => s.merge(l),
        }
    }

    fn bound(&mut self, top_n: usize) {
        if let Some(s) = self {
            s.bound(top_n);
        }
    }
}

/// `a += b`, saturating like the facts' sums.
pub(crate) fn add(a: &mut u64, b: u64) {
    *a = a.saturating_add(b);
}

/// Element-wise sum of a log2 histogram or per-CPU array; the result is as
/// long as the longer one (a histogram without trailing zeros stays so).
pub(crate) fn add_each(a: &mut Vec<u64>, b: &[u64]) {
    if a.len() < b.len() {
        a.resize(b.len(), 0);
    }
    for (x, &y) in a.iter_mut().zip(b) {
        add(x, y);
    }
}

/// A per-key row of a family's section: a thread, an IRQ, a syscall, ...
pub(crate) trait Row: Clone {
    type Key: Eq + Hash + Ord + Clone;
    fn key(&self) -> Self::Key;
    /// Adds `later`'s counters (same key) and takes its names.
    fn add(&mut self, later: &Self);
}

/// A row that [`keep_top`] may fold into an "others" row.
pub(crate) trait Ranked: Row {
    /// The family's main cost: the rows with most are kept.
    fn cost(&self) -> u64;
    fn is_others(&self) -> bool;
    /// This row, renamed as the "others" row (its counters kept).
    fn into_others(self) -> Self;
    /// Adds a folded row's counters into the "others" row `self`.
    fn absorb(&mut self, row: &Self);
}

/// Adds `later`'s rows into `rows`: same key summed, new keys appended in
/// their order (so rows stay in order of first appearance).
pub(crate) fn merge_rows<T: Row>(rows: &mut Vec<T>, later: &[T]) {
    if later.is_empty() {
        return;
    }
    let mut at: HashMap<T::Key, usize> =
        rows.iter().enumerate().map(|(i, r)| (r.key(), i)).collect();
    for r in later {
        match at.get(&r.key()).copied() {
            Some(i) => {
                if let Some(row) = rows.get_mut(i) {
                    row.add(r);
                }
            }
            None => {
                at.insert(r.key(), rows.len());
                rows.push(r.clone());
            }
        }
    }
}

/// Sorts `rows` most costly first (ties: by key) and keeps `top_n` of them,
/// then one "others" row (last) holding every other row's counters.
pub(crate) fn keep_top<T: Ranked>(rows: &mut Vec<T>, top_n: usize) {
    let mut others: Option<T> = None;
    let mut named: Vec<T> = Vec::with_capacity(rows.len());
    for r in rows.drain(..) {
        if r.is_others() {
            match others.as_mut() {
                Some(o) => o.add(&r),
                None => others = Some(r),
            }
        } else {
            named.push(r);
        }
    }
    named.sort_by_cached_key(|r| (std::cmp::Reverse(r.cost()), r.key()));
    if named.len() > top_n {
        for r in named.split_off(top_n) {
            match others.as_mut() {
                Some(o) => o.absorb(&r),
                None => others = Some(r.into_others()),
            }
        }
    }
    named.extend(others);
    *rows = named;
}

/// The tgid of an "others" thread row after folding a thread of `tgid` into
/// it: the common process while all folded threads share one, else
/// [`OTHERS_ID`] (so a target recording still counts one process).
fn others_tgid(current: u32, tgid: u32) -> u32 {
    if current == tgid { current } else { OTHERS_ID }
}

/// A per-thread row (sched, syscalls, contention): its family says which
/// fields are its identity, how its counters add and what it costs; being a
/// [`Row`] and a [`Ranked`] row follows, the same for every family.
pub(crate) trait ThreadRow: Clone {
    /// `tid`, `tgid` and `comm` (`None`: the family records no name).
    fn identity(&self) -> (u32, u32, Option<&str>);
    /// The same fields, to write.
    fn identity_mut(&mut self) -> (&mut u32, &mut u32, Option<&mut String>);
    /// Adds `other`'s counters (every field but the identity).
    fn add_counts(&mut self, other: &Self);
    /// The family's main cost ([`Ranked::cost`]).
    fn thread_cost(&self) -> u64;
}

/// Keyed by tid; merging takes the newest process and name (a thread may
/// rename itself; /proc gives the current name), and for "others" the
/// process only if every row shares it.
impl<T: ThreadRow> Row for T {
    type Key = u32;

    fn key(&self) -> u32 {
        self.identity().0
    }

    fn add(&mut self, later: &Self) {
        self.add_counts(later);
        let (_, later_tgid, later_comm) = later.identity();
        let (tid, tgid, comm) = self.identity_mut();
        *tgid = if *tid == OTHERS_ID {
            others_tgid(*tgid, later_tgid)
        } else {
            later_tgid
        };
        if let (Some(comm), Some(later_comm)) = (comm, later_comm)
            && !later_comm.is_empty()
        {
            later_comm.clone_into(comm);
        }
    }
}

/// The "others" thread is [`OTHERS_ID`], named [`OTHERS_NAME`].
impl<T: ThreadRow> Ranked for T {
    fn cost(&self) -> u64 {
        self.thread_cost()
    }

    fn is_others(&self) -> bool {
        self.identity().0 == OTHERS_ID
    }

    fn into_others(mut self) -> Self {
        let (tid, _, comm) = self.identity_mut();
        *tid = OTHERS_ID;
        if let Some(comm) = comm {
            OTHERS_NAME.clone_into(comm);
        }
        self
    }

    fn absorb(&mut self, row: &Self) {
        self.add_counts(row);
        let row_tgid = row.identity().1;
        let (_, tgid, _) = self.identity_mut();
        *tgid = others_tgid(*tgid, row_tgid);
    }
}

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
        // Exhaustive: a new section does not compile until it merges.
        let Slice {
            start_ms,
            duration_ms,
            sched,
            softirq,
            syscalls,
            wiredtiger,
            perf,
            alloc,
            contention,
            mongod,
        } = self;
        *start_ms = (*start_ms).min(later.start_ms);
        add(duration_ms, later.duration_ms);
        sched.merge(&later.sched);
        softirq.merge(&later.softirq);
        syscalls.merge(&later.syscalls);
        wiredtiger.merge(&later.wiredtiger);
        perf.merge(&later.perf);
        alloc.merge(&later.alloc);
        contention.merge(&later.contention);
        mongod.merge(&later.mongod);
    }

    fn bound(&mut self, top_n: usize) {
        // Exhaustive: a new section does not compile until it is bounded
        // (mongod's first and last samples have no rows to bound).
        let Slice {
            start_ms: _,
            duration_ms: _,
            sched,
            softirq,
            syscalls,
            wiredtiger,
            perf,
            alloc,
            contention,
            mongod: _,
        } = self;
        sched.bound(top_n);
        softirq.bound(top_n);
        syscalls.bound(top_n);
        wiredtiger.bound(top_n);
        perf.bound(top_n);
        alloc.bound(top_n);
        contention.bound(top_n);
    }
}

/// Milliseconds of a window that each family's section covers: a family
/// missing from some slices (attached late, failed reads) has its rates over
/// its own time, as the facts compute them from the slices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SectionMs {
    pub sched: u64,
    pub softirq: u64,
    pub syscalls: u64,
    pub wiredtiger: u64,
    pub perf: u64,
    pub alloc: u64,
    pub contention: u64,
    pub mongod: u64,
}

impl SectionMs {
    /// The sections `slice` has, each for the slice's duration.
    pub fn of(slice: &Slice) -> SectionMs {
        // Exhaustive: a new section does not compile until it is timed.
        let Slice {
            start_ms: _,
            duration_ms,
            sched,
            softirq,
            syscalls,
            wiredtiger,
            perf,
            alloc,
            contention,
            mongod,
        } = slice;
        let ms = |present: bool| if present { *duration_ms } else { 0 };
        SectionMs {
            sched: ms(sched.is_some()),
            softirq: ms(softirq.is_some()),
            syscalls: ms(syscalls.is_some()),
            wiredtiger: ms(wiredtiger.is_some()),
            perf: ms(perf.is_some()),
            alloc: ms(alloc.is_some()),
            contention: ms(contention.is_some()),
            mongod: ms(mongod.is_some()),
        }
    }
}

impl Mergeable for SectionMs {
    fn merge(&mut self, later: &Self) {
        add(&mut self.sched, later.sched);
        add(&mut self.softirq, later.softirq);
        add(&mut self.syscalls, later.syscalls);
        add(&mut self.wiredtiger, later.wiredtiger);
        add(&mut self.perf, later.perf);
        add(&mut self.alloc, later.alloc);
        add(&mut self.contention, later.contention);
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
