//! The probe families by name, at the bottom of the layers: one enum that
//! the probes, the recording's slice sections and the agent's totals all
//! name a family by, and [`Section`], what every family's section of a
//! slice says about itself.
//!
//! Why an enum and not strings: a new family is one variant, and every
//! `match` over it (and every exhaustive destructuring of the recording's
//! `Slice`, as in `Slice::sections`) stops compiling until the new family
//! has its place there.

use super::probe::ProbeStatus;

/// A probe family. Its [`name`](Self::name) is the string a recording's
/// `probes` and every report carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    Sched,
    Softirq,
    Syscalls,
    Perf,
    Wiredtiger,
    Contention,
    Alloc,
}

impl Family {
    /// Every family, in the order their sections stand in a [`Slice`].
    pub const ALL: [Family; 7] = [
        Family::Sched,
        Family::Softirq,
        Family::Syscalls,
        Family::Wiredtiger,
        Family::Perf,
        Family::Alloc,
        Family::Contention,
    ];

    /// The family's name in recordings, reports and metrics.
    pub const fn name(self) -> &'static str {
        match self {
            Family::Sched => "sched",
            Family::Softirq => "softirq",
            Family::Syscalls => "syscalls",
            Family::Perf => "perf",
            Family::Wiredtiger => "wiredtiger",
            Family::Contention => "contention",
            Family::Alloc => "alloc",
        }
    }

    /// The family's place in [`Self::ALL`] (an index for per-family arrays).
    pub const fn index(self) -> usize {
        match self {
            Family::Sched => 0,
            Family::Softirq => 1,
            Family::Syscalls => 2,
            Family::Wiredtiger => 3,
            Family::Perf => 4,
            Family::Alloc => 5,
            Family::Contention => 6,
        }
    }

    /// Every family's name, comma-separated (for messages).
    pub fn names() -> String {
        Family::ALL.map(Family::name).join(", ")
    }

    /// The family named `name`, if any.
    pub fn from_name(name: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// Which families a recording or the agent runs: all of them, or the ones
/// the user named (`record --probes sched,softirq`, the agent's `probes`
/// key). The others are left out by choice, and their status says so.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// `None`: every family.
    chosen: Option<Vec<Family>>,
}

/// A family name that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectionError {
    #[error("unknown probe family {name:?}: choose among {}", Family::names())]
    Unknown { name: String },
    #[error("no probe family named: choose among {}", Family::names())]
    Empty,
}

impl Selection {
    /// Every family.
    pub fn all() -> Self {
        Self::default()
    }

    /// The families named in `names` (each a [`Family::name`]; repeats
    /// ignored, order kept).
    pub fn of_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Self, SelectionError> {
        let mut chosen: Vec<Family> = Vec::new();
        for name in names {
            let name = name.trim();
            let family = Family::from_name(name).ok_or_else(|| SelectionError::Unknown {
                name: name.to_owned(),
            })?;
            if !chosen.contains(&family) {
                chosen.push(family);
            }
        }
        if chosen.is_empty() {
            return Err(SelectionError::Empty);
        }
        Ok(Self {
            chosen: Some(chosen),
        })
    }

    /// A comma-separated list of names (`sched,softirq`); `all` for every
    /// family.
    pub fn parse(list: &str) -> Result<Self, SelectionError> {
        if list.trim() == "all" {
            return Ok(Self::all());
        }
        Self::of_names(list.split(',').filter(|n| !n.trim().is_empty()))
    }

    /// Whether `family` runs.
    pub fn includes(&self, family: Family) -> bool {
        self.chosen.as_ref().is_none_or(|c| c.contains(&family))
    }

    /// Why a family that does not run was left out, for its status.
    pub fn left_out_reason(&self) -> String {
        let names: Vec<&str> = Family::ALL
            .into_iter()
            .filter(|&f| self.includes(f))
            .map(Family::name)
            .collect();
        format!("left out by choice (probes: {})", names.join(","))
    }
}

/// What every family's section of a slice says about itself.
pub trait Section {
    /// Events its kernel side could not count in this section (full maps,
    /// unmatched exits, full ring buffers...), all kinds summed.
    fn drops_total(&self) -> u64;
}

/// What a family's totals are computed from: its section of a window
/// (every slice merged) and what the recording says around it. The hub
/// (`recording::Recording::family_window`) fills it, so a family's facts
/// and report section never read the whole recording.
#[derive(Debug, Clone, Copy)]
pub struct FamilyWindow<'a, S> {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selection_names_families_or_says_which_exist() {
        let s = Selection::parse("sched, softirq,sched").unwrap();
        assert!(s.includes(Family::Sched) && s.includes(Family::Softirq));
        assert!(!s.includes(Family::Alloc));
        assert_eq!(
            s.left_out_reason(),
            "left out by choice (probes: sched,softirq)"
        );
        let all = Selection::parse("all").unwrap();
        assert!(Family::ALL.into_iter().all(|f| all.includes(f)));
        assert!(Selection::all().includes(Family::Contention));
        let e = Selection::parse("sched,allocator").unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown probe family \"allocator\": choose among sched, softirq, syscalls, wiredtiger, perf, alloc, contention"
        );
        assert_eq!(Selection::parse(" , ").unwrap_err(), SelectionError::Empty);
    }

    #[test]
    fn names_round_trip_and_are_distinct() {
        for f in Family::ALL {
            assert_eq!(Family::from_name(f.name()), Some(f));
        }
        let mut names: Vec<_> = Family::ALL.iter().map(|f| f.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Family::ALL.len());
        assert_eq!(Family::from_name("allocator"), None);
        for (i, f) in Family::ALL.into_iter().enumerate() {
            assert_eq!(f.index(), i, "{f:?}");
        }
    }
}
