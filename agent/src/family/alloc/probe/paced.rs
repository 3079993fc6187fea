//! Allocator windows on a budget (`mdiag agent`'s): instead of the fixed
//! schedule `record` uses, each window is opened when the agent's
//! projective throttle ([`super::budget`]) says its projected cost
//! fits the credit, for the length it says, and closed early when the hit
//! counter, read every few milliseconds while it is open, shows a cost
//! beyond its allowance. Between windows the target's CPU time is read
//! from `/proc` only when the throttle asked to look again (about once a
//! second at most), so pacing costs the agent almost nothing.

use std::time::{Duration, Instant};

use aya::Ebpf;

use super::AllocProbe;
use super::budget::{Plan, RATE_SPAN, Throttle, cost_ns, over_allowance};

/// How often an open window's hit counter is read, at most and at least
/// (a window overspends by at most what the probes cost in one check, and
/// a check is one read of a per-CPU array).
const CHECK_MIN: Duration = Duration::from_millis(2);
const CHECK_MAX: Duration = Duration::from_millis(5);

/// The windows' pacing: the throttle and where it stands.
pub(super) struct Paced {
    throttle: Throttle,
    /// The throttle's time zero.
    origin: Instant,
    /// When to ask the throttle again (while no window is open).
    next_check: Instant,
    open: Option<PacedWindow>,
    /// Windows closed early for running over their allowance.
    pub(super) early: u64,
}

/// The window open now.
#[derive(Debug, Clone, Copy)]
struct PacedWindow {
    since: Instant,
    len: Duration,
    allowance_ns: f64,
    next_check: Instant,
    /// The target's CPU time when it opened, ns.
    cpu_ns: Option<u64>,
}

impl PacedWindow {
    fn check_every(&self) -> Duration {
        (self.len / 20).clamp(CHECK_MIN, CHECK_MAX)
    }
}

impl Paced {
    pub(super) fn new(throttle: Throttle, now: Instant) -> Self {
        Self {
            throttle,
            origin: now,
            next_check: now,
            open: None,
            early: 0,
        }
    }

    /// When the probe next needs a poll.
    pub(super) fn next_due(&self) -> Instant {
        match &self.open {
            Some(o) => o.next_check.min(o.since + o.len),
            None => self.next_check,
        }
    }

    /// The period between full windows the budget allows now.
    pub(super) fn period(&self) -> Duration {
        self.throttle.period()
    }
}

impl AllocProbe {
    /// Paces the windows by a budget of `budget` × the target's CPU (see
    /// [`super::budget`]) instead of the fixed schedule; the
    /// schedule's period becomes the shortest spacing of two windows.
    pub fn set_budget(&mut self, budget: f64) {
        let schedule = self.windows.schedule();
        let throttle = Throttle::new(budget, schedule.window, schedule.every);
        self.paced = Some(Paced::new(throttle, Instant::now()));
    }

    /// One poll under a budget: close the open window when its time is up
    /// or its cost is over the allowance, else open one when the throttle
    /// says it fits.
    pub(super) fn poll_paced(&mut self, ebpf: &mut Ebpf, now: Instant, rec_start: Instant) {
        let Some(p) = self.paced.as_mut() else { return };
        if let Some(mut o) = p.open {
            let pair = self.pair_cost_ns();
            let ended = now >= o.since + o.len;
            let over = !ended
                && now >= o.next_check
                && self
                    .hits_open()
                    .is_some_and(|h| over_allowance(h, pair, o.allowance_ns));
            if !(ended || over) {
                if now >= o.next_check {
                    o.next_check = now + o.check_every();
                }
                if let Some(p) = self.paced.as_mut() {
                    p.open = Some(o);
                }
                return;
            }
            let hits_before = self.hits;
            let lasted_before = self.last_window_ns;
            // The target's CPU read after the detach and the counters, so
            // that the hits of the detach itself, counted until the entry
            // link is gone, are set against the CPU they were made in.
            let cpu = self.close_window(ebpf, rec_start);
            let hits = self.hits.saturating_sub(hits_before);
            // How long the probes were on (control open to closed), not
            // counting the detach; by the clock when the window was lost.
            let read = self.last_window_ns != lasted_before;
            let (start_ns, end_ns) = self.last_window_ns;
            let lasted = if read {
                Duration::from_nanos(end_ns.saturating_sub(start_ns))
            } else {
                now.saturating_duration_since(o.since)
            };
            let Some(p) = self.paced.as_mut() else { return };
            p.open = None;
            p.early += u64::from(over);
            let window_cpu = cpu.zip(o.cpu_ns).map(|(b, a)| b.saturating_sub(a));
            p.throttle.closed(lasted, hits, pair, window_cpu);
            if let Some(cpu) = self.cpu_last_ns {
                p.throttle
                    .observe(now.saturating_duration_since(p.origin), cpu);
            }
            p.next_check = now;
            self.record.every_ms = u64::try_from(p.period().as_millis()).unwrap_or(u64::MAX);
            if !read {
                return;
            }
            tracing::debug!(
                family = super::FAMILY,
                start_ns,
                end_ns,
                hits,
                cost_ns = cost_ns(hits, pair) as u64,
                allowance_ns = o.allowance_ns as u64,
                window_cpu_ns = window_cpu.unwrap_or(0),
                early = over,
                credit_ns = p.throttle.credit_ns() as i64,
                "allocator window closed"
            );
            return;
        }
        if now < p.next_check {
            return;
        }
        let at = now.saturating_duration_since(p.origin);
        match crate::kit::probe::process_cpu::cpu_ns(self.pid.get()) {
            Some(cpu) => p.throttle.observe(at, cpu),
            // The target is gone or unreadable: look again in a second.
            None => {
                p.next_check = now + RATE_SPAN;
                return;
            }
        }
        match p.throttle.plan(at) {
            Plan::Wait(until) => {
                // Look at least once a rate span, so that the CPU rate the
                // projection uses is recent.
                let until = (p.origin + until).min(now + RATE_SPAN);
                p.next_check = until.max(now + Duration::from_millis(1));
            }
            Plan::Open { len, allowance_ns } => {
                p.throttle.opened(at);
                // Read before the attach: the entry link counts hits from
                // the moment it is attached, before the window is open.
                let cpu_at_attach = crate::kit::probe::process_cpu::cpu_ns(self.pid.get());
                self.open_window(ebpf, rec_start);
                let Some(p) = self.paced.as_mut() else { return };
                if self.open.is_none() {
                    // Not opened (no entry points, attach failed): the
                    // next try one minimum period later.
                    p.next_check = now + self.windows.schedule().every;
                    return;
                }
                let since = Instant::now();
                let w = PacedWindow {
                    since,
                    len,
                    allowance_ns,
                    next_check: since,
                    cpu_ns: cpu_at_attach,
                };
                p.open = Some(PacedWindow {
                    next_check: since + w.check_every(),
                    ..w
                });
            }
        }
    }
}
