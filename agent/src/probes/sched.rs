//! Scheduler family, user side: reads the cumulative kernel counters and turns
//! them into one [`SchedSlice`] per second.
//!
//! The kernel never resets anything: each read is a [`SchedSnapshot`] and a
//! slice is the difference of two snapshots, so a slow read never loses
//! events. Threads that have exited are removed from the kernel map after
//! their last slice, which keeps memory bounded over weeks of recording.

use std::collections::HashMap;

use aya::{
    Ebpf,
    maps::{HashMap as BpfHashMap, MapData, PerCpuArray},
};
use mdiag_common::{
    hist::LOG2_BUCKETS,
    sched::{MAP_CPU, MAP_THREADS, SchedCpu, ThreadSched},
};

use super::delta;
use crate::recording::{SchedDrops, SchedSlice, ThreadSlice};

/// Family name in the recording's `probes`.
pub const FAMILY: &str = "sched";

#[derive(Debug, thiserror::Error)]
pub enum SchedError {
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
pub struct SchedSnapshot {
    /// Index = CPU number.
    pub cpus: Vec<SchedCpu>,
    pub threads: HashMap<u32, ThreadSched>,
}

pub struct SchedReader {
    threads: BpfHashMap<MapData, u32, ThreadSched>,
    cpu: PerCpuArray<MapData, SchedCpu>,
    target_tgid: Option<u32>,
    last: SchedSnapshot,
}

impl SchedReader {
    pub(super) fn new(ebpf: &mut Ebpf, target_tgid: Option<u32>) -> Result<Self, SchedError> {
        let threads: BpfHashMap<MapData, u32, ThreadSched> = super::take_map(ebpf, MAP_THREADS)?;
        let cpu: PerCpuArray<MapData, SchedCpu> = super::take_map(ebpf, MAP_CPU)?;
        let mut reader = Self {
            threads,
            cpu,
            target_tgid,
            last: SchedSnapshot::default(),
        };
        reader.last = reader.snapshot()?;
        Ok(reader)
    }

    /// Reads every counter now.
    pub fn snapshot(&self) -> Result<SchedSnapshot, SchedError> {
        let cpus = self.cpu.get(&0, 0).map_err(|source| SchedError::Map {
            name: MAP_CPU,
            source,
        })?;
        let cpus: Vec<SchedCpu> = cpus.iter().copied().collect();
        let mut threads = HashMap::new();
        // An entry deleted between key iteration and lookup is simply skipped.
        for (tid, value) in self.threads.iter().flatten() {
            threads.insert(tid, value);
        }
        Ok(SchedSnapshot { cpus, threads })
    }

    /// Starts the slices now: what was counted before is left out of the
    /// first slice (the recording's clock starts here).
    pub fn rebase(&mut self) -> Result<(), SchedError> {
        self.last = self.snapshot()?;
        Ok(())
    }

    /// The slice since the previous call (or since attach).
    pub fn next_slice(&mut self) -> Result<SchedSlice, SchedError> {
        let now = self.snapshot()?;
        let slice = slice_between(&self.last, &now);
        self.last = now;
        self.prune_exited();
        Ok(slice)
    }

    /// Totals since attach, as one slice (for checks and tests).
    pub fn totals_since_attach(&self) -> Result<SchedSlice, SchedError> {
        Ok(slice_between(&SchedSnapshot::default(), &self.snapshot()?))
    }

    pub fn target_tgid(&self) -> Option<u32> {
        self.target_tgid
    }

