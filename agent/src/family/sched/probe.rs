//! Scheduler family, user side: reads the cumulative kernel counters and turns
//! them into one [`SchedSlice`] per second.
//!
//! The kernel never resets anything: each read is a [`SchedSnapshot`] and a
//! slice is the difference of two snapshots, so a slow read never loses
//! events. Threads that have exited are removed from the kernel map after
//! their last slice, which keeps memory bounded over weeks of recording.
//!
//! On-CPU time is added by the kernel when a run ends (at the switch-out),
//! so a thread that runs for seconds without a context switch would have
//! all of it in one slice. The kernel also keeps, per CPU, which observed
//! thread runs there since when (`SCHED_RUNNING`), so at every cut the runs
//! in progress are credited up to the cut and the credit is taken back when
//! the run ends ([`crate::kit::probe::credit`]): `oncpu_ns` is the time on a CPU within
//! the slice. The per-CPU record, not the thread's own `last_in_ns`, says
//! what runs: it is rewritten at every switch on its CPU, so a switch-out
//! the probe did not see (measured: threads of a sandbox's init leave their
//! CPU without a visible `sched_switch`) cannot leave a run open forever.

use std::collections::HashMap;

use aya::{
    Ebpf,
    maps::{Array, HashMap as BpfHashMap, MapData, PerCpuArray},
};
use mdiag_common::{
    hist::LOG2_BUCKETS,
    sched::{
        self as sched_common, MAP_CPU, MAP_RUNNING, MAP_THREADS, Running, SchedCpu, ThreadSched,
    },
};

use super::section::{SchedDrops, SchedSlice, ThreadSlice};
use crate::kit::probe::{
    AttachContext, Counters, FamilyReader, ProbeStatus, ReadError, SectionReader, TakeMapError,
    credit::{self, Credit},
    delta::{self, ThreadValue},
    edit_per_cpu, monotonic_now_ns, read_per_cpu, reader_if, take_map,
};

/// `bpf_map_update_elem`'s flag: only an entry that exists.
const BPF_EXIST: u64 = 2;

/// Family name in the recording's `probes`.
pub const FAMILY: &str = crate::kit::family::Family::Sched.name();

/// Its `(program, BTF tracepoint)` pairs, checked against the kernel's BTF
/// before anything attaches.
pub const TRACEPOINTS: &[(&str, &str)] = &sched_common::TRACEPOINTS;

/// Needs the `task_struct` offsets; `sched_switch` (the first program) is
/// essential: its reader only then.
pub fn attach(ebpf: &mut Ebpf, cx: &AttachContext) -> (ProbeStatus, Option<SchedReader>) {
    let status = cx.attach_tracepoints(ebpf, FAMILY, TRACEPOINTS, &cx.task_offsets);
    let reader = reader_if(&status, 0, FAMILY, || {
        SchedReader::new(ebpf, cx.target_tgid)
    });
    (status, reader)
}

/// Sets `bits` in `SCHED_FOLD`: the switch program takes over another
/// family's switch work (see `mdiag_common::sched::FOLD_DSTATE`).
pub fn fold(ebpf: &mut Ebpf, bits: u32) -> Result<(), ReadError> {
    let name = sched_common::MAP_FOLD;
    let map = ebpf
        .map_mut(name)
        .ok_or(ReadError::Take(TakeMapError::Missing(name)))?;
    let mut fold: Array<&mut MapData, u32> = Array::try_from(map).map_err(ReadError::map(name))?;
    let now = fold.get(&0, 0).map_err(ReadError::map(name))?;
    fold.set(0, &(now | bits), 0).map_err(ReadError::map(name))
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
    running: PerCpuArray<MapData, Running>,
    target_tgid: Option<u32>,
    last: SchedSnapshot,
    /// Runs in progress credited to earlier slices.
    credit: Credit<()>,
}

impl SchedReader {
    pub fn new(ebpf: &mut Ebpf, target_tgid: Option<u32>) -> Result<Self, ReadError> {
        let threads: BpfHashMap<MapData, u32, ThreadSched> = take_map(ebpf, MAP_THREADS)?;
        let cpu: PerCpuArray<MapData, SchedCpu> = take_map(ebpf, MAP_CPU)?;
        let running: PerCpuArray<MapData, Running> = take_map(ebpf, MAP_RUNNING)?;
        let mut reader = Self {
            threads,
            cpu,
            running,
            target_tgid,
            last: SchedSnapshot::default(),
            credit: Credit::default(),
        };
        reader.last = reader.snapshot()?;
        Ok(reader)
    }

