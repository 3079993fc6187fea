//! `mdiag check-config [FILE]`: the config file checked by the very parsers
//! the agent and `record` use (the file's tables and `[mongodb] uri` by
//! `mongo::conn`, `[agent]` by `agent::config`, `[fleet]` by
//! `fleet::config`, the web configuration file `[agent] web_config_file`
//! names by `agent::web_config`), so it accepts exactly what they accept;
//! prints the settings in effect, every default included, with credentials
//! redacted (no password hash, no key).

use std::path::{Path, PathBuf};

use crate::agent::config::{AgentConfig, ConfigError};
use crate::agent::web_config::{WebConfig, WebConfigError, exposure};
use crate::fleet::config::{FleetConfig, FleetConfigError};
use crate::mongo::conn::{ConnError, Connection};

/// Why the file is not one the agent would start with (each names the key).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("no config file at {}: the agent would run on its defaults", path.display())]
    Missing { path: PathBuf },
    #[error(transparent)]
    Mongo(#[from] ConnError),
    #[error(transparent)]
    Agent(#[from] ConfigError),
    #[error(transparent)]
    Fleet(#[from] FleetConfigError),
    #[error(transparent)]
    Web(#[from] WebConfigError),
}

/// A file's effective settings.
#[derive(Debug)]
pub struct Checked {
    pub path: PathBuf,
    pub mongodb: Option<Connection>,
    pub agent: AgentConfig,
    pub fleet: Option<FleetConfig>,
    /// The web configuration file's settings, when `[agent]` names one.
    pub web: Option<WebConfig>,
}

/// Checks `path` as the agent would read it at start.
pub fn check(path: &Path) -> Result<Checked, CheckError> {
    if !path.exists() {
        return Err(CheckError::Missing {
            path: path.to_owned(),
        });
    }
    // The tables and [mongodb] (deny_unknown_fields at the top: a
    // misspelled table is an error), its URI parsed.
    let mongodb = crate::mongo::conn::resolve(None, None, Some(path), path)?;
    let agent = AgentConfig::load(Some(path), path)?;
    let fleet = FleetConfig::load(path)?;
    let web = match &agent.web_config_file {
        Some(p) => Some(WebConfig::load(p)?),
        None => None,
    };
    if let Some(f) = &fleet {
        // Without the processes' ports (that needs the host's sockets):
        // the [mongodb] connection only.
        f.check_not_monitored(path, mongodb.as_ref(), &[])?;
    }
    Ok(Checked {
        path: path.to_owned(),
        mongodb,
        agent,
        fleet,
        web,
    })
}

/// The settings in effect, as text.
pub fn render(c: &Checked) -> String {
    let mongodb = c.mongodb.as_ref().map_or_else(
        || "not polled (no [mongodb] uri)".to_owned(),
        Connection::redacted,
    );
    let fleet = c.fleet.as_ref().map_or_else(
        || "none (no [fleet] table: the agent writes to no store)".to_owned(),
        |f| format!("{f:#?}"),
    );
    // The life cycles in effect: the defaults under [agent.lifecycle],
    // under each [agent.rules."ID"].
    let mut lifecycles = format!("  every rule: {:?}\n", c.agent.lifecycle_for(""));
    for rule in c.agent.rules.keys() {
        lifecycles.push_str(&format!("  {rule}: {:?}\n", c.agent.lifecycle_for(rule)));
    }
    let web = c.web.as_ref().map_or_else(
        || "  none: plain HTTP, no password\n".to_owned(),
        WebConfig::summary,
    );
    let warning = exposure(c.agent.listen, c.web.as_ref())
        .map_or_else(String::new, |w| format!("  warning: {w}\n"));
    format!(
        "{}: valid\n\n[mongodb] uri: {mongodb}\n\n[agent] (defaults filled in):\n{:#?}\n\
         life cycles in effect:\n{lifecycles}\n/metrics web config (web_config_file):\n{web}{warning}\n\
         [fleet]:\n{fleet}\n",
        c.path.display(),
        c.agent
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_text(text: &str) -> Result<Checked, CheckError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mdiag.toml");
        std::fs::write(&path, text).unwrap();
        check(&path)
    }

    #[test]
    fn the_packaged_file_is_valid_and_shows_every_setting() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/mdiag.toml");
        let c = check(&path).unwrap();
        // The example states every default (agent/config.rs holds it to that).
        assert_eq!(c.agent.window, AgentConfig::default().window);
        assert!(c.mongodb.is_none() && c.fleet.is_none());
        let text = render(&c);
        for key in ["window", "listen", "max_series", "fire_in", "flap_windows"] {
            assert!(text.contains(key), "{key} not shown:\n{text}");
        }
    }

    #[test]
    fn a_wrong_key_in_any_table_is_named() {
        for (text, key) in [
            ("[agnet]\nwindow = \"60s\"\n", "agnet"),
            ("[agent]\nwindw = \"60s\"\n", "windw"),
            ("[agent]\nmax_series = \"many\"\n", "many"),
            ("[agent]\nprobe_budget = 2.0\n", "probe_budget"),
            ("[mongodb]\nurl = \"mongodb://h\"\n", "url"),
            ("[mongodb]\nuri = \"http://h\"\n", "mongodb"),
            (
                "[fleet]\nuri = \"mongodb://s\"\nspool_max = 1\n",
                "spool_max",
            ),
        ] {
            let e = check_text(text).unwrap_err().to_string();
            assert!(e.contains(key), "{text:?}: {e}");
        }
    }

    #[test]
    fn secrets_are_not_printed() {
        let c = check_text(
            "[mongodb]\nuri = \"mongodb://u:hunter2@db:27017\"\n\
             [fleet]\nuri = \"mongodb://u:hunter3@store:27017\"\n[agent]\nwindow = \"2s\"\n",
        )
        .unwrap();
        let text = render(&c);
        assert!(
            !text.contains("hunter2") && !text.contains("hunter3"),
            "{text}"
        );
        assert!(
            text.contains("db:27017") && text.contains("store:27017"),
            "{text}"
        );
        assert!(text.contains("window: 2s"), "{text}");
    }

    #[test]
    fn the_life_cycle_in_effect_is_shown_per_rule() {
        let c = check_text(
            "[agent.lifecycle]\nresolve_after = 4\n[agent.rules.\"host.swappiness\"]\nfire_in = 1\nof_last = 2\n",
        )
        .unwrap();
        let text = render(&c);
        assert!(
            text.contains(
                "every rule: LifecycleConfig { fire_in: 3, of_last: 5, resolve_after: 4,"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "host.swappiness: LifecycleConfig { fire_in: 1, of_last: 2, resolve_after: 4,"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_missing_file_is_an_error() {
        let e = check(Path::new("/nonexistent/mdiag.toml")).unwrap_err();
        assert!(matches!(e, CheckError::Missing { .. }), "{e}");
    }
}
