//! What `bench-overhead` and `bench-agent` share: the binaries they build
//! (mdiag, the TCMalloc workload, the context-switch workload, the request
//! load on the real mongod), the held
//! TCMalloc workload and its report, a private temporary directory, a child's
//! log read up to a line, the readings of `/proc` (a process's CPU time and
//! resident set, the host's context switches) and the medians and verdicts
//! printed next to the budgets.
//!
//! Why readings of `/proc` and not the programs' own figures: a bench is
//! ground truth for what mdiag costs, so it reads what the kernel counts.
use std::{
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Child, ChildStdout, Command, Stdio},
};

use anyhow::{Context, Result, bail};

use crate::{
    cmd::{Cmd, target_dir},
    run::build,
};

/// The TCMalloc workload's glibc tunables: glibc leaves rseq to TCMalloc,
/// whose per-CPU caches are then on, as a well-configured mongod 8 runs:
/// the fastest allocation path, where a per-call probe costs the most.
pub(super) const WORKLOAD_TUNABLES: &str = "glibc.pthread.rseq=0";

/// The programs a bench runs.
pub(super) struct Binaries {
    pub(super) mdiag: PathBuf,
    /// `mdiag-tcmalloc` (dev profile, which the workspace optimises for it).
    pub(super) workload: PathBuf,
    pub(super) pingpong: PathBuf,
}

/// Builds mdiag (release unless `debug`) and both workloads.
pub(super) fn build_binaries(debug: bool) -> Result<Binaries> {
    let mdiag = build(!debug)?;
    Cmd::cargo()
        .args(["build", "-p", "mdiag-tcmalloc-workload"])
        .run()?;
    Cmd::cargo()
        .args(["build", "-p", "mdiag-tests", "--bin", "mdiag-pingpong"])
        .run()?;
    let dir = target_dir()?.join("debug");
    Ok(Binaries {
        mdiag,
        workload: dir.join("mdiag-tcmalloc"),
        pingpong: dir.join("mdiag-pingpong"),
    })
}

/// The programs of the real-server bench.
pub(super) struct RealBinaries {
    pub(super) mdiag: PathBuf,
    /// `mdiag-mongoload`, release: the load's client CPU shares the host
    /// with mongod, so it is the optimised build, as a driver in production.
    pub(super) load: PathBuf,
    /// `mdiag-pingpong`, release too (built with it).
    pub(super) pingpong: PathBuf,
}

/// Builds mdiag (release unless `debug`), the request load and the ping-pong.
pub(super) fn build_real(debug: bool) -> Result<RealBinaries> {
    let mdiag = build(!debug)?;
    Cmd::cargo()
        .args([
            "build",
            "--release",
            "-p",
            "mdiag-tests",
            "--bin",
            "mdiag-mongoload",
        ])
        .run()?;
    Cmd::cargo()
        .args(["build", "-p", "mdiag-tests", "--bin", "mdiag-pingpong"])
        .run()?;
    let dir = target_dir()?;
    Ok(RealBinaries {
        mdiag,
        load: dir.join("release/mdiag-mongoload"),
        pingpong: dir.join("debug/mdiag-pingpong"),
    })
}

/// A private temporary directory under `<target>/tmp`, removed on drop (no
/// crate for one directory).
pub(super) struct TempDir(PathBuf);

