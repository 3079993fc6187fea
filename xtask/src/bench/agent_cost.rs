//! Part 2 of `cargo xtask bench-agent`: what `mdiag agent` costs its target
//! with the default allocator duty cycle. The TCMalloc workload
//! (`mdiag-tcmalloc`, per-CPU caches on) runs unobserved and watched by the
//! agent (named in its `processes`), in rounds whose order rotates so that a
//! drift of the host hits both alike.
//!
//! Three figures, most to least noisy:
//! - between runs: the throughput (the workload's own allocation count per
//!   second; budget: a drop ≤ 1 %) and the target's CPU time per allocation
//!   (utime + stime from `/proc/PID/stat` over its allocation count),
//!   medians of the watched runs over the unobserved ones. On a small shared
//!   host these move by tens of percent between runs with whatever else
//!   runs, so they cannot resolve 1 %; they are printed for what the
//!   always-on probes cost, which only they see.
//! - within a run (`windows.rs`): the workload's timeline (every
//!   [`TIMELINE_MS`]) lined up with the allocator windows the agent logged:
//!   the CPU time per allocation over the whole watched run over that of its
//!   own stretches away from any window. Its noise is the same arithmetic
//!   on the unobserved run of the round with the watched run's windows laid
//!   over it (what the method says of windows that cost nothing).
//! - the agent's own accounting (probe hits × calibrated pair cost over the
//!   target's CPU in the run), which its budget is kept on, beside the
//!   measured cost it should match.
//!
//! A watched run is released half an allocator-window period after the
//! agent attached, so attach and the first (probe) window are left out and
//! the full windows fall inside the run in their steady share.
use std::{path::Path, time::Duration};

use anyhow::{Context, Result};

use super::{
    agent::{Agent, AgentBenchArgs, families_up, sample},
    common::{Binaries, Workload, median, noise_pct, spread, verdict},
    windows::{MARGIN_NS, Sample, Split, Window, logged_windows, moved, split},
};
use crate::say;

const DROP_BUDGET_PCT: f64 = 1.0;
/// The agent's default `alloc_budget`, in percent.
const ALLOC_BUDGET_PCT: f64 = 0.5;
/// The agent's default allocator-window period: `alloc_window` (100 ms) /
/// `alloc_budget` (0.005).
const ALLOC_PERIOD: Duration = Duration::from_secs(20);
/// The workload's process name, for the agent's `processes`.
const WORKLOAD_COMM: &str = "mdiag-tcmalloc";
/// How often the workload samples its timeline.
const TIMELINE_MS: u64 = 5;

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

/// One workload run.
struct Run {
    /// Allocations per second, CPU ns per allocation (from `/proc`).
    rate: f64,
    ns: f64,
    timeline: Vec<Sample>,
    /// The allocator windows the agent logged (none unobserved).
    windows: Vec<Window>,
}

impl Run {
    fn start_ns(&self) -> u64 {
        self.timeline.first().map_or(0, |s| s[0])
    }
}

/// Figures of one mode over the rounds.
#[derive(Default)]
struct Figures {
    rates: Vec<f64>,
    ns_per_op: Vec<f64>,
}

fn one_run(bins: &Binaries, dir: &Path, args: &AgentBenchArgs, mode: Mode) -> Result<Run> {
    let mut w = Workload::start_timeline(&bins.workload, args.threads, args.ms, TIMELINE_MS)?;
    let agent = match mode {
        Mode::Unobserved => None,
        Mode::Agent => {
            let a = Agent::start(
                &bins.mdiag,
                dir,
                WORKLOAD_COMM,
                w.pid(),
                args.window_secs,
                None,
            )?;
            std::thread::sleep(ALLOC_PERIOD / 2);
            Some(a)
        }
    };
    let run = w.run();
    let mut windows = Vec::new();
    if let Some(a) = agent {
        // What the agent says of its probes and their budget, beside the
        // measured cost.
        match a.metrics() {
            Ok(m) => say!(
                "  the agent: families up {}; allocator probes spent {:.3} % of the target's CPU in its last window (budget {:.3} %), period now {:.0} s",
                families_up(&m, WORKLOAD_COMM).join(", "),
                sample(&m, "mdiag_alloc_budget_spent_ratio").unwrap_or(f64::NAN) * 100.0,
                sample(&m, "mdiag_alloc_budget_ratio").unwrap_or(f64::NAN) * 100.0,
                period(&m).unwrap_or(f64::NAN)
            ),
            Err(e) => say!("  the agent's /metrics could not be read: {e:#}"),
        }
        windows = logged_windows(&a.stop()?);
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
    let timeline = run.timeline();
    if timeline.len() < 2 {
        anyhow::bail!("the workload reported no timeline: {}", run.report);
    }
    Ok(Run {
        rate: run.rate()?,
        ns,
        timeline,
        windows,
    })
}

/// `mdiag_alloc_window_period_seconds` of the one target.
fn period(metrics: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.starts_with("mdiag_alloc_window_period_seconds{"))?
        .rsplit_once(' ')?
        .1
        .trim()
        .parse()
        .ok()
}

