//! The innermost layer of a metric chunk: the delta stream. Each delta is an
//! unsigned LEB128 varint; a zero delta is followed by a varint count of
//! *additional* zeros (run-length encoding). The stream is metric-major (all
//! deltas of metric 0, then metric 1, ...) and a zero run may carry over from
//! one metric into the next, exactly as mongod's `FTDCCompressor` writes it.
//!
//! This is the hot path of decoding a `diagnostic.data` directory, so the
//! decoder fuses the three steps (varint, zero runs, prefix sum) into one pass
//! that writes each metric's column of absolute values directly, and never
//! indexes in a way that could panic on hostile input.

/// What went wrong in the delta stream, with the byte position (within the
/// delta stream) and the cell (metric, sample) being decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeltaError {
    /// The stream ended before every cell had a value.
    #[error("delta stream truncated at delta byte {pos} (metric {metric}, sample {sample})")]
    Truncated {
        pos: usize,
        metric: usize,
        sample: usize,
    },
    /// A varint longer than 10 bytes, or whose 10th byte overflows 64 bits.
    #[error("varint overflows 64 bits at delta byte {pos} (metric {metric}, sample {sample})")]
    Overlong {
        pos: usize,
        metric: usize,
        sample: usize,
    },
    /// A zero run that claims more cells than the chunk has left.
    #[error(
        "zero run of {zeros} more deltas at delta byte {pos} overruns the chunk ({remaining} cells left)"
    )]
    ZeroRunOverrun {
        pos: usize,
        zeros: u64,
        remaining: u64,
    },
}

/// The longest valid varint: ceil(64 / 7) bytes.
pub const MAX_VARINT_LEN: usize = 10;

/// Reads one varint at `*pos`, advancing it. `Err(true)` = truncated,
/// `Err(false)` = overlong.
#[inline(always)]
pub fn read_varint(buf: &[u8], pos: &mut usize) -> Result<u64, bool> {
    match buf.get(*pos..*pos + 2) {
        Some(&[b, _]) if b < 0x80 => {
            *pos += 1;
            Ok(u64::from(b))
        }
        Some(&[b0, b1]) if b1 < 0x80 => {
            *pos += 2;
            Ok(u64::from(b0 & 0x7f) | (u64::from(b1) << 7))
        }
        _ => read_varint_slow(buf, pos),
    }
}

#[cold]
#[inline(never)]
fn read_varint_slow(buf: &[u8], pos: &mut usize) -> Result<u64, bool> {
    let rest = buf.get(*pos..).unwrap_or_default();
    if rest.is_empty() {
        return Err(true);
    }
    let mut value: u64 = 0;
    for (i, &b) in rest.iter().take(MAX_VARINT_LEN).enumerate() {
        let bits = u64::from(b & 0x7f);
        if i == MAX_VARINT_LEN - 1 && bits > 1 {
            return Err(false);
        }
        value |= bits << (7 * i);
        if b < 0x80 {
            *pos += i + 1;
            return Ok(value);
        }
    }
    // Ten continuation bytes: overlong; fewer: the buffer ended mid-varint.
    Err(rest.len() < MAX_VARINT_LEN)
}

/// Encodes `v` as a varint (used by tests, the fuzz seeds and the bench).
pub fn write_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Marks, in the slot table of [`decode_columns`], a metric whose value never
/// changes in the chunk (its value is the reference value).
pub const CONSTANT: u32 = u32::MAX;

