//! What a family's totals are computed from ([`FamilyWindow`]): its own
//! section of a window, and, through two small traits the recording
//! implements ([`Sections`], [`Kept`]), what lies around it — the other
//! families' sections of the same window, its own section slice by slice,
//! and what the recording keeps beside its slices for it.
//!
//! Why traits and not the recording's types: the families sit below the
//! recording (whose `Slice` holds their sections), so a family that joins
//! another's section (contention reads the syscalls, sched and WiredTiger
//! sections) or reads what the recording keeps for it (alloc's record,
//! contention's kernel stacks) asks by type: a section type names its
//! family ([`OfFamily`]), so asking for the wrong one is not possible.

use std::any::Any;

use super::family::Family;
use super::probe::ProbeStatus;

/// The family a section type belongs to (implemented beside each family's
/// `Unit`).
pub trait OfFamily: Any {
    /// Its family.
    const FAMILY: Family;
}

/// Every family's section of one slice or window, by family (the
/// recording's `Slice` implements it from the registry).
pub trait Sections: std::fmt::Debug {
    /// `family`'s section (`None`: it has none), to downcast to the
    /// family's section type.
    fn section(&self, family: Family) -> Option<&dyn Any>;
}

/// What a recording holds besides a window of its slices (the recording
/// implements it).
pub trait Kept: std::fmt::Debug {
    /// Each slice in time order: its length in milliseconds and its
    /// sections.
    fn slices(&self) -> Vec<(u64, &dyn Sections)>;
    /// What the recording keeps beside its slices for `family` (`None`:
    /// nothing), to downcast to the type the family keeps.
    fn kept(&self, family: Family) -> Option<&dyn Any>;
}

/// What a family's totals are computed from: its section of a window
/// (every slice merged) and what the recording says around it. The hub
/// (`recording::Recording::family_window`) fills it, so a family's facts
/// and report section never read the whole recording.
#[derive(Debug, Clone, Copy)]
pub struct FamilyWindow<'a, S> {
    /// The family.
    pub family: Family,
    /// The recording's probe statuses (why a family is unavailable).
    pub probes: &'a [ProbeStatus],
    /// The family's section of the window; `None`: no slice had one.
    pub section: Option<&'a S>,
    /// Milliseconds the section covers (rates are over this time).
    pub section_ms: u64,
    /// Milliseconds the whole window covers (every slice, with the
    /// family's section or not).
    pub window_ms: u64,
    /// Slices in the recording.
    pub slices: usize,
    /// The host's online CPUs.
    pub host_cpus: u32,
    /// A target process was recorded (else the host as a whole).
    pub targeted: bool,
    /// Every family's section of the same window.
    pub whole: &'a dyn Sections,
    /// The recording the window is of.
    pub recording: &'a dyn Kept,
}

impl<'a, S: OfFamily> FamilyWindow<'a, S> {
    /// Another family's section of the same window, by its type.
    pub fn other<T: OfFamily>(&self) -> Option<&'a T> {
        self.whole.section(T::FAMILY)?.downcast_ref()
    }

    /// What the recording keeps beside its slices for this family, as the
    /// type the family keeps it in.
    pub fn kept<T: Any>(&self) -> Option<&'a T> {
        self.recording.kept(S::FAMILY)?.downcast_ref()
    }

    /// This family's section of each slice in time order (`None`: that
    /// slice has none), with the slice's length in milliseconds.
    pub fn per_slice(&self) -> Vec<(u64, Option<&'a S>)> {
        self.recording
            .slices()
            .into_iter()
            .map(|(ms, s)| (ms, s.section(S::FAMILY).and_then(|a| a.downcast_ref())))
            .collect()
    }
}
