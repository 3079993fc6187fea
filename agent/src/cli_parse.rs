//! The command line's value parsers (`value_parser = ...` in `cli.rs`):
//! durations, times and `--since`. Low in the module graph so that the
//! parsers and the commands that share them (`export`, `fleet`) do not
//! depend on each other through `cli`.

use std::time::Duration;

use chrono::{DateTime, NaiveDateTime, Utc};

/// Parses "60s", "5m", "1h30m", "250ms"; refuses zero and anything over a week.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 60s, 5m, 1h30m)"))?;
    if d < Duration::from_millis(100) {
        return Err("too short: record for at least 100ms".into());
    }
    if d > Duration::from_secs(7 * 24 * 3600) {
        return Err(
            "too long for one recording file (at most 7 days): record several shorter ones".into(),
        );
    }
    Ok(d)
}

/// Parses an allocator window setting: "200ms", "5s", or "0" (off).
pub fn parse_alloc_duration(s: &str) -> Result<Duration, String> {
    if s.trim() == "0" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(s).map_err(|e| format!("{e} (examples: 200ms, 5s, or 0 for off)"))
}

/// Parses a `--from`/`--to` time: RFC 3339 (`2024-04-16T11:34:42Z`,
/// `...+02:00`), or a date-time without zone taken as UTC
/// (`2024-04-16T11:34:42`, `2024-04-16 11:34`), or a date (`2024-04-16`).
pub fn parse_time(s: &str) -> Result<DateTime<Utc>, String> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    for f in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, f) {
            return Ok(t.and_utc());
        }
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        return Ok(d.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc());
    }
    Err(format!(
        "invalid time {s:?}: expected RFC 3339 (2024-04-16T11:34:42Z) or a UTC date-time (2024-04-16 11:34)"
    ))
}

/// `--since`: a duration back from now (`2h`, `7d`) or a time (RFC 3339,
/// `2024-04-16 11:40:00` UTC, a date).
pub fn parse_since(s: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(d) = humantime::parse_duration(s.trim()) {
        let d = chrono::Duration::from_std(d).map_err(|e| format!("{s}: {e}"))?;
        return Utc::now()
            .checked_sub_signed(d)
            .ok_or_else(|| format!("{s}: too far back"));
    }
    parse_time(s).map_err(|e| format!("{e} (or a duration back from now: 30m, 2h, 7d)"))
}
