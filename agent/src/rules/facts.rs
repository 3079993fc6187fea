//! Evidence facts derived from a [`Recording`]: the variables rule conditions see.
//!
//! Rules never read the recording directly; they read a small, documented set
//! of named numbers grouped by where they come from (`host`, `recording`,
//! `target`, `sched`, `cpu`, `softirq`, `net`, later allocator, WiredTiger, ...). Deriving them in one
//! place keeps the arithmetic (sums over slices, percentiles, rates) tested
//! once, and lets a rule say which groups it `requires`: a group that was not
//! recorded is *absent* with a reason, so the rule is reported as "not
//! assessed" instead of being evaluated on zeros.
//!
//! Conventions: counts are integers, ratios and durations are floats; shares
//! are 0..=1; rates are per second of recorded time; times are in µs unless the
//! name says otherwise. A share or percentile over zero events is 0.
//!
//! Percentiles come from the log2 run-queue histogram, interpolated inside a
//! bucket by [`crate::hist::log2_hist_percentile_ns`].
//!
//! This file holds the shared machinery only: the value and group types,
//! [`Facts::derive`], the arithmetic helpers and [`family_unavailable`]. Each
//! group is derived in its own submodule: one per probe family (`sched`,
//! `softirq`, `contention`), the always-bound `host`/`recording`/`target`
//! groups in `host`, and the host-fact groups (`net`, `tuning`, `allocator`,
//! `mongod`, `storage`, `filesystem`, and mongod's view of its replica set
//! and host: `replication`, `system`); `example` is the made-up recording
//! rules are checked against.

use std::collections::BTreeMap;

use semver::Version;

use crate::kit::family::Family;
use crate::kit::unit::FamilyUnit;
use crate::recording::Window;
use crate::recording::model::Recording;

pub use crate::kit::fact::{FactGroup, FactValue, family_unavailable, thread_class};
pub(crate) use crate::kit::fact::{float, int, map_to_cel, ratio, text};

pub mod allocator;
pub(crate) mod connection;
pub mod cpu;
mod example;
pub mod filesystem;
mod host;
pub mod mongod;
pub mod net;
pub mod replication;

pub mod stacks;
pub mod storage;
pub mod system;
pub mod tuning;

pub(crate) use example::example_recording;
pub use host::{sched_feature_state, target_process};

/// The fact groups of the recording and the target, first in display
/// order.
const RECORDING_GROUPS: [&str; 3] = ["host", "recording", "target"];

/// The fact groups of the host's settings and of mongod, last in display
/// order.
const HOST_GROUPS: [&str; 10] = [
    "cpu",
    "net",
    "tuning",
    "allocator",
    "mongod",
    "storage",
    "filesystem",
    "replication",
    "system",
    "stacks",
];

/// Every fact group this build can derive, in display order: the
/// recording's and the target's, each probe family's own (in the
/// registry's order: [`FamilyUnit::FACTS`]), the host's and mongod's.
pub static FACT_GROUPS: std::sync::LazyLock<Vec<&'static str>> = std::sync::LazyLock::new(|| {
    let families = Family::ALL
        .into_iter()
        .filter(|&f| has_group(f))
        .map(Family::name);
    RECORDING_GROUPS
        .into_iter()
        .chain(families)
        .chain(HOST_GROUPS)
        .collect()
});

/// The values of a rule's `applies_to.target`: the kinds of process a rule
/// can be restricted to (see [`host::target_process`]).
pub const TARGET_KINDS: &[&str] = &["mongod"];

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

/// Generates [`family_group`] and [`has_group`] from the registry.
macro_rules! family_groups {
    ($($variant:ident $module:ident,)*) => {
        /// The fact group probe family `family` derives from `whole`, a
        /// window of `rec`, named as the family (`Err`: why it is absent);
        /// `None` when the family has no group of its own.
        fn family_group(
            family: Family,
            rec: &Recording,
            whole: &Window,
        ) -> Option<Result<FactGroup, String>> {
            match family {
                $(Family::$variant => {
                    type U = crate::family::$module::Unit;
                    <U as FamilyUnit>::FACTS
                        .then(|| <U as FamilyUnit>::facts(&rec.family_window(whole)))
                })*
            }
        }

        /// Whether `family` derives a fact group of its own.
        fn has_group(family: Family) -> bool {
            match family {
                $(Family::$variant => <crate::family::$module::Unit as FamilyUnit>::FACTS,)*
            }
        }
    };
}
crate::kit::family::for_each_family!(family_groups);

