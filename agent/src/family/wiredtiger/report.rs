//! The WiredTiger family in the report: the checkpoints seen (how many,
//! total, mean and longest, one still running at the end) and the object
//! WiredTiger was found in, over the recording's `wiredtiger` slices; with
//! the view of them that the terminal and Markdown reports lay out.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use super::section::WiredTigerSlice;
use crate::findings::format_number;
use crate::kit::fact::ratio;
use crate::kit::family::FamilyWindow;
use crate::kit::view::{Block, Line, Section, capitalise};

/// WiredTiger family (`wiredtiger` slices), over the whole recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WiredTigerMeasurements {
    /// Checkpoints seen (completed and still running).
    pub checkpoints: u64,
    pub total_ms: f64,
    pub mean_ms: f64,
    pub max_ms: f64,
    /// A checkpoint was still running when the recording ended.
    pub in_progress: bool,
    /// The object WiredTiger was found in, when known.
    pub object: Option<String>,
}

/// The object of a WiredTiger uprobe attach point
/// ("uprobe/OBJECT:SYMBOL+0xOFF").
fn uprobe_object(attach_point: &str) -> Option<String> {
    let rest = attach_point.strip_prefix("uprobe/")?;
    let (object, _) = rest.rsplit_once(':')?;
    (!object.is_empty()).then(|| object.to_string())
}

/// The WiredTiger measurements of a window of a recording (checkpoints
/// appended in order), naming the object WiredTiger was `detected` in (the
/// target's code), else the one the probes attached to; `None` when no slice
/// has the family.
pub fn build(
    w: &FamilyWindow<WiredTigerSlice>,
    detected: Option<String>,
) -> Option<WiredTigerMeasurements> {
    let ckpts = &w.section?.checkpoints;
    let total: u64 = ckpts.iter().map(|c| c.duration_ns).sum();
    let max = ckpts.iter().map(|c| c.duration_ns).max().unwrap_or(0);
    let object = detected.or_else(|| {
        w.probes
            .iter()
            .filter(|p| p.family == super::FAMILY)
            .flat_map(|p| &p.programs)
            .filter(|p| p.error.is_none())
            .find_map(|p| uprobe_object(&p.attach_point))
    });
    Some(WiredTigerMeasurements {
        checkpoints: ckpts.len() as u64,
        total_ms: total as f64 / 1e6,
        mean_ms: ratio(total as f64, ckpts.len() as f64) / 1e6,
        max_ms: max as f64 / 1e6,
        in_progress: ckpts.iter().any(|c| c.in_progress),
        object,
    })
}

/// "3 checkpoints, total 4500 ms, mean 1500 ms, max 3000 ms; one still
/// running at the end; in libwiredtiger.so".
fn wiredtiger_line(w: &WiredTigerMeasurements) -> String {
    let mut line = format!("{} checkpoints", w.checkpoints);
    if w.checkpoints > 0 {
        let _ = write!(
            line,
            ", total {} ms, mean {} ms, max {} ms",
            format_number(w.total_ms),
            format_number(w.mean_ms),
            format_number(w.max_ms)
        );
    }
    line.push_str(if w.in_progress {
        "; one still running at the end"
    } else {
        "; none running at the end"
    });
    if let Some(o) = &w.object {
        let _ = write!(line, "; WiredTiger in {o}");
    }
    line
}

/// What a checkpoint's duration covers, beside WiredTiger's own figure.
const MEASURES: &str = "Each checkpoint is timed from the call of `__wt_txn_checkpoint` to its \
return: the wait for WiredTiger's checkpoint lock, the part WiredTiger times itself (serverStatus \
`transaction checkpoint most recent time`, from its preparation to the metadata sync) and the \
clean-up after it. These durations are therefore at least WiredTiger's own.";

/// The WiredTiger section.
pub fn section(w: &WiredTigerMeasurements) -> Section {
    let mut out = Section::new(Some("WiredTiger"));
    let line = wiredtiger_line(w);
    out.push(Block::Para(format!("{}.", capitalise(&line))));
    if w.checkpoints > 0 {
        out.push(Block::Para(MEASURES.to_owned()));
    }
    out.push(Line::title("WiredTiger", Some(line), true));
    out
}
