//! The probe hub: loading the eBPF object, attaching each family on its own
//! (the families chosen: `--probes`), and driving their readers slice by
//! slice. Each family's attach and reader live in its folder
//! (`family/<name>/`, called through its `Unit`); this module generates,
//! from the registry (`kit::family::for_each_family`), one table
//! ([`FAMILIES`]) and one struct of readers ([`Readers`]), and drives them
//! from [`Probes`]. Each family degrades alone: a program
//! that cannot load or attach is recorded with its reason in
//! [`ProbeStatus`](crate::recording::ProbeStatus) and the others still run.
//! Dropping [`Probes`] detaches everything (aya owns the links as file
//! descriptors, so even a crash leaves the host as it was).

pub mod cycle;
mod load;
pub use crate::family::alloc;
pub use crate::family::contention::probe as contention;
pub use crate::family::perf::probe as perf;
pub use crate::family::sched::probe as sched;
pub use crate::family::softirq::probe as softirq;
pub use crate::family::syscalls;
pub use crate::family::wiredtiger::probe as wiredtiger;

pub(crate) use crate::kit::probe::NOT_APPLICABLE;
pub use crate::kit::probe::{
    AttachContext, Counters, FamilyReader, ReadError, SectionReader, TakeMapError, btf, credit,
    delta, missing_tracepoint, not_applicable,
};

use aya::Ebpf;

use crate::kit::family::{Family, Selection};
use crate::kit::unit::FamilyUnit;
use crate::recording::{ProbeStatus, Slice};

/// One probe family as [`Probes::attach`] sees it: its entry in
/// [`FAMILIES`] (generated from the registry) calls the family's own
/// [`FamilyUnit::attach`] and keeps its reader in its field of [`Readers`].
pub struct FamilyDef {
    /// The family.
    pub family: Family,
    /// The name its [`ProbeStatus`] carries.
    pub name: &'static str,
    /// Its `(program, BTF tracepoint)` pairs, checked against the kernel's
    /// BTF before anything attaches (none for uprobes and perf events).
    pub tracepoints: &'static [(&'static str, &'static str)],
    /// It attaches in [`Probes::attach_later`], not at start.
    pub later: bool,
    /// It is detached between the agent's active periods ([`cycle`]).
    pub cycled: bool,
    /// Its place in the order a slice reads the families (lowest first).
    pub read_rank: u8,
    /// Attaches it at start: its reader goes to its field of the
    /// [`Probes`] being built (which owns the loaded object); returns its
    /// status (`None`: not tried) and whether its reader is there.
    pub attach: fn(&mut Probes, &AttachContext) -> (Option<ProbeStatus>, bool),
}

/// What the families that attach later ([`FamilyDef::later`]) need, which
/// the record loop or the agent knows only after [`Probes::attach`].
#[derive(Debug, Clone, Copy)]
pub struct LaterPlan {
    /// The target process (`None`: host-wide).
    pub target: Option<u32>,
    /// The allocator's latency windows.
    pub alloc: alloc::schedule::WindowSchedule,
    /// The share of the target's CPU the allocator windows may cost, paced
    /// window by window (the agent's); `None`: the schedule as given.
    pub alloc_budget: Option<f64>,
}

