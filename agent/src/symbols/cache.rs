//! In-process cache of parsed objects, keyed by GNU build-id (fallback: the
//! file's dev + inode + mtime), least recently used evicted first.
//!
//! A lookup first tries the file identity (a `stat`, no read); on a miss the
//! file is mapped and its build-id read from the note headers (no symbol
//! walk), so the same binary seen through another path (another container,
//! another pid's `/proc/PID/root`) is found too. Only then is it indexed.
//! Parsing happens outside the lock: two threads may parse the same file once
//! each, the last insert wins. A parsed object includes the symbols of its
//! separate debug file when one is found ([`super::debuginfo`]), looked for
//! once, on the miss: the key stays the object's build-id. When none is on
//! disk, the object has a build-id but no `.symtab`, and the cache has a
//! debuginfod configuration (the global cache: `MDIAG_DEBUGINFOD_URLS`), it is
//! asked of the servers ([`super::debuginfod`]), on that miss too.

use std::fs::File;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

use super::debuginfo::{DEFAULT_DEBUG_DIR, Lookup, find_debug_file, peek_debug_link};
use super::debuginfod::{Debuginfod, DebuginfodConfig, has_symtab};
use super::elf::{ElfObject, map_file, peek_build_id};
use super::error::SymbolError;
use super::maps::MappedObject;

/// Default number of objects kept: more than a process maps. mongod 6.0
/// from a Debian host maps 37 objects (itself and 36 libraries), and every
/// family that reads a process's symbols loads all of them in map order;
/// with fewer slots than that, least-recently-used eviction drops each
/// object just before it is asked for again, and every load parsed every
/// object anew (mongod's `.symtab` took seconds each time and held the
/// record loop: slices of two seconds, serverStatus samples missing).
pub const DEFAULT_CAPACITY: usize = 256;
/// Default bound on what the cached indexes hold on the heap (the files
/// themselves are mapped, not copied, and their pages released after use):
/// 25 bytes a function, so mongod 6.0's 163,000 functions take about
/// 4 MiB, and a whole mongod process (37 objects) under 5 MiB. A quarter of
/// the agent's 64 MiB peak budget; a process whose objects hold more is
/// parsed again as it is read (the newest object is always kept).
pub const DEFAULT_MAX_BYTES: usize = 16 << 20;

/// How a cached object is identified.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CacheKey {
    BuildId(Vec<u8>),
    File {
        dev: u64,
        inode: u64,
        mtime: i64,
        mtime_nsec: i64,
    },
}

/// Counters of a cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that parsed the file.
    pub misses: u64,
    /// Objects currently held.
    pub entries: usize,
}

struct Entry {
    keys: Vec<CacheKey>,
    object: Arc<ElfObject>,
}

/// A bounded LRU cache of parsed objects: at most `capacity` objects and
/// `max_bytes` of index on the heap (the newest object is always kept).
pub struct ObjectCache {
    capacity: usize,
    max_bytes: usize,
    /// Global debug directories searched for separate debug files.
    debug_dirs: Vec<PathBuf>,
    /// debuginfod servers, when configured.
    debuginfod: Option<Arc<Debuginfod>>,
    /// Most recently used last.
    entries: Mutex<Vec<Entry>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl std::fmt::Debug for ObjectCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectCache")
            .field("capacity", &self.capacity)
            .field("stats", &self.stats())
            .finish()
    }
}

static GLOBAL: LazyLock<ObjectCache> = LazyLock::new(|| {
    ObjectCache::with_max_bytes(DEFAULT_CAPACITY, DEFAULT_MAX_BYTES)
        .with_debuginfod(DebuginfodConfig::from_env())
});

impl ObjectCache {
    /// A cache holding at most `capacity` objects (at least 1) and
    /// [`DEFAULT_MAX_BYTES`] of index.
    pub fn new(capacity: usize) -> ObjectCache {
        Self::with_max_bytes(capacity, DEFAULT_MAX_BYTES)
    }

