//! One ELF object read over `mmap` (never copied): a compact index of its
//! function symbols (STT_FUNC and STT_GNU_IFUNC from `.symtab` and `.dynsym`,
//! see [`super::index`]), a few data symbols of interest, PT_LOAD segments,
//! GNU build-id and type. A stripped object's separate debug file, when
//! one was found ([`super::debuginfo`]), adds its `.symtab` functions: it is
//! mapped too, and its names read from it.
//!
//! Names stay in the mapped file and are read from it when asked for. The
//! pages read count in mdiag's resident set (mongod 6.0's string tables are
//! 48 MB), so they are handed back to the page cache (`MADV_DONTNEED`, no
//! copy lost: the file is read-only) as the index is built, every few
//! thousand names of a walk over all functions, and after lookups when the
//! owner asks ([`ElfObject::release_pages`]).
//!
//! Malformed files (truncated, corrupt tables) give [`SymbolError::Elf`],
//! never a panic: every read goes through the bounds-checked `object` crate.
//! A file truncated *while mapped* would still raise SIGBUS; object files in
//! use are replaced by rename in practice, which leaves the mapped inode
//! intact.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use memmap2::{Mmap, UncheckedAdvice};
use object::elf;
use object::read::elf::{Dyn as _, FileHeader, ProgramHeader as _, SectionHeader as _};
use object::{Endianness, FileKind};
use serde::{Deserialize, Serialize};

use super::address::{self, Segment};
use super::debuginfo::DebugFile;
use super::dwarf::{DwarfSlot, InlineFrame, Sources};
use super::error::SymbolError;
use super::index::{self, Every, Files, FuncIndex, RawFunc, StringTables};
use super::tables::{self, Source};

