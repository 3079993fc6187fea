//! The kernel functions the watched syscalls enter through, per
//! architecture, and which of them the running kernel has (its BTF): where
//! the fentry/fexit programs of the syscalls family attach.
//!
//! A syscall enters through its architecture's wrapper, `__x64_sys_futex`,
//! `__arm64_sys_futex`, `__s390x_sys_futex`, which takes the user registers
//! (`const struct pt_regs *`) as its one argument: the programs read the
//! arguments from there, as the `sys_enter` fallback does. s390x's `mmap` is
//! `old_mmap` (see `numbers.rs`). A function the kernel does not have is
//! skipped when its syscall arrived later than the oldest supported kernel
//! (nothing can make that call there); any other missing function, or one
//! that does not take `struct pt_regs *`, means these names do not fit this
//! kernel, and the family falls back to the tracepoints.

use btf_rs::{Btf, Type};
use mdiag_common::syscalls::{WATCHED_SYSCALLS, WatchedSyscall};

/// How one architecture names its syscall wrappers.
struct Naming {
    prefix: &'static str,
    /// The 64-bit `mmap` entry's name after `sys_`.
    mmap: &'static str,
}

#[cfg_attr(
    not(target_arch = "x86_64"),
    allow(dead_code, reason = "other architectures' names: checked by the tests")
)]
const X86_64: Naming = Naming {
    prefix: "__x64_",
    mmap: "mmap",
};
#[cfg_attr(
    not(target_arch = "aarch64"),
    allow(dead_code, reason = "other architectures' names: checked by the tests")
)]
const AARCH64: Naming = Naming {
    prefix: "__arm64_",
    mmap: "mmap",
};
#[cfg_attr(
    not(target_arch = "s390x"),
    allow(dead_code, reason = "other architectures' names: checked by the tests")
)]
const S390X: Naming = Naming {
    prefix: "__s390x_",
    mmap: "old_mmap",
};

impl Naming {
    /// The wrapper of `syscall` (named as in the syscall table).
    fn function(&self, syscall: &str) -> String {
        let name = if syscall == "mmap" {
            self.mmap
        } else {
            syscall
        };
        format!("{}sys_{name}", self.prefix)
    }
}

/// The running architecture's naming, if the family knows it.
fn naming() -> Option<&'static Naming> {
    #[cfg(target_arch = "x86_64")]
    {
        Some(&X86_64)
    }
    #[cfg(target_arch = "aarch64")]
    {
        Some(&AARCH64)
    }
    #[cfg(target_arch = "s390x")]
    {
        Some(&S390X)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "s390x")))]
    {
        None
    }
}

/// Syscalls that arrived after the oldest kernel mdiag supports (5.10):
/// absent from a kernel, nothing can make them there.
const LATER: [(&str, &str); 1] = [("futex_waitv", "5.16")];

/// One watched syscall's entry function in the running kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryPoint {
    pub syscall: &'static WatchedSyscall,
    /// The kernel function, e.g. `__x64_sys_futex`.
    pub function: String,
    /// Why its programs are not attached (`None`: they are).
    pub skipped: Option<String>,
}

/// Every watched syscall's entry function as this kernel's BTF has it, or
/// why the fentry/fexit programs cannot be used here at all.
pub fn resolve(btf: &Btf) -> Result<Vec<EntryPoint>, String> {
    let naming = naming().ok_or("no syscall wrapper names for this architecture")?;
    WATCHED_SYSCALLS
        .iter()
        .map(|syscall| {
            let function = naming.function(syscall.name);
            let skipped = match takes_pt_regs(btf, &function) {
                Some(true) => None,
                Some(false) => {
                    return Err(format!("{function} does not take struct pt_regs *"));
                }
                None => match LATER.iter().find(|(name, _)| *name == syscall.name) {
                    Some((name, since)) => Some(format!(
                        "this kernel has no {function}: {name} arrived in Linux {since}, nothing can make that call here"
                    )),
                    None => return Err(format!("this kernel's BTF has no function {function}")),
                },
            };
            Ok(EntryPoint {
                syscall,
                function,
                skipped,
            })
        })
        .collect()
}

