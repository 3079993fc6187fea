//! The findings model: what a rule that fired says (a [`Finding`], its
//! evidence values and [`Severity`]), and how evidence numbers are written
//! for people ([`format_number`]).
//!
//! It sits below both [`crate::rules`] (which builds findings) and
//! [`crate::report`] (which carries and renders them), so neither depends on
//! the other for these types. The serde shapes are part of the JSON contract
//! (`docs/report-json.md`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// How bad a finding is for mongod, independent of how sure we are about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Low,
    Medium,
    High,
    Critical,
}

impl Severity {
    /// The lowercase name used in rule files and in the JSON report.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
            Severity::Critical => "critical",
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a fired rule is: a finding (measured cost or risk for this target)
/// or a checklist item (a setting that differs from MongoDB's production
/// notes, with no measured cost). See `rules/README.md`.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum RuleClass {
    #[default]
    Finding,
    Checklist,
}

impl RuleClass {
    /// The lowercase name used in rule files, the JSON report and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleClass::Finding => "finding",
            RuleClass::Checklist => "checklist",
        }
    }
}

/// A checklist item's one line, filled from the recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChecklistLine {
    /// The setting (`vm.swappiness`).
    pub setting: String,
    /// Its value on this host, as the evidence shows it.
    pub value: String,
    /// What MongoDB's production notes ask for.
    pub notes: String,
}

/// A rule that fired.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub rule_id: String,
    /// 1 = most important.
    pub rank: usize,
    pub title: String,
    pub severity: Severity,
    /// impact × confidence × arch prior, 4 decimals.
    pub score: f64,
    /// Architecture the score was computed for.
    pub architecture: String,
    /// "impact 0.60 × confidence 0.80 × s390x prior 1.30 = 0.62".
    pub rank_reason: String,
    pub confidence: f64,
    pub arch_prior: f64,
    pub impact: Impact,
    /// What is happening and why it hurts mongod.
    pub summary: String,
    /// Label → value, in the rule's order.
    #[serde(with = "evidence_map")]
    pub evidence: Vec<EvidenceItem>,
    pub fix: Fix,
    pub references: Vec<Reference>,
    /// Evidence the rule can use but that was not recorded (its optional
    /// fact groups that are absent, e.g. no mongod connection), with the
    /// reason. Empty when the rule saw everything it can use. (Added in
    /// report version 1; absent from reports of older builds.)
    #[serde(default)]
    pub missing: Vec<MissingEvidence>,
    /// Finding or checklist item (absent from older reports: a finding).
    #[serde(default)]
    pub class: RuleClass,
    /// mongod's own startup warnings that say the same (the ids the rule
    /// names), message and attributes verbatim; empty when mongod gave
    /// none, or they were not read.
    #[serde(default)]
    pub mongod_warns: Vec<String>,
    /// A checklist item's one line; `None` for a finding.
    #[serde(default)]
    pub checklist: Option<ChecklistLine>,
}

/// An optional evidence group that a finding was made without.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MissingEvidence {
    /// The fact group, e.g. "mongod".
    pub group: String,
    /// Why it is absent, e.g. "mongod was not polled: give record --uri ...".
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Impact {
    pub expected: String,
    pub score: f64,
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fix {
    pub summary: String,
    /// Exact shell commands, in order.
    pub commands: Vec<String>,
    /// Configuration to put into files, shown as file content.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FixFile>,
    /// Commands that undo the fix.
    pub revert: Vec<String>,
    pub risk: String,
    pub verify: String,
}

/// Settings for one configuration file, as its content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FixFile {
    /// The file, e.g. "/etc/mongod.conf".
    pub path: String,
    /// How to apply it ("merge into the existing storage: section, then restart mongod").
    pub how: String,
    /// The settings, verbatim.
    pub content: String,
    /// "yaml", "ini", ... (`None`: plain text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reference {
    pub title: String,
    pub url: Option<String>,
}

/// One evidence number.
#[derive(Debug, Clone, PartialEq)]
pub struct EvidenceItem {
    pub label: String,
    pub value: EvidenceValue,
}

/// An evidence value: what the rule's expression gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum EvidenceValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
    Null,
}

impl fmt::Display for EvidenceValue {
    /// Human form: "yes"/"no" for booleans, numbers by [`format_number`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvidenceValue::Bool(true) => f.write_str("yes"),
            EvidenceValue::Bool(false) => f.write_str("no"),
            EvidenceValue::Int(i) => write!(f, "{i}"),
            EvidenceValue::Float(x) => f.write_str(&format_number(*x)),
            EvidenceValue::Text(s) => f.write_str(s),
            EvidenceValue::Null => f.write_str("-"),
        }
    }
}

/// 1234.56 → "1235", 90.28 → "90.3", 4.2 → "4.20", 0.1234 → "0.123",
/// 0.0001 → "0.000100", 0 → "0".
pub fn format_number(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let a = x.abs();
    if a == 0.0 {
        "0".to_string()
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        // Three significant digits below 1.
        let decimals = (2.0 - a.log10().floor()).clamp(3.0, 9.0) as usize;
        format!("{x:.decimals$}")
    }
}

/// Evidence as a JSON object (label → value) that keeps the rule's order.
pub(crate) mod evidence_map {
    use std::fmt;

    use serde::de::{MapAccess, Visitor};
    use serde::ser::SerializeMap;
    use serde::{Deserializer, Serializer};

    use super::{EvidenceItem, EvidenceValue};

    pub fn serialize<S: Serializer>(items: &[EvidenceItem], s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(items.len()))?;
        for item in items {
            map.serialize_entry(&item.label, &item.value)?;
        }
        map.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<EvidenceItem>, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Vec<EvidenceItem>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of evidence label → value")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::new();
                while let Some((label, value)) = m.next_entry::<String, EvidenceValue>()? {
                    items.push(EvidenceItem { label, value });
                }
                Ok(items)
            }
        }
        d.deserialize_map(V)
    }
}
