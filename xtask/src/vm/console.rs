//! The guest's run: QEMU booting a kernel with the initramfs, its serial
//! console into a log file, and that log read back into what the guest did
//! (its release, each recording's exit status, `ctxt` lines, report JSON and,
//! for the mongod run, the recording itself in base64; the mongod and agent
//! runs' lines; whether the init script reached its end).
//!
//! Why a parser of markers: the console is the only way out of the guest
//! (no network, no disk), and it also carries firmware escapes and kernel
//! messages, which may land between any two lines the guest prints.
use std::{
    fs::File,
    path::Path,
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};

use super::{agent::AgentLog, guest::Guest, mongod::MongodLog};
use crate::{cmd::Cmd, say};

/// What one boot gets: its memory and how long it may take.
pub(super) struct Boot {
    pub(super) memory_mb: u32,
    pub(super) timeout: Duration,
}

/// Runs QEMU for `guest` until the guest powers off (or `boot.timeout`),
/// its console into `log`.
pub(super) fn boot(
    guest: &Guest,
    boot: &Boot,
    vmlinuz: &Path,
    initrd: &Path,
    log: &Path,
) -> Result<()> {
    let file = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut cmd = Cmd::new(guest.qemu);
    let memory = boot.memory_mb.to_string();
    cmd.args(guest.machine)
        .args(["-accel", guest.accel, "-m", &memory, "-smp", "2"])
        .args(["-nographic", "-no-reboot", "-nic", "none"])
        .arg("-kernel")
        .arg(vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        .arg("-append")
        .arg(guest.append());
    let mut child = cmd.spawn_logged(file)?;
    let deadline = Instant::now() + boot.timeout;
    loop {
        if child
            .try_wait()
            .with_context(|| format!("waiting for `{cmd}`"))?
            .is_some()
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            say!(
                "vm-matrix: QEMU still runs after {} s; stopping it",
                boot.timeout.as_secs()
            );
            child.kill().with_context(|| format!("stopping `{cmd}`"))?;
            child
                .wait()
                .with_context(|| format!("waiting for `{cmd}`"))?;
            return Ok(());
        }
        thread::sleep(Duration::from_millis(200));
    }
}

/// What the guest printed.
#[derive(Debug, Default)]
pub(super) struct GuestLog {
    /// `uname -r` of the guest.
    pub(super) release: Option<String>,
    /// Its uptime when the init script started: how long the kernel took
    /// to boot.
    pub(super) booted: Option<f64>,
    /// The init script reached its end.
    pub(super) finished: bool,
    runs: Vec<RunLog>,
    /// The mongod run (its recording is the run `mongod`).
    pub(super) mongod: MongodLog,
    /// The agent run, after the recordings.
    pub(super) agent: AgentLog,
}

#[derive(Debug, Default)]
pub(super) struct RunLog {
    name: String,
    /// (`ctxt`, uptime in seconds) when the probes were attached, and as
    /// long after as the recording lasts.
    pub(super) ctxt_start: Option<(u64, f64)>,
    pub(super) ctxt_end: Option<(u64, f64)>,
    pub(super) record_exit: Option<i32>,
    /// Lines of mdiag's own log, printed when something failed.
    pub(super) log: Vec<String>,
    /// The report JSON, when explain ran to its end.
    pub(super) json: Option<String>,
    pub(super) explain_exit: Option<i32>,
    /// The recording file in base64 (the mongod run prints it).
    pub(super) file: Option<String>,
}

/// A block of lines between two markers: a report's JSON or a file in base64.
enum Block {
    Json,
    File,
}

impl GuestLog {
    fn run_mut(&mut self, name: &str) -> &mut RunLog {
        let pos = match self.runs.iter().position(|r| r.name == name) {
            Some(pos) => pos,
            None => {
                self.runs.push(RunLog {
                    name: name.to_owned(),
                    ..RunLog::default()
                });
                self.runs.len() - 1
            }
        };
        &mut self.runs[pos]
    }

    pub(super) fn run(&self, name: &str) -> Option<&RunLog> {
        self.runs.iter().find(|r| r.name == name)
    }
}

/// A kernel message on the console ("[   12.345678] ..."), which may come
/// between any two lines the guest prints.
fn is_kernel_message(line: &str) -> bool {
    line.trim_start()
        .strip_prefix('[')
        .and_then(|r| r.split_once(']'))
        .is_some_and(|(t, _)| {
            let t = t.trim();
            !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.')
        })
}

