//! A thread's time in one state never exceeds its slice: what a family read
//! beyond the slice's end moves on to the next slice.
//!
//! Why: a slice ends at its cut (`Session::take_slice`), but each family
//! reads its counters a little later, one after the other, and on a busy
//! host the reading thread can be preempted in between for tens of
//! milliseconds. A family's section then spans its own reads, which can be
//! longer than the slice: a thread blocked all along showed 1056 ms of
//! futex wait in a 1030 ms slice. What exceeds the slice's length happened
//! after its cut (the family's span starts at its previous read, itself
//! after the previous cut), so it belongs to the next slice: it is carried
//! there, and the totals over the recording stay what the kernel counted.
//! The last slice ends once its families are read, so it takes every carry
//! whole.
//!
//! Times split per thread: on CPU (sched), futex waits (syscalls, with
//! their in-checkpoint part), kernel lock waits and D-state sleeps
//! (contention, each inside and outside checkpoint windows). Counts stay
//! where the kernel counted them. Bounded: at most one carry per thread a
//! family holds a row for.

use std::collections::HashMap;

use crate::family::contention::section::{ThreadContentionSlice, WindowSplit};
use crate::family::sched::section::ThreadSlice;
use crate::family::syscalls::section::ThreadSyscallSlice;
use crate::recording::Slice;

/// Time carried to the next slice, per family and thread: a row holding
/// only the time (its counts are 0).
#[derive(Debug, Default)]
pub struct Carry {
    oncpu: HashMap<u32, ThreadSlice>,
    futex: HashMap<u32, ThreadSyscallSlice>,
    contention: HashMap<u32, ThreadContentionSlice>,
}

impl Carry {
    /// Adds what was carried to `slice` and, unless it is the `last`, takes
    /// from each thread what exceeds the slice's length for the next one.
    pub fn fit(&mut self, slice: &mut Slice, last: bool) {
        let limit = if last {
            u64::MAX
        } else {
            slice.duration_ms.saturating_mul(1_000_000)
        };
        if let Some(s) = slice.sched.as_mut() {
            fit_rows(&mut s.threads, &mut self.oncpu, limit, |t| t.tid);
        }
        if let Some(s) = slice.syscalls.as_mut() {
            fit_rows(&mut s.threads, &mut self.futex, limit, |t| t.tid);
        }
        if let Some(s) = slice.contention.as_mut() {
            fit_rows(&mut s.threads, &mut self.contention, limit, |t| t.tid);
        }
    }

    /// Threads with time carried.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.oncpu.len() + self.futex.len() + self.contention.len()
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What one kind of row does with its time: add a carried row's time, and
/// split off (as a time-only row) what exceeds `limit`.
trait Timed: Sized {
    fn add(&mut self, carried: &Self);
    fn split_above(&mut self, limit: u64) -> Option<Self>;
}

/// Carries into `rows` (sorted by tid; a thread with a carry but no row here
/// gets its carried row), then splits every row at `limit`.
fn fit_rows<R: Timed>(
    rows: &mut Vec<R>,
    carry: &mut HashMap<u32, R>,
    limit: u64,
    tid: impl Fn(&R) -> u32,
) {
    for row in rows.iter_mut() {
        if let Some(c) = carry.remove(&tid(row)) {
            row.add(&c);
        }
    }
    if !carry.is_empty() {
        rows.extend(carry.drain().map(|(_, r)| r));
        rows.sort_by_key(|r| tid(r));
    }
    for row in rows.iter_mut() {
        if let Some(rest) = row.split_above(limit) {
            carry.insert(tid(row), rest);
        }
    }
}

/// `part` of `whole` scaled to `new_whole` (rounded down), for a part that
/// must stay within its whole.
fn scaled(part: u64, whole: u64, new_whole: u64) -> u64 {
    if whole == 0 {
        return 0;
    }
    (u128::from(part) * u128::from(new_whole) / u128::from(whole)) as u64
}

impl Timed for ThreadSlice {
    fn add(&mut self, carried: &Self) {
        self.oncpu_ns = self.oncpu_ns.saturating_add(carried.oncpu_ns);
    }

