//! [`TargetCode`]: the serializable account of a target's code for the
//! recording — its objects, allocator (with the deciding symbols, probed entry
//! points and slow-path patterns matched), WiredTiger and rseq symbols.

use serde::{Deserialize, Serialize};

use super::allocator::{AllocatorKind, EntryRole, Evidence, SlowPathMatch};
use super::cache::ObjectCache;
use super::elf::ElfType;
use super::error::SymbolError;
use super::process::{LoadedObject, ProcessSymbols};
use super::rseq::{RseqSymbols, find_rseq_symbols};
use super::wiredtiger::WiredTigerReport;

/// One object mapped executable by the target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectSummary {
    /// Path as the target sees it.
    pub path: String,
    pub build_id: Option<String>,
    /// File size in bytes.
    pub size: u64,
    pub is_main: bool,
    pub deleted: bool,
    pub elf_type: ElfType,
    pub pie: bool,
    /// Function symbols in `.symtab` / `.dynsym`, and distinct after merging.
    pub symtab_functions: usize,
    pub dynsym_functions: usize,
    pub functions: usize,
}

/// An object that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnreadableObject {
    pub path: String,
    pub error: String,
}

/// A function resolved for a uprobe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbePoint {
    pub object: String,
    /// Preferred name (the first listed among aliases probed).
    pub symbol: String,
    /// Other names at the same address (one probe serves them all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<EntryRole>,
    /// Uprobe file offset.
    pub file_offset: u64,
    /// Runtime address in the target.
    pub address: Option<u64>,
}

/// The allocator section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatorSummary {
    pub kind: AllocatorKind,
    pub object: Option<String>,
    pub deciding: Vec<Evidence>,
    /// Entry points, one per address (aliases folded).
    pub entry_points: Vec<ProbePoint>,
    pub slow_paths: Vec<SlowPathMatch>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_seen: Vec<(AllocatorKind, Evidence)>,
}

/// The WiredTiger section: detection plus resolved checkpoint functions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WiredTigerSummary {
    #[serde(flatten)]
    pub detected: WiredTigerReport,
    pub checkpoint_probes: Vec<ProbePoint>,
}

/// What the target's code is made of, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TargetCode {
    pub pid: u32,
    /// Main executable first.
    pub objects: Vec<ObjectSummary>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<UnreadableObject>,
    pub allocator: AllocatorSummary,
    pub wiredtiger: WiredTigerSummary,
    pub rseq: RseqSymbols,
}

impl TargetCode {
    /// Reads and analyses process `pid` through the process-wide cache.
    pub fn of(pid: u32) -> Result<TargetCode, SymbolError> {
        let process = ProcessSymbols::load(pid, ObjectCache::global())?;
        Ok(Self::from_process(&process))
    }

    /// Analyses an already loaded process.
    pub fn from_process(process: &ProcessSymbols) -> TargetCode {
        let detected = super::detected::detect(process);
        let (allocator, wiredtiger) = (&detected.allocator, &detected.wiredtiger);
        let object_named = |path: &Option<String>| {
            process
                .objects
                .iter()
                .find(|o| path.as_deref() == o.mapped.path.to_str())
        };
        let entry_points = match object_named(&allocator.object) {
            Some(o) => probe_points(
                o,
                allocator
                    .entry_points
                    .iter()
                    .map(|e| (e.symbol.as_str(), Some(e.role))),
            ),
            None => Vec::new(),
        };
        let checkpoint_probes = match object_named(&wiredtiger.object) {
            Some(o) => probe_points(
                o,
                wiredtiger
                    .checkpoint_functions
                    .iter()
                    .map(|n| (n.as_str(), None)),
            ),
            None => Vec::new(),
        };
        TargetCode {
            pid: process.pid,
            objects: process.objects.iter().map(object_summary).collect(),
            unreadable: process
                .failures
                .iter()
                .map(|(path, error)| UnreadableObject {
                    path: path.to_string_lossy().into_owned(),
                    error: error.clone(),
                })
                .collect(),
            allocator: AllocatorSummary {
                kind: allocator.kind,
                object: allocator.object.clone(),
                deciding: allocator.deciding.clone(),
                entry_points,
                slow_paths: allocator.slow_paths.clone(),
                also_seen: allocator.also_seen.clone(),
            },
            wiredtiger: WiredTigerSummary {
                detected: wiredtiger.clone(),
                checkpoint_probes,
            },
            rseq: find_rseq_symbols(process),
        }
    }
}

fn object_summary(o: &LoadedObject) -> ObjectSummary {
    let counts = o.elf.counts();
    ObjectSummary {
        path: o.mapped.path.to_string_lossy().into_owned(),
        build_id: o.elf.build_id_hex(),
        size: o.elf.size(),
        is_main: o.mapped.is_main,
        deleted: o.mapped.deleted,
        elf_type: o.elf.elf_type(),
        pie: o.elf.is_pie(),
        symtab_functions: counts.symtab_functions,
        dynsym_functions: counts.dynsym_functions,
        functions: counts.functions,
    }
}

/// Resolves names in one object, folding names at the same file offset into
/// the first one's aliases (malloc and TCMallocInternalMalloc are often one
/// function: probing both would count every call twice).
pub fn probe_points<'n>(
    object: &LoadedObject,
    names: impl IntoIterator<Item = (&'n str, Option<EntryRole>)>,
) -> Vec<ProbePoint> {
    let mut out: Vec<ProbePoint> = Vec::new();
    for (name, role) in names {
        let Ok(r) = object.resolve(name) else {
            continue;
        };
        if let Some(p) = out.iter_mut().find(|p| p.file_offset == r.file_offset) {
            if p.symbol != r.name && !p.aliases.contains(&r.name) {
                p.aliases.push(r.name);
            }
            continue;
        }
        out.push(ProbePoint {
            object: r.object.to_string_lossy().into_owned(),
            symbol: r.name,
            aliases: Vec::new(),
            role,
            file_offset: r.file_offset,
            address: r.address,
        });
    }
    out
}
