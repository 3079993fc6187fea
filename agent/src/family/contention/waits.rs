//! Contention family, user side: where the target's threads wait off CPU,
//! by stack.
//!
//! The kernel opens a wait at each switch-out of an observed thread (its
//! user and kernel stacks, why it left: sleep, D state, preempted; the
//! checkpoint window) and, at its switch-in, adds the time to the counter of
//! (thread, stacks, why, window). Each slice this drains the counters (reads
//! then deletes), reads the stacks they name, and empties the stack map but
//! for the stacks of waits still open (a thread asleep for minutes keeps
//! its stack until it wakes). Stacks are made readable and interned as the
//! perf family's are ([`crate::kit::stacks`]): a slice carries the stacks
//! first seen in it ([`StackDef`]) and time per stack, why and window
//! ([`WaitCount`]). A wait is counted whole in the slice where it ends.
//!
//! Every wait is timed; one in N (N from the switch rate, [`WaitDrain::adapt`])
//! has its stacks taken. A thread's time per why and window is so exact,
//! and its unsampled part is spread over its sampled stacks
//! ([`spread_unsampled`]): sampled waits weighted by N would be an unbiased
//! estimate that can still exceed the time there was (a thread off CPU for
//! 6.01 s of a 6.00 s recording).
//!
//! Only time inside the recording counts: when the clock starts, open waits
//! are moved to start then ([`WaitDrain::rebase`]); the last slice counts
//! the waits still open up to its end. The frames of the capture itself
//! (the `sched_switch` tracepoint calling mdiag's program) are cut from the
//! leaf end of each kernel stack: they say how the stack was taken, not
//! where the thread waits.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use aya::maps::{Array, HashMap as BpfHashMap, MapData, StackTraceMap};
use mdiag_common::contention::{
    INSIDE, WAIT_CAPTURES_PER_S, WAIT_DISK, WAIT_EVERY_MAX, WAIT_RUNQUEUE, WaitInflight, WaitKey,
    WaitStats,
};
use mdiag_common::stack::UNSAMPLED_STACK;

use crate::kit::probe::monotonic_now_ns;
use crate::kit::stacks::{StackIps, StackNames, drain_counts, drain_stacks, ips};
use crate::stacks::Frame;
use crate::stacks::table::{StackDef, Wait, WaitCount};
use crate::symbols::{ObjectCache, ProcessSymbols};

/// Least time between two changes of the sampling.
pub const ADAPT_EVERY: Duration = Duration::from_millis(200);
/// `BPF_EXIST`: update an existing entry only.
const BPF_EXIST: u64 = 2;
/// Least time between two reloads of the target's symbols.
const RELOAD_EVERY: Duration = Duration::from_secs(30);

/// Drains and symbolizes the off-CPU counters of one target.
pub struct WaitDrain {
    target: Option<u32>,
    waits: BpfHashMap<MapData, u32, WaitInflight>,
    counts: BpfHashMap<MapData, WaitKey, WaitStats>,
    stacks: StackTraceMap<MapData>,
    /// `CONT_WAIT_EVERY`: one switch-out in this many is sampled.
    every_map: Array<MapData, u32>,
    every: u32,
    /// When the sampling was last set (monotonic ns), and the kernel's
    /// cumulative count of switch-outs then.
    last_ns: u64,
    last_outs: u64,
    names: StackNames,
    symbols: Option<ProcessSymbols>,
    loaded_at: Option<Instant>,
}

impl WaitDrain {
    /// Off-CPU stacks of `target` (none: the kernel takes none).
    pub fn new(
        target: Option<u32>,
        waits: BpfHashMap<MapData, u32, WaitInflight>,
        counts: BpfHashMap<MapData, WaitKey, WaitStats>,
        stacks: StackTraceMap<MapData>,
        every_map: Array<MapData, u32>,
    ) -> Self {
        let mut drain = Self {
            target,
            waits,
            counts,
            stacks,
            every_map,
            every: 0,
            last_ns: monotonic_now_ns(),
            last_outs: 0,
            names: StackNames::default(),
            symbols: None,
            loaded_at: None,
        };
        if drain.target.is_some() {
            // Every switch-out until the first slice measures the rate.
            drain.resample_to(1);
        }
        drain
    }

