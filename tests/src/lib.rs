//! Helpers for the root integration suite (`root/`): locating binaries,
//! running mdiag, and reading kernel ground truth from /proc.

use std::{
    path::PathBuf,
    process::{Command, Output},
};

/// The mdiag binary under test: `MDIAG_BIN` (set by `cargo xtask test`), or
/// the debug build in the workspace's target directory.
pub fn mdiag_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("MDIAG_BIN") {
        return PathBuf::from(p);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let p = root.join("target/debug/mdiag");
    assert!(
        p.exists(),
        "mdiag binary not found at {}: run `cargo build -p mdiag` or `cargo xtask test`",
        p.display()
    );
    p
}

/// Fails loudly (never skips) when not root: these tests must run in CI.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "the root integration suite loads BPF and must run as root: use `cargo xtask test`"
    );
}

/// `ctxt` from /proc/stat.
pub fn proc_stat_ctxt() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").expect("read /proc/stat");
    stat.lines()
        .find_map(|l| l.strip_prefix("ctxt "))
        .and_then(|v| v.trim().parse().ok())
        .expect("ctxt line in /proc/stat")
}

/// Per-thread (tid, voluntary, nonvoluntary) from /proc/PID/task/*/status.
pub fn thread_switches(pid: u32) -> Vec<(u32, u64, u64)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(tid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(status) = std::fs::read_to_string(e.path().join("status")) else {
            continue;
        };
        let get = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        out.push((
            tid,
            get("voluntary_ctxt_switches:"),
            get("nonvoluntary_ctxt_switches:"),
        ));
    }
    out.sort_unstable();
    out
}

/// Runs mdiag with `args`, returning its output (never panics on failure).
pub fn run_mdiag(args: &[&str]) -> Output {
    Command::new(mdiag_bin())
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run mdiag")
}

/// |a - b| / max(a, b), 0 when both are 0.
pub fn rel_diff(a: u64, b: u64) -> f64 {
    let m = a.max(b);
    if m == 0 {
        0.0
    } else {
        a.abs_diff(b) as f64 / m as f64
    }
}

/// Serialises the tests of this suite: each measures the whole host, so two
/// at once would disturb each other's ground truth (and probe counts). Also
/// across processes (two checkouts testing at once on one machine): an
/// exclusive `flock` on a file in /tmp, released when the guard drops.
pub fn serial() -> Serial {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = LOCK
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/tmp/mdiag-root-tests.lock")
        .expect("open /tmp/mdiag-root-tests.lock");
    // SAFETY: flock on a file descriptor we own; blocks until it is ours.
    let rc = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&file), libc::LOCK_EX) };
    assert_eq!(
        rc,
        0,
        "flock /tmp/mdiag-root-tests.lock: {}",
        std::io::Error::last_os_error()
    );
    Serial {
        _file: file,
        _guard: guard,
    }
}

/// Held while a root test runs (see [`serial`]); the file lock goes with the file.
pub struct Serial {
    _file: std::fs::File,
    _guard: std::sync::MutexGuard<'static, ()>,
}

/// The Python venv with SecantusDB made by `cargo xtask setup`:
/// `MDIAG_PY_VENV` (set by `cargo xtask test`), else `target/py-venv`.
pub fn py_venv() -> PathBuf {
    let p = std::env::var_os("MDIAG_PY_VENV").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/py-venv"),
        PathBuf::from,
    );
    assert!(
        p.join("bin/secantusd-py").exists(),
        "no SecantusDB venv at {}: run `cargo xtask setup`",
        p.display()
    );
    p
}

/// /proc/softirqs as (vector name → per-CPU counts).
pub fn proc_softirqs() -> std::collections::BTreeMap<String, Vec<u64>> {
    let text = std::fs::read_to_string("/proc/softirqs").expect("read /proc/softirqs");
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let (name, counts) = l.split_once(':')?;
            let counts = counts
                .split_whitespace()
                .filter_map(|c| c.parse().ok())
                .collect();
            Some((name.trim().to_owned(), counts))
        })
        .collect()
}

/// Per-thread `se.nr_migrations` from /proc/PID/task/*/sched.
pub fn thread_migrations(pid: u32) -> std::collections::BTreeMap<u32, u64> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(tid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(sched) = std::fs::read_to_string(e.path().join("sched")) else {
            continue;
        };
        let n = sched
            .lines()
            .find_map(|l| l.strip_prefix("se.nr_migrations"))
            .and_then(|v| v.trim().trim_start_matches(':').trim().parse().ok())
            .unwrap_or(0);
        out.insert(tid, n);
    }
    out
}
