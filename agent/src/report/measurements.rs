//! The report's "Measurements": what each probe family measured, shown
//! whether or not a rule used it, so that an SRE sees the numbers behind (and
//! beside) the findings.
//!
//! Everything here is taken from the [`Facts`] (the same numbers rules see)
//! and, for per-CPU and per-IRQ tables that facts do not carry, from the same
//! [`SoftirqTotals`] the facts are computed from; so the report and the rules
//! cannot disagree. A family whose facts are absent is listed in
//! [`Measurements::not_recorded`] with the reason instead.

use serde::{Deserialize, Serialize};

use crate::recording::model::{Recording, RxQueue};
use crate::rules::FactValue;
use crate::rules::facts::softirq::{MAIN_VECTORS, SoftirqTotals, rps_mask_set};
use crate::rules::facts::{FactGroup, Facts};

/// Thread classes listed, by involuntary switches.
pub const TOP_CLASSES: usize = 5;
/// Hard IRQs listed, by time.
pub const TOP_HARDIRQS: usize = 3;
/// Hosts with at most this many CPUs get one softirq row per CPU; larger ones
/// get the [`BUSIEST_CPU_ROWS`] busiest CPUs and one row for the others.
pub const MAX_CPU_ROWS: usize = 16;
pub const BUSIEST_CPU_ROWS: usize = 8;

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
    pub alloc: Option<super::alloc::AllocMeasurements>,
    /// Waits inside vs outside checkpoint windows, per thread class, lock
    /// kinds and D-state stacks; `None` when neither the syscalls nor the
    /// contention family recorded anything.
    #[serde(default)]
    pub contention: Option<super::contention::ContentionMeasurements>,
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

/// Scheduler measurements (`sched` facts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SchedMeasurements {
    /// "target" (the target's threads) or "host" (every non-idle task).
    pub scope: String,
    pub duration_s: f64,
    /// Every context switch on every CPU.
    pub switches_per_s: f64,
    /// Switches of observed threads (voluntary + involuntary).
    pub observed_switches_per_s: f64,
    pub involuntary_per_s: f64,
    /// Involuntary / observed switches (0..1).
    pub involuntary_share: f64,
    pub runq_p50_us: f64,
    pub runq_p90_us: f64,
    pub runq_p99_us: f64,
    pub threads: i64,
    /// Up to [`TOP_CLASSES`] thread classes with the most involuntary
    /// switches, most first (classes with none are left out).
    pub top_classes: Vec<ThreadClassMeasurement>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadClassMeasurement {
    /// mongod's class ("conn", "checkpointer", "eviction"), else the thread
    /// name without trailing digits ("kworker"); see `rules::facts::thread_class`.
    pub class: String,
    pub threads: i64,
    pub involuntary_per_s: f64,
    /// Involuntary / (voluntary + involuntary) switches of the class.
    pub involuntary_share: f64,
    /// Mean run-queue delay of the class's threads, µs.
    pub runq_mean_us: f64,
}

