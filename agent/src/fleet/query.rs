//! The aggregation pipelines `mdiag fleet` runs, and the rows they return.
//!
//! Every pipeline starts with a `$match` on the leading fields of one of
//! [`schema::INDEXES`] (and sorts on the rest), so the server reads the
//! episodes it needs and not the collection. That first `$match` holds
//! what the index serves; what narrows further (the states, `--since`) is a second
//! `$match` after it (after the `$sort` where there is one). MongoDB merges
//! adjacent stages and plans them as one; a server with a simpler planner
//! (SecantusDB scans the whole collection for an `$or`, or for `$in` beside
//! another field) still walks the index first. Same answers either way;
//! on SecantusDB with 3,000 hosts' 30 days of episodes, side by side with
//! the single `$or` these replace, `--since 24h` went from 16.6-19.1 s to
//! 1.33 s and `--rule R --since 24h` from 3.6 s to 0.56 s (docs/fleet.md).
//! - [`now_pipelines`]: the open episodes (`state_rule_since`: `state`
//!   `$in`, then `--rule`) and, with `--since`, the resolved ones
//!   (`state_since`: `state` and a range of `since`; with `--rule`,
//!   `state_rule_since`); each in one `$group` per (state, rule, arch,
//!   mongod version, kernel) with its distinct hosts;
//! - [`rule_episodes_pipelines`]: the latest episodes of one rule
//!   (`rule_episode`, the sort included), or with `--since` its open ones
//!   and those resolved since then (`state_rule_since`);
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

/// The episodes `filter` keeps of a rule's or a host's, after the index
/// walk: all of them, or with `--since` the open ones and those resolved
/// since then.
fn state_clause(filter: &Filter) -> Document {
    let open: Vec<&str> = OPEN_STATES.to_vec();
    match filter.since {
        None => doc! {},
        Some(t) => doc! {"$or": [
            {"state": {"$in": open}},
            {"state": "resolved", "since": {"$gte": t}},
        ]},
    }
}

/// The fleet now: open episodes, and with `--since` those resolved since
/// then, in one `$group` per state, rule, arch, mongod version and kernel,
/// each with its distinct hosts; the view adds them up per rule and per
/// state. Two pipelines with `--since`, each on its own index (their
/// groups are disjoint by state, [`fetch`] appends them), so that neither
/// reads the month of resolved history the TTL keeps: the open episodes
/// by `state` `$in` (`state_rule_since`), `--rule` in a second `$match`
/// (the open episodes are few, whatever the history's length; SecantusDB
/// scans the collection for an `$in` beside another field); the resolved
/// ones by `state` and a range of `since` (`state_since`), or with
/// `--rule` by `state`, `rule` and that range (`state_rule_since`).
/// One grouping and not a `$facet` of three: the grouping is the costly
/// part on the server (3 times the time on SecantusDB), and on a sharded
/// store a `$group` runs partly on each shard while a `$facet` runs on one.
/// The distinct hosts come from a first `$group` per host, then `$push`:
/// an `$addToSet` over a group of thousands of hosts is quadratic on a
/// server that keeps the set as a list (SecantusDB: 1.9 s against 0.08 s
/// for 923 episodes of one rule, the same answer), and linear either way
/// with two stages.
pub fn now_pipelines(filter: &Filter) -> Vec<Vec<Document>> {
    let open: Vec<&str> = OPEN_STATES.to_vec();
    let rule = filter.rule.as_deref();
    let mut p = vec![doc! {"$match": {"state": {"$in": open}}}];
    if let Some(r) = rule {
        p.push(doc! {"$match": {"rule": r}});
    }
    p.extend(now_groups());
    let mut pipelines = vec![p];
    if let Some(t) = filter.since {
        let first = match rule {
            Some(r) => doc! {"state": "resolved", "rule": r, "since": {"$gte": t}},
            None => doc! {"state": "resolved", "since": {"$gte": t}},
        };
        let mut p = vec![doc! {"$match": first}];
        p.extend(now_groups());
        pipelines.push(p);
    }
    pipelines
}

