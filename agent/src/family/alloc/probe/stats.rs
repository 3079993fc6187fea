//! The allocator family's arithmetic: window histograms as differences of
//! cumulative per-CPU readings, the calibration figures (what a probe pair
//! costs per call, and how much of it shows inside a measured latency),
//! corrected percentiles and the overhead imposed on the target. All pure.

use mdiag_common::alloc::{AllocCounters, AllocHist, LAT_BUCKETS};

use super::super::section::AllocDrops;
use crate::hist::log2_hist_percentile_ns;

/// Sum of per-CPU histograms.
pub fn sum_hists(per_cpu: &[AllocHist]) -> AllocHist {
    let mut out = AllocHist::default();
    for h in per_cpu {
        out.count += h.count;
        out.sum_ns += h.sum_ns;
        for (o, b) in out.buckets.iter_mut().zip(h.buckets.iter()) {
            *o += b;
        }
    }
    out
}

/// `after - before` (both cumulative).
pub fn hist_between(before: &AllocHist, after: &AllocHist) -> AllocHist {
    let mut out = AllocHist {
        count: after.count.saturating_sub(before.count),
        sum_ns: after.sum_ns.saturating_sub(before.sum_ns),
        buckets: [0; LAT_BUCKETS],
    };
    for (i, o) in out.buckets.iter_mut().enumerate() {
        *o = after.buckets[i].saturating_sub(before.buckets[i]);
    }
    out
}

/// Sum of per-CPU counters.
pub fn sum_counters(per_cpu: &[AllocCounters]) -> AllocCounters {
    per_cpu
        .iter()
        .fold(AllocCounters::default(), |a, b| AllocCounters {
            entries: a.entries + b.entries,
            timed: a.timed + b.timed,
            missing_entry: a.missing_entry + b.missing_entry,
            mismatched: a.mismatched + b.mismatched,
            too_deep: a.too_deep + b.too_deep,
            stack_full: a.stack_full + b.stack_full,
        })
}

/// Drops between two cumulative readings.
pub fn drops_between(before: &AllocCounters, after: &AllocCounters) -> AllocDrops {
    AllocDrops {
        missing_entry: after.missing_entry.saturating_sub(before.missing_entry),
        mismatched: after.mismatched.saturating_sub(before.mismatched),
        too_deep: after.too_deep.saturating_sub(before.too_deep),
        stack_full: after.stack_full.saturating_sub(before.stack_full),
    }
}

/// Buckets without trailing zeros (as recorded).
pub fn trimmed(buckets: &[u64]) -> Vec<u64> {
    let end = buckets.iter().rposition(|&c| c > 0).map_or(0, |i| i + 1);
    buckets[..end].to_vec()
}

/// Median of several timings (calibration rounds), `None` when empty.
pub fn median(values: &[u64]) -> Option<u64> {
    let mut v = values.to_vec();
    v.sort_unstable();
    v.get(v.len() / 2).copied()
}

/// What one probe pair adds to each call: (probed − bare) / calls, in ns
/// (0 when the probed run was not slower: noise).
pub fn pair_cost_ns(bare_ns: u64, probed_ns: u64, calls: u64) -> u64 {
    if calls == 0 {
        return 0;
    }
    probed_ns.saturating_sub(bare_ns) / calls
}

/// How much of the probe's cost shows inside a measured latency: the median
/// latency measured for a function that does nothing (its true latency is a
/// few ns, so what is measured is the probe). Rounded to whole ns.
pub fn inside_bias_ns(calibration_buckets: &[u64]) -> u64 {
    log2_hist_percentile_ns(calibration_buckets, 0.5).map_or(0, |v| v.round() as u64)
}

/// Raw and corrected percentile `p` of a latency histogram: corrected = raw
/// minus the probe's inside bias, never below zero (so never above raw).
pub fn percentile_pair(buckets: &[u64], p: f64, bias_ns: u64) -> Option<(f64, f64)> {
    let raw = log2_hist_percentile_ns(buckets, p)?;
    Some((raw, (raw - bias_ns as f64).max(0.0)))
}

