//! Keeps `docs/report-json.md` and the JSON report in sync (test builds only).
//!
//! The JSON report is a contract other tools parse, and the document is where
//! they read it. These tests read the document itself: the field tables of
//! the top level, `recording`, `findings`, `probes`, `measurements` and its
//! tabled families must list exactly the fields the JSON has; every key the
//! JSON of the golden recordings holds must be named somewhere in the
//! document; and the example must be what `mdiag explain` prints for it
//! (texts shortened with "…" and left-out entries aside).

use std::collections::BTreeSet;

use serde_json::Value;

use super::golden::{baseline_with_alloc_windows, busy, probe_failures};
use super::json;
use crate::explain::explain;
use crate::rules::{RuleSet, testdata};

const DOC: &str = include_str!("../../../docs/report-json.md");

fn report_json(rec: &crate::recording::model::Recording) -> Value {
    let r = explain(rec, &RuleSet::builtin().expect("rules"), None, None).expect("explain");
    serde_json::from_str(&json::render(&r).expect("render")).expect("parse")
}

/// The field names of each table of the document, by where the table sits in
/// the JSON ("" for the top level, "measurements.sched", ...).
fn documented_tables() -> Vec<(String, BTreeSet<String>)> {
    let mut tables: Vec<(String, BTreeSet<String>)> = Vec::new();
    let mut context = String::new();
    let mut in_table = false;
    for line in DOC.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            context = match h.trim() {
                "Top level" => String::new(),
                other => other.trim_matches('`').to_string(),
            };
            in_table = false;
        } else if let Some(family) = line.strip_suffix(':').and_then(|l| {
            l.strip_prefix('`')
                .and_then(|l| l.strip_suffix('`'))
                .filter(|l| !l.contains(' '))
        }) {
            // "`sched`:" introduces the table of a measurements family.
            context = format!("measurements.{family}");
            in_table = false;
        } else if line.starts_with("| Field |") {
            tables.push((context.clone(), BTreeSet::new()));
            in_table = true;
        } else if in_table && line.starts_with("| `") {
            let first = line.split('|').nth(1).unwrap_or_default();
            let names = first
                .split(',')
                .map(|n| n.trim().trim_matches('`').to_string());
            if let Some((_, set)) = tables.last_mut() {
                set.extend(names);
            }
        } else if !line.starts_with('|') {
            in_table = false;
        }
    }
    tables
}

/// The object at `path` ("findings" → the first finding).
fn at<'a>(v: &'a Value, path: &str) -> &'a Value {
    let mut v = v;
    for part in path.split('.').filter(|p| !p.is_empty()) {
        v = &v[part];
        if let Value::Array(items) = v {
            v = items.first().unwrap_or(&Value::Null);
        }
    }
    v
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn field_tables_list_exactly_the_json_fields() {
    let v = report_json(&busy());
    let tables = documented_tables();
    let paths: Vec<&str> = tables.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "",
            "recording",
            "findings",
            "probes",
            "measurements",
            "measurements.sched",
            "measurements.softirq",
            "measurements.syscalls",
            "measurements.perf",
        ],
        "the tables of docs/report-json.md"
    );
    for (path, documented) in &tables {
        let object = at(&v, path);
        assert!(object.is_object(), "{path:?} is not an object in {v:#}");
        let present = keys(object);
        let undocumented: Vec<_> = present.difference(documented).collect();
        let missing: Vec<_> = documented.difference(&present).collect();
        assert!(
            undocumented.is_empty() && missing.is_empty(),
            "docs/report-json.md, table of {path:?}: fields in the JSON but not in the table \
             {undocumented:?}; in the table but not in the JSON {missing:?}"
        );
    }
}

/// A recording with only some families still has every documented
/// measurements field (the others null), so tools can rely on the keys; the
/// list is the document's, not repeated here, so a new family is one row there.
#[test]
fn measurements_of_a_partial_recording_have_every_documented_field() {
    let v = report_json(&crate::family::softirq::testdata::net_rx_on_cpu0());
    let documented = documented_tables()
        .into_iter()
        .find_map(|(path, fields)| (path == "measurements").then_some(fields))
        .expect("docs/report-json.md has a table of measurements");
    assert_eq!(keys(&v["measurements"]), documented);
    assert!(documented.contains("sched") && documented.contains("not_recorded"));
}

