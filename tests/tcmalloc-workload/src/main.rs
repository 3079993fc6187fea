//! mdiag-tcmalloc: a Google TCMalloc target for the root suite and the
//! overhead bench. Google TCMalloc (crate `tcmalloc-better`, per-CPU caches
//! over rseq) is the global allocator; glibc's `malloc` is left alone, as in
//! any Rust program with a `#[global_allocator]`.
//!
//! N threads (`--threads`, default 2) allocate and free mixed sizes (mostly
//! small, some up to 64 KiB) through a ring of live blocks, each counting
//! its own calls, for `--ms` milliseconds of wall time (default 1000) or
//! `--ops` allocations per thread, whichever ends first. Afterwards the
//! workload asks TCMalloc itself whether its per-CPU caches are active
//! (`MallocExtension_Internal_GetPerCpuCachesActive` and the numeric
//! property `tcmalloc.per_cpu_caches_active`) and reads glibc's own
//! `__rseq_size` (0 when glibc did not register rseq), then prints one JSON
//! line:
//! `{"pid", "threads", "allocs", "frees", "bytes", "elapsed_ns",
//!   "allocs_per_sec", "cpu_ns", "per_cpu_caches_active",
//!   "property_per_cpu_caches_active", "cpu_free_bytes", "glibc_rseq_size",
//!   "phases"}`.
//!
//! `--hold`: print `{"ready": PID}` and wait for a line on stdin before the
//! allocation phase, and, after the report, wait for stdin to close (a test
//! can attach while the process already runs, and read the process before it
//! exits). `--phases K` repeats the allocation phase K times (default 1),
//! waiting for a line on stdin before each one when holding, and reports the
//! per-phase allocation counts in `phases`.
//!
//! `--timeline MS`: a sampler thread also reads, every MS milliseconds, the
//! monotonic clock, the allocations so far (each thread publishes its count
//! every 64 allocations) and the process's CPU time, and the report gets
//! `"timeline": [[monotonic_ns, allocs, cpu_ns], ...]`. A bench lines it up
//! with the windows in which a profiler probed the allocator (their
//! monotonic times), to compare the CPU time per allocation inside and
//! outside them within one run.
use std::{
    hint::black_box,
    io::{BufRead, Write},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use tcmalloc_better::TCMalloc;

#[global_allocator]
static GLOBAL: TCMalloc = TCMalloc;

unsafe extern "C" {
    // TCMalloc's own answers (tcmalloc/internal_malloc_extension.h), defined
    // in the static library `tcmalloc-better` builds.
    fn MallocExtension_Internal_GetPerCpuCachesActive() -> bool;
    fn MallocExtension_Internal_GetNumericProperty(
        name_data: *const libc::c_char,
        name_size: libc::size_t,
        value: *mut libc::size_t,
    ) -> bool;
    // glibc ≥ 2.35: the size of the rseq area glibc registered, 0 if none.
    static __rseq_size: libc::c_uint;
}

/// Live blocks per thread.
const RING: usize = 256;

struct Args {
    threads: usize,
    ms: u64,
    ops: u64,
    hold: bool,
    phases: usize,
    timeline_ms: u64,
}

/// One thread's allocation count, on a cache line of its own.
#[repr(align(128))]
#[derive(Default)]
struct Progress(AtomicU64);

/// One timeline sample: monotonic ns, allocations so far, process CPU ns.
type Sample = [u64; 3];

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        threads: 2,
        ms: 1000,
        ops: u64::MAX,
        hold: false,
        phases: 1,
        timeline_ms: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = |name: &str| -> Result<u64, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} needs a number"))
        };
        match flag.as_str() {
            "--threads" => a.threads = value("--threads")?.max(1) as usize,
            "--ms" => a.ms = value("--ms")?,
            "--ops" => a.ops = value("--ops")?,
            "--phases" => a.phases = value("--phases")?.max(1) as usize,
            "--timeline" => a.timeline_ms = value("--timeline")?,
            "--hold" => a.hold = true,
            other => {
                return Err(format!(
                    "unknown argument {other:?}; usage: mdiag-tcmalloc [--threads N] [--ms MS] [--ops N] [--phases K] [--hold] [--timeline MS]"
                ));
            }
        }
    }
    Ok(a)
}

