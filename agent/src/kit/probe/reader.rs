//! What every probe family's reader shares: the one error type of map reads,
//! taking maps out of the loaded object, the kernel's clock, per-CPU sums,
//! and the traits the record loop drives the families through.
//!
//! [`Counters`] is the cumulative-counter machinery (a snapshot, the pure
//! difference of two snapshots, totals since attach); [`FamilyReader`] is
//! what the hub (`probes::Probes`) needs of every attached family, whatever
//! its kind (counters, ring buffers, sampled windows): its name, how it
//! starts at the recording's clock and its lifecycle between slices (poll,
//! the next time it is due, finish), so that the record loop and the agent
//! drive every family alike and name none; [`SectionReader`] reads the
//! family's typed section of each slice, which the hub stores in its field
//! of the slice. `Probes` keeps one table of them in slice order
//! (`Probes::readers`), which drives the clock's start, each slice and the
//! "nothing attached" check. Modelled on aya's own map
//! machinery: typed maps built by `TryFrom<Map>`, values read per CPU as
//! `PerCpuValues`, and one error type for every map.

use aya::{
    Ebpf, Pod,
    maps::{MapData, MapError, PerCpuArray, PerCpuValues},
};

use std::time::Instant;

use super::status::ProbeStatus;

/// Why a family's reader could not read its maps (every family's reader
/// returns this one type).
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Take(#[from] TakeMapError),
    #[error("map {name}: {source}")]
    Map {
        name: &'static str,
        source: MapError,
    },
}

impl ReadError {
    /// For `map_err`: a failed read of map `name`.
    pub(crate) fn map(name: &'static str) -> impl FnOnce(MapError) -> Self {
        move |source| Self::Map { name, source }
    }
}