/// Every object key under `v`, except inside maps whose keys are data
/// (facts, evidence labels, opcounter kinds).
fn all_keys(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(o) => {
            for (k, child) in o {
                out.insert(k.clone());
                if !["facts", "evidence", "ops", "ops_per_s"].contains(&k.as_str()) {
                    all_keys(child, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| all_keys(i, out)),
        _ => {}
    }
}

#[test]
fn every_json_key_is_named_in_the_document() {
    let mut found = BTreeSet::new();
    for rec in [baseline_with_alloc_windows(), busy(), probe_failures()] {
        all_keys(&report_json(&rec), &mut found);
    }
    let unnamed: Vec<_> = found
        .iter()
        .filter(|k| !DOC.contains(&format!("`{k}`")) && !DOC.contains(&format!("\"{k}\"")))
        .collect();
    assert!(
        unnamed.is_empty(),
        "keys of the JSON report that docs/report-json.md does not name: {unnamed:?}"
    );
}

/// The JSON example of the document.
fn documented_example() -> Value {
    let start = DOC.find("## Example").expect("an Example section");
    let rest = &DOC[start..];
    let open = rest.find("```json\n").expect("a json block") + "```json\n".len();
    let close = rest[open..].find("\n```").expect("the block's end");
    serde_json::from_str(&rest[open..open + close]).expect("the example is valid JSON")
}

/// `doc` says no more than `actual`: every key it has exists with the same
/// value, except texts shortened with "…" and "…" placeholder keys; arrays
/// may be shorter.
fn agrees(doc: &Value, actual: &Value, path: &str, problems: &mut Vec<String>) {
    match (doc, actual) {
        (Value::Object(d), Value::Object(a)) => {
            for (k, dv) in d {
                if k == "…" {
                    continue;
                }
                match a.get(k) {
                    Some(av) => agrees(dv, av, &format!("{path}.{k}"), problems),
                    None => problems.push(format!("{path}.{k}: not in the JSON")),
                }
            }
        }
        (Value::Array(d), Value::Array(a)) => {
            if d.len() > a.len() {
                problems.push(format!(
                    "{path}: {} entries, the JSON has {}",
                    d.len(),
                    a.len()
                ));
            }
            for (i, (dv, av)) in d.iter().zip(a).enumerate() {
                agrees(dv, av, &format!("{path}[{i}]"), problems);
            }
        }
        (Value::String(d), Value::String(_)) if d.contains('…') => {}
        (Value::Number(d), Value::Number(a)) => {
            let (d, a) = (
                d.as_f64().unwrap_or(f64::NAN),
                a.as_f64().unwrap_or(f64::NAN),
            );
            if (d - a).abs() > 1e-9 * a.abs().max(1.0) {
                problems.push(format!("{path}: the document says {d}, the JSON has {a}"));
            }
        }
        (d, a) if d != a => {
            problems.push(format!("{path}: the document says {d}, the JSON has {a}"))
        }
        _ => {}
    }
}

#[test]
fn the_example_is_what_explain_prints() {
    // As the example says: the 4-thread, 2-CPU recording ranked for s390x
    // with the sched rule, read from db1.mdiag.
    let r = explain(
        &testdata::oversubscribed(),
        &testdata::sched_rule_only(),
        Some("s390x"),
        Some("db1.mdiag".into()),
    )
    .expect("explain");
    let actual: Value = serde_json::from_str(&json::render(&r).expect("render")).expect("parse");
    let mut problems = Vec::new();
    agrees(&documented_example(), &actual, "", &mut problems);
    assert!(
        problems.is_empty(),
        "the example in docs/report-json.md disagrees with the report:\n{}\n\nthe report:\n{actual:#}",
        problems.join("\n")
    );
}
