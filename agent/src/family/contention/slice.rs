//! Contention slices from two snapshots of the kernel's cumulative
//! counters: their differences per thread, lock kind and kernel stack
//! ([`Delta`], which the credit of waits in flight adjusts), then cut to
//! the recorded shape ([`finish`]: threads and kinds with something in the
//! slice, the top stacks and the rest summed). Pure, so testable.

use std::collections::BTreeMap;

use mdiag_common::contention::{D_STACK_NONE, LockKindStats, ThreadContention, lock_kind_name};

use super::probe::ContentionSnapshot;
use super::section::{
    ContentionDropsSlice, ContentionSlice, DStateStackSlice, LockKindSlice, TOP_STACKS_PER_SLICE,
    ThreadContentionSlice, WindowSplit,
};
use crate::kit::probe::delta;

/// What changed between two snapshots, every row kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Delta {
    /// By thread id.
    pub threads: BTreeMap<u32, ThreadContentionSlice>,
    /// Lock waits by the kernel's `LCB_F_*` flags.
    pub lock_kinds: BTreeMap<u32, WindowSplit>,
    /// D-state sleeps by stack id, [`D_STACK_NONE`] included.
    pub stacks: BTreeMap<u32, WindowSplit>,
    pub drops: ContentionDropsSlice,
}

fn split(count: [u64; 2], ns: [u64; 2]) -> WindowSplit {
    WindowSplit::from_arrays(count, ns)
}

/// The thread's name in the kernel's copy (its name at its first wait).
pub fn kernel_comm(t: &ThreadContention) -> String {
    let len = t.comm.iter().position(|&c| c == 0).unwrap_or(t.comm.len());
    String::from_utf8_lossy(&t.comm[..len]).into_owned()
}

/// The counters' differences between two snapshots.
pub fn delta_between(before: &ContentionSnapshot, after: &ContentionSnapshot) -> Delta {
    let threads = delta::per_thread(
        &before.threads,
        &after.threads,
        &ThreadContention::default(),
        |t| t.tgid,
        |tid, a, b| {
            let lock =
                split(a.lock_waits, a.lock_wait_ns).since(&split(b.lock_waits, b.lock_wait_ns));
            let dstate =
                split(a.dstate_sleeps, a.dstate_ns).since(&split(b.dstate_sleeps, b.dstate_ns));
            (!lock.is_zero() || !dstate.is_zero()).then(|| ThreadContentionSlice {
                tid,
                tgid: a.tgid,
                comm: kernel_comm(a),
                lock,
                dstate,
            })
        },
    )
    .into_iter()
    .collect();

    let zero = LockKindStats::default();
    let lock_kinds = after
        .lock_kinds
        .iter()
        .enumerate()
        .filter_map(|(flags, a)| {
            let b = before.lock_kinds.get(flags).unwrap_or(&zero);
            let waits = split(a.waits, a.wait_ns).since(&split(b.waits, b.wait_ns));
            (!waits.is_zero()).then_some((flags as u32, waits))
        })
        .collect();

    // Per stack id: both windows together.
    let mut stacks: BTreeMap<u32, WindowSplit> = BTreeMap::new();
    for (key, a) in &after.dstacks {
        let b = before.dstacks.get(key).copied().unwrap_or_default();
        let (n, ns) = (a.sleeps.saturating_sub(b.sleeps), a.ns.saturating_sub(b.ns));
        if n == 0 && ns == 0 {
            continue;
        }
        let e = stacks.entry(key.stack_id).or_default();
        if key.window == 0 {
            e.outside += n;
            e.outside_ns += ns;
        } else {
            e.inside += n;
            e.inside_ns += ns;
        }
    }

    let d = |a: u64, b: u64| a.saturating_sub(b);
    Delta {
        threads,
        lock_kinds,
        stacks,
        drops: ContentionDropsSlice {
            inflight_full: d(after.drops.inflight_full, before.drops.inflight_full),
            thread_map_full: d(after.drops.thread_map_full, before.drops.thread_map_full),
            stack_failed: d(after.drops.stack_failed, before.drops.stack_failed),
            dstack_map_full: d(after.drops.dstack_map_full, before.drops.dstack_map_full),
            nested: d(after.drops.nested, before.drops.nested),
            wait_stack_lost: d(after.drops.wait_stack_lost, before.drops.wait_stack_lost),
            wait_inflight_full: d(after.drops.wait_inflight_full, before.drops.wait_inflight_full),
            wait_map_full: d(after.drops.wait_map_full, before.drops.wait_map_full),
        },
    }
}

