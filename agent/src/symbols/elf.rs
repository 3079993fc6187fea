//! One ELF object read over `mmap` (never copied): a compact index of its
//! function symbols (STT_FUNC and STT_GNU_IFUNC from `.symtab` and `.dynsym`),
//! a few data symbols of interest, PT_LOAD segments, GNU build-id and type.
//!
//! Names are kept as (offset, length) into the mapped file, so a 300 MB
//! `mongod` with half a million functions costs ~20 MB of index. Malformed
//! files (truncated, corrupt tables) give [`SymbolError::Elf`], never a panic:
//! every read goes through the bounds-checked `object` crate. A file truncated
//! *while mapped* would still raise SIGBUS; object files in use are replaced by
//! rename in practice, which leaves the mapped inode intact.

use std::fs::File;
use std::path::{Path, PathBuf};

use memmap2::Mmap;
use object::elf;
use object::read::elf::{Dyn as _, FileHeader, ProgramHeader as _, SectionHeader as _, Sym as _};
use object::{Endianness, FileKind};
use serde::{Deserialize, Serialize};

use super::address::{self, Segment};
use super::error::SymbolError;

/// `e_type` of the object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElfType {
    /// ET_EXEC: fixed addresses (non-PIE executable).
    Exec,
    /// ET_DYN: shared object or PIE executable.
    Dyn,
    /// Anything else (ET_REL, core, OS-specific).
    Other,
}

/// Which symbol tables listed a symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tables {
    pub symtab: bool,
    pub dynsym: bool,
}

#[derive(Debug, Clone, Copy)]
struct FuncEntry {
    name_off: usize,
    name_len: u32,
    value: u64,
    size: u64,
    global: bool,
    ifunc: bool,
    tables: Tables,
}

/// A function symbol of an object, borrowed from its index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Function<'a> {
    pub name: &'a str,
    /// `st_value`: the ELF virtual address.
    pub value: u64,
    pub size: u64,
    /// GLOBAL, WEAK or GNU_UNIQUE binding (LOCAL otherwise).
    pub global: bool,
    /// STT_GNU_IFUNC: the address is the resolver, not the implementation.
    pub ifunc: bool,
    pub tables: Tables,
}

/// Kind of a data symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DataKind {
    /// STT_OBJECT: one address per process.
    Object,
    /// STT_TLS: `st_value` is an offset in the module's TLS block, per thread.
    Tls,
}

/// A data symbol kept in the index (see [`is_interesting_data_symbol`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataSymbol {
    pub name: String,
    pub value: u64,
    pub size: u64,
    pub kind: DataKind,
    pub tables: Tables,
}

/// Data symbols indexed: anything about rseq (glibc's `__rseq_offset`,
/// `__rseq_size`, `__rseq_flags`, TCMalloc's `__rseq_abi`) and TCMalloc's
/// per-thread C symbols (`tcmalloc_slabs`, ...). Other data symbols are skipped
/// to keep the index small.
pub fn is_interesting_data_symbol(name: &str) -> bool {
    name.contains("rseq") || name.starts_with("tcmalloc_")
}

/// Symbol counts, for the summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SymbolCounts {
    /// Function symbols defined in `.symtab`.
    pub symtab_functions: usize,
    /// Function symbols defined in `.dynsym`.
    pub dynsym_functions: usize,
    /// Distinct (name, address) functions after merging both tables.
    pub functions: usize,
    /// Symbols skipped because their name was unreadable or not UTF-8.
    pub skipped: usize,
}

/// A parsed object file.
#[derive(Debug)]
pub struct ElfObject {
    path: PathBuf,
    map: Mmap,
    build_id: Option<Vec<u8>>,
    elf_type: ElfType,
    pie: bool,
    segments: Vec<Segment>,
    /// Sorted by (value, name).
    funcs: Vec<FuncEntry>,
    /// Indices into `funcs`, sorted by (name, local after global).
    by_name: Vec<u32>,
    data: Vec<DataSymbol>,
    counts: SymbolCounts,
}

