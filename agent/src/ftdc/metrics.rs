//! The metrics of a chunk's reference document: which fields are metrics,
//! their dotted paths and their values as mongod stores them in the delta
//! stream (mirrors `extractMetricsFromDocument` in mongod's
//! `src/mongo/db/ftdc/util.cpp`).
//!
//! Metrics are, in document order, recursing into sub-documents and arrays
//! (array elements are named by index: `a.0.b`): doubles, int32, int64 and
//! decimal128 (all stored as int64: doubles and decimals are truncated /
//! rounded the way mongod's `numberLong()` does on x86_64), booleans (0/1),
//! dates (ms since the epoch) and timestamps, which give two metrics
//! (`path.t`, seconds, then `path.i`, increment). Every other type (strings,
//! ObjectIds, null, ...) is skipped. Like mongod, nesting deeper than 10
//! levels is refused.

use bson::{RawDocument, raw::RawBsonRef, spec::ElementType};

/// mongod's `kMaxRecursion`: sub-documents deeper than this are an error.
pub const MAX_RECURSION: usize = 10;

/// The BSON type a metric came from; it says how to render its int64 value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricKind {
    Double,
    Int32,
    Int64,
    Decimal128,
    /// 0 or 1 (any non-zero is true).
    Bool,
    /// Milliseconds since the Unix epoch.
    Date,
    /// A BSON Timestamp's seconds (`path.t`).
    TimestampTime,
    /// A BSON Timestamp's increment (`path.i`).
    TimestampIncrement,
}

impl MetricKind {
    /// Whether the value is a number to show as such (not a bool or a date).
    pub fn is_numeric(self) -> bool {
        !matches!(self, MetricKind::Bool | MetricKind::Date)
    }
}

/// The dotted paths of a chunk's metrics, stored in one string (a chunk has
/// thousands of metrics, and one allocation per path would show in profiles).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MetricPaths {
    arena: String,
    ends: Vec<usize>,
}

impl MetricPaths {
    /// Number of paths (= number of metrics).
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The path of metric `i`, e.g. `serverStatus.opcounters.insert`.
    pub fn get(&self, i: usize) -> Option<&str> {
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { *self.ends.get(i - 1)? };
        self.arena.get(start..end)
    }

    /// The paths in metric order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.ends.len()).map(|i| self.get(i).unwrap_or_default())
    }

    /// Index of the metric with this exact path, if any.
    pub fn position(&self, path: &str) -> Option<usize> {
        self.iter().position(|p| p == path)
    }

    fn push(&mut self, prefix: &str, leaf: &str) {
        self.arena.push_str(prefix);
        self.arena.push_str(leaf);
        self.ends.push(self.arena.len());
    }
}

/// Everything the decoder needs from a reference document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extracted {
    pub paths: MetricPaths,
    pub kinds: Vec<MetricKind>,
    pub values: Vec<i64>,
}

/// Why a reference document could not be flattened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    #[error("malformed BSON at {path:?}: {detail}")]
    Bson { path: String, detail: String },
    #[error("nested deeper than {MAX_RECURSION} levels at {path:?}")]
    TooDeep { path: String },
}

/// Flattens `doc` into its metrics, in the order of the delta stream.
pub fn extract(doc: &RawDocument) -> Result<Extracted, ExtractError> {
    extract_under(doc, &|_| true)
}

/// As [`extract`], entering only the sub-documents (and arrays) whose path,
/// with a trailing dot (`wiredTiger.cache.`), `enter` accepts: the metrics of
/// the others are neither read nor checked.
pub fn extract_under(
    doc: &RawDocument,
    enter: &dyn Fn(&str) -> bool,
) -> Result<Extracted, ExtractError> {
    let mut out = Extracted::default();
    let mut prefix = String::new();
    walk(doc, &mut prefix, 0, enter, &mut out)?;
    Ok(out)
}

