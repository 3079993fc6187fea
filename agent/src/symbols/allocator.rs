//! Which allocator serves the target's `malloc`, told by its symbols, with the
//! symbols that decided it, the entry points to probe for latency and the
//! allocator's slow-path functions.
//!
//! Matching works on mangled names by substring (no demangler): a C++ name
//! `tcmalloc::tcmalloc_internal::CentralFreeList::RemoveRange` is mangled
//! `_ZN8tcmalloc17tcmalloc_internal15CentralFreeList11RemoveRangeE...`, which
//! contains both the mangled prefix and the plain identifiers, so the patterns
//! below also match demangled names (`tcmalloc::tcmalloc_internal::`).
//!
//! Decision: objects are searched main executable first, then shared objects
//! in address order, glibc's libc last. An object decides only if it defines
//! `malloc` itself (it interposes the process's malloc); allocator code found
//! in an object that does not (a library bundling a private allocator) is
//! listed in `also_seen`. Within one object Google TCMalloc evidence beats
//! gperftools' (both use the `tcmalloc` namespace). With no deciding object,
//! a `malloc` defined by libc means glibc; otherwise unknown.
//!
//! One exception: a main executable that links an allocator statically
//! without defining `malloc` (a Rust program whose `#[global_allocator]` is
//! Google TCMalloc, e.g. the `tcmalloc-better` crate, which builds TCMalloc
//! without its libc overrides) decides too, over glibc: the program's own
//! allocations go there, and only libc's internal ones reach glibc's
//! `malloc` (then listed in `also_seen`). A shared object bundling an
//! allocator without `malloc` still does not decide (a private allocator).

use serde::{Deserialize, Serialize};

use super::names::ObjectNames;

/// The allocator behind `malloc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AllocatorKind {
    /// github.com/google/tcmalloc (MongoDB 8.0+, per-CPU caches over rseq).
    GoogleTcmalloc,
    /// gperftools' tcmalloc (MongoDB up to 7.0, thread caches).
    Gperftools,
    Jemalloc,
    /// glibc's ptmalloc (libc.so.6).
    Glibc,
    Unknown,
}

/// A symbol (or file name) that counted as evidence.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// Object path.
    pub object: String,
    /// The matched symbol, or `file:<name>` for a file-name match.
    pub symbol: String,
}

/// What an entry point does (tells a probe how to read its arguments).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryRole {
    Malloc,
    Calloc,
    Realloc,
    Free,
    /// free with the size as second argument (`free_sized`, `sdallocx`, ...).
    SizedFree,
    /// operator new / new[].
    New,
    /// operator delete / delete[].
    Delete,
    /// sized operator delete (`_ZdlPvm`).
    SizedDelete,
}

/// An entry point named in the deciding object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryPoint {
    pub object: String,
    pub symbol: String,
    pub role: EntryRole,
}

/// Functions of one slow-path pattern found in the deciding object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlowPathMatch {
    /// What the pattern stands for, e.g. `central_free_list`.
    pub label: String,
    /// The pattern: substrings that must all occur, joined by `&`.
    pub pattern: String,
    pub object: String,
    /// Up to [`MAX_SLOW_PATH_SYMBOLS`] matching symbols, sorted.
    pub symbols: Vec<String>,
    /// How many symbols matched in all.
    pub total: usize,
}

/// Symbols kept per slow-path pattern.
pub const MAX_SLOW_PATH_SYMBOLS: usize = 32;
/// Evidence symbols kept per family and object.
const MAX_EVIDENCE: usize = 8;

/// The classifier's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatorReport {
    pub kind: AllocatorKind,
    /// The object holding the allocator (None when unknown and no malloc).
    pub object: Option<String>,
    /// The symbols that decided `kind`.
    pub deciding: Vec<Evidence>,
    /// Latency entry points present in `object`, in [`entry_candidates`] order
    /// (several names may be aliases of one address: resolve and dedupe).
    pub entry_points: Vec<EntryPoint>,
    /// Slow-path patterns that matched in `object`.
    pub slow_paths: Vec<SlowPathMatch>,
    /// Other allocator code seen in objects that do not define `malloc`.
    pub also_seen: Vec<(AllocatorKind, Evidence)>,
}

/// A slow-path pattern: every substring of `all_of` must occur in a name.
#[derive(Debug, Clone, Copy)]
pub struct SlowPathPattern {
    pub label: &'static str,
    pub all_of: &'static [&'static str],
}

