//! Host-wide settings a MongoDB support engineer checks first: the kernel's
//! file, pid and thread limits, whether the clock is synchronised (the
//! kernel's own STA_UNSYNC flag from adjtimex(2), and the time services
//! running), the tuned profile and what it sets for THP and readahead,
//! every mongod of the host with the WiredTiger cache it was given, and
//! what else shares the host (`neighbours.rs`).
//!
//! Every reader takes a root path ("/" in production, a fake tree in tests)
//! and leaves a fact `None` when it cannot read it; adjtimex is asked of the
//! running kernel only.

use std::path::Path;

use super::{read_parsed, read_trimmed, sorted_names, under};
use crate::recording::{ClockFacts, MongodProcess, SystemFacts, TunedFacts};

/// Process names of the time services (as /proc/PID/comm shows them: 15
/// characters at most).
const TIME_SERVICES: &[&str] = &[
    "chronyd",
    "ntpd",
    "systemd-timesyn",
    "openntpd",
    "timedatex",
    "ptp4l",
    "phc2sys",
];
/// Includes followed in a tuned profile (a loop guard).
const MAX_INCLUDES: usize = 8;

/// The host's settings under `root`; adjtimex of this kernel when `root` is "/".
pub fn system_facts(root: &Path) -> SystemFacts {
    let comms = process_names(root);
    let (other_anon, largest_others) = super::neighbours::other_anon_memory(root);
    let clock = (root == Path::new("/"))
        .then(|| clock_facts(&comms))
        .flatten();
    SystemFacts {
        file_max: read_parsed(under(root, "/proc/sys/fs/file-max")),
        file_handles: read_trimmed(under(root, "/proc/sys/fs/file-nr"))
            .and_then(|s| s.split_whitespace().next()?.parse().ok()),
        pid_max: read_parsed(under(root, "/proc/sys/kernel/pid_max")),
        threads_max: read_parsed(under(root, "/proc/sys/kernel/threads-max")),
        tasks: read_trimmed(under(root, "/proc/loadavg"))
            .and_then(|s| s.split_whitespace().nth(3)?.split_once('/')?.1.parse().ok()),
        clock,
        tuned: tuned_facts(root, comms.iter().any(|(_, c)| c == "tuned")),
        mongods: Some(
            comms
                .iter()
                .filter(|(_, c)| c == "mongod")
                .map(|(pid, _)| mongod_process(root, *pid))
                .collect(),
        ),
        other_anon_bytes: Some(other_anon),
        largest_others: Some(largest_others),
        kubernetes_node: Some(super::neighbours::kubernetes_node(root, &comms)),
    }
}

/// (pid, comm) of every process.
fn process_names(root: &Path) -> Vec<(u32, String)> {
    sorted_names(&under(root, "/proc"))
        .into_iter()
        .filter_map(|n| n.parse::<u32>().ok())
        .filter_map(|pid| Some((pid, read_trimmed(under(root, format!("/proc/{pid}/comm")))?)))
        .collect()
}

/// The kernel clock's state from adjtimex(2) with no change asked (modes 0).
fn clock_facts(comms: &[(u32, String)]) -> Option<ClockFacts> {
    // SAFETY: a zeroed timex is a valid argument; modes = 0 only reads.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: `tx` is a valid, writable timex for the call's duration.
    let state = unsafe { libc::adjtimex(&mut tx) };
    if state < 0 {
        return None;
    }
    let mut services: Vec<String> = comms
        .iter()
        .filter(|(_, c)| TIME_SERVICES.contains(&c.as_str()))
        .map(|(_, c)| {
            if c == "systemd-timesyn" {
                "systemd-timesyncd".to_owned()
            } else {
                c.clone()
            }
        })
        .collect();
    services.sort();
    services.dedup();
    // c_long: i64 here, i32 on 32-bit targets.
    #[allow(clippy::useless_conversion, reason = "c_long is i32 on 32-bit targets")]
    let max_error_us = i64::from(tx.maxerror);
    Some(ClockFacts {
        unsynchronised: tx.status & libc::STA_UNSYNC != 0,
        state,
        max_error_us,
        services,
    })
}

