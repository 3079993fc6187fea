//! The report's timeline: one point per recorded slice (about a second), so
//! that checkpoint windows can be lined up with lock waits, preemptions and
//! network work — the charts of the HTML report are drawn from it.
//!
//! Checkpoint windows are placed on the recording's time axis from the slice
//! in which each checkpoint returned: it ended by that slice's end and began
//! its duration earlier. Their probe timestamps are CLOCK_MONOTONIC, which
//! the recording does not map to wall time more finely than a slice, so a
//! window's position is good to about one second (its length is exact).

use serde::{Deserialize, Serialize};

use crate::recording::model::Recording;

/// Series over the recording, one entry per slice, in time order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// Slice start, seconds after the recording began.
    pub start_s: Vec<f64>,
    /// Slice length, seconds.
    pub duration_s: Vec<f64>,
    /// Involuntary switches of observed threads per second (`None`: no
    /// scheduler data in that slice).
    pub involuntary_per_s: Vec<Option<f64>>,
    /// Futex wait of observed threads, ms per second of wall time.
    pub futex_wait_ms_per_s: Vec<Option<f64>>,
    /// NET_RX softirq time, all CPUs, ms per second.
    pub net_rx_ms_per_s: Vec<Option<f64>>,
    /// mongod's operations (all opcounters) per second, from this slice's
    /// serverStatus sample and the previous one (`None` without both).
    #[serde(default)]
    pub mongod_ops_per_s: Vec<Option<f64>>,
    /// Checkpoint windows, seconds after the recording began (see the
    /// module notes on their precision).
    pub checkpoints: Vec<TimelineWindow>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineWindow {
    pub start_s: f64,
    pub end_s: f64,
    /// Still running when the recording ended.
    pub in_progress: bool,
}

impl Timeline {
    /// The timeline of `rec`; `None` without slices.
    pub fn build(rec: &Recording) -> Option<Timeline> {
        if rec.slices.is_empty() {
            return None;
        }
        let mut t = Timeline::default();
        let mut previous: Option<(u64, i64)> = None;
        for s in &rec.slices {
            let sample = s
                .mongod
                .as_ref()
                .and_then(|m| Some((m.at_ms?, m.status.as_ref()?.ops_total()?)));
            t.mongod_ops_per_s.push(match (previous, sample) {
                (Some((t0, o0)), Some((t1, o1))) if t1 > t0 && o1 >= o0 => {
                    Some((o1 - o0) as f64 * 1000.0 / (t1 - t0) as f64)
                }
                _ => None,
            });
            if sample.is_some() {
                previous = sample;
            }
            let start = s.start_ms as f64 / 1000.0;
            let len = s.duration_ms as f64 / 1000.0;
            let per_s = |v: f64| if len > 0.0 { v / len } else { 0.0 };
            t.start_s.push(start);
            t.duration_s.push(len);
            t.involuntary_per_s
                .push(s.sched.as_ref().map(|x| per_s(x.involuntary as f64)));
            t.futex_wait_ms_per_s.push(
                s.syscalls
                    .as_ref()
                    .map(|x| per_s(crate::family::syscalls::unit::futex_wait_ms(x))),
            );
            t.net_rx_ms_per_s.push(
                s.softirq
                    .as_ref()
                    .map(|x| per_s(crate::family::softirq::unit::net_rx_ms(x))),
            );
            let end = start + len;
            for c in s.wiredtiger.iter().flat_map(|w| &w.checkpoints) {
                let d = c.duration_ns as f64 / 1e9;
                t.checkpoints.push(TimelineWindow {
                    start_s: (end - d).max(0.0),
                    end_s: end,
                    in_progress: c.in_progress,
                });
            }
        }
        Some(t)
    }

    /// The recording's length in seconds (end of the last slice).
    pub fn end_s(&self) -> f64 {
        self.start_s
            .last()
            .zip(self.duration_s.last())
            .map_or(0.0, |(s, d)| s + d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::model::{Checkpoint, WiredTigerSlice};
    use crate::rules::testdata;

    #[test]
    fn one_point_per_slice_and_checkpoints_end_with_their_slice() {
        let mut rec = testdata::oversubscribed();
        rec.slices[3].wiredtiger = Some(WiredTigerSlice {
            checkpoints: vec![Checkpoint {
                tid: 7,
                start_ns: 1,
                duration_ns: 2_500_000_000,
                ret: 0,
                in_progress: false,
            }],
            drops: Default::default(),
        });
        let t = Timeline::build(&rec).unwrap();
        assert_eq!(t.start_s.len(), rec.slices.len());
        assert_eq!(t.end_s(), 10.0);
        // 650 involuntary switches in each 1 s slice.
        assert_eq!(t.involuntary_per_s[0], Some(650.0));
        assert_eq!(t.futex_wait_ms_per_s[0], None);
        assert_eq!(
            t.checkpoints,
            [TimelineWindow {
                start_s: 1.5,
                end_s: 4.0,
                in_progress: false
            }]
        );
    }

    #[test]
    fn mongod_operations_per_second_between_samples() {
        use crate::recording::mongod::MongodSlice;
        use crate::recording::server_status::ServerStatusSample;
        let mut rec = testdata::oversubscribed();
        for (i, s) in rec.slices.iter_mut().enumerate() {
            // Slice 2 has no sample; the rate resumes across the gap.
            if i == 2 {
                continue;
            }
            let inserts = 500 * i as i64;
            s.mongod = Some(MongodSlice {
                at_ms: Some(s.start_ms + 100),
                status: Some(ServerStatusSample::parse_with(
                    &|p| (p == "opcounters.insert").then_some(inserts),
                    vec!["opcounters".into()],
                )),
                missing: None,
                poll_ms: None,
                ..Default::default()
            });
        }
        let t = Timeline::build(&rec).unwrap();
        assert_eq!(t.mongod_ops_per_s[0], None);
        assert_eq!(t.mongod_ops_per_s[1], Some(500.0));
        assert_eq!(t.mongod_ops_per_s[2], None);
        assert_eq!(t.mongod_ops_per_s[3], Some(500.0));
    }

    #[test]
    fn no_slices_no_timeline() {
        let mut rec = testdata::oversubscribed();
        rec.slices.clear();
        assert!(Timeline::build(&rec).is_none());
    }
}
