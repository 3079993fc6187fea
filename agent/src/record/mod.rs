//! `mdiag record`: resolve a plan from the arguments (privileges, target,
//! output path), then run it ([`run::run`]).
//!
//! Everything that can be wrong with the user's input is found here, before a
//! single probe is loaded, so a mistake costs nothing.

mod fit;
mod progress;
pub mod run;

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{
    cli::RecordArgs,
    privileges::{self, PrivilegeError},
    probes::ProbeError,
    recording::{self, RecordingError, Target},
    spawn::SpawnError,
    target::{self, TargetError},
};

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(transparent)]
    Privileges(#[from] PrivilegeError),
    #[error(transparent)]
    Target(#[from] TargetError),
    #[error("cannot write the recording to {path}: {why}; choose another place with --output")]
    Output { path: PathBuf, why: String },
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error(transparent)]
    Probes(#[from] ProbeError),
    #[error(transparent)]
    Write(#[from] RecordingError),
    #[error(
        "{why}; {path} holds the recording up to its last complete frame: `mdiag explain {path}` reads it"
    )]
    Unfinished { path: PathBuf, why: String },
    #[error("cannot start the timer/signal runtime: {0}")]
    Runtime(std::io::Error),
    #[error(transparent)]
    AllocSchedule(#[from] crate::probes::alloc::schedule::ScheduleError),
    #[error(transparent)]
    Mongo(#[from] crate::mongo::conn::ConnError),
    #[error("cannot find the process listening on the URI's port: {0}")]
    Port(#[from] crate::mongo::port::PortError),
}

impl RecordError {
    /// True when the user can fix it by changing the command line or the host
    /// set-up (exit code 2), false for failures while recording (exit code 1).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Self::Privileges(_)
                | Self::Target(_)
                | Self::Output { .. }
                | Self::Spawn(_)
                | Self::AllocSchedule(_)
                | Self::Mongo(_)
        )
    }
}

/// What to observe.
#[derive(Debug, Clone, PartialEq)]
pub enum PlannedTarget {
    HostWide,
    Existing(Target),
    Spawn(Vec<String>),
}

#[derive(Debug, Clone)]
pub struct RecordPlan {
    pub duration: Duration,
    pub target: PlannedTarget,
    pub output: PathBuf,
    pub progress: bool,
    /// Allocator latency windows.
    pub alloc: crate::probes::alloc::schedule::WindowSchedule,
    /// The probe families to run (`--probes`).
    pub families: crate::kit::family::Selection,
    /// The perf family's sampling rate (`--sample-hz`).
    pub sample_hz: u64,
    /// The mongod to poll; `None`: not polled (no URI given).
    pub mongo: Option<crate::mongo::MongoPlan>,
}

impl RecordPlan {
    /// What the probes observe: `target` (`None`: host-wide) with the
    /// families chosen.
    pub(crate) fn probe_config(&self, target: Option<u32>) -> crate::probes::ProbeConfig {
        crate::probes::ProbeConfig {
            target_tgid: target,
            families: self.families.clone(),
            stacks: true,
            sample_hz: self.sample_hz,
        }
    }

    /// What the families that attach later need, for `target`: the
    /// allocator windows as scheduled (a recording spends no budget).
    pub(crate) fn later(&self, target: Option<u32>) -> crate::probes::LaterPlan {
        crate::probes::LaterPlan {
            target,
            alloc: self.alloc,
            alloc_budget: None,
        }
    }
}

/// Checks the arguments and the host, and decides what to do.
pub fn plan(args: &RecordArgs, stdout_is_tty: bool) -> Result<RecordPlan, RecordError> {
    let alloc =
        crate::probes::alloc::schedule::WindowSchedule::new(args.alloc_window, args.alloc_every)?;
    privileges::check()?;
    let conn = crate::mongo::conn::resolve(
        args.uri.as_deref(),
        std::env::var(crate::mongo::conn::ENV_URI).ok(),
        args.config.as_deref(),
        Path::new(crate::mongo::conn::DEFAULT_CONFIG),
    )?;
    let mongo = conn.map(|conn| {
        let local = mongo_local(&conn);
        crate::mongo::MongoPlan {
            local: local.is_some(),
            conn,
        }
    });
    let target = if !args.command.is_empty() {
        PlannedTarget::Spawn(args.command.clone())
    } else if let Some(pid) = args.pid {
        PlannedTarget::Existing(target::describe(pid, "pid")?)
    } else if let Some(name) = &args.process {
        PlannedTarget::Existing(target::by_name(name)?)
    } else if args.host_wide {
        PlannedTarget::HostWide
    } else if let Some(m) = &mongo {
        // The URI chooses the target: the local process on its port, or
        // none for a remote server (polling only).
        match mongo_local(&m.conn) {
            Some(port) => match crate::mongo::port::pid_listening_on(port)? {
                Some(pid) => PlannedTarget::Existing(target::describe(pid, "port")?),
                None => PlannedTarget::HostWide,
            },
            None => PlannedTarget::HostWide,
        }
    } else {
        target::default_target()?.map_or(PlannedTarget::HostWide, PlannedTarget::Existing)
    };
    let output = match &args.output {
        Some(p) => p.clone(),
        None => PathBuf::from(recording::default_file_name(
            &crate::host::hostname(),
            chrono::Utc::now(),
        )),
    };
    check_writable(&output)?;
    Ok(RecordPlan {
        duration: args.duration,
        target,
        output,
        progress: stdout_is_tty && !args.no_progress,
        alloc,
        families: args.probes.clone(),
        sample_hz: args.sample_hz,
        mongo,
    })
}

/// The port of the URI's host when it is this machine (one host, not
/// `mongodb+srv`); `None` for a remote or multi-host URI.
fn mongo_local(conn: &crate::mongo::Connection) -> Option<u16> {
    match conn.hosts()?.as_slice() {
        [(host, port)] if crate::mongo::port::is_local_host(host) => Some(*port),
        _ => None,
    }
}

/// Fails early when the recording could not be written at the end.
fn check_writable(path: &Path) -> Result<(), RecordError> {
    let err = |why: String| RecordError::Output {
        path: path.to_owned(),
        why,
    };
    if path.is_dir() {
        return Err(err("it is a directory".into()));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(err(format!("directory {} does not exist", dir.display())));
    }
    tempfile::Builder::new()
        .prefix(".mdiag-probe-")
        .tempfile_in(dir)
        .map(drop)
        .map_err(|e| err(format!("directory {} is not writable ({e})", dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_checks() {
        let dir = tempfile::tempdir().unwrap();
        assert!(check_writable(&dir.path().join("r.mdiag")).is_ok());
        let e = check_writable(dir.path()).unwrap_err();
        assert!(e.to_string().contains("is a directory") && e.is_usage());
        let e = check_writable(&dir.path().join("missing/r.mdiag")).unwrap_err();
        assert!(e.to_string().contains("does not exist"), "{e}");
        // Nothing left behind by the check.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