    /// The recording's clock starts now: waits that ended before are
    /// dropped, open waits count from now on.
    pub fn rebase(&mut self) {
        let at = monotonic_now_ns();
        drop(self.drain_raw());
        let open: Vec<(u32, WaitInflight)> = self.waits.iter().flatten().collect();
        for (tid, mut w) in open {
            if w.ts_ns < at {
                w.ts_ns = at;
                // BPF_EXIST: a wait closed meanwhile is not brought back.
                let _ = self.waits.insert(&tid, &w, BPF_EXIST);
            }
        }
    }

    /// Forgets every open wait (the clock restarts: a wait opened before
    /// would count time from before it).
    pub fn forget_open(&mut self) {
        let tids: Vec<u32> = self.waits.keys().flatten().collect();
        for tid in tids {
            let _ = self.waits.remove(&tid);
        }
    }

    /// Reads and deletes the counters, and every stored stack that no open
    /// wait still names. Open waits are read first: a stack named by a wait
    /// opened after that read, and already deleted, counts as lost.
    pub fn drain_raw(&mut self) -> (Vec<(WaitKey, WaitStats)>, StackIps) {
        let open: HashSet<u32> = self
            .waits
            .iter()
            .flatten()
            .flat_map(|(_, w)| [w.user_stack, w.kernel_stack])
            .collect();
        let counts = drain_counts(&mut self.counts);
        (counts, drain_stacks(&mut self.stacks, |id| open.contains(&id)))
    }

    /// One switch-out in how many the kernel samples now.
    pub fn sampling(&self) -> u32 {
        self.every
    }

    /// Sets the sampling from the switch-out rate since the previous call
    /// (`switch_outs`: the kernel's cumulative count): about
    /// [`WAIT_CAPTURES_PER_S`] stack captures a second. Called at every
    /// poll of the record loop ([`ADAPT_EVERY`] apart at least), so a load
    /// that starts runs unsampled for a fraction of a second at most.
    pub fn adapt(&mut self, switch_outs: u64) {
        let now_ns = monotonic_now_ns();
        let secs = now_ns.saturating_sub(self.last_ns) as f64 / 1e9;
        if secs < ADAPT_EVERY.as_secs_f64() || self.target.is_none() {
            return;
        }
        let outs = switch_outs.saturating_sub(self.last_outs);
        self.last_ns = now_ns;
        self.last_outs = switch_outs;
        // The rate the kernel saw at the sampling in effect: every
        // switch-out is counted, sampled or not.
        self.resample_to(every_for(outs as f64 / secs));
    }

    fn resample_to(&mut self, every: u32) {
        if every != self.every {
            match self.every_map.set(0, &every, 0) {
                Ok(()) => self.every = every,
                Err(e) => tracing::warn!("contention: off-CPU sampling not set: {e}"),
            }
        }
    }

