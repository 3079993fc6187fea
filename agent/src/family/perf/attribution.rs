//! Perf family: what one sampled address of the target is (object, symbol,
//! kernel mode), and whether it is allocator code or an allocator slow path.
//!
//! What counts as allocator code ([`AllocatorCode::is_allocator`]): only code
//! in the object that [`classify_allocator`] found serving `malloc`, and there
//! - Google TCMalloc / gperftools: the C++ namespace `tcmalloc` (mangled
//!   `_Z…8tcmalloc…`, or demangled `tcmalloc::`), names containing `TCMalloc`
//!   (`TCMallocInternal*`, `TCMalloc_*`, a Rust global allocator type
//!   `TCMalloc`), `MallocExtension_Internal*`, gperftools' `tc_*` entry
//!   points; for gperftools in its own `libtcmalloc*.so`, the whole object.
//!   Not any name that merely contains `tcmalloc`: a program's own code may
//!   (a Rust crate called `my_tcmalloc_app` puts it in every symbol);
//! - jemalloc: `je_*` and names containing `jemalloc`; in `libjemalloc*.so`,
//!   the whole object;
//! - glibc: the malloc family by name (`malloc`, `free`, `calloc`, `realloc`,
//!   `memalign`, ..., their `__libc_*` aliases, `_int_*`, `malloc_*`,
//!   `tcache_*`, `arena_*`, `sysmalloc`); glibc's libc.so.6 is usually
//!   stripped of its static functions (`_int_malloc`, `_int_free`), so an
//!   address no symbol covers counts too when the next named function above
//!   it is a malloc-family one (malloc.c is one translation unit, and C
//!   compilers emit static helpers before the exported functions calling
//!   them: the gaps just below `malloc`, `free`, ... hold `_int_malloc`,
//!   `_int_free`, `sysmalloc`, `malloc_consolidate`);
//! - every kind: the entry points the symbols module probes (`malloc`,
//!   `free`, `operator new/delete`, ...) and every slow-path match.
//!
//! Slow paths are the patterns of [`slow_path_patterns`] for the allocator's
//! kind, matched against the sampled function's name and aliases; which
//! matched is recorded per label. Samples taken in kernel mode (page faults
//! or syscalls under `malloc` included) are never allocator samples.
//!
//!
//! Kept apart from the reader (`mod.rs`): these are the rules, the reader
//! only drains and sums.

use std::{collections::HashMap, path::PathBuf, time::Instant};

use mdiag_common::perf::KERNEL_IP;

use crate::symbols::{
    AllocatorKind, ProcessSymbols,
    allocator::{SlowPathPattern, entry_candidates, slow_path_patterns},
};

/// Functions (or, outside every function, addresses) whose attribution is
/// remembered (the hot ones come back slice after slice; a full memo is
/// emptied).
const REMEMBERED: usize = 2048;

/// What an attribution is remembered by: the function(s) an address is in
/// ([`ProcessSymbols::function_key`]), else the address itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum MemoKey {
    Function(usize, usize, u64),
    Address(u64),
}

/// A target's symbols with its allocator's code rule.
pub(super) struct TargetSymbols {
    pub(super) process: ProcessSymbols,
    pub(super) alloc: AllocatorCode,
    pub(super) loaded_at: Instant,
    /// What [`classify`] said of each function seen, while these symbols last.
    memo: HashMap<MemoKey, Attribution>,
}

impl TargetSymbols {
    pub(super) fn new(process: ProcessSymbols) -> Self {
        let alloc = AllocatorCode::of(&process);
        Self {
            process,
            alloc,
            loaded_at: Instant::now(),
            memo: HashMap::new(),
        }
    }

    /// [`classify`] of `ip`, remembered per function: a sampled function is
    /// symbolized (its names read and matched) once, not at every address
    /// and in every slice that samples it.
    pub(super) fn classify_remembered(&mut self, ip: u64) -> Attribution {
        let key = match self.process.function_key(ip) {
            _ if ip == KERNEL_IP => MemoKey::Address(ip),
            Some((object, group, mask)) => MemoKey::Function(object, group, mask),
            None => MemoKey::Address(ip),
        };
        if let Some(a) = self.memo.get(&key) {
            return a.clone();
        }
        let a = classify(Some(self), ip);
        if self.memo.len() >= REMEMBERED {
            self.memo.clear();
        }
        self.memo.insert(key, a.clone());
        a
    }

    /// Whether `process` maps the very objects these symbols are of, at
    /// the same addresses ([`ProcessSymbols::same_objects`]).
    pub(super) fn same_objects(&self, process: &ProcessSymbols) -> bool {
        self.process.same_objects(process)
    }
}

