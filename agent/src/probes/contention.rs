//! Contention family, user side: per-thread kernel lock waits and D-state
//! sleeps, lock kinds and D-state kernel stacks, each split by checkpoint
//! window, turned into one [`ContentionSlice`] per second.
//!
//! As for the other families the kernel counters are cumulative and a slice
//! is the difference of two snapshots. Kernel stacks are symbolized once per
//! stack id with /proc/kallsyms (ids are stable: the stack map is never
//! cleared while recording) and kept for the recording's `kernel_stacks`.

use std::collections::{BTreeMap, HashMap};

use aya::{
    Ebpf,
    maps::{HashMap as BpfHashMap, MapData, PerCpuArray, PerCpuHashMap, StackTraceMap},
};
use mdiag_common::contention::{
    ContentionDrops, D_STACK_NONE, DStackKey, DStackStats, LOCK_KINDS, LockKindStats, MAP_DROPS,
    MAP_DSTACKS, MAP_LOCK_KINDS, MAP_STACKS, MAP_THREADS, ThreadContention, lock_kind_name,
};

use super::delta;
use crate::kstack::{self, KernelSymbols};
use crate::recording::{
    ContentionDropsSlice, ContentionSlice, DStateStackSlice, KernelStack, LockKindSlice,
    TOP_STACKS_PER_SLICE, ThreadContentionSlice, WindowSplit,
};

/// Family name in the recording's `probes`.
pub const FAMILY: &str = "contention";

#[derive(Debug, thiserror::Error)]
pub enum ContentionError {
    #[error(transparent)]
    Take(#[from] super::TakeMapError),
    #[error("map {name}: {source}")]
    Map {
        name: &'static str,
        source: aya::maps::MapError,
    },
}

/// Cumulative counters at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContentionSnapshot {
    pub threads: HashMap<u32, ThreadContention>,
    /// Index = `LCB_F_*` flags, summed over CPUs.
    pub lock_kinds: Vec<LockKindStats>,
    /// Summed over CPUs.
    pub dstacks: HashMap<DStackKey, DStackStats>,
    pub drops: ContentionDrops,
}

pub struct ContentionReader {
    threads: BpfHashMap<MapData, u32, ThreadContention>,
    lock_kinds: PerCpuArray<MapData, LockKindStats>,
    dstacks: PerCpuHashMap<MapData, DStackKey, DStackStats>,
    stacks: StackTraceMap<MapData>,
    drops: PerCpuArray<MapData, ContentionDrops>,
    ksyms: Option<KernelSymbols>,
    /// Symbolized stacks referenced by a slice so far, by id.
    seen_stacks: BTreeMap<u32, KernelStack>,
    /// Current thread names from /proc, by tid (the kernel keeps the name a
    /// thread had at its first wait, often before it named itself).
    names: HashMap<u32, String>,
    last: ContentionSnapshot,
}

impl ContentionReader {
    pub(super) fn new(ebpf: &mut Ebpf) -> Result<Self, ContentionError> {
        let ksyms = KernelSymbols::load()
            .map_err(|e| tracing::warn!(family = FAMILY, "kernel stacks stay unsymbolized: {e}"))
            .ok();
        let mut reader = Self {
            threads: super::take_map(ebpf, MAP_THREADS)?,
            lock_kinds: super::take_map(ebpf, MAP_LOCK_KINDS)?,
            dstacks: super::take_map(ebpf, MAP_DSTACKS)?,
            stacks: super::take_map(ebpf, MAP_STACKS)?,
            drops: super::take_map(ebpf, MAP_DROPS)?,
            ksyms,
            seen_stacks: BTreeMap::new(),
            names: HashMap::new(),
            last: ContentionSnapshot::default(),
        };
        reader.last = reader.snapshot()?;
        Ok(reader)
    }

    pub fn snapshot(&self) -> Result<ContentionSnapshot, ContentionError> {
        let map_err = |name| move |source| ContentionError::Map { name, source };
        let threads = self.threads.iter().flatten().collect();
        let mut lock_kinds = Vec::with_capacity(LOCK_KINDS as usize);
        for kind in 0..LOCK_KINDS {
            let per_cpu = self
                .lock_kinds
                .get(&kind, 0)
                .map_err(map_err(MAP_LOCK_KINDS))?;
            lock_kinds.push(
                per_cpu
                    .iter()
                    .fold(LockKindStats::default(), |a, b| LockKindStats {
                        waits: [a.waits[0] + b.waits[0], a.waits[1] + b.waits[1]],
                        wait_ns: [a.wait_ns[0] + b.wait_ns[0], a.wait_ns[1] + b.wait_ns[1]],
                    }),
            );
        }
        let dstacks = self
            .dstacks
            .iter()
            .flatten()
            .map(|(k, per_cpu)| {
                let sum = per_cpu
                    .iter()
                    .fold(DStackStats::default(), |a, b| DStackStats {
                        sleeps: a.sleeps + b.sleeps,
                        ns: a.ns + b.ns,
                    });
                (k, sum)
            })
            .collect();
        let per_cpu = self.drops.get(&0, 0).map_err(map_err(MAP_DROPS))?;
        let drops = per_cpu
            .iter()
            .fold(ContentionDrops::default(), |a, b| ContentionDrops {
                inflight_full: a.inflight_full + b.inflight_full,
                thread_map_full: a.thread_map_full + b.thread_map_full,
                stack_failed: a.stack_failed + b.stack_failed,
                dstack_map_full: a.dstack_map_full + b.dstack_map_full,
                nested: a.nested + b.nested,
            });
        Ok(ContentionSnapshot {
            threads,
            lock_kinds,
            dstacks,
            drops,
        })
    }