    /// Forgets threads that no longer exist, in the kernel map and here.
    fn prune_exited(&mut self) {
        let gone: Vec<u32> = self
            .last
            .threads
            .iter()
            .filter(|(tid, t)| !delta::thread_alive(t.tgid, **tid))
            .map(|(tid, _)| *tid)
            .collect();
        for tid in gone {
            // The thread is gone: its last counts are in the slice just taken.
            let _ = self.threads.remove(&tid);
            self.last.threads.remove(&tid);
        }
    }
}

/// The counters that changed between two snapshots. Pure, so testable.
pub fn slice_between(before: &SchedSnapshot, after: &SchedSnapshot) -> SchedSlice {
    let zero = SchedCpu::default();
    let mut slice = SchedSlice::default();
    let mut hist = [0u64; LOG2_BUCKETS];
    let mut drops = SchedDrops::default();
    for (i, a) in after.cpus.iter().enumerate() {
        let b = before.cpus.get(i).unwrap_or(&zero);
        let switches = a.switches.saturating_sub(b.switches);
        slice.switches_per_cpu.push(switches);
        slice.switches_total += switches;
        slice.voluntary += a.voluntary.saturating_sub(b.voluntary);
        slice.involuntary += a.involuntary.saturating_sub(b.involuntary);
        slice.preempted += a.preempted.saturating_sub(b.preempted);
        slice.wakeups += a.wakeups.saturating_sub(b.wakeups);
        slice.wakeup_preemptions += a.wakeup_preemptions.saturating_sub(b.wakeup_preemptions);
        slice.migrations += a.migrations.saturating_sub(b.migrations);
        drops.thread_map_full += a
            .drop_thread_map_full
            .saturating_sub(b.drop_thread_map_full);
        drops.wakeup_map_full += a
            .drop_wakeup_map_full
            .saturating_sub(b.drop_wakeup_map_full);
        drops.read_failed += a.drop_read_failed.saturating_sub(b.drop_read_failed);
        for (h, (x, y)) in hist
            .iter_mut()
            .zip(a.runq_hist.iter().zip(b.runq_hist.iter()))
        {
            *h += x.saturating_sub(*y);
        }
    }
    let used = hist.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
    slice.runq_hist_log2_ns = hist[..used].to_vec();
    slice.drops = drops;

    let threads = delta::per_thread(
        &before.threads,
        &after.threads,
        &ThreadSched::default(),
        |t| t.tgid,
        |tid, a, b| {
            let t = ThreadSlice {
                tid,
                tgid: a.tgid,
                comm: String::from_utf8_lossy(a.comm_bytes()).into_owned(),
                voluntary: a.voluntary.saturating_sub(b.voluntary),
                involuntary: a.involuntary.saturating_sub(b.involuntary),
                preempted: a.preempted.saturating_sub(b.preempted),
                runq_delay_ns: a.runq_delay_ns.saturating_sub(b.runq_delay_ns),
                runq_delays: a.runq_delays.saturating_sub(b.runq_delays),
                oncpu_ns: a.oncpu_ns.saturating_sub(b.oncpu_ns),
                wakeup_preempted: a.wakeup_preempted.saturating_sub(b.wakeup_preempted),
                migrations: a.migrations.saturating_sub(b.migrations),
                wakeup_preempting: a.wakeup_preempting.saturating_sub(b.wakeup_preempting),
            };
            let active = t.voluntary
                + t.involuntary
                + t.runq_delays
                + t.oncpu_ns
                + t.migrations
                + t.wakeup_preempting
                > 0;
            active.then_some(t)
        },
    );
    let threads: Vec<ThreadSlice> = threads.into_iter().map(|(_, t)| t).collect();
    slice.threads = threads;
    slice
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(switches: u64, vol: u64, invol: u64, hist_bucket: usize, hist_count: u64) -> SchedCpu {
        let mut c = SchedCpu {
            switches,
            voluntary: vol,
            involuntary: invol,
            ..SchedCpu::default()
        };
        c.runq_hist[hist_bucket] = hist_count;
        c
    }

    fn thread(tgid: u32, vol: u64, invol: u64, comm: &[u8]) -> ThreadSched {
        let mut t = ThreadSched {
            tgid,
            voluntary: vol,
            involuntary: invol,
            ..ThreadSched::default()
        };
        t.comm[..comm.len()].copy_from_slice(comm);
        t
    }

    #[test]
    fn slice_is_the_difference_of_snapshots() {
        let before = SchedSnapshot {
            cpus: vec![cpu(100, 10, 5, 10, 2), cpu(50, 1, 1, 12, 0)],
            threads: HashMap::from([
                (7, thread(7, 3, 4, b"conn1")),
                (8, thread(7, 1, 1, b"idle")),
            ]),
        };
        let after = SchedSnapshot {
            cpus: vec![cpu(160, 12, 25, 10, 5), cpu(90, 1, 11, 12, 4)],
            threads: HashMap::from([
                (7, thread(7, 4, 30, b"conn1")),
                (8, thread(7, 1, 1, b"idle")), // unchanged: not in the slice
                (9, thread(7, 0, 6, b"new")),  // new thread: all of it
            ]),
        };
        let s = slice_between(&before, &after);
        assert_eq!(s.switches_total, 100);
        assert_eq!(s.switches_per_cpu, vec![60, 40]);
        assert_eq!(s.voluntary, 2);
        assert_eq!(s.involuntary, 30);
        assert_eq!(s.runq_hist_log2_ns.len(), 13);
        assert_eq!(s.runq_hist_log2_ns[10], 3);
        assert_eq!(s.runq_hist_log2_ns[12], 4);
        assert_eq!(s.threads.len(), 2);
        assert_eq!(
            (
                s.threads[0].tid,
                s.threads[0].involuntary,
                s.threads[0].voluntary
            ),
            (7, 26, 1)
        );
        assert_eq!(s.threads[0].comm, "conn1");
        assert_eq!((s.threads[1].tid, s.threads[1].involuntary), (9, 6));
    }

    #[test]
    fn reused_tid_of_another_process_counts_from_zero() {
        let before = SchedSnapshot {
            cpus: vec![],
            threads: HashMap::from([(7, thread(1, 100, 100, b"a"))]),
        };
        let after = SchedSnapshot {
            cpus: vec![],
            threads: HashMap::from([(7, thread(2, 3, 4, b"b"))]),
        };
        let s = slice_between(&before, &after);
        assert_eq!(
            (
                s.threads[0].voluntary,
                s.threads[0].involuntary,
                s.threads[0].tgid
            ),
            (3, 4, 2)
        );
    }

    #[test]
    fn empty_histogram_is_empty() {
        let s = slice_between(
            &SchedSnapshot::default(),
            &SchedSnapshot {
                cpus: vec![SchedCpu::default()],
                threads: HashMap::new(),
            },
        );
        assert!(s.runq_hist_log2_ns.is_empty());
        assert_eq!(s.switches_per_cpu, vec![0]);
    }
}
