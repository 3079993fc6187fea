//! Percentiles of log2 histograms of nanoseconds, the shape every probe
//! family's kernel side fills (`mdiag_common::hist`: `[i]` counts values in
//! [2^i, 2^(i+1)) ns; `[0]` covers [0, 2) ns). The value is interpolated
//! linearly inside the bucket where the cumulative count reaches
//! `p × total`, so it is exact at bucket edges and at most a factor of 2 off
//! inside a bucket (the width of the bucket).
//!
//! Low in the module graph: the probes (the allocator's corrected
//! percentiles), the rules' facts, the report and `compare` all use it.

/// The `p` percentile (0..=1) of a log2 histogram of nanoseconds, interpolated
/// linearly inside the bucket (see the module docs). `None` when it is empty.
pub fn log2_hist_percentile_ns(hist: &[u64], p: f64) -> Option<f64> {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = p.clamp(0.0, 1.0) * total as f64;
    let mut before = 0u64;
    for (i, &count) in hist.iter().enumerate() {
        if count == 0 {
            continue;
        }
        if (before + count) as f64 >= rank {
            let (lo, hi) = bucket_bounds_ns(i);
            let within = ((rank - before as f64) / count as f64).clamp(0.0, 1.0);
            return Some(lo + (hi - lo) * within);
        }
        before += count;
    }
    // Unreachable with p <= 1, kept for float rounding: the top of the last bucket.
    hist.iter()
        .rposition(|&c| c > 0)
        .map(|i| bucket_bounds_ns(i).1)
}

/// [low, high) of bucket `i` in ns; bucket 0 also holds 0 ns.
pub fn bucket_bounds_ns(i: usize) -> (f64, f64) {
    let exp = i32::try_from(i).unwrap_or(i32::MAX);
    let lo = if i == 0 { 0.0 } else { 2f64.powi(exp) };
    (lo, 2f64.powi(exp.saturating_add(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_inside_log2_buckets() {
        // 100 delays all in [1024, 2048) ns: the median is the bucket's middle.
        let mut hist = vec![0u64; 11];
        hist[10] = 100;
        assert_eq!(log2_hist_percentile_ns(&hist, 0.5), Some(1536.0));
        assert_eq!(log2_hist_percentile_ns(&hist, 0.0), Some(1024.0));
        assert_eq!(log2_hist_percentile_ns(&hist, 1.0), Some(2048.0));

        // 90 in [1024, 2048), 10 in [2^20, 2^21): p99 is 90% into the top bucket.
        let mut hist = vec![0u64; 21];
        hist[10] = 90;
        hist[20] = 10;
        let p99 = log2_hist_percentile_ns(&hist, 0.99).unwrap();
        assert!((p99 - 1.9 * 1_048_576.0).abs() < 1e-6, "{p99}");
        let p90 = log2_hist_percentile_ns(&hist, 0.90).unwrap();
        assert_eq!(p90, 2048.0);

        // Bucket 0 spans [0, 2) ns.
        assert_eq!(log2_hist_percentile_ns(&[4], 0.5), Some(1.0));
        assert_eq!(log2_hist_percentile_ns(&[], 0.5), None);
        assert_eq!(log2_hist_percentile_ns(&[0, 0], 0.5), None);
    }
}
