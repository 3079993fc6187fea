//! Unit tests of `lifecycle.rs`: each rule of the life cycle on a replayed
//! signal, with the transitions counted (one log line each).

use super::*;
use Observation::{Above, Below, InBand, NoData};

/// Feeds `signal` to a default life cycle; returns every transition.
fn replay(life: &mut Lifecycle, signal: &[Observation]) -> Vec<Transition> {
    signal.iter().filter_map(|&o| life.observe(o)).collect()
}

fn default_life() -> Lifecycle {
    Lifecycle::new(LifecycleConfig::default())
}

fn t(from: State, to: State) -> Transition {
    Transition { from, to }
}

#[test]
fn fires_on_three_of_the_last_five_windows() {
    let mut life = default_life();
    let changes = replay(&mut life, &[Above, Below, Above, Below]);
    assert_eq!(changes, [t(State::Inactive, State::Pending)]);
    assert_eq!(life.observe(Above), Some(t(State::Pending, State::Firing)));
    // Three of five, not three in a row, and not two of five.
    let mut life = default_life();
    replay(&mut life, &[Above, Below, Below, Below, Above, Below]);
    assert_eq!(life.state(), State::Pending);
}

#[test]
fn one_bad_window_is_pending_then_forgotten() {
    let mut life = default_life();
    let changes = replay(&mut life, &[Above, Below, Below, Below, Below, Below]);
    assert_eq!(
        changes,
        [
            t(State::Inactive, State::Pending),
            t(State::Pending, State::Inactive)
        ]
    );
}

#[test]
fn resolves_after_ten_clean_windows_in_a_row() {
    let mut life = default_life();
    replay(&mut life, &[Above; 3]);
    assert_eq!(life.state(), State::Firing);
    // Nine clean, one held: the count starts again.
    let mut signal = vec![Below; 9];
    signal.push(Above);
    signal.extend([Below; 9]);
    assert!(replay(&mut life, &signal).is_empty());
    assert_eq!(life.observe(Below), Some(t(State::Firing, State::Resolved)));
    // A new episode starts pending again.
    assert_eq!(
        life.observe(Above),
        Some(t(State::Resolved, State::Pending))
    );
}

#[test]
fn an_oscillating_signal_is_one_episode() {
    // The soak's criterion: at most 2 transitions for a signal that
    // alternates for hours (here 600 windows).
    let mut life = default_life();
    let signal: Vec<Observation> = (0..600)
        .map(|i| if i % 2 == 0 { Above } else { Below })
        .collect();
    let changes = replay(&mut life, &signal);
    assert!(changes.len() <= 2, "{changes:?}");
    assert_eq!(life.state(), State::Firing);
}

#[test]
fn the_hysteresis_band_holds_a_firing_finding_only() {
    let mut life = default_life();
    replay(&mut life, &[Above; 3]);
    // Hovering just under the threshold: still firing, no change logged.
    assert!(replay(&mut life, &[InBand; 30]).is_empty());
    assert_eq!(life.state(), State::Firing);
    // Near the threshold but never past it: never pending.
    let mut life = default_life();
    assert!(replay(&mut life, &[InBand; 30]).is_empty());
    assert_eq!(life.state(), State::Inactive);
}

#[test]
fn missing_data_is_stale_never_resolved() {
    let mut life = default_life();
    replay(&mut life, &[Above; 3]);
    let changes = replay(&mut life, &[NoData; 100]);
    assert_eq!(
        changes,
        [t(
            State::Firing,
            State::Stale {
                was: Active::Firing
            }
        )]
    );
    // Data back: firing again, and the clean count continues from there.
    assert_eq!(
        life.observe(Above),
        Some(t(
            State::Stale {
                was: Active::Firing
            },
            State::Firing
        ))
    );
    // Stale pending resumes pending; inactive and resolved stay quiet.
    let mut life = default_life();
    replay(&mut life, &[Above, NoData]);
    assert_eq!(
        life.state(),
        State::Stale {
            was: Active::Pending
        }
    );
    let mut life = default_life();
    assert!(replay(&mut life, &[NoData; 10]).is_empty());
}

#[test]
fn too_many_changes_in_the_hour_is_flapping_once() {
    let mut life = default_life();
    // Fire (3 windows) and resolve (10): 2 changes per 13 windows.
    let cycle: Vec<Observation> = [[Above; 3].as_slice(), [Below; 10].as_slice()].concat();
    let mut changes = Vec::new();
    for _ in 0..4 {
        changes.extend(replay(&mut life, &cycle));
    }
    // Six fire/resolve changes are logged (with the pending steps between
    // them), the seventh is "flapping", and nothing more while it goes on.
    assert_eq!(changes.last().map(|c| c.to), Some(State::Flapping));
    let fire_resolve = changes
        .iter()
        .filter(|c| matches!(c.to, State::Firing | State::Resolved))
        .count();
    assert_eq!(fire_resolve, 6, "{changes:?}");
    let more: Vec<Transition> = (0..2).flat_map(|_| replay(&mut life, &cycle)).collect();
    assert!(more.is_empty(), "{more:?}");
    // An hour of quiet: settled, one change back to what the windows say.
    let settled = replay(&mut life, &[Below; 60]);
    assert_eq!(settled, [t(State::Flapping, State::Resolved)]);
}

#[test]
fn thresholds_follow_the_config() {
    let mut life = Lifecycle::new(LifecycleConfig {
        fire_in: 1,
        of_last: 1,
        resolve_after: 1,
        ..LifecycleConfig::default()
    });
    assert_eq!(life.observe(Above), Some(t(State::Inactive, State::Firing)));
    assert_eq!(life.observe(Below), Some(t(State::Firing, State::Resolved)));
}
