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
        if let Some(target) = self.target {
            for (tid, w) in still_open {
                let key = WaitKey {
                    tgid: target,
                    tid,
                    user_stack: w.user_stack,
                    kernel_stack: w.kernel_stack,
                    wait: w.wait,
                    window: w.window,
                };
                // Open waits of other processes (host-wide) and of threads
                // no longer the target's are skipped below by tgid.
                if is_target_thread(target, tid) {
                    let weight = u64::from(w.weight.max(1));
                    counts.push((
                        key,
                        WaitStats {
                            waits: weight,
                            ns: at.saturating_sub(w.ts_ns).saturating_mul(weight),
                        },
                    ));
                }
            }
        }
        let Some(target) = self.target else {
            return (Vec::new(), Vec::new());
        };
        self.refresh_symbols(target, &counts, &stacks);
        self.names.new_slice();
        let mut defs = Vec::new();
        let mut sums: BTreeMap<(u32, Wait, bool), (u64, u64)> = BTreeMap::new();
        for (key, v) in counts {
            if key.tgid != target {
                continue;
            }
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

    #[test]
    fn wait_kinds_map_from_the_kernels_codes() {
        assert_eq!(wait_of(WAIT_DISK), Wait::Disk);
        assert_eq!(wait_of(WAIT_RUNQUEUE), Wait::RunQueue);
        assert_eq!(wait_of(mdiag_common::contention::WAIT_SLEEP), Wait::Sleep);
    }
}