/// The two `$group` stages of [`now_pipelines`]. A group's title is the
/// greatest of its episodes' (the rule's title, unless the rule was
/// reworded between episodes): `$first` would depend on the index walked.
fn now_groups() -> [Document; 2] {
    [
        doc! {"$group": {
            "_id": {"state": "$state", "rule": "$rule", "arch": "$arch",
                    "mongod_version": {"$ifNull": ["$mongod_version", UNKNOWN]}, "kernel": "$kernel",
                    "host": "$host"},
            "title": {"$max": "$title"},
            "episodes": {"$sum": 1},
            "first_since": {"$min": "$since"},
            "last_since": {"$max": "$since"},
        }},
        doc! {"$group": {
            "_id": {"state": "$_id.state", "rule": "$_id.rule", "arch": "$_id.arch",
                    "mongod_version": "$_id.mongod_version", "kernel": "$_id.kernel"},
            "title": {"$max": "$title"},
            "episodes": {"$sum": "$episodes"},
            "hosts": {"$push": "$_id.host"},
            "first_since": {"$min": "$first_since"},
            "last_since": {"$max": "$last_since"},
        }},
    ]
}

/// The latest episodes of one rule, newest first: one pipeline (on
/// `rule_episode`), or with `--since` two whose episodes are disjoint by
/// state, each at most the limit, that [`fetch`] merges newest first: the
/// rule's open episodes (`state_rule_since`: `state` `$in`, then the rule)
/// and those resolved since then (`state_rule_since`: `state`, `rule`, the
/// range of `since`). Either way the server reads the episodes asked for,
/// on a planner that does not stop a sorted index walk at the `$limit`
/// (SecantusDB fetches all of the rule's month of episodes, 33,000 for
/// one rule at 3,000 hosts, before it sorts).
pub fn rule_episodes_pipelines(rule: &str, filter: &Filter) -> Vec<Vec<Document>> {
    let Some(t) = filter.since else {
        return vec![newest_first(
            doc! {"rule": rule},
            Document::new(),
            RULE_EPISODES_LIMIT,
        )];
    };
    let open: Vec<&str> = OPEN_STATES.to_vec();
    let sorted = |mut p: Vec<Document>| {
        p.extend([
            doc! {"$sort": {"episode_start": -1}},
            doc! {"$limit": RULE_EPISODES_LIMIT},
        ]);
        p
    };
    vec![
        sorted(vec![
            doc! {"$match": {"state": {"$in": open}}},
            doc! {"$match": {"rule": rule}},
        ]),
        sorted(vec![doc! {"$match": {
            "state": "resolved", "rule": rule, "since": {"$gte": t},
        }}]),
    ]
}

/// Episodes of several pipelines, newest first (by `episode_start`), at
/// most `limit`.
fn merge_newest_first(mut episodes: Vec<Document>, limit: i64) -> Vec<Document> {
    episodes.sort_by_key(|d| std::cmp::Reverse(d.get_datetime("episode_start").ok().copied()));
    episodes.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    episodes
}

/// `$match` on an index's equality, newest first, the rest of the filter
/// (when any) after the sort, at most `limit`.
fn newest_first(on_index: Document, rest: Document, limit: i64) -> Vec<Document> {
    let mut p = vec![
        doc! {"$match": on_index},
        doc! {"$sort": {"episode_start": -1}},
    ];
    if !rest.is_empty() {
        p.push(doc! {"$match": rest});
    }
    p.push(doc! {"$limit": limit});
    p
}

