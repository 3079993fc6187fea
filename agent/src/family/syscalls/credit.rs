//! Futex waits split over the slices they overlap: the syscalls family's
//! use of [`crate::probes::credit`]. The kernel adds a wait's whole duration
//! to its thread at `sys_exit`; its entry map holds the waits in flight,
//! which are credited at each cut up to the cut and given back once the
//! thread's counters name the wait (`last_futex_start_ns`).
//!
//! The counts (`futex_waits`) stay those of waits that *ended* in the slice;
//! only the time is spread. Pure: the reader feeds it the map's contents.

use super::section::{SyscallsSlice, ThreadSyscallSlice};
use crate::kit::probe::credit::{Change, Credit, Open, adjusted};

/// A futex wait in flight at a cut, from the kernel's entry map; its key
/// says whether it began inside a checkpoint window.
pub type InflightWait = Open<bool>;

/// The kernel's state at one cut (see [`crate::kit::probe::credit::Cut`]).
pub type Cut<'a> = crate::kit::probe::credit::Cut<'a, bool>;

/// What has been credited (see [`Credit`]), applied to syscalls slices.
#[derive(Debug, Default)]
pub struct WaitCredit {
    credit: Credit<bool>,
}

impl WaitCredit {
    /// Starts the count at the recording's start (see [`Credit::begin`]).
    pub fn begin(&mut self, cut: Cut<'_>, last_counted: impl Fn(u32) -> u64) {
        self.credit.begin(cut, last_counted);
    }

    /// Adjusts `slice` (the counters' differences up to this cut).
    pub fn apply(
        &mut self,
        slice: &mut SyscallsSlice,
        cut: Cut<'_>,
        last_counted: impl Fn(u32) -> u64,
    ) {
        self.credit.apply(cut, last_counted, |c| adjust(slice, c));
        slice.threads.sort_by_key(|t| t.tid);
    }

    /// Waits credited and not yet given back (for tests and bounds).
    pub fn len(&self) -> usize {
        self.credit.len()
    }

    pub fn is_empty(&self) -> bool {
        self.credit.is_empty()
    }

    /// Forgets threads that exited (their time will never arrive).
    pub fn retain_threads(&mut self, alive: impl Fn(u32) -> bool) {
        self.credit.retain_threads(alive);
    }
}

