//! The default of `bench-overhead` and `bench-agent` (issue #24 "Bench"):
//! what observing costs the real mongod 6.0.5 serving the shared request
//! load, side by side in one run.
//!
//! 1. Rounds whose order rotates (a drift of the host hits every mode
//!    alike): the load (`mdiag-mongoload`) runs unobserved and under each
//!    observer (`observers.rs`). Per run: mongod's CPU time per operation
//!    (its utime + stime over the run ÷ the load's own count) and the load's
//!    throughput; medians over the rounds, with their noise (half the range
//!    of the unobserved runs over their median) and the median of the
//!    per-round ratios. Budgets: agent ≤ +1 % CPU per operation and its
//!    throughput within the noise, record ≤ +3 %; bpftrace is the reference.
//! 2. The observers' own cost in those runs: CPU share of one core over
//!    the run (`/proc/PID/stat`), resident set at its end (steady) and the
//!    kernel's high-water mark (peak). Agent: ≤ 0.5 %, ≤ 48 MiB, ≤ 64 MiB.
//! 3. Each BPF program's ns per event and events per second by the kernel's
//!    statistics (`bpfstats.rs`), one more run per observer with them on
//!    (kept out of part 1: the statistics cost a clock read per event).
//!    Agent: all its programs ≤ 0.5 % of a CPU.
//! 4. The worst case, a ping-pong (`worst.rs`).
//!
//! Every observer attaches, then [`SETTLE`] passes (its start-up's symbol
//! work left out), then the load starts: the figures are of steady state.
use std::path::Path;

use anyhow::{Context, Result};

use super::{
    bpfstats::{Costs, Sampler, StatsOn},
    common::{clock_ticks_per_sec, cpu_ticks, median, noise_pct, range, status_kib, verdict},
    mongod::{COMM, Load, LoadRun, Server},
    observers::{Mode, Running, Setting, Target, Tracefs},
};
use crate::say;

/// Pause between an observer's attach and the load.
pub(super) const SETTLE: std::time::Duration = std::time::Duration::from_secs(2);
const AGENT_CPU_BUDGET_PCT: f64 = 1.0;
const RECORD_CPU_BUDGET_PCT: f64 = 3.0;
const AGENT_OWN_CPU_PCT: f64 = 0.5;
const AGENT_RSS_MIB: f64 = 48.0;
const AGENT_PEAK_MIB: f64 = 64.0;
const RECORD_OWN_CPU_PCT: f64 = 2.0;
const RECORD_PEAK_MIB: f64 = 64.0;
const AGENT_BPF_PCT: f64 = 0.5;

/// Options of the real-server bench (both commands).
#[derive(clap::Args, Clone, Debug)]
pub struct RealArgs {
    /// Seconds of load per run.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(2..))]
    pub(super) secs: u64,
    /// Connections of the request load (one client thread each).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..))]
    pub(super) load_threads: u64,
    /// Seconds of load per observer with the kernel's BPF statistics on (0: skip).
    #[arg(long, default_value_t = 10)]
    pub(super) stats_secs: u64,
    /// Seconds of one ping-pong run of the worst case (0: skip).
    #[arg(long, default_value_t = 5)]
    pub(super) pingpong_secs: u64,
}

/// What a bench compares, and with what.
pub(super) struct Plan<'a> {
    pub(super) modes: Vec<Mode>,
    pub(super) rounds: u32,
    pub(super) args: &'a RealArgs,
    pub(super) setting: Setting<'a>,
    pub(super) load: &'a Path,
    pub(super) pingpong: &'a Path,
}

/// An observer's own figures over one run.
#[derive(Clone, Copy, Debug)]
pub(super) struct Own {
    pub(super) cpu_pct: f64,
    pub(super) rss_mib: f64,
    pub(super) peak_mib: f64,
}

/// Reads an observer's CPU ticks now (to start an [`Own`] measurement).
pub(super) fn own_start(pid: Option<u32>) -> Option<u64> {
    cpu_ticks(pid?)
}

