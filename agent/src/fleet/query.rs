//! The aggregation pipelines `mdiag fleet` runs, and the rows they return.
//!
//! Every pipeline starts with a `$match` on the leading fields of one of
//! [`schema::INDEXES`] (and sorts on the rest), so the server reads the
//! episodes it needs and not the collection:
//! - [`now_pipeline`]: episodes by state (`state_rule`: `state` `$in`, and
//!   `rule` when `--rule` is given), then one `$group` per (state, rule,
//!   arch, mongod version, kernel) with its distinct hosts;
//! - [`rule_episodes_pipeline`]: the latest episodes of one rule
//!   (`rule_episode`, the sort included);
//! - [`host_history_pipeline`]: a host's episodes, newest first
//!   (`host_episode`, the sort included);
//! - [`silent_hosts_pipeline`]: hosts not heard from since a cutoff
//!   (`last_seen`).
//!
//! The pipelines are built as plain documents (tested without a server);
//! [`run`] executes one and collects what it returns.

use bson::{Bson, DateTime, Document, doc};
use mongodb::Database;

use super::schema::{FINDINGS, HOSTS, STATES};

/// States of an episode that is still open (everything but `resolved`).
pub const OPEN_STATES: [&str; 4] = ["firing", "flapping", "pending", "stale"];
/// Most episodes of one host the history shows.
pub const HOST_HISTORY_LIMIT: i64 = 1000;
/// Most episodes of one rule listed under `--rule`.
pub const RULE_EPISODES_LIMIT: i64 = 200;
/// Most silent hosts listed (all are counted).
pub const SILENT_LIMIT: i64 = 500;
/// What a missing mongod version is grouped as.
pub const UNKNOWN: &str = "unknown";

/// What the user asked to see.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    /// Episodes open now, or whose latest transition (a resolution) is at or after this.
    pub since: Option<DateTime>,
    pub rule: Option<String>,
    pub host: Option<String>,
}

/// The episodes `filter` keeps, besides the host and rule equalities:
/// every open one and, with `--since`, those resolved since then. Each
/// branch has `state` first, so each is an index range of `state_rule`.
fn state_clause(filter: &Filter, open_only: bool) -> Document {
    let open: Vec<&str> = OPEN_STATES.to_vec();
    match filter.since {
        None if open_only => doc! {"state": {"$in": open}},
        None => doc! {},
        Some(t) => doc! {"$or": [
            {"state": {"$in": open}},
            {"state": "resolved", "since": {"$gte": t}},
        ]},
    }
}

/// The fleet now: open episodes (and, with `--since`, resolved since then)
/// in one `$group` per state, rule, arch, mongod version and kernel, each
/// with its distinct hosts; the view adds them up per rule and per state.
/// One group and not a `$facet` of three: the grouping is the costly part
/// on the server (3 times the time on SecantusDB), and on a sharded store
/// a `$group` runs partly on each shard while a `$facet` runs on one.
pub fn now_pipeline(filter: &Filter) -> Vec<Document> {
    let mut m = state_clause(filter, true);
    if let Some(r) = &filter.rule {
        m.insert("rule", r.as_str());
    }
    vec![
        doc! {"$match": m},
        doc! {"$group": {
            "_id": {"state": "$state", "rule": "$rule", "arch": "$arch",
                    "mongod_version": {"$ifNull": ["$mongod_version", UNKNOWN]}, "kernel": "$kernel"},
            "title": {"$first": "$title"},
            "episodes": {"$sum": 1},
            "hosts": {"$addToSet": "$host"},
            "first_since": {"$min": "$since"},
            "last_since": {"$max": "$since"},
        }},
    ]
}

/// The latest episodes of one rule, newest first.
pub fn rule_episodes_pipeline(rule: &str, filter: &Filter) -> Vec<Document> {
    let mut m = doc! {"rule": rule};
    m.extend(state_clause(filter, false));
    vec![
        doc! {"$match": m},
        doc! {"$sort": {"episode_start": -1}},
        doc! {"$limit": RULE_EPISODES_LIMIT},
    ]
}

