//! Syscalls family, user side: memory syscalls and futex waits per second,
//! per-thread futex wait time, and every rseq registration with the library
//! that made it.
//!
//! Counters are cumulative in the kernel (slices are differences, as for the
//! other families); rseq registrations arrive as events on a ring buffer and
//! are drained at each slice. The caller of each rseq call is resolved to the
//! object mapped at that address in /proc/PID/maps. Futex wait time is
//! split over the slices each wait overlaps ([`super::credit`]). The kernel
//! side is hooked on just the watched syscalls where the kernel allows
//! ([`super::hooks`]).

use std::collections::HashMap;

use aya::{
    Ebpf,
    maps::{HashMap as BpfHashMap, MapData, PerCpuArray, RingBuf},
};
use mdiag_common::{
    hist::LOG2_BUCKETS,
    syscalls::{
        self as syscalls_common, Inflight, MAP_DROPS, MAP_INFLIGHT, MAP_RSEQ_EVENTS, MAP_STATS,
        MAP_THREADS, NR_SLOTS, RseqEvent, SLOT_FUTEX_WAIT, SLOT_FUTEX_WAITV, SLOT_NAMES,
        SyscallDrops, SyscallStats, ThreadSyscalls,
    },
};

use super::section::{
    RseqCall, SyscallCalls, SyscallDropsSlice, SyscallsSlice, ThreadSyscallSlice,
};
use super::{credit, hooks};
use crate::kit::probe::{
    AttachContext, Counters, FamilyReader, PerCpuSum, ProbeStatus, ReadError, SectionReader, btf,
    clear_map,
    credit::uncounted,
    delta::{self, ThreadValue},
    monotonic_now_ns, read_summed, reader_or_warn, take_map,
};

/// Family name in the recording's `probes`.
pub const FAMILY: &str = crate::kit::family::Family::Syscalls.name();

/// Its `sys_enter` / `sys_exit` fallback's `(program, BTF tracepoint)`
/// pairs, checked against the kernel's BTF before anything attaches.
pub const TRACEPOINTS: &[(&str, &str)] = &syscalls_common::TRACEPOINTS;

/// Needs the `pt_regs` offsets (to read arguments), and every program it
/// uses: entries without exits would only fill the map. Its reader only
/// then.
pub fn attach(ebpf: &mut Ebpf, cx: &AttachContext) -> (ProbeStatus, Option<SyscallsReader>) {
    let status = hooks::attach(ebpf, cx);
    let reader = if status.attached() {
        reader_or_warn(FAMILY, || SyscallsReader::new(ebpf, cx.target_tgid))
    } else {
        None
    };
    (status, reader)
}

/// Byte offsets in `struct pt_regs` of what the programs read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RegsOffsets {
    /// Syscall arguments 0..4.
    pub args: [u32; 4],
    /// User instruction pointer.
    pub ip: u32,
    /// User stack pointer.
    pub sp: u32,
}

/// Offsets in `struct pt_regs` of syscall arguments 0..4 and of the user
/// instruction and stack pointers, for the architecture mdiag runs on.
pub fn regs_offsets(btf: &btf_rs::Btf) -> Result<RegsOffsets, btf::BtfError> {
    use btf::field_offset;
    #[cfg(target_arch = "x86_64")]
    {
        let f = |f| field_offset(btf, "pt_regs", f);
        Ok(RegsOffsets {
            args: [f("di")?, f("si")?, f("dx")?, f("r10")?],
            ip: f("ip")?,
            sp: f("sp")?,
        })
    }
    #[cfg(target_arch = "aarch64")]
    {
        let regs = field_offset(btf, "pt_regs", "regs")?;
        Ok(RegsOffsets {
            args: [regs, regs + 8, regs + 16, regs + 24],
            ip: field_offset(btf, "pt_regs", "pc")?,
            sp: field_offset(btf, "pt_regs", "sp")?,
        })
    }
    #[cfg(target_arch = "s390x")]
    {
        // The first argument register is overwritten by the return value;
        // the kernel keeps the original in orig_gpr2. r15 is the stack pointer.
        let gprs = field_offset(btf, "pt_regs", "gprs")?;
        let orig = field_offset(btf, "pt_regs", "orig_gpr2")?;
        Ok(RegsOffsets {
            args: [orig, gprs + 3 * 8, gprs + 4 * 8, gprs + 5 * 8],
            ip: field_offset(btf, "pt_regs", "psw.addr")?,
            sp: gprs + 15 * 8,
        })
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "s390x")))]
    {
        let _ = btf;
        Err(btf::BtfError::NoStruct(
            "pt_regs (architecture not supported by the syscalls family)".into(),
        ))
    }
}

