//! Scenarios of the `memory.*` rules: transparent huge pages by allocator
//! and dirty-page writeback; each fires with its evidence and has near misses.

use super::{fired, fix_has, not_applicable, num, passed, tuning, txt};
use crate::rseq::Verdict;
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
    // Near miss: exactly the recommendation.
    passed(&baseline(), "memory.thp_google_tcmalloc");
    // Legacy TCMalloc: THP must be off; the 8.0 rule does not apply.
    let mut legacy = baseline();
    set_allocator(
        &mut legacy,
        AllocatorKind::Gperftools,
        Verdict::AllocatorHasNoPerCpuMode,
        32,
    );
    let f = fired(&legacy, "memory.thp_legacy_tcmalloc");
    assert_eq!(txt(&f, "THP enabled"), "always");
    not_applicable(&legacy, "memory.thp_google_tcmalloc");
    let t = tuning(&mut legacy);
    t.thp.as_mut().unwrap().enabled = choice("never");
    t.thp.as_mut().unwrap().defrag = choice("never");
    passed(&legacy, "memory.thp_legacy_tcmalloc");
    // Near miss: only `enabled` decides; defrag left at "always" with THP
    // off makes no huge pages, so it is no finding.
    tuning(&mut legacy).thp.as_mut().unwrap().defrag = choice("always");
    passed(&legacy, "memory.thp_legacy_tcmalloc");
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
    assert!(
        fix_has(&f, "vm.dirty_bytes = 536870912"),
        "{:?}",
        f.fix.commands
    );
    // Near miss: the same ratios on an 8 GiB host are small thresholds.
    let t = tuning(&mut rec);
    t.mem_total_bytes = Some(8 * GIB);
    t.mem_available_bytes = Some(6 * GIB);
    passed(&rec, "memory.dirty_writeback");
    // Near miss: byte limits (the baseline).
    passed(&baseline(), "memory.dirty_writeback");
}

#[test]
fn thp_google_rule_includes_overcommit_reverts_to_the_recorded_values_and_skips_large_pages() {
    // Everything as MongoDB's unit sets it but overcommit_memory = 0.
    let mut rec = baseline();
    tuning(&mut rec).vm.overcommit_memory = Some(0);
    let f = fired(&rec, "memory.thp_google_tcmalloc");
    assert!(
        fix_has(&f, "echo 1 > /proc/sys/vm/overcommit_memory"),
        "{:?}",
        f.fix.commands
    );
    // The revert puts back what was recorded, not 511 or madvise.
    assert!(
        f.fix.revert[1].contains("echo always >"),
        "{:?}",
        f.fix.revert
    );
    assert!(f.fix.revert[1].contains("echo defer+madvise >"));
    assert!(
        f.fix.revert[1]
            .contains("echo 0 > /sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none")
    );
    assert!(f.fix.revert[1].contains("sysctl -w vm.overcommit_memory=0"));
    assert!(!f.fix.revert[1].contains("511"));
    // A 64 KiB-page aarch64 kernel is not judged by 4 KiB values.
    let mut big = rec.clone();
    big.host.page_size = Some(65_536);
    tuning(&mut big)
        .thp
        .as_mut()
        .unwrap()
        .khugepaged_max_ptes_none = Some(8191);
    passed(&big, "memory.thp_google_tcmalloc");
}
