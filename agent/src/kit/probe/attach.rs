//! What every family's attach shares: the [`AttachContext`] each family's
//! attach is given (the kernel facts the object was loaded with, the
//! kernel's BTF as aya parsed it), attaching a family's BTF tracepoints
//! with one status per program, and building its reader when its essential
//! program attached.
//!
//! The hub (`probes::load`) reads the kernel's BTF once and fills the
//! context. A family's preconditions (the `task_struct` or `pt_regs`
//! offsets) are results, not early returns: a family whose precondition
//! failed records the reason in each program's status, and the others still
//! attach.

use super::links::{Link, LinkId};
use super::status::{ProbeStatus, ProgramStatus};
use super::syscall_entries::EntryPoint;
use aya::{
    Ebpf,
    programs::{BtfTracePoint, tp_btf::BtfTracePointLinkId},
};

/// What a family's attach is given, besides the loaded object (which the
/// hub, `probes::Probes`, owns; it also takes the family's reader).
pub struct AttachContext {
    /// The kernel's BTF as aya parsed it, shared by every BTF-tracepoint
    /// attach (aya would otherwise parse it per use), or why it could not be.
    pub(crate) kernel_btf: Result<aya::Btf, String>,
    /// The `task_struct` offsets were resolved (the object has them), or why
    /// not (`sched`, `contention`).
    pub task_offsets: Result<(), String>,
    /// The `pt_regs` offsets were resolved (the object has them), or why not
    /// (`syscalls`).
    pub regs_offsets: Result<(), String>,
    /// The watched syscalls' entry functions in this kernel, or why the
    /// fentry/fexit programs cannot be used (`syscalls`).
    pub syscall_entries: Result<Vec<EntryPoint>, String>,
    /// Tracepoints this kernel does not have: their programs fail with one
    /// line naming the kernel feature instead of a loader error.
    pub(crate) absent: Vec<&'static str>,
    /// Thread-group id of the target; `None` = host-wide.
    pub target_tgid: Option<u32>,
    /// Take the target's call stacks (`ProbeConfig::stacks`, with a target).
    pub stacks: bool,
    /// The perf family's sampling rate, Hz per CPU (`ProbeConfig::sample_hz`).
    pub sample_hz: u64,
    /// The links made so far, by family, for the agent's duty cycle
    /// (`probes::cycle`) to detach and attach again.
    pub(crate) links: std::cell::RefCell<Vec<Link>>,
    /// The families whose reader is attached so far, in attach order (the
    /// hub adds each after its attach: contention folds its switch program
    /// into sched's when sched is here).
    pub attached: Vec<crate::kit::family::Family>,
}

impl AttachContext {
    /// The kernel's BTF as aya parsed it, or why it could not be.
    pub fn kernel_btf(&self) -> Result<&aya::Btf, String> {
        self.kernel_btf.as_ref().map_err(Clone::clone)
    }

    /// Loads and attaches each `(program, tracepoint)` of `family`'s
    /// `tracepoints` when `precondition` holds; never fails as a whole: every
    /// program gets its own status.
    pub fn attach_tracepoints(
        &self,
        ebpf: &mut Ebpf,
        family: &'static str,
        tracepoints: &[(&'static str, &'static str)],
        precondition: &Result<(), String>,
    ) -> ProbeStatus {
        self.attach_tracepoints_folded(ebpf, family, tracepoints, precondition, None)
    }

