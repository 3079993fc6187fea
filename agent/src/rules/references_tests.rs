//! Every built-in rule's sources hold: each `references` URL is a
//! well-formed https address, and each source its texts quote (the
//! production notes, the operations checklist, the kernel's documentation,
//! a JIRA ticket, a man page, mongod's startup checks) is among its
//! references. A rule that says "MongoDB's production notes ask for ..."
//! without linking them cannot be checked by its reader.

use regex::Regex;

use crate::rules::RuleSet;
use crate::rules::format::RuleFile;

/// Everything a reader sees of a rule, on one line.
fn texts(def: &RuleFile) -> String {
    let mut all = vec![
        def.title.as_str(),
        &def.summary,
        &def.impact.expected,
        &def.impact.source,
        &def.fix.summary,
        &def.fix.risk,
        &def.fix.verify,
    ];
    if let Some(c) = &def.checklist {
        all.push(&c.notes);
    }
    all.join(" ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// (what a text says, what one of the rule's reference URLs must hold).
const QUOTED: &[(&str, &str)] = &[
    (r"(?i)production notes", "production-notes"),
    (r"(?i)operations checklist", "production-checklist"),
    (r"\bFAQ\b", "faq"),
    (r"(?i)kernel('s)? documentation", "kernel.org"),
    (r"(?i)release notes", "release-notes"),
    (r"(?i)\bulimit (page|settings)", "ulimit"),
    (
        r"(?i)startup (check|warning)s?",
        "startup_warnings_mongod.cpp|wiredtiger_kv_engine.cpp|jira.mongodb.org",
    ),
    (r"(?i)WiredTiger's documentation", "wiredtiger.com"),
];

#[test]
fn every_reference_url_is_well_formed() {
    let set = RuleSet::builtin().expect("builtin rules load");
    for rule in set.rules() {
        assert!(
            !rule.def.references.is_empty(),
            "{} cites no source",
            rule.id()
        );
        for r in &rule.def.references {
            let Some(url) = &r.url else { continue };
            let parsed = url::Url::parse(url)
                .unwrap_or_else(|e| panic!("{}: {url:?} is not a URL: {e}", rule.id()));
            assert_eq!(parsed.scheme(), "https", "{}: {url}", rule.id());
            assert!(
                parsed.host_str().is_some_and(|h| h.contains('.')),
                "{}: {url} names no host",
                rule.id()
            );
            assert!(
                !url.contains(char::is_whitespace),
                "{}: {url:?} holds a space",
                rule.id()
            );
        }
    }
}

#[test]
fn every_source_a_rule_quotes_is_among_its_references() {
    let set = RuleSet::builtin().expect("builtin rules load");
    let ticket = Regex::new(r"\b(SERVER|WT)-\d+\b").unwrap();
    let man = Regex::new(r"\b([a-z_]+)\(([1-8])\)").unwrap();
    let mut missing = Vec::new();
    for rule in set.rules() {
        let def = &rule.def;
        let text = texts(def);
        let urls: Vec<String> = def
            .references
            .iter()
            .filter_map(|r| r.url.as_deref())
            .map(str::to_ascii_lowercase)
            .collect();
        let cited = |needles: &str| {
            needles
                .split('|')
                .any(|n| urls.iter().any(|u| u.contains(&n.to_ascii_lowercase())))
        };
        for (said, needle) in QUOTED {
            if Regex::new(said).unwrap().is_match(&text) && !cited(needle) {
                missing.push(format!("{}: says {said:?}, cites no {needle}", def.id));
            }
        }
        for t in ticket.find_iter(&text) {
            if !cited(t.as_str()) {
                missing.push(format!(
                    "{}: names {}, does not link it",
                    def.id,
                    t.as_str()
                ));
            }
        }
        for m in man.captures_iter(&text) {
            let page = format!("{}.{}", &m[1], &m[2]);
            if !cited(&page) {
                missing.push(format!(
                    "{}: names {}({}), does not link it",
                    def.id, &m[1], &m[2]
                ));
            }
        }
        // A rule that says mongod warns about the same setting cites the
        // code that warns.
        if !def.startup_warnings.is_empty()
            && !cited("startup_warnings_mongod.cpp|wiredtiger_kv_engine.cpp")
        {
            missing.push(format!(
                "{}: names startup warnings {:?}, cites not the code that logs them",
                def.id, def.startup_warnings
            ));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// The checks above can fail: a rule quoting the notes without citing
/// them, or naming a ticket it does not link, is caught.
#[test]
fn an_uncited_quote_is_caught() {
    let base = include_str!("../../../rules/host-swappiness.toml");
    let def: RuleFile = toml::from_str(base).unwrap();
    assert!(texts(&def).contains("production notes"));
    let cut: String = base
        .split("[[references]]")
        .next()
        .unwrap()
        .replace("summary = \"\"\"", "summary = \"\"\"\nSee SERVER-1234. ");
    let stripped: RuleFile = toml::from_str(&cut).unwrap();
    assert!(stripped.references.is_empty());
    let text = texts(&stripped);
    assert!(Regex::new(QUOTED[0].0).unwrap().is_match(&text));
    assert!(text.contains("SERVER-1234"));
}
