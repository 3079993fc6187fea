//! Which mongods the agent watches, and how it knows them again.
//!
//! A mongod is found by its process name (`[agent] processes`, `mongod` by
//! default) and identified by what survives a restart: its listening port
//! (`mongod:27017`), or, before it listens, its executable. Never by pid
//! alone: a restarted mongod is the same target with a new pid, so its
//! findings continue the same episode and its families re-attach.
//!
//! A mongod outside the host's network namespace (a container's, a pod's)
//! has its scope after that id (`mongod:27017@pod:UID`, see [`super::netns`]):
//! two pods on one node may both listen on 27017. A mongod in the host's
//! namespace keeps the plain id.

use super::netns::{self, Scope};
use crate::recording::Target;

/// A stable name for a target: the label of its metrics and findings.
pub type TargetId = String;

/// The id of findings made without a target (host-wide).
pub const HOST: &str = "host";

/// One process that matches, now.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    pub id: TargetId,
    pub target: Target,
    /// Whether `id` names a listening port (else the executable: the
    /// process was seen before it listened, see [`listening_id`]).
    pub listening: bool,
    /// Where it listens, when not in the host's network namespace (its id
    /// ends with it).
    pub scope: Option<Scope>,
}

/// The pids of every running process named as in `processes`, in order.
/// Runs every second, so it reads one small file per process (`comm`);
/// [`describe`] looks further at a pid not watched yet.
pub fn scan(processes: &[String]) -> Vec<u32> {
    matching_pids(processes)
}

/// A matching process, named by [`identity`] (its listening sockets read
/// once, when it is first seen: reading them walks the kernel's socket
/// tables), scoped when its network namespace is not `host_ns`
/// ([`netns::host_net_ns`]). `None` when it exited meanwhile, or its
/// `/proc` entry cannot be read.
pub fn describe(pid: u32, host_ns: Option<u64>) -> Option<Found> {
    let target = crate::target::describe(pid, "agent").ok()?;
    let ports = crate::mongo::port::ports_of(pid);
    let scope = netns::scope_of(pid, host_ns);
    Some(Found {
        id: identity(&target.comm, target.exe.as_deref(), &ports, scope.as_ref()),
        listening: !ports.is_empty(),
        target,
        scope,
    })
}

/// The port-based id of a target first seen before it listened, once it
/// listens (`None` while it still does not). A mongod started after the
/// agent (at boot, say) is seen in its first second, long before it has
/// recovered and opened its port; without this it would keep its
/// executable-based id, and miss mongod polling, until its next restart.
pub fn listening_id(found: &Found) -> Option<TargetId> {
    let ports = crate::mongo::port::ports_of(found.target.pid);
    (!ports.is_empty()).then(|| {
        identity(
            &found.target.comm,
            found.target.exe.as_deref(),
            &ports,
            found.scope.as_ref(),
        )
    })
}