/// The active tuned profile and its THP and readahead settings.
fn tuned_facts(root: &Path, running: bool) -> Option<TunedFacts> {
    let profile = read_trimmed(under(root, "/etc/tuned/active_profile"))?;
    if profile.is_empty() {
        return None;
    }
    let mut facts = TunedFacts {
        profile: profile.clone(),
        running,
        ..TunedFacts::default()
    };
    // Several profiles merge left to right: a later one wins.
    for name in profile.split_whitespace() {
        apply_profile(root, name, &mut facts, 0);
    }
    Some(facts)
}

/// Applies profile `name` (its includes first) to `facts`.
fn apply_profile(root: &Path, name: &str, facts: &mut TunedFacts, depth: usize) {
    if depth > MAX_INCLUDES {
        return;
    }
    let Some(text) = [
        format!("/etc/tuned/{name}/tuned.conf"),
        format!("/etc/tuned/profiles/{name}/tuned.conf"),
        format!("/usr/lib/tuned/{name}/tuned.conf"),
        format!("/usr/lib/tuned/profiles/{name}/tuned.conf"),
    ]
    .iter()
    .find_map(|p| std::fs::read_to_string(under(root, p)).ok()) else {
        return;
    };
    let settings = ini_settings(&text);
    if let Some((_, _, includes)) = settings
        .iter()
        .find(|(section, key, _)| section == "main" && key == "include")
    {
        for inc in includes.split(|c: char| c == ',' || c.is_whitespace()) {
            if !inc.is_empty() {
                apply_profile(root, inc, facts, depth + 1);
            }
        }
    }
    for (section, key, value) in settings {
        match (section.as_str(), key.as_str()) {
            ("vm", "transparent_hugepages" | "transparent_hugepage") => facts.thp = Some(value),
            ("disk", "readahead") => facts.readahead = Some(value),
            _ => {}
        }
    }
}

/// (section, key, value) of an ini file, comments left out.
fn ini_settings(text: &str) -> Vec<(String, String, String)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.trim().to_owned();
        } else if let Some((k, v)) = line.split_once('=') {
            out.push((section.clone(), k.trim().to_owned(), v.trim().to_owned()));
        }
    }
    out
}

