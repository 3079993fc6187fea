//! WiredTiger family, user side: checkpoint windows of the target.
//!
//! `__wt_txn_checkpoint` is resolved in every object the target maps (mongod
//! links WiredTiger statically; the Python binding loads `_wiredtiger*.so`; a
//! C program links `libwiredtiger.so`) and a uprobe + uretprobe are attached
//! there for the target's pid. Completed checkpoints arrive as events on a
//! ring buffer, drained by [`WiredTigerReader::poll`] and at each slice; the
//! last slice also lists the checkpoints still running
//! ([`WiredTigerReader::final_slice`]).
//!
//! When no object of the target defines the function, the family is "not
//! applicable": its status says why, and nothing else is affected. Without a
//! target (host-wide) it is not tried at all and has no status: uprobes are
//! attached per process, and a host-wide recording has none to name.

use std::{num::NonZeroU32, path::PathBuf};

use aya::{
    Ebpf,
    maps::{HashMap as BpfHashMap, MapData, PerCpuArray, RingBuf},
    programs::{UProbe, uprobe::UProbeScope},
};
use mdiag_common::wiredtiger::{
    CHECKPOINT_FUNCTION, CheckpointEvent, MAP_CKPT_EVENTS, MAP_CKPT_START, MAP_DROPS,
    PROG_CKPT_ENTER, PROG_CKPT_EXIT, WiredTigerDrops,
};

use super::section::{Checkpoint, WiredTigerDropsSlice, WiredTigerSlice};
use crate::kit::probe::{
    FamilyReader, NOT_APPLICABLE, PerCpuSum, ProbeStatus, ProgramStatus, ReadError, SectionReader,
    error_chain, monotonic_now_ns, read_summed, take_map,
};

/// Family name in the recording's `probes`.
pub const FAMILY: &str = crate::kit::family::Family::Wiredtiger.name();

/// Where the probes went: one object of the target and the symbol in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachedObject {
    /// The object's path as the target sees it (/proc/PID/maps).
    pub object: PathBuf,
    pub symbol: String,
    /// File offset of the symbol (where the uprobe sits).
    pub file_offset: u64,
}

/// Resolves `__wt_txn_checkpoint` in the target and attaches both programs
/// to every object that defines it. Never fails as a whole: the status says
/// what attached where, or why nothing could; no status without a target.
pub fn attach(
    ebpf: &mut Ebpf,
    target: Option<u32>,
) -> (Option<ProbeStatus>, Option<WiredTigerReader>) {
    let generic_point = format!("uprobe/{CHECKPOINT_FUNCTION}");
    let Some(pid) = target.and_then(NonZeroU32::new) else {
        tracing::debug!(
            family = FAMILY,
            "not applicable: no target process (WiredTiger checkpoints are probed in one process)"
        );
        return (None, None);
    };
    let process = match crate::symbols::ProcessSymbols::load(
        pid.get(),
        crate::symbols::ObjectCache::global(),
    ) {
        Ok(p) => p,
        Err(e) => {
            return (
                Some(failed(generic_point, format!("symbols of pid {pid}: {e}"))),
                None,
            );
        }
    };
    let found: Vec<_> = process
        .objects
        .iter()
        .filter_map(|o| o.resolve(CHECKPOINT_FUNCTION).ok())
        .collect();
    if found.is_empty() {
        return (
            Some(failed(
                generic_point,
                format!(
                    "{NOT_APPLICABLE} no WiredTiger symbols found in pid {pid} (no mapped object defines {CHECKPOINT_FUNCTION})"
                ),
            )),
            None,
        );
    }
    let (status, reader) = attach_found(ebpf, pid, &found);
    (Some(status), reader)
}

