//! The `sched` fact group: context switches, run-queue delays and on-CPU time
//! of the recorded threads (the target's, or every thread host-wide), summed
//! over every slice with scheduler data, with a per-class breakdown.
//!
//! Percentiles come from the log2 run-queue histogram
//! ([`crate::hist::log2_hist_percentile_ns`]); the mean comes from the per-thread
//! delay totals, which are exact.

use std::collections::{BTreeMap, BTreeSet};

use super::figures::{SchedFigures, sched_section};
use super::section::{SchedSlice, ThreadSlice};
use crate::hist::bucket_bounds_ns;
use crate::kit::fact::{FactGroup, FactValue, float, int, ratio, text};
use crate::kit::family::FamilyWindow;

/// Switches, run-queue delays and on-CPU time of a thread or a class of
/// threads, summed over slices (saturating).
#[derive(Default)]
pub(super) struct Counts {
    pub(super) voluntary: u64,
    pub(super) involuntary: u64,
    pub(super) preempted: u64,
    pub(super) runq_delay_ns: u64,
    pub(super) runq_delays: u64,
    pub(super) oncpu_ns: u64,
}

impl Counts {
    pub(super) fn add(&mut self, o: &Counts) {
        self.voluntary = self.voluntary.saturating_add(o.voluntary);
        self.involuntary = self.involuntary.saturating_add(o.involuntary);
        self.preempted = self.preempted.saturating_add(o.preempted);
        self.runq_delay_ns = self.runq_delay_ns.saturating_add(o.runq_delay_ns);
        self.runq_delays = self.runq_delays.saturating_add(o.runq_delays);
        self.oncpu_ns = self.oncpu_ns.saturating_add(o.oncpu_ns);
    }
}

impl From<&ThreadSlice> for Counts {
    fn from(t: &ThreadSlice) -> Counts {
        Counts {
            voluntary: t.voluntary,
            involuntary: t.involuntary,
            preempted: t.preempted,
            runq_delay_ns: t.runq_delay_ns,
            runq_delays: t.runq_delays,
            oncpu_ns: t.oncpu_ns,
        }
    }
}

#[derive(Default)]
pub(super) struct ClassTotals {
    pub(super) threads: u64,
    pub(super) n: Counts,
}

/// The `sched` group, or why it is absent (the probe did not attach, or no
/// slice carries scheduler data). Every figure is a total of the whole
/// recording, read from its merged window (the slices' threads
/// matched by tid and summed, histograms bucket by bucket); rates are over
/// the time the sched section covered.
pub fn facts(w: &FamilyWindow<SchedSlice>) -> Result<FactGroup, String> {
    let f = SchedFigures::of(w)?;
    let s = sched_section(w)?;
    let duration_s = f.duration_s;
    let cpu_count = f64::from(w.host_cpus.max(1));
    // By tid, as rules have always seen them (busiest thread: lowest tid on ties).
    let threads: BTreeMap<u32, &ThreadSlice> = s.threads.iter().map(|t| (t.tid, t)).collect();

    let mut g = FactGroup::new();
    g.insert("scope".into(), text(f.scope));
    g.insert("duration_s".into(), float(duration_s));
    switch_facts(&mut g, s, &f, cpu_count);
    runq_facts(&mut g, s, &f, &threads);
    oncpu_facts(&mut g, &threads, duration_s, cpu_count);
    busiest_thread_facts(&mut g, &threads, duration_s);
    let drops = &s.drops;
    g.insert("drops".into(), int(drops.total()));
    g.insert("drops_thread_map_full".into(), int(drops.thread_map_full));
    g.insert("drops_wakeup_map_full".into(), int(drops.wakeup_map_full));
    g.insert("drops_read_failed".into(), int(drops.read_failed));
    g.insert("classes".into(), class_facts(&f));
    Ok(g)
}

/// Context switches, wakeups and migrations: totals, rates and shares.
fn switch_facts(g: &mut FactGroup, s: &SchedSlice, f: &SchedFigures, cpu_count: f64) {
    let duration_s = f.duration_s;
    let SchedSlice {
        switches_total: switches,
        voluntary,
        involuntary,
        preempted,
        wakeups,
        wakeup_preemptions,
        migrations,
        ..
    } = *s;
    let observed = voluntary.saturating_add(involuntary);
    g.insert("switches_total".into(), int(switches));
    g.insert("switches_per_s".into(), float(f.switches_per_s));
    g.insert(
        "switches_per_cpu_per_s".into(),
        float(f.switches_per_s / cpu_count),
    );
    g.insert("observed_switches".into(), int(observed));
    g.insert(
        "observed_switches_per_s".into(),
        float(f.observed_switches_per_s),
    );
    g.insert("voluntary".into(), int(voluntary));
    g.insert("involuntary".into(), int(involuntary));
    g.insert("preempted".into(), int(preempted));
    g.insert("wakeups".into(), int(wakeups));
    g.insert(
        "wakeups_per_s".into(),
        float(ratio(wakeups as f64, duration_s)),
    );
    g.insert("involuntary_share".into(), float(f.involuntary_share));
    g.insert("involuntary_per_s".into(), float(f.involuntary_per_s));
    g.insert(
        "preempted_share".into(),
        float(ratio(preempted as f64, involuntary as f64)),
    );
    g.insert("wakeup_preemptions".into(), int(wakeup_preemptions));
    g.insert(
        "wakeup_preemptions_per_s".into(),
        float(ratio(wakeup_preemptions as f64, duration_s)),
    );
    g.insert(
        "wakeup_preemption_share".into(),
        float(ratio(wakeup_preemptions as f64, involuntary as f64)),
    );
    g.insert(
        "migrations_per_s".into(),
        float(ratio(migrations as f64, duration_s)),
    );
}

