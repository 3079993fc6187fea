//! The command line's value parsers (`value_parser = ...` in `cli.rs`):
//! durations, times, `--since` and `--docs-url`. Low in the module graph so
//! that the parsers and the commands that share them (`export`, `fleet`) do
//! not depend on each other through `cli`.

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

/// Parses `--sample-hz`: a whole number of samples per second and CPU
/// ([`check_sample_hz`]).
pub fn parse_sample_hz(s: &str) -> Result<u64, String> {
    let hz: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a whole number of samples per second (e.g. 99)"))?;
    check_sample_hz(hz).map(|()| hz)
}

/// A perf sampling rate mdiag accepts: 1 to [`MAX_SAMPLE_HZ`] Hz.
///
/// [`MAX_SAMPLE_HZ`]: mdiag_common::perf::MAX_SAMPLE_HZ
pub fn check_sample_hz(hz: u64) -> Result<(), String> {
    use mdiag_common::perf::MAX_SAMPLE_HZ;
    if (1..=MAX_SAMPLE_HZ).contains(&hz) {
        Ok(())
    } else {
        Err(format!(
            "{hz} Hz is out of range: sample 1 to {MAX_SAMPLE_HZ} times a second \
             (each sample of the target walks its stacks; the default, 99, costs little)"
        ))
    }
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

/// Parses `--docs-url`: the absolute URL of a docs directory, which the
/// pages' paths follow (`<URL>/rules/<id>.md`). Returned as the `url` crate
/// writes it (spaces and braces percent-encoded), a `'` encoded too so that
/// it fits the rules' single-quoted YAML strings, without a trailing slash.
pub fn parse_docs_url(s: &str) -> Result<String, String> {
    const EXAMPLE: &str =
        "give the address of the docs directory, e.g. https://docs.example.com/mdiag";
    let url = url::Url::parse(s.trim())
        .map_err(|e| format!("{s:?} is not an absolute URL ({e}): {EXAMPLE}"))?;
    if url.cannot_be_a_base() {
        return Err(format!(
            "{s:?} cannot be followed by a page's path: {EXAMPLE}"
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "{s:?} has a query or a fragment, which the pages' paths would follow: {EXAMPLE}"
        ));
    }
    Ok(url.as_str().trim_end_matches('/').replace('\'', "%27"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_hz_is_a_whole_number_from_1_to_1000() {
        assert_eq!(parse_sample_hz("99"), Ok(99));
        assert_eq!(parse_sample_hz(" 1000 "), Ok(1000));
        assert_eq!(parse_sample_hz("1"), Ok(1));
        for bad in ["0", "1001", "-5"] {
            let e = parse_sample_hz(bad).unwrap_err();
            assert!(
                e.contains("1000") || e.contains("whole number"),
                "{bad}: {e}"
            );
        }
        let e = parse_sample_hz("99.5").unwrap_err();
        assert!(e.contains("\"99.5\"") && e.contains("whole number"), "{e}");
        let e = parse_sample_hz("1001").unwrap_err();
        assert!(e.contains("1001 Hz") && e.contains("1 to 1000"), "{e}");
    }

    #[test]
    fn docs_url_is_an_absolute_url_pages_can_follow() {
        assert_eq!(
            parse_docs_url("https://docs.example.com/mdiag/").as_deref(),
            Ok("https://docs.example.com/mdiag")
        );
        assert_eq!(
            parse_docs_url("https://docs.example.com").as_deref(),
            Ok("https://docs.example.com")
        );
        assert_eq!(
            parse_docs_url("file:///usr/share/doc/mdiag").as_deref(),
            Ok("file:///usr/share/doc/mdiag")
        );
        assert_eq!(
            parse_docs_url("https://wiki.example.com/it's docs/{x}").as_deref(),
            Ok("https://wiki.example.com/it%27s%20docs/%7Bx%7D")
        );
        for (bad, says) in [
            ("docs.example.com/mdiag", "not an absolute URL"),
            ("", "not an absolute URL"),
            ("mailto:sre@example.com", "cannot be followed"),
            ("https://docs.example.com/?v=2", "query or a fragment"),
            ("https://docs.example.com/#top", "query or a fragment"),
        ] {
            let e = parse_docs_url(bad).unwrap_err();
            assert!(
                e.contains(says) && e.contains("e.g. https://"),
                "{bad}: {e}"
            );
        }
    }
}
