//! The allocator probes' budget: their windows cost the target probe hits
//! × the calibrated cost per hit, so the agent measures what each of its
//! windows cost (as a share of the target's CPU time in that window) and
//! spaces the allocator windows out when that share is over the budget
//! (default 0.5 %), back towards the configured period when it is well
//! under. The share spent is exported (`mdiag_alloc_probe_cost_ratio`).

use std::time::Duration;

/// The longest period between allocator windows the throttle goes to.
pub const MAX_EVERY: Duration = Duration::from_secs(3600);

/// Cumulative cost readings of one target (the allocator record's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    pub probe_hits: u64,
    pub pair_cost_ns: u64,
    pub target_cpu_ns: u64,
}

impl Spent {
    /// The share of the target's CPU the probes cost between `self`
    /// (earlier) and `now`; `None` when the target used no CPU.
    pub fn share_until(&self, now: &Spent) -> Option<f64> {
        let hits = now.probe_hits.saturating_sub(self.probe_hits);
        let cpu = now.target_cpu_ns.saturating_sub(self.target_cpu_ns);
        (cpu > 0).then(|| hits as f64 * now.pair_cost_ns as f64 / cpu as f64)
    }
}

/// The period between allocator windows after a window of the agent that
/// cost `share` of the target's CPU: longer in proportion when over
/// `budget` (with a 10 % margin), halved back towards `base` when under a
/// quarter of it, unchanged otherwise.
pub fn next_every(every: Duration, base: Duration, share: f64, budget: f64) -> Duration {
    if budget <= 0.0 || !share.is_finite() {
        return every;
    }
    if share > budget {
        let longer = every.mul_f64((share / budget * 1.1).min(1e6));
        longer.min(MAX_EVERY)
    } else if share < budget / 4.0 && every > base {
        (every / 2).max(base)
    } else {
        every
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn over_budget_spaces_windows_out_in_proportion() {
        // Spent 2 % against 0.5 %: four times (and a margin) less often.
        let e = next_every(S(20), S(20), 0.02, 0.005);
        assert!(e >= S(80) && e <= S(90), "{e:?}");
        // Never beyond an hour.
        assert_eq!(next_every(S(20), S(20), 50.0, 0.005), MAX_EVERY);
    }

    #[test]
    fn under_budget_comes_back_to_the_configured_period_not_beyond() {
        assert_eq!(next_every(S(160), S(20), 0.0001, 0.005), S(80));
        assert_eq!(next_every(S(30), S(20), 0.0001, 0.005), S(20));
        assert_eq!(next_every(S(20), S(20), 0.0, 0.005), S(20));
        // Within budget, above a quarter of it: unchanged (no oscillation).
        assert_eq!(next_every(S(40), S(20), 0.003, 0.005), S(40));
    }

    #[test]
    fn a_window_s_share_is_its_own_hits_over_its_own_cpu() {
        let a = Spent {
            probe_hits: 1_000,
            pair_cost_ns: 2_000,
            target_cpu_ns: 1_000_000_000,
        };
        let b = Spent {
            probe_hits: 6_000,
            pair_cost_ns: 2_000,
            target_cpu_ns: 2_000_000_000,
        };
        // 5,000 hits × 2 µs = 10 ms of 1 s: 1 %.
        assert_eq!(a.share_until(&b), Some(0.01));
        assert_eq!(b.share_until(&b), None);
    }
}