const fn p(label: &'static str, all_of: &'static [&'static str]) -> SlowPathPattern {
    SlowPathPattern { label, all_of }
}

const GOOGLE_SLOW: &[SlowPathPattern] = &[
    p(
        "central_free_list",
        &["tcmalloc_internal", "CentralFreeList"],
    ),
    p("transfer_cache", &["tcmalloc_internal", "TransferCache"]),
    p("page_heap", &["tcmalloc_internal", "PageHeap"]),
    p("page_allocator", &["tcmalloc_internal", "PageAllocator"]),
    p(
        "huge_page_aware_allocator",
        &["tcmalloc_internal", "HugePageAwareAllocator"],
    ),
    p(
        "cpu_cache_refill",
        &["tcmalloc_internal", "CpuCache", "Refill"],
    ),
    p(
        "cpu_cache_overflow",
        &["tcmalloc_internal", "CpuCache", "Overflow"],
    ),
    p("system_alloc", &["tcmalloc_internal", "SystemAlloc"]),
    // absl::base_internal::SpinLock::SlowLock (TCMalloc's locks).
    p("spinlock_slow_lock", &["SpinLock", "SlowLock"]),
    // In an optimised build the calls into the central free list and the
    // transfer cache are inlined into these: every allocation or free that
    // the per-CPU cache did not serve (no per-CPU cache, e.g. rseq taken by
    // glibc; a sampled allocation; hooks) runs in them.
    p("slow_alloc", &["tcmalloc_internal", "slow_alloc"]),
    p("free_small_slow", &["tcmalloc_internal", "FreeSmallSlow"]),
    p(
        "alloc_outside_per_cpu_cache",
        &["tcmalloc_internal", "_or_perthread"],
    ),
    p(
        "free_outside_per_cpu_cache",
        &["tcmalloc_internal", "OrPerThread"],
    ),
];

const GPERFTOOLS_SLOW: &[SlowPathPattern] = &[
    p("central_free_list", &["_ZN8tcmalloc15CentralFreeList"]),
    p(
        "fetch_from_central_cache",
        &["ThreadCache", "FetchFromCentralCache"],
    ),
    p(
        "release_to_central_cache",
        &["ThreadCache", "ReleaseToCentralCache"],
    ),
    p(
        "thread_cache_list_too_long",
        &["ThreadCache", "ListTooLong"],
    ),
    p("thread_cache_scavenge", &["ThreadCache", "Scavenge"]),
    p("page_heap", &["_ZN8tcmalloc8PageHeap"]),
    p("spinlock_slow_lock", &["SpinLock", "SlowLock"]),
    p("system_alloc", &["TCMalloc_SystemAlloc"]),
];

const JEMALLOC_SLOW: &[SlowPathPattern] = &[
    p("arena_malloc_hard", &["arena_malloc_hard"]),
    p("tcache_alloc_small_hard", &["tcache_alloc_small_hard"]),
    p("tcache_bin_flush", &["tcache_bin_flush"]),
    p("large_alloc", &["large_malloc"]),
    p("large_alloc", &["large_palloc"]),
    p("extent_alloc", &["extent_alloc"]),
    p("mutex_lock_slow", &["malloc_mutex_lock_slow"]),
    p("decay", &["arena_decay"]),
];

const GLIBC_SLOW: &[SlowPathPattern] = &[
    p("int_malloc", &["_int_malloc"]),
    p("int_free", &["_int_free"]),
    p("int_realloc", &["_int_realloc"]),
    p("int_memalign", &["_int_memalign"]),
    p("malloc_consolidate", &["malloc_consolidate"]),
    p("sysmalloc", &["sysmalloc"]),
    p("arena_get", &["arena_get2"]),
    p("malloc_trim", &["mtrim"]),
];

/// The slow-path patterns searched for an allocator.
pub fn slow_path_patterns(kind: AllocatorKind) -> &'static [SlowPathPattern] {
    match kind {
        AllocatorKind::GoogleTcmalloc => GOOGLE_SLOW,
        AllocatorKind::Gperftools => GPERFTOOLS_SLOW,
        AllocatorKind::Jemalloc => JEMALLOC_SLOW,
        AllocatorKind::Glibc => GLIBC_SLOW,
        AllocatorKind::Unknown => &[],
    }
}

use EntryRole as R;

const STD_ENTRIES: &[(&str, EntryRole)] = &[
    ("malloc", R::Malloc),
    ("calloc", R::Calloc),
    ("realloc", R::Realloc),
    ("free", R::Free),
    ("free_sized", R::SizedFree),
];

const CXX_ENTRIES: &[(&str, EntryRole)] = &[
    ("_Znwm", R::New),
    ("_Znam", R::New),
    ("_ZdlPv", R::Delete),
    ("_ZdaPv", R::Delete),
    ("_ZdlPvm", R::SizedDelete),
    ("_ZdaPvm", R::SizedDelete),
];

