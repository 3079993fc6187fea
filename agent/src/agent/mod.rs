//! `mdiag agent`: the continuous mode. Watches every local mongod (or the
//! host when there is none), cuts one-second slices with the same code as
//! `record`, evaluates the same rules as `explain` on each window, gives
//! every finding a life cycle (pending → firing → resolved, stale, flapping),
//! serves Prometheus metrics, and keeps a flight recorder.
//!
//! One line on stderr per change (a target attached or gone, a finding's
//! state), never one per window. SIGTERM / SIGINT stop it cleanly (probes
//! detached, pending flight recordings saved), SIGHUP re-reads the config
//! file, SIGUSR1 saves a flight recording of every target now.

pub mod config;
pub mod duty;
pub mod exposition;
pub mod findings;
pub mod flight;
pub mod lifecycle;
pub mod metrics;
pub mod netns;
pub mod notify;
pub mod outbox;
pub mod probe_reason;
pub mod process;
pub mod restarts;
mod runner;
pub mod serve;
pub mod skips;
pub mod targets;
pub mod totals;
mod view;
pub mod watch;
pub mod web_auth;
pub mod web_config;
pub mod web_reload;
pub mod web_tls;

use std::path::{Path, PathBuf};

pub use runner::run;

/// Certificates for the tests of the web configuration and its reloads.
#[cfg(test)]
#[path = "../../tests/support/pki.rs"]
mod pki;

/// Why the agent could not start.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(transparent)]
    Privileges(#[from] crate::privileges::PrivilegeError),
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    #[error(transparent)]
    Mongo(#[from] crate::mongo::conn::ConnError),
    #[error(transparent)]
    Rules(#[from] crate::rules::RulesError),
    #[error(transparent)]
    Serve(#[from] serve::ServeError),
    #[error(transparent)]
    WebConfig(#[from] web_config::WebConfigError),
    #[error(transparent)]
    FleetConfig(#[from] crate::fleet::config::FleetConfigError),
    #[error(transparent)]
    Fleet(#[from] crate::fleet::sender::FleetError),
    #[error("cannot create the state directory {}: {source}; set [agent] state_dir in the config file", path.display())]
    StateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the timer/signal runtime: {0}")]
    Runtime(std::io::Error),
}

impl AgentError {
    /// True when the user can fix it (exit code 2).
    pub fn is_usage(&self) -> bool {
        !matches!(self, Self::Runtime(_))
    }
}

/// The config file the agent reads: `--config`, else the default one.
pub fn config_path(flag: Option<&Path>) -> Option<PathBuf> {
    flag.map(Path::to_path_buf).or_else(|| {
        let d = Path::new(crate::mongo::conn::DEFAULT_CONFIG);
        d.exists().then(|| d.to_path_buf())
    })
}
