//! The function index of one ELF object, kept small: per function its
//! address, size, flags and the offset of its name in the file's string
//! table (`st_name`), in four arrays sorted by address (17 bytes a
//! function), and a name index of (32-bit hash of the name, position)
//! pairs sorted by hash (8 bytes a function). mongod 6.0's 163,000
//! functions take about 4 MiB.
//!
//! Names are never copied, and never read while the index is built: each
//! was read once before (`tables.rs`, in string table order) to compute
//! its 64-bit hash. A symbol both tables list (same address and name) is
//! merged by (address, 64-bit hash): two different names at one address
//! would have to collide in SipHash's 64 bits to be taken for one. A
//! lookup by name hashes it, finds the equal 32-bit hashes by binary search
//! and compares those few names.
//!
//! Why not sort the names themselves: a sort by name reads the names in
//! random order, so every page of mongod's 48 MB of string tables is
//! resident at once.

use std::hash::Hasher as _;
use std::ops::Range;

use object::read::StringTable;

/// The symbol is GLOBAL, WEAK or GNU_UNIQUE.
pub(super) const GLOBAL: u8 = 1;
/// STT_GNU_IFUNC.
pub(super) const IFUNC: u8 = 2;
/// Listed in `.symtab`.
pub(super) const SYMTAB: u8 = 4;
/// Listed in `.dynsym`.
pub(super) const DYNSYM: u8 = 8;
/// Its `st_name` is an offset in `.dynsym`'s string table, not `.symtab`'s.
pub(super) const IN_DYNSTR: u8 = 16;
/// Read from the separate debug file's `.symtab` (`debuginfo.rs`): its
/// `st_name` is in that file's string table. (32 and 64 are `tables.rs`'s,
/// before the index is built.)
pub(super) const IN_DEBUG: u8 = 128;

/// Which string table a name offset is in.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct StringTables {
    /// File range `[start, end)` of `.symtab`'s string table.
    pub symtab: (u64, u64),
    /// File range of `.dynsym`'s string table.
    pub dynsym: (u64, u64),
    /// File range of the separate debug file's `.symtab` string table.
    pub debug: (u64, u64),
}

/// The bytes names are read from: the object's mapping and its separate
/// debug file's (empty when none).
#[derive(Debug, Clone, Copy)]
pub(super) struct Files<'a> {
    pub main: &'a [u8],
    pub debug: &'a [u8],
}

impl<'a> Files<'a> {
    /// An object without a debug file.
    #[cfg(test)]
    pub(super) fn of(main: &'a [u8]) -> Files<'a> {
        Files { main, debug: &[] }
    }
}

impl StringTables {
    /// The name at `offset` of the table `flags` say (bytes up to the NUL),
    /// in `data`: the file that table is in.
    pub(super) fn name<'a>(&self, data: &'a [u8], flags: u8, offset: u32) -> Option<&'a [u8]> {
        let (start, end) = if flags & IN_DEBUG != 0 {
            self.debug
        } else if flags & IN_DYNSTR != 0 {
            self.dynsym
        } else {
            self.symtab
        };
        StringTable::new(data, start, end).get(offset).ok()
    }
}

/// One symbol as read from a table, before the index is built.
#[derive(Debug, Clone, Copy)]
pub(super) struct RawFunc {
    pub value: u64,
    pub size: u64,
    /// [`name_hash`] of the name.
    pub hash: u64,
    /// `st_name`.
    pub name: u32,
    pub flags: u8,
}

/// The hash of a name (SipHash-1-3 with fixed keys); the name index keeps
/// its low 32 bits, and equal ones are told apart by comparing the names.
pub(super) fn name_hash(name: &[u8]) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    h.write(name);
    h.finish()
}

/// Functions sorted by address, and by name hash.
#[derive(Debug, Default)]
pub(super) struct FuncIndex {
    values: Box<[u64]>,
    /// Saturated at `u32::MAX` (no function is 4 GiB long).
    sizes: Box<[u32]>,
    names: Box<[u32]>,
    flags: Box<[u8]>,
    /// (name hash, position), sorted by hash, then global first, then
    /// by address.
    by_name: Box<[(u32, u32)]>,
    strings: StringTables,
}

/// Calls a function every `every` calls of [`Self::tick`].
pub(super) struct Every<'a> {
    every: usize,
    n: usize,
    f: &'a dyn Fn(),
}

impl<'a> Every<'a> {
    pub(super) fn new(every: usize, f: &'a dyn Fn()) -> Self {
        Every { every, n: 0, f }
    }

    pub(super) fn tick(&mut self) {
        self.n += 1;
        if self.n >= self.every {
            self.n = 0;
            (self.f)();
        }
    }
}

