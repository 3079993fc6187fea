//! Part 2 of `cargo xtask bench-overhead`: mdiag's own CPU (from
//! /proc/PID/stat, while recording, start-up excluded) and peak RSS while
//! `mdiag-pingpong` makes the host switch context about 100 k times a
//! second, printed next to the budgets (≤ 2 % of one core, ≤ 64 MiB).

use std::{
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use super::{BenchArgs, Bins, CPU_BUDGET_PCT, Observer, RSS_BUDGET_MIB, start_mdiag, verdict};

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) in parentheses.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); utime is field 14, stime 15.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// A `kB` line of /proc/PID/status (`VmRSS:`, `VmHWM:`).
fn status_kib(pid: u32, key: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(key))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn proc_stat_ctxt() -> Option<u64> {
    std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("ctxt "))
        .and_then(|v| v.trim().parse().ok())
}

/// Waits for `child` with wait4(2): (exit status ok, peak RSS in KiB).
fn wait_rusage(child: Child) -> Result<(bool, u64)> {
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: our own child; valid pointers to locals.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    if rc != pid {
        bail!("wait4: {}", std::io::Error::last_os_error());
    }
    drop(child); // reaped above (dropping a Child neither waits nor kills)
    let ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    Ok((ok, usage.ru_maxrss as u64))
}

pub(super) fn switches(bins: &Bins, args: &BenchArgs) -> Result<()> {
    let secs = args.switch_secs;
    // Long enough for mdiag to attach before and to stop after the window.
    let pingpong_ms = (secs + 60) * 1000;
    let mut pingpong = Command::new(&bins.pingpong)
        .args(["--ms", &pingpong_ms.to_string()])
        .stdout(Stdio::null())
        .spawn()
        .context("start mdiag-pingpong")?;
    let result = (|| -> Result<()> {
        let pid = pingpong.id();
        let out = bins.tmp.path().join("switches.mdiag");
        let Observer::Mdiag(child, drain) = start_mdiag(bins, pid, &out)? else {
            bail!("start_mdiag gave another kind of observer");
        };
        let mdiag_pid = child.id();
        // Let start-up settle (symbol loading of the first slice).
        std::thread::sleep(Duration::from_secs(2));
        let t0 = Instant::now();
        let (c0, x0) = (cpu_ticks(mdiag_pid), proc_stat_ctxt());
        std::thread::sleep(Duration::from_secs(secs));
        let (c1, x1) = (cpu_ticks(mdiag_pid), proc_stat_ctxt());
        let wall = t0.elapsed().as_secs_f64();
        let rss_now_kib = status_kib(mdiag_pid, "VmRSS:");
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(mdiag_pid as i32, libc::SIGINT) };
        let (ok, peak_kib) = wait_rusage(child)?;
        let log = drain.join().unwrap_or_default();
        if !ok {
            bail!("mdiag record failed: {log}");
        }
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let (Some(c0), Some(c1), Some(x0), Some(x1)) = (c0, c1, x0, x1) else {
            bail!("could not read /proc/{mdiag_pid}/stat or /proc/stat");
        };
        let cpu_pct = (c1 - c0) as f64 / hz / wall * 100.0;
        let rate = (x1 - x0) as f64 / wall;
        let rss_mib = peak_kib as f64 / 1024.0;
        println!();
        println!(
            "2. mdiag record --pid <mdiag-pingpong> while the host switches context {:.0} k times/s (target ~100 k), over {wall:.1} s",
            rate / 1e3
        );
        println!(
            "   mdiag CPU      {cpu_pct:>6.2} % of one core   budget <= {CPU_BUDGET_PCT} %   {}",
            verdict(cpu_pct <= CPU_BUDGET_PCT)
        );
        println!(
            "   mdiag peak RSS {rss_mib:>6.1} MiB            budget <= {RSS_BUDGET_MIB} MiB   {}   (RSS at the end of the window: {})",
            verdict(rss_mib <= RSS_BUDGET_MIB),
            rss_now_kib.map_or("unknown".to_owned(), |k| format!(
                "{:.1} MiB",
                k as f64 / 1024.0
            ))
        );
        Ok(())
    })();
    let _ = pingpong.kill();
    let _ = pingpong.wait();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        let clock = process_cpu().as_secs_f64();
        let stat = ticks as f64 / hz;
        assert!(
            (stat - clock).abs() < 0.1,
            "/proc/PID/stat says {stat:.3} s, the clock {clock:.3} s"
        );
        assert!(proc_stat_ctxt().is_some_and(|c| c > 0));
    }
}
