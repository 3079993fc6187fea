//! A restarted mongod is known again by its port, before anything is
//! attached to it under another name.
//!
//! A mongod started again (systemd after a SIGTERM, or after a crash) is
//! seen by the next scan, a second or so before it listens: it recovers
//! WiredTiger and the oplog first. Attached then by what it is, it would be
//! known by its executable (`mongod@/usr/bin/mongod`), a new target beside
//! the one that went away, its findings a new episode until it is renamed
//! once it listens. So:
//! - a process running what a target gone meanwhile ran, with the same
//!   command line (as systemd starts it again), is that target: attached at
//!   once under its id, so that its recovery is watched too;
//! - one running the same program (same name, same executable) another way
//!   is held back: its sockets are read again at each scan (every
//!   [`HELD_SCAN`] while one is held) and it is attached as soon as it
//!   listens, under its port id: the gone target's, when it came back on the
//!   same port. Held back for [`HOLD`] at most; past that (a long recovery)
//!   it is attached by its executable as any process seen before it
//!   listens, and renamed once it does.
//!
//! Only in the same place: a target scoped by its pod, container or network
//! namespace (`mongod:27017@pod:UID`, see [`super::netns`]) is awaited
//! there (a pod's container started again keeps its pod), and a process in
//! another place is never taken for its restart.

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use super::targets::{Found, TargetId};
use crate::recording::Target;

/// How long a process that looks like a restart waits to listen before it
/// is attached anyway (mongod's recovery takes seconds; a long one more).
pub const HOLD: Duration = Duration::from_secs(30);

/// How often the process table is scanned while a process is held back
/// (instead of every second): it is attached within this of listening.
pub const HELD_SCAN: Duration = Duration::from_millis(200);

/// How long after a target went the host is not watched on its own (its
/// attach, over a second, would delay that of the target started again).
pub const HOST_AFTER: Duration = Duration::from_secs(5);

/// How long a gone target is awaited (a restart later than this is a new
/// start, attached as any).
pub const AWAIT: Duration = Duration::from_secs(600);

/// What ran under a target that is gone.
#[derive(Debug, Clone)]
struct Gone {
    comm: String,
    exe: Option<String>,
    cmdline: Vec<String>,
    /// The id's scope (`@pod:UID`, ...), `None` in the host's namespace.
    scope: Option<String>,
    went: Instant,
}

/// What ran under the targets that are gone, and the processes held back.
#[derive(Debug, Default)]
pub struct Restarts {
    gone: BTreeMap<TargetId, Gone>,
    /// Held-back pid → when it was first seen.
    held: BTreeMap<u32, Instant>,
}

/// What to do with a process not watched yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Attach,
    /// The gone target itself, started again: the same program with the
    /// same command line (as systemd restarts it). Attached at once under
    /// that target's id, while it recovers.
    Resume(TargetId),
    /// Held back, first seen now: the gone target it looks like.
    HoldFirst(TargetId),
    /// Held back, as at the last scan.
    Hold,
}

impl Restarts {
    /// Target `id`, which ran `target`, is gone (its watch detached).
    /// Awaited only when it was known by its port (`comm:PORT`, scoped or
    /// not): one that never listened is known by its executable again at
    /// once.
    pub fn went(&mut self, id: &str, target: &Target, now: Instant) {
        let Some(rest) = id
            .strip_prefix(target.comm.as_str())
            .and_then(|rest| rest.strip_prefix(':'))
        else {
            return;
        };
        let (port, scope) = match rest.split_once('@') {
            Some((port, scope)) => (port, Some(format!("@{scope}"))),
            None => (rest, None),
        };
        if port.parse::<u16>().is_err() {
            return;
        }
        let gone = Gone {
            comm: target.comm.clone(),
            exe: target.exe.clone(),
            cmdline: target.cmdline.clone(),
            scope,
            went: now,
        };
        self.gone.insert(id.to_owned(), gone);
    }