/// For a child held before `exec`: attaches to every object `exe` maps at
/// start (itself and its `DT_NEEDED` closure) that defines
/// `__wt_txn_checkpoint`, for the child's pid, before anything is mapped.
/// The kernel installs the probes when the loader maps those files, so a
/// checkpoint taken at once is seen. `None` when no such object exists (the
/// program may still `dlopen` WiredTiger later: [`Retry`] looks again).
pub fn attach_before_exec(
    ebpf: &mut Ebpf,
    pid: u32,
    exe: &std::path::Path,
) -> Option<(ProbeStatus, Option<WiredTigerReader>)> {
    let pid = NonZeroU32::new(pid)?;
    let cache = crate::symbols::ObjectCache::global();
    let found: Vec<_> = crate::symbols::program::startup_objects(exe)
        .iter()
        .filter_map(|o| {
            crate::symbols::program::resolve_in_file(o, CHECKPOINT_FUNCTION, cache).ok()
        })
        .collect();
    if found.is_empty() {
        tracing::debug!(family = FAMILY, exe = %exe.display(), "no object mapped at start defines {CHECKPOINT_FUNCTION}");
        return None;
    }
    Some(attach_found(ebpf, pid, &found))
}

fn failed(attach_point: String, why: String) -> ProbeStatus {
    tracing::info!(family = FAMILY, "not attached: {why}");
    ProbeStatus::same_for_all(
        FAMILY,
        &[PROG_CKPT_ENTER, PROG_CKPT_EXIT],
        attach_point,
        Some(why),
    )
}

/// Attaches both programs at each resolved symbol for `pid`.
fn attach_found(
    ebpf: &mut Ebpf,
    pid: NonZeroU32,
    found: &[crate::symbols::ResolvedSymbol],
) -> (ProbeStatus, Option<WiredTigerReader>) {
    let mut programs = Vec::new();
    let mut attached = Vec::new();
    for sym in found {
        let attach_point = format!(
            "uprobe/{}:{}+{:#x}",
            sym.object.display(),
            sym.name,
            sym.file_offset
        );
        let mut ok = true;
        for prog in [PROG_CKPT_ENTER, PROG_CKPT_EXIT] {
            let result = attach_one(ebpf, prog, sym, pid);
            if let Err(e) = &result {
                ok = false;
                tracing::warn!(family = FAMILY, program = prog, %attach_point, "not attached: {e}");
            }
            programs.push(ProgramStatus {
                name: prog.to_owned(),
                attach_point: attach_point.clone(),
                error: result.err(),
            });
        }
        if ok {
            attached.push(AttachedObject {
                object: sym.object.clone(),
                symbol: sym.name.clone(),
                file_offset: sym.file_offset,
            });
        }
    }
    let status = ProbeStatus {
        family: FAMILY.to_owned(),
        programs,
        left_out: None,
    };
    if attached.is_empty() {
        return (status, None);
    }
    let reader = WiredTigerReader::new(ebpf, attached)
        .map_err(|e| tracing::warn!(family = FAMILY, "maps unavailable: {e}"))
        .ok();
    (status, reader)
}

/// When to look for WiredTiger in the target again: whenever the set of
/// files it maps executable has changed (a `dlopen`). The maps are read at
/// every poll of the record loop (50 ms) during the target's first
/// [`FAST_FOR`], when programs load their libraries; after that once per
/// [`SLOW_EVERY`], the interval doubling with each reading that finds the
/// mappings unchanged up to [`SLOW_MAX`] (back to [`SLOW_EVERY`] after a
/// change), so that the agent, watching a target without WiredTiger for
/// weeks, does not read its maps file every second (a tenth of the agent's
/// CPU in a profile). The symbols are only parsed when the mappings changed.
#[derive(Debug, Default)]
pub struct Retry {
    last: Option<u64>,
    first_check: Option<std::time::Instant>,
    last_check: Option<std::time::Instant>,
    /// The interval after [`FAST_FOR`]; [`SLOW_EVERY`] when unset.
    every: Option<std::time::Duration>,
}

/// How long after the first check the maps are read at every poll.
pub const FAST_FOR: std::time::Duration = std::time::Duration::from_secs(10);
/// How often they are read after that, at first...
pub const SLOW_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
/// ... and at the longest, when they keep not changing.
pub const SLOW_MAX: std::time::Duration = std::time::Duration::from_secs(30);

