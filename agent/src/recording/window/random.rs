//! Random slices of every family for the windows' property tests: a small
//! deterministic generator (no property-testing crate is a dependency), with
//! keys drawn from small sets so that rows of different slices meet.

use crate::recording::model::*;
use crate::recording::mongod::MongodSlice;
use crate::recording::server_status::ServerStatusSample;
use crate::recording::{
    ContentionSlice, DStateStackSlice, LockKindSlice, ThreadContentionSlice, WindowSplit,
};
use crate::symbols::AllocatorKind;

/// xorshift64*: reproducible random numbers for the properties.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn vec(&mut self, max_len: u64, max: u64) -> Vec<u64> {
        (0..self.below(max_len + 1))
            .map(|_| self.below(max))
            .collect()
    }
    /// Distinct ids out of 1..=`of`, at most `max` of them, in random order.
    fn ids(&mut self, max: u64, of: u32) -> Vec<u32> {
        let mut ids: Vec<u32> = Vec::new();
        for _ in 0..self.below(max + 1) {
            let id = 1 + self.below(u64::from(of)) as u32;
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        ids
    }
}

fn split(r: &mut Rng) -> WindowSplit {
    WindowSplit::from_arrays([r.below(5), r.below(5)], [r.below(10_000), r.below(10_000)])
}

fn sched(r: &mut Rng) -> SchedSlice {
    SchedSlice {
        switches_total: r.below(5000),
        switches_per_cpu: r.vec(4, 1000),
        voluntary: r.below(500),
        involuntary: r.below(500),
        preempted: r.below(500),
        wakeups: r.below(500),
        wakeup_preemptions: r.below(100),
        migrations: r.below(100),
        runq_hist_log2_ns: r.vec(24, 50),
        threads: r
            .ids(6, 9)
            .into_iter()
            .map(|tid| ThreadSlice {
                tid,
                tgid: if tid < 7 { 100 } else { 200 },
                comm: format!("conn{tid}"),
                voluntary: r.below(50),
                involuntary: r.below(50),
                preempted: r.below(50),
                runq_delay_ns: r.below(1_000_000),
                runq_delays: r.below(50),
                oncpu_ns: r.below(1_000_000),
                wakeup_preempted: r.below(9),
                migrations: r.below(9),
                wakeup_preempting: r.below(9),
            })
            .collect(),
        drops: SchedDrops {
            thread_map_full: r.below(3),
            wakeup_map_full: r.below(3),
            read_failed: r.below(3),
        },
    }
}

fn softirq(r: &mut Rng) -> SoftirqSlice {
    let names = ["NET_RX", "TIMER", "RCU"];
    SoftirqSlice {
        vectors: r
            .ids(3, 3)
            .into_iter()
            .map(|i| SoftirqVector {
                name: names[i as usize - 1].into(),
                count_per_cpu: r.vec(4, 100),
                time_ns_per_cpu: r.vec(4, 100_000),
            })
            .collect(),
        hardirqs: r
            .ids(5, 7)
            .into_iter()
            .map(|irq| HardIrqSlice {
                irq,
                name: if r.chance(80) {
                    format!("eth0-{irq}")
                } else {
                    String::new()
                },
                count_per_cpu: r.vec(4, 100),
                time_ns_per_cpu: r.vec(4, 100_000),
            })
            .collect(),
        drops: SoftirqDrops {
            unmatched_exit: r.below(3),
            irq_map_full: r.below(3),
            bad_vector: r.below(3),
        },
    }
}

fn syscalls(r: &mut Rng) -> SyscallsSlice {
    let names = ["futex_wait", "mmap", "madvise"];
    SyscallsSlice {
        calls: r
            .ids(3, 3)
            .into_iter()
            .map(|i| SyscallCalls {
                name: names[i as usize - 1].into(),
                count: r.below(100),
                errors: r.below(5),
                time_ns: r.below(1_000_000),
                bytes: r.below(1 << 20),
                hist_log2_ns: r.vec(20, 20),
            })
            .collect(),
        threads: r
            .ids(6, 9)
            .into_iter()
            .map(|tid| {
                let (waits, ns) = (r.below(20), r.below(1_000_000));
                ThreadSyscallSlice {
                    tid,
                    tgid: 100,
                    futex_waits: waits,
                    futex_wait_ns: ns,
                    mem_calls: r.below(20),
                    mem_ns: r.below(100_000),
                    futex_waits_in_checkpoint: r.below(waits + 1),
                    futex_wait_ns_in_checkpoint: r.below(ns + 1),
                }
            })
            .collect(),
        rseq: (0..r.below(2))
            .map(|_| RseqCall {
                tid: 1 + r.below(9) as u32,
                ret: if r.chance(50) { 0 } else { -22 },
                ..RseqCall::default()
            })
            .collect(),
        drops: SyscallDropsSlice {
            inflight_full: r.below(3),
            thread_map_full: r.below(3),
            rseq_ring_full: r.below(3),
        },
    }
}

