//! Evidence facts derived from a [`Recording`]: the variables rule conditions see.
//!
//! Rules never read the recording directly; they read a small, documented set
//! of named numbers grouped by where they come from (`host`, `recording`,
//! `target`, `sched`, `softirq`, `net`, later allocator, WiredTiger, ...). Deriving them in one
//! place keeps the arithmetic (sums over slices, percentiles, rates) tested
//! once, and lets a rule say which groups it `requires`: a group that was not
//! recorded is *absent* with a reason, so the rule is reported as "not
//! assessed" instead of being evaluated on zeros.
//!
//! Conventions: counts are integers, ratios and durations are floats; shares
//! are 0..=1; rates are per second of recorded time; times are in µs unless the
//! name says otherwise. A share or percentile over zero events is 0.
//!
//! Percentiles come from the log2 run-queue histogram (`[i]` counts delays in
//! [2^i, 2^(i+1)) ns; `[0]` covers [0, 2) ns). The value is interpolated
//! linearly inside the bucket where the cumulative count reaches
//! `p × total`, so it is exact at bucket edges and at most a factor of 2 off
//! inside a bucket (the width of the bucket).

use std::collections::{BTreeMap, BTreeSet};

use semver::Version;
use serde::Serialize;

use super::ranking::normalise_arch;
use crate::recording::model::{Recording, SchedSlice, Slice};

pub mod allocator;
pub mod contention;
pub mod filesystem;
pub mod mongod;
pub mod softirq;
pub mod storage;
pub mod tuning;

/// Every fact group this build can derive, in display order.
pub const FACT_GROUPS: &[&str] = &[
    "host",
    "recording",
    "target",
    "sched",
    "softirq",
    "net",
    "tuning",
    "allocator",
    "contention",
    "mongod",
    "storage",
    "filesystem",
];

/// One fact value: what a CEL expression sees.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FactValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    Text(String),
    Map(BTreeMap<String, FactValue>),
}

impl FactValue {
    /// The value as CEL sees it.
    pub fn to_cel(&self) -> cel::Value {
        match self {
            FactValue::Bool(b) => cel::Value::Bool(*b),
            FactValue::Int(i) => cel::Value::Int(*i),
            FactValue::Float(f) => cel::Value::Float(*f),
            FactValue::Text(s) => cel::Value::from(s.clone()),
            FactValue::Map(m) => map_to_cel(m),
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self {
            FactValue::Int(i) => Some(*i as f64),
            FactValue::Float(f) => Some(*f),
            _ => None,
        }
    }
}

pub(crate) fn map_to_cel(map: &BTreeMap<String, FactValue>) -> cel::Value {
    let converted: std::collections::HashMap<String, cel::Value> =
        map.iter().map(|(k, v)| (k.clone(), v.to_cel())).collect();
    cel::Value::from(converted)
}

/// A fact group's name → its facts.
pub type FactGroup = BTreeMap<String, FactValue>;

/// All facts of one recording.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Facts {
    /// Groups bound as CEL variables. `target` is always bound (with
    /// `present = false` host-wide) so conditions can test it.
    groups: BTreeMap<String, FactGroup>,
    /// Groups that a rule cannot rely on, with the reason ("the sched probe
    /// did not attach: ..."). A group can be both bound and absent (`target`).
    absent: BTreeMap<String, String>,
    /// Kernel release normalised to major.minor.patch; `None` when not understood.
    pub kernel_version: Option<Version>,
    /// mongod version; `None` until recordings carry mongod data.
    pub mongod_version: Option<Version>,
    /// Memory allocator of the target as rules name it ("google_tcmalloc",
    /// "gperftools", "jemalloc", "glibc", "unknown" for another one); `None`
    /// when not analysed.
    pub allocator: Option<String>,
    /// Why the host's architecture is unknown, when it is (the recording
    /// names none: FTDC without hostInfo).
    pub arch_unknown: Option<String>,
    /// Why the kernel release is unknown, when the recording names none.
    pub kernel_unknown: Option<String>,
    /// Why the allocator is unknown, when `allocator` is `None` for a known
    /// cause (FTDC without buildInfo).
    pub allocator_unknown: Option<String>,
    /// Why the mongod version is unknown although mongod data was read
    /// (FTDC without buildInfo).
    pub mongod_version_unknown: Option<String>,
}

/// Whether a recording's architecture or kernel release field is unset: empty,
/// or "unknown" (what a recording made from FTDC without hostInfo holds).
pub fn unnamed(field: &str) -> bool {
    let f = field.trim();
    f.is_empty() || f.eq_ignore_ascii_case("unknown")
}

