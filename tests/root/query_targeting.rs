//! `mongod.query_targeting` on the real mongod 6.0.5: a load of queries on
//! an unindexed field (each a collection scan of 5000 documents returning
//! one) fires it, with the ratio mongod's own serverStatus shows for the
//! same seconds (read by the test through the driver, outside mdiag), and
//! the same queries once the field is indexed (about one document examined
//! per document returned) pass it. The same report lists the server's
//! release series (6.0, past its end of life) as a checklist item, with
//! the version mongod's own buildInfo gives; and its feature compatibility
//! version, set to 5.0 by the test before the first recording (as after an
//! upgrade from 5.0), as a checklist item whose fix, issued through the
//! driver, raises it to 6.0, after which the item passes.

use bson::{Document, doc};
use mdiag_tests::{mongod::Mongod, require_root, run_mdiag, start_record_until};

/// Documents in the collection: what each unindexed query examines.
const DOCS: i64 = 5000;

/// Documents examined and returned since mongod started, from its
/// serverStatus.
fn examined_returned(server: &Mongod) -> (i64, i64) {
    let s = server.server_status();
    let metrics = s.get_document("metrics").expect("serverStatus.metrics");
    let n = |d: &Document, k: &str| match d.get(k) {
        Some(bson::Bson::Int64(v)) => *v,
        Some(bson::Bson::Int32(v)) => i64::from(*v),
        other => panic!("{k}: {other:?}"),
    };
    (
        n(
            metrics.get_document("queryExecutor").unwrap(),
            "scannedObjects",
        ),
        n(metrics.get_document("document").unwrap(), "returned"),
    )
}

/// Records `server` for 12 s while one client runs `find({x: k})` queries
/// back to back; returns explain's JSON and mongod's own (examined,
/// returned) over the same queries.
fn record_queries(server: &Mongod) -> (serde_json::Value, f64) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("qt.mdiag");
    let (mut child, stderr) = start_record_until(
        &[
            "--duration",
            "12s",
            "--uri",
            &server.uri(),
            "-o",
            out.to_str().unwrap(),
        ],
        &["probes attached", "mongod answers serverStatus"],
    );
    let before = examined_returned(server);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let uri = format!("{}/?directConnection=true", server.uri());
    let queries = rt.block_on(async {
        let client = mongodb::Client::with_uri_str(&uri).await.unwrap();
        let docs = client.database("qt").collection::<Document>("docs");
        let mut queries = 0_i64;
        // Until the recording ends (its own clock), not for a guessed time.
        while child.try_wait().unwrap().is_none() {
            let k = queries % DOCS;
            let found = docs.find_one(doc! { "x": k }).await.unwrap();
            assert!(found.is_some(), "x = {k} not found");
            queries += 1;
        }
        client.shutdown().await;
        queries
    });
    let after = examined_returned(server);
    let o = child.wait_with_output().unwrap();
    let err = stderr.join().unwrap();
    assert!(o.status.success(), "mdiag record failed: {err}");
    assert!(queries >= 10, "only {queries} queries ran");
    let truth = (after.0 - before.0) as f64 / ((after.1 - before.1).max(1)) as f64;
    let json = run_mdiag(&["explain", out.to_str().unwrap(), "--format", "json"]);
    assert!(json.status.success());
    (serde_json::from_slice(&json.stdout).unwrap(), truth)
}

