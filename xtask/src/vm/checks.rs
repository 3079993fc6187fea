//! The ground-truth checks of one kernel: numbers mdiag recorded in the guest
//! against what something else there knows.
//!
//! - switches: the host-wide recording's context switch rate against the
//!   guest kernel's own count (`/proc/stat` `ctxt`);
//! - perf: in the spawned recording, the target is a busybox shell spinning
//!   in user space for the whole recording, so it must be sampled at the
//!   sampling rate, mostly in user mode, and nearly all of its user-mode
//!   samples must land in its executable, `/bin/busybox`. This is what shows
//!   that the `perf` program reads the mode and the user instruction pointer
//!   right on each architecture (x86_64 `cs`/`rip`, aarch64 `pstate`/`pc`,
//!   s390x the PSW). Under TCG up to a tenth of its samples are in the
//!   kernel (interrupts, page faults), so the kernel's share is not held to
//!   much.
//!
//! Why: a family that attaches may still measure wrong.
use serde_json::Value;

use super::console::RunLog;

/// How far the recorded switch rate may be from `/proc/stat`'s.
pub(super) const SWITCH_TOLERANCE: f64 = 0.10;
/// The `perf` family's sampling rate per CPU (docs/ARCHITECTURE.md).
const PERF_HZ: f64 = 99.0;
/// The share of that rate the spinning target must get at least (it runs
/// on one CPU; the rest is slack for an emulator that is slow to deliver
/// timer interrupts).
const PERF_MIN_RATE: f64 = 0.5;
/// The share of the target's user-mode samples that must be in its
/// executable.
const PERF_MIN_IN_PROGRAM: f64 = 0.9;
/// The most of the target's samples that may be in kernel mode.
const PERF_MAX_KERNEL: f64 = 0.5;

/// The host-wide recording's switches against the guest's `/proc/stat`.
#[derive(Debug, PartialEq)]
pub(super) enum SwitchCheck {
    Skipped(String),
    Done {
        /// Switches in the recording: `switches_per_s × duration_s`.
        recorded: f64,
        /// Its `duration_s`.
        secs: f64,
        /// How much `ctxt` grew in the guest's window, and how long that was.
        ctxt: u64,
        window: f64,
        /// |recorded − expected| / expected, where expected is `ctxt` scaled
        /// from the guest's window to the recording's duration: the rates
        /// are compared (the guest's window starts as the recording's does
        /// but ends half a second before it, see `initramfs::INIT`).
        off: f64,
    },
}

pub(super) fn switch_check(run: &RunLog, report: Option<&Value>) -> SwitchCheck {
    let sched = report.map(|r| &r["measurements"]["sched"]);
    let (Some(per_s), Some(secs)) = (
        sched.and_then(|s| s["switches_per_s"].as_f64()),
        sched.and_then(|s| s["duration_s"].as_f64()),
    ) else {
        return SwitchCheck::Skipped("the recording has no sched measurements".into());
    };
    let (Some((start, t0)), Some((end, t1))) = (run.ctxt_start, run.ctxt_end) else {
        return SwitchCheck::Skipped("the guest printed no ctxt lines".into());
    };
    let ctxt = end.saturating_sub(start);
    let window = t1 - t0;
    if ctxt == 0 || window <= 0.0 {
        return SwitchCheck::Skipped("/proc/stat ctxt or the uptime did not move".into());
    }
    let recorded = per_s * secs;
    let expected = ctxt as f64 * secs / window;
    SwitchCheck::Done {
        recorded,
        secs,
        ctxt,
        window,
        off: (recorded - expected).abs() / expected,
    }
}

impl SwitchCheck {
    pub(super) fn failure(&self) -> Option<String> {
        match self {
            SwitchCheck::Done { off, .. } if *off > SWITCH_TOLERANCE => Some(format!(
                "recorded switches {:.0} % off /proc/stat",
                off * 100.0
            )),
            _ => None,
        }
    }

    pub(super) fn line(&self) -> String {
        match self {
            SwitchCheck::Skipped(why) => format!("switch check: skipped ({why})"),
            SwitchCheck::Done {
                recorded,
                secs,
                ctxt,
                window,
                off,
            } => format!(
                "switch check: recorded {recorded:.0} in {secs:.2} s, /proc/stat ctxt +{ctxt} \
                 in {window:.2} s: {:.1} % apart ({})",
                off * 100.0,
                ok_or_fail(self.failure().is_none())
            ),
        }
    }
}

/// The spawned recording's `perf` samples of its spinning target.
#[derive(Debug, PartialEq)]
pub(super) enum PerfCheck {
    Skipped(String),
    Done {
        /// The target's samples, and how many the rate gives its duration.
        samples: u64,
        expected: f64,
        /// The shares of them in kernel mode and in the target's executable.
        kernel: f64,
        in_program: f64,
    },
}

