//! Windows of the syscalls family: calls by syscall name (at most nine names, never
//! bounded) with counts, errors, time, bytes summed and the latency histogram
//! merged; threads by tid, bounded by blocked time (futex waits plus memory
//! syscalls) with an "others" thread; rseq calls are events, appended in arrival
//! order and never bounded (a few per thread start); drops summed.

use super::section::{SyscallCalls, SyscallDropsSlice, SyscallsSlice, ThreadSyscallSlice};
use crate::kit::merge::{Mergeable, Row, ThreadRow, add, add_each, keep_top, merge_rows};

impl Mergeable for SyscallsSlice {
    fn merge(&mut self, later: &Self) {
        merge_rows(&mut self.calls, &later.calls);
        merge_rows(&mut self.threads, &later.threads);
        self.rseq.extend(later.rseq.iter().cloned());
        self.drops.merge(&later.drops);
    }

    fn bound(&mut self, top_n: usize) {
        keep_top(&mut self.threads, top_n);
    }
}

impl Mergeable for SyscallDropsSlice {
    fn merge(&mut self, later: &Self) {
        add(&mut self.inflight_full, later.inflight_full);
        add(&mut self.thread_map_full, later.thread_map_full);
        add(&mut self.rseq_ring_full, later.rseq_ring_full);
    }
}

impl Row for SyscallCalls {
    type Key = String;

    fn key(&self) -> String {
        self.name.clone()
    }

    fn add(&mut self, later: &Self) {
        add(&mut self.count, later.count);
        add(&mut self.errors, later.errors);
        add(&mut self.time_ns, later.time_ns);
        add(&mut self.bytes, later.bytes);
        add_each(&mut self.hist_log2_ns, &later.hist_log2_ns);
    }
}

/// No name: the syscalls family records none.
impl ThreadRow for ThreadSyscallSlice {
    fn identity(&self) -> (u32, u32, Option<&str>) {
        (self.tid, self.tgid, None)
    }

    fn identity_mut(&mut self) -> (&mut u32, &mut u32, Option<&mut String>) {
        (&mut self.tid, &mut self.tgid, None)
    }

    /// Every field is a count or a time within the slice: summed (a wait
    /// split over slices adds up to its whole time).
    fn add_counts(&mut self, o: &Self) {
        add(&mut self.futex_waits, o.futex_waits);
        add(&mut self.futex_wait_ns, o.futex_wait_ns);
        add(&mut self.mem_calls, o.mem_calls);
        add(&mut self.mem_ns, o.mem_ns);
        add(
            &mut self.futex_waits_in_checkpoint,
            o.futex_waits_in_checkpoint,
        );
        add(
            &mut self.futex_wait_ns_in_checkpoint,
            o.futex_wait_ns_in_checkpoint,
        );
    }

    /// Blocked time: futex waits plus memory syscalls.
    fn thread_cost(&self) -> u64 {
        self.futex_wait_ns.saturating_add(self.mem_ns)
    }
}
