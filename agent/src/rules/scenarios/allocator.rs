//! Scenarios of the `allocator.*` rules: TCMalloc's per-CPU caches and who
//! owns rseq (glibc or TCMalloc), the kernel rules that follow from it, and
//! allocator CPU time; each fires with its evidence and has near misses.

use super::{fired, fix_has, not_applicable, num, passed, txt};
use crate::recording::rseq::Verdict;
use crate::rules::testdata::{
    baseline, healthy_mongod, set_allocator, set_mongod, set_perf, with_figure,
};
use crate::symbols::AllocatorKind;

#[test]
fn tcmalloc_per_cpu_caches_fires_when_glibc_owns_rseq() {
    let mut rec = baseline();
    set_allocator(
        &mut rec,
        AllocatorKind::GoogleTcmalloc,
        Verdict::BlockedByGlibcRegistration,
        32,
    );
    let f = fired(&rec, "allocator.tcmalloc_per_cpu_caches");
    assert_eq!(num(&f, "__rseq_size"), 32.0);
    assert_eq!(txt(&f, "rseq verdict"), "blocked_by_glibc_registration");
    assert!(
        fix_has(&f, "GLIBC_TUNABLES=glibc.pthread.rseq=0"),
        "{:?}",
        f.fix.commands
    );
    // Near miss: glibc left rseq to TCMalloc.
    passed(&baseline(), "allocator.tcmalloc_per_cpu_caches");
    // Not about glibc malloc or the legacy TCMalloc, nor s390x.
    let mut glibc = baseline();
    set_allocator(
        &mut glibc,
        AllocatorKind::Glibc,
        Verdict::AllocatorHasNoPerCpuMode,
        32,
    );
    assert!(not_applicable(&glibc, "allocator.tcmalloc_per_cpu_caches").contains("allocator"));
    let mut gperf = rec.clone();
    set_allocator(
        &mut gperf,
        AllocatorKind::Gperftools,
        Verdict::AllocatorHasNoPerCpuMode,
        32,
    );
    not_applicable(&gperf, "allocator.tcmalloc_per_cpu_caches");
    let mut z = rec.clone();
    z.host.arch = "s390x".into();
    not_applicable(&z, "allocator.tcmalloc_per_cpu_caches");
}

#[test]
fn tcmalloc_kernel_rules_split_on_who_owns_rseq() {
    // Per-CPU caches active on 6.19 to 7.0.13: critical, with the documented
    // workaround (rseq=1), never the per-CPU tunable.
    let mut active = baseline();
    set_allocator(
        &mut active,
        AllocatorKind::GoogleTcmalloc,
        Verdict::PerCpuCachesPossible,
        0,
    );
    let mut glibc = active.clone();
    set_allocator(
        &mut glibc,
        AllocatorKind::GoogleTcmalloc,
        Verdict::BlockedByGlibcRegistration,
        32,
    );
    // mongod agrees: per-CPU caches off.
    set_mongod(
        &mut glibc,
        &with_figure(healthy_mongod(), "tcmalloc.usingPerCPUCaches", 0, 0),
    );
    for release in ["6.19.2-generic", "7.0.0-34-generic", "7.0.13"] {
        active.host.kernel_release = release.into();
        let f = fired(&active, "allocator.tcmalloc_kernel");
        assert_eq!(f.severity, crate::findings::Severity::Critical);
        assert_eq!(txt(&f, "kernel"), release);
        assert!(
            fix_has(&f, "GLIBC_TUNABLES=glibc.pthread.rseq=1"),
            "{:?}",
            f.fix.commands
        );
        assert!(!fix_has(&f, "rseq=0"), "{:?}", f.fix.commands);
        assert!(f.summary.contains("7.0.0-N"), "{}", f.summary);
        passed(&active, "allocator.tcmalloc_kernel_glibc_rseq");
        passed(&active, "allocator.tcmalloc_per_cpu_caches");
        // glibc owns rseq there: safe, informational, and no rseq=0 advice.
        glibc.host.kernel_release = release.into();
        let i = fired(&glibc, "allocator.tcmalloc_kernel_glibc_rseq");
        assert_eq!(i.severity, crate::findings::Severity::Info);
        assert!(i.summary.contains("Do not set"), "{}", i.summary);
        passed(&glibc, "allocator.tcmalloc_kernel");
        passed(&glibc, "allocator.tcmalloc_per_cpu_caches");
    }
    // mongod's own answer is enough: usingPerCPUCaches true on 6.19.
    let mut polled = baseline();
    polled.host.kernel_release = "6.19.0".into();
    set_mongod(&mut polled, &healthy_mongod());
    fired(&polled, "allocator.tcmalloc_kernel");
    // Near misses: 7.0.14 and 6.18 are outside the range.
    for release in ["7.0.14", "6.18.44"] {
        active.host.kernel_release = release.into();
        glibc.host.kernel_release = release.into();
        passed(&active, "allocator.tcmalloc_kernel");
        passed(&glibc, "allocator.tcmalloc_kernel_glibc_rseq");
        fired(&glibc, "allocator.tcmalloc_per_cpu_caches");
    }
    // Before rseq (4.18): its own low finding; the others pass.
    glibc.host.kernel_release = "4.14.300".into();
    let old = fired(&glibc, "allocator.tcmalloc_kernel_no_rseq");
    assert_eq!(old.severity, crate::findings::Severity::Low);
    passed(&glibc, "allocator.tcmalloc_kernel");
    passed(&glibc, "allocator.tcmalloc_per_cpu_caches");
    passed(&active, "allocator.tcmalloc_kernel_no_rseq");
}

