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
//!     munmap, for reading by page faults). JSON: {"pid", "wall_ns", "tids",
//!     "maps", "blocked_ns"}: blocked_ns is, summed over the threads, the
//!     time each spent off its CPU and not waiting to run, during its loop,
//!     from the kernel's schedstat (wall − on-CPU − run-queue wait). The loop
//!     sleeps on nothing but mmap_lock, so that is time asleep on the lock.
//! --mode quiet --threads T --ms MS:
//!     T threads sleep MS ms (nothing to contend). Same JSON as mmap.
//! --mode vfork --ms MS:
//!     the main thread starts a child with clone(CLONE_VM | CLONE_VFORK)
//!     (what vfork() does) on a stack of its own; the child sleeps MS ms and
//!     exits, and the parent waits in the kernel for it all along, in
//!     TASK_KILLABLE (D in /proc/PID/stat). JSON: {"pid", "tid", "vfork_ns"
//!     (the parent's clone() call, timed around it), "child_sleep_ns" (the
//!     child's nanosleep, timed by the child in the shared memory)}.
//! --mode ttylock --ms MS:
//!     two threads read() the slave side of one pseudo-terminal. The first
//!     ("holder") waits for input holding the line discipline's read mutex
//!     (n_tty's atomic_read_lock), so the second ("waiter") waits for that
//!     kernel mutex, a lock wait, until the holder has read its line: MS ms
//!     after the waiter was seen blocked, the main thread writes two lines
//!     to the master side. JSON: {"pid", "holder_tid", "waiter_tid",
//!     "waiter_read_ns" (its read() call, which holds the lock wait),
//!     "blocked_to_write_ns" (from the waiter seen blocked in read() to the
//!     write: the lock wait is at least that), "waiter_wchan"}.
use anyhow::Context as _;
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

fn dstate(dir: &str, threads: u64, writes: u64) -> anyhow::Result<String> {
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let path = std::path::Path::new(dir).join(format!("dstate-{i}.bin"));
            std::thread::spawn(move || -> anyhow::Result<(i64, u128, u64)> {
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .truncate(true)
                    .write(true)
                    .custom_flags(libc::O_DIRECT | libc::O_DSYNC)
                    .open(&path)
                    .context("open O_DIRECT | O_DSYNC")?;
                let block = Block([0x5a; BLOCK]);
                let mut io_ns = 0u128;
                for _ in 0..writes {
                    let t = Instant::now();
                    f.write_all(&block.0).context("write")?;
                    f.sync_all().context("fsync")?;
                    io_ns += t.elapsed().as_nanos();
                }
                Ok((tid(), io_ns, writes * 2))
            })
        })
        .collect();
    let rows = handles
        .into_iter()
        .map(|h| {
            let (tid, io_ns, calls) = joined(h, "writer thread")??;
            Ok(format!(
                r#"{{"tid":{tid},"io_ns":{io_ns},"calls":{calls}}}"#
            ))
        })
        .collect::<anyhow::Result<Vec<String>>>()?;
    Ok(format!(
        r#"{{"pid":{},"threads":[{}]}}"#,
        std::process::id(),
        rows.join(",")
    ))
}

/// The thread's result, or an error when it panicked.
fn joined<T>(h: std::thread::JoinHandle<T>, what: &str) -> anyhow::Result<T> {
    h.join().map_err(|_| anyhow::anyhow!("the {what} panicked"))
}

fn mmap_or_quiet(busy: bool, threads: u64, ms: u64) -> anyhow::Result<String> {
    let maps = Arc::new(AtomicU64::new(0));
    let blocked = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(threads as usize + 1));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (maps, blocked, start) = (maps.clone(), blocked.clone(), start.clone());
            std::thread::spawn(move || -> anyhow::Result<i64> {
                let me = tid();
                start.wait();
                let began = Instant::now();
                let end = began + Duration::from_millis(ms);
                if !busy {
                    std::thread::sleep(Duration::from_millis(ms));
                    return Ok(me);
                }
                let (run0, wait0) = thread_schedstat()?;
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
                let (run1, wait1) = thread_schedstat()?;
                let wall = began.elapsed().as_nanos() as u64;
                blocked.fetch_add(
                    wall.saturating_sub(run1 - run0)
                        .saturating_sub(wait1 - wait0),
                    Ordering::Relaxed,
                );
                Ok(me)
            })
        })
        .collect();
    let t = Instant::now();
    start.wait();
    let tids = handles
        .into_iter()
        .map(|h| Ok(joined(h, "thread")??.to_string()))
        .collect::<anyhow::Result<Vec<String>>>()?;
    Ok(format!(
        r#"{{"pid":{},"wall_ns":{},"tids":[{}],"maps":{},"blocked_ns":{}}}"#,
        std::process::id(),
        t.elapsed().as_nanos(),
        tids.join(","),
        maps.load(Ordering::Relaxed),
        blocked.load(Ordering::Relaxed)
    ))
}

