//! The agent check of one kernel: `mdiag agent` started host-wide in the
//! guest with windows of 1 s must serve `/metrics` with its families' state
//! (`mdiag_probe_up`) and count at least [`MIN_WINDOWS`] evaluated windows
//! (`mdiag_windows_total`), then stop on SIGTERM with exit status 0. The
//! guest ([`INIT`]'s `agent`) polls `/metrics` with busybox `wget` and prints
//! what it read as marker lines; this file reads them back ([`AgentLog`])
//! and judges them ([`agent_check`]).
//!
//! Why: the agent is what runs on a host for weeks; that it starts, serves
//! and stops on every supported kernel is known only by running it there.
//! Which families attach is the recordings' check (`verdict.rs`); this one
//! asks only that the agent works with whatever attached.
//!
//! [`INIT`]: super::initramfs::INIT

/// The windows `/metrics` must have counted.
pub(super) const MIN_WINDOWS: f64 = 2.0;

/// What the guest printed of its agent run.
#[derive(Debug, Default)]
pub(super) struct AgentLog {
    /// The guest reached the agent run.
    began: bool,
    /// Seconds it polled /metrics.
    waited: Option<u32>,
    /// The last /metrics read: `mdiag_probe_up` and `mdiag_windows_total`
    /// samples as (value, the sample line cut to 200 characters).
    metrics: Vec<(String, String)>,
    /// The agent's own log (its last lines).
    log: Vec<String>,
    /// Its exit status after SIGTERM, or `hung` when it did not stop.
    exit: Option<String>,
}

impl AgentLog {
    /// Reads one marker line (`words` split from `marker`, which starts
    /// with `MDIAG-VM-AGENT`); false when it is not the agent's.
    pub(super) fn read(&mut self, marker: &str, words: &[&str]) -> bool {
        let rest = |prefix: &str| {
            marker
                .strip_prefix(prefix)
                .map(|r| r.trim_start().to_owned())
                .unwrap_or_default()
        };
        match words {
            ["MDIAG-VM-AGENT-BEGIN", ..] => self.began = true,
            ["MDIAG-VM-AGENT-WAITED", secs, ..] => self.waited = secs.parse().ok(),
            ["MDIAG-VM-AGENT-METRIC", value, ..] => {
                let line = rest("MDIAG-VM-AGENT-METRIC");
                let line = line.strip_prefix(value).unwrap_or(&line).trim().to_owned();
                self.metrics.push(((*value).to_owned(), line));
            }
            ["MDIAG-VM-AGENT-LOG", ..] => self.log.push(rest("MDIAG-VM-AGENT-LOG")),
            ["MDIAG-VM-AGENT-EXIT", rc, ..] => self.exit = Some((*rc).to_owned()),
            _ => return false,
        }
        true
    }
}

/// The verdict on the agent run.
#[derive(Debug, PartialEq)]
pub(super) struct AgentCheck {
    windows: Option<f64>,
    waited: Option<u32>,
    /// Families whose `mdiag_probe_up` is 1, and 0.
    up: Vec<String>,
    down: Vec<String>,
    exit: Option<String>,
    /// Why the agent fails the kernel; empty when it passes.
    problems: Vec<String>,
}

/// The `family` label of a `mdiag_probe_up` sample.
fn family(line: &str) -> Option<String> {
    let (_, rest) = line.split_once("family=\"")?;
    Some(rest.split_once('"')?.0.to_owned())
}

pub(super) fn agent_check(log: &AgentLog) -> AgentCheck {
    let mut check = AgentCheck {
        windows: None,
        waited: log.waited,
        up: Vec::new(),
        down: Vec::new(),
        exit: log.exit.clone(),
        problems: Vec::new(),
    };
    if !log.began {
        check
            .problems
            .push("not reached (the VM stopped or hung before)".into());
        return check;
    }
    let mut probe_up = 0;
    for (value, line) in &log.metrics {
        if line.starts_with("mdiag_windows_total") {
            check.windows = value.parse().ok();
        } else if line.starts_with("mdiag_probe_up") {
            probe_up += 1;
            let Some(f) = family(line) else { continue };
            if value.parse::<f64>() == Ok(1.0) {
                check.up.push(f);
            } else {
                check.down.push(f);
            }
        }
    }
    let waited = log
        .waited
        .map_or(String::new(), |s| format!(" after {s} s"));
    if log.metrics.is_empty() {
        check
            .problems
            .push(format!("/metrics was never read{waited}"));
    } else {
        if probe_up == 0 {
            check.problems.push("/metrics has no mdiag_probe_up".into());
        } else if check.up.is_empty() {
            check
                .problems
                .push("no probe family is up on /metrics".into());
        }
        match check.windows {
            Some(w) if w >= MIN_WINDOWS => {}
            Some(w) => check.problems.push(format!(
                "/metrics counted {w} windows{waited}, not {MIN_WINDOWS}"
            )),
            None => check
                .problems
                .push("/metrics has no mdiag_windows_total".into()),
        }
    }
    match log.exit.as_deref() {
        Some("0") => {}
        Some("hung") => check
            .problems
            .push("it did not stop within 30 s of SIGTERM".into()),
        Some(rc) => check
            .problems
            .push(format!("it exited with {rc} after SIGTERM")),
        None => check
            .problems
            .push("its end was not seen (the VM stopped or hung)".into()),
    }
    if !check.problems.is_empty()
        && let Some(last) = log.log.iter().rev().find(|l| !l.trim().is_empty())
    {
        check
            .problems
            .push(format!("its log ends: {}", last.trim()));
    }
    check
}

