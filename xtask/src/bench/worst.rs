//! Part 4 of the real-server bench: the worst case for an observer that
//! hooks context switches and syscalls. `mdiag-pingpong` bounces a byte
//! between two threads pinned to one CPU (each round trip: 4 syscalls and 2
//! context switches), unobserved and under each observer, in rounds whose
//! order rotates; its own round-trip count per second, medians. Budget: the
//! agent costs ≤ 12 % of the round trips.
//!
//! The ping-pong is held (`--hold`) until its observer has attached and
//! [`SETTLE`] passed, so only observed round trips are counted.
use std::{
    io::{BufRead, BufReader, Write},
    process::{Command, Stdio},
};

use anyhow::{Context, Result, bail};

use super::{
    common::{median, noise_pct, range, verdict, wait_for},
    observers::{Mode, Running, Target},
    real::{Plan, SETTLE},
};
use crate::say;

const AGENT_DROP_BUDGET_PCT: f64 = 12.0;
const COMM: &str = "mdiag-pingpong";

/// One ping-pong run under `mode`: round trips per second.
fn one_run(plan: &Plan, mode: Mode, cpu: usize) -> Result<f64> {
    let ms = plan.args.pingpong_secs * 1000;
    let mut child = Command::new("taskset")
        .args(["-c", &cpu.to_string()])
        .arg(plan.pingpong)
        .args(["--ms", &ms.to_string(), "--hold"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .context("start taskset mdiag-pingpong")?;
    let result = (|| -> Result<f64> {
        let mut stdout = BufReader::new(child.stdout.take().context("pingpong stdout")?);
        let mut seen = String::new();
        if !wait_for(&mut stdout, "ready", &mut seen) {
            bail!("mdiag-pingpong did not get ready: {seen}");
        }
        let target = Target {
            pid: child.id(),
            comm: COMM,
            uri: None,
        };
        let obs = Running::start(mode, &plan.setting, &target)?;
        if mode != Mode::Unobserved {
            std::thread::sleep(SETTLE);
        }
        let stdin = child.stdin.as_mut().context("pingpong stdin")?;
        stdin.write_all(b"go\n")?;
        stdin.flush()?;
        let mut line = String::new();
        stdout.read_line(&mut line)?;
        obs.stop()?;
        let v: serde_json::Value =
            serde_json::from_str(&line).with_context(|| format!("pingpong said {line:?}"))?;
        let (Some(n), Some(ms)) = (v["round_trips"].as_u64(), v["ms"].as_u64()) else {
            bail!("pingpong said {line:?}");
        };
        Ok(n as f64 / (ms.max(1) as f64 / 1000.0))
    })();
    let _ = child.kill();
    let _ = child.wait();
    result
}

pub(super) fn pingpong(plan: &Plan) -> Result<()> {
    // Both threads on the last CPU: every round trip switches context.
    let cpu = std::thread::available_parallelism().map_or(1, |n| n.get()) - 1;
    let n = plan.modes.len();
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); n];
    for round in 0..plan.rounds as usize {
        for i in 0..n {
            let m = (round + i) % n;
            let mode = plan.modes[m];
            let rate = one_run(plan, mode, cpu)
                .with_context(|| format!("a {} ping-pong run", mode.name()))?;
            say!(
                "ping-pong round {} {:<14} {:>8.0} round trips/s",
                round + 1,
                mode.name(),
                rate
            );
            rates[m].push(rate);
        }
    }
    let base = median(&rates[0]);
    println!();
    println!(
        "4. Worst case: mdiag-pingpong, two threads on CPU {cpu} ({} s per run, {} rounds; medians, min..max); noise +/-{:.1} %",
        plan.args.pingpong_secs,
        plan.rounds,
        noise_pct(&rates[0])
    );
    for (m, &mode) in plan.modes.iter().enumerate() {
        let med = median(&rates[m]);
        let drop = (1.0 - med / base) * 100.0;
        let tail = match mode {
            Mode::Unobserved => String::new(),
            Mode::Agent => format!(
                "{drop:>5.1} % fewer   budget <= {AGENT_DROP_BUDGET_PCT} %   {}",
                verdict(drop <= AGENT_DROP_BUDGET_PCT)
            ),
            _ => format!("{drop:>5.1} % fewer"),
        };
        println!(
            "   {:<14} {:>8.0} round trips/s ({})   {tail}",
            mode.name(),
            med,
            range(&rates[m], 0)
        );
    }
    Ok(())
}
