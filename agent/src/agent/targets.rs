//! Which mongods the agent watches, and how it knows them again.
//!
//! A mongod is found by its process name (`[agent] processes`, `mongod` by
//! default) and identified by what survives a restart: its listening port
//! (`mongod:27017`), or, before it listens, its executable. Never by pid
//! alone: a restarted mongod is the same target with a new pid, so its
//! findings continue the same episode and its families re-attach.

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
}

/// Every running process named as in `processes`, by pid order.
pub fn scan(processes: &[String]) -> Vec<Found> {
    let mut found = Vec::new();
    for name in processes {
        let Ok(pids) = crate::target::pids_named(name) else {
            continue;
        };
        for pid in pids {
            // A process that exits between the scan and here is skipped.
            if let Ok(target) = crate::target::describe(pid, "agent") {
                let ports = crate::mongo::port::ports_of(pid);
                found.push(Found {
                    id: identity(&target.comm, target.exe.as_deref(), &ports),
                    target,
                });
            }
        }
    }
    found
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
/// `comm@executable`, else `comm`.
pub fn identity(comm: &str, exe: Option<&str>, ports: &[u16]) -> TargetId {
    match (ports.first(), exe) {
        (Some(port), _) => format!("{comm}:{port}"),
        (None, Some(exe)) => format!("{comm}@{exe}"),
        (None, None) => comm.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_survives_a_restart_but_not_a_port_change() {
        let a = identity("mongod", Some("/usr/bin/mongod"), &[27017, 28017]);
        assert_eq!(a, "mongod:27017");
        // Same port after a restart (new pid): same id.
        assert_eq!(identity("mongod", Some("/opt/m/mongod"), &[27017]), a);
        assert_eq!(
            identity("mongod", Some("/usr/bin/mongod"), &[]),
            "mongod@/usr/bin/mongod"
        );
        assert_eq!(identity("mongod", None, &[]), "mongod");
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
        // pids_named leaves out the caller itself: nothing to find.
        assert!(scan(&[me.trim().to_owned()]).is_empty());
        assert!(scan(&["no-such-process".into()]).is_empty());
    }
}
