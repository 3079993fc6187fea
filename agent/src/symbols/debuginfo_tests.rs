//! Unit tests of `debuginfo.rs`: a small C shared object built with `cc -g`,
//! split by binutils (`objcopy --only-keep-debug`, `strip --strip-all`,
//! `objcopy --add-gnu-debuglink`) into a temporary directory; its static
//! function is named only when the debug file is found. Needs `cc` and
//! binutils; the global debug directory is a temporary one.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;
use crate::symbols::elf::ElfObject;
use crate::symbols::{ObjectCache, ProcessSymbols};

const SOURCE: &str = r#"
static int __attribute__((noinline)) mdiag_hidden_helper(int x) { return x * 3 + 1; }
int mdiag_api(int x) { return mdiag_hidden_helper(x) + 2; }
"#;
const HIDDEN: &str = "mdiag_hidden_helper";
const DEBUG_NAME: &str = "libsplit.debug";

fn run(program: &str, args: &[&std::ffi::OsStr]) {
    let status = Command::new(program)
        .args(args)
        .status()
        .unwrap_or_else(|e| panic!("run {program} (cc and binutils are needed): {e}"));
    assert!(status.success(), "{program} {args:?} failed");
}

/// The objects of one build: unstripped, its debug file, stripped, and
/// stripped with a debug link to the debug file.
struct Split {
    full: PathBuf,
    debug: PathBuf,
    stripped: PathBuf,
    linked: PathBuf,
}

/// Builds [`SOURCE`] (or `source`) into `dir` and splits it.
fn split(dir: &Path, source: &str) -> Split {
    let c = dir.join("split.c");
    std::fs::write(&c, source).unwrap();
    let s = Split {
        full: dir.join("libsplit-full.so"),
        debug: dir.join(DEBUG_NAME),
        stripped: dir.join("libsplit-stripped.so"),
        linked: dir.join("libsplit.so"),
    };
    let o = |p: &PathBuf| p.as_os_str().to_owned();
    run(
        "cc",
        &[
            "-g".as_ref(),
            "-O0".as_ref(),
            "-shared".as_ref(),
            "-fPIC".as_ref(),
            "-Wl,--build-id".as_ref(),
            "-o".as_ref(),
            &o(&s.full),
            &o(&c),
        ],
    );
    run(
        "objcopy",
        &["--only-keep-debug".as_ref(), &o(&s.full), &o(&s.debug)],
    );
    run(
        "strip",
        &[
            "--strip-all".as_ref(),
            "-o".as_ref(),
            &o(&s.stripped),
            &o(&s.full),
        ],
    );
    let mut link = std::ffi::OsString::from("--add-gnu-debuglink=");
    link.push(&s.debug);
    run("objcopy", &[&link, &o(&s.stripped), &o(&s.linked)]);
    s
}

/// A cache searching only `debug_dir` as global debug directory.
fn cache(debug_dir: &Path) -> ObjectCache {
    ObjectCache::new(8).with_debug_dirs(vec![debug_dir.to_path_buf()])
}

fn hidden_value(full: &Path) -> u64 {
    ElfObject::open(full)
        .unwrap()
        .function(HIDDEN)
        .unwrap()
        .value
}

/// `file` moved to `to` (directories made).
fn place(file: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::rename(file, to).unwrap();
}