/// Run-queue delays: percentiles from the histogram, the mean and the wait
/// from the per-thread totals.
fn runq_facts(
    g: &mut FactGroup,
    s: &SchedSlice,
    f: &SchedFigures,
    threads: &BTreeMap<u32, &ThreadSlice>,
) {
    let duration_s = f.duration_s;
    let hist = &s.runq_hist_log2_ns;
    let runq_delays: u64 = hist.iter().sum();
    let max_bucket_us = hist
        .iter()
        .rposition(|&c| c > 0)
        .map_or(0.0, |i| bucket_bounds_ns(i).1 / 1000.0);
    let thread_delay_ns: u64 = threads.values().map(|t| t.runq_delay_ns).sum();
    let thread_delays: u64 = threads.values().map(|t| t.runq_delays).sum();
    let oncpu_ns: u64 = threads.values().map(|t| t.oncpu_ns).sum();
    g.insert("runq_delays".into(), int(runq_delays));
    g.insert("runq_p50_us".into(), float(f.runq_p50_us));
    g.insert("runq_p90_us".into(), float(f.runq_p90_us));
    g.insert("runq_p99_us".into(), float(f.runq_p99_us));
    g.insert("runq_max_bucket_us".into(), float(max_bucket_us));
    g.insert(
        "runq_mean_us".into(),
        float(ratio(thread_delay_ns as f64, thread_delays as f64) / 1000.0),
    );
    // Time the observed threads spent runnable but waiting for a CPU, per
    // second, and as a share of the time they wanted a CPU (waiting + running).
    g.insert(
        "runq_wait_ms_per_s".into(),
        float(ratio(thread_delay_ns as f64 / 1e6, duration_s)),
    );
    g.insert(
        "runq_wait_share".into(),
        float(ratio(
            thread_delay_ns as f64,
            thread_delay_ns.saturating_add(oncpu_ns) as f64,
        )),
    );
}

/// The observed threads and processes and their time on a CPU.
fn oncpu_facts(
    g: &mut FactGroup,
    threads: &BTreeMap<u32, &ThreadSlice>,
    duration_s: f64,
    cpu_count: f64,
) {
    let oncpu_ns: u64 = threads.values().map(|t| t.oncpu_ns).sum();
    let oncpu_s = oncpu_ns as f64 / 1e9;
    let cpu_busy = ratio(oncpu_s, duration_s);
    let processes: BTreeSet<u32> = threads.values().map(|t| t.tgid).collect();
    g.insert("threads".into(), int(threads.len() as u64));
    g.insert("processes".into(), int(processes.len() as u64));
    g.insert("oncpu_s".into(), float(oncpu_s));
    g.insert("cpu_busy".into(), float(cpu_busy));
    g.insert("cpu_busy_share".into(), float(cpu_busy / cpu_count));
}

/// The thread with the most time on a CPU (lowest tid on ties).
fn busiest_thread_facts(g: &mut FactGroup, threads: &BTreeMap<u32, &ThreadSlice>, duration_s: f64) {
    let busiest = threads
        .iter()
        .max_by_key(|(tid, t)| (t.oncpu_ns, std::cmp::Reverse(**tid)));
    g.insert(
        "busiest_thread".into(),
        text(busiest.map_or("", |(_, t)| t.comm.as_str())),
    );
    g.insert(
        "busiest_thread_tid".into(),
        int(busiest.map_or(0, |(tid, _)| u64::from(*tid))),
    );
    g.insert(
        "busiest_thread_oncpu_share".into(),
        float(busiest.map_or(0.0, |(_, t)| ratio(t.oncpu_ns as f64 / 1e9, duration_s))),
    );
}

