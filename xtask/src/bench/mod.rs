//! `cargo xtask bench-overhead`: what observing costs, measured side by side
//! in one run and printed next to the budgets (issues #3 and #24). Never a
//! test: the numbers depend on the machine and what else runs on it.
//!
//! By default (`--target mongod`, `real.rs`) on the real mongod 6.0.5 of
//! set-up under the shared request load (`mdiag-mongoload`): unobserved,
//! `mdiag record`, `mdiag agent` and bpftrace's run-queue + syscall-count
//! pair in rotating rounds; mongod's CPU time per operation and the load's
//! throughput with their noise, the observers' own CPU and memory, each BPF
//! program's ns per event and events per second, and the ping-pong worst
//! case (`worst.rs`).
//!
//! With `--target tcmalloc`, what it measured before the real server: the
//! allocation loop and the context-switch rate.
//! 1. Throughput of the Google TCMalloc workload (`mdiag-tcmalloc`, its own
//!    allocation count per second) unobserved, under the default
//!    `mdiag record --pid`, and under bpftrace timing every allocation with
//!    a uprobe + uretprobe histogram, in rounds whose order rotates (so a
//!    drift of the host hits every mode alike); medians compared. Budget:
//!    mdiag's drop ≤ 3 %. A run lasts 30 s by default so that it holds the
//!    allocator latency windows `record` opens by default (200 ms every
//!    10 s, the first 10 s after start-up) in their steady-state share; each
//!    mdiag run prints how many windows it ran and its own estimate of the
//!    overhead it imposed, beside the measured drop.
//! 2. mdiag's own CPU (from /proc/PID/stat, while recording, start-up
//!    excluded) and peak RSS (the kernel's maximum resident set at exit)
//!    while `mdiag-pingpong` makes the host switch context about 100 k
//!    times a second. Budgets: ≤ 2 % of one core, ≤ 64 MiB.
//!
//! Runs as root (mdiag and bpftrace load BPF programs).
//!
//! The code: this file is `bench-overhead` and the allocation loop's part 1,
//! `switches.rs` its part 2; `real.rs`, `worst.rs`, `observers.rs`,
//! `mongod.rs` and `bpfstats.rs` the real-server bench both commands run
//! by default; `agent.rs` and `agent_cost.rs` are `bench-agent` (the
//! continuous agent against its budgets); `fleet.rs` is `bench-fleet` (the
//! fleet store at scale, by simulation); `common.rs` holds what the benches
//! share.
use std::{
    io::BufReader,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use anyhow::{Context, Result, bail};

use crate::{
    cmd::{find_in_path, is_root},
    say,
};

mod agent;
mod agent_cost;
mod bpfstats;
mod common;
mod fleet;
mod mongod;
mod observers;
mod real;
mod switches;
mod windows;
mod worst;

pub use agent::{AgentBenchArgs, bench_agent};
use common::{
    TempDir, WORKLOAD_TUNABLES, Workload, build_binaries, median, noise_pct, signal, spread,
    verdict, wait_for,
};
pub use fleet::{FleetBenchArgs, bench_fleet};
use switches::switches;

const THROUGHPUT_BUDGET_PCT: f64 = 3.0;
const CPU_BUDGET_PCT: f64 = 2.0;
const RSS_BUDGET_MIB: f64 = 64.0;

/// What a bench observes.
#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq, Debug)]
pub enum BenchTarget {
    /// The real mongod 6.0.5 under the shared request load, and the ping-pong worst case.
    Mongod,
    /// The Google TCMalloc allocation loop and the ping-pong (the benches before the real server).
    Tcmalloc,
}

/// Options of `cargo xtask bench-overhead`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Use the debug build of mdiag instead of the release one.
    #[arg(long)]
    debug: bool,
    /// What to observe.
    #[arg(long, value_enum, default_value_t = BenchTarget::Mongod)]
    target: BenchTarget,
    /// Rounds of the comparison (each runs every mode once, the order rotating).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: u32,
    /// The agent's rule window in seconds (its default is 60; shorter, so
    /// that a short run evaluates several).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    window_secs: u64,
    #[command(flatten)]
    real: real::RealArgs,
    /// --target tcmalloc: length of one workload run, in milliseconds (long
    /// enough to hold the default allocator windows: one every 10 s).
    #[arg(long, default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(200..))]
    ms: u64,
    /// --target tcmalloc: allocating threads of the workload.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(1..))]
    threads: u64,
    /// --target tcmalloc: seconds of the context-switch measurement.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    switch_secs: u64,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Mode {
    Unobserved,
    Mdiag,
    Bpftrace,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Unobserved => "unobserved",
            Mode::Mdiag => "mdiag record",
            Mode::Bpftrace => "bpftrace",
        }
    }
}

