//! The `[fleet]` table: where the agent writes its findings (a MongoDB
//! deployment of its own, `uri`), and how long the store and the local
//! spool keep them. No table (or no file): the agent writes nothing and
//! behaves as before. An unknown key or a bad value is an error naming
//! the key, never a silent default.
//!
//! The store must not be the mongod the agent watches: the moment that
//! mongod is sick is the moment its findings matter. A fleet URI naming a
//! host:port the agent monitors (`[mongodb] uri`, or a watched process
//! listening on that port of this host) is refused unless
//! `allow_monitored = true` says it is meant: at start, and by the agent
//! for each target it finds later.
//!
//! ```toml
//! [fleet]
//! uri = "mongodb://fleet-store.example:27017/?replicaSet=fleet"
//! database = "mdiag"          # default
//! host = "db-17"              # the name this host has in the store (default: hostname)
//! retention = "30d"           # resolved episodes expire this long after resolution
//! window_retention = "7d"     # window summaries expire this long after their window
//! windows = true              # write window summaries
//! spool_max_bytes = 67108864  # the local spool's bounds (oldest dropped first, counted)
//! spool_max_age = "7d"
//! replay_rate = 500           # documents per second at most when replaying the spool
//! allow_monitored = false
//! ```

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use serde::Deserialize;

use crate::config_file::{FileError, duration, read, syntax};
use crate::mongo::conn::{Connection, Redactor, check_uri, redact};
use crate::mongo::port::is_local_host;

/// Why the `[fleet]` table cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum FleetConfigError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error("config file {}: [fleet] {key}: {why}", path.display())]
    Value {
        path: PathBuf,
        key: &'static str,
        why: String,
    },
    #[error(
        "config file {}: [fleet] uri {fleet} names {what} {monitored}, which this agent monitors: \
         the store would fail when that mongod does; point [fleet] uri at another deployment, \
         or set [fleet] allow_monitored = true if this is meant",
        path.display()
    )]
    Monitored {
        path: PathBuf,
        fleet: String,
        what: &'static str,
        monitored: String,
    },
}

/// The `[fleet]` table, with its defaults.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FleetConfig {
    /// The store's connection string (may hold credentials: never shown
    /// as is, see [`Self::redacted_uri`]). Empty: the table is incomplete.
    pub uri: String,
    pub database: String,
    /// This host's name in the store.
    pub host: String,
    #[serde(deserialize_with = "duration")]
    pub retention: Duration,
    #[serde(deserialize_with = "duration")]
    pub window_retention: Duration,
    pub windows: bool,
    pub spool_max_bytes: u64,
    #[serde(deserialize_with = "duration")]
    pub spool_max_age: Duration,
    /// Documents per second at most while replaying.
    pub replay_rate: f64,
    pub allow_monitored: bool,
}

impl std::fmt::Debug for FleetConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FleetConfig")
            .field("uri", &redact(&self.uri))
            .field("database", &self.database)
            .field("host", &self.host)
            .field("retention", &self.retention)
            .field("window_retention", &self.window_retention)
            .field("windows", &self.windows)
            .field("spool_max_bytes", &self.spool_max_bytes)
            .field("spool_max_age", &self.spool_max_age)
            .field("replay_rate", &self.replay_rate)
            .field("allow_monitored", &self.allow_monitored)
            .finish()
    }
}

const DAY: u64 = 24 * 3600;

impl Default for FleetConfig {
    fn default() -> Self {
        Self {
            uri: String::new(),
            database: "mdiag".into(),
            host: crate::host::hostname(),
            retention: Duration::from_secs(30 * DAY),
            window_retention: Duration::from_secs(7 * DAY),
            windows: true,
            spool_max_bytes: 64 << 20,
            spool_max_age: Duration::from_secs(7 * DAY),
            replay_rate: 500.0,
            allow_monitored: false,
        }
    }
}

impl FleetConfig {
    /// The `[fleet]` table of `path`; `None` when the file has none.
    pub fn load(path: &Path) -> Result<Option<Self>, FleetConfigError> {
        Self::parse(&read(path)?, path)
    }

