//! When allocator latency windows open and close: a window of `window` every
//! `every` (default 100 ms every 10 s, as `record` offers), the first one
//! `every` after start-up. Inside a window an allocation-bound target runs
//! at a few percent of its speed (each call pays the probe pair's
//! microseconds), so the share of time in windows is, to first order, the
//! throughput it loses: 1 % by default. 200 ms every 10 s measured a 4.3 %
//! drop on the TCMalloc workload (`cargo xtask bench-overhead`, budget 3 %).
//! Pure bookkeeping, driven by the record loop's clock, so that it can be
//! tested without BPF and never blocks the loop.

use std::time::{Duration, Instant};

/// Default window length.
pub const DEFAULT_WINDOW: Duration = Duration::from_millis(100);
/// Default period between window starts.
pub const DEFAULT_EVERY: Duration = Duration::from_secs(10);
/// Shortest window accepted (shorter ones are mostly attach/detach noise).
pub const MIN_WINDOW: Duration = Duration::from_millis(10);
/// Longest window accepted (the target pays microseconds per call inside).
pub const MAX_WINDOW: Duration = Duration::from_secs(10);

/// `--alloc-window` / `--alloc-every`, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowSchedule {
    pub window: Duration,
    /// Period between window starts; zero = windows off.
    pub every: Duration,
}

impl Default for WindowSchedule {
    fn default() -> Self {
        Self {
            window: DEFAULT_WINDOW,
            every: DEFAULT_EVERY,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error(
        "--alloc-window {0:?} is too short: use at least {MIN_WINDOW:?} (e.g. --alloc-window 200ms)"
    )]
    WindowTooShort(Duration),
    #[error(
        "--alloc-window {0:?} is too long: use at most {MAX_WINDOW:?} (the target pays microseconds per allocation inside a window)"
    )]
    WindowTooLong(Duration),
    #[error(
        "--alloc-every {every:?} must be longer than --alloc-window {window:?} (e.g. --alloc-window 200ms --alloc-every 5s), or 0 to turn allocator windows off"
    )]
    EveryNotAfterWindow { window: Duration, every: Duration },
}

impl WindowSchedule {
    /// Checks a schedule; `every` = 0 turns windows off (any window is then fine).
    pub fn new(window: Duration, every: Duration) -> Result<Self, ScheduleError> {
        if every.is_zero() {
            return Ok(Self { window, every });
        }
        if window < MIN_WINDOW {
            return Err(ScheduleError::WindowTooShort(window));
        }
        if window > MAX_WINDOW {
            return Err(ScheduleError::WindowTooLong(window));
        }
        if every <= window {
            return Err(ScheduleError::EveryNotAfterWindow { window, every });
        }
        Ok(Self { window, every })
    }

    pub fn enabled(&self) -> bool {
        !self.every.is_zero()
    }
}

/// What the caller must do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Nothing,
    Open,
    Close,
}

/// Where the schedule is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Closed; the next window opens at the instant.
    Idle(Instant),
    /// Open since (planned start); closes `window` after it opened.
    Open(Instant),
}

/// The windows' state machine.
#[derive(Debug, Clone)]
pub struct Windows {
    schedule: WindowSchedule,
    state: State,
}

impl Windows {
    /// First window `every` after `now`.
    pub fn new(schedule: WindowSchedule, now: Instant) -> Self {
        Self {
            schedule,
            state: State::Idle(now + schedule.every),
        }
    }

    /// The next instant something is due (`None` when windows are off).
    pub fn next_due(&self) -> Option<Instant> {
        if !self.schedule.enabled() {
            return None;
        }
        Some(match self.state {
            State::Idle(at) => at,
            State::Open(since) => since + self.schedule.window,
        })
    }

    /// Advances to `now` and says what to do. A late call (the loop was
    /// busy) still opens or closes once; missed windows are skipped, not
    /// run back to back.
    pub fn step(&mut self, now: Instant) -> Action {
        if !self.schedule.enabled() {
            return Action::Nothing;
        }
        match self.state {
            State::Idle(at) if now >= at => {
                self.state = State::Open(now);
                Action::Open
            }
            State::Open(since) if now >= since + self.schedule.window => {
                let mut next = since + self.schedule.every;
                while next <= now {
                    next += self.schedule.every;
                }
                self.state = State::Idle(next);
                Action::Close
            }
            _ => Action::Nothing,
        }
    }

