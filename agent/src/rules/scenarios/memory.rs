//! Scenarios of the `memory.*` rules: transparent huge pages by allocator
//! and dirty-page writeback; each fires with its evidence and has near misses.

use super::{fired, fix_has, not_applicable, num, passed, tuning, txt};
use crate::explain::explain;
use crate::recording::rseq::Verdict;
use crate::rules::RuleSet;
use crate::rules::testdata::{GIB, baseline, choice, set_allocator};
use crate::symbols::AllocatorKind;

#[test]
fn thp_rules_follow_the_allocator() {
    let mut rec = baseline();
    let t = tuning(&mut rec);
    t.thp.as_mut().unwrap().enabled = choice("madvise");
    t.thp.as_mut().unwrap().khugepaged_max_ptes_none = Some(511);
    let f = fired(&rec, "memory.thp_google_tcmalloc");
    assert_eq!(txt(&f, "THP enabled"), "madvise");
    assert_eq!(num(&f, "max_ptes_none"), 511.0);
    assert!(fix_has(&f, "echo defer+madvise"), "{:?}", f.fix.commands);
    // A pre-8.0 "disable THP" unit is disabled first, so two units do not race.
    assert!(
        f.fix.commands[0].contains("systemctl disable disable-transparent-huge-pages.service"),
        "{:?}",
        f.fix.commands
    );
    // Near miss: exactly the recommendation.
    passed(&baseline(), "memory.thp_google_tcmalloc");
    // Legacy TCMalloc: the 8.0 rule does not apply.
    let legacy = legacy_baseline("always", "always");
    let f = fired(&legacy, "memory.thp_legacy_tcmalloc");
    assert_eq!(txt(&f, "THP enabled"), "always");
    not_applicable(&legacy, "memory.thp_google_tcmalloc");
    passed(
        &legacy_baseline("never", "never"),
        "memory.thp_legacy_tcmalloc",
    );
    // Near miss: only `enabled` decides; defrag left at "always" with THP
    // off makes no huge pages, so it is no finding.
    passed(
        &legacy_baseline("never", "always"),
        "memory.thp_legacy_tcmalloc",
    );
}

/// The baseline with mongod on the legacy TCMalloc and THP as given.
fn legacy_baseline(enabled: &str, defrag: &str) -> crate::recording::model::Recording {
    let mut rec = baseline();
    set_allocator(
        &mut rec,
        AllocatorKind::Gperftools,
        Verdict::AllocatorHasNoPerCpuMode,
        32,
    );
    let thp = tuning(&mut rec).thp.as_mut().unwrap();
    thp.enabled = choice(enabled);
    thp.defrag = choice(defrag);
    rec
}

#[test]
fn legacy_thp_fires_only_on_always_as_mongod_warns_and_reverts_to_the_recorded_values() {
    // mongod's own check (warning 22178) is "always" only: gperftools never
    // asks for huge pages, so "madvise" gives mongod none.
    let f = fired(
        &legacy_baseline("always", "madvise"),
        "memory.thp_legacy_tcmalloc",
    );
    assert!(
        f.fix.revert[2].contains("echo always > /sys/kernel/mm/transparent_hugepage/enabled")
            && f.fix.revert[2]
                .contains("echo madvise > /sys/kernel/mm/transparent_hugepage/defrag"),
        "{:?}",
        f.fix.revert
    );
    assert_eq!(txt(&f, "own THP opt-out"), "not set: THP on for mongod");
    // An 8.0 "enable THP" unit is disabled first, so two units do not race.
    assert!(
        f.fix.commands[0].contains("systemctl disable enable-transparent-huge-pages.service"),
        "{:?}",
        f.fix.commands
    );
    // Another recorded pair is restored as recorded, not as madvise.
    let f = fired(
        &legacy_baseline("always", "defer"),
        "memory.thp_legacy_tcmalloc",
    );
    assert!(
        f.fix.revert[2].contains("echo defer > "),
        "{:?}",
        f.fix.revert
    );
    // Near miss: madvise, the real mongod 6.0.5 host's setting.
    passed(
        &legacy_baseline("madvise", "madvise"),
        "memory.thp_legacy_tcmalloc",
    );
    // Near miss: "always", but mongod opted out for itself (THP_enabled: 0).
    let mut opted_out = legacy_baseline("always", "always");
    opted_out.host.target_process.as_mut().unwrap().thp_enabled = Some(false);
    passed(&opted_out, "memory.thp_legacy_tcmalloc");
    // Not read (older kernel, FTDC): judged on the host setting.
    let mut unknown = legacy_baseline("always", "always");
    unknown.host.target_process.as_mut().unwrap().thp_enabled = None;
    let f = fired(&unknown, "memory.thp_legacy_tcmalloc");
    assert_eq!(txt(&f, "own THP opt-out"), "not read");
    // s390x: the IBM Z study measured no effect of THP, the prior is below 1.
    let r = explain(
        &legacy_baseline("always", "always"),
        &RuleSet::builtin().unwrap(),
        Some("s390x"),
        None,
    )
    .unwrap();
    let f = r
        .fired()
        .find(|f| f.rule_id == "memory.thp_legacy_tcmalloc")
        .unwrap();
    assert!(f.arch_prior <= 1.0, "{}", f.arch_prior);
}