impl Facts {
    /// Derives every fact group from `rec`.
    pub fn derive(rec: &Recording) -> Facts {
        let mut facts = Facts {
            kernel_version: parse_kernel_version(&rec.host.kernel_release),
            ..Facts::default()
        };
        facts.groups.insert(
            "host".into(),
            host_facts(rec, facts.kernel_version.as_ref()),
        );
        facts
            .groups
            .insert("recording".into(), recording_facts(rec));
        facts.groups.insert("target".into(), target_facts(rec));
        if rec.target.is_none() {
            facts.absent.insert(
                "target".into(),
                "host-wide recording: no target process was observed".into(),
            );
        }
        facts.insert_or_absent("sched", sched_facts(rec));
        facts.insert_or_absent("softirq", softirq::softirq_facts(rec));
        facts.insert_or_absent(
            "net",
            rec.host
                .net
                .as_ref()
                .map(softirq::net_facts)
                .ok_or_else(|| softirq::NET_UNREADABLE.to_string()),
        );
        facts.insert_or_absent("tuning", tuning::tuning_facts(rec));
        facts.insert_or_absent("allocator", allocator::allocator_facts(rec));
        facts.allocator = allocator::allocator_of(rec).map(str::to_owned);
        facts.insert_or_absent("contention", contention::contention_facts(rec));
        facts.insert_or_absent("mongod", mongod::mongod_facts(rec));
        facts.insert_or_absent("storage", storage::storage_facts(rec));
        facts.insert_or_absent("filesystem", filesystem::filesystem_facts(rec));
        if let Some(info) = rec.mongod.as_ref().and_then(|m| m.info.as_ref()) {
            facts.mongod_version = info
                .version
                .as_deref()
                .and_then(|v| Version::parse(v.trim()).ok());
            if facts.allocator.is_none() {
                facts.allocator = mongod::allocator_kind(info);
            }
        }
        // An FTDC directory without metadata says nothing of the host or
        // the build: say so rather than judge rules on empty names.
        let ftdc = rec.mongod.as_ref().and_then(|m| m.ftdc.as_ref());
        let no_metadata = ftdc.is_some_and(|f| f.no_metadata);
        let why = |reply: &str| match ftdc {
            Some(f) if f.no_metadata => {
                format!("the FTDC directory has no metadata document ({reply})")
            }
            Some(_) => format!("the FTDC metadata's {reply} does not name it"),
            None => "the recording does not name it".to_string(),
        };
        if unnamed(&rec.host.arch) {
            facts.arch_unknown = Some(why("hostInfo"));
        }
        if unnamed(&rec.host.kernel_release) {
            facts.kernel_unknown = Some(why("hostInfo"));
        }
        if facts.allocator.is_none() && no_metadata {
            facts.allocator_unknown = Some(why("buildInfo"));
        }
        if facts.mongod_version.is_none() && no_metadata {
            facts.mongod_version_unknown = Some(why("buildInfo"));
        }
        facts.add_overcommit_advice();
        facts
    }

    /// `tuning.overcommit_recommended`: 1 for Google TCMalloc (mongod 8,
    /// whose THP unit in MongoDB's documentation sets vm.overcommit_memory =
    /// 1), else the kernel's default heuristic 0.
    fn add_overcommit_advice(&mut self) {
        let want = i64::from(self.allocator.as_deref() == Some("google_tcmalloc"));
        if let Some(t) = self.groups.get_mut("tuning") {
            t.insert("overcommit_recommended".into(), FactValue::Int(want));
        }
    }

    /// Binds `group`, or records why it is absent.
    fn insert_or_absent(&mut self, name: &str, group: Result<FactGroup, String>) {
        match group {
            Ok(group) => {
                self.groups.insert(name.into(), group);
            }
            Err(reason) => {
                self.absent.insert(name.into(), reason);
            }
        }
    }

    /// The facts of one group when it is bound.
    pub fn group(&self, name: &str) -> Option<&FactGroup> {
        self.groups.get(name)
    }

    /// All bound groups.
    pub fn groups(&self) -> &BTreeMap<String, FactGroup> {
        &self.groups
    }

    /// Why `name` cannot be relied on, or `None` when it was recorded.
    pub fn absent_reason(&self, name: &str) -> Option<&str> {
        self.absent.get(name).map(String::as_str)
    }

    /// A fact by dotted path, e.g. `"sched.runq_p99_us"`.
    pub fn get(&self, path: &str) -> Option<&FactValue> {
        let mut parts = path.split('.');
        let group = self.groups.get(parts.next()?)?;
        let mut value = group.get(parts.next()?)?;
        for part in parts {
            match value {
                FactValue::Map(m) => value = m.get(part)?,
                _ => return None,
            }
        }
        Some(value)
    }

    /// The bound groups as JSON (for the report's `facts` section).
    pub fn to_json(&self) -> BTreeMap<String, serde_json::Value> {
        self.groups
            .iter()
            .map(|(name, group)| {
                let value = serde_json::to_value(group).unwrap_or(serde_json::Value::Null);
                (name.clone(), value)
            })
            .collect()
    }

    /// Facts of a made-up recording in which every group is present and every
    /// number is non-zero. Rules are evaluated against it when they are loaded,
    /// so a misspelt fact name or a type error is reported then, naming the
    /// file, rather than when explaining a real recording.
    pub(crate) fn example() -> Facts {
        let mut rec = example_recording();
        // Two seconds, so that mongod's counters give rates.
        let mut second = rec.slices[0].clone();
        second.start_ms += second.duration_ms;
        rec.slices.push(second);
        rec.ended_at += chrono::TimeDelta::seconds(1);
        mongod::fill_example(&mut rec);
        Facts::derive(&rec)
    }
}

/// "6.18.44-fc-v769" → 6.18.44, "5.15.0-91-generic" → 5.15.0, "6.6" → 6.6.0.
/// `None` when the release does not start with a number.
pub fn parse_kernel_version(release: &str) -> Option<Version> {
    let mut numbers = [0u64; 3];
    let mut rest = release.trim();
    for (i, slot) in numbers.iter_mut().enumerate() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            if i == 0 {
                return None;
            }
            break;
        }
        *slot = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        match rest.strip_prefix('.') {
            Some(after) => rest = after,
            None => break,
        }
    }
    Some(Version::new(numbers[0], numbers[1], numbers[2]))
}

/// The `p` percentile (0..=1) of a log2 histogram of nanoseconds, interpolated
/// linearly inside the bucket (see the module docs). `None` when it is empty.
pub fn log2_hist_percentile_ns(hist: &[u64], p: f64) -> Option<f64> {
    let total: u64 = hist.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = p.clamp(0.0, 1.0) * total as f64;
    let mut before = 0u64;
    for (i, &count) in hist.iter().enumerate() {
        if count == 0 {
            continue;
        }
        if (before + count) as f64 >= rank {
            let (lo, hi) = bucket_bounds_ns(i);
            let within = ((rank - before as f64) / count as f64).clamp(0.0, 1.0);
            return Some(lo + (hi - lo) * within);
        }
        before += count;
    }
    // Unreachable with p <= 1, kept for float rounding: the top of the last bucket.
    hist.iter()
        .rposition(|&c| c > 0)
        .map(|i| bucket_bounds_ns(i).1)
}