impl ElfObject {
    /// Maps and parses the file at `path`.
    pub fn open(path: &Path) -> Result<ElfObject, SymbolError> {
        let file = File::open(path).map_err(|source| SymbolError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_file(path, &file)
    }

    /// Maps and parses an already opened file; `path` names it in errors.
    pub fn from_file(path: &Path, file: &File) -> Result<ElfObject, SymbolError> {
        Self::parse(path, map_file(path, file)?)
    }

    /// Parses a mapping of the file.
    pub(crate) fn parse(path: &Path, map: Mmap) -> Result<ElfObject, SymbolError> {
        let elf_err = |e: object::read::Error| SymbolError::Elf {
            path: path.to_path_buf(),
            reason: e.to_string(),
        };
        let parsed = match FileKind::parse(&*map).map_err(elf_err)? {
            FileKind::Elf32 => parse_elf::<elf::FileHeader32<Endianness>>(&map),
            FileKind::Elf64 => parse_elf::<elf::FileHeader64<Endianness>>(&map),
            other => {
                return Err(SymbolError::Elf {
                    path: path.to_path_buf(),
                    reason: format!("not ELF but {other:?}"),
                });
            }
        }
        .map_err(elf_err)?;
        Ok(ElfObject::index(path.to_path_buf(), map, parsed))
    }

    fn index(path: PathBuf, map: Mmap, p: Parsed) -> ElfObject {
        let Parsed {
            build_id,
            elf_type,
            pie,
            segments,
            mut funcs,
            data,
            mut counts,
        } = p;
        let name_of = |f: &FuncEntry| &map[f.name_off..f.name_off + f.name_len as usize];
        funcs.sort_by(|a, b| (a.value, name_of(a)).cmp(&(b.value, name_of(b))));
        funcs.dedup_by(|later, kept| {
            let same = later.value == kept.value && name_of(later) == name_of(kept);
            if same {
                kept.size = kept.size.max(later.size);
                kept.global |= later.global;
                kept.tables.symtab |= later.tables.symtab;
                kept.tables.dynsym |= later.tables.dynsym;
            }
            same
        });
        counts.functions = funcs.len();
        let mut by_name: Vec<u32> = (0..funcs.len() as u32).collect();
        by_name.sort_by(|&a, &b| {
            let (a, b) = (&funcs[a as usize], &funcs[b as usize]);
            (name_of(a), !a.global).cmp(&(name_of(b), !b.global))
        });
        ElfObject {
            path,
            map,
            build_id,
            elf_type,
            pie,
            segments,
            funcs,
            by_name,
            data,
            counts,
        }
    }

    /// What the index holds on the heap (the file itself is mapped).
    pub fn index_bytes(&self) -> usize {
        use std::mem::size_of;
        self.funcs.capacity() * size_of::<FuncEntry>()
            + self.by_name.capacity() * size_of::<u32>()
            + self.data.capacity() * size_of::<DataSymbol>()
            + self.segments.capacity() * size_of::<Segment>()
    }

    /// The path this object was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// File size in bytes.
    pub fn size(&self) -> u64 {
        self.map.len() as u64
    }

    /// GNU build-id (NT_GNU_BUILD_ID note), when present.
    pub fn build_id(&self) -> Option<&[u8]> {
        self.build_id.as_deref()
    }

    /// The build-id as lowercase hex.
    pub fn build_id_hex(&self) -> Option<String> {
        self.build_id.as_deref().map(hex)
    }

    pub fn elf_type(&self) -> ElfType {
        self.elf_type
    }

    /// ET_DYN with DF_1_PIE: a position-independent executable.
    pub fn is_pie(&self) -> bool {
        self.pie
    }

    /// PT_LOAD segments in file order.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    pub fn counts(&self) -> SymbolCounts {
        self.counts
    }