/// Adds `c.add` ns to and takes `c.back` ns from the thread's futex wait
/// time in the slice (and its in-checkpoint part), creating its row if needed.
fn adjust(slice: &mut SyscallsSlice, c: Change<bool>) {
    if c.add == 0 && c.back == 0 {
        return;
    }
    let pos = match slice.threads.iter().position(|t| t.tid == c.tid) {
        Some(p) => p,
        None => {
            slice.threads.push(ThreadSyscallSlice {
                tid: c.tid,
                tgid: c.tgid,
                ..ThreadSyscallSlice::default()
            });
            slice.threads.len() - 1
        }
    };
    let t = &mut slice.threads[pos];
    t.futex_wait_ns = adjusted(t.futex_wait_ns, c.add, c.back);
    if c.key {
        t.futex_wait_ns_in_checkpoint = adjusted(t.futex_wait_ns_in_checkpoint, c.add, c.back);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn slice_with(tid: u32, waits: u64, ns: u64) -> SyscallsSlice {
        SyscallsSlice {
            threads: vec![ThreadSyscallSlice {
                tid,
                tgid: 1,
                futex_waits: waits,
                futex_wait_ns: ns,
                ..ThreadSyscallSlice::default()
            }],
            ..SyscallsSlice::default()
        }
    }

    fn wait(tid: u32, start_ns: u64, in_checkpoint: bool) -> InflightWait {
        InflightWait {
            tid,
            tgid: 1,
            start_ns,
            key: in_checkpoint,
        }
    }

    fn cut(waits: &[InflightWait], at_ns: u64) -> Cut<'_> {
        Cut { open: waits, at_ns }
    }

    #[test]
    fn a_long_wait_is_spread_over_the_slices_it_overlaps() {
        // One wait from 0.5 s to 6.2 s, slices cut every second.
        let mut c = WaitCredit::default();
        let mut per_slice = Vec::new();
        let w = [wait(7, S / 2, false)];
        for k in 1..=6u64 {
            let mut s = SyscallsSlice::default();
            c.apply(&mut s, cut(&w, k * S), |_| 0);
            per_slice.push(s.threads.first().map_or(0, |t| t.futex_wait_ns));
        }
        // The kernel adds the whole 5.7 s when the wait ends, in slice 7.
        let mut last = slice_with(7, 1, 5_700_000_000);
        c.apply(&mut last, cut(&[], 7 * S), |_| S / 2);
        per_slice.push(last.threads[0].futex_wait_ns);
        assert_eq!(
            per_slice,
            vec![S / 2, S, S, S, S, S, 200_000_000],
            "never more than the slice"
        );
        assert_eq!(per_slice.iter().sum::<u64>(), 5_700_000_000);
        assert_eq!(last.threads[0].futex_waits, 1);
        assert!(c.is_empty());
    }

    #[test]
    fn the_part_of_a_wait_before_the_recording_is_not_counted() {
        // Waiting since 0.3 s; the recording starts at 1 s; the wait ends
        // at 1.4 s (the kernel adds 1.1 s) and the first cut is at 2 s.
        let w = [wait(8, 300_000_000, false)];
        let mut c = WaitCredit::default();
        c.begin(cut(&w, S), |_| 0);
        let mut s = slice_with(8, 1, 1_100_000_000);
        c.apply(&mut s, cut(&[], 2 * S), |_| 300_000_000);
        assert_eq!(s.threads[0].futex_wait_ns, 400_000_000);
        // Still waiting at the first cut: credited from the start only.
        let mut c = WaitCredit::default();
        c.begin(cut(&w, S), |_| 0);
        let mut s = SyscallsSlice::default();
        c.apply(&mut s, cut(&w, 2 * S), |_| 0);
        assert_eq!(s.threads[0].futex_wait_ns, S);
    }

    #[test]
    fn a_wait_inside_one_slice_is_left_alone() {
        let mut c = WaitCredit::default();
        let mut s = slice_with(3, 4, 300_000_000);
        c.apply(&mut s, cut(&[], S), |_| 900_000_000);
        assert_eq!(s, slice_with(3, 4, 300_000_000));
    }

    #[test]
    fn a_wait_that_ends_while_the_counters_are_read_is_given_back_with_its_time() {
        // Waiting since 0.1 s, credited up to 1 s. At the cut of 2 s it is
        // still in flight when the waits are read and ends just after the
        // counters are read: credited up to the cut, given back with the
        // next counters (which name it).
        let w = [wait(6, S / 10, false)];
        let mut c = WaitCredit::default();
        let mut s1 = SyscallsSlice::default();
        c.apply(&mut s1, cut(&w, S), |_| 0);
        assert_eq!(s1.threads[0].futex_wait_ns, 9 * S / 10);
        let mut s2 = slice_with(6, 3, 0);
        c.apply(&mut s2, cut(&w, 2 * S), |_| 0);
        assert_eq!(s2.threads[0].futex_wait_ns, S);
        // The next counters hold its whole 2 s: 1.9 s of it were credited.
        let mut s3 = slice_with(6, 1, 2 * S);
        c.apply(&mut s3, cut(&[], 3 * S), |_| S / 10);
        assert_eq!(s3.threads[0].futex_wait_ns, S / 10);
        assert!(c.is_empty());
        // Had it ended just before the counters were read, they would hold
        // it at 2 s, and that slice would get the rest of it only.
        let mut c = WaitCredit::default();
        let mut s1 = SyscallsSlice::default();
        c.apply(&mut s1, cut(&w, S), |_| 0);
        let mut s2 = slice_with(6, 1, 19 * S / 10);
        c.apply(&mut s2, cut(&w, 2 * S), |_| S / 10);
        assert_eq!(s2.threads[0].futex_wait_ns, S);
        assert!(c.is_empty());
    }

    #[test]
    fn a_new_wait_of_the_same_thread_is_not_confused_with_the_old() {
        let mut c = WaitCredit::default();
        let mut s1 = SyscallsSlice::default();
        c.apply(&mut s1, cut(&[wait(5, 10, true)], S), |_| 0);
        assert_eq!(s1.threads[0].futex_wait_ns_in_checkpoint, S - 10);
        // The first wait ended at 1.5 s (the kernel adds 1.5 s) and a
        // second began at 1.8 s, still running at the cut.
        let mut s2 = slice_with(5, 1, 1_500_000_000 - 10);
        s2.threads[0].futex_wait_ns_in_checkpoint = 1_500_000_000 - 10;
        c.apply(
            &mut s2,
            cut(&[wait(5, 1_800_000_000, false)], 2 * S),
            |_| 10,
        );
        assert_eq!(s2.threads[0].futex_wait_ns, 700_000_000);
        assert_eq!(s2.threads[0].futex_wait_ns_in_checkpoint, 500_000_000);
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn waiting_threads_with_nothing_ended_get_a_row() {
        let mut c = WaitCredit::default();
        let mut s = slice_with(9, 2, 10);
        c.apply(&mut s, cut(&[wait(4, S / 4, false)], S), |_| 0);
        let tids: Vec<u32> = s.threads.iter().map(|t| t.tid).collect();
        assert_eq!(tids, vec![4, 9]);
        assert_eq!(
            (s.threads[0].futex_waits, s.threads[0].futex_wait_ns),
            (0, 3 * S / 4)
        );
    }

    #[test]
    fn exited_threads_are_forgotten() {
        let mut c = WaitCredit::default();
        let mut s = SyscallsSlice::default();
        c.apply(
            &mut s,
            cut(&[wait(4, 10, false), wait(5, 10, false)], S),
            |_| 0,
        );
        c.retain_threads(|tid| tid == 5);
        assert_eq!(c.len(), 1);
    }
}
