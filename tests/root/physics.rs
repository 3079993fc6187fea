//! Invariants every real recording obeys, whatever the workload: nothing
//! measured takes longer than the time it was measured in. In no slice is
//! a thread blocked in futex waits, asleep in D state, waiting for kernel
//! locks or on a CPU longer than the slice, nor do the threads together run
//! on more CPUs than the host has; no CPU spends more than a second per
//! second in softirq handlers; no thread runs or waits longer than the
//! recording; and explain's per-thread shares and per-class figures stay
//! within threads × wall time. Called by the tests that record real
//! workloads.

use std::collections::HashMap;

use mdiag::recording::Recording;

/// Slack for the slice cut: user space reads each family's counters one
/// after the other, and the kernel's clock is read at a slightly different
/// instant from the slice's own.
pub fn slack_ns(duration_ns: u64) -> u64 {
    5_000_000 + duration_ns / 50
}

/// The most time a thread can spend in one state within a slice of
/// `duration_ms`.
pub fn slice_limit_ns(duration_ms: u64) -> u64 {
    let dur = duration_ms * 1_000_000;
    dur + slack_ns(dur)
}

/// Per-thread time in each state, summed over the recording.
#[derive(Default)]
struct Totals {
    by_state: HashMap<(&'static str, u32), u64>,
}

impl Totals {
    fn add(&mut self, state: &'static str, tid: u32, ns: u64) {
        *self.by_state.entry((state, tid)).or_default() += ns;
    }
}

/// The rows of thread `tid` in every slice, for failure messages:
/// (slice, count, ns) of `state`.
fn rows_of(rec: &Recording, state: &str, tid: u32) -> Vec<(usize, u64, u64)> {
    let mut out = Vec::new();
    for (i, s) in rec.slices.iter().enumerate() {
        let row = match state {
            "futex" => s.syscalls.as_ref().and_then(|x| {
                x.threads
                    .iter()
                    .find(|t| t.tid == tid)
                    .map(|t| (t.futex_waits, t.futex_wait_ns))
            }),
            "dstate" | "lock" => s.contention.as_ref().and_then(|x| {
                x.threads.iter().find(|t| t.tid == tid).map(|t| {
                    let w = if state == "dstate" {
                        &t.dstate
                    } else {
                        &t.lock
                    };
                    (w.count(), w.ns())
                })
            }),
            _ => s.sched.as_ref().and_then(|x| {
                x.threads
                    .iter()
                    .find(|t| t.tid == tid)
                    .map(|t| (t.voluntary + t.involuntary, t.oncpu_ns))
            }),
        };
        if let Some((n, ns)) = row {
            out.push((i, n, ns));
        }
    }
    out
}

/// The host's CPU time over the recording (`HostFacts::cpu_usage`) adds
/// up: its states sum to the whole, which is about every CPU for the
/// interval, and no process used more CPU time than that.
fn assert_cpu_usage_physical(rec: &Recording) {
    let Some(u) = &rec.host.cpu_usage else {
        return;
    };
    let states = u.busy_ticks + u.idle_ticks + u.iowait_ticks + u.steal_ticks;
    assert!(states <= u.total_ticks, "CPU states above the total: {u:?}");
    // Every CPU for the interval, in ticks; /proc/stat counts in whole
    // ticks per CPU, so allow a tick per CPU and 5 % for the two clocks.
    // Never more than that. Less, in a virtual machine whose hypervisor
    // does not report steal: the time its vCPUs did not run is in no
    // state of /proc/stat (seen here: 878 of 1000 ticks with steal 0 on a
    // loaded host), so the lower bound is only half.
    let wall = u64::from(u.cpus) * u.interval_ms * u.ticks_per_s / 1000;
    let slack = wall / 20 + u64::from(u.cpus);
    assert!(
        u.total_ticks <= wall + slack && u.total_ticks >= wall / 2,
        "CPU time {} ticks for {wall} of wall time on {} CPUs: {u:?}",
        u.total_ticks,
        u.cpus
    );
    for p in &u.top {
        assert!(
            p.ticks <= wall + slack,
            "process {p:?} above every CPU: {u:?}"
        );
    }
    let top: u64 = u.top.iter().map(|p| p.ticks).sum();
    assert!(
        top <= u.process_ticks,
        "the busiest above all processes: {u:?}"
    );
}

/// Panics with what broke physics, naming the slice, thread or CPU.
pub fn assert_physical(rec: &Recording) {
    assert_cpu_usage_physical(rec);
    let covered_ns: u64 = rec.slices.iter().map(|s| s.duration_ms * 1_000_000).sum();
    let cpus = u64::from(rec.host.cpu_count.max(1));
    let mut totals = Totals::default();
    for (i, s) in rec.slices.iter().enumerate() {
        let limit = slice_limit_ns(s.duration_ms);
        let mut per_thread = |state: &'static str, tid: u32, ns: u64| {
            assert!(
                ns <= limit,
                "slice {i} ({} ms): thread {tid} {state} {ns} ns; its rows (slice, count, ns): {:?}",
                s.duration_ms,
                rows_of(rec, state, tid)
            );
            totals.add(state, tid, ns);
        };
        if let Some(sys) = &s.syscalls {
            for t in &sys.threads {
                per_thread("futex", t.tid, t.futex_wait_ns);
                assert!(
                    t.futex_wait_ns_in_checkpoint <= t.futex_wait_ns
                        && t.futex_waits_in_checkpoint <= t.futex_waits,
                    "slice {i}: in-checkpoint part above the whole: {t:?}"
                );
            }
        }
        if let Some(cont) = &s.contention {
            for t in &cont.threads {
                per_thread("dstate", t.tid, t.dstate.ns());
                per_thread("lock", t.tid, t.lock.ns());
            }
        }
        if let Some(sched) = &s.sched {
            for t in &sched.threads {
                per_thread("oncpu", t.tid, t.oncpu_ns);
            }
            // The observed threads together run on at most every CPU.
            let all: u64 = sched.threads.iter().map(|t| t.oncpu_ns).sum();
            assert!(
                all <= cpus * limit,
                "slice {i} ({} ms): threads on CPU {all} ns in all on {cpus} CPUs",
                s.duration_ms
            );
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
    }
    let limit = covered_ns + slack_ns(covered_ns);
    for ((state, tid), ns) in totals.by_state {
        assert!(
            ns <= limit,
            "thread {tid} {state} {ns} ns of a {covered_ns} ns recording"
        );
    }
}

/// The same for `explain --format json`: shares of wall time at most 1,
/// a class's wait rates per wall second at most its threads × 1000 ms/s,
/// its time on CPU at most its threads × the wall time.
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
    let sched = &report["facts"]["sched"];
    if let Some(duration_s) = sched["duration_s"].as_f64() {
        let within = |v: f64, threads: f64| v <= threads * duration_s * 1.02 + 0.005;
        for key in ["busiest_thread_oncpu_share", "cpu_busy_share"] {
            if let Some(share) = sched[key].as_f64() {
                assert!(share <= 1.02, "{key} {share}: {sched}");
            }
        }
        if let Some(classes) = sched["classes"].as_object() {
            for (name, c) in classes {
                let threads = c["threads"].as_f64().unwrap_or(0.0);
                let oncpu = c["oncpu_s"].as_f64().unwrap_or(0.0);
                assert!(
                    within(oncpu, threads),
                    "class {name} ({threads} threads) on CPU {oncpu} s of {duration_s} s"
                );
            }
        }
    }
}
