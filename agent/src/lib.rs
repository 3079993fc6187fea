//! mdiag: eBPF profiling and diagnosis for MongoDB hosts.
//!
//! The binary (`src/main.rs`) is thin: it parses arguments ([`cli`]), then
//! [`app`] resolves a plan and runs it. Probe families live in [`probes`] (the
//! user side of the programs in `ebpf/mdiag-ebpf`), recordings in
//! [`recording`], the `record` command in [`record`], rules in [`rules`],
//! `explain` in [`explain`] and the renderers in [`report`].
pub mod agent;
pub mod alerts;
pub mod app;
pub mod check_config;
pub mod cli;
pub mod cli_gen;
pub mod cli_parse;
pub mod compare;
pub mod config_file;
#[cfg(test)]
mod docs_contract;
#[cfg(test)]
pub(crate) mod emulation;
pub mod explain;
pub mod export;
pub mod export_stacks;
pub mod family;
pub mod findings;
pub mod fleet;
pub mod ftdc;
pub mod hist;
pub mod host;
pub mod journal;
pub mod kit;
pub mod kstack;
pub mod logging;
pub mod messages;
#[cfg(test)]
mod module_graph_tests;
pub mod mongo;
pub mod offload;
pub mod privileges;
pub mod probes;
#[cfg(test)]
mod readme_contract;
pub mod record;
pub mod recording;
pub mod report;
pub mod rseq;
pub mod rules;
pub mod runbook;
pub mod spawn;
pub mod stacks;
pub mod symbols;
pub mod target;
#[cfg(test)]
pub(crate) mod test_child;
pub mod threads;

/// The eBPF object built by `build.rs` (empty when built with AYA_BUILD_SKIP=1).
pub static EBPF_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/mdiag"));