/// Reads the marker lines of [`INIT`] from a serial console log (which also
/// holds firmware escape sequences and kernel messages).
///
/// [`INIT`]: super::initramfs::INIT
pub(super) fn parse_log(text: &str) -> GuestLog {
    let mut guest = GuestLog::default();
    // The block being read: its kind, its run, its text so far.
    let mut block: Option<(Block, String, String)> = None;
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        let marker = line.find("MDIAG-VM-").map(|pos| &line[pos..]);
        let words: Vec<&str> = marker
            .map(|m| m.split_whitespace().collect())
            .unwrap_or_default();
        if let Some((kind, run, buf)) = block.as_mut() {
            match (&*kind, words.first().copied()) {
                (Block::Json, Some("MDIAG-VM-JSON-END")) => {
                    let r = guest.run_mut(run);
                    r.json = Some(std::mem::take(buf));
                    r.explain_exit = words.get(2).and_then(|w| w.parse().ok());
                    block = None;
                }
                (Block::File, Some("MDIAG-VM-FILE-END")) => {
                    guest.run_mut(run).file = Some(std::mem::take(buf));
                    block = None;
                }
                (_, Some("MDIAG-VM-END")) => {
                    guest.finished = true;
                    block = None;
                }
                _ if is_kernel_message(line) => {}
                _ => {
                    buf.push_str(line);
                    buf.push('\n');
                }
            }
            continue;
        }
        if let Some(marker) = marker
            && marker.starts_with("MDIAG-VM-AGENT")
            && guest.agent.read(marker, &words)
        {
            continue;
        }
        if let Some(marker) = marker
            && marker.starts_with("MDIAG-VM-MONGOD")
            && guest.mongod.read(marker, &words)
        {
            continue;
        }
        match words.as_slice() {
            ["MDIAG-VM-BEGIN", release, rest @ ..] => {
                guest.release = Some((*release).to_owned());
                guest.booted = rest.first().and_then(|u| u.parse().ok());
            }
            ["MDIAG-VM-CTXT", run, when, ctxt, uptime, ..] => {
                let (Ok(ctxt), Ok(uptime)) = (ctxt.parse(), uptime.parse()) else {
                    continue;
                };
                let r = guest.run_mut(run);
                match *when {
                    "start" => r.ctxt_start = Some((ctxt, uptime)),
                    "end" => r.ctxt_end = Some((ctxt, uptime)),
                    _ => {}
                }
            }
            ["MDIAG-VM-RECORD", run, rc, ..] => guest.run_mut(run).record_exit = rc.parse().ok(),
            ["MDIAG-VM-LOG", run, ..] => {
                let prefix = format!("MDIAG-VM-LOG {run} ");
                let text = marker
                    .and_then(|m| m.strip_prefix(&prefix))
                    .unwrap_or_default()
                    .to_owned();
                guest.run_mut(run).log.push(text);
            }
            ["MDIAG-VM-JSON-BEGIN", run, ..] => {
                block = Some((Block::Json, (*run).to_owned(), String::new()));
            }
            ["MDIAG-VM-FILE-BEGIN", run, ..] => {
                block = Some((Block::File, (*run).to_owned(), String::new()));
            }
            ["MDIAG-VM-END", ..] => guest.finished = true,
            _ => {}
        }
    }
    guest
}

/// Why a guest may have stopped: the first few kernel lines that say
/// something went wrong (a lockup, a stall, a panic, an oops), else the
/// console's last lines.
pub(super) fn console_trouble(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.trim().is_empty())
        .collect();
    let signs = [
        "BUG:",
        "Kernel panic",
        "Oops",
        "self-detected stall",
        "Unable to handle kernel",
        // Where the kernel was: x86_64, aarch64, s390x.
        "RIP:",
        "pc :",
        "Krnl PSW",
        // The bytes at the fault, to tell a patch site from ordinary code.
        "Code:",
    ];
    let mut trouble: Vec<String> = Vec::new();
    for l in &lines {
        if signs.iter().any(|s| l.contains(s)) && !trouble.iter().any(|t| t == l) {
            trouble.push((*l).to_owned());
        }
    }
    if trouble.is_empty() {
        trouble = lines[lines.len().saturating_sub(8)..]
            .iter()
            .map(|l| (*l).to_owned())
            .collect();
    }
    trouble.truncate(8);
    trouble.extend(first_call_trace(&lines));
    trouble
}

