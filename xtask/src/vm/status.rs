//! How each probe family did in one recording, from the `probes` array of
//! its report JSON (see docs/report-json.md), and the one-line summary of a
//! family's error for the table.
//!
//! Why apart from the verdict: this reads what mdiag reported; whether that
//! is good enough on a kernel is the verdict's job.
use std::collections::BTreeMap;

use serde_json::Value;

/// How a probe family did in one recording.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Status {
    /// Not in the recording's `probes` (not tried).
    Absent,
    Attached,
    /// Nothing to probe (the reason).
    NotApplicable(String),
    /// Some programs attached; the first error.
    Partly {
        attached: usize,
        programs: usize,
        error: String,
    },
    /// No program attached; the first error.
    Failed(String),
    /// The recording itself failed (why).
    NoRecording(String),
}

impl Status {
    pub(super) fn cell(&self) -> String {
        match self {
            Status::Absent => "-".into(),
            Status::Attached => "attached".into(),
            Status::NotApplicable(_) => "n/a".into(),
            Status::Partly {
                attached, programs, ..
            } => format!("partly {attached}/{programs}"),
            Status::Failed(_) => "FAILED".into(),
            Status::NoRecording(_) => "no recording".into(),
        }
    }

    /// The error worth showing under the table.
    pub(super) fn error(&self) -> Option<&str> {
        match self {
            Status::Partly { error, .. } | Status::Failed(error) => Some(error),
            _ => None,
        }
    }
}

/// Each family's status in a report JSON (its `probes` array, see
/// docs/report-json.md).
pub(super) fn statuses(report: &Value) -> Result<BTreeMap<String, Status>, String> {
    let probes = report["probes"]
        .as_array()
        .ok_or("the report has no probes array")?;
    let mut out = BTreeMap::new();
    for probe in probes {
        let family = probe["family"].as_str().ok_or("a probe without a family")?;
        out.insert(family.to_owned(), classify(probe));
    }
    Ok(out)
}

fn classify(probe: &Value) -> Status {
    let programs = probe["programs"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let errors: Vec<String> = programs
        .iter()
        .filter(|p| !p["attached"].as_bool().unwrap_or(p["error"].is_null()))
        .map(|p| {
            let error = p["error"].as_str().unwrap_or("did not attach");
            format!(
                "{} ({}): {}",
                p["name"].as_str().unwrap_or("?"),
                p["attach_point"].as_str().unwrap_or("?"),
                error
            )
        })
        .collect();
    let first = || errors.first().cloned().unwrap_or_default();
    if programs.is_empty() {
        Status::Failed("the family lists no programs".into())
    } else if errors.is_empty() {
        Status::Attached
    } else if errors.len() < programs.len() {
        Status::Partly {
            attached: programs.len() - errors.len(),
            programs: programs.len(),
            error: first(),
        }
    } else if programs.iter().all(|p| {
        p["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("not applicable"))
    }) {
        Status::NotApplicable(first())
    } else {
        Status::Failed(first())
    }
}

/// One line of an error for the table: its first line, and for a verifier
/// log its verdict (the line before "verification time" / "processed N insns").
pub(super) fn summarize(error: &str) -> String {
    let lines: Vec<&str> = error.lines().map(str::trim).collect();
    let mut out = lines.first().copied().unwrap_or("").to_owned();
    let end = lines
        .iter()
        .position(|l| l.starts_with("verification time") || l.starts_with("processed "));
    if let Some(reason) = end
        .filter(|&e| e > 1)
        .and_then(|e| lines[1..e].iter().rev().find(|l| !l.is_empty()))
        && !out.contains(reason)
    {
        out.push_str(" … ");
        out.push_str(reason);
    }
    const MAX: usize = 300;
    if out.chars().count() > MAX {
        out = out.chars().take(MAX).collect::<String>() + "…";
    }
    out
}

/// The attach point of the syscalls family's fallback when it ran on the
/// `sys_enter`/`sys_exit` tracepoints (every syscall of the guest) instead
/// of fentry/fexit on the watched syscalls, with the reason mdiag gave;
/// `None` when it used fentry or did not attach.
pub(super) fn syscalls_fallback(report: &Value) -> Option<String> {
    let probes = report["probes"].as_array()?;
    let family = probes.iter().find(|p| p["family"] == "syscalls")?;
    family["programs"]
        .as_array()?
        .iter()
        .filter(|p| p["error"].is_null())
        .filter_map(|p| p["attach_point"].as_str())
        .find(|a| a.starts_with("tp_btf/sys_"))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_syscalls_fallback_is_found_with_its_reason() {
        let probes = |points: [&str; 2]| {
            serde_json::json!({"probes": [{"family": "syscalls", "attached": true,
                "programs": points.map(|a| serde_json::json!(
                    {"name": "p", "attach_point": a, "attached": true, "error": null}))}]})
        };
        let fallback =
            "tp_btf/sys_enter (every syscall of the host runs it; fentry unavailable: why)";
        assert_eq!(
            syscalls_fallback(&probes([fallback, "tp_btf/sys_exit (...)"])).as_deref(),
            Some(fallback)
        );
        assert_eq!(
            syscalls_fallback(&probes(["fentry/__x64_sys_futex", "fexit/__x64_sys_futex"])),
            None
        );
        assert_eq!(syscalls_fallback(&serde_json::json!({"probes": []})), None);
    }
}