/// The slice as recorded: threads and kinds with a wait or time in it, the
/// [`TOP_STACKS_PER_SLICE`] stacks with most time, the rest in `other_stacks`.
pub fn finish(delta: Delta) -> ContentionSlice {
    let threads = delta
        .threads
        .into_values()
        .filter(|t| !t.lock.is_zero() || !t.dstate.is_zero())
        .collect();
    let lock_kinds = delta
        .lock_kinds
        .into_iter()
        .filter(|(_, w)| !w.is_zero())
        .map(|(flags, waits)| LockKindSlice {
            kind: lock_kind_name(flags).to_owned(),
            flags,
            waits,
        })
        .collect();
    let mut by_stack = delta.stacks;
    let mut other_stacks = by_stack.remove(&D_STACK_NONE).unwrap_or_default();
    let mut stacks: Vec<DStateStackSlice> = by_stack
        .into_iter()
        .filter(|(_, w)| !w.is_zero())
        .map(|(stack_id, sleeps)| DStateStackSlice { stack_id, sleeps })
        .collect();
    stacks.sort_by(|a, b| {
        b.sleeps
            .ns()
            .cmp(&a.sleeps.ns())
            .then(a.stack_id.cmp(&b.stack_id))
    });
    for s in stacks.iter().skip(TOP_STACKS_PER_SLICE) {
        other_stacks.add(&s.sleeps);
    }
    stacks.truncate(TOP_STACKS_PER_SLICE);
    ContentionSlice {
        threads,
        lock_kinds,
        dstate_stacks: stacks,
        other_stacks,
        drops: delta.drops,
        wait_stack_defs: Vec::new(),
        waits: Vec::new(),
        wait_sample_every: 0,
    }
}

