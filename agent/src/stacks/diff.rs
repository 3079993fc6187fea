//! Two profiles side by side: which stacks grew or shrank most (`mdiag
//! compare`), and the differential flame graph of the two.
//!
//! Stacks are matched by their folded text (class and function names), and
//! compared as rates (per second of each recording), since two recordings
//! rarely last as long: on CPU in % of one CPU (samples ÷ frequency), off
//! CPU in ms of waiting per second.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::flame::FlameError;
use super::folded::folded_lines;
use super::{Profile, ProfileKind};

/// One stack's rate in both recordings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackChange {
    /// `class;root;…;leaf` (folded).
    pub stack: String,
    /// On CPU: % of one CPU; off CPU: ms per second.
    pub before: f64,
    pub after: f64,
    pub change: f64,
}

/// A folded line's stack and value.
fn split(line: &str) -> Option<(&str, u64)> {
    let (stack, n) = line.rsplit_once(' ')?;
    Some((stack, n.parse().ok()?))
}

/// A profile's rate per stack: value per second, scaled to % of a CPU on
/// CPU and to ms per second off CPU.
fn rates(p: &Profile) -> BTreeMap<String, f64> {
    let secs = p.duration_ns as f64 / 1e9;
    let scale = match p.kind {
        ProfileKind::OnCpu if p.freq_hz > 0 => 100.0 / p.freq_hz as f64,
        ProfileKind::OnCpu => 0.0,
        ProfileKind::OffCpu => 1e-6,
    };
    folded_lines(p)
        .iter()
        .filter_map(|l| split(l))
        .map(|(s, n)| {
            let rate = if secs > 0.0 {
                n as f64 * scale / secs
            } else {
                0.0
            };
            (s.to_owned(), rate)
        })
        .collect()
}

/// The `top` stacks that grew most and the `top` that shrank most, most
/// first (grown ones first).
pub fn stack_changes(before: &Profile, after: &Profile, top: usize) -> Vec<StackChange> {
    let (b, a) = (rates(before), rates(after));
    let mut all: Vec<StackChange> = b
        .keys()
        .chain(a.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .map(|s| {
            let (before, after) = (
                b.get(s).copied().unwrap_or(0.0),
                a.get(s).copied().unwrap_or(0.0),
            );
            StackChange {
                stack: s.clone(),
                before,
                after,
                change: after - before,
            }
        })
        .filter(|c| c.change != 0.0)
        .collect();
    all.sort_by(|x, y| {
        y.change
            .total_cmp(&x.change)
            .then_with(|| x.stack.cmp(&y.stack))
    });
    let grew: Vec<StackChange> = all
        .iter()
        .filter(|c| c.change > 0.0)
        .take(top)
        .cloned()
        .collect();
    let shrank: Vec<StackChange> = all
        .iter()
        .rev()
        .filter(|c| c.change < 0.0)
        .take(top)
        .cloned()
        .collect();
    grew.into_iter().chain(shrank).collect()
}

/// The differential flame graph: the "after" profile's shape, each frame
/// red where it grew and blue where it shrank against "before" (inferno's
/// differential mode, flamegraph.pl's difffolded; both sides normalized to
/// the same total, since the recordings differ in length).
pub fn diff_flame_svg(
    title: &str,
    before: &Profile,
    after: &Profile,
) -> Result<String, FlameError> {
    let b = folded_lines(before).join("\n");
    let a = folded_lines(after).join("\n");
    let mut diff = Vec::new();
    let opt = inferno::differential::Options {
        normalize: true,
        strip_hex: false,
    };
    inferno::differential::from_readers(opt, b.as_bytes(), a.as_bytes(), &mut diff)
        .map_err(FlameError::Render)?;
    let text = String::from_utf8(diff)?;
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    super::flame::flame_svg(title, &lines, after.kind, after.freq_hz)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::test_stack;

    fn on(stacks: Vec<crate::stacks::ProfileStack>, secs: u64) -> Profile {
        Profile {
            kind: ProfileKind::OnCpu,
            freq_hz: 100,
            duration_ns: secs * 1_000_000_000,
            stacks,
        }
    }

    #[test]
    fn changes_are_rates_and_the_grown_come_first() {
        // 10 s before, 20 s after: a stack at 100 samples then 400 doubled
        // its rate (10 % → 20 % of a CPU).
        let before = on(
            vec![
                test_stack("conn", &[("a", "m"), ("b", "m")], false, 100),
                test_stack("conn", &[("a", "m"), ("c", "m")], false, 300),
            ],
            10,
        );
        let after = on(
            vec![
                test_stack("conn", &[("a", "m"), ("b", "m")], false, 400),
                test_stack("conn", &[("a", "m"), ("c", "m")], false, 200),
                test_stack("conn", &[("a", "m"), ("d", "m")], false, 20),
            ],
            20,
        );
        let c = stack_changes(&before, &after, 5);
        assert_eq!(c[0].stack, "conn;a;b");
        assert!((c[0].before - 10.0).abs() < 1e-9 && (c[0].after - 20.0).abs() < 1e-9);
        assert_eq!(c[1].stack, "conn;a;d");
        let last = c.last().unwrap();
        assert_eq!(last.stack, "conn;a;c");
        assert!((last.change + 20.0).abs() < 1e-9, "30 % → 10 % of a CPU");
    }

    #[test]
    fn the_differential_graph_colours_what_grew() {
        let before = on(
            vec![test_stack("conn", &[("a", "m"), ("b", "m")], false, 100)],
            10,
        );
        let after = on(
            vec![
                test_stack("conn", &[("a", "m"), ("b", "m")], false, 100),
                test_stack("conn", &[("a", "m"), ("new_hot", "m")], false, 300),
            ],
            10,
        );
        let svg = diff_flame_svg("diff", &before, &after).unwrap();
        assert!(svg.contains("new_hot"), "{svg}");
        // inferno's differential titles carry the change in percent.
        assert!(svg.contains('%'));
    }
}
