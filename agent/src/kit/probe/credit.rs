//! Intervals split over the slices they overlap: futex waits, D-state
//! sleeps, kernel lock waits and runs on a CPU.
//!
//! The kernel side adds an interval's whole length to its thread when the
//! interval ends (a wait at its exit, a run at its switch-out), so a 6 s
//! wait that ends in one 1 s slice would read as a thread blocked 600 % of
//! that second. At every slice cut, user space reads the intervals still
//! open (the kernel keeps their start: an in-flight map, or what each CPU
//! runs) and credits each with its time since its last credit; when a
//! credited interval ends, its credited part is taken back from the slice
//! in which the kernel adds the whole. Each slice then holds exactly the
//! time inside it, so no thread waits or runs longer than the slice.
//!
//! A cut reads the open intervals first, then the counters. Whether an
//! interval is in those counters is exact: the kernel notes in each
//! thread's counters the start of its latest counted interval (a thread's
//! intervals of one kind follow each other, so an interval has ended in
//! the counters when that start has reached its own), and drops an open
//! interval only after counting it. An interval counted nowhere and no
//! longer open ended unseen by the kernel (a missed event, a full map): it
//! will never be added, and its credit is kept.
//!
//! Counts (waits, sleeps, switches) stay those of intervals that *ended* in
//! the slice; only the time is spread. Pure: each reader feeds it the
//! kernel's maps and applies the [`Change`]s to its own slice.

use std::collections::HashMap;

/// An interval open at a cut, from the kernel's maps. `K` is what the
/// family books the time under (checkpoint window, stack, lock kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Open<K> {
    pub tid: u32,
    pub tgid: u32,
    /// CLOCK_MONOTONIC at the interval's start (the kernel's `bpf_ktime_get_ns`).
    pub start_ns: u64,
    pub key: K,
}

/// The kernel's state at one cut: the intervals open when it was read
/// (before the counters), and the instant between that read and the
/// counters' read up to which open intervals are credited.
#[derive(Debug, Clone, Copy)]
pub struct Cut<'a, K> {
    pub open: &'a [Open<K>],
    /// CLOCK_MONOTONIC, after the open intervals were read and before the
    /// counters were.
    pub at_ns: u64,
}

impl<K> Cut<'_, K> {
    fn is_open(&self, tid: u32, start_ns: u64) -> bool {
        self.open
            .iter()
            .any(|w| w.tid == tid && w.start_ns == start_ns)
    }
}

/// What a reader changes in its slice: `add` ns to thread `tid`'s time
/// under `key`, or `back` ns taken from it (the credited part of an
/// interval whose whole length the counters now hold). One of the two is 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change<K> {
    pub tid: u32,
    pub tgid: u32,
    pub key: K,
    pub add: u64,
    pub back: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Credited<K> {
    tgid: u32,
    start_ns: u64,
    /// Credited to earlier slices up to this instant.
    until_ns: u64,
    key: K,
}

/// What has been credited, per thread: at most one entry per thread with
/// an open interval, so bounded by the kernel's map.
#[derive(Debug)]
pub struct Credit<K> {
    credited: HashMap<u32, Credited<K>>,
}

impl<K> Default for Credit<K> {
    fn default() -> Self {
        Self {
            credited: HashMap::new(),
        }
    }
}

impl<K: Copy> Credit<K> {
    /// Starts the count at the recording's start (`cut.at_ns`): the part
    /// before it of each interval then open and not yet counted is never
    /// counted (it is taken back when the kernel adds the whole interval).
    /// `last_counted(tid)`: the start of the thread's latest interval in the
    /// counters read just after `cut.open` (0: none).
    pub fn begin(&mut self, cut: Cut<'_, K>, last_counted: impl Fn(u32) -> u64) {
        self.credited.clear();
        for w in cut.open {
            if last_counted(w.tid) < w.start_ns {
                self.mark_credited(w, cut.at_ns);
            }
        }
    }

