//! The `stacks` fact group: what the target's call stacks say, for the
//! rules that name code (who calls the allocator, where connection threads
//! wait during checkpoints, how much CPU goes to WiredTiger's data-handle
//! lookup).
//!
//! From the recording's profiles (`Recording::cpu_profile`, `offcpu_profile`,
//! summed from every slice). Absent, with the reason, when the recording
//! has neither (host-wide, the families not attached, or an older file).
//!
//! Names are the demangled ones of the profile. What counts as allocator
//! code here is by name, as the frames carry no allocator classification:
//! the entry points and namespaces of the four allocators (the same list as
//! the perf family's attribution, demangled).

use std::collections::HashMap;

use crate::kit::fact::{FactGroup, FactValue};
use crate::recording::Recording;
use crate::stacks::{Frame, Profile, table::Wait};

/// Why the group is absent.
pub const NO_STACKS: &str = "the recording holds no call stacks (host-wide, the perf and contention \
                             families not attached, or written by an mdiag without stacks)";

/// Prefixes of allocator functions, demangled.
const ALLOCATOR: [&str; 22] = [
    "malloc",
    "free",
    "calloc",
    "realloc",
    "cfree",
    "memalign",
    "posix_memalign",
    "aligned_alloc",
    "operator new",
    "operator delete",
    "tc_",
    "tcmalloc::",
    "TCMalloc",
    "MallocExtension",
    "je_",
    "__libc_malloc",
    "__libc_free",
    "__libc_calloc",
    "__libc_realloc",
    "_int_",
    "sysmalloc",
    "tcache_",
];

/// WiredTiger's data-handle lookup and locking: where the million-collection
/// study found the time going.
const DHANDLE: [&str; 3] = [
    "__wt_session_get_dhandle",
    "__wt_conn_dhandle_",
    "__wt_session_lock_dhandle",
];

/// Frames named in a code path.
const PATH_FRAMES: usize = 3;

fn is_allocator(f: &Frame) -> bool {
    !f.kernel()
        && ALLOCATOR.iter().any(|p| f.function.starts_with(p))
        // gperftools' internal helpers in an anonymous namespace.
        || f.function.starts_with("(anonymous namespace)::do_")
            && f.object != crate::stacks::KERNEL_OBJECT
}

/// mongod's own code or WiredTiger's.
fn is_server_code(f: &Frame) -> bool {
    f.function.starts_with("mongo::") || f.function.starts_with("__wt_")
}

pub fn stacks_facts(rec: &Recording) -> Result<FactGroup, String> {
    if rec.cpu_profile.is_none() && rec.offcpu_profile.is_none() {
        return Err(NO_STACKS.to_owned());
    }
    let mut g = FactGroup::new();
    if let Some(p) = &rec.cpu_profile {
        on_cpu(p, &mut g);
    }
    if let Some(p) = &rec.offcpu_profile {
        off_cpu(p, &mut g);
    }
    Ok(g)
}

fn on_cpu(p: &Profile, g: &mut FactGroup) {
    let total = p.total();
    g.insert("cpu_samples".into(), FactValue::Int(total as i64));
    let dhandle: u64 = p
        .stacks
        .iter()
        .filter(|s| {
            s.frames
                .iter()
                .any(|f| DHANDLE.iter().any(|d| f.function.starts_with(d)))
        })
        .map(|s| s.value)
        .sum();
    g.insert(
        "dhandle_cpu_share".into(),
        FactValue::Float(share(dhandle, total)),
    );
    let (alloc, callers) = allocator_callers(p);
    g.insert("allocator_samples".into(), FactValue::Int(alloc as i64));
    if let Some((caller, n)) = top(callers) {
        g.insert("allocator_top_caller".into(), FactValue::Text(caller));
        g.insert(
            "allocator_top_caller_share".into(),
            FactValue::Float(share(n, alloc)),
        );
    }
}

/// Samples whose leaf user frame is allocator code, and by the first
/// frame below the allocator's own (its caller).
fn allocator_callers(p: &Profile) -> (u64, HashMap<String, u64>) {
    let mut total = 0;
    let mut by: HashMap<String, u64> = HashMap::new();
    for s in &p.stacks {
        let user: Vec<&Frame> = s.frames.iter().filter(|f| !f.kernel()).collect();
        if !user.last().is_some_and(|f| is_allocator(f)) {
            continue;
        }
        total += s.value;
        let caller = user.iter().rev().find(|f| !is_allocator(f));
        let name = caller.map_or("(the allocator's own thread)", |f| f.function.as_str());
        *by.entry(name.to_owned()).or_default() += s.value;
    }
    (total, by)
}

