//! The view model of `mdiag fleet`: what the store answered, in the order
//! and shape every format shows it. The renderers (`render.rs`, `html.rs`)
//! only lay this out, as the report's do with `report::view`; the JSON
//! format is this structure itself (documented in `docs/fleet-json.md`).

use std::collections::{BTreeMap, BTreeSet};

use bson::{Bson, DateTime, Document};
use chrono::{SecondsFormat, Utc};
use serde::Serialize;

use super::query::{Fetched, Filter, UNKNOWN, count, state_rank};

/// Version of the JSON output's shape; bumped when a field changes meaning.
pub const JSON_SCHEMA: u32 = 1;
/// Host names listed per rule in the text formats (JSON lists them all).
pub const HOSTS_SHOWN: usize = 8;
/// Rows of a rule's per-facts table in the text formats, most episodes first.
pub const FACTS_SHOWN: usize = 10;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetView {
    pub schema: u32,
    pub mdiag_version: String,
    /// When the view was computed (RFC 3339, UTC).
    pub generated_at: String,
    /// The store, its credentials removed, and the database.
    pub store: String,
    pub database: String,
    pub filter: FilterView,
    /// Hosts that ever reported.
    pub hosts_total: u64,
    /// A host is silent when its agent's last report is older than this.
    pub silent_after_secs: u64,
    pub silent_total: u64,
    /// The longest silent first (at most `query::SILENT_LIMIT`).
    pub silent: Vec<SilentHost>,
    /// Episodes per state, in the order firing, flapping, pending, stale, resolved.
    pub states: Vec<StateCount>,
    /// Per state and rule, most episodes first (empty with `--host`).
    pub groups: Vec<RuleGroup>,
    /// With `--rule`: that rule's latest episodes on every host.
    pub rule_episodes: Vec<Episode>,
    /// With `--host`: that host's history.
    pub host: Option<HostHistory>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FilterView {
    pub since: Option<String>,
    pub rule: Option<String>,
    pub host: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SilentHost {
    pub host: String,
    pub last_seen: Option<String>,
    pub silent_secs: Option<u64>,
    pub arch: String,
    pub kernel: String,
    pub mongod_version: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateCount {
    pub state: String,
    pub episodes: u64,
    pub hosts: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleGroup {
    pub state: String,
    pub rule: String,
    pub title: String,
    pub episodes: u64,
    /// Every host with such an episode, sorted.
    pub hosts: Vec<String>,
    /// Earliest and latest entry into this state among the episodes.
    pub first_since: Option<String>,
    pub last_since: Option<String>,
    /// The same episodes per architecture, mongod version and kernel.
    pub by_facts: Vec<FactsGroup>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FactsGroup {
    pub arch: String,
    pub mongod_version: String,
    pub kernel: String,
    pub episodes: u64,
    pub hosts: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Episode {
    pub id: String,
    pub host: String,
    pub rule: String,
    pub target: String,
    pub title: String,
    pub state: String,
    pub episode_start: Option<String>,
    pub since: Option<String>,
    /// Oldest first, by time (the store keeps them in the order written).
    pub transitions: Vec<Transition>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Transition {
    pub from: String,
    pub to: String,
    pub at: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostHistory {
    pub host: String,
    /// False when the store has no host document (only episodes, or nothing).
    pub known: bool,
    pub arch: String,
    pub kernel: String,
    pub mongod_version: String,
    pub rs_nm: Option<String>,
    pub agent_version: String,
    pub targets: Vec<String>,
    pub first_seen: Option<String>,
    pub last_seen: Option<String>,
    /// Newest first.
    pub episodes: Vec<Episode>,
}

/// A BSON date as RFC 3339 (seconds, UTC).
pub fn rfc3339(t: DateTime) -> Option<String> {
    chrono::DateTime::<Utc>::from_timestamp_millis(t.timestamp_millis())
        .map(|d| d.to_rfc3339_opts(SecondsFormat::Secs, true))
}

fn date(d: &Document, key: &str) -> Option<String> {
    d.get_datetime(key).ok().and_then(|t| rfc3339(*t))
}

fn text(d: &Document, key: &str) -> String {
    d.get_str(key).unwrap_or_default().to_owned()
}

fn version(d: &Document) -> String {
    match d.get_str("mongod_version") {
        Ok(v) if !v.is_empty() => v.to_owned(),
        _ => UNKNOWN.to_owned(),
    }
}

fn episode(d: &Document) -> Episode {
    let mut transitions: Vec<(i64, Transition)> = d
        .get_array("transitions")
        .map(|a| a.as_slice())
        .unwrap_or_default()
        .iter()
        .filter_map(Bson::as_document)
        .map(|t| {
            let at = t.get_datetime("at").ok().copied();
            (
                at.map_or(i64::MIN, |a| a.timestamp_millis()),
                Transition {
                    from: text(t, "from"),
                    to: text(t, "to"),
                    at: at.and_then(rfc3339),
                },
            )
        })
        .collect();
    // Stable: two transitions at the same millisecond keep the written order.
    transitions.sort_by_key(|(at, _)| *at);
    Episode {
        id: text(d, "_id"),
        host: text(d, "host"),
        rule: text(d, "rule"),
        target: text(d, "target"),
        title: text(d, "title"),
        state: text(d, "state"),
        episode_start: date(d, "episode_start"),
        since: date(d, "since"),
        transitions: transitions.into_iter().map(|(_, t)| t).collect(),
    }
}

fn strings<'a>(d: &'a Document, key: &str) -> impl Iterator<Item = &'a str> {
    d.get_array(key)
        .map(|a| a.as_slice())
        .unwrap_or_default()
        .iter()
        .filter_map(Bson::as_str)
}

/// The earlier (`min`) or later of two RFC 3339 times (they sort as text).
fn pick(a: Option<String>, b: Option<String>, min: bool) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if (a <= b) == min { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// Per state and rule, from the groups per state, rule and host facts:
/// episodes added up, hosts united, times widened.
fn groups(now: &[Document]) -> Vec<RuleGroup> {
    let mut by: BTreeMap<(String, String), (RuleGroup, BTreeSet<String>)> = BTreeMap::new();
    for f in now {
        let Ok(id) = f.get_document("_id") else {
            continue;
        };
        let key = (text(id, "state"), text(id, "rule"));
        let (g, hosts) = by.entry(key.clone()).or_insert_with(|| {
            let g = RuleGroup {
                state: key.0.clone(),
                rule: key.1.clone(),
                title: text(f, "title"),
                episodes: 0,
                hosts: Vec::new(),
                first_since: None,
                last_since: None,
                by_facts: Vec::new(),
            };
            (g, BTreeSet::new())
        });
        let these: BTreeSet<&str> = strings(f, "hosts").collect();
        g.episodes += count(f, "episodes");
        g.first_since = pick(g.first_since.take(), date(f, "first_since"), true);
        g.last_since = pick(g.last_since.take(), date(f, "last_since"), false);
        g.by_facts.push(FactsGroup {
            arch: text(id, "arch"),
            mongod_version: version(id),
            kernel: text(id, "kernel"),
            episodes: count(f, "episodes"),
            hosts: these.len() as u64,
        });
        hosts.extend(these.into_iter().map(str::to_owned));
    }
    let mut groups: Vec<RuleGroup> = by
        .into_values()
        .map(|(mut g, hosts)| {
            g.hosts = hosts.into_iter().collect();
            g.by_facts.sort_by(|a, b| {
                b.episodes.cmp(&a.episodes).then_with(|| {
                    (&a.arch, &a.mongod_version, &a.kernel).cmp(&(
                        &b.arch,
                        &b.mongod_version,
                        &b.kernel,
                    ))
                })
            });
            g
        })
        .collect();
    groups.sort_by(|a, b| {
        state_rank(&a.state)
            .cmp(&state_rank(&b.state))
            .then(b.episodes.cmp(&a.episodes))
            .then_with(|| a.rule.cmp(&b.rule))
    });
    groups
}

/// Per state: episodes, and hosts counted once across rules.
fn states(now: &[Document]) -> Vec<StateCount> {
    let mut by: BTreeMap<String, (u64, BTreeSet<&str>)> = BTreeMap::new();
    for f in now {
        let Ok(id) = f.get_document("_id") else {
            continue;
        };
        let (episodes, hosts) = by.entry(text(id, "state")).or_default();
        *episodes += count(f, "episodes");
        hosts.extend(strings(f, "hosts"));
    }
    let mut states: Vec<StateCount> = by
        .into_iter()
        .map(|(state, (episodes, hosts))| StateCount {
            state,
            episodes,
            hosts: hosts.len() as u64,
        })
        .collect();
    states.sort_by_key(|s| state_rank(&s.state));
    states
}

fn silent(d: &Document, now: DateTime) -> SilentHost {
    let last = d.get_datetime("last_seen").ok().copied();
    SilentHost {
        host: text(d, "_id"),
        last_seen: last.and_then(rfc3339),
        silent_secs: last.map(|l| {
            u64::try_from((now.timestamp_millis() - l.timestamp_millis()) / 1000).unwrap_or(0)
        }),
        arch: text(d, "arch"),
        kernel: text(d, "kernel"),
        mongod_version: version(d),
    }
}

fn host_history(name: &str, host: Option<&Document>, episodes: &[Document]) -> HostHistory {
    let empty = Document::new();
    let h = host.unwrap_or(&empty);
    HostHistory {
        host: name.to_owned(),
        known: host.is_some(),
        arch: text(h, "arch"),
        kernel: text(h, "kernel"),
        mongod_version: version(h),
        rs_nm: h.get_str("rs_nm").ok().map(str::to_owned),
        agent_version: text(h, "agent_version"),
        targets: h
            .get_array("targets")
            .map(|a| a.as_slice())
            .unwrap_or_default()
            .iter()
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect(),
        first_seen: date(h, "first_seen"),
        last_seen: date(h, "last_seen"),
        episodes: episodes.iter().map(episode).collect(),
    }
}

/// Where the view was read from, for its header.
#[derive(Debug, Clone)]
pub struct Context {
    pub store: String,
    pub database: String,
    pub now: DateTime,
    pub silent_after_secs: u64,
}

/// The view of what [`super::query::fetch`] returned.
pub fn build(fetched: &Fetched, filter: &Filter, ctx: &Context) -> FleetView {
    let (states, groups) = match &fetched.now {
        Some(now) => (states(now), groups(now)),
        None => (Vec::new(), Vec::new()),
    };
    FleetView {
        schema: JSON_SCHEMA,
        mdiag_version: env!("CARGO_PKG_VERSION").to_owned(),
        generated_at: rfc3339(ctx.now).unwrap_or_default(),
        store: ctx.store.clone(),
        database: ctx.database.clone(),
        filter: FilterView {
            since: filter.since.and_then(rfc3339),
            rule: filter.rule.clone(),
            host: filter.host.clone(),
        },
        hosts_total: fetched.hosts_total,
        silent_after_secs: ctx.silent_after_secs,
        silent_total: fetched.silent_total,
        silent: fetched.silent.iter().map(|d| silent(d, ctx.now)).collect(),
        states,
        groups,
        rule_episodes: fetched.rule_episodes.iter().map(episode).collect(),
        host: filter
            .host
            .as_deref()
            .map(|h| host_history(h, fetched.host.as_ref(), &fetched.host_history)),
    }
}

impl FleetView {
    /// Episodes in `state` (0 when none).
    pub fn episodes_in(&self, state: &str) -> u64 {
        self.states
            .iter()
            .find(|s| s.state == state)
            .map_or(0, |s| s.episodes)
    }

    /// True when nothing at all matched: no episode, no history.
    pub fn is_empty(&self) -> bool {
        self.states.is_empty()
            && self.rule_episodes.is_empty()
            && self.host.as_ref().is_none_or(|h| h.episodes.is_empty())
    }
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
