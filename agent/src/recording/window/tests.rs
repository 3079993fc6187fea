//! Laws of windows, checked as properties over random slices of every family
//! (`random.rs`): merging is associative with `Default` as identity, a window
//! built slice by slice equals one merged from windows, and bounding keeps
//! every total exact while naming at most `top_n` rows.

#![allow(
    clippy::too_many_lines,
    reason = "a test builds its case and checks every figure in one place"
)]

use super::random::{Rng, slice, slices};
use super::*;

fn merged<T: Mergeable + Clone>(a: &T, b: &T) -> T {
    let mut m = a.clone();
    m.merge(b);
    m
}

fn check_monoid<T: Mergeable + Clone + PartialEq + std::fmt::Debug>(a: &T, b: &T, c: &T) {
    let left = merged(&merged(a, b), c);
    let right = merged(a, &merged(b, c));
    assert_eq!(left, right, "merge is not associative");
    assert_eq!(
        &merged(&T::default(), a),
        a,
        "default is not a left identity"
    );
    assert_eq!(
        &merged(a, &T::default()),
        a,
        "default is not a right identity"
    );
}

#[test]
fn merging_is_associative_with_an_identity_for_every_family() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..300 {
        let [a, b, c] = [slice(&mut r, 0), slice(&mut r, 1000), slice(&mut r, 2000)];
        check_monoid(&a, &b, &c);
        check_monoid(&a.sched, &b.sched, &c.sched);
        check_monoid(&a.softirq, &b.softirq, &c.softirq);
        check_monoid(&a.syscalls, &b.syscalls, &c.syscalls);
        check_monoid(&a.wiredtiger, &b.wiredtiger, &c.wiredtiger);
        check_monoid(&a.perf, &b.perf, &c.perf);
        check_monoid(&a.alloc, &b.alloc, &c.alloc);
        check_monoid(&a.contention, &b.contention, &c.contention);
        check_monoid(&a.mongod, &b.mongod, &c.mongod);
        check_monoid(&Window::of(&a), &Window::of(&b), &Window::of(&c));
        // Bounded windows merge associatively too (bounding itself is not).
        let bounded = |s: &Slice| {
            let mut w = Window::of(s);
            w.bound(2);
            w
        };
        check_monoid(&bounded(&a), &bounded(&b), &bounded(&c));
    }
}

#[test]
fn a_window_pushed_slice_by_slice_equals_merged_windows() {
    let mut r = Rng(7);
    for n in 0..12 {
        let s = slices(&mut r, n);
        let mut by_windows = Window::default();
        for x in &s {
            by_windows.merge(&Window::of(x));
        }
        let mut w = merge_window(&s, usize::MAX);
        assert_eq!(w.slices, n);
        assert_eq!(
            w.duration_ms(),
            s.iter().map(|x| x.duration_ms).sum::<u64>()
        );
        assert_eq!(w.start_ms(), 0);
        // Bounding above every map's size only orders the rows.
        by_windows.bound(usize::MAX);
        assert_eq!(w, by_windows);
        w.bound(usize::MAX);
        assert_eq!(w, by_windows, "bounding is idempotent");
    }
    assert_eq!(merge_window(&[], 3), Window::default());
}

