//! The listening TCP sockets of this network namespace, by sock_diag
//! netlink (`NETLINK_SOCK_DIAG`, see sock_diag(7)), asked for the LISTEN
//! state only.
//!
//! Why not /proc/net/tcp: each read of it walks every bucket of the
//! kernel's established-connections hash table (sized by the host's memory,
//! so costly even when empty) and prints every connection of a busy mongod;
//! the agent looks for a target's ports every few seconds while it does not
//! listen yet, and that read was a quarter of its own CPU. With a state
//! filter of LISTEN alone, the kernel walks only its listening table.
//! sock_diag answers for the namespace of the socket that asks: callers use
//! it only for processes in the agent's own network namespace.

use netlink_packet_core::{
    NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_sock_diag::{
    SockDiagMessage,
    constants::{AF_INET, AF_INET6, IPPROTO_TCP},
    inet::{ExtensionFlags, InetRequest, SocketId, StateFlags},
};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_SOCK_DIAG};

/// A listening TCP socket: its inode and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listener {
    pub inode: u64,
    pub port: u16,
}

#[derive(Debug, thiserror::Error)]
pub enum SockDiagError {
    #[error("sock_diag netlink: {0}")]
    Io(#[from] std::io::Error),
    #[error("sock_diag netlink: the kernel answered error {0}")]
    Kernel(i32),
    #[error("sock_diag netlink: cannot parse the answer: {0}")]
    Parse(String),
}

/// Every listening TCP socket (IPv4 and IPv6) of this network namespace.
pub fn listeners() -> Result<Vec<Listener>, SockDiagError> {
    let mut socket = Socket::new(NETLINK_SOCK_DIAG)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    let mut out = Vec::new();
    for family in [AF_INET, AF_INET6] {
        dump(&socket, family, &mut out)?;
    }
    Ok(out)
}

fn dump(socket: &Socket, family: u8, out: &mut Vec<Listener>) -> Result<(), SockDiagError> {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    let mut request = NetlinkMessage::new(
        header,
        SockDiagMessage::InetRequest(InetRequest {
            family,
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::empty(),
            states: StateFlags::LISTEN,
            socket_id: if family == AF_INET {
                SocketId::new_v4()
            } else {
                SocketId::new_v6()
            },
        })
        .into(),
    );
    request.finalize();
    let mut buf = vec![0u8; request.buffer_len()];
    request.serialize(&mut buf);
    socket.send(&buf, 0)?;
    let mut answer = vec![0u8; 32 * 1024];
    loop {
        let size = socket.recv(&mut &mut answer[..], 0)?;
        if size == 0 {
            return Ok(());
        }
        let mut offset = 0;
        while offset < size {
            let message = NetlinkMessage::<SockDiagMessage>::deserialize(&answer[offset..size])
                .map_err(|e| SockDiagError::Parse(e.to_string()))?;
            let len = message.header.length as usize;
            match message.payload {
                NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => {
                    out.push(Listener {
                        inode: u64::from(r.header.inode),
                        port: r.header.socket_id.source_port,
                    });
                }
                NetlinkPayload::Done(_) => return Ok(()),
                NetlinkPayload::Error(e) => {
                    // No IPv6 in this kernel or namespace: no listener there.
                    let code = e.raw_code();
                    if family == AF_INET6 && code == -libc::ENOENT {
                        return Ok(());
                    }
                    return Err(SockDiagError::Kernel(code));
                }
                _ => {}
            }
            if len == 0 {
                break;
            }
            offset += len;
        }
    }
}

/// Whether process `pid` is in this process's network namespace (so that
/// [`listeners`] sees its sockets); `false` when it cannot be told.
pub fn same_net_namespace(pid: u32) -> bool {
    let theirs = std::fs::read_link(format!("/proc/{pid}/ns/net"));
    let ours = std::fs::read_link("/proc/self/ns/net");
    matches!((theirs, ours), (Ok(a), Ok(b)) if a == b)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// qemu-user translates only some netlink families; sock_diag is not
    /// one of them (the agent falls back to /proc there).
    fn no_netlink_here(test: &str) -> bool {
        crate::emulation::skip_under_emulation(
            &format!("mongo::sockdiag::tests::{test}"),
            "qemu-user does not translate NETLINK_SOCK_DIAG",
        )
    }

    #[test]
    fn a_listening_socket_is_seen_with_its_port_and_inode_and_a_connected_one_is_not() {
        if no_netlink_here(
            "a_listening_socket_is_seen_with_its_port_and_inode_and_a_connected_one_is_not",
        ) {
            return;
        }
        let v4 = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let v4_port = v4.local_addr().unwrap().port();
        let all = listeners().unwrap();
        let found: Vec<_> = all.iter().filter(|l| l.port == v4_port).collect();
        assert_eq!(found.len(), 1, "{all:?}");
        // The inode is the one /proc/self/fd shows for the listener.
        let inode = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .filter_map(|t| {
                t.to_str()?
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .parse::<u64>()
                    .ok()
            })
            .find(|i| *i == found[0].inode);
        assert_eq!(inode, Some(found[0].inode));
        // A connection to it (both ends) is not a listener.
        let client = std::net::TcpStream::connect(("127.0.0.1", v4_port)).unwrap();
        let client_port = client.local_addr().unwrap().port();
        let (_server, _) = v4.accept().unwrap();
        let all = listeners().unwrap();
        assert!(!all.iter().any(|l| l.port == client_port), "{all:?}");
        assert_eq!(all.iter().filter(|l| l.port == v4_port).count(), 1);
        drop(v4);
        assert!(!listeners().unwrap().iter().any(|l| l.port == v4_port));
    }

    #[test]
    fn ipv6_listeners_are_seen_where_ipv6_works() {
        if no_netlink_here("ipv6_listeners_are_seen_where_ipv6_works") {
            return;
        }
        let Ok(v6) = std::net::TcpListener::bind("[::1]:0") else {
            return; // no IPv6 here: nothing to see
        };
        let port = v6.local_addr().unwrap().port();
        assert!(listeners().unwrap().iter().any(|l| l.port == port));
    }

    #[test]
    fn this_process_shares_its_own_namespace() {
        assert!(same_net_namespace(std::process::id()));
    }
}
