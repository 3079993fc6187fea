//! `mdiag export`: decoded FTDC (a `diagnostic.data` directory or one of its
//! files) as JSON lines, so any tool (jq, pandas, a spreadsheet) can read a
//! host's MongoDB history without MongoDB's own tooling.
//!
//! One line per sample:
//! `{"t":"2024-04-16T11:34:43.000Z","metrics":{"serverStatus.opcounters.insert":84,...}}`
//! with flattened dotted paths, numbers as JSON numbers (doubles as mongod
//! stores them: truncated to integers), booleans as JSON booleans and dates as
//! RFC 3339 strings (or ms with `dates_as_ms`). Metadata documents become
//! `{"t":...,"type":"metadata","doc":{...}}` and periodic metadata
//! `{"t":...,"type":"periodicMetadata","count":N,"doc":{...}}`.
//!
//! The directory is streamed one chunk at a time; the output is written line
//! by line, so memory stays at one decoded chunk whatever the input size.
//! Sample times strictly increase: a sample not after the previous one
//! written is left out and counted ([`ExportStats::duplicates`]).
//!
//! A damaged document stops the export with an error naming the file and
//! offset, unless `keep_going`: then only that document is skipped (or the
//! rest of its file when its length is broken) and the error is counted.

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::Path;

use bson::{Bson, Document};
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Number, Value};

use crate::ftdc::{Chunk, FtdcDir, FtdcDoc, FtdcError, MetricKind, MetricPaths};

/// What to export.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// Keep only the metrics matching one of these patterns (empty: all).
    /// A pattern without `*` selects the path itself and everything under it
    /// (`serverStatus.opcounters` selects `serverStatus.opcounters.insert`);
    /// `*` matches any run of characters (`*.opcounters.*`, `*bytes*`).
    pub metrics: Vec<String>,
    /// Only samples taken at or after this time.
    pub from: Option<DateTime<Utc>>,
    /// Only samples taken before this time.
    pub to: Option<DateTime<Utc>>,
    /// Leave out metadata and periodic metadata lines (they are written
    /// whatever `from`/`to` say: they describe the process, not a sample).
    pub skip_metadata: bool,
    /// Write date metrics as ms since the epoch instead of RFC 3339 strings.
    pub dates_as_ms: bool,
    /// On a damaged document, record the error in [`ExportStats::errors`] and
    /// go on with the next document (with the next file when the damage is
    /// in the framing) instead of failing.
    pub keep_going: bool,
}

/// What an export did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportStats {
    /// Files read.
    pub files: usize,
    /// Their total size in bytes.
    pub bytes_in: u64,
    /// Metric chunks decoded.
    pub chunks: usize,
    /// Sample lines written.
    pub samples: usize,
    /// Metadata and periodic metadata lines written.
    pub metadata: usize,
    /// Samples left out by `from`/`to`.
    pub out_of_range: usize,
    /// Samples left out for going back in time: not newer than the previous
    /// one written (see [`BACK_IN_TIME`]).
    pub duplicates: usize,
    /// Errors skipped with `keep_going`: one per damaged document, or per
    /// file whose framing broke (its rest skipped), each saying which.
    pub errors: Vec<String>,
}

/// Why samples going back in time are left out, in words.
pub const BACK_IN_TIME: &str = "their time is not after the previous sample written (the same seconds again: a repeated file, metrics.interim repeating an archive, or the clock set back)";

