//! Reads an ELF object's symbol tables (`.symtab`, `.dynsym`) for the index:
//! the function symbols, unmerged, each with a hash of its name, and the few
//! data symbols of interest.
//!
//! Every name is read once, and in the order of the string tables: each
//! table's symbols are first read as they come (fixed-size entries), then
//! sorted by the offset of their name, then their names read. `.dynsym` is
//! ordered by GNU hash, so its names read in symbol order would be spread
//! over all of `.dynstr` (18 MB in mongod 6.0) at once; in string order the
//! pages already read can be handed back as the walk goes on (`pace`), and
//! a walk over 48 MB of names keeps a few MiB of them resident.

use object::Endianness;
use object::elf;
use object::read::elf::{FileHeader, SectionHeader as _, SectionTable, Sym as _};

use super::elf::{DataKind, DataSymbol, SymbolCounts, Tables, is_interesting_data_symbol};
use super::index::{self, Every, RawFunc, StringTables};

/// Not a function: a data symbol (STT_OBJECT), whose name is checked
/// against [`is_interesting_data_symbol`] when read.
const DATA: u8 = 32;
/// A data symbol of type STT_TLS.
const TLS: u8 = 64;

/// What the symbol tables hold, as [`read_symbols`] reads them.
#[derive(Default)]
pub(super) struct Symbols {
    pub funcs: Vec<RawFunc>,
    pub strings: StringTables,
    pub data: Vec<DataSymbol>,
    pub counts: SymbolCounts,
}

/// Which file the tables are read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// The object: `.symtab`, `.dynsym`, functions and data symbols.
    Object,
    /// Its separate debug file (`debuginfo.rs`): `.symtab` functions only,
    /// flagged [`index::IN_DEBUG`], their string table in `strings.debug`.
    DebugFile,
}

/// The function symbols of `.symtab` and `.dynsym` and the data symbols of
/// interest (see [`Source`]); `pace` is ticked per symbol and per name read.
pub(super) fn read_symbols<'d, Elf: FileHeader<Endian = Endianness>>(
    data: &'d [u8],
    endian: Endianness,
    sections: &SectionTable<'d, Elf>,
    pace: &mut Every<'_>,
    source: Source,
) -> object::read::Result<Symbols> {
    let mut out = Symbols::default();
    let debug = source == Source::DebugFile;
    // A debug file's `.dynsym` is NOBITS (the object's is read already).
    let kinds: &[elf::SectionType] = if debug {
        &[elf::SHT_SYMTAB]
    } else {
        &[elf::SHT_SYMTAB, elf::SHT_DYNSYM]
    };
    let tables: Vec<_> = kinds
        .iter()
        .map(|&t| sections.symbols(endian, data, t))
        .collect();
    // Room for every symbol: what is never written is never resident, and
    // the vector does not grow by doubling (a copy of it at twice its size).
    let all: usize = tables.iter().flatten().map(|t| t.len()).sum();
    let mut raw = Vec::with_capacity(all);
    for (table, &kind) in tables.into_iter().zip(kinds) {
        let dynsym = kind == elf::SHT_DYNSYM;
        let table = table?;
        let range = sections
            .section(table.string_section())
            .ok()
            .and_then(|s| s.file_range(endian))
            .map_or((0, 0), |(offset, size)| {
                (offset, offset.saturating_add(size))
            });
        let table_flags = if debug {
            out.strings.debug = range;
            index::SYMTAB | index::IN_DEBUG
        } else if dynsym {
            out.strings.dynsym = range;
            index::DYNSYM | index::IN_DYNSTR
        } else {
            out.strings.symtab = range;
            index::SYMTAB
        };
        for sym in table.iter() {
            pace.tick();
            let st_type = sym.st_type();
            let mut flags = table_flags;
            match st_type {
                elf::STT_FUNC => {}
                elf::STT_GNU_IFUNC => flags |= index::IFUNC,
                elf::STT_OBJECT if !debug => flags |= DATA,
                elf::STT_TLS if !debug => flags |= DATA | TLS,
                _ => continue,
            }
            if sym.is_undefined(endian) {
                continue;
            }
            if sym.st_bind() != elf::STB_LOCAL {
                flags |= index::GLOBAL;
            }
            raw.push(RawFunc {
                value: sym.st_value(endian).into(),
                size: sym.st_size(endian).into(),
                name: sym.st_name(endian),
                hash: 0,
                flags,
            });
        }
    }
    // Names in string table order, then back in the index's own order.
    raw.sort_unstable_by_key(|f| (f.flags & index::IN_DYNSTR, f.name));
    raw.retain_mut(|f| {
        pace.tick();
        let Some(name) = out
            .strings
            .name(data, f.flags, f.name)
            .filter(|n| !n.is_empty() && std::str::from_utf8(n).is_ok())
        else {
            out.counts.skipped += 1;
            return false;
        };
        if f.flags & DATA != 0 {
            add_data_symbol(&mut out.data, name, f);
            return false;
        }
        if f.flags & index::DYNSYM != 0 {
            out.counts.dynsym_functions += 1;
        } else {
            out.counts.symtab_functions += 1;
        }
        f.hash = index::name_hash(name);
        true
    });
    out.funcs = raw;
    Ok(out)
}

/// Keeps a data symbol of interest ([`is_interesting_data_symbol`]), once
/// per (name, address).
fn add_data_symbol(data: &mut Vec<DataSymbol>, name: &[u8], f: &RawFunc) {
    let name = std::str::from_utf8(name).unwrap_or_default();
    if !is_interesting_data_symbol(name) {
        return;
    }
    let dynsym = f.flags & index::DYNSYM != 0;
    let tables = Tables {
        symtab: !dynsym,
        dynsym,
    };
    let kind = if f.flags & TLS != 0 {
        DataKind::Tls
    } else {
        DataKind::Object
    };
    match data
        .iter_mut()
        .find(|d| d.name == name && d.value == f.value)
    {
        Some(d) => {
            d.tables.symtab |= tables.symtab;
            d.tables.dynsym |= tables.dynsym;
        }
        None => data.push(DataSymbol {
            name: name.to_string(),
            value: f.value,
            size: f.size,
            kind,
            tables,
        }),
    }
}
