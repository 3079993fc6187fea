//! JSON rendering of a [`Report`]: the machine-readable contract.
//!
//! The shape is the serde form of [`Report`], documented field by field in
//! `docs/report-json.md`; this module only pretty-prints it, so that what
//! tools parse is exactly the data the other renderers show.

use super::Report;

/// Why the report could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    #[error("cannot write the report as JSON: {0}")]
    Serialize(#[from] serde_json::Error),
}

/// The report as pretty-printed JSON, ending with a newline.
pub fn render(report: &Report) -> Result<String, JsonError> {
    let mut s = serde_json::to_string_pretty(report)?;
    s.push('\n');
    Ok(s)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::Value;

    use super::*;
    use crate::explain::explain;
    use crate::rules::{RuleSet, testdata};

    fn keys(v: &Value) -> BTreeSet<&str> {
        v.as_object()
            .unwrap_or_else(|| panic!("not an object: {v}"))
            .keys()
            .map(String::as_str)
            .collect()
    }

    fn set<'a>(k: &[&'a str]) -> BTreeSet<&'a str> {
        k.iter().copied().collect()
    }

    fn rendered(rec: &crate::recording::model::Recording) -> Value {
        let report = explain(
            rec,
            &crate::rules::testdata::sched_rule_only(),
            Some("s390x"),
            Some("db1.mdiag".into()),
        )
        .unwrap();
        let text = render(&report).unwrap();
        assert!(text.ends_with("}\n"));
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    #[allow(
        clippy::too_many_lines,
        reason = "the contract: every key of the JSON report listed in one place"
    )]
    fn json_has_exactly_the_contract_keys() {
        let v = rendered(&testdata::oversubscribed());
        assert_eq!(
            keys(&v),
            set(&[
                "report_version",
                "mdiag_version",
                "architecture",
                "architecture_overridden",
                "checklist",
                "startup_warnings",
                "recording",
                "rules",
                "findings",
                "not_assessed",
                "not_applicable",
                "passed",
                "probes",
                "facts",
                // Added within version 1 (docs/report-json.md).
                "measurements",
            ])
        );
        assert_eq!(v["report_version"], 1);
        assert_eq!(v["architecture"], "s390x");

        let rec = &v["recording"];
        assert_eq!(
            keys(rec),
            set(&[
                "source",
                "format_version",
                "written_by",
                "started_at",
                "ended_at",
                "duration_s",
                "requested_duration_s",
                "stop_reason",
                "slices",
                "host",
                "target",
                "host_wide",
            ])
        );
        assert_eq!(rec["source"], "db1.mdiag");
        assert_eq!(rec["started_at"], "2026-03-02T10:00:00Z");
        assert_eq!(rec["host_wide"], false);
        assert_eq!(rec["target"]["comm"], "mongod");
        assert_eq!(
            keys(&rec["host"]),
            set(&[
                "hostname",
                "kernel_release",
                "kernel_version",
                "arch",
                "cpu_count",
                "cpu_model",
                "sched_features",
            ])
        );

        let f = &v["findings"][0];
        assert_eq!(
            keys(f),
            set(&[
                "rule_id",
                "rank",
                "title",
                "severity",
                "score",
                "architecture",
                "rank_reason",
                "confidence",
                "arch_prior",
                "impact",
                "summary",
                "evidence",
                "fix",
                "references",
                // Added within version 1 (docs/report-json.md).
                "missing",
                "class",
                "mongod_warns",
                "checklist",
            ])
        );
        assert_eq!(f["rule_id"], "sched.wakeup_preemption");
        assert_eq!(f["rank"], 1);
        assert_eq!(f["severity"], "high");
        assert_eq!(f["architecture"], "s390x");
        assert!(f["score"].is_f64());
        assert!(f["evidence"]["threads observed"].is_i64());
        assert_eq!(
            keys(&f["fix"]),
            set(&["summary", "commands", "revert", "risk", "verify"])
        );
        assert!(f["fix"]["commands"][0].is_string());
        assert_eq!(keys(&f["references"][0]), set(&["title", "url"]));
        assert_eq!(keys(&f["impact"]), set(&["expected", "score", "source"]));

        let p = &v["probes"][0];
        assert_eq!(
            keys(p),
            set(&["family", "attached", "programs", "drops", "left_out"])
        );
        assert_eq!(p["family"], "sched");
        assert_eq!(p["attached"], true);
        assert_eq!(
            keys(&p["programs"][0]),
            set(&["name", "attach_point", "attached", "error"])
        );
        assert_eq!(
            keys(&p["drops"]),
            set(&["thread_map_full", "wakeup_map_full", "read_failed", "total"])
        );
        assert_eq!(keys(&v["rules"]), set(&["source", "count"]));
    }

    #[test]
    fn host_wide_target_is_null_and_not_assessed_has_reasons() {
        let mut rec = testdata::oversubscribed();
        rec.target = None;
        rec.probes.clear();
        let v = rendered(&rec);
        assert_eq!(v["recording"]["target"], Value::Null);
        assert_eq!(v["recording"]["host_wide"], true);
        assert_eq!(v["findings"], Value::Array(vec![]));
        let na = &v["not_assessed"][0];
        assert_eq!(keys(na), set(&["rule_id", "title", "reason"]));
        assert!(
            na["reason"]
                .as_str()
                .unwrap()
                .contains("not part of this recording")
        );
    }

    #[test]
    fn measurements_are_structured_and_facts_carry_the_new_groups() {
        let v = rendered(&crate::family::softirq::testdata::net_rx_on_cpu0());
        let m = &v["measurements"];
        // Its keys are those of `docs/report-json.md`: `report/contract.rs`.
        for family in [
            "syscalls",
            "rseq",
            "perf",
            "wiredtiger",
            "contention",
            "mongod",
        ] {
            assert_eq!(m[family], Value::Null, "{family}");
        }
        assert_eq!(m["not_recorded"], Value::Array(vec![]));
        assert_eq!(m["sched"]["switches_per_s"], 1500.0);
        assert_eq!(m["sched"]["top_classes"][0]["class"], "conn");
        assert_eq!(m["sched"]["top_classes"][0]["threads"], 4);

        let s = &m["softirq"];
        assert_eq!(s["cpu_count"], 4);
        assert_eq!(s["vectors"][0]["name"], "NET_RX");
        assert_eq!(s["vectors"][0]["time_ms_per_s"], 350.0);
        assert_eq!(s["cpus"][1]["cpu"], 1);
        assert_eq!(s["cpus"][1]["time_ms_per_s"][0], 20.0);
        assert_eq!(s["other_cpus"], Value::Null);
        assert_eq!(s["net_rx_busiest_cpu"], 0);
        assert_eq!(s["net_rx_time_share_of_cpu"], 0.3);
        assert_eq!(s["top_hardirqs"][0]["name"], "eth0-TxRx-0");
        assert_eq!(s["drops"]["total"], 3);

        assert_eq!(m["net"]["rps_enabled"], false);
        assert_eq!(m["net"]["rfs_enabled"], true);
        assert_eq!(m["net"]["interfaces"][0]["name"], "eth0");
        assert_eq!(m["net"]["interfaces"][0]["rx_queues"], 4);

        let imbalance = v["facts"]["softirq"]["net_rx_imbalance"].as_f64().unwrap();
        assert!((imbalance - 300.0 / 87.5).abs() < 1e-9, "{imbalance}");
        assert_eq!(v["facts"]["net"]["rps_enabled"], false);
        assert_eq!(v["facts"]["net"]["rx_queues"], 6);
        assert_eq!(v["facts"]["host"]["net_readable"], true);
    }

    #[test]
    fn reports_without_measurements_still_parse() {
        // A report written before `measurements` existed.
        let report = explain(
            &testdata::oversubscribed(),
            &RuleSet::builtin().unwrap(),
            None,
            None,
        )
        .unwrap();
        let mut v: Value = serde_json::from_str(&render(&report).unwrap()).unwrap();
        v.as_object_mut().unwrap().remove("measurements");
        let back: Report = serde_json::from_value(v).unwrap();
        assert_eq!(back.measurements, crate::report::Measurements::default());
        // (Going through `Value` sorts object keys, so evidence order is not compared.)
        assert_eq!(back.findings[0].rule_id, "sched.wakeup_preemption");
        assert_eq!(back.probes, report.probes);
        assert_eq!(back.facts, report.facts);
        assert_ne!(report.measurements, back.measurements);
    }

    #[test]
    fn json_round_trips_into_report() {
        let report = explain(
            &testdata::oversubscribed(),
            &RuleSet::builtin().unwrap(),
            None,
            None,
        )
        .unwrap();
        let back: Report = serde_json::from_str(&render(&report).unwrap()).unwrap();
        assert_eq!(back, report);
    }
}
