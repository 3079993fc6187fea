//! Facts about the target process: allow-listed environment (allocator and
//! glibc tunables), glibc version, open-files limit, NUMA policy, cgroup.
//!
//! The environment is read from /proc/PID/environ (the environment the
//! process was started with; later `setenv` calls do not show) and only the
//! allow-listed variables are kept: everything else (credentials, connection
//! strings) is dropped as soon as it is read and never stored or logged.

use std::{
    collections::{BTreeMap, HashMap},
    io::BufRead,
    path::Path,
    time::Duration,
};

use procfs::process::{LimitValue, Process};

use super::{
    cgroup::cgroup_facts,
    glibc::{find_libc, mapped_glibc_version, maps_glibc_loader},
};
use crate::recording::{ProcessFacts, ResourceLimit};

/// Environment variables kept by exact name.
pub const ENV_ALLOW_LIST: &[&str] = &["GLIBC_TUNABLES", "LD_PRELOAD"];
/// Environment variables kept by prefix (allocator settings).
pub const ENV_ALLOW_PREFIXES: &[&str] = &["TCMALLOC_", "MALLOC_"];

/// How long to wait for the kernel to finish an exec (polls of
/// [`EXEC_POLL`]) and then for the loader to map libc (polls of
/// [`LIBC_POLL`]) in a process that has just exec'd (a spawned target).
const EXEC_POLLS: u32 = 20;
const EXEC_POLL: Duration = Duration::from_millis(10);
const LIBC_POLLS: u32 = 20;
const LIBC_POLL: Duration = Duration::from_millis(10);
/// numa_maps lines read when there is no heap line: reading numa_maps walks
/// the page tables of every mapping it prints, which is slow for a large
/// process, so the read stops at the heap or after this many mappings.
const MAX_NUMA_MAPS_LINES: usize = 256;

/// Whether an environment variable may be recorded.
pub fn env_allowed(name: &str) -> bool {
    ENV_ALLOW_LIST.contains(&name) || ENV_ALLOW_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Facts about process `pid` of this host.
pub fn process_facts(pid: u32) -> ProcessFacts {
    process_facts_in(Path::new("/"), pid)
}

/// Facts about process `pid` under `root` (ROOT/proc/PID).
pub fn process_facts_in(root: &Path, pid: u32) -> ProcessFacts {
    let dir = root.join(format!("proc/{pid}"));
    let proc = Process::new_with_root(dir.clone()).ok();
    if let Some(p) = &proc {
        wait_for_exec(p);
    }
    let libc = proc.as_ref().and_then(mapped_libc);
    let limits = proc.as_ref().and_then(|p| p.limits().ok());
    let pair = |l: &procfs::process::Limit| ResourceLimit {
        soft: limit(l.soft_limit),
        hard: limit(l.hard_limit),
    };
    ProcessFacts {
        pid,
        environ: proc.as_ref().and_then(|p| p.environ().ok()).map(allowed),
        glibc_version: libc
            .as_ref()
            .and_then(|l| mapped_glibc_version(root, &dir, l)),
        libc_path: libc.map(|l| l.path.to_string_lossy().into_owned()),
        max_open_files: limits.as_ref().map(|l| pair(&l.max_open_files)),
        max_processes: limits.as_ref().map(|l| pair(&l.max_processes)),
        max_locked_memory: limits.as_ref().map(|l| pair(&l.max_locked_memory)),
        numa_policy: numa_policy_of(&dir, proc.as_ref()),
        cgroup: cgroup_facts(root, pid),
        thp_enabled: std::fs::read_to_string(dir.join("status"))
            .ok()
            .and_then(|s| thp_enabled(&s)),
    }
}

/// The `THP_enabled:` line of /proc/PID/status: 1 unless the process set
/// PR_SET_THP_DISABLE (absent before Linux 5.0).
fn thp_enabled(status: &str) -> Option<bool> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:"))
        .and_then(|v| match v.trim() {
            "1" => Some(true),
            "0" => Some(false),
            _ => None,
        })
}

/// Keeps only the allow-listed variables; the others are dropped here.
fn allowed(environ: HashMap<std::ffi::OsString, std::ffi::OsString>) -> BTreeMap<String, String> {
    environ
        .into_iter()
        .filter_map(|(k, v)| {
            let k = k.into_string().ok()?;
            env_allowed(&k).then(|| (k, v.to_string_lossy().into_owned()))
        })
        .collect()
}

