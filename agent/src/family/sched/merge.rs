//! Windows of the scheduler family: every counter is a count or a time over
//! the slice, so all are summed; the run-queue histogram and the per-CPU
//! switches bucket by bucket; threads by tid, bounded by CPU demand (time on
//! a CPU plus time waiting for one) with an "others" thread.

use super::section::{SchedDrops, SchedSlice, ThreadSlice};
use crate::kit::merge::{Mergeable, ThreadRow, add, add_each, keep_top, merge_rows};

impl Mergeable for SchedSlice {
    fn merge(&mut self, later: &Self) {
        add(&mut self.switches_total, later.switches_total);
        add_each(&mut self.switches_per_cpu, &later.switches_per_cpu);
        add(&mut self.voluntary, later.voluntary);
        add(&mut self.involuntary, later.involuntary);
        add(&mut self.preempted, later.preempted);
        add(&mut self.wakeups, later.wakeups);
        add(&mut self.wakeup_preemptions, later.wakeup_preemptions);
        add(&mut self.migrations, later.migrations);
        add_each(&mut self.runq_hist_log2_ns, &later.runq_hist_log2_ns);
        merge_rows(&mut self.threads, &later.threads);
        self.drops.merge(&later.drops);
    }

    fn bound(&mut self, top_n: usize) {
        keep_top(&mut self.threads, top_n);
    }
}

impl Mergeable for SchedDrops {
    fn merge(&mut self, later: &Self) {
        add(&mut self.thread_map_full, later.thread_map_full);
        add(&mut self.wakeup_map_full, later.wakeup_map_full);
        add(&mut self.read_failed, later.read_failed);
    }
}

impl ThreadRow for ThreadSlice {
    fn identity(&self) -> (u32, u32, Option<&str>) {
        (self.tid, self.tgid, Some(&self.comm))
    }

    fn identity_mut(&mut self) -> (&mut u32, &mut u32, Option<&mut String>) {
        (&mut self.tid, &mut self.tgid, Some(&mut self.comm))
    }

    fn add_counts(&mut self, o: &Self) {
        add(&mut self.voluntary, o.voluntary);
        add(&mut self.involuntary, o.involuntary);
        add(&mut self.preempted, o.preempted);
        add(&mut self.runq_delay_ns, o.runq_delay_ns);
        add(&mut self.runq_delays, o.runq_delays);
        add(&mut self.oncpu_ns, o.oncpu_ns);
        add(&mut self.wakeup_preempted, o.wakeup_preempted);
        add(&mut self.migrations, o.migrations);
        add(&mut self.wakeup_preempting, o.wakeup_preempting);
    }

    /// CPU demand: time on a CPU plus time waiting for one.
    fn thread_cost(&self) -> u64 {
        self.oncpu_ns.saturating_add(self.runq_delay_ns)
    }
}
