//! The projective throttle on simulated targets: a clock stepped in
//! milliseconds, a target using a fixed number of cores whose calls inside
//! a window cost a given share of its CPU in probes, polled as the agent
//! polls (the hit counter every few ms while a window is open).

use super::*;

const MS: Duration = Duration::from_millis(1);
const S: fn(u64) -> Duration = Duration::from_secs;
const PAIR_NS: u64 = 2_000;
const BUDGET: f64 = 0.005;

/// A simulated target and what the throttle did to it.
struct Sim {
    t: Throttle,
    now: Duration,
    /// The target's cores in use, and the share of its CPU inside a window
    /// that goes into the probes (its real one, which the throttle learns).
    cores: f64,
    real_share: f64,
    cpu_ns: f64,
    /// The open window: (opened at, length, allowance, hits so far).
    open: Option<(Duration, Duration, f64, f64)>,
    spent_ns: f64,
    windows: Vec<(Duration, Duration, f64)>,
    early: usize,
}

impl Sim {
    fn new(cores: f64, real_share: f64) -> Self {
        Self {
            t: Throttle::new(BUDGET, 100 * MS, S(20)),
            now: Duration::ZERO,
            cores,
            real_share,
            cpu_ns: 0.0,
            open: None,
            spent_ns: 0.0,
            windows: Vec::new(),
            early: 0,
        }
    }

    /// Runs for `d`: the target's CPU and hits advance every ms; the
    /// throttle is asked every 10 ms, the window checked every 5 ms.
    fn run(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            self.now += MS;
            self.cpu_ns += self.cores * 1e6;
            let ms = self.now.as_millis();
            if let Some((at, len, allowance, hits)) = self.open.as_mut() {
                *hits += self.cores * 1e6 * self.real_share / PAIR_NS as f64;
                let (at, len, allowance, hits) = (*at, *len, *allowance, *hits as u64);
                let over = ms.is_multiple_of(5) && over_allowance(hits, PAIR_NS, allowance);
                if over || self.now >= at + len {
                    self.early += usize::from(over && self.now < at + len);
                    let lasted = self.now - at;
                    let cpu = self.cores * lasted.as_nanos() as f64;
                    self.t.closed(lasted, hits, PAIR_NS, Some(cpu as u64));
                    self.spent_ns += cost_ns(hits, PAIR_NS);
                    self.windows.push((at, lasted, cost_ns(hits, PAIR_NS)));
                    self.open = None;
                }
                continue;
            }
            if ms.is_multiple_of(10) {
                self.t.observe(self.now, self.cpu_ns as u64);
                if let Plan::Open { len, allowance_ns } = self.t.plan(self.now) {
                    self.t.opened(self.now);
                    self.open = Some((self.now, len, allowance_ns, 0.0));
                }
            }
        }
    }
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

#[test]
fn the_first_window_is_a_short_probe_within_the_budget() {
    // The worst target: everything it does inside a window is probe cost.
    let mut sim = Sim::new(2.0, 1.0);
    sim.run(S(5));
    let &(at, len, cost) = sim.windows.first().expect("a probe window within 5 s");
    assert_eq!(len, 10 * MS, "a tenth of alloc_window");
    // Never more than the budget of the CPU used until it closed, but for
    // the probe window's own share of that CPU.
    let cpu = sim.cores * (at + len).as_nanos() as f64;
    let probe_share = sim.cores * len.as_nanos() as f64 / cpu;
    assert!(cost / cpu <= BUDGET + probe_share, "{}", cost / cpu);
    // It waited for the credit instead of opening at once.
    assert!(cost / cpu <= BUDGET * 1.01, "{} at {at:?}", cost / cpu);
}

#[test]
fn a_calibration_that_underestimates_is_caught_by_the_first_window() {
    // The probes cost three times the worst case the first window assumed
    // (pair cost calibrated too high): the allowance closes it early.
    let mut sim = Sim::new(1.0, 3.0);
    sim.run(S(5));
    let &(at, len, cost) = sim.windows.first().expect("a probe window");
    assert!(len < 10 * MS, "closed early after {len:?}");
    let cpu = sim.cores * (at + len).as_nanos() as f64;
    let probe_share = sim.cores * (10 * MS).as_nanos() as f64 / cpu;
    assert!(cost / cpu <= BUDGET + probe_share, "{}", cost / cpu);
}

#[test]
fn steady_state_spends_the_budget_and_no_more() {
    for (cores, share) in [(2.0, 1.0), (1.0, 0.3), (4.0, 1.4)] {
        let mut sim = Sim::new(cores, share);
        sim.run(S(600));
        let spent = sim.spent_ns / sim.cpu_ns;
        assert!(
            spent <= BUDGET * 1.01,
            "{cores} cores, share {share}: {spent}"
        );
        // The running share after every window: within the budget, but
        // for the first (probe) window, which may pass it by its own share.
        for (i, &(at, len, _)) in sim.windows.iter().enumerate() {
            let upto: f64 = sim.windows.iter().filter(|w| w.0 <= at).map(|w| w.2).sum();
            let cpu = cores * (at + len).as_nanos() as f64;
            let probe = if i == 0 {
                cores * (10 * MS).as_nanos() as f64 / cpu
            } else {
                0.0
            };
            assert!(
                upto / cpu <= BUDGET * 1.05 + probe,
                "window {i} at {at:?}: {}",
                upto / cpu
            );
        }
        // Not wasteful either: the windows run as the budget allows, or,
        // when they cost less than the worst case, as often as configured
        // (the worst case's spacing).
        let allowed = BUDGET * f64::min(share, 1.0);
        assert!(
            spent >= allowed * 0.8,
            "{cores} cores, share {share}: {spent}"
        );
    }
}

