//! The allocator family in the report: per probed function, its calls per
//! second inside the sampled windows and its latency percentiles raw and
//! corrected for the probe's own inside cost (from the start-up
//! calibration), plus the overhead the windows imposed on the target. Built
//! from the recording's `alloc` slices and top-level record; rendered by the
//! terminal and markdown reports, carried as is by the JSON one.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use super::probe::stats::percentile_pair;
use super::section::{AllocFunctionWindow, AllocRecord, AllocSlice, AllocWindow};
use crate::findings::format_number;
use crate::kit::family::FamilyWindow;
use crate::kit::merge::merge_rows;
use crate::kit::view::{Block, Cell, Column, Line, Section, Table, md_code};

/// Allocator latency windows over the whole recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AllocMeasurements {
    /// Allocator kind (`glibc`, `gperftools`, ...), when entry points were found.
    pub allocator: Option<String>,
    /// The object probed.
    pub object: String,
    pub windows: u64,
    /// Time inside windows, seconds.
    pub window_s: f64,
    pub window_ms: u64,
    pub every_ms: u64,
    /// Calibration: what a probe pair costs per call, and how much of that
    /// shows inside a measured latency (subtracted for "corrected").
    pub pair_cost_ns: u64,
    pub inside_ns: u64,
    /// Probe hits × cost per hit / the target's CPU time, in percent.
    pub overhead_percent: f64,
    pub probe_hits: u64,
    pub target_cpu_s: f64,
    /// Calls that could not be timed (all windows, all reasons).
    pub drops: u64,
    /// Per probed function that was called, in probing order.
    pub functions: Vec<AllocFunctionMeasurement>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AllocFunctionMeasurement {
    pub symbol: String,
    pub calls: u64,
    /// Calls per second inside the windows.
    pub per_s_in_windows: f64,
    pub raw_mean_ns: f64,
    pub raw_p50_ns: f64,
    pub raw_p90_ns: f64,
    pub raw_p99_ns: f64,
    pub corrected_p50_ns: f64,
    pub corrected_p90_ns: f64,
    pub corrected_p99_ns: f64,
    /// The raw latency histogram over all windows: bucket i counts calls of
    /// [2^i, 2^(i+1)) ns (for charts).
    #[serde(default)]
    pub hist_log2_ns: Vec<u64>,
}