    fn func(&self, e: &FuncEntry) -> Function<'_> {
        let bytes = &self.map[e.name_off..e.name_off + e.name_len as usize];
        Function {
            // Validated as UTF-8 when indexed.
            name: std::str::from_utf8(bytes).unwrap_or_default(),
            value: e.value,
            size: e.size,
            global: e.global,
            ifunc: e.ifunc,
            tables: e.tables,
        }
    }

    /// All function symbols, by address.
    pub fn functions(&self) -> impl ExactSizeIterator<Item = Function<'_>> + '_ {
        self.funcs.iter().map(|e| self.func(e))
    }

    /// All function names (one per distinct symbol), by address.
    pub fn function_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.functions().map(|f| f.name)
    }

    fn name_range(&self, name: &str) -> std::ops::Range<usize> {
        let key = name.as_bytes();
        let name_at = |i: &u32| {
            let e = &self.funcs[*i as usize];
            &self.map[e.name_off..e.name_off + e.name_len as usize]
        };
        let lo = self.by_name.partition_point(|i| name_at(i) < key);
        let hi = lo + self.by_name[lo..].partition_point(|i| name_at(i) == key);
        lo..hi
    }

    /// The function named exactly `name` (a global one first when a local
    /// static function shares the name).
    pub fn function(&self, name: &str) -> Option<Function<'_>> {
        self.functions_named(name).next()
    }

    /// Every function named exactly `name`.
    pub fn functions_named(&self, name: &str) -> impl Iterator<Item = Function<'_>> + '_ {
        let range = self.name_range(name);
        self.by_name[range]
            .iter()
            .map(|&i| self.func(&self.funcs[i as usize]))
    }

    /// Every function whose `st_value` is exactly `value` (aliases).
    pub fn functions_at(&self, value: u64) -> impl Iterator<Item = Function<'_>> + '_ {
        let lo = self.funcs.partition_point(|e| e.value < value);
        self.funcs[lo..]
            .iter()
            .take_while(move |e| e.value == value)
            .map(|e| self.func(e))
    }

    /// The function containing virtual address `vaddr` and the offset in it.
    ///
    /// Among aliases at the same address the preferred name is returned (see
    /// [`preferred`]); a symbol of size 0 extends to the next symbol.
    pub fn function_containing(&self, vaddr: u64) -> Option<(Function<'_>, u64)> {
        let end = self.funcs.partition_point(|e| e.value <= vaddr);
        let last = self.funcs.get(end.checked_sub(1)?)?;
        let start = self.funcs[..end].partition_point(|e| e.value < last.value);
        let group = &self.funcs[start..end];
        let next_value = self.funcs.get(end).map(|e| e.value);
        let covers = |e: &FuncEntry| {
            if e.size > 0 {
                vaddr - e.value < e.size
            } else {
                next_value.is_none_or(|n| vaddr < n)
            }
        };
        let best = group
            .iter()
            .filter(|e| covers(e))
            .map(|e| self.func(e))
            .min_by(preferred)?;
        Some((best, vaddr - best.value))
    }

    /// A data symbol kept in the index (see [`is_interesting_data_symbol`]).
    pub fn data_symbol(&self, name: &str) -> Option<&DataSymbol> {
        self.data.iter().find(|d| d.name == name)
    }

    /// All data symbols kept in the index.
    pub fn data_symbols(&self) -> &[DataSymbol] {
        &self.data
    }

    /// The uprobe file offset of a function: `st_value - p_vaddr + p_offset`.
    pub fn file_offset(&self, name: &str) -> Result<u64, SymbolError> {
        let f = self
            .function(name)
            .ok_or_else(|| SymbolError::NoSuchSymbol {
                path: self.path.clone(),
                symbol: name.to_string(),
            })?;
        self.file_offset_of_vaddr(f.value)
            .ok_or_else(|| SymbolError::NotInSegment {
                path: self.path.clone(),
                symbol: name.to_string(),
                vaddr: f.value,
            })
    }

    /// `vaddr - p_vaddr + p_offset` for the PT_LOAD segment holding `vaddr`.
    pub fn file_offset_of_vaddr(&self, vaddr: u64) -> Option<u64> {
        address::file_offset_of_vaddr(&self.segments, vaddr)
    }

    /// What aya 0.16's `UProbe::attach` takes for this function:
    /// `UProbeAttachLocation::AbsoluteOffset(file offset)`, resolved here once
    /// instead of aya re-reading the symbol tables on every attach.
    pub fn uprobe_location(
        &self,
        name: &str,
    ) -> Result<aya::programs::uprobe::UProbeAttachLocation<'static>, SymbolError> {
        self.file_offset(name)
            .map(aya::programs::uprobe::UProbeAttachLocation::AbsoluteOffset)
    }
}

