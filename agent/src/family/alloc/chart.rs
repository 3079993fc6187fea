//! The allocator family's charts in the HTML report: the raw latency
//! histograms of up to four called allocator functions, from the family's
//! measurements.

use super::report::AllocMeasurements;
use crate::kit::svg::{figure, log2_histogram, no_data, ns_label};

/// The latency histograms of up to four called allocator functions; a "no
/// data" line with `why_missing` when none was called or the family has no
/// measurements.
pub fn chart(out: &mut String, m: Option<&AllocMeasurements>, why_missing: &str) {
    match m {
        Some(a) if a.functions.iter().any(|f| f.calls > 0) => {
            for (i, f) in a
                .functions
                .iter()
                .filter(|f| f.calls > 0)
                .take(4)
                .enumerate()
            {
                figure(
                    out,
                    &log2_histogram(
                        &format!("chart-alloc-{i}"),
                        &format!("{} latency (raw, sampled windows)", f.symbol),
                        &f.hist_log2_ns,
                    ),
                    &format!(
                        "{} calls in {} windows; raw p50 {} / p99 {}; corrected for the probe's own cost ({} per call inside the measurement): p50 {} / p99 {}.",
                        f.calls,
                        a.windows,
                        ns_label(f.raw_p50_ns as u64),
                        ns_label(f.raw_p99_ns as u64),
                        ns_label(a.inside_ns),
                        ns_label(f.corrected_p50_ns as u64),
                        ns_label(f.corrected_p99_ns as u64)
                    ),
                );
            }
        }
        _ => no_data(out, "chart-alloc", "allocator latency chart", why_missing),
    }
}
