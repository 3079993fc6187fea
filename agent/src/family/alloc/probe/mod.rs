//! Allocator family, user side: latency of the target's allocation and free
//! entry points in short sampled windows.
//!
//! A uprobe + uretprobe pair costs microseconds per call, a fast-path malloc
//! tens of nanoseconds: probing every call of a busy server would slow it many
//! times over. So the pair is attached to every entry point of the target's
//! allocator (found by the symbols module) only for a short window (default
//! 100 ms every 10 s, `--alloc-window` / `--alloc-every`) and detached in
//! between, when the target pays nothing. The record loop drives the windows
//! through [`AllocProbe::poll`]; each closed window becomes an
//! [`AllocWindow`] in the slice where it ended.
//!
//! At start-up the same pair is calibrated on a do-nothing function of mdiag
//! itself ([`calibrate`]): the cost per probed call (for the overhead imposed
//! on the target) and the part of it that shows inside a measured latency
//! (to correct percentiles), once per process (a later attach, as of the
//! agent to a restarted mongod, reuses it). Entry points are read from the
//! first poll on, on a thread of their own ([`crate::offload`]: mongod's
//! symbol table would hold the record loop for seconds; a spawned target
//! that has not exec'd yet is waited for, up to [`EXEC_GRACE`]); a window
//! due before they are read is skipped. When the allocator is unknown or
//! has no entry points the family is "not applicable" and tries again at
//! the next window. Host-wide recordings do not try it.

pub mod budget;
pub mod calibrate;
mod entry_points;
mod paced;
mod pair;
pub mod schedule;
pub mod stats;
mod status;

pub use entry_points::{class_min_bytes, size_mode};
pub(crate) use pair::{PairLinks, attach_pair, detach_pair};

use std::{num::NonZeroU32, time::Instant};

use aya::{
    Ebpf,
    maps::{Array, HashMap as BpfHashMap, MapData, PerCpuArray},
    programs::uprobe::{UProbeAttachLocation, UProbeAttachPoint},
};
use mdiag_common::alloc::{
    AllocControl, AllocCounters, AllocHist, AllocStack, MAP_CONTROL, MAP_COUNTERS, MAP_HIST,
    MAP_STACKS, SIZE_CLASSES, cookie, hist_index,
};

use self::entry_points::{Resolved, resolve};
use self::schedule::{Action, WindowSchedule, Windows};
use self::stats::{drops_between, hist_between, sum_counters, sum_hists, trimmed};
use self::status::{status, status_of};
use super::section::{
    AllocFunctionWindow, AllocOverhead, AllocRecord, AllocSizeClassWindow, AllocSlice, AllocWindow,
};
use crate::kit::probe::{
    FamilyReader, NOT_APPLICABLE, ProbeStatus, ReadError, SectionReader, TakeMapError,
    monotonic_now_ns, process_cpu::cpu_ns, read_per_cpu, take_map,
};
use crate::offload::{Offloaded, Polled};

/// Family name in the recording's `probes`.
pub const FAMILY: &str = crate::kit::family::Family::Alloc.name();

/// Whether `pid` still runs mdiag's own executable (a spawned target before
/// its `exec`: its maps are mdiag's, its allocator mdiag's).
fn still_mdiag(pid: u32) -> bool {
    match (
        std::fs::read_link(format!("/proc/{pid}/exe")),
        std::fs::read_link("/proc/self/exe"),
    ) {
        (Ok(target), Ok(own)) => target == own,
        _ => false,
    }
}

