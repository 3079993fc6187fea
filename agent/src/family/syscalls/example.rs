//! The syscalls family's section of the example recording
//! (`rules::facts::example`): made up, every number non-zero, so that every
//! fact the family derives is present when rules are checked at load.

use super::section::{SyscallsSlice, ThreadSyscallSlice};

/// conn1 waits on futexes inside and outside a 300 ms checkpoint.
pub fn example() -> SyscallsSlice {
    SyscallsSlice {
        threads: vec![ThreadSyscallSlice {
            tid: 101,
            tgid: 100,
            futex_waits: 10,
            futex_wait_ns: 100_000_000,
            futex_waits_in_checkpoint: 6,
            futex_wait_ns_in_checkpoint: 60_000_000,
            ..Default::default()
        }],
        ..Default::default()
    }
}
