//! Host facts recorded with every recording: who, what kernel, which CPUs,
//! and the tuning state that decides how mongod behaves: THP, memory
//! sysctls, NUMA, cgroup limits, the target's allocator settings and glibc,
//! RPS/RFS.
//!
//! Every reader takes a root path ("/" in production, a fake tree in tests)
//! and leaves a fact `None` when it cannot read it: a fact is never guessed
//! and a read error is never fatal.

mod cgroup;
mod cpu;
mod cpu_usage;
mod dbpath;
mod glibc;
mod memory;
mod neighbours;
mod net;
mod process;
mod storage;
mod system;

use std::{
    path::{Path, PathBuf},
    str::FromStr,
};

use procfs::CurrentSI;

pub use cgroup::cgroup_facts;
pub use cpu::{cpu_topology, sched_class};
pub use cpu_usage::CpuSnapshot;
pub use dbpath::{DATA_FILES, db_path_facts, db_path_facts_in};
pub use glibc::glibc_version_of;
pub use memory::{memory_facts, numa_nodes};
pub use net::net_facts;
pub use process::{
    ENV_ALLOW_LIST, ENV_ALLOW_PREFIXES, env_allowed, process_facts, process_facts_in,
};
pub use storage::{storage_facts, storage_facts_in};
pub use system::system_facts;

use crate::recording::{HostFacts, SysfsChoice};

/// Readable only with debugfs mounted and root; absent on many hosts.
pub const SCHED_FEATURES: &str = "/sys/kernel/debug/sched/features";
/// The kernel's lockdown state, e.g. "none [integrity] confidentiality".
pub const LOCKDOWN: &str = "/sys/kernel/security/lockdown";

/// The active (bracketed) mode of a lockdown file's content. Pure.
pub fn lockdown_mode(content: &str) -> Option<String> {
    content
        .split_whitespace()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
        .map(str::to_owned)
}

/// Everything about this host, plus the facts of `target` (a process id)
/// when there is one. The cgroup limits are the target's, else mdiag's own.
pub fn collect(target: Option<u32>) -> HostFacts {
    let root = Path::new("/");
    let uts = nix::sys::utsname::uname().ok();
    let field = |f: fn(&nix::sys::utsname::UtsName) -> &std::ffi::OsStr| {
        uts.as_ref()
            .map(|u| f(u).to_string_lossy().into_owned())
            .unwrap_or_else(|| "unknown".into())
    };
    let kernel_release = field(|u| u.release());
    let target_process = target.map(process_facts);
    let cgroup = match &target_process {
        Some(p) => p.cgroup.clone(),
        None => cgroup_facts(root, std::process::id()),
    };
    let sched_features = std::fs::read_to_string(SCHED_FEATURES).map_err(|e| match e.kind() {
        std::io::ErrorKind::PermissionDenied => "permission denied".to_owned(),
        std::io::ErrorKind::NotFound => {
            "not found (debugfs not mounted, or no such file on this kernel)".to_owned()
        }
        _ => e.to_string(),
    });
    HostFacts {
        hostname: hostname(),
        sched_class: sched_class(&kernel_release),
        kernel_release,
        arch: field(|u| u.machine()),
        cpu_count: online_cpus(),
        cpu_model: cpu::cpu_model(),
        sched_features: sched_features.as_ref().ok().map(|s| s.trim().to_owned()),
        sched_features_error: sched_features.err(),
        lockdown: std::fs::read_to_string(LOCKDOWN)
            .ok()
            .and_then(|s| lockdown_mode(&s)),
        net: net_facts(root),
        cpu_topology: cpu_topology(root),
        memory: Some(memory_facts(root)),
        numa_nodes: numa_nodes(root),
        cgroup,
        target_process,
        db_path: target.map(db_path_facts),
        page_size: page_size(),
        tcp_keepalive_time: std::fs::read_to_string("/proc/sys/net/ipv4/tcp_keepalive_time")
            .ok()
            .and_then(|s| s.trim().parse().ok()),
        // Filled in at the end of the recording (`CpuSnapshot::usage_since`).
        cpu_usage: None,
        system: Some(system_facts(root)),
    }
}

/// The kernel's base page size, bytes.
pub fn page_size() -> Option<u64> {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(n).ok().filter(|n| *n > 0)
}