impl Retry {
    /// True when `pid`'s executable file mappings differ from the last
    /// reading's (and on the first call); false when not due yet.
    pub fn mappings_changed(&mut self, pid: u32) -> bool {
        let now = std::time::Instant::now();
        if !self.due(now) {
            return false;
        }
        self.first_check.get_or_insert(now);
        self.last_check = Some(now);
        let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) else {
            return false;
        };
        self.saw(exec_mappings_fingerprint(&maps), now)
    }

    /// Takes one reading's fingerprint: whether it changed, and the next
    /// interval (doubled when unchanged past [`FAST_FOR`]). Pure in its fields.
    fn saw(&mut self, print: u64, now: std::time::Instant) -> bool {
        let changed = self.last != Some(print);
        self.last = Some(print);
        let slow = self
            .first_check
            .is_some_and(|first| now.duration_since(first) >= FAST_FOR);
        self.every = match (changed, slow) {
            (false, true) => Some(self.interval().saturating_mul(2).min(SLOW_MAX)),
            _ => None,
        };
        changed
    }

    fn interval(&self) -> std::time::Duration {
        self.every.unwrap_or(SLOW_EVERY)
    }

    /// Whether the maps should be read at `now`. Pure in its fields.
    pub fn due(&self, now: std::time::Instant) -> bool {
        match (self.first_check, self.last_check) {
            (Some(first), Some(last)) => {
                now.duration_since(first) < FAST_FOR || now.duration_since(last) >= self.interval()
            }
            _ => true,
        }
    }
}

/// A hash of the executable, file-backed lines of a maps file. Pure.
pub fn exec_mappings_fingerprint(maps: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        let path = f.nth(3);
        if perms.as_bytes().get(2) == Some(&b'x') && path.is_some_and(|p| p.starts_with('/')) {
            (range, path).hash(&mut h);
        }
    }
    h.finish()
}

fn attach_one(
    ebpf: &mut Ebpf,
    prog: &str,
    sym: &crate::symbols::ResolvedSymbol,
    pid: NonZeroU32,
) -> Result<(), String> {
    let program = ebpf
        .program_mut(prog)
        .ok_or_else(|| format!("program {prog} missing from the eBPF object"))?;
    let program: &mut UProbe = program.try_into().map_err(|e| format!("{prog}: {e}"))?;
    if program.fd().is_err() {
        program
            .load()
            .map_err(|e| format!("load: {}", error_chain(&e)))?;
    }
    program
        .attach(
            [sym.uprobe_location()],
            &sym.attach_path,
            UProbeScope::OneProcess(pid),
        )
        .map_err(|e| format!("attach: {}", error_chain(&e)))?;
    Ok(())
}

pub struct WiredTigerReader {
    starts: BpfHashMap<MapData, u32, u64>,
    events: RingBuf<MapData>,
    drops: PerCpuArray<MapData, WiredTigerDrops>,
    attached: Vec<AttachedObject>,
    /// Checkpoints drained since the last slice.
    pending: Vec<Checkpoint>,
    last_drops: WiredTigerDrops,
}

impl WiredTigerReader {
    fn new(ebpf: &mut Ebpf, attached: Vec<AttachedObject>) -> Result<Self, ReadError> {
        let mut reader = Self {
            starts: take_map(ebpf, MAP_CKPT_START)?,
            events: take_map(ebpf, MAP_CKPT_EVENTS)?,
            drops: take_map(ebpf, MAP_DROPS)?,
            attached,
            pending: Vec::new(),
            last_drops: WiredTigerDrops::default(),
        };
        reader.last_drops = reader.read_drops()?;
        Ok(reader)
    }

    /// The objects (and symbol) the probes are attached to.
    pub fn attached(&self) -> &[AttachedObject] {
        &self.attached
    }

    /// Drains completed checkpoints now (cheap; call it as often as you like).
    pub fn drain(&mut self) {
        while let Some(item) = self.events.next() {
            if let Some(e) = CheckpointEvent::from_bytes(&item) {
                self.pending.push(checkpoint_of(&e));
            }
        }
    }

    /// The checkpoints that returned since the previous slice, and the drops.
    pub fn next_slice(&mut self) -> Result<WiredTigerSlice, ReadError> {
        self.drain();
        let now = self.read_drops()?;
        let slice = WiredTigerSlice {
            checkpoints: std::mem::take(&mut self.pending),
            drops: drops_between(&self.last_drops, &now),
        };
        self.last_drops = now;
        Ok(slice)
    }

