//! The life of one finding in the continuous agent: pending → firing →
//! resolved, stale when its data is missing, flapping when it changes state
//! too often. One [`Lifecycle`] per finding identity (host, rule, target);
//! the agent feeds it one [`Observation`] per window and logs the
//! [`Transition`]s it returns, so a long episode is one record and one log
//! line per change, never one per window.
//!
//! Why these rules (defaults in [`LifecycleConfig`]):
//! - fire when the condition held in `fire_in` of the last `of_last` windows
//!   (3 of 5): one bad window is noise, a majority of recent ones is not;
//! - resolve after `resolve_after` clean windows in a row (10): a problem
//!   that comes and goes stays one episode;
//! - a hysteresis band: once firing, a value just under the threshold
//!   ([`Observation::InBand`]) still counts as held, so a value hovering at
//!   the threshold neither resolves nor re-fires;
//! - missing data is never "resolved": the finding goes stale and resumes
//!   where it was when data comes back;
//! - more than `flap_limit` fire/resolve changes within `flap_windows`
//!   windows is flapping: reported once, then quiet until it settles.

use std::collections::VecDeque;

/// What one window says about a finding's condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observation {
    /// The condition holds (the value is past the rule's threshold).
    Above,
    /// Not past the threshold, but within the hysteresis band below it.
    InBand,
    /// Clearly clean: below the band.
    Below,
    /// The window has no data for this finding (the family or the target
    /// was not observed): says nothing either way.
    NoData,
}

/// Where a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Not held in the recent windows.
    Inactive,
    /// Held in some recent windows, not yet enough to fire.
    Pending,
    /// Held in enough recent windows; stays until enough clean ones.
    Firing,
    /// Was firing, then clean long enough (until it is held again).
    Resolved,
    /// Data missing; `was` is the state it resumes when data returns.
    Stale { was: Active },
    /// Changed between firing and resolved too often in the recent windows.
    Flapping,
}

/// The states a stale finding can come back to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Active {
    Pending,
    Firing,
}

/// A change of [`State`], to be logged once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    pub from: State,
    pub to: State,
}

/// Thresholds of the life cycle, per rule if configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LifecycleConfig {
    /// Windows that must hold among the last `of_last` to fire.
    pub fire_in: u32,
    pub of_last: u32,
    /// Clean windows in a row that resolve a firing finding.
    pub resolve_after: u32,
    /// Fire/resolve changes within `flap_windows` windows that make it flapping.
    pub flap_limit: u32,
    pub flap_windows: u32,
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        // An hour of 60 s windows.
        LifecycleConfig {
            fire_in: 3,
            of_last: 5,
            resolve_after: 10,
            flap_limit: 6,
            flap_windows: 60,
        }
    }
}

/// One finding's state and the recent windows that decide it.
#[derive(Debug, Clone)]
pub struct Lifecycle {
    config: LifecycleConfig,
    state: State,
    /// Whether each of the last `of_last` windows with data held.
    recent: VecDeque<bool>,
    /// Clean windows in a row while firing.
    clean_run: u32,
    /// Window numbers of the recent fire/resolve changes.
    changes: VecDeque<u64>,
    /// Windows seen (with or without data).
    window: u64,
    /// The state under a flapping one, kept up to date while flapping.
    underneath: State,
}

impl Lifecycle {
    pub fn new(config: LifecycleConfig) -> Self {
        let of_last = config.of_last.max(1) as usize;
        Lifecycle {
            config,
            state: State::Inactive,
            recent: VecDeque::with_capacity(of_last),
            clean_run: 0,
            changes: VecDeque::new(),
            window: 0,
            underneath: State::Inactive,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    /// Takes one window's observation; returns the change it caused, if any.
    pub fn observe(&mut self, obs: Observation) -> Option<Transition> {
        self.window += 1;
        let before = self.state;
        let flap_horizon = self
            .window
            .saturating_sub(u64::from(self.config.flap_windows));
        while self.changes.front().is_some_and(|&w| w <= flap_horizon) {
            self.changes.pop_front();
        }
        let base = match self.state {
            State::Flapping => self.underneath,
            s => s,
        };
        let next = self.step(base, obs);
        if matches!(
            (base, next),
            (_, State::Firing) | (State::Firing, State::Resolved)
        ) && base != next
            && !matches!(
                base,
                State::Stale {
                    was: Active::Firing
                }
            )
        {
            self.changes.push_back(self.window);
        }
        let flapping = self.changes.len() as u32 > self.config.flap_limit;
        self.underneath = next;
        // Once settled, back to what the windows say.
        self.state = if flapping { State::Flapping } else { next };
        (self.state != before).then_some(Transition {
            from: before,
            to: self.state,
        })
    }

    /// The state after `obs`, from `state` (never [`State::Flapping`]).
    fn step(&mut self, state: State, obs: Observation) -> State {
        let resumed = match (state, obs) {
            (State::Stale { was }, Observation::NoData) => return State::Stale { was },
            (State::Pending, Observation::NoData) => {
                return State::Stale {
                    was: Active::Pending,
                };
            }
            (State::Firing, Observation::NoData) => {
                return State::Stale {
                    was: Active::Firing,
                };
            }
            // Inactive or resolved with no data: nothing to watch.
            (s, Observation::NoData) => return s,
            (
                State::Stale {
                    was: Active::Pending,
                },
                _,
            ) => State::Pending,
            (
                State::Stale {
                    was: Active::Firing,
                },
                _,
            ) => State::Firing,
            (s, _) => s,
        };
        let held = match obs {
            Observation::Above => true,
            Observation::InBand => resumed == State::Firing,
            Observation::Below | Observation::NoData => false,
        };
        if self.recent.len() == self.config.of_last.max(1) as usize {
            self.recent.pop_front();
        }
        self.recent.push_back(held);
        let held_recently = self.recent.iter().filter(|&&h| h).count() as u32;
        match resumed {
            State::Firing => {
                self.clean_run = if held { 0 } else { self.clean_run + 1 };
                if self.clean_run >= self.config.resolve_after {
                    self.recent.clear();
                    self.clean_run = 0;
                    State::Resolved
                } else {
                    State::Firing
                }
            }
            _ if held_recently >= self.config.fire_in => {
                self.clean_run = 0;
                State::Firing
            }
            _ if held_recently > 0 => State::Pending,
            State::Resolved => State::Resolved,
            _ => State::Inactive,
        }
    }
}

#[cfg(test)]
#[path = "lifecycle_tests.rs"]
mod tests;
