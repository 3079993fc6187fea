//! One metric chunk (an FTDC document of type 1): inflate its `data`
//! (4-byte little-endian uncompressed length + zlib stream), read the
//! reference document, the metric and sample counts, and decode the delta
//! stream into one column of absolute values per metric.
//!
//! Every size read from the input is checked against the input before it is
//! used to allocate: the uncompressed length against a fixed cap and zlib's
//! largest ratio, the metric count against the metrics the reference document
//! really holds, and the number of cells against [`MAX_CELLS`].

use bson::{RawDocument, RawDocumentBuf};
use chrono::{DateTime, Utc};
use flate2::{Decompress, FlushDecompress, Status};

use super::metrics::{self, ExtractError, MetricKind, MetricPaths};
use super::varint::{self, DeltaError};

/// Largest uncompressed chunk accepted. mongod itself refuses chunks over
/// 10,000,000 bytes when reading; this leaves room for bigger future ones.
pub const MAX_UNCOMPRESSED: usize = 64 << 20;
/// Largest number of samples after the reference (mongod writes 300 by default).
pub const MAX_DELTAS: usize = 1 << 16;
/// Largest metrics x samples of one chunk (8 bytes each in memory when every
/// metric changes). mongod's own reader caps this at 1,000,000; real chunks
/// hold ~300 x 2,500.
pub const MAX_CELLS: usize = 1 << 23;
/// deflate cannot expand input by more than ~1032:1.
const MAX_DEFLATE_RATIO: usize = 1032;

/// What went wrong decoding a chunk's `data`. Positions: `compressed byte` is
/// within the BinData payload after the 4-byte length; `uncompressed byte`
/// within the inflated data.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    #[error("data is {0} bytes, too short for the uncompressed length header")]
    TooShort(usize),
    #[error("declared uncompressed length {declared} exceeds the limit {limit}")]
    TooLarge { declared: usize, limit: usize },
    #[error("zlib: {detail} (at compressed byte {at})")]
    Zlib { detail: String, at: u64 },
    #[error("zlib stream ends after {actual} bytes, {declared} declared (at compressed byte {at})")]
    ShortStream {
        declared: usize,
        actual: usize,
        at: u64,
    },
    #[error("zlib stream inflates past its declared length {declared}")]
    LongStream { declared: usize },
    #[error("reference document: {0}")]
    ReferenceBson(String),
    #[error("reference document: {0}")]
    Reference(#[from] ExtractError),
    #[error("truncated before the metric/sample counts (at uncompressed byte {at})")]
    TruncatedCounts { at: usize },
    #[error("metric count {declared} does not match the {found} metrics of the reference document")]
    MetricCount { declared: u32, found: usize },
    #[error(
        "{samples} samples x {metrics} metrics exceeds the limit ({MAX_DELTAS} samples, {MAX_CELLS} cells)"
    )]
    TooManyCells { metrics: usize, samples: u32 },
    #[error("deltas (starting at uncompressed byte {start}): {source}")]
    Deltas { start: usize, source: DeltaError },
}

/// A decoded metric chunk: `sample_count()` samples (the reference document
/// then one per delta) of `metric_count()` metrics, stored column by column.
#[derive(Debug, Clone)]
pub struct Chunk {
    /// The chunk document's `_id`: when its first sample was taken.
    pub id: DateTime<Utc>,
    /// Byte offset of the chunk document in its file.
    pub offset: u64,
    reference: RawDocumentBuf,
    paths: MetricPaths,
    kinds: Vec<MetricKind>,
    samples: usize,
    /// The reference value of each metric (= sample 0).
    refs: Vec<i64>,
    /// Per metric: [`varint::CONSTANT`] or the index of its column in `values`.
    slots: Vec<u32>,
    /// The columns of the metrics that change: `values[k * samples..][..samples]`.
    values: Vec<i64>,
    time_metric: Option<usize>,
    trailing: usize,
}

impl Chunk {
    /// The reference document (also the first sample), undecoded.
    pub fn reference(&self) -> &RawDocument {
        &self.reference
    }

    /// The reference document as a [`bson::Document`] (costs a full parse).
    pub fn reference_document(&self) -> Result<bson::Document, bson::error::Error> {
        bson::Document::try_from(self.reference.as_ref())
    }