    fn split_above(&mut self, limit: u64) -> Option<Self> {
        let rest = self.oncpu_ns.checked_sub(limit).filter(|r| *r > 0)?;
        self.oncpu_ns = limit;
        Some(ThreadSlice {
            tid: self.tid,
            tgid: self.tgid,
            comm: self.comm.clone(),
            oncpu_ns: rest,
            ..ThreadSlice::default()
        })
    }
}

impl Timed for ThreadSyscallSlice {
    fn add(&mut self, carried: &Self) {
        self.futex_wait_ns = self.futex_wait_ns.saturating_add(carried.futex_wait_ns);
        self.futex_wait_ns_in_checkpoint = self
            .futex_wait_ns_in_checkpoint
            .saturating_add(carried.futex_wait_ns_in_checkpoint);
    }

    fn split_above(&mut self, limit: u64) -> Option<Self> {
        let whole = self.futex_wait_ns;
        let rest = whole.checked_sub(limit).filter(|r| *r > 0)?;
        let inside = scaled(self.futex_wait_ns_in_checkpoint, whole, limit);
        let rest_inside = self.futex_wait_ns_in_checkpoint - inside;
        self.futex_wait_ns = limit;
        self.futex_wait_ns_in_checkpoint = inside;
        Some(ThreadSyscallSlice {
            tid: self.tid,
            tgid: self.tgid,
            futex_wait_ns: rest,
            futex_wait_ns_in_checkpoint: rest_inside,
            ..ThreadSyscallSlice::default()
        })
    }
}

/// The time of `w` above `limit` as a time-only split (outside and inside
/// in proportion), `w` keeping `limit`; `None` within it.
fn split_window(w: &mut WindowSplit, limit: u64) -> Option<WindowSplit> {
    let whole = w.ns();
    whole.checked_sub(limit).filter(|r| *r > 0)?;
    let inside = scaled(w.inside_ns, whole, limit);
    let outside = limit - inside;
    let rest = WindowSplit {
        outside_ns: w.outside_ns - outside.min(w.outside_ns),
        inside_ns: w.inside_ns - inside,
        ..WindowSplit::default()
    };
    w.inside_ns = inside;
    w.outside_ns = outside.min(w.outside_ns);
    Some(rest)
}

fn add_window(w: &mut WindowSplit, carried: &WindowSplit) {
    w.outside_ns = w.outside_ns.saturating_add(carried.outside_ns);
    w.inside_ns = w.inside_ns.saturating_add(carried.inside_ns);
}

impl Timed for ThreadContentionSlice {
    fn add(&mut self, carried: &Self) {
        add_window(&mut self.lock, &carried.lock);
        add_window(&mut self.dstate, &carried.dstate);
    }

