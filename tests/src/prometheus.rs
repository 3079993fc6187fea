//! A real Prometheus for the root suite (Debian's `prometheus` package,
//! installed by `cargo xtask setup`): started on a free loopback port with a
//! temporary config that scrapes one address every second and a temporary
//! storage directory; queried through its HTTP API. Readiness and data are
//! waited for by polling the API with a deadline, never by sleeping.

use crate::free_port;
use std::{
    io::{Read, Write},
    net::TcpStream,
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// A running Prometheus, killed and reaped on drop (its storage goes with
/// the temporary directory).
pub struct Prometheus {
    child: Child,
    addr: String,
    dir: tempfile::TempDir,
}

/// Debian's binary, or `MDIAG_PROMETHEUS` when set.
fn binary() -> PathBuf {
    let p = std::env::var_os("MDIAG_PROMETHEUS")
        .map_or_else(|| PathBuf::from("/usr/bin/prometheus"), PathBuf::from);
    assert!(
        p.exists(),
        "no Prometheus at {}: run `cargo xtask setup` (Debian's prometheus package)",
        p.display()
    );
    p
}

impl Prometheus {
    /// Starts Prometheus scraping `target` (`host:port`, path `/metrics`)
    /// every second as job `job`, and returns once its API answers and the
    /// target's first scrape succeeded. A port can be taken between the
    /// probe and Prometheus's bind: up to three tries.
    pub fn start(target: &str, job: &str) -> Prometheus {
        Self::start_with_rules(target, job, &[])
    }

    /// As [`start`](Self::start), evaluating the alerting and recording
    /// rules of `rule_files` every second.
    pub fn start_with_rules(target: &str, job: &str, rule_files: &[PathBuf]) -> Prometheus {
        let rules: String = rule_files
            .iter()
            .map(|p| format!("  - '{}'\n", p.display()))
            .collect();
        let rules = if rules.is_empty() {
            String::new()
        } else {
            format!("rule_files:\n{rules}")
        };
        let mut last = String::new();
        for _ in 0..3 {
            let dir = tempfile::tempdir().expect("a temporary directory");
            let config = dir.path().join("prometheus.yml");
            std::fs::write(
                &config,
                format!(
                    "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                     {rules}scrape_configs:\n  - job_name: {job}\n    static_configs:\n      - targets: ['{target}']\n"
                ),
            )
            .expect("write prometheus.yml");
            let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log file");
            let addr = format!("127.0.0.1:{}", free_port());
            let child = Command::new(binary())
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.path().join("data").display()
                ))
                .arg(format!("--web.listen-address={addr}"))
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log file"))
                .stderr(log)
                .spawn()
                .expect("start prometheus");
            let mut p = Prometheus { child, addr, dir };
            if p.wait_target_up(target, Duration::from_secs(60)) {
                return p;
            }
            last = p.log();
        }
        panic!("Prometheus never scraped {target} successfully:\n{last}");
    }

    /// Polls `/api/v1/targets` until `target`'s health is "up"; false if
    /// Prometheus exited or the time ran out.
    fn wait_target_up(&mut self, target: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            let up = self.try_get("/api/v1/targets").is_some_and(|body| {
                serde_json::from_str::<serde_json::Value>(&body).is_ok_and(|v| {
                    v["data"]["activeTargets"].as_array().is_some_and(|ts| {
                        ts.iter().any(|t| {
                            t["labels"]["instance"] == target
                                && t["health"] == "up"
                                && t["lastError"] == ""
                        })
                    })
                })
            });
            if up {
                return true;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        false
    }

    /// Prometheus's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// `GET path` (HTTP/1.0, so the body is never chunked): (status line, body).
    fn get(&self, path: &str) -> Result<(String, String), String> {
        let mut s = TcpStream::connect(&self.addr).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| e.to_string())?;
        write!(s, "GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr)
            .map_err(|e| e.to_string())?;
        let mut text = String::new();
        s.read_to_string(&mut text).map_err(|e| e.to_string())?;
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        Ok((
            head.lines().next().unwrap_or_default().to_owned(),
            body.to_owned(),
        ))
    }

    /// The body of `GET path` when the status is 200.
    fn try_get(&self, path: &str) -> Option<String> {
        self.get(path)
            .ok()
            .and_then(|(status, body)| status.contains(" 200 ").then_some(body))
    }

    /// An instant query (`/api/v1/query`) now: the result, or Err with
    /// Prometheus's answer (a parse error names the position).
    pub fn query(&self, expr: &str) -> Result<Vec<serde_json::Value>, String> {
        self.api(&format!("/api/v1/query?query={}", encode(expr)))
    }

    /// A range query (`/api/v1/query_range`, as Grafana runs a time series
    /// panel) over the last `span`, one point per second.
    pub fn query_range(
        &self,
        expr: &str,
        span: Duration,
    ) -> Result<Vec<serde_json::Value>, String> {
        let end = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("a clock after 1970")
            .as_secs_f64();
        let start = end - span.as_secs_f64();
        self.api(&format!(
            "/api/v1/query_range?query={}&start={start:.3}&end={end:.3}&step=1",
            encode(expr)
        ))
    }

    fn api(&self, path: &str) -> Result<Vec<serde_json::Value>, String> {
        let (status, body) = self.get(path)?;
        let v: serde_json::Value =
            serde_json::from_str(&body).map_err(|e| format!("{e}: {status} {body}"))?;
        if v["status"] != "success" {
            return Err(format!("{}: {}", v["errorType"], v["error"]));
        }
        Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            // SAFETY: kill(2) on the child this struct started and has not reaped.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Percent-encoding of a query parameter (every byte but the unreserved).
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
