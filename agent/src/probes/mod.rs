//! Probe families: loading the eBPF object, attaching each family on its own,
//! and reading what the kernel side aggregated.
//!
//! One file per family (kunai style). Each family degrades alone: a program
//! that cannot load or attach is recorded with its reason in
//! [`ProbeStatus`](crate::recording::ProbeStatus) and the others still run.
//! Dropping [`Probes`] detaches everything (aya owns the links as file
//! descriptors, so even a crash leaves the host as it was).

pub mod alloc;
pub mod btf;
pub mod contention;
pub mod credit;
pub mod delta;
pub mod perf;
mod reader;
pub mod sched;
pub mod softirq;
pub mod syscalls;
pub mod wiredtiger;

use aya::{Ebpf, EbpfLoader, programs::BtfTracePoint};
use mdiag_common::{
    contention as contention_common, sched as sched_common, softirq as softirq_common,
    syscalls as syscalls_common,
};

pub use reader::{Counters, FamilyReader, ReadError, TakeMapError};
pub(crate) use reader::{
    PerCpuSum, clock_ns, monotonic_now_ns, read_per_cpu, read_summed, sum_cpus, take_map,
};

use crate::recording::{ProbeStatus, ProgramStatus, Slice};

/// Every probe family, by the name its [`ProbeStatus`] carries, in the order
/// [`Probes::attach`] tries them (`alloc` last, from [`Probes::attach_alloc`]).
/// `docs/ARCHITECTURE.md`'s family table lists exactly these
/// (`docs_contract.rs`).
pub const FAMILIES: [&str; 7] = [
    sched::FAMILY,
    softirq::FAMILY,
    syscalls::FAMILY,
    wiredtiger::FAMILY,
    perf::FAMILY,
    contention::FAMILY,
    alloc::FAMILY,
];

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error(
        "this mdiag was built without its eBPF object (AYA_BUILD_SKIP was set); rebuild with `cargo xtask run` or `cargo build`"
    )]
    NoObject,
    #[error("loading the eBPF object failed: {0}")]
    Load(#[from] aya::EbpfError),
    #[error("no probe family could be attached: {0}")]
    NothingAttached(String),
}

/// What to observe.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProbeConfig {
    /// Thread-group id of the target; `None` = host-wide.
    pub target_tgid: Option<u32>,
}

/// Loaded and attached probes. Dropping it detaches every program.
pub struct Probes {
    // Field order matters for drop: readers (map fds) before the object.
    pub sched: Option<sched::SchedReader>,
    pub softirq: Option<softirq::SoftirqReader>,
    pub syscalls: Option<syscalls::SyscallsReader>,
    pub wiredtiger: Option<wiredtiger::WiredTigerReader>,
    pub perf: Option<perf::PerfReader>,
    pub alloc: Option<alloc::AllocProbe>,
    pub contention: Option<contention::ContentionReader>,
    status: Vec<ProbeStatus>,
    wiredtiger_retry: wiredtiger::Retry,
    _ebpf: Ebpf,
}