    /// The changes that turn the counters' differences up to this cut into
    /// the time inside the slice (`last_counted` as for [`Credit::begin`]).
    pub fn apply(
        &mut self,
        cut: Cut<'_, K>,
        last_counted: impl Fn(u32) -> u64,
        mut change: impl FnMut(Change<K>),
    ) {
        let mut done = Vec::new();
        for (&tid, c) in &mut self.credited {
            if last_counted(tid) >= c.start_ns {
                // Ended and counted here, whole: take back what earlier
                // slices hold.
                change(Change {
                    tid,
                    tgid: c.tgid,
                    key: c.key,
                    add: 0,
                    back: c.until_ns.saturating_sub(c.start_ns),
                });
                done.push(tid);
            } else if cut.is_open(tid, c.start_ns) {
                // Still open when the counters were read: its time since
                // the last credit.
                change(Change {
                    tid,
                    tgid: c.tgid,
                    key: c.key,
                    add: cut.at_ns.saturating_sub(c.until_ns),
                    back: 0,
                });
                c.until_ns = c.until_ns.max(cut.at_ns);
            } else {
                // Neither open nor counted: ended unseen by the kernel,
                // which will never add it. Its credit stays.
                done.push(tid);
            }
        }
        for tid in done {
            self.credited.remove(&tid);
        }
        // Intervals credited for the first time: open when read and not
        // ended before the counters were read.
        for w in cut.open {
            if self.credited.contains_key(&w.tid) || last_counted(w.tid) >= w.start_ns {
                continue;
            }
            change(Change {
                tid: w.tid,
                tgid: w.tgid,
                key: w.key,
                add: cut.at_ns.saturating_sub(w.start_ns),
                back: 0,
            });
            self.mark_credited(w, cut.at_ns);
        }
    }

    /// Records the open interval `w` as credited up to `at_ns` (its start
    /// when it began later).
    fn mark_credited(&mut self, w: &Open<K>, at_ns: u64) {
        self.credited.insert(
            w.tid,
            Credited {
                tgid: w.tgid,
                start_ns: w.start_ns,
                until_ns: at_ns.max(w.start_ns),
                key: w.key,
            },
        );
    }

    /// Intervals credited and not yet given back (for tests and bounds).
    pub fn len(&self) -> usize {
        self.credited.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets threads that exited (their time will never arrive).
    pub fn retain_threads(&mut self, alive: impl Fn(u32) -> bool) {
        self.credited.retain(|&tid, _| alive(tid));
    }
}

/// `v + add - back`, never below 0 (a take-back larger than what the slice
/// holds, after a lost kernel update, leaves 0).
pub fn adjusted(v: u64, add: u64, back: u64) -> u64 {
    v.saturating_add(add).saturating_sub(back)
}

/// The intervals of `open` that the counters read after it do not hold yet
/// (`last_counted`, as for [`Credit::begin`]), the only ones ever credited,
/// each with its thread group from `tgid_of` (a thread that is gone, `None`,
/// is left out).
pub fn uncounted<K>(
    open: Vec<Open<K>>,
    last_counted: impl Fn(u32) -> u64,
    tgid_of: impl Fn(u32) -> Option<u32>,
) -> Vec<Open<K>> {
    open.into_iter()
        .filter(|w| last_counted(w.tid) < w.start_ns)
        .filter_map(|mut w| {
            if w.tgid == 0 {
                w.tgid = tgid_of(w.tid)?;
            }
            Some(w)
        })
        .collect()
}

/// Open intervals with one per thread: the latest where a thread shows
/// twice (a read of every CPU's running thread is not atomic, so a thread
/// that moved between CPUs during it can appear on both).
pub fn latest_per_thread<K>(mut open: Vec<Open<K>>) -> Vec<Open<K>> {
    open.sort_by_key(|w| (w.tid, std::cmp::Reverse(w.start_ns)));
    open.dedup_by_key(|w| w.tid);
    open
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn open(tid: u32, start_ns: u64) -> Open<u8> {
        Open {
            tid,
            tgid: 1,
            start_ns,
            key: 3,
        }
    }

    fn cut(w: &[Open<u8>], at_ns: u64) -> Cut<'_, u8> {
        Cut { open: w, at_ns }
    }

    /// The net change per thread of one `apply`.
    fn net(c: &mut Credit<u8>, cut: Cut<'_, u8>, last: impl Fn(u32) -> u64) -> Vec<(u32, i64)> {
        let mut v = Vec::new();
        c.apply(cut, last, |ch| {
            assert_eq!(ch.key, 3);
            assert!(ch.add == 0 || ch.back == 0, "{ch:?}");
            v.push((ch.tid, ch.add as i64 - ch.back as i64));
        });
        v.sort_unstable();
        v
    }

    #[test]
    fn a_long_interval_is_credited_per_cut_and_taken_back_at_its_end() {
        let mut c = Credit::default();
        let w = [open(7, S / 2)];
        assert_eq!(net(&mut c, cut(&w, S), |_| 0), vec![(7, (S / 2) as i64)]);
        assert_eq!(net(&mut c, cut(&w, 2 * S), |_| 0), vec![(7, S as i64)]);
        // Ended at 2.3 s: the counters hold its 1.8 s, 1.5 s were credited.
        assert_eq!(
            net(&mut c, cut(&[], 3 * S), |_| S / 2),
            vec![(7, -((3 * S / 2) as i64))]
        );
        assert!(c.is_empty());
    }

