//! Who owns rseq in the target, and what that means for TCMalloc's per-CPU
//! caches.
//!
//! Google TCMalloc (mongod 8) needs to register each thread's rseq area
//! itself. glibc ≥ 2.35 registers its own area for every thread first
//! (unless `GLIBC_TUNABLES=glibc.pthread.rseq=0`), and then TCMalloc's
//! registration fails and it falls back to slower caches. The process-wide
//! answer is in glibc's own variable `__rseq_size` (0 when glibc did not
//! register), read from the target's memory: no stopping, no ptrace. The
//! per-thread answer comes from the rseq calls the syscalls probe saw. The
//! answer's types are the recording's (`recording/rseq.rs`).

use crate::recording::RseqCall;
use crate::recording::rseq::{RseqOwnership, ThreadRseq, Verdict};
use crate::symbols::{AllocatorKind, TargetCode};

/// Reads `len` bytes of the target's memory at `addr` (/proc/PID/mem).
fn read_target(pid: u32, addr: u64, len: usize) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut buf = vec![0u8; len];
    mem.read_exact_at(&mut buf, addr).ok()?;
    Some(buf)
}

/// glibc's `__rseq_size` in process `pid`, given its analysed code.
pub fn glibc_rseq_size(pid: u32, code: &TargetCode) -> Option<u32> {
    let addr = code.rseq.rseq_size.as_ref()?.address?;
    let bytes = read_target(pid, addr, 4)?;
    Some(u32::from_ne_bytes(bytes.try_into().ok()?))
}

/// The process verdict from the allocator and glibc's registration state.
pub fn verdict(allocator: AllocatorKind, glibc_rseq_size: Option<u32>) -> Verdict {
    match (allocator, glibc_rseq_size) {
        (AllocatorKind::GoogleTcmalloc, Some(0)) => Verdict::PerCpuCachesPossible,
        (AllocatorKind::GoogleTcmalloc, Some(_)) => Verdict::BlockedByGlibcRegistration,
        (AllocatorKind::GoogleTcmalloc | AllocatorKind::Unknown, None)
        | (AllocatorKind::Unknown, _) => Verdict::Unknown,
        (AllocatorKind::Glibc | AllocatorKind::Gperftools | AllocatorKind::Jemalloc, _) => {
            Verdict::AllocatorHasNoPerCpuMode
        }
    }
}

/// Per-thread owners from the rseq calls of process `pid`.
pub fn thread_owners(pid: u32, calls: &[RseqCall]) -> Vec<ThreadRseq> {
    let mut threads: Vec<ThreadRseq> = Vec::new();
    for c in calls.iter().filter(|c| c.tgid == pid) {
        let at = match threads.iter().position(|t| t.tid == c.tid) {
            Some(at) => at,
            None => {
                threads.push(ThreadRseq {
                    tid: c.tid,
                    owner: "none".into(),
                    object: None,
                    failed_calls: Vec::new(),
                });
                threads.len() - 1
            }
        };
        let t = &mut threads[at];
        if c.ret == 0 {
            let object = c.origin_object.clone().or_else(|| c.caller_object.clone());
            let by_glibc = !c.via_syscall_wrapper
                && object.as_deref().is_some_and(|o| {
                    let file = o.rsplit('/').next().unwrap_or(o);
                    file.starts_with("libc.so")
                        || file.starts_with("libc-")
                        || file.starts_with("ld-")
                });
            t.owner = if by_glibc { "glibc" } else { "program" }.into();
            t.object = object;
        } else {
            t.failed_calls.push(c.ret);
        }
    }
    threads.sort_by_key(|t| t.tid);
    threads
}

/// Analyses the target now (it must be alive) and joins the calls seen.
pub fn ownership(pid: u32, code: &TargetCode, calls: &[RseqCall]) -> RseqOwnership {
    ownership_with(code, glibc_rseq_size(pid, code), calls)
}