/// Where the allocator's code is (see the module documentation).
#[derive(Debug, Clone)]
pub struct AllocatorCode {
    pub kind: AllocatorKind,
    /// The object serving `malloc`.
    pub object: Option<PathBuf>,
    /// The whole object is allocator code (`libtcmalloc*.so`, `libjemalloc*.so`).
    pub whole_object: bool,
    /// Runtime address ranges without symbols that lie between two allocator
    /// functions of `object` (glibc's static malloc.c helpers).
    pub unnamed_ranges: Vec<(u64, u64)>,
    entry_names: Vec<&'static str>,
    patterns: &'static [SlowPathPattern],
}

/// glibc's malloc family (exported names and the usual static ones, for a
/// libc with a full symbol table).
const GLIBC_NAMES: &[&str] = &[
    "malloc",
    "free",
    "cfree",
    "calloc",
    "realloc",
    "reallocarray",
    "memalign",
    "aligned_alloc",
    "valloc",
    "pvalloc",
    "posix_memalign",
    "free_sized",
    "free_aligned_sized",
    "mallopt",
    "mallinfo",
    "mallinfo2",
    "sysmalloc",
    "systrim",
    "mtrim",
    "unlink_chunk",
    "ptmalloc_init",
    "__default_morecore",
    "__posix_memalign",
    "__libc_malloc",
    "__libc_free",
    "__libc_calloc",
    "__libc_realloc",
    "__libc_memalign",
    "__libc_valloc",
    "__libc_pvalloc",
    "__libc_mallinfo",
    "__libc_mallopt",
];
const GLIBC_PREFIXES: &[&str] = &[
    "__malloc",
    "_int_",
    "_mid_memalign",
    "malloc_",
    "tcache_",
    "arena_",
];

impl AllocatorCode {
    /// The rule for a process's allocator, as the symbols module finds it.
    pub fn of(process: &ProcessSymbols) -> Self {
        let detected = crate::symbols::detected::detect(process);
        let report = &detected.allocator;
        let kind = report.kind;
        let object = report.object.as_ref().map(PathBuf::from);
        let file_name = object
            .as_ref()
            .and_then(|p| p.file_name())
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let whole_object = match kind {
            AllocatorKind::Gperftools => file_name.starts_with("libtcmalloc"),
            AllocatorKind::Jemalloc => file_name.starts_with("libjemalloc"),
            _ => false,
        };
        let mut code = AllocatorCode {
            kind,
            object,
            whole_object,
            unnamed_ranges: Vec::new(),
            entry_names: entry_candidates(kind).into_iter().map(|(n, _)| n).collect(),
            patterns: slow_path_patterns(kind),
        };
        if let Some(o) = process
            .objects
            .iter()
            .find(|o| Some(&o.mapped.path) == code.object.as_ref())
        {
            code.unnamed_ranges = code.unnamed_between(o);
        }
        code
    }

    /// Gaps without symbols just below an allocator function, as runtime
    /// address ranges: in C, static helpers are defined (and emitted) before
    /// the exported functions that call them, in the same translation unit.
    fn unnamed_between(&self, o: &crate::symbols::LoadedObject) -> Vec<(u64, u64)> {
        // Which functions are the allocator's: every name read once, in the
        // order they are stored (the walk that keeps the fewest pages).
        let mut alloc = vec![false; o.elf.extents().len()];
        for (i, f) in o.elf.functions_in_file_order() {
            alloc[i] = self.is_allocator_name(f.name);
        }
        // Functions sorted by address, grouped by address (aliases).
        let mut groups: Vec<(u64, u64, bool)> = Vec::new();
        for ((value, size), alloc) in o.elf.extents().zip(alloc) {
            match groups.last_mut() {
                Some(g) if g.0 == value => {
                    g.1 = g.1.max(value + size);
                    g.2 |= alloc;
                }
                _ => groups.push((value, value + size, alloc)),
            }
        }
        let mut out = Vec::new();
        for w in groups.windows(2) {
            let (prev, next) = (w[0], w[1]);
            if next.2 && prev.1 < next.0 {
                let lo = o.runtime_address(prev.1);
                let hi = o.runtime_address(next.0);
                if let (Some(lo), Some(hi)) = (lo, hi)
                    && lo < hi
                {
                    out.push((lo, hi));
                }
            }
        }
        out
    }