/// The host's name ("unknown" when it cannot be read).
/// `uname -m` and `uname -r` (empty when uname fails).
pub fn machine_and_release() -> (String, String) {
    let uname = nix::sys::utsname::uname().ok();
    let field = |f: fn(&nix::sys::utsname::UtsName) -> &std::ffi::OsStr| {
        uname
            .as_ref()
            .map(|u| f(u).to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    (
        field(nix::sys::utsname::UtsName::machine),
        field(nix::sys::utsname::UtsName::release),
    )
}

/// The environment variable a Kubernetes pod gets its node's name in (the
/// downward API's `spec.nodeName`, set by the DaemonSet and the Helm chart).
pub const ENV_NODE_NAME: &str = "NODE_NAME";

/// The host's name in recordings, the fleet and flight file names: the
/// node's name when [`ENV_NODE_NAME`] is set (in a pod, the kernel's host
/// name is the pod's, which changes at every rollout), else the kernel's.
pub fn hostname() -> String {
    host_name_from(std::env::var(ENV_NODE_NAME).ok(), || {
        nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "unknown".into())
    })
}

/// [`hostname`] from the variable's value and the kernel's name.
fn host_name_from(node_name: Option<String>, kernel: impl FnOnce() -> String) -> String {
    match node_name {
        Some(n) if !n.trim().is_empty() => n.trim().to_owned(),
        _ => kernel(),
    }
}

pub fn online_cpus() -> u32 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).unwrap_or(1).max(1)
}

/// `ctxt` from /proc/stat: context switches since boot, all CPUs.
pub fn proc_stat_ctxt() -> Option<u64> {
    procfs::KernelStats::current().ok().map(|s| s.ctxt)
}

/// `abs`, an absolute path as the kernel prints it, under `root`.
fn under(root: &Path, abs: impl AsRef<Path>) -> PathBuf {
    let abs = abs.as_ref();
    root.join(abs.strip_prefix("/").unwrap_or(abs))
}

/// A sysfs/procfs value without its trailing newline; `None` when unreadable.
fn read_trimmed(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// A single-number sysfs/procfs file; `None` when unreadable or not a number.
fn read_parsed<T: FromStr>(path: impl AsRef<Path>) -> Option<T> {
    read_trimmed(path)?.parse().ok()
}

/// A sysfs choice file ("always [madvise] never").
fn read_choice(path: impl AsRef<Path>) -> Option<SysfsChoice> {
    read_trimmed(path).map(|raw| parse_choice(&raw))
}

fn parse_choice(raw: &str) -> SysfsChoice {
    let bracketed = raw
        .split_once('[')
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(sel, _)| sel.trim().to_owned());
    let single = || {
        let mut words = raw.split_whitespace();
        match (words.next(), words.next()) {
            (Some(w), None) => Some(w.to_owned()),
            _ => None,
        }
    };
    SysfsChoice {
        selected: bracketed.or_else(single),
        raw: raw.to_owned(),
    }
}

/// The kernel's CPU list format ("0-3,8,10-11"; "" is the empty list).
fn parse_cpulist(s: &str) -> Option<Vec<u32>> {
    /// More than any kernel's NR_CPUS: bounds what a corrupt list can allocate.
    const MAX_CPUS: u32 = 1 << 16;
    let mut cpus = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((lo, hi)) => (lo.parse::<u32>().ok()?, hi.parse::<u32>().ok()?),
            None => {
                let n = part.parse::<u32>().ok()?;
                (n, n)
            }
        };
        if lo > hi || hi >= MAX_CPUS {
            return None;
        }
        cpus.extend(lo..=hi);
    }
    Some(cpus)
}