#[test]
fn dirty_writeback_fires_on_a_large_host_with_ratios() {
    let mut rec = baseline();
    let t = tuning(&mut rec);
    t.mem_total_bytes = Some(256 * GIB);
    t.mem_available_bytes = Some(200 * GIB);
    t.vm.dirty_bytes = Some(0);
    t.vm.dirty_background_bytes = Some(0);
    t.vm.dirty_ratio = Some(20);
    t.vm.dirty_background_ratio = Some(10);
    let f = fired(&rec, "memory.dirty_writeback");
    assert_eq!(num(&f, "background writeback threshold"), 20.0);
    assert_eq!(num(&f, "dirty throttling threshold"), 40.0);
    // Scaled to the memory mongod may use: hostInfo's 64 GiB limit here
    // (the study's 64 MiB / 512 MiB were for 128 GiB).
    assert_eq!(num(&f, "memory mongod may use"), 64.0);
    assert!(
        fix_has(&f, "vm.dirty_background_bytes = 33554432"),
        "{:?}",
        f.fix.commands
    );
    // The writers' throttling limit is left alone: a small vm.dirty_bytes
    // would throttle mongod's own writes on a mid-size host.
    assert!(!fix_has(&f, "vm.dirty_bytes"), "{:?}", f.fix.commands);
    assert!(f.fix.revert.iter().all(|c| !c.contains("dirty_ratio=")));
    // A checklist item (no MongoDB guidance, no measured cost), and its
    // text does not call the study's read-mostly load update-heavy.
    assert_eq!(f.class, crate::findings::RuleClass::Checklist);
    assert!(!f.summary.contains("update-heavy") && !f.impact.source.contains("update-heavy"));
    assert!(f.summary.contains("no guidance"), "{}", f.summary);
    // Near miss: the same ratios on an 8 GiB host are small thresholds.
    let t = tuning(&mut rec);
    t.mem_total_bytes = Some(8 * GIB);
    t.mem_available_bytes = Some(6 * GIB);
    passed(&rec, "memory.dirty_writeback");
    // Near miss: byte limits (the baseline).
    passed(&baseline(), "memory.dirty_writeback");
}

#[test]
fn thp_google_rule_reverts_to_the_recorded_values_and_skips_large_pages() {
    // overcommit_memory = 0 alone is no THP finding: mongod warns only at 2
    // (host.overcommit judges that).
    let mut rec = baseline();
    tuning(&mut rec).vm.overcommit_memory = Some(0);
    passed(&rec, "memory.thp_google_tcmalloc");
    // THP off as well: it fires, and the unit sets MongoDB's four values.
    tuning(&mut rec)
        .thp
        .as_mut()
        .unwrap()
        .khugepaged_max_ptes_none = Some(0);
    tuning(&mut rec).thp.as_mut().unwrap().enabled = choice("always");
    tuning(&mut rec).thp.as_mut().unwrap().defrag = choice("madvise");
    let f = fired(&rec, "memory.thp_google_tcmalloc");
    assert!(
        fix_has(&f, "echo 1 > /proc/sys/vm/overcommit_memory"),
        "{:?}",
        f.fix.commands
    );
    // The revert puts back what was recorded, not 511 or a default.
    let revert = f.fix.revert.last().unwrap();
    assert!(revert.contains("echo always >"), "{:?}", f.fix.revert);
    assert!(revert.contains("echo madvise > /sys/kernel/mm/transparent_hugepage/defrag"));
    assert!(
        revert.contains("echo 0 > /sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none")
    );
    assert!(revert.contains("sysctl -w vm.overcommit_memory=0"));
    assert!(!revert.contains("511"));
    // A 64 KiB-page aarch64 kernel is not judged by 4 KiB values: not
    // applicable (not passed), with the reason.
    let mut big = rec.clone();
    big.host.page_size = Some(65_536);
    tuning(&mut big)
        .thp
        .as_mut()
        .unwrap()
        .khugepaged_max_ptes_none = Some(8191);
    let why = not_applicable(&big, "memory.thp_google_tcmalloc");
    assert_eq!(
        why,
        "written for kernels with 4 KiB pages; this kernel's page is 64 KiB"
    );
}

#[test]
fn thp_google_rule_honours_mongods_own_opt_out() {
    // The host is set as MongoDB says, but mongod was started with THP
    // disabled for its process (PR_SET_THP_DISABLE): it gets no huge pages.
    let mut rec = baseline();
    rec.host.target_process.as_mut().unwrap().thp_enabled = Some(false);
    let f = fired(&rec, "memory.thp_google_tcmalloc");
    assert!(
        txt(&f, "own THP opt-out").starts_with("set: THP off"),
        "{:?}",
        f.evidence
    );
    assert!(
        f.fix.summary.contains("PR_SET_THP_DISABLE"),
        "{}",
        f.fix.summary
    );
    // Near miss: the opt-out not set (the baseline), or not read.
    passed(&baseline(), "memory.thp_google_tcmalloc");
    rec.host.target_process.as_mut().unwrap().thp_enabled = None;
    passed(&rec, "memory.thp_google_tcmalloc");
}