/// `program`: the file name of the target's executable.
pub(super) fn perf_check(report: Option<&Value>, program: &str) -> PerfCheck {
    let perf = report.map(|r| &r["measurements"]["perf"]);
    let (Some(samples), Some(secs)) = (
        perf.and_then(|p| p["target_samples"].as_u64()),
        perf.and_then(|p| p["duration_s"].as_f64()),
    ) else {
        return PerfCheck::Skipped("the recording has no perf measurements".into());
    };
    let symbols = perf
        .and_then(|p| p["top_symbols"].as_array())
        .map_or(&[][..], Vec::as_slice);
    let share = |object: &dyn Fn(&str) -> bool| {
        symbols
            .iter()
            .filter(|s| s["object"].as_str().is_some_and(object))
            .filter_map(|s| s["share"].as_f64())
            // Not `sum`, whose empty sum is -0.0.
            .fold(0.0, |a, b| a + b)
    };
    let suffix = format!("/{program}");
    PerfCheck::Done {
        samples,
        expected: PERF_HZ * secs,
        kernel: share(&|o| o == "[kernel]"),
        in_program: share(&|o| o.ends_with(&suffix)),
    }
}

impl PerfCheck {
    pub(super) fn failure(&self) -> Option<String> {
        match self {
            PerfCheck::Done {
                samples, expected, ..
            } if (*samples as f64) < PERF_MIN_RATE * expected => Some(format!(
                "perf sampled the spinning target {samples} times, not about {expected:.0}"
            )),
            PerfCheck::Done { kernel, .. } if *kernel > PERF_MAX_KERNEL => Some(format!(
                "perf took {:.0} % of the spinning target's samples for kernel mode",
                kernel * 100.0
            )),
            PerfCheck::Done {
                kernel, in_program, ..
            } if *in_program < PERF_MIN_IN_PROGRAM * (1.0 - kernel) => Some(format!(
                "perf put {:.0} % of the spinning target's user-mode samples in its program",
                in_program / (1.0 - kernel) * 100.0
            )),
            _ => None,
        }
    }

    pub(super) fn line(&self) -> String {
        match self {
            PerfCheck::Skipped(why) => format!("perf check: skipped ({why})"),
            PerfCheck::Done {
                samples,
                expected,
                kernel,
                in_program,
            } => format!(
                "perf check: the spinning target sampled {samples} times ({expected:.0} at \
                 {PERF_HZ} Hz), {:.1} % in its program, {:.1} % in the kernel ({})",
                in_program * 100.0,
                kernel * 100.0,
                ok_or_fail(self.failure().is_none())
            ),
        }
    }
}

fn ok_or_fail(ok: bool) -> &'static str {
    if ok { "ok" } else { "FAIL" }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn perf(samples: u64, shares: &[(&str, f64)]) -> Value {
        let symbols: Vec<Value> = shares
            .iter()
            .map(|(o, s)| serde_json::json!({"symbol": "?", "object": o, "share": s}))
            .collect();
        serde_json::json!({"measurements": {"perf": {
            "duration_s": 4.0, "samples": 800, "target_samples": samples,
            "top_symbols": symbols,
        }}})
    }

    #[test]
    fn the_spinning_target_s_samples_are_judged() {
        let good = perf(394, &[("/bin/busybox", 0.98), ("[kernel]", 0.02)]);
        let check = perf_check(Some(&good), "busybox");
        assert_eq!(check.failure(), None);
        let line = check.line();
        assert!(
            line.ends_with("98.0 % in its program, 2.0 % in the kernel (ok)"),
            "{line}"
        );
        // Some time in the kernel, as on 5.10 under TCG, is fine.
        let slow = perf(391, &[("/bin/busybox", 0.82), ("[kernel]", 0.18)]);
        assert_eq!(perf_check(Some(&slow), "busybox").failure(), None);
        // A user ip read from the wrong register: nothing in the program.
        let wrong = perf(394, &[("?", 0.9), ("[kernel]", 0.1)]);
        let check = perf_check(Some(&wrong), "busybox");
        assert_eq!(
            check.failure().as_deref(),
            Some("perf put 0 % of the spinning target's user-mode samples in its program")
        );
        // The mode read wrong: user samples taken for the kernel's.
        let mode = perf(394, &[("[kernel]", 1.0)]);
        assert_eq!(
            perf_check(Some(&mode), "busybox").failure().as_deref(),
            Some("perf took 100 % of the spinning target's samples for kernel mode")
        );
        // Too few samples for a target on a CPU for 4 s.
        let few = perf(20, &[("/bin/busybox", 1.0)]);
        assert!(perf_check(Some(&few), "busybox").failure().is_some());
        assert!(matches!(
            perf_check(Some(&serde_json::json!({})), "busybox"),
            PerfCheck::Skipped(_)
        ));
    }
}