    /// [`Self::next_slice`] plus the checkpoints still running now, marked
    /// `in_progress`: for the recording's last slice.
    pub fn final_slice(&mut self) -> Result<WiredTigerSlice, ReadError> {
        let mut slice = self.next_slice()?;
        slice.checkpoints.extend(self.running());
        Ok(slice)
    }

    /// The checkpoints running now (entered, not returned), `in_progress`,
    /// with their duration so far. Reads the entry map; drains nothing.
    pub fn running(&self) -> Vec<Checkpoint> {
        let starts: Vec<(u32, u64)> = self.starts.iter().flatten().collect();
        in_progress(&starts, monotonic_now_ns())
    }

    fn read_drops(&self) -> Result<WiredTigerDrops, ReadError> {
        read_summed(&self.drops, 0, MAP_DROPS)
    }
}

/// Checkpoints arrive as events; the last slice also lists those running.
impl FamilyReader for WiredTigerReader {
    fn family(&self) -> &'static str {
        FAMILY
    }

    /// Drains the completed checkpoints now (see [`Self::drain`]).
    fn poll(
        &mut self,
        _ebpf: &mut aya::Ebpf,
        _now: std::time::Instant,
        _rec_start: std::time::Instant,
    ) -> Option<ProbeStatus> {
        self.drain();
        None
    }
}

impl SectionReader for WiredTigerReader {
    type Section = WiredTigerSlice;

    fn read(&mut self, last: bool) -> Result<WiredTigerSlice, ReadError> {
        Ok(if last {
            self.final_slice()?
        } else {
            self.next_slice()?
        })
    }
}

impl PerCpuSum for WiredTigerDrops {
    fn add(self, b: &Self) -> Self {
        WiredTigerDrops {
            ring_full: self.ring_full + b.ring_full,
            missing_entry: self.missing_entry + b.missing_entry,
            start_map_full: self.start_map_full + b.start_map_full,
        }
    }
}

/// A completed checkpoint as recorded. Pure.
pub fn checkpoint_of(e: &CheckpointEvent) -> Checkpoint {
    Checkpoint {
        tid: e.tid,
        start_ns: e.start_ns,
        duration_ns: e.end_ns.saturating_sub(e.start_ns),
        ret: e.ret,
        in_progress: false,
    }
}

/// Checkpoints still running at `now_ns`, from the (tid, start ns) entries,
/// oldest first. Pure.
pub fn in_progress(starts: &[(u32, u64)], now_ns: u64) -> Vec<Checkpoint> {
    let mut out: Vec<Checkpoint> = starts
        .iter()
        .map(|&(tid, start_ns)| Checkpoint {
            tid,
            start_ns,
            duration_ns: now_ns.saturating_sub(start_ns),
            ret: 0,
            in_progress: true,
        })
        .collect();
    out.sort_by_key(|c| (c.start_ns, c.tid));
    out
}

