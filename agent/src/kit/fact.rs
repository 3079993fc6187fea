//! The fact model every family's facts are written in: [`FactValue`] (what
//! a rule's CEL expression sees), [`FactGroup`] (a group's name → its
//! facts), the constructors that keep values in range, and the two helpers
//! every family's facts share: why a family is unavailable in a recording
//! ([`family_unavailable`]) and the class of a thread name
//! ([`thread_class`]). The groups are derived and assembled by the rules'
//! fact hub (`rules::facts`).

use std::collections::BTreeMap;

use serde::Serialize;

use super::probe::ProbeStatus;

/// One fact value: what a CEL expression sees.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FactValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
    Map(BTreeMap<String, FactValue>),
}

impl FactValue {
    /// The value as CEL sees it.
    pub fn to_cel(&self) -> cel::Value {
        match self {
            FactValue::Bool(b) => cel::Value::Bool(*b),
            FactValue::Int(i) => cel::Value::Int(*i),
            FactValue::Float(f) => cel::Value::Float(*f),
            FactValue::Text(s) => cel::Value::from(s.clone()),
            FactValue::Map(m) => map_to_cel(m),
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            FactValue::Int(i) => Some(*i as f64),
            FactValue::Float(f) => Some(*f),
            _ => None,
        }
    }
}

pub fn map_to_cel(map: &BTreeMap<String, FactValue>) -> cel::Value {
    let converted: std::collections::HashMap<String, cel::Value> =
        map.iter().map(|(k, v)| (k.clone(), v.to_cel())).collect();
    cel::Value::from(converted)
}

/// A fact group's name → its facts.
pub type FactGroup = BTreeMap<String, FactValue>;

/// The class of a thread for per-class breakdowns: mongod's own classes
/// where the name is one of mongod's threads ([`crate::threads::mongod_class`]:
/// "conn1234" → "conn", "WTEvict-3" → "eviction", "Checkpointer" →
/// "checkpointer"), so the scheduler and contention figures group alike;
/// otherwise the name without trailing digits and separators
/// ("mdiag-spin-2" → "mdiag-spin"), and the part before '/' for kernel
/// threads ("kworker/3:1H" → "kworker").
pub fn thread_class(comm: &str) -> String {
    let mongod = crate::threads::mongod_class(comm);
    if mongod != crate::threads::OTHER {
        return mongod.to_string();
    }
    let base = match comm.split_once('/') {
        Some((head, _)) if !head.is_empty() => head,
        _ => comm,
    };
    let trimmed = base.trim_end_matches(|c: char| {
        c.is_ascii_digit() || matches!(c, '-' | '_' | '.' | ':' | ' ' | '#')
    });
    if trimmed.is_empty() {
        base.to_string()
    } else {
        trimmed.to_string()
    }
}

pub(crate) fn int(v: u64) -> FactValue {
    FactValue::Int(i64::try_from(v).unwrap_or(i64::MAX))
}

pub(crate) fn float(v: f64) -> FactValue {
    FactValue::Float(if v.is_finite() { v } else { 0.0 })
}

pub(crate) fn text(s: impl Into<String>) -> FactValue {
    FactValue::Text(s.into())
}

pub(crate) fn ratio(num: f64, den: f64) -> f64 {
    if den > 0.0 { num / den } else { 0.0 }
}

/// Why the probe family `family` of a recording (whose statuses are
/// `probes`) cannot be relied on: not recorded, no programs, not attached or
/// attached only partly; `None` when every program of the family attached.
pub fn family_unavailable(probes: &[ProbeStatus], family: &str) -> Option<String> {
    let Some(probe) = probes.iter().find(|p| p.family == family) else {
        return Some(format!("the {family} probe was not part of this recording"));
    };
    if let Some(why) = &probe.left_out {
        return Some(format!("the {family} probe was {why}"));
    }
    if probe.programs.is_empty() {
        return Some(format!(
            "the {family} probe has no programs in this recording"
        ));
    }
    let failed: Vec<String> = probe
        .programs
        .iter()
        .filter_map(|p| {
            p.error
                .as_ref()
                .map(|e| format!("{} ({}): {e}", p.name, p.attach_point))
        })
        .collect();
    // When every program failed for the same reason (e.g. "not applicable:
    // no WiredTiger symbols"), say it once.
    let errors: Vec<&String> = probe
        .programs
        .iter()
        .filter_map(|p| p.error.as_ref())
        .collect();
    let same_reason = errors.len() > 1 && errors.iter().all(|e| *e == errors[0]);
    if failed.is_empty() {
        None
    } else if failed.len() == probe.programs.len() && same_reason {
        Some(format!("the {family} probe did not attach: {}", errors[0]))
    } else if failed.len() == probe.programs.len() {
        Some(format!(
            "the {family} probe did not attach: {}",
            failed.join("; ")
        ))
    } else {
        Some(format!(
            "the {family} probe attached only partly, its numbers are incomplete: {}",
            failed.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_family_left_out_by_choice_says_so() {
        let probes = [ProbeStatus::left_out(
            "syscalls",
            "left out by choice (probes: sched)".into(),
        )];
        assert_eq!(
            family_unavailable(&probes, "syscalls").as_deref(),
            Some("the syscalls probe was left out by choice (probes: sched)")
        );
        assert_eq!(
            family_unavailable(&probes, "perf").as_deref(),
            Some("the perf probe was not part of this recording")
        );
    }
}