    /// Parses a config file's text (only `[fleet]` is read here).
    pub fn parse(text: &str, path: &Path) -> Result<Option<Self>, FleetConfigError> {
        #[derive(Deserialize)]
        struct File {
            fleet: Option<FleetConfig>,
        }
        let file: File = toml::from_str(text).map_err(|e| syntax(path, text, &e))?;
        file.fleet.map(|f| f.check(path)).transpose()
    }

    fn check(self, path: &Path) -> Result<Self, FleetConfigError> {
        let bad = |key, why: String| FleetConfigError::Value {
            path: path.to_owned(),
            key,
            why,
        };
        if self.uri.trim().is_empty() {
            return Err(bad(
                "uri",
                "missing: the store's connection string, e.g. uri = \"mongodb://fleet:27017\" \
                 (or remove the [fleet] table)"
                    .into(),
            ));
        }
        check_uri(&self.uri).map_err(|why| {
            bad(
                "uri",
                format!("{why}; expected mongodb://[user:password@]host[:port][/?options]"),
            )
        })?;
        let db_ok = !self.database.is_empty()
            && self.database.len() < 64
            && !self
                .database
                .contains(['/', '\\', '.', ' ', '"', '$', '\0']);
        if !db_ok {
            return Err(bad(
                "database",
                format!(
                    "{:?} is not a database name (1 to 63 characters, none of /\\. \"$)",
                    self.database
                ),
            ));
        }
        if self.host.trim().is_empty() {
            return Err(bad("host", "must not be empty".into()));
        }
        for (key, d) in [
            ("retention", self.retention),
            ("window_retention", self.window_retention),
            ("spool_max_age", self.spool_max_age),
        ] {
            if d < Duration::from_secs(60) {
                return Err(bad(key, format!("{d:?} is too short: at least \"1m\"")));
            }
        }
        if self.spool_max_bytes < 64 << 10 {
            return Err(bad(
                "spool_max_bytes",
                format!("{} is too small: at least 65536", self.spool_max_bytes),
            ));
        }
        if !(self.replay_rate.is_finite() && self.replay_rate >= 1.0) {
            return Err(bad(
                "replay_rate",
                format!(
                    "{} documents per second: must be at least 1",
                    self.replay_rate
                ),
            ));
        }
        Ok(self)
    }

    /// The URI without credentials, for logs.
    pub fn redacted_uri(&self) -> String {
        redact(&self.uri)
    }

    /// Removes the URI's secrets from driver errors.
    pub fn redactor(&self) -> Redactor {
        Redactor::for_uri(&self.uri)
    }

    /// Refuses a store that is a mongod this agent monitors: the `[mongodb]`
    /// connection `mongo`, or a watched process listening on one of
    /// `watched_ports` of this host. `allow_monitored` lets it be.
    pub fn check_not_monitored(
        &self,
        path: &Path,
        mongo: Option<&Connection>,
        watched_ports: &[u16],
    ) -> Result<(), FleetConfigError> {
        if self.allow_monitored {
            return Ok(());
        }
        let fleet = Connection {
            uri: self.uri.clone(),
            from: "[fleet] uri".into(),
        };
        let Some(ours) = fleet.hosts() else {
            // mongodb+srv: resolved through DNS, nothing to compare.
            return Ok(());
        };
        let refuse = |what, monitored: String| FleetConfigError::Monitored {
            path: path.to_owned(),
            fleet: self.redacted_uri(),
            what,
            monitored,
        };
        if let Some(m) = mongo
            && let Some(theirs) = m.hosts()
            && ours
                .iter()
                .any(|a| theirs.iter().any(|b| same_server(a, b)))
        {
            return Err(refuse(
                "the server of [mongodb] uri",
                format!("{} ({})", m.redacted(), m.from),
            ));
        }
        for (h, port) in &ours {
            if watched_ports.contains(port) && is_local_host(h) {
                return Err(refuse(
                    "a watched process listening on",
                    format!("{h}:{port}"),
                ));
            }
        }
        Ok(())
    }
}

