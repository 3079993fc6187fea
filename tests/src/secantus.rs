//! A SecantusDB server for the root suite: the MongoDB-wire server in Python
//! with real WiredTiger inside, from the venv `cargo xtask setup` makes. One
//! launcher for every test that needs a server (polling, WiredTiger probes).

use std::{
    net::TcpStream,
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crate::{free_port, py_venv};

/// A running `secantusd-py` on a port of its own, storage and log in a new
/// temporary directory; resumed (if stopped), killed and reaped on drop.
pub struct SecantusServer {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
    /// The `secantusd.toml` it was started with, kept for [`Self::restart`].
    config: Option<PathBuf>,
}

/// `secantusd-py` on `port`, storage under `dir`, with `config` when given.
fn command(port: u16, dir: &std::path::Path, config: Option<&std::path::Path>) -> Command {
    let mut cmd = Command::new(py_venv().join("bin/secantusd-py"));
    cmd.args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .arg("--storage-path")
        .arg(dir.join("data"));
    if let Some(c) = config {
        cmd.arg("--config").arg(c);
    }
    cmd
}

impl SecantusServer {
    /// Starts the server with `env` added to its environment and returns
    /// once it accepts connections. A port can be taken between the probe
    /// and the server's bind, so up to three tries; fails the test with the
    /// server's log.
    pub fn start(env: &[(&str, &str)]) -> Self {
        Self::start_with_config(env, None)
    }

    /// [`Self::start`], with `config` as the server's `secantusd.toml`
    /// (e.g. `[storage]\nttl_sweep_seconds = 0`: no background TTL pass,
    /// so a test runs it when it chooses, through `secantusAdmin.pruneTtl`).
    pub fn start_with_config(env: &[(&str, &str)], config: Option<&str>) -> Self {
        let mut last_log = String::new();
        for _ in 0..3 {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let port = free_port();
            let config_path = config.map(|text| {
                let path = dir.path().join("secantusd.toml");
                std::fs::write(&path, text).expect("secantusd.toml");
                path
            });
            let log = std::fs::File::create(dir.path().join("server.log")).expect("server.log");
            let child = command(port, dir.path(), config_path.as_deref())
                .envs(env.iter().copied())
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("server.log"))
                .stderr(log)
                .spawn()
                .expect("start secantusd-py");
            let mut server = SecantusServer {
                child,
                port,
                dir,
                config: config_path,
            };
            if server.wait_accepting(Duration::from_secs(90)) {
                return server;
            }
            last_log = server.log();
        }
        panic!("secantusd-py did not accept connections:\n{last_log}");
    }

    /// Kills the server (SIGKILL: a crash, nothing flushed on the way out)
    /// and reaps it; its port and data directory stay for [`Self::restart`].
    pub fn kill(&mut self) {
        // SAFETY: kill(2) on our own child's pid, resumed first in case a
        // test stopped it.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGCONT) };
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the server again on the same port and data directory; returns
    /// once it accepts connections.
    pub fn restart(&mut self) {
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.path().join("server.log"))
            .expect("server.log");
        self.child = command(self.port, self.dir.path(), self.config.as_deref())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("server.log"))
            .stderr(log)
            .spawn()
            .expect("restart secantusd-py");
        assert!(
            self.wait_accepting(Duration::from_secs(90)),
            "secantusd-py did not come back on port {}:\n{}",
            self.port,
            self.log()
        );
    }

    /// Waits until the server accepts a TCP connection; false if it exited
    /// or the time ran out.
    fn wait_accepting(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            let addr = ([127, 0, 0, 1], self.port).into();
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn uri(&self) -> String {
        format!("mongodb://127.0.0.1:{}", self.port)
    }

    /// The server's data directory (its dbPath).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// What the server printed so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// Sends `sig` to the server (SIGSTOP makes it a wedged server).
    pub fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
        assert_eq!(rc, 0, "kill({}, {sig})", self.child.id());
    }
}

impl Drop for SecantusServer {
    fn drop(&mut self) {
        // Resumed first, in case a test stopped it.
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGCONT) };
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
