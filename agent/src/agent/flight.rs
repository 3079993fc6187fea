//! The flight recorder: every window of every target is kept on disk for a
//! few minutes (a ring bounded by age and bytes, under the state directory),
//! so that when a finding starts firing the agent can save an ordinary
//! `.mdiag` recording of the minutes before it and, once they have passed,
//! after it. `mdiag explain` then shows the evidence of the moment. The
//! directory of saved recordings is bounded too (files and bytes, oldest
//! removed first, counted). SIGUSR1 saves one of every target on demand.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use chrono::{DateTime, Utc};

use crate::recording::{self, Recording};

/// Bounds and places of the recorder.
#[derive(Debug, Clone)]
pub struct FlightConfig {
    pub ring_dir: PathBuf,
    pub out_dir: PathBuf,
    pub before: Duration,
    pub after: Duration,
    pub max_files: usize,
    pub max_bytes: u64,
}

/// A save waiting for its "after" minutes.
#[derive(Debug, Clone)]
struct Pending {
    due: Instant,
    target: String,
    why: String,
    at: DateTime<Utc>,
}

/// The recorder's state.
#[derive(Debug)]
pub struct Flight {
    config: FlightConfig,
    pending: Vec<Pending>,
    pub saved: u64,
    pub removed: u64,
}

impl Flight {
    pub fn new(config: FlightConfig) -> Self {
        Self {
            config,
            pending: Vec::new(),
            saved: 0,
            removed: 0,
        }
    }

    /// New bounds and places (SIGHUP); pending saves and counts are kept.
    pub fn set_config(&mut self, config: FlightConfig) {
        self.config = config;
    }

    fn ring_of(&self, target: &str) -> PathBuf {
        self.config.ring_dir.join(file_safe(target))
    }

    /// Keeps one window of `target` in the ring, and drops what is older
    /// than a recording could need.
    pub fn keep(&mut self, target: &str, window: &Recording) {
        let dir = self.ring_of(target);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            tracing::warn!("flight recorder: cannot create {}: {e}", dir.display());
            return;
        }
        let name = format!("{:020}.mdiag", window.started_at.timestamp_millis().max(0));
        if let Err(e) = recording::write_atomic(window, &dir.join(name)) {
            tracing::warn!("flight recorder: {e}");
        }
        let horizon = self.config.before + self.config.after + Duration::from_secs(60);
        prune(&dir, Some(horizon), usize::MAX, self.config.max_bytes);
    }

    /// A finding of `target` fired: save its recording once the minutes
    /// after have passed (one pending save per target at a time).
    pub fn trigger(&mut self, target: &str, why: &str, at: DateTime<Utc>) {
        if self.pending.iter().any(|p| p.target == target) {
            return;
        }
        self.pending.push(Pending {
            due: Instant::now() + self.config.after,
            target: target.to_owned(),
            why: why.to_owned(),
            at,
        });
    }

    /// When the next save is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.pending.iter().map(|p| p.due).min()
    }

    /// Saves what is due (or everything pending when `all`, at shutdown).
    /// Returns the files written.
    pub fn poll(&mut self, all: bool) -> Vec<PathBuf> {
        let now = Instant::now();
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|p| all || p.due <= now);
        self.pending = later;
        due.iter()
            .filter_map(|p| self.save(&p.target, &p.why, p.at))
            .collect()
    }

    /// Saves the ring of `target` now (SIGUSR1).
    pub fn save_now(&mut self, target: &str) -> Option<PathBuf> {
        self.save(target, "on-demand", Utc::now())
    }

    fn save(&mut self, target: &str, why: &str, at: DateTime<Utc>) -> Option<PathBuf> {
        let from = at - chrono::Duration::from_std(self.config.before).ok()?;
        let windows = read_ring(&self.ring_of(target), from);
        let recording = merge(windows)?;
        if let Err(e) = std::fs::create_dir_all(&self.config.out_dir) {
            tracing::warn!("flight recorder: {e}");
            return None;
        }
        let name = format!(
            "mdiag-{}-{}-{}.mdiag",
            file_safe(&recording.host.hostname),
            at.format("%Y%m%dT%H%M%SZ"),
            file_safe(why),
        );
        let path = self.config.out_dir.join(name);
        match recording::write_atomic(&recording, &path) {
            Ok(()) => {
                self.saved += 1;
                self.removed += prune(
                    &self.config.out_dir,
                    None,
                    self.config.max_files,
                    self.config.max_bytes,
                );
                Some(path)
            }
            Err(e) => {
                tracing::warn!("flight recorder: {e}");
                None
            }
        }
    }
}