    /// As [`attach_tracepoints`](Self::attach_tracepoints), except that the
    /// program `folded.0` is not attached: its work is done by the program
    /// `folded.1` of another family, which its status names.
    pub fn attach_tracepoints_folded(
        &self,
        ebpf: &mut Ebpf,
        family: &'static str,
        tracepoints: &[(&'static str, &'static str)],
        precondition: &Result<(), String>,
        folded: Option<(&str, &str)>,
    ) -> ProbeStatus {
        let programs = tracepoints
            .iter()
            .map(|&(prog, tracepoint)| {
                let mut attach_point = format!("tp_btf/{tracepoint}");
                if let Some((name, into)) = folded
                    && name == prog
                {
                    attach_point.push_str(&format!(" (done by {into})"));
                    return ProgramStatus {
                        name: prog.to_owned(),
                        attach_point,
                        error: None,
                    };
                }
                let result = match (precondition, &self.kernel_btf) {
                    _ if self.absent.contains(&tracepoint) => Err(missing_tracepoint(tracepoint)),
                    (Err(e), _) | (_, Err(e)) => Err(e.clone()),
                    (Ok(()), Ok(kbtf)) => {
                        attach_btf_tracepoint(ebpf, prog, tracepoint, kbtf).map(|id| {
                            self.links.borrow_mut().push(Link {
                                family,
                                program: prog,
                                id: Some(LinkId::Tp(id)),
                            });
                        })
                    }
                };
                if let Err(e) = &result {
                    tracing::warn!(family, program = prog, %attach_point, "not attached: {e}");
                }
                ProgramStatus {
                    name: prog.to_owned(),
                    attach_point,
                    error: result.err(),
                }
            })
            .collect();
        ProbeStatus {
            family: family.to_owned(),
            programs,
            left_out: None,
        }
    }
}

/// One line naming the kernel feature a program lacks.
pub fn missing_tracepoint(tracepoint: &str) -> String {
    let since = match tracepoint {
        "contention_begin" | "contention_end" => {
            " (lock:contention_* tracepoints arrived in Linux 5.19)"
        }
        _ => "",
    };
    format!("this kernel has no {tracepoint} tracepoint{since}")
}

/// How a status error starts when there was nothing to probe in the target
/// (yet): the family tries again later.
pub(crate) const NOT_APPLICABLE: &str = "not applicable:";

/// The status says only that there was nothing to probe yet (no WiredTiger,
/// no known allocator): worth retrying later.
pub fn not_applicable(status: &ProbeStatus) -> bool {
    !status.programs.is_empty()
        && status.programs.iter().all(|p| {
            p.error
                .as_deref()
                .is_some_and(|e| e.starts_with(NOT_APPLICABLE))
        })
}

/// Builds a family's reader when its essential program (index `essential`)
/// attached; a reader that cannot be built is logged and the family skipped.
pub(crate) fn reader_if<R, E: std::fmt::Display>(
    status: &ProbeStatus,
    essential: usize,
    family: &str,
    build: impl FnOnce() -> Result<R, E>,
) -> Option<R> {
    if !status
        .programs
        .get(essential)
        .is_some_and(|p| p.error.is_none())
    {
        return None;
    }
    reader_or_warn(family, build)
}

/// Builds a family's reader; one that cannot be built is logged and the
/// family skipped.
pub(crate) fn reader_or_warn<R, E: std::fmt::Display>(
    family: &str,
    build: impl FnOnce() -> Result<R, E>,
) -> Option<R> {
    build()
        .map_err(|e| tracing::warn!(family, "maps unavailable: {e}"))
        .ok()
}

fn attach_btf_tracepoint(
    ebpf: &mut Ebpf,
    prog: &str,
    tracepoint: &str,
    btf: &aya::Btf,
) -> Result<BtfTracePointLinkId, String> {
    let program = ebpf
        .program_mut(prog)
        .ok_or_else(|| format!("program {prog} missing from the eBPF object"))?;
    let program: &mut BtfTracePoint = program.try_into().map_err(|e| format!("{prog}: {e}"))?;
    program
        .load(tracepoint, btf)
        .map_err(|e| format!("load: {}", error_chain(&e)))?;
    program
        .attach()
        .map_err(|e| format!("attach: {}", error_chain(&e)))
}

/// `e: cause: cause` on one line (aya puts the verifier log in a source).
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
