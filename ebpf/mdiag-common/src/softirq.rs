//! Softirq and hard-IRQ CPU time per CPU (kernel side: BTF tracepoints
//! `softirq_entry`/`softirq_exit`, `irq_handler_entry`/`irq_handler_exit`).
//!
//! Counts are taken at entry, like the kernel's own `/proc/softirqs`, and
//! time at exit. Everything is per CPU, so no program ever contends.

/// Number of softirq vectors (`NR_SOFTIRQS`).
pub const NR_SOFTIRQS: usize = 10;
/// Vector names in kernel order, as in `/proc/softirqs`.
pub const VECTOR_NAMES: [&str; NR_SOFTIRQS] = [
    "HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU",
];

pub const PROG_SOFTIRQ_ENTRY: &str = "mdiag_softirq_entry";
pub const PROG_SOFTIRQ_EXIT: &str = "mdiag_softirq_exit";
pub const PROG_HARDIRQ_ENTRY: &str = "mdiag_hardirq_entry";
pub const PROG_HARDIRQ_EXIT: &str = "mdiag_hardirq_exit";
pub const TRACEPOINTS: [(&str, &str); 4] = [
    (PROG_SOFTIRQ_ENTRY, "softirq_entry"),
    (PROG_SOFTIRQ_EXIT, "softirq_exit"),
    (PROG_HARDIRQ_ENTRY, "irq_handler_entry"),
    (PROG_HARDIRQ_EXIT, "irq_handler_exit"),
];

pub const MAP_CPU: &str = "SOFTIRQ_CPU";
pub const MAP_HARDIRQ: &str = "HARDIRQ_STATS";
/// Distinct hard IRQ numbers tracked (per CPU). More are counted as drops.
pub const MAX_IRQS: u32 = 1024;

/// Per-CPU softirq counters (a `PerCpuArray` of one element).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SoftirqCpu {
    /// Entries per vector (what /proc/softirqs counts).
    pub count: [u64; NR_SOFTIRQS],
    /// Time spent in each vector's handlers, nanoseconds.
    pub time_ns: [u64; NR_SOFTIRQS],
    /// Bookkeeping: entry time of the running softirq / hard IRQ (0 = none).
    pub softirq_entry_ts: u64,
    pub hardirq_entry_ts: u64,
    /// Drops: an exit without a matching entry (e.g. the first event after
    /// attach), so its time is unknown.
    pub drop_unmatched_exit: u64,
    /// Drops: an IRQ number could not be added to the full IRQ map.
    pub drop_irq_map_full: u64,
    /// Drops: a vector number outside 0..NR_SOFTIRQS.
    pub drop_bad_vector: u64,
}

/// Per-CPU counters of one hard IRQ number (a `PerCpuHashMap` keyed by irq).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IrqStat {
    pub count: u64,
    pub time_ns: u64,
}

const _: () = assert!(core::mem::size_of::<SoftirqCpu>() == 8 * (2 * NR_SOFTIRQS + 5));
const _: () = assert!(core::mem::size_of::<IrqStat>() == 16);

#[cfg(feature = "user")]
mod user {
    // SAFETY: #[repr(C)], only u64 fields and arrays of u64: no padding, every
    // bit pattern valid.
    unsafe impl aya::Pod for super::SoftirqCpu {}
    // SAFETY: as above.
    unsafe impl aya::Pod for super::IrqStat {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_round_trip() {
        assert_eq!(
            core::mem::size_of::<SoftirqCpu>(),
            8 * (2 * NR_SOFTIRQS + 5)
        );
        assert_eq!(core::mem::offset_of!(SoftirqCpu, time_ns), 8 * NR_SOFTIRQS);
        let mut c = SoftirqCpu::default();
        c.count[3] = 7;
        c.time_ns[3] = 1_000;
        c.drop_bad_vector = 1;
        // SAFETY: plain data, no padding.
        let bytes: [u8; core::mem::size_of::<SoftirqCpu>()] = unsafe { core::mem::transmute(c) };
        // SAFETY: any byte pattern is a valid SoftirqCpu.
        let back: SoftirqCpu = unsafe { core::mem::transmute(bytes) };
        assert_eq!(back, c);
        assert_eq!(VECTOR_NAMES[3], "NET_RX");
    }
}
