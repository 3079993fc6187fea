//! What `/metrics`' TLS reads from files, read again when the files change,
//! without a restart: a renewed certificate (cert-manager, an ACME client)
//! is served from the next handshake on, as Prometheus' exporter toolkit
//! does.
//!
//! The files are not read on every handshake: their identity (device,
//! inode, size, modification and change time) is taken at most once per
//! [`CHECK_EVERY`], on the handshake path itself (no thread of its own), and
//! only a difference reads them. `stat` follows symlinks, so the atomic swap
//! of a Kubernetes secret volume (`tls.crt -> ..data/tls.crt`, `..data`
//! replaced) and a file renamed over the old one are both seen. The
//! identity is taken before the files are read: a change during the read
//! is seen at the next look, never lost.
//!
//! New files that cannot be used (a certificate that does not parse, a key
//! that is not its certificate's, a missing file) leave the previous value
//! in service: that is logged once as a warning per change of the files,
//! and counted for `mdiag_web_tls_reloads_total` and
//! `mdiag_web_tls_reload_failed`. The next change is tried again.

use std::{
    os::unix::fs::MetadataExt,
    path::PathBuf,
    sync::Mutex,
    time::{Duration, Instant},
};

use super::web_tls::Bad;

/// How often at most the files are looked at.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// What tells a file's content apart without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    /// The stamp of the file `path` names, symlinks followed; `None` when
    /// it cannot be seen (a missing file is a state too).
    fn of(path: &std::path::Path) -> Option<Self> {
        let m = std::fs::metadata(path).ok()?;
        Some(Self {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }
}

/// Files watched for a change, looked at no more than once per `every`.
#[derive(Debug)]
pub(super) struct Watched {
    paths: Vec<PathBuf>,
    stamps: Vec<Option<Stamp>>,
    next_look: Instant,
    every: Duration,
}

impl Watched {
    /// Takes the files' stamps now (`now`: the next look is `every` later).
    pub fn new(paths: Vec<PathBuf>, every: Duration, now: Instant) -> Self {
        let stamps = paths.iter().map(|p| Stamp::of(p)).collect();
        Self {
            paths,
            stamps,
            next_look: now + every,
            every,
        }
    }

    /// Whether any file differs from the last look that saw a difference;
    /// looks only when `every` has passed since the last look (else false).
    pub fn changed(&mut self, now: Instant) -> bool {
        if self.paths.is_empty() || now < self.next_look {
            return false;
        }
        self.next_look = now + self.every;
        let stamps: Vec<_> = self.paths.iter().map(|p| Stamp::of(p)).collect();
        if stamps == self.stamps {
            return false;
        }
        self.stamps = stamps;
        true
    }
}

/// Reloads of one set of files so far, for the agent's own metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReloadCounts {
    /// `certificate` (with its key) or `client_ca`.
    pub files: &'static str,
    /// Changes read and put in service.
    pub ok: u64,
    /// Changes that could not be used (the previous value kept serving).
    pub failed: u64,
    /// The files on disk now are ones that could not be used.
    pub failing: bool,
}

/// A value made from files (a certificate and its key; a server
/// configuration with its client CA), made again when they change.
pub(super) struct Reloading<T> {
    /// The files, as the log names them.
    names: String,
    load: Box<dyn Fn() -> Result<T, Bad> + Send + Sync>,
    state: Mutex<State<T>>,
}

struct State<T> {
    current: T,
    watched: Watched,
    counts: ReloadCounts,
}

impl<T> std::fmt::Debug for Reloading<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloading")
            .field("files", &self.names)
            .finish_non_exhaustive()
    }
}

impl<T: Clone> Reloading<T> {
    /// Loads the value now (an error is the caller's, at start) and watches
    /// `paths` (none: the value never changes, e.g. inline PEM).
    pub fn new(
        files: &'static str,
        paths: Vec<PathBuf>,
        load: impl Fn() -> Result<T, Bad> + Send + Sync + 'static,
    ) -> Result<Self, Bad> {
        let names = paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(" and ");
        // Stamps before the read: a change during it is seen next time.
        let watched = Watched::new(paths, CHECK_EVERY, Instant::now());
        let current = load()?;
        Ok(Self {
            names,
            load: Box::new(load),
            state: Mutex::new(State {
                current,
                watched,
                counts: ReloadCounts {
                    files,
                    ..ReloadCounts::default()
                },
            }),
        })
    }

    /// The value in service, read again first if the files changed.
    pub fn get(&self) -> T {
        self.get_at(Instant::now())
    }

    /// [`Self::get`] with the clock given (tests).
    pub fn get_at(&self, now: Instant) -> T {
        // A poisoned lock only means a panic elsewhere mid-reload: the
        // value in it is still a whole one.
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.watched.changed(now) {
            match (self.load)() {
                Ok(v) => {
                    s.current = v;
                    s.counts.ok += 1;
                    s.counts.failing = false;
                    crate::messages::note(format_args!(
                        "/metrics TLS: {} changed: read again, in service from now on",
                        self.names
                    ));
                }
                Err((key, why)) => {
                    s.counts.failed += 1;
                    s.counts.failing = true;
                    tracing::warn!(
                        "/metrics TLS: {} changed but cannot be used ({key}: {why}); \
                         still serving the previous ones until the files change again",
                        self.names
                    );
                }
            }
        }
        s.current.clone()
    }

    /// Whether files are watched (not for inline PEM).
    pub fn watches_files(&self) -> bool {
        !self.names.is_empty()
    }

    /// Reloads so far.
    pub fn counts(&self) -> ReloadCounts {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).counts
    }
}

#[cfg(test)]
#[path = "web_reload_tests.rs"]
mod tests;
