//! The contention family's section of the example recording
//! (`rules::facts::example`): made up, every number non-zero, so that every
//! fact the family derives is present when rules are checked at load.

use super::section::{
    ContentionSlice, DStateStackSlice, LockKindSlice, ThreadContentionSlice, WindowSplit,
};

/// Lock waits and D-state sleeps of the example slice's conn1.
pub fn example() -> ContentionSlice {
    ContentionSlice {
        threads: vec![ThreadContentionSlice {
            tid: 101,
            tgid: 100,
            comm: "conn1".into(),
            lock: WindowSplit::from_arrays([2, 1], [2_000_000, 3_000_000]),
            dstate: WindowSplit::from_arrays([1, 2], [1_000_000, 8_000_000]),
        }],
        lock_kinds: vec![LockKindSlice {
            kind: "rwsem:W".into(),
            flags: 0,
            waits: WindowSplit::from_arrays([2, 1], [2_000_000, 3_000_000]),
        }],
        dstate_stacks: vec![DStateStackSlice {
            stack_id: 7,
            sleeps: WindowSplit::from_arrays([1, 2], [1_000_000, 8_000_000]),
        }],
        ..Default::default()
    }
}
