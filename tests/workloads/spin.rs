//! Workload: N busy threads (more than CPUs ⇒ involuntary switches), then a
//! report of the kernel's own per-thread switch counts as ground truth.
//!
//! mdiag-spin --threads N --spin-ms MS [--wait-stdin] [--linger]
//!   --wait-stdin: threads start spinning only after a line on stdin; the
//!     process prints `ready` first, once every thread exists and is parked.
//!   --hop:        each thread starts pinned to CPU i % ncpu and moves itself
//!                 to the next CPU halfway (a known number of migrations).
//!   --linger:     after the report, keep every thread alive until stdin
//!                 reaches EOF (so a test can still read /proc/PID/task).
//!   --pin CPU:    every thread spins on CPU only.
//!   --rt:         the spinning threads are SCHED_FIFO (priority 1): no
//!                 ordinary task preempts them, so on their own CPU they run
//!                 for long stretches without a context switch (needs root).
//! Then prints one JSON line on stdout: {"pid", "threads": [{"tid","voluntary",
//! "nonvoluntary"}], "voluntary", "nonvoluntary", "spins"} where the totals
//! cover every thread of the process, read while all of them are alive.
use anyhow::Context as _;
use std::{
    io::BufRead,
    sync::{
        Arc, Barrier,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn status_counts(tid: &str) -> (u64, u64) {
    let status =
        std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap_or_default();
    let get = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (
        get("voluntary_ctxt_switches:"),
        get("nonvoluntary_ctxt_switches:"),
    )
}

/// Restricts the calling thread to `cpu`.
fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it; the
    // syscall reads it. 0 = the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Each thread's context switches as the kernel counts them, their sums,
/// the spins and how long the process has lived.
fn report(born: Instant, spins: u64) -> serde_json::Value {
    let mut rows = Vec::new();
    let (mut vol, mut invol) = (0u64, 0u64);
    if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
        for e in dir.flatten() {
            let tid = e.file_name().to_string_lossy().into_owned();
            let (v, n) = status_counts(&tid);
            vol += v;
            invol += n;
            rows.push(serde_json::json!({"tid": tid.parse::<u64>().unwrap_or(0), "voluntary": v, "nonvoluntary": n}));
        }
    }
    serde_json::json!({
        "pid": std::process::id(),
        "threads": rows,
        "voluntary": vol,
        "nonvoluntary": invol,
        "spins": spins,
        // From main's first line to this report: a recording of the whole
        // life of the process covers at least this much.
        "alive_ms": born.elapsed().as_millis() as u64,
    })
}

fn main() -> anyhow::Result<()> {
    let born = Instant::now();
    let args: Vec<String> = std::env::args().collect();
    let threads: usize = arg(&args, "--threads")
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let spin = Duration::from_millis(
        arg(&args, "--spin-ms")
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000),
    );
    let wait_stdin = args.iter().any(|a| a == "--wait-stdin");
    let linger = args.iter().any(|a| a == "--linger");
    let hop = args.iter().any(|a| a == "--hop");
    let pin_to: Option<usize> = arg(&args, "--pin").and_then(|v| v.parse().ok());
    let rt = args.iter().any(|a| a == "--rt");
    // SAFETY: sysconf has no preconditions.
    let ncpu = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;

    let parked = Arc::new(Barrier::new(threads + 1));
    let start = Arc::new(Barrier::new(threads + 1));
    let done = Arc::new(Barrier::new(threads + 1));
    let release = Arc::new(Barrier::new(threads + 1));
    let spins = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let (parked, start, done, release, spins) = (
                parked.clone(),
                start.clone(),
                done.clone(),
                release.clone(),
                spins.clone(),
            );
            std::thread::Builder::new()
                .name(format!("spin{i}"))
                .spawn(move || {
                    if let Some(cpu) = pin_to {
                        pin(cpu);
                    }
                    if rt {
                        let param = libc::sched_param { sched_priority: 1 };
                        // SAFETY: sets the calling thread's policy from a valid param.
                        let ret = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
                        assert_eq!(
                            ret,
                            0,
                            "SCHED_FIFO needs root: {}",
                            std::io::Error::last_os_error()
                        );
                    }
                    parked.wait();
                    start.wait();
                    let t = Instant::now();
                    let mut n = 0u64;
                    let mut hopped = !hop || ncpu < 2;
                    if !hopped {
                        pin(i % ncpu);
                    }
                    while t.elapsed() < spin {
                        n = std::hint::black_box(n + 1);
                        if !hopped && t.elapsed() >= spin / 2 {
                            // Move to the next CPU: at least one migration each.
                            pin((i + 1) % ncpu);
                            hopped = true;
                        }
                    }
                    spins.fetch_add(n, Ordering::Relaxed);
                    done.wait();
                    release.wait();
                })
                .context("spawn thread")
        })
        .collect::<anyhow::Result<_>>()?;
    parked.wait();
    if wait_stdin {
        println!("ready");
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
    }
    start.wait();
    done.wait();
    // Every thread is alive and blocked: read the kernel's counts.
    let report = report(born, spins.load(Ordering::Relaxed));
    println!("{report}");
    if linger {
        // Keep every thread alive (and idle) until stdin closes.
        let mut sink = String::new();
        while std::io::stdin()
            .lock()
            .read_line(&mut sink)
            .map(|n| n > 0)
            .unwrap_or(false)
        {
            sink.clear();
        }
    }
    release.wait();
    for h in handles {
        let _ = h.join();
    }
    Ok(())
}
