//! The probe hub: loading the eBPF object, attaching each family on its own
//! (the families chosen: `--probes`), and driving their readers slice by
//! slice. Each family's attach and reader live in its folder
//! (`family/<name>/probe.rs`); this module names them in one table
//! ([`FAMILIES`]) and one struct ([`Probes`]). Each family degrades alone: a program
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
use crate::recording::{ProbeStatus, Slice};

/// One probe family as [`Probes::attach`] sees it: its entry in
/// [`FAMILIES`] calls the family's own `attach` (which decides which program
/// is essential and which precondition it needs) and keeps its reader in its
/// field of [`Probes`].
pub struct FamilyDef {
    /// The name its [`ProbeStatus`] carries.
    pub name: &'static str,
    /// Its `(program, BTF tracepoint)` pairs, checked against the kernel's
    /// BTF before anything attaches (none for uprobes and perf events).
    pub tracepoints: &'static [(&'static str, &'static str)],
    /// When and how it attaches.
    pub attach: Attach,
}

impl FamilyDef {
    /// A family attached in [`Probes::attach`].
    pub const fn at_start(
        name: &'static str,
        tracepoints: &'static [(&'static str, &'static str)],
        attach: fn(&mut Probes, &AttachContext) -> Option<ProbeStatus>,
    ) -> Self {
        Self {
            name,
            tracepoints,
            attach: Attach::AtStart(attach),
        }
    }
}

/// When a family attaches.
pub enum Attach {
    /// In [`Probes::attach`], in table order: attaches the family's programs,
    /// stores its reader in its field of the [`Probes`] being built (which
    /// owns the loaded object), and returns its status (`None`: not tried).
    AtStart(fn(&mut Probes, &AttachContext) -> Option<ProbeStatus>),
    /// In [`Probes::attach_later`], once the caller knows what the family
    /// needs ([`LaterPlan`]: `alloc`'s windows and budget), likewise.
    Later(fn(&mut Probes, &LaterPlan) -> Option<ProbeStatus>),
}

/// What the families that attach later ([`Attach::Later`]) need, which the
/// record loop or the agent knows only after [`Probes::attach`].
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

/// Every probe family, in the order [`Probes::attach`] attaches them and
/// their statuses stand in a recording (`alloc` last, from
/// [`Probes::attach_later`]). `docs/ARCHITECTURE.md`'s family table lists
/// exactly these (`docs_contract.rs`).
pub const FAMILIES: [FamilyDef; 7] = [
    FamilyDef::at_start(sched::FAMILY, sched::TRACEPOINTS, |probes, cx| {
        let (status, reader) = sched::attach(&mut probes.ebpf, cx);
        probes.sched = reader;
        Some(status)
    }),
    FamilyDef::at_start(softirq::FAMILY, softirq::TRACEPOINTS, |probes, cx| {
        let (status, reader) = softirq::attach(&mut probes.ebpf, cx);
        probes.softirq = reader;
        Some(status)
    }),
    FamilyDef::at_start(syscalls::FAMILY, syscalls::TRACEPOINTS, |probes, cx| {
        let (status, reader) = syscalls::attach(&mut probes.ebpf, cx);
        probes.syscalls = reader;
        Some(status)
    }),
    FamilyDef::at_start(perf::FAMILY, &[], |probes, cx| {
        let (status, reader) = perf::attach(&mut probes.ebpf, cx);
        probes.perf = reader;
        Some(status)
    }),
    // Uprobes in the target's objects: "not applicable" without WiredTiger
    // in it; not tried (no status) host-wide.
    FamilyDef::at_start(wiredtiger::FAMILY, &[], |probes, cx| {
        let (status, reader) = wiredtiger::attach(&mut probes.ebpf, cx.target_tgid);
        probes.wiredtiger = reader;
        status
    }),
    FamilyDef::at_start(contention::FAMILY, contention::TRACEPOINTS, |probes, cx| {
        let sched_attached = probes.sched.is_some();
        let (status, reader) = contention::attach(&mut probes.ebpf, cx, sched_attached);
        probes.contention = reader;
        Some(status)
    }),
    // Attached in `Probes::attach_later`, once the record loop or the agent
    // knows its windows and budget; paced by the budget when it has one.
    FamilyDef {
        name: alloc::FAMILY,
        tracepoints: &[],
        attach: Attach::Later(|probes, plan| {
            let (status, probe) = alloc::attach(&mut probes.ebpf, plan.target, plan.alloc);
            probes.alloc = probe;
            if let (Some(a), Some(budget)) = (probes.alloc.as_mut(), plan.alloc_budget) {
                a.set_budget(budget);
            }
            status
        }),
    },
];

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
#[derive(Debug, Clone, Default)]
pub struct ProbeConfig {
    /// Thread-group id of the target; `None` = host-wide.
    pub target_tgid: Option<u32>,
    /// The families to run; the others are left out by choice, with a
    /// status that says so.
    pub families: Selection,
}

