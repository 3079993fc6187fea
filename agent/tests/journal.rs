//! The `mdiag` binary under systemd's journal (no root needed): when
//! `JOURNAL_STREAM` names its stderr, each line starts with its syslog
//! priority (`<3>` for an error), which journald strips and keeps; when it
//! names another file (stderr redirected by a child of the service), or is
//! unset, lines stay as they are.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failure is the test failing"
)]

use std::os::unix::fs::MetadataExt as _;
use std::process::{Command, Stdio};

/// `mdiag explain` of a missing file (an error line), its stderr a file,
/// with `JOURNAL_STREAM` set to the DEV:INO of `names` (stderr itself when
/// `None`); returns what it wrote there.
fn stderr_of_error(names: Option<&std::fs::File>, unset: bool) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stderr");
    let err = std::fs::File::create(&path).unwrap();
    let m = names.unwrap_or(&err).metadata().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mdiag"));
    cmd.args(["explain", "/nonexistent/mdiag-journal-test.mdiag"])
        .env("NO_COLOR", "1")
        .env("JOURNAL_STREAM", format!("{}:{}", m.dev(), m.ino()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(err));
    if unset {
        cmd.env_remove("JOURNAL_STREAM");
    }
    let status = cmd.status().unwrap();
    assert_eq!(status.code(), Some(2), "{status:?}");
    std::fs::read_to_string(&path).unwrap()
}

#[test]
fn lines_start_with_their_priority_only_when_stderr_is_the_journal() {
    let journal = stderr_of_error(None, false);
    assert!(
        journal.starts_with("<3>mdiag: error: recording /nonexistent/mdiag-journal-test.mdiag"),
        "{journal:?}"
    );
    assert!(journal.lines().all(|l| l.starts_with('<')), "{journal:?}");
    let other = tempfile::tempfile().unwrap();
    let elsewhere = stderr_of_error(Some(&other), false);
    assert_eq!(elsewhere, journal.trim_start_matches("<3>"));
    assert_eq!(stderr_of_error(None, true), elsewhere);
}