impl FuncIndex {
    /// Sorts `raw` by address, merges the symbols both tables list (same
    /// address and name hash) and builds the name index. Of a symbol both
    /// the object and its debug file list, the object's is kept (its name
    /// is read from the object).
    pub(super) fn build(mut raw: Vec<RawFunc>, strings: StringTables) -> FuncIndex {
        raw.sort_unstable_by_key(|f| (f.value, f.hash, f.flags & IN_DEBUG));
        raw.dedup_by(|later, kept| {
            let same = (later.value, later.hash) == (kept.value, kept.hash);
            if same {
                kept.size = kept.size.max(later.size);
                kept.flags |= later.flags & (GLOBAL | SYMTAB | DYNSYM);
            }
            same
        });
        raw.shrink_to_fit();
        let mut by_name: Vec<(u32, u32)> = raw
            .iter()
            .enumerate()
            .map(|(i, f)| (f.hash as u32, i as u32))
            .collect();
        by_name.sort_by_key(|&(hash, i)| (hash, raw[i as usize].flags & GLOBAL == 0));
        FuncIndex {
            values: raw.iter().map(|f| f.value).collect(),
            sizes: raw
                .iter()
                .map(|f| u32::try_from(f.size).unwrap_or(u32::MAX))
                .collect(),
            names: raw.iter().map(|f| f.name).collect(),
            flags: raw.iter().map(|f| f.flags).collect(),
            by_name: by_name.into_boxed_slice(),
            strings,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.values.len()
    }

    /// What the index holds on the heap.
    pub(super) fn heap_bytes(&self) -> usize {
        self.len() * (8 + 4 + 4 + 1) + self.by_name.len() * 8
    }

    pub(super) fn value(&self, i: usize) -> u64 {
        self.values[i]
    }

    pub(super) fn size(&self, i: usize) -> u64 {
        self.sizes[i].into()
    }

    pub(super) fn flags(&self, i: usize) -> u8 {
        self.flags[i]
    }

    /// The name of function `i` (validated as UTF-8 when indexed).
    pub(super) fn name<'a>(&self, files: Files<'a>, i: usize) -> &'a str {
        let flags = self.flags[i];
        let data = if flags & IN_DEBUG != 0 {
            files.debug
        } else {
            files.main
        };
        let bytes = self
            .strings
            .name(data, flags, self.names[i])
            .unwrap_or_default();
        std::str::from_utf8(bytes).unwrap_or_default()
    }

    /// Positions of the functions named `name`, global first.
    pub(super) fn named<'s, 'a>(
        &'s self,
        files: Files<'a>,
        name: &'s str,
    ) -> impl Iterator<Item = usize> + use<'s, 'a> {
        let hash = name_hash(name.as_bytes()) as u32;
        let lo = self.by_name.partition_point(|&(h, _)| h < hash);
        self.by_name[lo..]
            .iter()
            .take_while(move |&&(h, _)| h == hash)
            .map(|&(_, i)| i as usize)
            .filter(move |&i| self.name(files, i) == name)
    }

    /// Every position, in the order of the names in the file.
    pub(super) fn in_name_order(&self) -> Vec<u32> {
        let mut order: Vec<u32> = (0..self.len() as u32).collect();
        order.sort_unstable_by_key(|&i| {
            let flags = self.flags[i as usize];
            (flags & (IN_DEBUG | IN_DYNSTR), self.names[i as usize])
        });
        order
    }

    /// Positions of the functions whose address is exactly `value`.
    pub(super) fn at(&self, value: u64) -> Range<usize> {
        let lo = self.values.partition_point(|&v| v < value);
        let hi = lo + self.values[lo..].partition_point(|&v| v == value);
        lo..hi
    }

    /// Which functions contain `vaddr` (see [`Self::candidates`]), without
    /// reading a name: the position of the first function at their address
    /// and a bit per function there that covers `vaddr` (a size of 0
    /// reaches the next address). `None` when none covers it, or when more
    /// than 64 functions share the address.
    pub(super) fn covering(&self, vaddr: u64) -> Option<(usize, u64)> {
        let (group, next) = self.candidates(vaddr)?;
        if group.len() > 64 {
            return None;
        }
        let mut mask = 0u64;
        for (bit, i) in group.clone().enumerate() {
            let (value, size) = (self.values[i], self.size(i));
            let covers = if size > 0 {
                vaddr - value < size
            } else {
                next.is_none_or(|n| vaddr < n)
            };
            if covers {
                mask |= 1 << bit;
            }
        }
        (mask != 0).then_some((group.start, mask))
    }

    /// Positions of the functions that may contain `vaddr` (those at the
    /// highest address not above it), and the next higher address.
    pub(super) fn candidates(&self, vaddr: u64) -> Option<(Range<usize>, Option<u64>)> {
        let end = self.values.partition_point(|&v| v <= vaddr);
        let last = *self.values.get(end.checked_sub(1)?)?;
        Some((self.at(last), self.values.get(end).copied()))
    }
}
