//! Scenario tests of the builtin rules: for every rule, a recording on which
//! it fires (with its evidence numbers checked) and near misses on which it
//! does not, plus a well-tuned baseline on which nothing of high severity
//! fires. The recordings are built in code from realistic values (the root
//! suite produces the sched, softirq and allocator ones by real runs).
//!
//! This module holds the shared scenario helpers (run the builtin rules on a
//! recording, find a finding and read its evidence) and the tests about the
//! rule set as a whole; the scenarios of each rule are in the submodule named
//! after its id's prefix (`allocator`, `host`, `memory`, `mongod`, `net`,
//! `replication`, `sched`, `storage`, `system`, `wiredtiger`).

mod allocator;
mod host;
mod memory;
mod mongod;
mod net;
mod replication;
mod sched;
mod storage;
mod system;
mod wiredtiger;

use crate::explain::explain;
use crate::findings::{EvidenceValue, Finding};
use crate::recording::model::{MemoryFacts, Recording};
use crate::report::Report;
use crate::rules::RuleSet;
use crate::rules::testdata::{self, baseline};

fn tuning(rec: &mut Recording) -> &mut MemoryFacts {
    rec.host.memory.as_mut().unwrap()
}

fn report(rec: &Recording) -> Report {
    explain(rec, &RuleSet::builtin().unwrap(), None, None).unwrap()
}

fn fired(rec: &Recording, id: &str) -> Finding {
    let r = report(rec);
    r.fired()
        .find(|f| f.rule_id == id)
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "{id} should fire; findings {:?}; not assessed {:?}",
                r.fired().map(|f| &f.rule_id).collect::<Vec<_>>(),
                r.not_assessed
            )
        })
}

fn passed(rec: &Recording, id: &str) {
    let r = report(rec);
    assert!(
        r.passed.iter().any(|p| p.rule_id == id),
        "{id} should be assessed and pass; findings {:?}; not assessed {:?}; not applicable {:?}",
        r.fired().map(|f| &f.rule_id).collect::<Vec<_>>(),
        r.not_assessed,
        r.not_applicable
    );
}

fn not_applicable(rec: &Recording, id: &str) -> String {
    let r = report(rec);
    r.not_applicable
        .iter()
        .find(|n| n.rule_id == id)
        .unwrap_or_else(|| panic!("{id} should be not applicable: {:?}", r.not_applicable))
        .reason
        .clone()
}

/// Why rule `id` was not assessed on `rec` (it must not have been).
fn not_assessed(rec: &Recording, id: &str) -> String {
    let r = report(rec);
    r.not_assessed
        .iter()
        .find(|n| n.rule_id == id)
        .unwrap_or_else(|| panic!("{id} should be not assessed: {:?}", r.not_assessed))
        .reason
        .clone()
}

/// Some fix command contains `needle`.
fn fix_has(f: &Finding, needle: &str) -> bool {
    f.fix.commands.iter().any(|c| c.contains(needle))
}

/// The value of the evidence labelled `label_part`, or else of the first
/// whose label contains it.
fn evidence<'a>(f: &'a Finding, label_part: &str) -> &'a EvidenceValue {
    let item = f
        .evidence
        .iter()
        .find(|e| e.label == label_part)
        .or_else(|| f.evidence.iter().find(|e| e.label.contains(label_part)))
        .unwrap_or_else(|| panic!("no evidence {label_part:?} in {:?}", f.evidence));
    &item.value
}

fn num(f: &Finding, label_part: &str) -> f64 {
    match evidence(f, label_part) {
        EvidenceValue::Float(v) => *v,
        EvidenceValue::Int(v) => *v as f64,
        other => panic!("not a number: {other:?}"),
    }
}

fn txt(f: &Finding, label_part: &str) -> String {
    match evidence(f, label_part) {
        EvidenceValue::Text(v) => v.clone(),
        other => format!("{other:?}"),
    }
}

#[test]
fn baseline_assesses_every_rule_and_fires_none() {
    let r = report(&baseline());
    assert!(
        r.fired().next().is_none(),
        "{:?}",
        r.fired().map(|f| &f.rule_id).collect::<Vec<_>>()
    );
    assert!(r.not_assessed.is_empty(), "{:?}", r.not_assessed);
    // Only the legacy-THP rule (gperftools) is not about this host.
    let na: Vec<_> = r
        .not_applicable
        .iter()
        .map(|n| n.rule_id.as_str())
        .collect();
    assert_eq!(na, ["memory.thp_legacy_tcmalloc"]);
    assert_eq!(
        r.passed.len(),
        RuleSet::builtin().unwrap().rules().len() - 1
    );
}