/// Every episode of one host (of one rule, with `--rule`), newest first.
pub fn host_history_pipeline(host: &str, filter: &Filter) -> Vec<Document> {
    let mut m = doc! {"host": host};
    if let Some(r) = &filter.rule {
        m.insert("rule", r.as_str());
    }
    m.extend(state_clause(filter, false));
    vec![
        doc! {"$match": m},
        doc! {"$sort": {"episode_start": -1}},
        doc! {"$limit": HOST_HISTORY_LIMIT},
    ]
}

/// Hosts last heard from before `cutoff`, longest silent first.
pub fn silent_hosts_pipeline(cutoff: DateTime) -> Vec<Document> {
    vec![
        doc! {"$match": {"last_seen": {"$lt": cutoff}}},
        doc! {"$sort": {"last_seen": 1}},
        doc! {"$limit": SILENT_LIMIT},
    ]
}

/// Runs `pipeline` on `collection` and returns every document.
pub async fn run(
    db: &Database,
    collection: &str,
    pipeline: Vec<Document>,
) -> mongodb::error::Result<Vec<Document>> {
    let mut cursor = db
        .collection::<Document>(collection)
        .aggregate(pipeline)
        .await?;
    let mut out = Vec::new();
    while cursor.advance().await? {
        out.push(cursor.deserialize_current()?);
    }
    Ok(out)
}

/// What the store holds for one view, as the server returned it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Fetched {
    /// [`now_pipeline`]'s groups (absent with `--host`).
    pub now: Option<Vec<Document>>,
    pub rule_episodes: Vec<Document>,
    pub host: Option<Document>,
    pub host_history: Vec<Document>,
    pub hosts_total: u64,
    pub silent_total: u64,
    pub silent: Vec<Document>,
}

/// Runs the pipelines the filter calls for.
pub async fn fetch(
    db: &Database,
    filter: &Filter,
    silent_cutoff: DateTime,
) -> mongodb::error::Result<Fetched> {
    let hosts = db.collection::<Document>(HOSTS);
    let mut f = Fetched {
        hosts_total: hosts.estimated_document_count().await?,
        silent_total: hosts
            .count_documents(doc! {"last_seen": {"$lt": silent_cutoff}})
            .await?,
        silent: run(db, HOSTS, silent_hosts_pipeline(silent_cutoff)).await?,
        ..Fetched::default()
    };
    match &filter.host {
        Some(h) => {
            f.host = hosts.find_one(doc! {"_id": h.as_str()}).await?;
            f.host_history = run(db, FINDINGS, host_history_pipeline(h, filter)).await?;
        }
        None => {
            f.now = Some(run(db, FINDINGS, now_pipeline(filter)).await?);
            if let Some(r) = &filter.rule {
                f.rule_episodes = run(db, FINDINGS, rule_episodes_pipeline(r, filter)).await?;
            }
        }
    }
    Ok(f)
}

/// A count as the server returns it (`$sum` gives int32 or int64).
pub fn count(d: &Document, key: &str) -> u64 {
    match d.get(key) {
        Some(Bson::Int32(n)) => u64::try_from(*n).unwrap_or(0),
        Some(Bson::Int64(n)) => u64::try_from(*n).unwrap_or(0),
        Some(Bson::Double(n)) if *n >= 0.0 => *n as u64,
        _ => 0,
    }
}

/// The order states are shown in: the ones that need a person first.
pub fn state_rank(state: &str) -> usize {
    const ORDER: [&str; 5] = ["firing", "flapping", "pending", "stale", "resolved"];
    debug_assert!(ORDER.iter().all(|s| STATES.contains(s)));
    ORDER
        .iter()
        .position(|s| *s == state)
        .unwrap_or(ORDER.len())
}

#[cfg(test)]
mod tests {
    use super::super::schema::{INDEXES, IndexSpec};
    use super::*;

