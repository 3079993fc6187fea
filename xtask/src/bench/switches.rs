//! Part 2 of `cargo xtask bench-overhead`: mdiag's own CPU (from
//! /proc/PID/stat, while recording, start-up excluded) and peak RSS while
//! `mdiag-pingpong` makes the host switch context about 100 k times a
//! second, printed next to the budgets (≤ 2 % of one core, ≤ 64 MiB).

use std::{
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use super::{
    BenchArgs, Bins, CPU_BUDGET_PCT, Observer, RSS_BUDGET_MIB,
    common::{clock_ticks_per_sec, cpu_ticks, proc_stat_ctxt, signal, status_kib, verdict},
    start_mdiag,
};

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
        signal(&child, libc::SIGINT);
        let (ok, peak_kib) = wait_rusage(child)?;
        let log = drain.join().unwrap_or_default();
        if !ok {
            bail!("mdiag record failed: {log}");
        }
        let hz = clock_ticks_per_sec();
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
