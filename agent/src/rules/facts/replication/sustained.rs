//! Replication lag that lasts, and the primary's longest pause between
//! writes: what tells a lagging secondary from the quantised lag of an
//! idle or lightly written set.
//!
//! Why: the primary's optime only moves when it writes. An idle primary
//! writes a no-op every 10 s (SERVER-23892; `periodicNoopIntervalSecs`), so
//! a sample taken after its newest no-op and before a secondary has it
//! shows a lag of exactly that interval, for a second or two in every ten;
//! the maximum over every sample crosses 10 s within minutes on a healthy,
//! idle set. A lag that holds for a window of samples, and exceeds the
//! primary's own longest pause between writes, is not that artefact.

use std::collections::BTreeMap;

use crate::recording::mongod::ReplSample;

/// How long a lag must hold to count: 30 s of samples, or the whole
/// recording when it is shorter.
pub const WINDOW_MS: u64 = 30_000;

/// The worst lag that held over a window: for each secondary and each
/// window of [`WINDOW_MS`] (or the recording's whole span when shorter),
/// the smallest lag seen in it; the largest of those, seconds, with the
/// member's label. `None` without a primary and a secondary in some sample.
pub fn sustained_lag(samples: &[(u64, &ReplSample)]) -> Option<(f64, String)> {
    // Each secondary's lags, in sample order: (time, seconds behind).
    let mut series: BTreeMap<String, Vec<(u64, f64)>> = BTreeMap::new();
    for (t, s) in samples {
        let Some(primary) = primary_optime(s) else {
            continue;
        };
        for m in s.members.iter().filter(|m| m.state == Some(2)) {
            if let Some(lag) = m.lag_s(primary) {
                series.entry(m.label()).or_default().push((*t, lag));
            }
        }
    }
    let span = samples.last()?.0.saturating_sub(samples.first()?.0);
    let window = WINDOW_MS.min(span);
    series
        .into_iter()
        .filter_map(|(label, lags)| Some((held(&lags, window)?, label)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
}

/// The optime of the sample's primary (state 1), ms; `None` without one.
pub fn primary_optime(s: &ReplSample) -> Option<i64> {
    s.members
        .iter()
        .find(|m| m.state == Some(1))
        .and_then(|m| m.optime_ms)
}

/// The largest, over windows of `window` ms starting at each sample that
/// has a whole window after it, of the smallest lag in the window.
fn held(lags: &[(u64, f64)], window: u64) -> Option<f64> {
    let last = lags.last()?.0;
    lags.iter()
        .enumerate()
        .filter(|(_, (t, _))| t + window <= last)
        .map(|(i, (t, _))| {
            lags[i..]
                .iter()
                .take_while(|(u, _)| *u <= t + window)
                .map(|(_, lag)| *lag)
                .fold(f64::INFINITY, f64::min)
        })
        .reduce(f64::max)
}

/// The primary's longest pause between writes, seconds: the largest step
/// between its distinct optimes over the samples (an idle primary's no-op
/// interval). `None` when its optime never moved.
pub fn primary_write_gap(samples: &[(u64, &ReplSample)]) -> Option<f64> {
    let mut optimes: Vec<i64> = samples
        .iter()
        .filter_map(|(_, s)| primary_optime(s))
        .collect();
    optimes.sort_unstable();
    optimes.dedup();
    optimes
        .windows(2)
        .map(|w| (w[1] - w[0]) as f64 / 1000.0)
        .reduce(f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::mongod::MemberSample;

    const T0: i64 = 1_700_000_000_000;

    fn member(id: i64, state: i64, optime_ms: i64) -> MemberSample {
        MemberSample {
            id,
            name: Some(format!("db{id}.example:27017")),
            state: Some(state),
            health: Some(1),
            optime_ms: Some(optime_ms),
            ..MemberSample::default()
        }
    }

    /// One sample a second for `secs`, the primary at `primary(i)` and one
    /// secondary at `secondary(i)`.
    fn run(
        secs: u64,
        primary: impl Fn(i64) -> i64,
        secondary: impl Fn(i64) -> i64,
    ) -> Vec<(u64, ReplSample)> {
        (0..secs)
            .map(|i| {
                let i = i as i64;
                let s = ReplSample {
                    members: vec![member(0, 1, primary(i)), member(1, 2, secondary(i))],
                    ..ReplSample::default()
                };
                (i as u64 * 1000, s)
            })
            .collect()
    }

    fn refs(v: &[(u64, ReplSample)]) -> Vec<(u64, &ReplSample)> {
        v.iter().map(|(t, s)| (*t, s)).collect()
    }

    #[test]
    fn an_idle_sets_no_op_lag_does_not_hold() {
        // No-ops every 10 s; the secondary has each one a second later.
        let noop = |i: i64| T0 + (i / 10) * 10_000;
        let v = run(120, noop, |i| noop((i - 1).max(0)));
        let s = refs(&v);
        let (held, _) = sustained_lag(&s).unwrap();
        assert_eq!(held, 0.0);
        assert_eq!(primary_write_gap(&s), Some(10.0));
    }

    #[test]
    fn a_secondary_behind_for_a_minute_holds_its_lag() {
        // Writes every second; the secondary 15 to 20 s behind.
        let v = run(
            90,
            |i| T0 + i * 1000,
            |i| T0 + i * 1000 - 15_000 - (i % 6) * 1000,
        );
        let s = refs(&v);
        let (held, who) = sustained_lag(&s).unwrap();
        assert_eq!(held, 15.0);
        assert_eq!(who, "db1.example:27017");
        assert_eq!(primary_write_gap(&s), Some(1.0));
    }

    #[test]
    fn one_late_sample_is_not_a_lag_that_holds() {
        let v = run(
            90,
            |i| T0 + i * 1000,
            |i| T0 + i * 1000 - if i == 40 { 12_000 } else { 1_000 },
        );
        let (held, _) = sustained_lag(&refs(&v)).unwrap();
        assert_eq!(held, 1.0);
    }

    #[test]
    fn a_recording_shorter_than_the_window_is_judged_whole() {
        let v = run(10, |i| T0 + i * 1000, |i| T0 + i * 1000 - 30_000);
        let (held, _) = sustained_lag(&refs(&v)).unwrap();
        assert_eq!(held, 30.0);
    }
}
