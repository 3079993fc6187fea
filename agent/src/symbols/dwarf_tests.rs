//! Unit tests of `dwarf.rs`: a small C shared object built with
//! `cc -O2 -g`, an always-inline static function called from an exported
//! one; binutils' `addr2line -i -f` gives the ground truth. Needs `cc` and
//! binutils.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;
use crate::symbols::ObjectCache;
use crate::symbols::elf::ElfObject;

const SOURCE: &str = r#"
static inline __attribute__((always_inline)) int mdiag_inner(int x) {
    int y = x * 7;
    y ^= x >> 3;
    return y + 11;
}
int mdiag_outer(int x) {
    return mdiag_inner(x) * 5 + 1;
}
"#;

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {program} (cc and binutils are needed): {e}"));
    assert!(out.status.success(), "{program} {args:?} failed: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Builds [`SOURCE`] into `dir/name` with the `cc` flags given.
fn build(dir: &Path, name: &str, flags: &[&str]) -> PathBuf {
    let c = dir.join("inline.c");
    std::fs::write(&c, SOURCE).unwrap();
    let out = dir.join(name);
    let mut args = vec!["-shared", "-fPIC", "-Wl,--build-id"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["-o", out.to_str().unwrap(), c.to_str().unwrap()]);
    run("cc", &args);
    out
}

/// `addr2line -i -f`'s chain at `vaddr`, innermost first, as frames.
fn binutils_chain(object: &Path, vaddr: u64) -> Vec<InlineFrame> {
    let out = run(
        "addr2line",
        &[
            "-i",
            "-f",
            "-e",
            object.to_str().unwrap(),
            &format!("{vaddr:#x}"),
        ],
    );
    let lines: Vec<&str> = out.lines().collect();
    lines
        .chunks(2)
        .map(|pair| {
            let function = (pair[0] != "??").then(|| pair[0].to_string());
            // "file:line", perhaps " (discriminator N)" after.
            let location = pair[1].split(" (").next().unwrap();
            let (file, line) = location.rsplit_once(':').unwrap();
            InlineFrame {
                function,
                file: (file != "??").then(|| file.to_string()),
                line: line.parse().ok().filter(|&l| l != 0),
            }
        })
        .collect()
}

/// An address of `mdiag_outer` where binutils sees `mdiag_inner` inlined,
/// and binutils' chain there (innermost first).
fn inlined_address(object: &Path) -> (u64, Vec<InlineFrame>) {
    let elf = ElfObject::open(object).unwrap();
    let outer = elf.function("mdiag_outer").unwrap();
    (outer.value..outer.value + outer.size)
        .find_map(|vaddr| {
            let chain = binutils_chain(object, vaddr);
            (chain.len() == 2 && chain[0].function.as_deref() == Some("mdiag_inner"))
                .then_some((vaddr, chain))
        })
        .expect("binutils sees mdiag_inner inlined somewhere in mdiag_outer")
}

#[test]
fn the_chain_at_an_inlined_address_is_addr2lines_reversed() {
    let dir = tempfile::tempdir().unwrap();
    let object = build(dir.path(), "libinline.so", &["-O2", "-g"]);
    let (vaddr, mut expected) = inlined_address(&object);
    expected.reverse();
    let elf = ElfObject::open(&object).unwrap();
    let chain = elf.inlined_frames(vaddr).expect("DWARF is there");
    assert_eq!(chain, expected, "at {vaddr:#x}");
    assert_eq!(chain[0].function.as_deref(), Some("mdiag_outer"));
    assert_eq!(chain[1].function.as_deref(), Some("mdiag_inner"));
    assert!(chain[1].file.as_deref().unwrap().ends_with("inline.c"));
    // The first instruction of mdiag_outer's own code, before the inlined
    // body, or any address of it: never more than the two functions.
    let outer = elf.function("mdiag_outer").unwrap();
    for a in outer.value..outer.value + outer.size {
        let chain = elf.inlined_frames(a).unwrap();
        assert_eq!(chain[0].function.as_deref(), Some("mdiag_outer"));
        assert!(chain.len() <= 2, "{chain:?}");
    }
    // No function there (the ELF header): nothing.
    assert_eq!(elf.inlined_frames(0), None);
}

/// A child process, killed (by its id) when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_process_address_gives_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let object = build(dir.path(), "libinline-loaded.so", &["-O2", "-g"]);
    let (vaddr, mut expected) = inlined_address(&object);
    expected.reverse();
    // A child linked with the library (not this test process: other tests
    // read its maps), waiting until killed.
    let main = dir.path().join("main.c");
    std::fs::write(
        &main,
        "#include <unistd.h>\nint mdiag_outer(int);\n\
         int main(void) { volatile int r = mdiag_outer(3); (void)r; pause(); return 0; }\n",
    )
    .unwrap();
    let exe = dir.path().join("main");
    let d = dir.path().to_str().unwrap();
    run(
        "cc",
        &[
            "-o",
            exe.to_str().unwrap(),
            main.to_str().unwrap(),
            &format!("-L{d}"),
            "-linline-loaded",
            &format!("-Wl,-rpath,{d}"),
        ],
    );
    let child = Child(Command::new(&exe).spawn().unwrap());
    let pid = child.0.id();
    let maps = format!("/proc/{pid}/maps");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read_to_string(&maps).is_ok_and(|m| m.contains("libinline-loaded.so")) {
        assert!(
            std::time::Instant::now() < deadline,
            "the child never mapped the library"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let cache = ObjectCache::new(64);
    let process = crate::symbols::ProcessSymbols::load(pid, &cache).unwrap();
    let loaded = process.object("libinline-loaded.so").unwrap();
    let addr = loaded.runtime_address(vaddr).unwrap();
    assert_eq!(process.inlined(addr), Some(expected));
    assert_eq!(process.symbolize(addr).unwrap().name, "mdiag_outer");
    drop(child);
}

#[test]
fn an_object_without_dwarf_has_none_and_is_read_once() {
    let dir = tempfile::tempdir().unwrap();
    // As mongod: a .symtab, no DWARF.
    let object = build(dir.path(), "libnodwarf.so", &["-O2"]);
    let elf = ElfObject::open(&object).unwrap();
    let outer = elf.function("mdiag_outer").unwrap();
    assert!(
        !elf.dwarf.is_absent(),
        "not looked for before the first use"
    );
    assert_eq!(elf.inlined_frames(outer.value), None);
    assert!(elf.dwarf.is_absent(), "the answer is kept");
    assert_eq!(elf.inlined_frames(outer.value + 1), None);
    // libc (no DWARF of its own) as well, unless a debug file brings some.
    let libc = ElfObject::open(Path::new("/lib/x86_64-linux-gnu/libc.so.6")).unwrap();
    let malloc = libc.function("malloc").unwrap().value;
    assert_eq!(libc.inlined_frames(malloc), None);
}

#[test]
fn the_dwarf_of_a_separate_debug_file_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let full = build(dir.path(), "libsplit-full.so", &["-O2", "-g"]);
    let (vaddr, mut expected) = inlined_address(&full);
    expected.reverse();
    let debug_dir = dir.path().join("debug");
    let id = ElfObject::open(&full).unwrap().build_id_hex().unwrap();
    let at = debug_dir
        .join(".build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]));
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    let stripped = dir.path().join("libsplit.so");
    let (f, a, s) = (
        full.to_str().unwrap(),
        at.to_str().unwrap(),
        stripped.to_str().unwrap(),
    );
    run("objcopy", &["--only-keep-debug", f, a]);
    run("strip", &["--strip-all", "-o", s, f]);
    let no_debug = ObjectCache::new(4).with_debug_dirs(vec![dir.path().join("none")]);
    assert_eq!(
        no_debug.open(&stripped).unwrap().inlined_frames(vaddr),
        None
    );
    let cache = ObjectCache::new(4).with_debug_dirs(vec![debug_dir]);
    let o = cache.open(&stripped).unwrap();
    assert_eq!(o.debug_file(), Some(at.as_path()));
    assert_eq!(o.inlined_frames(vaddr), Some(expected));
}

#[test]
fn compressed_debug_sections_are_inflated() {
    let dir = tempfile::tempdir().unwrap();
    let plain = build(dir.path(), "libplain.so", &["-O2", "-g"]);
    let (vaddr, mut expected) = inlined_address(&plain);
    expected.reverse();
    for format in ["zlib", "zstd"] {
        let out = dir.path().join(format!("lib{format}.so"));
        let (p, o) = (plain.to_str().unwrap(), out.to_str().unwrap());
        let arg = format!("--compress-debug-sections={format}");
        let ok = Command::new("objcopy")
            .args([arg.as_str(), p, o])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("objcopy cannot compress with {format}: skipped");
            continue;
        }
        let elf = ElfObject::open(&out).unwrap();
        assert_eq!(
            elf.inlined_frames(vaddr),
            Some(expected.clone()),
            "{format}"
        );
    }
}

#[test]
fn the_budget_drops_the_least_recently_used_but_keeps_the_newest() {
    let slot = || Arc::new(Mutex::new(State::Dropped));
    let (a, b, c) = (slot(), slot(), slot());
    let mut budget = Budget::new(100);
    assert!(budget.admit(1, 40, Arc::downgrade(&a)).is_empty());
    assert!(budget.admit(2, 40, Arc::downgrade(&b)).is_empty());
    budget.touch(1);
    let victims = budget.admit(3, 40, Arc::downgrade(&c));
    let ids: Vec<u64> = victims.iter().map(|(_, id)| *id).collect();
    assert_eq!(ids, [2], "2 was used least recently");
    // Larger than the whole budget alone: kept, everything else dropped.
    let d = slot();
    let victims = budget.admit(4, 500, Arc::downgrade(&d));
    let mut ids: Vec<u64> = victims.iter().map(|(_, id)| *id).collect();
    ids.sort();
    assert_eq!(ids, [1, 3]);
    // A slot gone (its object dropped) is forgotten, not charged.
    drop(d);
    let e = slot();
    assert!(budget.admit(5, 60, Arc::downgrade(&e)).is_empty());
}