/// [low, high) of bucket `i` in ns; bucket 0 also holds 0 ns.
fn bucket_bounds_ns(i: usize) -> (f64, f64) {
    let exp = i32::try_from(i).unwrap_or(i32::MAX);
    let lo = if i == 0 { 0.0 } else { 2f64.powi(exp) };
    (lo, 2f64.powi(exp.saturating_add(1)))
}

/// The class of a thread for per-class breakdowns: mongod's own classes
/// where the name is one of mongod's threads ([`crate::threads::thread_class`]:
/// "conn1234" → "conn", "WTEvict-3" → "eviction", "Checkpointer" →
/// "checkpointer"), so the scheduler and contention figures group alike;
/// otherwise the name without trailing digits and separators
/// ("mdiag-spin-2" → "mdiag-spin"), and the part before '/' for kernel
/// threads ("kworker/3:1H" → "kworker").
pub fn thread_class(comm: &str) -> String {
    let mongod = crate::threads::thread_class(comm);
    if mongod != crate::threads::OTHER {
        return mongod.to_string();
    }
    let base = match comm.split_once('/') {
        Some((head, _)) if !head.is_empty() => head,
        _ => comm,
    };
    let trimmed = base.trim_end_matches(|c: char| {
        c.is_ascii_digit() || matches!(c, '-' | '_' | '.' | ':' | ' ' | '#')
    });
    if trimmed.is_empty() {
        base.to_string()
    } else {
        trimmed.to_string()
    }
}

fn int(v: u64) -> FactValue {
    FactValue::Int(i64::try_from(v).unwrap_or(i64::MAX))
}

fn float(v: f64) -> FactValue {
    FactValue::Float(if v.is_finite() { v } else { 0.0 })
}

fn text(s: impl Into<String>) -> FactValue {
    FactValue::Text(s.into())
}

fn ratio(num: f64, den: f64) -> f64 {
    if den > 0.0 { num / den } else { 0.0 }
}

fn host_facts(rec: &Recording, kernel: Option<&Version>) -> FactGroup {
    let h = &rec.host;
    let mut g = FactGroup::new();
    let arch = normalise_arch(&h.arch).unwrap_or_else(|| h.arch.to_ascii_lowercase());
    g.insert("arch".into(), text(arch));
    g.insert("hostname".into(), text(h.hostname.clone()));
    g.insert("kernel".into(), text(h.kernel_release.clone()));
    g.insert("kernel_parsed".into(), FactValue::Bool(kernel.is_some()));
    let (major, minor, patch) = kernel.map_or((0, 0, 0), |v| (v.major, v.minor, v.patch));
    g.insert("kernel_major".into(), int(major));
    g.insert("kernel_minor".into(), int(minor));
    g.insert("kernel_patch".into(), int(patch));
    let eevdf = kernel.is_some_and(|v| (v.major, v.minor) >= (6, 6));
    g.insert("eevdf".into(), FactValue::Bool(eevdf));
    g.insert("cpu_count".into(), int(u64::from(h.cpu_count)));
    g.insert("cpu_model".into(), text(h.cpu_model.clone()));
    g.insert(
        "sched_features_readable".into(),
        FactValue::Bool(h.sched_features.is_some()),
    );
    g.insert(
        "sched_features".into(),
        text(h.sched_features.clone().unwrap_or_default()),
    );
    g.insert(
        "wakeup_preemption".into(),
        text(sched_feature_state(
            h.sched_features.as_deref(),
            "WAKEUP_PREEMPTION",
        )),
    );
    g.insert(
        "sched_features_error".into(),
        text(h.sched_features_error.clone().unwrap_or_default()),
    );
    g.insert(
        "lockdown".into(),
        text(h.lockdown.clone().unwrap_or_default()),
    );
    // Writes to debugfs (the scheduler features) are refused in any lockdown
    // mode but "none"; the file may also be absent or unreadable.
    let locked = h.lockdown.as_deref().is_some_and(|m| m != "none");
    g.insert(
        "sched_features_writable".into(),
        FactValue::Bool(h.sched_features.is_some() && !locked),
    );
    g.insert("net_readable".into(), FactValue::Bool(h.net.is_some()));
    if let Some(p) = h.page_size {
        g.insert("page_size".into(), int(p));
    }
    g
}

/// "on" / "off" / "unknown" for one feature in /sys/kernel/debug/sched/features
/// (a feature is listed as `NAME` when on and `NO_NAME` when off).
pub fn sched_feature_state(features: Option<&str>, name: &str) -> &'static str {
    let Some(features) = features else {
        return "unknown";
    };
    for token in features.split_whitespace() {
        if token == name {
            return "on";
        }
        if token.strip_prefix("NO_") == Some(name) {
            return "off";
        }
    }
    "unknown"
}

fn recording_duration_s(rec: &Recording) -> f64 {
    let ms = (rec.ended_at - rec.started_at).num_milliseconds();
    if ms > 0 {
        ms as f64 / 1000.0
    } else {
        rec.slices.iter().map(|s| s.duration_ms).sum::<u64>() as f64 / 1000.0
    }
}

fn recording_facts(rec: &Recording) -> FactGroup {
    let mut g = FactGroup::new();
    g.insert("duration_s".into(), float(recording_duration_s(rec)));
    g.insert(
        "requested_duration_s".into(),
        float(rec.requested_duration_ms as f64 / 1000.0),
    );
    g.insert("slices".into(), int(rec.slices.len() as u64));
    g.insert("stop_reason".into(), text(rec.stop_reason.clone()));
    g.insert("host_wide".into(), FactValue::Bool(rec.target.is_none()));
    g
}

fn target_facts(rec: &Recording) -> FactGroup {
    let mut g = FactGroup::new();
    let t = rec.target.as_ref();
    g.insert("present".into(), FactValue::Bool(t.is_some()));
    g.insert("pid".into(), int(t.map_or(0, |t| u64::from(t.pid))));
    g.insert("comm".into(), text(t.map_or("", |t| t.comm.as_str())));
    g.insert("how".into(), text(t.map_or("", |t| t.how.as_str())));
    g.insert(
        "exited".into(),
        FactValue::Bool(t.is_some_and(|t| t.exit_code.is_some())),
    );
    g
}

