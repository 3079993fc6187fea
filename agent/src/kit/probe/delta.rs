//! What every family's reader does with per-thread cumulative counters:
//! take the difference of two snapshots, thread by thread, and forget
//! threads that have exited.

use std::collections::HashMap;

use aya::{
    Pod,
    maps::{HashMap as BpfHashMap, MapData},
};

/// A per-thread counter value of a kernel map: its thread's thread group.
pub trait ThreadValue {
    fn tgid(&self) -> u32;
}

/// Forgets the threads of `last` that no longer exist, in the kernel map
/// `map` and in `last`; returns their tids. Their last counts are in the
/// slice just taken.
pub(crate) fn prune_exited<V: ThreadValue + Pod>(
    map: &mut BpfHashMap<MapData, u32, V>,
    last: &mut HashMap<u32, V>,
) -> Vec<u32> {
    let gone: Vec<u32> = last
        .iter()
        .filter(|(tid, t)| !thread_alive(t.tgid(), **tid))
        .map(|(tid, _)| *tid)
        .collect();
    for tid in &gone {
        let _ = map.remove(tid);
        last.remove(tid);
    }
    gone
}

/// For each thread in `after`, `diff(tid, after, before)` where `before` is
/// the earlier value of the same thread, or `empty` when the thread is new or
/// its tid now belongs to another process (tid reuse). Threads for which
/// `diff` returns `None` (nothing happened) are left out; the result is
/// sorted by tid.
pub fn per_thread<V, S>(
    before: &HashMap<u32, V>,
    after: &HashMap<u32, V>,
    empty: &V,
    tgid: impl Fn(&V) -> u32,
    diff: impl Fn(u32, &V, &V) -> Option<S>,
) -> Vec<(u32, S)> {
    let mut out: Vec<(u32, S)> = after
        .iter()
        .filter_map(|(&tid, a)| {
            let b = before
                .get(&tid)
                .filter(|b| tgid(b) == tgid(a))
                .unwrap_or(empty);
            diff(tid, a, b).map(|s| (tid, s))
        })
        .collect();
    out.sort_by_key(|(tid, _)| *tid);
    out
}

/// Whether thread `tid` of process `tgid` still exists.
pub fn thread_alive(tgid: u32, tid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{tgid}/task/{tid}")).exists()
}

/// The thread group of thread `tid` (`Tgid:` of /proc/TID/status), or
/// `None` once it has exited.
pub fn tgid_of(tid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_threads_group_is_read_from_proc() {
        let me = std::process::id();
        assert_eq!(tgid_of(me), Some(me));
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        assert_eq!(tgid_of(tid), Some(me));
    }

    #[test]
    fn differences_new_threads_and_tid_reuse() {
        let before = HashMap::from([(1, (10u32, 5u64)), (2, (10, 7)), (3, (10, 1))]);
        let after = HashMap::from([(1, (10u32, 9u64)), (2, (10, 7)), (3, (20, 4)), (4, (10, 2))]);
        let d = per_thread(
            &before,
            &after,
            &(0, 0),
            |v| v.0,
            |_, a, b| {
                let n = a.1 - b.1;
                (n > 0).then_some(n)
            },
        );
        // 1: 9-5; 2: unchanged, left out; 3: another process now, from zero; 4: new.
        assert_eq!(d, vec![(1, 4), (3, 4), (4, 2)]);
        assert!(thread_alive(std::process::id(), std::process::id()));
        assert!(!thread_alive(std::process::id(), u32::MAX - 1));
    }
}
