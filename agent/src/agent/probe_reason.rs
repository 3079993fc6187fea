//! Why a probe family is or is not attached, as one of a closed set of codes:
//! the `reason` label of `mdiag_probe_up`. The probes report free text (a
//! loader error, a verifier log, a pid); as a label that text would make a
//! new series per pid or kernel message and could not be routed on, so the
//! exposition carries the code and the text stays in the agent's log (the
//! attach warning) and in the recording's probe status.

use crate::probes::NOT_APPLICABLE;

/// The `reason` label of `mdiag_probe_up`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ProbeReason {
    /// Every program of the family attached (`mdiag_probe_up` = 1).
    Attached,
    /// Nothing to probe in the target yet (no WiredTiger, no known
    /// allocator); the family tries again later.
    NotApplicable,
    /// The user left the family out (the `probes` key): not a fault.
    LeftOut,
    /// The kernel lacks what the family needs (a tracepoint, BTF).
    KernelUnsupported,
    /// The kernel refused: missing capability, a seccomp or LSM policy.
    Permission,
    /// Out of a kernel resource (locked memory, map or program memory).
    Resources,
    /// The kernel did not load the program (the verifier rejected it).
    LoadFailed,
    /// The program loaded but attaching it failed otherwise.
    AttachFailed,
    /// Anything else (the log says what).
    Other,
}

impl ProbeReason {
    /// Every code, in label order.
    pub const ALL: [ProbeReason; 9] = [
        ProbeReason::Attached,
        ProbeReason::NotApplicable,
        ProbeReason::LeftOut,
        ProbeReason::KernelUnsupported,
        ProbeReason::Permission,
        ProbeReason::Resources,
        ProbeReason::LoadFailed,
        ProbeReason::AttachFailed,
        ProbeReason::Other,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeReason::Attached => "attached",
            ProbeReason::NotApplicable => "not_applicable",
            ProbeReason::LeftOut => "left_out",
            ProbeReason::KernelUnsupported => "kernel_unsupported",
            ProbeReason::Permission => "permission",
            ProbeReason::Resources => "resources",
            ProbeReason::LoadFailed => "load_failed",
            ProbeReason::AttachFailed => "attach_failed",
            ProbeReason::Other => "other",
        }
    }

    /// The code of a program's error text (`None`: it attached). The
    /// errno names come from aya's errors (`... (os error 1)` too).
    pub fn of_error(error: Option<&str>) -> ProbeReason {
        let Some(e) = error else {
            return ProbeReason::Attached;
        };
        let has = |words: &[&str]| words.iter().any(|w| e.contains(w));
        if e.starts_with(NOT_APPLICABLE) {
            ProbeReason::NotApplicable
        } else if has(&[
            "EPERM",
            "EACCES",
            "Operation not permitted",
            "Permission denied",
            "os error 1)",
            "os error 13)",
        ]) {
            ProbeReason::Permission
        } else if has(&[
            "ENOMEM",
            "Cannot allocate memory",
            "os error 12)",
            "RLIMIT_MEMLOCK",
            "E2BIG",
        ]) {
            ProbeReason::Resources
        } else if has(&[
            "this kernel has no",
            "kernel BTF",
            "not supported",
            "ENOTSUP",
        ]) {
            ProbeReason::KernelUnsupported
        } else if e.starts_with("load:") || has(&["verifier"]) {
            ProbeReason::LoadFailed
        } else if e.starts_with("attach:") {
            ProbeReason::AttachFailed
        } else {
            ProbeReason::Other
        }
    }

    /// The code of a family: left out when the user chose so, attached
    /// when every program did, else the code of its first error.
    pub fn of_family(status: &crate::recording::model::ProbeStatus) -> ProbeReason {
        if status.left_out.is_some() {
            return ProbeReason::LeftOut;
        }
        if status.programs.is_empty() {
            return ProbeReason::Other;
        }
        ProbeReason::of_error(status.programs.iter().find_map(|p| p.error.as_deref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::missing_tracepoint;
    use crate::recording::model::ProbeStatus;

    #[test]
    fn a_family_left_out_by_choice_is_not_a_fault() {
        let s = ProbeStatus::left_out("perf", "left out by choice (probes: sched)".into());
        assert_eq!(ProbeReason::of_family(&s), ProbeReason::LeftOut);
        assert_eq!(ProbeReason::LeftOut.as_str(), "left_out");
    }

    #[test]
    fn errors_the_probes_write_map_to_their_codes() {
        let cases = [
            (None, ProbeReason::Attached),
            (
                Some(format!(
                    "{NOT_APPLICABLE} no allocator found in pid 42 (no mapped object defines malloc)"
                )),
                ProbeReason::NotApplicable,
            ),
            (
                Some(missing_tracepoint("contention_begin")),
                ProbeReason::KernelUnsupported,
            ),
            (
                Some("kernel BTF: No such file or directory (os error 2)".into()),
                ProbeReason::KernelUnsupported,
            ),
            (
                Some("attach: `perf_event_open` failed: Operation not permitted (os error 1)".into()),
                ProbeReason::Permission,
            ),
            (
                Some("load: the BPF_PROG_LOAD syscall failed: Cannot allocate memory (os error 12)".into()),
                ProbeReason::Resources,
            ),
            (
                Some("load: the BPF_PROG_LOAD syscall failed. Verifier output: R1 invalid mem access".into()),
                ProbeReason::LoadFailed,
            ),
            (
                Some("attach: bpf_link_create failed: Device or resource busy (os error 16)".into()),
                ProbeReason::AttachFailed,
            ),
            (
                Some("program sched_switch missing from the eBPF object".into()),
                ProbeReason::Other,
            ),
        ];
        for (error, want) in cases {
            assert_eq!(ProbeReason::of_error(error.as_deref()), want, "{error:?}");
        }
    }

    #[test]
    fn a_family_is_attached_only_when_every_program_is() {
        let ok = ProbeStatus::same_for_all("alloc", &["a", "b"], "uprobe/x".into(), None);
        assert_eq!(ProbeReason::of_family(&ok), ProbeReason::Attached);
        let mut half = ok.clone();
        half.programs[1].error = Some("attach: Permission denied (os error 13)".into());
        assert_eq!(ProbeReason::of_family(&half), ProbeReason::Permission);
        assert!(!half.attached());
        let none = ProbeStatus {
            family: "sched".into(),
            programs: Vec::new(),
            left_out: None,
        };
        assert_eq!(ProbeReason::of_family(&none), ProbeReason::Other);
    }

    #[test]
    fn label_values_are_distinct_snake_case() {
        let mut seen = std::collections::BTreeSet::new();
        for r in ProbeReason::ALL {
            let s = r.as_str();
            assert!(s.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{s}");
            assert!(seen.insert(s), "{s} twice");
        }
    }
}
