//! Unit tests of `summary.rs` (a child module of it, kept in its own file
//! so that the code under test stays short).

use super::*;
use crate::recording::mongod::{MongodInfo, MongodSlice};

fn slice(i: u64, st: Option<ServerStatusSample>, missing: Option<&str>) -> crate::recording::Slice {
    crate::recording::Slice {
        start_ms: i * 1000,
        duration_ms: 1000,
        mongod: Some(MongodSlice {
            at_ms: st.as_ref().map(|_| i * 1000 + 100),
            status: st,
            missing: missing.map(str::to_owned),
            poll_ms: None,
            ..Default::default()
        }),
        ..crate::recording::Slice::default()
    }
}

pub(crate) fn sample(i: i64) -> ServerStatusSample {
    ServerStatusSample {
        sections: vec!["opcounters".into(), "tcmalloc".into(), "wiredTiger".into()],
        op_insert: Some(1000 + 100 * i),
        op_query: Some(50),
        connections_current: Some(10 + i),
        queue_total: Some(i % 3),
        cache_max_bytes: Some(1000),
        cache_bytes: Some(500 + 10 * i),
        cache_dirty_bytes: Some(50),
        cache_app_evicted_pages: Some(7 * i),
        cache_app_evict_time_us: Some(2000 * i),
        checkpoints: Some(3 + i / 2),
        checkpoint_most_recent_ms: Some(40),
        lock_checkpoint_wait_us: Some(500 * i),
        tcmalloc_per_cpu_caches: Some(1),
        tcmalloc_cpu_free: Some(0),
        ..Default::default()
    }
}

/// Ten seconds: samples at 0..=5, then mongod stopped answering.
pub(crate) fn recording() -> Recording {
    let mut rec = crate::rules::testdata::base("6.18.0", "x86_64", 4);
    rec.slices = (0..10)
        .map(|i| {
            if i < 6 {
                slice(i, Some(sample(i as i64)), None)
            } else {
                slice(
                    i,
                    None,
                    Some("no reply to serverStatus within 2 s (server slow or stopped)"),
                )
            }
        })
        .collect();
    rec.mongod = Some(MongodRecording {
        source: "live".into(),
        uri: Some("mongodb://***@127.0.0.1:27017".into()),
        info: Some(MongodInfo {
            version: Some("8.2.1".into()),
            allocator: Some("tcmalloc-google".into()),
            process: Some("mongod".into()),
            ..Default::default()
        }),
        polls_ok: 6,
        polls_failed: 4,
        stopped_answering_at_ms: Some(8100),
        ..Default::default()
    });
    rec
}

#[test]
fn rates_fill_checkpoints_and_gaps() {
    let s = MongodSummary::of(&recording()).unwrap();
    assert_eq!(
        (s.seconds, s.seconds_with_sample, s.seconds_missing),
        (10, 6, 4)
    );
    assert_eq!(s.span_s, 5.0);
    assert_eq!(s.ops["insert"], 500);
    assert_eq!(s.ops_per_s["insert"], 100.0);
    assert_eq!(s.ops["query"], 0);
    assert_eq!(s.total_ops_per_s(), Some(100.0));
    assert_eq!(
        (s.connections_last, s.connections_max, s.queue_max),
        (Some(15), Some(15), Some(2))
    );
    assert_eq!(s.cache_fill_last, Some(0.55));
    assert_eq!(s.cache_fill_max, Some(0.55));
    assert_eq!(s.cache_dirty_fill_max, Some(0.05));
    assert_eq!(s.app_evicted_pages_per_s, Some(7.0));
    assert_eq!(s.app_evict_ms_per_s, Some(2.0));
    assert_eq!(s.checkpoints, Some(2));
    assert_eq!(s.checkpoint_lock_wait_ms_per_s, Some(0.5));
    // usingPerCPUCaches but cpu_free == 0: not working.
    assert_eq!(
        (s.using_per_cpu_caches, s.per_cpu_caches_active),
        (Some(true), Some(false))
    );
    assert_eq!(s.stopped_answering_at_s, Some(8.1));
    assert_eq!(s.missing_reasons.len(), 1);
    assert_eq!(s.missing_reasons[0].seconds, 4);
    let text = s.lines().join("\n");
    for want in [
        "mongod, version 8.2.1, allocator tcmalloc-google",
        "mongodb://***@127.0.0.1:27017",
        "NOT working",
        "Operations: 100/s over 5 s (insert 100)",
        "55% full",
        "6 of 10 seconds have a serverStatus sample",
        "stopped answering at +8.1 s",
        "4 seconds missing: no reply to serverStatus",
    ] {
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
}

#[test]
fn restarts_and_gaps_and_no_mongod() {
    let mut rec = recording();
    // A restart before the 6th sample: its counter began again at 0.
    if let Some(m) = rec.slices[5].mongod.as_mut() {
        m.status.as_mut().unwrap().op_insert = Some(3);
    }
    let s = MongodSummary::of(&rec).unwrap();
    assert_eq!(s.ops["insert"], 400 + 3);
    // A sample a day later (another FTDC run) adds neither time nor counts.
    let mut gap = recording();
    if let Some(m) = gap.slices[5].mongod.as_mut() {
        m.at_ms = Some(86_400_000);
        m.status.as_mut().unwrap().op_insert = Some(1_000_000);
    }
    let s = MongodSummary::of(&gap).unwrap();
    assert_eq!((s.span_s, s.ops["insert"]), (4.0, 400));
    rec.mongod = None;
    assert!(MongodSummary::of(&rec).is_none());
}
