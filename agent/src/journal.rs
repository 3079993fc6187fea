//! Whether standard error is the systemd journal, and the syslog priority
//! prefix journald reads there.
//!
//! systemd connects a service's stderr to journald with
//! `StandardError=journal` (the default) and says so in `JOURNAL_STREAM`:
//! `DEVICE:INODE` of that stream socket (systemd.exec(5)). A process checks
//! the variable against its own stderr with fstat(2), since a child whose
//! stderr was redirected inherits the variable too. Only then does each
//! line start with `<N>`, the syslog priority, which journald strips and
//! keeps as the entry's `PRIORITY=` (`SyslogLevelPrefix=`, on by default):
//! `journalctl -p warning` then shows the agent's warnings, and a log
//! shipper maps them to a severity. On a terminal, in a file, in a
//! container's log, lines stay as they are.

use std::os::fd::AsFd;
use std::sync::OnceLock;

/// The syslog priorities mdiag writes (syslog(3); journald's `PRIORITY=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// 3: an error (the agent's own, or a critical finding firing).
    Err = 3,
    /// 4: a warning, or a finding firing or flapping.
    Warning = 4,
    /// 6: a note, or a finding's other changes.
    Info = 6,
    /// 7: debugging detail (`-vv`).
    Debug = 7,
}

impl Priority {
    /// The priority of a `tracing` level (trace is debug too).
    pub fn of(level: tracing::Level) -> Self {
        match level {
            tracing::Level::ERROR => Self::Err,
            tracing::Level::WARN => Self::Warning,
            tracing::Level::INFO => Self::Info,
            tracing::Level::DEBUG | tracing::Level::TRACE => Self::Debug,
        }
    }

    /// The line prefix journald reads: `<3>` ... `<7>`.
    pub fn prefix(self) -> &'static str {
        match self {
            Self::Err => "<3>",
            Self::Warning => "<4>",
            Self::Info => "<6>",
            Self::Debug => "<7>",
        }
    }
}

/// The prefix a line of this priority gets on this process's stderr:
/// `<N>` when stderr is the journal, nothing otherwise.
pub fn prefix(p: Priority) -> &'static str {
    if stderr_is_journal() { p.prefix() } else { "" }
}

/// Whether this process's stderr is the journal stream `JOURNAL_STREAM`
/// names (looked at once: neither changes while mdiag runs).
pub fn stderr_is_journal() -> bool {
    static IS: OnceLock<bool> = OnceLock::new();
    *IS.get_or_init(|| {
        std::env::var("JOURNAL_STREAM").is_ok_and(|v| names_fd(&v, std::io::stderr().as_fd()))
    })
}

/// Whether `journal_stream` (`DEVICE:INODE`, decimal) names the file open
/// on `fd`.
pub fn names_fd(journal_stream: &str, fd: impl AsFd) -> bool {
    let Some((dev, ino)) = parse(journal_stream) else {
        return false;
    };
    nix::sys::stat::fstat(fd).is_ok_and(|st| st.st_dev == dev && st.st_ino == ino)
}

/// `DEVICE:INODE` as systemd writes it (two decimal numbers).
fn parse(v: &str) -> Option<(u64, u64)> {
    let (dev, ino) = v.split_once(':')?;
    Some((dev.parse().ok()?, ino.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt as _;

    use super::*;

    #[test]
    fn journal_stream_names_the_file_it_was_made_for() {
        let a = tempfile::tempfile().unwrap();
        let b = tempfile::tempfile().unwrap();
        let m = a.metadata().unwrap();
        let v = format!("{}:{}", m.dev(), m.ino());
        assert!(names_fd(&v, &a));
        // Another file (a child's stderr redirected elsewhere): not the journal.
        assert!(!names_fd(&v, &b));
        for bad in ["", ":", "1", "x:1", "1:x", &format!("{}", m.dev())] {
            assert!(!names_fd(bad, &a), "{bad:?}");
        }
    }

    #[test]
    fn priorities_are_syslog_s() {
        assert_eq!(Priority::of(tracing::Level::ERROR).prefix(), "<3>");
        assert_eq!(Priority::of(tracing::Level::WARN).prefix(), "<4>");
        assert_eq!(Priority::of(tracing::Level::INFO).prefix(), "<6>");
        assert_eq!(Priority::of(tracing::Level::DEBUG).prefix(), "<7>");
        assert_eq!(Priority::of(tracing::Level::TRACE), Priority::Debug);
    }
}