/// Exports `dir_or_file` as JSON lines to `out` (see the module doc).
pub fn export_ftdc(
    dir_or_file: &Path,
    out: &mut dyn Write,
    opts: &ExportOptions,
) -> Result<ExportStats, FtdcError> {
    let mut dir = FtdcDir::open(dir_or_file)?;
    let mut stats = ExportStats {
        files: dir.files().len(),
        bytes_in: dir.total_bytes(),
        ..ExportStats::default()
    };
    let mut out = BufWriter::with_capacity(1 << 20, out);
    let mut writer = SampleWriter::new(opts);
    while let Some(item) = dir.next() {
        let item = match item {
            Ok(item) => item,
            Err(e) if opts.keep_going && !matches!(e, FtdcError::Output { .. }) => {
                stats.errors.push(format!("{e} (skipped {})", e.skipped()));
                continue;
            }
            Err(e) => return Err(e),
        };
        match item.doc {
            FtdcDoc::Metrics(chunk) => {
                stats.chunks += 1;
                writer.write_chunk(&chunk, &mut out, &mut stats)?;
                dir.recycle(chunk);
            }
            FtdcDoc::Metadata { id, doc, .. } if !opts.skip_metadata => {
                write_metadata(&mut out, id, "metadata", None, &doc, opts)?;
                stats.metadata += 1;
            }
            FtdcDoc::PeriodicMetadata { id, count, doc, .. } if !opts.skip_metadata => {
                write_metadata(&mut out, id, "periodicMetadata", count, &doc, opts)?;
                stats.metadata += 1;
            }
            _ => {}
        }
    }
    out.flush().map_err(output)?;
    Ok(stats)
}

fn output(source: std::io::Error) -> FtdcError {
    FtdcError::Output { source }
}