impl Probes {
    /// Loads the object and attaches every family that can be attached; a
    /// family that cannot is recorded with its reasons and skipped.
    pub fn attach(config: ProbeConfig) -> Result<Self, ProbeError> {
        if crate::EBPF_OBJECT.is_empty() {
            return Err(ProbeError::NoObject);
        }
        raise_memlock();
        // btf-rs's parse of the kernel BTF (tens of MiB) lives only while the
        // offsets are resolved: it is dropped before aya parses its own copy,
        // which keeps mdiag's peak RSS within its budget.
        let (offsets, regs, absent) = {
            let vmlinux = btf::load_vmlinux();
            // Tracepoints this kernel does not have: their programs fail with
            // one line naming the kernel feature instead of a loader error.
            let absent: Vec<&'static str> = vmlinux.as_ref().map_or_else(
                |_| Vec::new(),
                |b| {
                    all_tracepoints()
                        .filter(|tp| btf::tracepoint_args(b, tp).is_none())
                        .collect()
                },
            );
            let offsets = vmlinux
                .as_ref()
                .map_err(ToString::to_string)
                .and_then(|b| btf::TaskOffsets::resolve(b).map_err(|e| e.to_string()));
            let regs = vmlinux
                .as_ref()
                .map_err(ToString::to_string)
                .and_then(|b| syscalls::regs_offsets(b).map_err(|e| e.to_string()));
            (offsets, regs, absent)
        };
        let regs_offsets = regs
            .as_ref()
            .map_or(syscalls::RegsOffsets::default(), |r| *r);
        let syscall_nrs = syscalls::syscall_numbers();
        let (pid_off, tgid_off, comm_off, cpu_off, state_src) = match &offsets {
            Ok(o) => (o.pid, o.tgid, o.comm, o.cpu, o.prev_state),
            Err(_) => (0, 0, 0, 0, 0),
        };
        let target = config.target_tgid.unwrap_or(0);
        // One parse of the kernel BTF, shared by the loader and every
        // BTF-tracepoint attach (aya would otherwise parse it per use).
        let kernel_btf = aya::Btf::from_sys_fs().map_err(|e| format!("kernel BTF: {e}"));
        let mut loader = EbpfLoader::new();
        if let Ok(kbtf) = &kernel_btf {
            loader.btf(kbtf);
        }
        let mut ebpf = loader
            .override_global(sched_common::GLOBAL_TARGET_TGID, &target, true)
            .override_global(sched_common::GLOBAL_TASK_PID_OFFSET, &pid_off, true)
            .override_global(sched_common::GLOBAL_TASK_TGID_OFFSET, &tgid_off, true)
            .override_global(sched_common::GLOBAL_TASK_COMM_OFFSET, &comm_off, true)
            .override_global(sched_common::GLOBAL_TASK_CPU_OFFSET, &cpu_off, true)
            .override_global(sched_common::GLOBAL_TASK_STATE_OFFSET, &state_src, true)
            .override_global(syscalls_common::GLOBAL_SYSCALL_NRS, &syscall_nrs, true)
            .override_global(
                syscalls_common::GLOBAL_REGS_ARG_OFFSETS,
                &regs_offsets.args,
                true,
            )
            .override_global(
                syscalls_common::GLOBAL_REGS_IP_OFFSET,
                &regs_offsets.ip,
                true,
            )
            .override_global(
                syscalls_common::GLOBAL_REGS_SP_OFFSET,
                &regs_offsets.sp,
                true,
            )
            .load(crate::EBPF_OBJECT)?;

        // Scheduler: needs the task_struct offsets; sched_switch is essential.
        let sched_pre = offsets.as_ref().map(|_| ()).map_err(Clone::clone);
        let sched_status = attach_family(
            &mut ebpf,
            sched::FAMILY,
            &sched_common::TRACEPOINTS,
            &kernel_btf,
            &sched_pre,
            &absent,
        );
        let sched = reader_if(&sched_status, 0, sched::FAMILY, || {
            sched::SchedReader::new(&mut ebpf, config.target_tgid)
        });

        // Softirq / hard IRQ: host-wide by nature (interrupts belong to CPUs).
        let softirq_status = attach_family(
            &mut ebpf,
            softirq::FAMILY,
            &softirq_common::TRACEPOINTS,
            &kernel_btf,
            &Ok(()),
            &absent,
        );
        let softirq = reader_if(&softirq_status, 0, softirq::FAMILY, || {
            softirq::SoftirqReader::new(&mut ebpf)
        });

        // Syscalls: the pt_regs offsets are needed to read arguments.
        let syscalls_pre = regs.as_ref().map(|_| ()).map_err(Clone::clone);
        let syscalls_status = attach_family(
            &mut ebpf,
            syscalls::FAMILY,
            &syscalls_common::TRACEPOINTS,
            &kernel_btf,
            &syscalls_pre,
            &absent,
        );
        // Both programs are needed: entries without exits would only fill the map.
        let syscalls = if syscalls_status.attached() {
            reader_if(&syscalls_status, 0, syscalls::FAMILY, || {
                syscalls::SyscallsReader::new(&mut ebpf, config.target_tgid)
            })
        } else {
            None
        };