/// Its CPU share since `ticks0` over `secs`, and its memory now.
pub(super) fn own_end(pid: Option<u32>, ticks0: Option<u64>, secs: f64) -> Option<Own> {
    let pid = pid?;
    let ticks = cpu_ticks(pid)?.checked_sub(ticks0?)?;
    Some(Own {
        cpu_pct: ticks as f64 / clock_ticks_per_sec() / secs * 100.0,
        rss_mib: status_kib(pid, "VmRSS:")? as f64 / 1024.0,
        peak_mib: status_kib(pid, "VmHWM:")? as f64 / 1024.0,
    })
}

/// One observed (or unobserved) run of the load.
struct Run {
    load: LoadRun,
    own: Option<Own>,
}

fn one_run(plan: &Plan, server: &Server, mode: Mode) -> Result<Run> {
    let uri = server.uri();
    let target = Target {
        pid: server.pid(),
        comm: COMM,
        uri: Some(&uri),
    };
    let obs = Running::start(mode, &plan.setting, &target)?;
    if mode != Mode::Unobserved {
        std::thread::sleep(SETTLE);
    }
    let load = Load::start(plan.load, server, plan.args.load_threads, plan.args.secs)?;
    let t0 = own_start(obs.pid());
    let run = load.finish(|| ())?;
    let own = own_end(obs.pid(), t0, run.secs);
    obs.stop()?;
    Ok(Run { load: run, own })
}

/// Runs the whole plan and prints it.
pub(super) fn run(plan: &Plan) -> Result<()> {
    let _tracefs = match plan.modes.contains(&Mode::Bpftrace) {
        true => {
            let t = Tracefs::ensure()?;
            say!("{}", t.note());
            Some(t)
        }
        false => None,
    };
    let server = Server::start(plan.setting.dir).context("starting the bench's mongod")?;
    println!(
        "the real mongod 6.0.5 (pid {}, {}, started as {COMM}) under mdiag-mongoload: {} connections x {} s per run, {} rounds rotating {}",
        server.pid(),
        server.uri(),
        plan.args.load_threads,
        plan.args.secs,
        plan.rounds,
        plan.modes
            .iter()
            .map(|m| m.name())
            .collect::<Vec<_>>()
            .join(" / ")
    );
    let warm = Load::start(plan.load, &server, plan.args.load_threads, 5)?.finish(|| ())?;
    say!(
        "warm-up (not counted): {:.0} ops/s, {:.1} µs mongod CPU/op",
        warm.ops_per_sec,
        warm.cpu_us_per_op()
    );
    let mut runs: Vec<Vec<Run>> = plan.modes.iter().map(|_| Vec::new()).collect();
    // Per round and observed mode: its CPU/op and ops/s over the unobserved run's.
    let mut ratios: Vec<Vec<(f64, f64)>> = plan.modes.iter().map(|_| Vec::new()).collect();
    for round in 0..plan.rounds as usize {
        let n = plan.modes.len();
        let mut this: Vec<Option<LoadRun>> = vec![None; n];
        for i in 0..n {
            let m = (round + i) % n;
            let mode = plan.modes[m];
            let r = one_run(plan, &server, mode)
                .with_context(|| format!("a {} run on mongod", mode.name()))?;
            say!(
                "round {} {:<14} {:>7.0} ops/s  {:>6.1} µs mongod CPU/op{}",
                round + 1,
                mode.name(),
                r.load.ops_per_sec,
                r.load.cpu_us_per_op(),
                r.own.map_or(String::new(), |o| format!(
                    "   its own CPU {:.2} %, RSS {:.1} MiB, peak {:.1} MiB",
                    o.cpu_pct, o.rss_mib, o.peak_mib
                ))
            );
            this[m] = Some(r.load);
            runs[m].push(r);
        }
        if let Some(base) = this[0] {
            for (m, r) in this.iter().enumerate().skip(1) {
                if let Some(r) = r {
                    ratios[m].push((
                        r.cpu_us_per_op() / base.cpu_us_per_op(),
                        r.ops_per_sec / base.ops_per_sec,
                    ));
                }
            }
        }
    }
    print_target_cost(plan, &runs, &ratios);
    print_own_cost(plan, &runs);
    if plan.args.stats_secs > 0 {
        println!();
        println!(
            "3. BPF programs by the kernel's run-time statistics (on only during one more {} s run per observer; the agent also keeps them on itself while it runs): ns per event, events per second, per mongod operation",
            plan.args.stats_secs
        );
        for &mode in plan.modes.iter().filter(|m| **m != Mode::Unobserved) {
            match bpf_costs(plan, &server, mode) {
                Ok((costs, load)) => print_bpf(mode, &costs, &load),
                Err(e) => println!("   {}: not measured: {e:#}", mode.name()),
            }
        }
    }
    drop(server);
    if plan.args.pingpong_secs > 0 {
        super::worst::pingpong(plan)?;
    }
    Ok(())
}

