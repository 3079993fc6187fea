//! Futex waits split over the slices they overlap.
//!
//! The kernel side adds a wait's whole duration to its thread when the wait
//! ends, so a 6 s wait that ends in one 1 s slice would read as a thread
//! blocked 600 % of that second. At every slice cut, user space reads the
//! waits still in flight (the kernel's entry map holds their start) and
//! credits each with the time it has been waiting since its last credit;
//! when a credited wait ends, its credited part is taken back from the slice
//! in which the kernel adds the whole. Each slice then holds exactly the
//! wait time inside it, and no thread is blocked longer than the slice.
//!
//! The counts (`futex_waits`) stay those of waits that *ended* in the slice;
//! only the time is spread. Pure: the reader feeds it the map's contents.

use std::collections::HashMap;

use crate::recording::{SyscallsSlice, ThreadSyscallSlice};

/// A futex wait in flight at a cut, from the kernel's entry map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InflightWait {
    pub tid: u32,
    pub tgid: u32,
    /// CLOCK_MONOTONIC at the wait's entry (the kernel's `bpf_ktime_get_ns`).
    pub start_ns: u64,
    /// The wait began inside a checkpoint window.
    pub in_checkpoint: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Credited {
    start_ns: u64,
    /// Credited to earlier slices up to this instant.
    until_ns: u64,
    in_checkpoint: bool,
    /// The thread's cumulative count of ended waits (the kernel's) at a cut
    /// when this wait was running: once the count goes above it, the wait
    /// has ended and its whole time is in the counters.
    ended_before: u64,
}

impl Credited {
    /// `w` credited up to `at_ns`, its thread having ended `ended` waits.
    fn up_to(w: &InflightWait, at_ns: u64, ended: u64) -> Self {
        Self {
            start_ns: w.start_ns,
            until_ns: at_ns.max(w.start_ns),
            in_checkpoint: w.in_checkpoint,
            ended_before: ended,
        }
    }
}

/// What has been credited, per thread: at most one entry per waiting thread,
/// so bounded by the kernel's in-flight map.
#[derive(Debug, Default)]
pub struct WaitCredit {
    credited: HashMap<u32, Credited>,
}

/// The kernel's state at one cut, read in this order: the waits in flight
/// (`before`), the cumulative counters (`ended`, per thread: waits ended so
/// far), the waits in flight again (`after`). A wait in both lists with the
/// same start spanned the counters' reading, so the counters hold none of it.
#[derive(Debug, Clone, Copy)]
pub struct Cut<'a> {
    pub before: &'a [InflightWait],
    pub after: &'a [InflightWait],
    /// CLOCK_MONOTONIC when the counters were read.
    pub at_ns: u64,
}

impl Cut<'_> {
    /// Waits running before and after the counters were read.
    fn spanning(&self) -> impl Iterator<Item = &InflightWait> + '_ {
        self.after.iter().filter(|w| {
            self.before
                .iter()
                .any(|b| b.tid == w.tid && b.start_ns == w.start_ns)
        })
    }
}

impl WaitCredit {
    /// Starts the count at the recording's start (`cut.at_ns`): the part
    /// before it of each wait then in flight is never counted (it is taken
    /// back when the kernel adds the whole wait at its end).
    pub fn begin(&mut self, cut: Cut<'_>, ended: impl Fn(u32) -> u64) {
        self.credited.clear();
        for w in cut.spanning() {
            self.credited
                .insert(w.tid, Credited::up_to(w, cut.at_ns, ended(w.tid)));
        }
    }

    /// Adjusts `slice` (the counters' differences up to this cut).
    pub fn apply(&mut self, slice: &mut SyscallsSlice, cut: Cut<'_>, ended: impl Fn(u32) -> u64) {
        // Credited waits that ended before the counters were read: the
        // kernel added their whole time here; take back what earlier slices
        // hold. Those still running get their time since the last credit.
        let mut done = Vec::new();
        for (&tid, c) in &mut self.credited {
            if ended(tid) > c.ended_before {
                let back = c.until_ns.saturating_sub(c.start_ns);
                let tgid = slice.threads.iter().find(|t| t.tid == tid).map(|t| t.tgid);
                adjust(slice, tid, tgid.unwrap_or(0), c.in_checkpoint, 0, back);
                done.push(tid);
            } else if cut
                .after
                .iter()
                .any(|w| w.tid == tid && w.start_ns == c.start_ns)
            {
                let tgid = cut
                    .after
                    .iter()
                    .find(|w| w.tid == tid)
                    .map_or(0, |w| w.tgid);
                adjust(
                    slice,
                    tid,
                    tgid,
                    c.in_checkpoint,
                    cut.at_ns.saturating_sub(c.until_ns),
                    0,
                );
                c.until_ns = c.until_ns.max(cut.at_ns);
            }
            // Otherwise it ended after the counters were read: its time
            // arrives with the next slice, which gives the credit back.
        }
        for tid in done {
            self.credited.remove(&tid);
        }
        // Waits running across this cut for the first time: credit since
        // they began.
        for w in cut.spanning() {
            if self.credited.contains_key(&w.tid) {
                continue;
            }
            let add = cut.at_ns.saturating_sub(w.start_ns);
            adjust(slice, w.tid, w.tgid, w.in_checkpoint, add, 0);
            self.credited
                .insert(w.tid, Credited::up_to(w, cut.at_ns, ended(w.tid)));
        }
        slice.threads.sort_by_key(|t| t.tid);
    }

