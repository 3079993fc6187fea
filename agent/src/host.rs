//! Host facts recorded with every recording: who, what kernel, which CPUs.
//!
//! Later issues add tuning state (THP, sysctls, NUMA, RPS/RFS, ...) here.

use procfs::{Current, CurrentSI};

use crate::recording::HostFacts;

/// Readable only with debugfs mounted and root; absent on many hosts.
pub const SCHED_FEATURES: &str = "/sys/kernel/debug/sched/features";

pub fn collect() -> HostFacts {
    let uts = nix::sys::utsname::uname().ok();
    let field = |f: fn(&nix::sys::utsname::UtsName) -> &std::ffi::OsStr| {
        uts.as_ref()
            .map(|u| f(u).to_string_lossy().into_owned())
            .unwrap_or_else(|| "unknown".into())
    };
    HostFacts {
        hostname: nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "unknown".into()),
        kernel_release: field(|u| u.release()),
        arch: field(|u| u.machine()),
        cpu_count: online_cpus(),
        cpu_model: cpu_model(),
        sched_features: std::fs::read_to_string(SCHED_FEATURES)
            .ok()
            .map(|s| s.trim().to_owned()),
    }
}

pub fn online_cpus() -> u32 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).unwrap_or(1).max(1)
}

fn cpu_model() -> String {
    let Ok(info) = procfs::CpuInfo::current() else {
        return "unknown".into();
    };
    // x86 "model name", arm64 sometimes "CPU part" only, s390x "machine" in the header.
    for key in ["model name", "Model", "Processor", "cpu model"] {
        if let Some(v) = info.get_field(0, key) {
            return v.trim().to_owned();
        }
    }
    info.fields
        .get("machine")
        .map(|m| format!("IBM Z machine {}", m.trim()))
        .unwrap_or_else(|| "unknown".into())
}

/// `ctxt` from /proc/stat: context switches since boot, all CPUs.
pub fn proc_stat_ctxt() -> Option<u64> {
    procfs::KernelStats::current().ok().map(|s| s.ctxt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_of_this_host() {
        let h = collect();
        assert_eq!(h.arch, std::env::consts::ARCH);
        assert!(
            h.kernel_release
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit()),
            "{}",
            h.kernel_release
        );
        let stat = std::fs::read_to_string("/proc/stat").unwrap();
        let cpu_lines = stat
            .lines()
            .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
            .count();
        assert_eq!(h.cpu_count as usize, cpu_lines);
        assert!(proc_stat_ctxt().unwrap() > 0);
    }
}
