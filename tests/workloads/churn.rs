//! Workload: threads created and destroyed without end, as a mongod's
//! connection threads come and go: each lives a few milliseconds (it spins
//! a little, then sleeps a little) under a name of its own, until the
//! process is killed. For the agent's soak test: the kernel-side maps must
//! not fill and the agent's memory must not grow with the threads seen.
//!
//! mdiag-churn [--live N]   (N threads alive at once, default 4)
//! Prints "ready" once the first threads run.

use anyhow::Context as _;
use std::{
    io::Write,
    time::{Duration, Instant},
};

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
                    let until = Instant::now() + Duration::from_millis(2);
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                    std::thread::sleep(Duration::from_millis(3));
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
