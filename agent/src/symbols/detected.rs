//! What the detectors say of a process's objects, computed once per set of
//! objects.
//!
//! The allocator and WiredTiger detectors read every function name of every
//! object: mongod 6.0's executable alone has 163,000, and the slow-path
//! patterns test each name for substrings. Three users ask for the same
//! answer about the same process (the record's target code, the allocator
//! family's entry points, the perf family's attribution), and the perf family
//! asks again whenever it reloads the process's symbols. So the answer is
//! kept for the last few sets of objects, keyed by each object's identity
//! (path, build-id or size, main or not): the same objects give the same
//! answer, a new library mapped gives a new key.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::allocator::{AllocatorReport, classify_allocator};
use super::names::ObjectNames;
use super::process::ProcessSymbols;
use super::wiredtiger::{WiredTigerReport, detect_wiredtiger};

/// Sets of objects whose answers are kept (a host rarely has more distinct
/// mongod builds than this under one agent).
const KEPT: usize = 8;

/// The detectors' answers for one set of objects.
#[derive(Debug)]
pub struct Detected {
    pub allocator: AllocatorReport,
    pub wiredtiger: WiredTigerReport,
}

#[derive(Debug, PartialEq, Eq)]
struct ObjectKey {
    path: PathBuf,
    build_id: Option<Vec<u8>>,
    size: u64,
    is_main: bool,
}

type Memo = Vec<(Vec<ObjectKey>, Arc<Detected>)>;

static MEMO: Mutex<Memo> = Mutex::new(Vec::new());

/// The detectors' answers for `process`, from the memo when its objects
/// were seen before.
pub fn detect(process: &ProcessSymbols) -> Arc<Detected> {
    let key: Vec<ObjectKey> = process
        .objects
        .iter()
        .map(|o| ObjectKey {
            path: o.mapped.path.clone(),
            build_id: o.elf.build_id().map(<[u8]>::to_vec),
            size: o.elf.size(),
            is_main: o.mapped.is_main,
        })
        .collect();
    let lock = || MEMO.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, found)) = lock().iter().find(|(k, _)| *k == key) {
        return Arc::clone(found);
    }
    // Computed outside the lock: two threads may compute it once each.
    let names = ObjectNames::of_process(process);
    let found = Arc::new(Detected {
        allocator: classify_allocator(&names),
        wiredtiger: detect_wiredtiger(&names),
    });
    drop(names);
    process.release_pages();
    let mut memo = lock();
    memo.retain(|(k, _)| *k != key);
    memo.push((key, Arc::clone(&found)));
    if memo.len() > KEPT {
        memo.remove(0);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_objects_give_the_same_answer_once() {
        let cache = crate::symbols::ObjectCache::new(256);
        let pid = std::process::id();
        let a = detect(&ProcessSymbols::load(pid, &cache).unwrap());
        let b = detect(&ProcessSymbols::load(pid, &cache).unwrap());
        assert!(Arc::ptr_eq(&a, &b), "the second answer came from the memo");
        // And it is the detectors' own answer.
        let process = ProcessSymbols::load(pid, &cache).unwrap();
        let names = ObjectNames::of_process(&process);
        assert_eq!(a.allocator, classify_allocator(&names));
    }
}
