//! Workload for the contention family. Prints "ready", waits for a line on
//! stdin (the test attaches in between), runs one mode, prints one JSON
//! line with its own measurements, then waits for stdin to close.
//!
//! --mode dstate --dir DIR --threads T --writes N:
//!     each thread writes N × 4 KiB with O_DIRECT | O_DSYNC to its own file
//!     in DIR (a block-device file system: the writes sleep in D state
//!     waiting for the device) and fsyncs after each write; it times every
//!     write and fsync itself. JSON: {"pid", "threads": [{"tid", "io_ns", "calls"}]}.
//! --mode mmap --threads T --ms MS:
//!     T threads mmap / touch / munmap 256 KiB regions for MS ms: they fight
//!     for the process's mmap_lock (an rwsem taken for writing by mmap and
//!     munmap, for reading by page faults). JSON: {"pid", "wall_ns", "tids", "maps"}.
//! --mode quiet --threads T --ms MS:
//!     T threads sleep MS ms (nothing to contend). Same JSON as mmap.
use std::{
    io::{BufRead, Write},
    os::unix::fs::OpenOptionsExt,
    sync::{
        Arc, Barrier,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

const BLOCK: usize = 4096;
const REGION: usize = 256 * 1024;

fn arg<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn num(args: &[String], name: &str, default: u64) -> u64 {
    arg(args, name)
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn tid() -> i64 {
    // SAFETY: no preconditions.
    i64::from(unsafe { libc::gettid() })
}

/// A 4 KiB-aligned 4 KiB buffer (O_DIRECT needs aligned memory).
#[repr(C, align(4096))]
struct Block([u8; BLOCK]);

fn dstate(dir: &str, threads: u64, writes: u64) -> String {
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let path = std::path::Path::new(dir).join(format!("dstate-{i}.bin"));
            std::thread::spawn(move || {
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(true)
                    .write(true)
                    .custom_flags(libc::O_DIRECT | libc::O_DSYNC)
                    .open(&path)
                    .expect("open O_DIRECT | O_DSYNC");
                let block = Block([0x5a; BLOCK]);
                let mut io_ns = 0u128;
                for _ in 0..writes {
                    let t = Instant::now();
                    f.write_all(&block.0).expect("write");
                    f.sync_all().expect("fsync");
                    io_ns += t.elapsed().as_nanos();
                }
                (tid(), io_ns, writes * 2)
            })
        })
        .collect();
    let rows: Vec<String> = handles
        .into_iter()
        .map(|h| {
            let (tid, io_ns, calls) = h.join().expect("writer thread");
            format!(r#"{{"tid":{tid},"io_ns":{io_ns},"calls":{calls}}}"#)
        })
        .collect();
    format!(
        r#"{{"pid":{},"threads":[{}]}}"#,
        std::process::id(),
        rows.join(",")
    )
}

fn mmap_or_quiet(busy: bool, threads: u64, ms: u64) -> String {
    let maps = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(threads as usize + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (maps, start) = (maps.clone(), start.clone());
            std::thread::spawn(move || {
                let me = tid();
                start.wait();
                let end = Instant::now() + Duration::from_millis(ms);
                if !busy {
                    std::thread::sleep(Duration::from_millis(ms));
                    return me;
                }
                while Instant::now() < end {
                    // SAFETY: an anonymous private mapping, touched only
                    // within its length, unmapped before the next one.
                    unsafe {
                        let p = libc::mmap(
                            std::ptr::null_mut(),
                            REGION,
                            libc::PROT_READ | libc::PROT_WRITE,
                            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                            -1,
                            0,
                        );
                        assert_ne!(p, libc::MAP_FAILED, "mmap");
                        for off in (0..REGION).step_by(4096 * 8) {
                            *(p as *mut u8).add(off) = 1;
                        }
                        libc::munmap(p, REGION);
                    }
                    maps.fetch_add(1, Ordering::Relaxed);
                }
                me
            })
        })
        .collect();
    let t = Instant::now();
    start.wait();
    let tids: Vec<String> = handles
        .into_iter()
        .map(|h| h.join().expect("thread").to_string())
        .collect();
    format!(
        r#"{{"pid":{},"wall_ns":{},"tids":[{}],"maps":{}}}"#,
        std::process::id(),
        t.elapsed().as_nanos(),
        tids.join(","),
        maps.load(Ordering::Relaxed)
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = arg(&args, "--mode").unwrap_or("");
    let threads = num(&args, "--threads", 4);
    if !matches!(mode, "dstate" | "mmap" | "quiet") {
        eprintln!(
            "usage: mdiag-contention --mode dstate|mmap|quiet [--dir DIR] [--threads T] [--writes N] [--ms MS]"
        );
        std::process::exit(2);
    }
    println!("ready");
    let stdin = std::io::stdin();
    let mut line = String::new();
    if stdin.lock().read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let report = match mode {
        "dstate" => dstate(
            arg(&args, "--dir").unwrap_or("/tmp"),
            threads,
            num(&args, "--writes", 100),
        ),
        _ => mmap_or_quiet(mode == "mmap", threads, num(&args, "--ms", 1000)),
    };
    println!("{report}");
    let _ = std::io::stdout().flush();
    // Hold until stdin closes (the test reads the probes first).
    while stdin.lock().read_line(&mut line).unwrap_or(0) > 0 {
        line.clear();
    }
}
