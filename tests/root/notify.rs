//! `mdiag agent` as systemd runs its `Type=notify` unit: the test binds the
//! notification socket itself (`NOTIFY_SOCKET`, a Unix datagram socket, as
//! PID 1 does) and asks for a watchdog (`WATCHDOG_USEC`). `READY=1` comes
//! once `/metrics` answers with the probes attached, `WATCHDOG=1` keeps
//! coming from the main loop, and `STOPPING=1` at SIGTERM, before it exits
//! cleanly. Every wait is a read on the socket with a deadline.

use std::{
    os::unix::net::UnixDatagram,
    time::{Duration, Instant},
};

use mdiag_tests::agent::{Agent, http_get};
use mdiag_tests::{mdiag_bin, require_root};

/// What systemd's socket received, one datagram at a time.
struct Socket {
    sock: UnixDatagram,
    /// Every datagram so far (for failure messages).
    seen: Vec<String>,
}

impl Socket {
    /// Waits for a datagram with `line` among its lines; returns it.
    fn wait_for(&mut self, line: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        let mut buf = vec![0u8; 4096];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "no {line:?} within {within:?}; received: {:?}",
                self.seen
            );
            self.sock.set_read_timeout(Some(left)).unwrap();
            match self.sock.recv(&mut buf) {
                Ok(n) => {
                    let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
                    self.seen.push(msg.clone());
                    if msg.lines().any(|l| l == line) {
                        return msg;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(e) => panic!("recv on the notify socket: {e}"),
            }
        }
    }
}

#[test]
fn the_agent_notifies_ready_feeds_the_watchdog_and_says_it_stops() {
    let _serial = mdiag_tests::serial();
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify");
    let mut socket = Socket {
        sock: UnixDatagram::bind(&path).unwrap(),
        seen: Vec::new(),
    };
    let cfg = super::agent::config(dir.path(), "\"mdiag-no-such\"");
    // 2 s: fed every second, so several feeds arrive within the test.
    let mut agent = Agent::start_env(
        mdiag_bin(),
        &[],
        &cfg,
        &[],
        &[
            ("NOTIFY_SOCKET", path.to_str().unwrap()),
            ("WATCHDOG_USEC", "2000000"),
        ],
    );
    let addr = agent.metrics_addr();
    let ready = socket.wait_for("READY=1", Duration::from_secs(120));
    assert!(
        ready
            .lines()
            .any(|l| l.starts_with("STATUS=watching the host (no target process)")),
        "{ready:?}"
    );
    // Ready means attached and serving: /metrics says the probes are up.
    let (status, _, text) = http_get(&addr, "/metrics");
    assert!(status.contains("200"), "{status}");
    super::agent::assert_host_sched_attached(&text);
    // The watchdog is fed again and again (the first feed came with READY=1).
    for _ in 0..3 {
        socket.wait_for("WATCHDOG=1", Duration::from_secs(30));
    }
    assert_eq!(
        socket.seen.iter().filter(|m| m.contains("READY=1")).count(),
        1,
        "{:?}",
        socket.seen
    );
    // SAFETY: kill(2) with a pid this test started and has not reaped.
    unsafe { libc::kill(agent.child.id() as i32, libc::SIGTERM) };
    let stopping = socket.wait_for("STOPPING=1", Duration::from_secs(30));
    assert!(
        stopping.contains("STATUS=stopping (SIGTERM)"),
        "{stopping:?}"
    );
    let (exit, log) = agent.stop();
    assert!(exit.success(), "{exit:?}\n{log}");
}
