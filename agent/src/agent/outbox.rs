//! What the agent hands to the fleet store: each finding's change as a
//! [`FindingEvent`], each target's window as a [`WindowDoc`] (the facts the
//! rules read and the rules that held), and the host as a [`HostDoc`].
//! Collected during a loop turn and appended to the spool together, so one
//! fsync covers a window's documents.

use bson::DateTime;

use super::findings::{Change, state_name};
use crate::fleet::schema::{FindingEvent, HostDoc, HostFacts, WindowDoc, WindowMeta};
use crate::fleet::sender::{Fleet, FleetStats};
use crate::fleet::spool::Record;
use crate::recording::mongod::MongodInfo;
use crate::report::Report;

/// The agent's fleet writer.
pub struct Outbox {
    fleet: Fleet,
    /// When this agent started: its host's `first_seen`.
    started: DateTime,
    pending: Vec<Record>,
}

fn date(t: chrono::DateTime<chrono::Utc>) -> DateTime {
    DateTime::from_millis(t.timestamp_millis())
}

/// What the host is, with the facts of mongod when it was polled.
pub fn host_facts(info: Option<&MongodInfo>) -> HostFacts {
    let (arch, kernel) = crate::host::machine_and_release();
    HostFacts {
        arch,
        kernel,
        mongod_version: info.and_then(|i| i.version.clone()),
        rs_nm: info.and_then(|i| i.replica_set.clone()),
        cl_role: info.and_then(|i| i.cluster_role.clone()),
        agent_version: env!("CARGO_PKG_VERSION").to_owned(),
    }
}

/// A change of a finding's state, as stored.
pub fn finding_event(host: &str, c: &Change, facts: HostFacts) -> FindingEvent {
    FindingEvent {
        host: host.to_owned(),
        rule: c.rule.clone(),
        target: c.target.clone(),
        title: c.title.clone(),
        from: state_name(c.transition.from).to_owned(),
        to: state_name(c.transition.to).to_owned(),
        at: date(c.at),
        episode_start: date(c.episode_start),
        facts,
    }
}

/// One window of `target`: the report's facts and the rules that held.
pub fn window_doc(
    host: &str,
    target: &str,
    report: &Report,
    seconds: f64,
    at: chrono::DateTime<chrono::Utc>,
) -> Result<WindowDoc, bson::error::Error> {
    Ok(WindowDoc {
        at: date(at),
        meta: WindowMeta {
            host: host.to_owned(),
            target: target.to_owned(),
        },
        seconds,
        facts: bson::serialize_to_document(&report.facts)?,
        held: report.fired().map(|f| f.rule_id.clone()).collect(),
    })
}

impl Outbox {
    pub fn new(fleet: Fleet) -> Self {
        Self {
            fleet,
            started: date(chrono::Utc::now()),
            pending: Vec::new(),
        }
    }

    /// The `[fleet]` settings the writer runs with.
    pub fn config(&self) -> &crate::fleet::config::FleetConfig {
        &self.fleet.config
    }

    fn host(&self) -> &str {
        &self.fleet.config.host
    }

    /// A finding's change.
    pub fn change(&mut self, c: &Change, facts: HostFacts) {
        let e = finding_event(self.host(), c, facts);
        self.pending.push(Record::Finding(e));
    }

    /// A target's window (when `[fleet] windows` is on); a window whose
    /// facts do not encode is left out, and said.
    pub fn window(
        &mut self,
        target: &str,
        report: &Report,
        seconds: f64,
        at: chrono::DateTime<chrono::Utc>,
    ) -> Option<String> {
        if !self.fleet.config.windows {
            return None;
        }
        match window_doc(self.host(), target, report, seconds, at) {
            Ok(w) => {
                self.pending.push(Record::Window(w));
                None
            }
            Err(e) => Some(format!(
                "window of {target} not sent to the fleet store: {e}"
            )),
        }
    }

    /// The host, seen now with these targets.
    pub fn host_seen(&mut self, facts: HostFacts, targets: Vec<String>) {
        let now = date(chrono::Utc::now());
        let h = HostDoc {
            host: self.host().to_owned(),
            facts,
            targets,
            first_seen: self.started,
            last_seen: now,
        };
        self.pending.push(Record::Host(h));
    }

    /// Appends what was collected to the spool (one fsync); the error in
    /// words when the spool cannot take it.
    pub fn flush(&mut self) -> Option<String> {
        if self.pending.is_empty() {
            return None;
        }
        let records = std::mem::take(&mut self.pending);
        self.fleet
            .submit(&records)
            .err()
            .map(|e| format!("{} documents not spooled: {e}", records.len()))
    }

    pub fn stats(&self) -> FleetStats {
        self.fleet.stats()
    }
}
