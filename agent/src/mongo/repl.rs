//! Replication figures: the members of the replica set as this server sees
//! them (`replSetGetStatus`) and its oplog (`local.oplog.rs` statistics,
//! and, live, the times of its first and last entries).
//!
//! Both sources go through one parser, as for serverStatus: FTDC stores the
//! two replies under `replSetGetStatus.` and `local.oplog.rs.stats.` (mongod
//! runs `replSetGetStatus` and `collStats` on `oplog.rs` every second when
//! replication is on, `src/mongo/db/ftdc/ftdc_mongod.cpp`), and a live reply
//! is flattened under the same prefixes, so both look like a function from a
//! dotted path to a number. Member names are strings, which FTDC keeps only
//! in a chunk's reference document: they come from there (or the live reply).
//!
//! FTDC has no oplog entry times; its oplog window is estimated from the
//! oplog's size and its write rate (see `rules::facts::replication`).

use std::collections::HashMap;

use bson::{Document, RawDocument};

use crate::ftdc::metrics::extract;
use crate::mongo::info::int;
use crate::recording::mongod::{MemberSample, ReplSample};

/// Prefix of replSetGetStatus metrics (FTDC and live alike).
pub const RS_PREFIX: &str = "replSetGetStatus.";
/// Prefix of the oplog's collStats metrics.
pub const OPLOG_PREFIX: &str = "local.oplog.rs.stats.";
/// Members read at most (a replica set has at most 50).
pub const MAX_MEMBERS: usize = 50;
/// The oplog figures read, under [`OPLOG_PREFIX`].
const OPLOG_PATHS: [&str; 4] = [
    "size",
    "maxSize",
    "count",
    "wiredTiger.cursor.insert key and value bytes",
];
/// The member figures read, under `replSetGetStatus.members.N.`.
const MEMBER_FIELDS: [&str; 5] = ["_id", "state", "health", "optimeDate", "self"];

/// A member state's name, as replSetGetStatus's `stateStr` spells it.
pub fn state_name(state: i64) -> &'static str {
    match state {
        0 => "STARTUP",
        1 => "PRIMARY",
        2 => "SECONDARY",
        3 => "RECOVERING",
        5 => "STARTUP2",
        6 => "UNKNOWN",
        7 => "ARBITER",
        8 => "DOWN",
        9 => "ROLLBACK",
        10 => "REMOVED",
        _ => "?",
    }
}

impl MemberSample {
    /// Up and in a state that serves the set: primary, secondary or arbiter.
    pub fn healthy(&self) -> bool {
        self.health.is_none_or(|h| h == 1) && matches!(self.state, Some(1 | 2 | 7))
    }

    /// How far it is behind a primary at `primary_ms`, s, less its
    /// configured delay (a delayed member is not late by that much);
    /// `None` without its optime.
    pub fn lag_s(&self, primary_ms: i64) -> Option<f64> {
        let behind = (primary_ms - self.optime_ms?) as f64 / 1000.0;
        Some((behind - self.delay_s.unwrap_or(0) as f64).max(0.0))
    }

    /// `name` or `member _id N`, for messages.
    pub fn label(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("member _id {}", self.id))
    }
}

impl ReplSample {
    /// Sets each member's configured delay (see [`member_delays`]).
    pub fn set_delays(&mut self, delays: &HashMap<i64, i64>) {
        for m in &mut self.members {
            m.delay_s = delays.get(&m.id).copied();
        }
    }

    /// Reads the figures through `lookup` (full paths, with the prefixes);
    /// `names` are the members' names by index. `None` when neither reply
    /// is there.
    pub fn parse_with(lookup: &dyn Fn(&str) -> Option<i64>, names: &[String]) -> Option<Self> {
        let oplog = |p: &str| lookup(&format!("{OPLOG_PREFIX}{p}"));
        let mut s = ReplSample {
            my_state: lookup(&format!("{RS_PREFIX}myState")),
            oplog_size_bytes: oplog(OPLOG_PATHS[0]),
            oplog_max_bytes: oplog(OPLOG_PATHS[1]),
            oplog_count: oplog(OPLOG_PATHS[2]),
            oplog_insert_bytes: oplog(OPLOG_PATHS[3]),
            ..Default::default()
        };
        for i in 0..MAX_MEMBERS {
            let field = |f: &str| lookup(&format!("{RS_PREFIX}members.{i}.{f}"));
            let Some(id) = field("_id") else { break };
            s.members.push(MemberSample {
                id,
                name: names.get(i).filter(|n| !n.is_empty()).cloned(),
                state: field("state"),
                health: field("health"),
                optime_ms: field("optimeDate"),
                is_self: field("self") == Some(1),
                delay_s: None,
            });
        }
        let empty = s.my_state.is_none()
            && s.members.is_empty()
            && s.oplog_size_bytes.is_none()
            && s.oplog_max_bytes.is_none();
        (!empty).then_some(s)
    }

