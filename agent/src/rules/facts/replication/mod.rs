//! The `replication` fact group: the replica set as the recorded member sees
//! it (member health and state, how far each secondary is behind the
//! primary) and its oplog (size, write rate, window), from the replication
//! samples of the recording's mongod slices: replSetGetStatus and the
//! oplog's statistics in FTDC, or polled live (`mongo::poll::REPL_EVERY`).
//!
//! The oplog window: live, the time between the oplog's first and last
//! entries once the oplog is full (before, that span is only the history so
//! far); otherwise, and always from FTDC (which has no entry times), the
//! oplog's maximum size divided by the recorded write rate: how many hours
//! it holds at that rate. Not bound when neither is known (no oplog writes
//! recorded, no entry times), so the rule is not assessed rather than
//! judged on a guess.

mod sustained;

use super::{FactGroup, FactValue, float, int, text};
use crate::mongo::repl::state_name;
use crate::recording::Recording;
use crate::recording::mongod::ReplSample;

/// Why the group is absent when mongod sent no replication figures.
pub const NOT_RECORDED: &str = "no replication figures: mongod is not a replica-set member \
     (standalone), did not answer replSetGetStatus, or its FTDC has no replSetGetStatus";
/// The oplog window MongoDB's manual sizes the default oplog for (a
/// secondary may stop copying for this long and still catch up).
pub const TARGET_WINDOW_HOURS: f64 = 24.0;
/// The oplog counts as full from this share of its maximum size.
pub const FULL: f64 = 0.9;
/// The smallest oplog `replSetResizeOplog` accepts, MB.
pub const MIN_OPLOG_MB: f64 = 990.0;
const MIB: f64 = 1_048_576.0;

/// The group, or why it is absent.
pub fn replication_facts(rec: &Recording) -> Result<FactGroup, String> {
    let samples = super::mongod::slice_samples(rec, |m| m.repl.as_ref(), NOT_RECORDED)?;
    let m = rec.mongod.as_ref().ok_or(NOT_RECORDED)?;
    let (_, newest) = samples[samples.len() - 1];
    let mut g = FactGroup::new();
    let mut put = |k: &str, v: Option<FactValue>| {
        if let Some(v) = v {
            g.insert(k.into(), v);
        }
    };
    put("source", Some(text(m.source.clone())));
    put("samples", Some(int(samples.len() as u64)));
    let set = m.info.as_ref().and_then(|i| i.replica_set.clone());
    put("set", Some(text(set.unwrap_or_default())));
    put("members", Some(int(newest.members.len() as u64)));
    put("my_state", newest.my_state.map(FactValue::Int));
    put(
        "my_state_name",
        newest.my_state.map(|s| text(state_name(s))),
    );
    let secondaries = newest.members.iter().filter(|m| m.state == Some(2)).count();
    put("secondaries", Some(int(secondaries as u64)));

    // Member health: the newest sample, and the worst one.
    let unhealthy = |s: &ReplSample| s.members.iter().filter(|m| !m.healthy()).count();
    put("unhealthy_members", Some(int(unhealthy(newest) as u64)));
    let worst = samples
        .iter()
        .map(|(_, s)| *s)
        .max_by_key(|s| unhealthy(s))
        .unwrap_or(newest);
    put("unhealthy_members_max", Some(int(unhealthy(worst) as u64)));
    let first_bad = worst.members.iter().find(|m| !m.healthy()).map(|m| {
        format!(
            "{} ({}, health {})",
            m.label(),
            m.state.map_or("?", state_name),
            m.health.map_or_else(|| "?".into(), |h| h.to_string())
        )
    });
    put(
        "unhealthy_member",
        Some(text(first_bad.unwrap_or_default())),
    );

    // Delayed members (secondaryDelaySecs), read live from replSetGetConfig:
    // their lag below counts only what exceeds their delay. FTDC keeps no
    // configuration, so there a delayed member's lag is all of it.
    let delays_read = newest.members.iter().any(|m| m.delay_s.is_some());
    put("delays_read", Some(FactValue::Bool(delays_read)));
    let delayed = newest
        .members
        .iter()
        .filter(|m| m.delay_s.is_some_and(|d| d > 0))
        .count();
    put("delayed_members", Some(int(delayed as u64)));

    // Lag: the primary's optime less each secondary's (and its delay), per sample.
    let mut lag_max = (0.0_f64, String::new());
    let mut lag_last = 0.0_f64;
    for (i, (_, s)) in samples.iter().enumerate() {
        let Some(primary) = sustained::primary_optime(s) else {
            continue;
        };
        let lags = s
            .members
            .iter()
            .filter(|m| m.state == Some(2))
            .filter_map(|m| Some((m, m.lag_s(primary)?)));
        let mut here = 0.0_f64;
        for (m, lag) in lags {
            here = here.max(lag);
            if lag > lag_max.0 {
                lag_max = (lag, m.label());
            }
        }
        if i + 1 == samples.len() {
            lag_last = here;
        }
    }
    put("lag_max_s", Some(float(lag_max.0)));
    put("lag_last_s", Some(float(lag_last)));
    put("lagging_member", Some(text(lag_max.1)));
    // The lag that held over a window, and the primary's longest pause
    // between writes (`sustained.rs`): 0 when nothing lagged or moved.
    let (held, held_by) = sustained::sustained_lag(&samples).unwrap_or_default();
    put("lag_sustained_s", Some(float(held)));
    put("lag_sustained_member", Some(text(held_by)));
    put(
        "primary_write_gap_s",
        Some(float(sustained::primary_write_gap(&samples).unwrap_or(0.0))),
    );

    // The member recorded, for commands: host and port of `self`.
    let me = samples
        .iter()
        .rev()
        .find_map(|(_, s)| s.members.iter().find(|m| m.is_self)?.name.clone());
    if let Some((host, port)) = me.as_deref().and_then(|n| n.rsplit_once(':')) {
        put("self_host", Some(text(host)));
        put("self_port", port.parse::<i64>().ok().map(FactValue::Int));
    }
    oplog_facts(&samples, &mut put);
    Ok(g)
}

