//! Unit tests of `elf.rs` (a child module of it, kept in its own file
//! so that the code under test stays short).

use super::*;

const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";

#[test]
fn libc_index_has_dynsym_functions_build_id_and_segments() {
    let libc = ElfObject::open(Path::new(LIBC)).unwrap();
    assert_eq!(libc.elf_type(), ElfType::Dyn);
    assert!(!libc.is_pie(), "a shared library is not a PIE executable");
    let id = libc.build_id_hex().expect("Debian's libc has a build-id");
    assert_eq!(id.len(), 40, "SHA-1 build-id: {id}");
    assert!(libc.counts().dynsym_functions > 1000, "{:?}", libc.counts());
    let malloc = libc.function("malloc").unwrap();
    assert!(malloc.global && malloc.tables.dynsym && malloc.size > 0);
    // aliases at malloc's address: __libc_malloc too; malloc is preferred
    let aliases: Vec<_> = libc.functions_at(malloc.value).map(|f| f.name).collect();
    assert!(aliases.contains(&"__libc_malloc"), "{aliases:?}");
    let (f, off) = libc.function_containing(malloc.value + 3).unwrap();
    assert_eq!((f.name, off), ("malloc", 3));
    // memcpy is an IFUNC in glibc.
    assert!(libc.function("memcpy").unwrap().ifunc);
    let text = libc
        .segments()
        .iter()
        .find(|s| s.flags & address::PF_X != 0)
        .unwrap();
    let off = libc.file_offset("malloc").unwrap();
    assert_eq!(off, malloc.value - text.vaddr + text.offset);
    assert!(matches!(
        libc.uprobe_location("malloc").unwrap(),
        aya::programs::uprobe::UProbeAttachLocation::AbsoluteOffset(o) if o == off
    ));
    assert!(matches!(
        libc.file_offset("no_such_function_here"),
        Err(SymbolError::NoSuchSymbol { .. })
    ));
    assert_eq!(peek_build_id(&libc.map).as_deref(), libc.build_id());
}

#[test]
fn own_executable_is_pie_with_symtab() {
    let exe = std::env::current_exe().unwrap();
    let me = ElfObject::open(&exe).unwrap();
    assert_eq!(me.elf_type(), ElfType::Dyn);
    assert!(me.is_pie(), "rustc links PIE executables by default");
    assert!(me.counts().symtab_functions > 100, "{:?}", me.counts());
    assert!(me.functions().count() == me.counts().functions);
    // 25 bytes a function (and a few data symbols and segments).
    let n = me.counts().functions;
    assert!(
        me.index_bytes() <= n * 25 + 4096,
        "{} for {n}",
        me.index_bytes()
    );
    // Sorted by address.
    let values: Vec<u64> = me.functions().map(|f| f.value).collect();
    assert!(values.windows(2).all(|w| w[0] <= w[1]));
    // The same functions in file order, each with its place by address.
    let mut by_file: Vec<(usize, &str)> = me
        .functions_in_file_order()
        .map(|(i, f)| (i, f.name))
        .collect();
    by_file.sort_unstable();
    let by_address: Vec<(usize, &str)> = me.functions().map(|f| f.name).enumerate().collect();
    assert_eq!(by_file, by_address);
    let extents: Vec<(u64, u64)> = me.functions().map(|f| (f.value, f.size)).collect();
    assert_eq!(me.extents().collect::<Vec<_>>(), extents);
}

#[test]
fn truncated_and_garbage_files_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let full = std::fs::read(LIBC).unwrap();
    // Cut at many places: inside the header, the program headers, the
    // middle (section headers at the end are gone) and just before the end.
    for cut in [0, 3, 20, 63, 64, 200, 4096, full.len() / 2, full.len() - 1] {
        let p = dir.path().join(format!("libc-{cut}.so"));
        std::fs::write(&p, &full[..cut]).unwrap();
        let err = ElfObject::open(&p)
            .err()
            .unwrap_or_else(|| panic!("cut at {cut} parsed"));
        assert!(
            matches!(err, SymbolError::Elf { .. } | SymbolError::Mmap { .. }),
            "cut {cut}: {err}"
        );
        assert!(err.to_string().contains("libc-"), "names the file: {err}");
        let _ = peek_build_id(&full[..cut]);
    }
    let p = dir.path().join("text.so");
    std::fs::write(&p, b"#!/bin/sh\necho not elf\n").unwrap();
    assert!(matches!(ElfObject::open(&p), Err(SymbolError::Elf { .. })));
    assert!(matches!(
        ElfObject::open(&dir.path().join("missing.so")),
        Err(SymbolError::Open { .. })
    ));
    // Corrupt bytes all over the section header table: still no panic.
    let mut bad = full.clone();
    let n = bad.len();
    for (i, b) in bad[n - 8192..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(37);
    }
    let p = dir.path().join("corrupt.so");
    std::fs::write(&p, &bad).unwrap();
    let _ = ElfObject::open(&p);
}

