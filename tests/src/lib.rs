//! Helpers for the root integration suite (`root/`): locating binaries,
//! running mdiag, and reading kernel ground truth from /proc.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "the root tests' harness: a helper that cannot do its job fails the test that called it, with its message"
)]

pub mod agent;
pub mod browser;
pub mod dashboards;
pub mod mongod;
pub mod prometheus;
pub mod secantus;

use std::{
    io::{BufRead, BufReader},
    path::PathBuf,
    process::{Child, ChildStdout, Command, Output, Stdio},
    time::{Duration, Instant},
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

/// Spawns a workload that prints `ready` on stdout once it is set up (its
/// threads exist and wait), and returns when it has: the synchronisation is
/// the workload's own word, never a sleep. The rest of its stdout (its JSON
/// report) is read from the returned reader.
pub fn spawn_ready(cmd: &mut Command) -> (Child, BufReader<ChildStdout>) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
    let mut out = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut line = String::new();
    let ready = loop {
        line.clear();
        match out.read_line(&mut line) {
            Ok(0) => break Err("it ended".to_owned()),
            Ok(_) if line.trim() == "ready" => break Ok(()),
            Ok(_) => {}
            Err(e) => break Err(format!("reading its stdout: {e}")),
        }
    };
    if let Err(why) = ready {
        let _ = child.kill();
        let status = child.wait();
        panic!("{cmd:?} never printed `ready`: {why} ({status:?})");
    }
    (child, out)
}

/// A loopback port nobody listens on now (the kernel's choice for port 0).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
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

/// Time the hypervisor took CPU `cpu` away from this VM (the `steal`
/// column of its `cpuN` line in /proc/stat), in ns; 0 on bare metal. A
/// task on that CPU is not charged for it, so a floor on a task's CPU
/// time must allow for it.
pub fn cpu_steal_ns(cpu: u32) -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").expect("read /proc/stat");
    let name = format!("cpu{cpu}");
    let ticks: u64 = stat
        .lines()
        .find_map(|l| {
            let mut f = l.split_whitespace();
            (f.next() == Some(name.as_str())).then(|| f.nth(7))?
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no steal column for {name} in /proc/stat"));
    // SAFETY: sysconf reads a constant of the C library; no memory is passed.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = u64::try_from(hz).ok().filter(|&h| h > 0).unwrap_or(100);
    ticks * (1_000_000_000 / hz)
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

/// Starts `mdiag record ARGS` and returns once it says the probes are
/// attached (the recording's clock has started by then), with a thread
/// draining its standard error.
pub fn start_record(args: &[&str]) -> (Child, std::thread::JoinHandle<String>) {
    start_record_until(args, &["probes attached"])
}

/// [`start_record`], returning once mdiag's log has shown every one of
/// `lines` (in any order), e.g. "mongod answers serverStatus": the
/// recording's own word that it is where the test needs it, never a sleep.
pub fn start_record_until(
    args: &[&str],
    lines: &[&str],
) -> (Child, std::thread::JoinHandle<String>) {
    // No colours, and no server from the caller's environment: a test that
    // polls mongod names it with --uri.
    let mut child = Command::new(mdiag_bin())
        .arg("record")
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("MDIAG_MONGODB_URI")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mdiag record");
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr piped"));
    let mut seen = String::new();
    let mut waiting: Vec<&str> = lines.to_vec();
    // Attaching takes seconds on a loaded host; a minute or two is a hang.
    let deadline = Instant::now() + Duration::from_secs(120);
    while !waiting.is_empty() {
        let mut line = String::new();
        let n = stderr.read_line(&mut line).expect("read mdiag's stderr");
        seen.push_str(&line);
        if n == 0 {
            let _ = child.wait();
            panic!("mdiag exited before logging {waiting:?}: {seen}");
        }
        waiting.retain(|w| !line.contains(w));
        assert!(
            Instant::now() < deadline,
            "mdiag never logged {waiting:?}: {seen}"
        );
    }
    // Keep draining stderr so mdiag never blocks on a full pipe.
    let rest = std::thread::spawn(move || {
        let mut s = seen;
        let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
        s
    });
    (child, rest)
}

/// Waits for a `start_record` child: (status, stdout, stderr).
pub fn finish(
    child: Child,
    stderr: std::thread::JoinHandle<String>,
) -> (std::process::ExitStatus, String, String) {
    let out = child.wait_with_output().expect("wait for mdiag");
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr.join().expect("stderr reader"),
    )
}

/// `/proc/PID/task/TID/schedstat`: (ns on a CPU, ns waiting in a run
/// queue, runs on a CPU), the scheduler's own accounting of the thread.
pub fn schedstat(pid: u32, tid: u32) -> (u64, u64, u64) {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat"))
        .unwrap_or_else(|e| panic!("read schedstat of {pid}/{tid}: {e}"));
    let v: Vec<u64> = text
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    assert_eq!(v.len(), 3, "schedstat: {text}");
    (v[0], v[1], v[2])
}

/// The state letter of `/proc/PID/task/TID/stat` (`R`, `S`, `D`, ...).
pub fn thread_state(pid: u32, tid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
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