/// The programs the bench runs.
struct Bins {
    mdiag: PathBuf,
    workload: PathBuf,
    pingpong: PathBuf,
    bpftrace: Option<PathBuf>,
    tmp: TempDir,
}

pub fn bench(args: &BenchArgs) -> Result<()> {
    if !is_root() {
        bail!(
            "the overhead bench loads BPF programs (mdiag, bpftrace) and needs root: run it as root, e.g. `sudo -E cargo xtask bench-overhead`"
        );
    }
    if args.target == BenchTarget::Mongod {
        return bench_real(args);
    }
    let built = build_binaries(args.debug)?;
    let bins = Bins {
        mdiag: built.mdiag,
        workload: built.workload,
        pingpong: built.pingpong,
        bpftrace: find_in_path("bpftrace"),
        tmp: TempDir::new("bench-overhead")?,
    };
    println!(
        "mdiag overhead bench: mdiag {} build; workload mdiag-tcmalloc (GLIBC_TUNABLES={WORKLOAD_TUNABLES}: TCMalloc's per-CPU caches on), {} threads x {} ms per run, {} rounds; {} CPUs",
        if args.debug { "debug" } else { "release" },
        args.threads,
        args.ms,
        args.rounds,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    throughput(&bins, args)?;
    switches(&bins, args)?;
    Ok(())
}

/// The default: every observer on the real mongod, and the worst case.
fn bench_real(args: &BenchArgs) -> Result<()> {
    let bins = common::build_real(args.debug)?;
    let tmp = TempDir::new("bench-overhead")?;
    let bpftrace = observers::find_bpftrace();
    let mut modes = vec![
        observers::Mode::Unobserved,
        observers::Mode::Record,
        observers::Mode::Agent,
    ];
    match &bpftrace {
        Some(_) => modes.push(observers::Mode::Bpftrace),
        None => println!(
            "bpftrace is not installed (`./x setup` installs it): its pair is not measured"
        ),
    }
    println!(
        "mdiag overhead bench: mdiag {} build; agent windows of {} s (its default is 60 s), its other settings its defaults; {} CPUs",
        if args.debug { "debug" } else { "release" },
        args.window_secs,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    real::run(&real::Plan {
        modes,
        rounds: args.rounds,
        args: &args.real,
        setting: observers::Setting {
            mdiag: &bins.mdiag,
            bpftrace: bpftrace.as_deref(),
            dir: tmp.path(),
            window_secs: args.window_secs,
        },
        load: &bins.load,
        pingpong: &bins.pingpong,
    })
}

// ---------------------------------------------------------------- part 1

/// An observer of one workload run.
enum Observer {
    None,
    Mdiag(Child, std::thread::JoinHandle<String>),
    Bpftrace(Child),
}

impl Observer {
    /// Stops it (SIGINT: mdiag keeps what it recorded, bpftrace prints its
    /// maps) and reaps it; returns an error text if it failed.
    fn stop(self) -> Option<String> {
        let interrupt = |c: &Child| signal(c, libc::SIGINT);
        match self {
            Observer::None => None,
            Observer::Mdiag(c, err) => {
                interrupt(&c);
                let out = c.wait_with_output().ok()?;
                let err = err.join().unwrap_or_default();
                (!out.status.success()).then(|| format!("mdiag record failed: {err}"))
            }
            Observer::Bpftrace(c) => {
                interrupt(&c);
                let out = c.wait_with_output().ok()?;
                (!out.status.success()).then(|| {
                    format!(
                        "bpftrace failed: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    )
                })
            }
        }
    }
}

/// Starts `mdiag record --pid PID` and returns once its probes are attached.
fn start_mdiag(bins: &Bins, pid: u32, out: &Path) -> Result<Observer> {
    let mut cmd = Command::new(&bins.mdiag);
    cmd.args(["record", "--no-progress", "--duration", "1h", "--pid"])
        .arg(pid.to_string())
        .arg("-o")
        .arg(out);
    let (child, rest) = common::start_record_attached(&mut cmd)?;
    Ok(Observer::Mdiag(child, rest))
}

/// The allocation entry point of the Rust workload (its global allocator
/// calls it for every allocation).
const ALLOC_FN: &str = "BridgeTCMallocInternalNewAlignedNothrow";

/// Starts bpftrace with a latency histogram of every allocation of `pid`
/// (uprobe + uretprobe) and returns once its probes are attached.
fn start_bpftrace(bpftrace: &Path, workload: &Path, pid: u32) -> Result<Observer> {
    let exe = workload.display();
    let script = format!(
        "uprobe:{exe}:{ALLOC_FN} {{ @start[tid] = nsecs; }}\n\
         uretprobe:{exe}:{ALLOC_FN} /@start[tid]/ {{ @ns = hist(nsecs - @start[tid]); delete(@start[tid]); }}"
    );
    let mut child = Command::new(bpftrace)
        .arg("-p")
        .arg(pid.to_string())
        .arg("-e")
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("start bpftrace")?;
    let mut stdout = BufReader::new(child.stdout.take().context("bpftrace stdout")?);
    let mut seen = String::new();
    if !wait_for(&mut stdout, "Attaching", &mut seen) {
        let out = child.wait_with_output()?;
        bail!(
            "{}{}",
            seen.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    // bpftrace prints "Attaching N probes..." just before attaching: give it
    // a moment to finish.
    std::thread::sleep(Duration::from_millis(500));
    // Keep draining its output (the histogram at exit).
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut stdout, &mut std::io::sink());
    });
    Ok(Observer::Bpftrace(child))
}

/// One workload run under `mode`: allocations per second.
fn one_run(bins: &Bins, args: &BenchArgs, mode: Mode, bpftrace: &Path) -> Result<f64> {
    let mut w = Workload::start(&bins.workload, args.threads, args.ms)?;
    let pid = w.pid();
    let observer = match mode {
        Mode::Unobserved => Observer::None,
        Mode::Mdiag => start_mdiag(bins, pid, &bins.tmp.path().join("throughput.mdiag"))?,
        Mode::Bpftrace => start_bpftrace(bpftrace, &bins.workload, pid)?,
    };
    let report = w.run();
    if let Some(e) = observer.stop() {
        bail!("{e}");
    }
    let run = report?;
    let report = &run.report;
    if mode == Mode::Mdiag {
        say!(
            "{}",
            alloc_windows_summary(&bins.tmp.path().join("throughput.mdiag"))
        );
    }
    if report["per_cpu_caches_active"].as_bool() != Some(true) {
        say!("warning: TCMalloc's per-CPU caches were off in this run: {report}");
    }
    run.rate()
}

/// What the allocator windows of an mdiag run cost by mdiag's own account:
/// windows run, probe hits, and the overhead it estimated (hits × the
/// calibrated cost per hit / the target's CPU time).
fn alloc_windows_summary(recording: &Path) -> String {
    let rec: serde_json::Value = match crate::recording::read(recording) {
        Ok(v) => v,
        Err(e) => return format!("  (recording {} unreadable: {e})", recording.display()),
    };
    let windows: usize = rec["slices"]
        .as_array()
        .map(|slices| {
            slices
                .iter()
                .filter_map(|s| s["alloc"]["windows"].as_array())
                .map(Vec::len)
                .sum()
        })
        .unwrap_or(0);
    let overhead = &rec["alloc"]["overhead"];
    match (
        overhead["probe_hits"].as_u64(),
        overhead["overhead_ppm"].as_u64(),
    ) {
        (Some(hits), Some(ppm)) => format!(
            "  mdiag ran {windows} allocator windows: {hits} probe hits, its own overhead estimate {:.2} % of the target's CPU",
            ppm as f64 / 1e4
        ),
        _ => format!(
            "  mdiag ran {windows} allocator windows (no overhead estimate: {})",
            rec["alloc"]["last_error"]
                .as_str()
                .unwrap_or("none recorded")
        ),
    }
}

fn throughput(bins: &Bins, args: &BenchArgs) -> Result<()> {
    let mut modes = vec![Mode::Unobserved, Mode::Mdiag];
    let mut bpftrace_problem = None;
    let bpftrace = match &bins.bpftrace {
        Some(b) => {
            modes.push(Mode::Bpftrace);
            b.clone()
        }
        None => {
            bpftrace_problem = Some("bpftrace is not installed (`cargo xtask setup`)".to_owned());
            PathBuf::new()
        }
    };
    let (results, paired) =
        throughput_rounds(bins, args, &modes, &bpftrace, &mut bpftrace_problem)?;
    print_throughput(&results, &paired, bpftrace_problem);
    Ok(())
}

/// By mode, the rate of each run.
type Rates = Vec<(Mode, Vec<f64>)>;
/// By observed mode, each round's rate over the unobserved run's.
type Paired = std::collections::HashMap<Mode, Vec<f64>>;

/// Runs the rounds, rotating the order of the modes every round. A
/// bpftrace that cannot run is noted in `bpftrace_problem` and skipped.
fn throughput_rounds(
    bins: &Bins,
    args: &BenchArgs,
    modes: &[Mode],
    bpftrace: &Path,
    bpftrace_problem: &mut Option<String>,
) -> Result<(Rates, Paired)> {
    let mut results: Vec<(Mode, Vec<f64>)> = modes.iter().map(|&m| (m, Vec::new())).collect();
    let mut paired = Paired::new();
    for round in 0..args.rounds as usize {
        let mut this_round: Vec<(Mode, f64)> = Vec::new();
        // Rotate the order every round.
        let n = modes.len();
        for i in 0..n {
            let mode = modes[(round + i) % n];
            if mode == Mode::Bpftrace && bpftrace_problem.is_some() {
                continue;
            }
            match one_run(bins, args, mode, bpftrace) {
                Ok(rate) => {
                    say!(
                        "round {} {:<12} {:>8.2} M allocations/s",
                        round + 1,
                        mode.name(),
                        rate / 1e6
                    );
                    if let Some((_, v)) = results.iter_mut().find(|(m, _)| *m == mode) {
                        v.push(rate);
                    }
                    this_round.push((mode, rate));
                }
                Err(e) if mode == Mode::Bpftrace => {
                    say!("bpftrace cannot run here: {e:#}");
                    *bpftrace_problem = Some(format!("{e:#}"));
                }
                Err(e) => return Err(e.context(format!("a {} run", mode.name()))),
            }
        }
        if let Some(&(_, base)) = this_round.iter().find(|(m, _)| *m == Mode::Unobserved) {
            for &(m, rate) in this_round.iter().filter(|(m, _)| *m != Mode::Unobserved) {
                paired.entry(m).or_default().push(rate / base);
            }
        }
    }
    Ok((results, paired))
}

/// The throughput of each mode against the unobserved runs and the budget.
fn print_throughput(results: &Rates, paired: &Paired, bpftrace_problem: Option<String>) {
    let get = |mode: Mode| {
        results
            .iter()
            .find(|(m, _)| *m == mode)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let base = get(Mode::Unobserved);
    let base_med = median(&base);
    let spread = |v: &[f64]| spread(v, 1e6);
    println!();
    println!(
        "1. Throughput of mdiag-tcmalloc (M allocations/s, median of {} runs; min..max)",
        base.len()
    );
    println!(
        "   unobserved      {:>8.2}  ({})",
        base_med / 1e6,
        spread(&base)
    );
    let drop_of = |v: &[f64]| (1.0 - median(v) / base_med) * 100.0;
    // The host's own noise: half the range of the unobserved runs, as a
    // share of their median. A drop within it is not resolved by this run.
    let noise_pct = noise_pct(&base);
    let md = get(Mode::Mdiag);
    let mdiag_drop = drop_of(&md);
    println!(
        "   mdiag record    {:>8.2}  ({})  drop {:>6.2} %   budget <= {THROUGHPUT_BUDGET_PCT} %   {}{}",
        median(&md) / 1e6,
        spread(&md),
        mdiag_drop,
        verdict(mdiag_drop <= THROUGHPUT_BUDGET_PCT),
        if mdiag_drop.abs() <= noise_pct {
            "   (within the noise)"
        } else {
            ""
        }
    );
    println!(
        "   noise: the unobserved runs spread +/-{noise_pct:.1} % around their median (half their range); more --rounds narrow the medians"
    );
    // The same rounds paired: each round's observed / unobserved run.
    if let Some(pairs) = paired.get(&Mode::Mdiag).filter(|v| !v.is_empty()) {
        println!(
            "   mdiag record, median of the per-round ratios: drop {:>6.2} %",
            (1.0 - median(pairs)) * 100.0
        );
    }
    let bt = get(Mode::Bpftrace);
    match (&bpftrace_problem, bt.is_empty()) {
        (Some(why), true) => println!("   bpftrace        not measured: {why}"),
        _ => {
            let bt_drop = drop_of(&bt);
            println!(
                "   bpftrace        {:>8.2}  ({})  drop {:>6.2} %   (uprobe+uretprobe latency histogram of {ALLOC_FN})",
                median(&bt) / 1e6,
                spread(&bt),
                bt_drop
            );
            if mdiag_drop > 0.05 {
                println!(
                    "   bpftrace's drop / mdiag's drop = {:.1}x",
                    bt_drop / mdiag_drop
                );
            } else {
                println!(
                    "   bpftrace's drop / mdiag's drop: not meaningful (mdiag's drop {mdiag_drop:.2} % is within the noise)"
                );
            }
            if let Some(why) = bpftrace_problem {
                println!("   (bpftrace failed in some rounds: {why})");
            }
        }
    }
}
