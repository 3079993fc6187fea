//! The scheduler family's section of the example recording
//! (`rules::facts::example`): made up, every number non-zero, so that every
//! fact the family derives is present when rules are checked at load.

use super::section::{SchedDrops, SchedSlice, ThreadSlice};

/// Scheduler figures of the example slice: two threads of the target.
pub fn example() -> SchedSlice {
    let thread = |tid: u32, comm: &str| ThreadSlice {
        tid,
        tgid: 100,
        comm: comm.into(),
        voluntary: 10,
        involuntary: 20,
        preempted: 15,
        runq_delay_ns: 3_000_000,
        runq_delays: 25,
        oncpu_ns: 400_000_000,
        wakeup_preempted: 0,
        migrations: 0,
        wakeup_preempting: 0,
    };
    SchedSlice {
        switches_total: 100,
        switches_per_cpu: vec![50, 50],
        voluntary: 20,
        involuntary: 40,
        preempted: 30,
        wakeups: 25,
        wakeup_preemptions: 0,
        migrations: 0,
        runq_hist_log2_ns: vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 20, 20],
        threads: vec![thread(101, "conn1"), thread(102, "WTEvict-1")],
        drops: SchedDrops {
            thread_map_full: 1,
            wakeup_map_full: 1,
            read_failed: 1,
        },
    }
}