/// Every total a bound must keep, by name.
fn totals(w: &Window) -> Vec<(&'static str, u64)> {
    let s = &w.slice;
    let sum = |it: &mut dyn Iterator<Item = u64>| it.sum::<u64>();
    let mut t = vec![("slices", w.slices), ("duration_ms", s.duration_ms)];
    if let Some(x) = &s.sched {
        let th = &x.threads;
        t.push(("sched.oncpu", sum(&mut th.iter().map(|t| t.oncpu_ns))));
        t.push((
            "sched.runq_ns",
            sum(&mut th.iter().map(|t| t.runq_delay_ns)),
        ));
        t.push(("sched.runq_n", sum(&mut th.iter().map(|t| t.runq_delays))));
        t.push(("sched.invol", sum(&mut th.iter().map(|t| t.involuntary))));
        t.push(("sched.vol", sum(&mut th.iter().map(|t| t.voluntary))));
        t.push(("sched.wp", sum(&mut th.iter().map(|t| t.wakeup_preempting))));
        t.push(("sched.hist", sum(&mut x.runq_hist_log2_ns.iter().copied())));
    }
    if let Some(x) = &s.softirq {
        let h = &x.hardirqs;
        t.push((
            "irq.count",
            sum(&mut h.iter().flat_map(|h| h.count_per_cpu.clone())),
        ));
        t.push((
            "irq.ns",
            sum(&mut h.iter().flat_map(|h| h.time_ns_per_cpu.clone())),
        ));
        let v = &x.vectors;
        t.push((
            "softirq.ns",
            sum(&mut v.iter().flat_map(|v| v.time_ns_per_cpu.clone())),
        ));
    }
    if let Some(x) = &s.syscalls {
        let th = &x.threads;
        t.push(("futex.ns", sum(&mut th.iter().map(|t| t.futex_wait_ns))));
        t.push(("futex.n", sum(&mut th.iter().map(|t| t.futex_waits))));
        t.push((
            "futex.in_ns",
            sum(&mut th.iter().map(|t| t.futex_wait_ns_in_checkpoint)),
        ));
        t.push(("mem.ns", sum(&mut th.iter().map(|t| t.mem_ns))));
        t.push(("rseq", x.rseq.len() as u64));
    }
    if let Some(x) = &s.contention {
        let th = &x.threads;
        t.push(("lock.ns", sum(&mut th.iter().map(|t| t.lock.ns()))));
        t.push(("lock.n", sum(&mut th.iter().map(|t| t.lock.count()))));
        t.push(("dstate.ns", sum(&mut th.iter().map(|t| t.dstate.ns()))));
        let stacks = sum(&mut x.dstate_stacks.iter().map(|s| s.sleeps.ns()));
        t.push(("stacks.ns", stacks + x.other_stacks.ns()));
        let n = sum(&mut x.dstate_stacks.iter().map(|s| s.sleeps.count()));
        t.push(("stacks.n", n + x.other_stacks.count()));
    }
    if let Some(x) = &s.alloc {
        let w = &x.windows;
        let f = || w.iter().flat_map(|w| &w.functions);
        t.push((
            "alloc.ns",
            sum(&mut w.iter().map(|w| w.end_ns - w.start_ns)),
        ));
        t.push((
            "alloc.ms",
            sum(&mut w.iter().map(|w| w.end_ms - w.start_ms)),
        ));
        t.push(("alloc.hits", sum(&mut w.iter().map(|w| w.probe_hits))));
        t.push(("alloc.calls", sum(&mut f().map(|f| f.count))));
        t.push(("alloc.sum_ns", sum(&mut f().map(|f| f.sum_ns))));
        t.push((
            "alloc.buckets",
            sum(&mut f().flat_map(|f| f.buckets.clone())),
        ));
        let c = || f().flat_map(|f| &f.size_classes);
        t.push(("alloc.class_calls", sum(&mut c().map(|c| c.count))));
        t.push(("alloc.drops", sum(&mut w.iter().map(|w| w.drops.too_deep))));
    }
    t.push(("mongod.missing", w.mongod.missing.values().sum()));
    t.push(("mongod.samples", w.mongod.seconds_with_sample));
    t
}

