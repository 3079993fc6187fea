//! Allocator family: latency of the target's allocation and free entry
//! points (malloc, free, operator new/delete, tc_*, je_*), measured with one
//! uprobe + uretprobe pair attached to every entry point only during short
//! sampled windows (a pair costs microseconds per call; a fast-path malloc
//! costs tens of nanoseconds, so probing all the time would slow the target
//! many times over).
//!
//! Each attach point carries a cookie ([`cookie`]) naming the function (its
//! index in user space's list) and where its size argument is, so one program
//! pair serves every function. Per thread, entries are pushed on a small stack
//! (operator new → malloc nests); a return pops its frame and adds the
//! latency to a log2 histogram per (function, size class). User space opens
//! and closes the window with [`AllocControl::open`]; entries are counted for
//! the overhead figure whether the window is open or not.

/// Programs (one pair, attached to every entry point): the uprobe_multi
/// pair (one link for all entry points: attached and detached in one step),
/// and the same code for one perf event per entry point, the fallback on
/// kernels without uprobe_multi (each detach there waits for the kernel's
/// uprobe synchronisation, about 100 ms, while the target still pays).
pub const PROG_ENTER_MULTI: &str = "mdiag_alloc_enter_multi";
pub const PROG_EXIT_MULTI: &str = "mdiag_alloc_exit_multi";
pub const PROG_ENTER: &str = "mdiag_alloc_enter";
pub const PROG_EXIT: &str = "mdiag_alloc_exit";

pub const MAP_CONTROL: &str = "ALLOC_CONTROL";
pub const MAP_STACKS: &str = "ALLOC_STACKS";
pub const MAP_HIST: &str = "ALLOC_HIST";
pub const MAP_COUNTERS: &str = "ALLOC_COUNTERS";

/// Functions with their own histograms; the last id is the calibration function.
pub const MAX_FUNCS: u32 = 32;
/// Function id of mdiag's own do-nothing calibration function.
pub const CALIBRATION_FUNC: u32 = MAX_FUNCS - 1;
/// Size classes: 0 = no size argument; `k` ≥ 1 holds sizes in
/// `[2^(k-1), 2^k)` (class 1 also holds 0), the last class everything above.
pub const SIZE_CLASSES: u32 = 24;
/// Log2 latency buckets (ns); the last also holds everything above 2^31 ns.
pub const LAT_BUCKETS: usize = 32;
/// Nested allocator calls remembered per thread (operator new → malloc is 2).
pub const MAX_DEPTH: u32 = 4;
/// Threads with an entry stack at once (LRU: exited threads fall out).
pub const MAX_THREADS: u32 = 16384;

/// Where an entry point's size argument is (bits 8..16 of the cookie).
pub const SIZE_NONE: u64 = 0;
pub const SIZE_ARG0: u64 = 1;
pub const SIZE_ARG1: u64 = 2;
pub const SIZE_ARG2: u64 = 3;
/// `calloc(n, size)`: `arg0 * arg1`.
pub const SIZE_ARG0_TIMES_ARG1: u64 = 4;

/// The attach cookie of function `func` whose size is found by `size_mode`.
pub const fn cookie(func: u32, size_mode: u64) -> u64 {
    (func as u64 & 0xff) | ((size_mode & 0xff) << 8)
}

/// Function id of a cookie.
pub const fn cookie_func(cookie: u64) -> u32 {
    (cookie & 0xff) as u32
}

/// Size mode of a cookie.
pub const fn cookie_size_mode(cookie: u64) -> u64 {
    (cookie >> 8) & 0xff
}

/// Size class of an allocation size (never 0: class 0 means "no size").
#[inline(always)]
pub fn size_class(size: u64) -> u32 {
    let c = crate::hist::log2_bucket(size) as u32 + 1;
    if c >= SIZE_CLASSES {
        SIZE_CLASSES - 1
    } else {
        c
    }
}

/// Index into [`MAP_HIST`] of (function, size class).
pub const fn hist_index(func: u32, class: u32) -> u32 {
    func * SIZE_CLASSES + class
}

/// Set by user space (index 0 of [`MAP_CONTROL`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocControl {
    /// Only this process's calls count (the target, or mdiag itself while
    /// calibrating); 0 = nobody.
    pub tgid: u32,
    /// 1 while a window is open: entries are timed only then.
    pub open: u32,
}