/// One run of `mode` with the statistics on: its programs' costs.
fn bpf_costs(plan: &Plan, server: &Server, mode: Mode) -> Result<(Costs, LoadRun)> {
    let uri = server.uri();
    let target = Target {
        pid: server.pid(),
        comm: COMM,
        uri: Some(&uri),
    };
    let obs = Running::start(mode, &plan.setting, &target)?;
    std::thread::sleep(SETTLE);
    let pid = obs.pid().context("the observer's pid")?;
    let load = Load::start(
        plan.load,
        server,
        plan.args.load_threads,
        plan.args.stats_secs,
    )?;
    let stats = StatsOn::new()?;
    let mut sampler = Sampler::start(pid);
    let run = load.finish(|| sampler.sample())?;
    let costs = sampler.finish();
    drop(stats);
    obs.stop()?;
    Ok((costs, run))
}

fn print_bpf(mode: Mode, costs: &Costs, load: &LoadRun) {
    let pct = costs.cpu_pct();
    let secs = costs.wall.as_secs_f64();
    let budget = match mode {
        Mode::Agent => format!(
            "budget <= {AGENT_BPF_PCT} %   {}",
            verdict(pct <= AGENT_BPF_PCT)
        ),
        _ => "(no budget)".to_owned(),
    };
    println!(
        "   {}: {} programs, all together {pct:.2} % of one CPU   {budget}   (mongod at {:.0} ops/s)",
        mode.name(),
        costs.programs.iter().map(|p| p.instances).sum::<usize>(),
        load.ops_per_sec
    );
    let idle: Vec<&str> = costs
        .programs
        .iter()
        .filter(|p| p.events == 0)
        .map(|p| p.name.as_str())
        .collect();
    for p in costs.programs.iter().filter(|p| p.events > 0) {
        let per_sec = p.events as f64 / secs;
        println!(
            "     {:<16}{} {:>8.0} ns/event {:>10} events/s {:>7.2} per op {:>6.3} % of a CPU",
            p.name,
            if p.instances > 1 {
                format!(" x{:<3}", p.instances)
            } else {
                "     ".to_owned()
            },
            p.ns_per_event(),
            if per_sec < 10.0 {
                format!("{per_sec:.1}")
            } else {
                format!("{per_sec:.0}")
            },
            per_sec / load.ops_per_sec.max(1.0),
            p.run_time_ns as f64 / costs.wall.as_nanos().max(1) as f64 * 100.0
        );
    }
    if !idle.is_empty() {
        println!("     not run in this stretch: {}", idle.join(", "));
    }
}

fn budget_of(mode: Mode) -> Option<f64> {
    match mode {
        Mode::Agent => Some(AGENT_CPU_BUDGET_PCT),
        Mode::Record => Some(RECORD_CPU_BUDGET_PCT),
        _ => None,
    }
}