    /// Whether a function of the allocator's object is allocator code.
    pub fn is_allocator_name(&self, name: &str) -> bool {
        // Versioned names as some tables spell them ("malloc@@GLIBC_2.2.5").
        let name = name.split('@').next().unwrap_or(name);
        if self.entry_names.contains(&name) || self.slow_path(name).is_some() {
            return true;
        }
        match self.kind {
            AllocatorKind::GoogleTcmalloc => is_tcmalloc_name(name),
            AllocatorKind::Gperftools => is_tcmalloc_name(name) || name.starts_with("tc_"),
            AllocatorKind::Jemalloc => name.starts_with("je_") || name.contains("jemalloc"),
            AllocatorKind::Glibc => {
                GLIBC_NAMES.contains(&name) || GLIBC_PREFIXES.iter().any(|p| name.starts_with(p))
            }
            AllocatorKind::Unknown => false,
        }
    }

    /// The label of the first slow-path pattern `name` matches.
    pub fn slow_path(&self, name: &str) -> Option<&'static str> {
        self.patterns
            .iter()
            .find(|p| p.all_of.iter().all(|s| name.contains(s)))
            .map(|p| p.label)
    }
}

/// TCMalloc's own code by name (both TCMalloc families): the C++ namespace
/// `tcmalloc` — in a mangled name the identifier is length-prefixed
/// (`8tcmalloc`), so `mdiag_tcmalloc` (`14mdiag_tcmalloc`) does not match —,
/// its C entry points and extension API, and Rust wrappers' `TCMalloc` type.
fn is_tcmalloc_name(name: &str) -> bool {
    (name.starts_with("_Z") && name.contains("8tcmalloc"))
        || name.contains("tcmalloc::")
        || name.contains("TCMalloc")
        || name.starts_with("MallocExtension_Internal")
}

/// What one sampled address is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Attribution {
    /// Object path; `None` for kernel mode or an address no object maps.
    pub object: Option<String>,
    /// Function name; `None` when no symbol covers the address.
    pub symbol: Option<String>,
    pub kernel: bool,
    pub allocator: bool,
    pub slow_path: Option<&'static str>,
}