/// A percentage of an optional share.
fn pct(x: Option<f64>) -> String {
    x.map_or_else(|| "n/a".to_owned(), |x| format!("{:+.3} %", x * 100.0))
}

pub(super) fn target_cost(bins: &Binaries, dir: &Path, args: &AgentBenchArgs) -> Result<()> {
    let r = rounds(bins, dir, args)?;
    print_between_runs(&r, args);
    print_within_runs(&r);
    Ok(())
}

/// What the rounds measured.
#[derive(Default)]
struct Rounds {
    /// By mode: unobserved, watched by the agent.
    figures: [Figures; 2],
    /// Per round: the watched run's figure over the unobserved one's.
    rate_ratios: Vec<f64>,
    cpu_ratios: Vec<f64>,
    /// Per round: the in-run cost, its null (unobserved) twin, the accounting.
    costs: Vec<f64>,
    nulls: Vec<f64>,
    accounted: Vec<f64>,
    /// Allocator windows in the watched runs, and how many closed early.
    windows: usize,
    early: usize,
}

/// Runs the rounds: an unobserved and a watched run each, in alternating
/// order, and the cost inside the watched run's allocator windows.
fn rounds(bins: &Binaries, dir: &Path, args: &AgentBenchArgs) -> Result<Rounds> {
    let modes = [Mode::Unobserved, Mode::Agent];
    let mut r = Rounds::default();
    for round in 0..args.rounds as usize {
        let mut this_round: [Option<Run>; 2] = [None, None];
        for i in 0..modes.len() {
            let m = (round + i) % modes.len();
            let mode = modes[m];
            let run =
                one_run(bins, dir, args, mode).with_context(|| format!("a {} run", mode.name()))?;
            say!(
                "round {} {:<12} {:>8.2} M allocations/s  {:>7.1} ns CPU per allocation",
                round + 1,
                mode.name(),
                run.rate / 1e6,
                run.ns
            );
            r.figures[m].rates.push(run.rate);
            r.figures[m].ns_per_op.push(run.ns);
            this_round[m] = Some(run);
        }
        let [Some(base), Some(watched)] = &this_round else {
            continue;
        };
        r.rate_ratios.push(watched.rate / base.rate);
        r.cpu_ratios.push(watched.ns / base.ns);
        let s: Split = split(&watched.timeline, &watched.windows, MARGIN_NS);
        let laid = moved(&watched.windows, watched.start_ns(), base.start_ns());
        let null = split(&base.timeline, &laid, MARGIN_NS);
        let (inside, outside) = s.ns_in_out();
        let early = watched.windows.iter().filter(|w| w.early).count();
        say!(
            "round {} within the watched run: {} allocator windows ({} closed early, {} probe hits); CPU per alloc inside them {}, outside {}; over the run {} (the same windows over the unobserved run: {}); the agent's accounting {}",
            round + 1,
            s.windows,
            early,
            watched.windows.iter().map(|w| w.hits).sum::<u64>(),
            per_alloc(inside, 0),
            per_alloc(outside, 1),
            pct(s.cost()),
            pct(null.cost()),
            pct(s.accounted())
        );
        r.windows += s.windows;
        r.early += early;
        r.costs.extend(s.cost());
        r.nulls.extend(null.cost());
        r.accounted.extend(s.accounted());
    }
    Ok(r)
}