/// Decodes the delta stream `input` of a chunk whose reference values are
/// `refs` (one per metric) and which holds `n_deltas` samples after the
/// reference. Sums wrap (u64 arithmetic, as mongod).
///
/// Most metrics do not change within a chunk (90% in real files): those are
/// not materialised. `slots[m]` is [`CONSTANT`] for them, else the index `k`
/// of metric `m`'s column in `values`: its `n_deltas + 1` absolute values,
/// the reference first, are `values[k * (n_deltas + 1)..][..n_deltas + 1]`.
/// Both vectors are cleared first. Returns the bytes of `input` consumed.
///
/// The caller bounds `refs.len() * (n_deltas + 1)` beforehand (it bounds the
/// size of `values` and the work done).
pub fn decode_columns(
    input: &[u8],
    refs: &[i64],
    n_deltas: usize,
    values: &mut Vec<i64>,
    slots: &mut Vec<u32>,
) -> Result<usize, DeltaError> {
    // `values` is not reserved for the whole matrix: it grows with the
    // metrics that change, which the input has to spell out.
    values.clear();
    slots.clear();
    slots.reserve(refs.len());
    let mut pos = 0usize;
    // Zero deltas still owed by the last run (it may span metrics).
    let mut zeros: u64 = 0;
    let mut columns: u32 = 0;
    for (metric, &reference) in refs.iter().enumerate() {
        let mut left = n_deltas;
        // Cells of the metrics after this one.
        let later = (refs.len() - metric - 1) as u64 * n_deltas as u64;
        // Peek at the first delta: a run covering the whole metric makes it constant.
        let mut pending = None;
        if zeros == 0 && left > 0 {
            match read_delta(input, &mut pos, left as u64 + later, metric, 1)? {
                Delta::Zeros(z) => zeros = z,
                Delta::Value(d) => pending = Some(d),
            }
        }
        if zeros >= left as u64 {
            zeros -= left as u64;
            slots.push(CONSTANT);
            continue;
        }
        slots.push(columns);
        columns += 1;
        // Values are produced in exactly the order they are stored, so they
        // are pushed: no zero-fill, no indexing.
        let mut prev = reference;
        values.push(prev);
        if let Some(d) = pending {
            prev = prev.wrapping_add(d as i64);
            values.push(prev);
            left -= 1;
        }
        while left > 0 {
            if zeros > 0 {
                let k = usize::try_from(zeros).map_or(left, |z| z.min(left));
                values.extend(std::iter::repeat_n(prev, k));
                left -= k;
                zeros -= k as u64;
                continue;
            }
            // The common case: a run of single-byte, non-zero deltas.
            let rest = input.get(pos..).unwrap_or_default();
            let mut taken = 0;
            for &b in rest.iter().take(left) {
                if b == 0 || b >= 0x80 {
                    break;
                }
                prev = prev.wrapping_add(i64::from(b));
                values.push(prev);
                taken += 1;
            }
            pos += taken;
            left -= taken;
            if left == 0 {
                break;
            }
            match read_delta(
                input,
                &mut pos,
                left as u64 + later,
                metric,
                n_deltas - left + 1,
            )? {
                Delta::Zeros(z) => zeros = z,
                Delta::Value(d) => {
                    prev = prev.wrapping_add(d as i64);
                    values.push(prev);
                    left -= 1;
                }
            }
        }
    }
    Ok(pos)
}

enum Delta {
    /// A run of this many zero deltas (at least one).
    Zeros(u64),
    Value(u64),
}

/// Reads one delta, or a zero run (the zero and its count of additional
/// zeros), checking the run fits in the `cells` left (this one included).
#[inline(always)]
fn read_delta(
    input: &[u8],
    pos: &mut usize,
    cells: u64,
    metric: usize,
    sample: usize,
) -> Result<Delta, DeltaError> {
    let at = *pos;
    let d =
        read_varint(input, pos).map_err(|truncated| cell_error(truncated, at, metric, sample))?;
    if d != 0 {
        return Ok(Delta::Value(d));
    }
    let at = *pos;
    let z =
        read_varint(input, pos).map_err(|truncated| cell_error(truncated, at, metric, sample))?;
    if z >= cells {
        return Err(DeltaError::ZeroRunOverrun {
            pos: at,
            zeros: z,
            remaining: cells - 1,
        });
    }
    Ok(Delta::Zeros(z + 1))
}

