//! The `allocator` fact group: which memory allocator the target runs, who
//! owns its threads' rseq registration (and so whether Google TCMalloc's
//! per-CPU caches can work), and how much of the target's CPU time its
//! allocator takes (perf sampling).
//!
//! The kind and the rseq verdict come from the target's code and memory
//! (symbols, glibc's `__rseq_size`); the CPU shares only when the perf probe
//! ran. Shares over too few samples are not left out but come with their
//! sample count (`samples`), which rules should require.

use super::{FactGroup, FactValue, float, int, ratio, text};
use crate::recording::Window;
use crate::recording::model::Recording;
use crate::recording::rseq::Verdict;
use crate::symbols::AllocatorKind;

/// Why the group is absent.
pub const NO_TARGET_CODE: &str = "the target's code was not analysed (host-wide recording, or its executable and libraries could not be read) and mongod's buildInfo does not name its allocator";

/// The name rules use for an allocator kind (`applies_to.allocator`, `allocator.kind`).
pub fn kind_name(kind: AllocatorKind) -> &'static str {
    match kind {
        AllocatorKind::GoogleTcmalloc => "google_tcmalloc",
        AllocatorKind::Gperftools => "gperftools",
        AllocatorKind::Jemalloc => "jemalloc",
        AllocatorKind::Glibc => "glibc",
        AllocatorKind::Unknown => "unknown",
    }
}

/// Every allocator name a rule may list.
pub const KIND_NAMES: [&str; 5] = [
    "google_tcmalloc",
    "gperftools",
    "jemalloc",
    "glibc",
    "unknown",
];

fn verdict_name(v: Verdict) -> &'static str {
    match v {
        Verdict::PerCpuCachesPossible => "per_cpu_caches_possible",
        Verdict::BlockedByGlibcRegistration => "blocked_by_glibc_registration",
        Verdict::AllocatorHasNoPerCpuMode => "no_per_cpu_mode",
        Verdict::Unknown => "unknown",
    }
}

/// The target's allocator kind as rules name it, `None` when not analysed.
pub fn allocator_of(rec: &Recording) -> Option<&'static str> {
    let kind = rec.target_code.as_ref()?.allocator.kind;
    (kind != AllocatorKind::Unknown).then(|| kind_name(kind))
}

/// Derives the group from the target's code, else from mongod's own figures
/// (buildInfo, hostInfo, serverStatus: polled or from FTDC); `Err` with the
/// reason when neither names the allocator. The CPU shares are read from
/// `whole`, the window of all the slices.
pub fn allocator_facts(rec: &Recording, whole: &Window) -> Result<FactGroup, String> {
    let Some(code) = rec.target_code.as_ref() else {
        return from_mongod(rec).ok_or_else(|| NO_TARGET_CODE.to_string());
    };
    let mut g = FactGroup::new();
    g.insert("source".into(), text("target code"));
    let glibc = rec
        .host
        .target_process
        .as_ref()
        .and_then(|p| p.glibc_version.clone());
    if let Some(v) = glibc {
        g.insert("glibc_version".into(), text(v));
    }
    let kind = code.allocator.kind;
    g.insert("kind".into(), text(kind_name(kind)));
    g.insert(
        "object".into(),
        text(code.allocator.object.clone().unwrap_or_default()),
    );
    g.insert(
        "per_cpu_mode".into(),
        FactValue::Bool(kind == AllocatorKind::GoogleTcmalloc),
    );
    let verdict = rec.rseq.as_ref().map_or(Verdict::Unknown, |r| r.verdict);
    g.insert("rseq_verdict".into(), text(verdict_name(verdict)));
    g.insert(
        "glibc_owns_rseq".into(),
        FactValue::Bool(verdict == Verdict::BlockedByGlibcRegistration),
    );
    if let Some(size) = rec.rseq.as_ref().and_then(|r| r.glibc_rseq_size) {
        g.insert("glibc_rseq_size".into(), int(u64::from(size)));
    }
    kernel_facts(rec, &mut g);
    if let Some(r) = &rec.rseq {
        let failed = r
            .threads
            .iter()
            .filter(|t| !t.failed_calls.is_empty())
            .count();
        g.insert("threads_with_failed_rseq".into(), int(failed as u64));
    }

    // CPU shares from perf sampling, when it ran.
    if let Some(p) = whole.slice.perf.as_ref() {
        let (target, alloc, slow) = (
            p.target_samples,
            p.allocator_samples,
            p.allocator_slow_path_samples,
        );
        g.insert("samples".into(), int(target));
        g.insert("allocator_samples".into(), int(alloc));
        g.insert(
            "cpu_share".into(),
            float(ratio(alloc as f64, target as f64)),
        );
        g.insert(
            "slow_path_share".into(),
            float(ratio(slow as f64, alloc as f64)),
        );
        g.insert(
            "slow_path_cpu_share".into(),
            float(ratio(slow as f64, target as f64)),
        );
        // Slow paths are merged by label: the most sampled, the first label on ties.
        let top = p
            .slow_paths
            .iter()
            .max_by_key(|s| (s.samples, std::cmp::Reverse(s.label.as_str())))
            .map_or("", |s| s.label.as_str());
        g.insert("top_slow_path".into(), text(top));
    }
    Ok(g)
}

