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

pub mod alloc;
pub mod contention;
pub mod hist;
pub mod perf;
pub mod sched;
pub mod softirq;
pub mod stack;
pub mod syscalls;
pub mod wiredtiger;

/// Copies a `T` out of the start of `bytes` (ring-buffer records), `None`
/// when there are too few bytes.
///
/// # Safety
/// Every bit pattern must be a valid `T`: only for the plain `#[repr(C)]`
/// integer records of this crate.
pub(crate) unsafe fn read_plain<T: Copy>(bytes: &[u8]) -> Option<T> {
    if bytes.len() < core::mem::size_of::<T>() {
        return None;
    }
    // SAFETY: the length is checked, the caller guarantees any bit pattern
    // is a valid T, and read_unaligned copes with any alignment.
    Some(unsafe { core::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}