/// Order of preference among aliases at one address: global before local,
/// fewer leading underscores (`malloc` before `__libc_malloc`), shorter, then
/// alphabetical.
pub fn preferred(a: &Function<'_>, b: &Function<'_>) -> std::cmp::Ordering {
    let key = |f: &Function<'_>| {
        (
            !f.global,
            f.name.len() - f.name.trim_start_matches('_').len(),
            f.name.len(),
        )
    };
    key(a).cmp(&key(b)).then_with(|| a.name.cmp(b.name))
}

/// Lowercase hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// Maps the whole file read-only.
pub(crate) fn map_file(path: &Path, file: &File) -> Result<Mmap, SymbolError> {
    // SAFETY: the mapping is read-only and private; object files are replaced
    // by rename, not rewritten in place (a file truncated underneath would
    // raise SIGBUS, which no safe API can prevent).
    unsafe { Mmap::map(file) }.map_err(|source| SymbolError::Mmap {
        path: path.to_path_buf(),
        source,
    })
}

/// The GNU build-id of ELF bytes, from PT_NOTE segments then SHT_NOTE
/// sections, without indexing symbols (cheap cache key).
pub fn peek_build_id(data: &[u8]) -> Option<Vec<u8>> {
    match FileKind::parse(data).ok()? {
        FileKind::Elf32 => build_id::<elf::FileHeader32<Endianness>>(data).ok()?,
        FileKind::Elf64 => build_id::<elf::FileHeader64<Endianness>>(data).ok()?,
        _ => None,
    }
}

struct Parsed {
    build_id: Option<Vec<u8>>,
    elf_type: ElfType,
    pie: bool,
    segments: Vec<Segment>,
    funcs: Vec<FuncEntry>,
    data: Vec<DataSymbol>,
    counts: SymbolCounts,
}

fn build_id<Elf: FileHeader<Endian = Endianness>>(
    data: &[u8],
) -> object::read::Result<Option<Vec<u8>>> {
    let header = Elf::parse(data)?;
    let endian = header.endian()?;
    let is_build_id = |name: &[u8], n_type: elf::NoteType| {
        name == elf::ELF_NOTE_GNU && n_type == elf::NT_GNU_BUILD_ID
    };
    for ph in header.program_headers(endian, data)? {
        if let Some(mut notes) = ph.notes(endian, data)? {
            while let Some(note) = notes.next()? {
                if is_build_id(note.name(), note.n_type(endian)) {
                    return Ok(Some(note.desc().to_vec()));
                }
            }
        }
    }
    let sections = header.sections(endian, data)?;
    for section in sections.iter() {
        if let Some(mut notes) = section.notes(endian, data)? {
            while let Some(note) = notes.next()? {
                if is_build_id(note.name(), note.n_type(endian)) {
                    return Ok(Some(note.desc().to_vec()));
                }
            }
        }
    }
    Ok(None)
}