/// The measurements, `None` when the family did not run (no `record`, the
/// allocator record the recording keeps beside its slices). The sampled
/// windows are read from a window of the recording's slices (where they are
/// appended in time order).
pub fn measurements(
    record: Option<&AllocRecord>,
    w: &FamilyWindow<AllocSlice>,
) -> Option<AllocMeasurements> {
    let record = record?;
    let windows: &[AllocWindow] = w.section.map_or(&[], |a| &a.windows);
    let window_ns: u64 = windows
        .iter()
        .map(|w| w.end_ns.saturating_sub(w.start_ns))
        .sum();
    if record.allocator.is_none() && windows.is_empty() {
        // Nothing was probed (e.g. "not applicable"): the probe status says why.
        return None;
    }
    let window_s = window_ns as f64 / 1e9;
    let inside_ns = record.calibration.as_ref().map_or(0, |c| c.inside_ns);
    // Every window's functions summed by symbol (counts, times, histograms),
    // in order of first appearance.
    let mut summed: Vec<AllocFunctionWindow> = Vec::new();
    for w in windows {
        merge_rows(&mut summed, &w.functions);
    }
    let mut functions: Vec<AllocFunctionMeasurement> = Vec::new();
    // Probing order: the record's function list, then anything else seen.
    let mut names: Vec<String> = record.functions.iter().map(|f| f.symbol.clone()).collect();
    for f in &summed {
        if !names.contains(&f.symbol) {
            names.push(f.symbol.clone());
        }
    }
    for name in names {
        let Some(f) = summed.iter().find(|f| f.symbol == name) else {
            continue;
        };
        let (calls, sum_ns, buckets) = (f.count, f.sum_ns, f.buckets.clone());
        if calls == 0 {
            continue;
        }
        let pct = |p: f64| percentile_pair(&buckets, p, inside_ns).unwrap_or((0.0, 0.0));
        let (raw_p50_ns, corrected_p50_ns) = pct(0.5);
        let (raw_p90_ns, corrected_p90_ns) = pct(0.9);
        let (raw_p99_ns, corrected_p99_ns) = pct(0.99);
        functions.push(AllocFunctionMeasurement {
            symbol: crate::symbols::demangle::readable(&name).into_owned(),
            calls,
            per_s_in_windows: if window_s > 0.0 {
                calls as f64 / window_s
            } else {
                0.0
            },
            raw_mean_ns: sum_ns as f64 / calls as f64,
            raw_p50_ns,
            raw_p90_ns,
            raw_p99_ns,
            corrected_p50_ns,
            corrected_p90_ns,
            corrected_p99_ns,
            hist_log2_ns: buckets,
        });
    }
    let overhead = record.overhead.clone().unwrap_or_default();
    Some(AllocMeasurements {
        allocator: record.allocator.map(|k| {
            serde_json::to_value(k)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default()
        }),
        object: record.object.clone(),
        windows: windows.len() as u64,
        window_s,
        window_ms: record.window_ms,
        every_ms: record.every_ms,
        pair_cost_ns: record.calibration.as_ref().map_or(0, |c| c.pair_cost_ns),
        inside_ns,
        overhead_percent: overhead.overhead_ppm as f64 / 1e4,
        probe_hits: overhead.probe_hits,
        target_cpu_s: overhead.target_cpu_ns as f64 / 1e9,
        drops: windows
            .iter()
            .map(|w| {
                w.drops.missing_entry + w.drops.mismatched + w.drops.too_deep + w.drops.stack_full
            })
            .sum(),
        functions,
    })
}

/// "glibc (libc.so.6): 4 windows of 200 ms every 5000 ms, 0.80 s in all;
/// probe pair 2200 ns per call (900 ns inside latencies); overhead on the
/// target 0.41 % of its CPU time (40000 probed calls); 3 calls not timed".
pub fn summary_line(a: &AllocMeasurements) -> String {
    let mut line = String::new();
    match &a.allocator {
        Some(k) => {
            let _ = write!(line, "{k} ({})", crate::kit::view::file_name(&a.object));
        }
        None => line.push_str("allocator entry points not found yet"),
    }
    let _ = write!(
        line,
        ": {} windows of {} ms every {} ms, {} s in all; probe pair {} ns per call ({} ns inside latencies); overhead on the target {} % of its CPU time ({} probed calls)",
        a.windows,
        a.window_ms,
        a.every_ms,
        format_number(a.window_s),
        a.pair_cost_ns,
        a.inside_ns,
        format_number(a.overhead_percent),
        a.probe_hits
    );
    if a.drops > 0 {
        let _ = write!(line, "; {} calls not timed", a.drops);
    }
    line
}

