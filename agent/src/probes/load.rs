//! Loading the eBPF object: the kernel's BTF is read here once, btf-rs
//! resolves the `task_struct` and `pt_regs` offsets, the watched syscalls'
//! entry functions and the tracepoints this kernel lacks, the object's
//! globals are set from them, then aya parses its own copy of the BTF for
//! the loader and every BTF-tracepoint attach; what the families need of
//! all that is the [`AttachContext`] each family's attach is given.

use aya::{Ebpf, EbpfLoader};
use mdiag_common::{sched as sched_common, syscalls as syscalls_common};

use super::{ProbeConfig, ProbeError, syscalls};
use crate::kit::probe::{AttachContext, btf, syscall_entries};

/// Reads what the families need from the kernel's BTF and loads the
/// object with it.
pub(super) fn load(config: ProbeConfig) -> Result<(AttachContext, Ebpf), ProbeError> {
    // btf-rs's parse of the kernel BTF (tens of MiB) lives only while the
    // offsets are resolved: it is dropped before aya parses its own copy,
    // which keeps mdiag's peak RSS within its budget.
    let (offsets, regs, absent, syscall_entries) = {
        let vmlinux = btf::load_vmlinux();
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
        let syscall_entries = vmlinux
            .as_ref()
            .map_err(ToString::to_string)
            .and_then(syscall_entries::resolve);
        (offsets, regs, absent, syscall_entries)
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
    let kernel_btf = aya::Btf::from_sys_fs().map_err(|e| format!("kernel BTF: {e}"));
    let mut loader = EbpfLoader::new();
    if let Ok(kbtf) = &kernel_btf {
        loader.btf(kbtf);
    }
    let ebpf = loader
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
    let cx = AttachContext {
        kernel_btf,
        task_offsets: offsets.map(|_| ()),
        regs_offsets: regs.map(|_| ()),
        syscall_entries,
        absent,
        target_tgid: config.target_tgid,
        stacks: config.stacks && config.target_tgid.is_some(),
        sample_hz: config.sample_hz,
        links: std::cell::RefCell::default(),
        attached: Vec::new(),
    };
    Ok((cx, ebpf))
}

/// Every BTF tracepoint a family attaches to, from the family table.
fn all_tracepoints() -> impl Iterator<Item = &'static str> {
    super::FAMILIES
        .iter()
        .flat_map(|f| f.tracepoints.iter())
        .map(|&(_, tp)| tp)
}

/// Hands start-up's freed memory back to the kernel. The kernel BTF parsed
/// for loading and attaching (tens of MiB) is freed by now, but long-lived
/// allocations made meanwhile (maps, kallsyms) sit above it in the heap, so
/// glibc would keep the hole resident for the whole recording (about 6 MiB
/// measured); `malloc_trim` releases free pages anywhere in the heap.
pub(super) fn release_freed_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim takes no pointers and only walks glibc's own free
    // lists under its arena locks; it is safe to call from any thread.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Older kernels charge BPF maps to RLIMIT_MEMLOCK; newer ones use memcg.
/// Raising it may be refused (containers): log and go on.
pub(super) fn raise_memlock() {
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
