//! The expectation table: what each probe family must reach on each kernel
//! line, and `--expect FAMILY=NEED`, which overrides it for one run.
//!
//! Why a table: which families a kernel can load is known (a tracepoint
//! arrived in some version, say), so a family that loads less than that is a
//! regression to fail on, while one the kernel cannot have is only shown.
use std::fmt;

use super::{Line, status::Status};

/// What a probe family must reach on a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Every program attached.
    Attached,
    /// Every program attached where the family was tried (the allocator
    /// probes are not tried host-wide).
    AttachedIfTried,
    /// At least one program attached.
    Partly,
    /// Not tried, or "not applicable" (nothing to probe in the guest).
    NotApplicable,
    /// Tried, and no program attached: the kernel cannot have it.
    Fails,
    /// Anything, even a failure: shown, not checked.
    Any,
}

impl Need {
    pub(super) fn met_by(self, status: &Status) -> bool {
        match self {
            Need::Attached => matches!(status, Status::Attached),
            Need::AttachedIfTried => matches!(status, Status::Attached | Status::Absent),
            Need::Partly => matches!(status, Status::Attached | Status::Partly { .. }),
            Need::NotApplicable => matches!(status, Status::Absent | Status::NotApplicable(_)),
            Need::Fails => matches!(status, Status::Failed(_)),
            Need::Any => true,
        }
    }
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Need::Attached => "attached",
            Need::AttachedIfTried => "attached or -",
            Need::Partly => "partly",
            Need::NotApplicable => "n/a",
            Need::Fails => "fails",
            Need::Any => "any",
        })
    }
}

/// From kernel `since` on, `family` must reach `need` (in both recordings).
#[derive(Debug, Clone, Copy)]
pub(super) struct Expectation {
    pub(super) family: &'static str,
    since: (u32, u32),
    need: Need,
}

const fn expect(family: &'static str, since: (u32, u32), need: Need) -> Expectation {
    Expectation {
        family,
        since,
        need,
    }
}

/// What each family must do on each kernel: for a family and a kernel, the
/// row with the highest `since` that is not above the kernel counts, unless
/// the kernel line has its own need for the family ([`Line::expect`]: what
/// one kernel build cannot do, whatever its version); a family without
/// either is shown but not checked. Tighten here (or for one run with
/// `--expect FAMILY=NEED`). Every architecture needs the same so far.
pub(super) const EXPECTATIONS: &[Expectation] = &[
    expect("sched", (5, 10), Need::Attached),
    expect("softirq", (5, 10), Need::Attached),
    expect("syscalls", (5, 10), Need::Attached),
    expect("perf", (5, 10), Need::Attached),
    // The lock-contention programs need the contention_begin/end
    // tracepoints (5.19); the D-state program works before.
    expect("contention", (5, 10), Need::Partly),
    expect("contention", (5, 19), Need::Attached),
    // No WiredTiger in busybox: not tried host-wide, "not applicable" spawned.
    expect("wiredtiger", (5, 10), Need::NotApplicable),
    // Not tried host-wide. Its uprobes tell the allocator's functions apart
    // by attach cookie (5.15): before, it fails and is shown, not checked.
    expect("alloc", (5, 10), Need::Any),
    expect("alloc", (5, 15), Need::AttachedIfTried),
];

/// What the mongod run (`vm/mongod.rs`) needs where it differs from
/// [`EXPECTATIONS`]: its target has WiredTiger, and the allocator probes are
/// tried on it, so from 5.15 they must attach.
pub(super) const MONGOD_EXPECTATIONS: &[Expectation] = &[
    expect("wiredtiger", (5, 10), Need::Attached),
    expect("alloc", (5, 10), Need::Any),
    expect("alloc", (5, 15), Need::Attached),
];

/// The need for `family` on kernel `line`: an `--expect` override, else the
/// line's own, else the table's row (what the first two runs need).
#[cfg(test)]
pub(super) fn need_for(
    table: &[Expectation],
    overrides: &[(String, Need)],
    family: &str,
    line: &Line,
) -> Option<Need> {
    need_in_run(table, &[], overrides, family, line)
}

/// [`need_for`] in a run whose own table `run_table` (e.g.
/// [`MONGOD_EXPECTATIONS`]) outranks `table` (an override and the line's
/// own need outrank both).
pub(super) fn need_in_run(
    table: &[Expectation],
    run_table: &[Expectation],
    overrides: &[(String, Need)],
    family: &str,
    line: &Line,
) -> Option<Need> {
    if let Some((_, need)) = overrides.iter().rev().find(|(f, _)| f == family) {
        return Some(*need);
    }
    if let Some((_, need)) = line.expect.iter().find(|(f, _)| *f == family) {
        return Some(*need);
    }
    let row = |t: &[Expectation]| {
        t.iter()
            .filter(|e| e.family == family && e.since <= line.version)
            .max_by_key(|e| e.since)
            .map(|e| e.need)
    };
    row(run_table).or_else(|| row(table))
}

