//! Syscalls family (kernel side): memory syscalls, futex waits and rseq
//! registrations of observed threads.
//!
//! Two ways in, one body ([`on_enter`], [`on_exit`]):
//! - one fentry/fexit pair per watched syscall, on the kernel function the
//!   syscall enters through (`__x64_sys_futex`, ...; user space picks it at
//!   load time): BPF trampolines, so no other syscall of the host runs any
//!   of these programs, and no task is sent through the traced syscall slow
//!   path. Each program knows its slot as a constant.
//! - where trampolines are missing, the `sys_enter`/`sys_exit` BTF
//!   tracepoints: they run on every syscall of the host, drop tasks that are
//!   not observed, then look the syscall number up among the watched ones.
//!
//! Both hand the same `struct pt_regs` (the user registers at the syscall)
//! to [`on_enter`]: the entry functions take it as their one argument.
//! Only watched calls of observed tasks touch a map.
//!
//! `Inflight::args` holds the watched call's first four arguments as the
//! C library documents them, on every architecture: s390x's `mmap` passes
//! them in a block in user memory (`mmap_args`).

use aya_ebpf::{
    helpers::{bpf_get_current_pid_tgid, bpf_probe_read_kernel, bpf_probe_read_user},
    macros::{btf_tracepoint, fentry, fexit, map},
    maps::{HashMap, PerCpuArray, RingBuf},
    programs::{BtfTracePointContext, FEntryContext, FExitContext},
};
use mdiag_common::{
    hist::log2_bucket,
    syscalls::{
        FUTEX_CMD_MASK, FUTEX_WAIT_OPS, Inflight, MAX_INFLIGHT, MAX_THREADS, NO_SYSCALL, NR_SLOTS,
        NR_SYSCALL_NRS, RSEQ_RING_BYTES, RseqEvent, SLOT_BRK, SLOT_FUTEX_WAIT, SLOT_FUTEX_WAITV,
        SLOT_FUTEX_WAKE, SLOT_MADVISE, SLOT_MMAP, SLOT_MREMAP, SLOT_MUNMAP, SLOT_RSEQ,
        SyscallDrops, SyscallStats, ThreadSyscalls,
    },
};

use crate::{
    sched::{global, now_ns, observed},
    wiredtiger::checkpoint_window,
};

#[unsafe(no_mangle)]
static MDIAG_SYSCALL_NRS: [u64; NR_SYSCALL_NRS] = [NO_SYSCALL; NR_SYSCALL_NRS];
#[unsafe(no_mangle)]
static MDIAG_REGS_ARG_OFFSETS: [u32; 4] = [0; 4];
#[unsafe(no_mangle)]
static MDIAG_REGS_IP_OFFSET: u32 = 0;
#[unsafe(no_mangle)]
static MDIAG_REGS_SP_OFFSET: u32 = 0;

#[map]
static SYS_INFLIGHT: HashMap<u32, Inflight> = HashMap::with_max_entries(MAX_INFLIGHT, 0);
#[map]
static SYS_STATS: PerCpuArray<SyscallStats> = PerCpuArray::with_max_entries(NR_SLOTS as u32, 0);
#[map]
static SYS_THREADS: HashMap<u32, ThreadSyscalls> = HashMap::with_max_entries(MAX_THREADS, 0);
#[map]
static SYS_RSEQ_EVENTS: RingBuf = RingBuf::with_byte_size(RSEQ_RING_BYTES, 0);
#[map]
static SYS_DROPS: PerCpuArray<SyscallDrops> = PerCpuArray::with_max_entries(1, 0);

const BPF_ANY: u64 = 0;
const BPF_NOEXIST: u64 = 1;

#[inline(always)]
fn drops() -> Option<&'static mut SyscallDrops> {
    // SAFETY: per-CPU slot; these programs do not nest on one CPU.
    SYS_DROPS.get_ptr_mut(0).map(|p| unsafe { &mut *p })
}

/// The watched slot of syscall number `id`, if any.
#[inline(always)]
fn slot_of(id: u64) -> Option<usize> {
    if id == NO_SYSCALL {
        return None;
    }
    for slot in 0..NR_SYSCALL_NRS {
        // SAFETY: volatile read of a loader-patched read-only global.
        let nr = unsafe { core::ptr::read_volatile(&MDIAG_SYSCALL_NRS[slot]) };
        if nr == id {
            return Some(slot);
        }
    }
    None
}

#[inline(always)]
fn read_reg(regs: *const u8, offset: u32) -> u64 {
    // SAFETY: bpf_probe_read_kernel fails cleanly on a bad address; `regs`
    // is the syscall's pt_regs and the offset comes from BTF.
    unsafe { bpf_probe_read_kernel(regs.wrapping_add(offset as usize) as *const u64).unwrap_or(0) }
}

