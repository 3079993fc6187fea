//! The syscalls family in the report: per watched syscall its rate, errors,
//! mean and p99 latency and bytes, the futex wait time and the threads
//! blocked most and rseq(2) registrations, read from the recording's merged
//! window (its `syscalls` section); with the view of them that the terminal
//! and Markdown reports lay out. The target's rseq ownership, which the
//! recording holds beside its slices, is `report::rseq`'s.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use super::section::{SyscallCalls, SyscallsSlice};
use crate::findings::format_number;
use crate::kit::fact::ratio;
use crate::kit::family::FamilyWindow;
use crate::kit::merge::Row;
use crate::kit::view::{Block, Cell, Column, Line, Section, Table, capitalise, md_cell, percent};

/// Syscalls listed under "top threads by futex wait time".
pub const TOP_FUTEX_THREADS: usize = 3;
/// Syscalls whose length arguments are summed into `bytes`.
pub const MEMORY_SYSCALLS: [&str; 5] = ["mmap", "munmap", "madvise", "brk", "mremap"];

/// Syscalls family (`syscalls` slices), summed over the whole recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyscallsMeasurements {
    /// Wall time of the recording's slices, seconds.
    pub duration_s: f64,
    /// One row per syscall name, in name order.
    pub calls: Vec<SyscallMeasurement>,
    /// Time observed threads spent blocked in futex waits, ms per second of
    /// wall time (1000 = one thread blocked all the time).
    pub futex_wait_ms_per_s: f64,
    /// Up to [`TOP_FUTEX_THREADS`] threads with the most futex wait time.
    pub top_futex_threads: Vec<FutexThreadMeasurement>,
    /// rseq(2) registrations seen (calls without the unregister flag).
    pub rseq_registrations: u64,
    /// Of which failed.
    pub rseq_failed: u64,
    /// The failures by errno, most first.
    pub rseq_failed_by_errno: Vec<ErrnoCount>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyscallMeasurement {
    pub name: String,
    pub count: u64,
    pub count_per_s: f64,
    pub errors: u64,
    /// Mean time inside the call, µs.
    pub mean_us: f64,
    /// 99th percentile from the log2 latency histogram, µs (`None` without one).
    pub p99_us: Option<f64>,
    /// Bytes per second (memory syscalls only).
    pub bytes_per_s: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FutexThreadMeasurement {
    pub tid: u32,
    pub futex_waits: u64,
    pub wait_ms_per_s: f64,
    /// Share of wall time the thread was blocked in futex waits (0..1).
    pub blocked_share: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrnoCount {
    /// Positive errno (22).
    pub errno: i64,
    /// "EINVAL", or "errno N" when not one of rseq's.
    pub name: String,
    pub count: u64,
}

/// "EINVAL" for 22, ...
pub fn errno_name(errno: i64) -> String {
    match errno {
        1 => "EPERM".into(),
        14 => "EFAULT".into(),
        16 => "EBUSY".into(),
        22 => "EINVAL".into(),
        38 => "ENOSYS".into(),
        n => format!("errno {n}"),
    }
}

/// The syscalls measurements of a window of a recording (calls by name,
/// threads by tid, rseq calls appended); `None` when no slice has the
/// family.
pub fn build(w: &FamilyWindow<SyscallsSlice>) -> Option<SyscallsMeasurements> {
    use std::collections::BTreeMap;
    let s = w.section?;
    // Over the whole recording, as this report always showed.
    let duration_s = w.window_ms as f64 / 1000.0;
    // The window has one row per name and per tid; by name and by tid here
    // for the order of the rows.
    let mut calls: BTreeMap<&str, SyscallCalls> = BTreeMap::new();
    for c in &s.calls {
        calls.entry(c.name.as_str()).or_default().add(c);
    }
    let mut threads: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for t in &s.threads {
        let e = threads.entry(t.tid).or_default();
        e.0 = e.0.saturating_add(t.futex_waits);
        e.1 = e.1.saturating_add(t.futex_wait_ns);
    }
    let mut errnos: BTreeMap<i64, u64> = BTreeMap::new();
    let (mut registrations, mut failed) = (0u64, 0u64);
    for r in s.rseq.iter().filter(|r| r.flags & 1 == 0) {
        registrations += 1;
        if r.ret < 0 {
            failed += 1;
            *errnos.entry(-r.ret).or_default() += 1;
        }
    }
    let ms_per_s = |ns: u64| ratio(ns as f64 / 1e6, duration_s);
    let calls = calls
        .into_iter()
        .map(|(name, c)| SyscallMeasurement {
            name: name.to_string(),
            count: c.count,
            count_per_s: ratio(c.count as f64, duration_s),
            errors: c.errors,
            mean_us: ratio(c.time_ns as f64, c.count as f64) / 1000.0,
            p99_us: crate::hist::log2_hist_percentile_ns(&c.hist_log2_ns, 0.99)
                .map(|ns| ns / 1000.0),
            bytes_per_s: MEMORY_SYSCALLS
                .contains(&name)
                .then(|| ratio(c.bytes as f64, duration_s)),
        })
        .collect();
    let futex_total: u64 = threads.values().map(|t| t.1).sum();
    let mut top: Vec<(u32, (u64, u64))> = threads.into_iter().filter(|t| t.1.1 > 0).collect();
    top.sort_by_key(|&(tid, (_, ns))| (std::cmp::Reverse(ns), tid));
    top.truncate(TOP_FUTEX_THREADS);
    let mut by_errno: Vec<ErrnoCount> = errnos
        .into_iter()
        .map(|(errno, count)| ErrnoCount {
            errno,
            name: errno_name(errno),
            count,
        })
        .collect();
    by_errno.sort_by_key(|e| (std::cmp::Reverse(e.count), e.errno));
    Some(SyscallsMeasurements {
        duration_s,
        calls,
        futex_wait_ms_per_s: ms_per_s(futex_total),
        top_futex_threads: top
            .into_iter()
            .map(|(tid, (waits, ns))| FutexThreadMeasurement {
                tid,
                futex_waits: waits,
                wait_ms_per_s: ms_per_s(ns),
                blocked_share: ratio(ns as f64, duration_s * 1e9),
            })
            .collect(),
        rseq_registrations: registrations,
        rseq_failed: failed,
        rseq_failed_by_errno: by_errno,
    })
}

/// Said instead of an empty table when no watched syscall was made.
const NO_WATCHED_CALLS: &str =
    "no watched syscall (mmap, munmap, madvise, brk, mremap, futex, rseq) was made";

/// "futex wait: 450 ms/s blocked in total; most: tid 1001 30.0% of wall time
/// blocked, ...".
fn futex_line(s: &SyscallsMeasurements) -> String {
    let mut line = format!(
        "futex wait: {} ms/s blocked in total",
        format_number(s.futex_wait_ms_per_s)
    );
    if !s.top_futex_threads.is_empty() {
        let top: Vec<String> = s
            .top_futex_threads
            .iter()
            .map(|t| format!("tid {} {}", t.tid, percent(t.blocked_share)))
            .collect();
        let _ = write!(
            line,
            "; most blocked (share of wall time): {}",
            top.join(", ")
        );
    }
    line
}

/// "rseq: 4 registrations seen, 2 failed (2 EINVAL)".
fn rseq_calls_line(s: &SyscallsMeasurements) -> String {
    let mut line = format!(
        "rseq: {} registrations seen, {} failed",
        s.rseq_registrations, s.rseq_failed
    );
    if !s.rseq_failed_by_errno.is_empty() {
        let by: Vec<String> = s
            .rseq_failed_by_errno
            .iter()
            .map(|e| format!("{} {}", e.count, e.name))
            .collect();
        let _ = write!(line, " ({})", by.join(", "));
    }
    line
}

/// The syscalls section.
pub fn section(s: &SyscallsMeasurements) -> Section {
    let mut out = Section::new(Some("Syscalls"));
    out.push(Line::title(
        "Syscalls",
        Some(format!("observed threads, {:.1} s", s.duration_s)),
        false,
    ))
    .push(Block::Para(format!(
        "Observed threads, {:.1} s.",
        s.duration_s
    )));
    if s.calls.is_empty() {
        out.push(Line::plain("    ", NO_WATCHED_CALLS))
            .push(Block::Para(format!("{}.", capitalise(NO_WATCHED_CALLS))));
    }
    let mut t = Table::new(
        "      ",
        vec![
            Column::text("call", "Syscall", "", 12),
            Column::num("calls/s", "Calls/s", " ", 10),
            Column::num("errors", "Errors", " ", 8),
            Column::num("mean µs", "Mean (µs)", " ", 10),
            Column::num("p99 µs", "p99 (µs)", " ", 10),
            Column::num("MiB/s", "MiB/s", " ", 12),
        ],
    );
    for c in &s.calls {
        t.rows.push(
            vec![
                Cell::two(&c.name, md_cell(&c.name)),
                Cell::new(format_number(c.count_per_s)),
                Cell::new(c.errors.to_string()),
                Cell::new(format_number(c.mean_us)),
                Cell::new(c.p99_us.map_or("-".into(), format_number)),
                Cell::new(
                    c.bytes_per_s
                        .map_or("-".into(), |b| format_number(b / 1_048_576.0)),
                ),
            ]
            .into(),
        );
    }
    out.push(Block::Table(t))
        .push(Line::wrapped("    ", futex_line(s)))
        .push(Line::wrapped("    ", rseq_calls_line(s)))
        .push(Block::Bullets(vec![
            format!(
                "Futex wait: {} ms/s blocked in total.",
                format_number(s.futex_wait_ms_per_s)
            ),
            format!("{}.", capitalise(&rseq_calls_line(s))),
        ]));
    let mut threads = Table::new(
        "",
        vec![
            Column::num("", "Thread (tid)", "", 0),
            Column::num("", "Futex waits", "", 0),
            Column::num("", "Wait ms/s", "", 0),
            Column::num("", "Share of wall time blocked", "", 0),
        ],
    );
    for t in &s.top_futex_threads {
        threads.rows.push(
            vec![
                Cell::new(t.tid.to_string()),
                Cell::new(t.futex_waits.to_string()),
                Cell::new(format_number(t.wait_ms_per_s)),
                Cell::new(percent(t.blocked_share)),
            ]
            .into(),
        );
    }
    out.push(Block::MdTable(threads));
    out
}