/// Names read between two releases of the pages read, in a walk over all
/// of an object's functions (a few MiB of string table at most).
const RELEASE_EVERY: usize = 16 * 1024;

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
    map: Arc<Mmap>,
    build_id: Option<Vec<u8>>,
    elf_type: ElfType,
    pie: bool,
    segments: Vec<Segment>,
    funcs: FuncIndex,
    data: Vec<DataSymbol>,
    counts: SymbolCounts,
    /// The separate debug file whose `.symtab` was indexed too.
    debug: Option<DebugFile>,
    /// Names were read since the pages were last released.
    touched: AtomicBool,
    /// The DWARF context, built on first use ([`Self::inlined_frames`]).
    pub(super) dwarf: DwarfSlot,
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

    /// Parses a mapping of the file; the pages read are released as it goes
    /// and at the end.
    pub(crate) fn parse(path: &Path, map: Mmap) -> Result<ElfObject, SymbolError> {
        Self::parse_with_debug(path, map, None)
    }

    /// As [`Self::parse`], adding the `.symtab` functions of the object's
    /// separate debug file (found by [`super::debuginfo::find_debug_file`]).
    /// A debug file that cannot be read is left out, not an error.
    pub(crate) fn parse_with_debug(
        path: &Path,
        map: Mmap,
        debug: Option<DebugFile>,
    ) -> Result<ElfObject, SymbolError> {
        let elf_err = |e: object::read::Error| SymbolError::Elf {
            path: path.to_path_buf(),
            reason: e.to_string(),
        };
        let release_map = || release(&map);
        let mut pace = Every::new(RELEASE_EVERY, &release_map);
        let parsed = match FileKind::parse(&*map).map_err(elf_err)? {
            FileKind::Elf32 => parse_elf::<elf::FileHeader32<Endianness>>(&map, &mut pace),
            FileKind::Elf64 => parse_elf::<elf::FileHeader64<Endianness>>(&map, &mut pace),
            other => {
                return Err(SymbolError::Elf {
                    path: path.to_path_buf(),
                    reason: format!("not ELF but {other:?}"),
                });
            }
        }
        .map_err(elf_err)?;
        let Parsed {
            build_id,
            elf_type,
            pie,
            segments,
            funcs,
            strings,
            data,
            mut counts,
        } = parsed;
        release(&map);
        let (mut funcs, mut strings) = (funcs, strings);
        let debug = debug.and_then(|d| match parse_debug_file(&d.map) {
            Ok(symbols) => {
                release(&d.map);
                funcs.reserve_exact(symbols.funcs.len());
                funcs.extend(symbols.funcs);
                strings.debug = symbols.strings.debug;
                counts.symtab_functions += symbols.counts.symtab_functions;
                counts.skipped += symbols.counts.skipped;
                Some(d)
            }
            Err(e) => {
                tracing::debug!(
                    path = %d.path.display(),
                    "symbols: debug file left out: {e}"
                );
                None
            }
        });
        let funcs = FuncIndex::build(funcs, strings);
        counts.functions = funcs.len();
        Ok(ElfObject {
            path: path.to_path_buf(),
            map: Arc::new(map),
            build_id,
            elf_type,
            pie,
            segments,
            funcs,
            data,
            counts,
            debug,
            touched: AtomicBool::new(false),
            dwarf: DwarfSlot::new(),
        })
    }

    /// The separate debug file whose `.symtab` functions were indexed too.
    pub fn debug_file(&self) -> Option<&Path> {
        self.debug.as_ref().map(|d| d.path.as_path())
    }

    /// The bytes names are read from.
    fn files(&self) -> Files<'_> {
        Files {
            main: &self.map,
            debug: self.debug.as_ref().map_or(&[], |d| &d.map[..]),
        }
    }

    /// Releases the pages of the object and of its debug file.
    fn release_all(&self) {
        release(&self.map);
        if let Some(d) = &self.debug {
            release(&d.map);
        }
        self.dwarf.release_pages();
    }

    /// The chain of functions at virtual address `vaddr`, outermost first
    /// and the innermost inlined one last, from the DWARF of the object or
    /// of its separate debug file ([`super::dwarf`]); `None` when there is
    /// none (looked for once per object), or when it covers no function
    /// at `vaddr`. For a return address, pass the call's (`vaddr - 1`).
    pub fn inlined_frames(&self, vaddr: u64) -> Option<Vec<InlineFrame>> {
        if self.dwarf.is_absent() {
            return None;
        }
        self.touched.store(true, Ordering::Relaxed);
        let mut files = vec![(&self.map, self.path.as_path())];
        if let Some(d) = &self.debug {
            files.push((&d.map, d.path.as_path()));
        }
        self.dwarf.frames(&Sources { files }, vaddr)
    }

    /// Hands the pages of the file read since the last call back to the
    /// page cache, when names were read meanwhile: they leave mdiag's
    /// resident set and are read again (from the cache) when needed.
    pub fn release_pages(&self) {
        if self.touched.swap(false, Ordering::Relaxed) {
            self.release_all();
        }
    }

    /// What the index holds on the heap (the file itself is mapped).
    pub fn index_bytes(&self) -> usize {
        use std::mem::size_of;
        self.funcs.heap_bytes()
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

    fn func(&self, i: usize) -> Function<'_> {
        self.touched.store(true, Ordering::Relaxed);
        let flags = self.funcs.flags(i);
        Function {
            name: self.funcs.name(self.files(), i),
            value: self.funcs.value(i),
            size: self.funcs.size(i),
            global: flags & index::GLOBAL != 0,
            ifunc: flags & index::IFUNC != 0,
            tables: Tables {
                symtab: flags & index::SYMTAB != 0,
                dynsym: flags & index::DYNSYM != 0,
            },
        }
    }

    /// All function symbols, by address. A walk over all of them releases
    /// the pages read every few thousand names; names read by address are
    /// spread over the whole string table, though: a walk over all names
    /// is better made with [`Self::functions_in_file_order`].
    pub fn functions(&self) -> impl ExactSizeIterator<Item = Function<'_>> + '_ {
        (0..self.funcs.len()).map(move |i| {
            if i % RELEASE_EVERY == RELEASE_EVERY - 1 {
                self.release_all();
            }
            self.func(i)
        })
    }

    /// The address and size of every function, by address (as
    /// [`Self::functions`] gives them), without reading a name.
    pub fn extents(&self) -> impl ExactSizeIterator<Item = (u64, u64)> + '_ {
        (0..self.funcs.len()).map(move |i| (self.funcs.value(i), self.funcs.size(i)))
    }

    /// All function symbols with their position in [`Self::functions`], in
    /// the order their names are stored: the walk reads the string tables
    /// front to back and releases the pages read every few thousand names,
    /// so that it holds little of them resident however large they are.
    pub fn functions_in_file_order(&self) -> impl Iterator<Item = (usize, Function<'_>)> + '_ {
        self.funcs
            .in_name_order()
            .into_iter()
            .enumerate()
            .map(move |(n, i)| {
                if n % RELEASE_EVERY == RELEASE_EVERY - 1 {
                    self.release_all();
                }
                (i as usize, self.func(i as usize))
            })
    }

    /// All function names (one per distinct symbol), in the order they
    /// are stored (see [`Self::functions_in_file_order`]).
    pub fn function_names(&self) -> impl Iterator<Item = &str> + '_ {
        self.functions_in_file_order().map(|(_, f)| f.name)
    }

    /// The function named exactly `name` (a global one first when a local
    /// static function shares the name).
    pub fn function(&self, name: &str) -> Option<Function<'_>> {
        self.functions_named(name).next()
    }

    /// Every function named exactly `name`.
    pub fn functions_named(&self, name: &str) -> impl Iterator<Item = Function<'_>> + '_ {
        self.touched.store(true, Ordering::Relaxed);
        let found: Vec<usize> = self.funcs.named(self.files(), name).collect();
        found.into_iter().map(move |i| self.func(i))
    }

    /// Every function whose `st_value` is exactly `value` (aliases).
    pub fn functions_at(&self, value: u64) -> impl Iterator<Item = Function<'_>> + '_ {
        self.funcs.at(value).map(move |i| self.func(i))
    }

    /// The function containing virtual address `vaddr` and the offset in it.
    ///
    /// Among aliases at the same address the preferred name is returned (see
    /// [`preferred`]); a symbol of size 0 extends to the next symbol.
    pub fn function_containing(&self, vaddr: u64) -> Option<(Function<'_>, u64)> {
        let (group, next_value) = self.funcs.candidates(vaddr)?;
        let covers = |i: usize| {
            let (value, size) = (self.funcs.value(i), self.funcs.size(i));
            if size > 0 {
                vaddr - value < size
            } else {
                next_value.is_none_or(|n| vaddr < n)
            }
        };
        let best = group
            .filter(|&i| covers(i))
            .map(|i| self.func(i))
            .min_by(preferred)?;
        Some((best, vaddr - best.value))
    }

    /// Which functions contain `vaddr`, as a key: two addresses with the
    /// same key are in the same function(s), so [`Self::function_containing`]
    /// names the same one for both. No name is read. `None` when no function
    /// contains it (or in the rare case of more than 64 at one address).
    pub fn containing_key(&self, vaddr: u64) -> Option<(usize, u64)> {
        self.funcs.covering(vaddr)
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
    funcs: Vec<RawFunc>,
    strings: StringTables,
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

/// Headers, segments, build-id, then the symbols ([`read_symbols`]);
/// `pace` is ticked per symbol read.
fn parse_elf<Elf: FileHeader<Endian = Endianness>>(
    data: &[u8],
    pace: &mut Every<'_>,
) -> object::read::Result<Parsed> {
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
    let sections = header.sections(endian, data)?;
    let symbols = tables::read_symbols::<Elf>(data, endian, &sections, pace, Source::Object)?;
    Ok(Parsed {
        build_id,
        elf_type,
        pie,
        segments,
        funcs: symbols.funcs,
        strings: symbols.strings,
        data: symbols.data,
        counts: symbols.counts,
    })
}

/// The `.symtab` functions of a separate debug file, its pages released as
/// they are read.
fn parse_debug_file(map: &Mmap) -> Result<tables::Symbols, String> {
    fn symbols<Elf: FileHeader<Endian = Endianness>>(
        data: &[u8],
        pace: &mut Every<'_>,
    ) -> object::read::Result<tables::Symbols> {
        let header = Elf::parse(data)?;
        let endian = header.endian()?;
        let sections = header.sections(endian, data)?;
        tables::read_symbols::<Elf>(data, endian, &sections, pace, Source::DebugFile)
    }
    let release_map = || release(map);
    let mut pace = Every::new(RELEASE_EVERY, &release_map);
    match FileKind::parse(&**map).map_err(|e| e.to_string())? {
        FileKind::Elf32 => symbols::<elf::FileHeader32<Endianness>>(map, &mut pace),
        FileKind::Elf64 => symbols::<elf::FileHeader64<Endianness>>(map, &mut pace),
        other => return Err(format!("not ELF but {other:?}")),
    }
    .map_err(|e| e.to_string())
}

/// Hands the mapped file's resident pages back to the page cache.
pub(super) fn release(map: &Mmap) {
    // SAFETY: the mapping is of a file opened read-only and is never
    // written: MADV_DONTNEED only drops this process's page table entries,
    // and the next read of a page maps it again from the page cache (or the
    // file), with the same bytes. References into the mapping stay valid.
    if let Err(e) = unsafe { map.unchecked_advise(UncheckedAdvice::DontNeed) } {
        tracing::debug!("symbols: madvise(DONTNEED) failed: {e}");
    }
}

#[cfg(test)]
#[path = "elf_tests.rs"]
mod tests;
