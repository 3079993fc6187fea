//! Scenarios of the `replication.*` rules: lag, an unhealthy member and a
//! short oplog window, each firing with its evidence and the exact fix, with
//! near misses: the healthy baseline set (balanced) and an idle one.

use super::{fired, fix_has, not_assessed, num, passed, report, txt};
use crate::rules::testdata::{baseline, healthy_repl, set_repl};

#[test]
fn lag_fires_on_a_secondary_far_behind_and_not_on_a_close_one() {
    let mut rec = baseline();
    set_repl(&mut rec, |i| {
        let mut s = healthy_repl(i);
        // db2 applies 30 s late.
        s.members[2].optime_ms = s.members[0].optime_ms.map(|t| t - 30_000);
        s
    });
    let f = fired(&rec, "replication.lag");
    assert_eq!(num(&f, "replication lag held over 30 s"), 30.0);
    assert_eq!(num(&f, "replication lag, worst single sample"), 30.0);
    assert_eq!(txt(&f, "member that held it"), "db2.example:27017");
    assert_eq!(txt(&f, "most lagging member"), "db2.example:27017");
    assert!(f.fix.commands.is_empty(), "{:?}", f.fix.commands);
    let mongosh = format!(
        "mongosh {} ",
        crate::rules::facts::connection::mongosh_args(&rec)
    );
    assert!(f.fix.verify.contains(&mongosh), "{}", f.fix.verify);
    // Balanced: the baseline's secondaries are 1 s behind.
    passed(&baseline(), "replication.lag");
    // Idle: no writes, every member at the same optime.
    let mut idle = baseline();
    set_repl(&mut idle, |_| {
        let mut s = healthy_repl(0);
        for m in &mut s.members {
            m.optime_ms = Some(1_700_000_000_000);
        }
        s
    });
    passed(&idle, "replication.lag");
    // Near miss: an idle set whose primary writes only its 10 s no-op; a
    // secondary has it one sample later, so one sample shows 10 s behind
    // (the worst single sample, which fired before).
    let mut noop = baseline();
    set_repl(&mut noop, |i| {
        let mut s = healthy_repl(i);
        let t0 = 1_700_000_000_000;
        let at = |i: i64| t0 + if i >= 5 { 10_000 } else { 0 };
        s.members[0].optime_ms = Some(at(i));
        s.members[1].optime_ms = Some(at(i));
        s.members[2].optime_ms = Some(at(if i == 5 { 4 } else { i }));
        s
    });
    let r = report(&noop);
    assert!(
        r.passed.iter().any(|p| p.rule_id == "replication.lag"),
        "{:?}",
        r.findings
    );
    // Near miss: steady writes, one sample 12 s late.
    let mut spike = baseline();
    set_repl(&mut spike, |i| {
        let mut s = healthy_repl(i);
        if i == 4 {
            s.members[2].optime_ms = s.members[0].optime_ms.map(|t| t - 12_000);
        }
        s
    });
    passed(&spike, "replication.lag");
}

#[test]
fn a_delayed_member_lags_only_beyond_its_configured_delay() {
    // db2 is delayed by an hour (secondaryDelaySecs 3600) and is 3600 s
    // behind: by design, read live from replSetGetConfig.
    let delayed = |late_ms: i64| {
        let mut rec = baseline();
        set_repl(&mut rec, move |i| {
            let mut s = healthy_repl(i);
            s.members[2].optime_ms = s.members[0].optime_ms.map(|t| t - late_ms);
            for m in &mut s.members {
                m.delay_s = Some(if m.id == 2 { 3600 } else { 0 });
            }
            s
        });
        rec
    };
    passed(&delayed(3_600_000), "replication.lag");
    // Near miss: the same member 30 s later than its delay.
    let f = fired(&delayed(3_630_000), "replication.lag");
    assert_eq!(num(&f, "replication lag held over 30 s"), 30.0);
    assert_eq!(txt(&f, "member that held it"), "db2.example:27017");
    assert_eq!(
        txt(
            &f,
            "members delayed on purpose (lag counted beyond their delay)"
        ),
        "1"
    );
    // From FTDC (no configuration), an hour behind is an hour late, and
    // the evidence says the delays were not read.
    let mut ftdc = baseline();
    set_repl(&mut ftdc, |i| {
        let mut s = healthy_repl(i);
        s.members[2].optime_ms = s.members[0].optime_ms.map(|t| t - 3_600_000);
        for m in &mut s.members {
            m.delay_s = None;
        }
        s
    });
    let f = fired(&ftdc, "replication.lag");
    assert!(
        txt(
            &f,
            "members delayed on purpose (lag counted beyond their delay)"
        )
        .starts_with("not read"),
        "{f:?}"
    );
}