    /// The window really opened at `now` (attaching took a while): it
    /// closes `window` after this.
    pub fn opened_at(&mut self, now: Instant) {
        if matches!(self.state, State::Open(_)) {
            self.state = State::Open(now);
        }
    }

    /// The schedule in force.
    pub fn schedule(&self) -> WindowSchedule {
        self.schedule
    }

    /// Changes the period between windows from the next one on (the agent
    /// throttles itself to its budget); an idle wait is re-timed from the
    /// last window's start.
    pub fn set_every(&mut self, every: Duration) {
        if let State::Idle(at) = self.state {
            let last = at.checked_sub(self.schedule.every).unwrap_or(at);
            self.state = State::Idle(last + every);
        }
        self.schedule.every = every;
    }

    /// Is a window open?
    pub fn is_open(&self) -> bool {
        matches!(self.state, State::Open(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn schedule_is_checked() {
        assert_eq!(
            WindowSchedule::default(),
            WindowSchedule::new(100 * MS, 10_000 * MS).unwrap()
        );
        assert!(
            WindowSchedule::new(5 * MS, 5000 * MS)
                .unwrap_err()
                .to_string()
                .contains("too short")
        );
        assert!(matches!(
            WindowSchedule::new(11_000 * MS, 60_000 * MS),
            Err(ScheduleError::WindowTooLong(_))
        ));
        let e = WindowSchedule::new(500 * MS, 500 * MS).unwrap_err();
        assert!(e.to_string().contains("--alloc-every"), "{e}");
        let off = WindowSchedule::new(Duration::ZERO, Duration::ZERO).unwrap();
        assert!(!off.enabled());
    }

    #[test]
    fn windows_open_and_close_on_time() {
        let t0 = Instant::now();
        let mut w = Windows::new(WindowSchedule::new(200 * MS, 1000 * MS).unwrap(), t0);
        assert_eq!(w.next_due(), Some(t0 + 1000 * MS));
        assert_eq!(w.step(t0 + 999 * MS), Action::Nothing);
        assert_eq!(w.step(t0 + 1000 * MS), Action::Open);
        assert!(w.is_open());
        assert_eq!(w.next_due(), Some(t0 + 1200 * MS));
        assert_eq!(w.step(t0 + 1100 * MS), Action::Nothing);
        // Attaching took 50 ms: the window lasts 200 ms from then.
        w.opened_at(t0 + 1050 * MS);
        assert_eq!(w.step(t0 + 1210 * MS), Action::Nothing);
        assert_eq!(w.step(t0 + 1250 * MS), Action::Close);
        assert!(!w.is_open());
        // The next start is one period after the previous (real) start.
        assert_eq!(w.next_due(), Some(t0 + 2050 * MS));
        assert_eq!(w.step(t0 + 2050 * MS), Action::Open);
        // opened_at means nothing while closed.
        let mut idle = Windows::new(WindowSchedule::default(), t0);
        idle.opened_at(t0);
        assert!(!idle.is_open());
    }

    #[test]
    fn late_steps_skip_missed_windows() {
        let t0 = Instant::now();
        let mut w = Windows::new(WindowSchedule::new(200 * MS, 1000 * MS).unwrap(), t0);
        assert_eq!(w.step(t0 + 1000 * MS), Action::Open);
        // The loop stalled for 3.5 s: close now, next start on the period grid.
        assert_eq!(w.step(t0 + 4500 * MS), Action::Close);
        assert_eq!(w.next_due(), Some(t0 + 5000 * MS));
    }

    #[test]
    fn off_never_opens() {
        let t0 = Instant::now();
        let mut w = Windows::new(WindowSchedule::new(200 * MS, Duration::ZERO).unwrap(), t0);
        assert_eq!(w.next_due(), None);
        assert_eq!(w.step(t0 + 3600 * 1000 * MS), Action::Nothing);
    }
}
