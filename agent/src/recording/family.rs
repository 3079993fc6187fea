//! Every family's section of a slice, by [`Family`]: [`Slice::sections`]
//! destructures the slice exhaustively, so a new section does not compile
//! until it is listed there.

pub use crate::kit::family::{Family, Section};

use super::Slice;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::{PerfSlice, SoftirqSlice};

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
