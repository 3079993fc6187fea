//! What each BPF program of an observer costs, by the kernel's own run-time
//! statistics: nanoseconds per event and events per second.
//!
//! The statistics are on only while a [`StatsOn`] is held (BPF_ENABLE_STATS
//! through aya: the kernel turns them off again when its descriptor closes,
//! even if the bench dies, so `kernel.bpf_stats_enabled` is left as found).
//! An observer's programs are the `bpf-prog` descriptors it holds
//! (`/proc/PID/fd` and their `fdinfo`: `prog_id`, `run_time_ns`,
//! `run_cnt`); their names come from the kernel's program info (aya's
//! `loaded_programs`). Sampled every second so that a program loaded or
//! unloaded meanwhile (the agent's allocator windows) is counted for the
//! time it was seen.
//!
//! What these figures leave out: the trap and single-step of uprobes, and
//! the kernel's own tracing path around a program (ftrace trampolines,
//! the syscall slow path); the target's CPU time per operation includes them.
use std::{
    collections::BTreeMap,
    os::fd::OwnedFd,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};

/// BPF run-time statistics, on for as long as this lives.
pub(super) struct StatsOn(
    #[allow(dead_code, reason = "held, never read: stats stay on while it lives")] OwnedFd,
);

impl StatsOn {
    pub(super) fn new() -> Result<Self> {
        aya::sys::enable_stats(aya::sys::Stats::RunTime)
            .map(StatsOn)
            .context("turning BPF run-time statistics on (BPF_ENABLE_STATS)")
    }
}

/// One program's counters at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Counters {
    run_time_ns: u64,
    run_cnt: u64,
}

/// The programs `pid` holds: prog_id → counters, from its fdinfo.
fn programs_of(pid: u32) -> BTreeMap<u32, Counters> {
    let mut out = BTreeMap::new();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return out;
    };
    for fd in fds.flatten() {
        let is_prog = std::fs::read_link(fd.path())
            .is_ok_and(|l| l.to_string_lossy() == "anon_inode:bpf-prog");
        if !is_prog {
            continue;
        }
        let info = format!("/proc/{pid}/fdinfo/{}", fd.file_name().to_string_lossy());
        if let Some((id, c)) = std::fs::read_to_string(info)
            .ok()
            .and_then(|t| parse_fdinfo(&t))
        {
            out.insert(id, c);
        }
    }
    out
}

/// `prog_id`, `run_time_ns` and `run_cnt` of a bpf-prog fdinfo.
fn parse_fdinfo(text: &str) -> Option<(u32, Counters)> {
    let field = |key: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))?
            .trim()
            .parse()
            .ok()
    };
    Some((
        u32::try_from(field("prog_id")?).ok()?,
        Counters {
            run_time_ns: field("run_time_ns")?,
            run_cnt: field("run_cnt")?,
        },
    ))
}

/// The kernel's names of the programs loaded now (16 bytes at most).
fn names() -> BTreeMap<u32, String> {
    aya::programs::loaded_programs()
        .filter_map(|p| p.ok())
        .map(|p| {
            let name = p.name_as_str().unwrap_or("?").to_owned();
            (p.id(), if name.is_empty() { "?".into() } else { name })
        })
        .collect()
}

/// The programs of one observer over a measured stretch.
pub(super) struct Sampler {
    pid: u32,
    t0: Instant,
    first: BTreeMap<u32, Counters>,
    last: BTreeMap<u32, Counters>,
    names: BTreeMap<u32, String>,
}

/// One program (or several of one name) over the stretch.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ProgramCost {
    pub(super) name: String,
    /// How many loaded programs carried this name.
    pub(super) instances: usize,
    pub(super) run_time_ns: u64,
    pub(super) events: u64,
}

impl ProgramCost {
    pub(super) fn ns_per_event(&self) -> f64 {
        self.run_time_ns as f64 / self.events.max(1) as f64
    }
}

