//! Allocator family: attaching and detaching the uprobe + uretprobe pair on
//! a set of entry points, as uprobe_multi links where the kernel has them
//! (Linux 6.6+), else one perf event per entry point.
//!
//! Kept apart from the window logic (`mod.rs`) and shared with the
//! calibration (`calibrate.rs`), which attaches the same pair to mdiag's own
//! do-nothing function.

use std::{num::NonZeroU32, path::Path};

use aya::{
    Ebpf,
    programs::{
        UProbe,
        uprobe::{UProbeAttachPoint, UProbeLinkId, UProbeScope},
    },
};
use mdiag_common::alloc::{PROG_ENTER, PROG_ENTER_MULTI, PROG_EXIT, PROG_EXIT_MULTI};

use super::{AllocError, FAMILY};
use crate::kit::probe::error_chain;

/// How a probe pair is attached to its entry points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PairKind {
    /// One uprobe_multi link per program (Linux ≥ 6.6): attached and
    /// detached in one step each.
    Multi,
    /// One perf event per entry point and program: each detach waits for
    /// the kernel's uprobe synchronisation (about 100 ms measured here), and
    /// the target keeps paying for hits meanwhile.
    PerPoint,
}

impl PairKind {
    pub(super) fn programs(self) -> (&'static str, &'static str) {
        match self {
            PairKind::Multi => (PROG_ENTER_MULTI, PROG_EXIT_MULTI),
            PairKind::PerPoint => (PROG_ENTER, PROG_EXIT),
        }
    }

    /// How the status line names the attach point.
    pub(crate) fn prefix(self) -> &'static str {
        match self {
            PairKind::Multi => "uprobe.multi",
            PairKind::PerPoint => "uprobe",
        }
    }
}

/// An attached pair.
#[derive(Debug)]
pub(crate) struct PairLinks {
    pub(crate) kind: PairKind,
    enter: UProbeLinkId,
    exit: UProbeLinkId,
}

/// Attaches the pair to `points` of `path`, for `pid` only: as uprobe_multi
/// links, else (older kernels) one perf event per point. In each case the
/// return program first, then the entry program, so that every timed entry
/// has its return probed.
pub(crate) fn attach_pair(
    ebpf: &mut Ebpf,
    points: &[UProbeAttachPoint<'_>],
    path: &Path,
    pid: NonZeroU32,
) -> Result<PairLinks, AllocError> {
    match attach_kind(ebpf, PairKind::Multi, points, path, pid) {
        Ok(links) => Ok(links),
        Err(multi) => {
            tracing::debug!(
                family = FAMILY,
                "uprobe_multi unavailable, one perf event per entry point: {multi}"
            );
            attach_kind(ebpf, PairKind::PerPoint, points, path, pid)
        }
    }
}

fn attach_kind(
    ebpf: &mut Ebpf,
    kind: PairKind,
    points: &[UProbeAttachPoint<'_>],
    path: &Path,
    pid: NonZeroU32,
) -> Result<PairLinks, AllocError> {
    let (enter_prog, exit_prog) = kind.programs();
    let exit = attach_one(ebpf, exit_prog, points, path, pid)?;
    match attach_one(ebpf, enter_prog, points, path, pid) {
        Ok(enter) => Ok(PairLinks { kind, enter, exit }),
        Err(e) => {
            detach_one(ebpf, exit_prog, exit);
            Err(e)
        }
    }
}

/// Detaches the entry program, then the return program.
pub(crate) fn detach_pair(ebpf: &mut Ebpf, links: PairLinks) {
    let (enter_prog, exit_prog) = links.kind.programs();
    detach_one(ebpf, enter_prog, links.enter);
    detach_one(ebpf, exit_prog, links.exit);
}

fn program<'a>(ebpf: &'a mut Ebpf, name: &'static str) -> Result<&'a mut UProbe, AllocError> {
    let p = ebpf
        .program_mut(name)
        .ok_or_else(|| AllocError::Program(name, "missing from the eBPF object".into()))?;
    let p: &mut UProbe = p
        .try_into()
        .map_err(|e: aya::programs::ProgramError| AllocError::Program(name, e.to_string()))?;
    if p.fd().is_err() {
        p.load()
            .map_err(|e| AllocError::Program(name, format!("load: {}", error_chain(&e))))?;
    }
    Ok(p)
}

fn attach_one(
    ebpf: &mut Ebpf,
    name: &'static str,
    points: &[UProbeAttachPoint<'_>],
    path: &Path,
    pid: NonZeroU32,
) -> Result<UProbeLinkId, AllocError> {
    program(ebpf, name)?
        .attach(points.iter(), path, UProbeScope::OneProcess(pid))
        .map_err(|e| AllocError::Program(name, format!("attach: {}", error_chain(&e))))
}

fn detach_one(ebpf: &mut Ebpf, name: &'static str, link: UProbeLinkId) {
    match program(ebpf, name) {
        Ok(p) => {
            if let Err(e) = p.detach(link) {
                tracing::warn!(family = FAMILY, program = name, "detach: {e}");
            }
        }
        Err(e) => tracing::warn!(family = FAMILY, "detach: {e}"),
    }
}
