//! mdiag's eBPF object: every probe family in one ELF, one file per family.
//!
//! Built for `bpfel-unknown-none` by `agent/build.rs` (aya-build) with the
//! pinned nightly; on the host this file compiles to an empty program so that
//! `cargo check --workspace` and clippy work.
#![cfg_attr(target_arch = "bpf", no_std)]
#![cfg_attr(target_arch = "bpf", no_main)]

#[cfg(target_arch = "bpf")]
mod alloc;
#[cfg(target_arch = "bpf")]
mod contention;
#[cfg(target_arch = "bpf")]
mod perf;
#[cfg(target_arch = "bpf")]
mod sched;
#[cfg(target_arch = "bpf")]
mod softirq;
#[cfg(target_arch = "bpf")]
mod syscalls;
#[cfg(target_arch = "bpf")]
mod wiredtiger;

#[cfg(target_arch = "bpf")]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    // The verifier proves panics unreachable; this only satisfies the compiler.
    loop {}
}

/// BTF tracing programs and `bpf_probe_read_kernel` need a GPL-compatible licence.
#[cfg(target_arch = "bpf")]
#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";

#[cfg(not(target_arch = "bpf"))]
fn main() {}
