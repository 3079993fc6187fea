//! The allocator probes' budget: a window costs the target probe hits × the
//! calibrated cost of a probe pair, and the agent keeps that under
//! `alloc_budget` (default 0.5 %) of the target's CPU time *before* it
//! spends it, not after.
//!
//! Design: a credit, in nanoseconds of target CPU, that grows by `budget` ×
//! the CPU the target uses (read from `/proc` when the agent checks) and
//! shrinks by what each window cost (hits × pair cost). A window opens only
//! when the credit covers its **projected** cost: its length × the target's
//! CPU rate (CPU ns per ns, measured over at least a second) × the share of
//! that CPU the probes took in earlier windows (hits per second of target
//! CPU × pair cost). Nothing is known before the first window, so the first
//! one is a probe window, a tenth of `alloc_window`, projected at the worst
//! case (every CPU nanosecond of the target spent in the probes). While a
//! window runs, the agent's poll reads the hit counter every few
//! milliseconds and closes the window early once its cost passes the
//! allowance (the projection × [`OVERRUN`], never more than the credit),
//! so a burst of allocations mid-window cannot overspend either. The credit
//! is capped at [`MAX_CREDIT_WINDOWS`] full windows, so an idle stretch
//! does not buy a burst later, and it may go negative after an overrun:
//! the next window waits until it is paid back. Windows are also never
//! closer than the configured period (`alloc_window / alloc_budget`, the
//! worst case's spacing). An idle target (no CPU) earns no credit: no
//! window opens, nothing is divided by zero.
//!
//! The share spent in each rule window is exported
//! (`mdiag_alloc_probe_cost_ratio`), with the period the projection allows
//! now (`mdiag_alloc_window_period_seconds`). The arithmetic here is pure
//! (times are offsets from any origin); `family/alloc/probe/paced.rs` drives it.

use std::time::Duration;

/// The first window's length, as a fraction of `alloc_window`.
pub const PROBE_FRACTION: u32 = 10;
/// The shortest probe window (shorter ones measure attach noise).
pub const MIN_PROBE: Duration = Duration::from_millis(10);
/// A window whose cost passes its projection by this factor closes early.
pub const OVERRUN: f64 = 1.5;
/// The credit is capped at this many full windows' projected cost.
pub const MAX_CREDIT_WINDOWS: f64 = 2.0;
/// The target's CPU rate is measured over spans at least this long (its
/// CPU time in `/proc` counts clock ticks).
pub const RATE_SPAN: Duration = Duration::from_secs(1);
/// The highest share of the target's CPU a window can be learnt to cost:
/// all of it (the probes run on the target's CPU time).
pub const MAX_SHARE: f64 = 1.0;
/// The longest wait the throttle asks for before it looks again.
pub const MAX_WAIT: Duration = Duration::from_secs(3600);

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

/// What the throttle says to do now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Plan {
    /// Open a window of `len`; close it early once its probes cost more
    /// than `allowance_ns` of target CPU.
    Open { len: Duration, allowance_ns: f64 },
    /// Nothing now: look again at this time.
    Wait(Duration),
}

/// The cost of `hits` probe pairs, ns of target CPU.
pub fn cost_ns(hits: u64, pair_cost_ns: u64) -> f64 {
    hits as f64 * pair_cost_ns as f64
}

/// Whether a window that has seen `hits` so far is over its allowance.
pub fn over_allowance(hits: u64, pair_cost_ns: u64, allowance_ns: f64) -> bool {
    cost_ns(hits, pair_cost_ns) > allowance_ns
}

/// The projective throttle of one target's allocator windows.
#[derive(Debug, Clone)]
pub struct Throttle {
    budget: f64,
    window: Duration,
    min_every: Duration,
    credit_ns: f64,
    /// The last CPU reading: (time, target CPU ns).
    last: Option<(Duration, u64)>,
    /// Where the span the CPU rate is measured over started.
    span: Option<(Duration, u64)>,
    /// Target CPU ns per ns of wall time, over the last span.
    cpu_rate: Option<f64>,
    /// Probe cost per ns of target CPU inside windows (hits per CPU
    /// second × pair cost / 1 s), from the windows so far.
    cost_share: Option<f64>,
    last_open: Option<Duration>,
}

impl Throttle {
    /// A throttle for `budget` (share of the target's CPU), full windows of
    /// `window`, no two window starts closer than `min_every`.
    pub fn new(budget: f64, window: Duration, min_every: Duration) -> Self {
        Self {
            budget: if budget.is_finite() {
                budget.max(0.0)
            } else {
                0.0
            },
            window,
            min_every,
            credit_ns: 0.0,
            last: None,
            span: None,
            cpu_rate: None,
            cost_share: None,
            last_open: None,
        }
    }