/// Cumulative counters at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SyscallsSnapshot {
    /// `[slot]` summed over CPUs.
    pub slots: Vec<SyscallStats>,
    pub threads: HashMap<u32, ThreadSyscalls>,
    pub drops: SyscallDrops,
}

pub struct SyscallsReader {
    stats: PerCpuArray<MapData, SyscallStats>,
    threads: BpfHashMap<MapData, u32, ThreadSyscalls>,
    drops: PerCpuArray<MapData, SyscallDrops>,
    rseq: RingBuf<MapData>,
    /// Watched syscalls in flight (their entry time), read at each cut.
    inflight: BpfHashMap<MapData, u32, Inflight>,
    credit: credit::WaitCredit,
    /// rseq calls drained (and their callers resolved) since the last slice.
    pending_rseq: Vec<RseqCall>,
    /// The target process, whose rseq callers are always fully resolved.
    target: Option<u32>,
    /// Runtime range of glibc's syscall() in the target (once looked up).
    target_wrapper: Option<Option<(u64, u64)>>,
    last: SyscallsSnapshot,
}

impl SyscallsReader {
    pub fn new(ebpf: &mut Ebpf, target: Option<u32>) -> Result<Self, ReadError> {
        let mut reader = Self {
            stats: take_map(ebpf, MAP_STATS)?,
            threads: take_map(ebpf, MAP_THREADS)?,
            drops: take_map(ebpf, MAP_DROPS)?,
            rseq: take_map(ebpf, MAP_RSEQ_EVENTS)?,
            inflight: take_map(ebpf, MAP_INFLIGHT)?,
            credit: credit::WaitCredit::default(),
            pending_rseq: Vec::new(),
            target,
            target_wrapper: None,
            last: SyscallsSnapshot::default(),
        };
        reader.last = reader.snapshot()?;
        Ok(reader)
    }

    /// The slice since the previous call, with the rseq calls received since.
    pub fn next_slice(&mut self) -> Result<SyscallsSlice, ReadError> {
        let open = self.futex_waits_in_flight();
        let at_ns = monotonic_now_ns();
        let now = self.snapshot()?;
        let open = uncounted_waits(open, &now);
        let mut slice = slice_between(&self.last, &now);
        let cut = credit::Cut { open: &open, at_ns };
        self.credit
            .apply(&mut slice, cut, |tid| last_counted_wait(&now, tid));
        self.drain();
        slice.rseq = std::mem::take(&mut self.pending_rseq);
        self.last = now;
        let gone = delta::prune_exited(&mut self.threads, &mut self.last.threads);
        self.credit.retain_threads(|tid| !gone.contains(&tid));
        Ok(slice)
    }

    /// Drains rseq events now, resolving each caller while its process still
    /// exists (call it often: a thread registers rseq as it starts, and a
    /// short-lived process may be gone by the next slice).
    pub fn drain(&mut self) {
        let calls = self.drain_rseq();
        self.pending_rseq.extend(calls);
    }

