//! D-state sleeps and kernel lock waits split over the slices they overlap:
//! the contention family's use of [`crate::probes::credit`].
//!
//! The kernel adds a sleep's length when the thread is switched back in,
//! and a lock wait's at `contention_end`; its in-flight maps (`CONT_OFFCPU`,
//! `CONT_LOCK_INFLIGHT`) hold the start of each one in progress. At every
//! cut those are credited up to the cut, to the thread and to the stack or
//! lock kind they are booked under, and given back once the thread's totals
//! name them (`last_dstate_start_ns`, `last_lock_start_ns`). A thread's rows
//! are then exact per slice. The stack and kind totals are other maps, read
//! just after the thread totals: a wait that ends between those reads (a
//! fraction of a millisecond) has its credited part taken back one slice
//! early or late there.
//!
//! A mutex waiter that spins again after a wakeup ends its wait as
//! `mutex-spin` though it was credited as `mutex`: what is not found under
//! the credited kind is taken back from the same kind with the other spin bit.

use std::collections::HashMap;

use mdiag_common::contention::{
    INSIDE, LCB_F_SPIN, LOCK_FLAGS_MASK, LockInflight, OffCpu, ThreadContention,
};

use super::section::{ThreadContentionSlice, WindowSplit};
use super::slice::{Delta, kernel_comm};
use crate::kit::probe::credit::{Change, Credit, Cut, Open, adjusted, uncounted};

/// What a D-state sleep is booked under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SleepKey {
    /// [`OUTSIDE`](mdiag_common::contention::OUTSIDE) or [`INSIDE`].
    pub window: u32,
    pub stack_id: u32,
}

/// What a kernel lock wait is booked under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockKey {
    pub window: u32,
    /// `LCB_F_*` when read (the lock kind).
    pub flags: u32,
}

/// The waits in flight at one read of the kernel's in-flight maps (before
/// the counters); thread groups are 0 until [`InFlight::uncounted`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InFlight {
    pub sleeps: Vec<Open<SleepKey>>,
    pub locks: Vec<Open<LockKey>>,
}

impl InFlight {
    pub fn from_maps(
        sleeps: impl Iterator<Item = (u32, OffCpu)>,
        locks: impl Iterator<Item = (u32, LockInflight)>,
    ) -> Self {
        Self {
            sleeps: sleeps
                .map(|(tid, s)| Open {
                    tid,
                    tgid: 0,
                    start_ns: s.ts_ns,
                    key: SleepKey {
                        window: s.window & 1,
                        stack_id: s.stack_id,
                    },
                })
                .collect(),
            locks: locks
                .map(|(tid, l)| Open {
                    tid,
                    tgid: 0,
                    start_ns: l.ts_ns,
                    key: LockKey {
                        window: l.window & 1,
                        flags: l.flags & LOCK_FLAGS_MASK,
                    },
                })
                .collect(),
        }
    }

    /// The waits the counters `threads` (read after `self`) do not hold
    /// yet, the only ones ever credited, with their thread groups from
    /// `tgid_of` (a wait whose thread is gone, `None`, is left out).
    pub fn uncounted(
        self,
        threads: &HashMap<u32, ThreadContention>,
        tgid_of: impl Fn(u32) -> Option<u32>,
    ) -> Self {
        Self {
            sleeps: uncounted(self.sleeps, |tid| last_sleep(threads, tid), &tgid_of),
            locks: uncounted(self.locks, |tid| last_lock(threads, tid), &tgid_of),
        }
    }
}

fn last_sleep(threads: &HashMap<u32, ThreadContention>, tid: u32) -> u64 {
    threads.get(&tid).map_or(0, |t| t.last_dstate_start_ns)
}

fn last_lock(threads: &HashMap<u32, ThreadContention>, tid: u32) -> u64 {
    threads.get(&tid).map_or(0, |t| t.last_lock_start_ns)
}

/// The kernel's state at one cut: in flight when first read, the instant
/// after that read, the counters' per-thread totals read after it.
#[derive(Debug, Clone, Copy)]
pub struct ContentionCut<'a> {
    pub open: &'a InFlight,
    pub at_ns: u64,
    pub threads: &'a HashMap<u32, ThreadContention>,
}

impl<'a> ContentionCut<'a> {
    fn sleeps(&self) -> Cut<'a, SleepKey> {
        Cut {
            open: &self.open.sleeps,
            at_ns: self.at_ns,
        }
    }

    fn locks(&self) -> Cut<'a, LockKey> {
        Cut {
            open: &self.open.locks,
            at_ns: self.at_ns,
        }
    }
}

/// D-state sleeps and lock waits credited to earlier slices.
#[derive(Debug, Default)]
pub struct WaitCredit {
    sleeps: Credit<SleepKey>,
    locks: Credit<LockKey>,
}

impl WaitCredit {
    /// Starts the count at the recording's start (see [`Credit::begin`]).
    pub fn begin(&mut self, cut: ContentionCut<'_>) {
        self.sleeps
            .begin(cut.sleeps(), |tid| last_sleep(cut.threads, tid));
        self.locks
            .begin(cut.locks(), |tid| last_lock(cut.threads, tid));
    }