    /// The slice since the previous call (or since attach).
    pub fn next_slice(&mut self) -> Result<SchedSlice, ReadError> {
        let open = self.runs_in_progress()?;
        let at_ns = monotonic_now_ns();
        let now = self.snapshot()?;
        let open = uncounted_runs(open, &now);
        let mut slice = slice_between(&self.last, &now);
        let cut = credit::Cut { open: &open, at_ns };
        credit_runs(&mut self.credit, &mut slice, &now, cut);
        self.last = now;
        let gone = delta::prune_exited(&mut self.threads, &mut self.last.threads);
        self.credit.retain_threads(|tid| !gone.contains(&tid));
        Ok(slice)
    }

    /// The observed threads on a CPU now, with the start of their run (read
    /// before the counters: see [`crate::kit::probe::credit`]).
    fn runs_in_progress(&self) -> Result<Vec<credit::Open<()>>, ReadError> {
        let per_cpu = read_per_cpu(&self.running, 0, MAP_RUNNING)?;
        Ok(per_cpu
            .iter()
            .filter(|r| r.tid != 0)
            .map(|r| credit::Open {
                tid: r.tid,
                tgid: r.tgid,
                start_ns: r.since_ns,
                key: (),
            })
            .collect())
    }

    pub fn target_tgid(&self) -> Option<u32> {
        self.target_tgid
    }
}

impl Counters for SchedReader {
    type Snapshot = SchedSnapshot;
    type Slice = SchedSlice;

    fn snapshot(&self) -> Result<SchedSnapshot, ReadError> {
        let cpus = read_per_cpu(&self.cpu, 0, MAP_CPU)?;
        let cpus: Vec<SchedCpu> = cpus.iter().copied().collect();
        let mut threads = HashMap::new();
        // An entry deleted between key iteration and lookup is simply skipped.
        for (tid, value) in self.threads.iter().flatten() {
            threads.insert(tid, value);
        }
        Ok(SchedSnapshot { cpus, threads })
    }

    fn slice_between(before: &SchedSnapshot, after: &SchedSnapshot) -> SchedSlice {
        slice_between(before, after)
    }
}

impl FamilyReader for SchedReader {
    fn family(&self) -> &'static str {
        FAMILY
    }

    /// No run in progress on any CPU, and no thread's run or run-queue wait
    /// open (nor a D-state sleep marked open for the folded contention work).
    fn forget_in_flight(&mut self) -> Result<(), ReadError> {
        edit_per_cpu(&mut self.running, 0, MAP_RUNNING, |r| {
            *r = Running::default()
        })?;
        let tids: Vec<u32> = self.threads.keys().flatten().collect();
        for tid in tids {
            let Ok(mut t) = self.threads.get(&tid, 0) else {
                continue;
            };
            t.last_in_ns = 0;
            t.runnable_since_ns = 0;
            t.flags = 0;
            self.threads
                .insert(&tid, &t, BPF_EXIST)
                .or_else(|e| match e {
                    aya::maps::MapError::KeyNotFound => Ok(()),
                    e => Err(e),
                })
                .map_err(ReadError::map(MAP_THREADS))?;
        }
        Ok(())
    }

    fn rebase(&mut self) -> Result<(), ReadError> {
        let open = self.runs_in_progress()?;
        let at_ns = monotonic_now_ns();
        self.last = self.snapshot()?;
        let open = uncounted_runs(open, &self.last);
        let last = &self.last;
        self.credit
            .begin(credit::Cut { open: &open, at_ns }, |tid| {
                last_counted_run(last, tid)
            });
        Ok(())
    }
}

impl SectionReader for SchedReader {
    type Section = SchedSlice;

    fn read(&mut self, _last: bool) -> Result<SchedSlice, ReadError> {
        self.next_slice()
    }
}

impl ThreadValue for ThreadSched {
    fn tgid(&self) -> u32 {
        self.tgid
    }
}

/// Start of the latest run of `tid` counted in `s` (0: none).
fn last_counted_run(s: &SchedSnapshot, tid: u32) -> u64 {
    s.threads.get(&tid).map_or(0, |t| t.last_run_start_ns)
}

/// The runs in progress that the counters `now`, read after them, do not
/// hold yet; one per thread.
fn uncounted_runs(open: Vec<credit::Open<()>>, now: &SchedSnapshot) -> Vec<credit::Open<()>> {
    credit::uncounted(
        credit::latest_per_thread(open),
        |tid| last_counted_run(now, tid),
        |tid| now.threads.get(&tid).map(|t| t.tgid),
    )
}