        // WiredTiger: uprobes in the target's objects; "not applicable"
        // without WiredTiger in it; not tried (no status) host-wide.
        let (wiredtiger_status, wiredtiger) = wiredtiger::attach(&mut ebpf, config.target_tgid);

        // Perf: cpu-clock sampling on every CPU (perf_event_open may be refused).
        let (perf_status, perf) = perf::attach(&mut ebpf, config.target_tgid);

        // Contention: lock waits and D-state stacks; each program alone is
        // useful (the switch program needs the task_struct offsets).
        let contention_status = attach_family(
            &mut ebpf,
            contention::FAMILY,
            &contention_common::TRACEPOINTS,
            &kernel_btf,
            &sched_pre,
            &absent,
        );
        let contention = if contention_status.programs.iter().any(|p| p.error.is_none()) {
            contention::ContentionReader::new(&mut ebpf)
                .map_err(|e| tracing::warn!(family = contention::FAMILY, "maps unavailable: {e}"))
                .ok()
        } else {
            None
        };

        let mut status = vec![sched_status, softirq_status, syscalls_status, perf_status];
        status.extend(wiredtiger_status);
        status.push(contention_status);
        let mut probes = Self {
            sched,
            softirq,
            syscalls,
            wiredtiger,
            perf,
            alloc: None,
            contention,
            status,
            wiredtiger_retry: wiredtiger::Retry::default(),
            _ebpf: ebpf,
        };
        if probes.readers().next().is_none() {
            let why = probes
                .status
                .iter()
                .flat_map(|s| s.programs.iter())
                .filter_map(|p| p.error.as_ref().map(|e| format!("{}: {e}", p.attach_point)))
                .collect::<Vec<_>>()
                .join("; ");
            return Err(ProbeError::NothingAttached(why));
        }
        drop(kernel_btf);
        release_freed_memory();
        Ok(probes)
    }

    /// Every attached family's reader, in the order a slice reads them: the
    /// families whose per-thread times are split at the cut first (syscalls
    /// credits its waits in flight up to the moment it is read, closest to
    /// the slice's end), then the others, the slow reads last (perf
    /// symbolizes). The one table that drives the clock's start
    /// ([`Self::start_clock`]), every slice ([`Self::take_slice`]) and the
    /// "nothing attached" check.
    pub fn readers(&mut self) -> impl Iterator<Item = &mut dyn FamilyReader> {
        let table: [Option<&mut dyn FamilyReader>; 7] = [
            self.syscalls.as_mut().map(|r| r as _),
            self.sched.as_mut().map(|r| r as _),
            self.contention.as_mut().map(|r| r as _),
            self.softirq.as_mut().map(|r| r as _),
            self.wiredtiger.as_mut().map(|r| r as _),
            self.perf.as_mut().map(|r| r as _),
            self.alloc.as_mut().map(|r| r as _),
        ];
        table.into_iter().flatten()
    }

    /// Every attached family's section of the slice that ends now (its time
    /// and mongod's section left to the caller); a family whose read fails
    /// has no section, with a warning. The `last` slice also lists the
    /// checkpoints still running.
    pub fn take_slice(&mut self, last: bool) -> Slice {
        let mut slice = Slice::default();
        for reader in self.readers() {
            if let Err(e) = reader.read_into(&mut slice, last) {
                tracing::warn!("{} slice lost: {e}", reader.family());
            }
        }
        slice
    }

    /// Starts every family's slices now, at the recording's start: counts
    /// made between attach and this instant are left out, so the first
    /// slice holds only its own time (every family is read at once).
    /// Returns the instant the slices start at: taken after perf's drain,
    /// just before the snapshots, which are taken in the order the slices
    /// read them (the families whose threads' times are split at the cut
    /// first), so each family's first slice spans the recording's first
    /// slice as closely as its later ones do.
    pub fn start_clock(&mut self) -> std::time::Instant {
        // Samples taken before the clock are drained and dropped (no
        // symbols are read: a held child still maps mdiag's own code).
        self.rebase_all(true);
        let start = std::time::Instant::now();
        self.rebase_all(false);
        start
    }

    /// Rebases, in slice order, the readers that do so before the clock
    /// (`before_clock`) or after it.
    fn rebase_all(&mut self, before_clock: bool) {
        for reader in self.readers() {
            if reader.rebases_before_clock() != before_clock {
                continue;
            }
            if let Err(e) = reader.rebase() {
                let family = reader.family();
                tracing::warn!(family, "could not start at the clock: {e}");
            }
        }
    }

    /// Status of every family and program, for the recording.
    pub fn status(&self) -> &[ProbeStatus] {
        &self.status
    }

    /// For a child held before `exec` (`record -- CMD`): when the WiredTiger
    /// family found nothing in it (it maps only mdiag's code yet), attaches
    /// to the objects `exe` will map at start, so the first checkpoint is
    /// seen however soon it comes (see [`wiredtiger::attach_before_exec`]).
    pub fn attach_before_exec(&mut self, pid: u32, exe: &std::path::Path) {
        if self.wiredtiger.is_some() {
            return;
        }
        let Some(pos) = self.wiredtiger_not_found() else {
            return;
        };
        if let Some((status, reader)) = wiredtiger::attach_before_exec(&mut self._ebpf, pid, exe) {
            self.status[pos] = status;
            self.wiredtiger = reader;
        }
    }

    /// Tries the WiredTiger family again when it found no WiredTiger in the
    /// target yet and the target's executable mappings changed since the
    /// last try (Python imports its binding late; a program may `dlopen` the
    /// library). Call it at every poll: it does nothing once attached,
    /// host-wide, after a real failure, or while the mappings stay the same.
    pub fn retry_wiredtiger(&mut self, target: Option<u32>) {
        if self.wiredtiger.is_some() {
            return;
        }
        let Some(pid) = target else { return };
        let Some(pos) = self.wiredtiger_not_found() else {
            return;
        };
        if !self.wiredtiger_retry.mappings_changed(pid) {
            return;
        }
        let (status, reader) = wiredtiger::attach(&mut self._ebpf, target);
        if let Some(status) = status {
            self.status[pos] = status;
        }
        self.wiredtiger = reader;
    }

    /// Index of the WiredTiger status when it says only "not found".
    fn wiredtiger_not_found(&self) -> Option<usize> {
        self.status
            .iter()
            .position(|s| s.family == wiredtiger::FAMILY)
            .filter(|&pos| wiredtiger::not_applicable(&self.status[pos]))
    }
}