/// Why the facts of probe family `family` ("sched", "softirq", ...) cannot be
/// relied on, or `None` when every program of the family attached.
pub fn family_unavailable(rec: &Recording, family: &str) -> Option<String> {
    let Some(probe) = rec.probes.iter().find(|p| p.family == family) else {
        return Some(format!("the {family} probe was not part of this recording"));
    };
    if probe.programs.is_empty() {
        return Some(format!(
            "the {family} probe has no programs in this recording"
        ));
    }
    let failed: Vec<String> = probe
        .programs
        .iter()
        .filter_map(|p| {
            p.error
                .as_ref()
                .map(|e| format!("{} ({}): {e}", p.name, p.attach_point))
        })
        .collect();
    // When every program failed for the same reason (e.g. "not applicable:
    // no WiredTiger symbols"), say it once.
    let errors: Vec<&String> = probe
        .programs
        .iter()
        .filter_map(|p| p.error.as_ref())
        .collect();
    let same_reason = errors.len() > 1 && errors.iter().all(|e| *e == errors[0]);
    if failed.is_empty() {
        None
    } else if failed.len() == probe.programs.len() && same_reason {
        Some(format!("the {family} probe did not attach: {}", errors[0]))
    } else if failed.len() == probe.programs.len() {
        Some(format!(
            "the {family} probe did not attach: {}",
            failed.join("; ")
        ))
    } else {
        Some(format!(
            "the {family} probe attached only partly, its numbers are incomplete: {}",
            failed.join("; ")
        ))
    }
}

#[derive(Default)]
struct ThreadTotals {
    comm: String,
    tgid: u32,
    voluntary: u64,
    involuntary: u64,
    preempted: u64,
    runq_delay_ns: u64,
    runq_delays: u64,
    oncpu_ns: u64,
}

#[derive(Default)]
struct ClassTotals {
    threads: u64,
    voluntary: u64,
    involuntary: u64,
    preempted: u64,
    runq_delay_ns: u64,
    runq_delays: u64,
    oncpu_ns: u64,
}

