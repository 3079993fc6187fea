//! The diagnosis report: the data type behind `mdiag explain`, and its renderers.
//!
//! [`Report`] is also the JSON contract (`docs/report-json.md`): other tools
//! parse it, so fields may be added but never removed or renamed, and
//! `report_version` changes when a field's meaning changes. The renderers
//! ([`terminal`], [`markdown`], [`json`], [`html`]) only format what is here
//! (the measurements through one view model, [`crate::kit::view`], that each
//! family's `report.rs` in `family/<name>/` builds and [`view`] puts in
//! order); every decision (ranking, wording of reasons) is made when the
//! report is built in [`crate::explain`], so the four outputs always agree.
//!
//! Besides the rules' verdicts, the report carries the [`Measurements`]: the
//! numbers each probe family measured, shown even when no rule uses them.

#[cfg(test)]
mod contract;
#[cfg(test)]
mod golden;
#[cfg(test)]
mod golden_recordings;
pub mod host_settings;
pub mod html;
pub mod json;
pub mod markdown;
pub mod measurements;
pub mod overview;
pub mod rseq;
pub mod stacks;

pub use crate::kit::svg;
pub mod terminal;
pub mod timeline;
pub mod view;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::findings::{EvidenceItem, Finding, evidence_map};

pub use measurements::Measurements;

/// Value of [`Report::report_version`].
pub const REPORT_VERSION: u32 = 1;

/// Everything `mdiag explain` says about one recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`REPORT_VERSION`].
    pub report_version: u32,
    /// Version of the mdiag that built the report.
    pub mdiag_version: String,
    /// Architecture the ranking was computed for (`--arch` or the recording's).
    pub architecture: String,
    /// `true` when `--arch` replaced the recording's architecture.
    pub architecture_overridden: bool,
    pub recording: RecordingSummary,
    /// Which rules were used.
    pub rules: RulesSummary,
    /// Finding rules that fired, best first.
    pub findings: Vec<Finding>,
    /// Checklist rules that fired: settings that differ from MongoDB's
    /// production notes with no measured cost, most severe first, never
    /// ranked among the findings (absent from older reports).
    #[serde(default)]
    pub checklist: Vec<Finding>,
    /// mongod's own startup warnings, verbatim (message and attributes);
    /// `None` when they were not read (no live mongod, FTDC, older files).
    #[serde(default)]
    pub startup_warnings: Option<Vec<String>>,
    /// Rules that could not be evaluated (missing data), with the reason.
    pub not_assessed: Vec<RuleNote>,
    /// Rules that do not concern this host (architecture, kernel, ...), with the reason.
    pub not_applicable: Vec<RuleNote>,
    /// Rules evaluated that did not fire, with their evidence numbers.
    pub passed: Vec<PassedRule>,
    /// Every probe family that was tried.
    pub probes: Vec<ProbeReport>,
    /// The facts rules were evaluated on, by group.
    pub facts: BTreeMap<String, serde_json::Value>,
    /// What each probe family measured, whether or not a rule used it.
    /// (Added in report version 1; absent from reports of older builds.)
    #[serde(default)]
    pub measurements: Measurements,
    /// The target's hottest on-CPU stacks per thread class (added in report
    /// version 1 later; absent when the recording has no stacks).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_stacks: Option<stacks::HotStacks>,
    /// Where the target's threads waited off CPU, per thread class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_stacks: Option<stacks::HotStacks>,
    /// The whole profiles, for the HTML report's flame graphs (not
    /// serialized: `mdiag export --pprof` / `--folded` write them).
    #[serde(skip)]
    pub cpu_profile: Option<crate::stacks::Profile>,
    #[serde(skip)]
    pub offcpu_profile: Option<crate::stacks::Profile>,
}

impl Report {
    /// Every rule that fired: the findings in rank order, then the
    /// checklist items.
    pub fn fired(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().chain(&self.checklist)
    }