/// One size: 7 in 8 are small (8..1 KiB), the rest up to 64 KiB.
fn next_size(rng: &mut u64) -> usize {
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    let r = *rng as usize;
    if r & 7 != 0 {
        8 + ((r >> 3) & 1023)
    } else {
        1024 + ((r >> 3) & 65535)
    }
}

/// Counters of one thread.
#[derive(Default, Clone, Copy)]
struct Counts {
    allocs: u64,
    frees: u64,
    bytes: u64,
}

/// Allocates until `stop` or `ops` allocations.
fn churn(seed: u64, ops: u64, stop: &AtomicBool, progress: &Progress) -> Counts {
    let mut ring: Vec<Option<Vec<u8>>> = (0..RING).map(|_| None).collect();
    let mut rng = seed | 1;
    let mut c = Counts::default();
    let mut i = 0usize;
    while c.allocs < ops {
        // Check the flag every 64 allocations (an atomic load is cheap, but
        // not free next to a per-CPU cache hit).
        if c.allocs & 63 == 0 {
            progress.0.store(c.allocs, Ordering::Relaxed);
            if stop.load(Ordering::Relaxed) {
                break;
            }
        }
        let size = next_size(&mut rng);
        let slot = &mut ring[i % RING];
        i += 1;
        if slot.take().is_some() {
            c.frees += 1;
        }
        let mut v = Vec::<u8>::with_capacity(size);
        // Touch the block so the allocation cannot be optimised away.
        v.push(size as u8);
        *slot = Some(black_box(v));
        c.allocs += 1;
        c.bytes += size as u64;
    }
    // Freed as the ring drops: count those too.
    c.frees += ring.iter().filter(|s| s.is_some()).count() as u64;
    c
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to write into.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn process_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// Samples the timeline every `every` until `stop`; allocation counts are
/// offset by `before` (the earlier phases').
fn sample_timeline(
    every: Duration,
    before: u64,
    progress: &[Progress],
    stop: &AtomicBool,
) -> Vec<Sample> {
    let sample = || {
        let allocs: u64 = progress.iter().map(|p| p.0.load(Ordering::Relaxed)).sum();
        [
            clock_ns(libc::CLOCK_MONOTONIC),
            before + allocs,
            process_cpu_ns(),
        ]
    };
    let mut out = vec![sample()];
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(every);
        out.push(sample());
    }
    out
}

fn property(name: &str) -> Option<u64> {
    let mut value: libc::size_t = 0;
    // SAFETY: name points to name.len() bytes; value is a valid out pointer.
    let ok = unsafe {
        MallocExtension_Internal_GetNumericProperty(name.as_ptr().cast(), name.len(), &mut value)
    };
    ok.then_some(value as u64)
}

