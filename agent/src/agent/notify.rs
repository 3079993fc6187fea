//! systemd's service notifications (sd_notify(3)) for the agent, whose unit
//! is `Type=notify` with a watchdog: `READY=1` once `/metrics` serves and
//! the first scan attached its probes (or said why it could not), `STATUS=`
//! what it watches, `WATCHDOG=1` from the main loop, `STOPPING=1` on
//! SIGTERM / SIGINT. Sent by the `sd-notify` crate; without
//! `NOTIFY_SOCKET` (outside systemd, in a container, in tests) nothing is
//! sent and nothing is computed.
//!
//! The watchdog is fed by the main loop's turns only, and only when the
//! turn ends: a loop stuck in a turn (a blocked read, a deadlock) stops
//! feeding it and systemd restarts the agent after `WatchdogSec=`. It is
//! fed at half that interval (sd_watchdog_enabled(3)'s advice), and only
//! when systemd asked for it for this process (`WATCHDOG_USEC`, and
//! `WATCHDOG_PID` when set).

use std::time::{Duration, Instant};

use sd_notify::NotifyState;

/// What the agent tells systemd, and when it last fed the watchdog.
#[derive(Debug)]
pub struct Notifier {
    /// `NOTIFY_SOCKET` is set.
    on: bool,
    /// Half of the watchdog's interval, when there is one.
    feed_every: Option<Duration>,
    last_fed: Instant,
    ready: bool,
    /// The last `STATUS=` sent.
    status: String,
    /// A send failed already (said once).
    warned: bool,
}

/// What one turn of the main loop sends.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Turn {
    pub ready: bool,
    pub watchdog: bool,
    pub status: Option<String>,
}

impl Notifier {
    /// From the environment systemd gives a `Type=notify` service.
    pub fn from_env() -> Self {
        Self::new(
            std::env::var_os("NOTIFY_SOCKET").is_some(),
            sd_notify::watchdog_enabled(),
            Instant::now(),
        )
    }

    fn new(on: bool, watchdog: Option<Duration>, now: Instant) -> Self {
        Notifier {
            on,
            feed_every: watchdog.filter(|d| !d.is_zero()).map(|d| d / 2),
            last_fed: now,
            ready: false,
            status: String::new(),
            warned: false,
        }
    }

    /// A turn of the main loop ended at `now` (the first one after the
    /// first scan: the agent is ready): sends what is due. `status` is
    /// only called under systemd.
    pub fn turn(&mut self, now: Instant, status: impl FnOnce() -> String) {
        if !self.on {
            return;
        }
        let t = self.plan(now, status());
        let mut states = Vec::new();
        if t.ready {
            states.push(NotifyState::Ready);
        }
        if t.watchdog {
            states.push(NotifyState::Watchdog);
        }
        if let Some(s) = &t.status {
            states.push(NotifyState::Status(s));
        }
        self.send(&states);
    }

    /// What a turn ending at `now` sends, given the status it would say.
    fn plan(&mut self, now: Instant, status: String) -> Turn {
        let ready = !std::mem::replace(&mut self.ready, true);
        let watchdog = self
            .feed_every
            .is_some_and(|every| ready || now.duration_since(self.last_fed) >= every);
        if watchdog {
            self.last_fed = now;
        }
        let status = (status != self.status).then(|| {
            self.status.clone_from(&status);
            status
        });
        Turn {
            ready,
            watchdog,
            status,
        }
    }

    /// The agent stops (`why`: the signal): `STOPPING=1`.
    pub fn stopping(&mut self, why: &str) {
        if self.on {
            let status = format!("stopping ({why}): detaching probes");
            self.send(&[NotifyState::Stopping, NotifyState::Status(&status)]);
        }
    }

    fn send(&mut self, states: &[NotifyState<'_>]) {
        if states.is_empty() {
            return;
        }
        if let Err(e) = sd_notify::notify(states)
            && !std::mem::replace(&mut self.warned, true)
        {
            tracing::warn!("cannot notify systemd (NOTIFY_SOCKET): {e}");
        }
    }
}

/// The `STATUS=` line: what is watched, how many findings fire, how many
/// windows were evaluated.
pub fn status(watched: &[&str], firing: usize, windows: u64) -> String {
    let what = match watched {
        [] => "no target attached yet".to_owned(),
        [only] if *only == super::targets::HOST => {
            "watching the host (no target process)".to_owned()
        }
        ids => format!("watching {}", ids.join(", ")),
    };
    let s = if firing == 1 { "" } else { "s" };
    format!("{what}; {firing} finding{s} firing; {windows} windows evaluated")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_once_then_the_watchdog_at_half_its_interval() {
        let t0 = Instant::now();
        let mut n = Notifier::new(true, Some(Duration::from_secs(10)), t0);
        let first = n.plan(t0, "a".into());
        assert_eq!(
            first,
            Turn {
                ready: true,
                watchdog: true,
                status: Some("a".into())
            }
        );
        // Turns every 250 ms: fed again 5 s after the last feed, not before.
        let quiet = n.plan(t0 + Duration::from_millis(4_750), "a".into());
        assert_eq!(quiet, Turn::default());
        let fed = n.plan(t0 + Duration::from_secs(5), "a".into());
        assert!(
            fed.watchdog && !fed.ready && fed.status.is_none(),
            "{fed:?}"
        );
        assert!(!n.plan(t0 + Duration::from_secs(9), "a".into()).watchdog);
        assert!(n.plan(t0 + Duration::from_secs(10), "a".into()).watchdog);
        // A new status is sent once.
        let st = n.plan(t0 + Duration::from_secs(11), "b".into());
        assert_eq!(st.status.as_deref(), Some("b"));
        assert_eq!(
            n.plan(t0 + Duration::from_secs(12), "b".into()).status,
            None
        );
    }

    #[test]
    fn no_watchdog_unless_systemd_asked() {
        let t0 = Instant::now();
        for wd in [None, Some(Duration::ZERO)] {
            let mut n = Notifier::new(true, wd, t0);
            assert!(n.plan(t0, String::new()).ready);
            assert!(
                !n.plan(t0 + Duration::from_secs(3600), String::new())
                    .watchdog
            );
        }
    }

    #[test]
    fn nothing_is_computed_outside_systemd() {
        let mut n = Notifier::new(false, Some(Duration::from_secs(1)), Instant::now());
        n.turn(Instant::now(), || {
            panic!("status computed without NOTIFY_SOCKET")
        });
        n.stopping("SIGTERM");
        assert!(!n.ready);
    }

    #[test]
    fn status_says_what_is_watched() {
        assert_eq!(
            status(&["host"], 0, 0),
            "watching the host (no target process); 0 findings firing; 0 windows evaluated"
        );
        assert_eq!(
            status(&["mongod:27017", "mongod:27018"], 1, 42),
            "watching mongod:27017, mongod:27018; 1 finding firing; 42 windows evaluated"
        );
        assert_eq!(
            status(&[], 0, 3),
            "no target attached yet; 0 findings firing; 3 windows evaluated"
        );
    }
}
