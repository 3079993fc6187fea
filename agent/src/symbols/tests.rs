//! Whole-module tests on live processes: the test process itself and
//! `sleep` children it starts (with allocators preloaded). No root needed.
//!
//! Needs Debian's `libtcmalloc-minimal4` (gperftools) and `libjemalloc2`, and
//! a C compiler (`cc`) for the fake TCMalloc / WiredTiger objects.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::allocator::EntryRole;
use super::elf::DataKind;
use super::wiredtiger::WiredTigerHost;
use super::*;

const TCMALLOC_MINIMAL: &str = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4";
const JEMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";

/// A `sleep 30` child, killed and reaped on drop.
struct Sleeper(std::process::Child);

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `sleep 30` with `LD_PRELOAD=preload` and waits until its maps show
/// the sleep binary, libc and every preloaded object.
fn sleeper(preload: &[&Path]) -> (Sleeper, ProcessSymbols) {
    let mut cmd = Command::new("sleep");
    cmd.arg("30").stdin(Stdio::null()).stdout(Stdio::null());
    if !preload.is_empty() {
        let list: Vec<_> = preload.iter().map(|p| p.to_str().unwrap()).collect();
        cmd.env("LD_PRELOAD", list.join(" "));
    }
    let child = Sleeper(cmd.spawn().expect("spawn sleep"));
    let pid = child.0.id();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(maps) = Maps::of(pid) {
            let ready = maps.main().is_some_and(|m| m.file_name() == "sleep")
                && maps.by_file_name("libc.so.6").is_some()
                && preload.iter().all(|p| {
                    let canon = std::fs::canonicalize(p).unwrap();
                    maps.objects.iter().any(|o| o.path == canon)
                });
            if ready {
                let process = ProcessSymbols::from_maps(maps, ObjectCache::global());
                assert!(process.failures.is_empty(), "{:?}", process.failures);
                return (child, process);
            }
        }
        assert!(
            Instant::now() < deadline,
            "sleep {pid} never mapped {preload:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn require_file(path: &str, package: &str) -> PathBuf {
    let p = PathBuf::from(path);
    assert!(p.exists(), "{path} missing: apt-get install {package}");
    p
}

/// Compiles C source into a shared object in `dir`.
fn cc_shared(dir: &Path, name: &str, source: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    let so = dir.join(format!("{name}.so"));
    std::fs::write(&c, source).unwrap();
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&so)
        .arg(&c)
        .status()
        .expect("run cc (a C compiler is needed)");
    assert!(status.success(), "cc failed on {name}");
    so
}

#[inline(never)]
fn marker_function_for_symbolize(x: u64) -> u64 {
    std::hint::black_box(x).wrapping_mul(31).rotate_left(7)
}

#[test]
fn malloc_file_offset_and_runtime_address_round_trip_in_own_process() {
    if crate::emulation::skip_under_emulation(
        "malloc_file_offset_and_runtime_address_round_trip_in_own_process",
        "/proc/self/maps under qemu-user are the emulator's mappings",
    ) {
        return;
    }
    let process = ProcessSymbols::load(std::process::id(), ObjectCache::global()).unwrap();
    assert!(process.main().is_some(), "main executable first");
    let libc = process.require("libc.so.6").unwrap();
    let malloc = libc.resolve("malloc").unwrap();

    // st_value -> file offset through the PT_LOAD segment holding it.
    let seg = address::segment_for_vaddr(libc.elf.segments(), malloc.vaddr).unwrap();
    assert_eq!(malloc.file_offset, malloc.vaddr - seg.vaddr + seg.offset);
    // file offset -> runtime address through the mapping showing it, and the
    // real thing: the address the dynamic linker gave malloc.
    let actual = libc::malloc as *const () as u64;
    assert_eq!(malloc.address, Some(actual));
    let m = libc.mapped.mapping_at(actual).unwrap();
    assert!(m.perms.exec);
    assert_eq!(actual, m.start + (malloc.file_offset - m.offset));
    assert!(matches!(
        malloc.uprobe_location(),
        aya::programs::uprobe::UProbeAttachLocation::AbsoluteOffset(o) if o == malloc.file_offset
    ));
    assert!(malloc.attach_path.exists());

    // Reverse: glibc defines malloc and __libc_malloc at one address; the
    // preferred name is "malloc", both are listed as aliases.
    let s = process.symbolize(actual).unwrap();
    assert_eq!((s.name, s.offset), ("malloc", 0));
    assert!(s.aliases.contains(&"__libc_malloc"), "{:?}", s.aliases);
    assert_eq!(s.object, libc.mapped.path);
    let s = process.symbolize(actual + 9).unwrap();
    assert_eq!((s.name, s.offset), ("malloc", 9));
    let free = libc::free as *const () as u64;
    assert_eq!(process.symbolize(free).unwrap().name, "free");
    assert_eq!(process.find("free").unwrap().address, Some(free));

    // A function of our own (PIE main executable, .symtab).
    let here = marker_function_for_symbolize as *const () as u64;
    assert_eq!(marker_function_for_symbolize(1), 31 << 7);
    let s = process.symbolize(here + 2).unwrap();
    assert!(s.name.contains("marker_function_for_symbolize"), "{s:?}");
    assert_eq!(s.offset, 2);
    assert_eq!(s.object, std::env::current_exe().unwrap());
    assert!(process.symbolize(0x10).is_none());
}

