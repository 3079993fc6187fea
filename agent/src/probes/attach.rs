//! What every family's attach shares: the eBPF object loaded with the kernel
//! facts its programs need, and the [`AttachContext`] each family's attach
//! (its entry in [`FAMILIES`](super::FAMILIES)) is given.
//!
//! The kernel's BTF is read here once: btf-rs resolves the `task_struct` and
//! `pt_regs` offsets and finds the tracepoints this kernel lacks, then aya
//! parses its own copy for the loader and every BTF-tracepoint attach. A
//! family's preconditions (those offsets) are results, not early returns:
//! a family whose precondition failed records the reason in each program's
//! status, and the others still attach.

use aya::{
    Ebpf, EbpfLoader,
    programs::{BtfTracePoint, tp_btf::BtfTracePointLinkId},
};
use mdiag_common::{sched as sched_common, syscalls as syscalls_common};

use super::{FAMILIES, FamilyDef, ProbeConfig, ProbeError, btf, syscalls};
use crate::recording::{ProbeStatus, ProgramStatus};

/// What a family's attach is given, besides the [`Probes`](super::Probes)
/// that owns the loaded object and takes the family's reader.
pub struct AttachContext {
    /// The kernel's BTF as aya parsed it, shared by every BTF-tracepoint
    /// attach (aya would otherwise parse it per use), or why it could not be.
    kernel_btf: Result<aya::Btf, String>,
    /// The `task_struct` offsets were resolved (the object has them), or why
    /// not (`sched`, `contention`).
    pub task_offsets: Result<(), String>,
    /// The `pt_regs` offsets were resolved (the object has them), or why not
    /// (`syscalls`).
    pub regs_offsets: Result<(), String>,
    /// The watched syscalls' entry functions in this kernel, or why the
    /// fentry/fexit programs cannot be used (`syscalls`).
    pub syscall_entries: Result<Vec<syscalls::entry_points::EntryPoint>, String>,
    /// Tracepoints this kernel does not have: their programs fail with one
    /// line naming the kernel feature instead of a loader error.
    absent: Vec<&'static str>,
    /// Thread-group id of the target; `None` = host-wide.
    pub target_tgid: Option<u32>,
    /// The links made so far, by family, for the agent's duty cycle
    /// ([`super::cycle`]) to detach and attach again.
    pub(crate) links: std::cell::RefCell<Vec<super::cycle::Link>>,
}

