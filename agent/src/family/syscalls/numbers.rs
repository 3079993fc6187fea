//! Syscall numbers of the watched slots, per architecture.
//!
//! The numbers differ per architecture (aarch64 uses the generic table,
//! s390x has its own, with `mmap` being `old_mmap`). They are written out
//! here from the kernel's tables rather than taken from `libc`, which only
//! has the build target's: so every supported architecture's row is checked
//! against the kernel's table lines on any build host (tests below), and the
//! running architecture's row against `libc` as well.

use mdiag_common::syscalls::{
    NO_SYSCALL, NR_SYSCALL_NRS, SLOT_BRK, SLOT_FUTEX_WAIT, SLOT_FUTEX_WAITV, SLOT_MADVISE,
    SLOT_MMAP, SLOT_MREMAP, SLOT_MUNMAP, SLOT_RSEQ,
};

/// One architecture's numbers, by syscall.
struct Numbers {
    mmap: u64,
    munmap: u64,
    madvise: u64,
    brk: u64,
    mremap: u64,
    futex: u64,
    futex_waitv: u64,
    rseq: u64,
}

impl Numbers {
    /// Indexed by slot. futex_wake's entry is `NO_SYSCALL`: it shares
    /// futex's number with futex_wait; the operation decides.
    const fn by_slot(&self) -> [u64; NR_SYSCALL_NRS] {
        let mut nrs = [NO_SYSCALL; NR_SYSCALL_NRS];
        nrs[SLOT_MMAP] = self.mmap;
        nrs[SLOT_MUNMAP] = self.munmap;
        nrs[SLOT_MADVISE] = self.madvise;
        nrs[SLOT_BRK] = self.brk;
        nrs[SLOT_MREMAP] = self.mremap;
        nrs[SLOT_FUTEX_WAIT] = self.futex;
        nrs[SLOT_FUTEX_WAITV] = self.futex_waitv;
        nrs[SLOT_RSEQ] = self.rseq;
        nrs
    }
}

/// arch/x86/entry/syscalls/syscall_64.tbl.
#[cfg_attr(
    not(target_arch = "x86_64"),
    allow(dead_code, reason = "other architectures' rows: checked by the tests")
)]
pub const X86_64: [u64; NR_SYSCALL_NRS] = Numbers {
    mmap: 9,
    munmap: 11,
    madvise: 28,
    brk: 12,
    mremap: 25,
    futex: 202,
    futex_waitv: 449,
    rseq: 334,
}
.by_slot();

/// scripts/syscall.tbl (formerly include/uapi/asm-generic/unistd.h), the
/// 64-bit ABI: `mmap` is 222 (`mmap2` is its 32-bit twin, absent here).
#[cfg_attr(
    not(target_arch = "aarch64"),
    allow(dead_code, reason = "other architectures' rows: checked by the tests")
)]
pub const AARCH64: [u64; NR_SYSCALL_NRS] = Numbers {
    mmap: 222,
    munmap: 215,
    madvise: 233,
    brk: 214,
    mremap: 216,
    futex: 98,
    futex_waitv: 449,
    rseq: 293,
}
.by_slot();

/// arch/s390/kernel/syscalls/syscall.tbl: `mmap` (90) is `sys_old_mmap`,
/// whose arguments are in a block in user memory (the kernel side reads
/// them there); `mmap2` (192) exists only for 31-bit tasks.
#[cfg_attr(
    not(target_arch = "s390x"),
    allow(dead_code, reason = "other architectures' rows: checked by the tests")
)]
pub const S390X: [u64; NR_SYSCALL_NRS] = Numbers {
    mmap: 90,
    munmap: 91,
    madvise: 219,
    brk: 45,
    mremap: 163,
    futex: 238,
    futex_waitv: 449,
    rseq: 383,
}
.by_slot();

/// Syscall numbers of the watched slots on the architecture mdiag runs on,
/// indexed by slot.
pub fn syscall_numbers() -> [u64; NR_SYSCALL_NRS] {
    #[cfg(target_arch = "x86_64")]
    {
        X86_64
    }
    #[cfg(target_arch = "aarch64")]
    {
        AARCH64
    }
    #[cfg(target_arch = "s390x")]
    {
        S390X
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "s390x")))]
    {
        // Other architectures: libc's numbers for the build target
        // (futex_waitv is 449 in every table).
        let nr = |n: libc::c_long| u64::try_from(n).unwrap_or(NO_SYSCALL);
        Numbers {
            mmap: nr(libc::SYS_mmap),
            munmap: nr(libc::SYS_munmap),
            madvise: nr(libc::SYS_madvise),
            brk: nr(libc::SYS_brk),
            mremap: nr(libc::SYS_mremap),
            futex: nr(libc::SYS_futex),
            futex_waitv: 449,
            rseq: nr(libc::SYS_rseq),
        }
        .by_slot()
    }
}

