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
//! (to correct percentiles). Entry points are resolved at the first window (a
//! spawned target has not exec'd at attach time); when the allocator is
//! unknown or has no entry points the family is "not applicable" and tries
//! again at the next window. Host-wide recordings do not try it.

pub mod calibrate;
pub mod schedule;
pub mod stats;

use std::{
    num::NonZeroU32,
    path::{Path, PathBuf},
    time::Instant,
};

use aya::{
    Ebpf,
    maps::{Array, HashMap as BpfHashMap, MapData, PerCpuArray},
    programs::{
        UProbe,
        uprobe::{UProbeAttachLocation, UProbeAttachPoint, UProbeLinkId, UProbeScope},
    },
};
use mdiag_common::alloc::{
    AllocControl, AllocCounters, AllocHist, AllocStack, MAP_CONTROL, MAP_COUNTERS, MAP_HIST,
    MAP_STACKS, MAX_FUNCS, PROG_ENTER, PROG_ENTER_MULTI, PROG_EXIT, PROG_EXIT_MULTI, SIZE_ARG0,
    SIZE_ARG0_TIMES_ARG1, SIZE_ARG1, SIZE_CLASSES, SIZE_NONE, cookie, hist_index,
};

use self::schedule::{Action, WindowSchedule, Windows};
use self::stats::{drops_between, hist_between, sum_counters, sum_hists, trimmed};
use super::error_chain;
use crate::recording::{
    AllocFunctionWindow, AllocOverhead, AllocRecord, AllocSizeClassWindow, AllocSlice, AllocWindow,
    ProbeStatus, ProgramStatus,
};
use crate::symbols::{AllocatorKind, EntryRole, summary::ProbePoint};

/// Family name in the recording's `probes`.
pub const FAMILY: &str = "alloc";
const NOT_APPLICABLE: &str = "not applicable:";

#[derive(Debug, thiserror::Error)]
pub enum AllocError {
    #[error(transparent)]
    Take(#[from] super::TakeMapError),
    #[error("map {name}: {source}")]
    Map {
        name: &'static str,
        source: aya::maps::MapError,
    },
    #[error("program {0}: {1}")]
    Program(&'static str, String),
    #[error("calibration: {0}")]
    Calibration(String),
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
            control: super::take_map(ebpf, MAP_CONTROL)?,
            stacks: super::take_map(ebpf, MAP_STACKS)?,
            hist: super::take_map(ebpf, MAP_HIST)?,
            counters: super::take_map(ebpf, MAP_COUNTERS)?,
        })
    }

    pub(crate) fn set_control(&mut self, tgid: u32, open: u32) -> Result<(), AllocError> {
        self.control
            .set(0, &AllocControl { tgid, open }, 0)
            .map_err(|source| AllocError::Map {
                name: MAP_CONTROL,
                source,
            })
    }

    pub(crate) fn read_hist(&self, index: u32) -> Result<AllocHist, AllocError> {
        let per_cpu = self.hist.get(&index, 0).map_err(|source| AllocError::Map {
            name: MAP_HIST,
            source,
        })?;
        Ok(sum_hists(&per_cpu))
    }

    fn read_counters(&self) -> Result<AllocCounters, AllocError> {
        let per_cpu = self.counters.get(&0, 0).map_err(|source| AllocError::Map {
            name: MAP_COUNTERS,
            source,
        })?;
        Ok(sum_counters(&per_cpu))
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

/// How a probe pair is attached to its entry points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PairKind {
    /// One uprobe_multi link per program (Linux ≥ 6.6): attached and
    /// detached in one step each.
    Multi,
    /// One perf event per entry point and program: each detach waits for
    /// the kernel's uprobe synchronisation (about 100 ms measured here), and
    /// the target keeps paying for hits meanwhile.
    PerPoint,
}

impl PairKind {
    fn programs(self) -> (&'static str, &'static str) {
        match self {
            PairKind::Multi => (PROG_ENTER_MULTI, PROG_EXIT_MULTI),
            PairKind::PerPoint => (PROG_ENTER, PROG_EXIT),
        }
    }

    /// How the status line names the attach point.
    pub(crate) fn prefix(self) -> &'static str {
        match self {
            PairKind::Multi => "uprobe.multi",
            PairKind::PerPoint => "uprobe",
        }
    }
}

/// An attached pair.
#[derive(Debug)]
pub(crate) struct PairLinks {
    pub(crate) kind: PairKind,
    enter: UProbeLinkId,
    exit: UProbeLinkId,
}

