//! Workload for the allocator family: `--threads N` threads each call libc's
//! `malloc` and `free` directly (mixed sizes, nothing else allocates in the
//! hot loop) until stdin closes (at most `--seconds S`; `--no-stdin`: for
//! `--seconds S` whatever stdin does), counting their own malloc calls in 1 ms
//! buckets of CLOCK_MONOTONIC (the clock of mdiag's windows). Whichever
//! allocator the process has (glibc, or gperftools through LD_PRELOAD) serves
//! the calls.
//!
//! Prints one JSON line when done: {"pid", "t0_ns", "bucket_ns", "threads",
//! "mallocs", "per_thread": [..], "buckets": [..], "cpu_ns_buckets": [..]} where `buckets[i]` is the
//! number of malloc calls (all threads) that started in
//! [t0 + i ms, t0 + (i+1) ms), and `cpu_ns_buckets[i]` the CPU time the
//! threads spent in that millisecond (sampled every 64 calls).
use std::{
    io::Read,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    thread,
};

const BUCKET_NS: u64 = 1_000_000;
const SIZES: [usize; 6] = [16, 48, 200, 1000, 4000, 33_000];

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into a valid timespec (vDSO, no allocation).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// This thread's CPU time, ns (a syscall: read only every [`CPU_EVERY`] calls).
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

const CPU_EVERY: usize = 64;

/// The hot loop until `end_ns` or `stop`: malloc calls per bucket, and the
/// thread's CPU time per bucket (read every [`CPU_EVERY`] calls and charged
/// to the bucket of that moment).
fn run(t0: u64, end_ns: u64, buckets: usize, stop: &AtomicBool) -> (Vec<u64>, Vec<u64>) {
    let mut counts = vec![0u64; buckets];
    let mut cpu = vec![0u64; buckets];
    let mut last_cpu = thread_cpu_ns();
    let mut i = 0usize;
    loop {
        let t = now_ns();
        if t >= end_ns || stop.load(Ordering::Relaxed) {
            break;
        }
        if i.is_multiple_of(CPU_EVERY) {
            let c = thread_cpu_ns();
            if let Some(slot) = cpu.get_mut(((t - t0) / BUCKET_NS) as usize) {
                *slot += c - last_cpu;
            }
            last_cpu = c;
        }
        let size = SIZES[i % SIZES.len()];
        i = i.wrapping_add(1);
        // SAFETY: plain malloc/free pair; the block is touched only while owned.
        unsafe {
            let p = libc::malloc(size).cast::<u8>();
            if !p.is_null() {
                std::ptr::write_volatile(p, 1);
            }
            libc::free(p.cast());
        }
        let b = ((t - t0) / BUCKET_NS) as usize;
        if let Some(c) = counts.get_mut(b) {
            *c += 1;
        }
    }
    (counts, cpu)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let threads = arg(&args, "--threads", 2).max(1);
    let seconds = arg(&args, "--seconds", 60).max(1);
    let buckets = (seconds * 1000 + 1) as usize;
    let t0 = now_ns();
    let end = t0 + seconds * 1_000_000_000;
    let stop = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let stop = Arc::clone(&stop);
            thread::spawn(move || run(t0, end, buckets, &stop))
        })
        .collect();
    // Run until stdin closes (or the time is up); with --no-stdin (e.g.
    // spawned by `mdiag record -- ...`), for the whole time.
    if !args.iter().any(|a| a == "--no-stdin") {
        let _ = std::io::stdin().read_to_end(&mut Vec::new());
        stop.store(true, Ordering::Relaxed);
    }
    let per_thread: Vec<(Vec<u64>, Vec<u64>)> = handles
        .into_iter()
        .map(|h| h.join().map_err(|_| anyhow::anyhow!("a worker panicked")))
        .collect::<anyhow::Result<_>>()?;
    let mut sum = vec![0u64; buckets];
    let mut cpu = vec![0u64; buckets];
    for (counts, cpu_ns) in &per_thread {
        for (s, c) in sum.iter_mut().zip(counts) {
            *s += c;
        }
        for (s, c) in cpu.iter_mut().zip(cpu_ns) {
            *s += c;
        }
    }
    let per_thread: Vec<&Vec<u64>> = per_thread.iter().map(|(c, _)| c).collect();
    let totals: Vec<u64> = per_thread.iter().map(|t| t.iter().sum()).collect();
    let report = serde_json::json!({
        "pid": std::process::id(),
        "t0_ns": t0,
        "bucket_ns": BUCKET_NS,
        "threads": threads,
        "mallocs": totals.iter().sum::<u64>(),
        "per_thread": totals,
        "buckets": sum,
        "cpu_ns_buckets": cpu,
    });
    println!("{report}");
    Ok(())
}
