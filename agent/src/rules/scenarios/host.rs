//! Scenarios of the `host.*` rules: swappiness, NUMA, open files, readahead,
//! overcommit, max_map_count and TCP keepalive; each fires with its evidence
//! and has near misses.

use super::{fired, fix_has, not_assessed, num, passed, report, tuning, txt};
use crate::recording::model::{DbPathFacts, NumaNode, ResourceLimit};
use crate::recording::rseq::Verdict;
use crate::rules::facts::storage::example_storage;
use crate::rules::testdata::{
    GIB, baseline, healthy_mongod, set_allocator, set_mongod, with_figure,
};
use crate::symbols::AllocatorKind;

#[test]
fn swappiness_numa_and_open_files_basics() {
    let mut rec = baseline();
    tuning(&mut rec).vm.swappiness = Some(60);
    let f = fired(&rec, "host.swappiness");
    assert_eq!(num(&f, "vm.swappiness"), 60.0);
    // The revert restores the value this host had, not a default.
    let mut thirty = rec.clone();
    tuning(&mut thirty).vm.swappiness = Some(30);
    let f = fired(&thirty, "host.swappiness");
    assert!(
        f.fix
            .revert
            .iter()
            .any(|c| c.ends_with("sysctl -w vm.swappiness=30")),
        "{:?}",
        f.fix.revert
    );
    // Near miss: no swap at all.
    tuning(&mut rec).swap_total_bytes = Some(0);
    passed(&rec, "host.swappiness");

    let mut numa = baseline();
    numa.host.numa_nodes = Some(
        (0..2)
            .map(|id| NumaNode {
                id,
                cpus: if id == 0 { "0-3" } else { "4-7" }.into(),
                mem_total_bytes: Some(32 * GIB),
            })
            .collect(),
    );
    let f = fired(&numa, "host.numa");
    assert_eq!(num(&f, "NUMA nodes"), 2.0);
    assert_eq!(txt(&f, "memory policy"), "default");
    numa.host.target_process.as_mut().unwrap().numa_policy = Some("interleave:0-1".into());
    passed(&numa, "host.numa");
    tuning(&mut numa).vm.zone_reclaim_mode = Some(1);
    fired(&numa, "host.numa");

    let mut files = baseline();
    files.host.target_process.as_mut().unwrap().max_open_files = Some(ResourceLimit {
        soft: Some(1024),
        hard: Some(524_288),
    });
    let f = fired(&files, "host.open_files");
    assert_eq!(num(&f, "soft limit"), 1024.0);
    // Unlimited counts as enough.
    files.host.target_process.as_mut().unwrap().max_open_files = Some(ResourceLimit {
        soft: None,
        hard: None,
    });
    passed(&files, "host.open_files");
}

#[test]
fn readahead_fires_above_16_kib_and_names_the_disk() {
    let mut rec = baseline();
    let storage = rec.host.db_path.as_mut().unwrap().storage.as_mut().unwrap();
    storage.read_ahead_kb = Some(128);
    let f = fired(&rec, "host.readahead");
    assert_eq!(num(&f, "readahead (KiB)"), 128.0);
    assert_eq!(num(&f, "sectors"), 256.0);
    assert_eq!(txt(&f, "disk"), "nvme0n1");
    assert_eq!(txt(&f, "dbPath"), "/data/db");
    assert_eq!(txt(&f, "found from"), "open file WiredTiger.lock");
    // The commands name this recording's disk; the revert restores its value.
    assert!(fix_has(&f, "blockdev --setra 32 /dev/nvme0n1"));
    assert!(fix_has(
        &f,
        "KERNEL==\"nvme0n1\", ATTR{queue/read_ahead_kb}=\"16\""
    ));
    assert!(
        f.fix
            .revert
            .iter()
            .any(|c| c == "blockdev --setra 256 /dev/nvme0n1")
    );
    assert!(
        f.fix
            .verify
            .contains("/sys/block/nvme0n1/queue/read_ahead_kb")
    );
    // Near misses: 16 KiB (32 sectors) is the top of the range; 4 KiB its bottom.
    for kb in [16, 4] {
        let storage = rec.host.db_path.as_mut().unwrap().storage.as_mut().unwrap();
        storage.read_ahead_kb = Some(kb);
        passed(&rec, "host.readahead");
    }
}

