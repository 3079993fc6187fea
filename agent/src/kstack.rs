//! Kernel stacks: symbolization with /proc/kallsyms and the choice of a
//! stack's "signature", the first frame that says why the thread slept.
//!
//! /proc/kallsyms is a sorted-by-nothing text table of `address type name
//! [module]`; text symbols are kept, sorted once, and looked up by binary
//! search. Hand-written (about 40 lines) rather than a crate: the symbolizers
//! that read it (e.g. blazesym) bring DWARF and ELF machinery mdiag already
//! has elsewhere, for a table this simple. Addresses read as zero (the
//! kernel hides them from unprivileged readers, `kptr_restrict`) make the
//! table unusable; frames are then shown as addresses.

use std::io::BufRead;

/// Text symbols of the running kernel, sorted by address.
///
/// About 120 000 symbols on a distribution kernel: the names live in one
/// string and each entry is 16 bytes, about half the memory of a `String`
/// per symbol (this table stays resident for the whole recording).
#[derive(Debug, Clone, Default)]
pub struct KernelSymbols {
    syms: Vec<Sym>,
    names: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Sym {
    addr: u64,
    name_start: u32,
    name_len: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum KallsymsError {
    #[error("reading /proc/kallsyms: {0}")]
    Io(#[from] std::io::Error),
    #[error("/proc/kallsyms shows no addresses (kptr_restrict; run mdiag as root)")]
    Hidden,
}

impl KernelSymbols {
    /// The running kernel's symbols, read once per process and shared (about
    /// 3 MB); `None`, with a warning once, when they cannot be read.
    pub fn shared() -> Option<std::sync::Arc<KernelSymbols>> {
        static SHARED: std::sync::OnceLock<Option<std::sync::Arc<KernelSymbols>>> =
            std::sync::OnceLock::new();
        SHARED
            .get_or_init(|| match Self::load() {
                Ok(k) => Some(std::sync::Arc::new(k)),
                Err(e) => {
                    tracing::warn!("kernel frames stay unsymbolized: {e}");
                    None
                }
            })
            .clone()
    }

    /// Reads /proc/kallsyms.
    pub fn load() -> Result<Self, KallsymsError> {
        let file = std::fs::File::open("/proc/kallsyms")?;
        Self::parse(std::io::BufReader::new(file))
    }

    /// Parses kallsyms text; keeps text symbols (`t`, `T`, `w`, `W`).
    pub fn parse(reader: impl BufRead) -> Result<Self, KallsymsError> {
        let mut syms = Vec::new();
        let mut names = String::new();
        let mut nonzero = false;
        for line in reader.lines() {
            let line = line?;
            let mut parts = line.split_ascii_whitespace();
            let (Some(addr), Some(kind), Some(name)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if !matches!(kind, "t" | "T" | "w" | "W") {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            nonzero |= addr != 0;
            let (Ok(name_start), Ok(name_len)) =
                (u32::try_from(names.len()), u32::try_from(name.len()))
            else {
                continue;
            };
            names.push_str(name);
            syms.push(Sym {
                addr,
                name_start,
                name_len,
            });
        }
        if !nonzero {
            return Err(KallsymsError::Hidden);
        }
        syms.sort_unstable();
        syms.shrink_to_fit();
        names.shrink_to_fit();
        Ok(Self { syms, names })
    }

    /// The symbol covering `addr` and the offset into it.
    pub fn lookup(&self, addr: u64) -> Option<(&str, u64)> {
        let i = self.syms.partition_point(|s| s.addr <= addr);
        let sym = self.syms.get(i.checked_sub(1)?)?;
        let start = sym.name_start as usize;
        let name = self.names.get(start..start + sym.name_len as usize)?;
        Some((name, addr - sym.addr))
    }

    /// `name+0xoff`, or the address in hex.
    pub fn frame(&self, addr: u64) -> String {
        match self.lookup(addr) {
            Some((name, off)) => format!("{name}+{off:#x}"),
            None => format!("{addr:#x}"),
        }
    }
}

/// Function names (prefixes) that are how a thread sleeps, not why: the
/// scheduler, wait queues and primitives, lock slow paths, and the tracing
/// frames above the `sched_switch` tracepoint.
const PLUMBING: [&str; 40] = [
    "bpf_",
    "__bpf_",
    "__traceiter_",
    "trace_",
    "perf_",
    "__schedule",
    "schedule",
    "preempt_schedule",
    "io_schedule",
    "__io_schedule",
    "__cond_resched",
    "rwsem_down_",
    "down_",
    "__down",
    "up_",
    "__mutex_lock",
    "mutex_lock",
    "__rt_mutex",
    "rt_mutex",
    "rt_spin",
    "percpu_rwsem_wait",
    "__percpu_down",
    "percpu_down",
    "wait_for_completion",
    "__wait_for_common",
    "wait_for_common",
    "do_wait_for_common",
    "__wait_",
    "wait_on_",
    "__wait_on_",
    "out_of_line_wait_on_bit",
    "bit_wait",
    "__folio_lock",
    "folio_wait",
    "__lock_page",
    "prepare_to_wait",
    "finish_wait",
    "__wait_event",
    "wait_woken",
    "rcu_",
];

/// Whether `function` is scheduler / wait / tracing plumbing.
pub fn is_plumbing(function: &str) -> bool {
    PLUMBING.iter().any(|p| function.starts_with(p))
}

/// The signature of a stack (frames innermost first, as `name+0xoff` or a
/// bare hex address): the first symbolized frame that is not plumbing.
pub fn signature(frames: &[String]) -> Option<String> {
    frames
        .iter()
        .filter(|f| !f.starts_with("0x"))
        .map(|f| f.split('+').next().unwrap_or(f))
        .find(|name| !is_plumbing(name))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KALLSYMS: &str = "\
ffffffff81000000 T _stext
ffffffff81001000 t __schedule
ffffffff81002000 T schedule
ffffffff81003000 D some_data
ffffffff81004000 T rwsem_down_write_slowpath
ffffffff81005000 T down_write
ffffffff81006000 t xfs_ilock\t[xfs]
ffffffff81007000 T xfs_file_write_iter\t[xfs]
";

    #[test]
    fn looks_up_text_symbols_with_offsets() {
        let k = KernelSymbols::parse(KALLSYMS.as_bytes()).unwrap();
        assert_eq!(k.lookup(0xffffffff81001010), Some(("__schedule", 0x10)));
        // Data symbols are skipped: the address belongs to `schedule`.
        assert_eq!(k.lookup(0xffffffff81003008), Some(("schedule", 0x1008)));
        assert_eq!(k.lookup(0xffffffff81000000), Some(("_stext", 0)));
        assert_eq!(k.lookup(0x1000), None);
        assert_eq!(k.frame(0xffffffff81006020), "xfs_ilock+0x20");
        assert_eq!(k.frame(0x1000), "0x1000");
    }

    #[test]
    fn hidden_addresses_are_an_error() {
        let hidden = "0000000000000000 T _stext\n0000000000000000 t __schedule\n";
        assert!(matches!(
            KernelSymbols::parse(hidden.as_bytes()),
            Err(KallsymsError::Hidden)
        ));
    }

    #[test]
    fn signature_skips_scheduler_wait_and_lock_plumbing() {
        let frames: Vec<String> = [
            "bpf_prog_6deef7357e7b4530_mdiag_cont_switch+0x123",
            "bpf_trace_run4+0x60",
            "__bpf_trace_sched_switch+0x10",
            "__traceiter_sched_switch+0x2c",
            "__schedule+0x3d0",
            "schedule+0x27",
            "schedule_preempt_disabled+0x15",
            "rwsem_down_write_slowpath+0x2a0",
            "down_write+0x5a",
            "xfs_ilock+0x20",
            "xfs_file_write_iter+0x40",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(signature(&frames).as_deref(), Some("xfs_ilock"));
    }

    #[test]
    fn signature_of_io_waits_and_unknown_frames() {
        let frames: Vec<String> = [
            "0xffffffffc0001234",
            "__schedule+0x3d0",
            "schedule+0x27",
            "io_schedule+0x46",
            "bit_wait_io+0x11",
            "__wait_on_bit+0x42",
            "out_of_line_wait_on_bit+0x91",
            "jbd2_log_wait_commit+0xb5",
            "ext4_sync_file+0x1c2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(signature(&frames).as_deref(), Some("jbd2_log_wait_commit"));
        let only_plumbing = vec!["schedule+0x1".to_string(), "0x1234".to_string()];
        assert_eq!(signature(&only_plumbing), None);
    }
}
