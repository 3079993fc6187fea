//! Windows of the contention family: every figure is a wait count or time
//! split by checkpoint window, summed; threads by tid, bounded by wait time
//! (kernel locks plus D-state) with an "others" thread; lock kinds by (kind,
//! flags), a dozen at most, never bounded; D-state stacks by stack id,
//! bounded by sleep time, the rest folded into `other_stacks` (what that
//! field already holds for the stacks a slice leaves out); drops summed.

use super::section::{
    ContentionDropsSlice, ContentionSlice, DStateStackSlice, LockKindSlice, ThreadContentionSlice,
    WindowSplit,
};
use crate::kit::merge::{Mergeable, Row, ThreadRow, add, keep_top, merge_rows};

/// `a += b` field by field, saturating.
fn add_split(a: &mut WindowSplit, b: &WindowSplit) {
    add(&mut a.outside, b.outside);
    add(&mut a.outside_ns, b.outside_ns);
    add(&mut a.inside, b.inside);
    add(&mut a.inside_ns, b.inside_ns);
}

impl Mergeable for ContentionSlice {
    fn merge(&mut self, later: &Self) {
        merge_rows(&mut self.threads, &later.threads);
        merge_rows(&mut self.lock_kinds, &later.lock_kinds);
        merge_rows(&mut self.dstate_stacks, &later.dstate_stacks);
        add_split(&mut self.other_stacks, &later.other_stacks);
        self.drops.merge(&later.drops);
        // Stacks are not windowed: a recording's reader sums every slice's
        // into the recording's off-CPU profile before slices are merged.
        self.wait_stack_defs.clear();
        self.waits.clear();
        self.wait_sample_every = self.wait_sample_every.max(later.wait_sample_every);
    }

    fn bound(&mut self, top_n: usize) {
        keep_top(&mut self.threads, top_n);
        self.dstate_stacks.sort_by_key(|s| {
            (
                std::cmp::Reverse(s.sleeps.outside_ns.saturating_add(s.sleeps.inside_ns)),
                s.stack_id,
            )
        });
        if self.dstate_stacks.len() > top_n {
            for s in self.dstate_stacks.split_off(top_n) {
                add_split(&mut self.other_stacks, &s.sleeps);
            }
        }
    }
}

impl Mergeable for ContentionDropsSlice {
    fn merge(&mut self, later: &Self) {
        add(&mut self.inflight_full, later.inflight_full);
        add(&mut self.thread_map_full, later.thread_map_full);
        add(&mut self.stack_failed, later.stack_failed);
        add(&mut self.dstack_map_full, later.dstack_map_full);
        add(&mut self.nested, later.nested);
        add(&mut self.wait_stack_lost, later.wait_stack_lost);
        add(&mut self.wait_inflight_full, later.wait_inflight_full);
        add(&mut self.wait_map_full, later.wait_map_full);
    }
}

impl ThreadRow for ThreadContentionSlice {
    fn identity(&self) -> (u32, u32, Option<&str>) {
        (self.tid, self.tgid, Some(&self.comm))
    }

    fn identity_mut(&mut self) -> (&mut u32, &mut u32, Option<&mut String>) {
        (&mut self.tid, &mut self.tgid, Some(&mut self.comm))
    }

    fn add_counts(&mut self, o: &Self) {
        add_split(&mut self.lock, &o.lock);
        add_split(&mut self.dstate, &o.dstate);
    }

    /// Wait time: kernel locks plus D-state sleeps.
    fn thread_cost(&self) -> u64 {
        [
            self.lock.outside_ns,
            self.lock.inside_ns,
            self.dstate.outside_ns,
            self.dstate.inside_ns,
        ]
        .iter()
        .fold(0u64, |a, &n| a.saturating_add(n))
    }
}

impl Row for LockKindSlice {
    type Key = (String, u32);

    fn key(&self) -> (String, u32) {
        (self.kind.clone(), self.flags)
    }

    fn add(&mut self, later: &Self) {
        add_split(&mut self.waits, &later.waits);
    }
}

impl Row for DStateStackSlice {
    type Key = u32;

    fn key(&self) -> u32 {
        self.stack_id
    }

    fn add(&mut self, later: &Self) {
        add_split(&mut self.sleeps, &later.sleeps);
    }
}