/// Every episode of one host (of one rule, with `--rule`), newest first.
pub fn host_history_pipeline(host: &str, filter: &Filter) -> Vec<Document> {
    let mut rest = Document::new();
    if let Some(r) = &filter.rule {
        rest.insert("rule", r.as_str());
    }
    rest.extend(state_clause(filter));
    newest_first(doc! {"host": host}, rest, HOST_HISTORY_LIMIT)
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
    /// [`now_pipelines`]' groups (absent with `--host`).
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
            let mut now = Vec::new();
            for p in now_pipelines(filter) {
                now.extend(run(db, FINDINGS, p).await?);
            }
            f.now = Some(now);
            if let Some(r) = &filter.rule {
                let mut episodes = Vec::new();
                for p in rule_episodes_pipelines(r, filter) {
                    episodes.extend(run(db, FINDINGS, p).await?);
                }
                f.rule_episodes = merge_newest_first(episodes, RULE_EPISODES_LIMIT);
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

    /// The index a planner walks for the pipeline's first `$match`: of
    /// those whose leading key it holds, the one with the longest run of
    /// leading keys it holds, then one that holds the sort's keys, then the
    /// first listed. That `$match` never holds an `$or`: SecantusDB scans the
    /// collection for one.
    fn index_used(collection: &str, pipeline: &[Document]) -> Option<&'static str> {
        let m = pipeline.first()?.get_document("$match").ok()?;
        assert!(!m.contains_key("$or"), "{m}");
        let sort: Vec<String> = pipeline
            .iter()
            .filter_map(|s| s.get_document("$sort").ok())
            .flat_map(|s| s.keys().cloned().collect::<Vec<_>>())
            .collect();
        let prefix = |i: &IndexSpec| {
            i.keys
                .iter()
                .take_while(|(k, _)| m.contains_key(*k))
                .count()
        };
        INDEXES
            .iter()
            .enumerate()
            .filter(|(_, i)| i.collection == collection && prefix(i) > 0)
            .max_by_key(|(n, i)| {
                let sorted = sort.iter().all(|s| i.keys.iter().any(|(k, _)| k == s));
                (prefix(i), sorted, std::cmp::Reverse(*n))
            })
            .map(|(_, i)| i.name)
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
        let [open] = &now_pipelines(&plain)[..] else {
            panic!("one pipeline without --since")
        };
        assert_eq!(index_used(FINDINGS, open), Some("state_rule_since"));
        let used: Vec<_> = now_pipelines(&ruled)
            .iter()
            .map(|p| index_used(FINDINGS, p))
            .collect();
        assert_eq!(used, [Some("state_rule_since"), Some("state_rule_since")]);
        let since = Filter {
            since,
            ..Filter::default()
        };
        let used: Vec<_> = now_pipelines(&since)
            .iter()
            .map(|p| index_used(FINDINGS, p))
            .collect();
        assert_eq!(used, [Some("state_rule_since"), Some("state_since")]);
        assert_eq!(
            index_used(FINDINGS, &host_history_pipeline("h1", &ruled)),
            Some("host_episode")
        );
        let used: Vec<_> = rule_episodes_pipelines("sched.x", &plain)
            .iter()
            .map(|p| index_used(FINDINGS, p))
            .collect();
        assert_eq!(used, [Some("rule_episode")]);
        let used: Vec<_> = rule_episodes_pipelines("sched.x", &ruled)
            .iter()
            .map(|p| index_used(FINDINGS, p))
            .collect();
        assert_eq!(used, [Some("state_rule_since"), Some("state_rule_since")]);
        assert_eq!(
            index_used(HOSTS, &silent_hosts_pipeline(DateTime::from_millis(5))),
            Some("last_seen")
        );
    }

    #[test]
    fn since_keeps_open_episodes_and_those_resolved_after_it() {
        let t = DateTime::from_millis(42);
        let ps = now_pipelines(&Filter {
            since: Some(t),
            rule: Some("r".into()),
            host: None,
        });
        // The open states first (an index walk), the rule after them; the
        // resolved ones by state, rule and the range of since, in that
        // order (state_rule_since's keys).
        let [open, resolved] = &ps[..] else {
            panic!("two pipelines with --since: {ps:?}")
        };
        let m = open[0].get_document("$match").unwrap();
        assert_eq!(m.keys().collect::<Vec<_>>(), ["state"]);
        assert_eq!(
            m.get_document("state")
                .unwrap()
                .get_array("$in")
                .unwrap()
                .len(),
            4
        );
        assert_eq!(open[1].get_document("$match").unwrap(), &doc! {"rule": "r"});
        assert_eq!(
            resolved[0].get_document("$match").unwrap(),
            &doc! {"state": "resolved", "rule": "r", "since": {"$gte": t}},
        );
        assert!(resolved[1].contains_key("$group"), "{resolved:?}");
        // A rule's and a host's episodes keep the same states after the index.
        let h = host_history_pipeline(
            "h",
            &Filter {
                since: Some(t),
                ..Filter::default()
            },
        );
        let or = h[2]
            .get_document("$match")
            .unwrap()
            .get_array("$or")
            .unwrap();
        assert_eq!(
            or[1].as_document().unwrap(),
            &doc! {"state": "resolved", "since": {"$gte": t}}
        );
        // Without --since, the history is every episode, the fleet view the open ones.
        let h = host_history_pipeline("h", &Filter::default());
        assert_eq!(h[0].get_document("$match").unwrap(), &doc! {"host": "h"});
        assert!(
            h.iter().all(|s| !s.contains_key("$match")
                || s.get_document("$match").unwrap().contains_key("host"))
        );
        assert_eq!(now_pipelines(&Filter::default()).len(), 1);
    }

    #[test]
    fn the_group_is_per_rule_and_host_facts_with_distinct_hosts() {
        let p = now_pipelines(&Filter::default()).remove(0);
        assert_eq!(p.len(), 3);
        // Per host first (so each host is pushed once), then per facts.
        let per_host = p[1].get_document("$group").unwrap();
        let keys: Vec<&str> = per_host
            .get_document("_id")
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            ["state", "rule", "arch", "mongod_version", "kernel", "host"]
        );
        let group = p[2].get_document("$group").unwrap();
        let id = group.get_document("_id").unwrap();
        let keys: Vec<&str> = id.keys().map(String::as_str).collect();
        assert_eq!(keys, ["state", "rule", "arch", "mongod_version", "kernel"]);
        assert_eq!(
            group.get_document("hosts").unwrap(),
            &doc! {"$push": "$_id.host"}
        );
        assert_eq!(
            group.get_document("episodes").unwrap(),
            &doc! {"$sum": "$episodes"}
        );
    }

    #[test]
    fn a_rule_s_episodes_since_are_its_open_and_recently_resolved_newest_first() {
        let t = DateTime::from_millis(42);
        let ps = rule_episodes_pipelines(
            "r",
            &Filter {
                since: Some(t),
                ..Filter::default()
            },
        );
        let [open, resolved] = &ps[..] else {
            panic!("two pipelines with --since: {ps:?}")
        };
        assert_eq!(open[1].get_document("$match").unwrap(), &doc! {"rule": "r"});
        assert_eq!(
            resolved[0].get_document("$match").unwrap(),
            &doc! {"state": "resolved", "rule": "r", "since": {"$gte": t}}
        );
        for p in &ps {
            let n = p.len();
            assert_eq!(p[n - 1], doc! {"$limit": RULE_EPISODES_LIMIT});
            assert_eq!(p[n - 2], doc! {"$sort": {"episode_start": -1}});
        }
        // Merged newest first, at most the limit.
        let ep = |id: i32, ms: i64| doc! {"_id": id, "episode_start": DateTime::from_millis(ms)};
        let merged = merge_newest_first(vec![ep(1, 10), ep(2, 30), ep(3, 20), ep(4, 5)], 3);
        let ids: Vec<i32> = merged.iter().map(|d| d.get_i32("_id").unwrap()).collect();
        assert_eq!(ids, [2, 3, 1]);
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
