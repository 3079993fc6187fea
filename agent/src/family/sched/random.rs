//! Random scheduler sections for the windows' property tests (test builds
//! only; `recording/window/random.rs` draws a slice of every family), with
//! keys drawn from small sets so that rows of different slices meet.

use super::section::{SchedDrops, SchedSlice, ThreadSlice};
use crate::kit::random::Rng;

/// A random section.
pub fn random(r: &mut Rng, _start_ms: u64) -> SchedSlice {
    SchedSlice {
        switches_total: r.below(5000),
        switches_per_cpu: r.vec(4, 1000),
        voluntary: r.below(500),
        involuntary: r.below(500),
        preempted: r.below(500),
        wakeups: r.below(500),
        wakeup_preemptions: r.below(100),
        migrations: r.below(100),
        runq_hist_log2_ns: r.vec(24, 50),
        threads: r
            .ids(6, 9)
            .into_iter()
            .map(|tid| ThreadSlice {
                tid,
                tgid: if tid < 7 { 100 } else { 200 },
                comm: format!("conn{tid}"),
                voluntary: r.below(50),
                involuntary: r.below(50),
                preempted: r.below(50),
                runq_delay_ns: r.below(1_000_000),
                runq_delays: r.below(50),
                oncpu_ns: r.below(1_000_000),
                wakeup_preempted: r.below(9),
                migrations: r.below(9),
                wakeup_preempting: r.below(9),
            })
            .collect(),
        drops: SchedDrops {
            thread_map_full: r.below(3),
            wakeup_map_full: r.below(3),
            read_failed: r.below(3),
        },
    }
}