/// Why a family's map could not be taken from the loaded object.
#[derive(Debug, thiserror::Error)]
pub enum TakeMapError {
    #[error("map {0} missing from the eBPF object")]
    Missing(&'static str),
    #[error("map {name}: {source}")]
    Convert {
        name: &'static str,
        source: MapError,
    },
}

/// Takes map `name` out of the object as a typed map (every reader owns its maps).
pub(crate) fn take_map<T>(ebpf: &mut Ebpf, name: &'static str) -> Result<T, TakeMapError>
where
    T: TryFrom<aya::maps::Map, Error = MapError>,
{
    let map = ebpf.take_map(name).ok_or(TakeMapError::Missing(name))?;
    T::try_from(map).map_err(|source| TakeMapError::Convert { name, source })
}

/// Clock `clock` now, in ns.
pub(crate) fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into a valid timespec it is given.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC now, in ns: the clock of the kernel's `bpf_ktime_get_ns`.
pub(crate) fn monotonic_now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// A per-CPU map value that sums over CPUs (field by field).
pub(crate) trait PerCpuSum: Pod + Default {
    fn add(self, other: &Self) -> Self;
}

/// The per-CPU values of one key, summed.
pub(crate) fn sum_cpus<T: PerCpuSum>(values: &[T]) -> T {
    values.iter().fold(T::default(), |a, b| a.add(b))
}

/// Entry `index` of a per-CPU array, one value per CPU (index = CPU number).
pub(crate) fn read_per_cpu<T: Pod>(
    map: &PerCpuArray<MapData, T>,
    index: u32,
    name: &'static str,
) -> Result<PerCpuValues<T>, ReadError> {
    map.get(&index, 0).map_err(ReadError::map(name))
}

/// Entry `index` of a per-CPU array, summed over CPUs.
pub(crate) fn read_summed<T: PerCpuSum>(
    map: &PerCpuArray<MapData, T>,
    index: u32,
    name: &'static str,
) -> Result<T, ReadError> {
    read_per_cpu(map, index, name).map(|v| sum_cpus(&v))
}

/// A family whose kernel counters are cumulative: a slice is the difference
/// of two snapshots, so a late read never loses events.
pub trait Counters {
    /// Every counter at one instant.
    type Snapshot: Default;
    /// The family's section of a recording slice.
    type Slice;

    /// Reads every counter now.
    fn snapshot(&self) -> Result<Self::Snapshot, ReadError>;

    /// The counters that changed between two snapshots. Pure, so testable.
    fn slice_between(before: &Self::Snapshot, after: &Self::Snapshot) -> Self::Slice;

    /// Totals since attach, as one slice (for checks and tests).
    fn totals_since_attach(&self) -> Result<Self::Slice, ReadError> {
        Ok(Self::slice_between(
            &Self::Snapshot::default(),
            &self.snapshot()?,
        ))
    }
}

/// One attached probe family as the record loop drives it.
pub trait FamilyReader {
    /// The family's name (`probes::FAMILIES`, the recording's `probes`).
    fn family(&self) -> &'static str;

    /// Whether [`Self::rebase`] runs before the recording's clock is read
    /// (a family that drains what was sampled before it).
    fn rebases_before_clock(&self) -> bool {
        false
    }

    /// Starts the slices now: what was counted before is left out of the
    /// first slice.
    fn rebase(&mut self) -> Result<(), ReadError> {
        Ok(())
    }

    /// The family's programs were detached for a while (the agent's duty
    /// cycle, `probes::cycle`) and are about to attach again: forgets what
    /// the kernel side had in flight, whose end went unseen. Called while
    /// nothing is attached, before [`Self::rebase`].
    fn forget_in_flight(&mut self) -> Result<(), ReadError> {
        Ok(())
    }

    /// Between slices, at every poll of the record loop (a few times a
    /// second): drains what the kernel side streams (ring buffers) while
    /// its callers still exist, opens or closes what runs in windows.
    /// `rec_start` is the recording's time zero. Returns the family's
    /// status when it changed.
    fn poll(
        &mut self,
        _ebpf: &mut Ebpf,
        _now: Instant,
        _rec_start: Instant,
    ) -> Option<ProbeStatus> {
        None
    }

    /// When the family must be polled next, if sooner than the next slice
    /// (a window to open or close); `None`: at the loop's pace.
    fn next_due(&self) -> Option<Instant> {
        None
    }

    /// Before the recording's last slice: closes what is still open.
    fn finish(&mut self, _ebpf: &mut Ebpf, _rec_start: Instant) {}
}

/// A family's reader of its section of each slice.
pub trait SectionReader: FamilyReader {
    /// The family's section of a recording slice.
    type Section;

    /// The section since the previous call; `last` for the recording's
    /// last slice.
    fn read(&mut self, last: bool) -> Result<Self::Section, ReadError>;
}

/// Deletes every entry of a kernel hash map (an entry deleted meanwhile is
/// skipped): what a family had in flight when its programs were detached.
pub(crate) fn clear_map<K: Pod, V: Pod>(
    map: &mut aya::maps::HashMap<MapData, K, V>,
    name: &'static str,
) -> Result<(), ReadError> {
    let keys: Vec<K> = map.keys().flatten().collect();
    for key in keys {
        match map.remove(&key) {
            Ok(()) | Err(MapError::KeyNotFound) => {}
            Err(e) => return Err(ReadError::Map { name, source: e }),
        }
    }
    Ok(())
}

/// Rewrites entry `index` of a per-CPU array on every CPU with `edit`
/// applied to its value there.
pub(crate) fn edit_per_cpu<T: Pod>(
    map: &mut PerCpuArray<MapData, T>,
    index: u32,
    name: &'static str,
    edit: impl Fn(&mut T),
) -> Result<(), ReadError> {
    let values = map.get(&index, 0).map_err(ReadError::map(name))?;
    let mut edited: Vec<T> = values.iter().copied().collect();
    edited.iter_mut().for_each(edit);
    let values = PerCpuValues::try_from(edited).map_err(|e| ReadError::Map {
        name,
        source: MapError::IoError(e),
    })?;
    map.set(index, values, 0).map_err(ReadError::map(name))
}