#[test]
fn second_load_of_a_process_is_served_by_the_cache() {
    let cache = ObjectCache::new(64);
    let pid = std::process::id();
    let first = ProcessSymbols::load(pid, &cache).unwrap();
    let n = first.objects.len() as u64;
    assert!(n >= 3, "test binary, libc, ld.so at least: {n}");
    let after_first = cache.stats();
    assert_eq!(after_first.misses, n);
    let second = ProcessSymbols::load(pid, &cache).unwrap();
    let after_second = cache.stats();
    assert_eq!(after_second.hits - after_first.hits, n, "every object hit");
    assert_eq!(after_second.misses, n, "nothing parsed again");
    // Our own read-only views of the files (shared mappings) changed nothing.
    let paths = |p: &ProcessSymbols| {
        let objects = p.objects.iter();
        objects
            .map(|o| (o.mapped.path.clone(), o.mapped.mappings.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(paths(&first), paths(&second));
    assert!(
        first
            .objects
            .iter()
            .all(|o| o.mapped.mappings.iter().all(|m| !m.perms.shared))
    );
    for (a, b) in first.objects.iter().zip(&second.objects) {
        assert!(std::sync::Arc::ptr_eq(&a.elf, &b.elf));
    }
}

unsafe extern "C" {
    static __rseq_size: u32;
    static __rseq_offset: isize;
}

#[test]
fn glibc_rseq_symbols_are_found_and_readable_in_own_process() {
    if crate::emulation::skip_under_emulation(
        "glibc_rseq_symbols_are_found_and_readable_in_own_process",
        "/proc/self/maps and /proc/self/mem under qemu-user are the emulator's",
    ) {
        return;
    }
    let process = ProcessSymbols::load(std::process::id(), ObjectCache::global()).unwrap();
    let rseq = find_rseq_symbols(&process);
    let size = rseq.rseq_size.clone().expect("__rseq_size (glibc >= 2.35)");
    let offset = rseq.rseq_offset.clone().expect("__rseq_offset");
    assert!(rseq.rseq_flags.is_some());
    assert_eq!(size.kind, DataKind::Object);
    assert_eq!(size.size, 4);
    assert_eq!(offset.size, 8);
    // glibc defines them in the dynamic loader (libc.so.6 imports them).
    let owner = process
        .objects
        .iter()
        .find(|o| o.mapped.path.to_str() == Some(size.object.as_str()))
        .unwrap();
    assert!(
        owner.mapped.file_name().starts_with("ld-linux"),
        "{}",
        size.object
    );
    let size_addr = size.address.unwrap();
    let offset_addr = offset.address.unwrap();
    assert!(owner.mapped.contains_address(size_addr));
    assert!(owner.mapped.contains_address(offset_addr));
    // Same addresses the linker resolved for us, same values.
    assert_eq!(size_addr, &raw const __rseq_size as usize as u64);
    assert_eq!(offset_addr, &raw const __rseq_offset as usize as u64);
    // SAFETY: the address was checked equal to the linked symbol's just above.
    let read_size = unsafe { std::ptr::read(size_addr as *const u32) };
    // SAFETY: as above, for the offset's address.
    let read_offset = unsafe { std::ptr::read(offset_addr as *const isize) };
    // SAFETY: glibc's exported rseq symbols, written once at start-up.
    assert_eq!(read_size, unsafe { __rseq_size });
    // SAFETY: as the line above.
    assert_eq!(read_offset, unsafe { __rseq_offset });
    assert!(read_size > 0, "glibc registered rseq (size {read_size})");
    assert!(matches!(read_size, 20 | 32), "{read_size}");
    assert_ne!(read_offset, 0);
    assert!(rseq.tcmalloc.is_empty(), "{:?}", rseq.tcmalloc);
}

#[test]
fn own_process_and_plain_sleep_use_glibc() {
    let me = ProcessSymbols::load(std::process::id(), ObjectCache::global()).unwrap();
    let code = TargetCode::from_process(&me);
    assert_eq!(code.allocator.kind, AllocatorKind::Glibc);
    assert!(code.objects[0].is_main && code.objects[0].pie);

    let (_child, process) = sleeper(&[]);
    let code = TargetCode::from_process(&process);
    assert_eq!(code.allocator.kind, AllocatorKind::Glibc);
    let object = code.allocator.object.clone().unwrap();
    assert!(object.ends_with("/libc.so.6"), "{object}");
    assert_eq!(code.allocator.deciding.len(), 1);
    assert_eq!(code.allocator.deciding[0].symbol, "malloc");
    let entries: Vec<_> = code
        .allocator
        .entry_points
        .iter()
        .map(|p| (p.symbol.as_str(), p.role))
        .collect();
    assert_eq!(
        entries,
        [
            ("malloc", Some(EntryRole::Malloc)),
            ("calloc", Some(EntryRole::Calloc)),
            ("realloc", Some(EntryRole::Realloc)),
            ("free", Some(EntryRole::Free)),
        ]
    );
    // The child's libc is the same file as ours: same symbols, same offsets.
    let ours = me.require("libc.so.6").unwrap().resolve("free").unwrap();
    assert_eq!(code.allocator.entry_points[3].file_offset, ours.file_offset);
    let theirs = code.allocator.entry_points[3].address.unwrap();
    let libc = process.require("libc.so.6").unwrap();
    assert!(
        libc.mapped
            .exec_mappings()
            .any(|m| m.contains_address(theirs))
    );
    assert_eq!(process.symbolize(theirs).unwrap().name, "free");
    assert!(!code.wiredtiger.detected.present);
    assert!(code.objects[0].path.ends_with("/sleep") && code.objects[0].is_main);
    let json = serde_json::to_string(&code).unwrap();
    assert!(json.contains(r#""kind":"glibc""#), "{json}");
    let back: TargetCode = serde_json::from_str(&json).unwrap();
    assert_eq!(back, code);
}

#[test]
fn preloaded_gperftools_tcmalloc_is_detected() {
    let so = require_file(TCMALLOC_MINIMAL, "libtcmalloc-minimal4");
    let (_child, process) = sleeper(&[&so]);
    let code = TargetCode::from_process(&process);
    let a = &code.allocator;
    assert_eq!(a.kind, AllocatorKind::Gperftools);
    let object = a.object.as_deref().unwrap();
    assert!(object.contains("libtcmalloc_minimal.so.4"), "{object}");
    let deciding: Vec<_> = a.deciding.iter().map(|e| e.symbol.as_str()).collect();
    assert_eq!(deciding[0], "file:libtcmalloc_minimal.so.4.5.10");
    for s in ["tc_malloc", "tc_free"] {
        assert!(deciding.contains(&s), "{deciding:?}");
    }
    assert!(
        deciding
            .iter()
            .any(|s| s.starts_with("_ZN8tcmalloc11ThreadCache"))
    );
    // tc_malloc and malloc are one function in gperftools: one probe.
    let tc_malloc = a
        .entry_points
        .iter()
        .find(|p| p.symbol == "tc_malloc")
        .unwrap();
    assert!(
        tc_malloc.aliases.contains(&"malloc".to_string()),
        "{tc_malloc:?}"
    );
    assert_eq!(tc_malloc.role, Some(EntryRole::Malloc));
    let tc_free = a
        .entry_points
        .iter()
        .find(|p| p.symbol == "tc_free")
        .unwrap();
    assert!(tc_free.aliases.contains(&"free".to_string()), "{tc_free:?}");
    assert!(a.entry_points.iter().all(|p| p.symbol != "malloc"));
    let offsets: std::collections::HashSet<_> =
        a.entry_points.iter().map(|p| p.file_offset).collect();
    assert_eq!(offsets.len(), a.entry_points.len(), "one probe per address");
    assert!(
        a.entry_points
            .iter()
            .any(|p| p.role == Some(EntryRole::SizedFree))
    );
    // Exported slow paths of gperftools 2.10.
    let labels: Vec<_> = a.slow_paths.iter().map(|m| m.label.as_str()).collect();
    for l in [
        "central_free_list",
        "fetch_from_central_cache",
        "page_heap",
        "spinlock_slow_lock",
    ] {
        assert!(labels.contains(&l), "{l} not in {labels:?}");
    }
    let spin = a
        .slow_paths
        .iter()
        .find(|m| m.label == "spinlock_slow_lock")
        .unwrap();
    assert_eq!(spin.symbols, ["_ZN8SpinLock8SlowLockEv"]);
    // The address is where the child really has tc_malloc.
    let addr = tc_malloc.address.unwrap();
    let s = process.symbolize(addr).unwrap();
    assert!(s.aliases.contains(&"tc_malloc") && s.aliases.contains(&"malloc"));
}

#[test]
fn preloaded_jemalloc_is_detected() {
    let so = require_file(JEMALLOC, "libjemalloc2");
    let (_child, process) = sleeper(&[&so]);
    let code = TargetCode::from_process(&process);
    let a = &code.allocator;
    assert_eq!(a.kind, AllocatorKind::Jemalloc);
    let deciding: Vec<_> = a.deciding.iter().map(|e| e.symbol.as_str()).collect();
    assert_eq!(deciding, ["file:libjemalloc.so.2", "mallctl", "mallocx"]);
    let entries: Vec<_> = a.entry_points.iter().map(|p| p.symbol.as_str()).collect();
    for e in ["mallocx", "sdallocx", "malloc", "free", "_Znwm", "_ZdlPvm"] {
        assert!(entries.contains(&e), "{e} not in {entries:?}");
    }
    assert!(a.object.as_deref().unwrap().ends_with("libjemalloc.so.2"));
}

const FAKE_TCMALLOC: &str = r#"
#include <stddef.h>
extern void *__libc_malloc(size_t);
void *TCMallocInternalMalloc(size_t n) { return __libc_malloc(n); }
void *malloc(size_t n) __attribute__((alias("TCMallocInternalMalloc")));
void central_remove(void) __asm__("_ZN8tcmalloc17tcmalloc_internal15CentralFreeList11RemoveRangeEPPvi");
void central_remove(void) {}
void slow_lock(void) __asm__("_ZN4absl13base_internal8SpinLock8SlowLockEv");
void slow_lock(void) {}
__thread char __rseq_abi[32] __attribute__((aligned(32)));
__thread void *tcmalloc_slabs;
"#;

const FAKE_WIREDTIGER: &str = r#"
const char *wiredtiger_version(int *a, int *b, int *c) { return "WiredTiger 11.3.0"; }
int __wt_txn_checkpoint(void *s, const char **cfg) { return 0; }
int __wt_checkpoint_close(void *s, int final) { return 1; }
int __wt_txn_begin(void *s) { return 2; }
"#;

#[test]
fn google_tcmalloc_wiredtiger_and_tcmalloc_rseq_tls_in_a_child() {
    let dir = tempfile::tempdir().unwrap();
    let tc = cc_shared(dir.path(), "libfake_google_tcmalloc", FAKE_TCMALLOC);
    let wt = cc_shared(dir.path(), "libwiredtiger-11.3.0", FAKE_WIREDTIGER);
    let (_child, process) = sleeper(&[&tc, &wt]);
    let code = TargetCode::from_process(&process);

    let a = &code.allocator;
    assert_eq!(a.kind, AllocatorKind::GoogleTcmalloc);
    assert!(
        a.object
            .as_deref()
            .unwrap()
            .ends_with("libfake_google_tcmalloc.so")
    );
    let deciding: Vec<_> = a.deciding.iter().map(|e| e.symbol.as_str()).collect();
    assert_eq!(
        deciding,
        [
            "TCMallocInternalMalloc",
            "_ZN8tcmalloc17tcmalloc_internal15CentralFreeList11RemoveRangeEPPvi"
        ]
    );
    // malloc is an alias of TCMallocInternalMalloc: one probe, named the latter.
    assert_eq!(a.entry_points.len(), 1, "{:?}", a.entry_points);
    assert_eq!(a.entry_points[0].symbol, "TCMallocInternalMalloc");
    assert_eq!(a.entry_points[0].aliases, ["malloc"]);
    let labels: Vec<_> = a.slow_paths.iter().map(|m| m.label.as_str()).collect();
    assert_eq!(labels, ["central_free_list", "spinlock_slow_lock"]);

    let wt_report = &code.wiredtiger;
    assert!(wt_report.detected.present && wt_report.detected.version_symbol);
    assert_eq!(wt_report.detected.host, Some(WiredTigerHost::SharedLibrary));
    assert_eq!(
        wt_report.detected.checkpoint_functions,
        ["__wt_checkpoint_close", "__wt_txn_checkpoint"]
    );
    assert_eq!(wt_report.checkpoint_probes.len(), 2);
    for p in &wt_report.checkpoint_probes {
        let s = process.symbolize(p.address.unwrap()).unwrap();
        assert_eq!((s.name, s.offset), (p.symbol.as_str(), 0));
    }

    let tls: Vec<_> = code
        .rseq
        .tcmalloc
        .iter()
        .map(|d| (d.name.as_str(), d.kind, d.address))
        .collect();
    assert_eq!(
        tls,
        [
            ("__rseq_abi", DataKind::Tls, None),
            ("tcmalloc_slabs", DataKind::Tls, None)
        ]
    );
    assert_eq!(code.rseq.tcmalloc[0].size, 32);
    assert!(
        code.rseq.rseq_size.is_some(),
        "glibc's, in the child's loader"
    );
}