    /// A live sample from the replies: replSetGetStatus, the oplog's
    /// collStats, and the first and last oplog entries' `ts` seconds.
    pub fn from_replies(
        status: Option<&RawDocument>,
        oplog_stats: Option<&RawDocument>,
        first_last: (Option<i64>, Option<i64>),
    ) -> Option<Self> {
        let mut values: HashMap<String, i64> = HashMap::new();
        for (prefix, doc) in [(RS_PREFIX, status), (OPLOG_PREFIX, oplog_stats)] {
            let Some(flat) = doc.and_then(|d| extract(d).ok()) else {
                continue;
            };
            for (p, v) in flat.paths.iter().zip(flat.values) {
                if wanted(prefix, p) {
                    values.entry(format!("{prefix}{p}")).or_insert(v);
                }
            }
        }
        let names = status.map(member_names).unwrap_or_default();
        let mut s = Self::parse_with(&|p| values.get(p).copied(), &names)?;
        (s.oplog_first_s, s.oplog_last_s) = first_last;
        Some(s)
    }
}

/// Each member's configured delay by `_id`, s, from a replSetGetConfig
/// reply: `secondaryDelaySecs` (5.0+) or `slaveDelay` (before), 0 when
/// neither is set. Members beyond [`MAX_MEMBERS`] are left out.
pub fn member_delays(reply: &Document) -> HashMap<i64, i64> {
    let Ok(members) = reply
        .get_document("config")
        .and_then(|c| c.get_array("members"))
    else {
        return HashMap::new();
    };
    members
        .iter()
        .take(MAX_MEMBERS)
        .filter_map(|m| {
            let m = m.as_document()?;
            let delay = int(m, &["secondaryDelaySecs"])
                .or_else(|| int(m, &["slaveDelay"]))
                .unwrap_or(0);
            Some((int(m, &["_id"])?, delay))
        })
        .collect()
}

/// Whether `path` (under `prefix`) is a figure the parser reads.
fn wanted(prefix: &str, path: &str) -> bool {
    if prefix == OPLOG_PREFIX {
        return OPLOG_PATHS.contains(&path);
    }
    if path == "myState" {
        return true;
    }
    path.strip_prefix("members.")
        .and_then(|rest| rest.split_once('.'))
        .is_some_and(|(_, f)| MEMBER_FIELDS.contains(&f))
}

/// Whether an FTDC metric path is one the parser reads.
pub fn is_ftdc_path(path: &str) -> bool {
    [RS_PREFIX, OPLOG_PREFIX]
        .into_iter()
        .any(|prefix| path.strip_prefix(prefix).is_some_and(|p| wanted(prefix, p)))
}

