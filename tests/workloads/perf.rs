//! Workload for the perf family. After a line on stdin, one thread alternates
//! for --ms of its own CPU time (default 2000) between
//! - a malloc phase of --malloc-ms (default 30): glibc malloc/free of varied
//!   sizes (1040..5135 bytes, past the tcache: `_int_malloc` / `_int_free`
//!   every time) through a ring of 64 live blocks, and
//! - an arithmetic phase of --arith-ms (default 70): integer mixing only.
//!
//! Phases are timed on CLOCK_THREAD_CPUTIME_ID, in batches, so the split is
//! the workload's own measurement. The malloc loop also does a little work
//! outside malloc/free (size choice, ring slot); to bound it, the same loop is
//! run first with two trivial non-inlined functions in place of malloc and
//! free, and its cost per iteration reported (`loop_overhead_ns_per_iter`).
//!
//! Prints one JSON line: {"pid", "cpu_ns" (process CPU time over the run),
//! "thread_ns", "malloc_ns", "arith_ns", "malloc_iters",
//! "loop_overhead_ns_per_iter"}, then waits for stdin to close.
use std::{hint::black_box, io::BufRead};

const RING: usize = 64;
const BATCH: u64 = 256;
/// Above glibc's largest tcache size (1032 bytes): every call goes through
/// `_int_malloc` / `_int_free` (bins, splitting, coalescing), so the time in
/// the allocator dwarfs the loop's own.
const MIN_SIZE: usize = 1040;

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn cpu_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to write into.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn thread_ns() -> u64 {
    cpu_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

struct Ring {
    slots: [*mut libc::c_void; RING],
    rng: u64,
    i: usize,
}

impl Ring {
    fn new() -> Self {
        Ring {
            slots: [std::ptr::null_mut(); RING],
            rng: 0x9e37_79b9_7f4a_7c15,
            i: 0,
        }
    }

    /// One iteration: free the block in the next slot, allocate a new one.
    /// Plain operators only, so that even an unoptimized build makes no
    /// calls here besides the two to the allocator.
    #[inline(always)]
    fn step(
        &mut self,
        alloc: unsafe extern "C" fn(usize) -> *mut libc::c_void,
        release: unsafe extern "C" fn(*mut libc::c_void),
    ) {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let size = MIN_SIZE + (self.rng as usize & 4095);
        let slot = self.i & (RING - 1);
        self.i += 1;
        // SAFETY: the slot holds null or a block from the same `alloc`.
        unsafe {
            release(self.slots[slot]);
            self.slots[slot] = alloc(size);
        }
    }

    fn clear(&mut self, release: unsafe extern "C" fn(*mut libc::c_void)) {
        for s in &mut self.slots {
            // SAFETY: null or a block from the matching allocator.
            unsafe { release(*s) };
            *s = std::ptr::null_mut();
        }
    }
}

static mut POOL: [u8; 8192] = [0; 8192];

#[inline(never)]
unsafe extern "C" fn fake_alloc(_size: usize) -> *mut libc::c_void {
    black_box((&raw mut POOL).cast())
}

#[inline(never)]
unsafe extern "C" fn fake_release(p: *mut libc::c_void) {
    black_box(p);
}

/// Nanoseconds per iteration of the malloc loop without malloc and free.
fn loop_overhead() -> f64 {
    let mut ring = Ring::new();
    let iters = 2_000_000u64;
    let t0 = thread_ns();
    for _ in 0..iters {
        ring.step(fake_alloc, fake_release);
    }
    let ns = thread_ns() - t0;
    black_box(&ring.slots);
    ns as f64 / iters as f64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let total = arg(&args, "--ms", 2000) * 1_000_000;
    let malloc_phase = arg(&args, "--malloc-ms", 30) * 1_000_000;
    let arith_phase = arg(&args, "--arith-ms", 70) * 1_000_000;
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);

    let process0 = cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID);
    let start = thread_ns();
    let overhead = loop_overhead();
    let after_calibration = thread_ns();
    let mut ring = Ring::new();
    let (mut malloc_ns, mut arith_ns, mut malloc_iters) = (0u64, 0u64, 0u64);
    let mut acc = 1u64;
    let mut now = after_calibration;
    // The calibration counts as arithmetic: no allocator calls in it.
    arith_ns += after_calibration - start;
    while now - start < total {
        let phase_start = now;
        while now - phase_start < malloc_phase {
            for _ in 0..BATCH {
                ring.step(libc::malloc, libc::free);
            }
            malloc_iters += BATCH;
            let t = thread_ns();
            malloc_ns += t - now;
            now = t;
        }
        let phase_start = now;
        while now - phase_start < arith_phase {
            for i in 0..20_000u64 {
                acc = black_box(acc.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i));
            }
            let t = thread_ns();
            arith_ns += t - now;
            now = t;
        }
    }
    ring.clear(libc::free);
    let thread_total = now - start;
    let process_ns = cpu_ns(libc::CLOCK_PROCESS_CPUTIME_ID) - process0;
    black_box(acc);
    println!(
        "{}",
        serde_json::json!({
            "pid": std::process::id(), "cpu_ns": process_ns, "thread_ns": thread_total,
            "malloc_ns": malloc_ns, "arith_ns": arith_ns, "malloc_iters": malloc_iters,
            "loop_overhead_ns_per_iter": overhead,
        })
    );
    let mut sink = String::new();
    while std::io::stdin()
        .lock()
        .read_line(&mut sink)
        .map(|n| n > 0)
        .unwrap_or(false)
    {
        sink.clear();
    }
}