/// The 8 bytes at user address `sp` (0 when unreadable).
#[inline(always)]
fn user_stack_word(sp: u64) -> u64 {
    // SAFETY: bpf_probe_read_user fails cleanly on any bad user address.
    unsafe { bpf_probe_read_user(sp as *const u64).unwrap_or(0) }
}

/// mmap(2)'s first four arguments from the registers of an `mmap` call.
/// On s390x that call is `old_mmap`, whose one argument points to a
/// `struct mmap_arg_struct` in user memory holding all six: the block is
/// read from there at entry (all zero when it cannot be read without a page
/// fault, so the call's length is not counted; glibc builds the block on the
/// stack, which is resident). Elsewhere the registers hold them.
#[allow(unexpected_cfgs, reason = "bpf_target_arch is set by the eBPF build")]
#[inline(always)]
fn mmap_args(regs_args: [u64; 4]) -> [u64; 4] {
    #[cfg(bpf_target_arch = "s390x")]
    {
        // SAFETY: bpf_probe_read_user fails cleanly on any bad user address.
        let block = unsafe {
            bpf_probe_read_user(regs_args[0] as *const mdiag_common::syscalls::MmapArgStruct)
        };
        block.map(|b| b.args()).unwrap_or([0; 4])
    }
    #[cfg(not(bpf_target_arch = "s390x"))]
    {
        regs_args
    }
}

/// A watched syscall of an observed thread begins: remembers it (what
/// `Inflight` holds) until [`on_exit`]. `slot` is the syscall's (futex's is
/// `SLOT_FUTEX_WAIT`: its operation decides between wait and wake here).
#[inline(always)]
fn on_enter(regs: *const u8, pid_tgid: u64, mut slot: usize) {
    let mut args = [0u64; 4];
    for (i, a) in args.iter_mut().enumerate() {
        // SAFETY: volatile read of a loader-patched read-only global.
        let off = unsafe { core::ptr::read_volatile(&MDIAG_REGS_ARG_OFFSETS[i]) };
        *a = read_reg(regs, off);
    }
    if slot == SLOT_MMAP {
        args = mmap_args(args);
    }
    if slot == SLOT_FUTEX_WAIT {
        let op = args[1] & FUTEX_CMD_MASK;
        if !FUTEX_WAIT_OPS.contains(&op) {
            slot = SLOT_FUTEX_WAKE;
        }
    }
    let in_checkpoint = if slot == SLOT_FUTEX_WAIT || slot == SLOT_FUTEX_WAITV {
        checkpoint_window()
    } else {
        0
    };
    let entry = Inflight {
        ts_ns: now_ns(),
        slot: slot as u32,
        in_checkpoint,
        args,
        ip: read_reg(regs, global(&MDIAG_REGS_IP_OFFSET)),
        sp_word: if slot == SLOT_RSEQ {
            user_stack_word(read_reg(regs, global(&MDIAG_REGS_SP_OFFSET)))
        } else {
            0
        },
    };
    let tid = pid_tgid as u32;
    if SYS_INFLIGHT.insert(&tid, &entry, BPF_ANY).is_err()
        && let Some(d) = drops()
    {
        d.inflight_full += 1;
    }
}