/// Generates [`FAMILIES`], [`Readers`] and the slice read from the
/// registry.
macro_rules! probe_hub {
    ($($variant:ident $module:ident,)*) => {
        /// Every probe family, in the order [`Probes::attach`] attaches them
        /// and their statuses stand in a recording (those that attach later
        /// come from [`Probes::attach_later`], after). `docs/ARCHITECTURE.md`'s
        /// family table lists exactly these (`docs_contract.rs`).
        pub const FAMILIES: [FamilyDef; Family::ALL.len()] = [$(
            FamilyDef {
                family: Family::$variant,
                name: Family::$variant.name(),
                tracepoints: <crate::family::$module::Unit as FamilyUnit>::TRACEPOINTS,
                later: <crate::family::$module::Unit as FamilyUnit>::ATTACH_LATER,
                cycled: <crate::family::$module::Unit as FamilyUnit>::CYCLED,
                read_rank: <crate::family::$module::Unit as FamilyUnit>::READ_RANK,
                attach: |probes, cx| {
                    let (status, reader) =
                        <crate::family::$module::Unit as FamilyUnit>::attach(&mut probes.ebpf, cx);
                    let attached = reader.is_some();
                    probes.readers.$module = reader;
                    (status, attached)
                },
            },
        )*];

        /// Every family's reader (`None`: not attached), one field per
        /// family of the registry.
        #[derive(Default)]
        pub struct Readers {
            $(pub $module: Option<<crate::family::$module::Unit as FamilyUnit>::Reader>,)*
        }

        impl Readers {
            /// Every attached reader, in [`Family::ALL`]'s order.
            fn all(&mut self) -> [Option<&mut dyn FamilyReader>; Family::ALL.len()] {
                let Readers { $($module,)* } = self;
                [$($module.as_mut().map(|r| r as &mut dyn FamilyReader),)*]
            }

            /// Reads `family`'s section of the slice that ends now into
            /// `slice` (see [`read_section`]).
            fn read_into(&mut self, family: Family, slice: &mut Slice, last: bool, paused: &[&'static str]) {
                match family {
                    $(Family::$variant => slice.$module = read_section(&mut self.$module, last, paused),)*
                }
            }
        }
    };
}
crate::kit::family::for_each_family!(probe_hub);

/// The families in the order a slice reads them ([`FamilyDef::read_rank`]).
fn read_order() -> Vec<Family> {
    let mut order: Vec<&FamilyDef> = FAMILIES.iter().collect();
    order.sort_by_key(|f| f.read_rank);
    order.into_iter().map(|f| f.family).collect()
}

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error(
        "this mdiag was built without its eBPF object (AYA_BUILD_SKIP was set); rebuild with `cargo xtask run` or `cargo build`"
    )]
    NoObject,
    #[error("loading the eBPF object failed: {0}")]
    Load(#[from] aya::EbpfError),
    #[error("no probe family could be attached: {0}")]
    NothingAttached(String),
}

/// What to observe.
#[derive(Debug, Clone)]
pub struct ProbeConfig {
    /// Thread-group id of the target; `None` = host-wide.
    pub target_tgid: Option<u32>,
    /// The families to run; the others are left out by choice, with a
    /// status that says so.
    pub families: Selection,
    /// Take call stacks (on CPU in `perf`, off CPU in `contention`) of the
    /// target: `mdiag record` does; the agent does not (its windows keep no
    /// stacks, and off-CPU stack walks cost the target CPU at every switch).
    pub stacks: bool,
    /// The perf family's sampling rate, Hz per CPU (1 to
    /// [`mdiag_common::perf::MAX_SAMPLE_HZ`]).
    pub sample_hz: u64,
}

impl Default for ProbeConfig {
    fn default() -> Self {
        Self {
            target_tgid: None,
            families: Selection::default(),
            stacks: false,
            sample_hz: mdiag_common::perf::DEFAULT_SAMPLE_HZ,
        }
    }
}

/// Loaded and attached probes. Dropping it detaches every program.
pub struct Probes {
    // Field order matters for drop: readers (map fds) before the object.
    /// Every family's reader.
    pub readers: Readers,
    status: Vec<ProbeStatus>,
    /// The families the user chose (the others are left out).
    selection: Selection,
    wiredtiger_retry: wiredtiger::Retry,
    /// The per-event families' links, for the agent's duty cycle.
    cycle: cycle::Cycle,
    ebpf: Ebpf,
}

impl Probes {
    /// Loads the object and attaches every family of [`FAMILIES`] that
    /// attaches at start; a family that cannot is recorded with its reasons
    /// and skipped.
    pub fn attach(config: ProbeConfig) -> Result<Self, ProbeError> {
        if crate::EBPF_OBJECT.is_empty() {
            return Err(ProbeError::NoObject);
        }
        load::raise_memlock();
        let selection = config.families.clone();
        let (mut cx, ebpf) = load::load(config)?;
        let mut probes = Self {
            readers: Readers::default(),
            status: Vec::new(),
            selection,
            wiredtiger_retry: wiredtiger::Retry::default(),
            cycle: cycle::Cycle::default(),
            ebpf,
        };
        for family in FAMILIES.iter().filter(|f| !f.later) {
            let (status, attached) = probes.attach_chosen(family, |p| (family.attach)(p, &cx));
            probes.status.extend(status);
            if attached {
                cx.attached.push(family.family);
            }
        }
        if probes.readers().next().is_none() {
            let why = probes
                .status
                .iter()
                .flat_map(|s| s.programs.iter())
                .filter_map(|p| p.error.as_ref().map(|e| format!("{}: {e}", p.attach_point)))
                .collect::<Vec<_>>()
                .join("; ");
            return Err(ProbeError::NothingAttached(why));
        }
        probes.cycle = cycle::Cycle::new(cx.links.take());
        drop(cx);
        load::release_freed_memory();
        Ok(probes)
    }