/// Whether a value of this type is a metric (a number, a boolean, a date
/// or a timestamp).
pub fn is_metric_type(t: ElementType) -> bool {
    matches!(
        t,
        ElementType::Double
            | ElementType::Int32
            | ElementType::Int64
            | ElementType::Decimal128
            | ElementType::Boolean
            | ElementType::DateTime
            | ElementType::Timestamp
    )
}

/// Whether [`extract`] would find a metric in `doc` (stops at the first).
pub fn holds_metric(doc: &RawDocument) -> bool {
    fn holds(doc: &RawDocument, depth: usize) -> bool {
        depth <= MAX_RECURSION
            && doc
                .iter_elements()
                .flatten()
                .any(|e| match e.element_type() {
                    t if is_metric_type(t) => true,
                    ElementType::EmbeddedDocument | ElementType::Array => match e.value() {
                        Ok(RawBsonRef::Document(d)) => holds(d, depth + 1),
                        Ok(RawBsonRef::Array(a)) => {
                            RawDocument::from_bytes(a.as_bytes()).is_ok_and(|d| holds(d, depth + 1))
                        }
                        _ => false,
                    },
                    _ => false,
                })
    }
    holds(doc, 0)
}

fn walk(
    doc: &RawDocument,
    prefix: &mut String,
    depth: usize,
    enter: &dyn Fn(&str) -> bool,
    out: &mut Extracted,
) -> Result<(), ExtractError> {
    if depth > MAX_RECURSION {
        return Err(ExtractError::TooDeep {
            path: prefix.trim_end_matches('.').to_owned(),
        });
    }
    for elem in doc.iter_elements() {
        let elem = elem.map_err(|e| bson_error(prefix, "", &e))?;
        let key = elem.key().as_str();
        let kind = match elem.element_type() {
            ElementType::Double => MetricKind::Double,
            ElementType::Int32 => MetricKind::Int32,
            ElementType::Int64 => MetricKind::Int64,
            ElementType::Decimal128 => MetricKind::Decimal128,
            ElementType::Boolean => MetricKind::Bool,
            ElementType::DateTime => MetricKind::Date,
            ElementType::Timestamp => MetricKind::TimestampTime,
            ElementType::EmbeddedDocument | ElementType::Array => {
                let value = elem.value().map_err(|e| bson_error(prefix, key, &e))?;
                let sub = match value {
                    RawBsonRef::Document(d) => d,
                    RawBsonRef::Array(a) => RawDocument::from_bytes(a.as_bytes())
                        .map_err(|e| bson_error(prefix, key, &e))?,
                    _ => continue,
                };
                let len = prefix.len();
                prefix.push_str(key);
                prefix.push('.');
                let r = match enter(prefix) {
                    true => walk(sub, prefix, depth + 1, enter, out),
                    false => Ok(()),
                };
                prefix.truncate(len);
                r?;
                continue;
            }
            _ => continue,
        };
        let value = elem.value().map_err(|e| bson_error(prefix, key, &e))?;
        match value {
            RawBsonRef::Double(f) => out.push(prefix, key, kind, double_to_i64(f)),
            RawBsonRef::Int32(i) => out.push(prefix, key, kind, i64::from(i)),
            RawBsonRef::Int64(i) => out.push(prefix, key, kind, i),
            RawBsonRef::Decimal128(d) => out.push(prefix, key, kind, decimal128_to_i64(d.bytes())),
            RawBsonRef::Boolean(b) => out.push(prefix, key, kind, i64::from(b)),
            RawBsonRef::DateTime(d) => out.push(prefix, key, kind, d.timestamp_millis()),
            RawBsonRef::Timestamp(ts) => {
                let len = prefix.len();
                prefix.push_str(key);
                prefix.push('.');
                out.push(prefix, "t", MetricKind::TimestampTime, i64::from(ts.time));
                out.push(
                    prefix,
                    "i",
                    MetricKind::TimestampIncrement,
                    i64::from(ts.increment),
                );
                prefix.truncate(len);
            }
            _ => {}
        }
    }
    Ok(())
}

