//! Call stacks: the profile model shared by the recording, the reports and
//! the exports.
//!
//! The perf family samples stacks in the kernel and symbolizes them; what it
//! records, and what `explain`, the HTML report, `mdiag export --pprof` and
//! `--folded` read, is a [`Profile`]: distinct stacks (root first, grouped by
//! the thread class of the sampled thread) with a value each. This module
//! knows nothing of eBPF, recordings or rules: everything else depends on it,
//! it depends on nothing of the crate.
//!
//! - [`folded`]: Brendan Gregg's folded-stack text (`a;b;c 42`), what
//!   flamegraph.pl, inferno and speedscope read.
//! - [`pprof`]: the pprof protobuf (`go tool pprof`, speedscope, Pyroscope).
//! - [`flame`]: self-contained, searchable SVG flame graphs (inferno).
//! - [`diff`]: two profiles compared (stacks grown or shrunk, the
//!   differential flame graph).
//! - [`table`]: how a recording stores stacks (each once, values by id),
//!   and the builder that sums them back into a profile.

pub mod diff;
pub mod flame;
pub mod folded;
pub mod pprof;
pub mod table;

use serde::{Deserialize, Serialize};

/// One frame of a stack.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Frame {
    /// Function name, demangled; `0x…` (the address, or the offset in its
    /// object) when no symbol covers it.
    pub function: String,
    /// The object's file name (`mongod`, `libc.so.6`), `[kernel]` for kernel
    /// frames, `[unknown]` when no mapped object holds the address.
    pub object: String,
}

/// The object name of kernel frames.
pub const KERNEL_OBJECT: &str = "[kernel]";

impl Frame {
    pub fn new(function: impl Into<String>, object: impl Into<String>) -> Frame {
        Frame {
            function: function.into(),
            object: object.into(),
        }
    }

    pub fn kernel(&self) -> bool {
        self.object == KERNEL_OBJECT
    }
}

/// What a profile's values measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProfileKind {
    /// On-CPU samples: each value is a count of samples taken at `freq_hz`
    /// per CPU (one sample stands for 1/freq_hz seconds of CPU time).
    OnCpu,
    /// Off-CPU: each value is nanoseconds spent blocked.
    OffCpu,
}

/// One distinct stack with its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileStack {
    /// Thread class of the sampled threads (`conn`, `WTCheckpointThr`, …;
    /// `threads::thread_class`).
    pub class: String,
    /// Frames, root first (the thread's entry point) to leaf (where the CPU
    /// was, or where the thread blocked). Kernel frames come after user ones.
    pub frames: Vec<Frame>,
    /// The unwinder stopped before the thread's entry point (frame-pointer
    /// chain broken by code built without frame pointers, or the depth
    /// limit): the root frames are missing, the ones shown are right.
    pub truncated: bool,
    /// Off-CPU: whether the waits began inside a checkpoint of the target
    /// (`None` on CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_checkpoint: Option<bool>,
    /// Samples ([`ProfileKind::OnCpu`]) or nanoseconds ([`ProfileKind::OffCpu`]).
    pub value: u64,
}

/// Stacks of one kind, with their values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub kind: ProfileKind,
    /// Sampling frequency per CPU, for [`ProfileKind::OnCpu`] (0 otherwise).
    pub freq_hz: u64,
    /// Length of the recording the stacks were taken over, in nanoseconds.
    pub duration_ns: u64,
    pub stacks: Vec<ProfileStack>,
}

impl Profile {
    /// Sum of all values.
    pub fn total(&self) -> u64 {
        self.stacks.iter().map(|s| s.value).sum()
    }

    /// Thread classes, most value first (ties by name).
    pub fn classes(&self) -> Vec<(String, u64)> {
        let mut by: std::collections::BTreeMap<&str, u64> = Default::default();
        for s in &self.stacks {
            *by.entry(&s.class).or_default() += s.value;
        }
        let mut v: Vec<(String, u64)> = by.into_iter().map(|(c, n)| (c.to_owned(), n)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    /// The stacks of one class.
    pub fn of_class<'a>(&'a self, class: &'a str) -> impl Iterator<Item = &'a ProfileStack> + 'a {
        self.stacks.iter().filter(move |s| s.class == class)
    }
}

/// A stack for tests: (function, object) pairs, root first.
#[cfg(test)]
pub(crate) fn test_stack(
    class: &str,
    frames: &[(&str, &str)],
    truncated: bool,
    value: u64,
) -> ProfileStack {
    ProfileStack {
        class: class.to_owned(),
        frames: frames.iter().map(|(f, o)| Frame::new(*f, *o)).collect(),
        truncated,
        in_checkpoint: None,
        value,
    }
}

/// A profile for tests: 10 s of `kind` (on CPU at 99 Hz).
#[cfg(test)]
pub(crate) fn test_profile(kind: ProfileKind, stacks: Vec<ProfileStack>) -> Profile {
    Profile {
        kind,
        freq_hz: match kind {
            ProfileKind::OnCpu => 99,
            ProfileKind::OffCpu => 0,
        },
        duration_ns: 10_000_000_000,
        stacks,
    }
}