#[test]
fn readahead_uses_mongods_db_path_and_is_not_assessed_without_a_disk() {
    let mut rec = baseline();
    // mongod's own dbPath (getCmdLineOpts) wins over what mdiag found.
    if let Some(i) = rec.mongod.as_mut().and_then(|m| m.info.as_mut()) {
        i.db_path_storage = Some(example_storage("/var/lib/mongo", "sdb", 4096));
    }
    let f = fired(&rec, "host.readahead");
    assert_eq!(txt(&f, "disk"), "sdb");
    assert_eq!(num(&f, "readahead (KiB)"), 4096.0);
    assert!(txt(&f, "found from").contains("getCmdLineOpts"));

    let mut rec = baseline();
    rec.host.db_path = Some(DbPathFacts {
        unknown_reason: Some("the target (pid 1000) has none of WiredTiger.lock open".into()),
        ..DbPathFacts::default()
    });
    let r = report(&rec);
    let n = r
        .not_assessed
        .iter()
        .find(|n| n.rule_id == "host.readahead")
        .expect("not assessed");
    assert!(n.reason.contains("pid 1000"), "{}", n.reason);
    rec.host.db_path = None;
    let r = report(&rec);
    assert!(
        r.not_assessed
            .iter()
            .any(|n| n.rule_id == "host.readahead" && n.reason.contains("was not recorded"))
    );
}

#[test]
fn overcommit_fires_in_strict_mode_with_the_commit_figures() {
    let mut rec = baseline();
    let m = tuning(&mut rec);
    m.vm.overcommit_memory = Some(2);
    m.commit_limit_bytes = Some(36 * GIB);
    m.committed_as_bytes = Some(33 * GIB);
    let f = fired(&rec, "host.overcommit");
    assert_eq!(num(&f, "vm.overcommit_memory"), 2.0);
    assert_eq!(num(&f, "overcommit_ratio"), 50.0);
    assert_eq!(num(&f, "CommitLimit"), 36.0);
    assert_eq!(num(&f, "Committed_AS"), 33.0);
    assert!((num(&f, "committed (%") - 100.0 * 33.0 / 36.0).abs() < 1e-9);
    // mongod 8 (Google TCMalloc): MongoDB's own unit sets 1.
    assert!(
        fix_has(&f, "vm.overcommit_memory = 1"),
        "{:?}",
        f.fix.commands
    );
    assert!(f.fix.revert[0].contains("sysctl -w vm.overcommit_memory=2"));
    // Another allocator: the kernel's default heuristic.
    let mut glibc = rec.clone();
    set_allocator(
        &mut glibc,
        AllocatorKind::Glibc,
        Verdict::AllocatorHasNoPerCpuMode,
        32,
    );
    let g = fired(&glibc, "host.overcommit");
    assert!(
        fix_has(&g, "vm.overcommit_memory = 0"),
        "{:?}",
        g.fix.commands
    );
    // Near misses: heuristic (0) and always (1) overcommit.
    for mode in [0, 1] {
        tuning(&mut rec).vm.overcommit_memory = Some(mode);
        passed(&rec, "host.overcommit");
    }
    // Unknown: not assessed, never guessed.
    tuning(&mut rec).vm.overcommit_memory = None;
    let r = report(&rec);
    assert!(
        r.not_assessed
            .iter()
            .any(|n| n.rule_id == "host.overcommit" && n.reason.contains("overcommit_memory")),
        "{:?}",
        r.not_assessed
    );
}

