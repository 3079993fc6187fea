//! Which FTDC samples `explain --ftdc` explains: one run of one mongod, and
//! by default its newest hour *by time*.
//!
//! Why: a `diagnostic.data` directory often holds more than one life of
//! mongod — a restart, a copy of `metrics.interim` from another day, FTDC
//! switched off for a while. Explained as one recording, the seconds in
//! between count as recorded time (a real directory gave "recorded for
//! 38892481 s", 450 days, from a one-hour window) and per-second rates mix two
//! processes. So the samples are cut where mongod restarted (`uptimeMillis`
//! went down) or where no sample came for [`MAX_GAP`], and the newest part is
//! kept; what was left out is said in one line. Without `--from/--to` the
//! newest hour is taken by time, not as the newest 3600 samples (FTDC can
//! sample faster than once a second).

use std::collections::VecDeque;

use chrono::{DateTime, Duration, Utc};

use super::ftdc::FtdcSample;

/// Longer than this without a sample is a break (mongod samples every second
/// by default; a busy host can delay a sample by seconds, not minutes).
pub const MAX_GAP: Duration = Duration::minutes(5);
/// The default window: the newest hour.
pub const DEFAULT_WINDOW: Duration = Duration::hours(1);

/// Why older samples were left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cut {
    /// mongod restarted between these two samples (its uptime went down).
    Restart {
        before: DateTime<Utc>,
        after: DateTime<Utc>,
    },
    /// No sample between these two times.
    Gap {
        before: DateTime<Utc>,
        after: DateTime<Utc>,
    },
    /// Older than the default window.
    Window { from: DateTime<Utc> },
}

/// What [`keep_newest_run`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trimmed {
    pub dropped: u64,
    pub cut: Cut,
}

impl Trimmed {
    /// One line for stderr.
    pub fn describe(&self) -> String {
        let why = match &self.cut {
            Cut::Restart { before, after } => format!(
                "mongod restarted between {} and {}",
                before.format("%Y-%m-%d %H:%M:%S UTC"),
                after.format("%Y-%m-%d %H:%M:%S UTC")
            ),
            Cut::Gap { before, after } => format!(
                "no FTDC sample from {} to {} (mongod or FTDC was stopped)",
                before.format("%Y-%m-%d %H:%M:%S UTC"),
                after.format("%Y-%m-%d %H:%M:%S UTC")
            ),
            Cut::Window { from } => format!(
                "only the newest hour is explained by default, from {}",
                from.format("%Y-%m-%d %H:%M:%S UTC")
            ),
        };
        format!(
            "{} older FTDC samples left out: {why}; choose others with --from/--to",
            self.dropped
        )
    }
}

/// Keeps the newest run of `samples` (in time order): drops everything up to
/// the newest restart or gap, then, when `default_window`, everything older
/// than [`DEFAULT_WINDOW`] before the newest sample. Returns what was left
/// out and why (the reason nearest the kept samples: a restart inside the
/// hour is named rather than the hour).
pub fn keep_newest_run(
    samples: &mut VecDeque<FtdcSample>,
    default_window: bool,
) -> Option<Trimmed> {
    let mut cut = None;
    let mut start = 0;
    for i in (1..samples.len()).rev() {
        let (a, b) = (&samples[i - 1], &samples[i]);
        let restarted = matches!(
            (a.status.uptime_ms, b.status.uptime_ms),
            (Some(x), Some(y)) if y < x
        );
        if restarted {
            cut = Some(Cut::Restart {
                before: a.t,
                after: b.t,
            });
        } else if b.t - a.t > MAX_GAP {
            cut = Some(Cut::Gap {
                before: a.t,
                after: b.t,
            });
        } else {
            continue;
        }
        start = i;
        break;
    }
    if default_window && let Some(newest) = samples.back().map(|s| s.t) {
        let from = newest - DEFAULT_WINDOW;
        let in_window = samples.partition_point(|s| s.t < from);
        if in_window > start {
            start = in_window;
            cut = Some(Cut::Window { from });
        }
    }
    let cut = cut?;
    samples.drain(..start);
    Some(Trimmed {
        dropped: start as u64,
        cut,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::server_status::ServerStatusSample;

    fn at(secs: i64, uptime_s: i64) -> FtdcSample {
        FtdcSample {
            t: DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap(),
            status: ServerStatusSample {
                uptime_ms: Some(uptime_s * 1000),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn run(from: i64, n: i64, step: i64, uptime0: i64) -> Vec<FtdcSample> {
        (0..n)
            .map(|i| at(from + i * step, uptime0 + i * step))
            .collect()
    }

    #[test]
    fn one_steady_run_inside_the_hour_is_kept_whole() {
        let mut s: VecDeque<_> = run(0, 600, 1, 100).into();
        assert_eq!(keep_newest_run(&mut s, true), None);
        assert_eq!(s.len(), 600);
    }

    #[test]
    fn a_restart_keeps_the_newest_process_only() {
        let mut v = run(0, 100, 1, 5000);
        v.extend(run(100, 50, 1, 1)); // uptime went from 5099 s to 1 s
        let mut s: VecDeque<_> = v.into();
        let t = keep_newest_run(&mut s, false).unwrap();
        assert_eq!(t.dropped, 100);
        assert!(matches!(t.cut, Cut::Restart { .. }));
        assert_eq!(s.len(), 50);
        assert!(
            t.describe().contains("mongod restarted"),
            "{}",
            t.describe()
        );
    }

    #[test]
    fn a_long_silence_is_a_break_and_a_short_one_is_not() {
        // The shape of the real fixture: a file from one day, and an interim
        // file written 450 days later by a younger process.
        let mut v = run(0, 100, 1, 90_000);
        v.extend(run(100 + 450 * 86_400, 20, 1, 95_000));
        let mut s: VecDeque<_> = v.into();
        let t = keep_newest_run(&mut s, false).unwrap();
        assert!(matches!(t.cut, Cut::Gap { .. }), "{t:?}");
        assert_eq!((t.dropped, s.len()), (100, 20));
        // 4 minutes without a sample: still the same run.
        let mut v = run(0, 100, 1, 0);
        v.extend(run(100 + 240, 10, 1, 340));
        let mut s: VecDeque<_> = v.into();
        assert_eq!(keep_newest_run(&mut s, false), None);
        assert_eq!(s.len(), 110);
    }

    #[test]
    fn the_default_window_is_an_hour_of_time_not_of_samples() {
        // Ten samples a second for two hours: the newest hour is 36 000 samples.
        let v: Vec<FtdcSample> = (0..72_000)
            .map(|i| {
                let mut s = at(0, 0);
                s.t += Duration::milliseconds(i * 100);
                s.status.uptime_ms = Some(i * 100);
                s
            })
            .collect();
        let mut s: VecDeque<_> = v.into();
        let t = keep_newest_run(&mut s, true).unwrap();
        assert!(matches!(t.cut, Cut::Window { .. }));
        let span = s.back().unwrap().t - s.front().unwrap().t;
        assert!(
            span <= DEFAULT_WINDOW && span > DEFAULT_WINDOW - Duration::seconds(1),
            "{span}"
        );
        // With --from/--to the window is the caller's.
        let mut s: VecDeque<_> = run(0, 7200, 1, 0).into();
        assert_eq!(keep_newest_run(&mut s, false), None);
        assert_eq!(s.len(), 7200);
    }
}