impl AgentCheck {
    pub(super) fn failure(&self) -> Option<String> {
        (!self.problems.is_empty()).then(|| format!("agent: {}", self.problems.join("; ")))
    }

    pub(super) fn line(&self) -> String {
        let list = |v: &[String]| {
            if v.is_empty() {
                "none".to_owned()
            } else {
                v.join(", ")
            }
        };
        let mut line = format!(
            "agent check: host-wide, 1 s windows: {} windows on /metrics{}, families up: {}, down: {}; exit after SIGTERM {}",
            self.windows.map_or("no".to_owned(), |w| w.to_string()),
            self.waited
                .map_or(String::new(), |s| format!(" after {s} s")),
            list(&self.up),
            list(&self.down),
            self.exit.as_deref().unwrap_or("unknown"),
        );
        match self.failure() {
            None => line.push_str(" (ok)"),
            Some(f) => line.push_str(&format!(" (FAIL: {f})")),
        }
        line
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vm::{console::parse_log, fixtures::AGENT_OK};

    #[test]
    fn a_working_agent_passes() {
        let guest = parse_log(&format!(
            "MDIAG-VM-BEGIN 6.12.1\r\n{AGENT_OK}MDIAG-VM-END\r\n"
        ));
        let check = agent_check(&guest.agent);
        assert_eq!(check.failure(), None, "{check:?}");
        assert_eq!(check.windows, Some(3.0));
        assert_eq!(check.up, ["sched", "perf"]);
        assert_eq!(check.down, ["alloc"]);
        assert_eq!(
            check.line(),
            "agent check: host-wide, 1 s windows: 3 windows on /metrics after 6 s, families up: sched, perf, down: alloc; exit after SIGTERM 0 (ok)"
        );
    }

    #[test]
    fn a_failing_agent_says_why() {
        // Never reached.
        let c = agent_check(&parse_log("MDIAG-VM-BEGIN 6.1\n").agent);
        assert_eq!(
            c.failure().as_deref(),
            Some("agent: not reached (the VM stopped or hung before)")
        );
        // Served, but counted one window and hung on SIGTERM.
        let log = "MDIAG-VM-AGENT-BEGIN\n\
                   MDIAG-VM-AGENT-WAITED 90\n\
                   MDIAG-VM-AGENT-METRIC 1.0 mdiag_windows_total{} 1.0\n\
                   MDIAG-VM-AGENT-METRIC 1.0 mdiag_probe_up{target=\"host\",family=\"sched\",reason=\"attached\"} 1.0\n\
                   MDIAG-VM-AGENT-LOG mdiag agent: stopping (SIGTERM): detaching probes\n\
                   MDIAG-VM-AGENT-EXIT hung\n";
        let c = agent_check(&parse_log(log).agent);
        assert_eq!(
            c.failure().as_deref(),
            Some(
                "agent: /metrics counted 1 windows after 90 s, not 2; it did not stop within 30 s of SIGTERM; \
                 its log ends: mdiag agent: stopping (SIGTERM): detaching probes"
            )
        );
        // Died at start: nothing served, its error in the log.
        let log = "MDIAG-VM-AGENT-BEGIN\n\
                   MDIAG-VM-AGENT-WAITED 1\n\
                   MDIAG-VM-AGENT-LOG Error: cannot listen on 127.0.0.1:9219: Cannot assign requested address\n\
                   MDIAG-VM-AGENT-EXIT 2\n";
        let c = agent_check(&parse_log(log).agent);
        assert_eq!(
            c.failure().as_deref(),
            Some(
                "agent: /metrics was never read after 1 s; it exited with 2 after SIGTERM; \
                 its log ends: Error: cannot listen on 127.0.0.1:9219: Cannot assign requested address"
            )
        );
        // Served without families, and its exit never seen.
        let log = "MDIAG-VM-AGENT-BEGIN\nMDIAG-VM-AGENT-METRIC 4.0 mdiag_windows_total{} 4.0\n";
        let c = agent_check(&parse_log(log).agent);
        assert_eq!(
            c.failure().as_deref(),
            Some(
                "agent: /metrics has no mdiag_probe_up; its end was not seen (the VM stopped or hung)"
            )
        );
    }
}