/// Softirq and hard-IRQ measurements (`softirq` facts). Host-wide. Times are
/// milliseconds of CPU time per second of wall time (1000 = one whole CPU).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoftirqMeasurements {
    pub duration_s: f64,
    /// CPUs the per-CPU numbers cover.
    pub cpu_count: u32,
    /// NET_RX, NET_TX, TIMER, RCU, SCHED, BLOCK: totals over all CPUs. The
    /// per-CPU rows' `time_ms_per_s` follow this order.
    pub vectors: Vec<SoftirqVectorMeasurement>,
    /// One row per CPU, in CPU order; on hosts with more than
    /// [`MAX_CPU_ROWS`] CPUs only the [`BUSIEST_CPU_ROWS`] with the most
    /// softirq time (still in CPU order), the rest in `other_cpus`.
    pub cpus: Vec<SoftirqCpuRow>,
    /// The CPUs left out of `cpus`, as a mean per CPU; `None` when none were.
    pub other_cpus: Option<SoftirqCpuMean>,
    /// All vectors (not only the six), all CPUs.
    pub count_per_s: f64,
    pub time_ms_per_s: f64,
    /// Mean share of a CPU's time in softirqs (0..1).
    pub cpu_mean_share: f64,
    /// The CPU with the most softirq time, and its share of time in softirqs.
    pub cpu_max_share_cpu: u32,
    pub cpu_max_share: f64,
    /// NET_RX: busiest CPU time / mean CPU time (1.0 = even; 0 without time).
    pub net_rx_imbalance: f64,
    pub net_rx_busiest_cpu: u32,
    /// Share of NET_RX time on that CPU (0..1).
    pub net_rx_busiest_share: f64,
    /// NET_RX time on that CPU / wall time: how much of the CPU NET_RX takes.
    pub net_rx_time_share_of_cpu: f64,
    pub hardirq_count_per_s: f64,
    pub hardirq_time_ms_per_s: f64,
    /// Up to [`TOP_HARDIRQS`] hard IRQs with the most time, most first.
    pub top_hardirqs: Vec<HardIrqMeasurement>,
    pub drops: SoftirqDropsReport,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoftirqVectorMeasurement {
    /// Kernel name: "NET_RX", ...
    pub name: String,
    pub count_per_s: f64,
    pub time_ms_per_s: f64,
    /// Busiest CPU time / mean CPU time (1.0 = even; 0 without time).
    pub imbalance: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoftirqCpuRow {
    pub cpu: u32,
    /// Per vector of [`SoftirqMeasurements::vectors`], ms/s.
    pub time_ms_per_s: Vec<f64>,
    /// Every vector, ms/s.
    pub all_ms_per_s: f64,
    /// Share of the CPU's time in softirqs (0..1).
    pub share: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SoftirqCpuMean {
    /// How many CPUs the means are over.
    pub cpus: u32,
    pub time_ms_per_s: Vec<f64>,
    pub all_ms_per_s: f64,
    pub share: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HardIrqMeasurement {
    pub irq: u32,
    /// Handler names ("eth0-TxRx-0"; "irqN" when unknown).
    pub name: String,
    pub count_per_s: f64,
    pub time_ms_per_s: f64,
    /// The CPU that spent the most time in it.
    pub busiest_cpu: u32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoftirqDropsReport {
    /// Exits without a matching entry (normal right after attach).
    pub unmatched_exit: u64,
    pub irq_map_full: u64,
    pub bad_vector: u64,
    pub total: u64,
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
        match family {
            "sched" => self.sched.is_some(),
            "softirq" => self.softirq.is_some(),
            "syscalls" => self.syscalls.is_some(),
            "perf" => self.perf.is_some(),
            "wiredtiger" => self.wiredtiger.is_some(),
            "alloc" => self.alloc.is_some(),
            "contention" => self.contention.is_some(),
            _ => false,
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

    /// Measurements of `rec`, whose facts are `facts`.
    pub fn build(rec: &Recording, facts: &Facts) -> Measurements {
        let mut m = Measurements::default();
        match facts.group("sched") {
            Some(g) => m.sched = Some(sched(g)),
            None => m.not_recorded.push(note(facts, "sched")),
        }
        match (
            facts.group("softirq"),
            SoftirqTotals::from_recording(rec).ok(),
        ) {
            (Some(g), Some(totals)) => m.softirq = Some(softirq(g, &totals)),
            _ => m.not_recorded.push(note(facts, "softirq")),
        }
        m.syscalls = syscalls(rec);
        m.rseq = rec.rseq.as_ref().map(rseq_measurement);
        m.perf = perf(rec);
        m.wiredtiger = wiredtiger(rec);
        m.timeline = super::timeline::Timeline::build(rec);
        m.alloc = super::alloc::measurements(rec);
        m.contention = super::contention::build(rec);
        m.mongod = crate::mongo::summary::MongodSummary::of(rec);
        m.host_settings = super::host_settings::build(facts);
        // Families that failed (wholly, partly, or as "not applicable"), and
        // attached families of this build that recorded nothing.
        for probe in &rec.probes {
            let measured = match probe.family.as_str() {
                "syscalls" => Some(m.syscalls.is_some()),
                "perf" => Some(m.perf.is_some()),
                "wiredtiger" => Some(m.wiredtiger.is_some()),
                "alloc" => Some(m.alloc.is_some()),
                "contention" => Some(rec.slices.iter().any(|s| s.contention.is_some())),
                _ => None,
            };
            if measured == Some(false)
                && crate::rules::facts::family_unavailable(rec, &probe.family).is_none()
            {
                m.not_recorded.push(FamilyNote {
                    family: probe.family.clone(),
                    reason: format!("the {} probe attached but recorded nothing", probe.family),
                });
                continue;
            }
            if probe.family != "sched"
                && probe.family != "softirq"
                && let Some(reason) = crate::rules::facts::family_unavailable(rec, &probe.family)
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

fn f64_of(g: &FactGroup, name: &str) -> f64 {
    g.get(name).and_then(FactValue::as_f64).unwrap_or(0.0)
}

fn i64_of(g: &FactGroup, name: &str) -> i64 {
    match g.get(name) {
        Some(FactValue::Int(i)) => *i,
        _ => 0,
    }
}

fn u32_of(g: &FactGroup, name: &str) -> u32 {
    u32::try_from(i64_of(g, name)).unwrap_or(0)
}

fn sched(g: &FactGroup) -> SchedMeasurements {
    let duration_s = f64_of(g, "duration_s");
    let mut top_classes: Vec<ThreadClassMeasurement> = match g.get("classes") {
        Some(FactValue::Map(classes)) => classes
            .iter()
            .filter_map(|(name, c)| match c {
                FactValue::Map(c) => Some((name, c)),
                _ => None,
            })
            .filter(|(_, c)| i64_of(c, "involuntary") > 0)
            .map(|(name, c)| ThreadClassMeasurement {
                class: name.clone(),
                threads: i64_of(c, "threads"),
                involuntary_per_s: if duration_s > 0.0 {
                    i64_of(c, "involuntary") as f64 / duration_s
                } else {
                    0.0
                },
                involuntary_share: f64_of(c, "involuntary_share"),
                runq_mean_us: f64_of(c, "runq_mean_us"),
            })
            .collect(),
        _ => Vec::new(),
    };
    top_classes.sort_by(|a, b| {
        b.involuntary_per_s
            .total_cmp(&a.involuntary_per_s)
            .then_with(|| a.class.cmp(&b.class))
    });
    top_classes.truncate(TOP_CLASSES);
    let scope = match g.get("scope") {
        Some(FactValue::Text(s)) => s.clone(),
        _ => String::new(),
    };
    SchedMeasurements {
        scope,
        duration_s,
        switches_per_s: f64_of(g, "switches_per_s"),
        observed_switches_per_s: f64_of(g, "observed_switches_per_s"),
        involuntary_per_s: f64_of(g, "involuntary_per_s"),
        involuntary_share: f64_of(g, "involuntary_share"),
        runq_p50_us: f64_of(g, "runq_p50_us"),
        runq_p90_us: f64_of(g, "runq_p90_us"),
        runq_p99_us: f64_of(g, "runq_p99_us"),
        threads: i64_of(g, "threads"),
        top_classes,
    }
}

fn softirq(g: &FactGroup, t: &SoftirqTotals) -> SoftirqMeasurements {
    let vectors: Vec<SoftirqVectorMeasurement> = MAIN_VECTORS
        .iter()
        .map(|name| {
            let v = t.vector(name);
            SoftirqVectorMeasurement {
                name: (*name).to_string(),
                count_per_s: t.per_s(v.count_total()),
                time_ms_per_s: t.ms_per_s(v.time_total_ns()),
                imbalance: v.imbalance(),
            }
        })
        .collect();
    let main: Vec<_> = MAIN_VECTORS.iter().map(|name| t.vector(name)).collect();
    let all = t.softirq_ns_per_cpu();
    let row = |cpu: usize| SoftirqCpuRow {
        cpu: u32::try_from(cpu).unwrap_or(u32::MAX),
        time_ms_per_s: main
            .iter()
            .map(|v| t.ms_per_s(v.time_ns.get(cpu).copied().unwrap_or(0)))
            .collect(),
        all_ms_per_s: t.ms_per_s(all[cpu]),
        share: t.cpu_share(all[cpu]),
    };
    let mut shown: Vec<usize> = (0..t.cpus).collect();
    let mut others: Vec<usize> = Vec::new();
    if t.cpus > MAX_CPU_ROWS {
        shown.sort_by_key(|&cpu| (std::cmp::Reverse(all[cpu]), cpu));
        others = shown.split_off(BUSIEST_CPU_ROWS);
        shown.sort_unstable();
    }
    let other_cpus = (!others.is_empty()).then(|| {
        let n = others.len() as f64;
        let sum = |per_cpu: &[u64]| -> u64 {
            others
                .iter()
                .map(|&c| per_cpu.get(c).copied().unwrap_or(0))
                .sum()
        };
        let all_sum = sum(&all);
        SoftirqCpuMean {
            cpus: u32::try_from(others.len()).unwrap_or(u32::MAX),
            time_ms_per_s: main
                .iter()
                .map(|v| t.ms_per_s(sum(&v.time_ns)) / n)
                .collect(),
            all_ms_per_s: t.ms_per_s(all_sum) / n,
            share: t.cpu_share(all_sum) / n,
        }
    });
    let top_hardirqs = t
        .hardirqs_by_time()
        .into_iter()
        .take(TOP_HARDIRQS)
        .map(|h| HardIrqMeasurement {
            irq: h.irq,
            name: h.name.clone(),
            count_per_s: t.per_s(h.per_cpu.count_total()),
            time_ms_per_s: t.ms_per_s(h.per_cpu.time_total_ns()),
            busiest_cpu: h
                .per_cpu
                .busiest()
                .map_or(0, |(cpu, _)| u32::try_from(cpu).unwrap_or(u32::MAX)),
        })
        .collect();
    let d = t.drops;
    SoftirqMeasurements {
        duration_s: t.duration_s,
        cpu_count: u32::try_from(t.cpus).unwrap_or(u32::MAX),
        vectors,
        cpus: shown.into_iter().map(row).collect(),
        other_cpus,
        count_per_s: f64_of(g, "count_per_s"),
        time_ms_per_s: f64_of(g, "time_ms_per_s"),
        cpu_mean_share: f64_of(g, "cpu_mean_share"),
        cpu_max_share_cpu: u32_of(g, "cpu_max_share_cpu"),
        cpu_max_share: f64_of(g, "cpu_max_share"),
        net_rx_imbalance: f64_of(g, "net_rx_imbalance"),
        net_rx_busiest_cpu: u32_of(g, "net_rx_busiest_cpu"),
        net_rx_busiest_share: f64_of(g, "net_rx_busiest_share"),
        net_rx_time_share_of_cpu: f64_of(g, "net_rx_time_share_of_cpu"),
        hardirq_count_per_s: f64_of(g, "hardirq_count_per_s"),
        hardirq_time_ms_per_s: f64_of(g, "hardirq_time_ms_per_s"),
        top_hardirqs,
        drops: SoftirqDropsReport {
            unmatched_exit: d.unmatched_exit,
            irq_map_full: d.irq_map_full,
            bad_vector: d.bad_vector,
            total: d
                .unmatched_exit
                .saturating_add(d.irq_map_full)
                .saturating_add(d.bad_vector),
        },
    }
}

/// Syscalls listed under "top threads by futex wait time".
pub const TOP_FUTEX_THREADS: usize = 3;
/// Perf symbols listed.
pub const TOP_SYMBOLS: usize = 5;
/// Syscalls whose length arguments are summed into `bytes`.
pub const MEMORY_SYSCALLS: [&str; 5] = ["mmap", "munmap", "madvise", "brk", "mremap"];

/// Syscalls family (`syscalls` slices), summed over the whole recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyscallsMeasurements {
    /// Wall time of the recording's slices, seconds.
    pub duration_s: f64,
    /// One row per syscall name, in name order.
    pub calls: Vec<SyscallMeasurement>,
    /// Time observed threads spent blocked in futex waits, ms per second of
    /// wall time (1000 = one thread blocked all the time).
    pub futex_wait_ms_per_s: f64,
    /// Up to [`TOP_FUTEX_THREADS`] threads with the most futex wait time.
    pub top_futex_threads: Vec<FutexThreadMeasurement>,
    /// rseq(2) registrations seen (calls without the unregister flag).
    pub rseq_registrations: u64,
    /// Of which failed.
    pub rseq_failed: u64,
    /// The failures by errno, most first.
    pub rseq_failed_by_errno: Vec<ErrnoCount>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyscallMeasurement {
    pub name: String,
    pub count: u64,
    pub count_per_s: f64,
    pub errors: u64,
    /// Mean time inside the call, µs.
    pub mean_us: f64,
    /// 99th percentile from the log2 latency histogram, µs (`None` without one).
    pub p99_us: Option<f64>,
    /// Bytes per second (memory syscalls only).
    pub bytes_per_s: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FutexThreadMeasurement {
    pub tid: u32,
    pub futex_waits: u64,
    pub wait_ms_per_s: f64,
    /// Share of wall time the thread was blocked in futex waits (0..1).
    pub blocked_share: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrnoCount {
    /// Positive errno (22).
    pub errno: i64,
    /// "EINVAL", or "errno N" when not one of rseq's.
    pub name: String,
    pub count: u64,
}

/// rseq ownership of the target (the recording's `rseq`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RseqMeasurement {
    /// "per_cpu_caches_possible", "blocked_by_glibc_registration",
    /// "allocator_has_no_per_cpu_mode", "unknown".
    pub verdict: String,
    /// The verdict in plain words.
    pub verdict_text: String,
    /// "google_tcmalloc", "gperftools", "jemalloc", "glibc", "unknown".
    pub allocator: String,
    pub glibc_rseq_size: Option<u32>,
    pub method: String,
    pub confidence: String,
}

/// Perf family (`perf` slices), summed over the whole recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerfMeasurements {
    pub duration_s: f64,
    /// Samples on all CPUs, idle included.
    pub samples: u64,
    pub target_samples: u64,
    /// Target samples / all samples: the target's share of the sampled CPU time.
    pub target_cpu_share: f64,
    /// The allocator as classified ("google_tcmalloc", ...), when known.
    pub allocator: Option<String>,
    pub allocator_samples: u64,
    /// Allocator samples / target samples.
    pub allocator_share: f64,
    pub allocator_slow_path_samples: u64,
    /// Slow-path samples / target samples.
    pub slow_path_share: f64,
    /// Up to [`TOP_SYMBOLS`] most sampled functions, most first.
    pub top_symbols: Vec<PerfSymbolMeasurement>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerfSymbolMeasurement {
    /// Function name ("?" when no symbol covers the address).
    pub symbol: String,
    /// Object path ("[kernel]"; `None` when unmapped).
    pub object: Option<String>,
    pub samples: u64,
    /// Samples / target samples.
    pub share: f64,
}

/// WiredTiger family (`wiredtiger` slices), over the whole recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WiredTigerMeasurements {
    /// Checkpoints seen (completed and still running).
    pub checkpoints: u64,
    pub total_ms: f64,
    pub mean_ms: f64,
    pub max_ms: f64,
    /// A checkpoint was still running when the recording ended.
    pub in_progress: bool,
    /// The object WiredTiger was found in, when known.
    pub object: Option<String>,
}

/// Wall time of all slices, seconds.
fn recording_s(rec: &Recording) -> f64 {
    rec.slices.iter().map(|s| s.duration_ms).sum::<u64>() as f64 / 1000.0
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// "EINVAL" for 22, ...
pub fn errno_name(errno: i64) -> String {
    match errno {
        1 => "EPERM".into(),
        14 => "EFAULT".into(),
        16 => "EBUSY".into(),
        22 => "EINVAL".into(),
        38 => "ENOSYS".into(),
        n => format!("errno {n}"),
    }
}

fn syscalls(rec: &Recording) -> Option<SyscallsMeasurements> {
    use std::collections::BTreeMap;
    let slices: Vec<_> = rec
        .slices
        .iter()
        .filter_map(|s| s.syscalls.as_ref())
        .collect();
    if slices.is_empty() {
        return None;
    }
    let duration_s = recording_s(rec);
    let mut calls: BTreeMap<&str, (u64, u64, u64, u64, Vec<u64>)> = BTreeMap::new();
    let mut threads: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    let mut errnos: BTreeMap<i64, u64> = BTreeMap::new();
    let (mut registrations, mut failed) = (0u64, 0u64);
    for s in &slices {
        for c in &s.calls {
            let e = calls.entry(c.name.as_str()).or_default();
            e.0 += c.count;
            e.1 += c.errors;
            e.2 += c.time_ns;
            e.3 += c.bytes;
            if e.4.len() < c.hist_log2_ns.len() {
                e.4.resize(c.hist_log2_ns.len(), 0);
            }
            for (i, n) in c.hist_log2_ns.iter().enumerate() {
                e.4[i] += n;
            }
        }
        for t in &s.threads {
            let e = threads.entry(t.tid).or_default();
            e.0 += t.futex_waits;
            e.1 += t.futex_wait_ns;
        }
        for r in s.rseq.iter().filter(|r| r.flags & 1 == 0) {
            registrations += 1;
            if r.ret < 0 {
                failed += 1;
                *errnos.entry(-r.ret).or_default() += 1;
            }
        }
    }
    let ms_per_s = |ns: u64| ratio(ns as f64 / 1e6, duration_s);
    let calls = calls
        .into_iter()
        .map(
            |(name, (count, errors, time_ns, bytes, hist))| SyscallMeasurement {
                name: name.to_string(),
                count,
                count_per_s: ratio(count as f64, duration_s),
                errors,
                mean_us: ratio(time_ns as f64, count as f64) / 1000.0,
                p99_us: crate::rules::facts::log2_hist_percentile_ns(&hist, 0.99)
                    .map(|ns| ns / 1000.0),
                bytes_per_s: MEMORY_SYSCALLS
                    .contains(&name)
                    .then(|| ratio(bytes as f64, duration_s)),
            },
        )
        .collect();
    let futex_total: u64 = threads.values().map(|t| t.1).sum();
    let mut top: Vec<(u32, (u64, u64))> = threads.into_iter().filter(|t| t.1.1 > 0).collect();
    top.sort_by_key(|&(tid, (_, ns))| (std::cmp::Reverse(ns), tid));
    top.truncate(TOP_FUTEX_THREADS);
    let mut by_errno: Vec<ErrnoCount> = errnos
        .into_iter()
        .map(|(errno, count)| ErrnoCount {
            errno,
            name: errno_name(errno),
            count,
        })
        .collect();
    by_errno.sort_by_key(|e| (std::cmp::Reverse(e.count), e.errno));
    Some(SyscallsMeasurements {
        duration_s,
        calls,
        futex_wait_ms_per_s: ms_per_s(futex_total),
        top_futex_threads: top
            .into_iter()
            .map(|(tid, (waits, ns))| FutexThreadMeasurement {
                tid,
                futex_waits: waits,
                wait_ms_per_s: ms_per_s(ns),
                blocked_share: ratio(ns as f64, duration_s * 1e9),
            })
            .collect(),
        rseq_registrations: registrations,
        rseq_failed: failed,
        rseq_failed_by_errno: by_errno,
    })
}

/// snake_case serde name of a unit enum value.
fn snake<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        _ => "unknown".into(),
    }
}

/// The rseq verdict in plain words.
pub fn verdict_text(v: crate::rseq::Verdict) -> &'static str {
    use crate::rseq::Verdict;
    match v {
        Verdict::PerCpuCachesPossible => "per-CPU caches possible",
        Verdict::BlockedByGlibcRegistration => {
            "blocked: glibc registered rseq first — TCMalloc's per-CPU caches cannot work"
        }
        Verdict::AllocatorHasNoPerCpuMode => "allocator has no per-CPU mode",
        Verdict::Unknown => "unknown",
    }
}

fn rseq_measurement(r: &crate::rseq::RseqOwnership) -> RseqMeasurement {
    RseqMeasurement {
        verdict: snake(&r.verdict),
        verdict_text: verdict_text(r.verdict).to_string(),
        allocator: snake(&r.allocator),
        glibc_rseq_size: r.glibc_rseq_size,
        method: r.method.clone(),
        confidence: r.confidence.clone(),
    }
}

fn perf(rec: &Recording) -> Option<PerfMeasurements> {
    use std::collections::HashMap;
    let slices: Vec<_> = rec.slices.iter().filter_map(|s| s.perf.as_ref()).collect();
    if slices.is_empty() {
        return None;
    }
    let sum = |f: fn(&crate::recording::model::PerfSlice) -> u64| -> u64 {
        slices.iter().map(|s| f(s)).sum()
    };
    let samples = sum(|s| s.samples);
    let target = sum(|s| s.target_samples);
    let alloc = sum(|s| s.allocator_samples);
    let slow = sum(|s| s.allocator_slow_path_samples);
    let allocator = slices
        .iter()
        .find_map(|s| s.allocator)
        .or(rec.target_code.as_ref().map(|c| c.allocator.kind))
        .map(|k| snake(&k));
    let mut by: HashMap<(Option<&str>, Option<&str>), u64> = HashMap::new();
    for s in &slices {
        for b in &s.by_symbol {
            *by.entry((b.object.as_deref(), b.symbol.as_deref()))
                .or_default() += b.samples;
        }
    }
    let mut by: Vec<_> = by.into_iter().collect();
    by.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    by.truncate(TOP_SYMBOLS);
    Some(PerfMeasurements {
        duration_s: recording_s(rec),
        samples,
        target_samples: target,
        target_cpu_share: ratio(target as f64, samples as f64),
        allocator,
        allocator_samples: alloc,
        allocator_share: ratio(alloc as f64, target as f64),
        allocator_slow_path_samples: slow,
        slow_path_share: ratio(slow as f64, target as f64),
        top_symbols: by
            .into_iter()
            .map(|((object, symbol), n)| PerfSymbolMeasurement {
                symbol: symbol.unwrap_or("?").to_string(),
                object: object.map(str::to_string),
                samples: n,
                share: ratio(n as f64, target as f64),
            })
            .collect(),
    })
}

/// The object of a WiredTiger uprobe attach point
/// ("uprobe/OBJECT:SYMBOL+0xOFF").
fn uprobe_object(attach_point: &str) -> Option<String> {
    let rest = attach_point.strip_prefix("uprobe/")?;
    let (object, _) = rest.rsplit_once(':')?;
    (!object.is_empty()).then(|| object.to_string())
}

fn wiredtiger(rec: &Recording) -> Option<WiredTigerMeasurements> {
    let slices: Vec<_> = rec
        .slices
        .iter()
        .filter_map(|s| s.wiredtiger.as_ref())
        .collect();
    if slices.is_empty() {
        return None;
    }
    let ckpts: Vec<_> = slices.iter().flat_map(|s| &s.checkpoints).collect();
    let total: u64 = ckpts.iter().map(|c| c.duration_ns).sum();
    let max = ckpts.iter().map(|c| c.duration_ns).max().unwrap_or(0);
    let object = rec
        .target_code
        .as_ref()
        .and_then(|c| c.wiredtiger.detected.object.clone())
        .or_else(|| {
            rec.probes
                .iter()
                .filter(|p| p.family == "wiredtiger")
                .flat_map(|p| &p.programs)
                .filter(|p| p.error.is_none())
                .find_map(|p| uprobe_object(&p.attach_point))
        });
    Some(WiredTigerMeasurements {
        checkpoints: ckpts.len() as u64,
        total_ms: total as f64 / 1e6,
        mean_ms: ratio(total as f64, ckpts.len() as f64) / 1e6,
        max_ms: max as f64 / 1e6,
        in_progress: ckpts.iter().any(|c| c.in_progress),
        object,
    })
}

/// The file name of an object path ("/usr/lib/libc.so.6" → "libc.so.6").
pub fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::facts::softirq::testdata::{net_rx_on_cpu0, softirq_probe};

    fn build(rec: &Recording) -> Measurements {
        Measurements::build(rec, &Facts::derive(rec))
    }

    fn close(got: f64, want: f64) {
        assert!((got - want).abs() < 1e-9, "{got}, expected {want}");
    }

    fn close_all(got: &[f64], want: &[f64]) {
        assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-9, "{got:?}, expected {want:?}");
        }
    }

    #[test]
    fn sched_measurements_come_from_the_facts() {
        let m = build(&net_rx_on_cpu0());
        let s = m.sched.expect("sched measured");
        assert_eq!(s.scope, "target");
        close(s.duration_s, 10.0);
        close(s.switches_per_s, 1500.0);
        close(s.observed_switches_per_s, 720.0);
        close(s.involuntary_per_s, 650.0);
        close(s.involuntary_share, 650.0 / 720.0);
        // 720 delays per second: 60 in [4, 8) µs, 100 in [1, 2) ms, 400 in
        // [2, 4) ms, 155 in [4, 8) ms, 5 in [8, 16) ms. p50 = rank 360: 200
        // into the 400 of [2^21, 2^22) ns = 2^21 × 1.5 ns.
        close(s.runq_p50_us, 2_097_152.0 * 1.5 / 1000.0);
        // p99 = rank 712.8: 152.8 into the 155 of [2^22, 2^23) ns.
        close(
            s.runq_p99_us,
            (4_194_304.0 + 4_194_304.0 * 152.8 / 155.0) / 1000.0,
        );
        assert_eq!(s.threads, 4);
        assert_eq!(s.top_classes.len(), 1);
        let conn = &s.top_classes[0];
        assert_eq!(conn.class, "conn");
        assert_eq!(conn.threads, 4);
        close(conn.involuntary_per_s, 650.0);
        close(conn.involuntary_share, 650.0 / 720.0);
        close(conn.runq_mean_us, 3000.0);
    }

    #[test]
    fn top_classes_are_ordered_and_limited() {
        let mut rec = net_rx_on_cpu0();
        for s in &mut rec.slices {
            let sched = s.sched.as_mut().unwrap();
            let template = sched.threads[0].clone();
            for (i, name) in ["WTEvict-1", "ftdc", "repl1", "kworker/0:1", "idle0", "a1"]
                .iter()
                .enumerate()
            {
                let mut t = template.clone();
                t.tid = 2000 + i as u32;
                t.comm = (*name).into();
                t.involuntary = 10 * (i as u64 + 1);
                sched.threads.push(t);
            }
        }
        let s = build(&rec).sched.unwrap();
        let names: Vec<&str> = s.top_classes.iter().map(|c| c.class.as_str()).collect();
        // conn (650/s), then a (60), idle (50), kworker (40), replication (30).
        assert_eq!(names, ["conn", "a", "idle", "kworker", "replication"]);
        close(s.top_classes[1].involuntary_per_s, 60.0);
    }

    #[test]
    fn softirq_measurements_have_per_cpu_rows_and_top_irqs() {
        let m = build(&net_rx_on_cpu0());
        assert!(m.not_recorded.is_empty(), "{:?}", m.not_recorded);
        let s = m.softirq.expect("softirq measured");
        assert_eq!(s.cpu_count, 4);
        close(s.duration_s, 10.0);
        let names: Vec<&str> = s.vectors.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            ["NET_RX", "NET_TX", "TIMER", "RCU", "SCHED", "BLOCK"]
        );
        close_all(
            &s.vectors
                .iter()
                .map(|v| v.time_ms_per_s)
                .collect::<Vec<_>>(),
            &[350.0, 8.0, 4.0, 2.0, 4.8, 0.0],
        );
        close_all(
            &s.vectors.iter().map(|v| v.count_per_s).collect::<Vec<_>>(),
            &[48_000.0, 2000.0, 4000.0, 1000.0, 2400.0, 0.0],
        );
        close_all(
            &s.vectors.iter().map(|v| v.imbalance).collect::<Vec<_>>(),
            &[300.0 / 87.5, 1.0, 1.0, 1.2, 1.6 / 1.2, 0.0],
        );

        assert_eq!(
            s.cpus.iter().map(|c| c.cpu).collect::<Vec<_>>(),
            [0, 1, 2, 3]
        );
        close_all(&s.cpus[0].time_ms_per_s, &[300.0, 2.0, 1.0, 0.6, 1.6, 0.0]);
        close(s.cpus[0].all_ms_per_s, 305.25); // HRTIMER's 0.05 included
        close(s.cpus[0].share, 0.30525);
        close_all(&s.cpus[3].time_ms_per_s, &[10.0, 2.0, 1.0, 0.6, 0.8, 0.0]);
        close(s.cpus[3].all_ms_per_s, 14.4);
        assert_eq!(s.other_cpus, None);
        close(s.time_ms_per_s, 368.85);
        close(s.count_per_s, 57_410.0);
        close(s.cpu_mean_share, 368.85 / 4000.0);
        assert_eq!(s.cpu_max_share_cpu, 0);
        close(s.cpu_max_share, 0.30525);

        close(s.net_rx_imbalance, 300.0 / 87.5);
        assert_eq!(s.net_rx_busiest_cpu, 0);
        close(s.net_rx_busiest_share, 300.0 / 350.0);
        close(s.net_rx_time_share_of_cpu, 0.3);

        close(s.hardirq_count_per_s, 22_505.0);
        close(s.hardirq_time_ms_per_s, 45.01);
        let irqs: Vec<(u32, &str, u32)> = s
            .top_hardirqs
            .iter()
            .map(|h| (h.irq, h.name.as_str(), h.busiest_cpu))
            .collect();
        assert_eq!(
            irqs,
            [
                (45, "eth0-TxRx-0", 0),
                (46, "eth0-TxRx-1", 1),
                (24, "nvme0q1", 2)
            ]
        );
        close(s.top_hardirqs[0].count_per_s, 20_000.0);
        close(s.top_hardirqs[0].time_ms_per_s, 40.0);
        close(s.top_hardirqs[2].time_ms_per_s, 1.0);
        assert_eq!(
            s.drops,
            SoftirqDropsReport {
                unmatched_exit: 3,
                irq_map_full: 0,
                bad_vector: 0,
                total: 3
            }
        );
    }

    #[test]
    fn large_hosts_show_the_busiest_cpus_and_a_mean_of_the_others() {
        // 20 CPUs: NET_RX time 10 ms on CPU i for i in 0..20, 1000 ms on CPU 7.
        let mut rec = net_rx_on_cpu0();
        rec.host.cpu_count = 20;
        for s in &mut rec.slices {
            let softirq = s.softirq.as_mut().unwrap();
            softirq.hardirqs.clear();
            softirq.vectors = vec![crate::recording::model::SoftirqVector {
                name: "NET_RX".into(),
                count_per_cpu: vec![1; 20],
                time_ns_per_cpu: (0..20u64)
                    .map(|i| if i == 7 { 100_000_000 } else { i * 1_000_000 })
                    .collect(),
            }];
        }
        let s = build(&rec).softirq.unwrap();
        assert_eq!(s.cpu_count, 20);
        // The 8 busiest: 7 and 19..=13, shown in CPU order.
        assert_eq!(
            s.cpus.iter().map(|c| c.cpu).collect::<Vec<_>>(),
            [7, 13, 14, 15, 16, 17, 18, 19]
        );
        close(s.cpus[0].time_ms_per_s[0], 100.0);
        let others = s.other_cpus.expect("others summarised");
        assert_eq!(others.cpus, 12);
        // CPUs 0..=6 and 8..=12: (0+…+6 + 8+…+12) ms / 12 = 71 / 12.
        close(others.time_ms_per_s[0], 71.0 / 12.0);
        close(others.all_ms_per_s, 71.0 / 12.0);
        close(others.share, 71.0 / 12.0 / 1000.0);
        assert!(s.top_hardirqs.is_empty());
    }

    #[test]
    fn families_without_data_are_listed_with_the_reason() {
        let mut rec = net_rx_on_cpu0();
        rec.probes[1] = softirq_probe(Some("tracepoint softirq_entry not found"));
        rec.probes[0].programs[0].error = Some("permission denied".into());
        rec.probes.push(crate::recording::model::ProbeStatus {
            family: "alloc".into(),
            programs: vec![crate::recording::model::ProgramStatus {
                name: "malloc".into(),
                attach_point: "uprobe/malloc".into(),
                error: Some("no such symbol".into()),
            }],
        });
        let m = build(&rec);
        assert_eq!(m.sched, None);
        assert_eq!(m.softirq, None);
        let notes: Vec<(&str, &str)> = m
            .not_recorded
            .iter()
            .map(|n| (n.family.as_str(), n.reason.as_str()))
            .collect();
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert_eq!(notes[0].0, "sched");
        assert!(
            notes[0]
                .1
                .contains("sched_switch (tp_btf/sched_switch): permission denied"),
            "{notes:?}"
        );
        assert_eq!(notes[1].0, "softirq");
        assert!(
            notes[1]
                .1
                .starts_with("the softirq probe attached only partly"),
            "{notes:?}"
        );
        assert_eq!(
            notes[2],
            (
                "alloc",
                "the alloc probe did not attach: malloc (uprobe/malloc): no such symbol"
            )
        );
        // The host's RPS/RFS state does not depend on any probe.
        assert!(m.net.is_some());
    }

    #[test]
    fn net_measurements_per_interface() {
        let m = build(&net_rx_on_cpu0());
        let n = m.net.expect("net state readable");
        assert!(!n.rps_enabled);
        assert!(n.rfs_enabled);
        assert_eq!(n.rps_sock_flow_entries, 32_768);
        assert_eq!(
            n.interfaces,
            [
                InterfaceMeasurement {
                    name: "eth0".into(),
                    rx_queues: 4,
                    rps_queues: 0,
                    rfs_queues: 4
                },
                InterfaceMeasurement {
                    name: "eth1".into(),
                    rx_queues: 2,
                    rps_queues: 0,
                    rfs_queues: 0
                },
            ]
        );
        let mut rec = net_rx_on_cpu0();
        rec.host.net = None;
        assert_eq!(build(&rec).net, None);
    }

    /// `net_rx_on_cpu0` (10 one-second slices) plus syscalls, perf and
    /// WiredTiger slices and rseq ownership, identical in every slice except
    /// where said.
    fn with_new_families() -> Recording {
        use crate::recording::model::{
            Checkpoint, PerfSlice, PerfSymbol, ProbeStatus, ProgramStatus, RseqCall, SyscallCalls,
            SyscallsSlice, ThreadSyscallSlice, WiredTigerSlice,
        };
        let mut rec = net_rx_on_cpu0();
        let probe = |family: &str, attach_point: &str, error: Option<&str>| ProbeStatus {
            family: family.into(),
            programs: vec![ProgramStatus {
                name: format!("mdiag_{family}"),
                attach_point: attach_point.into(),
                error: error.map(str::to_string),
            }],
        };
        rec.probes.push(probe("syscalls", "tp_btf/sys_enter", None));
        rec.probes
            .push(probe("perf", "perf_event/cpu-clock@99Hz", None));
        rec.probes.push(probe(
            "wiredtiger",
            "uprobe//usr/bin/mongod:__wt_txn_checkpoint+0x1a2b",
            None,
        ));
        let hist = |buckets: &[(usize, u64)]| {
            let mut h = vec![0; buckets.iter().map(|b| b.0 + 1).max().unwrap()];
            for &(i, n) in buckets {
                h[i] = n;
            }
            h
        };
        let n = rec.slices.len();
        for (i, s) in rec.slices.iter_mut().enumerate() {
            let thread = |tid: u32, ns: u64| ThreadSyscallSlice {
                tid,
                tgid: 1000,
                futex_waits: 100,
                futex_wait_ns: ns,
                mem_calls: 0,
                mem_ns: 0,
                ..Default::default()
            };
            let rseq = |tid: u32, ret: i64, flags: u32| RseqCall {
                tid,
                tgid: 1000,
                ret,
                flags,
                len: 32,
                sig: 0x5305_3053,
                ..RseqCall::default()
            };
            s.syscalls = Some(SyscallsSlice {
                calls: vec![
                    SyscallCalls {
                        name: "mmap".into(),
                        count: 100,
                        errors: 0,
                        time_ns: 500_000,
                        bytes: 100 * 65_536,
                        hist_log2_ns: hist(&[(12, 99), (16, 1)]),
                    },
                    SyscallCalls {
                        name: "futex_wait".into(),
                        count: 500,
                        errors: 50,
                        time_ns: 1_050_000_000,
                        bytes: 0,
                        hist_log2_ns: hist(&[(20, 400), (21, 100)]),
                    },
                ],
                threads: vec![
                    thread(1001, 600_000_000),
                    thread(1002, 300_000_000),
                    thread(1003, 100_000_000),
                    thread(1004, 50_000_000),
                ],
                rseq: if i == 0 {
                    vec![
                        rseq(1001, 0, 0),
                        rseq(1001, -22, 0),
                        rseq(1002, 0, 0),
                        rseq(1002, -22, 0),
                        rseq(1003, 0, 1), // unregistration: not counted
                    ]
                } else {
                    Vec::new()
                },
                ..SyscallsSlice::default()
            });
            let sym = |object: Option<&str>, symbol: Option<&str>, samples: u64| PerfSymbol {
                object: object.map(str::to_string),
                symbol: symbol.map(str::to_string),
                samples,
                allocator: false,
                slow_path: None,
            };
            s.perf = Some(PerfSlice {
                freq_hz: 99,
                samples: 396,
                idle_samples: 200,
                observed_samples: 99,
                target_samples: 99,
                allocator: Some(crate::symbols::AllocatorKind::GoogleTcmalloc),
                allocator_samples: 20,
                allocator_slow_path_samples: 5,
                by_symbol: vec![
                    sym(
                        Some("/usr/bin/mongod"),
                        Some("tcmalloc::CentralFreeList::Populate"),
                        10,
                    ),
                    sym(
                        Some("/usr/lib64/libc.so.6"),
                        Some("__memmove_avx_unaligned_erms"),
                        8,
                    ),
                    sym(Some("[kernel]"), Some("do_syscall_64"), 6),
                    sym(Some("/usr/bin/mongod"), Some("__wt_row_search"), 5),
                    sym(
                        Some("/usr/bin/mongod"),
                        Some("mongo::BSONObj::woCompare"),
                        4,
                    ),
                    sym(None, None, 3),
                ],
                ..PerfSlice::default()
            });
            let ckpt = |ms: u64, in_progress: bool| Checkpoint {
                tid: 1010,
                start_ns: 1_000_000_000 * i as u64,
                duration_ns: ms * 1_000_000,
                ret: 0,
                in_progress,
            };
            s.wiredtiger = Some(WiredTigerSlice {
                checkpoints: match i {
                    2 => vec![ckpt(1500, false)],
                    6 => vec![ckpt(2500, false)],
                    _ if i == n - 1 => vec![ckpt(800, true)],
                    _ => Vec::new(),
                },
                ..WiredTigerSlice::default()
            });
        }
        rec.rseq = Some(crate::rseq::RseqOwnership {
            allocator: crate::symbols::AllocatorKind::GoogleTcmalloc,
            glibc_rseq_size: Some(32),
            verdict: crate::rseq::Verdict::BlockedByGlibcRegistration,
            method: "glibc's __rseq_size read from the target".into(),
            confidence: "high".into(),
            threads: Vec::new(),
        });
        rec
    }

    #[test]
    fn new_families_are_summed_over_the_recording() {
        let rec = with_new_families();
        assert_eq!(rec.slices.len(), 10);
        let m = build(&rec);
        assert!(m.not_recorded.is_empty(), "{:?}", m.not_recorded);

        let s = m.syscalls.expect("syscalls measured");
        close(s.duration_s, 10.0);
        let names: Vec<&str> = s.calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["futex_wait", "mmap"]);
        let (futex, mmap) = (&s.calls[0], &s.calls[1]);
        close(mmap.count_per_s, 100.0);
        close(mmap.mean_us, 5.0);
        // 1000 calls: 990 in [4096, 8192) ns, 10 in [65536, 131072); p99 =
        // rank 990, the top of the first bucket.
        close(mmap.p99_us.unwrap(), 8.192);
        close(mmap.bytes_per_s.unwrap(), 6_553_600.0); // 6.25 MiB/s
        close(futex.count_per_s, 500.0);
        assert_eq!(futex.errors, 500);
        close(futex.mean_us, 2100.0);
        // 5000 waits: 4000 in [2^20, 2^21), 1000 in [2^21, 2^22) ns; p99 =
        // rank 4950: 950 into the 1000 of the second bucket.
        close(futex.p99_us.unwrap(), (2_097_152.0 * 1.95) / 1000.0);
        assert_eq!(futex.bytes_per_s, None);
        close(s.futex_wait_ms_per_s, 1050.0);
        let top: Vec<(u32, f64)> = s
            .top_futex_threads
            .iter()
            .map(|t| (t.tid, t.blocked_share))
            .collect();
        assert_eq!(top.len(), 3);
        assert_eq!(
            top.iter().map(|t| t.0).collect::<Vec<_>>(),
            [1001, 1002, 1003]
        );
        close_all(
            &top.iter().map(|t| t.1).collect::<Vec<_>>(),
            &[0.6, 0.3, 0.1],
        );
        assert_eq!(s.rseq_registrations, 4);
        assert_eq!(s.rseq_failed, 2);
        assert_eq!(
            s.rseq_failed_by_errno,
            [ErrnoCount {
                errno: 22,
                name: "EINVAL".into(),
                count: 2
            }]
        );

        let r = m.rseq.expect("rseq ownership");
        assert_eq!(r.verdict, "blocked_by_glibc_registration");
        assert_eq!(r.allocator, "google_tcmalloc");
        assert_eq!(r.glibc_rseq_size, Some(32));

        let p = m.perf.expect("perf measured");
        assert_eq!((p.samples, p.target_samples), (3960, 990));
        close(p.target_cpu_share, 0.25);
        assert_eq!(p.allocator.as_deref(), Some("google_tcmalloc"));
        close(p.allocator_share, 200.0 / 990.0);
        close(p.slow_path_share, 50.0 / 990.0);
        let syms: Vec<(&str, u64)> = p
            .top_symbols
            .iter()
            .map(|t| (t.symbol.as_str(), t.samples))
            .collect();
        assert_eq!(
            syms,
            [
                ("tcmalloc::CentralFreeList::Populate", 100),
                ("__memmove_avx_unaligned_erms", 80),
                ("do_syscall_64", 60),
                ("__wt_row_search", 50),
                ("mongo::BSONObj::woCompare", 40),
            ]
        );
        close(p.top_symbols[0].share, 100.0 / 990.0);

        let w = m.wiredtiger.expect("wiredtiger measured");
        assert_eq!(w.checkpoints, 3);
        close(w.total_ms, 4800.0);
        close(w.mean_ms, 1600.0);
        close(w.max_ms, 2500.0);
        assert!(w.in_progress);
        assert_eq!(w.object.as_deref(), Some("/usr/bin/mongod"));
    }

    fn report(rec: &Recording) -> crate::report::Report {
        crate::explain::explain(
            rec,
            &crate::rules::RuleSet::builtin().unwrap(),
            Some("x86_64"),
            None,
        )
        .unwrap()
    }

    #[test]
    fn every_format_shows_the_new_families() {
        let report = report(&with_new_families());
        let text = crate::report::terminal::render(&report, false);
        let section = &text[text.find("\nMeasurements\n").expect("section")..];
        for want in [
            "Syscalls",
            "futex_wait",
            "2100", // mean µs
            "4089", // p99 µs
            "8.19", // mmap p99 µs
            "6.25", // mmap MiB/s
            "futex wait: 1050 ms/s blocked in total",
            "tid 1001 60.0%, tid 1002 30.0%, tid 1003 10.0%",
            "rseq: 4 registrations seen, 2 failed (2 EINVAL)",
            "blocked: glibc registered rseq first — TCMalloc's per-CPU caches cannot work",
            "allocator google_tcmalloc, glibc __rseq_size 32, confidence high",
            "3960 samples; target 25.0% of the sampled CPU time",
            "(google_tcmalloc) 20.2% of the target's samples, slow paths 5.1%",
            "tcmalloc::CentralFreeList::Populate",
            "libc.so.6",
            "3 checkpoints, total 4800 ms, mean 1600 ms, max 2500 ms",
            "one still running at the end",
            "WiredTiger in /usr/bin/mongod",
        ] {
            assert!(
                section
                    .replace('\n', " ")
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
                    .contains(want),
                "{want:?} missing in:\n{section}"
            );
        }
        for line in section.lines() {
            assert!(line.chars().count() <= 100, "too wide: {line}");
        }
        assert!(!text.contains('\u{1b}'));
        assert!(crate::report::terminal::render(&report, true).contains('\u{1b}'));

        let md = crate::report::markdown::render(&report);
        for want in [
            "### Syscalls",
            "| Syscall | Calls/s | Errors | Mean (µs) | p99 (µs) | MiB/s |",
            "| futex_wait | 500 | 500 | 2100 | 4089 | - |",
            "| mmap | 100 | 0 | 5.00 | 8.19 | 6.25 |",
            "| 1001 | 1000 | 600 | 60.0% |",
            "- Rseq: 4 registrations seen, 2 failed (2 EINVAL).",
            "### rseq ownership",
            "Blocked: glibc registered rseq first",
            "### Perf",
            "| `tcmalloc::CentralFreeList::Populate` | mongod | 100 | 10.1 |",
            "| `__memmove_avx_unaligned_erms` | libc.so.6 | 80 | 8.1 |",
            "### WiredTiger",
            "3 checkpoints, total 4800 ms, mean 1600 ms, max 2500 ms; one still running",
        ] {
            assert!(md.contains(want), "{want:?} missing in:\n{md}");
        }

        let json = crate::report::json::render(&report).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let base: serde_json::Value = serde_json::from_str(
            &crate::report::json::render(&self::report(&net_rx_on_cpu0())).unwrap(),
        )
        .unwrap();
        let keys = |v: &serde_json::Value| -> Vec<String> {
            v.as_object().unwrap().keys().cloned().collect()
        };
        assert_eq!(keys(&v), keys(&base));
        assert!(keys(&v).contains(&"measurements".to_string()));
        let m = &v["measurements"];
        assert_eq!(
            keys(m),
            [
                "alloc",
                "contention",
                "host_settings",
                "mongod",
                "net",
                "not_recorded",
                "perf",
                "rseq",
                "sched",
                "softirq",
                "syscalls",
                "timeline",
                "wiredtiger"
            ]
        );
        assert_eq!(m["syscalls"]["futex_wait_ms_per_s"], 1050.0);
        assert_eq!(m["syscalls"]["calls"][1]["bytes_per_s"], 6_553_600.0);
        assert_eq!(m["perf"]["target_cpu_share"], 0.25);
        assert_eq!(
            m["perf"]["top_symbols"][1]["object"],
            "/usr/lib64/libc.so.6"
        );
        assert_eq!(m["wiredtiger"]["checkpoints"], 3);
        assert_eq!(m["wiredtiger"]["in_progress"], true);
        assert_eq!(m["rseq"]["verdict"], "blocked_by_glibc_registration");
        assert_eq!(m["rseq"]["glibc_rseq_size"], 32);
    }

    #[test]
    fn new_families_without_data_say_why() {
        let mut rec = with_new_families();
        for s in &mut rec.slices {
            s.syscalls = None;
            s.wiredtiger = None;
        }
        let wt = rec
            .probes
            .iter_mut()
            .find(|p| p.family == "wiredtiger")
            .unwrap();
        wt.programs[0].error = Some("not applicable: no WiredTiger in the target".into());
        let m = build(&rec);
        assert_eq!(m.syscalls, None);
        assert_eq!(m.wiredtiger, None);
        assert!(m.perf.is_some());
        let notes: Vec<(&str, &str)> = m
            .not_recorded
            .iter()
            .map(|n| (n.family.as_str(), n.reason.as_str()))
            .collect();
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert_eq!(
            notes[0],
            (
                "syscalls",
                "the syscalls probe attached but recorded nothing"
            )
        );
        assert_eq!(notes[1].0, "wiredtiger");
        assert!(
            notes[1].1.contains("not applicable: no WiredTiger"),
            "{notes:?}"
        );
        let text = crate::report::terminal::render(&report(&rec), false);
        assert!(text.contains("wiredtiger not measured:"), "{text}");
    }
}