    /// Every attached family's reader, in the order a slice reads them: the
    /// families whose per-thread times are split at the cut first (syscalls
    /// credits its waits in flight up to the moment it is read, closest to
    /// the slice's end), then the others, the slow reads last (perf
    /// symbolizes). The one table that drives the clock's start
    /// ([`Self::start_clock`]), every slice ([`Self::take_slice`]) and the
    /// "nothing attached" check.
    pub fn readers(&mut self) -> impl Iterator<Item = &mut dyn FamilyReader> {
        self.readers_and_object().0
    }

    /// Every attached family's section of the slice that ends now (its time
    /// and mongod's section left to the caller); a family whose read fails
    /// has no section, with a warning. The `last` slice also lists the
    /// checkpoints still running.
    pub fn take_slice(&mut self, last: bool) -> Slice {
        let paused = self.paused_families();
        let mut slice = Slice::default();
        for family in read_order() {
            self.readers.read_into(family, &mut slice, last, &paused);
        }
        slice
    }

    /// Reads a running target's symbols for the families that symbolize
    /// (perf) before the clock starts, so that no slice waits for them. Not
    /// for a held child: it still maps mdiag's own code.
    pub fn preload_symbols(&mut self, pid: u32) {
        if let Some(perf) = self.readers.perf.as_mut() {
            perf.preload(pid);
        }
    }

    /// Starts every family's slices now, at the recording's start: counts
    /// made between attach and this instant are left out, so the first
    /// slice holds only its own time (every family is read at once).
    /// Returns the instant the slices start at: taken after perf's drain,
    /// just before the snapshots, which are taken in the order the slices
    /// read them (the families whose threads' times are split at the cut
    /// first), so each family's first slice spans the recording's first
    /// slice as closely as its later ones do.
    pub fn start_clock(&mut self) -> std::time::Instant {
        // Samples taken before the clock are drained and dropped (no
        // symbols are read: a held child still maps mdiag's own code).
        self.rebase_all(true);
        let start = std::time::Instant::now();
        self.rebase_all(false);
        start
    }

    /// Rebases, in slice order, the readers that do so before the clock
    /// (`before_clock`) or after it.
    fn rebase_all(&mut self, before_clock: bool) {
        for reader in self.readers() {
            if reader.rebases_before_clock() != before_clock {
                continue;
            }
            if let Err(e) = reader.rebase() {
                let family = reader.family();
                tracing::warn!(family, "could not start at the clock: {e}");
            }
        }
    }

    /// Detaches the per-event families (the agent's duty cycle, see
    /// [`cycle`]): they cost nothing and have no section in the slices
    /// until [`Self::resume_events`].
    pub fn pause_events(&mut self) {
        if self.cycle.is_paused() {
            return;
        }
        if let Err(e) = self.cycle.pause(&mut self.ebpf) {
            tracing::warn!("duty cycle: {e}");
        }
    }

    /// Attaches the per-event families again: each forgets what it had in
    /// flight, then its slices start from now.
    pub fn resume_events(&mut self) {
        if !self.cycle.is_paused() {
            return;
        }
        let paused = self.paused_families();
        for reader in self.readers() {
            if paused.contains(&reader.family())
                && let Err(e) = reader.forget_in_flight()
            {
                tracing::warn!(family = reader.family(), "duty cycle: {e}");
            }
        }
        if let Err(e) = self.cycle.resume(&mut self.ebpf) {
            tracing::warn!("duty cycle: {e}");
        }
        for reader in self.readers() {
            if paused.contains(&reader.family())
                && let Err(e) = reader.rebase()
            {
                tracing::warn!(family = reader.family(), "duty cycle: {e}");
            }
        }
    }

