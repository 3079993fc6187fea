//! The slices a reader keeps of a recording, bounded by bytes.
//!
//! Why: a week-long recording of a busy mongod holds gigabytes of one-second
//! slices; `explain` and `compare` must not need that much memory. Slices,
//! their stacks apart (`read.rs` sums those into the profile first), are
//! kept as read while they fit in a budget (about half an hour of a real
//! mongod under load, 18 KB a slice); past it, neighbouring slices are merged in
//! pairs ([`Mergeable::merge`], associative: every total stays exact) into
//! slices of 2, 4, 8… seconds, each bounded to its most costly rows
//! ([`Mergeable::bound`]), so what is kept stays within the budget whatever
//! the duration and the number of threads.

use super::model::Slice;
use super::window::{DEFAULT_TOP_N, Mergeable};

/// JSON bytes of slices kept before neighbours are merged.
pub const KEEP_BYTES: usize = 32 << 20;

/// Slices kept so far, and how many recorded slices each stands for.
#[derive(Debug)]
pub struct Keeper {
    budget: usize,
    kept: Vec<(Slice, usize)>,
    bytes: usize,
    /// Recorded slices per kept slice (a power of two).
    group: u64,
    /// The kept slice being filled: merged slices, how many, their size.
    partial: Option<(Slice, u64)>,
    /// Recorded slices pushed.
    pushed: u64,
}

impl Keeper {
    pub fn new(budget: usize) -> Self {
        Self {
            budget,
            kept: Vec::new(),
            bytes: 0,
            group: 1,
            partial: None,
            pushed: 0,
        }
    }

    /// Adds the slice that follows; `bytes` is its size as read (its JSON).
    pub fn push(&mut self, slice: Slice, bytes: usize) {
        self.pushed += 1;
        if self.group == 1 {
            self.keep(slice, bytes);
        } else {
            let (merged, n) = self.partial.get_or_insert_with(|| (Slice::default(), 0));
            merged.merge(&slice);
            *n += 1;
            if *n >= self.group {
                self.close_partial();
            }
        }
        while self.bytes > self.budget && self.kept.len() >= 2 {
            self.coarsen();
        }
    }

    /// Recorded slices per kept slice: 1 unless the budget asked for more.
    pub fn group(&self) -> u64 {
        self.group
    }

    /// Recorded slices pushed.
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// The slices kept, in time order.
    pub fn finish(mut self) -> Vec<Slice> {
        self.close_partial();
        self.kept.into_iter().map(|(s, _)| s).collect()
    }

    fn keep(&mut self, slice: Slice, bytes: usize) {
        self.bytes += bytes;
        self.kept.push((slice, bytes));
    }

    fn close_partial(&mut self) {
        if let Some((mut merged, _)) = self.partial.take() {
            merged.bound(DEFAULT_TOP_N);
            let bytes = json_size(&merged);
            self.keep(merged, bytes);
        }
    }

    /// Halves the number of kept slices: neighbours merged in pairs; an odd
    /// last one is filled further by the next slices.
    fn coarsen(&mut self) {
        self.close_partial();
        let old = std::mem::take(&mut self.kept);
        self.bytes = 0;
        let filled = old.len() / 2 * 2;
        let mut rest = old.into_iter();
        for _ in 0..filled / 2 {
            let (Some((mut a, _)), Some((b, _))) = (rest.next(), rest.next()) else {
                break;
            };
            a.merge(&b);
            a.bound(DEFAULT_TOP_N);
            let bytes = json_size(&a);
            self.keep(a, bytes);
        }
        let group = self.group;
        self.group *= 2;
        if let Some((last, _)) = rest.next() {
            self.partial = Some((last, group));
        }
    }
}

/// Size of `slice` as JSON (what it weighs in the file, and about what it
/// weighs in memory).
pub(super) fn json_size(slice: &Slice) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // Serialising a slice to a sink that cannot fail does not fail.
    let _ = serde_json::to_writer(&mut c, slice);
    c.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::model::{SchedSlice, ThreadSlice};

    /// Slice `i`: one second, with `threads` threads of their own (new
    /// connections every second, as a busy mongod has).
    fn slice(i: u64, threads: u32) -> Slice {
        Slice {
            start_ms: i * 1000,
            duration_ms: 1000,
            sched: Some(SchedSlice {
                switches_total: 100,
                voluntary: 60,
                involuntary: 40,
                threads: (0..threads)
                    .map(|t| ThreadSlice {
                        tid: (i as u32) * threads + t + 1,
                        tgid: 1,
                        comm: format!("conn{t}"),
                        voluntary: 1,
                        oncpu_ns: 1_000_000 * u64::from(t + 1),
                        ..ThreadSlice::default()
                    })
                    .collect(),
                ..SchedSlice::default()
            }),
            ..Slice::default()
        }
    }

    #[test]
    fn within_the_budget_every_slice_is_kept_as_read() {
        let mut k = Keeper::new(1 << 20);
        let slices: Vec<Slice> = (0..50).map(|i| slice(i, 3)).collect();
        for s in &slices {
            k.push(s.clone(), json_size(s));
        }
        assert_eq!(k.group(), 1);
        assert_eq!(k.finish(), slices);
    }

    #[test]
    fn past_the_budget_slices_merge_and_totals_stay_exact() {
        let budget = 64 << 10;
        let mut k = Keeper::new(budget);
        let n = 5000u64;
        let mut whole = Slice::default();
        for i in 0..n {
            let s = slice(i, 20);
            whole.merge(&s);
            k.push(s.clone(), json_size(&s));
            let kept: usize = k.kept.iter().map(|(_, b)| b).sum();
            assert!(kept <= budget + k.kept.last().map_or(0, |(_, b)| *b));
        }
        let group = k.group();
        assert!(group > 1);
        let kept = k.finish();
        // Time is covered exactly, in order, each kept slice `group` seconds
        // (the last may be shorter).
        assert_eq!(kept.iter().map(|s| s.duration_ms).sum::<u64>(), n * 1000);
        for (a, b) in kept.iter().zip(kept.iter().skip(1)) {
            assert_eq!(a.start_ms + a.duration_ms, b.start_ms);
        }
        assert!(kept.iter().all(|s| s.duration_ms <= group * 1000));
        // The totals are those of every slice.
        let sched = |s: &Slice| s.sched.clone().unwrap_or_default();
        let mut merged = Slice::default();
        for s in &kept {
            merged.merge(s);
        }
        assert_eq!(sched(&merged).switches_total, sched(&whole).switches_total);
        let oncpu = |s: &Slice| sched(s).threads.iter().map(|t| t.oncpu_ns).sum::<u64>();
        assert_eq!(oncpu(&merged), oncpu(&whole));
        // Each kept slice is bounded to its most costly rows.
        assert!(
            kept.iter()
                .all(|s| sched(s).threads.len() <= DEFAULT_TOP_N + 1)
        );
    }
}