#[test]
fn an_unhealthy_member_fires_an_arbiter_does_not() {
    let mut rec = baseline();
    set_repl(&mut rec, |i| {
        let mut s = healthy_repl(i);
        s.members[1].state = Some(8);
        s.members[1].health = Some(0);
        s
    });
    let f = fired(&rec, "replication.member_unhealthy");
    assert_eq!(num(&f, "unhealthy members, most at once"), 1.0);
    assert_eq!(
        txt(&f, "first unhealthy member"),
        "db1.example:27017 (DOWN, health 0)"
    );
    // A member in initial sync counts too.
    set_repl(&mut rec, |i| {
        let mut s = healthy_repl(i);
        s.members[2].state = Some(5);
        s
    });
    fired(&rec, "replication.member_unhealthy");
    // Near misses: the healthy set, and one with an arbiter.
    passed(&baseline(), "replication.member_unhealthy");
    set_repl(&mut rec, |i| {
        let mut s = healthy_repl(i);
        s.members[2].state = Some(7);
        s.members[2].optime_ms = None;
        s
    });
    passed(&rec, "replication.member_unhealthy");
}

#[test]
fn a_short_oplog_window_gets_a_computed_resize_and_a_revert_to_the_recorded_size() {
    let mut rec = baseline();
    // 990 MiB oplog, half full, written at 1 MiB/s: 990 s of writes.
    set_repl(&mut rec, |i| {
        let mut s = healthy_repl(i);
        s.oplog_max_bytes = Some(990 << 20);
        s.oplog_size_bytes = Some(495 << 20);
        s.oplog_insert_bytes = Some(i << 20);
        s
    });
    let f = fired(&rec, "replication.oplog_window");
    let hours = num(&f, "oplog window (hours)");
    assert!((hours - 990.0 / 3600.0).abs() < 1e-3, "{hours}");
    assert!(txt(&f, "how the window was found").contains("write rate"));
    // 24 h at 1 MiB/s plus a quarter: 108 000 MiB, in whole GiB.
    assert_eq!(num(&f, "suggested oplog size"), 108_544.0);
    assert!(num(&f, "free space on the data file system") > 0.0);
    let cmd = &f.fix.commands[0];
    let mongosh = format!(
        "mongosh {} ",
        crate::rules::facts::connection::mongosh_args(&rec)
    );
    assert!(cmd.starts_with(&mongosh), "{cmd}");
    assert!(fix_has(&f, "size: Double(108544)"), "{cmd}");
    assert!(
        f.fix.revert[0].contains("size: Double(990)"),
        "{:?}",
        f.fix.revert
    );
    // Balanced: the baseline's full 50 GiB oplog spans 72 hours.
    passed(&baseline(), "replication.oplog_window");
    // Idle: no writes and an oplog not yet full: the window is unknown.
    let mut idle = baseline();
    set_repl(&mut idle, |_| {
        let mut s = healthy_repl(0);
        s.oplog_size_bytes = Some(1 << 30);
        s
    });
    let r = report(&idle);
    assert!(
        r.not_assessed
            .iter()
            .any(|n| n.rule_id == "replication.oplog_window"),
        "{:?}",
        r.not_assessed
    );
    // A standalone: the replication rules are not assessed, with the reason.
    let mut standalone = baseline();
    for s in &mut standalone.slices {
        if let Some(m) = s.mongod.as_mut() {
            m.repl = None;
        }
    }
    let reason = not_assessed(&standalone, "replication.lag");
    assert!(reason.contains("replica-set member"), "{reason}");
}