/// A process that has just exec'd (a spawned target) can be seen before the
/// kernel has set up its new image: no environment yet (`env_end` of
/// /proc/PID/stat is 0), then no libraries. Waits, briefly, for the first.
fn wait_for_exec(p: &Process) {
    for _ in 0..EXEC_POLLS {
        match p.stat() {
            Ok(s) if s.env_end == Some(0) && s.state != 'Z' => std::thread::sleep(EXEC_POLL),
            _ => return,
        }
    }
}

/// The process's glibc mapping, waiting briefly while the loader is still
/// mapping the libraries of a process that has just exec'd.
fn mapped_libc(p: &Process) -> Option<super::glibc::MappedLibc> {
    for _ in 0..LIBC_POLLS {
        let maps = p.maps().ok()?;
        if let Some(libc) = find_libc(&maps) {
            return Some(libc);
        }
        if !maps_glibc_loader(&maps) {
            return None;
        }
        std::thread::sleep(LIBC_POLL);
    }
    None
}

fn limit(v: LimitValue) -> Option<u64> {
    match v {
        LimitValue::Unlimited => None,
        LimitValue::Value(n) => Some(n),
    }
}

/// Processes whose NUMA policy is remembered.
const NUMA_POLICIES_KEPT: usize = 16;

/// The NUMA policy of the process in `dir`, read once per process (its
/// start time tells a process from a later one with the same pid): reading
/// numa_maps walks the page tables of every mapping it prints, milliseconds
/// for a large mongod, and the agent asks at every window. A policy is set
/// when the process starts (`numactl`) and kept.
fn numa_policy_of(dir: &Path, proc: Option<&Process>) -> Option<String> {
    type Kept = Vec<(std::path::PathBuf, u64, Option<String>)>;
    static KEPT: std::sync::Mutex<Kept> = std::sync::Mutex::new(Vec::new());
    let read = || {
        std::fs::File::open(dir.join("numa_maps"))
            .ok()
            .and_then(|f| numa_policy(std::io::BufReader::new(f)))
    };
    let Some(start) = proc.and_then(|p| p.stat().ok()).map(|s| s.starttime) else {
        return read();
    };
    let lock = || KEPT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, _, policy)) = lock().iter().find(|(d, s, _)| d == dir && *s == start) {
        return policy.clone();
    }
    let policy = read();
    let mut kept = lock();
    kept.retain(|(d, _, _)| d != dir);
    kept.push((dir.to_path_buf(), start, policy.clone()));
    if kept.len() > NUMA_POLICIES_KEPT {
        kept.remove(0);
    }
    policy
}

