//! Logging to stderr with `tracing`: warnings by default, `-v` for info,
//! `-vv` for debug; `RUST_LOG` overrides. Each event is one line in the
//! scheme of [`crate::messages`]: `mdiag: warning: TEXT field=value`
//! (`mdiag agent: ...` in the agent).
use std::fmt;
use std::io::IsTerminal as _;

use tracing::{Event, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use crate::messages;

pub fn init(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour only for a person at a terminal, not in a journal or a file.
        .with_ansi(std::io::stderr().is_terminal())
        .event_format(Lines)
        .try_init();
}

/// Formats an event as a line of [`crate::messages`]: speaker, level, then
/// the message and the other fields.
struct Lines;

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
        let level = messages::level_word(*event.metadata().level());
        write!(
            writer,
            "{}",
            messages::compose(messages::speaker(), Some(level), "")
        )?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}