/// Loaded and attached probes. Dropping it detaches every program.
pub struct Probes {
    // Field order matters for drop: readers (map fds) before the object.
    pub sched: Option<sched::SchedReader>,
    pub softirq: Option<softirq::SoftirqReader>,
    pub syscalls: Option<syscalls::SyscallsReader>,
    pub wiredtiger: Option<wiredtiger::WiredTigerReader>,
    pub perf: Option<perf::PerfReader>,
    pub alloc: Option<alloc::AllocProbe>,
    pub contention: Option<contention::ContentionReader>,
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
        let (cx, ebpf) = load::load(config)?;
        let mut probes = Self {
            sched: None,
            softirq: None,
            syscalls: None,
            wiredtiger: None,
            perf: None,
            alloc: None,
            contention: None,
            status: Vec::new(),
            selection,
            wiredtiger_retry: wiredtiger::Retry::default(),
            cycle: cycle::Cycle::default(),
            ebpf,
        };
        for family in &FAMILIES {
            if let Attach::AtStart(attach) = family.attach
                && let Some(status) = probes.attach_chosen(family, |p| attach(p, &cx))
            {
                probes.status.push(status);
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
        // Exhaustive, in the order of `readers_and_object`: a new reader
        // field does not compile until its section is read here.
        let Probes {
            sched,
            softirq,
            syscalls,
            wiredtiger,
            perf,
            alloc,
            contention,
            status: _,
            selection: _,
            wiredtiger_retry: _,
            cycle: _,
            ebpf: _,
        } = self;
        // Struct fields are evaluated in the order written: slice order.
        Slice {
            syscalls: read_section(syscalls, last, &paused),
            sched: read_section(sched, last, &paused),
            contention: read_section(contention, last, &paused),
            softirq: read_section(softirq, last, &paused),
            wiredtiger: read_section(wiredtiger, last, &paused),
            perf: read_section(perf, last, &paused),
            alloc: read_section(alloc, last, &paused),
            ..Slice::default()
        }
    }

    /// Reads a running target's symbols for the families that symbolize
    /// (perf) before the clock starts, so that no slice waits for them. Not
    /// for a held child: it still maps mdiag's own code.
    pub fn preload_symbols(&mut self, pid: u32) {
        if let Some(perf) = self.perf.as_mut() {
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
        cycle::CYCLED
            .into_iter()
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
        if self.wiredtiger.is_some() {
            return;
        }
        let Some(pos) = self.wiredtiger_not_found() else {
            return;
        };
        if let Some((status, reader)) = wiredtiger::attach_before_exec(&mut self.ebpf, pid, exe) {
            self.status[pos] = status;
            self.wiredtiger = reader;
        }
    }

    /// Tries the WiredTiger family again when it found no WiredTiger in the
    /// target yet and the target's executable mappings changed since the
    /// last try (Python imports its binding late; a program may `dlopen` the
    /// library). Call it at every poll: it does nothing once attached,
    /// host-wide, after a real failure, or while the mappings stay the same.
    fn retry_wiredtiger(&mut self, target: Option<u32>) {
        if self.wiredtiger.is_some() {
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
        self.wiredtiger = reader;
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
    /// Attaches the families that attach later ([`Attach::Later`]), in
    /// table order, now that `plan` says what they need (the allocator's
    /// windows are calibrated now, its entry points read from the first
    /// poll on); a failure is only a status.
    pub fn attach_later(&mut self, plan: &LaterPlan) {
        for family in &FAMILIES {
            if let Attach::Later(attach) = family.attach
                && let Some(status) = self.attach_chosen(family, |p| attach(p, plan))
            {
                self.status.push(status);
            }
        }
    }

    /// Runs `attach` for `family` when the user chose it; else its status
    /// says it was left out by choice (nothing of it is loaded).
    fn attach_chosen(
        &mut self,
        family: &FamilyDef,
        attach: impl FnOnce(&mut Self) -> Option<ProbeStatus>,
    ) -> Option<ProbeStatus> {
        let chosen = Family::from_name(family.name).is_none_or(|f| self.selection.includes(f));
        if chosen {
            attach(self)
        } else {
            Some(ProbeStatus::left_out(
                family.name,
                self.selection.left_out_reason(),
            ))
        }
    }

    /// Every attached family's reader in slice order, beside the loaded
    /// object their lifecycle hooks act on.
    fn readers_and_object(&mut self) -> (impl Iterator<Item = &mut dyn FamilyReader>, &mut Ebpf) {
        // Exhaustive: a new reader field does not compile until it is here.
        let Probes {
            sched,
            softirq,
            syscalls,
            wiredtiger,
            perf,
            alloc,
            contention,
            status: _,
            selection: _,
            wiredtiger_retry: _,
            cycle: _,
            ebpf,
        } = self;
        let table: [Option<&mut dyn FamilyReader>; 7] = [
            syscalls.as_mut().map(|r| r as _),
            sched.as_mut().map(|r| r as _),
            contention.as_mut().map(|r| r as _),
            softirq.as_mut().map(|r| r as _),
            wiredtiger.as_mut().map(|r| r as _),
            perf.as_mut().map(|r| r as _),
            alloc.as_mut().map(|r| r as _),
        ];
        (table.into_iter().flatten(), ebpf)
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

    /// Adds what the families keep beside their slices to `recording`:
    /// the allocator's record (what was probed, the calibration, the cost)
    /// and the kernel stacks the contention slices refer to, by id.
    pub fn fill_recording(&self, recording: &mut crate::recording::Recording) {
        if let Some(alloc) = &self.alloc {
            recording.alloc = Some(alloc.record());
        }
        if let Some(contention) = &self.contention {
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
