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
}

/// What has been credited, per thread: at most one entry per waiting thread,
/// so bounded by the kernel's in-flight map.
#[derive(Debug, Default)]
pub struct WaitCredit {
    credited: HashMap<u32, Credited>,
    /// Credited waits that ended after the kernel's counters were read for
    /// the slice: their whole time arrives with a later slice, which then
    /// gives back the credited part.
    owed: HashMap<u32, Credited>,
}

impl WaitCredit {
    /// Adjusts `slice`, cut at `now_ns`, given the waits in flight then.
    pub fn apply(&mut self, slice: &mut SyscallsSlice, inflight: &[InflightWait], now_ns: u64) {
        let running: HashMap<u32, &InflightWait> = inflight.iter().map(|w| (w.tid, w)).collect();
        // Waits credited earlier: still running (credit up to now), or ended
        // (the kernel added their whole time to this slice: take back what
        // earlier slices already hold).
        let mut ended = Vec::new();
        for (&tid, c) in &mut self.credited {
            match running.get(&tid) {
                Some(w) if w.start_ns == c.start_ns => {
                    let add = now_ns.saturating_sub(c.until_ns);
                    let tgid = w.tgid;
                    adjust(slice, tid, tgid, c.in_checkpoint, add, 0);
                    c.until_ns = c.until_ns.max(now_ns);
                }
                _ => ended.push(tid),
            }
        }
        for tid in ended {
            if let Some(c) = self.credited.remove(&tid) {
                self.owed.insert(tid, c);
            }
        }
        // A wait's end is in this slice when its thread's count of ended
        // waits went up here; otherwise it is still owed.
        self.owed.retain(|&tid, c| {
            let Some(t) = slice
                .threads
                .iter()
                .find(|t| t.tid == tid && t.futex_waits > 0)
            else {
                return true;
            };
            let tgid = t.tgid;
            let back = c.until_ns.saturating_sub(c.start_ns);
            adjust(slice, tid, tgid, c.in_checkpoint, 0, back);
            false
        });
        // Waits seen in flight for the first time: credit since they began.
        for w in inflight {
            if self.credited.contains_key(&w.tid) {
                continue;
            }
            let add = now_ns.saturating_sub(w.start_ns);
            adjust(slice, w.tid, w.tgid, w.in_checkpoint, add, 0);
            self.credited.insert(
                w.tid,
                Credited {
                    start_ns: w.start_ns,
                    until_ns: now_ns.max(w.start_ns),
                    in_checkpoint: w.in_checkpoint,
                },
            );
        }
        slice.threads.sort_by_key(|t| t.tid);
    }

    /// Waits credited and not yet given back (for tests and bounds).
    pub fn len(&self) -> usize {
        self.credited.len() + self.owed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets threads that exited (their owed time will never arrive).
    pub fn retain_threads(&mut self, alive: impl Fn(u32) -> bool) {
        self.owed.retain(|&tid, _| alive(tid));
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

    #[test]
    fn a_long_wait_is_spread_over_the_slices_it_overlaps() {
        // One wait from 0.5 s to 6.2 s, slices cut every second.
        let mut c = WaitCredit::default();
        let mut per_slice = Vec::new();
        for cut in 1..=6u64 {
            let mut s = SyscallsSlice::default();
            c.apply(&mut s, &[wait(7, S / 2, false)], cut * S);
            per_slice.push(s.threads.first().map_or(0, |t| t.futex_wait_ns));
        }
        // The kernel adds the whole 5.7 s when the wait ends, in slice 7.
        let mut last = slice_with(7, 1, 5_700_000_000);
        c.apply(&mut last, &[], 7 * S);
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
    fn a_wait_inside_one_slice_is_left_alone() {
        let mut c = WaitCredit::default();
        let mut s = slice_with(3, 4, 300_000_000);
        c.apply(&mut s, &[], S);
        assert_eq!(s, slice_with(3, 4, 300_000_000));
    }

    #[test]
    fn a_new_wait_of_the_same_thread_is_not_confused_with_the_old() {
        let mut c = WaitCredit::default();
        let mut s1 = SyscallsSlice::default();
        c.apply(&mut s1, &[wait(5, 0, true)], S);
        assert_eq!(s1.threads[0].futex_wait_ns_in_checkpoint, S);
        // The first wait ended at 1.5 s (1.5 s added by the kernel) and a
        // second began at 1.8 s, still running at the cut.
        let mut s2 = slice_with(5, 1, 1_500_000_000);
        s2.threads[0].futex_wait_ns_in_checkpoint = 1_500_000_000;
        c.apply(&mut s2, &[wait(5, 1_800_000_000, false)], 2 * S);
        assert_eq!(s2.threads[0].futex_wait_ns, 700_000_000);
        assert_eq!(s2.threads[0].futex_wait_ns_in_checkpoint, 500_000_000);
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn a_wait_that_ends_after_the_counters_were_read_is_given_back_later() {
        let mut c = WaitCredit::default();
        let mut s1 = SyscallsSlice::default();
        c.apply(&mut s1, &[wait(6, 0, false)], S);
        // Ended at 1.999 s, after the counters were read: not in this slice.
        let mut s2 = SyscallsSlice::default();
        c.apply(&mut s2, &[], 2 * S);
        assert!(s2.threads.is_empty());
        let mut s3 = slice_with(6, 1, 1_999_000_000);
        c.apply(&mut s3, &[], 3 * S);
        assert_eq!(s3.threads[0].futex_wait_ns, 999_000_000);
        assert!(c.is_empty());
    }

    #[test]
    fn waiting_threads_with_nothing_ended_get_a_row() {
        let mut c = WaitCredit::default();
        let mut s = slice_with(9, 2, 10);
        c.apply(&mut s, &[wait(4, S / 4, false)], S);
        let tids: Vec<u32> = s.threads.iter().map(|t| t.tid).collect();
        assert_eq!(tids, vec![4, 9]);
        assert_eq!(
            (s.threads[0].futex_waits, s.threads[0].futex_wait_ns),
            (0, 3 * S / 4)
        );
    }
}