#[test]
fn a_scanning_load_fires_query_targeting_with_mongods_own_ratio() {
    let _serial = mdiag_tests::serial();
    require_root();
    let server = Mongod::start();
    // 5000 documents, x = 0..4999, no index on x.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let uri = format!("{}/?directConnection=true", server.uri());
    rt.block_on(async {
        let client = mongodb::Client::with_uri_str(&uri).await.unwrap();
        let docs = client.database("qt").collection::<Document>("docs");
        let batch: Vec<Document> = (0..DOCS).map(|x| doc! { "x": x, "pad": "p" }).collect();
        docs.insert_many(batch).await.unwrap();
        client.shutdown().await;
    });

    // As after an upgrade from 5.0: the FCV one release behind.
    server.command(doc! { "setFeatureCompatibilityVersion": "5.0" });
    let (r, truth) = record_queries(&server);
    // mongod's own ratio over the queries: a scan of every document for one.
    assert!(truth > 1000.0, "mongod's own ratio {truth}");
    let f = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule_id"] == "mongod.query_targeting")
        .unwrap_or_else(|| panic!("no query_targeting finding: {:#}", r["passed"]));
    let ratio = f["evidence"]["documents examined per document returned"]
        .as_f64()
        .unwrap();
    // The same queries fill both windows (mdiag's is the recording's, the
    // test's a little wider): the ratios agree.
    assert!(
        (ratio / truth - 1.0).abs() < 0.2,
        "mdiag {ratio} against mongod's {truth}"
    );
    // The DBA is sent to the queries, not the kernel.
    let commands = f["fix"]["commands"].to_string();
    assert!(
        commands.contains("COLLSCAN") && !commands.contains("sysctl"),
        "{commands}"
    );

    // The server's release series against MongoDB's lifecycle schedule:
    // mongod itself says which version it is (buildInfo); 6.0 reached its
    // end of life on 31 July 2025 (MongoDB's Software Lifecycle Schedules),
    // before any recording of this test: a checklist item, not a finding.
    let version = server
        .command(doc! { "buildInfo": 1 })
        .get_str("version")
        .unwrap()
        .to_owned();
    assert!(
        version.starts_with("6.0."),
        "the project's mongod: {version}"
    );
    let eol = r["checklist"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule_id"] == "mongod.end_of_life")
        .unwrap_or_else(|| panic!("no end-of-life item: {:#}", r["checklist"]));
    assert_eq!(eol["evidence"]["version"], version.as_str());
    assert_eq!(eol["evidence"]["release series"], "6.0");
    assert!(
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["rule_id"] != "mongod.end_of_life"),
        "end of life ranked among the findings"
    );

    // The FCV: what mongod itself answers, then the fix's command.
    let fcv = |server: &Mongod| {
        server
            .command(doc! { "getParameter": 1, "featureCompatibilityVersion": 1 })
            .get_document("featureCompatibilityVersion")
            .unwrap()
            .clone()
    };
    assert_eq!(fcv(&server), doc! { "version": "5.0" });
    let item = r["checklist"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule_id"] == "mongod.feature_compatibility")
        .unwrap_or_else(|| panic!("no FCV item: {:#}", r["checklist"]));
    assert_eq!(item["evidence"]["feature compatibility version"], "5.0");
    assert_eq!(item["evidence"]["release series of the binary"], "6.0");
    let set = item["fix"]["commands"][0].as_str().unwrap();
    assert!(
        set.ends_with("--eval 'db.adminCommand({setFeatureCompatibilityVersion: \"6.0\"})'"),
        "{set}"
    );
    let revert = item["fix"]["revert"][0].as_str().unwrap();
    assert!(
        revert.contains("setFeatureCompatibilityVersion: \"5.0\""),
        "{revert}"
    );
    // The fix's command, through the driver (6.0 takes no confirm field).
    server.command(doc! { "setFeatureCompatibilityVersion": "6.0" });
    assert_eq!(fcv(&server), doc! { "version": "6.0" });

    // Near miss: the same queries with an index on x examine what they return.
    rt.block_on(async {
        let client = mongodb::Client::with_uri_str(&uri).await.unwrap();
        client
            .database("qt")
            .run_command(doc! {
                "createIndexes": "docs",
                "indexes": [{ "key": { "x": 1 }, "name": "x_1" }],
            })
            .await
            .unwrap();
        client.shutdown().await;
    });
    let (r, truth) = record_queries(&server);
    assert!(truth < 2.0, "mongod's own ratio with the index: {truth}");
    assert!(
        r["passed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["rule_id"] == "mongod.query_targeting"),
        "query_targeting did not pass with the index: findings {:#}",
        r["findings"]
    );
    // The FCV raised by the fix: the item passes.
    assert!(
        r["passed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["rule_id"] == "mongod.feature_compatibility"),
        "FCV item after the fix: {:#}",
        r["checklist"]
    );
}
