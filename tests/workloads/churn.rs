//! Workload: threads created and destroyed without end, as a mongod's
//! connection threads come and go: each lives 5 ms (it spins half a
//! millisecond, then sleeps) under a name of its own, until the process is
//! killed. For the agent's soak test: the kernel-side maps must not fill
//! and the agent's memory must not grow with the threads seen.
//!
//! With 8 threads alive that is 1600 threads a second on 0.8 of a CPU. It
//! spun 2 ms of every 5 once: the same thread rate on 3.2 CPUs' worth of
//! demand, which took both CPUs of a CI host for the soak's two minutes
//! from the builds running beside the root suite.
//!
//! mdiag-churn [--live N]   (N threads alive at once, default 4)
//! Prints "ready" once the first threads run.

use anyhow::Context as _;
use std::{
    io::Write,
    time::{Duration, Instant},
};

/// How long each thread lives, and how much of that it spins on a CPU.
const LIFE: Duration = Duration::from_millis(5);
const SPIN: Duration = Duration::from_micros(500);

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let live: usize = args
        .iter()
        .position(|a| a == "--live")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let mut n: u64 = 0;
    let mut handles = std::collections::VecDeque::new();
    let mut said = false;
    loop {
        while handles.len() < live {
            n += 1;
            let h = std::thread::Builder::new()
                .name(format!("conn{n}"))
                .spawn(|| {
                    let until = Instant::now() + SPIN;
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                    std::thread::sleep(LIFE - SPIN);
                })
                .context("spawn a thread")?;
            handles.push_back(h);
        }
        if !said {
            println!("ready");
            let _ = std::io::stdout().flush();
            said = true;
        }
        if let Some(h) = handles.pop_front() {
            let _ = h.join();
        }
    }
}
