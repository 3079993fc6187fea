//! A target process's objects with their parsed symbols: resolve a function
//! to its uprobe file offset and runtime address, and symbolize a runtime
//! address (perf-event instruction pointer) back to object + symbol + offset.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::address;
use super::cache::{ObjectCache, open_mapped};
use super::dwarf::InlineFrame;
use super::elf::{DataKind, ElfObject, Function, preferred};
use super::error::SymbolError;
use super::maps::{MappedObject, Maps};

/// One mapped object and its parsed ELF.
#[derive(Debug, Clone)]
pub struct LoadedObject {
    pub mapped: MappedObject,
    pub elf: Arc<ElfObject>,
    /// A path valid from the agent's mount namespace that names this very
    /// file: what `UProbe::attach` takes as its target.
    pub attach_path: PathBuf,
}

impl LoadedObject {
    /// Runtime address of ELF virtual address `vaddr` in the process.
    pub fn runtime_address(&self, vaddr: u64) -> Option<u64> {
        address::runtime_address_of_vaddr(self.elf.segments(), &self.mapped.mappings, vaddr)
    }

    /// Resolves a function by exact name.
    pub fn resolve(&self, name: &str) -> Result<ResolvedSymbol, SymbolError> {
        let f = self
            .elf
            .function(name)
            .ok_or_else(|| SymbolError::NoSuchSymbol {
                path: self.mapped.path.clone(),
                symbol: name.to_string(),
            })?;
        self.resolve_function(&f)
    }

    fn resolve_function(&self, f: &Function<'_>) -> Result<ResolvedSymbol, SymbolError> {
        let file_offset =
            self.elf
                .file_offset_of_vaddr(f.value)
                .ok_or_else(|| SymbolError::NotInSegment {
                    path: self.mapped.path.clone(),
                    symbol: f.name.to_string(),
                    vaddr: f.value,
                })?;
        let segment = address::segment_for_vaddr(self.elf.segments(), f.value);
        Ok(ResolvedSymbol {
            object: self.mapped.path.clone(),
            attach_path: self.attach_path.clone(),
            name: f.name.to_string(),
            vaddr: f.value,
            size: f.size,
            ifunc: f.ifunc,
            file_offset,
            address: address::runtime_address_of_file_offset(
                &self.mapped.mappings,
                file_offset,
                segment,
            ),
        })
    }

    /// Resolves a data symbol (see `elf::is_interesting_data_symbol`). TLS
    /// symbols get no runtime address: theirs is per thread.
    pub fn resolve_data(&self, name: &str) -> Option<ResolvedData> {
        let d = self.elf.data_symbol(name)?;
        let address = match d.kind {
            DataKind::Object => self.runtime_address(d.value),
            DataKind::Tls => None,
        };
        Some(ResolvedData {
            object: self.mapped.path.clone(),
            name: d.name.clone(),
            kind: d.kind,
            vaddr: d.value,
            size: d.size,
            address,
        })
    }
}

/// A function located in the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedSymbol {
    /// The object's path as the target sees it.
    pub object: PathBuf,
    /// The path to give `UProbe::attach` (see [`LoadedObject::attach_path`]).
    pub attach_path: PathBuf,
    pub name: String,
    /// `st_value`.
    pub vaddr: u64,
    pub size: u64,
    /// STT_GNU_IFUNC: this is the resolver; probe the implementation instead.
    pub ifunc: bool,
    /// `st_value - p_vaddr + p_offset`: where a uprobe attaches.
    pub file_offset: u64,
    /// `mapping.start + (file_offset - mapping.offset)`, when mapped.
    pub address: Option<u64>,
}

impl ResolvedSymbol {
    /// The location for aya 0.16's `UProbe::attach(points, target, scope)`:
    /// pass this with `target = &self.attach_path`.
    pub fn uprobe_location(&self) -> aya::programs::uprobe::UProbeAttachLocation<'static> {
        aya::programs::uprobe::UProbeAttachLocation::AbsoluteOffset(self.file_offset)
    }
}

/// A data symbol located in the target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedData {
    pub object: PathBuf,
    pub name: String,
    pub kind: DataKind,
    pub vaddr: u64,
    pub size: u64,
    /// Runtime address (None for TLS, or when not mapped).
    pub address: Option<u64>,
}

/// A runtime address turned back into a symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbolized<'a> {
    pub object: &'a Path,
    /// The preferred name among the aliases at the symbol's address.
    pub name: &'a str,
    /// Bytes from the symbol's start.
    pub offset: u64,
    /// Every name at that address (including `name`), e.g. `malloc` and
    /// `__libc_malloc` in glibc.
    pub aliases: Vec<&'a str>,
}

/// A process's objects, main executable first.
#[derive(Debug, Clone)]
pub struct ProcessSymbols {
    pub pid: u32,
    pub objects: Vec<LoadedObject>,
    /// Objects that could not be read, with why.
    pub failures: Vec<(PathBuf, String)>,
}

