//! The `host`, `recording` and `target` fact groups: what the recording says
//! of the machine, of itself and of the target process.
//!
//! These groups are always bound (see `rules::ALWAYS_BOUND`) and need no
//! probe family, so they are derived here apart from the per-family facts;
//! the host's scheduler features are read from the debugfs snapshot the
//! recording carries.

use semver::Version;

use super::{FactGroup, FactValue, float, int, text};
use crate::recording::model::Recording;
use crate::rules::ranking::normalise_arch;

/// The `host` group: architecture, kernel, CPUs, scheduler features, lockdown.
pub(super) fn host_facts(rec: &Recording, kernel: Option<&Version>) -> FactGroup {
    let h = &rec.host;
    let mut g = FactGroup::new();
    let arch = normalise_arch(&h.arch).unwrap_or_else(|| h.arch.to_ascii_lowercase());
    g.insert("arch".into(), text(arch));
    g.insert("hostname".into(), text(h.hostname.clone()));
    g.insert("kernel".into(), text(h.kernel_release.clone()));
    g.insert("kernel_parsed".into(), FactValue::Bool(kernel.is_some()));
    let (major, minor, patch) = kernel.map_or((0, 0, 0), |v| (v.major, v.minor, v.patch));
    g.insert("kernel_major".into(), int(major));
    g.insert("kernel_minor".into(), int(minor));
    g.insert("kernel_patch".into(), int(patch));
    let eevdf = kernel.is_some_and(|v| (v.major, v.minor) >= (6, 6));
    g.insert("eevdf".into(), FactValue::Bool(eevdf));
    g.insert("cpu_count".into(), int(u64::from(h.cpu_count)));
    g.insert("cpu_model".into(), text(h.cpu_model.clone()));
    g.insert(
        "sched_features_readable".into(),
        FactValue::Bool(h.sched_features.is_some()),
    );
    g.insert(
        "sched_features".into(),
        text(h.sched_features.clone().unwrap_or_default()),
    );
    g.insert(
        "wakeup_preemption".into(),
        text(sched_feature_state(
            h.sched_features.as_deref(),
            "WAKEUP_PREEMPTION",
        )),
    );
    g.insert(
        "sched_features_error".into(),
        text(h.sched_features_error.clone().unwrap_or_default()),
    );
    g.insert(
        "lockdown".into(),
        text(h.lockdown.clone().unwrap_or_default()),
    );
    // Writes to debugfs (the scheduler features) are refused in any lockdown
    // mode but "none"; the file may also be absent or unreadable.
    let locked = h.lockdown.as_deref().is_some_and(|m| m != "none");
    g.insert(
        "sched_features_writable".into(),
        FactValue::Bool(h.sched_features.is_some() && !locked),
    );
    g.insert("net_readable".into(), FactValue::Bool(h.net.is_some()));
    if let Some(p) = h.page_size {
        g.insert("page_size".into(), int(p));
    }
    g
}

/// "on" / "off" / "unknown" for one feature in /sys/kernel/debug/sched/features
/// (a feature is listed as `NAME` when on and `NO_NAME` when off).
pub fn sched_feature_state(features: Option<&str>, name: &str) -> &'static str {
    let Some(features) = features else {
        return "unknown";
    };
    for token in features.split_whitespace() {
        if token == name {
            return "on";
        }
        if token.strip_prefix("NO_") == Some(name) {
            return "off";
        }
    }
    "unknown"
}

fn recording_duration_s(rec: &Recording) -> f64 {
    let ms = (rec.ended_at - rec.started_at).num_milliseconds();
    if ms > 0 {
        ms as f64 / 1000.0
    } else {
        rec.slices.iter().map(|s| s.duration_ms).sum::<u64>() as f64 / 1000.0
    }
}

/// The `recording` group: how long, how many slices, why it stopped.
pub(super) fn recording_facts(rec: &Recording) -> FactGroup {
    let mut g = FactGroup::new();
    g.insert("duration_s".into(), float(recording_duration_s(rec)));
    g.insert(
        "requested_duration_s".into(),
        float(rec.requested_duration_ms as f64 / 1000.0),
    );
    g.insert("slices".into(), int(rec.slices.len() as u64));
    g.insert("stop_reason".into(), text(rec.stop_reason.clone()));
    g.insert("host_wide".into(), FactValue::Bool(rec.target.is_none()));
    g
}

/// The `target` group, bound (with `present = false`) even host-wide.
pub(super) fn target_facts(rec: &Recording) -> FactGroup {
    let mut g = FactGroup::new();
    let t = rec.target.as_ref();
    g.insert("present".into(), FactValue::Bool(t.is_some()));
    g.insert("pid".into(), int(t.map_or(0, |t| u64::from(t.pid))));
    g.insert("comm".into(), text(t.map_or("", |t| t.comm.as_str())));
    g.insert("how".into(), text(t.map_or("", |t| t.how.as_str())));
    g.insert(
        "exited".into(),
        FactValue::Bool(t.is_some_and(|t| t.exit_code.is_some())),
    );
    let (process, from) = target_process(rec);
    g.insert("is_mongod".into(), FactValue::Bool(process == "mongod"));
    g.insert("process".into(), text(process));
    g.insert("process_from".into(), text(from));
    g.insert(
        "mongosh_args".into(),
        text(super::connection::mongosh_args(rec)),
    );
    g
}

/// What the recording is about: `"mongod"`, `"mongos"`, another process's
/// name, or `""` when nothing says (a host-wide recording without mongod's
/// answers); and how that is known.
///
/// A target process is known by its executable (`/proc/PID/exe`'s file name,
/// else its `comm`): `mongod` and `mongos` by name; a target found as the
/// process listening on the `--uri` port is what the server answered
/// (serverStatus.process). Without a target, the server's own answer
/// (`--uri` or FTDC) says it.
pub fn target_process(rec: &Recording) -> (String, &'static str) {
    let answered = rec
        .mongod
        .as_ref()
        .and_then(|m| m.info.as_ref())
        .and_then(|i| i.process.as_deref())
        .filter(|p| !p.trim().is_empty());
    let Some(t) = rec.target.as_ref() else {
        return match answered {
            Some(p) => (p.to_string(), "the server's answers (serverStatus.process)"),
            None => (
                String::new(),
                "nothing: no target and no answer from mongod",
            ),
        };
    };
    let exe = t
        .exe
        .as_deref()
        .map(|e| e.trim_end_matches(" (deleted)"))
        .and_then(|e| e.rsplit('/').next())
        .filter(|e| !e.is_empty());
    for name in ["mongod", "mongos"] {
        if t.comm == name || exe == Some(name) {
            return (name.to_string(), "the target's executable name");
        }
    }
    match answered {
        Some(p) if t.how == "port" => (
            p.to_string(),
            "the server listening on the --uri port (serverStatus.process)",
        ),
        _ => (
            exe.unwrap_or(t.comm.as_str()).to_string(),
            "the target's executable name",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sched_feature_state_reads_debugfs_tokens() {
        let f = "PLACE_LAG RUN_TO_PARITY NO_NEXT_BUDDY WAKEUP_PREEMPTION NO_HRTICK";
        assert_eq!(sched_feature_state(Some(f), "WAKEUP_PREEMPTION"), "on");
        assert_eq!(sched_feature_state(Some(f), "NEXT_BUDDY"), "off");
        assert_eq!(sched_feature_state(Some(f), "TTWU_QUEUE"), "unknown");
        assert_eq!(sched_feature_state(None, "WAKEUP_PREEMPTION"), "unknown");
    }
}