#[test]
fn allocator_cpu_hot_needs_enough_samples() {
    let mut rec = baseline();
    set_perf(&mut rec, 1_000, 200, 80);
    let f = fired(&rec, "allocator.cpu_hot");
    assert!((num(&f, "allocator share") - 20.0).abs() < 1e-9);
    assert!((num(&f, "slow-path share") - 40.0).abs() < 1e-9);
    assert_eq!(txt(&f, "most sampled slow path"), "central_free_list");
    // Near miss: a small share with a busy slow path.
    set_perf(&mut rec, 1_000, 30, 20);
    passed(&rec, "allocator.cpu_hot");
    // Near miss: too few samples to tell (10 slices × 40).
    set_perf(&mut rec, 40, 20, 10);
    passed(&rec, "allocator.cpu_hot");
}

#[test]
fn allocator_cpu_hot_names_who_calls_the_allocator_from_the_stacks() {
    use crate::stacks::{ProfileKind, test_profile, test_stack};
    let mut rec = baseline();
    set_perf(&mut rec, 1_000, 200, 80);
    assert_eq!(
        txt(&fired(&rec, "allocator.cpu_hot"), "who calls the allocator"),
        "no stacks recorded"
    );
    rec.cpu_profile = Some(test_profile(
        ProfileKind::OnCpu,
        vec![
            test_stack(
                "conn",
                &[
                    ("mongo::BSONObjBuilder::append", "mongod"),
                    ("tc_malloc", "mongod"),
                ],
                false,
                150,
            ),
            test_stack(
                "conn",
                &[
                    ("mongo::Document::clone", "mongod"),
                    ("operator new", "mongod"),
                ],
                false,
                50,
            ),
            test_stack("conn", &[("mongo::Find", "mongod")], false, 800),
        ],
    ));
    let f = fired(&rec, "allocator.cpu_hot");
    assert_eq!(
        txt(&f, "who calls the allocator"),
        "mongo::BSONObjBuilder::append (75 % of the allocator samples)"
    );
    // The stacks name; they do not fire the rule: the near miss stays one.
    set_perf(&mut rec, 1_000, 30, 20);
    passed(&rec, "allocator.cpu_hot");
}