impl ProcessSymbols {
    /// Whether `other` maps the very objects these symbols are of (the same
    /// parsed files, through the shared cache), at the same addresses: a
    /// reload that found nothing new.
    pub fn same_objects(&self, other: &ProcessSymbols) -> bool {
        self.objects.len() == other.objects.len()
            && self
                .objects
                .iter()
                .zip(&other.objects)
                .all(|(a, b)| a.mapped == b.mapped && std::sync::Arc::ptr_eq(&a.elf, &b.elf))
    }

    /// Reads the process's maps and parses every executable object through
    /// `cache`. An unreadable object is recorded in `failures`, not fatal.
    pub fn load(pid: u32, cache: &ObjectCache) -> Result<ProcessSymbols, SymbolError> {
        Ok(Self::from_maps(Maps::of(pid)?, cache))
    }

    /// As [`Self::load`], for maps already read.
    pub fn from_maps(maps: Maps, cache: &ObjectCache) -> ProcessSymbols {
        let pid = maps.pid;
        let mut objects = Vec::new();
        let mut failures = Vec::new();
        for mapped in maps.objects {
            let loaded = open_mapped(pid, &mapped).and_then(|(attach_path, file)| {
                cache
                    .open_mapped_file(pid, &mapped, &attach_path, &file)
                    .map(|elf| (attach_path, elf))
            });
            match loaded {
                Ok((attach_path, elf)) => objects.push(LoadedObject {
                    mapped,
                    elf,
                    attach_path,
                }),
                Err(e) => failures.push((mapped.path, e.to_string())),
            }
        }
        ProcessSymbols {
            pid,
            objects,
            failures,
        }
    }

    /// Releases the file pages that lookups read in these objects
    /// ([`ElfObject::release_pages`]).
    pub fn release_pages(&self) {
        for o in &self.objects {
            o.elf.release_pages();
        }
    }

    /// The main executable, when readable.
    pub fn main(&self) -> Option<&LoadedObject> {
        self.objects.first().filter(|o| o.mapped.is_main)
    }

    /// The first object whose file name is `name` (e.g. "libc.so.6").
    pub fn object(&self, name: &str) -> Option<&LoadedObject> {
        self.objects.iter().find(|o| o.mapped.file_name() == name)
    }

    /// Like [`Self::object`], as an error naming the pid when absent.
    pub fn require(&self, name: &str) -> Result<&LoadedObject, SymbolError> {
        self.object(name).ok_or_else(|| SymbolError::NoSuchObject {
            pid: self.pid,
            name: name.to_string(),
        })
    }

    /// The function `name` in the first object (main first) that defines it.
    pub fn find(&self, name: &str) -> Option<ResolvedSymbol> {
        self.objects.iter().find_map(|o| o.resolve(name).ok())
    }

    /// The object mapping a runtime address (its position and the object)
    /// and the address as the object's virtual address.
    fn locate(&self, addr: u64) -> Option<(usize, &LoadedObject, u64)> {
        let (i, object) = self
            .objects
            .iter()
            .enumerate()
            .find(|(_, o)| o.mapped.contains_address(addr))?;
        let vaddr = address::vaddr_of_runtime_address(
            object.elf.segments(),
            &object.mapped.mappings,
            addr,
        )?;
        Some((i, object, vaddr))
    }

    /// Which object and function(s) hold a runtime address, as a key
    /// (object's position, [`ElfObject::containing_key`]): addresses with
    /// the same key [`Self::symbolize`] to the same function. No name is read.
    pub fn function_key(&self, addr: u64) -> Option<(usize, usize, u64)> {
        let (i, object, vaddr) = self.locate(addr)?;
        let (group, mask) = object.elf.containing_key(vaddr)?;
        Some((i, group, mask))
    }

    /// The chain of functions at a runtime address, outermost first and
    /// the innermost inlined one last, each with its name as DWARF gives
    /// it (linkage name, mangled) and its file:line when known; `None`
    /// when the object holding it has no DWARF (in itself or in its
    /// separate debug file), looked for once per object, or when the DWARF
    /// covers no function there. One frame when nothing is inlined at
    /// `addr`. For a return address, pass the call's (`addr - 1`). See
    /// [`super::dwarf`] for the memory bounds.
    pub fn inlined(&self, addr: u64) -> Option<Vec<InlineFrame>> {
        let (_, object, vaddr) = self.locate(addr)?;
        object.elf.inlined_frames(vaddr)
    }

    /// The object, symbol and offset at a runtime address.
    pub fn symbolize(&self, addr: u64) -> Option<Symbolized<'_>> {
        let (_, object, vaddr) = self.locate(addr)?;
        let (f, offset) = object.elf.function_containing(vaddr)?;
        let mut aliases: Vec<Function<'_>> = object.elf.functions_at(f.value).collect();
        aliases.sort_by(preferred);
        Some(Symbolized {
            object: &object.mapped.path,
            name: f.name,
            offset,
            aliases: aliases.iter().map(|a| a.name).collect(),
        })
    }
}
