//! Where `mdiag fleet` reads: the store's URI and database, from `--uri`,
//! else the config file's `[fleet]` table (`uri`, `database`), and the
//! client that connects to it with short timeouts, so that a store nobody
//! can reach is an error naming it within seconds, not a hang.
//!
//! The `[fleet]` table is read here with `toml` directly rather than
//! through `mongo::conn`'s `ConfigFile` (which the agent's writer extends):
//! the reader needs two keys, and tolerates every other table of the file.

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use mongodb::{Client, Database, options::ClientOptions};

use crate::mongo::conn::{DEFAULT_CONFIG, Redactor, redact};

/// The store's database when the config names none.
pub const DEFAULT_DATABASE: &str = "mdiag";
/// How long the driver looks for the store before the command gives up.
pub const SELECTION_TIMEOUT: Duration = Duration::from_secs(3);
/// Connect timeout (unless the URI sets its own).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("cannot read the config file {}: {source}; fix the path given with --config", path.display())]
    ConfigRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {}: {why}; expected a table like [fleet] uri = \"mongodb://store:27017\"", path.display())]
    ConfigSyntax { path: PathBuf, why: String },
    #[error(
        "no fleet store configured: give --uri mongodb://HOST:PORT, or set [fleet] uri = \"...\" in the config file (--config FILE, default {DEFAULT_CONFIG})"
    )]
    NoUri,
    #[error("the fleet store URI {uri} (from {from}) is not valid: {why}")]
    BadUri {
        uri: String,
        from: String,
        why: String,
    },
    #[error(
        "cannot reach the fleet store at {uri} (from {from}): {why}; check that it runs and that the URI is right (--uri, or [fleet] uri in the config file)"
    )]
    Unreachable {
        uri: String,
        from: String,
        why: String,
    },
    #[error("reading the fleet store at {uri}: {why}")]
    Query { uri: String, why: String },
}

impl SourceError {
    /// Errors the user fixes by changing the command or the config.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            Self::ConfigRead { .. } | Self::ConfigSyntax { .. } | Self::NoUri | Self::BadUri { .. }
        )
    }
}

/// The store to read, and where its URI came from.
#[derive(Clone)]
pub struct Store {
    /// May hold credentials: shown only through [`Store::redacted`].
    pub uri: String,
    pub database: String,
    /// "--uri" or "config file PATH".
    pub from: String,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("uri", &self.redacted())
            .field("database", &self.database)
            .field("from", &self.from)
            .finish()
    }
}

impl Store {
    pub fn redacted(&self) -> String {
        redact(&self.uri)
    }
}

/// The `[fleet]` table's `uri` and `database`, if the file has them.
fn read_fleet_table(path: &Path) -> Result<(Option<String>, Option<String>), SourceError> {
    let text = std::fs::read_to_string(path).map_err(|source| SourceError::ConfigRead {
        path: path.to_owned(),
        source,
    })?;
    let syntax = |why: String| SourceError::ConfigSyntax {
        path: path.to_owned(),
        why,
    };
    // The error text can quote the line, which may hold a password.
    let table: toml::Table = toml::from_str(&text).map_err(|e| syntax(e.message().to_owned()))?;
    let Some(fleet) = table.get("fleet") else {
        return Ok((None, None));
    };
    let fleet = fleet
        .as_table()
        .ok_or_else(|| syntax("`fleet` is not a table".into()))?;
    let string = |key: &str| -> Result<Option<String>, SourceError> {
        match fleet.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_str()
                .map(|s| Some(s.to_owned()))
                .ok_or_else(|| syntax(format!("[fleet] {key} must be a string"))),
        }
    };
    Ok((string("uri")?, string("database")?))
}

/// Picks the store: `flag` (`--uri`), else the config file (`config`, which
/// must exist, or `default_config` when it exists). The database is the
/// config's `[fleet] database`, else [`DEFAULT_DATABASE`].
pub fn resolve(
    flag: Option<&str>,
    config: Option<&Path>,
    default_config: &Path,
) -> Result<Store, SourceError> {
    let path = match config {
        Some(p) => Some(p),
        None => default_config.exists().then_some(default_config),
    };
    let (file_uri, database) = match path {
        Some(p) => read_fleet_table(p)?,
        None => (None, None),
    };
    let database = database
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| DEFAULT_DATABASE.to_owned());
    match (flag, file_uri, path) {
        (Some(uri), _, _) => Ok(Store {
            uri: uri.to_owned(),
            database,
            from: "--uri".into(),
        }),
        (None, Some(uri), Some(p)) => Ok(Store {
            uri,
            database,
            from: format!("config file {}", p.display()),
        }),
        _ => Err(SourceError::NoUri),
    }
}

