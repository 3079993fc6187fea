//! Types shared by the kernel side (`mdiag-ebpf`) and user space (`mdiag`).
//!
//! Every map value is `#[repr(C)]` with explicit padding and no `bool`, so the
//! byte layout is identical on both sides; sizes are asserted at compile time.
//! Map, program and global-variable names are constants here so that the two
//! sides cannot drift apart silently (user space looks every one of them up by
//! these names and reports a clear error when one is missing).
//!
//! The `user` feature adds `aya::Pod` impls (needed to read maps) and serde.
#![no_std]

pub mod hist;
pub mod perf;
pub mod sched;
pub mod softirq;
pub mod syscalls;
pub mod wiredtiger;