/// One remembered entry.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocFrame {
    /// `bpf_ktime_get_ns` at entry.
    pub start_ns: u64,
    pub func: u32,
    pub class: u32,
}

/// A thread's entries, innermost last.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocStack {
    /// Calls entered and not returned; may exceed [`MAX_DEPTH`] (those
    /// frames are not kept).
    pub depth: u32,
    pub _pad: u32,
    pub frames: [AllocFrame; MAX_DEPTH as usize],
}

/// Latency histogram of one (function, size class), per CPU, cumulative.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AllocHist {
    pub count: u64,
    pub sum_ns: u64,
    pub buckets: [u64; LAT_BUCKETS],
}

impl Default for AllocHist {
    fn default() -> Self {
        Self {
            count: 0,
            sum_ns: 0,
            buckets: [0; LAT_BUCKETS],
        }
    }
}

/// Per-CPU counters, cumulative.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocCounters {
    /// Entry-probe hits of the observed process, window open or not (each
    /// costs a probe pair: the overhead figure).
    pub entries: u64,
    /// Returns timed into a histogram.
    pub timed: u64,
    /// Returns without a remembered entry (entered before the window).
    pub missing_entry: u64,
    /// Returns whose function differs from the remembered innermost entry
    /// (the thread's stack is reset).
    pub mismatched: u64,
    /// Entries deeper than [`MAX_DEPTH`] (not timed).
    pub too_deep: u64,
    /// Entries not remembered: the per-thread map refused the insert.
    pub stack_full: u64,
}

const _: () = assert!(core::mem::size_of::<AllocControl>() == 8);
const _: () = assert!(core::mem::size_of::<AllocFrame>() == 16);
const _: () = assert!(core::mem::size_of::<AllocStack>() == 8 + 16 * MAX_DEPTH as usize);
const _: () = assert!(core::mem::size_of::<AllocHist>() == 16 + 8 * LAT_BUCKETS);
const _: () = assert!(core::mem::size_of::<AllocCounters>() == 48);
const _: () = assert!(MAX_FUNCS <= 256 && SIZE_CLASSES <= 64);

#[cfg(feature = "user")]
mod user {
    // SAFETY: #[repr(C)], integer fields only, no padding holes, so
    // every bit pattern is valid.
    unsafe impl aya::Pod for super::AllocControl {}
    // SAFETY: as said above: #[repr(C)], integers and arrays, explicit padding.
    unsafe impl aya::Pod for super::AllocStack {}
    // SAFETY: as said above: #[repr(C)], integers and arrays, explicit padding.
    unsafe impl aya::Pod for super::AllocHist {}
    // SAFETY: as said above: #[repr(C)], integers and arrays, explicit padding.
    unsafe impl aya::Pod for super::AllocCounters {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_round_trip() {
        for func in [0, 1, 17, CALIBRATION_FUNC] {
            for mode in [
                SIZE_NONE,
                SIZE_ARG0,
                SIZE_ARG1,
                SIZE_ARG2,
                SIZE_ARG0_TIMES_ARG1,
            ] {
                let c = cookie(func, mode);
                assert_eq!((cookie_func(c), cookie_size_mode(c)), (func, mode));
            }
        }
    }

    #[test]
    fn size_classes() {
        assert_eq!(size_class(0), 1);
        assert_eq!(size_class(1), 1);
        assert_eq!(size_class(2), 2);
        assert_eq!(size_class(3), 2);
        assert_eq!(size_class(64), 7);
        assert_eq!(size_class(4096), 13);
        assert_eq!(size_class(u64::MAX), SIZE_CLASSES - 1);
        assert!(hist_index(CALIBRATION_FUNC, SIZE_CLASSES - 1) < MAX_FUNCS * SIZE_CLASSES);
    }

    #[test]
    fn stack_round_trips_through_bytes() {
        let mut s = AllocStack {
            depth: 2,
            ..Default::default()
        };
        s.frames[1] = AllocFrame {
            start_ns: 99,
            func: 3,
            class: 7,
        };
        // SAFETY: plain data without padding holes.
        let bytes: [u8; 72] = unsafe { core::mem::transmute(s) };
        // SAFETY: AllocStack is plain integer data, valid for any bit pattern.
        assert_eq!(unsafe { crate::read_plain::<AllocStack>(&bytes) }, Some(s));
        assert_eq!(core::mem::offset_of!(AllocStack, frames), 8);
        assert_eq!(core::mem::offset_of!(AllocHist, buckets), 16);
    }
}
