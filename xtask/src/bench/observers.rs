//! The observers the real-server benches compare, started on one target
//! (the bench's mongod, or `mdiag-pingpong` for the worst case) and stopped
//! after its run:
//! - `mdiag record` with its defaults, `--pid` of the target (and `--uri`
//!   of the mongod, which it then polls);
//! - `mdiag agent` with its defaults but for its window (shorter, see
//!   `agent.rs`), its target's process name, a private state directory and
//!   port, and the mongod's URI;
//! - bpftrace's pair, host-wide as bpftrace users run it: a run-queue
//!   latency histogram (the program of bpftrace's `tools/runqlat.bt`) and
//!   syscall counts per process (the one-liner on `raw_syscalls:sys_enter`).
//!   bpftrace reads tracepoint formats from tracefs: [`Tracefs`] mounts it
//!   when it is not mounted and unmounts it again at the end.
use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use super::{agent::Agent, common::signal};

/// One way of observing a target.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Mode {
    Unobserved,
    Record,
    Agent,
    Bpftrace,
}

impl Mode {
    pub(super) fn name(self) -> &'static str {
        match self {
            Mode::Unobserved => "unobserved",
            Mode::Record => "mdiag record",
            Mode::Agent => "mdiag agent",
            Mode::Bpftrace => "bpftrace pair",
        }
    }
}

/// The target an observer is started on.
pub(super) struct Target<'a> {
    pub(super) pid: u32,
    /// Its process name, for the agent's `processes`.
    pub(super) comm: &'a str,
    /// The mongod's URI, if it is one.
    pub(super) uri: Option<&'a str>,
}

/// What observers need: the programs, a private directory, the agent's window.
pub(super) struct Setting<'a> {
    pub(super) mdiag: &'a Path,
    pub(super) bpftrace: Option<&'a Path>,
    pub(super) dir: &'a Path,
    pub(super) window_secs: u64,
}

/// A running observer.
pub(super) enum Running {
    None,
    Record(Child, std::thread::JoinHandle<String>),
    Agent(Agent),
    Bpftrace(Child),
}

/// How long an observer may take to attach.
const ATTACH_TIMEOUT: Duration = Duration::from_secs(60);

/// The bpftrace pair: runqlat.bt's program, and syscalls counted per process.
const BPFTRACE_PAIR: &str = r#"
tracepoint:sched:sched_wakeup,
tracepoint:sched:sched_wakeup_new
{
	@qtime[args->pid] = nsecs;
}

tracepoint:sched:sched_switch
{
	if (args->prev_state == 0) {
		@qtime[args->prev_pid] = nsecs;
	}
	$ns = @qtime[args->next_pid];
	if ($ns) {
		@usecs = hist((nsecs - $ns) / 1000);
	}
	delete(@qtime[args->next_pid]);
}

tracepoint:raw_syscalls:sys_enter
{
	@syscalls[pid, comm] = count();
}
"#;
/// Its probes: the tracepoints above, one perf event each once attached.
const BPFTRACE_PROBES: usize = 4;

impl Running {
    /// Starts `mode` on `target`; returns once its probes are attached.
    pub(super) fn start(mode: Mode, s: &Setting, target: &Target) -> Result<Self> {
        match mode {
            Mode::Unobserved => Ok(Running::None),
            Mode::Record => start_record(s, target),
            Mode::Agent => Ok(Running::Agent(Agent::start(
                s.mdiag,
                s.dir,
                target.comm,
                target.pid,
                s.window_secs,
                target.uri,
            )?)),
            Mode::Bpftrace => {
                let bpftrace = s
                    .bpftrace
                    .context("bpftrace is not installed (`./x setup` installs it)")?;
                start_bpftrace(bpftrace)
            }
        }
    }

    /// The observer's process, to read its CPU, memory and programs.
    pub(super) fn pid(&self) -> Option<u32> {
        match self {
            Running::None => None,
            Running::Record(c, _) | Running::Bpftrace(c) => Some(c.id()),
            Running::Agent(a) => a.pid(),
        }
    }