    /// The families the duty cycle has detached now.
    fn paused_families(&self) -> Vec<&'static str> {
        cycle::cycled_families()
            .filter(|f| self.cycle.paused(f))
            .collect()
    }

    /// Whether the per-event families are detached by the duty cycle now.
    pub fn events_paused(&self) -> bool {
        self.cycle.is_paused()
    }

    /// Whether there are per-event programs to cycle at all.
    pub fn events_cyclable(&self) -> bool {
        self.cycle.has_programs()
    }

    /// Kernel run time of the programs of `family` (BPF statistics on:
    /// see [`Self::run_time`]).
    pub fn family_run_time(&self, family: &str) -> std::time::Duration {
        self.cycle
            .programs()
            .filter(|&(f, _)| f == family)
            .filter_map(|(_, p)| self.ebpf.program(p))
            .filter_map(|p| p.info().ok())
            .map(|i| i.run_time())
            .sum()
    }

    /// Status of every family and program, for the recording.
    pub fn status(&self) -> &[ProbeStatus] {
        &self.status
    }

    /// Time the kernel has spent running this object's programs. Counted
    /// only while BPF run-time statistics are on (`aya::sys::enable_stats`,
    /// which the agent holds for as long as it runs); zero otherwise.
    pub fn run_time(&self) -> std::time::Duration {
        self.ebpf
            .programs()
            .filter_map(|(_, p)| p.info().ok())
            .map(|i| i.run_time())
            .sum()
    }

    /// For a child held before `exec` (`record -- CMD`): when the WiredTiger
    /// family found nothing in it (it maps only mdiag's code yet), attaches
    /// to the objects `exe` will map at start, so the first checkpoint is
    /// seen however soon it comes (see [`wiredtiger::attach_before_exec`]).
    pub fn attach_before_exec(&mut self, pid: u32, exe: &std::path::Path) {
        if self.readers.wiredtiger.is_some() {
            return;
        }
        let Some(pos) = self.wiredtiger_not_found() else {
            return;
        };
        if let Some((status, reader)) = wiredtiger::attach_before_exec(&mut self.ebpf, pid, exe) {
            self.status[pos] = status;
            self.readers.wiredtiger = reader;
        }
    }

    /// Tries the WiredTiger family again when it found no WiredTiger in the
    /// target yet and the target's executable mappings changed since the
    /// last try (Python imports its binding late; a program may `dlopen` the
    /// library). Call it at every poll: it does nothing once attached,
    /// host-wide, after a real failure, or while the mappings stay the same.
    fn retry_wiredtiger(&mut self, target: Option<u32>) {
        if self.readers.wiredtiger.is_some() {
            return;
        }
        let Some(pid) = target else { return };
        let Some(pos) = self.wiredtiger_not_found() else {
            return;
        };
        if !self.wiredtiger_retry.mappings_changed(pid) {
            return;
        }
        let (status, reader) = wiredtiger::attach(&mut self.ebpf, target);
        if let Some(status) = status {
            self.status[pos] = status;
        }
        self.readers.wiredtiger = reader;
    }

    /// Index of the WiredTiger status when it says only "not found".
    fn wiredtiger_not_found(&self) -> Option<usize> {
        self.status
            .iter()
            .position(|s| s.family == wiredtiger::FAMILY)
            .filter(|&pos| not_applicable(&self.status[pos]))
    }
}

impl Probes {
    /// Attaches the families that attach later ([`FamilyDef::later`]), in
    /// table order, now that `plan` says what they need (the allocator's
    /// windows are calibrated now, its entry points read from the first
    /// poll on); a failure is only a status.
    pub fn attach_later(&mut self, plan: &LaterPlan) {
        for family in FAMILIES.iter().filter(|f| f.later) {
            let (status, _) = self.attach_chosen(family, |p| {
                (p.attach_later_family(family.family, plan), true)
            });
            self.status.extend(status);
        }
    }

