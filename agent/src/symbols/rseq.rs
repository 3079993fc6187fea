//! rseq-related data symbols of the target: glibc's `__rseq_offset`,
//! `__rseq_size` and `__rseq_flags` (since glibc 2.35; a later probe reads
//! them with process_vm_readv to see whether glibc registered rseq, which
//! then makes TCMalloc's own registration fail), and TCMalloc's thread-local
//! rseq area (`__rseq_abi` in the TCMalloc that MongoDB vendors) and its
//! `tcmalloc_*` thread-local C symbols.
//!
//! glibc defines the `__rseq_*` variables in the dynamic loader
//! (`ld-linux-x86-64.so.2`), not in `libc.so.6` (which imports them): both
//! are searched, libc first, then the loader, the main executable (static
//! glibc) and the rest.

use serde::{Deserialize, Serialize};

use super::elf::DataKind;
use super::process::{LoadedObject, ProcessSymbols};

/// A data symbol located in the target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataSymbolLocation {
    pub object: String,
    pub name: String,
    pub kind: DataKind,
    /// `st_value` (for TLS: the offset in the module's TLS block).
    pub vaddr: u64,
    pub size: u64,
    /// Runtime address in the target (None for TLS).
    pub address: Option<u64>,
}

/// The rseq symbols found.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RseqSymbols {
    /// glibc's `__rseq_offset` (ptrdiff_t: thread pointer to struct rseq).
    pub rseq_offset: Option<DataSymbolLocation>,
    /// glibc's `__rseq_size` (unsigned int: 0 when glibc did not register).
    pub rseq_size: Option<DataSymbolLocation>,
    /// glibc's `__rseq_flags`.
    pub rseq_flags: Option<DataSymbolLocation>,
    /// TCMalloc's: `__rseq_abi` and `tcmalloc_*` data symbols, any object.
    pub tcmalloc: Vec<DataSymbolLocation>,
}

fn is_loader(file: &str) -> bool {
    file.starts_with("ld-linux") || (file.starts_with("ld-") && file.contains(".so"))
}

fn locate(o: &LoadedObject, name: &str) -> Option<DataSymbolLocation> {
    let d = o.resolve_data(name)?;
    Some(DataSymbolLocation {
        object: o.mapped.path.to_string_lossy().into_owned(),
        name: d.name,
        kind: d.kind,
        vaddr: d.vaddr,
        size: d.size,
        address: d.address,
    })
}

/// Finds the rseq symbols in a process.
pub fn find_rseq_symbols(process: &ProcessSymbols) -> RseqSymbols {
    let rank = |o: &LoadedObject| {
        let file = o.mapped.file_name();
        if file.starts_with("libc.so") {
            0
        } else if is_loader(file) {
            1
        } else if o.mapped.is_main {
            2
        } else {
            3
        }
    };
    let mut glibc_order: Vec<&LoadedObject> = process.objects.iter().collect();
    glibc_order.sort_by_key(|o| rank(o));
    let find = |name: &str| glibc_order.iter().find_map(|o| locate(o, name));
    let mut tcmalloc: Vec<DataSymbolLocation> = process
        .objects
        .iter()
        .flat_map(|o| {
            o.elf
                .data_symbols()
                .iter()
                .filter(|d| d.name == "__rseq_abi" || d.name.starts_with("tcmalloc_"))
                .filter_map(move |d| locate(o, &d.name))
        })
        .collect();
    tcmalloc.sort_by(|a, b| (&a.object, &a.name).cmp(&(&b.object, &b.name)));
    RseqSymbols {
        rseq_offset: find("__rseq_offset"),
        rseq_size: find("__rseq_size"),
        rseq_flags: find("__rseq_flags"),
        tcmalloc,
    }
}