    pub fn metric_count(&self) -> usize {
        self.kinds.len()
    }

    /// Samples in the chunk, the reference included (delta count + 1).
    pub fn sample_count(&self) -> usize {
        self.samples
    }

    /// The dotted path of each metric, in metric order.
    pub fn paths(&self) -> &MetricPaths {
        &self.paths
    }

    /// The BSON type each metric came from, in metric order.
    pub fn kinds(&self) -> &[MetricKind] {
        &self.kinds
    }

    /// All samples of metric `m`, oldest first.
    pub fn column(&self, m: usize) -> Option<Column<'_>> {
        let slot = *self.slots.get(m)?;
        if slot == varint::CONSTANT {
            return Some(Column::Constant {
                value: *self.refs.get(m)?,
                len: self.samples,
            });
        }
        let start = (slot as usize).checked_mul(self.samples)?;
        self.values
            .get(start..start.checked_add(self.samples)?)
            .map(Column::Values)
    }

    /// All samples of the metric at `path`.
    pub fn column_by_path(&self, path: &str) -> Option<Column<'_>> {
        self.column(self.paths.position(path)?)
    }

    /// Metric `m` of sample `s`.
    #[inline]
    pub fn value(&self, s: usize, m: usize) -> Option<i64> {
        if s >= self.samples {
            return None;
        }
        let slot = *self.slots.get(m)?;
        if slot == varint::CONSTANT {
            self.refs.get(m).copied()
        } else {
            self.values.get(slot as usize * self.samples + s).copied()
        }
    }

    /// Sample `s` as one value per metric, written into `out` (cleared first).
    pub fn sample_into(&self, s: usize, out: &mut Vec<i64>) {
        out.clear();
        if s < self.samples {
            out.extend((0..self.kinds.len()).map(|m| self.value(s, m).unwrap_or_default()));
        }
    }

    /// How many metrics change within the chunk (the others keep their
    /// reference value and take no memory).
    pub fn changing_metrics(&self) -> usize {
        self.slots
            .iter()
            .filter(|&&s| s != varint::CONSTANT)
            .count()
    }

    /// The metric that timestamps each sample: the top-level `start` date
    /// mongod adds to every sample, else `serverStatus.localTime`, else the
    /// first date metric.
    pub fn time_metric(&self) -> Option<usize> {
        self.time_metric
    }

    /// Sample `s`'s time in ms since the epoch (see [`Chunk::time_metric`]).
    pub fn timestamp_ms(&self, s: usize) -> Option<i64> {
        self.value(s, self.time_metric?)
    }

    /// Sample `s`'s time.
    pub fn timestamp(&self, s: usize) -> Option<DateTime<Utc>> {
        DateTime::from_timestamp_millis(self.timestamp_ms(s)?)
    }

    /// Time of the first and last samples (falls back on the `_id`).
    pub fn time_range(&self) -> (DateTime<Utc>, DateTime<Utc>) {
        let first = self.timestamp(0).unwrap_or(self.id);
        let last = self
            .timestamp(self.samples.saturating_sub(1))
            .unwrap_or(first);
        (first, last)
    }

    /// Bytes left over after the delta stream (mongod writes none and ignores
    /// any; kept for diagnosis).
    pub fn trailing_bytes(&self) -> usize {
        self.trailing
    }

    /// Gives the value buffer back so the next chunk can reuse it.
    pub fn into_values(self) -> Vec<i64> {
        self.values
    }
}

/// The samples of one metric in a chunk: either one value repeated (the
/// metric did not change) or a slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column<'a> {
    Constant { value: i64, len: usize },
    Values(&'a [i64]),
}

impl Column<'_> {
    pub fn len(&self) -> usize {
        match self {
            Column::Constant { len, .. } => *len,
            Column::Values(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, s: usize) -> Option<i64> {
        match self {
            Column::Constant { value, len } => (s < *len).then_some(*value),
            Column::Values(v) => v.get(s).copied(),
        }
    }

    pub fn first(&self) -> Option<i64> {
        self.get(0)
    }

    pub fn last(&self) -> Option<i64> {
        self.get(self.len().checked_sub(1)?)
    }

    /// Whether the metric kept one value over the whole chunk.
    pub fn is_constant(&self) -> bool {
        matches!(self, Column::Constant { .. })
    }

    pub fn iter(&self) -> impl ExactSizeIterator<Item = i64> + '_ {
        (0..self.len()).map(|s| self.get(s).unwrap_or_default())
    }

    pub fn to_vec(&self) -> Vec<i64> {
        match self {
            Column::Constant { value, len } => vec![*value; *len],
            Column::Values(v) => v.to_vec(),
        }
    }
}

