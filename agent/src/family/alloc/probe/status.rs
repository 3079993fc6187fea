//! Allocator family: its status lines (one per program of the pair), with
//! the verifier rejections older kernels give named in one line, and the
//! "not applicable" status that makes the next window try again.

use super::{FAMILY, pair::PairKind};
use crate::kit::probe::ProbeStatus;

/// One line naming the kernel feature a verifier rejection comes from, for
/// the rejections older kernels give (instead of the verifier's dump).
fn kernel_feature_missing(error: &str) -> Option<String> {
    // Helper 174 is bpf_get_attach_cookie: how the pair tells the probed
    // functions apart (Linux 5.15+).
    error.contains("invalid func unknown#174").then(|| {
        "this kernel lacks the bpf_get_attach_cookie helper (Linux 5.15+), which the allocator probes need to tell the functions apart".to_owned()
    })
}

pub(super) fn status(attach_point: String, error: Option<String>) -> ProbeStatus {
    status_of(PairKind::Multi, attach_point, error)
}

pub(super) fn status_of(
    kind: PairKind,
    attach_point: String,
    error: Option<String>,
) -> ProbeStatus {
    let (enter, exit) = kind.programs();
    let error = error.map(|e| kernel_feature_missing(&e).unwrap_or(e));
    ProbeStatus::same_for_all(FAMILY, &[enter, exit], attach_point, error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kit::probe::{NOT_APPLICABLE, not_applicable};

    #[test]
    fn an_old_kernels_missing_helper_is_named_in_one_line() {
        let dump = "program mdiag_alloc_exit: load: ... 51: (85) call unknown#174\ninvalid func unknown#174\nverification time 1412 usec";
        let s = status(String::from("uprobe/x"), Some(dump.into()));
        let e = s.programs[0].error.as_deref().unwrap();
        assert!(
            e.contains("bpf_get_attach_cookie") && !e.contains('\n'),
            "{e}"
        );
        let other = status(String::from("uprobe/x"), Some("attach: EPERM".into()));
        assert_eq!(other.programs[1].error.as_deref(), Some("attach: EPERM"));
    }

    #[test]
    fn only_missing_allocators_are_retried() {
        let na = status("p".into(), Some(format!("{NOT_APPLICABLE} unknown")));
        assert!(not_applicable(&na));
        assert!(!not_applicable(&status("p".into(), None)));
        assert!(!not_applicable(&status(
            "p".into(),
            Some("attach: EPERM".into())
        )));
    }
}