    fn drain_rseq(&mut self) -> Vec<RseqCall> {
        let mut events = Vec::new();
        while let Some(item) = self.rseq.next() {
            if let Some(e) = RseqEvent::from_bytes(&item) {
                events.push(e);
            }
        }
        // Resolving a caller reads the process's maps (and, for the wrapper
        // check, its symbols): always done for the target, bounded for other
        // processes of a host-wide recording so a burst of new processes never
        // stalls the recording loop.
        let mut maps: HashMap<u32, Option<Vec<ExecRange>>> = HashMap::new();
        let mut budget = OTHER_PROCESSES_PER_DRAIN;
        events
            .into_iter()
            .map(|e| {
                let is_target = self.target == Some(e.tgid);
                let ranges = maps.entry(e.tgid).or_insert_with(|| {
                    if is_target || budget > 0 {
                        budget -= usize::from(!is_target);
                        Some(executable_ranges(e.tgid))
                    } else {
                        None
                    }
                });
                let object_at = |addr: u64| {
                    ranges
                        .as_ref()?
                        .iter()
                        .find(|(lo, hi, _)| (*lo..*hi).contains(&addr))
                        .map(|(_, _, p)| p.clone())
                };
                let caller_object = object_at(e.caller_ip);
                // Through glibc's syscall() wrapper (a leaf function), the word
                // at the stack pointer is the return address into the caller.
                // Checked for the target (whose libc does not move: cached).
                let via_wrapper = is_target
                    && self
                        .target_wrapper
                        .get_or_insert_with(|| syscall_wrapper_range(e.tgid))
                        .is_some_and(|(lo, hi)| (lo..hi).contains(&e.caller_ip));
                let origin_object = if via_wrapper {
                    object_at(e.sp_word)
                } else {
                    caller_object.clone()
                };
                RseqCall {
                    tid: e.tid,
                    tgid: e.tgid,
                    ret: e.ret,
                    area: e.area,
                    len: e.len,
                    flags: e.flags,
                    sig: e.sig,
                    caller_ip: e.caller_ip,
                    caller_object,
                    via_syscall_wrapper: via_wrapper,
                    origin_object,
                }
            })
            .collect()
    }

    /// Futex waits in flight now, thread group not yet known (0). Read
    /// before the counters: see [`crate::probes::credit`].
    fn futex_waits_in_flight(&self) -> Vec<credit::InflightWait> {
        self.inflight
            .iter()
            .flatten()
            .filter(|(_, e)| {
                e.slot as usize == SLOT_FUTEX_WAIT || e.slot as usize == SLOT_FUTEX_WAITV
            })
            .map(|(tid, e)| credit::InflightWait {
                tid,
                tgid: 0,
                start_ns: e.ts_ns,
                key: e.in_checkpoint != 0,
            })
            .collect()
    }
}

/// Totals since attach are one slice without rseq events (none is drained).
impl Counters for SyscallsReader {
    type Snapshot = SyscallsSnapshot;
    type Slice = SyscallsSlice;

    fn snapshot(&self) -> Result<SyscallsSnapshot, ReadError> {
        let mut slots = Vec::with_capacity(NR_SLOTS);
        for slot in 0..NR_SLOTS as u32 {
            slots.push(read_summed(&self.stats, slot, MAP_STATS)?);
        }
        Ok(SyscallsSnapshot {
            slots,
            threads: self.threads.iter().flatten().collect(),
            drops: read_summed(&self.drops, 0, MAP_DROPS)?,
        })
    }

    fn slice_between(before: &SyscallsSnapshot, after: &SyscallsSnapshot) -> SyscallsSlice {
        slice_between(before, after)
    }
}

impl FamilyReader for SyscallsReader {
    fn family(&self) -> &'static str {
        FAMILY
    }

    /// Drains the rseq registrations now (see [`Self::drain`]).
    fn poll(
        &mut self,
        _ebpf: &mut aya::Ebpf,
        _now: std::time::Instant,
        _rec_start: std::time::Instant,
    ) -> Option<ProbeStatus> {
        self.drain();
        None
    }

    /// No watched syscall in flight.
    fn forget_in_flight(&mut self) -> Result<(), ReadError> {
        clear_map(&mut self.inflight, MAP_INFLIGHT)
    }

    /// Counters and waits before this instant are left out of the first
    /// slice (rseq events received so far are kept).
    fn rebase(&mut self) -> Result<(), ReadError> {
        let open = self.futex_waits_in_flight();
        let at_ns = monotonic_now_ns();
        self.last = self.snapshot()?;
        let open = uncounted_waits(open, &self.last);
        let last = &self.last;
        let cut = credit::Cut { open: &open, at_ns };
        self.credit.begin(cut, |tid| last_counted_wait(last, tid));
        Ok(())
    }
}

impl SectionReader for SyscallsReader {
    type Section = SyscallsSlice;

    fn read(&mut self, _last: bool) -> Result<SyscallsSlice, ReadError> {
        self.next_slice()
    }
}