fn off_cpu(p: &Profile, g: &mut FactGroup) {
    // Connection threads asleep (futex, reads) while a checkpoint ran.
    let mut total = 0;
    let mut by: HashMap<String, u64> = HashMap::new();
    for s in p.of_class(crate::threads::CONN) {
        if s.in_checkpoint != Some(true) || s.frames.first() != Some(&Wait::Sleep.frame()) {
            continue;
        }
        total += s.value;
        *by.entry(code_path(&s.frames)).or_default() += s.value;
    }
    g.insert(
        "conn_sleep_inside_ms".into(),
        FactValue::Float(total as f64 / 1e6),
    );
    if let Some((path, n)) = top(by) {
        g.insert("conn_wait_path_inside".into(), FactValue::Text(path));
        g.insert(
            "conn_wait_path_inside_share".into(),
            FactValue::Float(share(n, total)),
        );
    }
}

/// The server code nearest the leaf, leaf first: `a ← b ← c`; else the
/// leaf-most user frame.
fn code_path(frames: &[Frame]) -> String {
    let server: Vec<&str> = frames
        .iter()
        .rev()
        .filter(|f| is_server_code(f))
        .take(PATH_FRAMES)
        .map(|f| f.function.as_str())
        .collect();
    if !server.is_empty() {
        return server.join(" ← ");
    }
    frames
        .iter()
        .rev()
        .find(|f| !f.kernel() && f.object != "[wait]")
        .map_or_else(|| "(no user frame)".to_owned(), |f| f.function.clone())
}

fn top(by: HashMap<String, u64>) -> Option<(String, u64)> {
    by.into_iter()
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
}

fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::{ProfileKind, ProfileStack};

    use crate::stacks::test_profile as profile;

    fn stack(
        class: &str,
        frames: &[(&str, &str)],
        value: u64,
        inside: Option<bool>,
    ) -> ProfileStack {
        ProfileStack {
            in_checkpoint: inside,
            ..crate::stacks::test_stack(class, frames, false, value)
        }
    }

    #[test]
    fn the_allocators_caller_and_the_dhandle_share_come_from_the_stacks() {
        let p = profile(
            ProfileKind::OnCpu,
            vec![
                stack(
                    "conn",
                    &[
                        ("mongo::Insert", "mongod"),
                        ("operator new", "mongod"),
                        ("tcmalloc::ThreadCache::Alloc", "mongod"),
                    ],
                    30,
                    None,
                ),
                stack(
                    "conn",
                    &[
                        ("mongo::Find", "mongod"),
                        ("tc_malloc", "mongod"),
                        ("page_fault", "[kernel]"),
                    ],
                    10,
                    None,
                ),
                stack(
                    "conn",
                    &[
                        ("mongo::Find", "mongod"),
                        ("__wt_session_get_dhandle", "mongod"),
                    ],
                    60,
                    None,
                ),
            ],
        );
        let mut g = FactGroup::new();
        on_cpu(&p, &mut g);
        assert_eq!(g["cpu_samples"], FactValue::Int(100));
        assert_eq!(g["dhandle_cpu_share"], FactValue::Float(0.6));
        assert_eq!(
            g["allocator_samples"],
            FactValue::Int(40),
            "kernel frames under malloc count"
        );
        assert_eq!(
            g["allocator_top_caller"],
            FactValue::Text("mongo::Insert".into())
        );
        assert_eq!(g["allocator_top_caller_share"], FactValue::Float(0.75));
    }

    #[test]
    fn connection_waits_inside_checkpoints_are_named_by_their_server_code() {
        let sleep = Wait::Sleep.frame();
        fn frames<'a>(sleep: &'a str, f: &'a str) -> Vec<(&'a str, &'a str)> {
            vec![
                (sleep, "[wait]"),
                ("start_thread", "libc.so.6"),
                ("mongo::ServiceStateMachine::run", "mongod"),
                (f, "mongod"),
                ("__wt_cond_wait_signal", "mongod"),
                ("futex_wait", "[kernel]"),
            ]
        }
        let w = sleep.function.as_str();
        let p = profile(
            ProfileKind::OffCpu,
            vec![
                stack("conn", &frames(w, "__wt_txn_begin"), 70_000_000, Some(true)),
                stack("conn", &frames(w, "mongo::Lock"), 30_000_000, Some(true)),
                stack("conn", &frames(w, "mongo::Lock"), 500_000_000, Some(false)),
                stack(
                    "checkpointer",
                    &frames(w, "__wt_checkpoint"),
                    900_000_000,
                    Some(true),
                ),
            ],
        );
        let mut g = FactGroup::new();
        off_cpu(&p, &mut g);
        assert_eq!(g["conn_sleep_inside_ms"], FactValue::Float(100.0));
        assert_eq!(
            g["conn_wait_path_inside"],
            FactValue::Text(
                "__wt_cond_wait_signal ← __wt_txn_begin ← mongo::ServiceStateMachine::run".into()
            )
        );
        assert_eq!(g["conn_wait_path_inside_share"], FactValue::Float(0.7));
    }

    #[test]
    fn no_profiles_no_group() {
        let mut rec = crate::rules::facts::example_recording();
        assert!(stacks_facts(&rec).is_ok());
        rec.cpu_profile = None;
        assert!(stacks_facts(&rec).is_ok(), "off-CPU stacks alone");
        rec.offcpu_profile = None;
        assert_eq!(stacks_facts(&rec), Err(NO_STACKS.to_owned()));
    }
}