    fn split_above(&mut self, limit: u64) -> Option<Self> {
        let lock = split_window(&mut self.lock, limit);
        let dstate = split_window(&mut self.dstate, limit);
        if lock.is_none() && dstate.is_none() {
            return None;
        }
        Some(ThreadContentionSlice {
            tid: self.tid,
            tgid: self.tgid,
            comm: self.comm.clone(),
            lock: lock.unwrap_or_default(),
            dstate: dstate.unwrap_or_default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::family::sched::section::SchedSlice;
    use crate::family::syscalls::section::SyscallsSlice;

    const MS: u64 = 1_000_000;

    fn futex_slice(duration_ms: u64, rows: &[(u32, u64, u64)]) -> Slice {
        Slice {
            duration_ms,
            syscalls: Some(SyscallsSlice {
                threads: rows
                    .iter()
                    .map(|&(tid, ns, inside)| ThreadSyscallSlice {
                        tid,
                        tgid: 1,
                        futex_waits: 3,
                        futex_wait_ns: ns,
                        futex_wait_ns_in_checkpoint: inside,
                        ..ThreadSyscallSlice::default()
                    })
                    .collect(),
                ..SyscallsSlice::default()
            }),
            ..Slice::default()
        }
    }

    fn futex_of(s: &Slice) -> Vec<(u32, u64, u64, u64)> {
        s.syscalls
            .as_ref()
            .unwrap()
            .threads
            .iter()
            .map(|t| {
                (
                    t.tid,
                    t.futex_wait_ns,
                    t.futex_wait_ns_in_checkpoint,
                    t.futex_waits,
                )
            })
            .collect()
    }

    #[test]
    fn time_beyond_a_slice_moves_to_the_next_and_the_total_stays() {
        // The case seen under load: 1056 ms of futex wait read for a
        // 1030 ms slice, then 937 ms for the next one of 1000 ms.
        let mut carry = Carry::default();
        let mut a = futex_slice(1030, &[(7, 1056 * MS, 528 * MS), (8, 10 * MS, 0)]);
        carry.fit(&mut a, false);
        assert_eq!(
            futex_of(&a),
            vec![(7, 1030 * MS, 515 * MS, 3), (8, 10 * MS, 0, 3)]
        );
        assert_eq!(carry.len(), 1);
        let mut b = futex_slice(1000, &[(7, 937 * MS, 0)]);
        carry.fit(&mut b, false);
        // The 26 ms carried: counts stay where the kernel counted them.
        assert_eq!(futex_of(&b), vec![(7, 963 * MS, 13 * MS, 3)]);
        assert!(carry.is_empty());
    }

    #[test]
    fn a_carry_for_a_thread_without_a_row_makes_one_and_the_last_slice_takes_all() {
        let mut carry = Carry::default();
        let mut a = futex_slice(1000, &[(5, 1200 * MS, 0)]);
        carry.fit(&mut a, false);
        let mut b = futex_slice(1000, &[(4, 5 * MS, 0)]);
        carry.fit(&mut b, false);
        assert_eq!(futex_of(&b), vec![(4, 5 * MS, 0, 3), (5, 200 * MS, 0, 0)]);
        // The last slice is not cut: 1500 ms in a 1000 ms last slice stays.
        let mut c = futex_slice(1000, &[(5, 1300 * MS, 0)]);
        carry.fit(&mut c, false);
        let mut d = futex_slice(400, &[]);
        carry.fit(&mut d, true);
        assert_eq!(futex_of(&d), vec![(5, 300 * MS, 0, 0)]);
        assert!(carry.is_empty());
    }

    #[test]
    fn on_cpu_and_contention_times_are_fitted_too() {
        let mut carry = Carry::default();
        let mut s = Slice {
            duration_ms: 1000,
            sched: Some(SchedSlice {
                threads: vec![ThreadSlice {
                    tid: 3,
                    oncpu_ns: 1010 * MS,
                    involuntary: 2,
                    ..ThreadSlice::default()
                }],
                ..SchedSlice::default()
            }),
            contention: Some(crate::recording::ContentionSlice {
                threads: vec![ThreadContentionSlice {
                    tid: 3,
                    dstate: WindowSplit {
                        outside: 1,
                        outside_ns: 600 * MS,
                        inside: 1,
                        inside_ns: 600 * MS,
                    },
                    ..ThreadContentionSlice::default()
                }],
                ..Default::default()
            }),
            ..Slice::default()
        };
        carry.fit(&mut s, false);
        let t = &s.sched.as_ref().unwrap().threads[0];
        assert_eq!((t.oncpu_ns, t.involuntary), (1000 * MS, 2));
        let d = s.contention.as_ref().unwrap().threads[0].dstate;
        assert_eq!((d.outside_ns, d.inside_ns), (500 * MS, 500 * MS));
        assert_eq!((d.outside, d.inside), (1, 1));
        let mut next = Slice {
            duration_ms: 1000,
            ..Slice::default()
        };
        next.sched = Some(SchedSlice::default());
        next.contention = Some(Default::default());
        carry.fit(&mut next, true);
        assert_eq!(next.sched.as_ref().unwrap().threads[0].oncpu_ns, 10 * MS);
        let d = next.contention.as_ref().unwrap().threads[0].dstate;
        assert_eq!(
            (d.outside_ns, d.inside_ns, d.count()),
            (100 * MS, 100 * MS, 0)
        );
    }
}