/// How long a target without an allocator yet is asked again (a spawned
/// target released just before the first poll may still be in exec).
const EXEC_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum AllocError {
    #[error(transparent)]
    Read(#[from] ReadError),
    #[error("program {0}: {1}")]
    Program(&'static str, String),
    #[error("calibration: {0}")]
    Calibration(String),
}

impl From<TakeMapError> for AllocError {
    fn from(e: TakeMapError) -> Self {
        Self::Read(e.into())
    }
}

/// The family's maps, owned.
pub(crate) struct AllocMaps {
    control: Array<MapData, AllocControl>,
    stacks: BpfHashMap<MapData, u32, AllocStack>,
    hist: PerCpuArray<MapData, AllocHist>,
    counters: PerCpuArray<MapData, AllocCounters>,
}

impl AllocMaps {
    fn take(ebpf: &mut Ebpf) -> Result<Self, AllocError> {
        Ok(Self {
            control: take_map(ebpf, MAP_CONTROL)?,
            stacks: take_map(ebpf, MAP_STACKS)?,
            hist: take_map(ebpf, MAP_HIST)?,
            counters: take_map(ebpf, MAP_COUNTERS)?,
        })
    }

    pub(crate) fn set_control(&mut self, tgid: u32, open: u32) -> Result<(), AllocError> {
        self.control
            .set(0, &AllocControl { tgid, open }, 0)
            .map_err(|e| ReadError::map(MAP_CONTROL)(e).into())
    }

    pub(crate) fn read_hist(&self, index: u32) -> Result<AllocHist, AllocError> {
        Ok(sum_hists(&read_per_cpu(&self.hist, index, MAP_HIST)?))
    }

    fn read_counters(&self) -> Result<AllocCounters, AllocError> {
        Ok(sum_counters(&read_per_cpu(
            &self.counters,
            0,
            MAP_COUNTERS,
        )?))
    }

    /// Forgets every thread's entries (calls that never returned inside a
    /// window). Only called while detached.
    pub(crate) fn clear_stacks(&mut self) {
        let keys: Vec<u32> = self.stacks.keys().flatten().collect();
        for k in keys {
            let _ = self.stacks.remove(&k);
        }
    }
}

/// Loads the pair, calibrates it and prepares the windows. No status
/// without a target (not tried) or with windows off (`--alloc-every 0`).
pub fn attach(
    ebpf: &mut Ebpf,
    target: Option<u32>,
    schedule: WindowSchedule,
) -> (Option<ProbeStatus>, Option<AllocProbe>) {
    let Some(pid) = target.and_then(NonZeroU32::new) else {
        tracing::debug!(family = FAMILY, "not tried: no target process");
        return (None, None);
    };
    if !schedule.enabled() {
        tracing::debug!(family = FAMILY, "off (--alloc-every 0)");
        return (None, None);
    }
    let point = "uprobe/allocator entry points (resolved at the first window)".to_owned();
    let mut maps = match AllocMaps::take(ebpf) {
        Ok(m) => m,
        Err(e) => return (Some(status(point, Some(e.to_string()))), None),
    };
    let (calibration, reused) = match calibrate::calibrated(ebpf, &mut maps) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(family = FAMILY, "{e}");
            return (Some(status(point, Some(e.to_string()))), None);
        }
    };
    tracing::info!(
        family = FAMILY,
        pair_cost_ns = calibration.pair_cost_ns,
        inside_ns = calibration.inside_ns,
        reused,
        "calibrated"
    );
    let probe = AllocProbe::new(maps, pid, schedule, calibration);
    match probe {
        Ok(p) => (Some(status(point, None)), Some(p)),
        Err(e) => (Some(status(point, Some(e.to_string()))), None),
    }
}

/// An open window.
struct OpenWindow {
    links: PairLinks,
    start_ns: u64,
    start_ms: u64,
}

/// The allocator family's state: windows, cumulative readings, results.
pub struct AllocProbe {
    maps: AllocMaps,
    pid: NonZeroU32,
    windows: Windows,
    resolved: Option<Resolved>,
    /// The entry points being read, off the record loop's thread.
    resolving: Option<Offloaded<Result<Resolved, String>>>,
    /// Whether the early reading (at the first poll) was started.
    tried_early: bool,
    open: Option<OpenWindow>,
    /// Cumulative histograms after the previous window, per point and class.
    last_hists: Vec<AllocHist>,
    last_counters: AllocCounters,
    pending: Vec<AllocWindow>,
    record: AllocRecord,
    /// Set when the entry points changed the family's status.
    status: Option<ProbeStatus>,
    cpu_start_ns: Option<u64>,
    cpu_last_ns: Option<u64>,
    hits: u64,
    /// Windows paced by a budget (the agent's) instead of `windows`.
    paced: Option<paced::Paced>,
    /// The last closed window's start and end, monotonic ns.
    last_window_ns: (u64, u64),
}