impl TempDir {
    pub(super) fn new(prefix: &str) -> Result<Self> {
        let p = target_dir()?
            .join("tmp")
            .join(format!("{prefix}-{}", std::process::id()));
        std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
        Ok(TempDir(p))
    }
    pub(super) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts `mdiag record` as `cmd` (its stderr piped here) and returns once
/// it says its probes are attached, with a thread that collects the rest of
/// its standard error.
pub(super) fn start_record_attached(
    cmd: &mut std::process::Command,
) -> anyhow::Result<(std::process::Child, std::thread::JoinHandle<String>)> {
    use anyhow::Context as _;
    let mut child = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("start mdiag record")?;
    let mut stderr = std::io::BufReader::new(child.stderr.take().context("mdiag record stderr")?);
    let mut seen = String::new();
    if !wait_for(&mut stderr, "probes attached", &mut seen) {
        let _ = child.wait();
        anyhow::bail!("mdiag record did not attach: {seen}");
    }
    let rest = std::thread::spawn(move || {
        let _ = std::io::Read::read_to_string(&mut stderr, &mut seen);
        seen
    });
    Ok((child, rest))
}

/// Reads lines of `r` until one contains `needle` (true) or EOF (false);
/// the lines read are appended to `seen`.
pub(super) fn wait_for(r: &mut impl BufRead, needle: &str, seen: &mut String) -> bool {
    wait_for_line(r, |l| l.contains(needle), seen)
}

/// Reads lines of `r` until one satisfies `found` (true) or EOF (false);
/// the lines read are appended to `seen`.
pub(super) fn wait_for_line(
    r: &mut impl BufRead,
    found: impl Fn(&str) -> bool,
    seen: &mut String,
) -> bool {
    loop {
        let mut line = String::new();
        match r.read_line(&mut line) {
            Ok(0) | Err(_) => return false,
            Ok(_) => {
                seen.push_str(&line);
                if found(&line) {
                    return true;
                }
            }
        }
    }
}

/// A held TCMalloc workload: started, waiting on stdin at "ready".
pub(super) struct Workload {
    pub(super) child: Child,
    stdout: BufReader<ChildStdout>,
}

/// One release of the workload: its report, and the CPU time its process
/// used meanwhile by `/proc/PID/stat` (clock ticks).
pub(super) struct WorkloadRun {
    pub(super) report: serde_json::Value,
    pub(super) cpu_ticks: Option<u64>,
}

impl WorkloadRun {
    /// Allocations per second, the workload's own count.
    pub(super) fn rate(&self) -> Result<f64> {
        self.report["allocs_per_sec"]
            .as_f64()
            .with_context(|| format!("allocs_per_sec in {}", self.report))
    }

    /// The timeline of a `--timeline` run: `[monotonic ns, allocations so
    /// far, process CPU ns]` samples (empty without one).
    pub(super) fn timeline(&self) -> Vec<[u64; 3]> {
        serde_json::from_value(self.report["timeline"].clone()).unwrap_or_default()
    }

    /// The process's CPU time per allocation, in nanoseconds.
    pub(super) fn cpu_ns_per_op(&self) -> Option<f64> {
        let allocs = self.report["allocs"].as_u64().filter(|&n| n > 0)?;
        Some(self.cpu_ticks? as f64 / clock_ticks_per_sec() * 1e9 / allocs as f64)
    }
}

impl Workload {
    /// Starts `exe` with `threads` allocating threads for `ms` milliseconds
    /// once released, TCMalloc's per-CPU caches on.
    pub(super) fn start(exe: &Path, threads: u64, ms: u64) -> Result<Self> {
        Self::start_with(exe, threads, ms, &[])
    }

    /// [`Self::start`], its report with a timeline sampled every
    /// `every_ms` (see [`WorkloadRun::timeline`]).
    pub(super) fn start_timeline(exe: &Path, threads: u64, ms: u64, every_ms: u64) -> Result<Self> {
        Self::start_with(exe, threads, ms, &["--timeline", &every_ms.to_string()])
    }