/// Whether a recording's architecture or kernel release field is unset: empty,
/// or "unknown" (what a recording made from FTDC without hostInfo holds).
pub fn unnamed(field: &str) -> bool {
    let f = field.trim();
    f.is_empty() || f.eq_ignore_ascii_case("unknown")
}

impl Facts {
    /// Derives every fact group from `rec`, whose totals come from its
    /// slices merged into one window ([`Recording::window`]).
    pub fn derive(rec: &Recording) -> Facts {
        Facts::derive_from(rec, &rec.window())
    }

    /// Derives every fact group from `rec` and `whole`, the window of all its
    /// slices. Sums, merged histograms and per-thread rows are read from the
    /// window, the one code path that also merges the agent's rolling
    /// windows; only what needs single seconds (mongod's samples, which are
    /// snapshots) walks the slices.
    pub fn derive_from(rec: &Recording, whole: &Window) -> Facts {
        let mut facts = Facts {
            kernel_version: parse_kernel_version(&rec.host.kernel_release),
            ..Facts::default()
        };
        facts.groups.insert(
            "host".into(),
            host::host_facts(rec, facts.kernel_version.as_ref()),
        );
        facts
            .groups
            .insert("recording".into(), host::recording_facts(rec));
        facts
            .groups
            .insert("target".into(), host::target_facts(rec));
        if rec.target.is_none() {
            facts.absent.insert(
                "target".into(),
                "host-wide recording: no target process was observed".into(),
            );
        }
        for family in Family::ALL {
            if let Some(group) = family_group(family, rec, whole) {
                facts.insert_or_absent(family.name(), group);
            }
        }
        facts.insert_or_absent("cpu", cpu::cpu_facts(rec));
        facts.insert_or_absent(
            "net",
            rec.host
                .net
                .as_ref()
                .map(net::net_facts)
                .ok_or_else(|| net::NET_UNREADABLE.to_string()),
        );
        facts.insert_or_absent("tuning", tuning::tuning_facts(rec));
        facts.insert_or_absent("allocator", allocator::allocator_facts(rec, whole));
        facts.allocator = allocator::allocator_of(rec).map(str::to_owned);
        facts.insert_or_absent("mongod", mongod::mongod_facts(rec));
        facts.insert_or_absent("storage", storage::storage_facts(rec));
        facts.insert_or_absent("filesystem", filesystem::filesystem_facts(rec));
        facts.insert_or_absent("replication", replication::replication_facts(rec));
        facts.insert_or_absent("system", system::system_facts(rec));
        facts.insert_or_absent("stacks", stacks::stacks_facts(rec));
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
        let google = self.allocator.as_deref() == Some("google_tcmalloc");
        if let Some(t) = self.groups.get_mut("tuning") {
            t.insert(
                "overcommit_recommended".into(),
                FactValue::Int(i64::from(google)),
            );
            // MongoDB's THP advice: on (`always`) for mongod 8's Google
            // TCMalloc, off (`never`) before it.
            t.insert(
                "thp_recommended".into(),
                FactValue::Text(if google { "always" } else { "never" }.into()),
            );
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::testdata;

    /// A family's own fact group is one rules can name: it stands in
    /// `FACT_GROUPS` under the family's name.
    #[test]
    fn every_family_group_is_a_fact_group() {
        let rec = example_recording();
        let whole = rec.window();
        let with_group: Vec<&str> = Family::ALL
            .into_iter()
            .filter(|&f| family_group(f, &rec, &whole).is_some())
            .map(Family::name)
            .collect();
        assert_eq!(with_group, ["sched", "softirq", "contention"]);
        for name in with_group {
            assert!(FACT_GROUPS.contains(&name), "{name} not in FACT_GROUPS");
        }
        let mut unique = FACT_GROUPS.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), FACT_GROUPS.len(), "a fact group twice");
    }

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
        for group in FACT_GROUPS.iter() {
            assert!(
                f.group(group).is_some(),
                "{group} missing from example facts"
            );
            assert_eq!(f.absent_reason(group), None, "{group}");
        }
    }
}