impl AllocProbe {
    fn new(
        mut maps: AllocMaps,
        pid: NonZeroU32,
        schedule: WindowSchedule,
        calibration: super::section::AllocCalibration,
    ) -> Result<Self, AllocError> {
        maps.set_control(pid.get(), 0)?;
        let last_counters = maps.read_counters()?;
        let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Ok(Self {
            maps,
            pid,
            windows: Windows::new(schedule, Instant::now()),
            resolved: None,
            resolving: None,
            tried_early: false,
            open: None,
            last_hists: Vec::new(),
            last_counters,
            pending: Vec::new(),
            record: AllocRecord {
                window_ms: ms(schedule.window),
                every_ms: ms(schedule.every),
                calibration: Some(calibration),
                ..AllocRecord::default()
            },
            status: None,
            cpu_start_ns: cpu_ns(pid.get()),
            cpu_last_ns: None,
            hits: 0,
            paced: None,
            last_window_ns: (0, 0),
        })
    }

    /// Changes the period between windows (see [`Windows::set_every`]).
    pub fn set_every(&mut self, every: std::time::Duration) {
        self.windows.set_every(every);
        self.record.every_ms = u64::try_from(every.as_millis()).unwrap_or(u64::MAX);
    }

    /// The period between windows now (under a budget: between full
    /// windows, as the projection allows).
    pub fn every(&self) -> std::time::Duration {
        match &self.paced {
            Some(p) => p.period(),
            None => self.windows.schedule().every,
        }
    }

    /// Windows closed early for running over their budget's allowance.
    pub fn closed_early(&self) -> u64 {
        self.paced.as_ref().map_or(0, |p| p.early)
    }

    /// When the next window opens or closes, or an open one's cost is
    /// checked (for the record loop's sleep).
    fn due(&self) -> Option<Instant> {
        match &self.paced {
            Some(p) => Some(p.next_due()),
            None => self.windows.next_due(),
        }
    }

    /// The calibrated cost of one probe pair, ns.
    fn pair_cost_ns(&self) -> u64 {
        self.record
            .calibration
            .as_ref()
            .map_or(0, |c| c.pair_cost_ns)
    }

    /// The probe hits of the window open now, so far (one read of the
    /// per-CPU counters).
    fn hits_open(&self) -> Option<u64> {
        self.open.as_ref()?;
        let now = self.maps.read_counters().ok()?;
        Some(now.entries.saturating_sub(self.last_counters.entries))
    }

    /// A new status for the family, once (after entry points were resolved
    /// or found missing).
    pub fn take_status(&mut self) -> Option<ProbeStatus> {
        self.status.take()
    }

    /// Opens or closes a window when due. `rec_start` is the recording's
    /// start (windows are also stamped in recording time). Never blocks for
    /// long: attach and detach take a few milliseconds.
    fn step(&mut self, ebpf: &mut Ebpf, now: Instant, rec_start: Instant) {
        if self.resolved.is_none() && self.resolving.is_none() && !self.tried_early {
            // Read early, so the first window finds the entry points ready.
            self.tried_early = true;
            self.start_resolving();
        }
        if self.paced.is_some() {
            self.poll_paced(ebpf, now, rec_start);
            return;
        }
        match self.windows.step(now) {
            Action::Nothing => {}
            Action::Open => self.open_window(ebpf, rec_start),
            Action::Close => {
                self.close_window(ebpf, rec_start);
            }
        }
    }

