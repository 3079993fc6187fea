//! How the syscalls family hooks the watched syscalls, and why.
//!
//! Preferred: one fentry/fexit pair per watched syscall on the kernel
//! function it enters through ([`entry_points`](super::entry_points)): BPF
//! trampolines, so every other syscall of the host runs none of mdiag's
//! programs and no task is sent through the traced syscall slow path.
//! Fallback: the `sys_enter`/`sys_exit` BTF tracepoints, which run on every
//! syscall of the host, where the kernel cannot attach them (a kernel
//! without a BPF JIT has no trampolines; arm64 before 6.4 has no ftrace
//! direct calls; x86_64 5.10's verifier refuses to read a
//! `struct pt_regs` its BTF only declares forward, as for
//! `__x64_sys_madvise`; kernels locked down against fentry refuse the load),
//! when any fentry program fails to load or attach, or when [`ENV_VIA`]
//! asks for it.
//!
//! The family's [`ProbeStatus`] tells which: its programs' attach points are
//! `fentry/<function>` and `fexit/<function>`, or `tp_btf/sys_enter` and
//! `tp_btf/sys_exit` followed by the reason fentry was not used.

use std::path::Path;

use aya::{
    Ebpf,
    programs::{FEntry, FExit},
};

use super::probe::{FAMILY, TRACEPOINTS};
use crate::kit::probe::{
    AttachContext, ProbeStatus, ProgramStatus, error_chain,
    links::{Link, LinkId},
    syscall_entries::EntryPoint,
};

/// Environment variable choosing the hooks: `tracepoints` forces the
/// `sys_enter`/`sys_exit` fallback (to test it); unset or `fentry`: fentry
/// where the kernel allows.
pub const ENV_VIA: &str = "MDIAG_SYSCALLS_VIA";

/// What [`ENV_VIA`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// fentry/fexit where the kernel allows, else the tracepoints.
    Fentry,
    /// The tracepoints, whatever the kernel allows.
    Tracepoints,
}

impl Via {
    /// From the value of [`ENV_VIA`] (`None`: unset); an unknown value is
    /// the default, with a warning.
    pub fn parse(value: Option<&str>) -> Self {
        match value {
            None | Some("" | "fentry") => Via::Fentry,
            Some("tracepoints") => Via::Tracepoints,
            Some(other) => {
                tracing::warn!(
                    "{ENV_VIA}={other:?} is neither \"fentry\" nor \"tracepoints\": using fentry"
                );
                Via::Fentry
            }
        }
    }

    fn from_env() -> Self {
        Self::parse(std::env::var(ENV_VIA).ok().as_deref())
    }
}

/// Attaches the family's programs: fentry/fexit where possible, else the
/// tracepoint pair, with the reason in each program's attach point.
pub(super) fn attach(ebpf: &mut Ebpf, cx: &AttachContext) -> ProbeStatus {
    let fentry = match Via::from_env() {
        Via::Tracepoints => Err(format!("{ENV_VIA}=tracepoints")),
        Via::Fentry => cx
            .regs_offsets
            .clone()
            .and_then(|()| bpf_jit(Path::new(JIT_SYSCTL)))
            .and_then(|()| cx.syscall_entries.clone())
            .and_then(|points| {
                let btf = cx.kernel_btf()?;
                attach_fentry(ebpf, btf, &points).map(|(programs, links)| {
                    cx.links
                        .borrow_mut()
                        .extend(links.into_iter().map(|(program, id)| Link {
                            family: FAMILY,
                            program,
                            id: Some(id),
                        }));
                    (points, programs)
                })
            }),
    };
    match fentry {
        Ok((points, programs)) => {
            for p in points.iter().filter(|p| p.skipped.is_some()) {
                tracing::info!(
                    family = FAMILY,
                    "{} not hooked: {}",
                    p.syscall.name,
                    p.skipped.as_deref().unwrap_or_default()
                );
            }
            ProbeStatus {
                family: FAMILY.to_owned(),
                programs,
                left_out: None,
            }
        }
        Err(why) => {
            tracing::info!(
                family = FAMILY,
                "via sys_enter/sys_exit, which run on every syscall of the host: fentry unavailable: {why}"
            );
            let mut status = cx.attach_tracepoints(ebpf, FAMILY, TRACEPOINTS, &cx.regs_offsets);
            for p in &mut status.programs {
                p.attach_point = fallback_attach_point(&p.attach_point, &why);
            }
            status
        }
    }
}

/// The sysctl a kernel built with a BPF JIT (`CONFIG_BPF_JIT`) has.
const JIT_SYSCTL: &str = "/proc/sys/net/core/bpf_jit_enable";

/// Whether this kernel has a BPF JIT, which writes the trampolines fentry
/// and fexit programs run from: without one (Debian's s390x 6.12 is built
/// so) loading an fexit program fails with a bare ENOMEM, so the reason is
/// said before trying. `sysctl` is [`JIT_SYSCTL`] (a parameter for tests).
fn bpf_jit(sysctl: &Path) -> Result<(), String> {
    if sysctl.exists() {
        return Ok(());
    }
    Err(format!(
        "this kernel has no BPF JIT (no {}: built without CONFIG_BPF_JIT), and fentry/fexit trampolines are written by the JIT",
        sysctl.display()
    ))
}

/// A tracepoint program's attach point with the reason for the fallback.
pub fn fallback_attach_point(attach_point: &str, why: &str) -> String {
    format!("{attach_point} (every syscall of the host runs it; fentry unavailable: {why})")
}

