//! The target's rseq ownership in the report: who registered rseq first
//! (glibc or the allocator) and whether TCMalloc's per-CPU caches can work,
//! from the verdict the recording holds beside its slices
//! (`recording::rseq`), with the view of it that the terminal and Markdown
//! reports lay out.

use serde::{Deserialize, Serialize};

use crate::kit::view::{Block, Line, Section, capitalise, snake};

/// rseq ownership of the target (the recording's `rseq`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RseqMeasurement {
    /// "per_cpu_caches_possible", "blocked_by_glibc_registration",
    /// "allocator_has_no_per_cpu_mode", "unknown".
    pub verdict: String,
    /// The verdict in plain words.
    pub verdict_text: String,
    /// "google_tcmalloc", "gperftools", "jemalloc", "glibc", "unknown".
    pub allocator: String,
    pub glibc_rseq_size: Option<u32>,
    pub method: String,
    pub confidence: String,
}

/// The rseq verdict in plain words.
pub fn verdict_text(v: crate::recording::rseq::Verdict) -> &'static str {
    use crate::recording::rseq::Verdict;
    match v {
        Verdict::PerCpuCachesPossible => "per-CPU caches possible",
        Verdict::BlockedByGlibcRegistration => {
            "blocked: glibc registered rseq first — TCMalloc's per-CPU caches cannot work"
        }
        Verdict::AllocatorHasNoPerCpuMode => "allocator has no per-CPU mode",
        Verdict::Unknown => "unknown",
    }
}

pub fn rseq_measurement(r: &crate::recording::rseq::RseqOwnership) -> RseqMeasurement {
    RseqMeasurement {
        verdict: snake(&r.verdict),
        verdict_text: verdict_text(r.verdict).to_string(),
        allocator: snake(&r.allocator),
        glibc_rseq_size: r.glibc_rseq_size,
        method: r.method.clone(),
        confidence: r.confidence.clone(),
    }
}

/// "blocked: …; allocator google_tcmalloc, glibc __rseq_size 32, confidence high".
fn rseq_ownership_line(r: &RseqMeasurement) -> String {
    format!(
        "{}; allocator {}, glibc __rseq_size {}, confidence {}",
        r.verdict_text,
        r.allocator,
        r.glibc_rseq_size
            .map_or("unknown".to_string(), |n| n.to_string()),
        r.confidence
    )
}

/// The rseq ownership section.
pub fn rseq_section(r: &RseqMeasurement) -> Section {
    let mut out = Section::new(Some("rseq ownership"));
    let line = rseq_ownership_line(r);
    out.push(Block::Para(format!("{}.", capitalise(&line))))
        .push(Line::title("rseq ownership", Some(line), true));
    out
}
