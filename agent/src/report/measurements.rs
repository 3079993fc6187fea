//! The report's "Measurements": what each probe family measured, shown
//! whether or not a rule used it, so that an SRE sees the numbers behind (and
//! beside) the findings.
//!
//! Each family's figures, how they are built and how they are shown live in
//! its folder (`family/<family>/report.rs`, from the family's totals); this
//! file holds [`Measurements`] (part of the JSON contract), builds it from
//! the [`Facts`] (the same numbers rules see) and the recording, and keeps
//! the host's RPS/RFS state. A family whose facts are absent is listed in
//! [`Measurements::not_recorded`] with the reason instead.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::family::sched::SchedFigures;
use crate::family::softirq::SoftirqTotals;
use crate::recording::model::{Recording, RxQueue};
use crate::recording::{Family, Window};
use crate::rules::facts::Facts;
use crate::rules::facts::net::rps_mask_set;

pub use super::rseq::{RseqMeasurement, verdict_text};
pub use crate::family::perf::report::{PerfMeasurements, PerfSymbolMeasurement, TOP_SYMBOLS};
pub use crate::family::sched::report::{SchedMeasurements, TOP_CLASSES, ThreadClassMeasurement};
pub use crate::family::softirq::report::{
    BUSIEST_CPU_ROWS, HardIrqMeasurement, MAX_CPU_ROWS, SoftirqCpuMean, SoftirqCpuRow,
    SoftirqDropsReport, SoftirqMeasurements, SoftirqVectorMeasurement, TOP_HARDIRQS,
};
pub use crate::family::syscalls::report::{
    ErrnoCount, FutexThreadMeasurement, MEMORY_SYSCALLS, SyscallMeasurement, SyscallsMeasurements,
    TOP_FUTEX_THREADS, errno_name,
};
pub use crate::family::wiredtiger::report::WiredTigerMeasurements;

/// What the probes measured, by family.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Measurements {
    /// Scheduler family; `None` when its facts are absent (see `not_recorded`).
    pub sched: Option<SchedMeasurements>,
    /// Softirq / hard-IRQ family; `None` when its facts are absent.
    pub softirq: Option<SoftirqMeasurements>,
    /// RPS/RFS state of the host; `None` when it could not be read.
    pub net: Option<NetMeasurements>,
    /// Syscalls family over the whole recording; `None` when no slice has it.
    #[serde(default)]
    pub syscalls: Option<SyscallsMeasurements>,
    /// rseq ownership of the target; `None` when not recorded.
    #[serde(default)]
    pub rseq: Option<RseqMeasurement>,
    /// Perf family over the whole recording; `None` when no slice has it.
    #[serde(default)]
    pub perf: Option<PerfMeasurements>,
    /// WiredTiger family over the whole recording; `None` when no slice has it.
    #[serde(default)]
    pub wiredtiger: Option<WiredTigerMeasurements>,
    /// Allocator latency windows; `None` when the family did not run.
    #[serde(default)]
    pub alloc: Option<crate::family::alloc::report::AllocMeasurements>,
    /// Waits inside vs outside checkpoint windows, per thread class, lock
    /// kinds and D-state stacks; `None` when neither the syscalls nor the
    /// contention family recorded anything.
    #[serde(default)]
    pub contention: Option<crate::family::contention::ContentionMeasurements>,
    /// mongod's own figures (serverStatus polls or FTDC); `None` when mongod
    /// was not polled (the renderers say so).
    #[serde(default)]
    pub mongod: Option<crate::mongo::summary::MongodSummary>,
    /// The data directory's disk (readahead) and memory overcommit, as read
    /// when recording; `None` when neither was recorded.
    #[serde(default)]
    pub host_settings: Option<super::host_settings::HostSettings>,
    /// Probe families without measurements, and why (not attached, attached
    /// only partly, attached but recorded nothing).
    pub not_recorded: Vec<FamilyNote>,
    /// Per-slice series (checkpoint windows, waits, preemptions) for charts;
    /// `None` without slices.
    #[serde(default)]
    pub timeline: Option<super::timeline::Timeline>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FamilyNote {
    pub family: String,
    pub reason: String,
}

