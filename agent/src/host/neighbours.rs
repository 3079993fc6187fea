//! What else shares the host with mongod: the anonymous memory of every
//! other process, and whether the host is a Kubernetes node.
//!
//! Why: MongoDB's production notes allow a host without swap ("do not
//! assign swap space … and configure the kernel to disable swapping
//! entirely") unless other software runs beside mongod, where they ask for
//! swap. "Other software", made measurable, is the memory swap would hold
//! for it: its anonymous resident memory (`RssAnon` of /proc/PID/status;
//! file pages are dropped, not swapped, and counting them would count
//! shared libraries once per process). A Kubernetes node is told apart
//! because its kubelet refuses to start with swap on (`failSwapOn`, the
//! default): no swap advice may be given there.

use std::path::Path;

use super::{sorted_names, under};
use crate::recording::ProcessMemory;

/// How many of the largest other processes are kept as evidence.
const LARGEST_KEPT: usize = 3;

/// The anonymous memory of the processes not named mongod: (their sum in
/// bytes, the largest few, largest first). Kernel threads have no
/// `RssAnon` and count nothing; a process gone meanwhile is skipped.
pub fn other_anon_memory(root: &Path) -> (u64, Vec<ProcessMemory>) {
    let mut all: Vec<ProcessMemory> = sorted_names(&under(root, "/proc"))
        .into_iter()
        .filter_map(|n| n.parse::<u32>().ok())
        .filter_map(|pid| process_memory(root, pid))
        .filter(|p| p.comm != "mongod")
        .collect();
    let total = all.iter().map(|p| p.anon_bytes).sum();
    all.sort_by(|a, b| b.anon_bytes.cmp(&a.anon_bytes).then(a.pid.cmp(&b.pid)));
    all.truncate(LARGEST_KEPT);
    (total, all)
}

/// One process's name and anonymous resident memory (`Name:` and
/// `RssAnon:` of its status file); `None` for kernel threads and
/// processes that are gone.
fn process_memory(root: &Path, pid: u32) -> Option<ProcessMemory> {
    let status = std::fs::read_to_string(under(root, format!("/proc/{pid}/status"))).ok()?;
    let mut comm = None;
    let mut anon_kib = None;
    for line in status.lines() {
        if let Some(v) = line.strip_prefix("Name:") {
            comm = Some(v.trim().to_owned());
        } else if let Some(v) = line.strip_prefix("RssAnon:") {
            anon_kib = v.trim().trim_end_matches("kB").trim().parse::<u64>().ok();
        }
    }
    Some(ProcessMemory {
        pid,
        comm: comm?,
        anon_bytes: anon_kib?.saturating_mul(1024),
    })
}

/// Whether the host is a Kubernetes node: a process named kubelet runs
/// (`comms`: every process's (pid, comm), as `system.rs` read them), or the
/// kubelet's configuration file is in its usual place.
pub fn kubernetes_node(root: &Path, comms: &[(u32, String)]) -> bool {
    under(root, "/var/lib/kubelet/config.yaml").exists()
        || comms.iter().any(|(_, c)| c == "kubelet")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(root: &Path, pid: u32, comm: &str, anon_kib: Option<u64>) {
        let dir = root.join(format!("proc/{pid}"));
        std::fs::create_dir_all(&dir).unwrap();
        let anon = anon_kib.map_or(String::new(), |k| format!("RssAnon:\t{k:>8} kB\n"));
        std::fs::write(
            dir.join("status"),
            format!(
                "Name:\t{comm}\nUmask:\t0022\nVmRSS:\t  999999 kB\n{anon}RssFile:\t    9999 kB\n"
            ),
        )
        .unwrap();
        std::fs::write(dir.join("comm"), format!("{comm}\n")).unwrap();
    }

    #[test]
    fn other_processes_anonymous_memory_is_summed_and_mongod_and_kernel_threads_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        process(root, 1, "init", Some(1_000));
        process(root, 2, "kthreadd", None);
        process(root, 300, "mongod", Some(8_000_000));
        process(root, 400, "java", Some(6_000_000));
        process(root, 500, "backup", Some(2_000_000));
        process(root, 600, "sshd", Some(3_000));
        let (total, largest) = other_anon_memory(root);
        assert_eq!(total, (1_000 + 6_000_000 + 2_000_000 + 3_000) * 1024);
        let names: Vec<(&str, u32)> = largest.iter().map(|p| (p.comm.as_str(), p.pid)).collect();
        assert_eq!(names, [("java", 400), ("backup", 500), ("sshd", 600)]);
        assert_eq!(largest[0].anon_bytes, 6_000_000 * 1024);
    }

    #[test]
    fn a_kubelet_process_or_its_configuration_makes_a_kubernetes_node() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let init = (1, "init".to_owned());
        assert!(!kubernetes_node(root, std::slice::from_ref(&init)));
        assert!(kubernetes_node(
            root,
            &[init.clone(), (77, "kubelet".into())]
        ));

        let conf = root.join("var/lib/kubelet");
        std::fs::create_dir_all(&conf).unwrap();
        std::fs::write(conf.join("config.yaml"), "failSwapOn: true\n").unwrap();
        assert!(kubernetes_node(root, &[init]));
    }
}
