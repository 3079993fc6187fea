//! Field offsets in kernel structures, resolved from the running kernel's BTF
//! (`/sys/kernel/btf/vmlinux`).
//!
//! Rust eBPF programs have no CO-RE field relocations, so the loader resolves
//! the few `task_struct` offsets the programs need and passes them as
//! read-only globals. Anonymous struct/union members (randstruct layouts) are
//! searched recursively.

use std::path::Path;

use btf_rs::{Backend, Btf, Type};

pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

#[derive(Debug, thiserror::Error)]
pub enum BtfError {
    #[error(
        "cannot read kernel BTF at {path}: {source} (a kernel built with CONFIG_DEBUG_INFO_BTF=y is required)"
    )]
    Read { path: String, source: btf_rs::Error },
    #[error("kernel BTF has no struct {0}")]
    NoStruct(String),
    #[error("kernel BTF: struct {strukt} has no field {field}")]
    NoField { strukt: String, field: String },
    #[error("kernel BTF lookup failed: {0}")]
    Lookup(#[from] btf_rs::Error),
}

/// Offsets (bytes) of the `task_struct` fields read by the programs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskOffsets {
    pub pid: u32,
    pub tgid: u32,
    pub comm: u32,
    /// The CPU the task is queued on (`task_cpu()`): `thread_info.cpu` on
    /// most architectures, `cpu` on some.
    pub cpu: u32,
    /// Where `sched_switch` programs read `prev_state` ([`prev_state_source`]).
    pub prev_state: u32,
}

/// The kernel's BTF, mapped (Linux 6.16+ maps it read-only from sysfs) and
/// read only where a lookup goes: btf-rs's other backend, which parses
/// every type and name into hash maps up front, holds about 25 MiB while
/// the offsets are resolved, the largest part of mdiag's peak resident set.
/// A lookup by name is then a walk over the types (a millisecond or two):
/// the few dozen made at attach cost less than that parse. Kernels that do
/// not map it get the parse.
pub fn load_vmlinux() -> Result<Btf, BtfError> {
    let path = Path::new(VMLINUX_BTF);
    Btf::from_file_with_backend(path, Backend::Mmap)
        .or_else(|_| Btf::from_file_with_backend(path, Backend::Cache))
        .map_err(|source| BtfError::Read {
            path: VMLINUX_BTF.into(),
            source,
        })
}

impl TaskOffsets {
    pub fn resolve(btf: &Btf) -> Result<Self, BtfError> {
        Ok(Self {
            pid: field_offset(btf, "task_struct", "pid")?,
            tgid: field_offset(btf, "task_struct", "tgid")?,
            comm: field_offset(btf, "task_struct", "comm")?,
            cpu: field_offset(btf, "task_struct", "thread_info.cpu")
                .or_else(|_| field_offset(btf, "task_struct", "cpu"))?,
            prev_state: prev_state_source(btf)?,
        })
    }
}

/// Number of arguments of BTF tracepoint `name` (its `btf_trace_NAME`
/// prototype, without the leading context pointer), `None` when the kernel
/// has no such tracepoint.
pub fn tracepoint_args(btf: &Btf, name: &str) -> Option<usize> {
    let types = btf
        .resolve_types_by_name(&format!("btf_trace_{name}"))
        .ok()?;
    types.into_iter().find_map(|ty| {
        let Type::Typedef(td) = ty else { return None };
        let Type::Ptr(ptr) = btf.resolve_chained_type(&td).ok()? else {
            return None;
        };
        match btf.resolve_chained_type(&ptr).ok()? {
            Type::FuncProto(fp) => Some(fp.parameters.len().saturating_sub(1)),
            _ => None,
        }
    })
}

/// Where `sched_switch` programs read `prev_state` (see
/// `mdiag_common::sched::GLOBAL_TASK_STATE_OFFSET`): 0 when the tracepoint
/// passes it (4 arguments, Linux 5.18+), else the offset of the task's
/// state field (`__state` since 5.14, `state` before).
pub fn prev_state_source(btf: &Btf) -> Result<u32, BtfError> {
    if tracepoint_args(btf, "sched_switch").unwrap_or(0) >= 4 {
        return Ok(0);
    }
    field_offset(btf, "task_struct", "__state")
        .or_else(|_| field_offset(btf, "task_struct", "state"))
}

