//! `cargo xtask bench-agent`: what the continuous agent (`mdiag agent`)
//! costs, measured side by side in one run and printed next to its budgets
//! (issues #13 "Budgets" and #24). A benchmark, never a test: the figures
//! depend on the machine and on what else runs on it.
//!
//! By default (`--target mongod`) the real-server bench of `real.rs` with
//! two modes, unobserved and the agent (`--all-observers` adds `record` and
//! bpftrace's pair): mongod's CPU per operation and throughput, the agent's
//! CPU and RSS steady and peak while it watches that mongod, its BPF
//! programs' cost, the ping-pong worst case under it.
//!
//! With `--target tcmalloc`, what it measured before the real server:
//! 1. The agent's own CPU (utime + stime from `/proc/PID/stat` over a
//!    measured interval that starts after its probes are attached and a
//!    little more, so attach is left out) as a share of one core, and its
//!    resident set: steady (`VmRSS` at the end of the interval) and peak
//!    (`VmHWM`), while its target, `mdiag-pingpong`, makes the host switch
//!    context about 100 k times a second. Budgets: CPU ≤ 0.5 % of one core,
//!    RSS ≤ 48 MiB steady.
//! 2. What it costs its target with the default allocator budget
//!    (`agent_cost.rs`): the TCMalloc workload unobserved and watched, in
//!    rounds that rotate the order; medians of its throughput (budget: a
//!    drop ≤ 1 %) and of its CPU time per allocation between runs, and,
//!    resolving 1 % on a small shared host, the CPU time per allocation
//!    within each watched run against its own stretches away from the
//!    allocator windows (`windows.rs`), with that method's noise.
//!
//! The agent runs with windows of 10 s (`--window-secs`) instead of its default
//! 60 s, so that a run of a minute evaluates several; the output says so.
//! Its other settings are its defaults, but for `processes` (the target),
//! `listen` (an ephemeral loopback port) and `state_dir` (a private one).
use std::{
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    path::Path,
    process::{Child, Command, Stdio},
    sync::mpsc::{Receiver, RecvTimeoutError, channel},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use super::{
    agent_cost::target_cost,
    common::{
        Binaries, TempDir, build_binaries, clock_ticks_per_sec, cpu_ticks, proc_stat_ctxt, signal,
        status_kib, verdict,
    },
};
use crate::{cmd::is_root, say};

const CPU_BUDGET_PCT: f64 = 0.5;
const RSS_BUDGET_MIB: f64 = 48.0;
/// How long the agent may take to attach to its target.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(60);
/// How long it may take to stop after SIGTERM.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// Options of `cargo xtask bench-agent`.
#[derive(clap::Args)]
pub struct AgentBenchArgs {
    /// Use the debug build of mdiag instead of the release one.
    #[arg(long)]
    debug: bool,
    /// What the agent watches.
    #[arg(long, value_enum, default_value_t = super::BenchTarget::Mongod)]
    target: super::BenchTarget,
    /// --target mongod: also compare `mdiag record` and bpftrace's pair.
    #[arg(long)]
    all_observers: bool,
    #[command(flatten)]
    real: super::real::RealArgs,
    /// The agent's rule window in seconds (its default is 60; shorter, so
    /// that a short run evaluates several).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) window_secs: u64,
    /// --target tcmalloc: seconds of the CPU and RSS measurement (after start-up).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    cpu_secs: u64,
    /// Rounds of the target-cost comparison (each runs both modes once).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    pub(super) rounds: u32,
    /// --target tcmalloc: length of one workload run, in milliseconds (a multiple of the
    /// agent's allocator window period, 20 s by default, holds its windows
    /// in their steady share).
    #[arg(long, default_value_t = 40_000, value_parser = clap::value_parser!(u64).range(200..))]
    pub(super) ms: u64,
    /// --target tcmalloc: allocating threads of the workload.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) threads: u64,
}

pub fn bench_agent(args: &AgentBenchArgs) -> Result<()> {
    if !is_root() {
        bail!(
            "the agent bench loads BPF programs and needs root: run it as root, e.g. `sudo -E cargo xtask bench-agent`"
        );
    }
    if args.target == super::BenchTarget::Mongod {
        return bench_agent_real(args);
    }
    let bins = build_binaries(args.debug)?;
    let tmp = TempDir::new("bench-agent")?;
    println!(
        "mdiag agent bench: mdiag {} build; agent windows of {} s (its default is 60 s: shorter, so that a short run evaluates several), its other settings its defaults; {} CPUs",
        if args.debug { "debug" } else { "release" },
        args.window_secs,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    own_cost(&bins, tmp.path(), args)?;
    target_cost(&bins, tmp.path(), args)?;
    Ok(())
}

/// The default: the agent (and on request the other observers) on the real
/// mongod, and the worst case.
fn bench_agent_real(args: &AgentBenchArgs) -> Result<()> {
    use super::observers::{Mode, Setting, find_bpftrace};
    let bins = super::common::build_real(args.debug)?;
    let tmp = TempDir::new("bench-agent")?;
    let bpftrace = find_bpftrace();
    let mut modes = vec![Mode::Unobserved, Mode::Agent];
    if args.all_observers {
        modes.push(Mode::Record);
        match &bpftrace {
            Some(_) => modes.push(Mode::Bpftrace),
            None => println!(
                "bpftrace is not installed (`./x setup` installs it): its pair is not measured"
            ),
        }
    }
    println!(
        "mdiag agent bench: mdiag {} build; agent windows of {} s (its default is 60 s: shorter, so that a short run evaluates several), its other settings its defaults; {} CPUs",
        if args.debug { "debug" } else { "release" },
        args.window_secs,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    super::real::run(&super::real::Plan {
        modes,
        rounds: args.rounds,
        args: &args.real,
        setting: Setting {
            mdiag: &bins.mdiag,
            bpftrace: bpftrace.as_deref(),
            dir: tmp.path(),
            window_secs: args.window_secs,
        },
        load: &bins.load,
        pingpong: &bins.pingpong,
    })
}

// ------------------------------------------------------------ the agent

/// A running `mdiag agent`, watching its target.
pub(super) struct Agent {
    child: Option<Child>,
    /// Where it serves /metrics (`127.0.0.1:PORT`).
    addr: String,
    /// Its stderr, line by line, read by a thread until it closes.
    lines: Receiver<String>,
    /// What it logged so far.
    pub(super) log: String,
}

impl Agent {
    /// Starts `mdiag agent` with a config of its own in `dir` that watches
    /// processes named `process`, and returns once it says it watches `pid`.
    /// Without `uri` it polls no mongod (`--no-mongo`) and logs its
    /// allocator windows (`windows.rs`); with one, it polls that mongod and
    /// logs as it does by default.
    pub(super) fn start(
        mdiag: &Path,
        dir: &Path,
        process: &str,
        pid: u32,
        window_secs: u64,
        uri: Option<&str>,
    ) -> Result<Self> {
        let state = dir.join("agent-state");
        // A fresh state directory: no flight ring of an earlier run.
        let _ = std::fs::remove_dir_all(&state);
        let config = dir.join("agent.toml");
        std::fs::write(&config, config_text(window_secs, &state, process, uri))
            .with_context(|| format!("writing {}", config.display()))?;
        let mut cmd = Command::new(mdiag);
        cmd.arg("agent").arg("--config").arg(&config);
        if uri.is_none() {
            // Its allocator windows, one line each (`windows.rs` reads them).
            cmd.arg("--no-mongo")
                .env("RUST_LOG", "warn,mdiag::family::alloc::probe::paced=debug");
        } else {
            cmd.env_remove("RUST_LOG");
        }
        let mut child = cmd
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("start mdiag agent")?;
        let stderr = child.stderr.take().context("mdiag agent stderr")?;
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut agent = Agent {
            child: Some(child),
            addr: String::new(),
            lines,
            log: String::new(),
        };
        let watching = format!("(pid {pid}); probes attached");
        let deadline = Instant::now() + ATTACH_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match agent.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => bail!(
                    "mdiag agent did not attach to pid {pid} within {ATTACH_TIMEOUT:?}: {}",
                    agent.log
                ),
                Err(RecvTimeoutError::Disconnected) => {
                    bail!("mdiag agent stopped before it attached: {}", agent.log)
                }
            };
            agent.log.push_str(&line);
            agent.log.push('\n');
            if let Some(addr) = served_at(&line) {
                agent.addr = addr.to_owned();
            }
            if line.contains(&watching) {
                if agent.addr.is_empty() {
                    bail!(
                        "mdiag agent did not say where it serves /metrics: {}",
                        agent.log
                    );
                }
                return Ok(agent);
            }
        }
    }

    pub(super) fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The line that says what it watches, with its probes.
    pub(super) fn attached_line(&self) -> &str {
        self.log
            .lines()
            .find(|l| l.contains("probes attached"))
            .unwrap_or_default()
    }

    /// Its /metrics, now.
    pub(super) fn metrics(&self) -> Result<String> {
        http_get(&self.addr, "/metrics")
    }

    /// Stops it with SIGTERM, as a service manager does, and waits for it;
    /// fails when it does not exit 0 within [`STOP_TIMEOUT`]. Returns all
    /// it logged.
    pub(super) fn stop(mut self) -> Result<String> {
        let Some(mut child) = self.child.take() else {
            return Ok(std::mem::take(&mut self.log));
        };
        signal(&child, libc::SIGTERM);
        let deadline = Instant::now() + STOP_TIMEOUT;
        let status = loop {
            if let Some(status) = child.try_wait().context("waiting for mdiag agent")? {
                break status;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "mdiag agent did not stop within {STOP_TIMEOUT:?} of SIGTERM: {}",
                    self.rest_of_log()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        if !status.success() {
            bail!("mdiag agent ended with {status}: {}", self.rest_of_log());
        }
        self.rest_of_log();
        Ok(std::mem::take(&mut self.log))
    }

    /// Everything it logged, once its stderr is closed.
    fn rest_of_log(&mut self) -> &str {
        while let Ok(line) = self.lines.recv_timeout(Duration::from_secs(1)) {
            self.log.push_str(&line);
            self.log.push('\n');
        }
        &self.log
    }
}

impl Drop for Agent {
    /// An agent left running by an error is killed.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The agent's config file: `window`, a private state directory, an
/// ephemeral loopback port, the one target, the mongod it polls if any; the
/// rest its defaults.
fn config_text(window_secs: u64, state_dir: &Path, process: &str, uri: Option<&str>) -> String {
    // Debug formatting quotes and escapes like a TOML basic string for the
    // paths, names and URIs used here.
    let mut text = format!(
        "[agent]\nwindow = \"{window_secs}s\"\nlisten = \"127.0.0.1:0\"\nstate_dir = {:?}\nprocesses = [{:?}]\n",
        state_dir.display().to_string(),
        process
    );
    if let Some(uri) = uri {
        text.push_str(&format!("\n[mongodb]\nuri = {uri:?}\n"));
    }
    text
}

/// The address in "mdiag agent: serving metrics at http://ADDR/metrics".
fn served_at(line: &str) -> Option<&str> {
    line.split_once("serving metrics at http://")?
        .1
        .strip_suffix("/metrics")
}

/// `GET path` over HTTP/1.0 from `addr`: the body of a 200 answer.
fn http_get(addr: &str, path: &str) -> Result<String> {
    let mut s = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)
        .with_context(|| format!("reading http://{addr}{path}"))?;
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .with_context(|| format!("http://{addr}{path} answered without a header end"))?;
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        bail!("http://{addr}{path} answered {status:?}");
    }
    Ok(body.to_owned())
}

/// The value of the sample `name` (no labels: the agent writes `name{}`)
/// in OpenMetrics text.
pub(super) fn sample(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|l| {
        let (n, v) = l.split_once(' ')?;
        (n.strip_suffix("{}").unwrap_or(n) == name).then(|| v.trim().parse().ok())?
    })
}

/// The families `mdiag_probe_up` says are up (1) for `target`.
pub(super) fn families_up(metrics: &str, target_prefix: &str) -> Vec<String> {
    metrics
        .lines()
        .filter(|l| l.starts_with("mdiag_probe_up{"))
        .filter(|l| l.contains(&format!("target=\"{target_prefix}")))
        .filter(|l| {
            l.rsplit_once(' ')
                .is_some_and(|(_, v)| v.trim().parse::<f64>() == Ok(1.0))
        })
        .filter_map(|l| {
            let (_, rest) = l.split_once("family=\"")?;
            Some(rest.split_once('"')?.0.to_owned())
        })
        .collect()
}

// --------------------------------------------------------------- part 1

/// Part 1: the agent's CPU and resident set while its target switches
/// context about 100 k times a second.
fn own_cost(bins: &Binaries, dir: &Path, args: &AgentBenchArgs) -> Result<()> {
    const SETTLE: Duration = Duration::from_secs(2);
    let secs = args.cpu_secs;
    // Long enough for the agent to attach before and stop after the interval.
    let pingpong_ms = (secs + 60) * 1000;
    let mut pingpong = Command::new(&bins.pingpong)
        .args(["--ms", &pingpong_ms.to_string()])
        .stdout(Stdio::null())
        .spawn()
        .context("start mdiag-pingpong")?;
    let result = (|| -> Result<()> {
        let agent = Agent::start(
            &bins.mdiag,
            dir,
            "mdiag-pingpong",
            pingpong.id(),
            args.window_secs,
            None,
        )?;
        let pid = agent.pid().context("the agent's pid")?;
        say!("{}", agent.attached_line());
        // Attach is left out: its loading and the first slices' symbols.
        std::thread::sleep(SETTLE);
        let t0 = Instant::now();
        let (c0, x0) = (cpu_ticks(pid), proc_stat_ctxt());
        std::thread::sleep(Duration::from_secs(secs));
        let (c1, x1) = (cpu_ticks(pid), proc_stat_ctxt());
        let wall = t0.elapsed().as_secs_f64();
        let rss_kib = status_kib(pid, "VmRSS:");
        let hwm_kib = status_kib(pid, "VmHWM:");
        let metrics = agent.metrics();
        agent.stop()?;
        let (Some(c0), Some(c1), Some(x0), Some(x1), Some(rss_kib), Some(hwm_kib)) =
            (c0, c1, x0, x1, rss_kib, hwm_kib)
        else {
            bail!("could not read /proc/{pid}/stat, /proc/{pid}/status or /proc/stat");
        };
        let cpu_pct = (c1 - c0) as f64 / clock_ticks_per_sec() / wall * 100.0;
        let rate = (x1 - x0) as f64 / wall;
        let mib = |k: u64| k as f64 / 1024.0;
        println!();
        println!(
            "1. mdiag agent watching mdiag-pingpong while the host switches context {:.0} k times/s (target ~100 k), over {wall:.1} s from {} s after attach",
            rate / 1e3,
            SETTLE.as_secs()
        );
        println!(
            "   agent CPU         {cpu_pct:>6.2} % of one core   budget <= {CPU_BUDGET_PCT} %    {}",
            verdict(cpu_pct <= CPU_BUDGET_PCT)
        );
        println!(
            "   agent RSS steady  {:>6.1} MiB            budget <= {RSS_BUDGET_MIB} MiB   {}   (VmRSS at the end)",
            mib(rss_kib),
            verdict(mib(rss_kib) <= RSS_BUDGET_MIB)
        );
        println!(
            "   agent RSS peak    {:>6.1} MiB            (VmHWM, attach included)",
            mib(hwm_kib)
        );
        match metrics {
            Ok(m) => println!(
                "   its /metrics: {} windows evaluated, its own CPU {:.2} s and RSS {:.1} MiB; families up: {}",
                sample(&m, "mdiag_windows_total").unwrap_or(f64::NAN),
                sample(&m, "process_cpu_seconds_total").unwrap_or(f64::NAN),
                sample(&m, "process_resident_memory_bytes").unwrap_or(f64::NAN) / 1048576.0,
                families_up(&m, "mdiag-pingpong").join(", ")
            ),
            Err(e) => println!("   its /metrics could not be read: {e:#}"),
        }
        Ok(())
    })();
    let _ = pingpong.kill();
    let _ = pingpong.wait();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_is_the_agent_s() {
        let text = config_text(10, Path::new("/t/tmp/agent-state"), "mdiag-pingpong", None);
        let v: toml::Value = toml::from_str(&text).unwrap();
        assert!(v.get("mongodb").is_none());
        let with = config_text(
            10,
            Path::new("/t"),
            "mongod-bench",
            Some("mongodb://127.0.0.1:4"),
        );
        let w: toml::Value = toml::from_str(&with).unwrap();
        assert_eq!(w["mongodb"]["uri"].as_str(), Some("mongodb://127.0.0.1:4"));
        assert_eq!(w["agent"]["processes"][0].as_str(), Some("mongod-bench"));
        let a = &v["agent"];
        assert_eq!(a["window"].as_str(), Some("10s"));
        assert_eq!(a["listen"].as_str(), Some("127.0.0.1:0"));
        assert_eq!(a["state_dir"].as_str(), Some("/t/tmp/agent-state"));
        assert_eq!(a["processes"][0].as_str(), Some("mdiag-pingpong"));
    }

    #[test]
    fn metrics_and_log_lines_are_read() {
        assert_eq!(
            served_at("mdiag agent: serving metrics at http://127.0.0.1:41234/metrics"),
            Some("127.0.0.1:41234")
        );
        assert_eq!(served_at("mdiag agent: stopped"), None);
        let m = "# TYPE mdiag_windows counter\n\
                 mdiag_windows_total{} 3.0\n\
                 process_cpu_seconds_total 0.25\n\
                 mdiag_probe_up{target=\"mdiag-pingpong@/t/pp\",family=\"sched\",reason=\"attached\"} 1.0\n\
                 mdiag_probe_up{target=\"mdiag-pingpong@/t/pp\",family=\"alloc\",reason=\"not_applicable\"} 0.0\n\
                 mdiag_probe_up{target=\"host\",family=\"perf\",reason=\"attached\"} 1.0\n";
        assert_eq!(sample(m, "mdiag_windows_total"), Some(3.0));
        assert_eq!(sample(m, "process_cpu_seconds_total"), Some(0.25));
        assert_eq!(sample(m, "mdiag_windows"), None);
        assert_eq!(families_up(m, "mdiag-pingpong"), ["sched"]);
    }
}