impl ThreadValue for ThreadSyscalls {
    fn tgid(&self) -> u32 {
        self.tgid
    }
}

/// Start of the latest futex wait of `tid` counted in `s` (0: none).
fn last_counted_wait(s: &SyscallsSnapshot, tid: u32) -> u64 {
    s.threads.get(&tid).map_or(0, |t| t.last_futex_start_ns)
}

/// The waits in flight read just before the counters `now` that these do
/// not hold yet, with their thread groups (from the counters, else /proc; a
/// wait whose thread exited is left out).
fn uncounted_waits(
    open: Vec<credit::InflightWait>,
    now: &SyscallsSnapshot,
) -> Vec<credit::InflightWait> {
    uncounted(
        open,
        |tid| last_counted_wait(now, tid),
        |tid| match now.threads.get(&tid) {
            Some(t) => Some(t.tgid),
            None => delta::tgid_of(tid),
        },
    )
}

impl PerCpuSum for SyscallStats {
    fn add(mut self, b: &Self) -> Self {
        self.count += b.count;
        self.errors += b.errors;
        self.time_ns += b.time_ns;
        self.bytes += b.bytes;
        for (x, y) in self.hist.iter_mut().zip(b.hist.iter()) {
            *x += y;
        }
        self
    }
}

impl PerCpuSum for SyscallDrops {
    fn add(self, b: &Self) -> Self {
        SyscallDrops {
            inflight_full: self.inflight_full + b.inflight_full,
            thread_map_full: self.thread_map_full + b.thread_map_full,
            rseq_ring_full: self.rseq_ring_full + b.rseq_ring_full,
        }
    }
}

/// Other processes whose rseq callers are resolved per drain (every 50 ms) in
/// a host-wide recording.
const OTHER_PROCESSES_PER_DRAIN: usize = 4;

/// Runtime address range of glibc's `syscall()` function in `pid`, if the
/// process maps a libc that has it.
fn syscall_wrapper_range(pid: u32) -> Option<(u64, u64)> {
    let process =
        crate::symbols::ProcessSymbols::load(pid, crate::symbols::ObjectCache::global()).ok()?;
    let sym = process.object("libc.so.6")?.resolve("syscall").ok()?;
    let start = sym.address?;
    Some((start, start + sym.size.max(1)))
}

/// An executable mapping: (start, end, path of the mapped object).
type ExecRange = (u64, u64, String);

/// File-backed executable mappings of `pid`.
fn executable_ranges(pid: u32) -> Vec<ExecRange> {
    let Ok(process) = procfs::process::Process::new(pid as i32) else {
        return Vec::new();
    };
    let Ok(maps) = process.maps() else {
        return Vec::new();
    };
    maps.into_iter()
        .filter(|m| m.perms.contains(procfs::process::MMPermissions::EXECUTE))
        .filter_map(|m| match m.pathname {
            procfs::process::MMapPath::Path(p) => {
                Some((m.address.0, m.address.1, p.to_string_lossy().into_owned()))
            }
            _ => None,
        })
        .collect()
}

