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
use crate::report::Report;

/// (rule id, target id).
pub type FindingKey = (String, String);

/// One tracked finding.
#[derive(Debug, Clone)]
pub struct Tracked {
    pub lifecycle: Lifecycle,
    pub title: String,
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
    pub transition: Transition,
    pub episode_start: DateTime<Utc>,
    pub at: DateTime<Utc>,
}

/// What one window's report says of one rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub rule: String,
    pub title: String,
    pub obs: Observation,
}

/// What a report says of each of its rules.
pub fn observations(report: &Report) -> Vec<Seen> {
    let seen = |rule: &str, title: &str, obs| Seen {
        rule: rule.to_owned(),
        title: title.to_owned(),
        obs,
    };
    let held = report
        .findings
        .iter()
        .map(|f| seen(&f.rule_id, &f.title, Observation::Above));
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
        for Seen { rule, title, obs } in seen {
            let key = (rule.clone(), target.to_owned());
            if *obs == Observation::Above && !self.tracked.contains_key(&key) {
                self.tracked.insert(
                    key.clone(),
                    Tracked {
                        lifecycle: Lifecycle::new(config.lifecycle_for(rule)),
                        title: title.to_owned(),
                        episode_start: at,
                        since: at,
                    },
                );
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
