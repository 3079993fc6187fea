//! Logging to stderr with `tracing`: warnings by default, `-v` for info,
//! `-vv` for debug; `RUST_LOG` overrides. Each event is one line in the
//! scheme of [`crate::messages`]: `mdiag: warning: TEXT field=value`
//! (`mdiag agent: ...` in the agent), after its syslog priority (`<4>`)
//! when stderr is the journal ([`crate::journal`]).
//!
//! The agent's finding changes ([`messages::FINDING_CHANGES`]) are lines it
//! always wrote as notes: they pass at any verbosity, and are written as a
//! note, their message only (their fields are for other subscribers), with
//! the priority of their level.
use std::fmt;
use std::io::IsTerminal as _;

use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use crate::journal::{self, Priority};
use crate::messages;

pub fn init(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let mut filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    if let Ok(d) = format!("{}=info", messages::FINDING_CHANGES).parse() {
        filter = filter.add_directive(d);
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal, not in a journal or a file.
        .with_ansi(std::io::stderr().is_terminal())
        .event_format(Lines {
            journal: journal::stderr_is_journal(),
        })
        .try_init();
}

/// Formats an event as a line of [`crate::messages`]: speaker, level, then
/// the message and the other fields; first the priority when `journal`.
struct Lines {
    journal: bool,
}

impl<S, N> FormatEvent<S, N> for Lines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let level = *event.metadata().level();
        if self.journal {
            write!(writer, "{}", Priority::of(level).prefix())?;
        }
        if event.metadata().target() == messages::FINDING_CHANGES {
            let mut message = Message(String::new());
            event.record(&mut message);
            return writeln!(writer, "{}", messages::note_line(message.0));
        }
        write!(
            writer,
            "{}",
            messages::compose(messages::speaker(), Some(messages::level_word(level)), "")
        )?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// An event's `message` field.
struct Message(String);

impl tracing::field::Visit for Message {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.0 = format!("{value:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use chrono::TimeZone as _;

    use super::*;
    use crate::agent::findings::{Change, log_change};
    use crate::agent::lifecycle::{State, Transition};
    use crate::findings::Severity;

    /// The lines `Lines` writes for what `emit` logs (at the default
    /// verbosity, as the agent runs).
    fn lines(journal: bool, emit: impl FnOnce()) -> String {
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = out.clone();
        let mut filter = EnvFilter::new("warn");
        filter = filter.add_directive(
            format!("{}=info", messages::FINDING_CHANGES)
                .parse()
                .unwrap(),
        );
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(move || Sink(sink.clone()))
            .with_ansi(false)
            .event_format(Lines { journal })
            .finish();
        tracing::subscriber::with_default(subscriber, emit);
        String::from_utf8(out.lock().unwrap().clone()).unwrap()
    }

    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn change(from: State, to: State) -> Change {
        Change {
            rule: "host.tcp_keepalive".into(),
            target: "host".into(),
            title: "Keepalive too long".into(),
            summary: "7200 s".into(),
            transition: Transition { from, to },
            episode_start: chrono::Utc.timestamp_opt(1_800_000_000, 0).unwrap(),
            at: chrono::Utc.timestamp_opt(1_800_000_060, 0).unwrap(),
        }
    }

    #[test]
    fn lines_carry_the_journal_priority_only_in_the_journal() {
        let emit = || {
            tracing::warn!(pid = 7, "duty cycle late");
            tracing::info!("hidden at the default verbosity");
            log_change(
                &change(State::Inactive, State::Pending),
                Some(Severity::Low),
            );
            log_change(&change(State::Pending, State::Firing), Some(Severity::Low));
            log_change(
                &change(State::Pending, State::Firing),
                Some(Severity::Critical),
            );
            log_change(&change(State::Firing, State::Resolved), None);
        };
        let line = "finding host.tcp_keepalive on host";
        let since = "(Keepalive too long; episode since 2027-01-15T08:00:00Z)";
        let plain = [
            "mdiag: warning: duty cycle late pid=7".to_owned(),
            format!("mdiag: {line}: inactive → pending {since}"),
            format!("mdiag: {line}: pending → firing {since}"),
            format!("mdiag: {line}: pending → firing {since}"),
            format!("mdiag: {line}: firing → resolved {since}"),
        ];
        let got = lines(false, emit);
        assert_eq!(got.lines().collect::<Vec<_>>(), plain, "{got}");
        let got = lines(true, emit);
        let prefixed: Vec<String> = ["<4>", "<6>", "<4>", "<3>", "<6>"]
            .iter()
            .zip(&plain)
            .map(|(p, l)| format!("{p}{l}"))
            .collect();
        assert_eq!(got.lines().collect::<Vec<_>>(), prefixed, "{got}");
    }

    #[test]
    fn a_change_is_one_event_with_its_fields() {
        #[derive(Default)]
        struct Fields(Vec<(String, String)>);
        impl tracing::field::Visit for Fields {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn fmt::Debug) {
                self.0.push((f.name().to_owned(), format!("{v:?}")));
            }
            fn record_str(&mut self, f: &tracing::field::Field, v: &str) {
                self.0.push((f.name().to_owned(), v.to_owned()));
            }
        }
        struct Capture(Arc<Mutex<Vec<(tracing::Level, Fields)>>>);
        impl<S: Subscriber> tracing_subscriber::Layer<S> for Capture {
            fn on_event(&self, e: &Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
                if e.metadata().target() == messages::FINDING_CHANGES {
                    let mut f = Fields::default();
                    e.record(&mut f);
                    self.0.lock().unwrap().push((*e.metadata().level(), f));
                }
            }
        }
        use tracing_subscriber::layer::SubscriberExt as _;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry().with(Capture(seen.clone()));
        tracing::subscriber::with_default(subscriber, || {
            log_change(&change(State::Pending, State::Firing), Some(Severity::High));
        });
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        let (level, fields) = &seen[0];
        assert_eq!(*level, tracing::Level::WARN);
        let get = |k: &str| {
            fields
                .0
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
                .unwrap_or_else(|| panic!("no {k}: {:?}", fields.0))
        };
        assert_eq!(get("rule"), "host.tcp_keepalive");
        assert_eq!(get("target_id"), "host");
        assert_eq!(get("severity"), "high");
        assert_eq!(get("from"), "pending");
        assert_eq!(get("to"), "firing");
        assert_eq!(get("summary"), "7200 s");
        assert_eq!(get("episode_since"), "2027-01-15T08:00:00Z");
    }
}
