//! The host's CPU use over a recording: `/proc/stat` and every process's
//! `/proc/PID/stat` read at the start ([`CpuSnapshot::take`]) and at the end
//! ([`CpuSnapshot::usage_since`]), so that a recording of one target can
//! still say how busy the CPUs were and which other processes kept them busy.
//!
//! A process is matched between the readings by pid and start time (a pid
//! reused in between counts as a new process); a process that started during
//! the recording counts with all its CPU time, one that exited is not seen.
//! Reading every `/proc/PID/stat` costs a few milliseconds for a few hundred
//! processes, twice per recording.

use std::{collections::HashMap, path::Path, time::Instant};

use procfs::{FromBufReadSI, KernelStats, process::all_processes_with_root};

use crate::recording::{HostCpuUsage, ProcessCpu};

/// One reading of the host's and every process's CPU time.
#[derive(Debug, Clone)]
pub struct CpuSnapshot {
    at: Instant,
    stat: StatTicks,
    /// pid → (start time in ticks since boot, utime + stime).
    processes: HashMap<u32, (u64, u64)>,
}

/// The `/proc/stat` `cpu` line, ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct StatTicks {
    busy: u64,
    idle: u64,
    iowait: u64,
    steal: u64,
}

impl StatTicks {
    fn total(&self) -> u64 {
        self.busy + self.idle + self.iowait + self.steal
    }
}

/// One process at the end of the interval.
struct ProcessRow {
    pid: u32,
    start: u64,
    ticks: u64,
    comm: String,
    threads: u64,
    nice: i64,
}

impl CpuSnapshot {
    /// Reads this host's CPU time now; `None` when /proc/stat is unreadable.
    pub fn take() -> Option<CpuSnapshot> {
        CpuSnapshot::take_in(Path::new("/"))
    }

    /// Reads ROOT/proc.
    pub fn take_in(root: &Path) -> Option<CpuSnapshot> {
        let at = Instant::now();
        let stat = stat_ticks(root)?;
        let processes = process_rows(root)
            .into_iter()
            .map(|p| (p.pid, (p.start, p.ticks)))
            .collect();
        Some(CpuSnapshot {
            at,
            stat,
            processes,
        })
    }

    /// The CPU use from this reading to now; `target` (a pid) is kept among
    /// the processes even when it is not one of the busiest.
    pub fn usage_since(&self, target: Option<u32>) -> Option<HostCpuUsage> {
        self.usage_until_in(Path::new("/"), Instant::now(), target)
    }

    /// The CPU use from this reading to a reading of ROOT/proc taken at `now`.
    pub fn usage_until_in(
        &self,
        root: &Path,
        now: Instant,
        target: Option<u32>,
    ) -> Option<HostCpuUsage> {
        let end = stat_ticks(root)?;
        let d = |a: u64, b: u64| b.saturating_sub(a);
        let mut rows: Vec<ProcessRow> = process_rows(root);
        for row in &mut rows {
            let before = match self.processes.get(&row.pid) {
                Some((start, ticks)) if *start == row.start => *ticks,
                _ => 0,
            };
            row.ticks = row.ticks.saturating_sub(before);
        }
        let process_ticks = rows.iter().map(|r| r.ticks).sum();
        rows.sort_by(|a, b| b.ticks.cmp(&a.ticks).then(a.pid.cmp(&b.pid)));
        // The busiest, and the target wherever it ranks.
        let mut rank = 0;
        rows.retain(|r| {
            rank += 1;
            rank <= HostCpuUsage::TOP || Some(r.pid) == target
        });
        let busy_ticks = d(self.stat.busy, end.busy);
        let idle_ticks = d(self.stat.idle, end.idle);
        let iowait_ticks = d(self.stat.iowait, end.iowait);
        let steal_ticks = d(self.stat.steal, end.steal);
        Some(HostCpuUsage {
            interval_ms: u64::try_from(now.saturating_duration_since(self.at).as_millis())
                .unwrap_or(u64::MAX),
            ticks_per_s: procfs::ticks_per_second().max(1),
            cpus: super::online_cpus(),
            total_ticks: d(self.stat.total(), end.total()),
            busy_ticks,
            idle_ticks,
            iowait_ticks,
            steal_ticks,
            top: rows
                .into_iter()
                .filter(|r| r.ticks > 0 || Some(r.pid) == target)
                .map(|r| ProcessCpu {
                    pid: r.pid,
                    comm: r.comm,
                    ticks: r.ticks,
                    threads: r.threads,
                    nice: r.nice,
                })
                .collect(),
            process_ticks,
        })
    }
}