/// What changed between two snapshots, as recorded (no credit of waits in
/// flight: the kernel's totals of the waits that ended).
pub fn slice_between(before: &ContentionSnapshot, after: &ContentionSnapshot) -> ContentionSlice {
    finish(delta_between(before, after))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use mdiag_common::contention::{
        ContentionDrops, DStackKey, DStackStats, LCB_F_MUTEX, LCB_F_WRITE, LOCK_KINDS,
    };

    fn thread(tgid: u32, comm: &[u8], lock: [u64; 4], dstate: [u64; 4]) -> ThreadContention {
        let mut c = [0u8; 16];
        c[..comm.len()].copy_from_slice(comm);
        ThreadContention {
            tgid,
            _pad0: 0,
            comm: c,
            lock_waits: [lock[0], lock[2]],
            lock_wait_ns: [lock[1], lock[3]],
            dstate_sleeps: [dstate[0], dstate[2]],
            dstate_ns: [dstate[1], dstate[3]],
            ..ThreadContention::default()
        }
    }

    #[test]
    fn slices_are_differences_split_by_window() {
        let mut kinds_before = vec![LockKindStats::default(); LOCK_KINDS as usize];
        kinds_before[LCB_F_WRITE as usize] = LockKindStats {
            waits: [1, 0],
            wait_ns: [100, 0],
        };
        let mut kinds_after = kinds_before.clone();
        kinds_after[LCB_F_WRITE as usize] = LockKindStats {
            waits: [3, 2],
            wait_ns: [400, 1000],
        };
        kinds_after[LCB_F_MUTEX as usize] = LockKindStats {
            waits: [0, 1],
            wait_ns: [0, 50],
        };
        let key = |stack_id, window| DStackKey { stack_id, window };
        let before = ContentionSnapshot {
            threads: HashMap::from([
                (10, thread(7, b"conn1", [1, 100, 0, 0], [0; 4])),
                (11, thread(7, b"Checkpointer", [0; 4], [1, 5, 0, 0])),
            ]),
            lock_kinds: kinds_before,
            dstacks: HashMap::from([(key(3, 0), DStackStats { sleeps: 1, ns: 5 })]),
            drops: ContentionDrops::default(),
        };
        let after = ContentionSnapshot {
            threads: HashMap::from([
                (10, thread(7, b"conn1", [3, 400, 2, 1000], [0; 4])),
                (11, thread(7, b"Checkpointer", [0; 4], [1, 5, 0, 0])),
                (12, thread(7, b"conn2", [0, 0, 1, 50], [2, 20, 1, 30])),
            ]),
            lock_kinds: kinds_after,
            dstacks: HashMap::from([
                (key(3, 0), DStackStats { sleeps: 2, ns: 15 }),
                (key(3, 1), DStackStats { sleeps: 1, ns: 30 }),
                (key(D_STACK_NONE, 0), DStackStats { sleeps: 1, ns: 10 }),
            ]),
            drops: ContentionDrops {
                nested: 4,
                ..Default::default()
            },
        };
        let s = slice_between(&before, &after);
        // Thread 11 did nothing new: left out.
        assert_eq!(s.threads.len(), 2);
        assert_eq!(s.threads[0].tid, 10);
        assert_eq!(s.threads[0].comm, "conn1");
        assert_eq!(
            s.threads[0].lock,
            WindowSplit {
                outside: 2,
                outside_ns: 300,
                inside: 2,
                inside_ns: 1000
            }
        );
        assert_eq!(s.threads[1].dstate.count(), 3);
        assert_eq!(s.threads[1].dstate.inside_ns, 30);
        assert_eq!(s.lock_kinds.len(), 2);
        assert_eq!(s.lock_kinds[0].kind, "rwsem:W");
        assert_eq!(s.lock_kinds[0].waits.count(), 4);
        assert_eq!(s.lock_kinds[1].kind, "mutex");
        assert_eq!(s.dstate_stacks.len(), 1);
        assert_eq!(s.dstate_stacks[0].stack_id, 3);
        assert_eq!(
            (
                s.dstate_stacks[0].sleeps.outside_ns,
                s.dstate_stacks[0].sleeps.inside_ns
            ),
            (10, 30)
        );
        // Sleeps without a stack go to other_stacks.
        assert_eq!(s.other_stacks.outside_ns, 10);
        assert_eq!(s.drops.nested, 4);
    }

    #[test]
    fn only_the_top_stacks_are_listed_the_rest_summed() {
        let dstacks = (0..(TOP_STACKS_PER_SLICE as u32 + 3))
            .map(|id| {
                (
                    DStackKey {
                        stack_id: id,
                        window: 0,
                    },
                    DStackStats {
                        sleeps: 1,
                        ns: 100 + u64::from(id),
                    },
                )
            })
            .collect();
        let after = ContentionSnapshot {
            dstacks,
            ..Default::default()
        };
        let s = slice_between(&ContentionSnapshot::default(), &after);
        assert_eq!(s.dstate_stacks.len(), TOP_STACKS_PER_SLICE);
        // Most time first: the highest ids.
        assert_eq!(s.dstate_stacks[0].stack_id, TOP_STACKS_PER_SLICE as u32 + 2);
        assert_eq!(s.other_stacks.outside, 3);
        assert_eq!(s.other_stacks.outside_ns, 100 + 101 + 102);
    }
}