#[test]
fn tcmalloc_per_cpu_caches_blames_glibc_only_on_evidence() {
    // mongod says per-CPU caches are off, but the target's own memory shows
    // glibc left rseq alone: something else turned them off (a seccomp
    // profile refusing rseq, ...), so the glibc tunable is not the advice.
    let mut rec = baseline();
    set_mongod(
        &mut rec,
        &with_figure(healthy_mongod(), "tcmalloc.usingPerCPUCaches", 0, 0),
    );
    passed(&rec, "allocator.tcmalloc_per_cpu_caches");
    passed(&rec, "allocator.tcmalloc_per_cpu_cache_empty");
    // Without the target's code, mongod's figures decide: off, with a glibc
    // that registers rseq (2.36 in the test data) on a kernel with rseq.
    rec.target_code = None;
    rec.rseq = None;
    let f = fired(&rec, "allocator.tcmalloc_per_cpu_caches");
    assert_eq!(txt(&f, "usingPerCPUCaches"), "Bool(false)");
    assert_eq!(
        txt(&f, "facts from"),
        "mongod (buildInfo, hostInfo, serverStatus)"
    );
    // ... and not with a glibc before 2.35.
    rec.mongod
        .as_mut()
        .unwrap()
        .info
        .as_mut()
        .unwrap()
        .libc_version = Some("2.31".into());
    passed(&rec, "allocator.tcmalloc_per_cpu_caches");
    // Near miss: the healthy baseline (on, and used).
    passed(&baseline(), "allocator.tcmalloc_per_cpu_caches");
}

#[test]
fn per_cpu_caches_on_but_without_capacity_is_its_own_finding() {
    // SERVER-109273's shape: on, capacity 0, nothing in them.
    let mut rec = baseline();
    let empty = with_figure(
        with_figure(healthy_mongod(), "tcmalloc.maxPerCPUCacheSizeBytes", 0, 0),
        "tcmalloc.tcmalloc.cpu_free",
        0,
        0,
    );
    set_mongod(&mut rec, &empty);
    let f = fired(&rec, "allocator.tcmalloc_per_cpu_cache_empty");
    // 64 GiB limit / 4 = 16 GiB, capped at 1 GiB, over this host's CPUs.
    let cpus = i64::from(rec.host.cpu_count);
    let want = (1i64 << 30) / cpus;
    assert_eq!(num(&f, "capacity per CPU mongod would choose"), want as f64);
    assert!(
        fix_has(
            &f,
            &format!("MONGO_TCMALLOC_PER_CPU_CACHE_SIZE_BYTES={want}")
        ),
        "{:?}",
        f.fix.commands
    );
    assert!(f.fix.verify.contains(&want.to_string()), "{}", f.fix.verify);
    // Not the glibc finding: glibc did not take rseq.
    passed(&rec, "allocator.tcmalloc_per_cpu_caches");
    // Capacity reported but the caches stay empty under load: the same finding.
    set_mongod(
        &mut rec,
        &with_figure(healthy_mongod(), "tcmalloc.tcmalloc.cpu_free", 0, 0),
    );
    fired(&rec, "allocator.tcmalloc_per_cpu_cache_empty");
    // Near miss: capacity and use (the baseline), and an idle server whose
    // caches are empty but have capacity.
    passed(&baseline(), "allocator.tcmalloc_per_cpu_cache_empty");
    let idle = with_figure(
        with_figure(
            with_figure(healthy_mongod(), "tcmalloc.tcmalloc.cpu_free", 0, 0),
            "opcounters.query",
            0,
            0,
        ),
        "opcounters.insert",
        0,
        0,
    );
    set_mongod(&mut rec, &idle);
    passed(&rec, "allocator.tcmalloc_per_cpu_cache_empty");
}

#[test]
fn glibc_rseq_registration_by_version_and_distribution() {
    use crate::rules::facts::allocator::glibc_registers_rseq;
    assert_eq!(glibc_registers_rseq("2.35", None), Some(true));
    assert_eq!(glibc_registers_rseq("2.36", Some("Debian 12")), Some(true));
    assert_eq!(
        glibc_registers_rseq("2.34", Some("Ubuntu 21.10")),
        Some(false)
    );
    assert_eq!(
        glibc_registers_rseq("2.34", Some("Red Hat Enterprise Linux release 9.4 (Plow)")),
        Some(true)
    );
    assert_eq!(
        glibc_registers_rseq("2.34", Some("Rocky Linux 9.3")),
        Some(true)
    );
    assert_eq!(
        glibc_registers_rseq("2.28", Some("Red Hat Enterprise Linux release 8.9 (Ootpa)")),
        Some(false)
    );
    assert_eq!(glibc_registers_rseq("2.17", None), Some(false));
    assert_eq!(glibc_registers_rseq("unknown", None), None);
}
