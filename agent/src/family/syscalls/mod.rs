//! The syscalls family: memory syscalls (mmap, munmap, madvise, brk,
//! mremap: count, bytes, latency), futex waits per thread, and every rseq
//! registration with the library that made it.
//!
//! - [`probe`]: the reader of the cumulative counters and the rseq ring
//!   buffer, and the `pt_regs` offsets the programs read arguments with;
//!   [`hooks`] attaches fentry/fexit on just the watched syscalls' entry
//!   functions where the kernel allows, else `sys_enter` / `sys_exit`;
//!   [`numbers`] gives the watched syscalls' numbers per architecture;
//!   [`credit`] splits futex waits over the slices they overlap;
//! - [`section`]: the recording's syscalls section; [`merge`]: how sections
//!   of consecutive slices merge into a window;
//! - [`report`]: the report's syscalls measurements, built from a window,
//!   and their view.

pub mod example;
pub mod credit;
pub mod hooks;
mod merge;
pub(crate) mod numbers;
pub mod probe;
pub mod report;
pub mod section;
#[cfg(test)]
pub mod random;
pub mod unit;

pub use unit::Unit;
pub use crate::kit::probe::syscall_entries as entry_points;
pub use numbers::syscall_numbers;
pub use probe::{FAMILY, RegsOffsets, SyscallsReader, TRACEPOINTS, attach, regs_offsets};
pub use section::{RseqCall, SyscallCalls, SyscallDropsSlice, SyscallsSlice, ThreadSyscallSlice};