/// The same, with `__rseq_size` already read (glibc decides once, at start).
pub fn ownership_with(code: &TargetCode, size: Option<u32>, calls: &[RseqCall]) -> RseqOwnership {
    let allocator = code.allocator.kind;
    let verdict = verdict(allocator, size);
    let (method, confidence) = match size {
        Some(s) => (
            format!(
                "read glibc's __rseq_size ({s}) from the target's memory: {}; allocator detected from its symbols",
                if s > 0 { "glibc registers an rseq area for every thread" } else { "glibc does not register rseq" }
            ),
            "high: glibc's own state, read without stopping the process",
        ),
        None => (
            "glibc's __rseq_size was not found or not readable (static or old glibc, or no permission)".into(),
            "low",
        ),
    };
    RseqOwnership {
        allocator,
        glibc_rseq_size: size,
        verdict,
        method,
        confidence: confidence.into(),
        threads: thread_owners(code.pid, calls),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        use AllocatorKind::*;
        assert_eq!(
            verdict(GoogleTcmalloc, Some(0)),
            Verdict::PerCpuCachesPossible
        );
        assert_eq!(
            verdict(GoogleTcmalloc, Some(32)),
            Verdict::BlockedByGlibcRegistration
        );
        assert_eq!(verdict(GoogleTcmalloc, None), Verdict::Unknown);
        assert_eq!(
            verdict(Gperftools, Some(32)),
            Verdict::AllocatorHasNoPerCpuMode
        );
        assert_eq!(verdict(Glibc, None), Verdict::AllocatorHasNoPerCpuMode);
        assert_eq!(verdict(Unknown, Some(0)), Verdict::Unknown);
    }

    fn call(tid: u32, ret: i64, object: &str, wrapper: bool) -> RseqCall {
        RseqCall {
            tid,
            tgid: 10,
            ret,
            area: 0x1000,
            len: 32,
            flags: 0,
            sig: 0x5305_3053,
            caller_ip: 0,
            caller_object: Some("/usr/lib/x86_64-linux-gnu/libc.so.6".into()),
            via_syscall_wrapper: wrapper,
            origin_object: Some(object.into()),
        }
    }

    #[test]
    fn owners_per_thread() {
        let calls = vec![
            call(11, 0, "/usr/lib/x86_64-linux-gnu/libc.so.6", false),
            call(11, -22, "/usr/bin/mongod", true),
            call(12, 0, "/usr/bin/mongod", true),
            call(13, -22, "/usr/bin/mongod", true),
            RseqCall {
                tgid: 99,
                ..call(14, 0, "/x", false)
            },
        ];
        let t = thread_owners(10, &calls);
        assert_eq!(t.len(), 3);
        assert_eq!(
            (t[0].owner.as_str(), t[0].failed_calls.as_slice()),
            ("glibc", &[-22][..])
        );
        assert_eq!(
            (t[1].owner.as_str(), t[1].object.as_deref()),
            ("program", Some("/usr/bin/mongod"))
        );
        assert_eq!(t[2].owner, "none");
    }

    #[test]
    fn reads_glibc_rseq_size_of_this_process() {
        if crate::emulation::skip_under_emulation(
            "reads_glibc_rseq_size_of_this_process",
            "/proc/self/mem under qemu-user is read at the emulator's addresses",
        ) {
            return;
        }
        unsafe extern "C" {
            static __rseq_size: u32;
        }
        // SAFETY: glibc ≥ 2.35 exports this read-only variable.
        let truth = unsafe { std::ptr::read_volatile(&raw const __rseq_size) };
        let code = TargetCode::of(std::process::id()).expect("own code");
        assert_eq!(glibc_rseq_size(std::process::id(), &code), Some(truth));
        let o = ownership(std::process::id(), &code, &[]);
        assert_eq!(o.allocator, AllocatorKind::Glibc);
        assert_eq!(o.verdict, Verdict::AllocatorHasNoPerCpuMode);
        assert!(o.confidence.starts_with("high"));
    }
}