/// The oplog's size, write rate and window.
fn oplog_facts(samples: &[(u64, &ReplSample)], put: &mut dyn FnMut(&str, Option<FactValue>)) {
    let Some(newest) = samples
        .iter()
        .rev()
        .map(|(_, s)| *s)
        .find(|s| s.oplog_max_bytes.is_some())
    else {
        return;
    };
    let max = newest.oplog_max_bytes.unwrap_or(0) as f64;
    let size = newest.oplog_size_bytes.map(|b| b as f64);
    put(
        "oplog_max_bytes",
        newest.oplog_max_bytes.map(FactValue::Int),
    );
    put(
        "oplog_max_mb",
        Some(FactValue::Int((max / MIB).round() as i64)),
    );
    put(
        "oplog_size_bytes",
        newest.oplog_size_bytes.map(FactValue::Int),
    );
    let fill = size.filter(|_| max > 0.0).map(|s| s / max);
    put("oplog_fill", fill.map(float));
    // Bytes written: the counter's increases (a decrease is a restart).
    let counted: Vec<(u64, i64)> = samples
        .iter()
        .filter_map(|(t, s)| Some((*t, s.oplog_insert_bytes?)))
        .collect();
    let (mut bytes, mut ms) = (0i64, 0u64);
    for w in counted.windows(2) {
        let (a, b) = (w[0], w[1]);
        bytes += if b.1 >= a.1 { b.1 - a.1 } else { b.1.max(0) };
        ms += b.0.saturating_sub(a.0);
    }
    let rate = (ms > 0).then(|| bytes as f64 * 1000.0 / ms as f64);
    put("oplog_write_bytes_per_s", rate.map(float));
    put(
        "oplog_gb_per_hour",
        rate.map(|r| float(r * 3600.0 / 1_073_741_824.0)),
    );
    let measured = match (newest.oplog_first_s, newest.oplog_last_s) {
        (Some(a), Some(b)) if b >= a => Some((b - a) as f64 / 3600.0),
        _ => None,
    };
    put("oplog_first_to_last_hours", measured.map(float));
    let full = fill.is_some_and(|f| f >= FULL);
    let window = match (measured, rate) {
        (Some(h), _) if full => Some((h, "the oplog's first and last entries (the oplog is full)")),
        (_, Some(r)) if r > 0.0 && max > 0.0 => Some((
            max / r / 3600.0,
            "the oplog's maximum size at the recorded write rate",
        )),
        _ => None,
    };
    if let Some((hours, how)) = window {
        put("oplog_window_hours", Some(float(hours)));
        put("oplog_window_source", Some(text(how)));
        put(
            "suggested_oplog_size_mb",
            Some(FactValue::Int(suggested_oplog_mb(max / MIB, hours))),
        );
    }
    put(
        "oplog_window_target_hours",
        Some(float(TARGET_WINDOW_HOURS)),
    );
}