/// The calling thread's time on the CPU and waiting on a run queue, in ns,
/// from /proc/thread-self/schedstat (the kernel's own accounting).
fn thread_schedstat() -> anyhow::Result<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").context("schedstat")?;
    let mut f = text.split_whitespace().map(str::parse::<u64>);
    Ok((
        f.next().context("on-CPU ns")?.context("on-CPU ns")?,
        f.next().context("run-queue ns")?.context("run-queue ns")?,
    ))
}

/// CLOCK_MONOTONIC in ns (the clock the kernel's probes use).
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the valid timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What the vfork child reads and writes (the parent's memory, shared).
#[repr(C)]
struct VforkShared {
    sleep_ns: u64,
    slept_ns: AtomicU64,
}

extern "C" fn vfork_child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's VforkShared, alive while the parent
    // waits in clone() for this child to exit.
    let shared = unsafe { &*(arg as *const VforkShared) };
    let ns = shared.sleep_ns;
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    let t = monotonic_ns();
    // SAFETY: a plain sleep on a valid timespec (no remainder wanted).
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
    shared.slept_ns.store(monotonic_ns() - t, Ordering::SeqCst);
    // SAFETY: ends the child process only (it shares no thread with the parent).
    unsafe { libc::_exit(0) }
}

fn vfork(ms: u64) -> String {
    let shared = VforkShared {
        sleep_ns: ms * 1_000_000,
        slept_ns: AtomicU64::new(0),
    };
    let mut stack = vec![0u8; 256 * 1024];
    // The stack grows down: start at its 16-byte aligned top.
    let top = (stack.as_mut_ptr() as usize + stack.len()) & !15;
    let t0 = Instant::now();
    // SAFETY: the child runs `vfork_child` on its own stack in our memory
    // and never returns into our frames; CLONE_VFORK suspends this thread
    // until the child exits, so `shared` and `stack` outlive it.
    let child = unsafe {
        libc::clone(
            vfork_child,
            top as *mut libc::c_void,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            &shared as *const VforkShared as *mut libc::c_void,
        )
    };
    let vfork_ns = t0.elapsed().as_nanos();
    assert!(child > 0, "clone: {}", std::io::Error::last_os_error());
    let mut status = 0;
    // SAFETY: reaps our own child.
    unsafe { libc::waitpid(child, &mut status, 0) };
    drop(stack);
    format!(
        r#"{{"pid":{},"tid":{},"vfork_ns":{vfork_ns},"child_sleep_ns":{}}}"#,
        std::process::id(),
        tid(),
        shared.slept_ns.load(Ordering::SeqCst)
    )
}

/// `/proc/self/task/TID/stat`'s state letter and whether the thread is in
/// the syscall `nr` (`/proc/self/task/TID/syscall` starts with its number).
fn blocked_in(tid: i64, nr: libc::c_long) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap_or_default();
    let state = stat.rsplit_once(") ").and_then(|(_, r)| r.chars().next());
    let syscall =
        std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).unwrap_or_default();
    state == Some('S') && syscall.split_whitespace().next() == Some(&nr.to_string())
}

/// Polls until thread `tid` sleeps in syscall `nr` (10 s at most).
fn wait_blocked(tid: i64, nr: libc::c_long) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !blocked_in(tid, nr) {
        assert!(Instant::now() < deadline, "thread {tid} never blocked");
        std::thread::yield_now();
    }
}

