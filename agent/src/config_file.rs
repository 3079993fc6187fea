//! The config file (`/etc/mdiag/mdiag.toml` or `--config`) as text, shared
//! by the tables read from it (`[agent]` in `agent/config.rs`, `[fleet]` in
//! `fleet/config.rs`): reading it, a syntax error that does not quote the
//! line, and durations written as "60s". Low in the module graph so that
//! neither table borrows the other's internals.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// Why the file could not be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("cannot read the config file {}: {source}; fix the path given with --config", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {}: {why}", path.display())]
    Syntax { path: PathBuf, why: String },
}

/// The text of `path` (`--config`).
pub fn read(path: &Path) -> Result<String, FileError> {
    std::fs::read_to_string(path).map_err(|source| FileError::Read {
        path: path.to_owned(),
        source,
    })
}

/// A syntax error of the file `path`, without the line toml quotes (it
/// may hold a password).
pub fn syntax(path: &Path, e: &toml::de::Error) -> FileError {
    FileError::Syntax {
        path: path.to_owned(),
        why: match e.span() {
            Some(span) => format!("{} (at byte {})", e.message(), span.start),
            None => e.message().to_owned(),
        },
    }
}

/// A duration written as "60s", "5m", "100ms".
pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    humantime::parse_duration(&text)
        .map_err(|e| serde::de::Error::custom(format!("{text:?}: {e} (e.g. \"60s\", \"5m\")")))
}