/// Pids whose `comm` is one of `names` (the config allows 15 bytes, the
/// kernel's length of `comm`), not this process.
fn matching_pids(names: &[String]) -> Vec<u32> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter(|&pid| {
            let Some(comm) = read_comm(pid) else {
                return false;
            };
            names.iter().any(|n| n.as_bytes() == comm.as_slice())
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// `/proc/PID/comm` without its newline, in one read into a small buffer
/// (the scan reads it for every process every second: one open, one read,
/// one close, no allocation beyond the path).
fn read_comm(pid: u32) -> Option<Vec<u8>> {
    use std::io::Read;
    // The kernel's comm is at most 15 bytes and a newline.
    let mut buf = [0u8; 32];
    let n = std::fs::File::open(format!("/proc/{pid}/comm"))
        .ok()?
        .read(&mut buf)
        .ok()?;
    let comm = buf.get(..n)?;
    Some(comm.strip_suffix(b"\n").unwrap_or(comm).to_vec())
}

/// The GNU build-id of the program `pid` runs (hex): which build it is,
/// beside the id that names the target (an upgrade keeps the id, not this).
pub fn build_id(pid: u32) -> Option<String> {
    let path = std::path::PathBuf::from(format!("/proc/{pid}/exe"));
    let file = std::fs::File::open(&path).ok()?;
    let data = crate::symbols::elf::map_file(&path, &file).ok()?;
    crate::symbols::elf::peek_build_id(&data).map(|b| crate::symbols::elf::hex(&b))
}

/// `comm:port` for a process that listens (its lowest port), else
/// `comm@executable`, else `comm`; with the scope after it outside the
/// host's network namespace.
pub fn identity(comm: &str, exe: Option<&str>, ports: &[u16], scope: Option<&Scope>) -> TargetId {
    let id = match (ports.first(), exe) {
        (Some(port), _) => format!("{comm}:{port}"),
        (None, Some(exe)) => format!("{comm}@{exe}"),
        (None, None) => comm.to_owned(),
    };
    match scope {
        Some(s) => id + &s.suffix(),
        None => id,
    }
}

/// The port a target's id names (`comm:port`, scope or not), `None` for
/// an id by executable.
pub fn id_port(found: &Found) -> Option<u16> {
    let id = match &found.scope {
        Some(s) => found.id.strip_suffix(&s.suffix())?,
        None => &found.id,
    };
    id.rsplit_once(':')?.1.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_survives_a_restart_but_not_a_port_change() {
        let a = identity("mongod", Some("/usr/bin/mongod"), &[27017, 28017], None);
        assert_eq!(a, "mongod:27017");
        // Same port after a restart (new pid): same id.
        assert_eq!(identity("mongod", Some("/opt/m/mongod"), &[27017], None), a);
        assert_eq!(
            identity("mongod", Some("/usr/bin/mongod"), &[], None),
            "mongod@/usr/bin/mongod"
        );
        assert_eq!(identity("mongod", None, &[], None), "mongod");
    }

    #[test]
    fn another_network_namespace_is_part_of_the_id() {
        let pod = Scope::Pod("0b5f3c2e-1a2b-4c3d-8e9f-0a1b2c3d4e5f".into());
        let ns = Scope::NetNs(4026532481);
        let a = identity("mongod", None, &[27017], Some(&pod));
        let b = identity("mongod", None, &[27017], Some(&ns));
        assert_eq!(a, "mongod:27017@pod:0b5f3c2e-1a2b-4c3d-8e9f-0a1b2c3d4e5f");
        assert_eq!(b, "mongod:27017@netns:4026532481");
        assert_ne!(a, identity("mongod", None, &[27017], None));
        assert_eq!(
            identity("mongod", Some("/usr/bin/mongod"), &[], Some(&ns)),
            "mongod@/usr/bin/mongod@netns:4026532481"
        );
    }

    #[test]
    fn the_port_an_id_names() {
        let me = describe(std::process::id(), None).unwrap();
        let at = |id: &str, scope: Option<Scope>| Found {
            id: id.into(),
            scope,
            ..me.clone()
        };
        assert_eq!(id_port(&at("mongod:27017", None)), Some(27017));
        assert_eq!(id_port(&at("mongod@/usr/bin/mongod", None)), None);
        assert_eq!(
            id_port(&at("mongod:27017@netns:7", Some(Scope::NetNs(7)))),
            Some(27017)
        );
        let exe = "mongod@/opt/a:b/mongod@netns:7";
        assert_eq!(id_port(&at(exe, Some(Scope::NetNs(7)))), None);
    }

    #[test]
    fn the_build_id_is_the_executable_s_own() {
        let me = build_id(std::process::id()).expect("this test binary has a build-id");
        let exe = std::fs::read("/proc/self/exe").unwrap();
        let truth = crate::symbols::elf::peek_build_id(&exe).unwrap();
        assert_eq!(me, crate::symbols::elf::hex(&truth));
        assert!(build_id(u32::MAX).is_none());
    }

    #[test]
    fn finds_this_test_by_its_name() {
        let me = std::fs::read_to_string("/proc/self/comm").unwrap();
        // The scan leaves out the caller itself: nothing to find.
        assert!(scan(&[me.trim().to_owned()]).is_empty());
        assert!(scan(&["no-such-process".into()]).is_empty());
        let host = netns::net_ns(std::process::id());
        let found = describe(std::process::id(), host).unwrap();
        assert_eq!(found.scope, None, "in the namespace called the host's");
        assert_eq!(found.target.pid, std::process::id());
        assert!(found.id.starts_with(me.trim()), "{}", found.id);
        // Another process by its comm, read without the newline (not under
        // an emulator: children start through it, under its names).
        if crate::emulation::skip_under_emulation(
            "agent::targets::tests::finds_this_test_by_its_name (another process)",
            "children are started through the emulator",
        ) {
            return;
        }
        let child = crate::test_child::Running::cat(&[]);
        let pid = child.pid();
        assert_eq!(read_comm(pid).as_deref(), Some(&b"cat"[..]));
        assert!(scan(&["cat".into()]).contains(&pid));
        assert!(
            !scan(&["ca".into()]).contains(&pid),
            "a prefix is not a name"
        );
        child.stop();
        assert_eq!(read_comm(pid), None, "reaped: gone");
    }

    #[test]
    fn a_target_that_starts_listening_gets_its_port_id() {
        let me = describe(std::process::id(), None).unwrap();
        // Whatever this test binary listened on before, a socket it opens
        // now shows in its id (the lowest port wins; pick the check by it).
        let sock = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = sock.local_addr().unwrap().port();
        let now = listening_id(&me).expect("listens now");
        let ports = crate::mongo::port::ports_of(std::process::id());
        assert!(ports.contains(&port), "{ports:?}");
        assert_eq!(now, format!("{}:{}", me.target.comm, ports[0]));
        drop(sock);
        let gone = Found {
            target: Target {
                pid: u32::MAX,
                ..me.target.clone()
            },
            ..me
        };
        assert_eq!(listening_id(&gone), None);
    }
}
