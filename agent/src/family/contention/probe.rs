//! Contention family, user side: per-thread kernel lock waits and D-state
//! sleeps, lock kinds and D-state kernel stacks, each split by checkpoint
//! window, turned into one [`ContentionSlice`] per second.
//!
//! As for the other families the kernel counters are cumulative and a slice
//! is the difference of two snapshots ([`super::slice`]). The kernel adds a
//! wait's time when it ends, so the waits still in flight at a cut are
//! credited up to it and the credit is taken back when they end
//! ([`super::credit`]): a long
//! D-state sleep or lock wait is split over the slices it overlaps. Kernel
//! stacks are symbolized once per stack id with /proc/kallsyms (ids are
//! stable: the stack map is never cleared while recording) and kept for the
//! recording's `kernel_stacks`.

use std::collections::{BTreeMap, HashMap};

use aya::{
    Ebpf,
    maps::{HashMap as BpfHashMap, MapData, PerCpuArray, PerCpuHashMap, StackTraceMap},
};
use mdiag_common::contention::{
    self as contention_common, ContentionDrops, DStackKey, DStackStats, LOCK_KINDS, LockInflight,
    LockKindStats, MAP_DROPS, MAP_DSTACKS, MAP_LOCK_INFLIGHT, MAP_LOCK_KINDS, MAP_OFFCPU,
    MAP_STACKS, MAP_THREADS, MAP_WAIT_COUNTS, MAP_WAIT_EVERY, MAP_WAIT_STACKS, MAP_WAITS, OffCpu, ThreadContention,
};
use mdiag_common::sched as sched_common;

use super::credit::{ContentionCut, InFlight, WaitCredit};
use super::section::{ContentionSlice, KernelStack};
use super::slice::{delta_between, finish, slice_between};
use super::waits::WaitDrain;
use crate::kit::probe::{
    AttachContext, Counters, FamilyReader, PerCpuSum, ProbeStatus, ReadError, SectionReader,
    clear_map,
    delta::{self, ThreadValue},
    monotonic_now_ns, read_summed, reader_or_warn, sum_cpus, take_map,
};
use crate::kstack::{self, KernelSymbols};

/// Family name in the recording's `probes`.
pub const FAMILY: &str = crate::kit::family::Family::Contention.name();

/// Its `(program, BTF tracepoint)` pairs, checked against the kernel's BTF
/// before anything attaches.
pub const TRACEPOINTS: &[(&str, &str)] = &contention_common::TRACEPOINTS;

/// Lock waits and D-state stacks: needs the `task_struct` offsets (its
/// switch program reads the task); any program that attached is enough,
/// each alone is useful.
/// When the scheduler family's switch program runs, the D-state work is
/// folded into it (one program per switch, not two) and this family's own
/// switch program stays detached (`sched_attached`: the scheduler family's
/// reader exists). Its reader when any program attached.
pub fn attach(
    ebpf: &mut Ebpf,
    cx: &AttachContext,
    sched_attached: bool,
) -> (ProbeStatus, Option<ContentionReader>) {
    let folded = sched_attached
        && cx.task_offsets.is_ok()
        && crate::family::sched::probe::fold(ebpf, sched_common::FOLD_DSTATE)
            .map_err(|e| tracing::warn!("contention: switch work not folded into sched's: {e}"))
            .is_ok();
    let into = folded.then_some((
        contention_common::PROG_SWITCH,
        sched_common::PROG_SCHED_SWITCH,
    ));
    let status = cx.attach_tracepoints_folded(ebpf, FAMILY, TRACEPOINTS, &cx.task_offsets, into);
    let reader = if status.programs.iter().any(|p| p.error.is_none()) {
        reader_or_warn(FAMILY, || {
            ContentionReader::new(ebpf, cx.target_tgid.filter(|_| cx.stacks))
        })
    } else {
        None
    };
    (status, reader)
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
    /// D-state sleeps and lock waits in progress (their start), by thread.
    offcpu: BpfHashMap<MapData, u32, OffCpu>,
    lock_inflight: BpfHashMap<MapData, u32, LockInflight>,
    credit: WaitCredit,
    /// The process's one kallsyms table (about 3 MB, shared with the
    /// stack symbolizers).
    ksyms: Option<std::sync::Arc<KernelSymbols>>,
    /// Symbolized stacks referenced by a slice so far, by id.
    seen_stacks: BTreeMap<u32, KernelStack>,
    /// Current thread names from /proc, by tid (the kernel keeps the name a
    /// thread had at its first wait, often before it named itself).
    names: HashMap<u32, String>,
    last: ContentionSnapshot,
    /// Off-CPU waits by stack.
    waits: WaitDrain,
    /// The slice being read is the recording's last.
    last_read: bool,
}