fn parse_elf<Elf: FileHeader<Endian = Endianness>>(data: &[u8]) -> object::read::Result<Parsed> {
    let header = Elf::parse(data)?;
    let endian = header.endian()?;
    let elf_type = match header.e_type(endian) {
        elf::ET_EXEC => ElfType::Exec,
        elf::ET_DYN => ElfType::Dyn,
        _ => ElfType::Other,
    };
    let mut segments = Vec::new();
    let mut pie = false;
    for ph in header.program_headers(endian, data)? {
        if ph.p_type(endian) == elf::PT_LOAD {
            segments.push(Segment {
                vaddr: ph.p_vaddr(endian).into(),
                offset: ph.p_offset(endian).into(),
                filesz: ph.p_filesz(endian).into(),
                memsz: ph.p_memsz(endian).into(),
                flags: ph.p_flags(endian).0,
            });
        }
        if let Some(dynamic) = ph.dynamic(endian, data)? {
            pie |= dynamic
                .iter()
                .any(|d| d.tag(endian) == elf::DT_FLAGS_1 && d.val(endian) & elf::DF_1_PIE.0 != 0);
        }
    }
    pie &= elf_type == ElfType::Dyn;
    let build_id = build_id::<Elf>(data)?;

    let base = data.as_ptr() as usize;
    let sections = header.sections(endian, data)?;
    let mut funcs = Vec::new();
    let mut data_syms: Vec<DataSymbol> = Vec::new();
    let mut counts = SymbolCounts::default();
    for sh_type in [elf::SHT_SYMTAB, elf::SHT_DYNSYM] {
        let dynsym = sh_type == elf::SHT_DYNSYM;
        let table = sections.symbols(endian, data, sh_type)?;
        let strings = table.strings();
        let tables = Tables {
            symtab: !dynsym,
            dynsym,
        };
        for sym in table.iter() {
            let st_type = sym.st_type();
            let is_func = st_type == elf::STT_FUNC || st_type == elf::STT_GNU_IFUNC;
            let is_data = st_type == elf::STT_OBJECT || st_type == elf::STT_TLS;
            if !(is_func || is_data) || sym.is_undefined(endian) {
                continue;
            }
            let Some(name) = sym
                .name(endian, strings)
                .ok()
                .filter(|n| !n.is_empty() && std::str::from_utf8(n).is_ok())
            else {
                counts.skipped += 1;
                continue;
            };
            let global = sym.st_bind() != elf::STB_LOCAL;
            let value: u64 = sym.st_value(endian).into();
            let size: u64 = sym.st_size(endian).into();
            if is_func {
                let Ok(name_len) = u32::try_from(name.len()) else {
                    counts.skipped += 1;
                    continue;
                };
                if dynsym {
                    counts.dynsym_functions += 1;
                } else {
                    counts.symtab_functions += 1;
                }
                funcs.push(FuncEntry {
                    // `name` borrows from `data`: its offset in the file.
                    name_off: name.as_ptr() as usize - base,
                    name_len,
                    value,
                    size,
                    global,
                    ifunc: st_type == elf::STT_GNU_IFUNC,
                    tables,
                });
            } else {
                let name = std::str::from_utf8(name).unwrap_or_default();
                if !is_interesting_data_symbol(name) {
                    continue;
                }
                let kind = if st_type == elf::STT_TLS {
                    DataKind::Tls
                } else {
                    DataKind::Object
                };
                match data_syms
                    .iter_mut()
                    .find(|d| d.name == name && d.value == value)
                {
                    Some(d) => {
                        d.tables.symtab |= tables.symtab;
                        d.tables.dynsym |= tables.dynsym;
                    }
                    None => data_syms.push(DataSymbol {
                        name: name.to_string(),
                        value,
                        size,
                        kind,
                        tables,
                    }),
                }
            }
        }
    }
    Ok(Parsed {
        build_id,
        elf_type,
        pie,
        segments,
        funcs,
        data: data_syms,
        counts,
    })
}

#[cfg(test)]
#[path = "elf_tests.rs"]
mod tests;