/// Decodes chunks, reusing its buffers from one chunk to the next.
pub struct ChunkDecoder {
    inflater: Decompress,
    inflated: Vec<u8>,
    spare_values: Vec<i64>,
}

impl Default for ChunkDecoder {
    fn default() -> Self {
        Self {
            inflater: Decompress::new(true),
            inflated: Vec::new(),
            spare_values: Vec::new(),
        }
    }
}

impl ChunkDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Hands a finished chunk's value buffer back for reuse.
    pub fn recycle(&mut self, chunk: Chunk) {
        let v = chunk.into_values();
        if v.capacity() > self.spare_values.capacity() {
            self.spare_values = v;
        }
    }

    /// Decodes the BinData payload of a type-1 document.
    pub fn decode(
        &mut self,
        id: DateTime<Utc>,
        offset: u64,
        data: &[u8],
    ) -> Result<Chunk, ChunkError> {
        let inflated_len = self.inflate(data)?;
        let raw = self.inflated.get(..inflated_len).unwrap_or_default();
        decode_inflated(raw, id, offset, std::mem::take(&mut self.spare_values))
    }

    /// Inflates `data` into `self.inflated`, returning the length.
    fn inflate(&mut self, data: &[u8]) -> Result<usize, ChunkError> {
        let (len, stream) = match data.split_first_chunk::<4>() {
            Some((len, stream)) => (u32::from_le_bytes(*len) as usize, stream),
            None => return Err(ChunkError::TooShort(data.len())),
        };
        let limit = MAX_UNCOMPRESSED.min(
            stream
                .len()
                .saturating_mul(MAX_DEFLATE_RATIO)
                .saturating_add(64),
        );
        if len > limit {
            return Err(ChunkError::TooLarge {
                declared: len,
                limit,
            });
        }
        // One spare byte to notice a stream longer than declared.
        if self.inflated.len() < len + 1 {
            self.inflated.resize(len + 1, 0);
        }
        let out = self.inflated.get_mut(..len + 1).unwrap_or_default();
        self.inflater.reset(true);
        let status = self
            .inflater
            .decompress(stream, out, FlushDecompress::Finish)
            .map_err(|e| ChunkError::Zlib {
                detail: e.to_string(),
                at: self.inflater.total_in(),
            })?;
        let produced = self.inflater.total_out() as usize;
        match status {
            Status::StreamEnd if produced == len => Ok(len),
            _ if produced > len => Err(ChunkError::LongStream { declared: len }),
            Status::StreamEnd => Err(ChunkError::ShortStream {
                declared: len,
                actual: produced,
                at: self.inflater.total_in(),
            }),
            Status::Ok | Status::BufError => Err(ChunkError::Zlib {
                detail: format!("stream truncated after {produced} of {len} bytes"),
                at: self.inflater.total_in(),
            }),
        }
    }
}

