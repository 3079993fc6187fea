//! The agent's duty cycle of the per-event probes (`probe_budget`,
//! `agent/duty.rs`) on the real mongod 6.0.5 serving requests.
//!
//! Ground truth from the kernel, not from mdiag: whether the scheduler
//! family's program is attached at a given moment is read from the agent's
//! own file descriptors (`/proc/PID/fdinfo/N` of a BPF link names its
//! `link_type` and, for a raw tracepoint, its `tp_name`). Sampled every
//! 100 ms, the share of samples with a `sched_switch` link must match the
//! coverage the agent reports (`mdiag_probe_coverage_ratio`), and a budget
//! far below the programs' cost must leave them detached most of the time.
//! The near miss: `probe_budget = 1` never detaches them.
//!
//! Cost: about 2 x 25 s (a mongod start, 20 s of sampling each).

use std::path::Path;
use std::time::{Duration, Instant};

use mdiag_tests::agent::{Agent, http_get, sample};
use mdiag_tests::mongod::{Load, Mongod, Options};
use mdiag_tests::require_root;

use crate::agent::rules_dir;

/// The name (comm) this test's mongod runs under, and the agent watches.
const NAME: &str = "mdiag-mongod";
/// How long the links are sampled.
const SAMPLING: Duration = Duration::from_secs(20);

/// The agent's config: 5 s windows, the given budget.
fn config(dir: &Path, budget: &str) -> std::path::PathBuf {
    let path = dir.join("mdiag.toml");
    let text = format!(
        "[agent]\nwindow = \"5s\"\nlisten = \"127.0.0.1:0\"\nstate_dir = \"{}\"\n\
         processes = [\"{NAME}\"]\nprobe_budget = {budget}\nalloc_budget = 0\n",
        dir.join("state").display()
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs the agent with `budget` on a loaded mongod; returns the share of
/// 100 ms samples with the switch program attached, and the coverage the
/// agent reported for its last window.
fn attached_share(budget: &str) -> (f64, f64, String) {
    let server = Mongod::start_with(Options {
        name: Some(NAME.into()),
        ..Options::default()
    });
    let load = Load::start(&server.uri(), 2);
    let dir = tempfile::tempdir().unwrap();
    let rules = rules_dir(dir.path());
    let cfg = config(dir.path(), budget);
    let mut agent = Agent::start(&cfg, &["--rules", rules.to_str().unwrap()]);
    let addr = agent.metrics_addr();
    let id = format!("{NAME}:{}", server.port());
    let pid = agent.child.id();
    // Sampled from the line saying the probes are attached: the first
    // second is attached whatever the budget (its cost is not known yet).
    let watching = format!("watching {id} (pid {})", server.pid());
    let (mut on, mut samples) = (0u32, 0u32);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut end = None;
    while end.is_none_or(|e| Instant::now() < e) {
        assert!(
            Instant::now() < deadline,
            "never watched {id}:\n{}",
            agent.log
        );
        let attached = mdiag_tests::agent::holds_sched_switch_link(pid);
        if end.is_none() && agent.log.contains(&watching) {
            end = Some(Instant::now() + SAMPLING);
        }
        if end.is_some() {
            samples += 1;
            on += u32::from(attached);
        }
        agent.drain_for(Duration::from_millis(100));
    }
    let (_, _, text) = http_get(&addr, "/metrics");
    let series = format!("mdiag_probe_coverage_ratio{{target=\"{id}\"}}");
    let coverage = sample(&text, &series)
        .unwrap_or_else(|| panic!("no {series} in /metrics:\n{text}\n{}", agent.log));
    let (seconds, _) = load.finish();
    let (status, log) = agent.stop();
    assert!(status.success(), "{status:?}\n{log}");
    assert!(!seconds.is_empty(), "the load reported no second");
    (f64::from(on) / f64::from(samples.max(1)), coverage, log)
}

#[test]
fn a_small_probe_budget_detaches_the_per_event_programs_most_of_the_time() {
    let _serial = mdiag_tests::serial();
    require_root();
    // 0.001 % of mongod's CPU: far below what a switch program costs on
    // every switch of a loaded mongod.
    let (share, coverage, log) = attached_share("0.00001");
    eprintln!("sched_switch attached in {share:.2} of the samples; coverage {coverage:.2}");
    assert!(
        share > 0.0,
        "the programs were never attached (the first second is):\n{log}"
    );
    assert!(
        share < 0.5,
        "attached in {share:.2} of the samples with a budget far below their cost:\n{log}"
    );
    assert!(
        coverage < 0.5,
        "the agent says it covered {coverage:.2} of its last window:\n{log}"
    );
}

#[test]
fn a_budget_of_one_keeps_them_attached() {
    let _serial = mdiag_tests::serial();
    require_root();
    let (share, coverage, log) = attached_share("1");
    eprintln!("sched_switch attached in {share:.2} of the samples; coverage {coverage:.2}");
    assert_eq!(
        share, 1.0,
        "detached at some point with probe_budget = 1:\n{log}"
    );
    assert_eq!(coverage, 1.0, "{log}");
}
