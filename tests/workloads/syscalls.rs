//! Workload for the syscalls family. After a line on stdin it does, in order:
//! --maps N:      N × (mmap LEN, madvise DONTNEED, munmap) on the main thread;
//! --waits K:     K rounds on a second thread, each blocking in FUTEX_WAIT
//!                until the main thread's FUTEX_WAKE --wake-after-us later;
//!                the waiter counts and times each FUTEX_WAIT call itself;
//! --rseq-self:   registers its own rseq area with a raw rseq(2) call on a new
//!                thread, as TCMalloc does, and reports the result (-22 EINVAL
//!                when glibc registered another area first).
//! --linger-ms M: stay alive M ms after stdin closes.
//! Prints one JSON line: {"pid", "maps", "len", "waiter_tid", "waits",
//! "wait_calls", "wait_ns", "rseq_tid", "rseq_ret"}, then waits for stdin to close.
use std::{
    io::BufRead,
    sync::{
        Arc,
        atomic::{AtomicU32, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

const LEN: usize = 21 * 4096;

fn arg(args: &[String], name: &str) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn futex(word: &AtomicU32, op: i32, val: u32) -> libc::c_long {
    // SAFETY: a valid, aligned futex word that outlives the call; no timeout.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            op,
            val,
            std::ptr::null::<libc::timespec>(),
            0,
            0,
        )
    }
}

fn tid() -> u64 {
    // SAFETY: no preconditions.
    unsafe { libc::gettid() as u64 }
}

#[repr(C, align(32))]
struct Rseq([u8; 32]);

/// glibc's own account of its rseq registration (0: glibc did not register).
fn glibc_rseq_size() -> u32 {
    unsafe extern "C" {
        static __rseq_size: u32;
    }
    // SAFETY: glibc >= 2.35 exports this variable; it is set before main.
    unsafe { std::ptr::read_volatile(&raw const __rseq_size) }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let maps = arg(&args, "--maps");
    let waits = arg(&args, "--waits");
    let wake_after = Duration::from_micros(arg(&args, "--wake-after-us").max(1));
    let rseq_self = args.iter().any(|a| a == "--rseq-self");
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);

    for _ in 0..maps {
        // SAFETY: anonymous private mapping, used only here and unmapped below.
        unsafe {
            let p = libc::mmap(
                std::ptr::null_mut(),
                LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(p, libc::MAP_FAILED);
            libc::madvise(p, LEN, libc::MADV_DONTNEED);
            libc::munmap(p, LEN);
        }
    }

    let word = Arc::new(AtomicU32::new(0));
    let waiter_tid = Arc::new(AtomicU64::new(0));
    let waiter = {
        let (word, waiter_tid) = (word.clone(), waiter_tid.clone());
        std::thread::spawn(move || {
            waiter_tid.store(tid(), Ordering::SeqCst);
            // Its own account of every FUTEX_WAIT it made and the time inside.
            let (mut calls, mut total) = (0u64, Duration::ZERO);
            for round in 1..=waits as u32 {
                // Wait while the word is still `round - 1`.
                while word.load(Ordering::SeqCst) == round - 1 {
                    let t = Instant::now();
                    futex(
                        &word,
                        libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                        round - 1,
                    );
                    total += t.elapsed();
                    calls += 1;
                }
            }
            (calls, total)
        })
    };
    for round in 1..=waits as u32 {
        std::thread::sleep(wake_after);
        word.store(round, Ordering::SeqCst);
        futex(&word, libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1);
    }
    let (wait_calls, wait_ns) = waiter
        .join()
        .map(|(c, d)| (c, d.as_nanos() as u64))
        .unwrap_or((0, 0));

    let (rseq_tid, rseq_ret) = if rseq_self {
        std::thread::spawn(|| {
            let area = Box::leak(Box::new(Rseq([0; 32])));
            // SAFETY: a 32-byte aligned area that lives forever, as rseq(2) requires.
            let ret = unsafe {
                libc::syscall(
                    libc::SYS_rseq,
                    area as *mut Rseq,
                    32u32,
                    0i32,
                    0x5305_3053u32,
                )
            };
            let ret = if ret < 0 {
                -(std::io::Error::last_os_error().raw_os_error().unwrap_or(0) as i64)
            } else {
                ret
            };
            (tid(), ret)
        })
        .join()
        .unwrap_or((0, 0))
    } else {
        (0, 0)
    };
    println!(
        "{}",
        serde_json::json!({
            "pid": std::process::id(), "maps": maps, "len": LEN,
            "waiter_tid": waiter_tid.load(Ordering::SeqCst), "waits": waits,
            "wait_calls": wait_calls, "wait_ns": wait_ns,
            "rseq_tid": rseq_tid, "rseq_ret": rseq_ret, "glibc_rseq_size": glibc_rseq_size(),
        })
    );
    let mut sink = String::new();
    while std::io::stdin()
        .lock()
        .read_line(&mut sink)
        .map(|n| n > 0)
        .unwrap_or(false)
    {
        sink.clear();
    }
    std::thread::sleep(Duration::from_millis(arg(&args, "--linger-ms")));
}
