//! debuginfod: a stripped object's debug file from the servers the user
//! configured, when none was found on disk ([`super::debuginfo`]). As
//! elfutils' client does (debuginfod-client-config(7)):
//!
//! - `MDIAG_DEBUGINFOD_URLS` (mdiag's own opt-in, in the format of
//!   elfutils' `DEBUGINFOD_URLS`, which is not read: see
//!   [`DebuginfodConfig::from_env`]): server URL prefixes separated by
//!   spaces (`ima:` policy tags skipped; http and https only). Unset or
//!   empty: no server is ever contacted;
//! - `GET $URL/buildid/<hex build-id>/debuginfo`, servers in order, the
//!   first 200 wins;
//! - the file is kept in `$DEBUGINFOD_CACHE_PATH`, else
//!   `$XDG_CACHE_HOME/debuginfod_client`, else `$HOME/.cache/debuginfod_client`
//!   (`$HOME/.debuginfod_client_cache` when it exists), as
//!   `<cache>/<hex build-id>/debuginfo`, the layout elfutils uses: written to
//!   a temporary file in that directory and renamed, so either client finds
//!   what the other fetched. No cache directory (no `HOME`): no debuginfod.
//!
//! Used only for an object with a build-id and without `.symtab` (mongod
//! has its `.symtab`: never fetched), whose local debug file was not found;
//! the file fetched must carry the object's build-id, then it serves as a
//! local debug file would (its `.symtab`, its DWARF: [`super::dwarf`]).
//!
//! Bounds: one network attempt per build-id per process (failures are
//! remembered; the cache directory is still read), a server that fails to
//! answer is skipped for [`SERVER_BACKOFF`]; `DEBUGINFOD_TIMEOUT` (default
//! 90 s, "at least 100 KiB within that many seconds") is capped at
//! [`MAX_TIMEOUT`] (30 s) and the whole download (`DEBUGINFOD_MAXTIME`,
//! default unlimited) at [`MAX_TIME`] (120 s): the fetch blocks the thread
//! loading a process's symbols (the record loop, an agent task), for each
//! stripped object of the process; `DEBUGINFOD_MAXSIZE` (default
//! unlimited) is capped at [`MAX_BYTES`] (512 MiB): larger files are
//! refused. The file is streamed to disk, never held in memory. The client
//! is blocking (`ureq`, rustls with ring), with no async runtime: callable
//! from a plain thread or from inside a tokio runtime's thread alike.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fs::File;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use object::Object as _;

use super::debuginfo::DebugFile;
use super::elf::{hex, map_file, peek_build_id};

/// `DEBUGINFOD_TIMEOUT`'s default (elfutils).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(90);
/// The most `DEBUGINFOD_TIMEOUT` is taken to be.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(30);
/// The most a whole download may take (`DEBUGINFOD_MAXTIME` below it).
pub const MAX_TIME: Duration = Duration::from_secs(120);
/// The largest file fetched (`DEBUGINFOD_MAXSIZE` below it).
pub const MAX_BYTES: u64 = 512 << 20;
/// How long a server that did not answer is skipped.
pub const SERVER_BACKOFF: Duration = Duration::from_secs(300);
/// What must arrive within the timeout (elfutils: 100K).
const COMMENCING_BYTES: u64 = 100 * 1024;

/// Where and how to ask debuginfod servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebuginfodConfig {
    /// URL prefixes, in order, without a trailing `/`.
    pub urls: Vec<String>,
    /// Downloaded files: `<cache_dir>/<hex build-id>/debuginfo`.
    pub cache_dir: PathBuf,
    /// Connecting, the response's headers and its first 100 KiB, each
    /// read: within this.
    pub timeout: Duration,
    /// The whole download.
    pub max_time: Duration,
    /// Larger files are refused.
    pub max_bytes: u64,
    /// Use the proxy of `ALL_PROXY`/`HTTPS_PROXY`/`HTTP_PROXY` (and
    /// `NO_PROXY`), as curl does for elfutils.
    pub env_proxy: bool,
}

impl DebuginfodConfig {
    /// From the process's environment; `None` when `MDIAG_DEBUGINFOD_URLS`
    /// is unset or names no server. The servers come from mdiag's own
    /// variable, not `DEBUGINFOD_URLS`: Ubuntu and Fedora set that one
    /// system-wide for gdb, and an agent on a database host must not start
    /// downloading because a distribution chose so; the user opts in. The
    /// other `DEBUGINFOD_*` variables (cache, timeouts, sizes) are read as
    /// the elfutils client reads them.
    pub fn from_env() -> Option<DebuginfodConfig> {
        Self::from_vars(|name| match name {
            "DEBUGINFOD_URLS" => std::env::var_os("MDIAG_DEBUGINFOD_URLS"),
            _ => std::env::var_os(name),
        })
    }