/// Rows named in the bounded maps (the "others" row not counted).
fn named_rows(w: &Window) -> Vec<usize> {
    let s = &w.slice;
    let named = |n: usize, others: bool| n - usize::from(others);
    let mut rows = vec![];
    if let Some(x) = &s.sched {
        rows.push(named(
            x.threads.len(),
            x.threads.iter().any(|t| t.tid == OTHERS_ID),
        ));
    }
    if let Some(x) = &s.softirq {
        rows.push(named(
            x.hardirqs.len(),
            x.hardirqs.iter().any(|h| h.irq == OTHERS_ID),
        ));
    }
    if let Some(x) = &s.syscalls {
        rows.push(named(
            x.threads.len(),
            x.threads.iter().any(|t| t.tid == OTHERS_ID),
        ));
    }
    if let Some(x) = &s.contention {
        rows.push(named(
            x.threads.len(),
            x.threads.iter().any(|t| t.tid == OTHERS_ID),
        ));
        rows.push(x.dstate_stacks.len());
    }
    if let Some(x) = &s.perf {
        rows.push(x.by_symbol.len());
    }
    if let Some(x) = &s.alloc {
        rows.push(x.windows.len().saturating_sub(1));
    }
    rows.push(named(
        w.mongod.missing.len(),
        w.mongod.missing.contains_key(OTHERS_NAME),
    ));
    rows
}

#[test]
fn bounding_keeps_totals_exact_and_names_at_most_top_n_rows() {
    let mut r = Rng(42);
    for top_n in 0..4 {
        for n in [1, 3, 10, 30] {
            let s = slices(&mut r, n);
            let exact = merge_window(&s, usize::MAX);
            let bounded = merge_window(&s, top_n);
            assert_eq!(
                totals(&bounded),
                totals(&exact),
                "top {top_n} of {n} slices"
            );
            for rows in named_rows(&bounded) {
                assert!(rows <= top_n, "{rows} rows named, top {top_n}");
            }
            // Bounding every slice, then again after each merge (the
            // agent's way), keeps the totals too.
            let mut rolling = Window::default();
            for x in &s {
                let mut w = Window::of(x);
                w.bound(top_n);
                rolling.merge(&w);
                rolling.bound(top_n);
            }
            assert_eq!(totals(&rolling), totals(&exact), "rolling, top {top_n}");
            // What is not in a map is exact whatever the bound.
            let strip = |w: &Window| {
                let mut s = w.slice.clone();
                for x in s.sched.iter_mut() {
                    x.threads.clear();
                }
                for x in s.perf.iter_mut() {
                    x.by_symbol.clear();
                    x.slow_paths.sort_by(|a, b| a.label.cmp(&b.label));
                }
                s
            };
            assert_eq!(strip(&bounded).sched, strip(&exact).sched, "top {top_n}");
            assert_eq!(strip(&bounded).perf, strip(&exact).perf);
            assert_eq!(bounded.slice.wiredtiger, exact.slice.wiredtiger);
            assert_eq!(bounded.section_ms, exact.section_ms);
            assert_eq!(
                (&bounded.mongod.first, &bounded.mongod.last),
                (&exact.mongod.first, &exact.mongod.last)
            );
        }
    }
}

#[test]
fn histograms_and_per_cpu_arrays_merge_bucket_by_bucket() {
    for (a, b, want) in [
        (vec![], vec![], vec![]),
        (vec![1, 2], vec![], vec![1, 2]),
        (vec![], vec![0, 0, 3], vec![0, 0, 3]),
        (vec![1, 2, 3], vec![10], vec![11, 2, 3]),
        (vec![1], vec![1, 0, 5], vec![2, 0, 5]),
        (vec![u64::MAX], vec![1], vec![u64::MAX]),
    ] {
        let mut got = a.clone();
        crate::kit::merge::add_each(&mut got, &b);
        assert_eq!(got, want, "{a:?} + {b:?}");
    }
}

