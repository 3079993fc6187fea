//! Root integration suite: loads real BPF and checks what mdiag records against
//! the kernel's own accounting. Run as root (`cargo xtask test`); these tests
//! fail rather than skip when not root, because CI must execute them.
//!
//! Tests run one at a time (`--test-threads=1`): they measure the whole host.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "all of this crate is test code, helpers included: a failed unwrap is a failed test with its message"
)]
#![allow(
    clippy::too_many_lines,
    reason = "an end-to-end test starts its workload, records and checks every figure against the kernel's in one place"
)]

mod agent;
mod agent_soak;
mod alloc;
mod checkpoint_contention;
mod contention;
mod cpu_saturation;
mod dashboards;
mod duty;
mod fleet;
mod fleet_e2e;
mod fleet_guard;
mod fleet_view;
mod html;
mod long_recording;
mod metrics_tls;
mod mongo_poll;
mod mongod_agent;
mod mongod_figures;
mod mongod_ftdc;
mod mongod_rules;
mod netns_targets;
mod notify;
mod perf;
mod physics;
mod query_targeting;
mod readahead;
mod real_mongod;
mod real_replication;
mod record_cli;
mod sched;
mod secantusdb;
mod softirq;
mod stacks;
mod syscalls;
mod tcmalloc;
mod unit;
mod wiredtiger;
