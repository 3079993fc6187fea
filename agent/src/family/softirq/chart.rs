//! The softirq family's chart in the HTML report: softirq time per CPU and
//! vector, stacked, from the family's measurements.

use super::report::SoftirqMeasurements;
use crate::findings::format_number;
use crate::kit::svg::{figure, no_data, stacked_bars};

/// Softirq time per CPU, stacked by vector; a "no data" line with `why_missing`
/// when the family has no measurements or no CPU.
pub fn chart(out: &mut String, m: Option<&SoftirqMeasurements>, why_missing: &str) {
    match m {
        Some(s) if !s.cpus.is_empty() => {
            let mut categories: Vec<String> =
                s.cpus.iter().map(|c| format!("cpu{}", c.cpu)).collect();
            let mut series: Vec<(&str, Vec<f64>)> = s
                .vectors
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    (
                        v.name.as_str(),
                        s.cpus
                            .iter()
                            .map(|c| c.time_ms_per_s.get(i).copied().unwrap_or(0.0))
                            .collect(),
                    )
                })
                .collect();
            if let Some(o) = &s.other_cpus {
                categories.push(format!("other {} (mean)", o.cpus));
                for (i, (_, values)) in series.iter_mut().enumerate() {
                    values.push(o.time_ms_per_s.get(i).copied().unwrap_or(0.0));
                }
            }
            figure(
                out,
                &stacked_bars(
                    "chart-softirq",
                    "Softirq time per CPU and vector",
                    "ms of CPU per s",
                    &categories,
                    &series,
                ),
                &if s.net_rx_imbalance > 0.0 {
                    format!(
                        "CPU time in softirq handlers per CPU (1000 ms/s = a whole CPU). NET_RX imbalance {} (busiest / mean; 1 = even), busiest CPU {} with {} % of NET_RX time.",
                        format_number(s.net_rx_imbalance),
                        s.net_rx_busiest_cpu,
                        format_number(s.net_rx_busiest_share * 100.0)
                    )
                } else {
                    "CPU time in softirq handlers per CPU (1000 ms/s = a whole CPU). No NET_RX time was recorded.".to_string()
                },
            );
        }
        _ => no_data(out, "chart-softirq", "softirq chart", why_missing),
    }
}
