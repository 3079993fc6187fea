//! The sched family's chart in the HTML report: involuntary switches
//! (preemptions) per thread class, from the family's measurements.

use super::report::SchedMeasurements;
use crate::findings::format_number;
use crate::kit::svg::{figure, hbars, no_data};

/// Involuntary switches per thread class; a "no data" line when no thread
/// was switched out involuntarily, or with `why_missing` when the family has
/// no measurements.
pub fn chart(out: &mut String, m: Option<&SchedMeasurements>, why_missing: &str) {
    match m {
        Some(s) if !s.top_classes.is_empty() => {
            let rows: Vec<(String, f64)> = s
                .top_classes
                .iter()
                .map(|c| {
                    (
                        format!("{} ({} thr.)", c.class, c.threads),
                        c.involuntary_per_s,
                    )
                })
                .collect();
            figure(
                out,
                &hbars(
                    "chart-preemptions",
                    "Involuntary switches (preemptions) per thread class",
                    "involuntary switches per second",
                    &rows,
                ),
                &format!(
                    "Threads switched out while still runnable, by thread name class ({} threads observed; {} % of their switches involuntary; run-queue delay p99 {} µs).",
                    s.threads,
                    format_number(s.involuntary_share * 100.0),
                    format_number(s.runq_p99_us)
                ),
            );
        }
        Some(_) => no_data(
            out,
            "chart-preemptions",
            "preemption chart",
            "no thread was switched out involuntarily",
        ),
        None => no_data(out, "chart-preemptions", "preemption chart", why_missing),
    }
}
