//! Which local process serves a connection string: `record --uri
//! mongodb://host:port` observes the process listening on that port when the
//! host is this machine (the listening socket's inode from sock_diag, see
//! `sockdiag.rs`, else /proc/net/tcp{,6}; then the process holding that
//! inode among its fds).

use std::net::{IpAddr, SocketAddr, ToSocketAddrs, UdpSocket};

use procfs::net::TcpState;

#[derive(Debug, thiserror::Error)]
pub enum PortError {
    #[error("cannot read the socket tables in /proc/net: {0}")]
    Proc(String),
}

/// Whether `host` names this machine: a loopback or unspecified address,
/// "localhost", or an address assigned to one of its interfaces (binding to
/// it succeeds only then). Names are resolved (DNS) once.
pub fn is_local_host(host: &str) -> bool {
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let addrs: Vec<IpAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![ip],
        Err(_) => match (host, 0u16).to_socket_addrs() {
            Ok(a) => a.map(|s| s.ip()).collect(),
            Err(_) => return false,
        },
    };
    !addrs.is_empty()
        && addrs.iter().all(|ip| {
            ip.is_loopback()
                || ip.is_unspecified()
                || UdpSocket::bind(SocketAddr::new(*ip, 0)).is_ok()
        })
}

/// The pid of the process listening on TCP `port` (any address of this host's
/// network namespace); `None` when nobody listens there. Several processes
/// sharing the socket (fork after listen): the lowest pid.
pub fn pid_listening_on(port: u16) -> Result<Option<u32>, PortError> {
    let inodes = listening_inodes(port)?;
    if inodes.is_empty() {
        return Ok(None);
    }
    let all = procfs::process::all_processes().map_err(|e| PortError::Proc(e.to_string()))?;
    let mut found: Option<u32> = None;
    for proc in all.flatten() {
        // Processes we may not inspect, or that exit meanwhile, are skipped.
        let Ok(fds) = proc.fd() else { continue };
        let holds = fds.flatten().any(|fd| {
            matches!(fd.target, procfs::process::FDTarget::Socket(inode) if inodes.contains(&inode))
        });
        if holds && let Ok(pid) = u32::try_from(proc.pid) {
            found = Some(found.map_or(pid, |f| f.min(pid)));
        }
    }
    Ok(found)
}

/// The inodes of the sockets listening on TCP `port` in this network
/// namespace: by sock_diag, else from /proc/net/tcp{,6}.
fn listening_inodes(port: u16) -> Result<Vec<u64>, PortError> {
    if let Ok(listeners) = super::sockdiag::listeners() {
        return Ok(listeners
            .iter()
            .filter(|l| l.port == port && l.inode != 0)
            .map(|l| l.inode)
            .collect());
    }
    let v4 = procfs::net::tcp().map_err(|e| PortError::Proc(e.to_string()))?;
    // IPv6 may be disabled: no tcp6 table is no listener there.
    let v6 = procfs::net::tcp6().unwrap_or_default();
    Ok(v4
        .iter()
        .chain(v6.iter())
        .filter(|e| e.state == TcpState::Listen && e.local_address.port() == port && e.inode != 0)
        .map(|e| e.inode)
        .collect())
}

/// The TCP ports process `pid` listens on (its network namespace's tables),
/// lowest first; empty when it listens nowhere or cannot be inspected.
pub fn ports_of(pid: u32) -> Vec<u16> {
    let Ok(proc) = procfs::process::Process::new(pid as i32) else {
        return Vec::new();
    };
    let Ok(fds) = proc.fd() else {
        return Vec::new();
    };
    let held: Vec<u64> = fds
        .flatten()
        .filter_map(|fd| match fd.target {
            procfs::process::FDTarget::Socket(inode) => Some(inode),
            _ => None,
        })
        .collect();
    if held.is_empty() {
        return Vec::new();
    }
    // In the agent's own network namespace, the kernel lists the listening
    // sockets alone (sock_diag); a process in another namespace (a
    // container's) is read from its own /proc/PID/net tables.
    if super::sockdiag::same_net_namespace(pid)
        && let Ok(listeners) = super::sockdiag::listeners()
    {
        let mut ports: Vec<u16> = listeners
            .iter()
            .filter(|l| held.contains(&l.inode))
            .map(|l| l.port)
            .collect();
        ports.sort_unstable();
        ports.dedup();
        return ports;
    }
    let v4 = proc.tcp().unwrap_or_default();
    let v6 = proc.tcp6().unwrap_or_default();
    let mut ports: Vec<u16> = v4
        .iter()
        .chain(v6.iter())
        .filter(|e| e.state == TcpState::Listen && held.contains(&e.inode))
        .map(|e| e.local_address.port())
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_this_process_by_its_listening_port() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert_eq!(pid_listening_on(port).unwrap(), Some(std::process::id()));
        assert!(ports_of(std::process::id()).contains(&port));
        drop(listener);
        assert!(!ports_of(std::process::id()).contains(&port));
        // Closed: nobody listens there any more (a connected socket would not count).
        assert_eq!(pid_listening_on(port).unwrap(), None);
    }

    #[test]
    fn local_hosts() {
        assert!(is_local_host("localhost"));
        assert!(is_local_host("127.0.0.1"));
        assert!(is_local_host("::1"));
        assert!(is_local_host("0.0.0.0"));
        // TEST-NET-3 is never assigned to a host.
        assert!(!is_local_host("203.0.113.9"));
        assert!(!is_local_host("no-such-host.invalid"));
    }
}