impl Extracted {
    fn push(&mut self, prefix: &str, key: &str, kind: MetricKind, value: i64) {
        self.paths.push(prefix, key);
        self.kinds.push(kind);
        self.values.push(value);
    }
}

fn bson_error(prefix: &str, key: &str, e: &dyn std::fmt::Display) -> ExtractError {
    ExtractError::Bson {
        path: format!("{prefix}{key}").trim_end_matches('.').to_owned(),
        detail: e.to_string(),
    }
}

/// A double as mongod stores it: C++ `(long long)d`, which on x86_64
/// (`cvttsd2si`) truncates toward zero and gives `i64::MIN` for NaN and
/// out-of-range values.
pub fn double_to_i64(d: f64) -> i64 {
    // 2^63 as f64 is exact; the valid range is [-2^63, 2^63).
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if d.is_nan() || d >= TWO_63 || d < -TWO_63 {
        i64::MIN
    } else {
        d as i64
    }
}

/// A decimal128 (IEEE 754-2008 BID encoding, little-endian bytes) as mongod's
/// `Decimal128::toLong()` gives it: rounded half to even; NaN, infinities and
/// out-of-range values give `i64::MIN` (the "integer indefinite" of the
/// Intel decimal library).
pub fn decimal128_to_i64(bytes: [u8; 16]) -> i64 {
    let bits = u128::from_le_bytes(bytes);
    let negative = bits >> 127 == 1;
    let (exponent, coefficient) = if (bits >> 125) & 0b11 == 0b11 {
        if (bits >> 123) & 0b1111 == 0b1111 {
            // 0b11110 = infinity, 0b11111 = NaN.
            return i64::MIN;
        }
        // The large-coefficient form is always above 10^34 - 1: non-canonical,
        // which the standard reads as zero.
        ((bits >> 111) & 0x3fff, 0u128)
    } else {
        ((bits >> 113) & 0x3fff, bits & ((1u128 << 113) - 1))
    };
    const MAX_COEFFICIENT: u128 = 9_999_999_999_999_999_999_999_999_999_999; // 10^34 - 1
    let coefficient = if coefficient > MAX_COEFFICIENT {
        0
    } else {
        coefficient
    };
    let exponent = exponent as i32 - 6176;
    let magnitude: u128 = if coefficient == 0 {
        0
    } else if exponent >= 0 {
        let mut m = coefficient;
        for _ in 0..exponent {
            m = match m.checked_mul(10) {
                Some(m) if m <= 1u128 << 63 => m,
                _ => return i64::MIN,
            };
        }
        m
    } else {
        let k = exponent.unsigned_abs();
        if k > 38 {
            0 // coefficient < 10^34 < half of 10^k
        } else {
            let p = 10u128.pow(k);
            let (q, r) = (coefficient / p, coefficient % p);
            let half = p / 2;
            if r > half || (r == half && q % 2 == 1) {
                q + 1
            } else {
                q
            }
        }
    };
    if negative {
        if magnitude > 1u128 << 63 {
            i64::MIN
        } else {
            (magnitude as i128).wrapping_neg() as i64
        }
    } else if magnitude > i64::MAX as u128 {
        i64::MIN
    } else {
        magnitude as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{Decimal128, Timestamp, rawdoc};

    fn dec(sign: bool, exp: i32, coeff: u128) -> [u8; 16] {
        let biased = (exp + 6176) as u128;
        let bits = (u128::from(sign) << 127) | (biased << 113) | coeff;
        bits.to_le_bytes()
    }

    #[test]
    fn doubles_truncate_like_mongod_on_x86() {
        assert_eq!(double_to_i64(2.9), 2);
        assert_eq!(double_to_i64(-2.9), -2);
        assert_eq!(double_to_i64(f64::NAN), i64::MIN);
        assert_eq!(double_to_i64(1e19), i64::MIN);
        assert_eq!(double_to_i64(-(2f64.powi(63))), i64::MIN);
        assert_eq!(double_to_i64(2f64.powi(63)), i64::MIN);
        assert_eq!(double_to_i64(-(2f64.powi(62))), -(1 << 62));
        assert_eq!(double_to_i64(9.0e18), 9_000_000_000_000_000_000);
    }

    #[test]
    fn decimals_round_half_even() {
        assert_eq!(decimal128_to_i64(dec(false, 0, 42)), 42);
        assert_eq!(decimal128_to_i64(dec(true, 0, 42)), -42);
        assert_eq!(decimal128_to_i64(dec(false, -1, 25)), 2); // 2.5 -> 2
        assert_eq!(decimal128_to_i64(dec(false, -1, 35)), 4); // 3.5 -> 4
        assert_eq!(decimal128_to_i64(dec(false, -1, 36)), 4); // 3.6 -> 4
        assert_eq!(decimal128_to_i64(dec(false, 3, 7)), 7000);
        assert_eq!(decimal128_to_i64(dec(false, 30, 7)), i64::MIN);
        assert_eq!(decimal128_to_i64(dec(true, 0, 1u128 << 63)), i64::MIN);
        assert_eq!(decimal128_to_i64(dec(false, -50, 12345)), 0);
        // NaN and infinity.
        assert_eq!(
            decimal128_to_i64((0b11111u128 << 122).to_le_bytes()),
            i64::MIN
        );
        assert_eq!(
            decimal128_to_i64((0b11110u128 << 122).to_le_bytes()),
            i64::MIN
        );
    }

    #[test]
    fn extracts_metrics_in_document_order_with_paths() {
        let doc = rawdoc! {
            "start": bson::DateTime::from_millis(1_000),
            "name": "skipped",
            "ss": {
                "n": 3_i32,
                "d": 2.75,
                "b": true,
                "arr": [1_i64, "x", { "y": 9_i32 }],
                "ts": Timestamp { time: 7, increment: 8 },
                "dec": Decimal128::from_bytes(dec(false, 0, 5)),
                "nul": bson::RawBson::Null,
            },
            "end": bson::DateTime::from_millis(2_000),
        };
        let e = extract(&doc).expect("extracts");
        let paths: Vec<&str> = e.paths.iter().collect();
        assert_eq!(
            paths,
            [
                "start",
                "ss.n",
                "ss.d",
                "ss.b",
                "ss.arr.0",
                "ss.arr.2.y",
                "ss.ts.t",
                "ss.ts.i",
                "ss.dec",
                "end"
            ]
        );
        assert_eq!(e.values, [1_000, 3, 2, 1, 1, 9, 7, 8, 5, 2_000]);
        assert_eq!(e.kinds[0], MetricKind::Date);
        assert_eq!(e.kinds[2], MetricKind::Double);
        assert_eq!(e.kinds[6], MetricKind::TimestampTime);
        assert_eq!(e.kinds[7], MetricKind::TimestampIncrement);
        assert_eq!(e.paths.position("ss.arr.2.y"), Some(5));
        assert_eq!(e.paths.get(10), None);
    }

    #[test]
    fn refuses_deep_nesting() {
        let mut doc = rawdoc! { "x": 1_i32 };
        for _ in 0..=MAX_RECURSION {
            doc = rawdoc! { "a": doc };
        }
        assert!(matches!(extract(&doc), Err(ExtractError::TooDeep { .. })));
        // One level less is accepted.
        let mut ok = rawdoc! { "x": 1_i32 };
        for _ in 0..MAX_RECURSION {
            ok = rawdoc! { "a": ok };
        }
        assert_eq!(extract(&ok).expect("depth 10").values, [1]);
    }
}