/// Throughput and CPU per allocation between the unobserved and the
/// watched runs, against the budget.
fn print_between_runs(r: &Rounds, args: &AgentBenchArgs) {
    let [base, watched] = &r.figures;
    let (base_rate, base_ns) = (median(&base.rates), median(&base.ns_per_op));
    let drop = (1.0 - median(&watched.rates) / base_rate) * 100.0;
    let more_cpu = (median(&watched.ns_per_op) / base_ns - 1.0) * 100.0;
    let (rate_noise, cpu_noise) = (noise_pct(&base.rates), noise_pct(&base.ns_per_op));
    let within = |x: f64, noise: f64| {
        if x.abs() <= noise {
            "   (within the noise: not resolved)"
        } else {
            ""
        }
    };
    println!();
    println!(
        "2. Target cost: mdiag-tcmalloc ({} threads x {} ms per run, {} rounds) unobserved vs watched by mdiag agent (processes = [\"{WORKLOAD_COMM}\"], default allocator budget and window, released {} s after attach)",
        args.threads,
        args.ms,
        args.rounds,
        (ALLOC_PERIOD / 2).as_secs()
    );
    println!(
        "   between runs (medians; min..max), all of the agent's probes:\n   unobserved   {:>8.2} M allocs/s ({})                          {:>7.1} ns CPU/alloc ({})",
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
        "   throughput drop   {drop:>+7.2} %   budget <= {DROP_BUDGET_PCT} %   {}   noise +/-{rate_noise:.1} %{}",
        verdict(drop <= DROP_BUDGET_PCT),
        within(drop, rate_noise)
    );
    println!(
        "   CPU per alloc     {more_cpu:>+7.2} %   budget <= {DROP_BUDGET_PCT} %   {}   noise +/-{cpu_noise:.1} %{}",
        verdict(more_cpu <= DROP_BUDGET_PCT),
        within(more_cpu, cpu_noise)
    );
    if !r.rate_ratios.is_empty() {
        println!(
            "   (median of the per-round ratios: throughput drop {:.2} %, CPU per alloc {:+.2} %; noise: half the unobserved runs' range over their median)",
            (1.0 - median(&r.rate_ratios)) * 100.0,
            (median(&r.cpu_ratios) - 1.0) * 100.0
        );
    }
}

/// The cost inside the allocator windows within each watched run, against
/// the method's own noise, and the agent's accounting.
fn print_within_runs(r: &Rounds) {
    let cost = median(&r.costs) * 100.0;
    // The method's noise: the largest cost it finds in windows that cost
    // nothing, and the spread of the watched runs' own figures.
    let null_noise = r.nulls.iter().fold(0.0_f64, |a, b| a.max(b.abs())) * 100.0;
    let (lo, hi) = r
        .costs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), c| {
            (lo.min(*c), hi.max(*c))
        });
    let spread_noise = if r.costs.len() > 1 {
        (hi - lo) / 2.0 * 100.0
    } else {
        0.0
    };
    let noise = null_noise.max(spread_noise);
    println!(
        "   within each watched run ({} allocator windows in the runs, {} closed early; CPU per alloc over the run vs its stretches > {} ms from any window):",
        r.windows,
        r.early,
        MARGIN_NS / 1_000_000
    );
    println!(
        "   allocator windows {cost:>+7.3} %   budget <= {DROP_BUDGET_PCT} %   {}   noise +/-{noise:.3} % ({}; rounds {}){}",
        verdict(cost <= DROP_BUDGET_PCT && cost + noise <= DROP_BUDGET_PCT),
        format_args!(
            "largest |cost| of the same windows over the unobserved runs {null_noise:.3} %"
        ),
        r.costs
            .iter()
            .map(|c| format!("{:+.3}", c * 100.0))
            .collect::<Vec<_>>()
            .join(" "),
        if noise < DROP_BUDGET_PCT {
            "   (resolves 1 %)"
        } else {
            "   (does not resolve 1 %)"
        }
    );
    println!(
        "   the agent's own accounting: probe hits x calibrated pair cost = {:.3} % of the target's CPU in the runs (median; its alloc_budget: {ALLOC_BUDGET_PCT} %)",
        median(&r.accounted) * 100.0
    );
}

/// CPU per allocation of a stretch of the timeline, or why there is none: a
/// window shorter than a timeline step (windows close early when their hits
/// pass the projection) has no step wholly inside it.
fn per_alloc(ns: Option<f64>, decimals: usize) -> String {
    match ns {
        Some(v) => format!("{v:.decimals$} ns"),
        None => "none (no timeline step lies wholly within)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::per_alloc;

    #[test]
    fn per_alloc_never_prints_nan() {
        assert_eq!(per_alloc(Some(21.06), 1), "21.1 ns");
        assert_eq!(per_alloc(Some(21.6), 0), "22 ns");
        assert!(!per_alloc(None, 0).contains("NaN"));
    }
}