/// The first call trace's frames (up to 10, unreliable `?` guesses left out):
/// where the kernel was when it stopped, which the RIP line alone cannot say.
fn first_call_trace(lines: &[&str]) -> Vec<String> {
    let Some(start) = lines.iter().position(|l| l.contains("Call Trace:")) else {
        return Vec::new();
    };
    lines[start + 1..]
        .iter()
        .map(|l| l.split_once("] ").map_or(*l, |(_, rest)| rest).trim())
        .take_while(|f| {
            !f.starts_with("RIP:") && !f.starts_with("---[") && !f.starts_with("Modules")
        })
        .filter(|f| !f.starts_with('?') && !f.starts_with('<'))
        .take(10)
        .map(|f| format!("  at {f}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::vm::{
        fixtures::{console, probes, report},
        status::{Status, statuses},
    };

    #[test]
    fn a_console_log_becomes_runs() {
        let log = console(
            &report(probes(None, false), 200.0),
            &report(probes(None, true), 0.0),
        );
        let guest = parse_log(&log);
        assert!(guest.finished);
        assert_eq!(guest.release.as_deref(), Some("6.1.0-56-cloud-amd64"));
        assert_eq!(guest.booted, Some(4.25));
        let host = guest.run("host-wide").unwrap();
        assert_eq!(host.ctxt_start, Some((1000, 10.5)));
        assert_eq!(host.ctxt_end, Some((1615, 13.58)));
        assert_eq!(host.record_exit, Some(0));
        assert_eq!(host.explain_exit, Some(0));
        let json: Value = serde_json::from_str(host.json.as_deref().unwrap()).unwrap();
        let st = statuses(&json).unwrap();
        assert_eq!(st["sched"], Status::Attached);
        assert!(matches!(
            st["contention"],
            Status::Partly {
                attached: 1,
                programs: 3,
                ..
            }
        ));
        let spawned: Value =
            serde_json::from_str(guest.run("spawned").unwrap().json.as_deref().unwrap()).unwrap();
        assert!(matches!(
            statuses(&spawned).unwrap()["wiredtiger"],
            Status::NotApplicable(_)
        ));
        assert!(!parse_log("MDIAG-VM-BEGIN 6.1\nMDIAG-VM-JSON-BEGIN host-wide\n{").finished);
    }

    #[test]
    fn a_hung_guest_shows_why() {
        let log = "MDIAG-VM-BEGIN 5.10.0-32-cloud-amd64\r\n\
                   [   39.8] rcu: INFO: rcu_sched self-detected stall on CPU\r\n\
                   [   40.5] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [mdiag:274]\r\n\
                   [   68.5] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [mdiag:274]\r\n";
        assert_eq!(
            console_trouble(log),
            [
                "[   39.8] rcu: INFO: rcu_sched self-detected stall on CPU",
                "[   40.5] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [mdiag:274]",
                "[   68.5] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [mdiag:274]",
            ]
        );
        assert_eq!(console_trouble("a\nb\n\nc\n"), ["a", "b", "c"]);
        let oops = "[   31.22] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI\r\n\
                    [   31.22] RIP: 0010:__schedule+0x5b8/0xbf0\r\n\
                    [   31.22] Call Trace:\r\n\
                    [   31.22]  <TASK>\r\n\
                    [   31.22]  ? die+0x36/0x90\r\n\
                    [   31.22]  schedule+0x27/0xf0\r\n\
                    [   31.22]  do_nanosleep+0x6b/0x190\r\n\
                    [   31.22]  </TASK>\r\n\
                    [   31.22] Modules linked in:\r\n";
        assert_eq!(
            console_trouble(oops),
            [
                "[   31.22] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI",
                "[   31.22] RIP: 0010:__schedule+0x5b8/0xbf0",
                "  at schedule+0x27/0xf0",
                "  at do_nanosleep+0x6b/0x190",
            ]
        );
        assert!(!parse_log(log).finished);
    }

    #[test]
    fn kernel_messages_are_recognised() {
        assert!(is_kernel_message("[   23.887611] reboot: Power down"));
        assert!(!is_kernel_message("  [1, 2]"));
        assert!(!is_kernel_message("[]"));
    }
}