/// Two host:port pairs that reach the same server: equal names, or both
/// this host, on the same port.
fn same_server(a: &(String, u16), b: &(String, u16)) -> bool {
    a.1 == b.1 && (a.0.eq_ignore_ascii_case(&b.0) || (is_local_host(&a.0) && is_local_host(&b.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Option<FleetConfig>, FleetConfigError> {
        FleetConfig::parse(text, Path::new("mdiag.toml"))
    }

    #[test]
    fn no_table_is_no_store_and_keys_have_defaults() {
        assert!(parse("[agent]\nwindow = \"2s\"\n").unwrap().is_none());
        let c = parse("[fleet]\nuri = \"mongodb://store:27017\"\n")
            .unwrap()
            .unwrap();
        assert_eq!(c.database, "mdiag");
        assert_eq!(c.host, crate::host::hostname());
        assert_eq!(c.retention, Duration::from_secs(30 * DAY));
        assert_eq!(c.window_retention, Duration::from_secs(7 * DAY));
        assert!(c.windows && !c.allow_monitored);
        assert_eq!(c.spool_max_bytes, 64 << 20);
        let c = parse(
            "[fleet]\nuri = \"mongodb://u:secret@store\"\nhost = \"h2\"\nretention = \"2h\"\n\
             windows = false\nreplay_rate = 50\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            (c.host.as_str(), c.retention),
            ("h2", Duration::from_secs(7200))
        );
        assert!(!format!("{c:?}").contains("secret"), "{c:?}");
    }

    #[test]
    fn mistakes_name_the_key() {
        for (text, key) in [
            (
                "[fleet]\nuri = \"mongodb://s\"\nretension = \"1d\"\n",
                "retension",
            ),
            ("[fleet]\ndatabase = \"x\"\n", "uri"),
            ("[fleet]\nuri = \"http://s\"\n", "uri"),
            (
                "[fleet]\nuri = \"mongodb://s\"\nretention = \"soon\"\n",
                "soon",
            ),
            (
                "[fleet]\nuri = \"mongodb://s\"\nretention = \"1s\"\n",
                "retention",
            ),
            (
                "[fleet]\nuri = \"mongodb://s\"\ndatabase = \"a.b\"\n",
                "database",
            ),
            (
                "[fleet]\nuri = \"mongodb://s\"\nspool_max_bytes = 10\n",
                "spool_max_bytes",
            ),
            (
                "[fleet]\nuri = \"mongodb://s\"\nreplay_rate = 0\n",
                "replay_rate",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(key), "{text}: {e}");
        }
    }

    #[test]
    fn the_monitored_mongod_is_refused_unless_allowed() {
        let path = Path::new("mdiag.toml");
        let c = parse("[fleet]\nuri = \"mongodb://u:pw1234@localhost:27017\"\n")
            .unwrap()
            .unwrap();
        let mongo = Connection {
            uri: "mongodb://127.0.0.1:27017".into(),
            from: "config file mdiag.toml".into(),
        };
        let e = c
            .check_not_monitored(path, Some(&mongo), &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("allow_monitored") && e.contains("127.0.0.1:27017"),
            "{e}"
        );
        assert!(
            e.contains("localhost:27017") && !e.contains("pw1234"),
            "{e}"
        );
        // A watched process listening on the store's port of this host.
        let e = c.check_not_monitored(path, None, &[27017]).unwrap_err();
        assert!(e.to_string().contains("watched process"), "{e}");
        // Another port, another host: fine.
        c.check_not_monitored(path, None, &[27018]).unwrap();
        let other = Connection {
            uri: "mongodb://203.0.113.9:27017".into(),
            from: "x".into(),
        };
        c.check_not_monitored(path, Some(&other), &[]).unwrap();
        let mut allowed = c.clone();
        allowed.allow_monitored = true;
        allowed
            .check_not_monitored(path, Some(&mongo), &[27017])
            .unwrap();
    }
}