/// Attaches the pair to `points` of `path`, for `pid` only: as uprobe_multi
/// links, else (older kernels) one perf event per point. In each case the
/// return program first, then the entry program, so that every timed entry
/// has its return probed.
pub(crate) fn attach_pair(
    ebpf: &mut Ebpf,
    points: &[UProbeAttachPoint<'_>],
    path: &Path,
    pid: NonZeroU32,
) -> Result<PairLinks, AllocError> {
    match attach_kind(ebpf, PairKind::Multi, points, path, pid) {
        Ok(links) => Ok(links),
        Err(multi) => {
            tracing::debug!(
                family = FAMILY,
                "uprobe_multi unavailable, one perf event per entry point: {multi}"
            );
            attach_kind(ebpf, PairKind::PerPoint, points, path, pid)
        }
    }
}

fn attach_kind(
    ebpf: &mut Ebpf,
    kind: PairKind,
    points: &[UProbeAttachPoint<'_>],
    path: &Path,
    pid: NonZeroU32,
) -> Result<PairLinks, AllocError> {
    let (enter_prog, exit_prog) = kind.programs();
    let exit = attach_one(ebpf, exit_prog, points, path, pid)?;
    match attach_one(ebpf, enter_prog, points, path, pid) {
        Ok(enter) => Ok(PairLinks { kind, enter, exit }),
        Err(e) => {
            detach_one(ebpf, exit_prog, exit);
            Err(e)
        }
    }
}

/// Detaches the entry program, then the return program.
pub(crate) fn detach_pair(ebpf: &mut Ebpf, links: PairLinks) {
    let (enter_prog, exit_prog) = links.kind.programs();
    detach_one(ebpf, enter_prog, links.enter);
    detach_one(ebpf, exit_prog, links.exit);
}

fn program<'a>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<&'a mut UProbe, AllocError> {
    let p = ebpf
        .program_mut(name)
        .ok_or_else(|| AllocError::Program(name, "missing from the eBPF object".into()))?;
    let p: &mut UProbe = p
        .try_into()
        .map_err(|e: aya::programs::ProgramError| AllocError::Program(name, e.to_string()))?;
    if p.fd().is_err() {
        p.load()
            .map_err(|e| AllocError::Program(name, format!("load: {}", error_chain(&e))))?;
    }
    Ok(p)
}

fn attach_one(
    ebpf: &mut Ebpf,
    name: &'static str,
    points: &[UProbeAttachPoint<'_>],
    path: &Path,
    pid: NonZeroU32,
) -> Result<UProbeLinkId, AllocError> {
    program(ebpf, name)?
        .attach(points.iter(), path, UProbeScope::OneProcess(pid))
        .map_err(|e| AllocError::Program(name, format!("attach: {}", error_chain(&e))))
}

fn detach_one(ebpf: &mut Ebpf, name: &'static str, link: UProbeLinkId) {
    match program(ebpf, name) {
        Ok(p) => {
            if let Err(e) = p.detach(link) {
                tracing::warn!(family = FAMILY, program = name, "detach: {e}");
            }
        }
        Err(e) => tracing::warn!(family = FAMILY, "detach: {e}"),
    }
}

/// Where an entry point's size argument is, by role.
pub fn size_mode(role: Option<EntryRole>) -> u64 {
    match role {
        Some(EntryRole::Malloc | EntryRole::New) => SIZE_ARG0,
        Some(EntryRole::Calloc) => SIZE_ARG0_TIMES_ARG1,
        Some(EntryRole::Realloc | EntryRole::SizedFree | EntryRole::SizedDelete) => SIZE_ARG1,
        Some(EntryRole::Free | EntryRole::Delete) | None => SIZE_NONE,
    }
}

/// Lower bound in bytes of size class `class` (≥ 1).
pub fn class_min_bytes(class: u32) -> u64 {
    mdiag_common::hist::bucket_lower(class.saturating_sub(1) as usize)
}

/// The target's entry points, resolved.
struct Resolved {
    kind: AllocatorKind,
    object: String,
    attach_path: PathBuf,
    points: Vec<ProbePoint>,
}

/// Resolves the allocator's entry points in `pid`; `Err` says why not
/// (prefixed "not applicable:" when there is nothing to probe).
fn resolve(pid: u32) -> Result<Resolved, String> {
    let process = crate::symbols::ProcessSymbols::load(pid, crate::symbols::ObjectCache::global())
        .map_err(|e| format!("symbols of pid {pid}: {e}"))?;
    let code = crate::symbols::TargetCode::from_process(&process);
    let kind = code.allocator.kind;
    let Some(object) = code.allocator.object.clone() else {
        return Err(format!(
            "{NOT_APPLICABLE} no allocator found in pid {pid} (no mapped object defines malloc)"
        ));
    };
    if kind == AllocatorKind::Unknown {
        return Err(format!(
            "{NOT_APPLICABLE} the allocator of pid {pid} ({object}) is of an unknown kind"
        ));
    }
    let mut points = code.allocator.entry_points;
    if points.is_empty() {
        return Err(format!(
            "{NOT_APPLICABLE} no allocation entry point found in {object} (pid {pid})"
        ));
    }
    points.truncate(MAX_FUNCS as usize - 1);
    let attach_path = process
        .objects
        .iter()
        .find(|o| o.mapped.path.to_str() == Some(object.as_str()))
        .map(|o| o.attach_path.clone())
        .ok_or_else(|| format!("{object} is no longer mapped by pid {pid}"))?;
    Ok(Resolved {
        kind,
        object,
        attach_path,
        points,
    })
}

/// One line naming the kernel feature a verifier rejection comes from, for
/// the rejections older kernels give (instead of the verifier's dump).
fn kernel_feature_missing(error: &str) -> Option<String> {
    // Helper 174 is bpf_get_attach_cookie: how the pair tells the probed
    // functions apart (Linux 5.15+).
    error.contains("invalid func unknown#174").then(|| {
        "this kernel lacks the bpf_get_attach_cookie helper (Linux 5.15+), which the allocator probes need to tell the functions apart".to_owned()
    })
}

fn status(attach_point: String, error: Option<String>) -> ProbeStatus {
    status_of(PairKind::Multi, attach_point, error)
}

fn status_of(kind: PairKind, attach_point: String, error: Option<String>) -> ProbeStatus {
    let (enter, exit) = kind.programs();
    let error = error.map(|e| kernel_feature_missing(&e).unwrap_or(e));
    ProbeStatus {
        family: FAMILY.to_owned(),
        programs: [enter, exit]
            .iter()
            .map(|p| ProgramStatus {
                name: (*p).to_owned(),
                attach_point: attach_point.clone(),
                error: error.clone(),
            })
            .collect(),
    }
}

/// The status says only that there was nothing to probe yet.
pub fn not_applicable(status: &ProbeStatus) -> bool {
    !status.programs.is_empty()
        && status.programs.iter().all(|p| {
            p.error
                .as_deref()
                .is_some_and(|e| e.starts_with(NOT_APPLICABLE))
        })
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
    let calibration = match calibrate::calibrate(ebpf, &mut maps) {
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
}

impl AllocProbe {
    fn new(
        mut maps: AllocMaps,
        pid: NonZeroU32,
        schedule: WindowSchedule,
        calibration: crate::recording::AllocCalibration,
    ) -> Result<Self, AllocError> {
        maps.set_control(pid.get(), 0)?;
        let last_counters = maps.read_counters()?;
        let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        Ok(Self {
            maps,
            pid,
            windows: Windows::new(schedule, Instant::now()),
            resolved: None,
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
            cpu_start_ns: target_cpu_ns(pid.get()),
            cpu_last_ns: None,
            hits: 0,
        })
    }

    /// When the next window opens or closes (for the record loop's sleep).
    pub fn next_due(&self) -> Option<Instant> {
        self.windows.next_due()
    }

    /// A new status for the family, once (after entry points were resolved
    /// or found missing).
    pub fn take_status(&mut self) -> Option<ProbeStatus> {
        self.status.take()
    }

    /// Opens or closes a window when due. `rec_start` is the recording's
    /// start (windows are also stamped in recording time). Never blocks for
    /// long: attach and detach take a few milliseconds.
    pub fn poll(&mut self, ebpf: &mut Ebpf, now: Instant, rec_start: Instant) {
        match self.windows.step(now) {
            Action::Nothing => {}
            Action::Open => self.open_window(ebpf, rec_start),
            Action::Close => self.close_window(ebpf, rec_start),
        }
    }

    fn open_window(&mut self, ebpf: &mut Ebpf, rec_start: Instant) {
        if self.resolved.is_none() {
            match resolve(self.pid.get()) {
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
                }
                Err(why) => {
                    tracing::info!(family = FAMILY, "no window: {why}");
                    let point = "uprobe/allocator entry points".to_owned();
                    self.status = Some(status(point, Some(why)));
                    return;
                }
            }
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
        let t0 = super::monotonic_now_ns();
        let opened = self.maps.set_control(self.pid.get(), 1);
        let t1 = super::monotonic_now_ns();
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

    fn close_window(&mut self, ebpf: &mut Ebpf, rec_start: Instant) {
        let Some(open) = self.open.take() else { return };
        let now = Instant::now();
        let t0 = super::monotonic_now_ns();
        let closed = self.maps.set_control(self.pid.get(), 0);
        let t1 = super::monotonic_now_ns();
        detach_pair(ebpf, open.links);
        if let Err(e) = closed {
            tracing::warn!(family = FAMILY, "{e}");
        }
        match self.read_window(open.start_ns, t0 + (t1 - t0) / 2) {
            Ok(mut w) => {
                w.start_ms = open.start_ms;
                w.end_ms = ms_between(rec_start, now);
                self.pending.push(w);
            }
            Err(e) => tracing::warn!(family = FAMILY, "window lost: {e}"),
        }
        self.maps.clear_stacks();
        if let Some(cpu) = target_cpu_ns(self.pid.get()) {
            self.cpu_last_ns = Some(cpu);
        }
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
    pub fn finish(&mut self, ebpf: &mut Ebpf, rec_start: Instant) {
        if self.open.is_some() {
            self.close_window(ebpf, rec_start);
        }
        let _ = self.maps.set_control(0, 0);
        if let Some(cpu) = target_cpu_ns(self.pid.get()) {
            self.cpu_last_ns = Some(cpu);
        }
    }

    /// The recording's top-level record: what was probed, the calibration,
    /// the overhead imposed on the target.
    pub fn record(&self) -> AllocRecord {
        let mut r = self.record.clone();
        let cost = r.calibration.as_ref().map_or(0, |c| c.pair_cost_ns);
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

/// The target's CPU time (user + system, all threads), ns.
fn target_cpu_ns(pid: u32) -> Option<u64> {
    let stat = procfs::process::Process::new(i32::try_from(pid).ok()?)
        .ok()?
        .stat()
        .ok()?;
    let ticks = procfs::ticks_per_second().max(1);
    Some((stat.utime + stat.stime).saturating_mul(1_000_000_000) / ticks)
}

#[cfg(test)]
mod tests {

    #[test]
    fn an_old_kernels_missing_helper_is_named_in_one_line() {
        let dump = "program mdiag_alloc_exit: load: ... 51: (85) call unknown#174\ninvalid func unknown#174\nverification time 1412 usec";
        let s = status(String::from("uprobe/x"), Some(dump.into()));
        let e = s.programs[0].error.as_deref().unwrap();
        assert!(
            e.contains("bpf_get_attach_cookie") && !e.contains('\n'),
            "{e}"
        );
        let other = status(String::from("uprobe/x"), Some("attach: EPERM".into()));
        assert_eq!(other.programs[1].error.as_deref(), Some("attach: EPERM"));
    }

    use super::*;

    #[test]
    fn size_arguments_by_role() {
        assert_eq!(size_mode(Some(EntryRole::Malloc)), SIZE_ARG0);
        assert_eq!(size_mode(Some(EntryRole::New)), SIZE_ARG0);
        assert_eq!(size_mode(Some(EntryRole::Calloc)), SIZE_ARG0_TIMES_ARG1);
        assert_eq!(size_mode(Some(EntryRole::Realloc)), SIZE_ARG1);
        assert_eq!(size_mode(Some(EntryRole::SizedDelete)), SIZE_ARG1);
        assert_eq!(size_mode(Some(EntryRole::Free)), SIZE_NONE);
        assert_eq!(size_mode(None), SIZE_NONE);
    }

    #[test]
    fn size_class_bounds() {
        assert_eq!(class_min_bytes(1), 0);
        assert_eq!(class_min_bytes(2), 2);
        assert_eq!(class_min_bytes(7), 64);
        // The kernel's class of a size has that lower bound.
        for size in [1u64, 2, 3, 64, 100, 4096, 1 << 20] {
            let c = mdiag_common::alloc::size_class(size);
            assert!(class_min_bytes(c) <= size.max(1), "{size}");
        }
    }

    #[test]
    fn only_missing_allocators_are_retried() {
        let na = status("p".into(), Some(format!("{NOT_APPLICABLE} unknown")));
        assert!(not_applicable(&na));
        assert!(!not_applicable(&status("p".into(), None)));
        assert!(!not_applicable(&status(
            "p".into(),
            Some("attach: EPERM".into())
        )));
    }
}
