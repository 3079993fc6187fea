//! Host facts recorded with every recording: who, what kernel, which CPUs.
//!
//! Later issues add tuning state (THP, sysctls, NUMA, RPS/RFS, ...) here.

use procfs::{Current, CurrentSI};

use crate::recording::{HostFacts, NetFacts, NetInterface, RxQueue};

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
        net: net_facts(std::path::Path::new("/")),
    }
}

/// RPS/RFS state under `root` (normally "/"; a test passes a fake tree).
pub fn net_facts(root: &std::path::Path) -> Option<NetFacts> {
    let read = |p: std::path::PathBuf| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
    let entries = read(root.join("proc/sys/net/core/rps_sock_flow_entries"))?
        .parse()
        .ok()?;
    let net = root.join("sys/class/net");
    let mut interfaces = Vec::new();
    for name in sorted_names(&net).into_iter().filter(|n| n != "lo") {
        let queues_dir = net.join(&name).join("queues");
        let mut queues: Vec<String> = sorted_names(&queues_dir)
            .into_iter()
            .filter(|q| q.starts_with("rx-"))
            .collect();
        queues.sort_by_key(|q| {
            q.trim_start_matches("rx-")
                .parse::<u32>()
                .unwrap_or(u32::MAX)
        });
        let rx_queues: Vec<RxQueue> = queues
            .into_iter()
            .map(|q| RxQueue {
                rps_cpus: read(queues_dir.join(&q).join("rps_cpus")).unwrap_or_default(),
                rps_flow_cnt: read(queues_dir.join(&q).join("rps_flow_cnt"))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0),
                name: q,
            })
            .collect();
        if !rx_queues.is_empty() {
            interfaces.push(NetInterface { name, rx_queues });
        }
    }
    Some(NetFacts {
        rps_sock_flow_entries: entries,
        interfaces,
    })
}

fn sorted_names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
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
    fn rps_rfs_state_from_a_fake_tree() {
        let root = tempfile::tempdir().unwrap();
        let w = |p: &str, v: &str| {
            let p = root.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, v).unwrap();
        };
        w("proc/sys/net/core/rps_sock_flow_entries", "0\n");
        for q in ["rx-0", "rx-1", "rx-10", "tx-0"] {
            w(
                &format!("sys/class/net/eth0/queues/{q}/rps_cpus"),
                "00000000\n",
            );
            w(
                &format!("sys/class/net/eth0/queues/{q}/rps_flow_cnt"),
                "0\n",
            );
        }
        w("sys/class/net/lo/queues/rx-0/rps_cpus", "0\n");
        let n = net_facts(root.path()).unwrap();
        assert_eq!(n.interfaces.len(), 1);
        let names: Vec<&str> = n.interfaces[0]
            .rx_queues
            .iter()
            .map(|q| q.name.as_str())
            .collect();
        assert_eq!(names, ["rx-0", "rx-1", "rx-10"]);
        assert!(!n.rps_enabled() && !n.rfs_enabled());
        w("sys/class/net/eth0/queues/rx-1/rps_cpus", "0000000f\n");
        w("sys/class/net/eth0/queues/rx-1/rps_flow_cnt", "4096\n");
        let n = net_facts(root.path()).unwrap();
        assert!(
            n.rps_enabled() && !n.rfs_enabled(),
            "RFS also needs rps_sock_flow_entries"
        );
        w("proc/sys/net/core/rps_sock_flow_entries", "32768\n");
        let n = net_facts(root.path()).unwrap();
        assert!(n.rfs_enabled());
        assert_eq!(n.rps_sock_flow_entries, 32768);
        assert!(net_facts(&root.path().join("missing")).is_none());
    }

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
