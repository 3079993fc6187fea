//! Windows of mongod's serverStatus samples. A sample is a snapshot:
//! gauges (connections, cache bytes, queues) and counters cumulative since
//! mongod started (opcounters, eviction time, lock waits). Summing samples is
//! meaningless, so:
//!
//! - the merged slice's `mongod` is the newest sample with a status (else the
//!   newest reason it is missing): every gauge as it was last seen;
//! - [`MongodWindow`] keeps the first and the last sample with a status, so a
//!   counter's increase over the window is `last - first`
//!   ([`MongodWindow::delta`], over [`MongodWindow::span_ms`]), and counts the
//!   seconds with and without a sample, by reason.
//!
//! What this loses against `mongo::summary`, which walks every sample: the
//! maxima and minima of gauges inside the window (most connections, fewest
//! tickets, fullest cache); a restart inside the window (the summary adds up
//! each step and sees the counter fall; `delta` sees only the ends); and gaps
//! longer than `summary::MAX_GAP_MS` inside the window (the summary leaves
//! them out of rates).

use std::collections::BTreeMap;

use super::{Mergeable, OTHERS_NAME, add};
use crate::recording::model::Slice;
use crate::recording::mongod::MongodSlice;
use crate::recording::server_status::ServerStatusSample;

impl Mergeable for MongodSlice {
    /// The newest sample with a status, else the newest reason for none.
    fn merge(&mut self, later: &Self) {
        let take =
            later.status.is_some() || (self.status.is_none() && *later != MongodSlice::default());
        if take {
            self.clone_from(later);
        }
    }
}

/// mongod over a window (see the module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MongodWindow {
    /// The oldest slice's sample with a status; `at_ms` is the slice's start
    /// when the sample has none (as the summary takes it).
    pub first: Option<MongodSlice>,
    /// The newest one.
    pub last: Option<MongodSlice>,
    /// Slices with a sample.
    pub seconds_with_sample: u64,
    /// Slices polled without a sample, by reason ("no sample" when none is
    /// given); bounded to `top_n` reasons plus [`OTHERS_NAME`].
    pub missing: BTreeMap<String, u64>,
}

impl MongodWindow {
    /// Adds the slice that follows.
    pub fn push(&mut self, slice: &Slice) {
        let Some(m) = &slice.mongod else { return };
        if m.status.is_some() {
            let mut sample = m.clone();
            sample.at_ms.get_or_insert(slice.start_ms);
            if self.first.is_none() {
                self.first = Some(sample.clone());
            }
            self.last = Some(sample);
            add(&mut self.seconds_with_sample, 1);
        } else {
            let why = m.missing.clone().unwrap_or_else(|| "no sample".into());
            add(self.missing.entry(why).or_default(), 1);
        }
    }

    /// Time between the first and the last sample, ms (`None` without two
    /// samples at different times).
    pub fn span_ms(&self) -> Option<u64> {
        let first = self.first.as_ref()?.at_ms?;
        let last = self.last.as_ref()?.at_ms?;
        (last > first).then(|| last - first)
    }

    /// A counter's increase from the first to the last sample; a decrease is
    /// a restart (the counter began again at 0), as in the summary. `None`
    /// when either sample lacks it.
    pub fn delta(&self, counter: impl Fn(&ServerStatusSample) -> Option<i64>) -> Option<i64> {
        let value = |m: &Option<MongodSlice>| m.as_ref()?.status.as_ref().and_then(&counter);
        let (a, b) = (value(&self.first)?, value(&self.last)?);
        Some(if b >= a { b - a } else { b.max(0) })
    }
}

impl Mergeable for MongodWindow {
    fn merge(&mut self, later: &Self) {
        if self.first.is_none() {
            self.first.clone_from(&later.first);
        }
        if later.last.is_some() {
            self.last.clone_from(&later.last);
        }
        add(&mut self.seconds_with_sample, later.seconds_with_sample);
        for (why, n) in &later.missing {
            add(self.missing.entry(why.clone()).or_default(), *n);
        }
    }

    /// Keeps the `top_n` most frequent reasons (ties: by reason).
    fn bound(&mut self, top_n: usize) {
        let others = self.missing.remove(OTHERS_NAME).unwrap_or(0);
        let mut reasons: Vec<(String, u64)> =
            std::mem::take(&mut self.missing).into_iter().collect();
        reasons.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let folded = reasons
            .iter()
            .skip(top_n)
            .fold(others, |acc, (_, n)| acc.saturating_add(*n));
        reasons.truncate(top_n);
        self.missing = reasons.into_iter().collect();
        if folded > 0 {
            self.missing.insert(OTHERS_NAME.into(), folded);
        }
    }
}
