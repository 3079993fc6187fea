//! The rule file format: one TOML file per rule, deserialised with serde.
//!
//! This module only describes the shape of a rule file (what keys exist and
//! their types); checking the values (ranges, known names, CEL syntax) is done
//! when a rule is compiled in [`super::compile`]. The format is documented for
//! rule authors in `rules/README.md`; keep the two in step.
//!
//! Unknown keys are rejected (`deny_unknown_fields`) so that a typo such as
//! `severty` is an error naming the file, not a silently ignored setting.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use crate::findings::{RuleClass, Severity};

/// A rule file as written. Field order here follows the recommended order in
/// a file (top-level keys first, then tables).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleFile {
    /// Stable identifier, `family.name` in lowercase (e.g. `sched.wakeup_preemption`).
    pub id: String,
    /// One line, says what is wrong in plain words.
    pub title: String,
    pub severity: Severity,
    /// `"finding"`: something that costs the target now or puts it at risk
    /// (measured, or a setting with a documented large cost for this very
    /// target); `"checklist"`: a setting that differs from MongoDB's
    /// production notes with neither, reported after the findings, one line
    /// each, never ranked among them. Every built-in rule says which.
    #[serde(default)]
    pub class: RuleClass,
    /// For a checklist item: its one line (required with `class =
    /// "checklist"`, refused without).
    #[serde(default)]
    pub checklist: Option<ChecklistSpec>,
    /// The ids of mongod's own startup warnings (its log's `id`, from
    /// `startup_warnings_mongod.cpp` and the storage engine) that say the
    /// same: the report then says mongod warns about it too.
    #[serde(default)]
    pub startup_warnings: Vec<i64>,
    /// One paragraph: what is happening and why it hurts mongod.
    pub summary: String,
    /// 0..=1: how directly the evidence shows the cause.
    pub confidence: f64,
    /// Fact groups that must have been recorded (e.g. `["sched"]`); when one
    /// is missing the rule is reported as "not assessed" with the reason.
    #[serde(default)]
    pub requires: Vec<String>,
    /// Fact groups the rule reads when they were recorded, without needing
    /// them: an absent one is an empty map, so `has(mongod.x)` is false.
    #[serde(default)]
    pub optional: Vec<String>,
    /// CEL expression over the facts; the rule fires when it is `true`.
    pub condition: Spanned<String>,
    /// Optional looser CEL condition: the hysteresis band of the continuous
    /// agent. A firing finding whose `condition` is false but whose `hold`
    /// is true still counts as held, so a value hovering at the threshold
    /// neither resolves nor fires again. `explain` marks such a passed rule
    /// `in_band`.
    #[serde(default)]
    pub hold: Option<Spanned<String>>,
    /// Where the rule applies at all (architecture, kernel, mongod, allocator).
    #[serde(default)]
    pub applies_to: Applicability,
    /// Label → CEL expression; the values are shown as the finding's evidence,
    /// in the order written in the file.
    pub evidence: BTreeMap<String, Spanned<String>>,
    pub impact: Impact,
    /// Architecture → multiplier of the score (default 1.0).
    #[serde(default)]
    pub arch_priors: BTreeMap<String, f64>,
    pub fix: Fix,
    #[serde(default)]
    pub references: Vec<Reference>,
}

impl RuleFile {
    /// Evidence entries in the order they are written in the file (TOML tables
    /// are unordered once parsed; the byte span of each value restores the order).
    pub fn evidence_in_file_order(&self) -> Vec<(&str, &Spanned<String>)> {
        let mut entries: Vec<(&str, &Spanned<String>)> = self
            .evidence
            .iter()
            .map(|(label, expr)| (label.as_str(), expr))
            .collect();
        entries.sort_by_key(|(_, expr)| expr.span().start);
        entries
    }
}

/// A checklist item's line: the setting, its value here, what MongoDB's
/// production notes say of it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChecklistSpec {
    /// The setting, as an administrator names it (`vm.swappiness`,
    /// `transparent_hugepage/enabled`, "file system of dbPath").
    pub setting: String,
    /// The label of the evidence entry whose value is the setting's value
    /// on this host.
    pub value: String,
    /// What the production notes (or the checklist, or mongod's startup
    /// warning) ask for, in a few words.
    pub notes: String,
}

/// Applicability: a rule that does not apply is listed as "not applicable",
/// one whose applicability cannot be decided (unknown mongod version, unknown
/// allocator) as "not assessed".
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Applicability {
    /// Architectures (Rust names: x86_64, aarch64, s390x, powerpc64, ...); empty = all.
    #[serde(default)]
    pub arch: Vec<String>,
    /// Semver requirement on the kernel release normalised to major.minor.patch
    /// (e.g. ">=6.6"; "6.18.44-fc-v769" is matched as 6.18.44).
    #[serde(default)]
    pub kernel: Option<String>,
    /// Semver requirement on the mongod version (e.g. ">=7.0, <8.1").
    #[serde(default)]
    pub mongod: Option<String>,
    /// Memory allocator kinds the rule is about (e.g. ["tcmalloc"]); empty = any.
    #[serde(default)]
    pub allocator: Vec<String>,
    /// The kind of process the rule is about: `"mongod"` for a rule that speaks
    /// of mongod's own settings. A recording of another process (a target that
    /// is not a mongod, or a server that answered as a mongos) makes it not
    /// applicable; `None` = any target.
    #[serde(default)]
    pub target: Option<String>,
    /// Kernel base page sizes in bytes the rule is written for (e.g.
    /// `[4096]`); another known page size makes it not applicable, an
    /// unknown one (older recordings) does not; empty = any.
    #[serde(default)]
    pub page_size: Vec<u64>,
}

/// What fixing the problem is expected to bring.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Impact {
    /// Plain words: what gets better and by about how much.
    pub expected: String,
    /// 0..=1 estimate of the impact on mongod.
    pub score: f64,
    /// Where the estimate comes from (benchmark, field report, reasoning).
    pub source: String,
}

/// How to fix it, what can go wrong, how to check it worked.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fix {
    /// One or two sentences.
    pub summary: String,
    /// Exact shell commands, in order (a file's content is given as a heredoc).
    #[serde(default)]
    pub commands: Vec<String>,
    /// Configuration the fix changes, shown as file content (not as shell):
    /// the settings to put into a file such as /etc/mongod.conf.
    #[serde(default)]
    pub files: Vec<FixFile>,
    /// Exact shell commands that undo the fix.
    #[serde(default)]
    pub revert: Vec<String>,
    /// What the fix can make worse, and for whom.
    pub risk: String,
    /// How to see that the fix worked.
    pub verify: String,
}

/// Settings to put into a configuration file, shown as the file's content.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixFile {
    /// The file, e.g. "/etc/mongod.conf".
    pub path: String,
    /// How to apply it, e.g. "merge into the existing storage: section".
    pub how: String,
    /// The settings, verbatim (placeholders filled).
    #[serde(default)]
    pub content: String,
    /// The content's language for renderers ("yaml", "ini", ...).
    #[serde(default)]
    pub language: Option<String>,
    /// Settings to add to WiredTiger's configString
    /// (`eviction=(threads_min=4,threads_max=8)`). Instead of `content`: the
    /// report shows one mongod.conf setting holding the server's recorded
    /// configString and the additions of every finding that has one.
    #[serde(default)]
    pub wiredtiger_config: Option<String>,
}

/// A document that backs the rule.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    pub title: String,
    #[serde(default)]
    pub url: Option<String>,
}
