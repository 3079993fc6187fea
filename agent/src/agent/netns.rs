//! Where a target listens: the host's network namespace, or another one (a
//! container's, a Kubernetes pod's). Two pods on one node can both listen
//! on 27017, each in its own namespace; `mongod:27017` alone would name
//! both. A target outside the host's namespace gets a scope after its id
//! ([`Scope::suffix`]): its pod's uid when its cgroup names one (a pod keeps
//! its uid, and its namespace, across container restarts), else its
//! container's id (docker, containerd, cri-o, podman), else the
//! namespace's inode. A target in the host's namespace keeps its id as it
//! was.
//!
//! "The host's" namespace is PID 1's (the node's init: the agent runs with
//! the host's pid namespace, `hostPID` in Kubernetes), or the agent's own
//! when PID 1's cannot be read. Whether mongod can be *polled* is another
//! question, answered against the agent's own namespace
//! ([`crate::mongo::sockdiag::same_net_namespace`]): the URI's `127.0.0.1`
//! is the agent's loopback.

/// A network namespace's inode, from the link `/proc/PID/ns/net`
/// (`net:[4026531840]`); `None` when it cannot be read.
pub fn net_ns(pid: u32) -> Option<u64> {
    let link = std::fs::read_link(format!("/proc/{pid}/ns/net")).ok()?;
    parse_ns_link(&link.to_string_lossy())
}

/// The inode of a namespace link's text (`net:[4026531840]`).
fn parse_ns_link(link: &str) -> Option<u64> {
    link.strip_prefix("net:[")?.strip_suffix(']')?.parse().ok()
}

/// The host's network namespace: PID 1's, else the agent's own.
pub fn host_net_ns() -> Option<u64> {
    net_ns(1).or_else(|| net_ns(std::process::id()))
}

/// What names a target outside the host's network namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// A Kubernetes pod, by its uid.
    Pod(String),
    /// A container, by the first 12 hex digits of its id.
    Container(String),
    /// Only the namespace, by its inode.
    NetNs(u64),
}

impl Scope {
    /// What is added to the target's id: `@pod:UID`, `@container:ID`,
    /// `@netns:INODE`.
    pub fn suffix(&self) -> String {
        match self {
            Scope::Pod(uid) => format!("@pod:{uid}"),
            Scope::Container(id) => format!("@container:{id}"),
            Scope::NetNs(ino) => format!("@netns:{ino}"),
        }
    }
}

/// The scope of process `pid` when its network namespace is not `host`'s;
/// `None` in the host's namespace, or when either namespace cannot be read
/// (then nothing can tell it apart: it keeps the plain id).
pub fn scope_of(pid: u32, host: Option<u64>) -> Option<Scope> {
    let host = host?;
    let theirs = net_ns(pid)?;
    if theirs == host {
        return None;
    }
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    Some(scope_of_cgroup(&cgroup).unwrap_or(Scope::NetNs(theirs)))
}

/// The pod or container named by a `/proc/PID/cgroup` text (cgroup v1:
/// one line per hierarchy; v2: the one `0::` line). Every line is looked
/// at; a pod wins over a container.
pub fn scope_of_cgroup(text: &str) -> Option<Scope> {
    let paths = || text.lines().filter_map(|l| l.splitn(3, ':').nth(2));
    if let Some(uid) = paths().find_map(pod_uid) {
        return Some(Scope::Pod(uid));
    }
    paths()
        .find_map(container_id)
        .map(|id| Scope::Container(id[..12].to_owned()))
}

/// A kubepods path's pod uid: `.../pod<uid>/...` (cgroupfs driver) or
/// `.../kubepods-<qos>-pod<uid_with_underscores>.slice/...` (systemd driver).
fn pod_uid(path: &str) -> Option<String> {
    if !path.contains("kubepods") {
        return None;
    }
    path.split('/').find_map(|seg| {
        let seg = seg.strip_suffix(".slice").unwrap_or(seg);
        let uid = seg
            .rsplit_once("-pod")
            .map_or_else(|| seg.strip_prefix("pod"), |(_, uid)| Some(uid))?;
        let uid = uid.replace('_', "-");
        is_uid(&uid).then_some(uid)
    })
}

/// A pod uid: 36 characters, hex digits and four dashes.
fn is_uid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().filter(|&b| b == b'-').count() == 4
        && s.bytes().all(|b| b == b'-' || b.is_ascii_hexdigit())
}