#[test]
fn times_and_settings_and_names_take_the_right_side() {
    use crate::recording::model::{HardIrqSlice, PerfSlice, SchedSlice, SoftirqSlice, ThreadSlice};
    use crate::recording::mongod::MongodSlice;
    use crate::recording::server_status::ServerStatusSample;
    let thread = |comm: &str, tgid: u32, oncpu_ns: u64| ThreadSlice {
        tid: 5,
        tgid,
        comm: comm.into(),
        oncpu_ns,
        ..ThreadSlice::default()
    };
    let sample = |n: i64| MongodSlice {
        at_ms: Some(n as u64),
        status: Some(ServerStatusSample {
            connections_current: Some(n),
            ..Default::default()
        }),
        missing: None,
        poll_ms: None,
        ..Default::default()
    };
    let missing = MongodSlice {
        missing: Some("timeout".into()),
        ..MongodSlice::default()
    };
    let a = Slice {
        start_ms: 1000,
        duration_ms: 1000,
        sched: Some(SchedSlice {
            threads: vec![thread("conn5", 1, 10)],
            ..SchedSlice::default()
        }),
        softirq: Some(SoftirqSlice {
            hardirqs: vec![HardIrqSlice {
                irq: 3,
                name: "eth0".into(),
                ..HardIrqSlice::default()
            }],
            ..SoftirqSlice::default()
        }),
        perf: Some(PerfSlice {
            freq_hz: 99,
            allocator: Some(crate::symbols::AllocatorKind::Glibc),
            ..PerfSlice::default()
        }),
        mongod: Some(sample(1)),
        ..Slice::default()
    };
    let b = Slice {
        start_ms: 2000,
        duration_ms: 500,
        sched: Some(SchedSlice {
            threads: vec![thread("renamed", 1, 20)],
            ..SchedSlice::default()
        }),
        softirq: Some(SoftirqSlice {
            hardirqs: vec![HardIrqSlice {
                irq: 3,
                name: String::new(),
                ..HardIrqSlice::default()
            }],
            ..SoftirqSlice::default()
        }),
        perf: Some(PerfSlice::default()),
        mongod: Some(missing.clone()),
        ..Slice::default()
    };
    let m = merged(&a, &b);
    assert_eq!((m.start_ms, m.duration_ms), (1000, 1500));
    let t = &m.sched.as_ref().unwrap().threads;
    assert_eq!(
        (t.len(), t[0].comm.as_str(), t[0].oncpu_ns),
        (1, "renamed", 30)
    );
    // An IRQ whose name was unknown later keeps the known one.
    assert_eq!(m.softirq.as_ref().unwrap().hardirqs[0].name, "eth0");
    // Settings: the newest known.
    let p = m.perf.as_ref().unwrap();
    assert_eq!((p.freq_hz, p.allocator.is_some()), (99, true));
    // mongod: the newest sample with a status beats a newer missing second...
    assert_eq!(m.mongod, Some(sample(1)));
    // ...and a newer sample beats it; with no status at all, the newest reason.
    assert_eq!(
        merged(
            &m,
            &Slice {
                mongod: Some(sample(3)),
                ..b.clone()
            }
        )
        .mongod,
        Some(sample(3))
    );
    let mut none = MongodSlice::default();
    none.merge(&missing);
    assert_eq!(none, missing);
    // The window keeps both ends and counts the seconds.
    let w = merge_window(
        &[
            a.clone(),
            b.clone(),
            Slice {
                mongod: Some(sample(3)),
                ..b
            },
        ],
        9,
    );
    let firsts = (w.mongod.first.clone(), w.mongod.last.clone());
    assert_eq!(firsts, (Some(sample(1)), Some(sample(3))));
    assert_eq!(
        (w.mongod.seconds_with_sample, w.mongod.missing["timeout"]),
        (2, 1)
    );
    assert_eq!(w.mongod.span_ms(), Some(2));
    assert_eq!(w.mongod.delta(|s| s.connections_current), Some(2));
}

