//! Library half of the eBPF crate: it exists so that `agent/build.rs` can take a
//! build-dependency on this package (cargo then rebuilds the agent when the
//! kernel side changes). The programs themselves live in the `mdiag` binary.
#![no_std]
