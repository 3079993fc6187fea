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

/// A syntax error of the file `path` (whose text is `text`), without the
/// line toml quotes (it may hold a password) but with the key it is about.
pub fn syntax(path: &Path, text: &str, e: &toml::de::Error) -> FileError {
    FileError::Syntax {
        path: path.to_owned(),
        why: describe(text, e),
    }
}

/// toml's message with the key at its position (`[agent] max_series: ...`)
/// and the byte offset, never the line itself.
pub fn describe(text: &str, e: &toml::de::Error) -> String {
    match e.span() {
        Some(span) => match key_at(text, span.start) {
            Some(key) => format!("{key}: {} (at byte {})", e.message(), span.start),
            None => format!("{} (at byte {})", e.message(), span.start),
        },
        None => e.message().to_owned(),
    }
}

/// The key written on the line holding byte `offset` of `text`, as
/// `[table] key` (the table of the last header above it), or the header
/// itself when that line is one.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let before = text.get(..offset.min(text.len()))?;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].lines().next().unwrap_or_default().trim();
    if line.starts_with('[') {
        return Some(line.to_owned());
    }
    let key = line.split_once('=')?.0.trim();
    let table = before[..start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['));
    Some(match table {
        Some(t) => format!("{t} {key}"),
        None => key.to_owned(),
    })
}

/// A duration written as "60s", "5m", "100ms".
pub fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    humantime::parse_duration(&text)
        .map_err(|e| serde::de::Error::custom(format!("{text:?}: {e} (e.g. \"60s\", \"5m\")")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn why(text: &str) -> String {
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code, reason = "only parsed")]
        struct Agent {
            max_series: Option<usize>,
            uri: Option<String>,
        }
        #[derive(Debug, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code, reason = "only parsed")]
        struct File {
            agent: Option<Agent>,
        }
        let e = toml::from_str::<File>(text).unwrap_err();
        syntax(Path::new("m.toml"), text, &e).to_string()
    }

    #[test]
    fn a_syntax_error_names_the_key_not_the_line() {
        let e = why("[agent]\nuri = \"mongodb://u:secret@h\"\nmax_series = -1\n");
        assert!(e.contains("[agent] max_series: "), "{e}");
        assert!(!e.contains("secret"), "{e}");
        let e = why("# c\n[agnet]\nx = 1\n");
        assert!(e.contains("[agnet]"), "{e}");
        let e = why("[agent]\nmax_serie = 3\n");
        assert!(e.contains("[agent] max_serie: unknown field"), "{e}");
        assert_eq!(key_at("a = 1\n", 4).as_deref(), Some("a"));
        assert_eq!(key_at("", 9), None);
    }
}
