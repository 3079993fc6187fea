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

use aya::maps::{HashMap as BpfHashMap, MapData, StackTraceMap};
use mdiag_common::contention::{
    INSIDE, WAIT_DISK, WAIT_RUNQUEUE, WaitInflight, WaitKey, WaitStats,
};

use crate::kit::probe::monotonic_now_ns;
use crate::kit::stacks::{Interner, StackIps, Symbolizer, drain_counts, drain_stacks, ips};
use crate::stacks::Frame;
use crate::stacks::table::{StackDef, Wait, WaitCount};
use crate::symbols::{ObjectCache, ProcessSymbols};

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
    symbolizer: Symbolizer,
    interner: Interner,
    symbols: Option<ProcessSymbols>,
    loaded_at: Option<Instant>,
}

impl WaitDrain {
    pub fn new(
        target: Option<u32>,
        waits: BpfHashMap<MapData, u32, WaitInflight>,
        counts: BpfHashMap<MapData, WaitKey, WaitStats>,
        stacks: StackTraceMap<MapData>,
    ) -> Self {
        Self {
            target,
            waits,
            counts,
            stacks,
            symbolizer: Symbolizer::new(),
            interner: Interner::default(),
            symbols: None,
            loaded_at: None,
        }
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

    /// One slice: stacks first seen now and time per stack, why and window;
    /// with `last`, the waits still open count up to now too. Host-wide (no
    /// target) the maps are emptied unread.
    pub fn next(&mut self, last: bool) -> (Vec<StackDef>, Vec<WaitCount>) {
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
                    counts.push((
                        key,
                        WaitStats {
                            waits: 1,
                            ns: at.saturating_sub(w.ts_ns),
                        },
                    ));
                }
            }
        }
        let Some(target) = self.target else {
            return (Vec::new(), Vec::new());
        };
        self.refresh_symbols(target, &counts, &stacks);
        self.symbolizer.new_slice();
        let mut defs = Vec::new();
        let mut sums: BTreeMap<(u32, Wait, bool), (u64, u64)> = BTreeMap::new();
        for (key, v) in counts {
            if key.tgid != target {
                continue;
            }
            let class = self.symbolizer.class(target, key.tid);
            let (mut frames, truncated) = self.symbolizer.frames(
                ips(key.user_stack, &stacks),
                ips(key.kernel_stack, &stacks),
                self.symbols.as_ref(),
            );
            cut_capture_frames(&mut frames);
            let id = self.interner.id(class, frames, truncated, &mut defs);
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
            Ok(s) => {
                self.symbols = Some(s);
                self.symbolizer.forget_user();
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
    fn wait_kinds_map_from_the_kernels_codes() {
        assert_eq!(wait_of(WAIT_DISK), Wait::Disk);
        assert_eq!(wait_of(WAIT_RUNQUEUE), Wait::RunQueue);
        assert_eq!(wait_of(mdiag_common::contention::WAIT_SLEEP), Wait::Sleep);
    }
}
