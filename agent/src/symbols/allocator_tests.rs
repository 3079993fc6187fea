//! Unit tests of `allocator.rs` (a child module of it, kept in its own file
//! so that the code under test stays short).

use super::*;

fn libc() -> ObjectNames<'static> {
    ObjectNames::new(
        "/lib/x86_64-linux-gnu/libc.so.6",
        false,
        [
            "malloc",
            "__libc_malloc",
            "free",
            "calloc",
            "realloc",
            "_int_malloc",
            "printf",
        ],
    )
}

#[test]
fn google_tcmalloc_statically_linked_in_main() {
    let main = ObjectNames::new(
        "/usr/bin/mongod",
        true,
        [
            "malloc",
            "free",
            "_Znwm",
            "_ZdlPvm",
            "TCMallocInternalMalloc",
            "TCMallocInternalFree",
            "TCMallocInternalDeleteSized",
            "_ZN8tcmalloc17tcmalloc_internal15CentralFreeList11RemoveRangeEN4absl4SpanIPvEE",
            "_ZN8tcmalloc17tcmalloc_internal17TransferCacheManager14InsertRangeSlowEi",
            "_ZN4absl13base_internal8SpinLock8SlowLockEv",
            "_ZN8tcmalloc17tcmalloc_internal8cpu_cache8CpuCacheINS0_11StaticForwardEE6RefillEim",
            "__wt_txn_checkpoint",
            "_ZN5mongo7Command3runEv",
        ],
    );
    let report = classify_allocator(&[main, libc()]);
    assert_eq!(report.kind, AllocatorKind::GoogleTcmalloc);
    assert_eq!(report.object.as_deref(), Some("/usr/bin/mongod"));
    let deciding: Vec<_> = report.deciding.iter().map(|e| e.symbol.as_str()).collect();
    assert!(deciding.contains(&"TCMallocInternalMalloc"), "{deciding:?}");
    assert!(
        deciding
            .iter()
            .any(|s| s.starts_with("_ZN8tcmalloc17tcmalloc_internal"))
    );
    assert!(
        !deciding.contains(&"malloc"),
        "malloc alone decides nothing here"
    );
    let entries: Vec<_> = report
        .entry_points
        .iter()
        .map(|e| (e.symbol.as_str(), e.role))
        .collect();
    assert_eq!(
        entries,
        [
            ("TCMallocInternalMalloc", EntryRole::Malloc),
            ("TCMallocInternalFree", EntryRole::Free),
            ("TCMallocInternalDeleteSized", EntryRole::SizedDelete),
            ("malloc", EntryRole::Malloc),
            ("free", EntryRole::Free),
            ("_Znwm", EntryRole::New),
            ("_ZdlPvm", EntryRole::SizedDelete),
        ]
    );
    let labels: Vec<_> = report.slow_paths.iter().map(|m| m.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "central_free_list",
            "transfer_cache",
            "cpu_cache_refill",
            "spinlock_slow_lock"
        ]
    );
    assert_eq!(report.slow_paths[0].total, 1);
    assert!(report.also_seen.is_empty());
}

#[test]
fn google_tcmalloc_as_a_rust_global_allocator_beats_glibc() {
    // tcmalloc-better: TCMalloc linked into the program without its libc
    // overrides; the program's allocations go to TCMalloc, libc's own
    // to glibc's malloc.
    let main = ObjectNames::new(
        "/opt/mdiag-tcmalloc",
        true,
        [
            "main",
            "__rust_alloc",
            "BridgeTCMallocInternalNewAlignedNothrow",
            "TCMallocInternalDeleteSizedAligned",
            "MallocExtension_Internal_GetNumericProperty",
            "_ZN8tcmalloc17tcmalloc_internal15CentralFreeList11RemoveRangeEN4absl4SpanIPvEE",
            // As an optimised build names them (central free list and
            // transfer cache inlined).
            "_ZN8tcmalloc17tcmalloc_internalL38alloc_small_sampled_hooks_or_perthreadINS0_14TCMallocPolicyEEET_m",
            "_ZN8tcmalloc17tcmalloc_internalL24FreeWithHooksOrPerThreadEPvm",
            "_ZN8tcmalloc17tcmalloc_internalL16slow_alloc_smallINS0_14TCMallocPolicyEEEPvmjT_",
            "_ZN8tcmalloc17tcmalloc_internalL13FreeSmallSlowEPvm",
        ],
    );
    let report = classify_allocator(&[main.clone(), libc()]);
    assert_eq!(report.kind, AllocatorKind::GoogleTcmalloc);
    assert_eq!(report.object.as_deref(), Some("/opt/mdiag-tcmalloc"));
    assert_eq!(
        report.also_seen,
        [(
            AllocatorKind::Glibc,
            Evidence {
                object: "/lib/x86_64-linux-gnu/libc.so.6".into(),
                symbol: "malloc".into()
            }
        )]
    );
    let labels: Vec<_> = report.slow_paths.iter().map(|m| m.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "central_free_list",
            "slow_alloc",
            "free_small_slow",
            "alloc_outside_per_cpu_cache",
            "free_outside_per_cpu_cache"
        ]
    );
    let entries: Vec<_> = report
        .entry_points
        .iter()
        .map(|e| (e.symbol.as_str(), e.role))
        .collect();
    assert_eq!(
        entries,
        [
            ("TCMallocInternalDeleteSizedAligned", EntryRole::SizedDelete),
            ("BridgeTCMallocInternalNewAlignedNothrow", EntryRole::New),
        ]
    );
    // The same code in a shared object that does not define malloc is a
    // private copy: glibc still serves the process.
    let lib = ObjectNames {
        path: "/usr/lib/libprivate.so",
        is_main: false,
        ..main
    };
    let plain = ObjectNames::new("/usr/bin/app", true, ["main"]);
    let report = classify_allocator(&[plain, lib, libc()]);
    assert_eq!(report.kind, AllocatorKind::Glibc);
    assert_eq!(report.also_seen[0].0, AllocatorKind::GoogleTcmalloc);
}