/// `classes`: the threads' counts summed per thread name class
/// ([`SchedFigures::classes`]).
fn class_facts(f: &SchedFigures) -> FactValue {
    let classes: BTreeMap<String, FactValue> = f
        .classes
        .iter()
        .map(|(name, c)| {
            let mut m = BTreeMap::new();
            m.insert("threads".into(), int(c.threads));
            m.insert("voluntary".into(), int(c.voluntary));
            m.insert("involuntary".into(), int(c.involuntary));
            m.insert("preempted".into(), int(c.preempted));
            m.insert("involuntary_share".into(), float(c.involuntary_share));
            m.insert("runq_delays".into(), int(c.runq_delays));
            m.insert("runq_mean_us".into(), float(c.runq_mean_us));
            m.insert("oncpu_s".into(), float(c.oncpu_s));
            (name.clone(), FactValue::Map(m))
        })
        .collect();
    FactValue::Map(classes)
}

#[cfg(test)]
mod tests {
    use crate::rules::facts::{FactValue, Facts};
    use crate::rules::testdata;

    #[test]
    fn sched_facts_sum_all_slices() {
        let rec = testdata::oversubscribed();
        let f = Facts::derive(&rec);
        let slices = rec.slices.len() as i64;
        assert_eq!(f.get("sched.voluntary"), Some(&FactValue::Int(70 * slices)));
        assert_eq!(
            f.get("sched.involuntary"),
            Some(&FactValue::Int(650 * slices))
        );
        let share = f
            .get("sched.involuntary_share")
            .and_then(FactValue::as_f64)
            .unwrap();
        assert!((share - 650.0 / 720.0).abs() < 1e-9, "{share}");
        let per_s = f
            .get("sched.involuntary_per_s")
            .and_then(FactValue::as_f64)
            .unwrap();
        assert!((per_s - 650.0).abs() < 1e-9, "{per_s}");
        let preempted = f
            .get("sched.preempted_share")
            .and_then(FactValue::as_f64)
            .unwrap();
        assert!((preempted - 640.0 / 650.0).abs() < 1e-9);
        assert_eq!(f.get("sched.threads"), Some(&FactValue::Int(4)));
        assert_eq!(f.get("sched.processes"), Some(&FactValue::Int(1)));
        let p99 = f
            .get("sched.runq_p99_us")
            .and_then(FactValue::as_f64)
            .unwrap();
        assert!((2000.0..10_000.0).contains(&p99), "p99 {p99} µs");
        let mean = f
            .get("sched.runq_mean_us")
            .and_then(FactValue::as_f64)
            .unwrap();
        assert!((mean - 3000.0).abs() < 1e-6, "mean {mean}");
        // 4 threads each on CPU half the time: 2 CPUs busy of 2.
        let busy = f
            .get("sched.cpu_busy_share")
            .and_then(FactValue::as_f64)
            .unwrap();
        assert!((busy - 1.0).abs() < 1e-9, "{busy}");
        assert_eq!(
            f.get("sched.classes.conn.threads"),
            Some(&FactValue::Int(4)),
            "{:?}",
            f.get("sched.classes")
        );
        assert_eq!(f.get("host.eevdf"), Some(&FactValue::Bool(true)));
        assert_eq!(f.get("host.kernel_minor"), Some(&FactValue::Int(18)));
        assert_eq!(
            f.get("host.wakeup_preemption"),
            Some(&FactValue::Text("on".into()))
        );
        assert_eq!(f.get("target.present"), Some(&FactValue::Bool(true)));
        assert_eq!(f.absent_reason("sched"), None);
        assert_eq!(f.absent_reason("target"), None);
    }

    #[test]
    fn sched_is_absent_with_reason_when_probe_failed() {
        let mut rec = testdata::oversubscribed();
        rec.probes[0].programs[0].error = Some("tracepoint not found".into());
        let partly = Facts::derive(&rec);
        assert!(partly.group("sched").is_none(), "partial data is not used");
        let reason = partly.absent_reason("sched").unwrap();
        assert!(reason.contains("attached only partly"), "{reason}");

        rec.probes[0].programs[1].error = Some("tracepoint not found".into());
        for s in &mut rec.slices {
            s.sched = None;
        }
        let f = Facts::derive(&rec);
        assert!(f.group("sched").is_none());
        let reason = f.absent_reason("sched").unwrap();
        assert!(reason.contains("did not attach"), "{reason}");
        assert!(reason.contains("tracepoint not found"), "{reason}");
        // One reason shared by every program is said once.
        assert_eq!(
            reason.matches("tracepoint not found").count(),
            1,
            "{reason}"
        );

        rec.probes.clear();
        let reason = Facts::derive(&rec)
            .absent_reason("sched")
            .unwrap()
            .to_string();
        assert!(reason.contains("not part of this recording"), "{reason}");
    }

    #[test]
    fn sched_is_absent_when_attached_but_no_slice_has_data() {
        let mut rec = testdata::oversubscribed();
        for s in &mut rec.slices {
            s.sched = None;
        }
        let f = Facts::derive(&rec);
        assert!(
            f.absent_reason("sched")
                .unwrap()
                .contains("no scheduler data")
        );
    }
}
