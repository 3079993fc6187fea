//! The scheduler probe loaded in-process, against /proc/stat and
//! /proc/PID/task/*/status read by the test itself; and `mdiag record` of a
//! thread that runs for seconds without a context switch, against the
//! scheduler's own schedstat.

use std::{process::Command, time::Duration};

use mdiag::probes::{Counters, ProbeConfig, Probes};
use mdiag_tests::{
    finish, proc_stat_ctxt, rel_diff, require_root, schedstat, spawn_ready, start_record,
    thread_migrations, thread_switches,
};

const SPIN: &str = env!("CARGO_BIN_EXE_mdiag-spin");
const PINGPONG: &str = env!("CARGO_BIN_EXE_mdiag-pingpong");
const WAKEUP: &str = env!("CARGO_BIN_EXE_mdiag-wakeup");

#[test]
fn host_wide_switches_match_proc_stat() {
    let _serial = mdiag_tests::serial();
    require_root();
    let mut probes = Probes::attach(ProbeConfig {
        target_tgid: None,
        ..ProbeConfig::default()
    })
    .expect("attach");
    assert!(
        probes.status().iter().all(|s| s.attached()),
        "{:?}",
        probes.status()
    );
    let reader = probes.readers.sched.as_mut().expect("sched reader");
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
    let (mut child, mut child_out) = spawn_ready(Command::new(SPIN).args([
        "--threads",
        &threads.to_string(),
        "--spin-ms",
        "1500",
        "--wait-stdin",
        "--linger",
        "--hop",
    ]));
    let pid = child.id();
    let mut probes = Probes::attach(ProbeConfig {
        target_tgid: Some(pid),
        ..ProbeConfig::default()
    })
    .expect("attach");
    let base = thread_switches(pid);
    let base_migrations = thread_migrations(pid);
    assert_eq!(base.len(), threads + 1);
    use std::io::{BufRead, Write};
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    let mut line = String::new();
    child_out.read_line(&mut line).unwrap();
    let end = thread_switches(pid);
    let end_migrations = thread_migrations(pid);
    let totals = probes.readers.sched.as_mut().unwrap().next_slice().unwrap();
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
    // Migrations per thread against the scheduler's own se.nr_migrations.
    let mut migrations_truth = 0;
    for (tid, n1) in &end_migrations {
        let truth = n1 - base_migrations.get(tid).copied().unwrap_or(0);
        let recorded = totals
            .threads
            .iter()
            .find(|t| t.tid == *tid)
            .map_or(0, |t| t.migrations);
        migrations_truth += truth;
        assert!(
            recorded.abs_diff(truth) <= 2 + truth / 20,
            "tid {tid}: {recorded} migrations recorded, kernel {truth}"
        );
    }
    // The per-CPU total and the per-thread counts are read one after the
    // other (and a thread migrated before its first switch has no entry yet).
    let per_thread: u64 = totals.threads.iter().map(|t| t.migrations).sum();
    assert!(
        totals.migrations.abs_diff(per_thread) <= 2,
        "{} vs {per_thread}",
        totals.migrations
    );
    if cpus > 1 {
        // Every spinning thread moved itself to another CPU once.
        assert!(
            migrations_truth >= threads as u64,
            "{migrations_truth} migrations for {threads} hopping threads"
        );
    }
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

#[test]
fn wakeups_onto_a_busy_cpu_are_counted_as_wakeup_preemptions() {
    let _serial = mdiag_tests::serial();
    require_root();
    use std::io::{BufRead, Write};
    let mut child = Command::new(WAKEUP)
        .args([
            "--ms",
            "1500",
            "--sleep-us",
            "1000",
            "--cpu",
            "0",
            "--rt",
            "--wait-stdin",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn wakeup workload");
    let pid = child.id();
    let mut probes = Probes::attach(ProbeConfig {
        target_tgid: Some(pid),
        ..ProbeConfig::default()
    })
    .expect("attach");
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _ = child.wait();
    let report: serde_json::Value = serde_json::from_str(&line).expect("workload report");
    let totals = probes.readers.sched.as_mut().unwrap().next_slice().unwrap();
    let spinner = report["spinner_tid"].as_u64().unwrap() as u32;
    let wakeups = report["sleeper_wakeups"].as_u64().unwrap();
    assert!(wakeups > 300, "the sleeper woke only {wakeups} times");
    let spun = totals
        .threads
        .iter()
        .find(|t| t.tid == spinner)
        .expect("spinner recorded");
    // A real-time wakeup takes the CPU at once from whatever runs there, and
    // the pinned spinner keeps that CPU from ever idling: every wakeup of the
    // sleeper is a wakeup preemption (its victim may be the spinner or, on a
    // busy host, any other task that was running on that CPU).
    let sleeper_tid = report["sleeper_tid"].as_u64().unwrap() as u32;
    let sleeper = totals
        .threads
        .iter()
        .find(|t| t.tid == sleeper_tid)
        .expect("sleeper recorded");
    assert!(
        rel_diff(sleeper.wakeup_preempting, wakeups) <= 0.05,
        "the sleeper took the CPU {} times, it woke {wakeups} times",
        sleeper.wakeup_preempting
    );
    // The victims among the observed threads: the spinner, never more often
    // than the sleeper woke, and only while it was runnable.
    assert!(spun.wakeup_preempted > 0 && spun.wakeup_preempted <= sleeper.wakeup_preempting);
    assert!(spun.wakeup_preempted <= spun.involuntary);
    assert_eq!(
        sleeper.wakeup_preempted, 0,
        "nothing preempts a real-time thread here"
    );
    assert!(
        sleeper.voluntary as f64 >= 0.95 * wakeups as f64,
        "{} voluntary",
        sleeper.voluntary
    );
    assert_eq!(
        totals.wakeup_preemptions,
        totals
            .threads
            .iter()
            .map(|t| t.wakeup_preempted)
            .sum::<u64>()
    );
}

#[test]
fn a_long_run_on_a_cpu_is_split_over_the_slices_it_overlaps() {
    let _serial = mdiag_tests::serial();
    require_root();
    use std::io::{BufRead, Write};
    // One SCHED_FIFO thread spinning 3 s on one CPU: no ordinary task takes
    // that CPU from it, so it runs for long stretches without a context
    // switch (the whole 3 s on an idle CPU; on a busy host the kernel still
    // gives ordinary tasks a few percent: its runs are then near a second).
    let cpus = mdiag::host::online_cpus();
    let pinned = cpus.saturating_sub(1);
    let cpu = pinned.to_string();
    let mut args = vec![
        "--threads",
        "1",
        "--spin-ms",
        "3000",
        "--pin",
        &cpu,
        "--wait-stdin",
        "--linger",
    ];
    // Not on a single CPU: the recorder needs one too.
    if cpus > 1 {
        args.push("--rt");
    }
    let (mut child, mut child_out) = spawn_ready(Command::new(SPIN).args(&args));
    let pid = child.id();
    // Ready: the spinning thread exists, parked at its start barrier.
    let spinner = thread_switches(pid)
        .iter()
        .map(|t| t.0)
        .find(|&t| t != pid)
        .expect("the spinning thread");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("spin.mdiag");
    let (rec_child, rec_err) = start_record(&[
        "--duration",
        "7s",
        "--pid",
        &pid.to_string(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let (run0, _, runs0) = schedstat(pid, spinner);
    let mut stdin = child.stdin.take().unwrap();
    // While it spins, the longest stretch seen by the scheduler's own
    // counters in which it stayed on its CPU: the number of runs did not
    // move while its time on CPU grew with the wall clock.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut longest = Duration::ZERO;
            let mut since: Option<(std::time::Instant, u64, u64)> = None;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let now = std::time::Instant::now();
                let (ran, _, runs) = schedstat(pid, spinner);
                match since {
                    Some((t, ran0, runs0)) if runs0 == runs => {
                        let wall = now - t;
                        // On the CPU all along (90 %: interrupts, reads).
                        if (ran - ran0) as f64 >= 0.9 * wall.as_nanos() as f64 {
                            longest = longest.max(wall);
                        }
                    }
                    _ => since = Some((now, ran, runs)),
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            longest
        })
    };
    let steal0 = mdiag_tests::cpu_steal_ns(pinned);
    stdin.write_all(b"go\n").unwrap();
    let mut line = String::new();
    child_out.read_line(&mut line).unwrap();
    let stolen = mdiag_tests::cpu_steal_ns(pinned) - steal0;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let longest = sampler.join().unwrap();
    // The spinner is parked again: its runs are all counted.
    let (run1, _, runs1) = schedstat(pid, spinner);
    let (status, _, stderr) = finish(rec_child, rec_err);
    drop(stdin);
    let _ = child.wait();
    assert!(status.success(), "record failed: {stderr}");
    let rec = mdiag::recording::read_file(&out).expect("recording");
    crate::physics::assert_physical(&rec);

    let truth = run1 - run0;
    let runs = runs1 - runs0;
    let rows: Vec<(usize, u64, u64, u64)> = rec
        .slices
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let t = s
                .sched
                .as_ref()?
                .threads
                .iter()
                .find(|t| t.tid == spinner)?;
            Some((i, s.duration_ms, t.voluntary + t.involuntary, t.oncpu_ns))
        })
        .collect();
    let recorded: u64 = rows.iter().map(|r| r.3).sum();
    // What the kernel side says it could not count (a lost run shows here
    // or nowhere).
    let drops: Vec<_> = rec
        .slices
        .iter()
        .filter_map(|s| s.sched.as_ref().map(|x| x.drops))
        .filter(|d| *d != mdiag::recording::SchedDrops::default())
        .collect();
    eprintln!(
        "spinner {spinner}: on CPU {recorded} ns recorded, {truth} ns by schedstat in {runs} runs \
         (mean {} ms, longest seen {longest:?}); {stolen} ns stolen from CPU {pinned} by the \
         hypervisor; per slice (slice, ms, switches, ns): {rows:?}; drops: {drops:?}",
        truth / runs.max(1) / 1_000_000
    );
    for &(i, ms, _, ns) in &rows {
        assert!(
            ns <= crate::physics::slice_limit_ns(ms),
            "slice {i} of {ms} ms: on CPU {ns} ns: {rows:?}"
        );
    }
    // It spun for 3 s of wall time; as a real-time task it got most of
    // what the VM had of its CPU. Time the hypervisor takes the vCPU away
    // (steal) is charged to no task: one run under load was charged only
    // 1.53 s of the 3 s, in 2 runs, with mdiag matching schedstat.
    assert!(
        truth + stolen >= 2_000_000_000,
        "the spinner ran only {truth} ns, and {stolen} ns were stolen"
    );
    // On a CPU nobody else wanted it ran once, for the whole 3 s: a slice
    // inside that run holds the run's time though the thread was never
    // switched out in it (before, the whole run went to the slice in which
    // it ended). A run seen for 2.5 s covers at least one whole slice (at
    // most ~1.2 s). On a busy host the kernel lends ordinary tasks the CPU
    // now and then, and the runs are shorter.
    if longest >= Duration::from_millis(2500) {
        assert!(
            rows.iter()
                .any(|&(_, ms, switches, ns)| switches == 0 && ns * 10 >= ms * 9_000_000),
            "a run of {longest:?}, yet no slice inside it: {rows:?}"
        );
    }
    // The same time as the scheduler's own accounting (which leaves out
    // interrupt time on kernels that account it apart).
    assert!(
        rel_diff(recorded, truth) <= 0.05,
        "recorded {recorded} ns vs schedstat {truth} ns"
    );
    // A 3 s run shows in at least three slices.
    assert!(rows.iter().filter(|r| r.3 > 0).count() >= 3, "{rows:?}");
}
