//! Random syscalls sections for the windows' property tests (test builds
//! only; `recording/window/random.rs` draws a slice of every family), with
//! keys drawn from small sets so that rows of different slices meet.

use super::section::{RseqCall, SyscallCalls, SyscallDropsSlice, SyscallsSlice, ThreadSyscallSlice};
use crate::kit::random::Rng;

/// A random section.
pub fn random(r: &mut Rng, _start_ms: u64) -> SyscallsSlice {
    let names = ["futex_wait", "mmap", "madvise"];
    SyscallsSlice {
        calls: r
            .ids(3, 3)
            .into_iter()
            .map(|i| SyscallCalls {
                name: names[i as usize - 1].into(),
                count: r.below(100),
                errors: r.below(5),
                time_ns: r.below(1_000_000),
                bytes: r.below(1 << 20),
                hist_log2_ns: r.vec(20, 20),
            })
            .collect(),
        threads: r
            .ids(6, 9)
            .into_iter()
            .map(|tid| {
                let (waits, ns) = (r.below(20), r.below(1_000_000));
                ThreadSyscallSlice {
                    tid,
                    tgid: 100,
                    futex_waits: waits,
                    futex_wait_ns: ns,
                    mem_calls: r.below(20),
                    mem_ns: r.below(100_000),
                    futex_waits_in_checkpoint: r.below(waits + 1),
                    futex_wait_ns_in_checkpoint: r.below(ns + 1),
                }
            })
            .collect(),
        rseq: (0..r.below(2))
            .map(|_| RseqCall {
                tid: 1 + r.below(9) as u32,
                ret: if r.chance(50) { 0 } else { -22 },
                ..RseqCall::default()
            })
            .collect(),
        drops: SyscallDropsSlice {
            inflight_full: r.below(3),
            thread_map_full: r.below(3),
            rseq_ring_full: r.below(3),
        },
    }
}