fn print_target_cost(plan: &Plan, runs: &[Vec<Run>], ratios: &[Vec<(f64, f64)>]) {
    let cpu = |m: usize| -> Vec<f64> { runs[m].iter().map(|r| r.load.cpu_us_per_op()).collect() };
    let rate = |m: usize| -> Vec<f64> { runs[m].iter().map(|r| r.load.ops_per_sec).collect() };
    let (base_cpu, base_rate) = (median(&cpu(0)), median(&rate(0)));
    let (cpu_noise, rate_noise) = (noise_pct(&cpu(0)), noise_pct(&rate(0)));
    println!();
    println!(
        "1. mongod CPU time per operation and throughput (medians of {} runs; min..max); noise: the unobserved runs spread +/-{cpu_noise:.1} % (CPU/op) and +/-{rate_noise:.1} % (ops/s) around their medians",
        runs[0].len()
    );
    for (m, &mode) in plan.modes.iter().enumerate() {
        let (c, r) = (cpu(m), rate(m));
        let (dc, dr) = (
            (median(&c) / base_cpu - 1.0) * 100.0,
            (median(&r) / base_rate - 1.0) * 100.0,
        );
        let verdicts = match (mode, budget_of(mode)) {
            (Mode::Unobserved, _) => String::new(),
            (_, Some(b)) => format!(
                "CPU/op {dc:+6.1} % budget <= +{b} % {}{}{}",
                verdict(dc <= b),
                if cpu_noise > b {
                    format!(" (not resolved: noise +/-{cpu_noise:.1} %)")
                } else {
                    String::new()
                },
                if mode == Mode::Agent {
                    format!(
                        "; ops/s {dr:+6.1} % budget within the noise {}",
                        verdict(-dr <= rate_noise)
                    )
                } else {
                    format!("; ops/s {dr:+6.1} %")
                }
            ),
            (_, None) => format!("CPU/op {dc:+6.1} %; ops/s {dr:+6.1} % (reference)"),
        };
        println!(
            "   {:<14} {:>6.1} µs/op ({:>11})  {:>6.0} ops/s ({:>9})   {verdicts}",
            mode.name(),
            median(&c),
            range(&c, 1),
            median(&r),
            range(&r, 0)
        );
        if !ratios[m].is_empty() {
            let (cr, rr): (Vec<f64>, Vec<f64>) = ratios[m].iter().copied().unzip();
            println!(
                "   {:<14} per-round ratios to the unobserved run: CPU/op {:+.1} %, ops/s {:+.1} % (medians)",
                "",
                (median(&cr) - 1.0) * 100.0,
                (median(&rr) - 1.0) * 100.0
            );
        }
    }
}

fn print_own_cost(plan: &Plan, runs: &[Vec<Run>]) {
    println!();
    println!(
        "2. The observers' own cost in those runs (CPU share of one core over the run, VmRSS at its end = steady, VmHWM = peak; medians, peak the largest)"
    );
    for (m, &mode) in plan.modes.iter().enumerate() {
        let own: Vec<Own> = runs[m].iter().filter_map(|r| r.own).collect();
        if own.is_empty() {
            continue;
        }
        let cpu = median(&own.iter().map(|o| o.cpu_pct).collect::<Vec<_>>());
        let rss = median(&own.iter().map(|o| o.rss_mib).collect::<Vec<_>>());
        let peak = own.iter().map(|o| o.peak_mib).fold(0.0, f64::max);
        match mode {
            Mode::Agent => println!(
                "   mdiag agent    CPU {cpu:>6.2} % budget <= {AGENT_OWN_CPU_PCT} % {}   RSS steady {rss:>6.1} MiB budget <= {AGENT_RSS_MIB} MiB {}   peak {peak:>6.1} MiB budget <= {AGENT_PEAK_MIB} MiB {}",
                verdict(cpu <= AGENT_OWN_CPU_PCT),
                verdict(rss <= AGENT_RSS_MIB),
                verdict(peak <= AGENT_PEAK_MIB)
            ),
            Mode::Record => println!(
                "   mdiag record   CPU {cpu:>6.2} % budget <= {RECORD_OWN_CPU_PCT} % {}   RSS steady {rss:>6.1} MiB                   peak {peak:>6.1} MiB budget <= {RECORD_PEAK_MIB} MiB {}",
                verdict(cpu <= RECORD_OWN_CPU_PCT),
                verdict(peak <= RECORD_PEAK_MIB)
            ),
            _ => println!(
                "   {:<14} CPU {cpu:>6.2} %   RSS steady {rss:>6.1} MiB   peak {peak:>6.1} MiB (reference)",
                mode.name()
            ),
        }
    }
}
