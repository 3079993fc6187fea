//! The sched family's summary figures, typed and computed once from the
//! recording's merged window: the `sched` fact group writes these figures
//! from them and the report's sched measurements read them as fields (it
//! used to read them back from the fact group by name, with a silent 0 for
//! a name it did not find).

use std::collections::BTreeMap;

use super::facts::{ClassTotals, Counts};
use super::section::{SchedSlice, ThreadSlice};
use crate::hist::log2_hist_percentile_ns;
use crate::kit::fact::{family_unavailable, ratio, thread_class};
use crate::kit::family::FamilyWindow;

/// Rates over [`Self::duration_s`], the time the sched section covered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SchedFigures {
    /// "target" (the target's threads) or "host" (every non-idle task).
    pub scope: &'static str,
    pub duration_s: f64,
    /// Every switch on the host's CPUs, per second.
    pub switches_per_s: f64,
    /// The observed threads' switches (voluntary + involuntary), per second.
    pub observed_switches_per_s: f64,
    pub involuntary_per_s: f64,
    /// Involuntary / observed switches.
    pub involuntary_share: f64,
    /// Run-queue delay percentiles from the log2 histogram, µs.
    pub runq_p50_us: f64,
    pub runq_p90_us: f64,
    pub runq_p99_us: f64,
    /// Observed threads.
    pub threads: u64,
    /// The threads' counts summed per thread class (see
    /// [`thread_class`]).
    pub classes: BTreeMap<String, ClassFigures>,
}

/// One thread class's figures, summed over its threads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClassFigures {
    pub threads: u64,
    pub voluntary: u64,
    pub involuntary: u64,
    pub preempted: u64,
    /// Involuntary / (voluntary + involuntary) switches.
    pub involuntary_share: f64,
    pub runq_delays: u64,
    /// Mean run-queue delay, µs (exact: from the per-thread totals).
    pub runq_mean_us: f64,
    pub oncpu_s: f64,
}

impl SchedFigures {
    /// The figures of a window of a recording (all its slices merged);
    /// `Err` with the reason when the sched probe did not attach or no slice
    /// carries scheduler data.
    pub fn of(w: &FamilyWindow<SchedSlice>) -> Result<SchedFigures, String> {
        let s = sched_section(w)?;
        let duration_s = w.section_ms as f64 / 1000.0;
        let threads: BTreeMap<u32, &ThreadSlice> = s.threads.iter().map(|t| (t.tid, t)).collect();
        let observed = s.voluntary.saturating_add(s.involuntary);
        let pct_us =
            |p: f64| log2_hist_percentile_ns(&s.runq_hist_log2_ns, p).unwrap_or(0.0) / 1000.0;
        Ok(SchedFigures {
            scope: if w.targeted { "target" } else { "host" },
            duration_s,
            switches_per_s: ratio(s.switches_total as f64, duration_s),
            observed_switches_per_s: ratio(observed as f64, duration_s),
            involuntary_per_s: ratio(s.involuntary as f64, duration_s),
            involuntary_share: ratio(s.involuntary as f64, observed as f64),
            runq_p50_us: pct_us(0.50),
            runq_p90_us: pct_us(0.90),
            runq_p99_us: pct_us(0.99),
            threads: threads.len() as u64,
            classes: classes(&threads),
        })
    }
}

/// The window's sched section, or why there is none.
pub(super) fn sched_section<'w>(
    w: &FamilyWindow<'w, SchedSlice>,
) -> Result<&'w SchedSlice, String> {
    if let Some(reason) = family_unavailable(w.probes, super::FAMILY) {
        return Err(reason);
    }
    w.section.ok_or_else(|| {
        format!(
            "the sched probe attached but the recording has no scheduler data ({} slices)",
            w.slices
        )
    })
}

/// The threads' counts summed per thread name class.
fn classes(threads: &BTreeMap<u32, &ThreadSlice>) -> BTreeMap<String, ClassFigures> {
    let mut classes: BTreeMap<String, ClassTotals> = BTreeMap::new();
    for t in threads.values() {
        let c = classes.entry(thread_class(&t.comm)).or_default();
        c.threads += 1;
        c.n.add(&Counts::from(*t));
    }
    classes
        .into_iter()
        .map(|(name, ClassTotals { threads, n: c })| {
            let switched = c.voluntary.saturating_add(c.involuntary);
            let figures = ClassFigures {
                threads,
                voluntary: c.voluntary,
                involuntary: c.involuntary,
                preempted: c.preempted,
                involuntary_share: ratio(c.involuntary as f64, switched as f64),
                runq_delays: c.runq_delays,
                runq_mean_us: ratio(c.runq_delay_ns as f64, c.runq_delays as f64) / 1000.0,
                oncpu_s: c.oncpu_ns as f64 / 1e9,
            };
            (name, figures)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{FactValue, Facts, testdata};

    /// The facts are written from the figures: each figure equals the fact
    /// of its name (classes too), on a recording where they are non-zero.
    #[test]
    fn the_facts_carry_the_figures() {
        let rec = testdata::oversubscribed();
        let whole = rec.window();
        let f = SchedFigures::of(&rec.family_window(&whole))
        .unwrap();
        let facts = Facts::derive(&rec);
        let fact = |path: &str| match facts.get(&format!("sched.{path}")) {
            Some(FactValue::Float(x)) => *x,
            Some(FactValue::Int(i)) => *i as f64,
            other => panic!("sched.{path}: {other:?}"),
        };
        for (name, value) in [
            ("duration_s", f.duration_s),
            ("switches_per_s", f.switches_per_s),
            ("observed_switches_per_s", f.observed_switches_per_s),
            ("involuntary_per_s", f.involuntary_per_s),
            ("involuntary_share", f.involuntary_share),
            ("runq_p50_us", f.runq_p50_us),
            ("runq_p90_us", f.runq_p90_us),
            ("runq_p99_us", f.runq_p99_us),
            ("threads", f.threads as f64),
        ] {
            assert_eq!(fact(name), value, "{name}");
        }
        assert!(f.involuntary_per_s > 0.0 && f.runq_p99_us > 0.0, "{f:?}");
        assert!(!f.classes.is_empty());
        for (class, c) in &f.classes {
            assert_eq!(fact(&format!("classes.{class}.threads")), c.threads as f64);
            assert_eq!(
                fact(&format!("classes.{class}.involuntary_share")),
                c.involuntary_share
            );
            assert_eq!(
                fact(&format!("classes.{class}.runq_mean_us")),
                c.runq_mean_us
            );
        }
    }
}