    /// A cache holding at most `capacity` objects (at least 1) and
    /// `max_bytes` of index (the newest object is kept whatever its size).
    pub fn with_max_bytes(capacity: usize, max_bytes: usize) -> ObjectCache {
        ObjectCache {
            max_bytes,
            capacity: capacity.max(1),
            debug_dirs: vec![PathBuf::from(DEFAULT_DEBUG_DIR)],
            debuginfod: None,
            entries: Mutex::new(Vec::new()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// The same cache searching `dirs` (absolute paths, each under the
    /// target's root then the host's) instead of [`DEFAULT_DEBUG_DIR`] for
    /// separate debug files; empty: only next to the object (debug link).
    pub fn with_debug_dirs(mut self, dirs: Vec<PathBuf>) -> ObjectCache {
        self.debug_dirs = dirs;
        self
    }

    /// The same cache asking debuginfod servers for the debug files not
    /// found on disk ([`super::debuginfod`]); `None`: never (the default of
    /// every cache but the global one, which reads `MDIAG_DEBUGINFOD_URLS`).
    pub fn with_debuginfod(mut self, config: Option<DebuginfodConfig>) -> ObjectCache {
        self.debuginfod = config.map(|c| Arc::new(Debuginfod::new(c)));
        self
    }

    /// The process-wide cache ([`DEFAULT_CAPACITY`] objects, [`DEFAULT_MAX_BYTES`],
    /// debuginfod when `MDIAG_DEBUGINFOD_URLS` names servers).
    pub fn global() -> &'static ObjectCache {
        &GLOBAL
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            entries: self.lock().len(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        // A panic while holding the lock leaves the Vec consistent.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Finds `key`, marks it most recently used and adds `alias` to its keys.
    fn get(&self, key: &CacheKey, alias: Option<&CacheKey>) -> Option<Arc<ElfObject>> {
        let mut entries = self.lock();
        let i = entries.iter().position(|e| e.keys.contains(key))?;
        let mut entry = entries.remove(i);
        if let Some(alias) = alias.filter(|a| !entry.keys.contains(a)) {
            entry.keys.push(alias.clone());
        }
        let object = entry.object.clone();
        entries.push(entry);
        Some(object)
    }

    fn insert(&self, keys: Vec<CacheKey>, object: Arc<ElfObject>) {
        let mut entries = self.lock();
        entries.retain(|e| !e.keys.iter().any(|k| keys.contains(k)));
        entries.push(Entry { keys, object });
        let mut bytes: usize = entries.iter().map(|e| e.object.index_bytes()).sum();
        while entries.len() > 1 && (entries.len() > self.capacity || bytes > self.max_bytes) {
            let evicted = entries.remove(0);
            bytes = bytes.saturating_sub(evicted.object.index_bytes());
        }
    }

    /// Releases the file pages that lookups read since the last call in
    /// every cached object ([`ElfObject::release_pages`]).
    pub fn release_pages(&self) {
        for e in self.lock().iter() {
            e.object.release_pages();
        }
    }

    /// The parsed object at `path`, from the cache when already seen.
    pub fn open(&self, path: &Path) -> Result<Arc<ElfObject>, SymbolError> {
        let file = File::open(path).map_err(|source| SymbolError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        self.open_file(path, &file)
    }

    /// The parsed object of an open file (`path` names it in errors, and
    /// its separate debug file is searched for on the host, by this path).
    pub fn open_file(&self, path: &Path, file: &File) -> Result<Arc<ElfObject>, SymbolError> {
        self.open_file_in(path, file, None)
    }

    /// The parsed object of a file `pid` maps, opened at `path` (from
    /// [`open_mapped`]); its separate debug file is searched for under the
    /// process's root, then on the host.
    pub fn open_mapped_file(
        &self,
        pid: u32,
        object: &MappedObject,
        path: &Path,
        file: &File,
    ) -> Result<Arc<ElfObject>, SymbolError> {
        let root = PathBuf::from(format!("/proc/{pid}/root"));
        self.open_file_in(path, file, Some((&object.path, root)))
    }

    /// The parsed object of an open file; `target`: the object's path as
    /// the target sees it and the target's root, when not the host's file.
    fn open_file_in(
        &self,
        path: &Path,
        file: &File,
        target: Option<(&Path, PathBuf)>,
    ) -> Result<Arc<ElfObject>, SymbolError> {
        let meta = file.metadata().map_err(|source| SymbolError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        let file_key = CacheKey::File {
            dev: meta.dev(),
            inode: meta.ino(),
            mtime: meta.mtime(),
            mtime_nsec: meta.mtime_nsec(),
        };
        if let Some(object) = self.get(&file_key, None) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(object);
        }
        let map = map_file(path, file)?;
        let id_key = peek_build_id(&map).map(CacheKey::BuildId);
        if let Some(object) = id_key.as_ref().and_then(|k| self.get(k, Some(&file_key))) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(object);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        let started = std::time::Instant::now();
        let absolute;
        let lookup = match target {
            Some((object, root)) => Lookup {
                object,
                root: Some(root),
                file: (meta.dev(), meta.ino()),
            },
            None => {
                absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
                Lookup {
                    object: &absolute,
                    root: None,
                    file: (meta.dev(), meta.ino()),
                }
            }
        };
        let build_id = match &id_key {
            Some(CacheKey::BuildId(id)) => Some(id.as_slice()),
            _ => None,
        };
        let link = peek_debug_link(&map);
        let debug =
            find_debug_file(&self.debug_dirs, &lookup, build_id, link.as_ref()).or_else(|| {
                let (servers, id) = (self.debuginfod.as_ref()?, build_id?);
                (!has_symtab(&map))
                    .then(|| servers.debug_file(id))
                    .flatten()
            });
        let object = Arc::new(ElfObject::parse_with_debug(path, map, debug)?);
        tracing::debug!(
            path = %path.display(),
            functions = object.counts().functions,
            debug = ?object.debug_file(),
            ms = started.elapsed().as_millis() as u64,
            "symbols: parsed (cache miss)"
        );
        self.insert(
            id_key.into_iter().chain([file_key]).collect(),
            object.clone(),
        );
        Ok(object)
    }

    /// The parsed object mapped by `pid`: opened through `/proc/PID/root`
    /// (containers), or through `/proc/PID/map_files/` when the file was
    /// deleted or the path now names another file (inode changed).
    pub fn load(&self, pid: u32, object: &MappedObject) -> Result<Arc<ElfObject>, SymbolError> {
        let (path, file) = open_mapped(pid, object)?;
        self.open_mapped_file(pid, object, &path, &file)
    }
}

/// Opens the file a process maps; returns the path used.
pub fn open_mapped(pid: u32, object: &MappedObject) -> Result<(PathBuf, File), SymbolError> {
    let mut first_err = None;
    if !object.deleted {
        let path = object.root_path(pid);
        match File::open(&path) {
            Ok(file) if file.metadata().is_ok_and(|m| m.ino() == object.inode) => {
                return Ok((path, file));
            }
            Ok(_) => {}
            Err(source) => first_err = Some(SymbolError::Open { path, source }),
        }
    }
    let Some(path) = object.map_files_path(pid) else {
        return Err(first_err.unwrap_or(SymbolError::Open {
            path: object.path.clone(),
            source: std::io::Error::other("no mapping"),
        }));
    };
    match File::open(&path) {
        Ok(file) => Ok((path, file)),
        Err(source) => Err(first_err.unwrap_or(SymbolError::Open { path, source })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";

    #[test]
    fn second_open_is_a_hit_and_returns_the_same_object() {
        let cache = ObjectCache::new(4);
        let a = cache.open(Path::new(LIBC)).unwrap();
        assert_eq!(
            cache.stats(),
            CacheStats {
                hits: 0,
                misses: 1,
                entries: 1
            }
        );
        let b = cache.open(Path::new(LIBC)).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(
            cache.stats(),
            CacheStats {
                hits: 1,
                misses: 1,
                entries: 1
            }
        );
    }

    #[test]
    fn same_build_id_through_another_file_is_a_hit() {
        let dir = tempfile::tempdir().unwrap();
        let copy = dir.path().join("libc-copy.so.6");
        std::fs::copy(LIBC, &copy).unwrap();
        let cache = ObjectCache::new(4);
        let a = cache.open(Path::new(LIBC)).unwrap();
        let b = cache.open(&copy).unwrap();
        assert!(Arc::ptr_eq(&a, &b), "other inode, same build-id");
        assert_eq!(cache.stats().hits, 1);
        // The copy's file key was added: the third lookup needs no mmap.
        let _ = cache.open(&copy).unwrap();
        assert_eq!(
            cache.stats(),
            CacheStats {
                hits: 2,
                misses: 1,
                entries: 1
            }
        );
    }

    #[test]
    fn the_byte_bound_evicts_but_keeps_the_newest() {
        let cache = ObjectCache::with_max_bytes(64, 1);
        cache.open(Path::new(LIBC)).unwrap();
        let exe = std::env::current_exe().unwrap();
        cache.open(&exe).unwrap();
        // Either object alone is over one byte: only the newest stays.
        assert_eq!(cache.stats().entries, 1);
        cache.open(&exe).unwrap();
        assert_eq!(cache.stats().hits, 1, "the newest was kept");
    }

    #[test]
    fn the_default_cache_holds_a_whole_process() {
        // Every object this test process maps, loaded twice: the second
        // load parses nothing (it did with 16 slots and a 37-object mongod).
        let cache = ObjectCache::with_max_bytes(DEFAULT_CAPACITY, DEFAULT_MAX_BYTES);
        let pid = std::process::id();
        crate::symbols::ProcessSymbols::load(pid, &cache).unwrap();
        let first = cache.stats();
        crate::symbols::ProcessSymbols::load(pid, &cache).unwrap();
        let second = cache.stats();
        assert!(first.misses > 0);
        assert_eq!(second.misses, first.misses, "{first:?} then {second:?}");
    }

    #[test]
    fn least_recently_used_is_evicted() {
        let exe = std::env::current_exe().unwrap();
        let cache = ObjectCache::new(1);
        cache.open(Path::new(LIBC)).unwrap();
        cache.open(&exe).unwrap();
        assert_eq!(cache.stats().entries, 1);
        cache.open(Path::new(LIBC)).unwrap();
        assert_eq!(
            cache.stats(),
            CacheStats {
                hits: 0,
                misses: 3,
                entries: 1
            }
        );
    }

    #[test]
    fn load_through_proc_root_hits_the_cache_the_second_time() {
        let pid = std::process::id();
        let maps = crate::symbols::maps::Maps::of(pid).unwrap();
        let libc = maps.by_file_name("libc.so.6").unwrap();
        let (path, _) = open_mapped(pid, libc).unwrap();
        assert!(path.starts_with(format!("/proc/{pid}/root")), "{path:?}");
        let cache = ObjectCache::new(4);
        let a = cache.load(pid, libc).unwrap();
        let b = cache.load(pid, libc).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(
            cache.stats(),
            CacheStats {
                hits: 1,
                misses: 1,
                entries: 1
            }
        );
        // A "deleted" object is read through map_files, same bytes, same entry.
        let deleted = MappedObject {
            deleted: true,
            ..libc.clone()
        };
        let (path, _) = open_mapped(pid, &deleted).unwrap();
        assert!(
            path.starts_with(format!("/proc/{pid}/map_files")),
            "{path:?}"
        );
        let c = cache.load(pid, &deleted).unwrap();
        assert!(Arc::ptr_eq(&a, &c));
        assert_eq!(cache.stats().hits, 2);
    }
}