    /// Starts reading the entry points on a thread of its own: mongod's
    /// symbol table would hold the record loop for seconds (see
    /// [`crate::offload`]). A target just spawned may not have exec'd yet,
    /// so a target with no allocator yet is asked again for up to
    /// [`EXEC_GRACE`].
    fn start_resolving(&mut self) {
        let pid = self.pid.get();
        let job = Offloaded::start("mdiag-alloc-symbols", move || {
            let start = Instant::now();
            // A child released just now may still be mdiag's own image.
            while still_mdiag(pid) && start.elapsed() < EXEC_GRACE {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            loop {
                match resolve(pid) {
                    Err(why) if why.starts_with(NOT_APPLICABLE) && start.elapsed() < EXEC_GRACE => {
                        std::thread::sleep(std::time::Duration::from_millis(100));
                    }
                    done => return done,
                }
            }
        });
        match job {
            Ok(job) => self.resolving = Some(job),
            Err(e) => {
                let why = format!("cannot start a thread to read the entry points: {e}");
                self.status = Some(status(
                    "uprobe/allocator entry points".to_owned(),
                    Some(why),
                ));
            }
        }
    }

    /// The entry points, once read: `false` while they are not (the window
    /// due now is skipped, and the family's status says why when they
    /// cannot be found; the next window asks again).
    fn entry_points_ready(&mut self) -> bool {
        if self.resolved.is_some() {
            return true;
        }
        let Some(job) = &self.resolving else {
            self.start_resolving();
            return false;
        };
        let result = match job.poll() {
            Polled::Pending => return false,
            Polled::Ready(r) => r,
            Polled::Lost => Err("the thread reading the entry points ended".to_owned()),
        };
        self.resolving = None;
        match result {
            Ok(r) => {
                let point = format!("uprobe/{}: {} entry points", r.object, r.points.len());
                self.status = Some(status(point, None));
                self.record.allocator = Some(r.kind);
                self.record.object = r.object.clone();
                self.record.functions = r.points.clone();
                self.last_hists = Vec::new();
                for id in 0..r.points.len() as u32 {
                    for class in 0..SIZE_CLASSES {
                        self.last_hists.push(
                            self.maps
                                .read_hist(hist_index(id, class))
                                .unwrap_or_default(),
                        );
                    }
                }
                self.resolved = Some(r);
                true
            }
            Err(why) => {
                tracing::info!(family = FAMILY, "no window: {why}");
                let point = "uprobe/allocator entry points".to_owned();
                self.status = Some(status(point, Some(why)));
                false
            }
        }
    }

    fn open_window(&mut self, ebpf: &mut Ebpf, rec_start: Instant) {
        if !self.entry_points_ready() {
            return;
        }
        let Some(r) = &self.resolved else { return };
        let points: Vec<UProbeAttachPoint<'static>> = r
            .points
            .iter()
            .enumerate()
            .map(|(id, p)| UProbeAttachPoint {
                location: UProbeAttachLocation::AbsoluteOffset(p.file_offset),
                cookie: Some(cookie(id as u32, size_mode(p.role))),
            })
            .collect();
        let links = match attach_pair(ebpf, &points, &r.attach_path, self.pid) {
            Ok(l) => {
                // Say how the pair is attached (the programs that run).
                let point = format!(
                    "{}/{}: {} entry points",
                    l.kind.prefix(),
                    r.object,
                    r.points.len()
                );
                self.status = Some(status_of(l.kind, point, None));
                l
            }
            Err(e) => {
                tracing::warn!(family = FAMILY, "window not opened: {e}");
                self.record.failed_windows += 1;
                self.record.last_error = Some(e.to_string());
                return;
            }
        };
        let t0 = monotonic_now_ns();
        let opened = self.maps.set_control(self.pid.get(), 1);
        let t1 = monotonic_now_ns();
        if let Err(e) = opened {
            tracing::warn!(family = FAMILY, "window not opened: {e}");
            detach_pair(ebpf, links);
            return;
        }
        let opened_at = Instant::now();
        self.windows.opened_at(opened_at);
        self.open = Some(OpenWindow {
            links,
            start_ns: t0 + (t1 - t0) / 2,
            start_ms: ms_between(rec_start, opened_at),
        });
    }

    /// Closes the open window; returns the target's CPU time read after
    /// the detach and the counters (`None` when none was open or the
    /// target is gone).
    fn close_window(&mut self, ebpf: &mut Ebpf, rec_start: Instant) -> Option<u64> {
        let open = self.open.take()?;
        let now = Instant::now();
        let t0 = monotonic_now_ns();
        let closed = self.maps.set_control(self.pid.get(), 0);
        let t1 = monotonic_now_ns();
        detach_pair(ebpf, open.links);
        if let Err(e) = closed {
            tracing::warn!(family = FAMILY, "{e}");
        }
        match self.read_window(open.start_ns, t0 + (t1 - t0) / 2) {
            Ok(mut w) => {
                self.last_window_ns = (w.start_ns, w.end_ns);
                w.start_ms = open.start_ms;
                w.end_ms = ms_between(rec_start, now);
                self.pending.push(w);
            }
            Err(e) => tracing::warn!(family = FAMILY, "window lost: {e}"),
        }
        self.maps.clear_stacks();
        let cpu = cpu_ns(self.pid.get());
        if cpu.is_some() {
            self.cpu_last_ns = cpu;
        }
        cpu
    }

    fn read_window(&mut self, start_ns: u64, end_ns: u64) -> Result<AllocWindow, AllocError> {
        let counters = self.maps.read_counters()?;
        let probe_hits = counters.entries.saturating_sub(self.last_counters.entries);
        let drops = drops_between(&self.last_counters, &counters);
        self.last_counters = counters;
        self.hits += probe_hits;
        let mut functions = Vec::new();
        let Some(r) = &self.resolved else {
            return Err(AllocError::Calibration("no entry points".into()));
        };
        for (id, p) in r.points.iter().enumerate() {
            let mut classes = Vec::new();
            let mut all = Vec::new();
            for class in 0..SIZE_CLASSES {
                let slot = id * SIZE_CLASSES as usize + class as usize;
                let now = self.maps.read_hist(hist_index(id as u32, class))?;
                let before = self.last_hists.get(slot).copied().unwrap_or_default();
                let w = hist_between(&before, &now);
                if let Some(s) = self.last_hists.get_mut(slot) {
                    *s = now;
                }
                if w.count == 0 {
                    continue;
                }
                if class > 0 {
                    classes.push(AllocSizeClassWindow {
                        min_bytes: class_min_bytes(class),
                        count: w.count,
                        sum_ns: w.sum_ns,
                        buckets: trimmed(&w.buckets),
                    });
                }
                all.push(w);
            }
            let total = sum_hists(&all);
            if total.count == 0 {
                continue;
            }
            functions.push(AllocFunctionWindow {
                symbol: p.symbol.clone(),
                count: total.count,
                sum_ns: total.sum_ns,
                buckets: trimmed(&total.buckets),
                size_classes: classes,
            });
        }
        Ok(AllocWindow {
            start_ns,
            end_ns,
            start_ms: 0,
            end_ms: 0,
            probe_hits,
            functions,
            drops,
        })
    }

    /// The windows that closed since the previous slice.
    pub fn next_slice(&mut self) -> AllocSlice {
        AllocSlice {
            windows: std::mem::take(&mut self.pending),
        }
    }

    /// Closes a window still open (call before the last slice).
    fn close_last(&mut self, ebpf: &mut Ebpf, rec_start: Instant) {
        if self.open.is_some() {
            self.close_window(ebpf, rec_start);
        }
        let _ = self.maps.set_control(0, 0);
        if let Some(cpu) = cpu_ns(self.pid.get()) {
            self.cpu_last_ns = Some(cpu);
        }
    }

    /// The recording's top-level record: what was probed, the calibration,
    /// the overhead imposed on the target.
    pub fn record(&self) -> AllocRecord {
        let mut r = self.record.clone();
        let cost = self.pair_cost_ns();
        let cpu = match (self.cpu_start_ns, self.cpu_last_ns) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        r.overhead = Some(AllocOverhead {
            probe_hits: self.hits,
            pair_cost_ns: cost,
            target_cpu_ns: cpu,
            overhead_ppm: stats::overhead_ppm(self.hits, cost, cpu),
        });
        r
    }
}

/// Milliseconds from `from` to `to` (0 when `to` is earlier).
fn ms_between(from: Instant, to: Instant) -> u64 {
    u64::try_from(to.saturating_duration_since(from).as_millis()).unwrap_or(u64::MAX)
}

/// Windows are opened and closed by the record loop ([`AllocProbe::poll`]);
/// a slice only collects the windows that closed.
impl FamilyReader for AllocProbe {
    fn family(&self) -> &'static str {
        FAMILY
    }

    /// Opens or closes a window when due ([`AllocProbe::step`]); a status
    /// once the entry points were resolved or found missing.
    fn poll(&mut self, ebpf: &mut Ebpf, now: Instant, rec_start: Instant) -> Option<ProbeStatus> {
        self.step(ebpf, now, rec_start);
        self.take_status()
    }

    fn next_due(&self) -> Option<Instant> {
        self.due()
    }

    fn finish(&mut self, ebpf: &mut Ebpf, rec_start: Instant) {
        self.close_last(ebpf, rec_start);
    }
}

impl SectionReader for AllocProbe {
    type Section = AllocSlice;

    fn read(&mut self, _last: bool) -> Result<AllocSlice, ReadError> {
        Ok(self.next_slice())
    }
}