/// One mongod: the cache size its command line or config file gives, and
/// its cgroup's memory limit.
fn mongod_process(root: &Path, pid: u32) -> MongodProcess {
    let argv: Vec<String> = std::fs::read(under(root, format!("/proc/{pid}/cmdline")))
        .map(|b| {
            b.split(|c| *c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default();
    let (cache_size_mb, cache_from) = cache_of(root, pid, &argv);
    MongodProcess {
        pid,
        cache_size_mb,
        cache_from,
        memory_limit_bytes: super::cgroup_facts(root, pid).and_then(|c| c.memory_limit_bytes()),
    }
}

/// `--wiredTigerCacheSizeGB X` (or `=X`), else `cacheSizeGB:` in the file
/// of `--config`/`-f` (read as the process sees it, through its root),
/// else mongod's default.
fn cache_of(root: &Path, pid: u32, argv: &[String]) -> (Option<u64>, String) {
    let value_of = |names: &[&str]| {
        argv.iter().enumerate().find_map(|(i, a)| {
            names.iter().find_map(|n| {
                if a == n {
                    argv.get(i + 1).cloned()
                } else {
                    a.strip_prefix(&format!("{n}=")).map(str::to_owned)
                }
            })
        })
    };
    let mb = |gb: &str| {
        gb.trim()
            .trim_matches(|c| c == '"' || c == '\'')
            .parse::<f64>()
            .ok()
            .filter(|g| *g > 0.0)
            .map(|g| (g * 1024.0).round() as u64)
    };
    if let Some(v) = value_of(&["--wiredTigerCacheSizeGB"]).and_then(|v| mb(&v)) {
        return (Some(v), "--wiredTigerCacheSizeGB".into());
    }
    if let Some(file) = value_of(&["--config", "-f"]) {
        let path = if file.starts_with('/') {
            under(root, format!("/proc/{pid}/root{file}"))
        } else {
            under(root, format!("/proc/{pid}/cwd/{file}"))
        };
        let from_file = std::fs::read_to_string(path).ok().and_then(|text| {
            text.lines().find_map(|l| {
                let l = l.split('#').next()?.trim();
                mb(l.strip_prefix("cacheSizeGB:")?)
            })
        });
        if let Some(v) = from_file {
            return (Some(v), format!("config file {file}"));
        }
    }
    (None, "default".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::write_tree;

    #[test]
    fn limits_tuned_and_mongods_of_a_tree() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        write_tree(
            r,
            &[
                ("proc/sys/fs/file-max", "9223372036854775807\n"),
                ("proc/sys/fs/file-nr", "2144\t0\t9223372036854775807\n"),
                ("proc/sys/kernel/pid_max", "32768\n"),
                ("proc/sys/kernel/threads-max", "127000\n"),
                ("proc/loadavg", "0.50 0.40 0.30 3/812 4242\n"),
                ("proc/10/comm", "mongod\n"),
                (
                    "proc/10/cmdline",
                    "mongod\0--wiredTigerCacheSizeGB\x002.5\0--port\x0027018\0",
                ),
                ("proc/11/comm", "mongod\n"),
                ("proc/11/cmdline", "/usr/bin/mongod\0-f\0/etc/mongod.conf\0"),
                (
                    "proc/11/root/etc/mongod.conf",
                    "storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 4 # half\n",
                ),
                ("proc/12/comm", "mongod\n"),
                ("proc/12/cmdline", "mongod\0--port=27019\0"),
                ("proc/13/comm", "tuned\n"),
                ("etc/tuned/active_profile", "mongodb\n"),
                (
                    "etc/tuned/mongodb/tuned.conf",
                    "[main]\ninclude=throughput-performance\n[vm]\ntransparent_hugepages=never\n",
                ),
                (
                    "usr/lib/tuned/throughput-performance/tuned.conf",
                    "[main]\nsummary=x\n[vm]\ntransparent_hugepages=always\n[disk]\nreadahead=>4096\n",
                ),
            ],
        );
        let s = system_facts(r);
        assert_eq!(s.file_max, Some(9_223_372_036_854_775_807));
        assert_eq!(s.file_handles, Some(2144));
        assert_eq!(s.pid_max, Some(32768));
        assert_eq!(s.threads_max, Some(127_000));
        assert_eq!(s.tasks, Some(812));
        // Only the running kernel's clock is read.
        assert_eq!(s.clock, None);
        let tuned = s.tuned.unwrap();
        assert_eq!(tuned.profile, "mongodb");
        // The profile's own setting wins over its include's.
        assert_eq!(tuned.thp.as_deref(), Some("never"));
        assert_eq!(tuned.readahead.as_deref(), Some(">4096"));
        assert!(tuned.running);
        let m = s.mongods.unwrap();
        let caches: Vec<(u32, Option<u64>, &str)> = m
            .iter()
            .map(|p| (p.pid, p.cache_size_mb, p.cache_from.as_str()))
            .collect();
        assert_eq!(
            caches,
            [
                (10, Some(2560), "--wiredTigerCacheSizeGB"),
                (11, Some(4096), "config file /etc/mongod.conf"),
                (12, None, "default"),
            ]
        );
    }

    #[test]
    fn this_kernels_clock_is_read() {
        let s = system_facts(Path::new("/"));
        let clock = s.clock.expect("adjtimex");
        assert!((0..=5).contains(&clock.state), "{clock:?}");
        assert!(s.pid_max.is_some() && s.threads_max.is_some() && s.file_max.is_some());
    }
}
