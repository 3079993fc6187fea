//! The laws every family's section of a window merges by: [`Mergeable`]
//! (exact, associative `merge` with `Default` as identity; `bound` to the
//! `top_n` costliest rows plus an exact "others" row), the row kits
//! ([`Row`], [`Ranked`], [`ThreadRow`]) and their helpers. The window hub
//! (`recording::window`) applies them to whole slices; why two steps and
//! what each guarantees is told there.

use std::collections::HashMap;
use std::hash::Hash;

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
