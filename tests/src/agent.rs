//! `mdiag agent` under test: started with a config file, its stderr read
//! line by line on a thread so a test can wait for what the agent says
//! ("finding X on host: pending → firing") with a deadline, and its
//! `/metrics` scraped over plain HTTP.

use std::{
    io::{BufRead, BufReader, Read, Write},
    path::Path,
    process::{Child, Command, Stdio},
    sync::mpsc::{Receiver, RecvTimeoutError, channel},
    time::{Duration, Instant, SystemTime},
};

/// A running agent.
pub struct Agent {
    pub child: Child,
    /// Its lines, with when each was read from its stderr.
    lines: Receiver<(SystemTime, String)>,
    /// Everything it logged so far (for failure messages).
    pub log: String,
    /// When the line the last [`Self::wait_for`] returned was logged (read
    /// from the agent's stderr, as it came: not when the test looked).
    pub matched_at: SystemTime,
}

impl Agent {
    /// Starts `mdiag agent --config CONFIG ARGS...`.
    pub fn start(config: &Path, args: &[&str]) -> Agent {
        Self::start_with(crate::mdiag_bin(), &[], config, args)
    }

    /// Starts `PROGRAM PRE... agent --config CONFIG ARGS...`: PROGRAM is
    /// mdiag itself, or a wrapper that execs it (`setpriv ... mdiag`, so
    /// the agent keeps the child's pid and gets its signals).
    pub fn start_with(
        program: impl AsRef<std::ffi::OsStr>,
        pre: &[String],
        config: &Path,
        args: &[&str],
    ) -> Agent {
        Self::start_env(program, pre, config, args, &[])
    }

    /// [`Self::start_with`], with these variables added to its environment.
    pub fn start_env(
        program: impl AsRef<std::ffi::OsStr>,
        pre: &[String],
        config: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Agent {
        let mut child = Command::new(program)
            // Not the harness's systemd, nor its journal: only what `env` says.
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .env_remove("WATCHDOG_PID")
            .env_remove("JOURNAL_STREAM")
            .envs(env.iter().copied())
            .args(pre)
            .arg("agent")
            .arg("--config")
            .arg(config)
            .args(args)
            .env("NO_COLOR", "1")
            .env_remove("MDIAG_MONGODB_URI")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start mdiag agent");
        let stderr = child.stderr.take().expect("stderr piped");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send((SystemTime::now(), line)).is_err() {
                    break;
                }
            }
        });
        Agent {
            child,
            lines,
            log: String::new(),
            matched_at: SystemTime::UNIX_EPOCH,
        }
    }

    /// Waits until the agent logs a line containing every one of `parts`;
    /// returns that line. Panics with the log after `within`.
    pub fn wait_for(&mut self, parts: &[&str], within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok((at, line)) => {
                    self.log.push_str(&line);
                    self.log.push('\n');
                    if parts.iter().all(|p| line.contains(p)) {
                        self.matched_at = at;
                        return line;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "agent never logged {parts:?} within {within:?}:\n{}",
                        self.log
                    )
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.child.wait();
                    panic!(
                        "agent exited ({status:?}) before logging {parts:?}:\n{}",
                        self.log
                    )
                }
            }
        }
    }

    /// Keeps reading the agent's log for `d` (it never blocks on a full
    /// pipe meanwhile); for pacing a test, not for waiting on a condition.
    pub fn drain_for(&mut self, d: Duration) {
        let until = Instant::now() + d;
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok((_, line)) => {
                    self.log.push_str(&line);
                    self.log.push('\n');
                }
                Err(_) => break,
            }
        }
    }

    /// The address of `/metrics`, from the agent's first line.
    pub fn metrics_addr(&mut self) -> String {
        let line = self.wait_for(&["serving metrics at http://"], Duration::from_secs(30));
        let url = line.rsplit("http://").next().unwrap_or_default();
        url.trim_end_matches("/metrics").to_owned()
    }

    /// Stops it with SIGTERM and waits; returns its exit status.
    pub fn stop(mut self) -> (std::process::ExitStatus, String) {
        // SAFETY: kill(2) with a pid this test started and has not reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().expect("wait for the agent");
        while let Ok((_, line)) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.log.push_str(&line);
            self.log.push('\n');
        }
        (status, std::mem::take(&mut self.log))
    }
}

impl Drop for Agent {
    /// A test that fails midway leaves no agent behind (its probes would
    /// stay attached and disturb the next test).
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// `GET path` on `addr`: (status line, content type, body).
pub fn http_get(addr: &str, path: &str) -> (String, String, String) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the agent");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read the answer");
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.lines().next().unwrap_or_default().to_owned();
    let ctype = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(str::to_owned)
        })
        .unwrap_or_default();
    (status, ctype, body.to_owned())
}

/// The value of the sample `name{labels}` (exact label text) in an exposition.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Whether process `pid` holds a BPF link on the `sched_switch` raw
/// tracepoint now (the kernel's own account of its file descriptors).
pub fn holds_sched_switch_link(pid: u32) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_to_string(fd.path()).is_ok_and(|info| {
            info.lines()
                .any(|l| l.starts_with("link_type:") && l.contains("raw_tracepoint"))
                && info
                    .lines()
                    .any(|l| l.starts_with("tp_name:") && l.trim_end().ends_with("sched_switch"))
        })
    })
}
