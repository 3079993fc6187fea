//! The agent's soak, CI-sized: one-second windows stand for the default
//! minute, so two minutes of runtime are two hours of windows. Meanwhile
//! the target churns threads without end and is killed and restarted
//! again and again. Checked against the process's own accounting in /proc
//! and the kernel's list of BPF programs, never against the agent's word:
//! its RSS grows less than 1 MiB per hour of windows, its file descriptors
//! and loaded programs do not grow, and every restart is re-attached.
//!
//! A second soak watches the real mongod under a request load with the
//! per-event probes duty-cycled (detached and attached again many times).
//!
//! Every figure is a cycle's floor, read every 100 ms. Attaching to a
//! restarted target parses the kernel's BTF, which swings the agent's
//! anonymous memory by about 30 MiB until it is freed, and an allocator
//! window holds its links' fds while attached, so one read per cycle lands
//! on a random phase of those swings (a CI run read 65.1, 66.0, 65.2, 65.4,
//! 66.5, 65.1, 65.5, 66.4 MB). A leak raises the floor. The
//! RSS trend is the least-squares slope of the floors after two cycles of
//! warm-up, not the difference of two of them.

use std::{
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use mdiag_tests::agent::Agent;
use mdiag_tests::require_root;

const CHURN: &str = env!("CARGO_BIN_EXE_mdiag-churn");

fn churn() -> Child {
    let (child, _out) = mdiag_tests::spawn_ready(
        Command::new(CHURN)
            .args(["--live", "8"])
            .stdin(Stdio::null()),
    );
    child
}

/// (VmRSS bytes, open fds) of `pid`, from /proc.
fn footprint(pid: u32) -> (u64, usize) {
    let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap()
        * 1024;
    // BPF links are left out: the duty cycle closes and reopens the
    // per-event families' links by design (a cycle that happens to be
    // attached throughout has a dozen more); a leaked program still shows
    // in the program count, and a leaked link in the other fds it holds.
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_link(e.path())
                .map(|t| t.to_string_lossy() != "anon_inode:bpf_link")
                .unwrap_or(false)
        })
        .count();
    (rss, fds)
}

/// After two cycles of warm-up, the samples' floors `(seconds, RSS, fds,
/// programs)` do not grow: RSS by less than 1 MiB per hour of 60 s windows
/// (one-second windows here), fds and programs not at all.
fn assert_settled(label: &str, samples: &[(f64, u64, usize, usize)]) {
    let settled = &samples[2..];
    let (t_a, _, fds_a, progs_a) = settled[0];
    let (t_b, _, fds_b, progs_b) = *settled.last().unwrap();
    let floors: Vec<(f64, f64)> = settled.iter().map(|s| (s.0, s.1 as f64)).collect();
    let per_hour = slope(&floors) * 60.0;
    eprintln!(
        "{label}: {samples:?}; RSS floors over {:.0} windows: {per_hour:.0} B per hour of 60 s windows",
        t_b - t_a
    );
    assert!(
        per_hour < (1 << 20) as f64,
        "RSS grows {per_hour:.0} bytes per hour of windows: {samples:?}"
    );
    assert!(
        fds_b <= fds_a,
        "file descriptors grew {fds_a} → {fds_b}: {samples:?}"
    );
    assert_eq!(
        progs_b, progs_a,
        "BPF programs {progs_a} → {progs_b}: {samples:?}"
    );
}

/// Least-squares slope of `(x, y)` points, in y units per x unit.
fn slope(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    let (mx, my) = points
        .iter()
        .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
    let (sxy, sxx) = points.iter().fold((0.0, 0.0), |(sxy, sxx), (x, y)| {
        (sxy + (x - mx) * (y - my), sxx + (x - mx) * (x - mx))
    });
    sxy / sxx
}

#[test]
fn slope_of_a_line_and_of_a_flat_series() {
    let line: Vec<_> = (0..5).map(|i| (i as f64, 3.0 * i as f64 + 7.0)).collect();
    assert!((slope(&line) - 3.0).abs() < 1e-9);
    let flat = [(0.0, 5.0), (1.0, 6.0), (2.0, 5.0), (3.0, 6.0), (4.0, 5.5)];
    assert!(slope(&flat).abs() < 0.2);
}

/// mdiag's BPF programs loaded now (the kernel's list).
fn programs() -> usize {
    aya::programs::loaded_programs()
        .flatten()
        .filter(|p| p.name_as_str().is_some_and(|n| n.starts_with("mdiag_")))
        .count()
}