    #[test]
    fn an_interval_that_ends_while_the_counters_are_read_is_decided_by_them() {
        // Open when the intervals were read at 1 s; it ended before the
        // counters were read, which hold it whole: nothing to credit.
        let mut c = Credit::default();
        let w = [open(4, S / 2)];
        assert!(net(&mut c, cut(&w, S), |_| S / 2).is_empty());
        assert!(c.is_empty());
        // Ended just after the counters were read: credited now, taken back
        // with the next counters (which hold it).
        let mut c = Credit::default();
        assert_eq!(net(&mut c, cut(&w, S), |_| 0), vec![(4, (S / 2) as i64)]);
        assert_eq!(
            net(&mut c, cut(&[], 2 * S), |_| S / 2),
            vec![(4, -((S / 2) as i64))]
        );
    }

    #[test]
    fn begin_leaves_out_the_time_before_the_clock() {
        let mut c = Credit::default();
        let w = [open(2, S / 10), open(3, S / 4)];
        // Thread 3's interval is already counted at the clock.
        c.begin(cut(&w, S), |tid| if tid == 3 { S / 4 } else { 0 });
        assert_eq!(c.len(), 1);
        let w = [open(2, S / 10)];
        assert_eq!(net(&mut c, cut(&w, 2 * S), |_| 0), vec![(2, S as i64)]);
        // Ends; the kernel adds 2.4 s: 0.9 s before the clock and 1 s
        // credited come back.
        assert_eq!(
            net(&mut c, cut(&[], 3 * S), |_| S / 10),
            vec![(2, -(19 * S as i64 / 10))]
        );
    }

    #[test]
    fn an_interval_whose_end_is_never_counted_keeps_its_credit() {
        let mut c = Credit::default();
        assert_eq!(
            net(&mut c, cut(&[open(5, S / 2)], S), |_| 0),
            vec![(5, (S / 2) as i64)]
        );
        // Gone at 2 s, its end not counted: nothing taken back, forgotten.
        assert!(net(&mut c, cut(&[], 2 * S), |_| 0).is_empty());
        assert!(c.is_empty());
        // The thread's next interval is credited from its start.
        assert_eq!(
            net(&mut c, cut(&[open(5, 2 * S + S / 2)], 3 * S), |_| 0),
            vec![(5, (S / 2) as i64)]
        );
    }

    #[test]
    fn a_new_interval_of_the_same_thread_is_not_confused_with_the_old() {
        let mut c = Credit::default();
        assert_eq!(
            net(&mut c, cut(&[open(5, S / 10)], S), |_| 0),
            vec![(5, (9 * S / 10) as i64)]
        );
        // The first ended at 1.5 s (counted), a second began at 1.8 s.
        assert_eq!(
            net(&mut c, cut(&[open(5, 1_800_000_000)], 2 * S), |_| S / 10),
            vec![(5, -((9 * S / 10) as i64)), (5, 200_000_000)]
        );
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn a_thread_seen_on_two_cpus_keeps_its_latest_run() {
        let w = latest_per_thread(vec![open(9, 5), open(8, 1), open(9, 7)]);
        assert_eq!(
            w.iter().map(|w| (w.tid, w.start_ns)).collect::<Vec<_>>(),
            vec![(8, 1), (9, 7)]
        );
    }

    #[test]
    fn only_uncounted_intervals_of_live_threads_are_kept_with_their_group() {
        let w = vec![
            Open {
                tgid: 0,
                ..open(1, 10)
            },
            Open {
                tgid: 0,
                ..open(2, 10)
            },
            Open {
                tgid: 0,
                ..open(3, 10)
            },
        ];
        // 1 is counted already, 3 is gone.
        let kept = uncounted(
            w,
            |tid| if tid == 1 { 10 } else { 0 },
            |tid| (tid != 3).then_some(tid + 100),
        );
        assert_eq!(
            kept.iter().map(|w| (w.tid, w.tgid)).collect::<Vec<_>>(),
            vec![(2, 102)]
        );
    }

    #[test]
    fn adjusted_never_goes_below_zero() {
        assert_eq!(adjusted(5, 10, 3), 12);
        assert_eq!(adjusted(5, 0, 30), 0);
    }
}
