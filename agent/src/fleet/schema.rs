//! The fleet store's documents: what every `mdiag agent` writes into the
//! MongoDB deployment named by `[fleet] uri`, and what `mdiag fleet` reads.
//! Writer and reader share these types, so a field renamed on one side is a
//! compile error on the other; `docs/fleet.md` documents the same schema for
//! people who query the store themselves.
//!
//! Three collections (in the database `[fleet] database`, default `mdiag`):
//! - [`FINDINGS`]: one [`FindingDoc`] per episode of a finding, with a
//!   deterministic `_id` ([`finding_id`]) from host, rule, target and the
//!   episode's start, so the same episode written twice (a retry, a spool
//!   replayed twice) is one document. Each transition is appended once
//!   (`$addToSet` of a [`TransitionDoc`], which is deterministic too).
//!   `state`/`since` are the latest transition's, written only when newer
//!   than what is stored, so an old event replayed late never regresses an
//!   episode. A resolved episode gets `expire_at` (resolution + the
//!   configured retention), which a TTL index removes.
//! - [`WINDOWS`]: one [`WindowDoc`] per window and target: the facts the
//!   rules read and the rules that held. A time-series collection (time
//!   field `at`, meta field `meta`) where the server has them, else a plain
//!   collection with a TTL index on `at`.
//! - [`HOSTS`]: one [`HostDoc`] per host, upserted at start and with every
//!   window: what the fleet view groups by (architecture, kernel, mongod
//!   version) and when the host's agent was last heard from.
//!
//! Times are BSON dates (`bson::DateTime`, milliseconds): they sort,
//! compare and expire in the server.

use bson::DateTime;
use serde::{Deserialize, Serialize};

/// Findings, one document per episode.
pub const FINDINGS: &str = "findings";
/// Window summaries, one document per window and target.
pub const WINDOWS: &str = "windows";
/// Hosts, one document per host.
pub const HOSTS: &str = "hosts";

/// A finding's state names as stored (the agent's life-cycle states).
pub const STATES: [&str; 5] = ["pending", "firing", "resolved", "stale", "flapping"];

/// The `_id` of an episode: host, rule, target and the episode's start in
/// Unix milliseconds, each part with `%` and `/` escaped so that no two
/// different identities meet (a target id may hold a path:
/// `mongod@/usr/bin/mongod`).
pub fn finding_id(host: &str, rule: &str, target: &str, episode_start: DateTime) -> String {
    format!(
        "{}/{}/{}/{}",
        escape(host),
        escape(rule),
        escape(target),
        episode_start.timestamp_millis()
    )
}

/// The `_id` of a window summary in a plain (not time-series) [`WINDOWS`]
/// collection: host, target and the window's end in Unix milliseconds, so
/// a window written twice is one document.
pub fn window_id(host: &str, target: &str, at: DateTime) -> String {
    format!(
        "{}/{}/{}",
        escape(host),
        escape(target),
        at.timestamp_millis()
    )
}

fn escape(part: &str) -> String {
    part.replace('%', "%25").replace('/', "%2F")
}

/// What the host is, as the fleet view groups it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct HostFacts {
    /// `uname -m`: `x86_64`, `aarch64`, `s390x`.
    pub arch: String,
    /// `uname -r`.
    pub kernel: String,
    /// mongod's `version` (buildInfo), when the agent polls it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mongod_version: Option<String>,
    /// Replica set name (`rs_nm` in the metrics), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rs_nm: Option<String>,
    /// Cluster role (`cl_role`: `shardsvr`, `configsvr`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cl_role: Option<String>,
    /// The agent's own version.
    pub agent_version: String,
}

/// One change of a finding's state, as the agent emits it: the unit of the
/// spool and of a write to [`FINDINGS`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindingEvent {
    pub host: String,
    pub rule: String,
    pub target: String,
    pub title: String,
    pub from: String,
    pub to: String,
    pub at: DateTime,
    pub episode_start: DateTime,
    pub facts: HostFacts,
}

impl FindingEvent {
    /// The episode this event belongs to.
    pub fn id(&self) -> String {
        finding_id(&self.host, &self.rule, &self.target, self.episode_start)
    }