fn sched_facts(rec: &Recording) -> Result<FactGroup, String> {
    if let Some(reason) = family_unavailable(rec, "sched") {
        return Err(reason);
    }
    let slices: Vec<(&Slice, &SchedSlice)> = rec
        .slices
        .iter()
        .filter_map(|s| s.sched.as_ref().map(|sched| (s, sched)))
        .collect();
    if slices.is_empty() {
        return Err(format!(
            "the sched probe attached but the recording has no scheduler data ({} slices)",
            rec.slices.len()
        ));
    }
    let duration_s = slices.iter().map(|(s, _)| s.duration_ms).sum::<u64>() as f64 / 1000.0;
    let cpu_count = f64::from(rec.host.cpu_count.max(1));

    let (mut switches, mut voluntary, mut involuntary, mut preempted, mut wakeups) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut hist: Vec<u64> = Vec::new();
    let mut drops = crate::recording::model::SchedDrops::default();
    let mut threads: BTreeMap<u32, ThreadTotals> = BTreeMap::new();
    let (mut wakeup_preemptions, mut migrations) = (0u64, 0u64);
    for (_, s) in &slices {
        switches = switches.saturating_add(s.switches_total);
        voluntary = voluntary.saturating_add(s.voluntary);
        involuntary = involuntary.saturating_add(s.involuntary);
        preempted = preempted.saturating_add(s.preempted);
        wakeups = wakeups.saturating_add(s.wakeups);
        wakeup_preemptions = wakeup_preemptions.saturating_add(s.wakeup_preemptions);
        migrations = migrations.saturating_add(s.migrations);
        if hist.len() < s.runq_hist_log2_ns.len() {
            hist.resize(s.runq_hist_log2_ns.len(), 0);
        }
        for (acc, &n) in hist.iter_mut().zip(&s.runq_hist_log2_ns) {
            *acc = acc.saturating_add(n);
        }
        drops.thread_map_full = drops
            .thread_map_full
            .saturating_add(s.drops.thread_map_full);
        drops.wakeup_map_full = drops
            .wakeup_map_full
            .saturating_add(s.drops.wakeup_map_full);
        drops.read_failed = drops.read_failed.saturating_add(s.drops.read_failed);
        for t in &s.threads {
            let acc = threads.entry(t.tid).or_default();
            acc.comm.clone_from(&t.comm);
            acc.tgid = t.tgid;
            acc.voluntary = acc.voluntary.saturating_add(t.voluntary);
            acc.involuntary = acc.involuntary.saturating_add(t.involuntary);
            acc.preempted = acc.preempted.saturating_add(t.preempted);
            acc.runq_delay_ns = acc.runq_delay_ns.saturating_add(t.runq_delay_ns);
            acc.runq_delays = acc.runq_delays.saturating_add(t.runq_delays);
            acc.oncpu_ns = acc.oncpu_ns.saturating_add(t.oncpu_ns);
        }
    }

    let observed = voluntary.saturating_add(involuntary);
    let runq_delays: u64 = hist.iter().sum();
    let pct_us = |p: f64| log2_hist_percentile_ns(&hist, p).unwrap_or(0.0) / 1000.0;
    let max_bucket_us = hist
        .iter()
        .rposition(|&c| c > 0)
        .map_or(0.0, |i| bucket_bounds_ns(i).1 / 1000.0);
    let thread_delay_ns: u64 = threads.values().map(|t| t.runq_delay_ns).sum();
    let thread_delays: u64 = threads.values().map(|t| t.runq_delays).sum();
    let oncpu_ns: u64 = threads.values().map(|t| t.oncpu_ns).sum();
    let oncpu_s = oncpu_ns as f64 / 1e9;
    let cpu_busy = ratio(oncpu_s, duration_s);
    let processes: BTreeSet<u32> = threads.values().map(|t| t.tgid).collect();

    let mut g = FactGroup::new();
    let scope = if rec.target.is_some() {
        "target"
    } else {
        "host"
    };
    g.insert("scope".into(), text(scope));
    g.insert("duration_s".into(), float(duration_s));
    g.insert("switches_total".into(), int(switches));
    g.insert(
        "switches_per_s".into(),
        float(ratio(switches as f64, duration_s)),
    );
    g.insert(
        "switches_per_cpu_per_s".into(),
        float(ratio(switches as f64, duration_s) / cpu_count),
    );
    g.insert("observed_switches".into(), int(observed));
    g.insert(
        "observed_switches_per_s".into(),
        float(ratio(observed as f64, duration_s)),
    );
    g.insert("voluntary".into(), int(voluntary));
    g.insert("involuntary".into(), int(involuntary));
    g.insert("preempted".into(), int(preempted));
    g.insert("wakeups".into(), int(wakeups));
    g.insert(
        "wakeups_per_s".into(),
        float(ratio(wakeups as f64, duration_s)),
    );
    g.insert(
        "involuntary_share".into(),
        float(ratio(involuntary as f64, observed as f64)),
    );
    g.insert(
        "involuntary_per_s".into(),
        float(ratio(involuntary as f64, duration_s)),
    );
    g.insert(
        "preempted_share".into(),
        float(ratio(preempted as f64, involuntary as f64)),
    );
    g.insert("wakeup_preemptions".into(), int(wakeup_preemptions));
    g.insert(
        "wakeup_preemptions_per_s".into(),
        float(ratio(wakeup_preemptions as f64, duration_s)),
    );
    g.insert(
        "wakeup_preemption_share".into(),
        float(ratio(wakeup_preemptions as f64, involuntary as f64)),
    );
    g.insert(
        "migrations_per_s".into(),
        float(ratio(migrations as f64, duration_s)),
    );
    g.insert("runq_delays".into(), int(runq_delays));
    g.insert("runq_p50_us".into(), float(pct_us(0.50)));
    g.insert("runq_p90_us".into(), float(pct_us(0.90)));
    g.insert("runq_p99_us".into(), float(pct_us(0.99)));
    g.insert("runq_max_bucket_us".into(), float(max_bucket_us));
    g.insert(
        "runq_mean_us".into(),
        float(ratio(thread_delay_ns as f64, thread_delays as f64) / 1000.0),
    );
    g.insert("threads".into(), int(threads.len() as u64));
    g.insert("processes".into(), int(processes.len() as u64));
    g.insert("oncpu_s".into(), float(oncpu_s));
    g.insert("cpu_busy".into(), float(cpu_busy));
    g.insert("cpu_busy_share".into(), float(cpu_busy / cpu_count));

    let busiest = threads
        .iter()
        .max_by_key(|(tid, t)| (t.oncpu_ns, std::cmp::Reverse(**tid)));
    g.insert(
        "busiest_thread".into(),
        text(busiest.map_or("", |(_, t)| t.comm.as_str())),
    );
    g.insert(
        "busiest_thread_tid".into(),
        int(busiest.map_or(0, |(tid, _)| u64::from(*tid))),
    );
    g.insert(
        "busiest_thread_oncpu_share".into(),
        float(busiest.map_or(0.0, |(_, t)| ratio(t.oncpu_ns as f64 / 1e9, duration_s))),
    );

    g.insert("drops".into(), int(drops.total()));
    g.insert("drops_thread_map_full".into(), int(drops.thread_map_full));
    g.insert("drops_wakeup_map_full".into(), int(drops.wakeup_map_full));
    g.insert("drops_read_failed".into(), int(drops.read_failed));

    let mut classes: BTreeMap<String, ClassTotals> = BTreeMap::new();
    for t in threads.values() {
        let c = classes.entry(thread_class(&t.comm)).or_default();
        c.threads += 1;
        c.voluntary = c.voluntary.saturating_add(t.voluntary);
        c.involuntary = c.involuntary.saturating_add(t.involuntary);
        c.preempted = c.preempted.saturating_add(t.preempted);
        c.runq_delay_ns = c.runq_delay_ns.saturating_add(t.runq_delay_ns);
        c.runq_delays = c.runq_delays.saturating_add(t.runq_delays);
        c.oncpu_ns = c.oncpu_ns.saturating_add(t.oncpu_ns);
    }
    let classes: BTreeMap<String, FactValue> = classes
        .into_iter()
        .map(|(name, c)| {
            let mut m = BTreeMap::new();
            let switched = c.voluntary.saturating_add(c.involuntary);
            m.insert("threads".into(), int(c.threads));
            m.insert("voluntary".into(), int(c.voluntary));
            m.insert("involuntary".into(), int(c.involuntary));
            m.insert("preempted".into(), int(c.preempted));
            m.insert(
                "involuntary_share".into(),
                float(ratio(c.involuntary as f64, switched as f64)),
            );
            m.insert("runq_delays".into(), int(c.runq_delays));
            m.insert(
                "runq_mean_us".into(),
                float(ratio(c.runq_delay_ns as f64, c.runq_delays as f64) / 1000.0),
            );
            m.insert("oncpu_s".into(), float(c.oncpu_ns as f64 / 1e9));
            (name, FactValue::Map(m))
        })
        .collect();
    g.insert("classes".into(), FactValue::Map(classes));
    Ok(g)
}