/// Drops between two cumulative readings. Pure.
pub fn drops_between(before: &WiredTigerDrops, after: &WiredTigerDrops) -> WiredTigerDropsSlice {
    WiredTigerDropsSlice {
        ring_full: after.ring_full.saturating_sub(before.ring_full),
        missing_entry: after.missing_entry.saturating_sub(before.missing_entry),
        start_map_full: after.start_map_full.saturating_sub(before.start_map_full),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::not_applicable;

    #[test]
    fn completed_checkpoint() {
        let c = checkpoint_of(&CheckpointEvent {
            tid: 9,
            tgid: 8,
            start_ns: 1_000,
            end_ns: 4_500,
            ret: -16,
        });
        assert_eq!(
            c,
            Checkpoint {
                tid: 9,
                start_ns: 1_000,
                duration_ns: 3_500,
                ret: -16,
                in_progress: false
            }
        );
    }

    #[test]
    fn running_checkpoints_are_in_progress_oldest_first() {
        let c = in_progress(&[(5, 300), (4, 100)], 1_000);
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].tid, c[0].duration_ns, c[0].in_progress),
            (4, 900, true)
        );
        assert_eq!((c[1].tid, c[1].duration_ns), (5, 700));
        assert!(in_progress(&[], 5).is_empty());
    }

    #[test]
    fn only_a_missing_wiredtiger_is_retried() {
        let status = |errors: [Option<&str>; 2]| ProbeStatus {
            family: FAMILY.into(),
            programs: errors
                .iter()
                .map(|e| ProgramStatus {
                    name: "p".into(),
                    attach_point: "uprobe/x".into(),
                    error: e.map(String::from),
                })
                .collect(),
            left_out: None,
        };
        let na = "not applicable: no WiredTiger symbols found in pid 7";
        assert!(not_applicable(&status([Some(na), Some(na)])));
        assert!(!not_applicable(&status([None, None])));
        assert!(!not_applicable(&status([Some("attach: EPERM"), Some(na)])));
    }

    #[test]
    fn the_maps_are_read_often_at_first_then_once_a_second() {
        let t0 = std::time::Instant::now();
        let s = |secs: f64| t0 + std::time::Duration::from_secs_f64(secs);
        let mut r = Retry::default();
        assert!(r.due(t0));
        r.first_check = Some(t0);
        r.last_check = Some(s(9.9));
        assert!(r.due(s(9.95)), "still in the first 10 s");
        r.last_check = Some(s(10.2));
        assert!(!r.due(s(10.7)));
        assert!(r.due(s(11.2)));
    }

    #[test]
    fn unchanged_maps_are_read_less_and_less_often_and_a_change_resets_it() {
        let t0 = std::time::Instant::now();
        let s = |secs: u64| t0 + std::time::Duration::from_secs(secs);
        let mut r = Retry {
            first_check: Some(t0),
            ..Retry::default()
        };
        assert!(r.saw(1, s(0)), "the first reading is a change");
        assert!(!r.saw(1, s(5)));
        assert_eq!(r.interval(), SLOW_EVERY, "no backing off in the first 10 s");
        let mut at = 10;
        let mut gaps = Vec::new();
        for _ in 0..8 {
            assert!(!r.saw(1, s(at)));
            r.last_check = Some(s(at));
            let gap = r.interval().as_secs();
            assert!(!r.due(s(at + gap - 1)) && r.due(s(at + gap)));
            gaps.push(gap);
            at += gap;
        }
        assert_eq!(gaps, [2, 4, 8, 16, 30, 30, 30, 30]);
        // A dlopen: found, and read every second again.
        assert!(r.saw(2, s(at)));
        assert_eq!(r.interval(), SLOW_EVERY);
    }

    #[test]
    fn only_executable_file_mappings_change_the_fingerprint() {
        let base = "7f00-7f10 r-xp 00000000 08:01 12 /usr/lib/libc.so.6\n\
                    7f10-7f20 rw-p 00000000 00:00 0 \n";
        let heap_grew = "7f00-7f10 r-xp 00000000 08:01 12 /usr/lib/libc.so.6\n\
                         7f10-7f40 rw-p 00000000 00:00 0 [heap]\n\
                         7f50-7f60 r--p 00000000 08:01 13 /usr/lib/data.bin\n";
        let dlopen = "7f00-7f10 r-xp 00000000 08:01 12 /usr/lib/libc.so.6\n\
                      7f80-7f90 r-xp 00001000 08:01 14 /usr/lib/libwiredtiger.so\n";
        let a = exec_mappings_fingerprint(base);
        assert_eq!(a, exec_mappings_fingerprint(heap_grew));
        assert_ne!(a, exec_mappings_fingerprint(dlopen));
    }

    #[test]
    fn drops_are_differences() {
        let a = WiredTigerDrops {
            ring_full: 1,
            missing_entry: 2,
            start_map_full: 0,
        };
        let b = WiredTigerDrops {
            ring_full: 1,
            missing_entry: 5,
            start_map_full: 1,
        };
        assert_eq!(
            drops_between(&a, &b),
            WiredTigerDropsSlice {
                ring_full: 0,
                missing_entry: 3,
                start_map_full: 1
            }
        );
    }
}