fn sorted_names(dir: &Path) -> Vec<String> {
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

/// Writes `files` (path relative to the tree, content) into a fake tree.
#[cfg(test)]
fn write_tree(root: &Path, files: &[(&str, &str)]) {
    for (path, content) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
}

/// The glibc version `ldd --version` reports ("ldd (Debian GLIBC 2.36-9+deb12u14) 2.36").
#[cfg(test)]
fn ldd_version() -> String {
    let out = std::process::Command::new("ldd")
        .arg("--version")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .next()
        .unwrap()
        .rsplit(' ')
        .next()
        .unwrap()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_name_is_the_host_name_in_a_pod() {
        let kernel = || "mdiag-agent-7f9c4".to_owned();
        assert_eq!(host_name_from(Some("node-3".into()), kernel), "node-3");
        assert_eq!(
            host_name_from(Some(" ".into()), kernel),
            "mdiag-agent-7f9c4"
        );
        assert_eq!(host_name_from(None, kernel), "mdiag-agent-7f9c4");
    }

    #[test]
    fn lockdown_mode_is_the_bracketed_word() {
        assert_eq!(
            lockdown_mode("none [integrity] confidentiality\n").as_deref(),
            Some("integrity")
        );
        assert_eq!(
            lockdown_mode("[none] integrity confidentiality").as_deref(),
            Some("none")
        );
        assert_eq!(lockdown_mode(""), None);
    }

    #[test]
    fn this_hosts_sched_features_are_read_or_say_why_not() {
        let h = collect(None);
        assert_eq!(
            h.sched_features.is_some(),
            h.sched_features_error.is_none(),
            "{h:?}"
        );
        // This CI machine is locked down (integrity): debugfs refuses reads.
        if h.lockdown.as_deref() == Some("integrity") {
            assert_eq!(h.sched_features_error.as_deref(), Some("permission denied"));
        }
    }

    #[test]
    fn choice_files() {
        let c = parse_choice("always [madvise] never");
        assert_eq!(c.selected.as_deref(), Some("madvise"));
        assert_eq!(c.raw, "always [madvise] never");
        assert_eq!(
            parse_choice("always defer defer+madvise [madvise] never")
                .selected
                .as_deref(),
            Some("madvise")
        );
        assert_eq!(parse_choice("none").selected.as_deref(), Some("none"));
        assert_eq!(parse_choice("mq-deadline none").selected, None);
        assert_eq!(parse_choice("").selected, None);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpulist("0-3,8,10-11\n").unwrap(),
            [0, 1, 2, 3, 8, 10, 11]
        );
        assert_eq!(parse_cpulist("").unwrap(), Vec::<u32>::new());
        assert_eq!(parse_cpulist("5").unwrap(), [5]);
        assert!(parse_cpulist("3-1").is_none());
        assert!(parse_cpulist("x").is_none());
        assert!(parse_cpulist("0-4294967295").is_none());
    }

    #[test]
    fn paths_under_a_root() {
        assert_eq!(
            under(Path::new("/tmp/t"), "/proc/1"),
            Path::new("/tmp/t/proc/1")
        );
        assert_eq!(under(Path::new("/"), "/proc/1"), Path::new("/proc/1"));
    }

    #[test]
    fn facts_of_this_host() {
        let h = collect(None);
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

        // Tuning state: real values of this host, checked against its files.
        let release = procfs::KernelVersion::from_str(&h.kernel_release).unwrap();
        let expected = if release >= procfs::KernelVersion::new(6, 6, 0) {
            "eevdf"
        } else {
            "cfs"
        };
        assert_eq!(h.sched_class.as_deref(), Some(expected));
        let m = h.memory.as_ref().unwrap();
        assert!(m.mem_total_bytes.unwrap() > 0);
        assert!(m.mem_available_bytes.unwrap() <= m.mem_total_bytes.unwrap());
        assert!(m.swap_total_bytes.is_some());
        let thp = m.thp.as_ref().unwrap();
        let enabled = thp.enabled.as_ref().unwrap();
        assert!(
            ["always", "madvise", "never"].contains(&enabled.selected.as_deref().unwrap()),
            "{enabled:?}"
        );
        assert!(thp.defrag.as_ref().unwrap().selected.is_some());
        assert!(m.vm.max_map_count.unwrap() > 0);
        let swappiness: u64 = std::fs::read_to_string("/proc/sys/vm/swappiness")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(m.vm.swappiness, Some(swappiness));
        assert!(m.vm.dirty_ratio.is_some() && m.vm.dirty_expire_centisecs.is_some());
        let t = h.cpu_topology.as_ref().unwrap();
        assert!(t.cores.unwrap() >= 1 && t.sockets.unwrap() >= 1);
        assert!(
            t.cores.unwrap() * t.threads_per_core.unwrap() >= h.cpu_count,
            "{t:?}"
        );
        if let Some(nodes) = &h.numa_nodes {
            assert!(!nodes.is_empty());
            let cpus: usize = nodes
                .iter()
                .map(|n| parse_cpulist(&n.cpus).unwrap().len())
                .sum();
            // Node lists may include offline CPUs.
            assert!(cpus >= h.cpu_count as usize, "{nodes:?}");
        }
        let cg = h.cgroup.as_ref().unwrap();
        assert_eq!(cg.pid, std::process::id());
        assert!(h.target_process.is_none());
    }

    #[test]
    fn host_facts_of_older_files_still_read_and_new_ones_round_trip() {
        let old = r#"{"hostname": "db1", "kernel_release": "6.1.0", "arch": "x86_64",
            "cpu_count": 2, "cpu_model": "x", "sched_features": null}"#;
        let h: HostFacts = serde_json::from_str(old).unwrap();
        assert_eq!((h.memory, h.cgroup, h.target_process), (None, None, None));
        let full = collect(Some(std::process::id()));
        let text = serde_json::to_string(&full).unwrap();
        assert!(text.contains("\"thp\"") && text.contains("\"glibc_version\""));
        let back: HostFacts = serde_json::from_str(&text).unwrap();
        assert_eq!(back, full);
    }

    #[test]
    fn facts_with_a_target() {
        let h = collect(Some(std::process::id()));
        let p = h.target_process.as_ref().unwrap();
        assert_eq!(p.pid, std::process::id());
        assert!(p.max_open_files.is_some());
        assert_eq!(h.cgroup, p.cgroup);
    }
}
