//! A process's CPU time, which the allocator family paces its windows by and
//! the agent's duty cycle charges its cost against.

/// The target's CPU time (user + system, all threads), ns: from its
/// process CPU clock (nanoseconds, one system call), else from
/// `/proc/PID/stat` (clock ticks).
pub fn cpu_ns(pid: u32) -> Option<u64> {
    cpu_clock_ns(pid).or_else(|| {
        let stat = procfs::process::Process::new(i32::try_from(pid).ok()?)
            .ok()?
            .stat()
            .ok()?;
        let ticks = procfs::ticks_per_second().max(1);
        Some((stat.utime + stat.stime).saturating_mul(1_000_000_000) / ticks)
    })
}

/// `clock_gettime` of the process CPU clock of `pid` (`None` once it is gone).
fn cpu_clock_ns(pid: u32) -> Option<u64> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `clock` is a valid place for the clock id; the call only
    // writes it.
    if unsafe { libc::clock_getcpuclockid(libc::pid_t::try_from(pid).ok()?, &mut clock) } != 0 {
        return None;
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to write into.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(u64::try_from(ts.tv_sec).ok()? * 1_000_000_000 + u64::try_from(ts.tv_nsec).ok()?)
}
