//! Findings of the continuous agent: each window's report turned into one
//! [`Observation`] per (rule, target), fed to that finding's [`Lifecycle`].
//!
//! A finding's identity is (rule, target) on this host, so an episode that
//! lasts hours is one record and one log line per change. Only rules that
//! have held at least once are tracked; a finding back to inactive is
//! forgotten, so the table is bounded by the rules × targets in trouble.
//! What a report says of a rule maps as: in `findings` → held; `passed` →
//! clean, or within the rule's hysteresis band when its `hold` is true; `not_assessed` / `not_applicable` (its evidence is missing) → no
//! data, which makes a pending or firing finding stale, never resolved.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::config::AgentConfig;
use super::lifecycle::{Lifecycle, Observation, State, Transition};
use crate::findings::Severity;
use crate::messages;
use crate::report::Report;

/// (rule id, target id).
pub type FindingKey = (String, String);

/// One tracked finding.
#[derive(Debug, Clone)]
pub struct Tracked {
    pub lifecycle: Lifecycle,
    pub title: String,
    /// What the last window that held said (the report's summary).
    pub summary: String,
    /// When the current episode started (its first window that held).
    pub episode_start: DateTime<Utc>,
    /// When its state last changed.
    pub since: DateTime<Utc>,
}

/// A change of a finding's state, to log and export once.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub rule: String,
    pub target: String,
    pub title: String,
    /// The evidence in one line: the summary of the last window that held.
    pub summary: String,
    pub transition: Transition,
    pub episode_start: DateTime<Utc>,
    pub at: DateTime<Utc>,
}

/// What one window's report says of one rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub rule: String,
    pub title: String,
    /// The finding's summary when it held (empty otherwise).
    pub summary: String,
    pub obs: Observation,
}

/// What a report says of each of its rules.
pub fn observations(report: &Report) -> Vec<Seen> {
    let seen = |rule: &str, title: &str, obs| Seen {
        rule: rule.to_owned(),
        title: title.to_owned(),
        summary: String::new(),
        obs,
    };
    // Checklist items are tracked like findings (and exported apart).
    let held = report
        .findings
        .iter()
        .chain(&report.checklist)
        .map(|f| Seen {
            summary: f.summary.clone(),
            ..seen(&f.rule_id, &f.title, Observation::Above)
        });
    let clean = report.passed.iter().map(|p| {
        let obs = if p.in_band {
            Observation::InBand
        } else {
            Observation::Below
        };
        seen(&p.rule_id, &p.title, obs)
    });
    let missing = report
        .not_assessed
        .iter()
        .chain(&report.not_applicable)
        .map(|n| seen(&n.rule_id, &n.title, Observation::NoData));
    held.chain(clean).chain(missing).collect()
}

/// Every tracked finding of this host.
#[derive(Debug, Default)]
pub struct Findings {
    tracked: BTreeMap<FindingKey, Tracked>,
}

impl Findings {
    /// Takes one window's observations of `target` ([`observations`] of its
    /// report); returns the changes they caused.
    pub fn observe(
        &mut self,
        target: &str,
        seen: &[Seen],
        config: &AgentConfig,
        at: DateTime<Utc>,
    ) -> Vec<Change> {
        let mut changes = Vec::new();
        for Seen {
            rule,
            title,
            summary,
            obs,
        } in seen
        {
            let key = (rule.clone(), target.to_owned());
            if *obs == Observation::Above && !self.tracked.contains_key(&key) {
                self.tracked.insert(
                    key.clone(),
                    Tracked {
                        lifecycle: Lifecycle::new(config.lifecycle_for(rule)),
                        title: title.to_owned(),
                        summary: String::new(),
                        episode_start: at,
                        since: at,
                    },
                );
            }
            if let Some(t) = self.tracked.get_mut(&key).filter(|_| !summary.is_empty()) {
                t.summary.clone_from(summary);
            }
            changes.extend(self.step(&key, *obs, at));
        }
        self.forget_inactive();
        changes
    }

    /// A window in which `target` was not observed (it is gone): every
    /// finding of it has no data.
    pub fn target_missing(&mut self, target: &str, at: DateTime<Utc>) -> Vec<Change> {
        let keys = self.keys_of(target);
        let changes = keys
            .iter()
            .filter_map(|k| self.step(k, Observation::NoData, at))
            .collect();
        self.forget_inactive();
        changes
    }