    /// Attaches `family`, one that attaches later, by `plan`.
    fn attach_later_family(&mut self, family: Family, plan: &LaterPlan) -> Option<ProbeStatus> {
        match family {
            // Paced by the budget when it has one.
            Family::Alloc => {
                let (status, probe) = alloc::attach(&mut self.ebpf, plan.target, plan.alloc);
                self.readers.alloc = probe;
                if let (Some(a), Some(budget)) = (self.readers.alloc.as_mut(), plan.alloc_budget) {
                    a.set_budget(budget);
                }
                status
            }
            // The others attach at start.
            _ => None,
        }
    }

    /// Runs `attach` for `family` when the user chose it; else its status
    /// says it was left out by choice (nothing of it is loaded). Returns
    /// the status and whether the family's reader is attached.
    fn attach_chosen(
        &mut self,
        family: &FamilyDef,
        attach: impl FnOnce(&mut Self) -> (Option<ProbeStatus>, bool),
    ) -> (Option<ProbeStatus>, bool) {
        if self.selection.includes(family.family) {
            attach(self)
        } else {
            let status = ProbeStatus::left_out(family.name, self.selection.left_out_reason());
            (Some(status), false)
        }
    }

    /// Every attached family's reader in slice order, beside the loaded
    /// object their lifecycle hooks act on.
    fn readers_and_object(&mut self) -> (impl Iterator<Item = &mut dyn FamilyReader>, &mut Ebpf) {
        let mut all = self.readers.all();
        let ordered: Vec<&mut dyn FamilyReader> = read_order()
            .into_iter()
            .filter_map(|f| all[f.index()].take())
            .collect();
        (ordered.into_iter(), &mut self.ebpf)
    }

    /// What runs between slices: every family's [`FamilyReader::poll`]
    /// (ring buffers drained, windows opened or closed; a status that
    /// changed replaces the family's), then WiredTiger tried again for
    /// `target` when it found nothing yet ([`Self::retry_wiredtiger`]).
    /// `rec_start` is the recording's time zero.
    pub fn poll(
        &mut self,
        now: std::time::Instant,
        rec_start: std::time::Instant,
        target: Option<u32>,
    ) {
        let (readers, ebpf) = self.readers_and_object();
        let changed: Vec<ProbeStatus> = readers
            .filter_map(|r| r.poll(ebpf, now, rec_start))
            .collect();
        for new in changed {
            if let Some(old) = self.status.iter_mut().find(|s| s.family == new.family) {
                *old = new;
            }
        }
        self.retry_wiredtiger(target);
    }

    /// The soonest instant a family must be polled at, if any asks
    /// ([`FamilyReader::next_due`]).
    pub fn next_due(&mut self) -> Option<std::time::Instant> {
        self.readers().filter_map(|r| r.next_due()).min()
    }

    /// Before the last slice: every family closes what is still open
    /// ([`FamilyReader::finish`]).
    pub fn finish(&mut self, rec_start: std::time::Instant) {
        let (readers, ebpf) = self.readers_and_object();
        for reader in readers {
            reader.finish(ebpf, rec_start);
        }
    }

    /// The period between full allocator windows its budget allows now
    /// (`None`: the allocator family is not attached).
    pub fn alloc_every(&self) -> Option<std::time::Duration> {
        self.readers.alloc.as_ref().map(alloc::AllocProbe::every)
    }

    /// Adds what the families keep beside their slices to `recording`:
    /// the allocator's record (what was probed, the calibration, the cost)
    /// and the kernel stacks the contention slices refer to, by id.
    pub fn fill_recording(&self, recording: &mut crate::recording::Recording) {
        if let Some(alloc) = &self.readers.alloc {
            recording.alloc = Some(alloc.record());
        }
        if let Some(contention) = &self.readers.contention {
            recording.kernel_stacks = contention.kernel_stacks();
        }
    }
}

/// The section `reader` read for the slice that ends now; none when the
/// family is not attached, paused by the duty cycle, or its read failed
/// (with a warning).
fn read_section<R: SectionReader>(
    reader: &mut Option<R>,
    last: bool,
    paused: &[&'static str],
) -> Option<R::Section> {
    let reader = reader.as_mut()?;
    if paused.contains(&reader.family()) {
        return None;
    }
    reader
        .read(last)
        .map_err(|e| tracing::warn!("{} slice lost: {e}", reader.family()))
        .ok()
}