/// rseq(2) exists from Linux 4.18; TCMalloc's use of it conflicts with
/// kernels 6.19 up to 7.0.13 (mongod 8 builds that know refuse to start).
fn kernel_facts(rec: &Recording, g: &mut FactGroup) {
    if let Some(k) = super::parse_kernel_version(&rec.host.kernel_release) {
        let v = (k.major, k.minor, k.patch);
        g.insert("kernel_has_rseq".into(), FactValue::Bool(v >= (4, 18, 0)));
        g.insert(
            "kernel_rseq_conflict".into(),
            FactValue::Bool(((6, 19, 0)..(7, 0, 14)).contains(&v)),
        );
    }
}

/// Whether this glibc registers rseq for every thread by default: 2.35 and
/// later, and RHEL 9's 2.34 (and its rebuilds), which carries the backport.
/// `None` when the version does not parse.
pub fn glibc_registers_rseq(version: &str, os: Option<&str>) -> Option<bool> {
    let mut parts = version.trim().split('.');
    let major: u32 = parts.next()?.trim().parse().ok()?;
    let minor: u32 = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .ok()?;
    let el9 = os.is_some_and(|o| {
        let o = o.to_ascii_lowercase();
        let rhel_like = [
            "red hat",
            "rocky",
            "almalinux",
            "centos stream",
            "oracle linux",
        ]
        .iter()
        .any(|n| o.contains(n));
        rhel_like
            && o.split(|c: char| !c.is_ascii_digit() && c != '.')
                .any(|w| w.starts_with('9'))
    });
    Some((major, minor) >= (2, 35) || ((major, minor) == (2, 34) && el9))
}

/// The group from mongod's own figures when the target's code was not read
/// (explain --ftdc, or record --uri without a target): the allocator from
/// buildInfo, glibc from hostInfo, and who owns rseq from serverStatus's
/// `tcmalloc.usingPerCPUCaches` (true: TCMalloc registered it; false with a
/// glibc that registers rseq on a kernel that has it: glibc did). No CPU
/// shares: those need the perf probe.
fn from_mongod(rec: &Recording) -> Option<FactGroup> {
    let info = rec.mongod.as_ref()?.info.as_ref()?;
    let kind = super::mongod::allocator_kind(info)?;
    let mut g = FactGroup::new();
    g.insert(
        "source".into(),
        text("mongod (buildInfo, hostInfo, serverStatus)"),
    );
    g.insert("object".into(), text("mongod"));
    g.insert(
        "per_cpu_mode".into(),
        FactValue::Bool(kind == "google_tcmalloc"),
    );
    g.insert("kind".into(), text(kind.clone()));
    kernel_facts(rec, &mut g);
    let glibc_rseq = info
        .libc_version
        .as_deref()
        .and_then(|v| glibc_registers_rseq(v, info.os.as_deref()));
    if let Some(v) = &info.libc_version {
        g.insert("glibc_version".into(), text(v.clone()));
    }
    let using = crate::mongo::summary::MongodSummary::of(rec).and_then(|s| s.using_per_cpu_caches);
    let kernel_rseq = matches!(g.get("kernel_has_rseq"), Some(FactValue::Bool(true)));
    let verdict = match (kind.as_str(), using, glibc_rseq) {
        ("google_tcmalloc", Some(true), _) => Verdict::PerCpuCachesPossible,
        ("google_tcmalloc", Some(false), Some(true)) if kernel_rseq => {
            Verdict::BlockedByGlibcRegistration
        }
        ("google_tcmalloc", _, _) => Verdict::Unknown,
        _ => Verdict::AllocatorHasNoPerCpuMode,
    };
    g.insert("rseq_verdict".into(), text(verdict_name(verdict)));
    g.insert(
        "glibc_owns_rseq".into(),
        FactValue::Bool(verdict == Verdict::BlockedByGlibcRegistration),
    );
    Some(g)
}