pub(super) fn parse_expect(s: &str) -> Result<(String, Need), String> {
    let (family, need) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not FAMILY=NEED"))?;
    let need = match need {
        "attached" => Need::Attached,
        "attached-if-tried" => Need::AttachedIfTried,
        "partly" => Need::Partly,
        "n/a" | "not-applicable" => Need::NotApplicable,
        "fails" => Need::Fails,
        "any" => Need::Any,
        _ => {
            return Err(format!(
                "{need:?}: NEED is one of attached, attached-if-tried, partly, not-applicable, fails, any"
            ));
        }
    };
    Ok((family.to_owned(), need))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vm::{LINES, parse_line};

    #[test]
    fn the_table_picks_the_newest_row_not_above_the_kernel() {
        let t = EXPECTATIONS;
        let line = |name| parse_line(name).unwrap();
        assert_eq!(
            need_for(t, &[], "contention", line("5.10")),
            Some(Need::Partly)
        );
        assert_eq!(
            need_for(t, &[], "contention", line("6.1")),
            Some(Need::Attached)
        );
        assert_eq!(
            need_for(t, &[], "sched", line("aarch64-6.12")),
            Some(Need::Attached)
        );
        assert_eq!(need_for(t, &[], "rseq", line("6.1")), None);
        let over = [parse_expect("sched=partly").unwrap()];
        assert_eq!(need_for(t, &over, "sched", line("6.1")), Some(Need::Partly));
        assert!(parse_expect("sched").is_err());
        assert!(parse_expect("sched=maybe").is_err());
        // A line's own need outranks the table, an override outranks both.
        assert_eq!(
            need_for(t, &[], "sched", line("s390x-6.1")),
            Some(Need::Fails)
        );
        assert_eq!(
            need_for(t, &[], "perf", line("s390x-6.1")),
            Some(Need::Attached)
        );
        assert_eq!(
            need_for(t, &over, "sched", line("s390x-6.1")),
            Some(Need::Partly)
        );
        // The mongod run's own rows outrank the table; an override both.
        let m = MONGOD_EXPECTATIONS;
        assert_eq!(
            need_in_run(t, m, &[], "wiredtiger", line("6.1")),
            Some(Need::Attached)
        );
        assert_eq!(
            need_in_run(t, m, &[], "sched", line("6.1")),
            Some(Need::Attached)
        );
        assert_eq!(
            need_in_run(t, m, &[], "alloc", line("5.10")),
            Some(Need::Any)
        );
        assert_eq!(
            need_in_run(t, m, &[], "alloc", line("6.12")),
            Some(Need::Attached)
        );
        let any = [parse_expect("wiredtiger=any").unwrap()];
        assert_eq!(
            need_in_run(t, m, &any, "wiredtiger", line("6.12")),
            Some(Need::Any)
        );
        // Every kernel line has a row for the families the brief names.
        for line in LINES {
            for family in ["sched", "softirq", "syscalls", "perf", "contention"] {
                let need = need_for(t, &[], family, line);
                assert!(need.is_some(), "{family} on {}", line.name);
            }
        }
    }

    #[test]
    fn needs_accept_what_they_say() {
        let partly = Status::Partly {
            attached: 1,
            programs: 3,
            error: "x".into(),
        };
        assert!(Need::Attached.met_by(&Status::Attached));
        assert!(!Need::Attached.met_by(&partly));
        assert!(Need::Partly.met_by(&partly));
        assert!(!Need::Partly.met_by(&Status::Failed("x".into())));
        assert!(!Need::Partly.met_by(&Status::Absent));
        assert!(Need::NotApplicable.met_by(&Status::Absent));
        assert!(Need::NotApplicable.met_by(&Status::NotApplicable("n".into())));
        assert!(!Need::NotApplicable.met_by(&Status::Failed("x".into())));
        assert!(!Need::NotApplicable.met_by(&Status::NoRecording("x".into())));
        assert!(Need::Fails.met_by(&Status::Failed("x".into())));
        assert!(!Need::Fails.met_by(&Status::NoRecording("x".into())));
        assert!(!Need::Fails.met_by(&Status::Attached));
        assert!(Need::Any.met_by(&Status::NoRecording("x".into())));
        assert!(Need::AttachedIfTried.met_by(&Status::Absent));
        assert!(Need::AttachedIfTried.met_by(&Status::Attached));
        assert!(!Need::AttachedIfTried.met_by(&Status::Failed("x".into())));
        assert!(!Need::AttachedIfTried.met_by(&Status::NoRecording("x".into())));
    }
}