    /// The transition appended to the episode's list.
    pub fn transition(&self) -> TransitionDoc {
        TransitionDoc {
            from: self.from.clone(),
            to: self.to.clone(),
            at: self.at,
        }
    }
}

/// One transition of an episode, appended once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransitionDoc {
    pub from: String,
    pub to: String,
    pub at: DateTime,
}

/// A document of [`FINDINGS`]: one episode.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindingDoc {
    #[serde(rename = "_id")]
    pub id: String,
    pub host: String,
    pub rule: String,
    pub target: String,
    pub title: String,
    #[serde(flatten)]
    pub facts: HostFacts,
    pub episode_start: DateTime,
    /// The latest transition's state, one of [`STATES`].
    pub state: String,
    /// When it entered `state`.
    pub since: DateTime,
    /// Every transition, each once, in the order written.
    pub transitions: Vec<TransitionDoc>,
    /// Set when resolved: the TTL index removes the episode then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire_at: Option<DateTime>,
}

/// The identity of a window summary (the time-series meta field).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WindowMeta {
    pub host: String,
    pub target: String,
}

/// A document of [`WINDOWS`]: one window of one target.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowDoc {
    /// The window's end.
    pub at: DateTime,
    pub meta: WindowMeta,
    /// The window's length in seconds.
    pub seconds: f64,
    /// The facts the rules read, by group (the report's `facts`).
    pub facts: bson::Document,
    /// Rules whose condition held in this window.
    pub held: Vec<String>,
}

/// A document of [`HOSTS`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostDoc {
    /// The host's name (`[fleet] host`, else the hostname).
    #[serde(rename = "_id")]
    pub host: String,
    #[serde(flatten)]
    pub facts: HostFacts,
    /// Targets watched in the last window.
    pub targets: Vec<String>,
    pub first_seen: DateTime,
    pub last_seen: DateTime,
}

/// An index the store creates at start (idempotently: same name, same keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexSpec {
    pub collection: &'static str,
    pub name: &'static str,
    /// Keys in order: (field, 1 | -1).
    pub keys: &'static [(&'static str, i32)],
    /// A TTL index: documents expire this many seconds after the field's date.
    pub expire_after_secs: Option<u64>,
}

