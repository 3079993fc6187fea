//! The scheduler probe loaded in-process, against /proc/stat and
//! /proc/PID/task/*/status read by the test itself.

use std::{process::Command, time::Duration};

use mdiag::probes::{ProbeConfig, Probes};
use mdiag_tests::{proc_stat_ctxt, rel_diff, require_root, thread_switches};

const SPIN: &str = env!("CARGO_BIN_EXE_mdiag-spin");
const PINGPONG: &str = env!("CARGO_BIN_EXE_mdiag-pingpong");

#[test]
fn host_wide_switches_match_proc_stat() {
    let _serial = mdiag_tests::serial();
    require_root();
    let mut probes = Probes::attach(ProbeConfig { target_tgid: None }).expect("attach");
    assert!(
        probes.status().iter().all(|s| s.attached()),
        "{:?}",
        probes.status()
    );
    let reader = probes.sched.as_mut().expect("sched reader");
    let before = reader.totals_since_attach().unwrap();
    let ctxt0 = proc_stat_ctxt();
    let out = Command::new(PINGPONG)
        .args(["--ms", "1500"])
        .output()
        .expect("pingpong");
    assert!(out.status.success());
    let ctxt1 = proc_stat_ctxt();
    let after = reader.totals_since_attach().unwrap();
    let recorded = after.switches_total - before.switches_total;
    let truth = ctxt1 - ctxt0;
    // The workload alone makes tens of thousands of switches: a real load.
    assert!(truth > 10_000, "too few switches to compare: {truth}");
    assert!(
        rel_diff(recorded, truth) <= 0.05,
        "probe {recorded} vs /proc/stat {truth}"
    );
    // Host-wide, non-idle switches are split into voluntary + involuntary.
    let split = (after.voluntary + after.involuntary) - (before.voluntary + before.involuntary);
    assert!(
        split <= recorded && split * 2 >= recorded,
        "split {split} of {recorded}"
    );
    assert_eq!(after.drops.total(), 0, "drops: {:?}", after.drops);
    // The run-queue histogram is filled.
    assert!(after.runq_hist_log2_ns.iter().sum::<u64>() > 1000);
}

#[test]
fn target_involuntary_switches_match_each_thread() {
    let _serial = mdiag_tests::serial();
    require_root();
    let cpus = mdiag::host::online_cpus() as usize;
    let threads = 2 * cpus + 2;
    let mut child = Command::new(SPIN)
        .args([
            "--threads",
            &threads.to_string(),
            "--spin-ms",
            "1500",
            "--wait-stdin",
            "--linger",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn spin");
    let pid = child.id();
    std::thread::sleep(Duration::from_millis(200)); // threads created and parked
    let mut probes = Probes::attach(ProbeConfig {
        target_tgid: Some(pid),
    })
    .expect("attach");
    let base = thread_switches(pid);
    assert_eq!(base.len(), threads + 1);
    use std::io::{BufRead, Write};
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let end = thread_switches(pid);
    let totals = probes.sched.as_mut().unwrap().next_slice().unwrap();
    drop(stdin);
    let _ = child.wait();

    let mut sum_truth = 0;
    let mut sum_recorded = 0;
    for ((tid, _, n0), (tid1, _, n1)) in base.iter().zip(end.iter()) {
        assert_eq!(tid, tid1);
        let truth = n1 - n0;
        let recorded = totals
            .threads
            .iter()
            .find(|t| t.tid == *tid)
            .map_or(0, |t| t.involuntary);
        sum_truth += truth;
        sum_recorded += recorded;
        if truth >= 100 {
            assert!(
                rel_diff(recorded, truth) <= 0.05,
                "tid {tid}: probe {recorded} vs kernel {truth}"
            );
        }
    }
    assert!(
        sum_truth >= 30 * threads as u64,
        "oversubscription produced too few preemptions: {sum_truth}"
    );
    assert!(
        rel_diff(sum_recorded, sum_truth) <= 0.05,
        "total: probe {sum_recorded} vs kernel {sum_truth}"
    );
    // Only the target's threads are recorded.
    assert!(totals.threads.iter().all(|t| t.tgid == pid));
    // Busy threads wait in the run queue for milliseconds.
    let delays: u64 = totals.threads.iter().map(|t| t.runq_delays).sum();
    let delay_ns: u64 = totals.threads.iter().map(|t| t.runq_delay_ns).sum();
    assert!(
        delays > 0 && delay_ns / delays > 100_000,
        "mean run-queue delay {} ns",
        delay_ns / delays.max(1)
    );
}
