//! The syscalls family loaded in-process against a workload that counts and
//! times its own calls, and against glibc's own rseq behaviour.

use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdin, Command, Stdio},
};

use mdiag::{
    probes::{Counters, ProbeConfig, Probes},
    recording::SyscallsSlice,
};
use mdiag_tests::{rel_diff, require_root};

const WORKLOAD: &str = env!("CARGO_BIN_EXE_mdiag-syscalls");

/// Starts the workload held at its stdin, attaches to it, releases it and
/// returns (report, totals before, totals after, rseq calls) once it reported.
fn run(
    args: &[&str],
    env: &[(&str, &str)],
) -> (
    serde_json::Value,
    SyscallsSlice,
    SyscallsSlice,
    Child,
    ChildStdin,
) {
    let mut child = Command::new(WORKLOAD)
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn syscalls workload");
    let mut probes = Probes::attach(ProbeConfig {
        target_tgid: Some(child.id()),
    })
    .expect("attach");
    let family = probes
        .status()
        .iter()
        .find(|s| s.family == "syscalls")
        .expect("status");
    assert!(family.attached(), "{family:?}");
    let reader = probes.syscalls.as_mut().expect("syscalls reader");
    let before = reader.totals_since_attach().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let report: serde_json::Value = serde_json::from_str(&line).expect("workload report");
    let mut after = reader.totals_since_attach().unwrap();
    after.rseq = reader.next_slice().unwrap().rseq;
    (report, before, after, child, stdin)
}

fn call(s: &SyscallsSlice, name: &str) -> (u64, u64) {
    s.calls
        .iter()
        .find(|c| c.name == name)
        .map_or((0, 0), |c| (c.count, c.bytes))
}

#[test]
fn memory_syscalls_are_counted_exactly() {
    let _serial = mdiag_tests::serial();
    require_root();
    let (report, before, after, mut child, stdin) = run(&["--maps", "500"], &[]);
    drop(stdin);
    let _ = child.wait();
    let n = report["maps"].as_u64().unwrap();
    let len = report["len"].as_u64().unwrap();
    // Exactly the workload's own calls, plus the few glibc makes when the
    // helper thread exits (it releases the thread's stack with madvise).
    for name in ["madvise", "munmap"] {
        let (c1, b1) = call(&after, name);
        let (c0, b0) = call(&before, name);
        assert!(
            (n..=n + 3).contains(&(c1 - c0)),
            "{name}: {} calls recorded, the workload made {n}",
            c1 - c0
        );
        assert!(b1 - b0 >= n * len, "{name} bytes {}", b1 - b0);
        if c1 - c0 == n {
            assert_eq!(b1 - b0, n * len, "{name} bytes");
        }
    }
    // mmap: the workload's own, plus at most a thread stack or two.
    let (c1, b1) = call(&after, "mmap");
    let (c0, b0) = call(&before, "mmap");
    assert!((n..=n + 4).contains(&(c1 - c0)), "mmap count {}", c1 - c0);
    assert!(b1 - b0 >= n * len);
}

#[test]
fn futex_wait_time_matches_the_waiters_own_timing() {
    let _serial = mdiag_tests::serial();
    require_root();
    let (report, before, after, mut child, stdin) =
        run(&["--waits", "200", "--wake-after-us", "2000"], &[]);
    drop(stdin);
    let _ = child.wait();
    let waiter = report["waiter_tid"].as_u64().unwrap() as u32;
    let own_ns = report["wait_ns"].as_u64().unwrap();
    let t = |s: &SyscallsSlice| {
        s.threads
            .iter()
            .find(|t| t.tid == waiter)
            .map_or((0, 0), |t| (t.futex_waits, t.futex_wait_ns))
    };
    let ((w0, ns0), (w1, ns1)) = (t(&before), t(&after));
    let (waits, ns) = (w1 - w0, ns1 - ns0);
    // Exactly the waiter's own FUTEX_WAIT calls, and the time it measured
    // around them.
    let own_calls = report["wait_calls"].as_u64().unwrap();
    assert_eq!(waits, own_calls, "futex waits recorded vs made");
    assert!(
        own_calls >= 100,
        "the waiter blocked only {own_calls} times in 200 rounds"
    );
    assert!(
        own_ns > own_calls * 1_000_000 / 2,
        "the waiter waited only {own_ns} ns"
    );
    assert!(
        rel_diff(ns, own_ns) <= 0.05,
        "futex wait {ns} ns vs the waiter's own {own_ns} ns"
    );
    let (wakes1, _) = call(&after, "futex_wake");
    let (wakes0, _) = call(&before, "futex_wake");
    assert!(wakes1 - wakes0 >= 200);
}

#[test]
fn rseq_owner_is_glibc_unless_the_tunable_disables_it() {
    let _serial = mdiag_tests::serial();
    require_root();
    // Default glibc (2.35+): glibc registers every new thread first, so a
    // second registration with another area (what TCMalloc attempts) fails
    // with EINVAL (EBUSY is only for registering the same area twice).
    let (report, _, after, mut child, stdin) = run(&["--rseq-self"], &[]);
    drop(stdin);
    let _ = child.wait();
    assert_eq!(report["rseq_ret"], -22, "{report}");
    let tid = report["rseq_tid"].as_u64().unwrap() as u32;
    let calls: Vec<_> = after.rseq.iter().filter(|c| c.tid == tid).collect();
    assert_eq!(calls.len(), 2, "{:?}", after.rseq);
    assert_eq!(calls[0].ret, 0);
    assert!(
        calls[0]
            .caller_object
            .as_deref()
            .is_some_and(|o| o.contains("libc.so")),
        "{:?}",
        calls[0]
    );
    assert!(
        !calls[0].via_syscall_wrapper,
        "glibc registers with an inline syscall: {:?}",
        calls[0]
    );
    assert_eq!(calls[0].origin_object, calls[0].caller_object);
    // The program's own call goes through glibc's syscall() wrapper, and is
    // attributed to the program, not to libc.
    assert_eq!(calls[1].ret, -22);
    assert!(calls[1].via_syscall_wrapper, "{:?}", calls[1]);
    assert!(
        calls[1]
            .origin_object
            .as_deref()
            .is_some_and(|o| o.ends_with("mdiag-syscalls")),
        "{:?}",
        calls[1]
    );

    // With the tunable, glibc stays out and the program's own call succeeds.
    let (report, _, after, mut child, stdin) = run(
        &["--rseq-self"],
        &[("GLIBC_TUNABLES", "glibc.pthread.rseq=0")],
    );
    drop(stdin);
    let _ = child.wait();
    assert_eq!(report["rseq_ret"], 0, "{report}");
    let tid = report["rseq_tid"].as_u64().unwrap() as u32;
    let calls: Vec<_> = after.rseq.iter().filter(|c| c.tid == tid).collect();
    assert_eq!(calls.len(), 1, "{:?}", after.rseq);
    assert_eq!(
        (calls[0].ret, calls[0].len, calls[0].sig),
        (0, 32, 0x5305_3053)
    );
    assert!(
        calls[0]
            .origin_object
            .as_deref()
            .is_some_and(|o| o.ends_with("mdiag-syscalls")),
        "{:?}",
        calls[0]
    );
    // No thread got an rseq area from glibc.
    assert!(
        after.rseq.iter().all(|c| c.via_syscall_wrapper),
        "{:?}",
        after.rseq
    );
}