/// A made-up, fully populated recording (see [`Facts::example`]).
pub(crate) fn example_recording() -> Recording {
    use crate::recording::model::{
        FORMAT_NAME, FORMAT_VERSION, HardIrqSlice, HostFacts, MemoryFacts, NetFacts, NetInterface,
        NumaNode, PerfSlice, PerfSlowPath, ProbeStatus, ProcessFacts, ProgramStatus, ResourceLimit,
        RxQueue, SchedDrops, SoftirqDrops, SoftirqSlice, SoftirqVector, SysfsChoice, Target,
        ThpFacts, ThreadSlice, VmSysctls,
    };
    use crate::symbols::AllocatorKind;
    let choice = |sel: &str| SysfsChoice {
        selected: Some(sel.into()),
        raw: format!("always [{sel}] never"),
    };
    let started_at = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH;
    let thread = |tid: u32, comm: &str| ThreadSlice {
        tid,
        tgid: 100,
        comm: comm.into(),
        voluntary: 10,
        involuntary: 20,
        preempted: 15,
        runq_delay_ns: 3_000_000,
        runq_delays: 25,
        oncpu_ns: 400_000_000,
        wakeup_preempted: 0,
        migrations: 0,
        wakeup_preempting: 0,
    };
    Recording {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        mdiag_version: env!("CARGO_PKG_VERSION").into(),
        started_at,
        ended_at: started_at + chrono::TimeDelta::seconds(1),
        requested_duration_ms: 1000,
        stop_reason: "duration".into(),
        host: HostFacts {
            hostname: "example".into(),
            kernel_release: "6.8.1-example".into(),
            arch: "x86_64".into(),
            cpu_count: 2,
            cpu_model: "example".into(),
            sched_features: Some("WAKEUP_PREEMPTION".into()),
            net: Some(NetFacts {
                rps_sock_flow_entries: 4096,
                interfaces: vec![NetInterface {
                    name: "eth0".into(),
                    rx_queues: vec![RxQueue {
                        name: "rx-0".into(),
                        rps_cpus: "3".into(),
                        rps_flow_cnt: 2048,
                    }],
                }],
            }),
            memory: Some(MemoryFacts {
                mem_total_bytes: Some(64 << 30),
                mem_available_bytes: Some(48 << 30),
                swap_total_bytes: Some(8 << 30),
                thp: Some(ThpFacts {
                    enabled: Some(choice("madvise")),
                    defrag: Some(choice("madvise")),
                    khugepaged_max_ptes_none: Some(511),
                }),
                vm: VmSysctls {
                    dirty_ratio: Some(20),
                    dirty_background_ratio: Some(10),
                    dirty_bytes: Some(0),
                    dirty_background_bytes: Some(0),
                    dirty_expire_centisecs: Some(3000),
                    dirty_writeback_centisecs: Some(500),
                    swappiness: Some(60),
                    overcommit_memory: Some(0),
                    zone_reclaim_mode: Some(0),
                    max_map_count: Some(65530),
                    overcommit_ratio: Some(50),
                    overcommit_kbytes: Some(0),
                },
                numa_balancing: Some(1),
                commit_limit_bytes: Some(40 << 30),
                committed_as_bytes: Some(20 << 30),
            }),
            numa_nodes: Some(vec![NumaNode {
                id: 0,
                cpus: "0-1".into(),
                mem_total_bytes: Some(64 << 30),
            }]),
            target_process: Some(ProcessFacts {
                pid: 100,
                glibc_version: Some("2.36".into()),
                numa_policy: Some("default".into()),
                max_open_files: Some(ResourceLimit {
                    soft: Some(1024),
                    hard: Some(524_288),
                }),
                ..ProcessFacts::default()
            }),
            db_path: Some(crate::recording::DbPathFacts {
                path: Some("/data/db".into()),
                found_by: Some("open file WiredTiger.lock".into()),
                unknown_reason: None,
                storage: Some(crate::host::StorageFacts {
                    path: "/data/db".into(),
                    mount_point: Some("/data".into()),
                    fs_type: Some("xfs".into()),
                    source: Some("/dev/nvme0n1p1".into()),
                    device: Some("259:1".into()),
                    disk: Some("nvme0n1".into()),
                    read_ahead_kb: Some(128),
                    rotational: Some(false),
                    mount_options: Some(vec!["noatime".into(), "rw".into()]),
                    scheduler: Some(crate::recording::SysfsChoice {
                        selected: Some("none".into()),
                        raw: "[none] mq-deadline".into(),
                    }),
                    ..Default::default()
                }),
            }),
            page_size: Some(4096),
            tcp_keepalive_time: Some(7200),
            ..HostFacts::default()
        },
        target: Some(Target {
            pid: 100,
            comm: "mongod".into(),
            exe: None,
            cmdline: vec!["mongod".into()],
            how: "pid".into(),
            exit_code: None,
        }),
        probes: vec![
            ProbeStatus {
                family: "sched".into(),
                programs: vec![ProgramStatus {
                    name: "sched_switch".into(),
                    attach_point: "tp_btf/sched_switch".into(),
                    error: None,
                }],
            },
            ProbeStatus {
                family: "softirq".into(),
                programs: vec![ProgramStatus {
                    name: "softirq_entry".into(),
                    attach_point: "tp_btf/softirq_entry".into(),
                    error: None,
                }],
            },
        ],
        slices: vec![Slice {
            start_ms: 0,
            duration_ms: 1000,
            sched: Some(SchedSlice {
                switches_total: 100,
                switches_per_cpu: vec![50, 50],
                voluntary: 20,
                involuntary: 40,
                preempted: 30,
                wakeups: 25,
                wakeup_preemptions: 0,
                migrations: 0,
                runq_hist_log2_ns: vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 20, 20],
                threads: vec![thread(101, "conn1"), thread(102, "WTEvict-1")],
                drops: SchedDrops {
                    thread_map_full: 1,
                    wakeup_map_full: 1,
                    read_failed: 1,
                },
            }),
            softirq: Some(SoftirqSlice {
                vectors: softirq::MAIN_VECTORS
                    .iter()
                    .map(|name| SoftirqVector {
                        name: (*name).into(),
                        count_per_cpu: vec![100, 10],
                        time_ns_per_cpu: vec![1_000_000, 100_000],
                    })
                    .collect(),
                hardirqs: vec![HardIrqSlice {
                    irq: 45,
                    name: "eth0-TxRx-0".into(),
                    count_per_cpu: vec![50, 5],
                    time_ns_per_cpu: vec![200_000, 20_000],
                }],
                drops: SoftirqDrops {
                    unmatched_exit: 1,
                    irq_map_full: 1,
                    bad_vector: 1,
                },
            }),
            // conn1 waits on futexes inside and outside a 300 ms checkpoint;
            // one D-state stack in xfs_ilock.
            syscalls: Some(crate::recording::SyscallsSlice {
                threads: vec![crate::recording::model::ThreadSyscallSlice {
                    tid: 101,
                    tgid: 100,
                    futex_waits: 10,
                    futex_wait_ns: 100_000_000,
                    futex_waits_in_checkpoint: 6,
                    futex_wait_ns_in_checkpoint: 60_000_000,
                    ..Default::default()
                }],
                ..Default::default()
            }),
            wiredtiger: Some(crate::recording::model::WiredTigerSlice {
                checkpoints: vec![crate::recording::model::Checkpoint {
                    tid: 103,
                    start_ns: 1_000,
                    duration_ns: 300_000_000,
                    ret: 0,
                    in_progress: false,
                }],
                drops: Default::default(),
            }),
            perf: Some(PerfSlice {
                freq_hz: 99,
                samples: 2000,
                target_samples: 1000,
                allocator: Some(AllocatorKind::GoogleTcmalloc),
                allocator_samples: 200,
                allocator_slow_path_samples: 50,
                slow_paths: vec![PerfSlowPath {
                    label: "central_free_list".into(),
                    samples: 50,
                }],
                ..PerfSlice::default()
            }),
            alloc: None,
            contention: Some(crate::recording::ContentionSlice {
                threads: vec![crate::recording::ThreadContentionSlice {
                    tid: 101,
                    tgid: 100,
                    comm: "conn1".into(),
                    lock: crate::recording::WindowSplit::from_arrays(
                        [2, 1],
                        [2_000_000, 3_000_000],
                    ),
                    dstate: crate::recording::WindowSplit::from_arrays(
                        [1, 2],
                        [1_000_000, 8_000_000],
                    ),
                }],
                lock_kinds: vec![crate::recording::LockKindSlice {
                    kind: "rwsem:W".into(),
                    flags: 0,
                    waits: crate::recording::WindowSplit::from_arrays(
                        [2, 1],
                        [2_000_000, 3_000_000],
                    ),
                }],
                dstate_stacks: vec![crate::recording::DStateStackSlice {
                    stack_id: 7,
                    sleeps: crate::recording::WindowSplit::from_arrays(
                        [1, 2],
                        [1_000_000, 8_000_000],
                    ),
                }],
                ..Default::default()
            }),
            mongod: None,
        }],
        checks: Default::default(),
        target_code: Some(allocator::example_code(
            AllocatorKind::GoogleTcmalloc,
            "/usr/bin/mongod",
        )),
        rseq: Some(crate::rseq::RseqOwnership {
            allocator: AllocatorKind::GoogleTcmalloc,
            glibc_rseq_size: Some(32),
            verdict: crate::rseq::Verdict::BlockedByGlibcRegistration,
            method: "example".into(),
            confidence: "example".into(),
            threads: Vec::new(),
        }),
        alloc: None,
        kernel_stacks: vec![crate::recording::KernelStack {
            stack_id: 7,
            frames: vec![
                "__schedule".into(),
                "rwsem_down_write_slowpath".into(),
                "xfs_ilock".into(),
                "xfs_file_buffered_write".into(),
            ],
            signature: Some("xfs_ilock".into()),
        }],
        mongod: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::testdata;

    #[test]
    fn kernel_release_is_normalised_to_three_numbers() {
        let v = |s| parse_kernel_version(s).map(|v| v.to_string());
        assert_eq!(v("6.18.44-fc-v769").as_deref(), Some("6.18.44"));
        assert_eq!(v("5.15.0-91-generic").as_deref(), Some("5.15.0"));
        assert_eq!(v("4.18.0-513.el8.x86_64").as_deref(), Some("4.18.0"));
        assert_eq!(v("6.6").as_deref(), Some("6.6.0"));
        assert_eq!(v("6.10-rc1").as_deref(), Some("6.10.0"));
        assert_eq!(v("6").as_deref(), Some("6.0.0"));
        assert_eq!(v("linux"), None);
        assert_eq!(v(""), None);
    }

    #[test]
    fn percentiles_interpolate_inside_log2_buckets() {
        // 100 delays all in [1024, 2048) ns: the median is the bucket's middle.
        let mut hist = vec![0u64; 11];
        hist[10] = 100;
        assert_eq!(log2_hist_percentile_ns(&hist, 0.5), Some(1536.0));
        assert_eq!(log2_hist_percentile_ns(&hist, 0.0), Some(1024.0));
        assert_eq!(log2_hist_percentile_ns(&hist, 1.0), Some(2048.0));

        // 90 in [1024, 2048), 10 in [2^20, 2^21): p99 is 90% into the top bucket.
        let mut hist = vec![0u64; 21];
        hist[10] = 90;
        hist[20] = 10;
        let p99 = log2_hist_percentile_ns(&hist, 0.99).unwrap();
        assert!((p99 - 1.9 * 1_048_576.0).abs() < 1e-6, "{p99}");
        let p90 = log2_hist_percentile_ns(&hist, 0.90).unwrap();
        assert_eq!(p90, 2048.0);

        // Bucket 0 spans [0, 2) ns.
        assert_eq!(log2_hist_percentile_ns(&[4], 0.5), Some(1.0));
        assert_eq!(log2_hist_percentile_ns(&[], 0.5), None);
        assert_eq!(log2_hist_percentile_ns(&[0, 0], 0.5), None);
    }

    #[test]
    fn thread_classes_strip_numbers() {
        assert_eq!(thread_class("conn1234"), "conn");
        assert_eq!(thread_class("WTEvict-3"), "eviction");
        assert_eq!(thread_class("Checkpointer"), "checkpointer");
        assert_eq!(thread_class("mdiag-spin-2"), "mdiag-spin");
        assert_eq!(thread_class("kworker/3:1H"), "kworker");
        assert_eq!(thread_class("ftdc"), "ftdc");
        assert_eq!(thread_class("123"), "123");
    }

    #[test]
    fn sched_feature_state_reads_debugfs_tokens() {
        let f = "PLACE_LAG RUN_TO_PARITY NO_NEXT_BUDDY WAKEUP_PREEMPTION NO_HRTICK";
        assert_eq!(sched_feature_state(Some(f), "WAKEUP_PREEMPTION"), "on");
        assert_eq!(sched_feature_state(Some(f), "NEXT_BUDDY"), "off");
        assert_eq!(sched_feature_state(Some(f), "TTWU_QUEUE"), "unknown");
        assert_eq!(sched_feature_state(None, "WAKEUP_PREEMPTION"), "unknown");
    }

    #[test]
    fn sched_facts_sum_all_slices() {
        let rec = testdata::oversubscribed();
        let f = Facts::derive(&rec);
        let slices = rec.slices.len() as i64;
        assert_eq!(f.get("sched.voluntary"), Some(&FactValue::Int(70 * slices)));
        assert_eq!(
            f.get("sched.involuntary"),
            Some(&FactValue::Int(650 * slices))
        );
        let share = f
            .get("sched.involuntary_share")
            .and_then(FactValue::as_f64)
            .unwrap();
        assert!((share - 650.0 / 720.0).abs() < 1e-9, "{share}");
        let per_s = f
            .get("sched.involuntary_per_s")
            .and_then(FactValue::as_f64)
            .unwrap();
        assert!((per_s - 650.0).abs() < 1e-9, "{per_s}");
        let preempted = f
            .get("sched.preempted_share")
            .and_then(FactValue::as_f64)
            .unwrap();
        assert!((preempted - 640.0 / 650.0).abs() < 1e-9);
        assert_eq!(f.get("sched.threads"), Some(&FactValue::Int(4)));
        assert_eq!(f.get("sched.processes"), Some(&FactValue::Int(1)));
        let p99 = f
            .get("sched.runq_p99_us")
            .and_then(FactValue::as_f64)
            .unwrap();
        assert!((2000.0..10_000.0).contains(&p99), "p99 {p99} µs");
        let mean = f
            .get("sched.runq_mean_us")
            .and_then(FactValue::as_f64)
            .unwrap();
        assert!((mean - 3000.0).abs() < 1e-6, "mean {mean}");
        // 4 threads each on CPU half the time: 2 CPUs busy of 2.
        let busy = f
            .get("sched.cpu_busy_share")
            .and_then(FactValue::as_f64)
            .unwrap();
        assert!((busy - 1.0).abs() < 1e-9, "{busy}");
        assert_eq!(
            f.get("sched.classes.conn.threads"),
            Some(&FactValue::Int(4)),
            "{:?}",
            f.get("sched.classes")
        );
        assert_eq!(f.get("host.eevdf"), Some(&FactValue::Bool(true)));
        assert_eq!(f.get("host.kernel_minor"), Some(&FactValue::Int(18)));
        assert_eq!(
            f.get("host.wakeup_preemption"),
            Some(&FactValue::Text("on".into()))
        );
        assert_eq!(f.get("target.present"), Some(&FactValue::Bool(true)));
        assert_eq!(f.absent_reason("sched"), None);
        assert_eq!(f.absent_reason("target"), None);
    }

    #[test]
    fn sched_is_absent_with_reason_when_probe_failed() {
        let mut rec = testdata::oversubscribed();
        rec.probes[0].programs[0].error = Some("tracepoint not found".into());
        let partly = Facts::derive(&rec);
        assert!(partly.group("sched").is_none(), "partial data is not used");
        let reason = partly.absent_reason("sched").unwrap();
        assert!(reason.contains("attached only partly"), "{reason}");

        rec.probes[0].programs[1].error = Some("tracepoint not found".into());
        for s in &mut rec.slices {
            s.sched = None;
        }
        let f = Facts::derive(&rec);
        assert!(f.group("sched").is_none());
        let reason = f.absent_reason("sched").unwrap();
        assert!(reason.contains("did not attach"), "{reason}");
        assert!(reason.contains("tracepoint not found"), "{reason}");
        // One reason shared by every program is said once.
        assert_eq!(
            reason.matches("tracepoint not found").count(),
            1,
            "{reason}"
        );

        rec.probes.clear();
        let reason = Facts::derive(&rec)
            .absent_reason("sched")
            .unwrap()
            .to_string();
        assert!(reason.contains("not part of this recording"), "{reason}");
    }

    #[test]
    fn sched_is_absent_when_attached_but_no_slice_has_data() {
        let mut rec = testdata::oversubscribed();
        for s in &mut rec.slices {
            s.sched = None;
        }
        let f = Facts::derive(&rec);
        assert!(
            f.absent_reason("sched")
                .unwrap()
                .contains("no scheduler data")
        );
    }

    #[test]
    fn host_wide_recording_binds_target_but_marks_it_absent() {
        let mut rec = testdata::oversubscribed();
        rec.target = None;
        let f = Facts::derive(&rec);
        assert_eq!(f.get("target.present"), Some(&FactValue::Bool(false)));
        assert_eq!(f.get("sched.scope"), Some(&FactValue::Text("host".into())));
        assert!(f.absent_reason("target").unwrap().contains("host-wide"));
    }

    #[test]
    fn example_facts_have_every_group() {
        let f = Facts::example();
        for group in FACT_GROUPS {
            assert!(
                f.group(group).is_some(),
                "{group} missing from example facts"
            );
            assert_eq!(f.absent_reason(group), None, "{group}");
        }
    }
}