/// The thread's watched syscall in flight (if any) returned `ret`: counts it.
#[inline(always)]
fn on_exit(ret: i64) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if !observed(tgid) {
        return;
    }
    let tid = pid_tgid as u32;
    let Some(ptr) = SYS_INFLIGHT.get_ptr(&tid) else {
        return;
    };
    // SAFETY: valid map value pointer; copied out before the delete below.
    let entry = unsafe { *ptr };
    let now = now_ns();
    let delta = now.saturating_sub(entry.ts_ns);
    let slot = entry.slot as usize;
    if let Some(s) = SYS_STATS.get_ptr_mut(entry.slot) {
        // SAFETY: per-CPU slot of this CPU.
        let s = unsafe { &mut *s };
        s.count += 1;
        if (-4095..0).contains(&ret) {
            s.errors += 1;
        }
        s.time_ns += delta;
        if let Some(h) = s.hist.get_mut(log2_bucket(delta)) {
            *h += 1;
        }
        s.bytes += match slot {
            SLOT_MMAP | SLOT_MUNMAP | SLOT_MADVISE => entry.args[1],
            SLOT_MREMAP => entry.args[2],
            _ => 0,
        };
    }
    let futex_wait = slot == SLOT_FUTEX_WAIT || slot == SLOT_FUTEX_WAITV;
    let mem = matches!(
        slot,
        SLOT_MMAP | SLOT_MUNMAP | SLOT_MADVISE | SLOT_BRK | SLOT_MREMAP
    );
    if futex_wait || mem {
        let t = match SYS_THREADS.get_ptr_mut(&tid) {
            Some(t) => Some(t),
            None => {
                let fresh = ThreadSyscalls {
                    tgid,
                    ..ThreadSyscalls::default()
                };
                if SYS_THREADS.insert(&tid, &fresh, BPF_NOEXIST).is_err()
                    && let Some(d) = drops()
                {
                    d.thread_map_full += 1;
                }
                SYS_THREADS.get_ptr_mut(&tid)
            }
        };
        if let Some(t) = t {
            // SAFETY: valid map value; only this thread's syscalls update it.
            let t = unsafe { &mut *t };
            if futex_wait {
                t.futex_waits += 1;
                t.futex_wait_ns += delta;
                t.last_futex_start_ns = entry.ts_ns;
                if entry.in_checkpoint != 0 {
                    t.futex_waits_in_checkpoint += 1;
                    t.futex_wait_ns_in_checkpoint += delta;
                }
            } else {
                t.mem_calls += 1;
                t.mem_ns += delta;
            }
        }
    }
    if slot == SLOT_RSEQ {
        match SYS_RSEQ_EVENTS.reserve::<RseqEvent>(0) {
            Some(mut e) => {
                e.write(RseqEvent {
                    tid,
                    tgid,
                    ret,
                    area: entry.args[0],
                    len: entry.args[1] as u32,
                    flags: entry.args[2] as u32,
                    sig: entry.args[3] as u32,
                    _pad0: 0,
                    caller_ip: entry.ip,
                    ts_ns: now,
                    sp_word: entry.sp_word,
                });
                e.submit(0);
            }
            None => {
                if let Some(d) = drops() {
                    d.rseq_ring_full += 1;
                }
            }
        }
    }
    // Last: while the entry is in flight, the counters above either do not
    // hold the call yet or name it (`last_futex_start_ns`), never neither.
    let _ = SYS_INFLIGHT.remove(&tid);
}

/// One fentry/fexit pair for the watched syscall of `$slot`; user space
/// loads them on the kernel function that syscall enters through, which
/// takes the user registers (`const struct pt_regs *`) as its one argument
/// and returns the syscall's result (fexit's second argument).
macro_rules! watched_syscall {
    ($entry:ident, $exit:ident, $slot:expr) => {
        #[fentry]
        pub fn $entry(ctx: FEntryContext) -> i32 {
            let pid_tgid = bpf_get_current_pid_tgid();
            if observed((pid_tgid >> 32) as u32) {
                on_enter(ctx.arg(0), pid_tgid, $slot);
            }
            0
        }

        #[fexit]
        pub fn $exit(ctx: FExitContext) -> i32 {
            on_exit(ctx.arg(1));
            0
        }
    };
}

// Names: `mdiag_fe_*` / `mdiag_fx_*` stay distinct within the kernel's 15
// characters of a program name (mdiag_common::syscalls::ENTRY_PROGRAMS).
watched_syscall!(mdiag_fe_mmap, mdiag_fx_mmap, SLOT_MMAP);
watched_syscall!(mdiag_fe_munmap, mdiag_fx_munmap, SLOT_MUNMAP);
watched_syscall!(mdiag_fe_madvise, mdiag_fx_madvise, SLOT_MADVISE);
watched_syscall!(mdiag_fe_brk, mdiag_fx_brk, SLOT_BRK);
watched_syscall!(mdiag_fe_mremap, mdiag_fx_mremap, SLOT_MREMAP);
watched_syscall!(mdiag_fe_futex, mdiag_fx_futex, SLOT_FUTEX_WAIT);
watched_syscall!(mdiag_fe_waitv, mdiag_fx_waitv, SLOT_FUTEX_WAITV);
watched_syscall!(mdiag_fe_rseq, mdiag_fx_rseq, SLOT_RSEQ);

/// Fallback: every syscall of the host enters here.
#[btf_tracepoint(function = "sys_enter")]
pub fn mdiag_sys_enter(ctx: BtfTracePointContext) -> i32 {
    // TP_PROTO(struct pt_regs *regs, long id)
    let pid_tgid = bpf_get_current_pid_tgid();
    if !observed((pid_tgid >> 32) as u32) {
        return 0;
    }
    let Some(slot) = slot_of(ctx.arg(1)) else {
        return 0;
    };
    on_enter(ctx.arg(0), pid_tgid, slot);
    0
}

/// Fallback: every syscall of the host leaves here.
#[btf_tracepoint(function = "sys_exit")]
pub fn mdiag_sys_exit(ctx: BtfTracePointContext) -> i32 {
    // TP_PROTO(struct pt_regs *regs, long ret)
    on_exit(ctx.arg(1));
    0
}