    /// From variables `var` gives (the environment's, for [`Self::from_env`]).
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> Option<DebuginfodConfig> {
        let set = |name: &str| {
            var(name)
                .and_then(|v| v.into_string().ok())
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let urls: Vec<String> = set("DEBUGINFOD_URLS")?
            .split_ascii_whitespace()
            .filter(|u| !u.starts_with("ima:"))
            .filter(|u| {
                let http = u.starts_with("http://") || u.starts_with("https://");
                if !http {
                    tracing::debug!(url = u, "symbols: debuginfod: not http(s): skipped");
                }
                http
            })
            .map(|u| u.trim_end_matches('/').to_string())
            .collect();
        if urls.is_empty() {
            return None;
        }
        let cache_dir = match (
            set("DEBUGINFOD_CACHE_PATH"),
            set("XDG_CACHE_HOME"),
            set("HOME"),
        ) {
            (Some(path), ..) => PathBuf::from(path),
            (None, Some(xdg), _) => Path::new(&xdg).join("debuginfod_client"),
            (None, None, Some(home)) => {
                let old = Path::new(&home).join(".debuginfod_client_cache");
                if old.is_dir() {
                    old
                } else {
                    Path::new(&home).join(".cache/debuginfod_client")
                }
            }
            (None, None, None) => {
                tracing::warn!(
                    "symbols: DEBUGINFOD_URLS is set but no cache directory \
                     (DEBUGINFOD_CACHE_PATH, XDG_CACHE_HOME, HOME): debuginfod not used"
                );
                return None;
            }
        };
        let seconds = |name: &str| set(name).and_then(|v| v.parse::<i64>().ok());
        let timeout = match seconds("DEBUGINFOD_TIMEOUT") {
            Some(s) if s > 0 => Duration::from_secs(s as u64),
            // Zero or negative: "no timeout" for elfutils; ours is capped.
            Some(_) => MAX_TIMEOUT,
            None => DEFAULT_TIMEOUT,
        }
        .min(MAX_TIMEOUT);
        let max_time = match seconds("DEBUGINFOD_MAXTIME") {
            Some(s) if s > 0 => Duration::from_secs(s as u64).min(MAX_TIME),
            _ => MAX_TIME,
        };
        let max_bytes = match seconds("DEBUGINFOD_MAXSIZE") {
            Some(b) if b > 0 => (b as u64).min(MAX_BYTES),
            _ => MAX_BYTES,
        };
        Some(DebuginfodConfig {
            urls,
            cache_dir,
            timeout,
            max_time,
            max_bytes,
            env_proxy: true,
        })
    }
}

/// A debuginfod client: the configuration, the attempts made.
pub struct Debuginfod {
    config: DebuginfodConfig,
    agent: ureq::Agent,
    /// Build-ids asked of the servers already (answered or not).
    tried: Mutex<HashSet<Vec<u8>>>,
    /// Servers that did not answer, and until when they are skipped.
    down: Mutex<HashMap<String, Instant>>,
}

impl std::fmt::Debug for Debuginfod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Debuginfod")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Why one server gave nothing.
#[derive(Debug)]
enum Failure {
    /// No answer (connection, timeout): the server is skipped a while.
    Down(String),
    /// An answer, but no usable file.
    Refused(String),
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Debuginfod {
    pub fn new(config: DebuginfodConfig) -> Debuginfod {
        let mut builder = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .user_agent(concat!("mdiag/", env!("CARGO_PKG_VERSION")))
            .timeout_resolve(Some(config.timeout))
            .timeout_connect(Some(config.timeout))
            .timeout_recv_response(Some(config.timeout))
            .timeout_per_read(Some(config.timeout))
            .timeout_global(Some(config.max_time));
        if !config.env_proxy {
            builder = builder.proxy(None);
        }
        Debuginfod {
            agent: builder.build().into(),
            config,
            tried: Mutex::new(HashSet::new()),
            down: Mutex::new(HashMap::new()),
        }
    }

    pub fn config(&self) -> &DebuginfodConfig {
        &self.config
    }

    /// Where the debug file of `build_id` is kept.
    pub fn cache_path(&self, build_id: &[u8]) -> PathBuf {
        self.config.cache_dir.join(hex(build_id)).join("debuginfo")
    }

    /// The debug file of `build_id`: from the cache directory, else from
    /// the servers (one attempt per build-id for the life of `self`).
    pub fn debug_file(&self, build_id: &[u8]) -> Option<DebugFile> {
        if build_id.is_empty() {
            return None;
        }
        let path = self.cache_path(build_id);
        if let Some(found) = open_checked(&path, build_id) {
            tracing::debug!(path = %path.display(), "symbols: debuginfod: from the cache");
            return Some(found);
        }
        if !lock(&self.tried).insert(build_id.to_vec()) {
            return None;
        }
        let id = hex(build_id);
        for url in &self.config.urls {
            if lock(&self.down)
                .get(url)
                .is_some_and(|until| Instant::now() < *until)
            {
                continue;
            }
            let started = Instant::now();
            match self.fetch(url, &id, build_id, &path) {
                Ok(found) => {
                    tracing::info!(
                        url,
                        build_id = id,
                        bytes = found.map.len(),
                        ms = started.elapsed().as_millis() as u64,
                        "symbols: debuginfod: debug file fetched"
                    );
                    return Some(found);
                }
                Err(Failure::Down(why)) => {
                    tracing::info!(url, build_id = id, "symbols: debuginfod: {why}");
                    lock(&self.down).insert(url.clone(), Instant::now() + SERVER_BACKOFF);
                }
                Err(Failure::Refused(why)) => {
                    tracing::debug!(url, build_id = id, "symbols: debuginfod: {why}");
                }
            }
        }
        None
    }

    /// Fetches from one server into the cache directory.
    fn fetch(&self, url: &str, id: &str, build_id: &[u8], to: &Path) -> Result<DebugFile, Failure> {
        let target = format!("{url}/buildid/{id}/debuginfo");
        let started = Instant::now();
        let response = self
            .agent
            .get(&target)
            .call()
            .map_err(|e| Failure::Down(format!("GET {target}: {e}")))?;
        if response.status() != 200 {
            return Err(Failure::Refused(format!(
                "GET {target}: {}",
                response.status()
            )));
        }
        let max = self.config.max_bytes;
        let length = response
            .headers()
            .get("content-length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if length.is_some_and(|l| l > max) {
            return Err(Failure::Refused(format!(
                "{length:?} bytes, over {max}: refused"
            )));
        }
        let Some(dir) = to.parent() else {
            return Err(Failure::Refused(format!("{}: no directory", to.display())));
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .create(dir)
            .map_err(|e| Failure::Refused(format!("{}: {e}", dir.display())))?;
        let mut tmp = tempfile::Builder::new()
            .prefix(".debuginfo.")
            .tempfile_in(dir)
            .map_err(|e| Failure::Refused(format!("{}: {e}", dir.display())))?;
        let mut body = response.into_body().into_reader();
        let mut buf = vec![0u8; 64 * 1024];
        let mut total = 0u64;
        loop {
            let n = match body.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(Failure::Down(format!("reading {target}: {e}"))),
            };
            total += n as u64;
            if total > max {
                return Err(Failure::Refused(format!("over {max} bytes: refused")));
            }
            if total < COMMENCING_BYTES && started.elapsed() > self.config.timeout {
                return Err(Failure::Down(format!(
                    "{total} bytes in {:?}: too slow",
                    self.config.timeout
                )));
            }
            tmp.write_all(&buf[..n])
                .map_err(|e| Failure::Refused(format!("writing {}: {e}", dir.display())))?;
        }
        tmp.flush()
            .map_err(|e| Failure::Refused(format!("writing {}: {e}", dir.display())))?;
        let map =
            map_file(tmp.path(), tmp.as_file()).map_err(|e| Failure::Refused(e.to_string()))?;
        if peek_build_id(&map).as_deref() != Some(build_id) {
            return Err(Failure::Refused(
                "not ELF or another build-id: ignored".into(),
            ));
        }
        tmp.persist(to)
            .map_err(|e| Failure::Refused(format!("{}: {e}", to.display())))?;
        Ok(DebugFile {
            path: to.to_path_buf(),
            map: Arc::new(map),
        })
    }
}

/// The file at `path`, mapped, when it is ELF with build-id `build_id`.
fn open_checked(path: &Path, build_id: &[u8]) -> Option<DebugFile> {
    let file = File::open(path).ok()?;
    let meta = file.metadata().ok()?;
    // elfutils caches a failed query as an empty file.
    if !meta.is_file() || meta.len() == 0 {
        return None;
    }
    let map = map_file(path, &file).ok()?;
    if peek_build_id(&map).as_deref() != Some(build_id) {
        tracing::debug!(path = %path.display(), "symbols: debuginfod: cached file of another build-id");
        return None;
    }
    Some(DebugFile {
        path: path.to_path_buf(),
        map: Arc::new(map),
    })
}

/// Whether ELF bytes have a `.symtab` with symbols (not asked for then).
pub fn has_symtab(data: &[u8]) -> bool {
    object::File::parse(data).is_ok_and(|f| f.symbol_table().is_some())
}

#[cfg(test)]
#[path = "debuginfod_tests.rs"]
mod tests;
