//! One place for the lines mdiag writes on standard error for people: the
//! commands' notes, the agent's journal lines, the error that ends a run, and
//! (through [`crate::logging`]) the `tracing` warnings of the probes.
//!
//! One prefix scheme: `SPEAKER: TEXT` for a note, `SPEAKER: LEVEL: TEXT` for a
//! warning or an error, where the speaker is `mdiag`, or `mdiag agent` once
//! [`speak_as_agent`] was called (the agent's lines go to the journal, next to
//! those of the server it watches). Standard output (reports, JSON) never
//! goes through here.
//!
//! A closed standard error is ignored: these lines are commentary, and
//! `eprintln!` would panic. When standard error is the systemd journal, each
//! line starts with its syslog priority ([`crate::journal`]): a note `<6>`,
//! an error `<3>`.

use std::fmt::Display;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::journal::{self, Priority};

/// The `tracing` target of the agent's finding changes: one event each,
/// with the finding's fields, written as a note (`SPEAKER: finding ...`),
/// whatever the verbosity (see [`crate::logging`]).
pub const FINDING_CHANGES: &str = "mdiag::finding_changes";

/// Set once the process runs as `mdiag agent`.
static AGENT: AtomicBool = AtomicBool::new(false);

/// From now on, lines are the agent's (`mdiag agent: ...`).
pub fn speak_as_agent() {
    AGENT.store(true, Ordering::Relaxed);
}

/// Who the lines say they come from: `mdiag` or `mdiag agent`.
pub fn speaker() -> &'static str {
    if AGENT.load(Ordering::Relaxed) {
        "mdiag agent"
    } else {
        "mdiag"
    }
}

/// A line as it is written, without the newline: `SPEAKER: TEXT`, or
/// `SPEAKER: LEVEL: TEXT` when it has a level.
pub fn compose(speaker: &str, level: Option<&str>, text: impl Display) -> String {
    match level {
        Some(level) => format!("{speaker}: {level}: {text}"),
        None => format!("{speaker}: {text}"),
    }
}

/// The word a line gives for a `tracing` level.
pub fn level_word(level: tracing::Level) -> &'static str {
    match level {
        tracing::Level::ERROR => "error",
        tracing::Level::WARN => "warning",
        tracing::Level::INFO => "info",
        tracing::Level::DEBUG => "debug",
        tracing::Level::TRACE => "trace",
    }
}

/// A note: what mdiag is doing, or something the reader should know.
pub fn note(text: impl Display) {
    write_line(Priority::Info, &note_line(text));
}

/// A note as it is written, without the newline: `mdiag: TEXT`.
pub fn note_line(text: impl Display) -> String {
    compose(speaker(), None, text)
}

/// The error that ends the run: `mdiag: error: TEXT`.
pub fn error(text: impl Display) {
    write_line(Priority::Err, &compose(speaker(), Some("error"), text));
}

/// Writes one whole line on standard error, with its priority when that is
/// the journal; a closed one is ignored.
fn write_line(p: Priority, line: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{}{line}", journal::prefix(p));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_prefix_scheme() {
        assert_eq!(
            compose("mdiag", None, "probes attached"),
            "mdiag: probes attached"
        );
        assert_eq!(
            compose(
                "mdiag agent",
                Some(level_word(tracing::Level::WARN)),
                "duty cycle: x"
            ),
            "mdiag agent: warning: duty cycle: x"
        );
        assert_eq!(
            compose("mdiag", Some("error"), format_args!("{} s", 3)),
            "mdiag: error: 3 s"
        );
    }
}