/// Whether kernel function `name` takes exactly one argument of type
/// `[const] struct pt_regs *`; `None` when the BTF has no such function.
fn takes_pt_regs(btf: &Btf, name: &str) -> Option<bool> {
    let func = btf
        .resolve_types_by_name(name)
        .ok()?
        .into_iter()
        .find_map(|t| match t {
            Type::Func(f) => Some(f),
            _ => None,
        })?;
    let Ok(Type::FuncProto(proto)) = btf.resolve_chained_type(&func) else {
        return Some(false);
    };
    let [param] = proto.parameters.as_slice() else {
        return Some(false);
    };
    Some(points_to_pt_regs(btf, btf.resolve_chained_type(param).ok()))
}

/// `ty` is a pointer to (a const or volatile) `struct pt_regs`, which the
/// BTF may hold as a forward declaration (5.10's `__x64_sys_madvise`).
fn points_to_pt_regs(btf: &Btf, ty: Option<Type>) -> bool {
    let Some(Type::Ptr(ptr)) = ty else {
        return false;
    };
    let mut pointee = btf.resolve_chained_type(&ptr).ok();
    while let Some(Type::Const(q) | Type::Volatile(q)) = &pointee {
        pointee = btf.resolve_chained_type(q).ok();
    }
    match pointee {
        Some(Type::Struct(s)) => btf.resolve_name(&s).is_ok_and(|n| n == "pt_regs"),
        Some(Type::Fwd(f)) => !f.is_union() && btf.resolve_name(&f).is_ok_and(|n| n == "pt_regs"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each architecture's wrapper is its prefix and the 64-bit entry of the
    /// kernel's syscall table (`sys_old_mmap` on s390x).
    #[test]
    fn wrappers_are_the_prefix_and_the_table_entry() {
        use crate::family::syscalls::numbers::tables::{
            AARCH64_TBL, S390X_TBL, X86_64_TBL, lookup,
        };
        for (naming, tbl) in [
            (&X86_64, X86_64_TBL),
            (&AARCH64, AARCH64_TBL),
            (&S390X, S390X_TBL),
        ] {
            for s in &WATCHED_SYSCALLS {
                let (_, entry) = lookup(tbl, s.name).expect("syscall in the table");
                assert_eq!(naming.function(s.name), format!("{}{entry}", naming.prefix));
            }
        }
        assert_eq!(S390X.function("mmap"), "__s390x_sys_old_mmap");
        assert_eq!(X86_64.function("futex"), "__x64_sys_futex");
    }

    #[test]
    fn this_kernel_has_every_wrapper_taking_pt_regs() {
        if crate::emulation::skip_under_emulation(
            "this_kernel_has_every_wrapper_taking_pt_regs",
            "/sys/kernel/btf/vmlinux is the emulating host's kernel",
        ) {
            return;
        }
        let btf = super::super::btf::load_vmlinux().expect("kernel BTF");
        let points = resolve(&btf).expect("entry points");
        assert_eq!(points.len(), WATCHED_SYSCALLS.len());
        // Only a syscall younger than the oldest supported kernel may be missing.
        assert!(
            points
                .iter()
                .filter(|p| p.skipped.is_some())
                .all(|p| LATER.iter().any(|(name, _)| *name == p.syscall.name)),
            "{points:?}"
        );
        assert!(points.iter().any(|p| p.function.ends_with("sys_futex")));
        // Not a wrapper: the syscall's own body takes its arguments.
        assert_eq!(takes_pt_regs(&btf, "do_futex"), Some(false));
        assert_eq!(takes_pt_regs(&btf, "no_such_function_in_any_kernel"), None);
    }
}
