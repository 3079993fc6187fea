//! Allocator family: the target's entry points (resolved by the symbols
//! module at the first window) and, per entry point, where its size argument
//! is and which size classes the kernel side sorts calls into.

use std::path::PathBuf;

use mdiag_common::alloc::{MAX_FUNCS, SIZE_ARG0, SIZE_ARG0_TIMES_ARG1, SIZE_ARG1, SIZE_NONE};

use crate::kit::probe::NOT_APPLICABLE;
use crate::symbols::{AllocatorKind, EntryRole, summary::ProbePoint};

/// Where an entry point's size argument is, by role.
pub fn size_mode(role: Option<EntryRole>) -> u64 {
    match role {
        Some(EntryRole::Malloc | EntryRole::New) => SIZE_ARG0,
        Some(EntryRole::Calloc) => SIZE_ARG0_TIMES_ARG1,
        Some(EntryRole::Realloc | EntryRole::SizedFree | EntryRole::SizedDelete) => SIZE_ARG1,
        Some(EntryRole::Free | EntryRole::Delete) | None => SIZE_NONE,
    }
}

/// Lower bound in bytes of size class `class` (≥ 1).
pub fn class_min_bytes(class: u32) -> u64 {
    mdiag_common::hist::bucket_lower(class.saturating_sub(1) as usize)
}

/// The target's entry points, resolved.
pub(super) struct Resolved {
    pub(super) kind: AllocatorKind,
    pub(super) object: String,
    pub(super) attach_path: PathBuf,
    pub(super) points: Vec<ProbePoint>,
}

/// Resolves the allocator's entry points in `pid`; `Err` says why not
/// (prefixed "not applicable:" when there is nothing to probe).
pub(super) fn resolve(pid: u32) -> Result<Resolved, String> {
    let process = crate::symbols::ProcessSymbols::load(pid, crate::symbols::ObjectCache::global())
        .map_err(|e| format!("symbols of pid {pid}: {e}"))?;
    let code = crate::symbols::TargetCode::from_process(&process);
    let kind = code.allocator.kind;
    let Some(object) = code.allocator.object.clone() else {
        return Err(format!(
            "{NOT_APPLICABLE} no allocator found in pid {pid} (no mapped object defines malloc)"
        ));
    };
    if kind == AllocatorKind::Unknown {
        return Err(format!(
            "{NOT_APPLICABLE} the allocator of pid {pid} ({object}) is of an unknown kind"
        ));
    }
    let mut points = code.allocator.entry_points;
    if points.is_empty() {
        return Err(format!(
            "{NOT_APPLICABLE} no allocation entry point found in {object} (pid {pid})"
        ));
    }
    points.truncate(MAX_FUNCS as usize - 1);
    let attach_path = process
        .objects
        .iter()
        .find(|o| o.mapped.path.to_str() == Some(object.as_str()))
        .map(|o| o.attach_path.clone())
        .ok_or_else(|| format!("{object} is no longer mapped by pid {pid}"))?;
    Ok(Resolved {
        kind,
        object,
        attach_path,
        points,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_arguments_by_role() {
        assert_eq!(size_mode(Some(EntryRole::Malloc)), SIZE_ARG0);
        assert_eq!(size_mode(Some(EntryRole::New)), SIZE_ARG0);
        assert_eq!(size_mode(Some(EntryRole::Calloc)), SIZE_ARG0_TIMES_ARG1);
        assert_eq!(size_mode(Some(EntryRole::Realloc)), SIZE_ARG1);
        assert_eq!(size_mode(Some(EntryRole::SizedDelete)), SIZE_ARG1);
        assert_eq!(size_mode(Some(EntryRole::Free)), SIZE_NONE);
        assert_eq!(size_mode(None), SIZE_NONE);
    }

    #[test]
    fn size_class_bounds() {
        assert_eq!(class_min_bytes(1), 0);
        assert_eq!(class_min_bytes(2), 2);
        assert_eq!(class_min_bytes(7), 64);
        // The kernel's class of a size has that lower bound.
        for size in [1u64, 2, 3, 64, 100, 4096, 1 << 20] {
            let c = mdiag_common::alloc::size_class(size);
            assert!(class_min_bytes(c) <= size.max(1), "{size}");
        }
    }
}