fn alloc(r: &mut Rng, start_ms: u64) -> AllocSlice {
    let function = |r: &mut Rng, symbol: &str| AllocFunctionWindow {
        symbol: symbol.into(),
        count: r.below(1000),
        sum_ns: r.below(1_000_000),
        buckets: r.vec(12, 100),
        size_classes: r
            .ids(3, 4)
            .into_iter()
            .map(|c| AllocSizeClassWindow {
                min_bytes: 1 << c,
                count: r.below(100),
                sum_ns: r.below(10_000),
                buckets: r.vec(12, 10),
            })
            .collect(),
    };
    AllocSlice {
        windows: (0..r.below(3))
            .map(|i| {
                let start_ns = (start_ms + i * 300) * 1_000_000;
                AllocWindow {
                    start_ns,
                    end_ns: start_ns + r.below(200) * 1_000_000,
                    start_ms: start_ms + i * 300,
                    end_ms: start_ms + i * 300 + r.below(200),
                    probe_hits: r.below(5000),
                    functions: {
                        let mut fs = Vec::new();
                        for symbol in ["malloc", "free", "calloc"] {
                            if r.chance(70) {
                                fs.push(function(r, symbol));
                            }
                        }
                        fs
                    },
                    drops: AllocDrops {
                        missing_entry: r.below(3),
                        mismatched: r.below(3),
                        too_deep: r.below(3),
                        stack_full: r.below(3),
                    },
                }
            })
            .collect(),
    }
}

fn contention(r: &mut Rng) -> ContentionSlice {
    let kinds = ["spinlock", "mutex", "rwsem:W"];
    ContentionSlice {
        threads: r
            .ids(5, 9)
            .into_iter()
            .map(|tid| ThreadContentionSlice {
                tid,
                tgid: 100,
                comm: format!("conn{tid}"),
                lock: split(r),
                dstate: split(r),
            })
            .collect(),
        lock_kinds: r
            .ids(3, 3)
            .into_iter()
            .map(|i| LockKindSlice {
                kind: kinds[i as usize - 1].into(),
                flags: i,
                waits: split(r),
            })
            .collect(),
        dstate_stacks: r
            .ids(4, 7)
            .into_iter()
            .map(|stack_id| DStateStackSlice {
                stack_id,
                sleeps: split(r),
            })
            .collect(),
        other_stacks: split(r),
        drops: Default::default(),
    }
}

fn mongod(r: &mut Rng, start_ms: u64) -> MongodSlice {
    if r.chance(70) {
        MongodSlice {
            at_ms: r.chance(90).then_some(start_ms + 100),
            status: Some(ServerStatusSample {
                op_insert: Some(start_ms as i64 / 10 + r.below(50) as i64),
                connections_current: Some(r.below(100) as i64),
                ..Default::default()
            }),
            missing: None,
            poll_ms: r.chance(50).then(|| r.below(900)),
            ..Default::default()
        }
    } else {
        let why = ["unreachable", "timeout", "auth"][r.below(3) as usize];
        MongodSlice {
            at_ms: None,
            status: None,
            missing: r.chance(80).then(|| why.to_string()),
            poll_ms: None,
            ..Default::default()
        }
    }
}

/// A random one-second slice starting at `start_ms`, each family present
/// most of the time.
pub(super) fn slice(r: &mut Rng, start_ms: u64) -> Slice {
    slice_with(r, start_ms, 85)
}

/// A random slice, each family present with `percent` chance.
fn slice_with(r: &mut Rng, start_ms: u64, percent: u64) -> Slice {
    Slice {
        start_ms,
        duration_ms: 900 + r.below(101),
        sched: r.chance(percent).then(|| sched(r)),
        softirq: r.chance(percent).then(|| softirq(r)),
        syscalls: r.chance(percent).then(|| syscalls(r)),
        wiredtiger: r.chance(percent).then(|| WiredTigerSlice {
            checkpoints: (0..r.below(2))
                .map(|_| Checkpoint {
                    tid: 7,
                    start_ns: r.below(1 << 40),
                    duration_ns: r.below(1 << 30),
                    ..Checkpoint::default()
                })
                .collect(),
            drops: WiredTigerDropsSlice {
                ring_full: r.below(2),
                ..Default::default()
            },
        }),
        perf: r.chance(percent).then(|| PerfSlice {
            freq_hz: if r.chance(80) { 99 } else { 0 },
            samples: r.below(2000),
            target_samples: r.below(1000),
            allocator: r.chance(50).then_some(AllocatorKind::GoogleTcmalloc),
            allocator_samples: r.below(100),
            slow_paths: r
                .ids(2, 3)
                .into_iter()
                .map(|i| PerfSlowPath {
                    label: format!("path{i}"),
                    samples: r.below(50),
                })
                .collect(),
            by_symbol: r
                .ids(4, 6)
                .into_iter()
                .map(|i| PerfSymbol {
                    object: Some("/usr/bin/mongod".into()),
                    symbol: (i < 6).then(|| format!("f{i}")),
                    samples: r.below(100),
                    allocator: i % 2 == 0,
                    slow_path: None,
                })
                .collect(),
            drops: r.below(3),
            ..PerfSlice::default()
        }),
        alloc: r.chance(percent * 7 / 10).then(|| alloc(r, start_ms)),
        contention: r.chance(percent).then(|| contention(r)),
        mongod: r.chance(percent).then(|| mongod(r, start_ms)),
    }
}

/// `n` consecutive random slices.
pub(super) fn slices(r: &mut Rng, n: u64) -> Vec<Slice> {
    slices_with(r, n, 85)
}

/// `n` consecutive random slices, each family present with `percent` chance.
pub(super) fn slices_with(r: &mut Rng, n: u64, percent: u64) -> Vec<Slice> {
    let mut at = 0;
    (0..n)
        .map(|_| {
            let s = slice_with(r, at, percent);
            at += s.duration_ms;
            s
        })
        .collect()
}