fn stat_ticks(root: &Path) -> Option<StatTicks> {
    let path = root.join("proc/stat");
    let file = std::fs::File::open(path).ok()?;
    let stat =
        KernelStats::from_buf_read(std::io::BufReader::new(file), procfs::current_system_info())
            .ok()?;
    let t = stat.total;
    Some(StatTicks {
        busy: t.user + t.nice + t.system + t.irq.unwrap_or(0) + t.softirq.unwrap_or(0),
        idle: t.idle,
        iowait: t.iowait.unwrap_or(0),
        steal: t.steal.unwrap_or(0),
    })
}

/// Every process of ROOT/proc that could be read.
fn process_rows(root: &Path) -> Vec<ProcessRow> {
    let Ok(all) = all_processes_with_root(root.join("proc")) else {
        return Vec::new();
    };
    all.flatten()
        .filter_map(|p| p.stat().ok())
        .filter_map(|s| {
            Some(ProcessRow {
                pid: u32::try_from(s.pid).ok()?,
                start: s.starttime,
                ticks: s.utime.saturating_add(s.stime),
                comm: s.comm,
                threads: u64::try_from(s.num_threads).unwrap_or(0),
                nice: s.nice,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat_line(pid: u32, comm: &str, utime: u64, stime: u64, start: u64) -> String {
        // Fields after "(comm) ": state ppid pgrp session tty tpgid flags
        // minflt cminflt majflt cmajflt utime stime cutime cstime priority
        // nice num_threads itrealvalue starttime vsize rss ...
        format!(
            "{pid} ({comm}) R 1 {pid} {pid} 0 -1 4194560 0 0 0 0 {utime} {stime} 0 0 20 5 3 0 {start} 1000 10 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
        )
    }

    fn write_proc(root: &Path, cpu: &str, procs: &[(u32, &str, u64, u64, u64)]) {
        let proc = root.join("proc");
        let _ = std::fs::remove_dir_all(&proc);
        std::fs::create_dir_all(&proc).unwrap();
        std::fs::write(
            proc.join("stat"),
            format!("{cpu}\ncpu0 0 0 0 0 0 0 0 0 0 0\nintr 0\nctxt 1\nbtime 1\nprocesses 1\nprocs_running 1\nprocs_blocked 0\n"),
        )
        .unwrap();
        for (pid, comm, u, s, start) in procs {
            let dir = proc.join(pid.to_string());
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("stat"), stat_line(*pid, comm, *u, *s, *start)).unwrap();
        }
    }

    #[test]
    fn deltas_of_the_host_and_of_each_process_most_first() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // user nice system idle iowait irq softirq steal
        write_proc(
            root,
            "cpu  100 0 50 1000 10 0 0 5 0 0",
            &[
                (10, "spin", 100, 0, 7),
                (20, "mongod", 50, 10, 8),
                (30, "old", 9, 0, 9),
            ],
        );
        let start = CpuSnapshot::take_in(root).unwrap();
        write_proc(
            root,
            "cpu  270 0 70 1010 12 0 5 8 0 0",
            &[
                (10, "spin", 250, 0, 7),
                (20, "mongod", 60, 20, 8),
                // pid 30 was reused by another process: all of it counts.
                (30, "new", 4, 0, 99),
                (40, "born", 3, 0, 100),
            ],
        );
        let u = start.usage_until_in(root, Instant::now(), None).unwrap();
        assert_eq!(u.busy_ticks, 170 + 20 + 5);
        assert_eq!(u.idle_ticks, 10);
        assert_eq!(u.iowait_ticks, 2);
        assert_eq!(u.steal_ticks, 3);
        assert_eq!(u.total_ticks, 195 + 10 + 2 + 3);
        let top: Vec<(u32, &str, u64)> = u
            .top
            .iter()
            .map(|p| (p.pid, p.comm.as_str(), p.ticks))
            .collect();
        assert_eq!(
            top,
            [
                (10, "spin", 150),
                (20, "mongod", 20),
                (30, "new", 4),
                (40, "born", 3)
            ]
        );
        assert_eq!(u.process_ticks, 177);
        assert_eq!(u.top[0].nice, 5);
        assert_eq!(u.top[0].threads, 3);
    }

    #[test]
    fn this_host_can_be_read() {
        let s = CpuSnapshot::take().expect("/proc/stat");
        let u = s.usage_since(Some(std::process::id())).unwrap();
        assert!(u.ticks_per_s > 0);
        assert!(u.cpus >= 1);
        assert!(u.top.iter().any(|p| p.pid == std::process::id()));
    }
}