/// The counters that changed between two snapshots. Pure, so testable.
pub fn slice_between(before: &SyscallsSnapshot, after: &SyscallsSnapshot) -> SyscallsSlice {
    let zero = SyscallStats::default();
    let calls = after
        .slots
        .iter()
        .enumerate()
        .filter_map(|(slot, a)| {
            let b = before.slots.get(slot).unwrap_or(&zero);
            let hist: Vec<u64> = a
                .hist
                .iter()
                .zip(b.hist.iter())
                .map(|(x, y)| x.saturating_sub(*y))
                .collect();
            let used = hist.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
            let c = SyscallCalls {
                name: SLOT_NAMES.get(slot).copied().unwrap_or("?").to_owned(),
                count: a.count.saturating_sub(b.count),
                errors: a.errors.saturating_sub(b.errors),
                time_ns: a.time_ns.saturating_sub(b.time_ns),
                bytes: a.bytes.saturating_sub(b.bytes),
                hist_log2_ns: hist[..used.min(LOG2_BUCKETS)].to_vec(),
            };
            (c.count > 0).then_some(c)
        })
        .collect();
    let threads = delta::per_thread(
        &before.threads,
        &after.threads,
        &ThreadSyscalls::default(),
        |t| t.tgid,
        |tid, a, b| {
            let t = ThreadSyscallSlice {
                tid,
                tgid: a.tgid,
                futex_waits: a.futex_waits.saturating_sub(b.futex_waits),
                futex_wait_ns: a.futex_wait_ns.saturating_sub(b.futex_wait_ns),
                mem_calls: a.mem_calls.saturating_sub(b.mem_calls),
                mem_ns: a.mem_ns.saturating_sub(b.mem_ns),
                futex_waits_in_checkpoint: a
                    .futex_waits_in_checkpoint
                    .saturating_sub(b.futex_waits_in_checkpoint),
                futex_wait_ns_in_checkpoint: a
                    .futex_wait_ns_in_checkpoint
                    .saturating_sub(b.futex_wait_ns_in_checkpoint),
            };
            (t.futex_waits + t.mem_calls > 0).then_some(t)
        },
    );
    let threads: Vec<ThreadSyscallSlice> = threads.into_iter().map(|(_, t)| t).collect();
    let d = |a: u64, b: u64| a.saturating_sub(b);
    SyscallsSlice {
        calls,
        threads,
        rseq: Vec::new(),
        drops: SyscallDropsSlice {
            inflight_full: d(after.drops.inflight_full, before.drops.inflight_full),
            thread_map_full: d(after.drops.thread_map_full, before.drops.thread_map_full),
            rseq_ring_full: d(after.drops.rseq_ring_full, before.drops.rseq_ring_full),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regs_offsets_from_this_kernel() {
        if crate::emulation::skip_under_emulation(
            "regs_offsets_from_this_kernel",
            "/sys/kernel/btf/vmlinux is the emulating host's kernel",
        ) {
            return;
        }
        let btf = super::btf::load_vmlinux().expect("kernel BTF");
        let r = regs_offsets(&btf).unwrap();
        #[cfg(target_arch = "x86_64")]
        {
            // struct pt_regs: r15 r14 r13 r12 bp bx r11 r10 r9 r8 ax cx dx si di orig_ax ip cs flags sp ss
            assert_eq!(r.args, [112, 104, 96, 56]);
            assert_eq!((r.ip, r.sp), (128, 152));
        }
        assert!(r.args.iter().all(|&a| a < r.ip + 64));
    }

    #[test]
    fn slice_differences() {
        let mut a = SyscallStats {
            count: 10,
            bytes: 4096 * 10,
            time_ns: 5000,
            ..Default::default()
        };
        a.hist[9] = 10;
        let mut b = a;
        b.count = 15;
        b.bytes = 4096 * 15;
        b.hist[9] = 14;
        b.hist[12] = 1;
        let before = SyscallsSnapshot {
            slots: vec![a, SyscallStats::default()],
            ..Default::default()
        };
        let after = SyscallsSnapshot {
            slots: vec![b, SyscallStats::default()],
            threads: HashMap::from([(
                5,
                ThreadSyscalls {
                    tgid: 5,
                    futex_waits: 2,
                    futex_wait_ns: 100,
                    futex_waits_in_checkpoint: 1,
                    futex_wait_ns_in_checkpoint: 60,
                    ..Default::default()
                },
            )]),
            drops: SyscallDrops {
                inflight_full: 1,
                ..Default::default()
            },
        };
        let s = slice_between(&before, &after);
        assert_eq!(s.calls.len(), 1);
        assert_eq!(
            (s.calls[0].name.as_str(), s.calls[0].count, s.calls[0].bytes),
            ("mmap", 5, 4096 * 5)
        );
        assert_eq!(s.calls[0].hist_log2_ns.len(), 13);
        assert_eq!(
            (s.calls[0].hist_log2_ns[9], s.calls[0].hist_log2_ns[12]),
            (4, 1)
        );
        assert_eq!(
            (s.threads[0].futex_waits, s.threads[0].futex_wait_ns),
            (2, 100)
        );
        assert_eq!(
            (
                s.threads[0].futex_waits_in_checkpoint,
                s.threads[0].futex_wait_ns_in_checkpoint
            ),
            (1, 60)
        );
        assert_eq!(s.drops.inflight_full, 1);
    }
}