/// A target's code with only the allocator filled in: for the example facts
/// (every rule is checked against them) and for tests.
pub(crate) fn example_code(kind: AllocatorKind, object: &str) -> crate::symbols::TargetCode {
    use crate::symbols::summary::{AllocatorSummary, WiredTigerSummary};
    use crate::symbols::{RseqSymbols, WiredTigerReport};
    crate::symbols::TargetCode {
        pid: 100,
        objects: Vec::new(),
        unreadable: Vec::new(),
        allocator: AllocatorSummary {
            kind,
            object: Some(object.into()),
            deciding: Vec::new(),
            entry_points: Vec::new(),
            slow_paths: Vec::new(),
            also_seen: Vec::new(),
        },
        wiredtiger: WiredTigerSummary {
            detected: WiredTigerReport::default(),
            checkpoint_probes: Vec::new(),
        },
        rseq: RseqSymbols::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cover_every_kind() {
        for k in [
            AllocatorKind::GoogleTcmalloc,
            AllocatorKind::Gperftools,
            AllocatorKind::Jemalloc,
            AllocatorKind::Glibc,
            AllocatorKind::Unknown,
        ] {
            assert!(KIND_NAMES.contains(&kind_name(k)));
        }
    }

    #[test]
    fn absent_without_target_code() {
        let rec = super::super::example_recording();
        let mut rec = rec;
        rec.target_code = None;
        assert_eq!(
            allocator_facts(&rec, &rec.window()).unwrap_err(),
            NO_TARGET_CODE
        );
        assert_eq!(allocator_of(&rec), None);
    }

    #[test]
    fn shares_and_verdict_from_the_example() {
        let rec = super::super::example_recording();
        let g = allocator_facts(&rec, &rec.window()).unwrap();
        assert_eq!(g["kind"], FactValue::Text("google_tcmalloc".into()));
        assert_eq!(
            g["rseq_verdict"],
            FactValue::Text("blocked_by_glibc_registration".into())
        );
        assert_eq!(g["glibc_owns_rseq"], FactValue::Bool(true));
        assert_eq!(g["samples"], FactValue::Int(1000));
        assert_eq!(g["cpu_share"], FactValue::Float(0.2));
        assert_eq!(g["slow_path_share"], FactValue::Float(0.25));
        assert_eq!(
            g["top_slow_path"],
            FactValue::Text("central_free_list".into())
        );
        assert_eq!(allocator_of(&rec), Some("google_tcmalloc"));
        assert_eq!(g["kernel_has_rseq"], FactValue::Bool(true));
        assert_eq!(g["kernel_rseq_conflict"], FactValue::Bool(false));
    }

    #[test]
    fn kernel_ranges_for_rseq() {
        let mut rec = super::super::example_recording();
        for (release, has, conflict) in [
            ("4.14.300", false, false),
            ("4.18.0-553.el8", true, false),
            ("6.18.44-fc-v769", true, false),
            ("6.19.0", true, true),
            ("7.0.13-generic", true, true),
            ("7.0.14", true, false),
        ] {
            rec.host.kernel_release = release.into();
            let g = allocator_facts(&rec, &rec.window()).unwrap();
            assert_eq!(g["kernel_has_rseq"], FactValue::Bool(has), "{release}");
            assert_eq!(
                g["kernel_rseq_conflict"],
                FactValue::Bool(conflict),
                "{release}"
            );
        }
    }
}
