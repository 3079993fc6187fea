//! Random contention sections for the windows' property tests (test builds
//! only; `recording/window/random.rs` draws a slice of every family), with
//! keys drawn from small sets so that rows of different slices meet.

use super::section::{
    ContentionSlice, DStateStackSlice, LockKindSlice, ThreadContentionSlice, WindowSplit,
};
use crate::kit::random::Rng;

/// A random section.
pub fn random(r: &mut Rng, _start_ms: u64) -> ContentionSlice {
    let kinds = ["spinlock", "mutex", "rwsem:W"];
    ContentionSlice {
        threads: r
            .ids(5, 9)
            .into_iter()
            .map(|tid| ThreadContentionSlice {
                tid,
                tgid: 100,
                comm: format!("conn{tid}"),
                lock: split(r),
                dstate: split(r),
            })
            .collect(),
        lock_kinds: r
            .ids(3, 3)
            .into_iter()
            .map(|i| LockKindSlice {
                kind: kinds[i as usize - 1].into(),
                flags: i,
                waits: split(r),
            })
            .collect(),
        dstate_stacks: r
            .ids(4, 7)
            .into_iter()
            .map(|stack_id| DStateStackSlice {
                stack_id,
                sleeps: split(r),
            })
            .collect(),
        other_stacks: split(r),
        drops: Default::default(),
        wait_stack_defs: Vec::new(),
        waits: Vec::new(),
        wait_sample_every: 0,
    }
}

fn split(r: &mut Rng) -> WindowSplit {
    WindowSplit::from_arrays([r.below(5), r.below(5)], [r.below(10_000), r.below(10_000)])
}
