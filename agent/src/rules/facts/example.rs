//! A made-up recording in which every fact group is present and every number
//! is non-zero: rules are evaluated against its facts when they are loaded
//! ([`super::Facts::example`]), and report tests render it.
//!
//! Kept apart from the fact derivation because it is data, not logic: it
//! spells out every field of the recording model once (each family's
//! section in its folder: `family/<name>/example.rs`).

use super::allocator;
use crate::kit::unit::FamilyUnit;
use crate::recording::model::{
    HostFacts, MemoryFacts, NetFacts, NetInterface, NumaNode, ProbeStatus, ProcessFacts,
    ProgramStatus, Recording, ResourceLimit, RxQueue, Slice, SysfsChoice, ThpFacts, VmSysctls,
};
use crate::symbols::AllocatorKind;

/// A made-up, fully populated recording (see [`super::Facts::example`]).
pub(crate) fn example_recording() -> Recording {
    use crate::recording::model::{FORMAT_NAME, FORMAT_VERSION, Target};
    let started_at = chrono::DateTime::<chrono::Utc>::UNIX_EPOCH;
    Recording {
        cpu_profile: Some(example_cpu_profile()),
        offcpu_profile: Some(example_offcpu_profile()),
        offcpu_sampled_one_in: 0,
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        mdiag_version: env!("CARGO_PKG_VERSION").into(),
        started_at,
        ended_at: started_at + chrono::TimeDelta::seconds(1),
        requested_duration_ms: 1000,
        stop_reason: "duration".into(),
        host: example_host(),
        target: Some(Target {
            pid: 100,
            comm: "mongod".into(),
            exe: None,
            cmdline: vec!["mongod".into()],
            how: "pid".into(),
            exit_code: None,
        }),
        probes: example_probes(),
        slices: vec![example_slice()],
        checks: Default::default(),
        target_code: Some(allocator::example_code(
            AllocatorKind::GoogleTcmalloc,
            "/usr/bin/mongod",
        )),
        rseq: Some(crate::recording::rseq::RseqOwnership {
            allocator: AllocatorKind::GoogleTcmalloc,
            glibc_rseq_size: Some(32),
            verdict: crate::recording::rseq::Verdict::BlockedByGlibcRegistration,
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

/// The example host: two CPUs, every optional fact present.
fn example_host() -> HostFacts {
    HostFacts {
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
        memory: Some(example_memory()),
        numa_nodes: Some(vec![NumaNode {
            id: 0,
            cpus: "0-1".into(),
            mem_total_bytes: Some(64 << 30),
        }]),
        target_process: Some(example_target_process()),
        db_path: Some(example_db_path()),
        page_size: Some(4096),
        tcp_keepalive_time: Some(7200),
        cpu_usage: Some(super::cpu::usage(
            1,
            2,
            1.5,
            &[(100, "mongod", 1.0), (200, "other", 0.5)],
        )),
        system: Some(example_system()),
        ..HostFacts::default()
    }
}

/// Memory, THP and the vm sysctls of the example host.
fn example_memory() -> MemoryFacts {
    let choice = |sel: &str| SysfsChoice {
        selected: Some(sel.into()),
        raw: format!("always [{sel}] never"),
    };
    MemoryFacts {
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
    }
}

/// The example target's limits, glibc and NUMA policy.
fn example_target_process() -> ProcessFacts {
    ProcessFacts {
        pid: 100,
        glibc_version: Some("2.36".into()),
        numa_policy: Some("default".into()),
        max_open_files: Some(ResourceLimit {
            soft: Some(1024),
            hard: Some(524_288),
        }),
        thp_enabled: Some(true),
        max_processes: Some(ResourceLimit {
            soft: Some(4096),
            hard: Some(63_000),
        }),
        max_locked_memory: Some(ResourceLimit {
            soft: Some(8 << 20),
            hard: Some(8 << 20),
        }),
        ..ProcessFacts::default()
    }
}

/// The example database directory: on XFS on an NVMe disk.
fn example_db_path() -> crate::recording::DbPathFacts {
    crate::recording::DbPathFacts {
        path: Some("/data/db".into()),
        found_by: Some("open file WiredTiger.lock".into()),
        unknown_reason: None,
        storage: Some(crate::recording::StorageFacts {
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
    }
}

/// The example host's system limits, clock, tuned profile and mongods.
fn example_system() -> crate::recording::SystemFacts {
    crate::recording::SystemFacts {
        file_max: Some(1 << 20),
        file_handles: Some(2000),
        pid_max: Some(32_768),
        threads_max: Some(63_000),
        tasks: Some(500),
        clock: Some(crate::recording::ClockFacts {
            unsynchronised: true,
            state: 5,
            max_error_us: 16_000_000,
            services: vec!["chronyd".into()],
        }),
        tuned: Some(crate::recording::TunedFacts {
            profile: "throughput-performance".into(),
            thp: Some("always".into()),
            readahead: Some(">4096".into()),
            running: true,
        }),
        mongods: Some(vec![
            crate::recording::MongodProcess {
                pid: 100,
                cache_size_mb: None,
                cache_from: "default".into(),
                memory_limit_bytes: None,
            },
            crate::recording::MongodProcess {
                pid: 101,
                cache_size_mb: Some(2048),
                cache_from: "--wiredTigerCacheSizeGB".into(),
                memory_limit_bytes: Some(8 << 30),
            },
        ]),
        // A dedicated host: sshd, an exporter and mdiag beside mongod.
        other_anon_bytes: Some(400 << 20),
        largest_others: Some(vec![crate::recording::ProcessMemory {
            pid: 900,
            comm: "node_exporter".into(),
            anon_bytes: 60 << 20,
        }]),
        kubernetes_node: Some(false),
    }
}

/// The sched and softirq probes, both attached.
fn example_probes() -> Vec<ProbeStatus> {
    vec![
        ProbeStatus {
            family: "sched".into(),
            programs: vec![ProgramStatus {
                name: "sched_switch".into(),
                attach_point: "tp_btf/sched_switch".into(),
                error: None,
            }],
            left_out: None,
        },
        ProbeStatus {
            family: "softirq".into(),
            programs: vec![ProgramStatus {
                name: "softirq_entry".into(),
                attach_point: "tp_btf/softirq_entry".into(),
                error: None,
            }],
            left_out: None,
        },
    ]
}

/// Generates [`example_slice`] from the registry.
macro_rules! example_slice {
    ($($variant:ident $module:ident,)*) => {
        /// The one slice of the example recording: every family's example
        /// section ([`FamilyUnit::example`]).
        fn example_slice() -> Slice {
            Slice {
                start_ms: 0,
                duration_ms: 1000,
                $($module: <crate::family::$module::Unit as FamilyUnit>::example(),)*
                mongod: None,
            }
        }
    };
}
crate::kit::family::for_each_family!(example_slice);

/// A small on-CPU profile: a connection thread in the allocator and in
/// WiredTiger's data-handle lookup.
fn example_cpu_profile() -> crate::stacks::Profile {
    use crate::stacks::{Frame, Profile, ProfileKind, ProfileStack};
    let stack = |frames: &[&str], value| ProfileStack {
        class: "conn".into(),
        frames: frames.iter().map(|f| Frame::new(*f, "mongod")).collect(),
        truncated: false,
        in_checkpoint: None,
        value,
    };
    Profile {
        kind: ProfileKind::OnCpu,
        freq_hz: 99,
        duration_ns: 2_000_000_000,
        stacks: vec![
            stack(&["mongo::BSONObjBuilder::append", "tc_malloc"], 10),
            stack(
                &["mongo::CollectionImpl::find", "__wt_session_get_dhandle"],
                5,
            ),
            stack(&["mongo::CollectionImpl::find", "__wt_row_search"], 85),
        ],
    }
}

/// A small off-CPU profile: a connection thread asleep in WiredTiger
/// during a checkpoint.
fn example_offcpu_profile() -> crate::stacks::Profile {
    use crate::stacks::{Frame, Profile, ProfileKind, ProfileStack, table::Wait};
    Profile {
        kind: ProfileKind::OffCpu,
        freq_hz: 0,
        duration_ns: 2_000_000_000,
        stacks: vec![ProfileStack {
            class: "conn".into(),
            frames: vec![
                Wait::Sleep.frame(),
                Frame::new("mongo::ServiceStateMachine::Impl::processMessage", "mongod"),
                Frame::new("__wt_cond_wait_signal", "mongod"),
                Frame::new("futex_wait", crate::stacks::KERNEL_OBJECT),
            ],
            truncated: false,
            in_checkpoint: Some(true),
            value: 40_000_000,
        }],
    }
}