/// The indexes `mdiag fleet`'s queries use, and the TTL that expires
/// resolved episodes. (The window TTL depends on the configured retention
/// and on whether [`WINDOWS`] is a time-series collection; the store adds it.)
pub const INDEXES: &[IndexSpec] = &[
    IndexSpec {
        collection: FINDINGS,
        name: "state_rule_since",
        keys: &[("state", 1), ("rule", 1), ("since", -1)],
        expire_after_secs: None,
    },
    IndexSpec {
        collection: FINDINGS,
        name: "state_since",
        keys: &[("state", 1), ("since", -1)],
        expire_after_secs: None,
    },
    IndexSpec {
        collection: FINDINGS,
        name: "host_episode",
        keys: &[("host", 1), ("episode_start", -1)],
        expire_after_secs: None,
    },
    IndexSpec {
        collection: FINDINGS,
        name: "rule_episode",
        keys: &[("rule", 1), ("episode_start", -1)],
        expire_after_secs: None,
    },
    IndexSpec {
        collection: FINDINGS,
        name: "expire_at_ttl",
        keys: &[("expire_at", 1)],
        expire_after_secs: Some(0),
    },
    IndexSpec {
        collection: HOSTS,
        name: "last_seen",
        keys: &[("last_seen", -1)],
        expire_after_secs: None,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> DateTime {
        DateTime::from_millis(ms)
    }

    #[test]
    fn an_episode_id_is_deterministic_and_identities_never_meet() {
        let a = finding_id("h1", "sched.x", "mongod:27017", at(1_700_000_000_123));
        assert_eq!(a, "h1/sched.x/mongod:27017/1700000000123");
        assert_eq!(
            a,
            finding_id("h1", "sched.x", "mongod:27017", at(1_700_000_000_123))
        );
        // A '/' inside a part cannot shift the boundary between parts.
        assert_ne!(
            finding_id("h", "r", "a/b", at(1)),
            finding_id("h", "r/a", "b", at(1))
        );
        assert_eq!(
            finding_id("h", "r", "mongod@/usr/bin/mongod", at(1)),
            "h/r/mongod@%2Fusr%2Fbin%2Fmongod/1"
        );
        assert_ne!(
            finding_id("h", "r", "a%2Fb", at(1)),
            finding_id("h", "r", "a/b", at(1))
        );
        // Another episode of the same finding is another document.
        assert_ne!(
            finding_id("h", "r", "t", at(1)),
            finding_id("h", "r", "t", at(2))
        );
    }

    #[test]
    fn documents_round_trip_through_bson_with_dates_as_dates() {
        let facts = HostFacts {
            arch: "x86_64".into(),
            kernel: "6.18.0".into(),
            mongod_version: Some("8.0.4".into()),
            rs_nm: Some("rs0".into()),
            cl_role: None,
            agent_version: "0.1.0".into(),
        };
        let event = FindingEvent {
            host: "h1".into(),
            rule: "sched.wakeup_preemption".into(),
            target: "mongod:27017".into(),
            title: "t".into(),
            from: "pending".into(),
            to: "firing".into(),
            at: at(2_000),
            episode_start: at(1_000),
            facts: facts.clone(),
        };
        let doc = FindingDoc {
            id: event.id(),
            host: event.host.clone(),
            rule: event.rule.clone(),
            target: event.target.clone(),
            title: event.title.clone(),
            facts,
            episode_start: event.episode_start,
            state: event.to.clone(),
            since: event.at,
            transitions: vec![event.transition()],
            expire_at: None,
        };
        let raw = bson::serialize_to_document(&doc).expect("serialize");
        // Flattened host facts, dates as BSON dates, no null expire_at.
        assert_eq!(raw.get_str("arch").ok(), Some("x86_64"));
        assert_eq!(raw.get_str("_id").ok(), Some(event.id().as_str()));
        assert!(raw.get_datetime("episode_start").is_ok());
        assert!(!raw.contains_key("expire_at"));
        assert!(!raw.contains_key("cl_role"));
        let back: FindingDoc = bson::deserialize_from_document(raw).expect("deserialize");
        assert_eq!(back, doc);
        let ev = bson::serialize_to_document(&event).expect("serialize event");
        let back: FindingEvent = bson::deserialize_from_document(ev).expect("event back");
        assert_eq!(back, event);
    }

    #[test]
    fn every_state_the_agent_logs_can_be_stored() {
        use crate::agent::lifecycle::{Active, State};
        for s in [
            State::Pending,
            State::Firing,
            State::Resolved,
            State::Stale {
                was: Active::Firing,
            },
            State::Flapping,
        ] {
            let name = crate::agent::findings::state_name(s);
            assert!(STATES.contains(&name), "{name}");
        }
    }

    #[test]
    fn index_names_are_unique_per_collection_and_the_ttl_is_on_a_date() {
        let mut seen = std::collections::BTreeSet::new();
        for i in INDEXES {
            assert!(seen.insert((i.collection, i.name)), "{i:?}");
            assert!(!i.keys.is_empty());
        }
        let ttl: Vec<_> = INDEXES
            .iter()
            .filter(|i| i.expire_after_secs.is_some())
            .collect();
        assert_eq!(ttl.len(), 1);
        assert_eq!(ttl[0].keys, &[("expire_at", 1)]);
    }

    #[test]
    fn docs_fleet_md_lists_every_index_with_its_keys() {
        let doc = include_str!("../../../docs/fleet.md");
        for i in INDEXES {
            let keys: Vec<String> = i
                .keys
                .iter()
                .map(|(k, dir)| match dir {
                    -1 => format!("`{k}` desc"),
                    _ => format!("`{k}`"),
                })
                .collect();
            let listed = format!("`{}` ({}", i.name, keys.join(", "));
            assert!(doc.contains(&listed), "docs/fleet.md lacks {listed}…)");
        }
    }
}