/// Receive packet / flow steering of the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetMeasurements {
    /// Some receive queue has a non-zero `rps_cpus` mask.
    pub rps_enabled: bool,
    /// `rps_sock_flow_entries` > 0 and some queue has `rps_flow_cnt` > 0.
    pub rfs_enabled: bool,
    pub rps_sock_flow_entries: u64,
    /// Interfaces with receive queues (loopback excluded), most queues first.
    pub interfaces: Vec<InterfaceMeasurement>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceMeasurement {
    pub name: String,
    pub rx_queues: u32,
    /// Queues with a non-zero `rps_cpus` mask.
    pub rps_queues: u32,
    /// Queues with `rps_flow_cnt` > 0.
    pub rfs_queues: u32,
}

impl Measurements {
    /// Whether `family` has measurements in this report (a family listed in
    /// `not_recorded` with measurements was measured only in part).
    /// Exhaustive over [`Family`]: a new family does not compile until it
    /// is here.
    pub fn has(&self, family: &str) -> bool {
        match Family::from_name(family) {
            Some(Family::Sched) => self.sched.is_some(),
            Some(Family::Softirq) => self.softirq.is_some(),
            Some(Family::Syscalls) => self.syscalls.is_some(),
            Some(Family::Perf) => self.perf.is_some(),
            Some(Family::Wiredtiger) => self.wiredtiger.is_some(),
            Some(Family::Alloc) => self.alloc.is_some(),
            Some(Family::Contention) => self.contention.is_some(),
            None => false,
        }
    }

    /// "not measured" or, for a family with (incomplete) measurements,
    /// "measured in part": how the report labels a `not_recorded` note.
    pub fn note_label(&self, family: &str) -> &'static str {
        if self.has(family) {
            "measured in part"
        } else {
            "not measured"
        }
    }

    /// Measurements of `rec`, whose facts are `facts` and whose slices
    /// `whole` merges ([`Recording::window`]): every family's totals are
    /// read from the window, as the facts' are; the timeline and mongod's
    /// summary, which need single seconds, walk the slices.
    pub fn build(rec: &Recording, whole: &Window, facts: &Facts) -> Measurements {
        let mut m = Measurements::default();
        let sched = rec.family_window(whole, Family::Sched, whole.slice.sched.as_ref());
        match SchedFigures::of(&sched) {
            Ok(f) => m.sched = Some(crate::family::sched::report::build(&f)),
            Err(_) => m.not_recorded.push(note(facts, "sched")),
        }
        let softirq = rec.family_window(whole, Family::Softirq, whole.slice.softirq.as_ref());
        match SoftirqTotals::from_window(&softirq) {
            Ok(totals) => m.softirq = Some(crate::family::softirq::report::build(&totals)),
            Err(_) => m.not_recorded.push(note(facts, "softirq")),
        }
        let syscalls = rec.family_window(whole, Family::Syscalls, whole.slice.syscalls.as_ref());
        m.syscalls = crate::family::syscalls::report::build(&syscalls);
        m.rseq = rec.rseq.as_ref().map(super::rseq::rseq_measurement);
        let perf = rec.family_window(whole, Family::Perf, whole.slice.perf.as_ref());
        let allocator = crate::family::perf::report::first_allocator(
            rec.slices.iter().map(|s| s.perf.as_ref()),
            rec.target_code.as_ref().map(|c| c.allocator.kind),
        );
        m.perf = crate::family::perf::report::build(&perf, allocator);
        let wiredtiger =
            rec.family_window(whole, Family::Wiredtiger, whole.slice.wiredtiger.as_ref());
        let detected = rec
            .target_code
            .as_ref()
            .and_then(|c| c.wiredtiger.detected.object.clone());
        m.wiredtiger = crate::family::wiredtiger::report::build(&wiredtiger, detected);
        // Per second, so from the slices: the charts' series.
        m.timeline = super::timeline::Timeline::build(rec);
        let alloc = rec.family_window(whole, Family::Alloc, whole.slice.alloc.as_ref());
        m.alloc = crate::family::alloc::report::measurements(rec.alloc.as_ref(), &alloc);
        m.contention = crate::family::contention::build(&rec.contention_window(whole));
        // From every sample: maxima, minima and restarts inside the recording
        // are lost in a window, which keeps only the first and last.
        m.mongod = crate::mongo::summary::MongodSummary::of(rec);
        m.host_settings = super::host_settings::build(facts);
        // Families that failed (wholly, partly, or as "not applicable"), and
        // attached families of this build that recorded nothing.
        for probe in &rec.probes {
            let measured = match probe.family.as_str() {
                // Their facts' notes (above) say why they are missing.
                "sched" | "softirq" => None,
                // Its measurements also hold the syscalls family's futex waits.
                "contention" => Some(whole.slice.contention.is_some()),
                family if crate::probes::FAMILIES.iter().any(|f| f.name == family) => {
                    Some(m.has(family))
                }
                _ => None,
            };
            if measured == Some(false)
                && crate::rules::facts::family_unavailable(&rec.probes, &probe.family).is_none()
            {
                m.not_recorded.push(FamilyNote {
                    family: probe.family.clone(),
                    reason: format!("the {} probe attached but recorded nothing", probe.family),
                });
                continue;
            }
            if probe.family != "sched"
                && probe.family != "softirq"
                && let Some(reason) =
                    crate::rules::facts::family_unavailable(&rec.probes, &probe.family)
            {
                m.not_recorded.push(FamilyNote {
                    family: probe.family.clone(),
                    reason,
                });
            }
        }
        m.net = rec.host.net.as_ref().map(|net| {
            let mut interfaces: Vec<InterfaceMeasurement> = net
                .interfaces
                .iter()
                .map(|i| {
                    let count = |f: fn(&RxQueue) -> bool| {
                        u32::try_from(i.rx_queues.iter().filter(|q| f(q)).count())
                            .unwrap_or(u32::MAX)
                    };
                    InterfaceMeasurement {
                        name: i.name.clone(),
                        rx_queues: count(|_| true),
                        rps_queues: count(|q| rps_mask_set(&q.rps_cpus)),
                        rfs_queues: count(|q| q.rps_flow_cnt > 0),
                    }
                })
                .collect();
            interfaces.sort_by(|a, b| b.rx_queues.cmp(&a.rx_queues).then(a.name.cmp(&b.name)));
            NetMeasurements {
                rps_enabled: net.rps_enabled(),
                rfs_enabled: net.rfs_enabled(),
                rps_sock_flow_entries: net.rps_sock_flow_entries,
                interfaces,
            }
        });
        m
    }
}

