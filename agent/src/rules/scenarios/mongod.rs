//! Scenarios of the `mongod.*` rules, read from mongod's own serverStatus
//! figures (live or FTDC): queued operations, connections near the limit,
//! connection churn and page faults; each fires with its evidence and has
//! near misses (the idle baseline, and a busy but healthy server).

use super::{fired, num, passed, txt};
use crate::rules::testdata::{baseline, healthy_mongod, set_mongod, with_figure};

/// The baseline with `figures` added to its healthy mongod.
fn with(figures: &[(&'static str, i64, i64)]) -> crate::recording::Recording {
    let mut rec = baseline();
    let mut f = healthy_mongod();
    for (path, start, step) in figures {
        f = with_figure(f, path, *start, *step);
    }
    set_mongod(&mut rec, &f);
    rec
}

#[test]
fn queued_operations_need_a_queue_most_of_the_time_not_few_tickets() {
    // Six operations queued in every sample.
    let rec = with(&[("globalLock.currentQueue.total", 6, 0)]);
    let f = fired(&rec, "mongod.queued_operations");
    assert_eq!(num(&f, "operations queued, mean"), 6.0);
    assert_eq!(num(&f, "samples with operations queued"), 100.0);
    assert!(f.fix.commands.is_empty());
    // A spike: 40 queued in one sample of ten, none in the others (mean 4).
    let mut rec = baseline();
    set_mongod(&mut rec, &healthy_mongod());
    for (i, s) in rec.slices.iter_mut().enumerate() {
        let st = s.mongod.as_mut().unwrap().status.as_mut().unwrap();
        st.queue_total = Some(if i == 3 { 40 } else { 0 });
    }
    passed(&rec, "mongod.queued_operations");
    // Busy but healthy: every ticket in use at times, nothing queued.
    let busy = with(&[
        ("globalLock.currentQueue.total", 0, 0),
        ("wiredTiger.concurrentTransactions.read.available", 0, 0),
        ("wiredTiger.concurrentTransactions.write.available", 0, 0),
    ]);
    passed(&busy, "mongod.queued_operations");
    // Idle: nothing queued.
    passed(
        &with(&[("globalLock.currentQueue.total", 0, 0)]),
        "mongod.queued_operations",
    );
}

#[test]
fn connections_near_the_limit_and_churn() {
    // 850 open, 150 available: 85 % of what mongod accepts.
    let near = with(&[
        ("connections.current", 850, 0),
        ("connections.available", 150, 0),
    ]);
    let f = fired(&near, "mongod.connections_limit");
    assert_eq!(num(&f, "connections mongod accepts"), 1000.0);
    assert!((num(&f, "share of the limit reached") - 85.0).abs() < 1e-9);
    assert_eq!(txt(&f, "open-files limit"), "64000");
    // Balanced: 500 of 1000.
    let half = with(&[
        ("connections.current", 500, 0),
        ("connections.available", 500, 0),
    ]);
    passed(&half, "mongod.connections_limit");

    // 25 new connections every second.
    let churn = with(&[
        ("connections.totalCreated", 1000, 25),
        ("connections.current", 40, 0),
    ]);
    let f = fired(&churn, "mongod.connection_churn");
    assert_eq!(num(&f, "connections opened per second"), 25.0);
    // A pooled application: one new connection in the whole recording.
    let pooled = with(&[("connections.totalCreated", 1000, 0)]);
    passed(&pooled, "mongod.connection_churn");
}

#[test]
fn page_faults_need_a_sustained_rate() {
    let faulting = with(&[("extra_info.page_faults", 10_000, 120)]);
    let f = fired(&faulting, "mongod.page_faults");
    assert_eq!(num(&f, "major page faults per second"), 120.0);
    assert_eq!(txt(&f, "swap configured"), "4");
    // A few faults per second: no concern.
    passed(
        &with(&[("extra_info.page_faults", 10_000, 3)]),
        "mongod.page_faults",
    );
}
