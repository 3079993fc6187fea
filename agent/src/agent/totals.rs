//! What a target's metrics count since the agent first watched it:
//! counters and histograms that only go up (Prometheus computes rates from
//! them), added slice by slice so nothing is counted twice and a window's
//! evaluation does not have to keep old slices. Fixed size: a few counters
//! and two log2 histograms per target.

use crate::recording::Slice;

/// Totals of one target since it was first watched.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Totals {
    pub voluntary: u64,
    pub involuntary: u64,
    pub wakeup_preemptions: u64,
    pub migrations: u64,
    /// Run-queue delays, log2 buckets of ns.
    pub runq_hist_log2_ns: Vec<u64>,
    pub checkpoints: u64,
    /// Checkpoint durations, log2 buckets of ns, and their exact sum.
    pub checkpoint_hist_log2_ns: Vec<u64>,
    pub checkpoint_ns: u64,
    /// (family, events its kernel side could not count).
    pub drops: Vec<(&'static str, u64)>,
}

impl Totals {
    /// Adds one slice.
    pub fn add(&mut self, s: &Slice) {
        if let Some(sched) = &s.sched {
            self.voluntary += sched.voluntary;
            self.involuntary += sched.involuntary;
            self.wakeup_preemptions += sched.wakeup_preemptions;
            self.migrations += sched.migrations;
            add_hist(&mut self.runq_hist_log2_ns, &sched.runq_hist_log2_ns);
        }
        if let Some(wt) = &s.wiredtiger {
            for c in wt.checkpoints.iter().filter(|c| !c.in_progress) {
                self.checkpoints += 1;
                self.checkpoint_ns = self.checkpoint_ns.saturating_add(c.duration_ns);
                let bucket = (63 - c.duration_ns.max(1).leading_zeros()) as usize;
                let mut one = vec![0; bucket + 1];
                one[bucket] = 1;
                add_hist(&mut self.checkpoint_hist_log2_ns, &one);
            }
        }
        for (family, section) in s.sections() {
            if let Some(section) = section {
                self.drop(family.name(), section.drops_total());
            }
        }
    }

    fn drop(&mut self, family: &'static str, n: u64) {
        match self.drops.iter_mut().find(|(f, _)| *f == family) {
            Some((_, total)) => *total = total.saturating_add(n),
            None => self.drops.push((family, n)),
        }
    }
}

/// Adds `more` into `hist` bucket by bucket (the longer length wins).
fn add_hist(hist: &mut Vec<u64>, more: &[u64]) {
    if hist.len() < more.len() {
        hist.resize(more.len(), 0);
    }
    for (h, m) in hist.iter_mut().zip(more) {
        *h = h.saturating_add(*m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::testdata;

    #[test]
    fn totals_are_the_sums_of_the_slices() {
        let rec = testdata::oversubscribed();
        let mut t = Totals::default();
        for s in &rec.slices {
            t.add(s);
        }
        let n = rec.slices.len() as u64;
        assert_eq!(t.involuntary, 650 * n);
        assert_eq!(t.voluntary, 70 * n);
        assert_eq!(t.wakeup_preemptions, 160 * n);
        assert_eq!(t.runq_hist_log2_ns.iter().sum::<u64>(), 720 * n);
        assert_eq!(t.drops, vec![("sched", 0)]);
    }

    #[test]
    fn a_checkpoint_lands_in_its_log2_bucket() {
        let s = Slice {
            wiredtiger: Some(crate::recording::WiredTigerSlice {
                checkpoints: vec![crate::recording::Checkpoint {
                    duration_ns: 3_000_000,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Slice::default()
        };
        let mut t = Totals::default();
        t.add(&s);
        // 3 ms is in [2^21, 2^22) ns.
        assert_eq!(t.checkpoint_hist_log2_ns.len(), 22);
        assert_eq!(t.checkpoint_hist_log2_ns[21], 1);
        assert_eq!((t.checkpoints, t.checkpoint_ns), (1, 3_000_000));
    }
}
