//! Which process to observe: `--pid`, `--process NAME`, a spawned command, the
//! one running `mongod` by default, or none (host-wide).

use std::path::Path;

pub use crate::kit::probe::process_cpu::cpu_ns;
use crate::recording::Target;

/// Process name looked for when no target is given.
pub const DEFAULT_PROCESS: &str = "mongod";

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("no process with pid {0}: check the pid (ps -e) and try again")]
    NoSuchPid(u32),
    #[error("no running process named {0:?}: start it first, or give --pid")]
    NoSuchName(String),
    #[error("several processes are named {name:?} (pids {pids}): choose one with --pid")]
    Ambiguous { name: String, pids: String },
    #[error("cannot list processes in /proc: {0}")]
    Proc(String),
}

/// Describes a running process.
pub fn describe(pid: u32, how: &str) -> Result<Target, TargetError> {
    let dir = format!("/proc/{pid}");
    if !Path::new(&dir).exists() {
        return Err(TargetError::NoSuchPid(pid));
    }
    let comm =
        std::fs::read_to_string(format!("{dir}/comm")).map_err(|_| TargetError::NoSuchPid(pid))?;
    let exe = std::fs::read_link(format!("{dir}/exe"))
        .ok()
        .map(|p| p.to_string_lossy().into_owned());
    let cmdline = std::fs::read(format!("{dir}/cmdline"))
        .map(|raw| {
            raw.split(|&b| b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default();
    Ok(Target {
        pid,
        comm: comm.trim_end().to_owned(),
        exe,
        cmdline,
        how: how.to_owned(),
        exit_code: None,
    })
}

/// Pids of processes whose `comm` (or executable's file name) is `name`.
pub fn pids_named(name: &str) -> Result<Vec<u32>, TargetError> {
    let me = std::process::id();
    let all = procfs::process::all_processes().map_err(|e| TargetError::Proc(e.to_string()))?;
    let mut pids: Vec<u32> = all
        .flatten()
        .filter_map(|p| {
            let pid = u32::try_from(p.pid).ok()?;
            if pid == me {
                return None;
            }
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            let exe_name = p
                .exe()
                .ok()
                .and_then(|e| e.file_name().map(|f| f.to_string_lossy().into_owned()));
            // comm is cut to 15 bytes; compare the exe's name too for long names.
            (comm.trim_end() == name || exe_name.as_deref() == Some(name)).then_some(pid)
        })
        .collect();
    pids.sort_unstable();
    Ok(pids)
}

/// The one process named `name`, or an error naming what was found.
pub fn by_name(name: &str) -> Result<Target, TargetError> {
    match pids_named(name)?.as_slice() {
        [] => Err(TargetError::NoSuchName(name.to_owned())),
        [pid] => describe(*pid, "process"),
        many => Err(TargetError::Ambiguous {
            name: name.to_owned(),
            pids: many
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// Default target: the single running mongod, `None` when there is none.
pub fn default_target() -> Result<Option<Target>, TargetError> {
    match by_name(DEFAULT_PROCESS) {
        Ok(t) => Ok(Some(t)),
        Err(TargetError::NoSuchName(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether process `pid` exists (one `stat` of /proc/PID, where
/// [`ctxt_switches`] reads the status of every thread).
pub fn exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Sum of (voluntary, nonvoluntary) context switches over the process's
/// live threads, from /proc/PID/task/*/status.
pub fn ctxt_switches(pid: u32) -> Option<(u64, u64)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let (mut vol, mut invol) = (0, 0);
    for task in tasks.flatten() {
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue;
        };
        for line in status.lines() {
            if let Some(v) = line.strip_prefix("voluntary_ctxt_switches:") {
                vol += v.trim().parse::<u64>().unwrap_or(0);
            } else if let Some(v) = line.strip_prefix("nonvoluntary_ctxt_switches:") {
                invol += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
    }
    Some((vol, invol))
}

/// The host's busy CPU time so far, ns: every CPU's time in `/proc/stat`
/// except idle and I/O wait (what the target's CPU time is when the agent
/// watches the host).
pub fn busy_cpu_ns() -> Option<u64> {
    let stat = <procfs::KernelStats as procfs::CurrentSI>::current().ok()?;
    let t = stat.total;
    let ticks = t.user + t.nice + t.system + t.irq.unwrap_or(0) + t.softirq.unwrap_or(0);
    let hz = procfs::ticks_per_second().max(1);
    Some(ticks.saturating_mul(1_000_000_000) / hz)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_self_and_rejects_missing() {
        let me = describe(std::process::id(), "pid").unwrap();
        assert_eq!(me.pid, std::process::id());
        assert!(exists(me.pid));
        assert!(!exists(u32::MAX - 1));
        assert!(!me.comm.is_empty());
        assert!(me.exe.is_some());
        assert!(!me.cmdline.is_empty());
        // pid_max is at most 2^22; this one cannot exist.
        assert!(matches!(
            describe(u32::MAX - 1, "pid"),
            Err(TargetError::NoSuchPid(_))
        ));
    }

    #[test]
    fn finds_processes_by_name() {
        if crate::emulation::skip_under_emulation(
            "finds_processes_by_name",
            "processes started under qemu-user are named after the emulator in /proc",
        ) {
            return;
        }
        let child = crate::test_child::Running::cat(&[]);
        let pids = pids_named("cat").unwrap();
        assert!(pids.contains(&child.pid()), "{pids:?}");
        assert!(matches!(
            by_name("no-such-process-xyz"),
            Err(TargetError::NoSuchName(_))
        ));
        let (vol, _invol) = ctxt_switches(std::process::id()).unwrap();
        assert!(vol > 0);
        child.stop();
    }
}