fn cell_error(truncated: bool, pos: usize, metric: usize, sample: usize) -> DeltaError {
    if truncated {
        DeltaError::Truncated {
            pos,
            metric,
            sample,
        }
    } else {
        DeltaError::Overlong {
            pos,
            metric,
            sample,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(values: &[u64]) -> Vec<u8> {
        let mut v = Vec::new();
        for &x in values {
            write_varint(&mut v, x);
        }
        v
    }

    #[test]
    fn varint_round_trips_edges() {
        for v in [
            0,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX - 1,
            u64::MAX,
        ] {
            let b = enc(&[v]);
            let mut pos = 0;
            assert_eq!(read_varint(&b, &mut pos), Ok(v), "value {v}");
            assert_eq!(pos, b.len());
        }
        assert_eq!(enc(&[300]), vec![0xac, 0x02]);
        assert_eq!(enc(&[u64::MAX]).len(), 10);
    }

    #[test]
    fn varint_rejects_truncated_and_overlong() {
        let mut pos = 0;
        assert_eq!(read_varint(&[0x80, 0x80], &mut pos), Err(true));
        assert_eq!(read_varint(&[], &mut pos), Err(true));
        assert_eq!(read_varint(&[0xff; 10], &mut pos), Err(false));
        // 10th byte may only carry bit 63.
        let mut b = vec![0xff; 9];
        b.push(0x02);
        assert_eq!(read_varint(&b, &mut pos), Err(false));
        assert_eq!(pos, 0);
    }

    /// Decodes and expands every column (constant ones included).
    fn dense(
        stream: &[u8],
        refs: &[i64],
        n: usize,
    ) -> Result<(Vec<i64>, Vec<u32>, usize), DeltaError> {
        let (mut values, mut slots) = (Vec::new(), Vec::new());
        let used = decode_columns(stream, refs, n, &mut values, &mut slots)?;
        let mut out = Vec::new();
        for (m, &slot) in slots.iter().enumerate() {
            if slot == CONSTANT {
                out.extend(std::iter::repeat_n(refs[m], n + 1));
            } else {
                out.extend_from_slice(&values[slot as usize * (n + 1)..][..n + 1]);
            }
        }
        Ok((out, slots, used))
    }

    #[test]
    fn columns_prefix_sum_and_zero_runs_across_metrics() {
        // 3 metrics, 4 deltas each.
        // m0 deltas: 5, 0, 0, 1   m1: 0, 0, 0, 0   m2: 0, 2, (u64::MAX = -1), 0
        // m0: 5 [0 +1] 1; m1 + first of m2: [0 +4]; m2: 2 MAX [0 +0]
        let stream = enc(&[5, 0, 1, 1, 0, 4, 2, u64::MAX, 0, 0]);
        let refs = [10, -3, 100];
        let (out, slots, used) = dense(&stream, &refs, 4).expect("decodes");
        assert_eq!(used, stream.len());
        assert_eq!(
            out,
            vec![
                10, 15, 15, 15, 16, -3, -3, -3, -3, -3, 100, 100, 102, 101, 101
            ]
        );
        // m1 is constant: not materialised.
        assert_eq!(slots, vec![0, CONSTANT, 1]);
    }

    #[test]
    fn constant_metrics_inside_a_long_run_and_multibyte_deltas() {
        // 4 metrics, 3 deltas: m0 [300, 0, 0], m1 and m2 all zero, m3 [0, 0, 1].
        // Run: m0's 2 zeros + 6 + m3's 2 = 10 zeros -> [0, 9].
        let stream = enc(&[300, 0, 9, 1]);
        let (out, slots, used) = dense(&stream, &[1, 2, 3, 4], 3).expect("decodes");
        assert_eq!(used, stream.len());
        assert_eq!(
            out,
            vec![1, 301, 301, 301, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 5]
        );
        assert_eq!(slots, vec![0, CONSTANT, CONSTANT, 1]);
    }

    #[test]
    fn columns_errors_name_the_cell() {
        let refs = [0, 0];
        // Truncated: 2 metrics x 2 deltas, only 3 given.
        let err = dense(&enc(&[1, 2, 3]), &refs, 2).unwrap_err();
        assert_eq!(
            err,
            DeltaError::Truncated {
                pos: 3,
                metric: 1,
                sample: 2
            }
        );
        // A zero run longer than the cells left.
        let err = dense(&enc(&[0, 4]), &refs, 2).unwrap_err();
        assert_eq!(
            err,
            DeltaError::ZeroRunOverrun {
                pos: 1,
                zeros: 4,
                remaining: 3
            }
        );
        let err = dense(&enc(&[7, 0, u64::MAX]), &refs, 2).unwrap_err();
        assert!(
            matches!(
                err,
                DeltaError::ZeroRunOverrun {
                    zeros: u64::MAX,
                    remaining: 2,
                    ..
                }
            ),
            "{err:?}"
        );
        // Exactly the cells left is fine.
        let (out, slots, _) = dense(&enc(&[0, 3]), &refs, 2).expect("4 zeros");
        assert_eq!(out, vec![0; 6]);
        assert_eq!(slots, vec![CONSTANT, CONSTANT]);
        // Missing run count after a zero.
        let err = dense(&enc(&[0]), &refs, 2).unwrap_err();
        assert!(
            matches!(err, DeltaError::Truncated { pos: 1, .. }),
            "{err:?}"
        );
        // Overlong varint.
        let mut bad = vec![0xff; 10];
        bad.push(0);
        let err = dense(&bad, &refs, 2).unwrap_err();
        assert!(
            matches!(
                err,
                DeltaError::Overlong {
                    pos: 0,
                    metric: 0,
                    sample: 1
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn columns_without_deltas_are_the_reference() {
        assert_eq!(
            dense(&[], &[7, 8], 0),
            Ok((vec![7, 8], vec![CONSTANT, CONSTANT], 0))
        );
        assert_eq!(dense(&[], &[], 5), Ok((vec![], vec![], 0)));
    }
}