impl Probes {
    /// Prepares allocator latency windows (see [`alloc`]): calibrates the
    /// probe pair now; entry points are resolved at the first window. Not
    /// tried host-wide or with windows off; a failure is only a status.
    pub fn attach_alloc(&mut self, target: Option<u32>, schedule: alloc::schedule::WindowSchedule) {
        let (status, probe) = alloc::attach(&mut self._ebpf, target, schedule);
        self.status.extend(status);
        self.alloc = probe;
    }

    /// Opens or closes an allocator window when due (call it from the record
    /// loop; see [`alloc::AllocProbe::poll`]) and keeps the family's status.
    pub fn poll_alloc(&mut self, now: std::time::Instant, rec_start: std::time::Instant) {
        let Some(a) = self.alloc.as_mut() else { return };
        a.poll(&mut self._ebpf, now, rec_start);
        if let Some(new) = a.take_status()
            && let Some(old) = self.status.iter_mut().find(|s| s.family == alloc::FAMILY)
        {
            *old = new;
        }
    }

    /// Closes an allocator window still open (before the last slice).
    pub fn finish_alloc(&mut self, rec_start: std::time::Instant) {
        if let Some(a) = self.alloc.as_mut() {
            a.finish(&mut self._ebpf, rec_start);
        }
    }
}