/// The policy of the heap's line of numa_maps ("5644d3aa9000 default heap
/// anon=10 ..."), else the most common policy of the first lines (procfs has
/// no numa_maps parser).
fn numa_policy(reader: impl BufRead) -> Option<String> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for line in reader.lines().take(MAX_NUMA_MAPS_LINES) {
        let line = line.ok()?;
        let mut words = line.split_whitespace();
        let (Some(_addr), Some(policy)) = (words.next(), words.next()) else {
            continue;
        };
        if words.any(|w| w == "heap") {
            return Some(policy.to_owned());
        }
        *counts.entry(policy.to_owned()).or_default() += 1;
    }
    // Most common; ties go to the first name in order.
    let best = counts.values().copied().max()?;
    counts.into_iter().find(|(_, n)| *n == best).map(|(p, _)| p)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use super::*;
    use crate::host::write_tree;

    #[test]
    fn the_numa_policy_is_read_once_per_process() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        // A real stat line, with its start time (field 22) replaced.
        let stat = |start: u64| {
            let me = std::fs::read_to_string("/proc/self/stat").unwrap();
            let (head, tail) = me.rsplit_once(") ").unwrap();
            let mut fields: Vec<String> = tail.split(' ').map(str::to_owned).collect();
            fields[19] = start.to_string();
            format!("{head}) {}", fields.join(" "))
        };
        let policy = |maps: &str, start: u64| {
            write_tree(
                r,
                &[("proc/7/stat", &stat(start)), ("proc/7/numa_maps", maps)],
            );
            process_facts_in(r, 7).numa_policy
        };
        let interleave = "55bdb22f4000 interleave:0-1 heap anon=1\n";
        let default = "55bdb22f4000 default heap anon=1\n";
        assert_eq!(policy(interleave, 100).as_deref(), Some("interleave:0-1"));
        assert_eq!(
            policy(default, 100).as_deref(),
            Some("interleave:0-1"),
            "the same process: not read again"
        );
        assert_eq!(
            policy(default, 200).as_deref(),
            Some("default"),
            "another process with that pid"
        );
    }

    #[test]
    fn allow_list() {
        for name in [
            "GLIBC_TUNABLES",
            "LD_PRELOAD",
            "TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES",
            "MALLOC_ARENA_MAX",
        ] {
            assert!(env_allowed(name), "{name}");
        }
        for name in [
            "MONGODB_URI",
            "AWS_SECRET_ACCESS_KEY",
            "LD_LIBRARY_PATH",
            "GLIBC_TUNABLES_X",
            "glibc_tunables",
            "XMALLOC_ARENA_MAX",
            "PATH",
        ] {
            assert!(!env_allowed(name), "{name}");
        }
    }

    #[test]
    fn numa_policies() {
        let p = |s: &str| numa_policy(s.as_bytes());
        let heap = "55bdb22f4000 interleave:0-1 file=/usr/bin/mongod mapped=2 N0=2
5644d3aa9000 bind:1 heap anon=10 dirty=10 N1=10
7f0000000000 interleave:0-1 anon=5 N0=5
";
        assert_eq!(p(heap).as_deref(), Some("bind:1"));
        let no_heap =
            "1000 default file=/a\n2000 interleave:0-1 anon=1\n3000 interleave:0-1 anon=1\n";
        assert_eq!(p(no_heap).as_deref(), Some("interleave:0-1"));
        assert_eq!(
            p("1000 prefer:1 anon=1\n2000 default anon=1\n").as_deref(),
            Some("default")
        );
        assert_eq!(p(""), None);
    }

    /// A fake /proc/42 with a glibc 2.31 mapping and the other files.
    #[test]
    fn process_facts_from_a_fake_tree() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write_tree(
            r,
            &[
                (
                    "proc/42/environ",
                    "PATH=/usr/bin\0MONGODB_URI=mongodb://u:secret@h\0GLIBC_TUNABLES=glibc.pthread.rseq=0\0\
                     TCMALLOC_AGGRESSIVE_DECOMMIT=1\0MALLOC_ARENA_MAX=4\0LD_PRELOAD=/usr/lib/libjemalloc.so.2\0",
                ),
                (
                    "proc/42/maps",
                    "55bdb22f4000-55bdb22f6000 r--p 00000000 fe:00 100 /usr/bin/mongod
7f0000000000-7f0000001000 r--p 00000000 fe:00 7 /lib64/ld-2.31.so
7f1000000000-7f1000020000 r-xp 00000000 fe:00 8 /lib/x86_64-linux-gnu/libc-2.31.so
",
                ),
                (
                    "proc/42/limits",
                    "Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max file size             unlimited            unlimited            bytes     
Max data size             unlimited            unlimited            bytes     
Max stack size            8388608              unlimited            bytes     
Max core file size        0                    unlimited            bytes     
Max resident set          unlimited            unlimited            bytes     
Max processes             64000                64000                processes 
Max open files            64000                unlimited            files     
Max locked memory         8388608              8388608              bytes     
Max address space         unlimited            unlimited            bytes     
Max file locks            unlimited            unlimited            locks     
Max pending signals       95853                95853                signals   
Max msgqueue size         819200               819200               bytes     
Max nice priority         0                    0                    
Max realtime priority     0                    0                    
Max realtime timeout      unlimited            unlimited            us        
",
                ),
                (
                    "proc/42/numa_maps",
                    "55bdb22f4000 interleave:0-1 file=/usr/bin/mongod mapped=2 N0=2\n",
                ),
                ("proc/42/cgroup", "0::/system.slice/mongod.service\n"),
                (
                    "proc/42/status",
                    "Name:\tmongod\nState:\tS (sleeping)\nTHP_enabled:\t0\nThreads:\t31\n",
                ),
            ],
        );
        let f = process_facts_in(r, 42);
        // mongod opted out of THP itself (prctl PR_SET_THP_DISABLE).
        assert_eq!(f.thp_enabled, Some(false));
        assert_eq!(thp_enabled("THP_enabled:\t1\n"), Some(true));
        assert_eq!(thp_enabled("Name:\tx\n"), None);
        assert_eq!(f.pid, 42);
        let env = f.environ.unwrap();
        let names: Vec<&str> = env.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "GLIBC_TUNABLES",
                "LD_PRELOAD",
                "MALLOC_ARENA_MAX",
                "TCMALLOC_AGGRESSIVE_DECOMMIT"
            ]
        );
        assert_eq!(env["GLIBC_TUNABLES"], "glibc.pthread.rseq=0");
        assert!(!env.values().any(|v| v.contains("secret")));
        assert_eq!(
            f.libc_path.as_deref(),
            Some("/lib/x86_64-linux-gnu/libc-2.31.so")
        );
        assert_eq!(f.glibc_version.as_deref(), Some("2.31"));
        assert_eq!(
            f.max_open_files,
            Some(ResourceLimit {
                soft: Some(64000),
                hard: None
            })
        );
        assert_eq!(f.numa_policy.as_deref(), Some("interleave:0-1"));
        assert_eq!(
            f.cgroup.unwrap().path.as_deref(),
            Some("/system.slice/mongod.service")
        );

        let none = process_facts_in(r, 43);
        assert_eq!(
            none,
            ProcessFacts {
                pid: 43,
                ..Default::default()
            }
        );
    }

    /// libc.so.6 read through the process's root, trusted only when its
    /// inode is the mapped one (a copy of this host's libc stands in).
    #[test]
    fn glibc_version_through_the_process_root() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let real = procfs::process::Process::myself().unwrap().maps().unwrap();
        let real = find_libc(&real).unwrap();
        let lib = "proc/42/root/usr/lib/libc.so.6";
        std::fs::create_dir_all(r.join(lib).parent().unwrap()).unwrap();
        std::fs::copy(&real.path, r.join(lib)).unwrap();
        let ino = std::fs::metadata(r.join(lib)).unwrap().ino();
        let maps =
            format!("7f1000000000-7f1000020000 r-xp 00000000 fe:00 {ino} /usr/lib/libc.so.6\n");
        write_tree(r, &[("proc/42/maps", &maps)]);
        let f = process_facts_in(r, 42);
        assert_eq!(f.libc_path.as_deref(), Some("/usr/lib/libc.so.6"));
        assert_eq!(f.glibc_version.unwrap(), crate::host::ldd_version());
        // Another file at that path (a different inode) is not trusted.
        let maps = format!(
            "7f1000000000-7f1000020000 r-xp 00000000 fe:00 {} /usr/lib/libc.so.6\n",
            ino + 1
        );
        write_tree(r, &[("proc/42/maps", &maps)]);
        let f = process_facts_in(r, 42);
        assert_eq!(f.libc_path.as_deref(), Some("/usr/lib/libc.so.6"));
        assert_eq!(f.glibc_version, None);
    }

    #[test]
    fn facts_of_a_child_process() {
        if crate::emulation::skip_under_emulation(
            "facts_of_a_child_process",
            "a child started under qemu-user is the emulator's process, with the emulator's environment",
        ) {
            return;
        }
        let child = crate::test_child::Running::cat(&[
            ("GLIBC_TUNABLES", "glibc.pthread.rseq=0"),
            ("SECRET_TOKEN", "x"),
            ("MALLOC_ARENA_MAX", "2"),
        ]);
        let pid = child.pid();
        let f = process_facts(pid);
        child.stop();
        let env = f.environ.unwrap();
        assert_eq!(
            env.get("GLIBC_TUNABLES").map(String::as_str),
            Some("glibc.pthread.rseq=0")
        );
        assert_eq!(env.get("MALLOC_ARENA_MAX").map(String::as_str), Some("2"));
        assert!(!env.contains_key("SECRET_TOKEN"));
        assert!(env.keys().all(|k| env_allowed(k)), "{env:?}");
        assert_eq!(f.glibc_version.unwrap(), crate::host::ldd_version());
        let nofile = f.max_open_files.unwrap();
        let mut rl = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct it is given.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) }, 0);
        let as_limit = |v: libc::rlim_t| (v != libc::RLIM_INFINITY).then_some(v);
        assert_eq!(nofile.soft, as_limit(rl.rlim_cur));
        assert_eq!(nofile.hard, as_limit(rl.rlim_max));
        assert_eq!(f.cgroup.unwrap().pid, pid);
    }

    #[test]
    fn facts_of_this_process() {
        let f = process_facts(std::process::id());
        assert_eq!(f.glibc_version.unwrap(), crate::host::ldd_version());
        assert!(f.libc_path.unwrap().contains("libc"));
        if std::path::Path::new("/proc/self/numa_maps").exists() {
            assert!(f.numa_policy.is_some());
        }
    }
}