#[test]
fn bounding_folds_into_others_rows() {
    use crate::recording::model::{
        AllocFunctionWindow, AllocSlice, AllocWindow, PerfSlice, PerfSymbol, SchedSlice,
        ThreadSlice,
    };
    use crate::recording::{ContentionSlice, DStateStackSlice, WindowSplit};
    let thread = |tid: u32, tgid: u32, oncpu_ns: u64| ThreadSlice {
        tid,
        tgid,
        comm: format!("t{tid}"),
        oncpu_ns,
        ..ThreadSlice::default()
    };
    let sleeps = |ns: u64| WindowSplit::from_arrays([1, 0], [ns, 0]);
    let window = |start_ms: u64, calls: u64| AllocWindow {
        start_ns: start_ms * 1_000_000,
        end_ns: (start_ms + 100) * 1_000_000,
        start_ms,
        end_ms: start_ms + 100,
        probe_hits: calls,
        functions: vec![AllocFunctionWindow {
            symbol: "malloc".into(),
            count: calls,
            buckets: vec![0, calls],
            ..AllocFunctionWindow::default()
        }],
        ..AllocWindow::default()
    };
    let mut s = Slice {
        start_ms: 0,
        duration_ms: 1000,
        sched: Some(SchedSlice {
            threads: vec![thread(1, 100, 5), thread(2, 100, 50), thread(3, 100, 7)],
            ..SchedSlice::default()
        }),
        contention: Some(ContentionSlice {
            dstate_stacks: (1..=3)
                .map(|id| DStateStackSlice {
                    stack_id: id,
                    sleeps: sleeps(u64::from(id) * 10),
                })
                .collect(),
            other_stacks: sleeps(1),
            ..ContentionSlice::default()
        }),
        perf: Some(PerfSlice {
            by_symbol: (1..=3)
                .map(|i| PerfSymbol {
                    symbol: Some(format!("f{i}")),
                    samples: i,
                    ..PerfSymbol::default()
                })
                .collect(),
            ..PerfSlice::default()
        }),
        alloc: Some(AllocSlice {
            windows: vec![window(0, 1), window(5000, 2), window(10_000, 4)],
        }),
        ..Slice::default()
    };
    s.bound(1);
    let t = &s.sched.as_ref().unwrap().threads;
    assert_eq!(t.len(), 2);
    assert_eq!((t[0].tid, t[0].oncpu_ns), (2, 50));
    assert_eq!(
        (t[1].tid, t[1].tgid, t[1].comm.as_str()),
        (OTHERS_ID, 100, OTHERS_NAME)
    );
    assert_eq!(t[1].oncpu_ns, 12);
    // Another process's thread folded in: the others row has no one process.
    let mut t = t.clone();
    t.push(thread(4, 200, 1));
    t.push(thread(5, 200, 1));
    crate::kit::merge::keep_top(&mut t, 1);
    assert_eq!((t[1].tgid, t[1].oncpu_ns), (OTHERS_ID, 14));
    // Stacks fold into the slice's own `other_stacks`.
    let c = s.contention.as_ref().unwrap();
    assert_eq!(c.dstate_stacks.len(), 1);
    assert_eq!((c.dstate_stacks[0].stack_id, c.other_stacks.ns()), (3, 31));
    // Symbols: the most sampled, no others row.
    let p = s.perf.as_ref().unwrap();
    assert_eq!(p.by_symbol.len(), 1);
    assert_eq!(p.by_symbol[0].symbol.as_deref(), Some("f3"));
    // Allocator windows: the older ones folded into one, placed first, as
    // long as both together.
    let w = &s.alloc.as_ref().unwrap().windows;
    assert_eq!(w.len(), 2);
    assert_eq!(
        (w[0].start_ms, w[0].end_ms, w[0].end_ns),
        (0, 200, 200_000_000)
    );
    assert_eq!(
        (w[0].probe_hits, w[0].functions[0].buckets.clone()),
        (3, vec![0, 3])
    );
    assert_eq!(w[1], window(10_000, 4));
    // mongod's missing reasons keep the most frequent.
    let mut m = MongodWindow::default();
    for (why, n) in [("a", 3), ("b", 2), ("c", 1)] {
        m.missing.insert(why.into(), n);
    }
    m.bound(1);
    assert_eq!(m.missing.len(), 2);
    assert_eq!((m.missing["a"], m.missing[OTHERS_NAME]), (3, 3));
}