/// The members' names by index, from a replSetGetStatus document.
pub fn member_names(status: &RawDocument) -> Vec<String> {
    let Ok(members) = status.get_array("members") else {
        return Vec::new();
    };
    members
        .into_iter()
        .take(MAX_MEMBERS)
        .map(|m| {
            m.ok()
                .and_then(|m| m.as_document())
                .and_then(|d| d.get_str("name").ok())
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mongo::status::tests::{fixtures, json_doc};

    #[test]
    fn parses_the_4_2_replies_of_get_diagnostic_data() {
        let doc = json_doc(&fixtures().join("serverStatus/getDiagnosticData-mongod-4.2.8.json"));
        let rs = doc.get_document("replSetGetStatus").unwrap();
        let oplog = doc.get_document("local.oplog.rs.stats").unwrap();
        let s = ReplSample::from_replies(Some(rs), Some(oplog), (Some(10), Some(20))).unwrap();
        assert_eq!(s.my_state, Some(1));
        assert_eq!(s.members.len(), 3);
        let primary = &s.members[0];
        assert_eq!(primary.name.as_deref(), Some("172.19.0.9:27017"));
        assert_eq!((primary.state, primary.health), (Some(1), Some(1)));
        assert!(primary.is_self && !s.members[1].is_self);
        assert_eq!(s.members[2].state, Some(2));
        assert!(s.members.iter().all(MemberSample::healthy));
        // The fixture's dates are extended JSON strings, not BSON dates:
        // no optime figure, rather than a wrong one.
        assert_eq!(primary.optime_ms, None);
        assert_eq!(s.oplog_size_bytes, Some(1_865_616));
        assert_eq!(s.oplog_max_bytes, Some(16_777_216));
        assert_eq!(s.oplog_count, Some(7552));
        assert_eq!(s.oplog_insert_bytes, Some(1_933_584));
        assert_eq!((s.oplog_first_s, s.oplog_last_s), (Some(10), Some(20)));
        assert_eq!(ReplSample::from_replies(None, None, (None, None)), None);
    }

    #[test]
    fn member_delays_come_from_either_field_name_by_id() {
        let reply = bson::doc! {
            "config": {
                "members": [
                    { "_id": 0, "host": "a:1", "secondaryDelaySecs": 0_i64 },
                    { "_id": 3, "host": "b:1", "secondaryDelaySecs": 3600_i64 },
                    // Before 5.0, an int.
                    { "_id": 5, "host": "c:1", "slaveDelay": 60 },
                    { "_id": 7, "host": "d:1" },
                ]
            },
            "ok": 1.0,
        };
        let delays = member_delays(&reply);
        assert_eq!(delays.get(&0), Some(&0));
        assert_eq!(delays.get(&3), Some(&3600));
        assert_eq!(delays.get(&5), Some(&60));
        assert_eq!(delays.get(&7), Some(&0));
        assert!(member_delays(&bson::doc! { "ok": 0.0 }).is_empty());
        let mut s = ReplSample {
            members: vec![
                MemberSample {
                    id: 3,
                    optime_ms: Some(1_000),
                    ..MemberSample::default()
                },
                MemberSample {
                    id: 9,
                    optime_ms: Some(1_000),
                    ..MemberSample::default()
                },
            ],
            ..ReplSample::default()
        };
        s.set_delays(&delays);
        assert_eq!(s.members[0].delay_s, Some(3600));
        // Not in the configuration read: unknown, not 0.
        assert_eq!(s.members[1].delay_s, None);
        // 3605 s behind with a 3600 s delay is 5 s late; never below 0.
        assert_eq!(s.members[0].lag_s(3_606_000), Some(5.0));
        assert_eq!(s.members[0].lag_s(2_000), Some(0.0));
        assert_eq!(s.members[1].lag_s(3_606_000), Some(3605.0));
    }

    #[test]
    fn slices_round_trip_and_older_slices_still_read() {
        use crate::recording::mongod::MongodSlice;
        let slice = MongodSlice {
            at_ms: Some(5),
            repl: Some(crate::rules::facts::replication::example_sample(3)),
            system: crate::rules::facts::system::example_samples(2, 10, 10, 1).pop(),
            ..Default::default()
        };
        let json = serde_json::to_string(&slice).unwrap();
        assert_eq!(serde_json::from_str::<MongodSlice>(&json).unwrap(), slice);
        // A slice written before these fields existed.
        let old: MongodSlice =
            serde_json::from_str(r#"{"at_ms":7,"status":null,"missing":null}"#).unwrap();
        assert_eq!((old.at_ms, old.repl, old.system), (Some(7), None, None));
        // And a recording without them writes none.
        let plain = serde_json::to_string(&MongodSlice::default()).unwrap();
        assert!(
            !plain.contains("repl") && !plain.contains("system"),
            "{plain}"
        );
    }

    #[test]
    fn health_and_state_names() {
        let m = |state, health| MemberSample {
            state: Some(state),
            health: Some(health),
            ..Default::default()
        };
        assert!(m(1, 1).healthy() && m(2, 1).healthy() && m(7, 1).healthy());
        assert!(!m(2, 0).healthy() && !m(8, 0).healthy() && !m(3, 1).healthy());
        assert_eq!(state_name(9), "ROLLBACK");
        assert_eq!(m(8, 0).label(), "member _id 0");
        assert!(is_ftdc_path("replSetGetStatus.members.3.optimeDate"));
        assert!(is_ftdc_path("local.oplog.rs.stats.maxSize"));
        assert!(!is_ftdc_path("replSetGetStatus.members.3.pingMs"));
        assert!(!is_ftdc_path("serverStatus.opcounters.insert"));
    }
}