/// A pseudo-terminal: (master, slave) file descriptors.
fn pty() -> (libc::c_int, libc::c_int) {
    // SAFETY: posix_openpt / grantpt / unlockpt / ptsname_r on the fd just
    // opened, with a buffer of the size given; open on the NUL-terminated
    // name it wrote.
    unsafe {
        let master = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(
            master >= 0,
            "posix_openpt: {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(libc::grantpt(master), 0);
        assert_eq!(libc::unlockpt(master), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(master, name.as_mut_ptr(), name.len()), 0);
        let slave = libc::open(name.as_ptr(), libc::O_RDWR | libc::O_NOCTTY);
        assert!(
            slave >= 0,
            "open pty slave: {}",
            std::io::Error::last_os_error()
        );
        (master, slave)
    }
}

/// One blocking read() of the pty slave; (its tid, the call's ns).
fn read_line(slave: libc::c_int, tid_tx: std::sync::mpsc::Sender<i64>) -> u128 {
    let _ = tid_tx.send(tid());
    let mut buf = [0u8; 64];
    let t = Instant::now();
    // SAFETY: reads into a buffer of the given length.
    let n = unsafe { libc::read(slave, buf.as_mut_ptr().cast(), buf.len()) };
    let ns = t.elapsed().as_nanos();
    assert!(n > 0, "read: {}", std::io::Error::last_os_error());
    ns
}

fn ttylock(ms: u64) -> anyhow::Result<String> {
    let (master, slave) = pty();
    let (tx, rx) = std::sync::mpsc::channel();
    let holder = {
        let tx = tx.clone();
        std::thread::spawn(move || read_line(slave, tx))
    };
    let holder_tid = rx.recv().context("holder tid")?;
    wait_blocked(holder_tid, libc::SYS_read);
    let waiter = std::thread::spawn(move || read_line(slave, tx));
    let waiter_tid = rx.recv().context("waiter tid")?;
    // The holder owns the read mutex while it waits for input, so the
    // waiter asleep in read() is asleep on that mutex.
    wait_blocked(waiter_tid, libc::SYS_read);
    let blocked = Instant::now();
    let wchan =
        std::fs::read_to_string(format!("/proc/self/task/{waiter_tid}/wchan")).unwrap_or_default();
    std::thread::sleep(Duration::from_millis(ms));
    let blocked_to_write_ns = blocked.elapsed().as_nanos();
    // Canonical mode: each read() returns one line.
    let lines = b"a\nb\n";
    // SAFETY: writes a buffer of the given length.
    let n = unsafe { libc::write(master, lines.as_ptr().cast(), lines.len()) };
    assert_eq!(n, lines.len() as isize, "write to the pty master");
    joined(holder, "holder")?;
    let waiter_read_ns = joined(waiter, "waiter")?;
    // SAFETY: closes our own descriptors.
    unsafe {
        libc::close(slave);
        libc::close(master);
    }
    Ok(format!(
        r#"{{"pid":{},"holder_tid":{holder_tid},"waiter_tid":{waiter_tid},"waiter_read_ns":{waiter_read_ns},"blocked_to_write_ns":{blocked_to_write_ns},"waiter_wchan":"{}"}}"#,
        std::process::id(),
        wchan.trim().replace(['"', '\\'], "")
    ))
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let mode = arg(&args, "--mode").unwrap_or("");
    let threads = num(&args, "--threads", 4);
    if !matches!(mode, "dstate" | "mmap" | "quiet" | "vfork" | "ttylock") {
        eprintln!(
            "usage: mdiag-contention --mode dstate|mmap|quiet|vfork|ttylock [--dir DIR] [--threads T] [--writes N] [--ms MS]"
        );
        std::process::exit(2);
    }
    println!("ready");
    let stdin = std::io::stdin();
    let mut line = String::new();
    if stdin.lock().read_line(&mut line).unwrap_or(0) == 0 {
        return Ok(());
    }
    let report = match mode {
        "dstate" => dstate(
            arg(&args, "--dir").unwrap_or("/tmp"),
            threads,
            num(&args, "--writes", 100),
        )?,
        "vfork" => vfork(num(&args, "--ms", 3000)),
        "ttylock" => ttylock(num(&args, "--ms", 3000))?,
        _ => mmap_or_quiet(mode == "mmap", threads, num(&args, "--ms", 1000))?,
    };
    println!("{report}");
    let _ = std::io::stdout().flush();
    // Hold until stdin closes (the test reads the probes first).
    while stdin.lock().read_line(&mut line).unwrap_or(0) > 0 {
        line.clear();
    }
    Ok(())
}