    fn start_with(exe: &Path, threads: u64, ms: u64, more: &[&str]) -> Result<Self> {
        let mut child = Command::new(exe)
            .args(["--threads", &threads.to_string()])
            .args(["--ms", &ms.to_string(), "--hold"])
            .args(more)
            .env("GLIBC_TUNABLES", WORKLOAD_TUNABLES)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("start {}", exe.display()))?;
        let mut stdout = BufReader::new(child.stdout.take().context("workload stdout")?);
        let mut seen = String::new();
        if !wait_for(&mut stdout, "ready", &mut seen) {
            bail!("the workload did not get ready: {seen}");
        }
        Ok(Workload { child, stdout })
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Releases it and returns its report (it then waits for stdin to
    /// close, so its `/proc` entry is read after the run).
    pub(super) fn run(&mut self) -> Result<WorkloadRun> {
        let pid = self.child.id();
        let before = cpu_ticks(pid);
        let stdin = self.child.stdin.as_mut().context("workload stdin")?;
        stdin.write_all(b"go\n")?;
        stdin.flush()?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        let after = cpu_ticks(pid);
        let report =
            serde_json::from_str(&line).with_context(|| format!("workload report {line:?}"))?;
        Ok(WorkloadRun {
            report,
            cpu_ticks: after.zip(before).map(|(a, b)| a.saturating_sub(b)),
        })
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// utime + stime of a process, in clock ticks.
pub(super) fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); utime is field 14, stime 15.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The clock ticks per second of `/proc/PID/stat`.
pub(super) fn clock_ticks_per_sec() -> f64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64
}

/// A `kB` line of /proc/PID/status (`VmRSS:`, `VmHWM:`).
pub(super) fn status_kib(pid: u32, key: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(key))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The host's context switches since boot (`/proc/stat` `ctxt`).
pub(super) fn proc_stat_ctxt() -> Option<u64> {
    std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("ctxt "))
        .and_then(|v| v.trim().parse().ok())
}

/// Sends `sig` to our own child.
pub(super) fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, sig) };
}

pub(super) fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// "min..max" of `v` divided by `scale`.
pub(super) fn spread(v: &[f64], scale: f64) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(0.0, f64::max);
    format!("{:.2}..{:.2}", lo / scale, hi / scale)
}

/// "min..max" of `v` with `decimals` decimals.
pub(super) fn range(v: &[f64], decimals: usize) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{lo:.decimals$}..{hi:.decimals$}")
}

/// Half the range of `v` as a share of its median, in percent: the host's
/// own noise, within which a difference is not resolved by the run.
pub(super) fn noise_pct(v: &[f64]) -> f64 {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(0.0, f64::max);
    (hi - lo) / 2.0 / median(v) * 100.0
}

pub(super) fn verdict(ok: bool) -> &'static str {
    if ok { "PASS" } else { "OVER" }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn medians_and_spreads() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(spread(&[2e6, 1e6, 3e6], 1e6), "1.00..3.00");
        assert_eq!(range(&[140.26, 151.84, 139.0], 1), "139.0..151.8");
        assert_eq!(range(&[6194.4, 5301.0], 0), "5301..6194");
        assert_eq!(noise_pct(&[90.0, 100.0, 110.0]), 10.0);
    }

    #[test]
    fn cpu_per_op_comes_from_the_ticks_and_the_count() {
        let run = WorkloadRun {
            report: serde_json::json!({"allocs": 1_000_000u64, "allocs_per_sec": 5e5}),
            cpu_ticks: Some(clock_ticks_per_sec() as u64),
        };
        // One second of CPU over a million allocations: 1000 ns each.
        assert!((run.cpu_ns_per_op().unwrap() - 1000.0).abs() < 1e-6);
        assert_eq!(run.rate().unwrap(), 5e5);
        let none = WorkloadRun {
            report: serde_json::json!({"allocs": 0}),
            cpu_ticks: Some(5),
        };
        assert_eq!(none.cpu_ns_per_op(), None);
        assert!(none.rate().is_err());
    }

    fn process_cpu() -> Duration {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid timespec to write into.
        unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }

    #[test]
    fn cpu_ticks_agree_with_the_process_cpu_clock() {
        // Burn 300 ms of CPU, then compare /proc/PID/stat with the clock.
        let start = process_cpu();
        let mut x = 0u64;
        while process_cpu() - start < Duration::from_millis(300) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let ticks = cpu_ticks(std::process::id()).expect("own /proc/PID/stat");
        let clock = process_cpu().as_secs_f64();
        let stat = ticks as f64 / clock_ticks_per_sec();
        assert!(
            (stat - clock).abs() < 0.1,
            "/proc/PID/stat says {stat:.3} s, the clock {clock:.3} s"
        );
        assert!(proc_stat_ctxt().is_some_and(|c| c > 0));
        assert!(status_kib(std::process::id(), "VmRSS:").is_some_and(|k| k > 0));
    }
}