#[test]
fn unknown_settings_are_not_assessed_never_guessed() {
    let mut rec = baseline();
    tuning(&mut rec).vm.swappiness = None;
    let reason = not_assessed(&rec, "host.swappiness");
    assert!(reason.contains("swappiness"), "{reason}");
    rec.host.memory = None;
    let r = report(&rec);
    assert!(
        r.not_assessed
            .iter()
            .any(|n| n.rule_id == "memory.dirty_writeback"
                && n.reason.contains("memory settings were not recorded"))
    );
}

#[test]
fn optional_groups_are_empty_when_not_recorded() {
    let toml = testdata::rule_toml(
        "t.opt",
        "has(tuning.swappiness) && tuning.swappiness > 1",
        1.0,
        0.5,
        "",
    )
    .replace(
        "requires = [\"sched\"]",
        "requires = [\"sched\"]\noptional = [\"tuning\"]",
    );
    let rules = RuleSet::from_sources(
        crate::rules::RuleSource::Builtin,
        [("t.toml".into(), toml.clone())],
    )
    .unwrap();
    let quiet = explain(&testdata::near_miss(), &rules, None, None).unwrap();
    assert!(quiet.not_assessed.is_empty(), "{:?}", quiet.not_assessed);
    assert_eq!(quiet.passed.len(), 1);
    let mut rec = baseline();
    tuning(&mut rec).vm.swappiness = Some(60);
    let fired = explain(&rec, &rules, None, None).unwrap();
    assert_eq!(fired.findings.len(), 1);
    // Listing a group in both is an error naming it.
    let both = toml.replace("optional = [\"tuning\"]", "optional = [\"sched\"]");
    let err = RuleSet::from_sources(crate::rules::RuleSource::Builtin, [("t.toml".into(), both)])
        .unwrap_err()
        .to_string();
    assert!(err.contains("optional: \"sched\" is listed twice"), "{err}");
}

#[test]
fn mongod_rules_do_not_apply_to_another_process() {
    // A CPU spinner named `spin` recorded on a host with the same settings
    // that make the baseline's mongod rules fire.
    let mut rec = baseline();
    tuning(&mut rec).vm.swappiness = Some(60);
    rec.host.target_process.as_mut().unwrap().max_open_files =
        Some(crate::recording::model::ResourceLimit {
            soft: Some(1024),
            hard: Some(4096),
        });
    assert!(report(&rec).fired().any(|f| f.rule_id == "host.open_files"));
    if let Some(t) = rec.target.as_mut() {
        t.comm = "spin".into();
        t.exe = Some("/usr/local/bin/spin".into());
        t.cmdline = vec!["spin".into(), "6".into()];
    }
    let r = report(&rec);
    let rules = RuleSet::builtin().unwrap();
    for rule in rules.rules() {
        if rule.def.applies_to.target.as_deref() != Some("mongod") {
            continue;
        }
        let n = r
            .not_applicable
            .iter()
            .find(|n| n.rule_id == rule.id())
            .unwrap_or_else(|| panic!("{} should be not applicable for `spin`", rule.id()));
        assert!(
            n.reason
                .starts_with("about mongod's own settings; the target is `spin` (pid 1000"),
            "{}: {}",
            rule.id(),
            n.reason
        );
    }
    for id in [
        "host.open_files",
        "host.swappiness",
        "memory.thp_google_tcmalloc",
    ] {
        assert!(!r.fired().any(|f| f.rule_id == id), "{id} fired for spin");
    }
}

/// Rules whose text names mongod but that are not restricted to a mongod
/// target, each with why that is right.
const ABOUT_ANY_TARGET: &[(&str, &str)] = &[
    (
        "host.several_mongod",
        "about every mongod the host runs, whatever process was recorded",
    ),
    (
        "sched.cpu_oversubscribed",
        "the recorded process's CPU wait; mongod is named as the usual target",
    ),
    (
        "sched.cpu_saturation",
        "the recorded process's run-queue wait, host-wide too; it says \"mongod's, when it is the target\"",
    ),
    (
        "sched.wakeup_preemption",
        "the recorded process's threads, or the host's busy tasks host-wide",
    ),
];

/// Fact groups that only a mongod gives (its own serverStatus, FTDC,
/// replica-set status, system metrics) or that follow its WiredTiger
/// threads: a rule reading them is about a mongod whatever the target.
const MONGOD_GROUPS: &[&str] = &["mongod", "replication", "system", "contention"];

