//! The golden scenarios of [`super::golden`] as recording files, committed in
//! `agent/testdata/recordings/`: real inputs for the CLI, so that `mdiag
//! explain FILE` can be run on them by every build (the `cross` tier runs the
//! aarch64 and s390x binaries on them under qemu-user and compares their
//! output with x86_64's byte for byte), and a check that recordings written
//! by an earlier mdiag of the same format version still read back exactly.
//!
//! The test fails when a file no longer decodes to its scenario (the model or
//! the scenario changed): rewrite them with
//! `MDIAG_UPDATE_RECORDINGS=1 cargo test -p mdiag --lib report::golden_recordings`
//! and commit the files with the change.
//!
//! `testdata/recordings/v1/` keeps the same scenarios as written by mdiag
//! before the stream layout (format version 1, one frame, one document):
//! never rewritten, they must read back as the scenarios still do, and
//! explain to the same report.

use std::path::PathBuf;

use super::golden::{baseline_with_alloc_windows, busy, probe_failures};
use crate::recording::io::{read_file, write_atomic};
use crate::recording::model::Recording;

/// (file stem, scenario).
fn scenarios() -> [(&'static str, Recording); 3] {
    [
        ("baseline", baseline_with_alloc_windows()),
        ("busy", busy()),
        ("probe-failures", probe_failures()),
    ]
}

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testdata/recordings")
}

/// The scenario as a version 1 file can hold it: without the facts
/// recorded since (what shares the host with mongod, how well queries are
/// targeted, flow control and the journal's syncs, tickets' queues, assertions, members' delays, the
/// feature compatibility version).
fn without_newer_facts(r: &mut Recording) {
    for slice in &mut r.slices {
        if let Some(st) = slice.mongod.as_mut().and_then(|m| m.status.as_mut()) {
            st.query_scanned_keys = None;
            st.query_scanned_objects = None;
            st.query_collection_scans = None;
            st.docs_returned = None;
            st.scan_and_order = None;
            st.flow_control_acquiring_us = None;
            st.flow_control_lagged = None;
            st.journal_syncs = None;
            st.journal_sync_us = None;
            st.asserts_regular = None;
            st.admission_read_queued_us = None;
            st.admission_read_low_queued_us = None;
            st.admission_write_queued_us = None;
            st.admission_write_low_queued_us = None;
            st.asserts_msg = None;
            st.asserts_tripwire = None;
            st.asserts_user = None;
        }
        if let Some(repl) = slice.mongod.as_mut().and_then(|m| m.repl.as_mut()) {
            for m in &mut repl.members {
                m.delay_s = None;
            }
        }
    }
    if let Some(info) = r.mongod.as_mut().and_then(|m| m.info.as_mut()) {
        info.fcv = None;
        info.fcv_target = None;
    }
    if let Some(s) = r.host.system.as_mut() {
        s.other_anon_bytes = None;
        s.largest_others = None;
        s.kubernetes_node = None;
    }
}

#[test]
fn version_1_recordings_still_read_and_explain_the_same() {
    let rules = crate::rules::RuleSet::builtin().expect("builtin rules");
    for (name, mut scenario) in scenarios() {
        without_newer_facts(&mut scenario);
        let path = dir().join("v1").join(format!("{name}.mdiag"));
        let first = std::fs::read(&path).expect("a version 1 file");
        // One frame holding one document, as version 1 was written.
        assert!(
            zstd::decode_all(&first[..])
                .expect("one zstd frame")
                .starts_with(b"{\"format\""),
            "{} is not a version 1 file",
            path.display()
        );
        let read = read_file(&path).unwrap_or_else(|e| panic!("{e}"));
        let report = |r: &Recording| {
            let mut report = crate::explain::explain(r, &rules, None, None).expect("explained");
            report.recording.format_version = 0;
            crate::report::json::render(&report).expect("rendered")
        };
        assert_eq!(report(&read), report(&scenario), "{name}");
        scenario.version = 1;
        assert!(read == scenario, "{} no longer reads back", path.display());
    }
}

#[test]
fn committed_recordings_are_the_golden_scenarios() {
    let update = std::env::var_os("MDIAG_UPDATE_RECORDINGS").is_some_and(|v| v == "1");
    for (name, scenario) in scenarios() {
        let path = dir().join(format!("{name}.mdiag"));
        if update {
            std::fs::create_dir_all(dir()).expect("create testdata/recordings");
            write_atomic(&scenario, &path).expect("write the recording");
        }
        let read = read_file(&path).unwrap_or_else(|e| {
            panic!(
                "{e}; write it with MDIAG_UPDATE_RECORDINGS=1 cargo test -p mdiag --lib \
                 report::golden_recordings"
            )
        });
        assert!(
            read == scenario,
            "{} no longer reads back as the {name} scenario; if the change is intended, \
             rewrite it with MDIAG_UPDATE_RECORDINGS=1 cargo test -p mdiag --lib \
             report::golden_recordings",
            path.display()
        );
    }
}
