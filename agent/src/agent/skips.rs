//! Processes that match `processes` and are not watched, and why: counted
//! on `/metrics` (`mdiag_targets_skipped{reason}`, a gauge of the last scan,
//! every reason present, so a dashboard sees 0 and not a missing series)
//! and told once per process and reason (a line when a process starts
//! being skipped or is skipped for another reason; nothing while it stays
//! as it was, nothing every scan).
//!
//! Not counted: a process that exited between the scan and its look
//! (nothing left to watch), and one held back as a watched target's
//! restart (awaited on purpose, for at most `restarts::HOLD`, and told).

use std::collections::BTreeMap;

/// Why a matching process is not watched (a closed set: the label's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SkipReason {
    /// Its `/proc/PID` entry could not be read (its `comm`).
    Unreadable,
    /// Another watched target has the same id (the same port in the same
    /// network namespace, or the same executable before either listens).
    DuplicateId,
    /// Its probes could not be attached (tried again every 30 s; the error
    /// is in the log).
    AttachFailed,
}

impl SkipReason {
    pub const ALL: [SkipReason; 3] = [
        SkipReason::Unreadable,
        SkipReason::DuplicateId,
        SkipReason::AttachFailed,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            SkipReason::Unreadable => "unreadable",
            SkipReason::DuplicateId => "duplicate_id",
            SkipReason::AttachFailed => "attach_failed",
        }
    }

    /// The log line's explanation.
    fn why(self) -> &'static str {
        match self {
            SkipReason::Unreadable => "its /proc entry cannot be read",
            SkipReason::DuplicateId => "another watched target has the same id",
            SkipReason::AttachFailed => "its probes could not be attached",
        }
    }
}

/// The processes skipped at the last scan.
#[derive(Debug, Default)]
pub struct Skips {
    now: BTreeMap<u32, (String, SkipReason)>,
    scan: BTreeMap<u32, (String, SkipReason)>,
}

impl Skips {
    /// Notes that `pid` (named `what`) is skipped at this scan.
    pub fn skip(&mut self, pid: u32, what: &str, reason: SkipReason) {
        self.scan.insert(pid, (what.to_owned(), reason));
    }

    /// Ends a scan: what it skipped replaces the last scan's; returns the
    /// lines to log (processes newly skipped, or skipped for another reason).
    pub fn end_scan(&mut self) -> Vec<String> {
        let lines = self
            .scan
            .iter()
            .filter(|(pid, (_, r))| self.now.get(pid).is_none_or(|(_, was)| was != r))
            .map(|(pid, (what, r))| {
                format!(
                    "{what} (pid {pid}) is not watched: {} (reason {})",
                    r.why(),
                    r.as_str()
                )
            })
            .collect();
        self.now = std::mem::take(&mut self.scan);
        lines
    }

    /// How many processes the last scan skipped, for every reason.
    pub fn counts(&self) -> Vec<(&'static str, usize)> {
        SkipReason::ALL
            .iter()
            .map(|r| {
                let n = self.now.values().filter(|(_, x)| x == r).count();
                (r.as_str(), n)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn told_once_per_process_and_reason() {
        let mut s = Skips::default();
        assert!(s.end_scan().is_empty());
        s.skip(7, "mongod:27017", SkipReason::DuplicateId);
        let lines = s.end_scan();
        assert_eq!(
            lines,
            [
                "mongod:27017 (pid 7) is not watched: another watched target has the same id \
              (reason duplicate_id)"
            ]
        );
        // Still skipped, same reason: nothing more to say.
        s.skip(7, "mongod:27017", SkipReason::DuplicateId);
        assert!(s.end_scan().is_empty());
        // Another reason: said again.
        s.skip(7, "mongod:27017", SkipReason::AttachFailed);
        assert_eq!(s.end_scan().len(), 1);
        // Watched (or gone), then skipped again: said again.
        assert!(s.end_scan().is_empty());
        s.skip(7, "mongod:27017", SkipReason::AttachFailed);
        assert_eq!(s.end_scan().len(), 1);
    }

    #[test]
    fn every_reason_is_counted_zero_included() {
        let mut s = Skips::default();
        let zero: Vec<_> = SkipReason::ALL.iter().map(|r| (r.as_str(), 0)).collect();
        assert_eq!(s.counts(), zero);
        s.skip(7, "a", SkipReason::DuplicateId);
        s.skip(8, "b", SkipReason::DuplicateId);
        s.skip(9, "c", SkipReason::Unreadable);
        // Counted once the scan ends.
        assert_eq!(s.counts(), zero);
        s.end_scan();
        assert_eq!(
            s.counts(),
            [("unreadable", 1), ("duplicate_id", 2), ("attach_failed", 0)]
        );
        // A scan that skips nothing clears them.
        s.end_scan();
        assert_eq!(s.counts(), zero);
    }
}