    /// Waits credited and not yet given back (for tests and bounds).
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

/// Adds `add` ns to and takes `back` ns from `tid`'s futex wait time in the
/// slice (and its in-checkpoint part), creating the thread's row if needed.
fn adjust(slice: &mut SyscallsSlice, tid: u32, tgid: u32, in_ckpt: bool, add: u64, back: u64) {
    if add == 0 && back == 0 {
        return;
    }
    let pos = match slice.threads.iter().position(|t| t.tid == tid) {
        Some(p) => p,
        None => {
            slice.threads.push(ThreadSyscallSlice {
                tid,
                tgid,
                ..ThreadSyscallSlice::default()
            });
            slice.threads.len() - 1
        }
    };
    let t = &mut slice.threads[pos];
    t.futex_wait_ns = (t.futex_wait_ns + add).saturating_sub(back);
    if in_ckpt {
        t.futex_wait_ns_in_checkpoint = (t.futex_wait_ns_in_checkpoint + add).saturating_sub(back);
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
            in_checkpoint,
        }
    }

    /// A cut where the same waits run before and after the counters' read.
    fn steady(waits: &[InflightWait], at_ns: u64) -> Cut<'_> {
        Cut {
            before: waits,
            after: waits,
            at_ns,
        }
    }

    #[test]
    fn a_long_wait_is_spread_over_the_slices_it_overlaps() {
        // One wait from 0.5 s to 6.2 s, slices cut every second.
        let mut c = WaitCredit::default();
        let mut per_slice = Vec::new();
        let w = [wait(7, S / 2, false)];
        for cut in 1..=6u64 {
            let mut s = SyscallsSlice::default();
            c.apply(&mut s, steady(&w, cut * S), |_| 0);
            per_slice.push(s.threads.first().map_or(0, |t| t.futex_wait_ns));
        }
        // The kernel adds the whole 5.7 s when the wait ends, in slice 7.
        let mut last = slice_with(7, 1, 5_700_000_000);
        c.apply(&mut last, steady(&[], 7 * S), |_| 1);
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
        c.begin(steady(&w, S), |_| 4);
        let mut s = slice_with(8, 1, 1_100_000_000);
        c.apply(&mut s, steady(&[], 2 * S), |_| 5);
        assert_eq!(s.threads[0].futex_wait_ns, 400_000_000);
        // Still waiting at the first cut: credited from the start only.
        let mut c = WaitCredit::default();
        c.begin(steady(&w, S), |_| 4);
        let mut s = SyscallsSlice::default();
        c.apply(&mut s, steady(&w, 2 * S), |_| 4);
        assert_eq!(s.threads[0].futex_wait_ns, S);
    }

    #[test]
    fn a_wait_inside_one_slice_is_left_alone() {
        let mut c = WaitCredit::default();
        let mut s = slice_with(3, 4, 300_000_000);
        c.apply(&mut s, steady(&[], S), |_| 4);
        assert_eq!(s, slice_with(3, 4, 300_000_000));
    }

    #[test]
    fn a_wait_that_ends_while_the_counters_are_read_is_given_back_with_its_time() {
        // Credited up to 1 s. At the cut of 2 s it ends just after the
        // counters were read and the thread starts its next wait at once:
        // other waits of the thread ended in this slice, but not this one.
        let first = [wait(6, 0, false)];
        let mut c = WaitCredit::default();
        let mut s1 = SyscallsSlice::default();
        c.apply(&mut s1, steady(&first, S), |_| 10);
        assert_eq!(s1.threads[0].futex_wait_ns, S);
        let mut s2 = slice_with(6, 3, 0);
        let next = [wait(6, 2 * S + 1_000, false)];
        c.apply(
            &mut s2,
            Cut {
                before: &first,
                after: &next,
                at_ns: 2 * S,
            },
            |_| 10,
        );
        // Nothing given back yet, nothing credited for the new wait.
        assert_eq!(s2.threads[0].futex_wait_ns, 0);
        // The next counters hold its whole 2 s: 1 s of it was credited.
        let mut s3 = slice_with(6, 1, 2 * S);
        c.apply(&mut s3, steady(&[], 3 * S), |_| 11);
        assert_eq!(s3.threads[0].futex_wait_ns, S);
        assert!(c.is_empty());
    }

    #[test]
    fn a_new_wait_of_the_same_thread_is_not_confused_with_the_old() {
        let mut c = WaitCredit::default();
        let mut s1 = SyscallsSlice::default();
        c.apply(&mut s1, steady(&[wait(5, 0, true)], S), |_| 0);
        assert_eq!(s1.threads[0].futex_wait_ns_in_checkpoint, S);
        // The first wait ended at 1.5 s (1.5 s added by the kernel) and a
        // second began at 1.8 s, still running at the cut.
        let mut s2 = slice_with(5, 1, 1_500_000_000);
        s2.threads[0].futex_wait_ns_in_checkpoint = 1_500_000_000;
        c.apply(
            &mut s2,
            steady(&[wait(5, 1_800_000_000, false)], 2 * S),
            |_| 1,
        );
        assert_eq!(s2.threads[0].futex_wait_ns, 700_000_000);
        assert_eq!(s2.threads[0].futex_wait_ns_in_checkpoint, 500_000_000);
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn waiting_threads_with_nothing_ended_get_a_row() {
        let mut c = WaitCredit::default();
        let mut s = slice_with(9, 2, 10);
        c.apply(&mut s, steady(&[wait(4, S / 4, false)], S), |_| 0);
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
            steady(&[wait(4, 0, false), wait(5, 0, false)], S),
            |_| 0,
        );
        c.retain_threads(|tid| tid == 5);
        assert_eq!(c.len(), 1);
    }
}
