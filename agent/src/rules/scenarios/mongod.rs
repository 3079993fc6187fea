//! Scenarios of the `mongod.*` rules, read from mongod's own serverStatus
//! figures (live or FTDC): queued operations, connections near the limit,
//! connection churn, page faults, assertions, the release and its feature
//! compatibility version; each fires with its evidence and has
//! near misses (the idle baseline, and a busy but healthy server).

use super::{fired, fix_has, num, passed, txt};
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

/// The server scanning: 50 queries a second, each examining a 20000-document
/// collection to return one document (a COLLSCAN load).
fn scanning() -> crate::recording::Recording {
    with(&[
        ("metrics.queryExecutor.scanned", 0, 0),
        ("metrics.queryExecutor.scannedObjects", 0, 1_000_000),
        ("metrics.document.returned", 0, 50),
        ("metrics.queryExecutor.collectionScans.total", 0, 50),
        ("metrics.operation.scanAndOrder", 0, 0),
    ])
}

#[test]
fn query_targeting_names_the_scan_and_sends_the_dba_to_the_queries() {
    let f = fired(&scanning(), "mongod.query_targeting");
    assert_eq!(
        num(&f, "documents examined per document returned"),
        20_000.0
    );
    assert_eq!(num(&f, "documents examined per second"), 1_000_000.0);
    assert_eq!(txt(&f, "collection scans per second"), "50");
    assert_eq!(f.class, crate::findings::RuleClass::Finding);
    // Where to look: the slow-query log's COLLSCAN plans and the running
    // scans, asked of this mongod; never a kernel or host setting.
    assert!(f.fix.commands.iter().all(|c| c.starts_with("mongosh ")));
    assert!(f.fix.commands.iter().any(|c| c.contains("COLLSCAN")));
    for word in ["sysctl", "/sys/", "/proc/", "systemctl", "ulimit"] {
        assert!(
            f.fix.commands.iter().all(|c| !c.contains(word)),
            "{:?}",
            f.fix.commands
        );
    }
    assert!(f.fix.summary.contains("$indexStats") && f.fix.summary.contains("slow"));
    // Near miss, balanced: the healthy baseline examines what it returns.
    passed(&baseline_mongod(), "mongod.query_targeting");
    // Near miss, quiet: 999 documents examined a second, none returned, is
    // below the volume worth a DBA's time.
    passed(
        &with(&[
            ("metrics.queryExecutor.scannedObjects", 0, 999),
            ("metrics.document.returned", 0, 0),
        ]),
        "mongod.query_targeting",
    );
    // Nothing returned at all while scanning 5000 a second still fires
    // (the ratio is taken against at least one document a second).
    fired(
        &with(&[
            ("metrics.queryExecutor.scannedObjects", 0, 5_000),
            ("metrics.document.returned", 0, 0),
        ]),
        "mongod.query_targeting",
    );
    // Old FTDC without the figures: not assessed, never passed.
    let mut old = baseline_mongod();
    for s in &mut old.slices {
        let st = s.mongod.as_mut().unwrap().status.as_mut().unwrap();
        st.query_scanned_objects = None;
        st.docs_returned = None;
    }
    super::not_assessed(&old, "mongod.query_targeting");
}

#[test]
fn flow_control_needs_a_lagging_commit_point_and_writers_waiting() {
    // Lagged in every sample, writes waiting 400 ms a second in total.
    let throttled = with(&[
        ("flowControl.isLagged", 1, 0),
        ("flowControl.timeAcquiringMicros", 0, 400_000),
    ]);
    let f = fired(&throttled, "mongod.flow_control");
    assert_eq!(
        num(
            &f,
            "writes waited for flow-control tickets (ms per second, summed)"
        ),
        400.0
    );
    assert_eq!(
        num(&f, "samples with the majority commit point lagging"),
        100.0
    );
    assert!(f.fix.commands.is_empty(), "{:?}", f.fix.commands);
    assert!(f.fix.summary.contains("Do not disable flow control"));
    // Balanced: the healthy baseline, a few µs of ticket time.
    passed(&baseline_mongod(), "mongod.flow_control");
    // Near miss: lagged, yet writes waited 20 ms a second.
    passed(
        &with(&[
            ("flowControl.isLagged", 1, 0),
            ("flowControl.timeAcquiringMicros", 0, 20_000),
        ]),
        "mongod.flow_control",
    );
    // A standalone (no flowControl section): not assessed.
    let mut standalone = baseline_mongod();
    for s in &mut standalone.slices {
        let st = s.mongod.as_mut().unwrap().status.as_mut().unwrap();
        st.flow_control_acquiring_us = None;
        st.flow_control_lagged = None;
    }
    super::not_assessed(&standalone, "mongod.flow_control");
}