/// The ring's windows that end after `from`, oldest first (unreadable
/// ones are skipped: a window cut by a crash costs only itself).
fn read_ring(dir: &Path, from: DateTime<Utc>) -> Vec<Recording> {
    let mut files = files_by_age(dir);
    files.retain(|(p, _)| p.extension().is_some_and(|e| e == "mdiag"));
    files
        .into_iter()
        .filter_map(|(p, _)| recording::read_file(&p).ok())
        .filter(|r| r.ended_at >= from)
        .collect()
}

/// Consecutive windows of one target as one recording: slices re-based on
/// the first window's start, the newest window's status and facts.
pub fn merge(windows: Vec<Recording>) -> Option<Recording> {
    let mut it = windows.into_iter();
    let mut out = it.next()?;
    for w in it {
        let offset = (w.started_at - out.started_at).num_milliseconds().max(0) as u64;
        let slices = w.slices.into_iter().map(|mut s| {
            s.start_ms += offset;
            s
        });
        out.slices.extend(slices);
        out.ended_at = w.ended_at;
        out.host = w.host;
        out.probes = w.probes;
        out.target = w.target;
        out.target_code = w.target_code.or(out.target_code);
        out.rseq = w.rseq.or(out.rseq);
        out.alloc = w.alloc.or(out.alloc);
        out.kernel_stacks.extend(w.kernel_stacks);
        out.kernel_stacks.sort_by_key(|k| k.stack_id);
        out.kernel_stacks.dedup_by_key(|k| k.stack_id);
        out.mongod = match (out.mongod.take(), w.mongod) {
            (Some(mut a), Some(b)) => {
                let mut details = std::mem::take(&mut a.tcmalloc_detail);
                details.extend(b.tcmalloc_detail.iter().cloned());
                Some(crate::recording::mongod::MongodRecording {
                    tcmalloc_detail: details,
                    ..b
                })
            }
            (a, b) => b.or(a),
        };
    }
    out.requested_duration_ms = (out.ended_at - out.started_at).num_milliseconds().max(0) as u64;
    out.stop_reason = "flight recorder".into();
    Some(out)
}

/// Files of `dir`, oldest first (by name: both the ring's and the saved
/// recordings' names sort by time), with their sizes.
fn files_by_age(dir: &Path) -> Vec<(PathBuf, u64)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<(PathBuf, u64)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| (e.path(), e.metadata().map_or(0, |m| m.len())))
        .collect();
    files.sort();
    files
}

/// Removes the oldest files of `dir` until at most `max_files` remain,
/// their sizes sum to at most `max_bytes`, and none is older than
/// `max_age` (by modification time). Returns how many were removed.
fn prune(dir: &Path, max_age: Option<Duration>, max_files: usize, max_bytes: u64) -> u64 {
    let files = files_by_age(dir);
    let mut total: u64 = files.iter().map(|(_, s)| s).sum();
    let mut left = files.len();
    let mut removed = 0;
    for (path, size) in files {
        let too_old = max_age.is_some_and(|age| {
            std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|e| e > age)
        });
        if !(too_old || left > max_files || total > max_bytes) {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            removed += 1;
            left -= 1;
            total = total.saturating_sub(size);
        }
    }
    removed
}

/// A name usable as one path component.
fn file_safe(s: &str) -> String {
    let safe: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if safe.chars().all(|c| c == '.') {
        safe.replace('.', "_")
    } else {
        safe
    }
}

#[cfg(test)]
#[path = "flight_tests.rs"]
mod tests;
