//! The duty cycle's arithmetic against simulated targets: what it spends
//! stays within the budget (plus at most one second's cost and the forced
//! seconds), cheap families stay attached, and a cost that cannot be
//! measured keeps them attached.

use std::time::Duration;

use super::{Duty, MAX_OFF, Reading};

const SEC: Duration = Duration::from_secs(1);

/// Runs `secs` one-second slices of a target using `cpu_per_s` ns of CPU
/// a second, whose cycled programs cost `cost_per_s` ns a second while
/// attached; returns (seconds attached, total run ns, total CPU ns).
fn simulate(duty: &mut Duty, secs: u64, cpu_per_s: u64, cost_per_s: u64) -> (u64, u64, u64) {
    let mut now = Reading::default();
    let mut on_secs = 0;
    duty.after_slice(SEC, now);
    for _ in 0..secs {
        let on = duty.on();
        now.target_cpu_ns += cpu_per_s;
        if on {
            on_secs += 1;
            now.run_ns += cost_per_s;
        }
        duty.after_slice(SEC, now);
    }
    (on_secs, now.run_ns, now.target_cpu_ns)
}

#[test]
fn a_costly_family_is_attached_for_the_share_the_budget_pays() {
    // One core of target CPU, programs costing 1 % of a CPU while attached,
    // a budget of 0.2 % of the target's CPU: attached a fifth of the time.
    let mut duty = Duty::new(0.002);
    let (on, run, cpu) = simulate(&mut duty, 1000, 1_000_000_000, 10_000_000);
    let share = on as f64 / 1000.0;
    assert!((0.18..=0.22).contains(&share), "attached {share}");
    // Spent at most the budget plus one second's cost (the first, probing).
    assert!(
        run as f64 <= 0.002 * cpu as f64 + 10_000_000.0,
        "spent {run} of {cpu}"
    );
}

#[test]
fn spending_stays_within_the_budget_at_every_second() {
    let mut duty = Duty::new(0.002);
    let mut now = Reading::default();
    duty.after_slice(SEC, now);
    for s in 0..600u64 {
        // A load that changes: the cost of a second swings 10x.
        let cost = if (s / 50) % 2 == 0 {
            2_000_000
        } else {
            20_000_000
        };
        now.target_cpu_ns += 1_500_000_000;
        if duty.on() {
            now.run_ns += cost;
        }
        duty.after_slice(SEC, now);
        let allowed = 0.002 * now.target_cpu_ns as f64 + 2.0 * 20_000_000.0;
        assert!(now.run_ns as f64 <= allowed, "second {s}: {now:?}");
    }
}

#[test]
fn cheap_families_stay_attached() {
    // 0.05 % of a CPU against a budget of 0.2 % of one core: always on.
    let mut duty = Duty::new(0.002);
    let (on, _, _) = simulate(&mut duty, 300, 1_000_000_000, 500_000);
    assert_eq!(on, 300);
}

#[test]
fn an_unmeasurable_cost_keeps_them_attached() {
    // BPF statistics off: the run time never moves.
    let mut duty = Duty::new(0.002);
    let (on, _, _) = simulate(&mut duty, 100, 1_000_000_000, 0);
    assert_eq!(on, 100);
    assert!(!duty.measured());
}

#[test]
fn an_idle_target_buys_nothing_but_the_forced_seconds() {
    // The host keeps the programs busy, the target uses no CPU.
    let mut duty = Duty::new(0.002);
    let secs = 600;
    let (on, _, _) = simulate(&mut duty, secs, 0, 10_000_000);
    let forced = secs / MAX_OFF.as_secs();
    // The first (probing) second, then one per MAX_OFF.
    assert!(on >= forced && on <= forced + 2, "attached {on} s");
}

#[test]
fn the_window_says_what_it_covered_and_spent() {
    let mut duty = Duty::new(0.002);
    simulate(&mut duty, 100, 1_000_000_000, 10_000_000);
    let w = duty.take_window();
    assert_eq!(w.slices, 101);
    let ratio = w.ratio().unwrap_or(0.0);
    assert!((0.15..=0.3).contains(&ratio), "{ratio}");
    let spent = w.spent().unwrap_or(1.0);
    assert!(spent < 0.003, "{spent}");
    assert_eq!(duty.take_window().slices, 0);
}
