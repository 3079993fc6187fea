//! Start-up calibration of the allocator probe pair: the same uprobe +
//! uretprobe programs are attached to [`mdiag_alloc_calibration_noop`], a
//! function of mdiag itself that does nothing, which is then called many
//! times without and with the probes. The difference per call is what a probe
//! pair costs the target per allocator call (for the overhead figure); the
//! latency the probes measure for a function that does nothing is the part of
//! that cost that shows inside every measured latency (to correct
//! percentiles).

use std::{num::NonZeroU32, path::PathBuf, sync::OnceLock, time::Duration};

use aya::{
    Ebpf,
    programs::uprobe::{UProbeAttachLocation, UProbeAttachPoint},
};
use mdiag_common::alloc::{CALIBRATION_FUNC, SIZE_ARG0, SIZE_CLASSES, cookie, hist_index};

use super::super::section::AllocCalibration;
use super::stats::{hist_between, inside_bias_ns, median, pair_cost_ns, sum_hists, trimmed};
use super::{AllocError, AllocMaps, attach_pair, detach_pair};

/// Calls per timed run, and runs per side (the median run counts).
pub const CALLS: u64 = 10_000;
pub const RUNS: usize = 5;

/// The do-nothing function probed during calibration: returns its argument.
/// Exported unmangled so that it exists once, at a stable address.
///
/// Written in assembly so that its first instruction, where the uprobe sits,
/// is fixed and not the compiler's choice. What a probe costs depends on that
/// instruction: the kernel emulates a few (on x86_64 `push reg`, `nop`,
/// relative jumps and calls) and single-steps every other one out of line,
/// which costs several times more on some hosts (here, a Firecracker VM:
/// 1.6 µs against 10 µs per pair). A compiler-chosen prologue flipped between
/// `push` and `sub` with the build settings, and the calibrated cost with it.
/// The first instruction here is one that is single-stepped, as most allocator
/// entry points begin (glibc's `free`, gperftools' `tc_malloc` and `tc_free`):
/// the calibrated cost is that of the costlier class, an upper bound where a
/// probed function begins with an emulated instruction (glibc's `malloc`).
#[cfg(target_arch = "x86_64")]
#[unsafe(no_mangle)]
// SAFETY: a naked function of two instructions that follows the C calling
// convention (argument in rdi, result in rax, no stack, no other register);
// the `mdiag_` prefix keeps the unmangled name unique in the process.
#[unsafe(naked)]
pub extern "C" fn mdiag_alloc_calibration_noop(size: u64) -> u64 {
    core::arch::naked_asm!("mov rax, rdi", "ret")
}

/// See the x86_64 function: `mov x0, x0` (an `orr`) is single-stepped.
#[cfg(target_arch = "aarch64")]
#[unsafe(no_mangle)]
// SAFETY: a naked function that returns its argument in x0 and touches no
// other register or memory; the `mdiag_` prefix keeps the name unique.
#[unsafe(naked)]
pub extern "C" fn mdiag_alloc_calibration_noop(size: u64) -> u64 {
    core::arch::naked_asm!("mov x0, x0", "ret")
}

/// See the x86_64 function: s390x single-steps every probed instruction.
#[cfg(target_arch = "s390x")]
#[unsafe(no_mangle)]
// SAFETY: a naked function that returns its argument in r2 and touches no
// other register or memory; the `mdiag_` prefix keeps the name unique.
#[unsafe(naked)]
pub extern "C" fn mdiag_alloc_calibration_noop(size: u64) -> u64 {
    core::arch::naked_asm!("lgr %r2, %r2", "br %r14")
}

/// Other architectures (not built by the project): the compiler's prologue.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "s390x")))]
// SAFETY: the `mdiag_` prefix keeps the unmangled name unique in the process.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn mdiag_alloc_calibration_noop(size: u64) -> u64 {
    std::hint::black_box(size)
}

/// CPU time of `CALLS` calls of the do-nothing function, ns. Thread CPU
/// time, not wall time: the probes' work is charged to the calling thread
/// (as system time), while time spent waiting for a CPU on a busy host is
/// not a cost of the probes.
fn timed_run() -> u64 {
    let f = std::hint::black_box(mdiag_alloc_calibration_noop as extern "C" fn(u64) -> u64);
    let start = thread_cpu_ns();
    for i in 0..CALLS {
        std::hint::black_box(f(i));
    }
    thread_cpu_ns().saturating_sub(start)
}