#[test]
fn max_map_count_follows_mongods_own_startup_check() {
    let mut rec = baseline();
    let conns = with_figure(
        with_figure(healthy_mongod(), "connections.current", 200, 0),
        "connections.available",
        838_660,
        0,
    );
    set_mongod(&mut rec, &conns);
    tuning(&mut rec).vm.max_map_count = Some(65_530);
    let f = fired(&rec, "host.max_map_count");
    assert_eq!(num(&f, "wanted by mongod"), 1_677_720.0);
    assert!(
        fix_has(&f, "vm.max_map_count = 1677720"),
        "{:?}",
        f.fix.commands
    );
    assert!(f.fix.revert[0].contains("sysctl -w vm.max_map_count=65530"));
    // Near miss: at the wanted value.
    tuning(&mut rec).vm.max_map_count = Some(1_677_720);
    passed(&rec, "host.max_map_count");
}

#[test]
fn tcp_keepalive_follows_mongodbs_faq() {
    let mut rec = baseline();
    rec.host.tcp_keepalive_time = Some(7200);
    let f = fired(&rec, "host.tcp_keepalive");
    assert_eq!(num(&f, "tcp_keepalive_time"), 7200.0);
    assert!(fix_has(&f, "net.ipv4.tcp_keepalive_time = 120"));
    assert!(f.fix.revert[0].ends_with("net.ipv4.tcp_keepalive_time=7200"));
    // Near miss: the FAQ's value; unknown: not assessed.
    passed(&baseline(), "host.tcp_keepalive");
    rec.host.tcp_keepalive_time = None;
    assert!(
        report(&rec)
            .not_assessed
            .iter()
            .any(|n| n.rule_id == "host.tcp_keepalive")
    );
}

fn system(rec: &mut crate::recording::Recording) -> &mut crate::recording::SystemFacts {
    rec.host.system.as_mut().unwrap()
}

#[test]
fn memlock_and_processes_limits_never_lower_a_higher_value() {
    // 8 KiB of locked memory: below mongod's 16 pages (64 KiB).
    let mut rec = baseline();
    rec.host.target_process.as_mut().unwrap().max_locked_memory = Some(ResourceLimit {
        soft: Some(8192),
        hard: Some(8192),
    });
    let f = fired(&rec, "host.memlock");
    assert_eq!(num(&f, "mongod's minimum"), 65536.0);
    assert!(fix_has(&f, "LimitMEMLOCK=infinity"));
    // Near miss: 64 KiB is enough.
    rec.host.target_process.as_mut().unwrap().max_locked_memory = Some(ResourceLimit {
        soft: Some(65536),
        hard: Some(65536),
    });
    passed(&rec, "host.memlock");

    // 4096 processes / threads.
    let mut low = baseline();
    low.host.target_process.as_mut().unwrap().max_processes = Some(ResourceLimit {
        soft: Some(4096),
        hard: Some(4096),
    });
    let f = fired(&low, "host.processes_limit");
    assert!(fix_has(&f, "LimitNPROC=64000"), "{:?}", f.fix.commands);
    // Near miss: 64000 processes under a million open files. mongod 4.4
    // and later have no processes-to-files check (only 4.2 and older
    // warned below half): nothing to say.
    let mut half = baseline();
    let p = half.host.target_process.as_mut().unwrap();
    p.max_open_files = Some(ResourceLimit {
        soft: Some(1_048_576),
        hard: Some(1_048_576),
    });
    p.max_processes = Some(ResourceLimit {
        soft: Some(64_000),
        hard: Some(64_000),
    });
    passed(&half, "host.processes_limit");
    // The open-files fix writes the same, never lowering LimitNPROC.
    let p = half.host.target_process.as_mut().unwrap();
    p.max_open_files = Some(ResourceLimit {
        soft: Some(1024),
        hard: Some(4096),
    });
    p.max_processes = None;
    p.max_processes = Some(ResourceLimit {
        soft: None,
        hard: None,
    });
    let f = fired(&half, "host.open_files");
    assert!(fix_has(&f, "LimitNPROC=infinity"), "{:?}", f.fix.commands);
    passed(&half, "host.processes_limit");
    // Near miss: the baseline's 64000.
    passed(&baseline(), "host.processes_limit");
}