    /// One slice: stacks first seen now and time per stack, why and window;
    /// with `last`, the waits still open count up to now too. Host-wide (no
    /// target) the maps are emptied unread. `switch_outs`: the kernel's
    /// cumulative count of observed switch-outs ([`Self::adapt`]).
    pub fn next(&mut self, last: bool, switch_outs: u64) -> (Vec<StackDef>, Vec<WaitCount>) {
        self.adapt(switch_outs);
        let still_open: Vec<(u32, WaitInflight)> = if last {
            self.waits.iter().flatten().collect()
        } else {
            Vec::new()
        };
        let at = monotonic_now_ns();
        let (mut counts, stacks) = self.drain_raw();
        let Some(target) = self.target else {
            return (Vec::new(), Vec::new());
        };
        for (tid, w) in still_open {
            let key = WaitKey {
                tgid: target,
                tid,
                user_stack: w.user_stack,
                kernel_stack: w.kernel_stack,
                wait: w.wait,
                window: w.window,
            };
            // Open waits of other processes (host-wide) and of threads no
            // longer the target's are skipped.
            if is_target_thread(target, tid) {
                let ns = at.saturating_sub(w.ts_ns);
                counts.push((key, WaitStats { waits: 1, ns }));
            }
        }
        counts.retain(|(key, _)| key.tgid == target);
        let counts = spread_unsampled(counts);
        self.refresh_symbols(target, &counts, &stacks);
        self.names.new_slice();
        let mut defs = Vec::new();
        let mut sums: BTreeMap<(u32, Wait, bool), (u64, u64)> = BTreeMap::new();
        for (key, v) in counts {
            let id = self.names.id(
                (target, key.tid),
                (ips(key.user_stack, &stacks), ips(key.kernel_stack, &stacks)),
                self.symbols.as_ref(),
                cut_capture_frames,
                &mut defs,
            );
            let e = sums
                .entry((id, wait_of(key.wait), key.window as usize == INSIDE))
                .or_default();
            e.0 += v.waits;
            e.1 += v.ns;
        }
        let counts = sums
            .into_iter()
            .map(|((id, wait, in_checkpoint), (waits, ns))| WaitCount {
                id,
                wait,
                in_checkpoint,
                waits,
                ns,
            })
            .collect();
        (defs, counts)
    }

    /// Loads the target's symbols the first time, and again when a user
    /// address is in no mapped object (a new library), at most every
    /// [`RELOAD_EVERY`].
    fn refresh_symbols(
        &mut self,
        target: u32,
        counts: &[(WaitKey, WaitStats)],
        stacks: &StackIps,
    ) {
        let stale = match (&self.symbols, self.loaded_at) {
            (Some(s), Some(at)) => {
                at.elapsed() >= RELOAD_EVERY
                    && counts.iter().any(|(k, _)| {
                        stacks.get(&k.user_stack).is_some_and(|ips| {
                            ips.iter()
                                .any(|&ip| !s.objects.iter().any(|o| o.mapped.contains_address(ip)))
                        })
                    })
            }
            _ => self.loaded_at.is_none_or(|at| at.elapsed() >= RELOAD_EVERY),
        };
        if !stale || counts.is_empty() {
            return;
        }
        self.loaded_at = Some(Instant::now());
        match ProcessSymbols::load(target, ObjectCache::global()) {
            // The same objects at the same addresses (an address outside
            // every file, like the vdso's, asks again every time): what was
            // named stays named.
            Ok(s) if self.symbols.as_ref().is_some_and(|old| old.same_objects(&s)) => {}
            Ok(s) => {
                self.symbols = Some(s);
                self.names.symbols_changed();
            }
            Err(e) => tracing::debug!(pid = target, "contention: symbols unavailable: {e}"),
        }
    }
}

/// Kernel frames of the capture itself, at the leaf end of every off-CPU
/// kernel stack: the tracepoint's call into mdiag's program.
const CAPTURE_FRAMES: [&str; 4] = ["bpf_prog_", "bpf_trace_run", "__bpf_trace_", "__traceiter_"];

fn cut_capture_frames(frames: &mut Vec<Frame>) {
    while frames
        .last()
        .is_some_and(|f| f.kernel() && CAPTURE_FRAMES.iter().any(|p| f.function.starts_with(p)))
    {
        frames.pop();
    }
}

/// Whether `tid` is a thread of `tgid` (an open wait's map entry names the
/// thread only).
fn is_target_thread(tgid: u32, tid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{tgid}/task/{tid}")).exists()
}