/// Spreads the on-CPU time of `slice` (the counters' differences up to
/// `now`) over the slices each run overlaps, given the runs in progress
/// when `now` was read (`cut`). Pure.
pub fn credit_runs(
    credit: &mut Credit<()>,
    slice: &mut SchedSlice,
    now: &SchedSnapshot,
    cut: credit::Cut<'_, ()>,
) {
    credit.apply(
        cut,
        |tid| last_counted_run(now, tid),
        |c| {
            if c.add == 0 && c.back == 0 {
                return;
            }
            let pos = match slice.threads.iter().position(|t| t.tid == c.tid) {
                Some(p) => p,
                None => {
                    let comm = now
                        .threads
                        .get(&c.tid)
                        .map(|t| String::from_utf8_lossy(t.comm_bytes()).into_owned())
                        .unwrap_or_default();
                    slice.threads.push(ThreadSlice {
                        tid: c.tid,
                        tgid: c.tgid,
                        comm,
                        ..ThreadSlice::default()
                    });
                    slice.threads.len() - 1
                }
            };
            let t = &mut slice.threads[pos];
            t.oncpu_ns = credit::adjusted(t.oncpu_ns, c.add, c.back);
        },
    );
    slice.threads.sort_by_key(|t| t.tid);
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

    /// A run of thread 7 on a CPU since `start_ns`.
    fn on_cpu(start_ns: u64) -> Vec<credit::Open<()>> {
        vec![credit::Open {
            tid: 7,
            tgid: 7,
            start_ns,
            key: (),
        }]
    }

    /// Thread 7's totals: switches and time on CPU added at switch-outs,
    /// and the start of the latest run counted.
    fn totals(switches: u64, oncpu_ns: u64, last_run_start_ns: u64) -> SchedSnapshot {
        SchedSnapshot {
            cpus: vec![],
            threads: HashMap::from([(
                7,
                ThreadSched {
                    involuntary: switches,
                    oncpu_ns,
                    last_run_start_ns,
                    ..thread(7, 0, 0, b"spin")
                },
            )]),
        }
    }

    /// (comm, involuntary, oncpu_ns) of every thread, per slice, for cuts
    /// every second given (runs in progress, totals) at each.
    fn slices(cuts: Vec<(Vec<credit::Open<()>>, SchedSnapshot)>) -> Vec<Vec<(String, u64, u64)>> {
        let mut credit = Credit::default();
        let mut last = totals(0, 0, 0);
        let mut out = Vec::new();
        for (k, (runs, snap)) in cuts.into_iter().enumerate() {
            let mut s = slice_between(&last, &snap);
            let runs = uncounted_runs(runs, &snap);
            let cut = credit::Cut {
                open: &runs,
                at_ns: (k as u64 + 1) * S,
            };
            credit_runs(&mut credit, &mut s, &snap, cut);
            out.push(
                s.threads
                    .iter()
                    .map(|t| (t.comm.clone(), t.involuntary, t.oncpu_ns))
                    .collect(),
            );
            last = snap;
        }
        out
    }

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_long_run_is_spread_over_the_slices_it_overlaps() {
        // On a CPU from 0.5 s to 3.2 s without a switch; cuts every second.
        // Switched out at 3.2 s (the kernel adds the whole 2.7 s), switched
        // in again at 3.9 s.
        let got = slices(vec![
            (on_cpu(S / 2), totals(0, 0, 0)),
            (on_cpu(S / 2), totals(0, 0, 0)),
            (on_cpu(S / 2), totals(0, 0, 0)),
            (on_cpu(3_900_000_000), totals(1, 2_700_000_000, S / 2)),
        ]);
        let spin = |n, ns| vec![("spin".to_owned(), n, ns)];
        assert_eq!(
            got,
            vec![
                spin(0, S / 2),
                spin(0, S),
                spin(0, S),
                spin(1, 200_000_000 + 100_000_000)
            ]
        );
    }

    #[test]
    fn a_run_whose_end_was_not_seen_is_credited_until_the_cpu_runs_another() {
        // Seen on a CPU at 0.5 s; the kernel never sees it leave (nothing
        // counted) and by 2 s the CPU runs something else: its time up to
        // the first cut stays, nothing more.
        let got = slices(vec![
            (on_cpu(S / 2), totals(0, 0, 0)),
            (Vec::new(), totals(0, 0, 0)),
            // A new run from 2.5 s is credited as usual.
            (on_cpu(2_500_000_000), totals(0, 0, 0)),
        ]);
        let spin = |ns| vec![("spin".to_owned(), 0, ns)];
        assert_eq!(got, vec![spin(S / 2), vec![], spin(S / 2)]);
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
