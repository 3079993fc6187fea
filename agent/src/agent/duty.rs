//! The per-event families' budget: the agent keeps what their kernel
//! programs cost (BPF run time of the scheduler, softirq, syscalls and
//! contention programs) under `probe_budget` (default 0.2 %) of the
//! target's CPU time, by attaching them only for some of the seconds
//! (`probes/cycle.rs` detaches and attaches them).
//!
//! Why a duty cycle: on a busy server these programs run on every context
//! switch, wakeup, softirq and watched syscall — tens of thousands of times
//! a second, a few hundred nanoseconds each. Measured on a real mongod
//! under a request load that was several percent of a CPU (issue #24);
//! the findings need rates, shares and distributions, which a sample of
//! the seconds gives as well as all of them.
//!
//! Design, the allocator budget's (`budget.rs`) at one-second steps: a
//! credit, in nanoseconds, grows by `budget` × the CPU time the target used
//! and shrinks by what each attached second cost (the kernel's run time of
//! those programs: `bpf_prog_info.run_time_ns`, counted while the agent
//! holds BPF statistics on). The families are attached for the next second
//! only when the credit covers the projected cost of a second (the last
//! attached second's). The first second is attached (nothing is known
//! yet); a cost that cannot be measured (statistics off) keeps them
//! attached and says so. The credit is capped at [`MAX_CREDIT_SECONDS`] of
//! the projected cost, so an idle stretch does not buy a long burst, and it
//! may go negative after a costly second: the next waits until it is paid
//! back. So that a window is never blind, the families are attached for
//! one second after [`MAX_OFF`] of pause whatever the credit (this can
//! exceed the budget by at most one second per `MAX_OFF`).
//!
//! Pure arithmetic (times and costs are plain numbers), driven by
//! `watch.rs` once per slice.

use std::time::Duration;

/// The credit is capped at this many seconds of the projected cost.
pub const MAX_CREDIT_SECONDS: f64 = 3.0;
/// The longest pause: the families are attached for one second after it.
pub const MAX_OFF: Duration = Duration::from_secs(60);

/// Cumulative readings at the end of a slice.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reading {
    /// CPU time of the target so far (the host's busy time host-wide).
    pub target_cpu_ns: u64,
    /// Kernel run time of the cycled families' programs so far.
    pub run_ns: u64,
}

/// What a window of slices saw of the cycle, for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Coverage {
    /// Slices with the families attached, and all slices.
    pub on_slices: u64,
    pub slices: u64,
    /// BPF run time of the cycled families, and target CPU time.
    pub run_ns: u64,
    pub target_cpu_ns: u64,
}

impl Coverage {
    /// Share of the slices the families covered (`None`: no slice).
    pub fn ratio(&self) -> Option<f64> {
        (self.slices > 0).then(|| self.on_slices as f64 / self.slices as f64)
    }

    /// Their cost as a share of the target's CPU (`None`: no CPU used).
    pub fn spent(&self) -> Option<f64> {
        (self.target_cpu_ns > 0).then(|| self.run_ns as f64 / self.target_cpu_ns as f64)
    }
}

/// The duty cycle's state.
#[derive(Debug, Clone)]
pub struct Duty {
    budget: f64,
    credit_ns: f64,
    last: Option<Reading>,
    /// Cost of an attached second, ns (the last one measured).
    cost_per_s: Option<f64>,
    /// Whether the families are attached in the slice being taken.
    on: bool,
    /// Time paused since the families were last attached.
    off_for: Duration,
    /// Whether any attached second had a measurable cost (statistics on).
    measured: bool,
    window: Coverage,
}

impl Duty {
    /// A cycle keeping to `budget` of the target's CPU; the families are
    /// attached at the start.
    pub fn new(budget: f64) -> Self {
        Self {
            budget,
            credit_ns: 0.0,
            last: None,
            cost_per_s: None,
            on: true,
            off_for: Duration::ZERO,
            measured: false,
            window: Coverage::default(),
        }
    }

    /// Whether the families are attached now.
    pub fn on(&self) -> bool {
        self.on
    }

    /// Whether their cost could be measured (else they stay attached).
    pub fn measured(&self) -> bool {
        self.measured
    }

    /// Ends the slice of length `len` with readings `now`; returns whether
    /// the families are attached for the next one.
    pub fn after_slice(&mut self, len: Duration, now: Reading) -> bool {
        let last = self.last.replace(now).unwrap_or(now);
        let cpu = now.target_cpu_ns.saturating_sub(last.target_cpu_ns);
        let run = now.run_ns.saturating_sub(last.run_ns);
        self.window.slices += 1;
        self.window.target_cpu_ns += cpu;
        self.window.run_ns += run;
        self.credit_ns += self.budget * cpu as f64;
        if self.on {
            self.window.on_slices += 1;
            self.credit_ns -= run as f64;
            let secs = len.as_secs_f64();
            // A zero run time means no statistics until one is seen; after
            // that it means a second without events.
            if secs > 0.0 && (run > 0 || self.measured) {
                self.cost_per_s = Some(run as f64 / secs);
                self.measured = true;
            }
            self.off_for = Duration::ZERO;
        } else {
            self.off_for += len;
        }
        if let Some(cost) = self.cost_per_s {
            self.credit_ns = self.credit_ns.min(cost * MAX_CREDIT_SECONDS);
        }
        self.on = match self.cost_per_s {
            // Nothing measured yet (or ever: statistics off): attached.
            None => true,
            Some(cost) => self.credit_ns >= cost || self.off_for >= MAX_OFF,
        };
        self.on
    }

    /// What the slices since the last call saw; starts a new window.
    pub fn take_window(&mut self) -> Coverage {
        std::mem::take(&mut self.window)
    }
}

#[cfg(test)]
#[path = "duty_tests.rs"]
mod tests;