const GOOGLE_ENTRIES: &[(&str, EntryRole)] = &[
    ("TCMallocInternalMalloc", R::Malloc),
    ("TCMallocInternalCalloc", R::Calloc),
    ("TCMallocInternalRealloc", R::Realloc),
    ("TCMallocInternalFree", R::Free),
    ("TCMallocInternalFreeSized", R::SizedFree),
    ("TCMallocInternalNew", R::New),
    ("TCMallocInternalNewArray", R::New),
    ("TCMallocInternalDelete", R::Delete),
    ("TCMallocInternalDeleteArray", R::Delete),
    ("TCMallocInternalDeleteSized", R::SizedDelete),
    ("TCMallocInternalDeleteArraySized", R::SizedDelete),
    // Aligned forms, and the entry points of a Rust global allocator over
    // TCMalloc (crate tcmalloc-better): new(size, align), delete(ptr, size,
    // align). Listed last: a probe reading (size) or (ptr, size) reads them
    // right.
    ("TCMallocInternalDeleteSizedAligned", R::SizedDelete),
    ("BridgeTCMallocInternalNewAlignedNothrow", R::New),
];

const GPERFTOOLS_ENTRIES: &[(&str, EntryRole)] = &[
    ("tc_malloc", R::Malloc),
    ("tc_calloc", R::Calloc),
    ("tc_realloc", R::Realloc),
    ("tc_free", R::Free),
    ("tc_free_sized", R::SizedFree),
    ("tc_new", R::New),
    ("tc_newarray", R::New),
    ("tc_delete", R::Delete),
    ("tc_deletearray", R::Delete),
    ("tc_delete_sized", R::SizedDelete),
    ("tc_deletearray_sized", R::SizedDelete),
];

const JEMALLOC_ENTRIES: &[(&str, EntryRole)] = &[
    ("je_malloc", R::Malloc),
    ("je_calloc", R::Calloc),
    ("je_realloc", R::Realloc),
    ("je_free", R::Free),
    ("je_sdallocx", R::SizedFree),
    ("mallocx", R::Malloc),
    ("sdallocx", R::SizedFree),
];

/// Entry points looked for, allocator-specific names first, then the
/// standard C and C++ ones (glibc: the C ones only; its operator new lives in
/// libstdc++ and calls malloc).
pub fn entry_candidates(kind: AllocatorKind) -> Vec<(&'static str, EntryRole)> {
    let specific: &[_] = match kind {
        AllocatorKind::GoogleTcmalloc => GOOGLE_ENTRIES,
        AllocatorKind::Gperftools => GPERFTOOLS_ENTRIES,
        AllocatorKind::Jemalloc => JEMALLOC_ENTRIES,
        AllocatorKind::Glibc | AllocatorKind::Unknown => &[],
    };
    let cxx: &[_] = if kind == AllocatorKind::Glibc {
        &[]
    } else {
        CXX_ENTRIES
    };
    specific
        .iter()
        .chain(STD_ENTRIES)
        .chain(cxx)
        .copied()
        .collect()
}

/// Exact names that identify a family (ranked before pattern matches).
fn is_named_evidence(name: &str) -> bool {
    matches!(
        name,
        "TCMallocInternalMalloc"
            | "TCMallocInternalFree"
            | "MallocExtension_Internal_GetNumericProperty"
            | "tc_malloc"
            | "tc_free"
            | "tc_new"
            | "tc_delete"
            | "je_malloc"
            | "je_mallocx"
            | "je_mallctl"
            | "mallocx"
            | "mallctl"
    )
}

/// Evidence of each family in one object, strongest family first.
fn evidence(o: &ObjectNames<'_>) -> Vec<(AllocatorKind, Vec<String>)> {
    let mut google = Vec::new();
    let mut gperf = Vec::new();
    let mut gperf_thread_cache = Vec::new();
    let mut jemalloc = Vec::new();
    for name in o.names() {
        if name.starts_with("_ZN8tcmalloc17tcmalloc_internal")
            || name.contains("tcmalloc::tcmalloc_internal::")
            || name.starts_with("TCMallocInternal")
            || name == "MallocExtension_Internal_GetNumericProperty"
        {
            google.push(name);
        } else if matches!(name, "tc_malloc" | "tc_free" | "tc_new" | "tc_delete") {
            gperf.push(name);
        } else if name.starts_with("_ZN8tcmalloc11ThreadCache")
            || name.starts_with("tcmalloc::ThreadCache::")
        {
            gperf_thread_cache.push(name);
        } else if matches!(
            name,
            "je_malloc" | "je_mallocx" | "je_mallctl" | "mallocx" | "mallctl"
        ) {
            jemalloc.push(name);
        }
    }
    let file = o.file_name();
    let mut found = Vec::new();
    // Named entry points first (they say the most), then pattern matches.
    let keep = |mut v: Vec<&str>| {
        v.sort_unstable_by_key(|n| (!is_named_evidence(n), *n));
        v.dedup();
        v.truncate(MAX_EVIDENCE);
        v.into_iter().map(String::from).collect::<Vec<_>>()
    };
    if !google.is_empty() {
        found.push((AllocatorKind::GoogleTcmalloc, keep(google)));
    } else {
        // gperftools' ThreadCache counts only without tcmalloc_internal.
        gperf.extend(gperf_thread_cache);
        let mut v = keep(gperf);
        if file.starts_with("libtcmalloc") && file.contains(".so") {
            v.insert(0, format!("file:{file}"));
        }
        if !v.is_empty() {
            found.push((AllocatorKind::Gperftools, v));
        }
    }
    let mut v = keep(jemalloc);
    if file.starts_with("libjemalloc") && file.contains(".so") {
        v.insert(0, format!("file:{file}"));
    }
    if !v.is_empty() {
        found.push((AllocatorKind::Jemalloc, v));
    }
    found
}