    /// The index whose leading keys are the `$match`'s equality or range
    /// fields (of every `$or` branch too), and whose next key is the sort's.
    fn index_used(collection: &str, pipeline: &[Document]) -> Option<&'static str> {
        let m = pipeline.first()?.get_document("$match").ok()?;
        let sort: Vec<String> = pipeline
            .iter()
            .filter_map(|s| s.get_document("$sort").ok())
            .flat_map(|s| s.keys().cloned().collect::<Vec<_>>())
            .collect();
        let branches: Vec<Document> = match m.get_array("$or") {
            Ok(or) => or
                .iter()
                .filter_map(|b| b.as_document())
                .map(|b| {
                    let mut all = m.clone();
                    all.remove("$or");
                    all.extend(b.clone());
                    all
                })
                .collect(),
            Err(_) => vec![m.clone()],
        };
        let fits = |i: &&IndexSpec| {
            i.collection == collection
                && branches.iter().all(|b| b.contains_key(i.keys[0].0))
                && sort.iter().all(|s| i.keys.iter().any(|(k, _)| k == s))
        };
        INDEXES.iter().find(fits).map(|i| i.name)
    }

    #[test]
    fn each_pipeline_starts_on_an_index() {
        let since = Some(DateTime::from_millis(1_000));
        let plain = Filter::default();
        let ruled = Filter {
            rule: Some("sched.x".into()),
            since,
            ..Filter::default()
        };
        assert_eq!(
            index_used(FINDINGS, &now_pipeline(&plain)),
            Some("state_rule")
        );
        assert_eq!(
            index_used(FINDINGS, &now_pipeline(&ruled)),
            Some("state_rule")
        );
        assert_eq!(
            index_used(FINDINGS, &host_history_pipeline("h1", &ruled)),
            Some("host_episode")
        );
        assert_eq!(
            index_used(FINDINGS, &rule_episodes_pipeline("sched.x", &plain)),
            Some("rule_episode")
        );
        assert_eq!(
            index_used(HOSTS, &silent_hosts_pipeline(DateTime::from_millis(5))),
            Some("last_seen")
        );
    }

    #[test]
    fn since_keeps_open_episodes_and_those_resolved_after_it() {
        let t = DateTime::from_millis(42);
        let p = now_pipeline(&Filter {
            since: Some(t),
            rule: Some("r".into()),
            host: None,
        });
        let m = p[0].get_document("$match").unwrap();
        assert_eq!(m.get_str("rule").unwrap(), "r");
        let or = m.get_array("$or").unwrap();
        let open = or[0].as_document().unwrap();
        assert_eq!(
            open.get_document("state")
                .unwrap()
                .get_array("$in")
                .unwrap()
                .len(),
            4
        );
        let resolved = or[1].as_document().unwrap();
        assert_eq!(resolved.get_str("state").unwrap(), "resolved");
        assert_eq!(
            resolved
                .get_document("since")
                .unwrap()
                .get_datetime("$gte")
                .unwrap(),
            &t
        );
        // Without --since, the history is every episode, the fleet view the open ones.
        let h = host_history_pipeline("h", &Filter::default());
        assert_eq!(h[0].get_document("$match").unwrap(), &doc! {"host": "h"});
        let n = now_pipeline(&Filter::default());
        assert!(
            n[0].get_document("$match")
                .unwrap()
                .get_document("state")
                .is_ok()
        );
    }

    #[test]
    fn the_group_is_per_rule_and_host_facts_with_distinct_hosts() {
        let p = now_pipeline(&Filter::default());
        assert_eq!(p.len(), 2);
        let group = p[1].get_document("$group").unwrap();
        let id = group.get_document("_id").unwrap();
        let keys: Vec<&str> = id.keys().map(String::as_str).collect();
        assert_eq!(keys, ["state", "rule", "arch", "mongod_version", "kernel"]);
        assert_eq!(
            group.get_document("hosts").unwrap(),
            &doc! {"$addToSet": "$host"}
        );
    }

    #[test]
    fn counts_of_every_numeric_type_and_state_order() {
        let d = doc! {"a": 3_i32, "b": 4_i64, "c": 5.0, "d": "x", "e": -1_i32};
        assert_eq!(
            ["a", "b", "c", "d", "e", "f"].map(|k| count(&d, k)),
            [3, 4, 5, 0, 0, 0]
        );
        assert!(state_rank("firing") < state_rank("pending"));
        assert!(state_rank("stale") < state_rank("resolved"));
        assert_eq!(state_rank("bogus"), 5);
    }
}