#[test]
fn random_corruption_never_panics() {
    let full = std::fs::read(LIBC).unwrap();
    let sh_start = full.len() - 64 * 64; // the section header table's area
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = move || {
        // xorshift64*: deterministic, no dependency.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let mut parsed = 0;
    let nothing = || ();
    let mut pace = Every::new(64, &nothing);
    for round in 0..300 {
        let mut bad = full.clone();
        for _ in 0..1 + next() % 8 {
            let r = next() as usize;
            // Headers, program headers, section headers, or anywhere.
            let at = match round % 3 {
                0 => r % 4096,
                1 => sh_start + r % (full.len() - sh_start),
                _ => r % full.len(),
            };
            bad[at] = next() as u8;
        }
        let _ = peek_build_id(&bad);
        let result = match FileKind::parse(&*bad) {
            Ok(FileKind::Elf64) => parse_elf::<elf::FileHeader64<Endianness>>(&bad, &mut pace),
            Ok(FileKind::Elf32) => parse_elf::<elf::FileHeader32<Endianness>>(&bad, &mut pace),
            _ => continue,
        };
        // The index reads names at the offsets the (corrupt) tables give.
        if let Ok(p) = result {
            let index = FuncIndex::build(p.funcs, p.strings);
            for i in 0..index.len() {
                let _ = index.name(Files::of(&bad), i);
            }
            parsed += 1;
        }
    }
    assert!(
        parsed > 0,
        "some corruptions are harmless and must still parse"
    );
}

#[test]
fn preference_among_aliases() {
    let f = |name, global| Function {
        name,
        value: 0,
        size: 1,
        global,
        ifunc: false,
        tables: Tables::default(),
    };
    let mut v = [
        f("__libc_malloc", true),
        f("malloc", true),
        f("malloc_local", false),
    ];
    v.sort_by(preferred);
    assert_eq!(
        v.map(|f| f.name),
        ["malloc", "__libc_malloc", "malloc_local"]
    );
    assert_eq!(hex(&[0x0a, 0xff, 0x00]), "0aff00");
}

/// Resident kB of the mapping that starts at `addr`, from /proc/self/smaps.
fn resident_kib(addr: usize) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
    let start = format!("{addr:x}-");
    let mut lines = smaps.lines().skip_while(|l| !l.starts_with(&start));
    assert!(lines.next().is_some(), "no mapping at {start}");
    lines
        .find_map(|l| l.strip_prefix("Rss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[test]
fn the_pages_read_leave_the_resident_set() {
    // This test binary: a large .symtab and .strtab.
    let exe = std::env::current_exe().unwrap();
    let me = ElfObject::open(&exe).unwrap();
    let addr = me.map.as_ptr() as usize;
    assert_eq!(resident_kib(addr), 0, "released once indexed");
    // Every name read (a walk releases as it goes; what the last stretch
    // read stays until the owner releases).
    let n = me.function_names().count();
    assert!(n > RELEASE_EVERY, "{n} functions");
    let (f, _) = me
        .function_containing(me.function("main").unwrap().value)
        .unwrap();
    assert_eq!(f.name, "main");
    assert!(resident_kib(addr) > 0);
    me.release_pages();
    assert_eq!(resident_kib(addr), 0);
    // Nothing read since: nothing to release, and names still read.
    me.release_pages();
    assert_eq!(me.function("main").unwrap().name, "main");
}

#[test]
fn lookups_by_name_tell_equal_hashes_apart() {
    // Built by hand: `free` gets malloc's 32 bits, as if they collided.
    let strtab = b"\0malloc\0free\0malloc\0";
    let data: Vec<u8> = strtab.to_vec();
    let strings = StringTables {
        symtab: (0, data.len() as u64),
        dynsym: (0, 0),
        debug: (0, 0),
    };
    let malloc = index::name_hash(b"malloc");
    let raw = |value, name, hash, flags| RawFunc {
        value,
        size: 8,
        name,
        hash,
        flags,
    };
    let global = index::SYMTAB | index::GLOBAL;
    let funcs = vec![
        raw(0x30, 13, malloc, index::SYMTAB),       // a local malloc
        raw(0x20, 8, malloc & 0xffff_ffff, global), // free
        raw(0x10, 1, malloc, global),               // malloc
        raw(0x10, 1, malloc, index::DYNSYM),        // listed twice
    ];
    let index = FuncIndex::build(funcs, strings);
    assert_eq!(index.len(), 3, "the duplicate merged");
    assert_eq!(index.flags(0), global | index::DYNSYM);
    let named = |name| -> Vec<u64> {
        index
            .named(Files::of(&data), name)
            .map(|i| index.value(i))
            .collect()
    };
    assert_eq!(named("malloc"), [0x10, 0x30], "global first");
    assert!(named("calloc").is_empty());
    assert_eq!(index.at(0x10), 0..1);
    assert_eq!(index.candidates(0x25), Some((1..2, Some(0x30))));
}