impl ContentionReader {
    /// `stacks_of`: the target whose off-CPU stacks to take (none: no
    /// off-CPU stacks at all).
    pub fn new(ebpf: &mut Ebpf, stacks_of: Option<u32>) -> Result<Self, ReadError> {
        let ksyms = KernelSymbols::shared();
        let mut reader = Self {
            threads: take_map(ebpf, MAP_THREADS)?,
            lock_kinds: take_map(ebpf, MAP_LOCK_KINDS)?,
            dstacks: take_map(ebpf, MAP_DSTACKS)?,
            stacks: take_map(ebpf, MAP_STACKS)?,
            drops: take_map(ebpf, MAP_DROPS)?,
            offcpu: take_map(ebpf, MAP_OFFCPU)?,
            lock_inflight: take_map(ebpf, MAP_LOCK_INFLIGHT)?,
            credit: WaitCredit::default(),
            ksyms,
            seen_stacks: BTreeMap::new(),
            names: HashMap::new(),
            last: ContentionSnapshot::default(),
            waits: WaitDrain::new(
                stacks_of,
                take_map(ebpf, MAP_WAITS)?,
                take_map(ebpf, MAP_WAIT_COUNTS)?,
                take_map(ebpf, MAP_WAIT_STACKS)?,
                take_map(ebpf, MAP_WAIT_EVERY)?,
            ),
            last_read: false,
        };
        reader.last = reader.snapshot()?;
        Ok(reader)
    }

    /// The slice since the previous call; symbolizes the stacks it names.
    pub fn next_slice(&mut self) -> Result<ContentionSlice, ReadError> {
        let open = self.in_flight();
        let at_ns = monotonic_now_ns();
        let now = self.snapshot()?;
        let open = uncounted(open, &now);
        let mut delta = delta_between(&self.last, &now);
        self.credit.apply(
            &mut delta,
            ContentionCut {
                open: &open,
                at_ns,
                threads: &now.threads,
            },
        );
        let mut slice = finish(delta);
        slice.wait_sample_every = self.waits.sampling();
        (slice.wait_stack_defs, slice.waits) =
            self.waits.next(self.last_read, now.drops.wait_switch_outs);
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
        let gone = delta::prune_exited(&mut self.threads, &mut self.last.threads);
        for tid in &gone {
            self.names.remove(tid);
        }
        self.credit.retain_threads(|tid| !gone.contains(&tid));
        Ok(slice)
    }

    /// The D-state sleeps and lock waits in flight now (read before the
    /// counters: see [`crate::kit::probe::credit`]).
    fn in_flight(&self) -> InFlight {
        InFlight::from_maps(
            self.offcpu.iter().flatten(),
            self.lock_inflight.iter().flatten(),
        )
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
}

impl Counters for ContentionReader {
    type Snapshot = ContentionSnapshot;
    type Slice = ContentionSlice;

    fn snapshot(&self) -> Result<ContentionSnapshot, ReadError> {
        let mut lock_kinds = Vec::with_capacity(LOCK_KINDS as usize);
        for kind in 0..LOCK_KINDS {
            lock_kinds.push(read_summed(&self.lock_kinds, kind, MAP_LOCK_KINDS)?);
        }
        let dstacks = self
            .dstacks
            .iter()
            .flatten()
            .map(|(k, per_cpu)| (k, sum_cpus(&per_cpu)))
            .collect();
        Ok(ContentionSnapshot {
            threads: self.threads.iter().flatten().collect(),
            lock_kinds,
            dstacks,
            drops: read_summed(&self.drops, 0, MAP_DROPS)?,
        })
    }