/// Overhead imposed on the target, parts per million of its CPU time:
/// probe hits × cost per hit / target CPU time. 0 without CPU time.
pub fn overhead_ppm(probe_hits: u64, pair_cost_ns: u64, target_cpu_ns: u64) -> u64 {
    if target_cpu_ns == 0 {
        return 0;
    }
    let cost = (u128::from(probe_hits) * u128::from(pair_cost_ns)).saturating_mul(1_000_000);
    u64::try_from(cost / u128::from(target_cpu_ns)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(count: u64, sum: u64, at: &[(usize, u64)]) -> AllocHist {
        let mut h = AllocHist {
            count,
            sum_ns: sum,
            ..Default::default()
        };
        for &(i, c) in at {
            h.buckets[i] = c;
        }
        h
    }

    #[test]
    fn windows_are_differences_of_per_cpu_sums() {
        let before = sum_hists(&[hist(2, 100, &[(5, 2)]), hist(1, 50, &[(6, 1)])]);
        let after = sum_hists(&[hist(5, 400, &[(5, 4), (7, 1)]), hist(2, 90, &[(6, 2)])]);
        let w = hist_between(&before, &after);
        assert_eq!((w.count, w.sum_ns), (4, 340));
        assert_eq!(trimmed(&w.buckets), vec![0, 0, 0, 0, 0, 2, 1, 1]);
        assert!(trimmed(&[0; 4]).is_empty());
    }

    #[test]
    fn calibration_maths() {
        // 10 000 calls: 30 µs bare, 22 030 µs probed → 2.2 µs per pair.
        assert_eq!(pair_cost_ns(30_000, 22_030_000, 10_000), 2_200);
        assert_eq!(pair_cost_ns(50, 40, 10), 0);
        assert_eq!(pair_cost_ns(1, 2, 0), 0);
        assert_eq!(median(&[5, 1, 3]), Some(3));
        assert_eq!(median(&[]), None);
        // All calibration calls measured in [512, 1024) ns: median in the middle.
        let mut b = [0u64; 11];
        b[9] = 100;
        assert_eq!(inside_bias_ns(&b), 768);
        assert_eq!(inside_bias_ns(&[]), 0);
    }

    #[test]
    fn corrected_percentiles_are_raw_minus_bias_and_never_negative() {
        let mut b = [0u64; 12];
        b[9] = 50; // [512, 1024)
        b[11] = 50; // [2048, 4096)
        let (raw50, cor50) = percentile_pair(&b, 0.5, 700).unwrap();
        assert_eq!(raw50, 1024.0);
        assert_eq!(cor50, 324.0);
        let (raw10, cor10) = percentile_pair(&b, 0.1, 700).unwrap();
        assert!(raw10 < 700.0 && cor10 == 0.0);
        let (raw99, cor99) = percentile_pair(&b, 0.99, 700).unwrap();
        assert!(cor99 <= raw99 && raw99 > 4000.0);
        assert_eq!(percentile_pair(&[0; 4], 0.5, 1), None);
    }

    #[test]
    fn overhead_is_hits_times_cost_over_cpu() {
        // 1 M hits × 2 µs = 2 s of 100 s CPU = 2 % = 20 000 ppm.
        assert_eq!(overhead_ppm(1_000_000, 2_000, 100_000_000_000), 20_000);
        assert_eq!(overhead_ppm(5, 2_000, 0), 0);
        assert_eq!(overhead_ppm(u64::MAX, u64::MAX, 1), u64::MAX);
    }

    #[test]
    fn drops_and_counters() {
        let a = AllocCounters {
            entries: 10,
            missing_entry: 1,
            ..Default::default()
        };
        let b = AllocCounters {
            entries: 30,
            missing_entry: 4,
            too_deep: 2,
            ..Default::default()
        };
        assert_eq!(sum_counters(&[a, b]).entries, 40);
        let d = drops_between(&a, &b);
        assert_eq!((d.missing_entry, d.too_deep, d.mismatched), (3, 2, 0));
    }
}