    /// Starts the slices now: what was counted before is left out of the
    /// first slice (the recording's clock starts here).
    pub fn rebase(&mut self) -> Result<(), ContentionError> {
        self.last = self.snapshot()?;
        Ok(())
    }

    /// The slice since the previous call; symbolizes the stacks it names.
    pub fn next_slice(&mut self) -> Result<ContentionSlice, ContentionError> {
        let now = self.snapshot()?;
        let mut slice = slice_between(&self.last, &now);
        for t in &mut slice.threads {
            let name = self
                .names
                .entry(t.tid)
                .or_insert_with(|| current_name(t.tgid, t.tid).unwrap_or_default());
            if !name.is_empty() {
                t.comm.clone_from(name);
            }
        }
        for s in &slice.dstate_stacks {
            if !self.seen_stacks.contains_key(&s.stack_id) {
                let stack = self.symbolize(s.stack_id);
                self.seen_stacks.insert(s.stack_id, stack);
            }
        }
        self.last = now;
        self.prune_exited();
        Ok(slice)
    }

    /// Totals since attach, as one slice (for tests and checks).
    pub fn totals_since_attach(&self) -> Result<ContentionSlice, ContentionError> {
        Ok(slice_between(
            &ContentionSnapshot::default(),
            &self.snapshot()?,
        ))
    }

    /// Every stack referenced by a slice so far, by id.
    pub fn kernel_stacks(&self) -> Vec<KernelStack> {
        self.seen_stacks.values().cloned().collect()
    }

    fn symbolize(&self, stack_id: u32) -> KernelStack {
        let frames: Vec<String> = match self.stacks.get(&stack_id, 0) {
            Ok(trace) => trace
                .frames()
                .iter()
                .map(|f| match &self.ksyms {
                    Some(k) => k.frame(f.ip),
                    None => format!("{:#x}", f.ip),
                })
                .collect(),
            Err(e) => {
                tracing::debug!(family = FAMILY, stack_id, "stack not readable: {e}");
                Vec::new()
            }
        };
        KernelStack {
            stack_id,
            signature: kstack::signature(&frames),
            frames,
        }
    }

    fn prune_exited(&mut self) {
        let gone: Vec<u32> = self
            .last
            .threads
            .iter()
            .filter(|(tid, t)| !delta::thread_alive(t.tgid, **tid))
            .map(|(tid, _)| *tid)
            .collect();
        for tid in gone {
            let _ = self.threads.remove(&tid);
            self.last.threads.remove(&tid);
            self.names.remove(&tid);
        }
    }
}

/// The thread's name now (`/proc/TGID/task/TID/comm`), `None` once it exited.
fn current_name(tgid: u32, tid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{tgid}/task/{tid}/comm"))
        .ok()
        .map(|s| s.trim_end_matches('\n').to_owned())
}

fn split(count: [u64; 2], ns: [u64; 2]) -> WindowSplit {
    WindowSplit::from_arrays(count, ns)
}

/// What changed between two snapshots. Pure, so testable.
pub fn slice_between(before: &ContentionSnapshot, after: &ContentionSnapshot) -> ContentionSlice {
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
            let comm_len = a.comm.iter().position(|&c| c == 0).unwrap_or(a.comm.len());
            (!lock.is_zero() || !dstate.is_zero()).then(|| ThreadContentionSlice {
                tid,
                tgid: a.tgid,
                comm: String::from_utf8_lossy(&a.comm[..comm_len]).into_owned(),
                lock,
                dstate,
            })
        },
    )
    .into_iter()
    .map(|(_, t)| t)
    .collect();

    let zero = LockKindStats::default();
    let lock_kinds = after
        .lock_kinds
        .iter()
        .enumerate()
        .filter_map(|(flags, a)| {
            let b = before.lock_kinds.get(flags).unwrap_or(&zero);
            let waits = split(a.waits, a.wait_ns).since(&split(b.waits, b.wait_ns));
            let flags = flags as u32;
            (!waits.is_zero()).then(|| LockKindSlice {
                kind: lock_kind_name(flags).to_owned(),
                flags,
                waits,
            })
        })
        .collect();

    // Per stack id: both windows together.
    let mut by_stack: BTreeMap<u32, WindowSplit> = BTreeMap::new();
    for (key, a) in &after.dstacks {
        let b = before.dstacks.get(key).copied().unwrap_or_default();
        let (n, ns) = (a.sleeps.saturating_sub(b.sleeps), a.ns.saturating_sub(b.ns));
        if n == 0 && ns == 0 {
            continue;
        }
        let e = by_stack.entry(key.stack_id).or_default();
        if key.window == 0 {
            e.outside += n;
            e.outside_ns += ns;
        } else {
            e.inside += n;
            e.inside_ns += ns;
        }
    }
    let mut other_stacks = by_stack.remove(&D_STACK_NONE).unwrap_or_default();
    let mut stacks: Vec<DStateStackSlice> = by_stack
        .into_iter()
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

    let d = |a: u64, b: u64| a.saturating_sub(b);
    ContentionSlice {
        threads,
        lock_kinds,
        dstate_stacks: stacks,
        other_stacks,
        drops: ContentionDropsSlice {
            inflight_full: d(after.drops.inflight_full, before.drops.inflight_full),
            thread_map_full: d(after.drops.thread_map_full, before.drops.thread_map_full),
            stack_failed: d(after.drops.stack_failed, before.drops.stack_failed),
            dstack_map_full: d(after.drops.dstack_map_full, before.drops.dstack_map_full),
            nested: d(after.drops.nested, before.drops.nested),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mdiag_common::contention::{LCB_F_MUTEX, LCB_F_WRITE};

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