/// Whether `path` matches `pattern` (see [`ExportOptions::metrics`]).
pub fn path_matches(pattern: &str, path: &str) -> bool {
    if !pattern.contains('*') {
        return path == pattern
            || (path.starts_with(pattern) && path.as_bytes().get(pattern.len()) == Some(&b'.'));
    }
    // Glob with `*` only: anchored first part, then each part in order.
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = path.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(i) => rest = &rest[i + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// The per-schema part of writing samples: which metrics are selected and
/// their keys pre-rendered as `"path":`. Chunks of one process share a schema,
/// so this is computed once per schema, not once per chunk.
struct Layout {
    paths: MetricPaths,
    /// (metric index, rendered `"path":`) of the selected metrics.
    selected: Vec<(usize, Vec<u8>)>,
}

struct SampleWriter<'a> {
    opts: &'a ExportOptions,
    layouts: HashMap<usize, Vec<Layout>>,
    last_time: Option<i64>,
    line: Vec<u8>,
}

impl<'a> SampleWriter<'a> {
    fn new(opts: &'a ExportOptions) -> Self {
        Self {
            opts,
            layouts: HashMap::new(),
            last_time: None,
            line: Vec::with_capacity(64 << 10),
        }
    }

    fn layout(&mut self, chunk: &Chunk) -> usize {
        let paths = chunk.paths();
        let bucket = self.layouts.entry(paths.len()).or_default();
        if let Some(i) = bucket.iter().position(|l| &l.paths == paths) {
            return i;
        }
        let selected = paths
            .iter()
            .enumerate()
            .filter(|(_, p)| {
                self.opts.metrics.is_empty()
                    || self.opts.metrics.iter().any(|pat| path_matches(pat, p))
            })
            .map(|(m, p)| {
                let mut key = serde_json::to_vec(p).unwrap_or_else(|_| b"\"\"".to_vec());
                key.push(b':');
                (m, key)
            })
            .collect();
        bucket.push(Layout {
            paths: paths.clone(),
            selected,
        });
        bucket.len() - 1
    }

    fn write_chunk(
        &mut self,
        chunk: &Chunk,
        out: &mut impl Write,
        stats: &mut ExportStats,
    ) -> Result<(), FtdcError> {
        let index = self.layout(chunk);
        let from = self.opts.from.map(|t| t.timestamp_millis());
        let to = self.opts.to.map(|t| t.timestamp_millis());
        let kinds = chunk.kinds();
        let layout = self
            .layouts
            .get(&chunk.paths().len())
            .and_then(|b| b.get(index));
        let Some(layout) = layout else { return Ok(()) };
        for s in 0..chunk.sample_count() {
            let time = chunk.timestamp_ms(s);
            if let Some(t) = time {
                if from.is_some_and(|f| t < f) || to.is_some_and(|to| t >= to) {
                    stats.out_of_range += 1;
                    continue;
                }
                if self.last_time.is_some_and(|last| t <= last) {
                    stats.duplicates += 1;
                    continue;
                }
                self.last_time = Some(t);
            } else if from.is_some() || to.is_some() {
                stats.out_of_range += 1;
                continue;
            }
            let line = &mut self.line;
            line.clear();
            line.extend_from_slice(b"{\"t\":");
            match time {
                Some(t) => push_date(line, t, false),
                None => line.extend_from_slice(b"null"),
            }
            line.extend_from_slice(b",\"metrics\":{");
            for (i, (m, key)) in layout.selected.iter().enumerate() {
                if i > 0 {
                    line.push(b',');
                }
                line.extend_from_slice(key);
                let v = chunk.value(s, *m).unwrap_or_default();
                match kinds.get(*m) {
                    Some(MetricKind::Bool) => {
                        line.extend_from_slice(if v != 0 { b"true" } else { b"false" })
                    }
                    Some(MetricKind::Date) => push_date(line, v, self.opts.dates_as_ms),
                    _ => line.extend_from_slice(itoa::Buffer::new().format(v).as_bytes()),
                }
            }
            line.extend_from_slice(b"}}\n");
            out.write_all(line).map_err(output)?;
            stats.samples += 1;
        }
        Ok(())
    }
}

/// A date (ms since the epoch) as a JSON string, or a number when asked or
/// out of chrono's range.
fn push_date(line: &mut Vec<u8>, ms: i64, as_ms: bool) {
    match DateTime::from_timestamp_millis(ms).filter(|_| !as_ms) {
        Some(t) => {
            line.push(b'"');
            line.extend_from_slice(t.to_rfc3339_opts(SecondsFormat::Millis, true).as_bytes());
            line.push(b'"');
        }
        None => line.extend_from_slice(itoa::Buffer::new().format(ms).as_bytes()),
    }
}

fn write_metadata(
    out: &mut impl Write,
    id: DateTime<Utc>,
    kind: &str,
    count: Option<i64>,
    doc: &Document,
    opts: &ExportOptions,
) -> Result<(), FtdcError> {
    let mut line = Map::new();
    line.insert("t".into(), Value::String(rfc3339(id)));
    line.insert("type".into(), Value::String(kind.into()));
    if let Some(c) = count {
        line.insert("count".into(), Value::from(c));
    }
    line.insert("doc".into(), document_to_json(doc, opts.dates_as_ms));
    serde_json::to_writer(&mut *out, &Value::Object(line)).map_err(|e| output(e.into()))?;
    out.write_all(b"\n").map_err(output)
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A BSON document as plain JSON (not Extended JSON: dates as RFC 3339
/// strings, timestamps as `{"t","i"}`, ObjectIds and binary as hex strings).
pub fn document_to_json(doc: &Document, dates_as_ms: bool) -> Value {
    Value::Object(
        doc.iter()
            .map(|(k, v)| (k.clone(), bson_to_json(v, dates_as_ms)))
            .collect(),
    )
}

fn bson_to_json(v: &Bson, dates_as_ms: bool) -> Value {
    match v {
        Bson::Double(f) => {
            Number::from_f64(*f).map_or_else(|| Value::String(f.to_string()), Value::Number)
        }
        Bson::String(s) | Bson::Symbol(s) | Bson::JavaScriptCode(s) => Value::String(s.clone()),
        Bson::Array(a) => Value::Array(a.iter().map(|v| bson_to_json(v, dates_as_ms)).collect()),
        Bson::Document(d) => document_to_json(d, dates_as_ms),
        Bson::Boolean(b) => Value::Bool(*b),
        Bson::Null | Bson::Undefined => Value::Null,
        Bson::Int32(i) => Value::from(*i),
        Bson::Int64(i) => Value::from(*i),
        Bson::DateTime(d) => {
            let ms = d.timestamp_millis();
            match DateTime::from_timestamp_millis(ms).filter(|_| !dates_as_ms) {
                Some(t) => Value::String(rfc3339(t)),
                None => Value::from(ms),
            }
        }
        Bson::Timestamp(ts) => serde_json::json!({ "t": ts.time, "i": ts.increment }),
        Bson::ObjectId(o) => Value::String(o.to_hex()),
        Bson::Binary(b) => Value::String(b.bytes.iter().map(|x| format!("{x:02x}")).collect()),
        other => Value::String(other.to_string()),
    }
}

#[cfg(test)]
#[path = "export_tests.rs"]
mod tests;