/// CLOCK_THREAD_CPUTIME_ID now, ns.
fn thread_cpu_ns() -> u64 {
    crate::kit::probe::clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Where the do-nothing function is: (path to attach to, file offset).
fn noop_location() -> Result<(PathBuf, u64), AllocError> {
    let pid = std::process::id();
    let addr = mdiag_alloc_calibration_noop as extern "C" fn(u64) -> u64 as usize as u64;
    let maps = crate::symbols::Maps::of(pid)
        .map_err(|e| AllocError::Calibration(format!("own memory map: {e}")))?;
    for object in &maps.objects {
        if let Some(offset) = object
            .mappings
            .iter()
            .find_map(|m| m.file_offset_of_address(addr))
        {
            // /proc/PID/exe names the very file even if it was replaced on disk.
            let path = if object.is_main {
                PathBuf::from(format!("/proc/{pid}/exe"))
            } else {
                object.path.clone()
            };
            return Ok((path, offset));
        }
    }
    Err(AllocError::Calibration(format!(
        "the calibration function ({addr:#x}) is in no mapped file"
    )))
}

/// This process's first calibration, reused by every later attach (the
/// agent attaching a restarted mongod): what a probe pair costs is the
/// host's (its CPU, its kernel), not the target's, and measuring it again
/// costs 50,000 probed calls (half a second of CPU, over a second on a busy
/// host) in the middle of the re-attach, while the target goes unwatched.
static FIRST: OnceLock<AllocCalibration> = OnceLock::new();

/// The calibration: this process's first, or a new one when there is none
/// yet; `true` when it was reused.
pub(super) fn calibrated(
    ebpf: &mut Ebpf,
    maps: &mut AllocMaps,
) -> Result<(AllocCalibration, bool), AllocError> {
    if let Some(c) = FIRST.get() {
        return Ok((c.clone(), true));
    }
    let c = calibrate(ebpf, maps)?;
    Ok((FIRST.get_or_init(|| c).clone(), false))
}

/// Runs the calibration in this process. The control word is left at
/// "nobody"; the caller sets the target afterwards.
pub(super) fn calibrate(
    ebpf: &mut Ebpf,
    maps: &mut AllocMaps,
) -> Result<AllocCalibration, AllocError> {
    let pid = std::process::id();
    let own = NonZeroU32::new(pid).ok_or_else(|| AllocError::Calibration("pid 0".into()))?;
    let (path, offset) = noop_location()?;
    let point = [UProbeAttachPoint {
        location: UProbeAttachLocation::AbsoluteOffset(offset),
        cookie: Some(cookie(CALIBRATION_FUNC, SIZE_ARG0)),
    }];
    // Warm up (page in, caches), then the bare runs.
    timed_run();
    let bare: Vec<u64> = (0..RUNS).map(|_| timed_run()).collect();
    let before = calibration_hist(maps)?;
    maps.set_control(pid, 1)?;
    let links = attach_pair(ebpf, &point, &path, own)?;
    let probed: Vec<u64> = (0..RUNS).map(|_| timed_run()).collect();
    maps.set_control(0, 0)?;
    detach_pair(ebpf, links);
    // Let in-flight program runs finish before reading (they are on this
    // thread, so there are none; this only guards against a slow CPU).
    std::thread::sleep(Duration::from_millis(1));
    let after = calibration_hist(maps)?;
    maps.clear_stacks();
    let hist = hist_between(&before, &after);
    if hist.count == 0 {
        return Err(AllocError::Calibration(
            "the probes attached to the calibration function did not fire".into(),
        ));
    }
    let bare_ns = median(&bare).unwrap_or(0);
    let probed_ns = median(&probed).unwrap_or(0);
    Ok(AllocCalibration {
        calls: CALLS,
        bare_ns,
        probed_ns,
        pair_cost_ns: pair_cost_ns(bare_ns, probed_ns, CALLS),
        inside_ns: inside_bias_ns(&hist.buckets),
        buckets: trimmed(&hist.buckets),
    })
}

/// The calibration function's cumulative histogram over all size classes.
fn calibration_hist(maps: &AllocMaps) -> Result<mdiag_common::alloc::AllocHist, AllocError> {
    let mut all = Vec::new();
    for class in 0..SIZE_CLASSES {
        all.push(maps.read_hist(hist_index(CALIBRATION_FUNC, class))?);
    }
    Ok(sum_hists(&all))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calibration_function_returns_its_argument() {
        let f = std::hint::black_box(mdiag_alloc_calibration_noop as extern "C" fn(u64) -> u64);
        for v in [0, 1, 4096, u64::MAX] {
            assert_eq!(f(v), v);
        }
    }

    /// Its first instruction is the fixed one, whatever the build settings
    /// (the probe's cost depends on it; see the function).
    #[test]
    fn the_calibration_function_starts_with_a_single_stepped_instruction() {
        let addr = mdiag_alloc_calibration_noop as extern "C" fn(u64) -> u64 as usize;
        // SAFETY: the function's code is mapped readable (text) and at
        // least 4 bytes long on every architecture below.
        let first: [u8; 4] = unsafe { std::ptr::read(addr as *const [u8; 4]) };
        #[cfg(target_arch = "x86_64")]
        assert!(
            // mov rax, rdi: either encoding (89 /r or 8b /r).
            first[..3] == [0x48, 0x89, 0xf8] || first[..3] == [0x48, 0x8b, 0xc7],
            "{first:02x?}"
        );
        #[cfg(target_arch = "aarch64")]
        assert_eq!(u32::from_le_bytes(first), 0xaa00_03e0, "mov x0, x0");
        #[cfg(target_arch = "s390x")]
        assert_eq!(first, [0xb9, 0x04, 0x00, 0x22], "lgr %r2, %r2");
        let _ = first;
    }
}
