//! Field offsets in kernel structures, resolved from the running kernel's BTF
//! (`/sys/kernel/btf/vmlinux`).
//!
//! Rust eBPF programs have no CO-RE field relocations, so the loader resolves
//! the few `task_struct` offsets the programs need and passes them as
//! read-only globals. Anonymous struct/union members (randstruct layouts) are
//! searched recursively.

use std::path::Path;

use btf_rs::{Btf, Type};

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
}

pub fn load_vmlinux() -> Result<Btf, BtfError> {
    Btf::from_file(Path::new(VMLINUX_BTF)).map_err(|source| BtfError::Read {
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
        })
    }
}

/// Byte offset of `field` in struct `strukt`.
pub fn field_offset(btf: &Btf, strukt: &str, field: &str) -> Result<u32, BtfError> {
    let types = btf
        .resolve_types_by_name(strukt)
        .map_err(|_| BtfError::NoStruct(strukt.into()))?;
    for ty in types {
        if let Type::Struct(s) = ty {
            if s.members.is_empty() {
                continue; // a forward declaration's twin; look for the full one
            }
            if let Some(bits) = find_member(btf, &s, field, 0, 0)? {
                return Ok(bits / 8);
            }
            return Err(BtfError::NoField {
                strukt: strukt.into(),
                field: field.into(),
            });
        }
    }
    Err(BtfError::NoStruct(strukt.into()))
}

fn find_member(
    btf: &Btf,
    s: &btf_rs::Struct,
    field: &str,
    base_bits: u32,
    depth: u32,
) -> Result<Option<u32>, BtfError> {
    for m in &s.members {
        let name = btf.resolve_name(m).unwrap_or_default();
        let bits = base_bits + m.bit_offset();
        if name == field {
            return Ok(Some(bits));
        }
        if name.is_empty() && depth < 8 {
            let mut ty = btf.resolve_chained_type(m)?;
            // Skip qualifiers/typedefs to reach the anonymous aggregate.
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
            if let Type::Struct(inner) | Type::Union(inner) = ty
                && let Some(found) = find_member(btf, &inner, field, bits, depth + 1)?
            {
                return Ok(Some(found));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Needs no root: /sys/kernel/btf/vmlinux is world-readable.
    #[test]
    fn task_struct_offsets_are_plausible() {
        let btf = load_vmlinux().expect("mdiag needs kernel BTF; this host has none");
        let off = TaskOffsets::resolve(&btf).unwrap();
        // pid and tgid are adjacent pid_t fields; comm is a later char[16].
        assert_eq!(off.tgid, off.pid + 4);
        assert!(off.comm > off.tgid);
        assert!(field_offset(&btf, "task_struct", "no_such_field_xyz").is_err());
        assert!(matches!(
            field_offset(&btf, "no_such_struct_xyz", "pid"),
            Err(BtfError::NoStruct(_))
        ));
    }
}