    /// Sets where the recording was read from (a path), shown in the header.
    pub fn with_source(mut self, source: impl Into<String>) -> Report {
        self.recording.source = Some(source.into());
        self
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordingSummary {
    /// Where the recording was read from, when known.
    pub source: Option<String>,
    pub format_version: u32,
    /// mdiag version that wrote the recording.
    pub written_by: String,
    pub started_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    pub duration_s: f64,
    pub requested_duration_s: f64,
    pub stop_reason: String,
    pub slices: usize,
    pub host: HostSummary,
    /// `None` for a host-wide recording.
    pub target: Option<TargetSummary>,
    /// `true` when there is no target process.
    pub host_wide: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostSummary {
    pub hostname: String,
    pub kernel_release: String,
    /// The release as major.minor.patch, `None` when not understood.
    pub kernel_version: Option<String>,
    /// As recorded.
    pub arch: String,
    pub cpu_count: u32,
    pub cpu_model: String,
    /// Contents of /sys/kernel/debug/sched/features, `None` when not readable.
    pub sched_features: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetSummary {
    pub pid: u32,
    pub comm: String,
    pub exe: Option<String>,
    pub cmdline: Vec<String>,
    pub how: String,
    pub exit_code: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RulesSummary {
    /// "builtin" or the `--rules` directory.
    pub source: String,
    pub count: usize,
}

/// A rule that was not evaluated, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleNote {
    pub rule_id: String,
    pub title: String,
    pub reason: String,
}

/// A rule that was evaluated and did not fire, with its evidence numbers
/// (useful to see how far from firing it was).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PassedRule {
    pub rule_id: String,
    pub title: String,
    #[serde(with = "evidence_map")]
    pub evidence: Vec<EvidenceItem>,
    /// The rule's `hold` condition is true: not firing, but within its
    /// hysteresis band (the agent keeps a firing finding firing). Absent
    /// when false, and in reports of older builds.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_band: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeReport {
    pub family: String,
    /// Every program attached.
    pub attached: bool,
    pub programs: Vec<ProgramReport>,
    /// Events lost in the kernel, summed over the recording (families that count them).
    pub drops: Option<DropsReport>,
    /// Why the family was not tried: the user left it out (`--probes`);
    /// `None` when it was tried.
    #[serde(default)]
    pub left_out: Option<String>,
}

impl ProbeReport {
    /// "attached (2 programs)", "partly attached (1 of 2 programs)" or
    /// "not attached (0 of 2 programs)".
    pub fn status(&self) -> String {
        let ok = self.programs.iter().filter(|p| p.attached).count();
        let n = self.programs.len();
        if let Some(why) = &self.left_out {
            why.clone()
        } else if self.attached {
            format!("attached ({n} program{})", if n == 1 { "" } else { "s" })
        } else if ok > 0 {
            format!("partly attached ({ok} of {n} programs)")
        } else {
            format!("not attached ({ok} of {n} programs)")
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProgramReport {
    pub name: String,
    pub attach_point: String,
    pub attached: bool,
    /// Why it did not attach.
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DropsReport {
    pub thread_map_full: u64,
    pub wakeup_map_full: u64,
    pub read_failed: u64,
    pub total: u64,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::findings::{EvidenceValue, Fix, Impact, Severity, format_number};

    /// A finding with plausible content, for ranking and renderer tests.
    pub fn sample_finding() -> Finding {
        Finding {
            rule_id: "t.sample".into(),
            rank: 1,
            title: "Sample finding".into(),
            severity: Severity::Medium,
            score: 0.5,
            architecture: "x86_64".into(),
            rank_reason: "impact 1.00 × confidence 0.50 × x86_64 prior 1.00 (default) = 0.50"
                .into(),
            confidence: 0.5,
            arch_prior: 1.0,
            impact: Impact {
                expected: "better".into(),
                score: 1.0,
                source: "test".into(),
            },
            summary: "Something is off.".into(),
            evidence: vec![EvidenceItem {
                label: "x".into(),
                value: EvidenceValue::Int(1),
            }],
            fix: Fix {
                summary: "fix it".into(),
                commands: vec!["true".into()],
                files: vec![],
                revert: vec![],
                risk: "none".into(),
                verify: "look".into(),
            },
            references: vec![],
            missing: vec![],
            class: crate::findings::RuleClass::Finding,
            mongod_warns: vec![],
            checklist: None,
        }
    }

    #[test]
    fn numbers_are_formatted_for_people() {
        assert_eq!(format_number(1234.56), "1235");
        assert_eq!(format_number(90.277), "90.3");
        assert_eq!(format_number(4.2), "4.20");
        assert_eq!(format_number(0.12345), "0.123");
        assert_eq!(format_number(0.0), "0");
        assert_eq!(format_number(-0.0001), "-0.000100");
        assert_eq!(format_number(0.05), "0.0500");
        assert_eq!(format_number(f64::NAN), "-");
        assert_eq!(EvidenceValue::Bool(true).to_string(), "yes");
        assert_eq!(EvidenceValue::Int(42).to_string(), "42");
    }

    #[test]
    fn evidence_serialises_as_an_ordered_object() {
        let mut f = sample_finding();
        f.evidence = vec![
            EvidenceItem {
                label: "zeta".into(),
                value: EvidenceValue::Float(0.5),
            },
            EvidenceItem {
                label: "alpha".into(),
                value: EvidenceValue::Bool(false),
            },
            EvidenceItem {
                label: "mid".into(),
                value: EvidenceValue::Text("on".into()),
            },
        ];
        let json = serde_json::to_string(&f).unwrap();
        let zeta = json.find("\"zeta\"").unwrap();
        let alpha = json.find("\"alpha\"").unwrap();
        assert!(zeta < alpha, "{json}");
        assert!(
            json.contains(r#""evidence":{"zeta":0.5,"alpha":false,"mid":"on"}"#),
            "{json}"
        );
        let back: Finding = serde_json::from_str(&json).unwrap();
        assert_eq!(back, f);
    }
}