/// One switch-out in how many to sample at `rate` switch-outs a second.
fn every_for(rate: f64) -> u32 {
    let every = (rate / WAIT_CAPTURES_PER_S as f64).ceil();
    if every.is_nan() || every < 1.0 {
        1
    } else {
        (every.min(f64::from(WAIT_EVERY_MAX))) as u32
    }
}

/// Every wait is timed, only sampled ones have stacks: per thread, why and
/// window, the unsampled waits' count and time are spread over the sampled
/// stacks in proportion to their time (a ratio estimate whose total is the
/// exact one, so a thread is never off CPU longer than it was). Rounded
/// down, so the sum never exceeds the total. With no sampled wait to spread
/// over, the unsampled row stays, as `[not sampled]`.
fn spread_unsampled(counts: Vec<(WaitKey, WaitStats)>) -> Vec<(WaitKey, WaitStats)> {
    type Group = (u32, u32, u32, u32);
    let group = |k: &WaitKey| (k.tgid, k.tid, k.wait, k.window);
    let mut unsampled: BTreeMap<Group, WaitStats> = BTreeMap::new();
    let mut sampled: BTreeMap<Group, WaitStats> = BTreeMap::new();
    for (key, v) in &counts {
        let sums = if key.user_stack == UNSAMPLED_STACK {
            unsampled.entry(group(key)).or_default()
        } else {
            sampled.entry(group(key)).or_default()
        };
        sums.waits += v.waits;
        sums.ns += v.ns;
    }
    let scale = |part: u64, sum: u64, extra: u64| -> u64 {
        if sum == 0 {
            return part;
        }
        let scaled = u128::from(part) * u128::from(sum + extra) / u128::from(sum);
        u64::try_from(scaled).unwrap_or(u64::MAX)
    };
    counts
        .into_iter()
        .filter_map(|(key, v)| {
            let g = group(&key);
            let extra = unsampled.get(&g).copied().unwrap_or_default();
            if key.user_stack == UNSAMPLED_STACK {
                // Kept only where no sampled time takes it over.
                let s = sampled.get(&g).copied().unwrap_or_default();
                let spread = s.ns > 0 || (extra.ns == 0 && s.waits > 0);
                return (!spread).then_some((key, v));
            }
            let Some(&s) = sampled.get(&g) else {
                return Some((key, v));
            };
            let stats = if s.ns > 0 {
                WaitStats {
                    waits: scale(v.waits, s.waits, extra.waits),
                    ns: scale(v.ns, s.ns, extra.ns),
                }
            } else if extra.ns == 0 {
                WaitStats {
                    waits: scale(v.waits, s.waits, extra.waits),
                    ns: 0,
                }
            } else {
                v
            };
            Some((key, stats))
        })
        .collect()
}