fn build_id_path(debug_dir: &Path, object: &Path) -> PathBuf {
    let id = ElfObject::open(object).unwrap().build_id_hex().unwrap();
    debug_dir
        .join(".build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]))
}

#[test]
fn stripped_object_has_no_static_function_without_its_debug_file() {
    let dir = tempfile::tempdir().unwrap();
    let s = split(dir.path(), SOURCE);
    let empty = dir.path().join("no-debug");
    std::fs::remove_file(&s.debug).unwrap();
    for object in [&s.stripped, &s.linked] {
        let o = cache(&empty).open(object).unwrap();
        assert!(o.function("mdiag_api").is_some(), "exported: in .dynsym");
        assert!(o.function(HIDDEN).is_none(), "{object:?}");
        assert_eq!(o.debug_file(), None);
        assert_eq!(o.counts().symtab_functions, 0);
    }
}

#[test]
fn build_id_directory_gives_the_static_function() {
    let dir = tempfile::tempdir().unwrap();
    let s = split(dir.path(), SOURCE);
    let value = hidden_value(&s.full);
    let debug_dir = dir.path().join("debug");
    let at = build_id_path(&debug_dir, &s.stripped);
    place(&s.debug, &at);
    let o = cache(&debug_dir).open(&s.stripped).unwrap();
    assert_eq!(o.debug_file(), Some(at.as_path()));
    let f = o
        .function(HIDDEN)
        .expect("static function from the debug file");
    assert_eq!(
        f.value, value,
        "same virtual address as the unstripped object"
    );
    assert!(!f.global && f.tables.symtab && !f.tables.dynsym);
    let (g, offset) = o.function_containing(value + 1).unwrap();
    assert_eq!((g.name, offset), (HIDDEN, 1));
    // Exported functions, listed by both files, are one function each.
    assert_eq!(o.functions_named("mdiag_api").count(), 1);
    let api = o.function("mdiag_api").unwrap();
    assert!(api.tables.dynsym && api.tables.symtab, "{api:?}");
    assert!(o.file_offset(HIDDEN).is_ok(), "segments are the object's");
    let names: Vec<&str> = o.function_names().collect();
    assert!(names.contains(&HIDDEN), "{names:?}");
    o.release_pages();
}

#[test]
fn debug_link_is_searched_in_object_dir_dot_debug_and_global_dir() {
    let dir = tempfile::tempdir().unwrap();
    let debug_dir = dir.path().join("debug");
    let where_: [fn(&Path, &Path) -> PathBuf; 3] = [
        |object_dir, _| object_dir.join(DEBUG_NAME),
        |object_dir, _| object_dir.join(".debug").join(DEBUG_NAME),
        |object_dir, global| {
            global
                .join(object_dir.strip_prefix("/").unwrap())
                .join(DEBUG_NAME)
        },
    ];
    for (n, at) in where_.iter().enumerate() {
        let build = dir.path().join(format!("case{n}"));
        std::fs::create_dir(&build).unwrap();
        let s = split(&build, SOURCE);
        let value = hidden_value(&s.full);
        // Only the linked object is left where it was built.
        std::fs::remove_file(&s.stripped).unwrap();
        std::fs::remove_file(&s.full).unwrap();
        let to = at(&build, &debug_dir);
        if to != s.debug {
            place(&s.debug, &to);
        }
        let stripped = cache(&debug_dir).open(&s.linked).unwrap();
        assert_eq!(stripped.debug_file(), Some(to.as_path()), "case {n}");
        assert_eq!(stripped.function(HIDDEN).map(|f| f.value), Some(value));
    }
}

#[test]
fn debug_link_with_a_wrong_crc_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let s = split(dir.path(), SOURCE);
    let link = peek_debug_link(&std::fs::read(&s.linked).unwrap()).unwrap();
    let debug = std::fs::read(&s.debug).unwrap();
    assert_eq!(link.name, DEBUG_NAME);
    assert_eq!(link.crc, crc32fast::hash(&debug));
    assert_eq!(peek_debug_link(&std::fs::read(&s.stripped).unwrap()), None);
    // Same build-id, other bytes: a stale debug file.
    let mut changed = debug;
    changed.extend_from_slice(b"stale");
    std::fs::write(&s.debug, &changed).unwrap();
    let o = cache(&dir.path().join("no-debug")).open(&s.linked).unwrap();
    assert_eq!(o.debug_file(), None);
    assert!(o.function(HIDDEN).is_none());
}

#[test]
fn a_debug_file_of_another_build_id_is_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let s = split(dir.path(), SOURCE);
    let other_dir = dir.path().join("other");
    std::fs::create_dir(&other_dir).unwrap();
    let other = split(
        &other_dir,
        &format!("{SOURCE}\nint mdiag_more(void) {{ return 7; }}\n"),
    );
    let debug_dir = dir.path().join("debug");
    place(&other.debug, &build_id_path(&debug_dir, &s.stripped));
    let o = cache(&debug_dir).open(&s.stripped).unwrap();
    assert_eq!(o.debug_file(), None);
    assert!(o.function(HIDDEN).is_none());
}