/// The driver's model of one of the schema's indexes (for whoever creates
/// them: the tests and the bench here; the agent's store has its own).
pub fn index_model(spec: &super::schema::IndexSpec) -> mongodb::IndexModel {
    let mut keys = bson::Document::new();
    for (k, d) in spec.keys {
        keys.insert(*k, *d);
    }
    let opts = mongodb::options::IndexOptions::builder()
        .name(spec.name.to_owned())
        .expire_after(spec.expire_after_secs.map(Duration::from_secs))
        .build();
    mongodb::IndexModel::builder()
        .keys(keys)
        .options(opts)
        .build()
}

/// Connects and checks that the store answers (a `ping`), so that an
/// unreachable store is reported as such and not as a failed query.
pub async fn connect(store: &Store) -> Result<Database, SourceError> {
    let scrub = Redactor::for_uri(&store.uri);
    let mut opts = ClientOptions::parse(&store.uri)
        .await
        .map_err(|e| SourceError::BadUri {
            uri: store.redacted(),
            from: store.from.clone(),
            why: scrub.scrub(&e.to_string()),
        })?;
    opts.server_selection_timeout = opts.server_selection_timeout.or(Some(SELECTION_TIMEOUT));
    opts.connect_timeout = opts.connect_timeout.or(Some(CONNECT_TIMEOUT));
    opts.app_name = opts.app_name.or(Some("mdiag fleet".into()));
    let unreachable = |e: mongodb::error::Error| SourceError::Unreachable {
        uri: store.redacted(),
        from: store.from.clone(),
        why: scrub.scrub(&e.to_string()),
    };
    let client = Client::with_options(opts).map_err(unreachable)?;
    let db = client.database(&store.database);
    db.run_command(bson::doc! {"ping": 1})
        .await
        .map_err(unreachable)?;
    Ok(db)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), text).unwrap();
        f
    }

    #[test]
    fn the_flag_wins_and_the_database_comes_from_the_file() {
        let f = file(
            "[mongodb]\nuri = \"mongodb://local\"\n[agent]\nwindow = \"60s\"\n[fleet]\nuri = \"mongodb://store:27017\"\ndatabase = \"ops\"\n",
        );
        let s = resolve(
            Some("mongodb://other"),
            Some(f.path()),
            Path::new("/nonexistent"),
        )
        .unwrap();
        assert_eq!(
            (s.uri.as_str(), s.database.as_str()),
            ("mongodb://other", "ops")
        );
        assert_eq!(s.from, "--uri");
        let s = resolve(None, Some(f.path()), Path::new("/nonexistent")).unwrap();
        assert_eq!(s.uri, "mongodb://store:27017");
        assert!(s.from.starts_with("config file "), "{}", s.from);
    }

    #[test]
    fn no_uri_anywhere_is_a_usage_error_that_says_what_to_set() {
        let f = file("[mongodb]\nuri = \"mongodb://local\"\n");
        let e = resolve(None, Some(f.path()), Path::new("/nonexistent")).unwrap_err();
        assert!(e.is_usage());
        assert!(e.to_string().contains("[fleet] uri"), "{e}");
        let e = resolve(None, None, Path::new("/nonexistent")).unwrap_err();
        assert!(matches!(e, SourceError::NoUri));
        let s = resolve(Some("mongodb://x"), None, Path::new("/nonexistent")).unwrap();
        assert_eq!(s.database, DEFAULT_DATABASE);
    }

    #[test]
    fn a_bad_config_names_the_file_and_never_shows_the_password() {
        let f = file("[fleet]\nuri = \"mongodb://u:s3cret@h\" oops\n");
        let e = resolve(None, Some(f.path()), Path::new("/nonexistent")).unwrap_err();
        assert!(matches!(e, SourceError::ConfigSyntax { .. }), "{e}");
        assert!(!e.to_string().contains("s3cret"), "{e}");
        let f = file("[fleet]\nuri = 3\n");
        let e = resolve(None, Some(f.path()), Path::new("/nonexistent")).unwrap_err();
        assert!(e.to_string().contains("must be a string"), "{e}");
        let e = resolve(
            None,
            Some(Path::new("/nonexistent/m.toml")),
            Path::new("/x"),
        )
        .unwrap_err();
        assert!(matches!(e, SourceError::ConfigRead { .. }));
        let s = Store {
            uri: "mongodb://u:s3cret@h".into(),
            database: "d".into(),
            from: "--uri".into(),
        };
        assert!(!format!("{s:?}").contains("s3cret"));
    }
}