#[test]
fn kernel_task_limits_and_their_revert() {
    let mut rec = baseline();
    system(&mut rec).pid_max = Some(32_768);
    let f = fired(&rec, "host.kernel_task_limits");
    assert!(
        fix_has(&f, "kernel.pid_max = 4194304"),
        "{:?}",
        f.fix.commands
    );
    // threads-max and file-max stay at this host's higher values.
    assert!(fix_has(&f, "kernel.threads-max = 513000"));
    assert!(fix_has(&f, "fs.file-max = 9223372036854775807"));
    assert!(f.fix.revert[0].ends_with(
        "sysctl -w kernel.pid_max=32768 kernel.threads-max=513000 fs.file-max=9223372036854775807"
    ));
    // A host close to its task limit: threads-max to twice the tasks.
    let mut busy = baseline();
    system(&mut busy).threads_max = Some(63_000);
    system(&mut busy).tasks = Some(58_000);
    let f = fired(&busy, "host.kernel_task_limits");
    assert!(
        fix_has(&f, "kernel.threads-max = 116000"),
        "{:?}",
        f.fix.commands
    );
    // Near miss: the same 8 GiB host (the kernel's threads-max from its
    // RAM, below MongoDB's 64000 "for large systems") with few tasks.
    system(&mut busy).tasks = Some(600);
    passed(&busy, "host.kernel_task_limits");
    // file-max below MongoDB's 98000: to 98000.
    let mut files = baseline();
    system(&mut files).file_max = Some(50_000);
    let f = fired(&files, "host.kernel_task_limits");
    assert!(fix_has(&f, "fs.file-max = 98000"), "{:?}", f.fix.commands);
    system(&mut files).file_max = Some(98_000);
    passed(&files, "host.kernel_task_limits");
}

#[test]
fn clock_swap_tuned_and_several_mongod() {
    let mut rec = baseline();
    let clock = system(&mut rec).clock.as_mut().unwrap();
    clock.unsynchronised = true;
    clock.state = 5;
    clock.services.clear();
    let f = fired(&rec, "host.clock_sync");
    assert_eq!(txt(&f, "time services running"), "none found");
    assert_eq!(f.fix.revert, ["timedatectl set-ntp false"]);
    passed(&baseline(), "host.clock_sync");
    // chronyd without rtcsync keeps STA_UNSYNC set while synchronised, and
    // writes its real maximum error (here 17.3 ms): no finding.
    let mut chrony = baseline();
    let clock = system(&mut chrony).clock.as_mut().unwrap();
    clock.unsynchronised = true;
    clock.state = 5;
    clock.max_error_us = 17_300;
    clock.services = vec!["chronyd".into()];
    passed(&chrony, "host.clock_sync");
    // chronyd running but not synchronised: chrony's 16 s, a finding that
    // names it.
    system(&mut chrony).clock.as_mut().unwrap().max_error_us = 16_000_000;
    let f = fired(&chrony, "host.clock_sync");
    assert_eq!(txt(&f, "time services running"), "chronyd");

    swap_only_where_other_software_shares_the_host();

    // tuned's throughput-performance: THP always and a readahead, on a
    // mongod 8 host (MongoDB advises THP always there): the readahead fires.
    let mut tuned = baseline();
    system(&mut tuned).tuned = Some(crate::recording::TunedFacts {
        profile: "throughput-performance".into(),
        thp: Some("always".into()),
        readahead: Some(">4096".into()),
        running: true,
    });
    let f = fired(&tuned, "host.tuned_override");
    assert!(fix_has(&f, "include=throughput-performance"));
    assert!(fix_has(&f, "transparent_hugepages=always"));
    assert_eq!(
        f.fix.revert,
        ["tuned-adm profile throughput-performance && rm -rf /etc/tuned/mdiag-mongodb"]
    );
    // Near miss: a profile that agrees with MongoDB's THP advice and sets no
    // readahead; and tuned not running.
    system(&mut tuned).tuned.as_mut().unwrap().readahead = None;
    passed(&tuned, "host.tuned_override");
    system(&mut tuned).tuned.as_mut().unwrap().readahead = Some("4096".into());
    system(&mut tuned).tuned.as_mut().unwrap().running = false;
    passed(&tuned, "host.tuned_override");

    // Two mongod with the default cache on a 64 GiB host: 2 × 31.5 GB.
    let mut two = baseline();
    let mongods = system(&mut two).mongods.as_mut().unwrap();
    let mut second = mongods[0].clone();
    second.pid = 2000;
    mongods.push(second);
    let f = fired(&two, "host.several_mongod");
    assert_eq!(num(&f, "caches together"), 63.0);
    assert_eq!(num(&f, "cache per instance the fix sets"), 15.7);
    assert!(f.fix.files[0].content.contains("cacheSizeGB: 15.7"));
    // Near miss: the two sized to share the host.
    for m in system(&mut two).mongods.as_mut().unwrap() {
        m.cache_size_mb = Some(15 * 1024);
        m.cache_from = "config file /etc/mongod.conf".into();
    }
    passed(&two, "host.several_mongod");
}