    /// Stops it (SIGINT for record and bpftrace, SIGTERM for the agent, as
    /// their users do) and fails when it did not end well.
    pub(super) fn stop(self) -> Result<()> {
        match self {
            Running::None => Ok(()),
            Running::Agent(a) => a.stop().map(drop),
            Running::Record(c, log) => {
                signal(&c, libc::SIGINT);
                let out = c.wait_with_output()?;
                let log = log.join().unwrap_or_default();
                if !out.status.success() {
                    bail!("mdiag record ended with {}: {log}", out.status);
                }
                Ok(())
            }
            Running::Bpftrace(c) => {
                signal(&c, libc::SIGINT);
                let out = c.wait_with_output()?;
                if !out.status.success() {
                    bail!(
                        "bpftrace ended with {}: {}",
                        out.status,
                        String::from_utf8_lossy(&out.stderr).trim()
                    );
                }
                Ok(())
            }
        }
    }
}

fn start_record(s: &Setting, target: &Target) -> Result<Running> {
    let mut cmd = Command::new(s.mdiag);
    cmd.args(["record", "--no-progress", "--duration", "1h", "--pid"])
        .arg(target.pid.to_string())
        .arg("-o")
        .arg(s.dir.join("bench.mdiag"));
    if let Some(uri) = target.uri {
        cmd.args(["--uri", uri]);
    }
    let (child, rest) = super::common::start_record_attached(cmd.env("NO_COLOR", "1"))?;
    Ok(Running::Record(child, rest))
}

fn start_bpftrace(bpftrace: &Path) -> Result<Running> {
    let mut child = Command::new(bpftrace)
        .arg("-e")
        .arg(BPFTRACE_PAIR)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("start bpftrace")?;
    // Attached once it holds a perf event per probe besides its output
    // buffer's, one per online CPU (bpftrace 0.17, as set-up installs).
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as usize;
    let deadline = Instant::now() + ATTACH_TIMEOUT;
    loop {
        if attachments(child.id()) >= BPFTRACE_PROBES + cpus {
            return Ok(Running::Bpftrace(child));
        }
        if child.try_wait()?.is_some() || Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output()?;
            bail!(
                "bpftrace did not attach its {BPFTRACE_PROBES} probes (perf events beside one output buffer per CPU) within {ATTACH_TIMEOUT:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Perf events and BPF links a process holds (tracepoints are attached
/// through them, and its output buffers are perf events).
fn attachments(pid: u32) -> usize {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    fds.flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter(|l| {
            let l = l.to_string_lossy();
            l == "anon_inode:[perf_event]" || l == "anon_inode:bpf_link"
        })
        .count()
}

/// tracefs at /sys/kernel/tracing for bpftrace: mounted here when it was
/// not, unmounted again on drop (the host left as found).
pub(super) struct Tracefs {
    mounted_here: bool,
}

const TRACEFS: &str = "/sys/kernel/tracing";

impl Tracefs {
    pub(super) fn ensure() -> Result<Self> {
        if tracefs_mounted() {
            return Ok(Tracefs {
                mounted_here: false,
            });
        }
        let status = Command::new("mount")
            .args(["-t", "tracefs", "nodev", TRACEFS])
            .status()
            .context("running mount")?;
        if !status.success() {
            bail!("`mount -t tracefs nodev {TRACEFS}` failed ({status}); bpftrace needs tracefs");
        }
        Ok(Tracefs { mounted_here: true })
    }

    pub(super) fn note(&self) -> &'static str {
        if self.mounted_here {
            "tracefs mounted at /sys/kernel/tracing for bpftrace, unmounted at the end"
        } else {
            "tracefs was already mounted"
        }
    }
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        if self.mounted_here {
            let _ = Command::new("umount").arg(TRACEFS).status();
        }
    }
}

fn tracefs_mounted() -> bool {
    std::fs::read_to_string("/proc/mounts").is_ok_and(|m| {
        m.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(1) == Some(&TRACEFS) && f.get(2) == Some(&"tracefs")
        })
    })
}

/// The bpftrace on PATH, if any.
pub(super) fn find_bpftrace() -> Option<PathBuf> {
    crate::cmd::find_in_path("bpftrace")
}