fn wait_of(wait: u32) -> Wait {
    match wait {
        WAIT_DISK => Wait::Disk,
        WAIT_RUNQUEUE => Wait::RunQueue,
        _ => Wait::Sleep,
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::KERNEL_OBJECT;

    fn k(f: &str) -> Frame {
        Frame {
            function: f.into(),
            object: KERNEL_OBJECT.into(),
        }
    }

    #[test]
    fn the_captures_own_frames_are_cut_from_the_leaf_end_only() {
        let mut frames = vec![
            Frame {
                function: "bpf_prog_user_named_like_this".into(),
                object: "app".into(),
            },
            k("futex_wait"),
            k("schedule"),
            k("__schedule"),
            k("bpf_trace_run4"),
            k("bpf_prog_a35d1df4f8a99c6b_mdiag_sched_switch"),
        ];
        cut_capture_frames(&mut frames);
        let names: Vec<&str> = frames.iter().map(|f| f.function.as_str()).collect();
        assert_eq!(
            names,
            ["bpf_prog_user_named_like_this", "futex_wait", "schedule", "__schedule"]
        );
    }

    #[test]
    fn sampling_keeps_captures_near_their_rate() {
        assert_eq!(every_for(0.0), 1);
        assert_eq!(every_for(400.0), 1, "a quiet target: every switch-out");
        assert_eq!(every_for(25_000.0), 50);
        assert_eq!(every_for(25_001.0), 51);
        assert_eq!(every_for(1e12), WAIT_EVERY_MAX);
        assert_eq!(every_for(f64::NAN), 1);
    }

    fn key(tid: u32, stack: u32, wait: u32) -> WaitKey {
        WaitKey {
            tgid: 7,
            tid,
            user_stack: stack,
            kernel_stack: stack,
            wait,
            window: 0,
        }
    }

    fn row(tid: u32, stack: u32, waits: u64, ns: u64) -> (WaitKey, WaitStats) {
        (key(tid, stack, 0), WaitStats { waits, ns })
    }

    #[test]
    fn unsampled_time_is_spread_over_the_threads_sampled_stacks_and_totals_stay_exact() {
        // Thread 1: 10 waits of 20 ms, 2 sampled (stacks 5 and 6).
        // Thread 2: sampled only. Thread 3: none sampled.
        let counts = vec![
            row(1, 5, 1, 20_000_000),
            row(1, 6, 1, 60_000_000),
            row(1, UNSAMPLED_STACK, 8, 120_000_000),
            row(2, 5, 3, 9),
            row(3, UNSAMPLED_STACK, 4, 400),
        ];
        let out = spread_unsampled(counts);
        let of = |tid: u32, stack: u32| {
            out.iter()
                .find(|(k, _)| k.tid == tid && k.user_stack == stack)
                .map(|(_, v)| *v)
        };
        // 200 ms in all, split 1:3 as the sampled stacks were.
        assert_eq!(of(1, 5).unwrap().ns, 50_000_000);
        assert_eq!(of(1, 6).unwrap().ns, 150_000_000);
        assert_eq!(of(1, 5).unwrap().waits + of(1, 6).unwrap().waits, 10);
        assert!(of(1, UNSAMPLED_STACK).is_none(), "spread, not kept");
        assert_eq!(of(2, 5).unwrap(), WaitStats { waits: 3, ns: 9 });
        assert_eq!(of(3, UNSAMPLED_STACK).unwrap(), WaitStats { waits: 4, ns: 400 });
    }

    #[test]
    fn a_spread_never_exceeds_the_exact_total_and_kinds_stay_apart() {
        let mut r = crate::kit::random::Rng(11);
        for _ in 0..200 {
            let mut counts = Vec::new();
            for stack in 0..r.below(5) as u32 {
                counts.push(row(1, stack, 1 + r.below(9), r.below(1_000_000_007)));
            }
            counts.push(row(1, UNSAMPLED_STACK, r.below(50), r.below(3_000_000_019)));
            // Another kind of wait of the same thread is its own total.
            counts.push((key(1, 9, WAIT_RUNQUEUE), WaitStats { waits: 2, ns: 77 }));
            let total: u64 = counts.iter().map(|(_, v)| v.ns).sum();
            let out = spread_unsampled(counts);
            let sum: u64 = out.iter().map(|(_, v)| v.ns).sum();
            assert!(sum <= total, "{sum} > {total}");
            assert!(total - sum <= out.len() as u64, "{sum} lost more than rounding of {total}");
            let rq: Vec<_> = out.iter().filter(|(k, _)| k.wait == WAIT_RUNQUEUE).collect();
            assert_eq!(rq.len(), 1);
            assert_eq!(rq[0].1, WaitStats { waits: 2, ns: 77 });
        }
    }

    #[test]
    fn wait_kinds_map_from_the_kernels_codes() {
        assert_eq!(wait_of(WAIT_DISK), Wait::Disk);
        assert_eq!(wait_of(WAIT_RUNQUEUE), Wait::RunQueue);
        assert_eq!(wait_of(mdiag_common::contention::WAIT_SLEEP), Wait::Sleep);
    }
}