/// MongoDB's production notes allow no swap on a host mongod has to itself
/// and ask for swap where other software shares it; a Kubernetes node gets
/// no swap advice (its kubelet refuses to start with swap on).
fn swap_only_where_other_software_shares_the_host() {
    // Near miss: a dedicated host without swap (the notes' second strategy).
    let mut dedicated = baseline();
    tuning(&mut dedicated).swap_total_bytes = Some(0);
    passed(&dedicated, "host.swap");

    // A JVM of 16 GiB and a backup of 4 GiB beside mongod on 64 GiB.
    let mut shared = dedicated.clone();
    system(&mut shared).other_anon_bytes = Some(20 << 30);
    system(&mut shared).largest_others = Some(vec![
        crate::recording::ProcessMemory {
            pid: 4242,
            comm: "java".into(),
            anon_bytes: 16 << 30,
        },
        crate::recording::ProcessMemory {
            pid: 4300,
            comm: "backup".into(),
            anon_bytes: 4 << 30,
        },
    ]);
    let f = fired(&shared, "host.swap");
    assert!((num(&f, "their share of memory") - 20.0 / 64.0).abs() < 1e-9);
    assert_eq!(
        txt(&f, "the largest of them"),
        "java (pid 4242) 16.0 GiB, backup (pid 4300) 4.0 GiB"
    );
    // 64 GiB: an 8 GiB swap file, and swapping only under pressure.
    assert!(
        fix_has(&f, "fallocate -l 8G /swapfile.mdiag"),
        "{:?}",
        f.fix.commands
    );
    assert!(fix_has(&f, "vm.swappiness = 1"), "{:?}", f.fix.commands);
    assert!(
        f.fix
            .revert
            .iter()
            .any(|r| r.ends_with("sysctl -w vm.swappiness=1")),
        "{:?}",
        f.fix.revert
    );
    assert!(
        !f.summary.contains("ask for swap to be assigned"),
        "{}",
        f.summary
    );

    // Near miss: the same host is a Kubernetes node, told by a kubelet or
    // by the target's kubepods cgroup; nothing anywhere suggests swap.
    let mut node = shared.clone();
    system(&mut node).kubernetes_node = Some(true);
    passed(&node, "host.swap");
    let mut pod = shared.clone();
    pod.host
        .target_process
        .as_mut()
        .unwrap()
        .cgroup
        .get_or_insert_with(Default::default)
        .path = Some("/kubepods.slice/kubepods-burstable.slice/cri-containerd-1.scope".into());
    passed(&pod, "host.swap");
    for rec in [&node, &pod] {
        let r = report(rec);
        assert!(
            !r.fired()
                .any(|f| f.fix.commands.iter().any(|c| c.contains("swapon"))),
            "swap suggested on a Kubernetes node"
        );
    }

    // Near miss: swapping disabled on purpose (swappiness 0, no swap).
    let mut disabled = shared.clone();
    tuning(&mut disabled).vm.swappiness = Some(0);
    passed(&disabled, "host.swap");

    // Near miss: swap assigned (the notes' first strategy).
    let mut with_swap = shared.clone();
    tuning(&mut with_swap).swap_total_bytes = Some(8 << 30);
    passed(&with_swap, "host.swap");

    // An older recording, without the neighbours' memory, cannot tell:
    // not assessed, never a guess.
    let mut older = dedicated;
    system(&mut older).other_anon_bytes = None;
    let reason = not_assessed(&older, "host.swap");
    assert!(reason.contains("other_anon_share"), "{reason}");
}

