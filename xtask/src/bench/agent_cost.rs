//! Part 2 of `cargo xtask bench-agent`: what `mdiag agent` costs its target
//! with the default allocator duty cycle. The TCMalloc workload
//! (`mdiag-tcmalloc`, per-CPU caches on) runs unobserved and watched by the
//! agent (named in its `processes`), in rounds whose order rotates so that a
//! drift of the host hits both alike; medians compared.
//!
//! Two figures per mode: the throughput (the workload's own allocation count
//! per second; budget: a drop ≤ 1 %), and the target's CPU time per
//! allocation (utime + stime from its `/proc/PID/stat` over the run divided
//! by its allocation count). On a small shared host wall-clock throughput
//! moves by tens of percent between runs (issue #13 saw ±38 % on 2 CPUs)
//! with whatever else runs; CPU per operation moves much less, since time
//! the target spends waiting for a CPU is not in it.
//!
//! A watched run is released half an allocator-window period after the
//! agent attached: attach is left out, and the windows (the first one a
//! period after attach, then one every period) fall inside a run as long as
//! a whole number of periods, in their steady share of its time.
use std::{path::Path, time::Duration};

use anyhow::{Context, Result};

use super::{
    agent::{Agent, AgentBenchArgs, families_up, sample},
    common::{Binaries, Workload, median, noise_pct, spread, verdict},
};
use crate::say;

const DROP_BUDGET_PCT: f64 = 1.0;
/// The agent's default allocator-window period: `alloc_window` (100 ms) /
/// `alloc_budget` (0.005).
const ALLOC_PERIOD: Duration = Duration::from_secs(20);
/// The workload's process name, for the agent's `processes`.
const WORKLOAD_COMM: &str = "mdiag-tcmalloc";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Unobserved,
    Agent,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Unobserved => "unobserved",
            Mode::Agent => "mdiag agent",
        }
    }
}

/// One run's figures.
#[derive(Default)]
struct Figures {
    rates: Vec<f64>,
    ns_per_op: Vec<f64>,
}

/// One workload run under `mode`: (allocations per second, CPU ns per
/// allocation).
fn one_run(bins: &Binaries, dir: &Path, args: &AgentBenchArgs, mode: Mode) -> Result<(f64, f64)> {
    let mut w = Workload::start(&bins.workload, args.threads, args.ms)?;
    let agent = match mode {
        Mode::Unobserved => None,
        Mode::Agent => {
            let a = Agent::start(&bins.mdiag, dir, WORKLOAD_COMM, w.pid(), args.window_secs)?;
            std::thread::sleep(ALLOC_PERIOD / 2);
            Some(a)
        }
    };
    let run = w.run();
    if let Some(a) = agent {
        // What the agent says of its probes and their budget, beside the
        // measured cost.
        match a.metrics() {
            Ok(m) => say!(
                "  the agent: families up {}; allocator probes spent {:.3} % of the target's CPU in its last window (budget {:.3} %)",
                families_up(&m, WORKLOAD_COMM).join(", "),
                sample(&m, "mdiag_alloc_budget_spent_ratio").unwrap_or(f64::NAN) * 100.0,
                sample(&m, "mdiag_alloc_budget_ratio").unwrap_or(f64::NAN) * 100.0
            ),
            Err(e) => say!("  the agent's /metrics could not be read: {e:#}"),
        }
        a.stop()?;
    }
    let run = run?;
    if run.report["per_cpu_caches_active"].as_bool() != Some(true) {
        say!(
            "warning: TCMalloc's per-CPU caches were off in this run: {}",
            run.report
        );
    }
    let ns = run
        .cpu_ns_per_op()
        .with_context(|| format!("no CPU time per allocation from {}", run.report))?;
    Ok((run.rate()?, ns))
}

pub(super) fn target_cost(bins: &Binaries, dir: &Path, args: &AgentBenchArgs) -> Result<()> {
    let modes = [Mode::Unobserved, Mode::Agent];
    let mut figures = [Figures::default(), Figures::default()];
    // Per round: the watched run's figure over the unobserved one's.
    let (mut rate_ratios, mut cpu_ratios) = (Vec::new(), Vec::new());
    for round in 0..args.rounds as usize {
        let mut this_round = [None, None];
        for i in 0..modes.len() {
            let m = (round + i) % modes.len();
            let mode = modes[m];
            let (rate, ns) =
                one_run(bins, dir, args, mode).with_context(|| format!("a {} run", mode.name()))?;
            say!(
                "round {} {:<12} {:>8.2} M allocations/s  {:>7.1} ns CPU per allocation",
                round + 1,
                mode.name(),
                rate / 1e6,
                ns
            );
            figures[m].rates.push(rate);
            figures[m].ns_per_op.push(ns);
            this_round[m] = Some((rate, ns));
        }
        if let [Some((r0, n0)), Some((r1, n1))] = this_round {
            rate_ratios.push(r1 / r0);
            cpu_ratios.push(n1 / n0);
        }
    }
    let [base, watched] = &figures;
    let (base_rate, base_ns) = (median(&base.rates), median(&base.ns_per_op));
    let drop = (1.0 - median(&watched.rates) / base_rate) * 100.0;
    let more_cpu = (median(&watched.ns_per_op) / base_ns - 1.0) * 100.0;
    let (rate_noise, cpu_noise) = (noise_pct(&base.rates), noise_pct(&base.ns_per_op));
    let within = |x: f64, noise: f64| {
        if x.abs() <= noise {
            "   (within the noise)"
        } else {
            ""
        }
    };
    println!();
    println!(
        "2. Target cost: mdiag-tcmalloc ({} threads x {} ms per run, medians of {} rounds; min..max) unobserved vs watched by mdiag agent (processes = [\"{WORKLOAD_COMM}\"], default allocator duty cycle, released {} s after attach)",
        args.threads,
        args.ms,
        args.rounds,
        (ALLOC_PERIOD / 2).as_secs()
    );
    println!(
        "   unobserved   {:>8.2} M allocs/s ({})                          {:>7.1} ns CPU/alloc ({})",
        base_rate / 1e6,
        spread(&base.rates, 1e6),
        base_ns,
        spread(&base.ns_per_op, 1.0)
    );
    println!(
        "   mdiag agent  {:>8.2} M allocs/s ({})  drop {drop:>6.2} %   {:>7.1} ns CPU/alloc ({})  {more_cpu:+.2} %",
        median(&watched.rates) / 1e6,
        spread(&watched.rates, 1e6),
        median(&watched.ns_per_op),
        spread(&watched.ns_per_op, 1.0)
    );
    println!(
        "   throughput drop   {drop:>6.2} %   budget <= {DROP_BUDGET_PCT} %   {}{}",
        verdict(drop <= DROP_BUDGET_PCT),
        within(drop, rate_noise)
    );
    println!(
        "   CPU per alloc     {more_cpu:>+6.2} %   (the steadier figure: held to the same {DROP_BUDGET_PCT} %: {}){}",
        verdict(more_cpu <= DROP_BUDGET_PCT),
        within(more_cpu, cpu_noise)
    );
    println!(
        "   noise: the unobserved runs spread +/-{rate_noise:.1} % (throughput) and +/-{cpu_noise:.1} % (CPU per alloc) around their medians (half their range)"
    );
    if !rate_ratios.is_empty() {
        println!(
            "   median of the per-round ratios: throughput drop {:.2} %, CPU per alloc {:+.2} %",
            (1.0 - median(&rate_ratios)) * 100.0,
            (median(&cpu_ratios) - 1.0) * 100.0
        );
    }
    Ok(())
}