/// Loads and attaches each `(program, tracepoint)` of a family; never fails
/// as a whole: every program gets its own status.
/// Hands start-up's freed memory back to the kernel. The kernel BTF parsed
/// for loading and attaching (tens of MiB) is freed by now, but long-lived
/// allocations made meanwhile (maps, kallsyms) sit above it in the heap, so
/// glibc would keep the hole resident for the whole recording (about 6 MiB
/// measured); `malloc_trim` releases free pages anywhere in the heap.
fn release_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim takes no pointers and only walks glibc's own free
    // lists under its arena locks; it is safe to call from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

fn attach_family(
    ebpf: &mut Ebpf,
    family: &str,
    tracepoints: &[(&str, &str)],
    kernel_btf: &Result<aya::Btf, String>,
    precondition: &Result<(), String>,
    absent: &[&str],
) -> ProbeStatus {
    let programs = tracepoints
        .iter()
        .map(|&(prog, tracepoint)| {
            let attach_point = format!("tp_btf/{tracepoint}");
            let result = match (precondition, kernel_btf) {
                _ if absent.contains(&tracepoint) => Err(missing_tracepoint(tracepoint)),
                (Err(e), _) | (_, Err(e)) => Err(e.clone()),
                (Ok(()), Ok(kbtf)) => attach_btf_tracepoint(ebpf, prog, tracepoint, kbtf),
            };
            if let Err(e) = &result {
                tracing::warn!(family, program = prog, %attach_point, "not attached: {e}");
            }
            ProgramStatus {
                name: prog.to_owned(),
                attach_point,
                error: result.err(),
            }
        })
        .collect();
    ProbeStatus {
        family: family.to_owned(),
        programs,
    }
}

/// Every BTF tracepoint a family attaches to.
fn all_tracepoints() -> impl Iterator<Item = &'static str> {
    sched_common::TRACEPOINTS
        .iter()
        .chain(softirq_common::TRACEPOINTS.iter())
        .chain(syscalls_common::TRACEPOINTS.iter())
        .chain(contention_common::TRACEPOINTS.iter())
        .map(|&(_, tp)| tp)
}

/// One line naming the kernel feature a program lacks.
pub fn missing_tracepoint(tracepoint: &str) -> String {
    let since = match tracepoint {
        "contention_begin" | "contention_end" => {
            " (lock:contention_* tracepoints arrived in Linux 5.19)"
        }
        _ => "",
    };
    format!("this kernel has no {tracepoint} tracepoint{since}")
}

/// Builds a family's reader when its essential program (index `essential`)
/// attached; a reader that cannot be built is logged and the family skipped.
fn reader_if<R, E: std::fmt::Display>(
    status: &ProbeStatus,
    essential: usize,
    family: &str,
    build: impl FnOnce() -> Result<R, E>,
) -> Option<R> {
    if !status
        .programs
        .get(essential)
        .is_some_and(|p| p.error.is_none())
    {
        return None;
    }
    build()
        .map_err(|e| tracing::warn!(family, "maps unavailable: {e}"))
        .ok()
}

fn attach_btf_tracepoint(
    ebpf: &mut Ebpf,
    prog: &str,
    tracepoint: &str,
    btf: &aya::Btf,
) -> Result<(), String> {
    let program = ebpf
        .program_mut(prog)
        .ok_or_else(|| format!("program {prog} missing from the eBPF object"))?;
    let program: &mut BtfTracePoint = program.try_into().map_err(|e| format!("{prog}: {e}"))?;
    program
        .load(tracepoint, btf)
        .map_err(|e| format!("load: {}", error_chain(&e)))?;
    program
        .attach()
        .map_err(|e| format!("attach: {}", error_chain(&e)))?;
    Ok(())
}

/// `e: cause: cause` on one line (aya puts the verifier log in a source).
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// Older kernels charge BPF maps to RLIMIT_MEMLOCK; newer ones use memcg.
/// Raising it may be refused (containers): log and go on.
fn raise_memlock() {
    let unlimited = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads a valid, fully initialised rlimit struct.
    let ret = unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &unlimited) };
    if ret != 0 {
        tracing::debug!(
            "could not raise RLIMIT_MEMLOCK ({}); fine on kernels >= 5.11 that account BPF memory to the cgroup",
            std::io::Error::last_os_error()
        );
    }
}