/// Configuration hygiene is listed apart: a host whose open-files limit and
/// swappiness differ from the production notes, and whose mongod is
/// queueing (measured), gets one finding and two checklist items, the
/// checklist never ranked; mongod's own startup warnings are kept verbatim
/// and the checklist item it duplicates says so.
#[test]
fn settings_are_a_checklist_apart_from_findings_with_mongods_own_warnings() {
    use crate::findings::RuleClass;
    let mut rec = baseline();
    tuning(&mut rec).vm.swappiness = Some(60);
    rec.host.target_process.as_mut().unwrap().max_open_files = Some(ResourceLimit {
        soft: Some(1024),
        hard: Some(524_288),
    });
    // Access control and open files: mongod 6.0 does not check swappiness.
    let lines = &crate::mongo::startup::EXAMPLE[..2];
    rec.mongod
        .as_mut()
        .unwrap()
        .info
        .as_mut()
        .unwrap()
        .startup_warnings = Some(lines.iter().map(|l| (*l).to_owned()).collect());
    let r = report(&rec);
    let ids = |v: &[crate::findings::Finding]| -> Vec<String> {
        v.iter().map(|f| f.rule_id.clone()).collect()
    };
    assert_eq!(
        ids(&r.checklist),
        ["host.open_files", "host.swappiness"],
        "findings {:?}",
        ids(&r.findings)
    );
    assert!(r.findings.iter().all(|f| f.class == RuleClass::Finding));
    let open = &r.checklist[0];
    assert_eq!(open.class, RuleClass::Checklist);
    let line = open.checklist.as_ref().unwrap();
    assert_eq!(line.setting, "open files (ulimit -n)");
    assert_eq!(line.value, "1024");
    assert_eq!(
        open.mongod_warns,
        [
            "Soft rlimits for open file descriptors too low (currentValue: 1024, recommendedMinimum: 64000)"
        ]
    );
    // swappiness: mongod 6.0 has no such warning here, so none is claimed.
    assert!(r.checklist[1].mongod_warns.is_empty());
    // Every warning is shown, the ones no rule speaks of too.
    let shown = r.startup_warnings.as_ref().unwrap();
    assert_eq!(shown.len(), 2);
    assert!(shown[0].starts_with("Access control is not enabled"));
    // The overview counts them; the terminal and Markdown list them after
    // the findings, with the fix behind a link.
    assert_eq!(
        crate::report::overview::checklist_count(&r).as_deref(),
        Some(
            "checklist: 2 settings differ from MongoDB's production notes (listed after the findings)"
        )
    );
    let md = crate::report::markdown::render(&r);
    let (findings_at, checklist_at) = (
        md.find("## Findings").unwrap(),
        md.find("## Checklist").unwrap(),
    );
    assert!(findings_at < checklist_at);
    assert!(md.contains("| open files (ulimit -n) | 1024 | 64000 or more (ulimit settings) | Soft rlimits for open file descriptors too low"));
    assert!(md.contains("docs/rules/host.open_files.md)"));
    assert!(md.contains("## mongod's startup warnings"));
    let text = crate::report::terminal::render(&r, false);
    assert!(text.contains("mongod warns too: Soft rlimits"), "{text}");
    // Near miss: the notes' values, no checklist and no count; warnings
    // not read (FTDC, no live mongod) say nothing of them.
    let quiet = report(&baseline());
    assert!(quiet.checklist.is_empty());
    assert_eq!(crate::report::overview::checklist_count(&quiet), None);
    assert!(!crate::report::markdown::render(&quiet).contains("## Checklist"));
}