/// A program and the link it attached with.
type ProgramLink = (&'static str, LinkId);

/// Entry or exit program of a pair.
#[derive(Debug, Clone, Copy)]
enum Side {
    Entry,
    Exit,
}

impl Side {
    fn kind(self) -> &'static str {
        match self {
            Side::Entry => "fentry",
            Side::Exit => "fexit",
        }
    }
}

/// Loads and attaches every pair of `points` not skipped, exits before
/// entries (so an entry seen always has its exit hooked); on the first
/// failure unloads what it loaded and says why. Returns the statuses and
/// the links in the order they were made (the duty cycle re-attaches in it).
fn attach_fentry(
    ebpf: &mut Ebpf,
    btf: &aya::Btf,
    points: &[EntryPoint],
) -> Result<(Vec<ProgramStatus>, Vec<ProgramLink>), String> {
    let used: Vec<(&'static str, Side, &str)> = points
        .iter()
        .filter(|p| p.skipped.is_none())
        .flat_map(|p| {
            [
                (p.syscall.exit, Side::Exit, p.function.as_str()),
                (p.syscall.entry, Side::Entry, p.function.as_str()),
            ]
        })
        .collect();
    let result = used
        .iter()
        .try_for_each(|&(prog, side, function)| load(ebpf, prog, side, function, btf))
        .and_then(|()| {
            let exits_first = used.iter().filter(|(_, s, _)| matches!(s, Side::Exit));
            let entries = used.iter().filter(|(_, s, _)| matches!(s, Side::Entry));
            exits_first
                .chain(entries)
                .map(|&(prog, side, function)| {
                    attach_one(ebpf, prog, side, function).map(|id| (prog, id))
                })
                .collect::<Result<Vec<_>, String>>()
        });
    let links = match result {
        Ok(links) => links,
        Err(e) => {
            for &(prog, side, _) in &used {
                unload(ebpf, prog, side);
            }
            return Err(e);
        }
    };
    let statuses = points
        .iter()
        .filter(|p| p.skipped.is_none())
        .flat_map(|p| {
            [(p.syscall.entry, Side::Entry), (p.syscall.exit, Side::Exit)].map(|(prog, side)| {
                ProgramStatus {
                    name: prog.to_owned(),
                    attach_point: format!("{}/{}", side.kind(), p.function),
                    error: None,
                }
            })
        })
        .collect();
    Ok((statuses, links))
}

/// `prog at fentry/function: what` on one line.
fn failed(prog: &str, side: Side, function: &str, what: &str, e: &dyn std::error::Error) -> String {
    format!(
        "{prog} at {}/{function}: {what}: {}",
        side.kind(),
        error_chain(e)
    )
}

fn load(
    ebpf: &mut Ebpf,
    prog: &str,
    side: Side,
    function: &str,
    btf: &aya::Btf,
) -> Result<(), String> {
    let program = ebpf
        .program_mut(prog)
        .ok_or_else(|| format!("program {prog} missing from the eBPF object"))?;
    let loaded = match side {
        Side::Entry => <&mut FEntry>::try_from(program).and_then(|p| p.load(function, btf)),
        Side::Exit => <&mut FExit>::try_from(program).and_then(|p| p.load(function, btf)),
    };
    loaded.map_err(|e| failed(prog, side, function, "load", &e))
}

fn attach_one(ebpf: &mut Ebpf, prog: &str, side: Side, function: &str) -> Result<LinkId, String> {
    let program = ebpf
        .program_mut(prog)
        .ok_or_else(|| format!("program {prog} missing from the eBPF object"))?;
    let attached = match side {
        Side::Entry => {
            <&mut FEntry>::try_from(program).and_then(|p| p.attach().map(LinkId::FEntry))
        }
        Side::Exit => <&mut FExit>::try_from(program).and_then(|p| p.attach().map(LinkId::FExit)),
    };
    attached.map_err(|e| failed(prog, side, function, "attach", &e))
}

/// Detaches and unloads `prog` (nothing when it was not loaded).
fn unload(ebpf: &mut Ebpf, prog: &str, side: Side) {
    let Some(program) = ebpf.program_mut(prog) else {
        return;
    };
    let _ = match side {
        Side::Entry => <&mut FEntry>::try_from(program).and_then(FEntry::unload),
        Side::Exit => <&mut FExit>::try_from(program).and_then(FExit::unload),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_without_a_jit_is_named_before_any_load() {
        let dir = tempfile::tempdir().unwrap();
        let sysctl = dir.path().join("bpf_jit_enable");
        let why = bpf_jit(&sysctl).unwrap_err();
        assert!(
            why.starts_with("this kernel has no BPF JIT (no ") && why.contains("CONFIG_BPF_JIT"),
            "{why}"
        );
        std::fs::write(&sysctl, "1\n").unwrap();
        assert_eq!(bpf_jit(&sysctl), Ok(()));
    }

    #[test]
    fn the_variable_chooses_the_hooks() {
        assert_eq!(Via::parse(None), Via::Fentry);
        assert_eq!(Via::parse(Some("")), Via::Fentry);
        assert_eq!(Via::parse(Some("fentry")), Via::Fentry);
        assert_eq!(Via::parse(Some("tracepoints")), Via::Tracepoints);
        assert_eq!(Via::parse(Some("kprobes")), Via::Fentry);
    }

    #[test]
    fn a_fallback_names_its_hook_and_reason() {
        assert_eq!(
            fallback_attach_point("tp_btf/sys_enter", "MDIAG_SYSCALLS_VIA=tracepoints"),
            "tp_btf/sys_enter (every syscall of the host runs it; fentry unavailable: MDIAG_SYSCALLS_VIA=tracepoints)"
        );
    }
}
