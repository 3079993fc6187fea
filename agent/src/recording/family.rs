//! The probe families by name, at the bottom of the layers: one enum that
//! the probes, the recording's slice sections and the agent's totals all
//! name a family by, and [`Section`], what every family's section of a
//! slice says about itself.
//!
//! Why an enum and not strings: a new family is one variant, and every
//! `match` over it (and every exhaustive destructuring of
//! [`Slice`](super::Slice), as in [`Slice::sections`]) stops compiling until
//! the new family has its place there.

use super::{
    AllocSlice, ContentionSlice, PerfSlice, SchedSlice, Slice, SoftirqSlice, SyscallsSlice,
    WiredTigerSlice,
};

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

    /// The family named `name`, if any.
    pub fn from_name(name: &str) -> Option<Family> {
        Family::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// What every family's section of a slice says about itself.
pub trait Section {
    /// Events its kernel side could not count in this section (full maps,
    /// unmatched exits, full ring buffers...), all kinds summed.
    fn drops_total(&self) -> u64;
}

impl Slice {
    /// Every family's section of this slice (`None`: the family has none),
    /// in [`Family::ALL`]'s order. Destructures the slice exhaustively, so
    /// a new section does not compile until it is listed here.
    pub fn sections(&self) -> [(Family, Option<&dyn Section>); 7] {
        let Slice {
            start_ms: _,
            duration_ms: _,
            sched,
            softirq,
            syscalls,
            wiredtiger,
            perf,
            alloc,
            contention,
            mongod: _,
        } = self;
        fn dyn_of<T: Section>(s: &Option<T>) -> Option<&dyn Section> {
            s.as_ref().map(|s| s as &dyn Section)
        }
        [
            (Family::Sched, dyn_of(sched)),
            (Family::Softirq, dyn_of(softirq)),
            (Family::Syscalls, dyn_of(syscalls)),
            (Family::Wiredtiger, dyn_of(wiredtiger)),
            (Family::Perf, dyn_of(perf)),
            (Family::Alloc, dyn_of(alloc)),
            (Family::Contention, dyn_of(contention)),
        ]
    }
}

impl Section for SchedSlice {
    fn drops_total(&self) -> u64 {
        self.drops.total()
    }
}

impl Section for SoftirqSlice {
    fn drops_total(&self) -> u64 {
        let d = &self.drops;
        d.unmatched_exit + d.irq_map_full + d.bad_vector
    }
}

impl Section for SyscallsSlice {
    fn drops_total(&self) -> u64 {
        let d = &self.drops;
        d.inflight_full + d.thread_map_full + d.rseq_ring_full
    }
}

impl Section for WiredTigerSlice {
    fn drops_total(&self) -> u64 {
        let d = &self.drops;
        d.ring_full + d.missing_entry + d.start_map_full
    }
}

impl Section for PerfSlice {
    fn drops_total(&self) -> u64 {
        self.drops
    }
}

impl Section for AllocSlice {
    fn drops_total(&self) -> u64 {
        self.windows
            .iter()
            .map(|w| {
                let d = &w.drops;
                d.missing_entry + d.mismatched + d.too_deep + d.stack_full
            })
            .sum()
    }
}

impl Section for ContentionSlice {
    fn drops_total(&self) -> u64 {
        let d = &self.drops;
        d.inflight_full + d.thread_map_full + d.stack_failed + d.dstack_map_full
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn sections_follow_the_slice() {
        let slice = Slice {
            softirq: Some(SoftirqSlice {
                drops: crate::recording::SoftirqDrops {
                    unmatched_exit: 2,
                    irq_map_full: 3,
                    bad_vector: 4,
                },
                ..SoftirqSlice::default()
            }),
            perf: Some(PerfSlice {
                drops: 7,
                ..PerfSlice::default()
            }),
            ..Slice::default()
        };
        let present: Vec<(Family, u64)> = slice
            .sections()
            .into_iter()
            .filter_map(|(f, s)| s.map(|s| (f, s.drops_total())))
            .collect();
        assert_eq!(present, [(Family::Softirq, 9), (Family::Perf, 7)]);
        let order: Vec<Family> = slice.sections().iter().map(|(f, _)| *f).collect();
        assert_eq!(order, Family::ALL);
    }
}