#[test]
fn the_target_root_is_searched() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let s = split(dir.path(), SOURCE);
    let id = peek_build_id(&std::fs::read(&s.stripped).unwrap()).unwrap();
    let link = peek_debug_link(&std::fs::read(&s.linked).unwrap()).unwrap();
    // As a container sees them: /opt/app/libsplit.so, its build-id file
    // under the container's /usr/lib/debug.
    let in_root = build_id_path(&root.join("usr/lib/debug"), &s.stripped);
    place(&s.debug, &in_root);
    let lookup = Lookup {
        object: Path::new("/opt/app/libsplit.so"),
        root: Some(root.clone()),
        file: (0, 0),
    };
    let dirs = [PathBuf::from(DEFAULT_DEBUG_DIR)];
    let found = find_debug_file(&dirs, &lookup, Some(&id), Some(&link)).unwrap();
    assert_eq!(found.path, in_root);
    // The debug link, in the container's object directory.
    let linked_at = root.join("opt/app/.debug").join(DEBUG_NAME);
    place(&in_root, &linked_at);
    let found = find_debug_file(&dirs, &lookup, Some(&id), Some(&link)).unwrap();
    assert_eq!(found.path, linked_at);
    let map =
        crate::symbols::elf::map_file(&s.linked, &std::fs::File::open(&s.linked).unwrap()).unwrap();
    let o = ElfObject::parse_with_debug(&s.linked, map, Some(found)).unwrap();
    assert!(o.function(HIDDEN).is_some());
    // Nothing under the root, nothing on the host.
    std::fs::remove_file(&linked_at).unwrap();
    assert!(find_debug_file(&dirs, &lookup, Some(&id), Some(&link)).is_none());
}

#[test]
fn a_debug_link_name_with_a_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = split(dir.path(), SOURCE);
    let out = dir.path().join("evil.so");
    let mut arg = std::ffi::OsString::from("--add-gnu-debuglink=");
    arg.push(&s.debug);
    // objcopy stores the base name; rewrite it in place to "../x.debug".
    run("objcopy", &[&arg, s.stripped.as_os_str(), out.as_os_str()]);
    let mut bytes = std::fs::read(&out).unwrap();
    let at = bytes
        .windows(DEBUG_NAME.len())
        .position(|w| w == DEBUG_NAME.as_bytes())
        .unwrap();
    bytes[at..at + 3].copy_from_slice(b"../");
    assert_eq!(peek_debug_link(&bytes), None);
}

/// Live check, printed only: with Debian's libc6-dbg installed, glibc's
/// `start_thread` (not exported) is named through `/usr/lib/debug/.build-id`.
#[test]
fn libc6_dbg_names_start_thread_when_installed() {
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    let Ok(o) = ObjectCache::new(2).open(libc) else {
        eprintln!("no {libc:?}");
        return;
    };
    let f = o.function("start_thread");
    let alone = ElfObject::open(libc).ok();
    eprintln!(
        "libc6-dbg live check: debug file {:?}, start_thread {:?} (without it: {:?}), {:?}",
        o.debug_file(),
        f.map(|f| f.value),
        alone.as_ref().map(|a| a.function("start_thread").is_some()),
        o.counts()
    );
    // Through this process's own mapping of libc, as a stack would be.
    let Ok(me) = ProcessSymbols::load(std::process::id(), &ObjectCache::new(64)) else {
        return;
    };
    let named = me.object("libc.so.6").and_then(|l| {
        let value = l.elf.function("start_thread")?.value;
        let address = l.runtime_address(value + 4)?;
        me.symbolize(address)
            .map(|s| (s.name.to_string(), s.offset))
    });
    eprintln!("libc6-dbg live check: start_thread+4 in this process symbolizes as {named:?}");
}