/// One allocation phase over all threads; with `--timeline`, its samples
/// are appended to `timeline` (`before`: the allocations of earlier phases).
fn phase(args: &Args, phase_no: usize, before: u64, timeline: &mut Vec<Sample>) -> Counts {
    let stop = Arc::new(AtomicBool::new(false));
    let progress: Arc<Vec<Progress>> =
        Arc::new((0..args.threads).map(|_| Progress::default()).collect());
    let workers: Vec<_> = (0..args.threads)
        .map(|t| {
            let stop = Arc::clone(&stop);
            let progress = Arc::clone(&progress);
            let ops = args.ops;
            let seed = 0x9e37_79b9_7f4a_7c15_u64 ^ ((t as u64 + 1) << 32) ^ phase_no as u64;
            std::thread::Builder::new()
                .name(format!("alloc-{t}"))
                .spawn(move || churn(seed, ops, &stop, &progress[t]))
        })
        .collect();
    let sampler = (args.timeline_ms > 0).then(|| {
        let stop = Arc::clone(&stop);
        let progress = Arc::clone(&progress);
        let every = Duration::from_millis(args.timeline_ms);
        std::thread::Builder::new()
            .name("timeline".into())
            .spawn(move || sample_timeline(every, before, &progress, &stop))
    });
    std::thread::sleep(Duration::from_millis(args.ms));
    stop.store(true, Ordering::Relaxed);
    match sampler.map(|s| {
        s.map_err(|e| e.to_string())
            .and_then(|h| h.join().map_err(|_| "the sampler panicked".to_owned()))
    }) {
        Some(Ok(samples)) => timeline.extend(samples),
        Some(Err(e)) => {
            eprintln!("mdiag-tcmalloc: timeline: {e}");
            std::process::exit(1);
        }
        None => {}
    }
    let mut total = Counts::default();
    for w in workers {
        match w.map_err(|e| e.to_string()).and_then(|h| {
            h.join()
                .map_err(|_| "an allocating thread panicked".to_owned())
        }) {
            Ok(c) => {
                total.allocs += c.allocs;
                total.frees += c.frees;
                total.bytes += c.bytes;
            }
            Err(e) => {
                eprintln!("mdiag-tcmalloc: {e}");
                std::process::exit(1);
            }
        }
    }
    total
}

fn wait_line(stdin: &mut impl BufRead) {
    let mut line = String::new();
    let _ = stdin.read_line(&mut line);
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("mdiag-tcmalloc: {e}");
            std::process::exit(2);
        }
    };
    let pid = std::process::id();
    let mut stdin = std::io::stdin().lock();
    let mut out = std::io::stdout().lock();
    let mut totals = Counts::default();
    let mut phases = Vec::with_capacity(args.phases);
    let cpu0 = process_cpu_ns();
    let mut elapsed = Duration::ZERO;
    let mut timeline = Vec::new();
    for k in 0..args.phases {
        if args.hold {
            let _ = writeln!(out, "{{\"ready\":{pid},\"phase\":{k}}}");
            let _ = out.flush();
            wait_line(&mut stdin);
        }
        let start = Instant::now();
        let c = phase(&args, k, totals.allocs, &mut timeline);
        elapsed += start.elapsed();
        totals.allocs += c.allocs;
        totals.frees += c.frees;
        totals.bytes += c.bytes;
        phases.push(c.allocs);
    }
    let cpu_ns = process_cpu_ns().saturating_sub(cpu0);
    // SAFETY: both are plain reads of TCMalloc's and glibc's own state.
    let (active, rseq_size) = unsafe {
        (
            MallocExtension_Internal_GetPerCpuCachesActive(),
            std::ptr::read_volatile(&raw const __rseq_size),
        )
    };
    let elapsed_ns = elapsed.as_nanos() as u64;
    let mut report = serde_json::json!({
        "pid": pid,
        "threads": args.threads,
        "allocs": totals.allocs,
        "frees": totals.frees,
        "bytes": totals.bytes,
        "elapsed_ns": elapsed_ns,
        "allocs_per_sec": totals.allocs as f64 * 1e9 / elapsed_ns.max(1) as f64,
        "cpu_ns": cpu_ns,
        "per_cpu_caches_active": active,
        "property_per_cpu_caches_active": property("tcmalloc.per_cpu_caches_active"),
        "cpu_free_bytes": property("tcmalloc.cpu_free"),
        "glibc_rseq_size": rseq_size,
        "phases": phases,
    });
    if args.timeline_ms > 0 {
        report["timeline"] = serde_json::json!(timeline);
    }
    let _ = writeln!(out, "{report}");
    let _ = out.flush();
    if args.hold {
        // Until stdin closes.
        let mut sink = String::new();
        while stdin.read_line(&mut sink).is_ok_and(|n| n > 0) {
            sink.clear();
        }
    }
}
