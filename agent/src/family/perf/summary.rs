//! Perf family: one slice's target samples summed by attribution (allocator,
//! slow path, kernel, unknown) and its most sampled functions. Pure, so the
//! sums are tested without a kernel.

use std::collections::HashMap;

use super::attribution::Attribution;
use super::probe::TOP_SYMBOLS;
use super::section::{PerfSlice, PerfSlowPath, PerfSymbol};

/// Sums the target's samples `(ip, count)` by attribution. Pure, so testable.
pub fn summarize(ips: &[(u64, u64)], mut classify: impl FnMut(u64) -> Attribution) -> PerfSlice {
    let mut slice = PerfSlice::default();
    // Unsymbolized addresses of one object are split by allocator or not.
    let mut by: HashMap<(Option<String>, Option<String>, bool), PerfSymbol> = HashMap::new();
    let mut slow: HashMap<&'static str, u64> = HashMap::new();
    for &(ip, n) in ips {
        let a = classify(ip);
        slice.target_samples += n;
        if a.kernel {
            slice.target_kernel_samples += n;
        } else if a.symbol.is_none() && !a.allocator {
            slice.unknown_samples += n;
        }
        if a.allocator {
            slice.allocator_samples += n;
        }
        if let Some(label) = a.slow_path {
            slice.allocator_slow_path_samples += n;
            *slow.entry(label).or_insert(0) += n;
        }
        let object = if a.kernel {
            Some("[kernel]".to_owned())
        } else {
            a.object
        };
        let e = by
            .entry((object.clone(), a.symbol.clone(), a.allocator))
            .or_insert_with(|| PerfSymbol {
                object,
                symbol: a.symbol,
                samples: 0,
                allocator: a.allocator,
                slow_path: a.slow_path.map(str::to_owned),
            });
        e.samples += n;
    }
    let mut by: Vec<PerfSymbol> = by.into_values().collect();
    by.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then_with(|| a.object.cmp(&b.object))
            .then_with(|| a.symbol.cmp(&b.symbol))
            .then_with(|| a.allocator.cmp(&b.allocator))
    });
    by.truncate(TOP_SYMBOLS);
    slice.by_symbol = by;
    let mut slow: Vec<PerfSlowPath> = slow
        .into_iter()
        .map(|(label, samples)| PerfSlowPath {
            label: label.to_owned(),
            samples,
        })
        .collect();
    slow.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.label.cmp(&b.label)));
    slice.slow_paths = slow;
    slice
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summarize_sums_and_ranks() {
        let slice = summarize(&[(0, 5), (1, 10), (2, 3), (3, 2), (4, 7)], |ip| match ip {
            0 => Attribution {
                kernel: true,
                ..Default::default()
            },
            1 | 2 => Attribution {
                object: Some("/lib/libc.so.6".into()),
                symbol: Some(if ip == 1 { "malloc" } else { "_int_free" }.into()),
                allocator: true,
                slow_path: (ip == 2).then_some("int_free"),
                ..Default::default()
            },
            3 => Attribution {
                object: Some("/lib/libc.so.6".into()),
                allocator: true,
                ..Default::default()
            },
            _ => Attribution {
                object: Some("/bin/app".into()),
                symbol: Some("main".into()),
                ..Default::default()
            },
        });
        assert_eq!(slice.target_samples, 27);
        assert_eq!(slice.target_kernel_samples, 5);
        assert_eq!(slice.allocator_samples, 15);
        assert_eq!(slice.allocator_slow_path_samples, 3);
        assert_eq!(slice.unknown_samples, 0);
        assert_eq!(
            slice.slow_paths,
            [PerfSlowPath {
                label: "int_free".into(),
                samples: 3
            }]
        );
        let top: Vec<_> = slice
            .by_symbol
            .iter()
            .map(|s| (s.symbol.as_deref(), s.samples, s.allocator))
            .collect();
        assert_eq!(
            top,
            [
                (Some("malloc"), 10, true),
                (Some("main"), 7, false),
                (None, 5, false),
                (Some("_int_free"), 3, true),
                (None, 2, true),
            ]
        );
        assert_eq!(slice.by_symbol[2].object.as_deref(), Some("[kernel]"));
    }
}