fn note(facts: &Facts, family: &str) -> FamilyNote {
    FamilyNote {
        family: family.to_string(),
        reason: facts
            .absent_reason(family)
            .unwrap_or("no data was recorded")
            .to_string(),
    }
}

/// Interfaces listed in the RPS/RFS line; the rest are counted.
const NET_INTERFACES_SHOWN: usize = 6;

/// "RPS off, RFS on (rps_sock_flow_entries 32768); rx queues: eth0 4 (RPS 0,
/// RFS 4), eth1 2 (RPS 0, RFS 0)".
pub fn net_line(net: Option<&NetMeasurements>) -> String {
    let Some(n) = net else {
        return "RPS/RFS: not readable when recording".into();
    };
    let on = |b: bool| if b { "on" } else { "off" };
    let mut line = format!(
        "RPS {}, RFS {} (rps_sock_flow_entries {})",
        on(n.rps_enabled),
        on(n.rfs_enabled),
        n.rps_sock_flow_entries
    );
    if n.interfaces.is_empty() {
        line.push_str("; no interface with rx queues");
        return line;
    }
    let shown: Vec<String> = n
        .interfaces
        .iter()
        .take(NET_INTERFACES_SHOWN)
        .map(|i| {
            format!(
                "{} {} (RPS {}, RFS {})",
                i.name, i.rx_queues, i.rps_queues, i.rfs_queues
            )
        })
        .collect();
    let _ = write!(line, "; rx queues: {}", shown.join(", "));
    let more = n.interfaces.len().saturating_sub(NET_INTERFACES_SHOWN);
    if more > 0 {
        let _ = write!(line, " and {more} more interfaces");
    }
    line
}

#[cfg(test)]
pub(crate) mod tests;
