//! Recording types of the perf family: where the target's CPU time goes by
//! sampling, and the share of its allocator.
//!
//! The family's part of the recording format; `recording::model`
//! re-exports these types so `recording::model::X` still names them.

use serde::{Deserialize, Serialize};

use crate::kit::family::Section;
pub use crate::stacks::table::{StackCount, StackDef};

/// Perf family: CPU time by sampling (software cpu-clock at `freq_hz` on
/// every CPU), and the share of the target's samples in allocator code.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerfSlice {
    /// Samples per second and CPU (99).
    pub freq_hz: u64,
    /// Samples taken on all CPUs in this slice (every task, idle included).
    pub samples: u64,
    /// Of which the idle task.
    pub idle_samples: u64,
    /// Samples of observed tasks: the target's, or every non-idle task
    /// host-wide.
    pub observed_samples: u64,
    /// Samples of the target process (0 host-wide).
    pub target_samples: u64,
    /// Target samples taken in kernel mode (syscalls, page faults).
    pub target_kernel_samples: u64,
    /// Target samples in user code that no symbol covers (and not counted as
    /// allocator code), or outside every mapped object.
    pub unknown_samples: u64,
    /// The target's allocator, as the symbols module classified it.
    pub allocator: Option<crate::symbols::AllocatorKind>,
    /// Target samples in allocator code (see docs/recording-format.md).
    pub allocator_samples: u64,
    /// Of which in an allocator slow path.
    pub allocator_slow_path_samples: u64,
    /// Slow-path patterns that matched sampled code, most samples first.
    pub slow_paths: Vec<PerfSlowPath>,
    /// The target's most sampled functions (up to 20), most samples first.
    pub by_symbol: Vec<PerfSymbol>,
    /// Samples lost because the kernel map was full.
    pub drops: u64,
    /// Target stacks first seen in this slice: each is written once per
    /// recording, under an id later slices count by.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stack_defs: Vec<StackDef>,
    /// Target samples per stack id in this slice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stacks: Vec<StackCount>,
    /// Stacks (user or kernel) of observed samples that the kernel could not
    /// store (a hash bucket taken by another stack in the same slice, or an
    /// unwinding failure): those samples count under "[stack lost]".
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stack_lost: u64,
    /// Observed samples whose stack counter the kernel could not create
    /// (map full): counted in the totals, in no stack.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stack_drops: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerfSlowPath {
    /// The pattern's label, e.g. `int_free`, `central_free_list`.
    pub label: String,
    pub samples: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PerfSymbol {
    /// Object path; "[kernel]" for kernel-mode samples; `None` when no
    /// object maps the address.
    pub object: Option<String>,
    /// Function name; `None` when no symbol covers the address.
    pub symbol: Option<String>,
    pub samples: u64,
    /// Counted as allocator code.
    pub allocator: bool,
    /// The slow-path label it matched.
    pub slow_path: Option<String>,
}

impl Section for PerfSlice {
    fn drops_total(&self) -> u64 {
        self.drops + self.stack_drops
    }
}
