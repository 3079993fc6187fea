//! Recording types of rseq ownership in the target: who registered each
//! thread's rseq area and the per-CPU-caches verdict, recorded once per
//! recording. `rseq.rs` reaches the verdict and fills them; the types are
//! the recording format's, so they live here, below it.

use serde::{Deserialize, Serialize};

use crate::symbols::AllocatorKind;

/// The process verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Google TCMalloc, and glibc left rseq to it.
    PerCpuCachesPossible,
    /// Google TCMalloc, but glibc registered rseq first.
    BlockedByGlibcRegistration,
    /// The allocator has no rseq per-CPU mode (glibc, gperftools, jemalloc).
    AllocatorHasNoPerCpuMode,
    /// Not enough information (allocator unknown, or __rseq_size unreadable).
    Unknown,
}

/// One thread's registration, from the calls seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadRseq {
    pub tid: u32,
    /// "glibc", "program", or "none" (every call failed).
    pub owner: String,
    /// The object that made the successful registration.
    pub object: Option<String>,
    /// Failed attempts (e.g. TCMalloc's after glibc's), with their errno.
    pub failed_calls: Vec<i64>,
}

/// rseq ownership of the target, recorded once per recording.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RseqOwnership {
    pub allocator: AllocatorKind,
    /// glibc's `__rseq_size` read from the target (None: not found or unreadable).
    pub glibc_rseq_size: Option<u32>,
    pub verdict: Verdict,
    /// How the verdict was reached and how sure it is, in words.
    pub method: String,
    pub confidence: String,
    /// Threads whose registration was seen during the recording.
    pub threads: Vec<ThreadRseq>,
}
