//! Workload: a busy thread and a sleeper pinned to the same CPU. Each time the
//! sleeper wakes (every --sleep-us) it is queued on the busy thread's CPU, so
//! the next switch there is the busy thread giving way to it: a wakeup
//! preemption, by construction.
//!
//! With --rt the sleeper is SCHED_FIFO: a real-time wakeup always preempts a
//! normal task at once, so every wakeup is a wakeup preemption (exact ground
//! truth; needs root). Without it, EEVDF decides, and may defer some.
//!
//! mdiag-wakeup --ms MS [--sleep-us US] [--cpu N] [--rt] [--wait-stdin]
//! Prints {"pid", "spinner_tid", "sleeper_tid", "sleeper_wakeups"}.
use std::{
    io::BufRead,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it; the
    // syscall reads it. 0 = the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn tid() -> u64 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u64 }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let run = Duration::from_millis(arg(&args, "--ms", 1500));
    let sleep = Duration::from_micros(arg(&args, "--sleep-us", 1000));
    let cpu = arg(&args, "--cpu", 0) as usize;
    let rt = args.iter().any(|a| a == "--rt");
    if args.iter().any(|a| a == "--wait-stdin") {
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let spinner_tid = Arc::new(AtomicU64::new(0));
    let spinner = {
        let (stop, spinner_tid) = (stop.clone(), spinner_tid.clone());
        std::thread::spawn(move || {
            pin(cpu);
            spinner_tid.store(tid(), Ordering::SeqCst);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n = std::hint::black_box(n + 1);
            }
        })
    };
    let sleeper = std::thread::spawn(move || {
        pin(cpu);
        if rt {
            let param = libc::sched_param { sched_priority: 10 };
            // SAFETY: valid sched_param; 0 = the calling thread.
            let ret = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
            assert_eq!(
                ret,
                0,
                "SCHED_FIFO needs root: {}",
                std::io::Error::last_os_error()
            );
        }
        let t = Instant::now();
        let mut wakeups = 0u64;
        while t.elapsed() < run {
            std::thread::sleep(sleep);
            wakeups += 1;
        }
        (tid(), wakeups)
    });
    let (sleeper_tid, wakeups) = sleeper.join().unwrap_or((0, 0));
    stop.store(true, Ordering::Relaxed);
    let _ = spinner.join();
    println!(
        "{}",
        serde_json::json!({
            "pid": std::process::id(),
            "spinner_tid": spinner_tid.load(Ordering::SeqCst),
            "sleeper_tid": sleeper_tid,
            "sleeper_wakeups": wakeups,
        })
    );
}