    /// Adjusts `delta` (the counters' differences up to this cut).
    pub fn apply(&mut self, delta: &mut Delta, cut: ContentionCut<'_>) {
        self.sleeps.apply(
            cut.sleeps(),
            |tid| last_sleep(cut.threads, tid),
            |c| {
                let row = thread_row(delta, &c, cut.threads);
                book(&mut row.dstate, c.key.window, c.add, c.back);
                let stack = delta.stacks.entry(c.key.stack_id).or_default();
                book(stack, c.key.window, c.add, c.back);
            },
        );
        self.locks.apply(
            cut.locks(),
            |tid| last_lock(cut.threads, tid),
            |c| {
                let row = thread_row(delta, &c, cut.threads);
                book(&mut row.lock, c.key.window, c.add, c.back);
                let mut back = c.back;
                for flags in [c.key.flags, c.key.flags ^ LCB_F_SPIN] {
                    let kind = delta.lock_kinds.entry(flags).or_default();
                    let ns = window_ns(kind, c.key.window);
                    let taken = back.min(*ns);
                    *ns = adjusted(*ns, c.add, taken);
                    back -= taken;
                    if c.add > 0 || back == 0 {
                        break;
                    }
                }
            },
        );
    }

    /// Waits credited and not yet given back.
    pub fn len(&self) -> usize {
        self.sleeps.len() + self.locks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets threads that exited.
    pub fn retain_threads(&mut self, alive: impl Fn(u32) -> bool) {
        self.sleeps.retain_threads(&alive);
        self.locks.retain_threads(&alive);
    }
}

/// The thread's row in `delta`, created (named from the kernel's copy) if
/// it had nothing else in the slice.
fn thread_row<'d, K>(
    delta: &'d mut Delta,
    c: &Change<K>,
    threads: &HashMap<u32, ThreadContention>,
) -> &'d mut ThreadContentionSlice {
    delta
        .threads
        .entry(c.tid)
        .or_insert_with(|| ThreadContentionSlice {
            tid: c.tid,
            tgid: c.tgid,
            comm: threads.get(&c.tid).map(kernel_comm).unwrap_or_default(),
            ..ThreadContentionSlice::default()
        })
}

fn window_ns(w: &mut WindowSplit, window: u32) -> &mut u64 {
    if window == INSIDE as u32 {
        &mut w.inside_ns
    } else {
        &mut w.outside_ns
    }
}

/// Adds `add` ns to, or takes `back` ns from, `window`'s time in `w`.
fn book(w: &mut WindowSplit, window: u32, add: u64, back: u64) {
    let ns = window_ns(w, window);
    *ns = adjusted(*ns, add, back);
}

#[cfg(test)]
mod tests {
    use super::super::slice::finish;
    use super::*;
    use mdiag_common::contention::LCB_F_MUTEX;

    const S: u64 = 1_000_000_000;

    /// Thread `tid`'s totals naming its latest counted sleep and lock wait.
    fn totals(tid: u32, last_sleep: u64, last_lock: u64) -> HashMap<u32, ThreadContention> {
        HashMap::from([(
            tid,
            ThreadContention {
                tgid: 1,
                comm: *b"kworker\0\0\0\0\0\0\0\0\0",
                last_dstate_start_ns: last_sleep,
                last_lock_start_ns: last_lock,
                ..ThreadContention::default()
            },
        )])
    }

    fn sleeping(tid: u32, start_ns: u64) -> InFlight {
        InFlight {
            sleeps: vec![Open {
                tid,
                tgid: 1,
                start_ns,
                key: SleepKey {
                    window: 0,
                    stack_id: 9,
                },
            }],
            locks: Vec::new(),
        }
    }

    fn locked(tid: u32, start_ns: u64, flags: u32) -> InFlight {
        InFlight {
            sleeps: Vec::new(),
            locks: vec![Open {
                tid,
                tgid: 1,
                start_ns,
                key: LockKey {
                    window: INSIDE as u32,
                    flags,
                },
            }],
        }
    }