    /// A reading of the target's cumulative CPU time at `now`.
    pub fn observe(&mut self, now: Duration, cpu_ns: u64) {
        if let Some((_, c)) = self.last {
            self.credit_ns += self.budget * cpu_ns.saturating_sub(c) as f64;
        }
        self.last = Some((now, cpu_ns));
        match self.span {
            Some((t, c)) if now.saturating_sub(t) >= RATE_SPAN => {
                let wall = now.saturating_sub(t).as_nanos() as f64;
                self.cpu_rate = Some(cpu_ns.saturating_sub(c) as f64 / wall);
                self.span = Some((now, cpu_ns));
            }
            Some(_) => {}
            None => self.span = Some((now, cpu_ns)),
        }
        if let Some(full) = self.projected_ns(self.window) {
            self.credit_ns = self.credit_ns.min(full * MAX_CREDIT_WINDOWS);
        }
    }

    /// The projected cost of a window of `len` now (`None` before the
    /// target's CPU rate is known); the worst case before any window.
    pub fn projected_ns(&self, len: Duration) -> Option<f64> {
        let rate = self.cpu_rate?;
        Some(self.cost_share.unwrap_or(1.0) * rate * len.as_nanos() as f64)
    }

    /// The next window's length: a probe window while nothing is known.
    fn next_len(&self) -> Duration {
        if self.cost_share.is_some() {
            self.window
        } else {
            (self.window / PROBE_FRACTION)
                .max(MIN_PROBE)
                .min(self.window)
        }
    }

    /// What to do at `now`.
    pub fn plan(&self, now: Duration) -> Plan {
        let wait = |d: Duration| Plan::Wait(now + d.clamp(Duration::from_millis(1), MAX_WAIT));
        let rate = match self.cpu_rate {
            Some(r) if r > 0.0 && self.budget > 0.0 => r,
            // Not measured yet, or idle: nothing to project, nothing earned.
            _ => return wait(RATE_SPAN),
        };
        if let Some(earliest) = self.last_open.map(|t| t + self.min_every)
            && now < earliest
        {
            return Plan::Wait(earliest);
        }
        let len = self.next_len();
        let cost = self.cost_share.unwrap_or(1.0) * rate * len.as_nanos() as f64;
        if self.credit_ns >= cost {
            return Plan::Open {
                len,
                allowance_ns: self.credit_ns.min(cost * OVERRUN),
            };
        }
        // Until the credit has grown by what is missing.
        let secs = (cost - self.credit_ns) / (self.budget * rate) / 1e9;
        wait(Duration::try_from_secs_f64(secs).unwrap_or(MAX_WAIT))
    }

    /// A window opened at `now`.
    pub fn opened(&mut self, now: Duration) {
        self.last_open = Some(now);
    }

    /// A window that lasted `len` closed after `hits` probe hits, the
    /// target having used `cpu_ns` meanwhile (when measured; else its CPU
    /// rate × `len`): its cost is paid from the credit, and what it cost
    /// per ns of target CPU is learnt (at once when higher, halfway when
    /// lower).
    pub fn closed(&mut self, len: Duration, hits: u64, pair_cost_ns: u64, cpu_ns: Option<u64>) {
        let spent = cost_ns(hits, pair_cost_ns);
        self.credit_ns -= spent;
        let cpu = match cpu_ns.filter(|c| *c > 0) {
            Some(c) => c as f64,
            None => self.cpu_rate.unwrap_or(0.0) * len.as_nanos() as f64,
        };
        if cpu <= 0.0 {
            return;
        }
        // The probes run in the target's own context, so they cannot have
        // cost more than all the CPU it used: a higher ratio is a reading
        // that missed some of that CPU (or a calibration above the real
        // cost), and must not stop the windows for hours.
        let share = (spent / cpu).min(MAX_SHARE);
        self.cost_share = Some(match self.cost_share {
            Some(old) if share < old => (old + share) / 2.0,
            _ => share,
        });
    }

    /// The period between full windows the projection allows now.
    pub fn period(&self) -> Duration {
        if self.budget <= 0.0 {
            return MAX_WAIT;
        }
        let share = self.cost_share.unwrap_or(1.0);
        let every = Duration::try_from_secs_f64(self.window.as_secs_f64() * share / self.budget)
            .unwrap_or(MAX_WAIT)
            .min(MAX_WAIT);
        every.max(self.min_every)
    }

    /// The credit now, ns of target CPU.
    pub fn credit_ns(&self) -> f64 {
        self.credit_ns
    }
}

#[cfg(test)]
#[path = "budget_tests.rs"]
mod tests;