/// What the stretch measured.
pub(super) struct Costs {
    pub(super) wall: Duration,
    /// By total run time, largest first.
    pub(super) programs: Vec<ProgramCost>,
}

impl Costs {
    /// All run time as a share of one CPU, in percent.
    pub(super) fn cpu_pct(&self) -> f64 {
        let ns: u64 = self.programs.iter().map(|p| p.run_time_ns).sum();
        ns as f64 / self.wall.as_nanos().max(1) as f64 * 100.0
    }
}

impl Sampler {
    /// Starts counting the programs `pid` holds now (statistics must be on).
    pub(super) fn start(pid: u32) -> Self {
        let first = programs_of(pid);
        Sampler {
            pid,
            t0: Instant::now(),
            last: first.clone(),
            first,
            names: names(),
        }
    }

    /// Takes another sample: new programs count from zero (loaded while the
    /// statistics were on), gone ones keep their last counters.
    pub(super) fn sample(&mut self) {
        let now = programs_of(self.pid);
        let new = now.keys().any(|id| !self.names.contains_key(id));
        for (id, c) in now {
            self.first.entry(id).or_default();
            self.last.insert(id, c);
        }
        if new {
            self.names.extend(names());
        }
    }

    /// The last sample, now, and the costs since the start.
    pub(super) fn finish(mut self) -> Costs {
        self.sample();
        let wall = self.t0.elapsed();
        let mut by_name: BTreeMap<String, ProgramCost> = BTreeMap::new();
        for (id, last) in &self.last {
            let first = self.first.get(id).copied().unwrap_or_default();
            let name = self
                .names
                .get(id)
                .cloned()
                .unwrap_or_else(|| format!("prog {id}"));
            let e = by_name.entry(name.clone()).or_insert(ProgramCost {
                name,
                instances: 0,
                run_time_ns: 0,
                events: 0,
            });
            e.instances += 1;
            e.run_time_ns += last.run_time_ns.saturating_sub(first.run_time_ns);
            e.events += last.run_cnt.saturating_sub(first.run_cnt);
        }
        let mut programs: Vec<ProgramCost> = by_name.into_values().collect();
        programs.sort_by_key(|p| std::cmp::Reverse(p.run_time_ns));
        Costs { wall, programs }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fdinfo_of_a_program_is_read() {
        let text = "pos:\t0\nflags:\t02000002\nmnt_id:\t16\nino:\t1057\nprog_type:\t5\n\
                    prog_jited:\t1\nprog_tag:\t8b9c9b1f1e2e2d6a\nmemlock:\t4096\nprog_id:\t412\n\
                    run_time_ns:\t123456\nrun_cnt:\t789\nrecursion_misses:\t0\nverified_insns:\t99\n";
        assert_eq!(
            parse_fdinfo(text),
            Some((
                412,
                Counters {
                    run_time_ns: 123_456,
                    run_cnt: 789
                }
            ))
        );
        // A map's fdinfo has no prog_id.
        assert_eq!(parse_fdinfo("map_type:\t1\nkey_size:\t4\n"), None);
    }

    #[test]
    fn costs_add_up_per_name_and_as_a_share_of_a_cpu() {
        let c = Costs {
            wall: Duration::from_secs(2),
            programs: vec![
                ProgramCost {
                    name: "sched_switch".into(),
                    instances: 2,
                    run_time_ns: 10_000_000,
                    events: 20_000,
                },
                ProgramCost {
                    name: "sys_enter".into(),
                    instances: 1,
                    run_time_ns: 0,
                    events: 0,
                },
            ],
        };
        // 10 ms over 2 s: 0.5 % of a CPU; 500 ns per event.
        assert!((c.cpu_pct() - 0.5).abs() < 1e-12);
        assert_eq!(c.programs[0].ns_per_event(), 500.0);
        assert_eq!(c.programs[1].ns_per_event(), 0.0);
    }

    #[test]
    fn our_own_process_holds_no_program() {
        assert!(programs_of(std::process::id()).is_empty());
    }
}