impl AttachContext {
    /// Reads what the families need from the kernel's BTF and loads the
    /// object with it.
    pub(super) fn load(config: ProbeConfig) -> Result<(Self, Ebpf), ProbeError> {
        // btf-rs's parse of the kernel BTF (tens of MiB) lives only while the
        // offsets are resolved: it is dropped before aya parses its own copy,
        // which keeps mdiag's peak RSS within its budget.
        let (offsets, regs, absent, syscall_entries) = {
            let vmlinux = btf::load_vmlinux();
            let absent: Vec<&'static str> = vmlinux.as_ref().map_or_else(
                |_| Vec::new(),
                |b| {
                    all_tracepoints()
                        .filter(|tp| btf::tracepoint_args(b, tp).is_none())
                        .collect()
                },
            );
            let offsets = vmlinux
                .as_ref()
                .map_err(ToString::to_string)
                .and_then(|b| btf::TaskOffsets::resolve(b).map_err(|e| e.to_string()));
            let regs = vmlinux
                .as_ref()
                .map_err(ToString::to_string)
                .and_then(|b| syscalls::regs_offsets(b).map_err(|e| e.to_string()));
            let syscall_entries = vmlinux
                .as_ref()
                .map_err(ToString::to_string)
                .and_then(syscalls::entry_points::resolve);
            (offsets, regs, absent, syscall_entries)
        };
        let regs_offsets = regs
            .as_ref()
            .map_or(syscalls::RegsOffsets::default(), |r| *r);
        let syscall_nrs = syscalls::syscall_numbers();
        let (pid_off, tgid_off, comm_off, cpu_off, state_src) = match &offsets {
            Ok(o) => (o.pid, o.tgid, o.comm, o.cpu, o.prev_state),
            Err(_) => (0, 0, 0, 0, 0),
        };
        let target = config.target_tgid.unwrap_or(0);
        let kernel_btf = aya::Btf::from_sys_fs().map_err(|e| format!("kernel BTF: {e}"));
        let mut loader = EbpfLoader::new();
        if let Ok(kbtf) = &kernel_btf {
            loader.btf(kbtf);
        }
        let ebpf = loader
            .override_global(sched_common::GLOBAL_TARGET_TGID, &target, true)
            .override_global(sched_common::GLOBAL_TASK_PID_OFFSET, &pid_off, true)
            .override_global(sched_common::GLOBAL_TASK_TGID_OFFSET, &tgid_off, true)
            .override_global(sched_common::GLOBAL_TASK_COMM_OFFSET, &comm_off, true)
            .override_global(sched_common::GLOBAL_TASK_CPU_OFFSET, &cpu_off, true)
            .override_global(sched_common::GLOBAL_TASK_STATE_OFFSET, &state_src, true)
            .override_global(syscalls_common::GLOBAL_SYSCALL_NRS, &syscall_nrs, true)
            .override_global(
                syscalls_common::GLOBAL_REGS_ARG_OFFSETS,
                &regs_offsets.args,
                true,
            )
            .override_global(
                syscalls_common::GLOBAL_REGS_IP_OFFSET,
                &regs_offsets.ip,
                true,
            )
            .override_global(
                syscalls_common::GLOBAL_REGS_SP_OFFSET,
                &regs_offsets.sp,
                true,
            )
            .load(crate::EBPF_OBJECT)?;
        let cx = Self {
            kernel_btf,
            task_offsets: offsets.map(|_| ()),
            regs_offsets: regs.map(|_| ()),
            syscall_entries,
            absent,
            target_tgid: config.target_tgid,
            links: std::cell::RefCell::default(),
        };
        Ok((cx, ebpf))
    }

    /// The kernel's BTF as aya parsed it, or why it could not be.
    pub fn kernel_btf(&self) -> Result<&aya::Btf, String> {
        self.kernel_btf.as_ref().map_err(Clone::clone)
    }

    /// Loads and attaches each `(program, tracepoint)` of a family's `def` when
    /// `precondition` holds; never fails as a whole: every program gets its
    /// own status.
    pub fn attach_tracepoints(
        &self,
        ebpf: &mut Ebpf,
        def: &FamilyDef,
        precondition: &Result<(), String>,
    ) -> ProbeStatus {
        self.attach_tracepoints_folded(ebpf, def, precondition, None)
    }

    /// As [`attach_tracepoints`](Self::attach_tracepoints), except that the
    /// program `folded.0` is not attached: its work is done by the program
    /// `folded.1` of another family, which its status names.
    pub fn attach_tracepoints_folded(
        &self,
        ebpf: &mut Ebpf,
        def: &FamilyDef,
        precondition: &Result<(), String>,
        folded: Option<(&str, &str)>,
    ) -> ProbeStatus {
        let family = def.name;
        let programs = def
            .tracepoints
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
                            self.links.borrow_mut().push(super::cycle::Link {
                                family,
                                program: prog,
                                id: Some(super::cycle::LinkId::Tp(id)),
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
        }
    }
}

/// Every BTF tracepoint a family attaches to, from the family table.
fn all_tracepoints() -> impl Iterator<Item = &'static str> {
    FAMILIES
        .iter()
        .flat_map(|f| f.tracepoints.iter())
        .map(|&(_, tp)| tp)
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
pub(super) fn reader_if<R, E: std::fmt::Display>(
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
pub(super) fn reader_or_warn<R, E: std::fmt::Display>(
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

/// Hands start-up's freed memory back to the kernel. The kernel BTF parsed
/// for loading and attaching (tens of MiB) is freed by now, but long-lived
/// allocations made meanwhile (maps, kallsyms) sit above it in the heap, so
/// glibc would keep the hole resident for the whole recording (about 6 MiB
/// measured); `malloc_trim` releases free pages anywhere in the heap.
pub(super) fn release_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim takes no pointers and only walks glibc's own free
    // lists under its arena locks; it is safe to call from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Older kernels charge BPF maps to RLIMIT_MEMLOCK; newer ones use memcg.
/// Raising it may be refused (containers): log and go on.
pub(super) fn raise_memlock() {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads a valid, fully initialised rlimit struct.
    let ret = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) };
    if ret != 0 {
        tracing::debug!(
            "could not raise RLIMIT_MEMLOCK ({}); fine on kernels >= 5.11 that account BPF memory to the cgroup",
            std::io::Error::last_os_error()
        );
    }
}
