//! mdiag: eBPF profiling and diagnosis for MongoDB hosts.
//!
//! The binary (`src/main.rs`) is thin: it parses arguments ([`cli`]), resolves a
//! plan and runs it ([`app`]). Probe families live in [`probes`] (user side of
//! the eBPF programs in `ebpf/mdiag-ebpf`), recordings in [`recording`], rules
//! in [`rules`], reports in [`report`].
pub mod recording;
// pub mod rules;
// pub mod report;
// pub mod explain;

pub static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/mdiag"));
pub mod probes;
