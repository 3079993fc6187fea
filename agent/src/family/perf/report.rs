//! The perf family in the report: CPU-time samples, the target's share of
//! them, the allocator's and its slow paths' share of the target's, and the
//! most sampled functions, summed over the recording's `perf` slices (their window); with
//! the view of them that the terminal and Markdown reports lay out.

use serde::{Deserialize, Serialize};

use super::section::PerfSlice;
use crate::kit::fact::ratio;
use crate::kit::family::FamilyWindow;
use crate::kit::view::{
    Block, Cell, Column, Line, Section, Table, file_name, md_cell, md_code, percent, snake,
};
use crate::symbols::AllocatorKind;

/// Perf symbols listed.
pub const TOP_SYMBOLS: usize = 5;

/// Perf family (`perf` slices), summed over the whole recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerfMeasurements {
    pub duration_s: f64,
    /// Samples on all CPUs, idle included.
    pub samples: u64,
    pub target_samples: u64,
    /// Target samples / all samples: the target's share of the sampled CPU time.
    pub target_cpu_share: f64,
    /// The allocator as classified ("google_tcmalloc", ...), when known.
    pub allocator: Option<String>,
    pub allocator_samples: u64,
    /// Allocator samples / target samples.
    pub allocator_share: f64,
    pub allocator_slow_path_samples: u64,
    /// Slow-path samples / target samples.
    pub slow_path_share: f64,
    /// Up to [`TOP_SYMBOLS`] most sampled functions, most first.
    pub top_symbols: Vec<PerfSymbolMeasurement>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerfSymbolMeasurement {
    /// Function name, C++ and Rust names demangled ("?" when no symbol
    /// covers the address).
    pub symbol: String,
    /// Object path ("[kernel]"; `None` when unmapped).
    pub object: Option<String>,
    pub samples: u64,
    /// Samples / target samples.
    pub share: f64,
}

/// The allocator the report names: the first slice's classification, as
/// this report always showed (the window keeps the newest; a target's
/// allocator does not change), else the target code's (`target_code`).
pub fn first_allocator<'a>(
    sections: impl IntoIterator<Item = Option<&'a PerfSlice>>,
    target_code: Option<AllocatorKind>,
) -> Option<AllocatorKind> {
    sections
        .into_iter()
        .find_map(|s| s?.allocator)
        .or(target_code)
}

/// The perf measurements of a window of a recording (sample counters
/// summed, symbols matched and summed), naming `allocator`
/// ([`first_allocator`]); `None` when no slice has the family.
pub fn build(
    w: &FamilyWindow<PerfSlice>,
    allocator: Option<AllocatorKind>,
) -> Option<PerfMeasurements> {
    use std::collections::HashMap;
    let p = w.section?;
    let (samples, target) = (p.samples, p.target_samples);
    let (alloc, slow) = (p.allocator_samples, p.allocator_slow_path_samples);
    let allocator = allocator.map(|k| snake(&k));
    // The window's rows also tell allocator and slow-path rows apart: one
    // row per function here.
    let mut by: HashMap<(Option<&str>, Option<&str>), u64> = HashMap::new();
    for b in &p.by_symbol {
        *by.entry((b.object.as_deref(), b.symbol.as_deref()))
            .or_default() += b.samples;
    }
    let mut by: Vec<_> = by.into_iter().collect();
    by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    by.truncate(TOP_SYMBOLS);
    Some(PerfMeasurements {
        duration_s: w.window_ms as f64 / 1000.0,
        samples,
        target_samples: target,
        target_cpu_share: ratio(target as f64, samples as f64),
        allocator,
        allocator_samples: alloc,
        allocator_share: ratio(alloc as f64, target as f64),
        allocator_slow_path_samples: slow,
        slow_path_share: ratio(slow as f64, target as f64),
        top_symbols: by
            .into_iter()
            .map(|((object, symbol), n)| PerfSymbolMeasurement {
                symbol: symbol.map_or_else(
                    || "?".to_owned(),
                    |s| crate::symbols::demangle::readable(s).into_owned(),
                ),
                object: object.map(str::to_string),
                samples: n,
                share: ratio(n as f64, target as f64),
            })
            .collect(),
    })
}

/// "3960 samples; target 25.0% of the sampled CPU time; allocator
/// (google_tcmalloc) 12.0% of the target's samples, slow paths 4.0%".
fn perf_line(f: &PerfMeasurements) -> String {
    format!(
        "{} samples; target {} of the sampled CPU time ({} samples); allocator{} {} of the \
         target's samples, slow paths {}",
        f.samples,
        percent(f.target_cpu_share),
        f.target_samples,
        f.allocator
            .as_ref()
            .map_or(String::new(), |a| format!(" ({a})")),
        percent(f.allocator_share),
        percent(f.slow_path_share)
    )
}

/// The perf section.
pub fn section(f: &PerfMeasurements) -> Section {
    let mut out = Section::new(Some("Perf"));
    out.push(Line::title(
        "Perf",
        Some(format!("CPU-time sampling, {:.1} s", f.duration_s)),
        false,
    ))
    .push(Line::wrapped("    ", perf_line(f)))
    .push(Block::Para(format!(
        "CPU-time sampling, {:.1} s: {}.",
        f.duration_s,
        perf_line(f)
    )));
    let mut t = Table::new(
        "      ",
        vec![
            Column::text("symbol", "Symbol", "", 44),
            Column::text("object", "Object", " ", 28),
            Column::num("samples", "Samples", " ", 8),
            Column::num("%", "% of target", " ", 7),
        ],
    );
    for s in &f.top_symbols {
        let object = s.object.as_deref().map_or("?", file_name);
        t.rows.push(
            vec![
                Cell::two(&s.symbol, md_code(&s.symbol)),
                Cell::two(object, md_cell(object)),
                Cell::new(s.samples.to_string()),
                Cell::new(format!("{:.1}", s.share * 100.0)),
            ]
            .into(),
        );
    }
    out.push(Block::Table(t));
    out
}