    fn slice_between(before: &ContentionSnapshot, after: &ContentionSnapshot) -> ContentionSlice {
        slice_between(before, after)
    }
}

impl FamilyReader for ContentionReader {
    fn family(&self) -> &'static str {
        FAMILY
    }

    /// Between slices: the off-CPU stacks' sampling follows the switch rate.
    fn poll(
        &mut self,
        _ebpf: &mut Ebpf,
        _now: std::time::Instant,
        _rec_start: std::time::Instant,
    ) -> Option<ProbeStatus> {
        if let Ok(d) = read_summed(&self.drops, 0, MAP_DROPS) {
            self.waits.adapt(d.wait_switch_outs);
        }
        None
    }

    /// No lock wait or D-state sleep open.
    fn forget_in_flight(&mut self) -> Result<(), ReadError> {
        self.waits.forget_open();
        clear_map(&mut self.offcpu, MAP_OFFCPU)?;
        clear_map(&mut self.lock_inflight, MAP_LOCK_INFLIGHT)
    }

    fn rebase(&mut self) -> Result<(), ReadError> {
        self.waits.rebase();
        let open = self.in_flight();
        let at_ns = monotonic_now_ns();
        self.last = self.snapshot()?;
        let open = uncounted(open, &self.last);
        self.credit.begin(ContentionCut {
            open: &open,
            at_ns,
            threads: &self.last.threads,
        });
        Ok(())
    }
}

impl SectionReader for ContentionReader {
    type Section = ContentionSlice;

    fn read(&mut self, last: bool) -> Result<ContentionSlice, ReadError> {
        self.last_read = last;
        self.next_slice()
    }
}

impl ThreadValue for ThreadContention {
    fn tgid(&self) -> u32 {
        self.tgid
    }
}

impl PerCpuSum for LockKindStats {
    fn add(self, b: &Self) -> Self {
        LockKindStats {
            waits: [self.waits[0] + b.waits[0], self.waits[1] + b.waits[1]],
            wait_ns: [
                self.wait_ns[0] + b.wait_ns[0],
                self.wait_ns[1] + b.wait_ns[1],
            ],
        }
    }
}

impl PerCpuSum for DStackStats {
    fn add(self, b: &Self) -> Self {
        DStackStats {
            sleeps: self.sleeps + b.sleeps,
            ns: self.ns + b.ns,
        }
    }
}

impl PerCpuSum for ContentionDrops {
    fn add(self, b: &Self) -> Self {
        ContentionDrops {
            inflight_full: self.inflight_full + b.inflight_full,
            thread_map_full: self.thread_map_full + b.thread_map_full,
            stack_failed: self.stack_failed + b.stack_failed,
            dstack_map_full: self.dstack_map_full + b.dstack_map_full,
            wait_stack_lost: self.wait_stack_lost + b.wait_stack_lost,
            wait_inflight_full: self.wait_inflight_full + b.wait_inflight_full,
            wait_map_full: self.wait_map_full + b.wait_map_full,
            wait_switch_outs: self.wait_switch_outs + b.wait_switch_outs,
            wait_sampled: self.wait_sampled + b.wait_sampled,
            nested: self.nested + b.nested,
        }
    }
}

/// The waits of `open` the counters `now` do not hold yet, with their
/// thread groups (from the counters, else /proc; a wait whose thread
/// exited is left out).
fn uncounted(open: InFlight, now: &ContentionSnapshot) -> InFlight {
    open.uncounted(&now.threads, |tid| match now.threads.get(&tid) {
        Some(t) => Some(t.tgid),
        None => delta::tgid_of(tid),
    })
}

/// The thread's name now (`/proc/TGID/task/TID/comm`), `None` once it exited.
fn current_name(tgid: u32, tid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{tgid}/task/{tid}/comm"))
        .ok()
        .map(|s| s.trim_end_matches('\n').to_owned())
}
