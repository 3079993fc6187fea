//! The report's "Measurements": what each probe family measured, shown
//! whether or not a rule used it, so that an SRE sees the numbers behind (and
//! beside) the findings.
//!
//! Each family's figures, how they are built and how they are shown live in
//! its folder (`family/<family>/report.rs`, from the family's totals, called
//! through its `Unit`); this file holds [`Measurements`] (part of the JSON
//! contract), builds every family's part from the registry
//! (`kit::family::for_each_family`) over the same window the facts are
//! derived from, and keeps the host's RPS/RFS state. A family without
//! measurements is listed in [`Measurements::not_recorded`] with the reason
//! instead.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::kit::unit::{FamilyUnit, Measured};
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
    pub fn has(&self, family: &str) -> bool {
        Family::from_name(family).is_some_and(|f| self.has_family(f))
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
        let outcomes = m.measure_families(rec, whole);
        m.rseq = rec.rseq.as_ref().map(super::rseq::rseq_measurement);
        // Per second, so from the slices: the charts' series.
        m.timeline = super::timeline::Timeline::build(rec);
        // From every sample: maxima, minima and restarts inside the recording
        // are lost in a window, which keeps only the first and last.
        m.mongod = crate::mongo::summary::MongodSummary::of(rec);
        m.host_settings = super::host_settings::build(facts);
        m.note_statuses(rec, &outcomes);
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

/// What building a family's measurements said about it, for the notes
/// its probe statuses add.
#[derive(Debug, Clone, Copy, Default)]
struct Outcome {
    /// It recorded something ([`FamilyUnit::recorded`]).
    recorded: bool,
    /// Its probe statuses say why it is missing ([`FamilyUnit::STATUS_NOTES`]).
    status_notes: bool,
}

/// Generates the per-family parts of [`Measurements`] from the registry.
macro_rules! measure_families {
    ($($variant:ident $module:ident,)*) => {
        impl Measurements {
            /// Every family's measurements over `whole` (a window of `rec`),
            /// each from its totals as its facts are; a family whose
            /// measurements say why they are missing gets its note now.
            fn measure_families(&mut self, rec: &Recording, whole: &Window) -> [Outcome; Family::ALL.len()] {
                let mut outcomes = [Outcome::default(); Family::ALL.len()];
                $({
                    type U = crate::family::$module::Unit;
                    let w = rec.family_window(whole);
                    let measured = <U as FamilyUnit>::measure(&w);
                    if let Measured::No(reason) = &measured {
                        self.not_recorded.push(FamilyNote {
                            family: Family::$variant.name().to_string(),
                            reason: reason.clone(),
                        });
                    }
                    self.$module = measured.into_option();
                    outcomes[Family::$variant.index()] = Outcome {
                        recorded: <U as FamilyUnit>::recorded(&w, self.$module.as_ref()),
                        status_notes: <U as FamilyUnit>::STATUS_NOTES,
                    };
                })*
                outcomes
            }

            /// Whether `family` has measurements in this report.
            fn has_family(&self, family: Family) -> bool {
                match family {
                    $(Family::$variant => self.$module.is_some(),)*
                }
            }
        }
    };
}
crate::kit::family::for_each_family!(measure_families);

impl Measurements {
    /// Notes from the probe statuses, in their order: families that failed
    /// (wholly, partly, or as "not applicable"), and attached families that
    /// recorded nothing (`outcomes`: what measuring each said).
    fn note_statuses(&mut self, rec: &Recording, outcomes: &[Outcome]) {
        for probe in &rec.probes {
            let outcome = Family::from_name(&probe.family).map(|f| outcomes[f.index()]);
            if !outcome.is_none_or(|o| o.status_notes) {
                continue;
            }
            let unavailable = crate::rules::facts::family_unavailable(&rec.probes, &probe.family);
            if outcome.is_some_and(|o| !o.recorded) && unavailable.is_none() {
                self.not_recorded.push(FamilyNote {
                    family: probe.family.clone(),
                    reason: format!("the {} probe attached but recorded nothing", probe.family),
                });
                continue;
            }
            if let Some(reason) = unavailable {
                self.not_recorded.push(FamilyNote {
                    family: probe.family.clone(),
                    reason,
                });
            }
        }
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