pub(super) fn classify(code: Option<&TargetSymbols>, ip: u64) -> Attribution {
    if ip == KERNEL_IP {
        return Attribution {
            kernel: true,
            ..Attribution::default()
        };
    }
    let Some(t) = code else {
        return Attribution::default();
    };
    let in_alloc_object = |path: &std::path::Path| t.alloc.object.as_deref() == Some(path);
    if let Some(s) = t.process.symbolize(ip) {
        let in_object = in_alloc_object(s.object);
        let slow_path = if in_object {
            s.aliases
                .iter()
                .chain(std::iter::once(&s.name))
                .find_map(|n| t.alloc.slow_path(n))
        } else {
            None
        };
        let allocator = in_object
            && (t.alloc.whole_object
                || slow_path.is_some()
                || s.aliases
                    .iter()
                    .chain(std::iter::once(&s.name))
                    .any(|n| t.alloc.is_allocator_name(n)));
        return Attribution {
            object: Some(s.object.to_string_lossy().into_owned()),
            symbol: Some(s.name.to_owned()),
            kernel: false,
            allocator,
            slow_path,
        };
    }
    let object = t
        .process
        .objects
        .iter()
        .find(|o| o.mapped.contains_address(ip));
    let allocator = object.is_some_and(|o| {
        in_alloc_object(&o.mapped.path)
            && (t.alloc.whole_object
                || t.alloc
                    .unnamed_ranges
                    .iter()
                    .any(|&(lo, hi)| (lo..hi).contains(&ip)))
    });
    Attribution {
        object: object.map(|o| o.mapped.path.to_string_lossy().into_owned()),
        symbol: None,
        kernel: false,
        allocator,
        slow_path: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbols::ObjectCache;

    fn code(kind: AllocatorKind) -> AllocatorCode {
        AllocatorCode {
            kind,
            object: Some("/lib/libc.so.6".into()),
            whole_object: false,
            unnamed_ranges: Vec::new(),
            entry_names: entry_candidates(kind).into_iter().map(|(n, _)| n).collect(),
            patterns: slow_path_patterns(kind),
        }
    }

    #[test]
    fn allocator_names_per_kind() {
        let g = code(AllocatorKind::Glibc);
        for n in [
            "malloc",
            "__libc_malloc",
            "free",
            "cfree",
            "_int_malloc",
            "malloc_consolidate",
            "tcache_init",
            "malloc@@GLIBC_2.2.5",
        ] {
            assert!(g.is_allocator_name(n), "{n}");
        }
        for n in ["freeaddrinfo", "memcpy", "__libc_freeres", "strdup"] {
            assert!(!g.is_allocator_name(n), "{n}");
        }
        assert_eq!(g.slow_path("_int_free"), Some("int_free"));
        assert_eq!(g.slow_path("malloc"), None);
        let t = code(AllocatorKind::GoogleTcmalloc);
        assert!(t.is_allocator_name("TCMallocInternalMalloc"));
        assert!(t.is_allocator_name(
            "_ZN8tcmalloc17tcmalloc_internal15CentralFreeList11RemoveRangeEN4absl4SpanIPvEE"
        ));
        assert!(t.is_allocator_name("_Znwm"));
        assert!(!t.is_allocator_name("_ZN5mongo7Command3runEv"));
        for n in [
            "_ZNK8tcmalloc17tcmalloc_internal13PageAllocator5statsEv",
            "tcmalloc::tcmalloc_internal::PageAllocator::stats() const",
            "BridgeTCMallocInternalNewAlignedNothrow",
            "MallocExtension_Internal_GetNumericProperty",
            "_RNvXCs1_15tcmalloc_betterNtB2_8TCMallocNtNtNtCs2_4core5alloc6global11GlobalAlloc5alloc",
        ] {
            assert!(t.is_allocator_name(n), "{n}");
        }
        // A program whose crate name contains "tcmalloc" (the test workload).
        for n in [
            "_RNvCs5bvJ98but8m_14mdiag_tcmalloc5churn",
            "_RNvMs3_NtCscHgRw1M2fX5_5alloc7raw_vecNtB5_11RawVecInner10deallocateCs5bvJ98but8m_14mdiag_tcmalloc",
            "_ZN14mdiag_tcmalloc5churn17h0123456789abcdefE",
        ] {
            assert!(!t.is_allocator_name(n), "{n}");
        }
        assert_eq!(
            t.slow_path("_ZN4absl13base_internal8SpinLock8SlowLockEv"),
            Some("spinlock_slow_lock")
        );
        let j = code(AllocatorKind::Jemalloc);
        assert!(j.is_allocator_name("je_arena_malloc_hard"));
        assert_eq!(
            j.slow_path("je_arena_malloc_hard"),
            Some("arena_malloc_hard")
        );
        let u = code(AllocatorKind::Unknown);
        assert!(u.is_allocator_name("malloc") && !u.is_allocator_name("mi_malloc"));
    }

    #[test]
    fn glibc_rule_on_this_process() {
        let process = ProcessSymbols::load(std::process::id(), ObjectCache::global()).unwrap();
        let mut t = TargetSymbols::new(process);
        assert_eq!(t.alloc.kind, AllocatorKind::Glibc);
        assert!(!t.alloc.whole_object);
        // Stripped libc: malloc.c's static helpers are found between symbols.
        assert!(!t.alloc.unnamed_ranges.is_empty(), "{:?}", t.alloc);
        let addr = |name: &str| t.process.find(name).and_then(|s| s.address).unwrap();
        for name in ["malloc", "free", "calloc"] {
            let a = classify(Some(&t), addr(name) + 1);
            assert!(a.allocator && !a.kernel, "{name}: {a:?}");
            assert!(a.object.unwrap().contains("libc"));
        }
        let a = classify(Some(&t), addr("qsort") + 1);
        assert!(!a.allocator, "{a:?}");
        assert_eq!(a.symbol.as_deref(), Some("qsort"));
        assert!(classify(Some(&t), KERNEL_IP).kernel);
        assert_eq!(classify(Some(&t), 8), Attribution::default());
        // Remembered per function: the same answers at every address of
        // libc's text, and no more than REMEMBERED of them.
        let malloc = addr("malloc");
        let libc = t.process.object("libc.so.6").unwrap();
        let text = *libc.mapped.mappings.iter().find(|m| m.perms.exec).unwrap();
        for ip in (text.start..text.end).step_by(97).take(3 * REMEMBERED) {
            assert_eq!(t.classify_remembered(ip), classify(Some(&t), ip), "{ip:#x}");
            assert_eq!(t.classify_remembered(ip), classify(Some(&t), ip), "{ip:#x}");
            assert!(t.memo.len() <= REMEMBERED);
        }
        t.classify_remembered(malloc);
        let before = t.memo.len();
        assert_eq!(
            t.classify_remembered(malloc + 2),
            classify(Some(&t), malloc + 2)
        );
        assert_eq!(t.memo.len(), before, "one entry for all of malloc");
    }
}