/// Decodes inflated chunk data (reference, counts, deltas).
pub fn decode_inflated(
    raw: &[u8],
    id: DateTime<Utc>,
    offset: u64,
    mut values: Vec<i64>,
) -> Result<Chunk, ChunkError> {
    let ref_len = match raw.first_chunk::<4>() {
        Some(b) => i32::from_le_bytes(*b),
        None => {
            return Err(ChunkError::ReferenceBson(format!(
                "{} bytes, too short for a BSON document",
                raw.len()
            )));
        }
    };
    let ref_len = usize::try_from(ref_len)
        .ok()
        .filter(|&l| l >= 5 && l <= raw.len())
        .ok_or_else(|| {
            ChunkError::ReferenceBson(format!(
                "length field {ref_len} invalid ({} bytes inflated)",
                raw.len()
            ))
        })?;
    let (ref_bytes, rest) = raw.split_at(ref_len);
    let reference =
        RawDocument::from_bytes(ref_bytes).map_err(|e| ChunkError::ReferenceBson(e.to_string()))?;
    let extracted = metrics::extract(reference)?;
    let (metric_count, rest) = read_u32(rest).ok_or(ChunkError::TruncatedCounts { at: ref_len })?;
    let (delta_count, deltas) =
        read_u32(rest).ok_or(ChunkError::TruncatedCounts { at: ref_len + 4 })?;
    let found = extracted.values.len();
    if metric_count as usize != found {
        return Err(ChunkError::MetricCount {
            declared: metric_count,
            found,
        });
    }
    let n = delta_count as usize;
    if n > MAX_DELTAS || found.saturating_mul(n + 1) > MAX_CELLS {
        return Err(ChunkError::TooManyCells {
            metrics: found,
            samples: delta_count,
        });
    }
    let start = ref_len + 8;
    let mut slots = Vec::new();
    let used = varint::decode_columns(deltas, &extracted.values, n, &mut values, &mut slots)
        .map_err(|source| ChunkError::Deltas { start, source })?;
    let time_metric = find_time_metric(&extracted.paths, &extracted.kinds);
    Ok(Chunk {
        id,
        offset,
        reference: reference.to_owned(),
        paths: extracted.paths,
        kinds: extracted.kinds,
        samples: n + 1,
        refs: extracted.values,
        slots,
        values,
        time_metric,
        trailing: deltas.len().saturating_sub(used),
    })
}

fn read_u32(b: &[u8]) -> Option<(u32, &[u8])> {
    let (v, rest) = b.split_first_chunk::<4>()?;
    Some((u32::from_le_bytes(*v), rest))
}