#[test]
fn the_agent_keeps_its_memory_fds_and_programs_through_restarts_and_thread_churn() {
    let _serial = mdiag_tests::serial();
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("mdiag.toml");
    std::fs::write(
        &cfg,
        format!(
            "[agent]\nwindow = \"1s\"\nlisten = \"127.0.0.1:0\"\nstate_dir = \"{}\"\n\
             processes = [\"mdiag-churn\"]\nflight_before = \"5s\"\nflight_after = \"1s\"\n\
             flight_max_files = 3\n",
            dir.path().join("state").display()
        ),
    )
    .unwrap();
    let mut target = churn();
    let mut agent = Agent::start(&cfg, &[]);
    let minute = Duration::from_secs(60);
    agent.wait_for(
        &["watching mdiag-churn", &format!("(pid {})", target.id())],
        minute,
    );
    let pid = agent.child.id();

    let restarts = 14;
    let mut samples = Vec::new();
    let t0 = Instant::now();
    for i in 0..=restarts {
        // Each cycle: a few windows of churn, then the target restarts.
        // Its figures are floors (see the header).
        let cycle = Instant::now();
        let (mut rss, mut fds, mut progs) = (u64::MAX, usize::MAX, usize::MAX);
        let length = if i == restarts {
            Duration::from_secs(2)
        } else {
            Duration::from_secs(5)
        };
        while cycle.elapsed() < length {
            agent.drain_for(Duration::from_millis(100));
            let (r, f) = footprint(pid);
            rss = rss.min(r);
            fds = fds.min(f);
            progs = progs.min(programs());
        }
        samples.push((t0.elapsed().as_secs_f64(), rss, fds, progs));
        if i == restarts {
            break;
        }
        target.kill().unwrap();
        target.wait().unwrap();
        agent.wait_for(&["mdiag-churn", "is gone"], Duration::from_secs(10));
        target = churn();
        agent.wait_for(
            &[&format!("(pid {})", target.id()), "watching"],
            Duration::from_secs(10),
        );
    }
    target.kill().unwrap();
    target.wait().unwrap();
    let (status, log) = agent.stop();
    assert!(status.success(), "{log}");
    assert_eq!(
        log.matches("watching mdiag-churn").count(),
        restarts + 1,
        "{log}"
    );

    // After two cycles of warm-up (start-up allocations, first windows,
    // the allocator's arenas reaching their working size), nothing grows.
    assert_settled("soak", &samples);
    // The flight recordings' directory kept its bound.
    let flights = std::fs::read_dir(dir.path().join("state/flight"))
        .map(|d| d.count())
        .unwrap_or(0);
    assert!(flights <= 3, "{flights} flight recordings kept");
}

/// Operations a second of each of the mongod soak's two connections.
const RATE: u32 = 300;

/// The soak on the real mongod 6.0.5 serving requests (a C++ server with a
/// 140 MB symbol table, one thread per connection), with a probe budget
/// below what the per-event programs cost, so that they are detached and
/// attached again (by the credit, and at least once a minute by the duty
/// cycle's MAX_OFF whatever the credit): memory, file descriptors and
/// programs stay flat.
#[test]
fn the_agent_on_a_real_mongod_keeps_its_memory_fds_and_programs_through_the_duty_cycle() {
    let _serial = mdiag_tests::serial();
    require_root();
    const NAME: &str = "mdiag-mongod";
    let server = mdiag_tests::mongod::Mongod::start_with(mdiag_tests::mongod::Options {
        name: Some(NAME.into()),
        ..Default::default()
    });
    // Paced (2 × 300 operations a second): requests for the probes to
    // see, without taking every CPU for the soak's two minutes.
    let load = mdiag_tests::mongod::Load::paced(&server.uri(), 2, RATE);
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("mdiag.toml");
    // probe_budget 0.002 of mongod's CPU time: below what the programs
    // cost on this host (they run on every context switch of the host, and
    // the paced mongod uses little CPU), so they are off most seconds.
    std::fs::write(
        &cfg,
        format!(
            "[agent]\nwindow = \"1s\"\nlisten = \"127.0.0.1:0\"\nstate_dir = \"{}\"\n\
             processes = [\"{NAME}\"]\nprobe_budget = 0.002\nflight_before = \"5s\"\n\
             flight_after = \"1s\"\nflight_max_files = 3\n\n[mongodb]\nuri = \"{}\"\n",
            dir.path().join("state").display(),
            server.uri()
        ),
    )
    .unwrap();
    let mut agent = Agent::start(&cfg, &[]);
    agent.wait_for(
        &[
            &format!("watching {NAME}"),
            &format!("(pid {})", server.pid()),
        ],
        Duration::from_secs(120),
    );
    let pid = agent.child.id();
    let cycles = 10;
    let mut samples = Vec::new();
    // 100 ms samples with the switch program attached, of all, and how
    // often it was attached again after being detached (the kernel's own
    // account of the agent's links).
    let (mut on, mut all, mut reattached, mut was) = (0u32, 0u32, 0u32, true);
    let t0 = Instant::now();
    for _ in 0..cycles {
        let cycle = Instant::now();
        let (mut rss, mut fds, mut progs) = (u64::MAX, usize::MAX, usize::MAX);
        while cycle.elapsed() < Duration::from_secs(10) {
            agent.drain_for(Duration::from_millis(100));
            let attached = mdiag_tests::agent::holds_sched_switch_link(pid);
            all += 1;
            on += u32::from(attached);
            reattached += u32::from(attached && !was);
            was = attached;
            let (r, f) = footprint(pid);
            rss = rss.min(r);
            fds = fds.min(f);
            progs = progs.min(programs());
        }
        samples.push((t0.elapsed().as_secs_f64(), rss, fds, progs));
    }
    let (seconds, total) = load.finish();
    let (status, log) = agent.stop();
    assert!(status.success(), "{log}");
    assert!(!seconds.is_empty(), "the load reported no second");
    // The load served what it was paced to (mongod kept up), by its own count.
    let ops_per_sec = total["ops_per_sec"].as_f64().unwrap_or(0.0);
    assert!(
        ops_per_sec >= 0.5 * f64::from(2 * RATE),
        "the load ran {ops_per_sec:.0} operations a second: {total}"
    );
    // The per-event programs were detached and attached again (the duty
    // cycle this soak is about), by the kernel's account of the links: at
    // least once, which MAX_OFF ensures in the soak's 100 s.
    eprintln!(
        "load: {total}; switch program attached in {on} of {all} samples, {reattached} times again"
    );
    assert!(
        reattached >= 1 && on < all,
        "the duty cycle did not run: attached in {on} of {all} samples, {reattached} times again:\n{log}"
    );
    assert_eq!(
        log.matches(&format!("watching {NAME}")).count(),
        1,
        "one attach for the whole run:\n{log}"
    );
    assert_settled("soak on mongod", &samples);
}
