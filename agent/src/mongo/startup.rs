//! mongod's own startup warnings (`getLog: "startupWarnings"`): what mongod
//! itself said was wrong with its host and configuration when it started.
//!
//! mdiag keeps them verbatim (the lines as mongod logged them, bounded) and
//! shows them in the report's checklist section; a checklist rule that
//! checks the same setting names the warning's log id in its file
//! (`startup_warnings`), so the report says mongod warns about it too
//! instead of repeating it as news. Since 4.4 each line is one structured
//! log entry as JSON (`{"t":…,"id":22184,"msg":…,"attr":{…}}`); older
//! servers give plain text lines, kept as they are, without an id.

use bson::{Bson, Document};

/// At most this many lines are kept (mongod logs a handful).
pub const MAX_LINES: usize = 64;
/// At most this many bytes of each line.
pub const MAX_LINE_BYTES: usize = 2048;

/// One startup warning as mongod logged it.
#[derive(Debug, Clone, PartialEq)]
pub struct StartupWarning {
    /// The structured log's `id` (e.g. 22184); `None` for a pre-4.4 line.
    pub id: Option<i64>,
    /// The message with its attributes, as a reader wants it:
    /// "Soft rlimits for open file descriptors too low (currentValue: 1024,
    /// recommendedMinimum: 64000)".
    pub text: String,
}

/// The lines of a `getLog: "startupWarnings"` reply (its `log` array),
/// bounded by [`MAX_LINES`] and [`MAX_LINE_BYTES`]; a reply without one
/// gives none.
pub fn from_reply(reply: &Document) -> Vec<String> {
    let Ok(lines) = reply.get_array("log") else {
        return Vec::new();
    };
    lines
        .iter()
        .filter_map(Bson::as_str)
        .take(MAX_LINES)
        .map(|l| truncate(l.trim_end(), MAX_LINE_BYTES).to_owned())
        .collect()
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Reads one kept line: a structured entry's id, message and attributes,
/// or a plain line as it is. The 4.2-era blank separator lines and the
/// `** WARNING:` prefix-only lines give `None`.
pub fn parse(line: &str) -> Option<StartupWarning> {
    // A BSON document keeps the attributes in mongod's order.
    if let Ok(entry) = serde_json::from_str::<Document>(line) {
        let msg = entry.get_str("msg").ok()?.trim();
        let attrs = entry
            .get_document("attr")
            .map(|a| {
                a.iter()
                    .map(|(k, v)| match v {
                        Bson::String(s) => format!("{k}: {s}"),
                        v => format!("{k}: {v}"),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        let text = if attrs.is_empty() {
            msg.to_owned()
        } else {
            format!("{msg} ({attrs})")
        };
        let id = match entry.get("id") {
            Some(Bson::Int32(i)) => Some(i64::from(*i)),
            Some(Bson::Int64(i)) => Some(*i),
            _ => None,
        };
        return Some(StartupWarning { id, text });
    }
    // Pre-4.4: "2019-01-16T17:34:39.427-0500 I STORAGE  [initandlisten] ** WARNING: …"
    let text = line
        .split_once("] ")
        .map_or(line, |(_, rest)| rest)
        .trim()
        .trim_start_matches("** WARNING:")
        .trim_start_matches("**")
        .trim();
    (!text.is_empty()).then(|| StartupWarning {
        id: None,
        text: text.to_owned(),
    })
}

/// Startup warnings as mongod 6.0 logs them (access control, open files,
/// swappiness), for tests.
#[cfg(test)]
pub(crate) const EXAMPLE: [&str; 3] = [
    r#"{"t":{"$date":"2026-11-29T05:00:00.000+00:00"},"s":"W","c":"CONTROL","id":22120,"ctx":"initandlisten","msg":"Access control is not enabled for the database. Read and write access to data and configuration is unrestricted","tags":["startupWarnings"]}"#,
    r#"{"t":{"$date":"2026-11-29T05:00:00.000+00:00"},"s":"W","c":"CONTROL","id":22184,"ctx":"initandlisten","msg":"Soft rlimits for open file descriptors too low","attr":{"currentValue":1024,"recommendedMinimum":64000},"tags":["startupWarnings"]}"#,
    r#"{"t":{"$date":"2026-11-29T05:00:00.000+00:00"},"s":"W","c":"CONTROL","id":8386700,"ctx":"initandlisten","msg":"We suggest setting swappiness to 0 or 1, as swapping can cause performance problems.","attr":{"sysfsFile":"/proc/sys/vm/swappiness","currentValue":60},"tags":["startupWarnings"]}"#,
];

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    /// A 6.0 mongod's reply.
    fn reply() -> Document {
        doc! { "totalLinesWritten": 3, "log": EXAMPLE.to_vec(), "ok": 1.0 }
    }

    #[test]
    fn structured_lines_give_id_message_and_attributes() {
        let lines = from_reply(&reply());
        assert_eq!(lines.len(), 3);
        let parsed: Vec<StartupWarning> = lines.iter().filter_map(|l| parse(l)).collect();
        assert_eq!(parsed[0].id, Some(22120));
        assert!(parsed[0].text.starts_with("Access control is not enabled"));
        assert_eq!(
            parsed[1],
            StartupWarning {
                id: Some(22184),
                text: "Soft rlimits for open file descriptors too low (currentValue: 1024, recommendedMinimum: 64000)".into(),
            }
        );
        assert_eq!(
            parsed[2].text,
            "We suggest setting swappiness to 0 or 1, as swapping can cause performance problems. (sysfsFile: /proc/sys/vm/swappiness, currentValue: 60)"
        );
    }

    #[test]
    fn old_text_lines_are_kept_without_an_id_and_separators_dropped() {
        let w = parse("2019-01-16T17:34:39.427-0500 I STORAGE  [initandlisten] ** WARNING: Using the XFS filesystem is strongly recommended with the WiredTiger storage engine").unwrap();
        assert_eq!(w.id, None);
        assert_eq!(
            w.text,
            "Using the XFS filesystem is strongly recommended with the WiredTiger storage engine"
        );
        assert_eq!(
            parse("2019-01-16T17:34:39.427-0500 I STORAGE  [initandlisten] "),
            None
        );
    }

    #[test]
    fn a_reply_is_bounded_and_a_reply_without_log_gives_nothing() {
        let long = "x".repeat(MAX_LINE_BYTES * 2);
        let many: Vec<Bson> = (0..MAX_LINES * 2)
            .map(|_| Bson::String(long.clone()))
            .collect();
        let lines = from_reply(&doc! { "log": many });
        assert_eq!(lines.len(), MAX_LINES);
        assert!(lines.iter().all(|l| l.len() == MAX_LINE_BYTES));
        assert!(from_reply(&doc! { "ok": 0 }).is_empty());
        // A multi-byte character is never cut in half.
        let wide = "é".repeat(MAX_LINE_BYTES);
        let lines = from_reply(&doc! { "log": [wide] });
        assert!(lines[0].len() <= MAX_LINE_BYTES && lines[0].chars().all(|c| c == 'é'));
    }
}