fn find_time_metric(paths: &MetricPaths, kinds: &[MetricKind]) -> Option<usize> {
    let date = |path: &str| {
        paths
            .iter()
            .zip(kinds)
            .position(|(p, &k)| p == path && k == MetricKind::Date)
    };
    date("start")
        .or_else(|| date("serverStatus.localTime"))
        .or_else(|| kinds.iter().position(|&k| k == MetricKind::Date))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftdc::varint::write_varint;
    use bson::rawdoc;
    use flate2::{Compression, write::ZlibEncoder};
    use std::io::Write;

    /// Builds a chunk payload the way mongod does.
    pub(crate) fn payload(
        reference: &RawDocument,
        metrics: u32,
        deltas: u32,
        stream: &[u64],
    ) -> Vec<u8> {
        let mut raw = reference.as_bytes().to_vec();
        raw.extend(metrics.to_le_bytes());
        raw.extend(deltas.to_le_bytes());
        for &v in stream {
            write_varint(&mut raw, v);
        }
        let mut z = ZlibEncoder::new(Vec::new(), Compression::default());
        z.write_all(&raw).expect("compress");
        let mut out = (raw.len() as u32).to_le_bytes().to_vec();
        out.extend(z.finish().expect("compress"));
        out
    }

    fn t0() -> DateTime<Utc> {
        DateTime::from_timestamp_millis(1_700_000_000_000).expect("time")
    }

    #[test]
    fn decodes_a_synthetic_chunk() {
        let reference = rawdoc! {
            "start": bson::DateTime::from_millis(1_700_000_000_000),
            "serverStatus": { "uptime": 10.0, "opcounters": { "insert": 5_i64 } },
        };
        // 3 metrics, 2 deltas each: start +1000 +1000; uptime +1 +1; insert 0, +3.
        let data = payload(&reference, 3, 2, &[1000, 1000, 1, 1, 0, 0, 3]);
        let mut dec = ChunkDecoder::new();
        let chunk = dec.decode(t0(), 42, &data).expect("decodes");
        assert_eq!(chunk.metric_count(), 3);
        assert_eq!(chunk.sample_count(), 3);
        let col = |p: &str| chunk.column_by_path(p).map(|c| c.to_vec());
        assert_eq!(
            col("start"),
            Some(vec![
                1_700_000_000_000,
                1_700_000_001_000,
                1_700_000_002_000
            ])
        );
        assert_eq!(col("serverStatus.uptime"), Some(vec![10, 11, 12]));
        assert_eq!(col("serverStatus.opcounters.insert"), Some(vec![5, 5, 8]));
        assert_eq!(chunk.time_metric(), Some(0));
        assert_eq!(chunk.timestamp_ms(2), Some(1_700_000_002_000));
        let mut row = Vec::new();
        chunk.sample_into(1, &mut row);
        assert_eq!(row, [1_700_000_001_000, 11, 5]);
        assert_eq!(chunk.value(3, 0), None);
        assert_eq!(chunk.trailing_bytes(), 0);
        assert_eq!(chunk.offset, 42);
        dec.recycle(chunk);
        // The decoder is reusable.
        let again = dec.decode(t0(), 0, &data).expect("decodes twice");
        assert_eq!(again.column(2).map(|c| c.to_vec()), Some(vec![5, 5, 8]));
        assert_eq!(again.changing_metrics(), 3);
    }

    #[test]
    fn constant_metrics_are_not_materialised() {
        let reference = rawdoc! { "a": 1_i32, "b": 2_i32, "c": true };
        // 3 metrics, 3 deltas: a constant, b +1 once, c constant: [0, 3] [0 0] ...
        // a: 0,0,0  b: 0,1,0  c: 0,0,0 -> [0,3] 1 [0,3]
        let data = payload(&reference, 3, 3, &[0, 3, 1, 0, 3]);
        let chunk = ChunkDecoder::new().decode(t0(), 0, &data).expect("decodes");
        assert_eq!(chunk.changing_metrics(), 1);
        assert_eq!(chunk.column(0), Some(Column::Constant { value: 1, len: 4 }));
        assert_eq!(chunk.column(1), Some(Column::Values(&[2, 2, 3, 3])));
        assert_eq!(
            chunk
                .column(2)
                .map(|c| (c.first(), c.last(), c.len(), c.is_constant())),
            Some((Some(1), Some(1), 4, true))
        );
        assert_eq!(chunk.column(3), None);
        let mut row = Vec::new();
        chunk.sample_into(2, &mut row);
        assert_eq!(row, [1, 3, 1]);
        assert_eq!(chunk.value(3, 1), Some(3));
        assert_eq!(chunk.value(4, 1), None);
        assert_eq!(
            chunk.column(1).map(|c| c.iter().collect::<Vec<_>>()),
            Some(vec![2, 2, 3, 3])
        );
    }

    #[test]
    fn rejects_bad_counts_and_sizes() {
        let reference = rawdoc! { "a": 1_i32, "b": 2_i32 };
        let mut dec = ChunkDecoder::new();
        // Metric count lies (4 billion in a tiny chunk).
        let err = dec
            .decode(t0(), 0, &payload(&reference, u32::MAX, 1, &[0, 1]))
            .unwrap_err();
        assert_eq!(
            err,
            ChunkError::MetricCount {
                declared: u32::MAX,
                found: 2
            }
        );
        // Sample count absurd.
        let err = dec
            .decode(t0(), 0, &payload(&reference, 2, u32::MAX, &[0, 1]))
            .unwrap_err();
        assert!(matches!(err, ChunkError::TooManyCells { .. }), "{err:?}");
        // Declared uncompressed length larger than zlib could ever produce.
        let mut data = payload(&reference, 2, 1, &[0, 1]);
        data[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            dec.decode(t0(), 0, &data),
            Err(ChunkError::TooLarge { .. })
        ));
        // Declared length off by one either way.
        let mut data = payload(&reference, 2, 1, &[0, 1]);
        let len = u32::from_le_bytes(data[..4].try_into().unwrap());
        data[..4].copy_from_slice(&(len + 1).to_le_bytes());
        assert!(matches!(
            dec.decode(t0(), 0, &data),
            Err(ChunkError::ShortStream { .. })
        ));
        data[..4].copy_from_slice(&(len - 1).to_le_bytes());
        assert!(matches!(
            dec.decode(t0(), 0, &data),
            Err(ChunkError::LongStream { .. })
        ));
        // Too short for the header.
        assert_eq!(
            dec.decode(t0(), 0, &[1, 2]).unwrap_err(),
            ChunkError::TooShort(2)
        );
        // Deltas truncated: 2 metrics x 2 samples need 4 cells.
        let err = dec
            .decode(t0(), 0, &payload(&reference, 2, 2, &[1, 1, 1]))
            .unwrap_err();
        assert!(
            matches!(err, ChunkError::Deltas { start: 27, .. }),
            "{err:?}"
        );
    }
}