    fn cut<'a>(
        open: &'a InFlight,
        at_ns: u64,
        threads: &'a HashMap<u32, ThreadContention>,
    ) -> ContentionCut<'a> {
        ContentionCut {
            open,
            at_ns,
            threads,
        }
    }

    fn outside(n: u64, ns: u64) -> WindowSplit {
        WindowSplit {
            outside: n,
            outside_ns: ns,
            ..WindowSplit::default()
        }
    }

    fn inside(n: u64, ns: u64) -> WindowSplit {
        WindowSplit {
            inside: n,
            inside_ns: ns,
            ..WindowSplit::default()
        }
    }

    #[test]
    fn a_long_dstate_sleep_is_spread_over_the_slices_for_its_thread_and_stack() {
        // Asleep from 0.5 s to 3.2 s, cuts every second: the kernel adds
        // the whole 2.7 s when the thread is switched back in.
        let mut c = WaitCredit::default();
        let w = sleeping(7, S / 2);
        let t = totals(7, 0, 0);
        let mut slices = Vec::new();
        for k in 1..=3 {
            let mut d = Delta::default();
            c.apply(&mut d, cut(&w, k * S, &t));
            slices.push(finish(d));
        }
        let mut d = Delta::default();
        d.threads.insert(
            7,
            ThreadContentionSlice {
                tid: 7,
                tgid: 1,
                comm: "kworker".into(),
                dstate: outside(1, 2_700_000_000),
                ..ThreadContentionSlice::default()
            },
        );
        d.stacks.insert(9, outside(1, 2_700_000_000));
        let t = totals(7, S / 2, 0);
        c.apply(&mut d, cut(&InFlight::default(), 4 * S, &t));
        slices.push(finish(d));
        let thread: Vec<WindowSplit> = slices.iter().map(|s| s.threads[0].dstate).collect();
        let stack: Vec<WindowSplit> = slices.iter().map(|s| s.dstate_stacks[0].sleeps).collect();
        let want = vec![
            outside(0, S / 2),
            outside(0, S),
            outside(0, S),
            outside(1, 200_000_000),
        ];
        assert_eq!(thread, want);
        assert_eq!(stack, want);
        // Rows made for the credit carry the kernel's name of the thread.
        assert_eq!(slices[0].threads[0].comm, "kworker");
        assert!(slices.iter().all(|s| s.threads[0].lock.is_zero()));
        assert!(c.is_empty());
    }

    #[test]
    fn a_mutex_wait_that_ends_spinning_is_taken_back_from_the_spinning_kind() {
        // Waiting on a mutex since 0.1 s (inside a checkpoint window); ends
        // at 1.5 s after spinning again, so the kernel books it as mutex-spin.
        let mut c = WaitCredit::default();
        let w = locked(3, S / 10, LCB_F_MUTEX);
        let t = totals(3, 0, 0);
        let mut d = Delta::default();
        c.apply(&mut d, cut(&w, S, &t));
        let first = finish(d);
        assert_eq!(first.threads[0].lock, inside(0, 9 * S / 10));
        assert_eq!(first.lock_kinds.len(), 1);
        assert_eq!(
            (first.lock_kinds[0].kind.as_str(), first.lock_kinds[0].waits),
            ("mutex", inside(0, 9 * S / 10))
        );
        let spin = LCB_F_MUTEX | LCB_F_SPIN;
        let mut d = Delta::default();
        d.threads.insert(
            3,
            ThreadContentionSlice {
                tid: 3,
                tgid: 1,
                lock: inside(1, 1_400_000_000),
                ..ThreadContentionSlice::default()
            },
        );
        d.lock_kinds.insert(spin, inside(1, 1_400_000_000));
        let t = totals(3, 0, S / 10);
        c.apply(&mut d, cut(&InFlight::default(), 2 * S, &t));
        let second = finish(d);
        assert_eq!(second.threads[0].lock, inside(1, S / 2));
        assert_eq!(second.lock_kinds.len(), 1, "{:?}", second.lock_kinds);
        assert_eq!(
            (
                second.lock_kinds[0].kind.as_str(),
                second.lock_kinds[0].waits
            ),
            ("mutex-spin", inside(1, S / 2))
        );
        assert!(c.is_empty());
    }

    #[test]
    fn only_waits_the_counters_do_not_hold_yet_are_kept_with_their_group() {
        let mut open = sleeping(7, 100);
        open.sleeps.push(Open {
            tid: 8,
            tgid: 0,
            start_ns: 200,
            key: SleepKey {
                window: 0,
                stack_id: 1,
            },
        });
        open.sleeps[0].tgid = 0;
        // Thread 7's sleep is counted already; thread 8 has no totals yet.
        let t = totals(7, 100, 0);
        let kept = open.clone().uncounted(&t, |tid| Some(tid + 1000));
        let tgids: Vec<(u32, u32)> = kept.sleeps.iter().map(|w| (w.tid, w.tgid)).collect();
        assert_eq!(tgids, vec![(8, 1008)]);
        // A thread that is gone is left out.
        assert!(open.uncounted(&t, |_| None).sleeps.is_empty());
    }

    #[test]
    fn in_flight_entries_are_read_with_their_window_and_kind() {
        let f = InFlight::from_maps(
            [(
                5,
                OffCpu {
                    ts_ns: 10,
                    stack_id: 4,
                    window: 1,
                },
            )]
            .into_iter(),
            [(
                6,
                LockInflight {
                    lock: 0xffff,
                    ts_ns: 20,
                    flags: LCB_F_MUTEX | 0x100,
                    window: 0,
                },
            )]
            .into_iter(),
        );
        assert_eq!(
            (f.sleeps[0].tid, f.sleeps[0].start_ns, f.sleeps[0].key),
            (
                5,
                10,
                SleepKey {
                    window: 1,
                    stack_id: 4
                }
            )
        );
        assert_eq!(f.locks[0].key.flags, LCB_F_MUTEX);
    }
}