#[test]
fn demangled_google_names_are_recognised() {
    let main = ObjectNames::new(
        "/opt/app",
        true,
        [
            "malloc",
            "tcmalloc::tcmalloc_internal::CentralFreeList::RemoveRange(void**, int)",
        ],
    );
    let report = classify_allocator(&[main]);
    assert_eq!(report.kind, AllocatorKind::GoogleTcmalloc);
    assert_eq!(report.slow_paths.len(), 1);
    assert_eq!(report.slow_paths[0].label, "central_free_list");
}

#[test]
fn gperftools_in_main_and_thread_cache_needs_no_tcmalloc_internal() {
    let main = ObjectNames::new(
        "/usr/bin/mongod-7.0",
        true,
        [
            "malloc",
            "tc_malloc",
            "tc_free",
            "_ZN8tcmalloc11ThreadCache21FetchFromCentralCacheEjiPFPvmE",
            "_ZN8tcmalloc15CentralFreeList11RemoveRangeEPPvS2_i",
            "_ZN8SpinLock8SlowLockEv",
        ],
    );
    let report = classify_allocator(&[main, libc()]);
    assert_eq!(report.kind, AllocatorKind::Gperftools);
    let deciding: Vec<_> = report.deciding.iter().map(|e| e.symbol.as_str()).collect();
    assert_eq!(
        deciding,
        [
            "tc_free",
            "tc_malloc",
            "_ZN8tcmalloc11ThreadCache21FetchFromCentralCacheEjiPFPvmE",
        ]
    );
    let labels: Vec<_> = report.slow_paths.iter().map(|m| m.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "central_free_list",
            "fetch_from_central_cache",
            "spinlock_slow_lock"
        ]
    );
    // Same ThreadCache symbol next to tcmalloc_internal ones: Google's.
    let google = ObjectNames::new(
        "/x",
        true,
        [
            "malloc",
            "_ZN8tcmalloc11ThreadCache4InitEv",
            "TCMallocInternalMalloc",
        ],
    );
    assert_eq!(
        classify_allocator(&[google]).kind,
        AllocatorKind::GoogleTcmalloc
    );
}

#[test]
fn glibc_when_only_libc_defines_malloc() {
    let main = ObjectNames::new("/usr/bin/sleep", true, ["main", "usage"]);
    let report = classify_allocator(&[main, libc()]);
    assert_eq!(report.kind, AllocatorKind::Glibc);
    assert_eq!(
        report.object.as_deref(),
        Some("/lib/x86_64-linux-gnu/libc.so.6")
    );
    assert_eq!(report.deciding[0].symbol, "malloc");
    let entries: Vec<_> = report
        .entry_points
        .iter()
        .map(|e| e.symbol.as_str())
        .collect();
    assert_eq!(entries, ["malloc", "calloc", "realloc", "free"]);
    assert_eq!(report.slow_paths.len(), 1);
    assert_eq!(report.slow_paths[0].symbols, ["_int_malloc"]);
}

#[test]
fn jemalloc_by_file_name_and_symbols_and_bundled_copies_do_not_decide() {
    let je = ObjectNames::new(
        "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
        false,
        ["malloc", "free", "mallocx", "sdallocx", "mallctl"],
    );
    // A library that bundles tcmalloc code but does not export malloc.
    let bundled = ObjectNames::new("/usr/lib/libbundle.so", false, ["tc_malloc", "foo"]);
    let main = ObjectNames::new("/usr/bin/app", true, ["main"]);
    let report = classify_allocator(&[main, bundled, libc(), je]);
    assert_eq!(report.kind, AllocatorKind::Jemalloc);
    let deciding: Vec<_> = report.deciding.iter().map(|e| e.symbol.as_str()).collect();
    assert_eq!(deciding, ["file:libjemalloc.so.2", "mallctl", "mallocx"]);
    assert_eq!(
        report.also_seen,
        [(
            AllocatorKind::Gperftools,
            Evidence {
                object: "/usr/lib/libbundle.so".into(),
                symbol: "tc_malloc".into()
            }
        )]
    );
    let roles: Vec<_> = report
        .entry_points
        .iter()
        .map(|e| (e.symbol.as_str(), e.role))
        .collect();
    assert!(
        roles.contains(&("sdallocx", EntryRole::SizedFree)),
        "{roles:?}"
    );
}

#[test]
fn unknown_allocator_and_no_malloc_at_all() {
    let mi = ObjectNames::new(
        "/usr/lib/libmimalloc.so.2",
        false,
        ["malloc", "free", "mi_malloc"],
    );
    let main = ObjectNames::new("/usr/bin/app", true, ["main"]);
    let report = classify_allocator(&[main.clone(), mi, libc()]);
    assert_eq!(report.kind, AllocatorKind::Unknown);
    assert_eq!(report.object.as_deref(), Some("/usr/lib/libmimalloc.so.2"));
    assert_eq!(report.entry_points.len(), 2);
    let none = classify_allocator(&[main]);
    assert_eq!((none.kind, none.object), (AllocatorKind::Unknown, None));
}