/// A container id in a cgroup path: the last segment holding 64 hex
/// digits, bare (`/docker/<id>`, `/kubepods/.../<id>`) or in a systemd
/// scope (`docker-<id>.scope`, `cri-containerd-<id>.scope`,
/// `crio-<id>.scope`, `libpod-<id>.scope`).
fn container_id(path: &str) -> Option<&str> {
    path.split('/').rev().find_map(|seg| {
        let seg = seg.strip_suffix(".scope").unwrap_or(seg);
        let id = seg.rsplit_once('-').map_or(seg, |(_, id)| id);
        (id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit())).then_some(id)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "4f1c2b8e9d0a7c6b5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d";
    const UID: &str = "0b5f3c2e-1a2b-4c3d-8e9f-0a1b2c3d4e5f";

    #[test]
    fn containers_by_runtime_and_cgroup_version() {
        let short = Some(Scope::Container(ID[..12].to_owned()));
        for line in [
            // docker, cgroup v1 (every hierarchy names it).
            format!("12:memory:/docker/{ID}\n11:cpu,cpuacct:/docker/{ID}\n0::/"),
            // docker with the systemd driver, cgroup v2.
            format!("0::/system.slice/docker-{ID}.scope"),
            // containerd and cri-o outside Kubernetes, podman.
            format!("0::/system.slice/cri-containerd-{ID}.scope"),
            format!("0::/machine.slice/crio-{ID}.scope"),
            format!("0::/user.slice/libpod-{ID}.scope/container"),
        ] {
            assert_eq!(scope_of_cgroup(&line), short, "{line}");
        }
    }

    #[test]
    fn kubernetes_pods_by_driver_and_cgroup_version() {
        let pod = Some(Scope::Pod(UID.to_owned()));
        let underscored = UID.replace('-', "_");
        for line in [
            // cgroup v1, cgroupfs driver (containerd), burstable and guaranteed.
            format!("11:cpu,cpuacct:/kubepods/burstable/pod{UID}/{ID}\n0::/"),
            format!("4:memory:/kubepods/pod{UID}/{ID}"),
            // cgroup v2, systemd driver: containerd and cri-o.
            format!(
                "0::/kubepods.slice/kubepods-burstable.slice/\
                 kubepods-burstable-pod{underscored}.slice/cri-containerd-{ID}.scope"
            ),
            format!(
                "0::/kubepods.slice/kubepods-besteffort.slice/\
                 kubepods-besteffort-pod{underscored}.slice/crio-{ID}.scope"
            ),
            // Guaranteed pods sit right under kubepods.slice.
            format!("0::/kubepods.slice/kubepods-pod{underscored}.slice/crio-{ID}.scope"),
        ] {
            assert_eq!(scope_of_cgroup(&line), pod, "{line}");
        }
    }

    #[test]
    fn nothing_to_name_on_the_host() {
        for line in [
            "0::/system.slice/mongod.service",
            "0::/user.slice/user-0.slice/session-3.scope",
            "12:memory:/\n0::/",
            "",
            // A pod-like segment outside kubepods is not a pod.
            "0::/system.slice/pod0b5f3c2e-1a2b-4c3d-8e9f-0a1b2c3d4e5f.slice",
            // 64 characters that are not all hex.
            "0::/system.slice/docker-zz1c2b8e9d0a7c6b5e4f3a2b1c0d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d.scope",
        ] {
            assert_eq!(scope_of_cgroup(line), None, "{line}");
        }
    }

    #[test]
    fn suffixes() {
        assert_eq!(Scope::Pod(UID.into()).suffix(), format!("@pod:{UID}"));
        assert_eq!(
            Scope::Container("4f1c2b8e9d0a".into()).suffix(),
            "@container:4f1c2b8e9d0a"
        );
        assert_eq!(Scope::NetNs(4026532481).suffix(), "@netns:4026532481");
    }

    #[test]
    fn namespace_links() {
        assert_eq!(parse_ns_link("net:[4026531840]"), Some(4026531840));
        assert_eq!(parse_ns_link("mnt:[4026531840]"), None);
        assert_eq!(parse_ns_link("net:[x]"), None);
    }

    #[test]
    fn this_process_is_in_its_own_namespace() {
        let me = std::process::id();
        let mine = net_ns(me).expect("readable");
        let truth = std::fs::read_link("/proc/self/ns/net").unwrap();
        assert_eq!(truth.to_string_lossy(), format!("net:[{mine}]"));
        // Compared to its own namespace, nothing to add; to another, a scope.
        assert_eq!(scope_of(me, Some(mine)), None);
        assert!(scope_of(me, Some(mine + 1)).is_some());
        assert_eq!(scope_of(u32::MAX, Some(mine + 1)), None, "no such process");
        assert_eq!(scope_of(me, None), None, "no host namespace to compare");
    }
}
