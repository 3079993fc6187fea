//! `./x test --cpu-load`: every CPU kept busy by spinners outside the tests
//! while the tiers run.
//!
//! Why: mdiag diagnoses hosts when they are busy, and CI's 2-vCPU machine is
//! busy with builds while the root suite runs; a test that passes only on a
//! quiet host fails there by chance. This makes that host on purpose, so
//! that "passes under load" is a command anyone can run (CONTRIBUTING.md):
//! one spinning child process per online CPU, at the default priority, for
//! as long as the guard lives.
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result};

use crate::say;

/// The spinners; killed when dropped.
pub struct CpuLoad {
    children: Vec<Child>,
}

impl CpuLoad {
    /// Starts one spinner per online CPU.
    pub fn start() -> Result<Self> {
        let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let mut children = Vec::with_capacity(cpus);
        for _ in 0..cpus {
            let child = Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .stdin(Stdio::null())
                .spawn()
                .context("starting a CPU spinner (sh)")?;
            children.push(child);
        }
        say!("cpu-load: {cpus} spinners keep every CPU busy");
        Ok(Self { children })
    }

    /// Process ids of the spinners.
    #[cfg(test)]
    fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }
}

impl Drop for CpuLoad {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spinner's state letter from /proc (R: running or runnable).
    fn state(pid: u32) -> Option<char> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(") ")?.1.chars().next()
    }

    #[test]
    fn spinners_run_one_per_cpu_and_are_gone_once_dropped() {
        let load = CpuLoad::start().unwrap();
        let pids = load.pids();
        assert_eq!(
            pids.len(),
            std::thread::available_parallelism().unwrap().get()
        );
        // Runnable (R) at some point: they spin, they do not sleep.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        for &pid in &pids {
            while state(pid) != Some('R') {
                assert!(std::time::Instant::now() < deadline, "{pid} never ran");
                std::thread::yield_now();
            }
        }
        drop(load);
        for pid in pids {
            // Reaped by the drop: no such process (or a reused pid, not ours).
            assert!(state(pid).is_none_or(|s| s != 'Z'), "{pid} left behind");
        }
    }
}