/// Classifies the allocator from objects given main executable first.
pub fn classify_allocator(objects: &[ObjectNames<'_>]) -> AllocatorReport {
    let order = objects
        .iter()
        .filter(|o| !o.is_libc())
        .chain(objects.iter().filter(|o| o.is_libc()));
    let mut decided: Option<(AllocatorKind, &ObjectNames<'_>, Vec<String>)> = None;
    let mut also_seen = Vec::new();
    for o in order {
        let defines_malloc = o.has("malloc");
        let mut families = evidence(o).into_iter();
        if decided.is_none() && defines_malloc {
            if let Some((kind, symbols)) = families.next() {
                decided = Some((kind, o, symbols));
            } else if !o.is_libc() {
                decided = Some((AllocatorKind::Unknown, o, vec!["malloc".to_string()]));
            } else {
                decided = Some((AllocatorKind::Glibc, o, vec!["malloc".to_string()]));
            }
        }
        for (kind, symbols) in families {
            if let Some(symbol) = symbols.into_iter().next() {
                let symbol = symbol.to_string();
                also_seen.push((
                    kind,
                    Evidence {
                        object: o.path.to_string(),
                        symbol,
                    },
                ));
            }
        }
    }
    // A main executable with allocator code of its own but no `malloc`
    // beats glibc (see the module documentation).
    if decided
        .as_ref()
        .is_none_or(|(kind, _, _)| *kind == AllocatorKind::Glibc)
        && let Some(main) = objects.iter().find(|o| o.is_main && !o.has("malloc"))
        && let Some((kind, symbols)) = evidence(main).into_iter().next()
    {
        also_seen.retain(|(_, e)| e.object != main.path);
        if let Some((glibc, libc, _)) = decided.take() {
            also_seen.push((
                glibc,
                Evidence {
                    object: libc.path.to_string(),
                    symbol: "malloc".to_string(),
                },
            ));
        }
        decided = Some((kind, main, symbols));
    }
    let Some((kind, object, symbols)) = decided else {
        return AllocatorReport {
            kind: AllocatorKind::Unknown,
            object: None,
            deciding: Vec::new(),
            entry_points: Vec::new(),
            slow_paths: Vec::new(),
            also_seen,
        };
    };
    let deciding = symbols
        .into_iter()
        .map(|symbol| Evidence {
            object: object.path.to_string(),
            symbol,
        })
        .collect();
    let entry_points = entry_candidates(kind)
        .into_iter()
        .filter(|(name, _)| object.has(name))
        .map(|(name, role)| EntryPoint {
            object: object.path.to_string(),
            symbol: name.to_string(),
            role,
        })
        .collect();
    AllocatorReport {
        kind,
        object: Some(object.path.to_string()),
        deciding,
        entry_points,
        slow_paths: match_slow_paths(object, slow_path_patterns(kind)),
        also_seen,
    }
}

/// Matches slow-path patterns against one object's names.
pub fn match_slow_paths(o: &ObjectNames<'_>, patterns: &[SlowPathPattern]) -> Vec<SlowPathMatch> {
    let mut out = Vec::new();
    for pat in patterns {
        let mut hits: Vec<&str> = o
            .names()
            .filter(|n| pat.all_of.iter().all(|s| n.contains(s)))
            .collect();
        if hits.is_empty() {
            continue;
        }
        hits.sort_unstable();
        hits.dedup();
        let total = hits.len();
        hits.truncate(MAX_SLOW_PATH_SYMBOLS);
        out.push(SlowPathMatch {
            label: pat.label.to_string(),
            pattern: pat.all_of.join("&"),
            object: o.path.to_string(),
            symbols: hits.into_iter().map(String::from).collect(),
            total,
        });
    }
    out
}

#[cfg(test)]
#[path = "allocator_tests.rs"]
mod tests;