#[test]
fn every_rule_that_speaks_of_mongod_applies_to_a_mongod() {
    let rules = RuleSet::builtin().unwrap();
    for rule in rules.rules() {
        let def = &rule.def;
        let text = format!("{} {}", def.title, def.summary).to_lowercase();
        if !text.contains("mongod") {
            continue;
        }
        let restricted = def.applies_to.target.as_deref() == Some("mongod");
        let reads_mongod = def
            .requires
            .iter()
            .any(|g| MONGOD_GROUPS.contains(&g.as_str()));
        let allowed = ABOUT_ANY_TARGET.iter().any(|(id, _)| *id == rule.id());
        assert!(
            restricted || reads_mongod || allowed,
            "{} speaks of mongod but applies to any target: add `target = \"mongod\"`",
            rule.id()
        );
    }
}

#[test]
fn every_mongosh_of_a_fix_reaches_the_recorded_server() {
    // In every builtin rule, each `mongosh` is followed by the server's
    // connection arguments.
    for rule in RuleSet::builtin().unwrap().rules() {
        let fix = &rule.def.fix;
        let texts = fix
            .commands
            .iter()
            .chain(&fix.revert)
            .chain(std::iter::once(&fix.verify));
        for text in texts {
            for (i, _) in text.match_indices("mongosh") {
                if text[..i].ends_with("target.") {
                    continue; // the placeholder's own name
                }
                assert!(
                    text[i..].starts_with("mongosh {{target.mongosh_args}} "),
                    "{}: bare mongosh in {text:?}",
                    rule.id()
                );
            }
        }
    }
    // Filled in: the recorded URI without credentials, and the user from
    // the environment when the server wanted authentication.
    let mut rec = baseline();
    let evicting = testdata::with_figure(
        testdata::with_figure(
            testdata::healthy_mongod(),
            "wiredTiger.cache.application thread time evicting (usecs)",
            0,
            50_000,
        ),
        "wiredTiger.cache.pages evicted by application threads",
        0,
        300,
    );
    testdata::set_mongod(&mut rec, &evicting);
    rec.mongod.as_mut().unwrap().uri =
        Some("mongodb://***@db1.example:27018/?authSource=admin&replicaSet=rs0".into());
    let f = fired(&rec, "wiredtiger.eviction_threads");
    let cmd = &f.fix.commands[0];
    assert!(
        cmd.starts_with(
            "mongosh 'mongodb://db1.example:27018/?authSource=admin&replicaSet=rs0' \
             --username \"${MONGOSH_USER:?"
        ),
        "{cmd}"
    );
    assert!(!cmd.contains("***"), "{cmd}");
    // No user in the URI: no --username; no URI: mongod's own port.
    rec.mongod.as_mut().unwrap().uri = Some("mongodb://127.0.0.1:27019".into());
    let f = fired(&rec, "wiredtiger.eviction_threads");
    assert!(
        f.fix.commands[0].starts_with("mongosh mongodb://127.0.0.1:27019 --quiet --eval"),
        "{}",
        f.fix.commands[0]
    );
    rec.mongod.as_mut().unwrap().uri = None;
    rec.mongod.as_mut().unwrap().info.as_mut().unwrap().argv =
        vec!["mongod".into(), "--port".into(), "27030".into()];
    let f = fired(&rec, "wiredtiger.eviction_threads");
    assert!(
        f.fix.revert[0].starts_with("mongosh mongodb://127.0.0.1:27030/ --quiet"),
        "{:?}",
        f.fix.revert
    );
}

#[test]
fn s390x_priors_follow_the_ibm_z_study_and_aarch64_has_none_without_a_source() {
    // The IBM Z study: the WiredTiger cache size first; readahead,
    // swappiness and THP measured no effect there (priors down, not up).
    // The Graviton2 study measured no setting a rule judges: no aarch64
    // prior (rules/README.md, "Architecture priors and their sources").
    let rules = RuleSet::builtin().unwrap();
    let prior = |id: &str, arch: &str| {
        rules
            .rules()
            .iter()
            .find(|r| r.id() == id)
            .and_then(|r| r.arch_priors().get(arch).copied())
            .unwrap_or(1.0)
    };
    let cache = prior("wiredtiger.cache_size", "s390x");
    for id in rules.rules().iter().map(|r| r.id()) {
        assert!(
            prior(id, "s390x") <= cache,
            "{id} ranks above the cache size on s390x"
        );
        assert_eq!(
            prior(id, "aarch64"),
            1.0,
            "{id}: an aarch64 prior needs a source"
        );
    }
    for id in [
        "host.readahead",
        "host.swappiness",
        "memory.thp_legacy_tcmalloc",
    ] {
        assert!(prior(id, "s390x") < 1.0, "{id}");
    }
}
