//! Invariants every real recording obeys, whatever the workload: nothing
//! measured takes longer than the time it was measured in. No thread is
//! blocked in futex waits longer than a slice, no CPU spends more than a
//! second per second in softirq handlers, no thread runs or waits longer
//! than the recording, and explain's per-class figures stay within
//! threads × wall time. Called by the tests that record real workloads.

use mdiag::recording::Recording;

/// Slack for the slice cut: user space reads each family's counters one
/// after the other, and the kernel's clock is read at a slightly different
/// instant from the slice's own.
fn slack_ns(duration_ns: u64) -> u64 {
    5_000_000 + duration_ns / 50
}

/// Panics with what broke physics, naming the slice, thread or CPU.
pub fn assert_physical(rec: &Recording) {
    let covered_ns: u64 = rec.slices.iter().map(|s| s.duration_ms * 1_000_000).sum();
    let mut futex_total: std::collections::HashMap<u32, u64> = Default::default();
    let mut oncpu_total: std::collections::HashMap<u32, u64> = Default::default();
    for (i, s) in rec.slices.iter().enumerate() {
        let dur = s.duration_ms * 1_000_000;
        let limit = dur + slack_ns(dur);
        if let Some(sys) = &s.syscalls {
            for t in &sys.threads {
                assert!(
                    t.futex_wait_ns <= limit,
                    "slice {i} ({} ms): thread {} blocked in futex {} ns: {t:?}; its rows: {:?}",
                    s.duration_ms,
                    t.tid,
                    t.futex_wait_ns,
                    rec.slices
                        .iter()
                        .filter_map(|s| s.syscalls.as_ref())
                        .flat_map(|x| x.threads.iter().filter(|r| r.tid == t.tid))
                        .map(|r| (r.futex_waits, r.futex_wait_ns))
                        .collect::<Vec<_>>()
                );
                assert!(
                    t.futex_wait_ns_in_checkpoint <= t.futex_wait_ns
                        && t.futex_waits_in_checkpoint <= t.futex_waits,
                    "slice {i}: in-checkpoint part above the whole: {t:?}"
                );
                *futex_total.entry(t.tid).or_default() += t.futex_wait_ns;
            }
        }
        if let Some(soft) = &s.softirq {
            let cpus = soft
                .vectors
                .iter()
                .map(|v| v.time_ns_per_cpu.len())
                .max()
                .unwrap_or(0);
            for cpu in 0..cpus {
                let ns: u64 = soft
                    .vectors
                    .iter()
                    .filter_map(|v| v.time_ns_per_cpu.get(cpu))
                    .sum();
                assert!(
                    ns <= limit,
                    "slice {i} ({} ms): CPU {cpu} in softirq handlers {ns} ns",
                    s.duration_ms
                );
            }
        }
        if let Some(sched) = &s.sched {
            for t in &sched.threads {
                *oncpu_total.entry(t.tid).or_default() += t.oncpu_ns;
            }
        }
    }
    let limit = covered_ns + slack_ns(covered_ns);
    for (tid, ns) in futex_total {
        assert!(
            ns <= limit,
            "thread {tid} blocked in futex {ns} ns of a {covered_ns} ns recording"
        );
    }
    for (tid, ns) in oncpu_total {
        assert!(
            ns <= limit,
            "thread {tid} on CPU {ns} ns of a {covered_ns} ns recording"
        );
    }
}

/// The same for `explain --format json`: shares of wall time at most 1,
/// a class's wait rates per wall second at most its threads × 1000 ms/s.
pub fn assert_physical_report(report: &serde_json::Value) {
    let m = &report["measurements"];
    if let Some(top) = m["syscalls"]["top_futex_threads"].as_array() {
        for t in top {
            let share = t["blocked_share"].as_f64().unwrap_or(0.0);
            assert!(share <= 1.02, "thread blocked {share} of wall time: {t}");
        }
    }
    if let Some(classes) = m["contention"]["classes"].as_array() {
        for c in classes {
            let threads = c["threads"].as_f64().unwrap_or(0.0);
            // Per second of wall time (the inside/outside rates are per
            // second of window time, for waits by where they began).
            for key in [
                "futex_wait_ms_per_s",
                "lock_wait_ms_per_s",
                "dstate_ms_per_s",
            ] {
                if let Some(v) = c[key].as_f64() {
                    assert!(
                        v <= threads * 1000.0 * 1.02 + 5.0,
                        "class {} ({threads} threads): {key} {v}",
                        c["class"]
                    );
                }
            }
        }
    }
}