    /// Forgets the targets gone for longer than [`AWAIT`] and the held pids
    /// no longer running.
    pub fn retain(&mut self, now: Instant, pids: &[u32]) {
        self.gone.retain(|_, g| now.duration_since(g.went) < AWAIT);
        self.held.retain(|pid, _| pids.contains(pid));
    }

    /// Whether the host should not be watched on its own now: a process is
    /// held back, or a target went less than [`HOST_AFTER`] ago.
    pub fn awaiting(&self, now: Instant) -> bool {
        self.holding()
            || self
                .gone
                .values()
                .any(|g| now.duration_since(g.went) < HOST_AFTER)
    }

    /// Whether a process is held back now.
    pub fn holding(&self) -> bool {
        !self.held.is_empty()
    }

    /// `id` is watched again.
    pub fn back(&mut self, id: &str, pid: u32) {
        self.gone.remove(id);
        self.held.remove(&pid);
    }

    /// Whether to attach `found` now (see the module doc).
    pub fn decide(&mut self, found: &Found, now: Instant) -> Decision {
        if found.listening {
            return Decision::Attach;
        }
        let t = &found.target;
        let scope = found.scope.as_ref().map(super::netns::Scope::suffix);
        let same_program = |g: &Gone| g.comm == t.comm && g.exe == t.exe && g.scope == scope;
        let itself = self
            .gone
            .iter()
            .find(|(_, g)| same_program(g) && !g.cmdline.is_empty() && g.cmdline == t.cmdline);
        if let Some((id, _)) = itself {
            return Decision::Resume(id.clone());
        }
        let Some((like, _)) = self.gone.iter().find(|(_, g)| same_program(g)) else {
            return Decision::Attach;
        };
        match self.held.get(&found.target.pid) {
            None => {
                self.held.insert(found.target.pid, now);
                Decision::HoldFirst(like.clone())
            }
            Some(since) if now.duration_since(*since) < HOLD => Decision::Hold,
            Some(_) => Decision::Attach,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(pid: u32, comm: &str, exe: &str, listening: bool) -> Found {
        found_with(pid, comm, exe, listening, &[exe, "--port", "27017"])
    }

    fn found_with(pid: u32, comm: &str, exe: &str, listening: bool, cmd: &[&str]) -> Found {
        Found {
            id: if listening {
                format!("{comm}:27017")
            } else {
                format!("{comm}@{exe}")
            },
            target: Target {
                pid,
                comm: comm.into(),
                exe: Some(exe.into()),
                cmdline: cmd.iter().map(|s| (*s).to_owned()).collect(),
                how: "process".into(),
                exit_code: None,
            },
            scope: None,
            listening,
        }
    }

    /// What ran under `mongod:27017` before it went: started as
    /// `/usr/bin/mongod --config /etc/mongod.conf`.
    fn went_before(r: &mut Restarts, t0: Instant) {
        let old = found_with(
            1,
            "mongod",
            "/usr/bin/mongod",
            true,
            &["/usr/bin/mongod", "--config", "/etc/mongod.conf"],
        );
        r.went("mongod:27017", &old.target, t0);
    }

    #[test]
    fn the_same_command_started_again_is_the_gone_target_at_once() {
        let mut r = Restarts::default();
        let t0 = Instant::now();
        went_before(&mut r, t0);
        let again = found_with(
            2,
            "mongod",
            "/usr/bin/mongod",
            false,
            &["/usr/bin/mongod", "--config", "/etc/mongod.conf"],
        );
        assert!(r.awaiting(t0), "just gone: the host waits");
        assert!(!r.awaiting(t0 + HOST_AFTER));
        assert_eq!(
            r.decide(&again, t0),
            Decision::Resume("mongod:27017".into())
        );
        assert!(!r.holding());
    }

    #[test]
    fn a_restart_is_held_until_it_listens_or_the_hold_ends() {
        let mut r = Restarts::default();
        let t0 = Instant::now();
        // Nothing gone: attached at once, listening or not.
        assert_eq!(
            r.decide(&found(2, "mongod", "/usr/bin/mongod", false), t0),
            Decision::Attach
        );
        went_before(&mut r, t0);
        // The same program, started another way: held until it listens.
        let starting = found(3, "mongod", "/usr/bin/mongod", false);
        assert_eq!(
            r.decide(&starting, t0),
            Decision::HoldFirst("mongod:27017".into())
        );
        assert!(r.holding());
        assert_eq!(r.decide(&starting, t0 + HOLD / 2), Decision::Hold);
        // Listening: attached (under its port id).
        assert_eq!(
            r.decide(&found(3, "mongod", "/usr/bin/mongod", true), t0 + HOLD / 2),
            Decision::Attach
        );
        // A recovery longer than the hold: attached by its executable.
        assert_eq!(r.decide(&starting, t0 + HOLD), Decision::Attach);
        // A target known by its executable (it never listened): its
        // restart is attached at once, by its executable again.
        let mut r2 = Restarts::default();
        let spin = found_with(6, "spin", "/bin/spin", false, &["/bin/spin"]);
        r2.went("spin@/bin/spin", &spin.target, t0);
        assert_eq!(r2.decide(&spin, t0), Decision::Attach);
        // Another program, or another name: not a restart of it.
        assert_eq!(
            r.decide(&found(4, "mongod", "/opt/other/mongod", false), t0),
            Decision::Attach
        );
        assert_eq!(
            r.decide(&found(5, "mongos", "/usr/bin/mongod", false), t0),
            Decision::Attach
        );
    }

    #[test]
    fn a_scoped_target_is_awaited_in_its_own_place_only() {
        use crate::agent::netns::Scope;
        let t0 = Instant::now();
        let cmd = ["/usr/bin/mongod", "--config", "/etc/mongod.conf"];
        let pod = Scope::Pod("0b5f3c2e-1a2b-4c3d-8e9f-0a1b2c3d4e5f".into());
        let id = format!("mongod:27017{}", pod.suffix());
        let in_pod = |pid, scope: Option<Scope>| Found {
            scope,
            ..found_with(pid, "mongod", "/usr/bin/mongod", false, &cmd)
        };
        let mut r = Restarts::default();
        r.went(&id, &in_pod(1, Some(pod.clone())).target, t0);
        // The same command in the host's namespace, or in another pod: not it.
        assert_eq!(r.decide(&in_pod(2, None), t0), Decision::Attach);
        let other = Scope::Pod("ffffffff-1a2b-4c3d-8e9f-0a1b2c3d4e5f".into());
        assert_eq!(r.decide(&in_pod(3, Some(other)), t0), Decision::Attach);
        // In its pod again (a new container): the gone target.
        assert_eq!(r.decide(&in_pod(4, Some(pod)), t0), Decision::Resume(id));
        // And a host target's restart is not taken from a pod.
        let mut r = Restarts::default();
        went_before(&mut r, t0);
        let ns = Some(Scope::NetNs(7));
        assert_eq!(r.decide(&in_pod(5, ns), t0), Decision::Attach);
    }

    #[test]
    fn back_and_long_gone_targets_hold_nothing() {
        let mut r = Restarts::default();
        let t0 = Instant::now();
        went_before(&mut r, t0);
        let starting = found(3, "mongod", "/usr/bin/mongod", false);
        assert!(matches!(r.decide(&starting, t0), Decision::HoldFirst(_)));
        r.back("mongod:27017", 3);
        assert_eq!(r.decide(&starting, t0), Decision::Attach);
        // Gone longer than AWAIT: a process starting now is a new start.
        went_before(&mut r, t0);
        r.retain(t0 + AWAIT, &[3]);
        assert_eq!(r.decide(&starting, t0 + AWAIT), Decision::Attach);
        // A held pid that exited is forgotten.
        went_before(&mut r, t0);
        assert!(matches!(r.decide(&starting, t0), Decision::HoldFirst(_)));
        r.retain(t0, &[]);
        assert!(matches!(r.decide(&starting, t0), Decision::HoldFirst(_)));
    }
}