    fn step(&mut self, key: &FindingKey, obs: Observation, at: DateTime<Utc>) -> Option<Change> {
        let t = self.tracked.get_mut(key)?;
        let transition = t.lifecycle.observe(obs)?;
        if matches!(transition.from, State::Inactive | State::Resolved)
            && transition.to == State::Pending
        {
            t.episode_start = at;
        }
        t.since = at;
        Some(Change {
            rule: key.0.clone(),
            target: key.1.clone(),
            title: t.title.clone(),
            summary: t.summary.clone(),
            transition,
            episode_start: t.episode_start,
            at,
        })
    }

    fn forget_inactive(&mut self) {
        self.tracked
            .retain(|_, t| t.lifecycle.state() != State::Inactive);
    }

    /// `from` is known as `to` from now on (it started listening): its
    /// findings go on under the new name, in the same episodes.
    pub fn rename_target(&mut self, from: &str, to: &str) {
        for key in self.keys_of(from) {
            if let Some(t) = self.tracked.remove(&key) {
                self.tracked.entry((key.0, to.to_owned())).or_insert(t);
            }
        }
    }

    fn keys_of(&self, target: &str) -> Vec<FindingKey> {
        self.tracked
            .keys()
            .filter(|(_, t)| t == target)
            .cloned()
            .collect()
    }

    /// Every tracked finding, by (rule, target).
    pub fn iter(&self) -> impl Iterator<Item = (&FindingKey, &Tracked)> {
        self.tracked.iter()
    }

    /// Targets that have tracked findings.
    pub fn targets(&self) -> Vec<String> {
        let mut t: Vec<String> = self.tracked.keys().map(|(_, t)| t.clone()).collect();
        t.sort();
        t.dedup();
        t
    }
}

/// The level of a change's event, so its journal priority
/// ([`crate::journal`]): a finding that starts firing is a warning, an error
/// when its rule is critical; flapping is a warning; the other changes
/// (pending, resolved, stale) are info. A critical finding is `err` (3),
/// not `crit` (2): `crit` and above say the host itself is failing, and
/// journald forwards them further (consoles, `wall`), while a finding is
/// the agent's diagnosis of mongod; `journalctl -p err` shows both the
/// critical findings firing and the agent's own errors.
pub fn change_level(to: State, severity: Option<Severity>) -> tracing::Level {
    match to {
        State::Firing if severity == Some(Severity::Critical) => tracing::Level::ERROR,
        State::Firing | State::Flapping => tracing::Level::WARN,
        _ => tracing::Level::INFO,
    }
}

/// Logs a change as one `tracing` event with the finding's fields (rule,
/// target, severity, states, title, evidence summary, episode start),
/// written as the agent's line `finding RULE on TARGET: FROM → TO (TITLE;
/// episode since T)` ([`messages::FINDING_CHANGES`]).
pub fn log_change(c: &Change, severity: Option<Severity>) {
    macro_rules! event {
        ($level:expr) => {
            tracing::event!(
                target: messages::FINDING_CHANGES,
                $level,
                rule = %c.rule,
                target_id = %c.target,
                severity = severity.map_or("unknown", Severity::as_str),
                from = state_name(c.transition.from),
                to = state_name(c.transition.to),
                title = %c.title,
                summary = %c.summary,
                episode_since = %c.episode_start.format("%Y-%m-%dT%H:%M:%SZ"),
                "{}",
                change_line(c)
            )
        };
    }
    match change_level(c.transition.to, severity) {
        tracing::Level::ERROR => event!(tracing::Level::ERROR),
        tracing::Level::WARN => event!(tracing::Level::WARN),
        _ => event!(tracing::Level::INFO),
    }
}

/// A change as people read it.
pub fn change_line(c: &Change) -> String {
    format!(
        "finding {} on {}: {} → {} ({}; episode since {})",
        c.rule,
        c.target,
        state_name(c.transition.from),
        state_name(c.transition.to),
        c.title,
        c.episode_start.format("%Y-%m-%dT%H:%M:%SZ"),
    )
}

/// A state's name in logs and metrics.
pub fn state_name(s: State) -> &'static str {
    match s {
        State::Inactive => "inactive",
        State::Pending => "pending",
        State::Firing => "firing",
        State::Resolved => "resolved",
        State::Stale { .. } => "stale",
        State::Flapping => "flapping",
    }
}

#[cfg(test)]
#[path = "findings_tests.rs"]
mod tests;