/// The kernel's syscall table lines of the watched calls, for the tests
/// here and of the entry functions (`entry_points.rs`).
#[cfg(test)]
pub(crate) mod tables {
    /// The kernel's table lines for the watched calls (and their 32-bit
    /// twins, which must not be taken), copied verbatim:
    /// `<nr> <abi> <name> <64-bit entry> [<compat entry>]`.
    pub const X86_64_TBL: &str = "
9	common	mmap			sys_mmap
11	common	munmap			sys_munmap
12	common	brk			sys_brk
25	common	mremap			sys_mremap
28	common	madvise			sys_madvise
202	common	futex			sys_futex
334	common	rseq			sys_rseq
449	common	futex_waitv		sys_futex_waitv
";
    pub const AARCH64_TBL: &str = "
98	time32	futex				sys_futex_time32
98	64	futex				sys_futex
214	common	brk				sys_brk
215	common	munmap				sys_munmap
216	common	mremap				sys_mremap
222	32	mmap2				sys_mmap2
222	64	mmap				sys_mmap
233	common	madvise				sys_madvise
293	common	rseq				sys_rseq
449	common	futex_waitv			sys_futex_waitv
";
    pub const S390X_TBL: &str = "
45   common	brk			sys_brk				sys_brk
90   common	mmap			sys_old_mmap			compat_sys_s390_old_mmap
91   common	munmap			sys_munmap			sys_munmap
163  common	mremap			sys_mremap			sys_mremap
192  32		mmap2			-				compat_sys_s390_mmap2
219  common	madvise			sys_madvise			sys_madvise
238  common	futex			sys_futex			compat_sys_futex
383  common	rseq			sys_rseq			sys_rseq
449  common	futex_waitv		sys_futex_waitv			sys_futex_waitv
";

    /// (number, 64-bit entry point) of `name` in a table excerpt, for the
    /// 64-bit ABI (`common` or `64`).
    pub fn lookup(tbl: &str, name: &str) -> Option<(u64, String)> {
        tbl.lines().find_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            match f.as_slice() {
                [nr, "common" | "64", n, entry, ..] if *n == name => {
                    Some((nr.parse().ok()?, (*entry).to_owned()))
                }
                _ => None,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{tables::*, *};
    use mdiag_common::syscalls::{SLOT_FUTEX_WAKE, SLOT_NAMES};

    /// Every slot of `row` against the table: by the slot's name (futex_wait
    /// is `futex`; futex_wake has no number of its own).
    fn check_row(row: &[u64; NR_SYSCALL_NRS], tbl: &str) {
        for (slot, name) in SLOT_NAMES.iter().enumerate() {
            let expected = match slot {
                SLOT_FUTEX_WAKE => NO_SYSCALL,
                SLOT_FUTEX_WAIT => lookup(tbl, "futex").expect("futex in table").0,
                _ => lookup(tbl, name).expect("slot in table").0,
            };
            assert_eq!(row[slot], expected, "slot {name}");
        }
    }

    #[test]
    fn x86_64_row_matches_the_kernel_table() {
        check_row(&X86_64, X86_64_TBL);
    }

    #[test]
    fn aarch64_row_matches_the_kernel_table() {
        check_row(&AARCH64, AARCH64_TBL);
        assert_eq!(lookup(AARCH64_TBL, "mmap2"), None, "32-bit only");
    }

    #[test]
    fn s390x_row_matches_the_kernel_table() {
        check_row(&S390X, S390X_TBL);
        assert_eq!(lookup(S390X_TBL, "mmap2"), None, "31-bit only");
    }

    /// The kernel side reads s390x mmap's arguments from user memory
    /// because its entry point is old_mmap; the others take registers.
    #[test]
    fn only_s390x_mmap_takes_a_block() {
        let entry = |tbl| lookup(tbl, "mmap").map(|(_, e)| e);
        assert_eq!(entry(S390X_TBL).as_deref(), Some("sys_old_mmap"));
        assert_eq!(entry(X86_64_TBL).as_deref(), Some("sys_mmap"));
        assert_eq!(entry(AARCH64_TBL).as_deref(), Some("sys_mmap"));
    }

    /// The running architecture's row agrees with libc's numbers.
    #[test]
    fn running_architecture_agrees_with_libc() {
        let nrs = syscall_numbers();
        let nr = |n: libc::c_long| u64::try_from(n).expect("syscall number");
        assert_eq!(nrs[SLOT_MMAP], nr(libc::SYS_mmap));
        assert_eq!(nrs[SLOT_MUNMAP], nr(libc::SYS_munmap));
        assert_eq!(nrs[SLOT_MADVISE], nr(libc::SYS_madvise));
        assert_eq!(nrs[SLOT_BRK], nr(libc::SYS_brk));
        assert_eq!(nrs[SLOT_MREMAP], nr(libc::SYS_mremap));
        assert_eq!(nrs[SLOT_FUTEX_WAIT], nr(libc::SYS_futex));
        assert_eq!(nrs[SLOT_FUTEX_WAITV], nr(libc::SYS_futex_waitv));
        assert_eq!(nrs[SLOT_RSEQ], nr(libc::SYS_rseq));
        assert_eq!(nrs[SLOT_FUTEX_WAKE], NO_SYSCALL);
    }
}
