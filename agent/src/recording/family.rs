//! Every family's section of a slice, by [`Family`], generated from the
//! registry ([`for_each_family`]): [`Slice::sections`] and the
//! [`Sections`] and [`Kept`] views a family's totals join through
//! ([`FamilyWindow`](crate::kit::family::FamilyWindow)). Each destructures
//! the slice exhaustively, so a `Slice` field that is not a family of the
//! registry (or a family without its field) does not compile.

use std::any::Any;

use crate::kit::family::for_each_family;
pub use crate::kit::family::{Family, Kept, Section, Sections};

use super::{Recording, Slice};

/// Generates [`Slice::sections`] and `Sections for Slice`.
macro_rules! slice_sections {
    ($($variant:ident $module:ident,)*) => {
        impl Slice {
            /// Every family's section of this slice (`None`: the family has
            /// none), in [`Family::ALL`]'s order.
            pub fn sections(&self) -> [(Family, Option<&dyn Section>); Family::ALL.len()] {
                let Slice { start_ms: _, duration_ms: _, mongod: _, $($module,)* } = self;
                fn dyn_of<T: Section>(s: &Option<T>) -> Option<&dyn Section> {
                    s.as_ref().map(|s| s as &dyn Section)
                }
                [$((Family::$variant, dyn_of($module)),)*]
            }
        }

        impl Sections for Slice {
            fn section(&self, family: Family) -> Option<&dyn Any> {
                match family {
                    $(Family::$variant => self.$module.as_ref().map(|s| s as &dyn Any),)*
                }
            }
        }
    };
}
for_each_family!(slice_sections);

impl Kept for Recording {
    fn slices(&self) -> Vec<(u64, &dyn Sections)> {
        self.slices
            .iter()
            .map(|s| (s.duration_ms, s as &dyn Sections))
            .collect()
    }

    /// The target's code (perf's allocator, WiredTiger's object), the
    /// allocator's record and contention's kernel stacks; a family that
    /// keeps nothing beside its slices has nothing here.
    fn kept(&self, family: Family) -> Option<&dyn Any> {
        match family {
            Family::Perf | Family::Wiredtiger => self.target_code.as_ref().map(|c| c as &dyn Any),
            Family::Alloc => self.alloc.as_ref().map(|a| a as &dyn Any),
            Family::Contention => Some(&self.kernel_stacks as &dyn Any),
            _ => None,
        }
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

    /// Every family's section and what the recording keeps for a family
    /// reach a family window by their types: a section or kept type that
    /// changed would otherwise read as "none" without a word.
    #[test]
    fn family_windows_reach_every_section_and_what_is_kept_by_type() {
        use crate::family::{alloc, contention, perf, sched, softirq, syscalls, wiredtiger};
        use crate::kit::family::{FamilyWindow, OfFamily};
        let mut rec = crate::rules::facts::example_recording();
        rec.alloc = Some(alloc::AllocRecord::default());
        rec.kernel_stacks = vec![contention::KernelStack::default()];
        for s in &mut rec.slices {
            s.alloc = Some(alloc::AllocSlice::default());
        }
        let whole = rec.window();
        fn has<T: OfFamily>(w: &FamilyWindow<'_, sched::SchedSlice>) -> bool {
            w.other::<T>().is_some()
        }
        let w = rec.family_window::<sched::SchedSlice>(&whole);
        assert!(w.section.is_some());
        assert!(has::<sched::SchedSlice>(&w) && has::<softirq::SoftirqSlice>(&w));
        assert!(has::<syscalls::SyscallsSlice>(&w) && has::<perf::PerfSlice>(&w));
        assert!(has::<wiredtiger::WiredTigerSlice>(&w) && has::<alloc::AllocSlice>(&w));
        assert!(has::<contention::ContentionSlice>(&w));
        assert_eq!(w.per_slice().len(), rec.slices.len());
        assert!(w.per_slice().iter().all(|(ms, s)| *ms > 0 && s.is_some()));
        let perf = rec.family_window::<perf::PerfSlice>(&whole);
        assert!(perf.kept::<crate::symbols::TargetCode>().is_some());
        let wt = rec.family_window::<wiredtiger::WiredTigerSlice>(&whole);
        assert!(wt.kept::<crate::symbols::TargetCode>().is_some());
        let a = rec.family_window::<alloc::AllocSlice>(&whole);
        assert!(a.kept::<alloc::AllocRecord>().is_some());
        let c = rec.family_window::<contention::ContentionSlice>(&whole);
        assert_eq!(
            c.kept::<Vec<contention::KernelStack>>().map(Vec::len),
            Some(1)
        );
        // A family that keeps nothing beside its slices has nothing there.
        assert!(w.kept::<crate::symbols::TargetCode>().is_none());
    }
}