#[test]
fn cheap_windows_keep_the_configured_period() {
    // The probes cost a tenth of the target's CPU in a window: full
    // windows, no closer than the configured 20 s.
    let mut sim = Sim::new(2.0, 0.1);
    sim.run(S(200));
    let full: Vec<_> = sim.windows.iter().skip(1).collect();
    assert!(full.len() >= 8, "{:?}", sim.windows);
    for w in full.windows(2) {
        assert!(w[1].0 - w[0].0 >= S(20), "{w:?}");
        assert_eq!(w[0].1, 100 * MS);
    }
    assert_eq!(sim.t.period(), S(20));
}

#[test]
fn a_burst_of_hits_mid_window_closes_it_early() {
    // A floor low enough that the projection, not the floor, sets the
    // period, and shares that stay physical (at most all of the CPU).
    let mut sim = Sim::new(2.0, 0.1);
    sim.t = Throttle::new(BUDGET, 100 * MS, S(1));
    sim.run(S(30));
    let before = sim.windows.len();
    let period = sim.t.period();
    assert!(before >= 2 && sim.early == 0, "{:?}", sim.windows);
    // The target starts allocating four times as much per CPU second.
    sim.real_share = 0.4;
    sim.run(S(60));
    assert!(sim.early >= 1, "{:?}", sim.windows);
    let burst = sim.windows[before];
    assert!(burst.1 < 100 * MS, "closed after {:?}", burst.1);
    // It cost at most the allowance: the projection × OVERRUN and a check's worth.
    let projected = 0.1 * 2.0 * (100 * MS).as_nanos() as f64;
    assert!(burst.2 <= projected * OVERRUN * 1.1, "{burst:?}");
    // And the next windows are further apart.
    assert!(sim.t.period() > period, "{:?}", sim.t.period());
}

#[test]
fn an_idle_target_gets_no_window_and_no_division_by_zero() {
    let mut sim = Sim::new(0.0, 1.0);
    sim.run(S(120));
    assert!(sim.windows.is_empty(), "{:?}", sim.windows);
    assert_eq!(sim.t.credit_ns(), 0.0);
    // The throttle looks again a rate span later, not in a tight loop.
    assert_eq!(sim.t.plan(S(120)), Plan::Wait(S(121)));
    assert!(sim.t.period() >= S(20));
    // A window closed against no CPU learns nothing and does not panic.
    let mut t = Throttle::new(BUDGET, 100 * MS, S(20));
    t.observe(Duration::ZERO, 0);
    t.observe(S(2), 0);
    t.closed(100 * MS, 1_000, PAIR_NS, None);
    t.closed(100 * MS, 1_000, PAIR_NS, Some(0));
    assert!(matches!(t.plan(S(3)), Plan::Wait(_)));
    // Nor does a budget of 0 (the family is then off).
    let t = Throttle::new(0.0, 100 * MS, S(20));
    assert!(matches!(t.plan(S(3)), Plan::Wait(_)));
    assert_eq!(t.period(), MAX_WAIT);
}

#[test]
fn credit_is_capped_so_an_idle_stretch_buys_no_burst() {
    let mut t = Throttle::new(BUDGET, 100 * MS, S(20));
    // A busy core for an hour, never a window (the agent was not asked).
    for s in 0..=3600u64 {
        t.observe(S(s), s * 1_000_000_000);
    }
    let full = t.projected_ns(100 * MS).expect("rate known");
    assert!(t.credit_ns() <= full * MAX_CREDIT_WINDOWS + 1.0);
    assert!(t.credit_ns() >= full);
}

#[test]
fn a_window_read_as_costing_more_than_all_its_cpu_does_not_stop_windows_for_hours() {
    // A window closed after 2 ms whose reading missed most of the target's
    // CPU (hits of an attach or detach set against 4 ms of CPU): the ratio
    // read is 160, physically impossible; learnt as all of the CPU at most.
    let mut t = Throttle::new(BUDGET, 100 * MS, S(20));
    t.observe(Duration::ZERO, 0);
    t.observe(S(1), 2_000_000_000);
    t.closed(2 * MS, 320_000, PAIR_NS, Some(4_000_000));
    assert!(
        t.period() <= S(20),
        "the worst case's spacing (window / budget), not {:?}",
        t.period()
    );
    // A reading within physics is learnt as it is.
    let mut t = Throttle::new(BUDGET, 100 * MS, S(0));
    t.observe(Duration::ZERO, 0);
    t.observe(S(1), 2_000_000_000);
    // 2,500 hits x 2 us = 5 ms of 20 ms: a quarter; 100 ms x 0.25 / 0.005.
    t.closed(10 * MS, 2_500, PAIR_NS, Some(20_000_000));
    assert_eq!(t.period(), S(5));
}