#[test]
fn operations_queued_for_tickets_fire_and_a_short_wait_does_not() {
    // 8.0's queues.execution: writes waited 300 ms a second, reads 50.
    let queued = with(&[
        (
            "queues.execution.write.normalPriority.totalTimeQueuedMicros",
            0,
            300_000,
        ),
        (
            "queues.execution.read.normalPriority.totalTimeQueuedMicros",
            0,
            50_000,
        ),
    ]);
    let f = fired(&queued, "mongod.admission_queue");
    assert_eq!(
        num(&f, "operations waited for tickets (ms per second, summed)"),
        350.0
    );
    assert_eq!(num(&f, "of which writes"), 300.0);
    assert!(f.fix.commands.is_empty(), "{:?}", f.fix.commands);
    assert!(f.fix.summary.contains("Do not raise the ticket limits"));
    // 7.0's wiredTiger.concurrentTransactions, low priority included.
    let mut seven = baseline_mongod();
    for (i, s) in seven.slices.iter_mut().enumerate() {
        let st = s.mongod.as_mut().unwrap().status.as_mut().unwrap();
        st.admission_read_low_queued_us = Some(i as i64 * 200_000);
    }
    fired(&seven, "mongod.admission_queue");
    // Balanced: the baseline, no wait.
    passed(&baseline_mongod(), "mongod.admission_queue");
    // Near miss: 30 ms a second of waiting.
    passed(
        &with(&[(
            "queues.execution.write.normalPriority.totalTimeQueuedMicros",
            0,
            30_000,
        )]),
        "mongod.admission_queue",
    );
    // 6.0 and earlier report no queue time: not assessed.
    let mut six = baseline_mongod();
    for s in &mut six.slices {
        let st = s.mongod.as_mut().unwrap().status.as_mut().unwrap();
        st.admission_read_queued_us = None;
        st.admission_write_queued_us = None;
    }
    super::not_assessed(&six, "mongod.admission_queue");
}

#[test]
fn journal_syncs_slow_on_average_fire_and_a_quick_journal_passes() {
    // 10 syncs a second of 45 ms each.
    let slow = with(&[
        ("wiredTiger.log.log sync operations", 0, 10),
        ("wiredTiger.log.log sync time duration (usecs)", 0, 450_000),
    ]);
    let f = fired(&slow, "storage.journal_sync");
    assert_eq!(num(&f, "journal sync, mean time (ms)"), 45.0);
    assert_eq!(num(&f, "journal syncs per second"), 10.0);
    assert!(f.fix.commands.is_empty(), "{:?}", f.fix.commands);
    // Balanced: 0.5 ms syncs.
    passed(&baseline_mongod(), "storage.journal_sync");
    // Near miss, idle: one slow sync in the whole recording.
    let mut idle = with(&[
        ("wiredTiger.log.log sync operations", 0, 0),
        ("wiredTiger.log.log sync time duration (usecs)", 0, 0),
    ]);
    let last = idle.slices.len() - 1;
    let st = idle.slices[last]
        .mongod
        .as_mut()
        .unwrap()
        .status
        .as_mut()
        .unwrap();
    st.journal_syncs = Some(1);
    st.journal_sync_us = Some(80_000);
    passed(&idle, "storage.journal_sync");
}

#[test]
fn a_failed_server_check_fires_and_the_applications_own_errors_do_not() {
    // One massert a second, one regular assertion in the whole recording.
    let mut rec = with(&[("asserts.msg", 10, 1)]);
    let last = rec.slices.len() - 1;
    for (i, s) in rec.slices.iter_mut().enumerate() {
        let st = s.mongod.as_mut().unwrap().status.as_mut().unwrap();
        st.asserts_regular = Some(if i == last { 4 } else { 3 });
    }
    let f = fired(&rec, "mongod.asserts");
    let msg = i64::try_from(last).unwrap();
    assert_eq!(txt(&f, "msg (massert)"), msg.to_string());
    assert_eq!(txt(&f, "regular (verify)"), "1");
    assert_eq!(txt(&f, "tripwire (tassert)"), "0");
    assert_eq!(
        num(&f, "server assertions raised in the recording"),
        (msg + 1) as f64
    );
    assert_eq!(num(&f, "user assertions per second"), 2.0);
    assert!(f.fix.commands.iter().all(|c| c.contains("getLog")));
    // Balanced: the baseline's three old regular assertions, none new.
    passed(&baseline_mongod(), "mongod.asserts");
    // Near miss: 500 user assertions a second (duplicate keys) alone.
    passed(&with(&[("asserts.user", 0, 500)]), "mongod.asserts");
    // A rollover: every counter back to 0 when user reached 2^30; the old
    // regular assertions are not counted again.
    let mut rolled = baseline_mongod();
    for (i, s) in rolled.slices.iter_mut().enumerate() {
        let st = s.mongod.as_mut().unwrap().status.as_mut().unwrap();
        if i >= 4 {
            st.asserts_regular = Some(0);
            st.asserts_user = Some(i as i64);
        }
    }
    passed(&rolled, "mongod.asserts");
    // A server that reports no asserts: not assessed.
    let mut old = baseline_mongod();
    for s in &mut old.slices {
        let st = s.mongod.as_mut().unwrap().status.as_mut().unwrap();
        st.asserts_regular = None;
        st.asserts_msg = None;
        st.asserts_tripwire = None;
        st.asserts_user = None;
    }
    super::not_assessed(&old, "mongod.asserts");
}