/// The oplog size (MB) that holds [`TARGET_WINDOW_HOURS`] at the rate that
/// gives `max_mb` a window of `hours`, with a quarter more for peaks,
/// rounded up to a whole GiB, at least `replSetResizeOplog`'s minimum.
pub fn suggested_oplog_mb(max_mb: f64, hours: f64) -> i64 {
    if hours <= 0.0 || max_mb <= 0.0 {
        return MIN_OPLOG_MB as i64;
    }
    let want = max_mb * TARGET_WINDOW_HOURS / hours * 1.25;
    let gib = (want / 1024.0).ceil() * 1024.0;
    gib.max(MIN_OPLOG_MB) as i64
}

/// A made-up sample `i` seconds into a recording (the example facts rules
/// are checked against): a primary (the member recorded) and a secondary
/// 2 s behind, a full 990 MB oplog written at 1 MB/s.
pub(crate) fn example_sample(i: i64) -> ReplSample {
    use crate::recording::mongod::MemberSample;
    let t = 1_700_000_000_000 + i * 1000;
    let member = |id: i64, state: i64, optime_ms: i64| MemberSample {
        id,
        name: Some(format!("db{id}.example:27017")),
        state: Some(state),
        health: Some(1),
        optime_ms: Some(optime_ms),
        is_self: id == 0,
        delay_s: Some(0),
    };
    ReplSample {
        my_state: Some(1),
        members: vec![member(0, 1, t), member(1, 2, t - 2000)],
        oplog_size_bytes: Some(990 << 20),
        oplog_max_bytes: Some(990 << 20),
        oplog_count: Some(1_000_000),
        oplog_insert_bytes: Some(i * 1_000_000),
        oplog_first_s: Some(1_700_000_000 - 86_400),
        oplog_last_s: Some(1_700_000_000 + i),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::mongod::MemberSample;
    use crate::recording::mongod::{MongodRecording, MongodSlice};

    fn member(id: i64, state: i64, health: i64, optime_ms: i64, is_self: bool) -> MemberSample {
        MemberSample {
            id,
            name: Some(format!("db{id}.example:27017")),
            state: Some(state),
            health: Some(health),
            optime_ms: Some(optime_ms),
            is_self,
            delay_s: None,
        }
    }

    fn rec(samples: Vec<ReplSample>) -> Recording {
        let mut rec = crate::rules::testdata::baseline();
        rec.mongod.get_or_insert_with(MongodRecording::default);
        for slice in &mut rec.slices {
            slice.mongod.get_or_insert_with(MongodSlice::default).repl = None;
        }
        for (i, s) in samples.into_iter().enumerate() {
            let slice = rec.slices.get_mut(i).expect("enough slices");
            slice.mongod.get_or_insert_with(MongodSlice::default).repl = Some(s);
        }
        rec
    }

    #[test]
    fn lag_health_and_a_projected_window() {
        let t0 = 1_700_000_000_000;
        let sample = |i: i64| ReplSample {
            my_state: Some(1),
            members: vec![
                member(0, 1, 1, t0 + i * 1000, true),
                member(1, 2, 1, t0 + i * 1000 - 40_000, false),
                member(2, if i == 2 { 8 } else { 2 }, i64::from(i != 2), t0, false),
            ],
            oplog_size_bytes: Some(1 << 30),
            oplog_max_bytes: Some(1 << 30),
            // 1 MiB per second.
            oplog_insert_bytes: Some(i * 1_048_576),
            ..Default::default()
        };
        let r = rec((0..4).map(sample).collect());
        let g = replication_facts(&r).unwrap();
        assert_eq!(g["members"], int(3));
        assert_eq!(g["unhealthy_members"], int(0));
        assert_eq!(g["unhealthy_members_max"], int(1));
        assert_eq!(
            g["unhealthy_member"],
            text("db2.example:27017 (DOWN, health 0)")
        );
        // Member 2 stays at t0 while the primary moves on: 3 s at the end;
        // member 1 is 40 s behind throughout.
        assert_eq!(g["lag_max_s"], float(40.0));
        assert_eq!(g["lagging_member"], text("db1.example:27017"));
        assert_eq!(g["self_host"], text("db0.example"));
        assert_eq!(g["self_port"], FactValue::Int(27017));
        // Slices are a second apart: 1 MiB/s into a 1 GiB oplog is 1024 s.
        let rate = g["oplog_write_bytes_per_s"].as_f64().unwrap();
        assert!((rate - 1_048_576.0).abs() < 1.0, "{rate}");
        let hours = g["oplog_window_hours"].as_f64().unwrap();
        assert!((hours - 1024.0 / 3600.0).abs() < 1e-6, "{hours}");
        assert!(
            matches!(&g["oplog_window_source"], FactValue::Text(t) if t.contains("write rate"))
        );
        assert_eq!(g["oplog_max_mb"], FactValue::Int(1024));
        // 24 h at 1 MiB/s, a quarter more (108 000 MB), in whole GiB: 106 GiB.
        assert_eq!(g["suggested_oplog_size_mb"], FactValue::Int(108_544));
    }

    #[test]
    fn a_full_oplog_uses_its_entries_and_no_writes_leave_the_window_unbound() {
        let full = ReplSample {
            members: vec![member(0, 1, 1, 0, true)],
            oplog_size_bytes: Some(990 << 20),
            oplog_max_bytes: Some(1000 << 20),
            oplog_insert_bytes: Some(5),
            oplog_first_s: Some(1000),
            oplog_last_s: Some(1000 + 7200),
            ..Default::default()
        };
        let g = replication_facts(&rec(vec![full.clone(), full.clone()])).unwrap();
        assert_eq!(g["oplog_window_hours"], float(2.0));
        assert_eq!(g["lag_max_s"], float(0.0));
        // Half full, no writes: the first-to-last span is only history.
        let mut half = full;
        half.oplog_size_bytes = Some(500 << 20);
        let g = replication_facts(&rec(vec![half.clone(), half])).unwrap();
        assert_eq!(g["oplog_first_to_last_hours"], float(2.0));
        assert!(!g.contains_key("oplog_window_hours"));
        // A standalone: absent with the reason.
        assert_eq!(replication_facts(&rec(vec![])).unwrap_err(), NOT_RECORDED);
        let mut none = rec(vec![]);
        none.mongod = None;
        assert!(replication_facts(&none).is_err());
    }

    #[test]
    fn suggested_sizes_are_whole_gib_and_at_least_the_minimum() {
        assert_eq!(suggested_oplog_mb(1024.0, 48.0), 1024);
        // Whole GiB: never below 1024 but for nothing at all.
        assert_eq!(suggested_oplog_mb(100.0, 240.0), 1024);
        assert_eq!(suggested_oplog_mb(990.0, 12.0), 3072);
        assert_eq!(suggested_oplog_mb(0.0, 1.0), 990);
    }
}