/// Byte offset of `field` in struct `strukt`; `field` may be a dotted path
/// through nested structs ("thread_info.cpu").
pub fn field_offset(btf: &Btf, strukt: &str, field: &str) -> Result<u32, BtfError> {
    let no_field = || BtfError::NoField {
        strukt: strukt.into(),
        field: field.into(),
    };
    let types = btf
        .resolve_types_by_name(strukt)
        .map_err(|_| BtfError::NoStruct(strukt.into()))?;
    let Some(mut current) = types.into_iter().find_map(|ty| match ty {
        // Skip forward declarations' twins: look for the full definition.
        Type::Struct(s) if !s.members.is_empty() => Some(s),
        _ => None,
    }) else {
        return Err(BtfError::NoStruct(strukt.into()));
    };
    let mut bits = 0;
    let mut segments = field.split('.').peekable();
    while let Some(segment) = segments.next() {
        let (offset, member) = find_member(btf, &current, segment, 0, 0)?.ok_or_else(no_field)?;
        bits += offset;
        if segments.peek().is_some() {
            match strip_qualifiers(btf, btf.resolve_chained_type(&member)?)? {
                Type::Struct(inner) | Type::Union(inner) => current = inner,
                _ => return Err(no_field()),
            }
        }
    }
    Ok(bits / 8)
}

/// Follows typedefs and qualifiers to the underlying type.
fn strip_qualifiers(btf: &Btf, mut ty: Type) -> Result<Type, BtfError> {
    for _ in 0..8 {
        match ty {
            Type::Typedef(_)
            | Type::Const(_)
            | Type::Volatile(_)
            | Type::TypeTag(_)
            | Type::Restrict(_) => {
                let Some(inner) = ty.as_btf_type() else { break };
                ty = btf.resolve_chained_type(inner)?;
            }
            _ => break,
        }
    }
    Ok(ty)
}

/// Bit offset and member named `field`, searching anonymous members too.
fn find_member(
    btf: &Btf,
    s: &btf_rs::Struct,
    field: &str,
    base_bits: u32,
    depth: u32,
) -> Result<Option<(u32, btf_rs::Member)>, BtfError> {
    for m in &s.members {
        let name = btf.resolve_name(m).unwrap_or_default();
        let bits = base_bits + m.bit_offset();
        if name == field {
            return Ok(Some((bits, m.clone())));
        }
        if name.is_empty()
            && depth < 8
            && let Type::Struct(inner) | Type::Union(inner) =
                strip_qualifiers(btf, btf.resolve_chained_type(m)?)?
            && let Some(found) = find_member(btf, &inner, field, bits, depth + 1)?
        {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracepoint_arguments_from_this_kernel() {
        let btf = load_vmlinux().expect("kernel BTF");
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let mut v = release
            .trim()
            .split(['.', '-'])
            .map(|p| p.parse::<u32>().unwrap_or(0));
        let (major, minor) = (v.next().unwrap_or(0), v.next().unwrap_or(0));
        // sched_switch gained prev_state as its fourth argument in 5.18.
        let expected = if (major, minor) >= (5, 18) { 4 } else { 3 };
        assert_eq!(tracepoint_args(&btf, "sched_switch"), Some(expected));
        assert_eq!(tracepoint_args(&btf, "sched_wakeup"), Some(1));
        assert_eq!(tracepoint_args(&btf, "no_such_tracepoint_mdiag"), None);
        let source = prev_state_source(&btf).unwrap();
        assert_eq!(source == 0, expected == 4);
    }

    /// Needs no root: /sys/kernel/btf/vmlinux is world-readable.
    #[test]
    fn task_struct_offsets_are_plausible() {
        let btf = load_vmlinux().expect("mdiag needs kernel BTF; this host has none");
        let off = TaskOffsets::resolve(&btf).unwrap();
        // pid and tgid are adjacent pid_t fields; comm is a later char[16].
        assert_eq!(off.tgid, off.pid + 4);
        assert!(off.comm > off.tgid);
        // x86_64 keeps thread_info (flags, syscall_work, status, cpu) first in task_struct.
        #[cfg(target_arch = "x86_64")]
        assert_eq!(off.cpu, 20);
        assert_eq!(
            field_offset(&btf, "task_struct", "thread_info.cpu").ok(),
            Some(
                field_offset(&btf, "task_struct", "thread_info").unwrap()
                    + field_offset(&btf, "thread_info", "cpu").unwrap()
            )
        );
        assert!(field_offset(&btf, "task_struct", "pid.nope").is_err());
        assert!(field_offset(&btf, "task_struct", "no_such_field_xyz").is_err());
        assert!(matches!(
            field_offset(&btf, "no_such_struct_xyz", "pid"),
            Err(BtfError::NoStruct(_))
        ));
    }
}
