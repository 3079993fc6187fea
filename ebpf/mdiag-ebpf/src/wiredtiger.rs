//! WiredTiger family (kernel side): checkpoint windows from a uprobe and a
//! uretprobe on `__wt_txn_checkpoint`, attached by user space to whichever
//! object of the target defines it, for the target's pid.
//!
//! Entry: remember (thread → start ns). Return: one event per checkpoint on a
//! ring buffer (checkpoints are rare). Drops are counted per CPU.
//!
//! Both also keep `WT_CKPT_ACTIVE`, the number of checkpoints running now,
//! which the contention and syscalls programs read to split waits into
//! inside / outside checkpoint windows. A return without a remembered entry
//! does not decrement it, so a checkpoint already running at attach never
//! drives it below zero (its waits count as outside).

use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid,
    macros::{map, uprobe, uretprobe},
    maps::{Array, HashMap, PerCpuArray, RingBuf},
    programs::{ProbeContext, RetProbeContext},
};
use mdiag_common::wiredtiger::{CKPT_RING_BYTES, CheckpointEvent, MAX_INFLIGHT, WiredTigerDrops};

use crate::sched::{now_ns, observed};

#[map]
static WT_CKPT_START: HashMap<u32, u64> = HashMap::with_max_entries(MAX_INFLIGHT, 0);
#[map]
static WT_CKPT_EVENTS: RingBuf = RingBuf::with_byte_size(CKPT_RING_BYTES, 0);
/// Index 0: checkpoints running now.
#[map]
pub(crate) static WT_CKPT_ACTIVE: Array<u64> = Array::with_max_entries(1, 0);
#[map]
static WT_DROPS: PerCpuArray<WiredTigerDrops> = PerCpuArray::with_max_entries(1, 0);

const BPF_ANY: u64 = 0;

#[inline(always)]
fn drops() -> Option<&'static mut WiredTigerDrops> {
    // SAFETY: per-CPU slot; these programs do not nest on one CPU.
    WT_DROPS.get_ptr_mut(0).map(|p| unsafe { &mut *p })
}

#[uprobe]
pub fn mdiag_wt_ckpt_enter(_ctx: ProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    if !observed((pid_tgid >> 32) as u32) {
        return 0;
    }
    let tid = pid_tgid as u32;
    let start = now_ns();
    if WT_CKPT_START.insert(&tid, &start, BPF_ANY).is_err() {
        if let Some(d) = drops() {
            d.start_map_full += 1;
        }
        return 0;
    }
    if let Some(active) = WT_CKPT_ACTIVE.get_ptr_mut(0) {
        // SAFETY: valid array slot. WiredTiger serialises checkpoints, so
        // entries and returns do not race with each other.
        unsafe { *active += 1 };
    }
    0
}

/// 1 when a checkpoint of the target is running now, else 0: the window
/// index of a wait that begins now.
#[inline(always)]
pub(crate) fn checkpoint_window() -> u32 {
    match WT_CKPT_ACTIVE.get_ptr(0) {
        // SAFETY: valid array slot; a racing update only moves one wait
        // across the window boundary.
        Some(active) => u32::from(unsafe { *active } > 0),
        None => 0,
    }
}

#[uretprobe]
pub fn mdiag_wt_ckpt_exit(ctx: RetProbeContext) -> u32 {
    let pid_tgid = bpf_get_current_pid_tgid();
    let tgid = (pid_tgid >> 32) as u32;
    if !observed(tgid) {
        return 0;
    }
    let end = now_ns();
    let tid = pid_tgid as u32;
    // SAFETY: the value is copied out before the delete below.
    let Some(start) = (unsafe { WT_CKPT_START.get(&tid) }).copied() else {
        if let Some(d) = drops() {
            d.missing_entry += 1;
        }
        return 0;
    };
    let _ = WT_CKPT_START.remove(&tid);
    if let Some(active) = WT_CKPT_ACTIVE.get_ptr_mut(0) {
        // SAFETY: as at entry; never below zero.
        unsafe { *active = (*active).saturating_sub(1) };
    }
    // `int __wt_txn_checkpoint(...)`: the low 32 bits of the return register.
    let ret: i32 = ctx.ret();
    match WT_CKPT_EVENTS.reserve::<CheckpointEvent>(0) {
        Some(mut e) => {
            e.write(CheckpointEvent {
                tid,
                tgid,
                start_ns: start,
                end_ns: end,
                ret: i64::from(ret),
            });
            e.submit(0);
        }
        None => {
            if let Some(d) = drops() {
                d.ring_full += 1;
            }
        }
    }
    0
}