/// The allocator latency section: the summary, then one row per function
/// (latencies in ns, raw and corrected).
pub fn section(a: &AllocMeasurements) -> Section {
    let mut out = Section::new(Some("Allocator latency"));
    let line = summary_line(a);
    out.push(Line::title("Allocator latency", Some(line.clone()), true))
        .push(Block::Para(format!("{line}.")));
    let mut columns = vec![Column::text(
        "function (ns)",
        "function (latencies in ns)",
        "",
        24,
    )];
    columns.push(Column::num("calls/s", "calls/s in windows", " ", 10));
    for p in ["p50", "p90", "p99"] {
        columns.push(Column::num(
            &format!("{p} raw"),
            &format!("{p} raw"),
            " ",
            8,
        ));
        columns.push(Column::num(
            &format!("{p} corr"),
            &format!("{p} corr. (ns)"),
            " ",
            8,
        ));
    }
    let mut t = Table::new("    ", columns);
    t.header_when_empty = true;
    for f in &a.functions {
        let mut cells = vec![
            Cell::two(&f.symbol, md_code(&f.symbol)),
            Cell::new(format_number(f.per_s_in_windows)),
        ];
        cells.extend(
            [
                f.raw_p50_ns,
                f.corrected_p50_ns,
                f.raw_p90_ns,
                f.corrected_p90_ns,
                f.raw_p99_ns,
                f.corrected_p99_ns,
            ]
            .map(|ns| Cell::new(format_number(ns))),
        );
        t.rows.push(cells.into());
    }
    out.push(Block::Table(t));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::{AllocCalibration, AllocOverhead, Recording};

    fn measurements_of(rec: &Recording) -> Option<AllocMeasurements> {
        let whole = rec.window();
        let w = rec.family_window(&whole);
        measurements(rec.alloc.as_ref(), &w)
    }

    fn recording() -> Recording {
        let mut rec = crate::rules::testdata::base("6.18.0", "x86_64", 2);
        rec.alloc = Some(AllocRecord {
            window_ms: 200,
            every_ms: 5000,
            allocator: Some(crate::symbols::AllocatorKind::Glibc),
            object: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
            calibration: Some(AllocCalibration {
                pair_cost_ns: 2200,
                inside_ns: 700,
                ..AllocCalibration::default()
            }),
            overhead: Some(AllocOverhead {
                probe_hits: 40_000,
                pair_cost_ns: 2200,
                target_cpu_ns: 20_000_000_000,
                overhead_ppm: 4400,
            }),
            ..AllocRecord::default()
        });
        let mut b = vec![0u64; 12];
        b[9] = 50; // [512, 1024) ns
        b[11] = 50; // [2048, 4096) ns
        let window = |start: u64| AllocWindow {
            start_ns: start,
            end_ns: start + 200_000_000,
            functions: vec![AllocFunctionWindow {
                symbol: "malloc".into(),
                count: 100,
                sum_ns: 150_000,
                buckets: b.clone(),
                size_classes: vec![],
            }],
            ..AllocWindow::default()
        };
        rec.slices = vec![crate::recording::Slice {
            start_ms: 0,
            duration_ms: 1000,
            alloc: Some(AllocSlice {
                windows: vec![window(1_000_000_000), window(6_000_000_000)],
            }),
            ..crate::recording::Slice::default()
        }];
        rec
    }

    #[test]
    fn windows_add_up_and_percentiles_are_corrected() {
        let rec = recording();
        let a = measurements_of(&rec).expect("alloc measured");
        assert_eq!(a.allocator.as_deref(), Some("glibc"));
        assert_eq!(a.windows, 2);
        assert!((a.window_s - 0.4).abs() < 1e-9);
        assert!((a.overhead_percent - 0.44).abs() < 1e-9);
        let f = &a.functions[0];
        assert_eq!((f.symbol.as_str(), f.calls), ("malloc", 200));
        assert!((f.per_s_in_windows - 500.0).abs() < 1e-9);
        assert!((f.raw_mean_ns - 1500.0).abs() < 1e-9);
        assert_eq!((f.raw_p50_ns, f.corrected_p50_ns), (1024.0, 324.0));
        assert!(f.corrected_p99_ns <= f.raw_p99_ns);
        let line = summary_line(&a);
        assert!(
            line.starts_with("glibc (libc.so.6): 2 windows of 200 ms"),
            "{line}"
        );
        assert!(line.contains("overhead on the target 0.440 %"), "{line}");
        let md = crate::report::markdown::render_sections(&[section(&a)]);
        assert!(md.contains("| `malloc` | 500 | 1024 | 324 |"), "{md}");
        let term = crate::report::terminal::render_sections(&[section(&a)], false);
        assert!(term.lines().all(|r| r.chars().count() <= 100), "{term}");
        let rows: Vec<&str> = term.lines().rev().take(2).collect();
        assert!(rows[1].contains("function (ns)"), "{term}");
        assert!(
            rows[0].contains("malloc") && rows[0].contains("324"),
            "{term}"
        );
    }

    #[test]
    fn absent_without_a_record() {
        let mut rec = recording();
        rec.alloc = None;
        assert_eq!(measurements_of(&rec), None);
    }
}
