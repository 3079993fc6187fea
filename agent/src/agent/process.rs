//! The standard process metrics every Prometheus client library exports
//! (`process_cpu_seconds_total`, `process_resident_memory_bytes`,
//! `process_virtual_memory_bytes`, `process_open_fds`, `process_max_fds`,
//! `process_start_time_seconds`), so the stock process dashboards and
//! alerts work on the agent. `prometheus-client` has no process collector
//! and none is published for it, so they are read here, from /proc through
//! `procfs` (as the Go client reads them) and from getrusage(2).

/// This process's figures at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessView {
    /// User + system CPU time, every thread's (ended ones too).
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub virtual_bytes: u64,
    pub open_fds: u64,
    /// The soft RLIMIT_NOFILE; `None` when unlimited.
    pub max_fds: Option<u64>,
    /// When the process started, seconds since the epoch.
    pub start_time_seconds: f64,
}

/// The figures now; one that cannot be read is 0 (and `max_fds` `None`).
pub fn sample() -> ProcessView {
    let me = procfs::process::Process::myself().ok();
    let page = crate::host::page_size().unwrap_or(4096);
    let statm = me.as_ref().and_then(|p| p.statm().ok());
    let max_fds =
        me.as_ref()
            .and_then(|p| p.limits().ok())
            .and_then(|l| match l.max_open_files.soft_limit {
                procfs::process::LimitValue::Value(v) => Some(v),
                procfs::process::LimitValue::Unlimited => None,
            });
    ProcessView {
        cpu_seconds: cpu_seconds(),
        resident_bytes: statm.as_ref().map_or(0, |m| m.resident * page),
        virtual_bytes: statm.as_ref().map_or(0, |m| m.size * page),
        open_fds: me
            .as_ref()
            .and_then(|p| p.fd_count().ok())
            .map_or(0, |n| n as u64),
        max_fds,
        start_time_seconds: me.as_ref().map_or(0.0, start_time_seconds),
    }
}

/// CPU time of this process (user + system), every thread's and the ended ones'.
fn cpu_seconds() -> f64 {
    // getrusage: every thread's, the ended ones too, in one call (no file).
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        (libc::getrusage(libc::RUSAGE_SELF, &mut usage) == 0).then_some(usage)
    };
    usage.map_or(0.0, |u| {
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        secs(u.ru_utime) + secs(u.ru_stime)
    })
}

/// Boot time (/proc/stat btime) plus the process's start in clock ticks
/// after boot (/proc/self/stat starttime).
fn start_time_seconds(me: &procfs::process::Process) -> f64 {
    let (Ok(stat), Ok(boot)) = (me.stat(), procfs::boot_time_secs()) else {
        return 0.0;
    };
    boot as f64 + stat.starttime as f64 / procfs::ticks_per_second() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A /proc/self/status field in kB, as bytes.
    fn status_kb(field: &str) -> u64 {
        let text = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{field}:")))
            .unwrap();
        let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
        kb * 1024
    }

    /// Each figure against what the kernel says elsewhere: VmRSS and VmSize
    /// of /proc/self/status, the entries of /proc/self/fd, getrlimit(2),
    /// the process's age by /proc/uptime, and CPU time spent on purpose.
    #[test]
    fn figures_match_the_kernel() {
        // Memory touched now, so the resident set is well above noise.
        let block = vec![1u8; 64 << 20];
        let file = tempfile::tempfile().unwrap();
        let before = sample();
        let rss = status_kb("VmRSS");
        let vm = status_kb("VmSize");
        let fds = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
        let after = sample();
        assert!(block.iter().step_by(4096).all(|&b| b == 1));
        drop(file);
        // Other test threads allocate meanwhile: a few MiB of slack.
        let slack = 16 << 20;
        assert!(before.resident_bytes >= 64 << 20, "{before:?}");
        assert!(
            before.resident_bytes.abs_diff(rss) < slack,
            "{before:?} VmRSS {rss}"
        );
        assert!(
            after.virtual_bytes.abs_diff(vm) < 256 << 20,
            "{after:?} VmSize {vm}"
        );
        // read_dir's own descriptor is counted by it; other test threads
        // open and close files meanwhile.
        assert!(
            before.open_fds.abs_diff(fds) <= 8,
            "{before:?} /proc/self/fd {fds}"
        );
        assert!(before.open_fds >= 4, "{before:?}");

        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct it is given.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        let want = (lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur);
        assert_eq!(after.max_fds, want);

        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let age = now - after.start_time_seconds;
        assert!(age > 0.0 && age < 3600.0, "started {age} s ago?");
    }

    /// CPU time: at least what a thread spent spinning (its own clock,
    /// CLOCK_THREAD_CPUTIME_ID), and what /proc/self/stat says (utime +
    /// stime, in clock ticks) right after.
    #[test]
    fn cpu_time_matches_the_kernel() {
        let before = sample().cpu_seconds;
        // Spins until its own CPU clock shows 100 ms: on a loaded host a
        // wall-clock spin may get almost no CPU.
        let spun = std::thread::spawn(|| {
            let thread_cpu = || {
                let mut ts = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: clock_gettime writes into the struct it is given.
                unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
                ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
            };
            let mut x = 0u64;
            while thread_cpu() < 0.1 {
                for _ in 0..10_000 {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            thread_cpu()
        })
        .join()
        .unwrap();
        let after = sample().cpu_seconds;
        let stat = procfs::process::Process::myself().unwrap().stat().unwrap();
        let ticks = procfs::ticks_per_second() as f64;
        let proc_stat = (stat.utime + stat.stime) as f64 / ticks;
        assert!(spun > 0.01, "the thread never ran: {spun}");
        // getrusage counts to the microsecond, the thread clock to the ns.
        assert!(
            after - before >= spun - 0.01,
            "grew {} < spun {spun}",
            after - before
        );
        // Ticks are 10 ms; other test threads run between the two reads.
        assert!(
            (after - proc_stat).abs() < 0.25,
            "{after} vs /proc/self/stat {proc_stat}"
        );
    }
}