/// The healthy mongod, reporting `version`.
fn running(version: &str) -> crate::recording::Recording {
    let mut rec = baseline_mongod();
    let info = rec.mongod.as_mut().unwrap().info.as_mut().unwrap();
    info.version = Some(version.into());
    rec
}

#[test]
fn a_release_series_past_its_end_of_life_is_a_checklist_item() {
    // Recorded on 2 March 2026: 6.0 ended on 31 July 2025.
    let f = fired(&running("6.0.5"), "mongod.end_of_life");
    assert_eq!(f.class, crate::findings::RuleClass::Checklist);
    assert_eq!(txt(&f, "release series"), "6.0");
    assert_eq!(
        txt(&f, "end of life (MongoDB's lifecycle schedule)"),
        "2025-07-31"
    );
    assert!(f.fix.commands.is_empty(), "{:?}", f.fix.commands);
    // Near misses: 7.0 (until August 2027) and the baseline's 8.2.1.
    passed(&running("7.0.14"), "mongod.end_of_life");
    passed(&baseline_mongod(), "mongod.end_of_life");
    // The day before 6.0's end: still supported.
    let mut before = running("6.0.5");
    before.started_at = "2025-07-31T12:00:00Z".parse().unwrap();
    passed(&before, "mongod.end_of_life");
    // A rapid release the schedule has no date for: nothing guessed.
    let report = super::report(&running("6.3.2"));
    let p = report
        .passed
        .iter()
        .find(|p| p.rule_id == "mongod.end_of_life")
        .expect("passed");
    let eol = p
        .evidence
        .iter()
        .find(|e| e.label == "end of life (MongoDB's lifecycle schedule)")
        .expect("evidence");
    assert_eq!(
        eol.value,
        crate::findings::EvidenceValue::Text("not in the schedule".into())
    );
}

fn baseline_mongod() -> crate::recording::Recording {
    with(&[])
}

/// The healthy mongod running `version`, its FCV `fcv` (and `target` while
/// a change of it is unfinished).
fn with_fcv(version: &str, fcv: &str, target: Option<&str>) -> crate::recording::Recording {
    let mut rec = running(version);
    let info = rec.mongod.as_mut().unwrap().info.as_mut().unwrap();
    info.fcv = Some(fcv.into());
    info.fcv_target = target.map(Into::into);
    rec
}

#[test]
fn a_feature_compatibility_version_behind_the_binary_is_a_checklist_item() {
    // Upgraded to 6.0, FCV left at 5.0: the fix sets 6.0 (no confirm
    // before 7.0), the revert the recorded 5.0.
    let f = fired(
        &with_fcv("6.0.5", "5.0", None),
        "mongod.feature_compatibility",
    );
    assert_eq!(f.class, crate::findings::RuleClass::Checklist);
    assert_eq!(txt(&f, "feature compatibility version"), "5.0");
    assert_eq!(txt(&f, "release series of the binary"), "6.0");
    assert_eq!(txt(&f, "targetVersion"), "none");
    let set = "--eval 'db.adminCommand({setFeatureCompatibilityVersion: \"6.0\"})'";
    assert!(fix_has(&f, set), "{:?}", f.fix.commands);
    assert!(
        f.fix
            .revert
            .iter()
            .any(|c| c.contains("setFeatureCompatibilityVersion: \"5.0\"})'")),
        "{:?}",
        f.fix.revert
    );
    // From 7.0 the command asks for confirm: true, the revert too.
    let f = fired(
        &with_fcv("8.2.1", "8.0", None),
        "mongod.feature_compatibility",
    );
    assert!(
        fix_has(&f, "\"8.2\", confirm: true})'"),
        "{:?}",
        f.fix.commands
    );
    assert!(
        f.fix
            .revert
            .iter()
            .any(|c| c.contains("\"8.0\", confirm: true"))
    );
    // An upgrade of the FCV interrupted half way.
    let f = fired(
        &with_fcv("6.0.5", "5.0", Some("6.0")),
        "mongod.feature_compatibility",
    );
    assert_eq!(txt(&f, "targetVersion"), "6.0");
    // Balanced: the baseline (8.2.1 at FCV 8.2), and 6.0.5 at 6.0.
    passed(&baseline_mongod(), "mongod.feature_compatibility");
    passed(
        &with_fcv("6.0.5", "6.0", None),
        "mongod.feature_compatibility",
    );
    // Not read (FTDC holds no FCV): not assessed.
    let mut ftdc = baseline_mongod();
    ftdc.mongod.as_mut().unwrap().info.as_mut().unwrap().fcv = None;
    super::not_assessed(&ftdc, "mongod.feature_compatibility");
}
