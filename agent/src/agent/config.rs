//! `mdiag agent`'s settings: the `[agent]` table of the config file that
//! `record` reads its `[mongodb] uri` from (`/etc/mdiag/mdiag.toml` by
//! default). Every key has a default, so no file is needed; an unknown key
//! or a bad value is an error naming the key, never a silent default.
//!
//! ```toml
//! [agent]
//! window = "60s"              # rules are evaluated on windows this long
//! listen = "127.0.0.1:9219"   # /metrics; a non-loopback address only when set here
//! # web_config_file = "/etc/mdiag/web-config.yml"  # TLS and basic auth (exporter-toolkit format)
//! state_dir = "/var/lib/mdiag"
//! processes = ["mongod"]      # process names watched (comm)
//! alloc_budget = 0.005        # allocator probes: at most this share of the target's CPU
//! probe_budget = 0.002        # per-event probes (sched, softirq, syscalls, contention): likewise
//! probes = ["all"]            # or some families: ["sched", "softirq"]
//! sample_hz = 99              # perf family: CPU samples per second and CPU (1 to 1000)
//! flight_before = "5m"        # a flight recording keeps this much before a finding fires
//! flight_after = "1m"         # ... and this much after
//! flight_max_files = 20
//! flight_max_bytes = 268435456
//! max_series = 250            # /metrics rows at most
//! top_n = 256                 # rows per map per slice, the rest as "others"
//!
//! [agent.lifecycle]           # when a finding fires, resolves, flaps
//! fire_in = 3
//! of_last = 5
//! resolve_after = 10
//! flap_limit = 6
//! flap_windows = 60
//!
//! [agent.rules."sched.wakeup_preemption"]   # per rule, same keys
//! fire_in = 2
//! ```

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    path::{Path, PathBuf},
    time::Duration,
};

use serde::Deserialize;

use crate::kit::family::Selection;

use super::lifecycle::LifecycleConfig;
use crate::config_file::{FileError, duration, read, syntax};

/// Why the agent's settings could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    File(#[from] FileError),
    #[error("config file {}: [agent] {key}: {why}", path.display())]
    Value {
        path: PathBuf,
        key: &'static str,
        why: String,
    },
}

/// The `[agent]` table, with its defaults.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    #[serde(deserialize_with = "duration")]
    pub window: Duration,
    pub listen: SocketAddr,
    /// The exporter-toolkit web configuration file of `/metrics` (TLS,
    /// basic auth; `web_config.rs`). None: plain HTTP, no password.
    pub web_config_file: Option<PathBuf>,
    pub state_dir: PathBuf,
    pub processes: Vec<String>,
    pub alloc_budget: f64,
    /// Share of the target's CPU the per-event families' programs may cost
    /// (`duty.rs`): they are attached only for the seconds it pays for.
    pub probe_budget: f64,
    /// The probe families to run (default: every one); the others are left
    /// out by choice.
    pub probes: Vec<String>,
    /// The perf family's sampling rate, Hz per CPU.
    pub sample_hz: u64,
    #[serde(deserialize_with = "duration")]
    pub alloc_window: Duration,
    #[serde(deserialize_with = "duration")]
    pub flight_before: Duration,
    #[serde(deserialize_with = "duration")]
    pub flight_after: Duration,
    pub flight_max_files: usize,
    pub flight_max_bytes: u64,
    /// Series /metrics may show at most (rows past it are left out, counted).
    pub max_series: usize,
    /// Rows kept per per-key map (threads, IRQs, stacks) of each slice;
    /// the rest are folded into one "others" row with exact totals. Bounds
    /// a window's bytes whatever the number of threads (mongod runs one
    /// per connection).
    pub top_n: usize,
    pub lifecycle: LifecycleSection,
    pub rules: BTreeMap<String, LifecycleSection>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            window: Duration::from_secs(60),
            listen: SocketAddr::from(([127, 0, 0, 1], DEFAULT_PORT)),
            web_config_file: None,
            state_dir: PathBuf::from("/var/lib/mdiag"),
            processes: vec!["mongod".into()],
            alloc_budget: 0.005,
            probe_budget: 0.002,
            probes: vec!["all".to_owned()],
            sample_hz: mdiag_common::perf::DEFAULT_SAMPLE_HZ,
            alloc_window: Duration::from_millis(100),
            flight_before: Duration::from_secs(300),
            flight_after: Duration::from_secs(60),
            flight_max_files: 20,
            flight_max_bytes: 256 << 20,
            max_series: 250,
            top_n: 256,
            lifecycle: LifecycleSection::default(),
            rules: BTreeMap::new(),
        }
    }
}

/// The metrics port: next to mongodb_exporter's 9216.
pub const DEFAULT_PORT: u16 = 9219;

/// Life-cycle thresholds; a key left out keeps the default (or, per rule,
/// the `[agent.lifecycle]` value).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LifecycleSection {
    pub fire_in: Option<u32>,
    pub of_last: Option<u32>,
    pub resolve_after: Option<u32>,
    pub flap_limit: Option<u32>,
    pub flap_windows: Option<u32>,
}

impl LifecycleSection {
    /// `base` with the keys this section sets.
    pub fn over(&self, base: LifecycleConfig) -> LifecycleConfig {
        LifecycleConfig {
            fire_in: self.fire_in.unwrap_or(base.fire_in),
            of_last: self.of_last.unwrap_or(base.of_last),
            resolve_after: self.resolve_after.unwrap_or(base.resolve_after),
            flap_limit: self.flap_limit.unwrap_or(base.flap_limit),
            flap_windows: self.flap_windows.unwrap_or(base.flap_windows),
        }
    }
}

impl AgentConfig {
    /// The probe families to run (`probes`, checked at load: every name
    /// known, at least one).
    pub fn families(&self) -> Selection {
        Selection::of_names(self.probes.iter().map(String::as_str)).unwrap_or_default()
    }

    /// The life cycle of `rule`'s findings.
    pub fn lifecycle_for(&self, rule: &str) -> LifecycleConfig {
        let base = self.lifecycle.over(LifecycleConfig::default());
        self.rules.get(rule).map_or(base, |r| r.over(base))
    }

    /// Reads `path` (`--config`, must exist) or `default` when it exists;
    /// the defaults when neither.
    pub fn load(path: Option<&Path>, default: &Path) -> Result<Self, ConfigError> {
        let path = match path {
            Some(p) => p,
            None if default.exists() => default,
            None => return Ok(Self::default()),
        };
        Self::parse(&read(path)?, path)
    }

    /// Parses a config file's text (only `[agent]` is read here).
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        #[derive(Deserialize)]
        struct File {
            #[serde(default)]
            agent: AgentConfig,
        }
        let file: File = toml::from_str(text).map_err(|e| syntax(path, text, &e))?;
        file.agent.check(path)
    }

    fn check(self, path: &Path) -> Result<Self, ConfigError> {
        let bad = |key, why: &str| ConfigError::Value {
            path: path.to_owned(),
            key,
            why: why.to_owned(),
        };
        if self.window < Duration::from_secs(1) {
            return Err(bad("window", "must be at least 1s (slices are one second)"));
        }
        if !(0.0..=0.1).contains(&self.alloc_budget) || self.alloc_budget.is_nan() {
            return Err(bad(
                "alloc_budget",
                "must be a share of the target's CPU between 0 (allocator probes off) and 0.1",
            ));
        }
        if !(0.0..=1.0).contains(&self.probe_budget) || self.probe_budget.is_nan() {
            return Err(bad(
                "probe_budget",
                "must be a share of the target's CPU between 0 (one attached second a minute) and 1 (always attached)",
            ));
        }
        if self.processes.iter().any(|p| p.is_empty() || p.len() > 15) {
            return Err(bad(
                "processes",
                "names a process by its comm: 1 to 15 characters (e.g. \"mongod\")",
            ));
        }
        if let Err(e) = Selection::of_names(self.probes.iter().map(String::as_str)) {
            return Err(bad("probes", &e.to_string()));
        }
        if let Err(why) = crate::cli_parse::check_sample_hz(self.sample_hz) {
            return Err(bad("sample_hz", &why));
        }
        if self.top_n == 0 {
            return Err(bad("top_n", "must be at least 1"));
        }
        for (rule, section) in std::iter::once(("[agent.lifecycle]", &self.lifecycle))
            .chain(self.rules.iter().map(|(k, v)| (k.as_str(), v)))
        {
            let c = section.over(LifecycleConfig::default());
            if c.fire_in == 0 || c.fire_in > c.of_last || c.resolve_after == 0 {
                return Err(bad(
                    "lifecycle",
                    &format!(
                        "{rule}: need 1 <= fire_in <= of_last and resolve_after >= 1 (got fire_in {} of_last {} resolve_after {})",
                        c.fire_in, c.of_last, c.resolve_after
                    ),
                ));
            }
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<AgentConfig, ConfigError> {
        AgentConfig::parse(text, Path::new("mdiag.toml"))
    }

    #[test]
    fn probes_name_families_or_the_error_names_the_key() {
        use crate::kit::family::Family;
        let c = parse("[agent]\nprobes = [\"sched\", \"softirq\"]\n").unwrap();
        let f = c.families();
        assert!(f.includes(Family::Sched) && !f.includes(Family::Alloc));
        let default = AgentConfig::default().families();
        assert!(Family::ALL.into_iter().all(|f| default.includes(f)));
        let e = parse("[agent]\nprobes = [\"sched\", \"allocator\"]\n").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("probes") && msg.contains("\"allocator\""),
            "{msg}"
        );
        assert!(parse("[agent]\nprobes = []\n").is_err());
    }

    #[test]
    fn sample_hz_defaults_to_99_and_is_bounded() {
        assert_eq!(AgentConfig::default().sample_hz, 99);
        assert_eq!(parse("[agent]\nsample_hz = 49\n").unwrap().sample_hz, 49);
        for bad in ["0", "1001"] {
            let msg = parse(&format!("[agent]\nsample_hz = {bad}\n"))
                .unwrap_err()
                .to_string();
            assert!(msg.contains("sample_hz") && msg.contains("1000"), "{msg}");
        }
    }

    #[test]
    fn no_agent_table_means_defaults() {
        let c = parse("[mongodb]\nuri = \"mongodb://h\"\n").unwrap();
        assert_eq!(c, AgentConfig::default());
        assert_eq!(c.listen.to_string(), "127.0.0.1:9219");
        assert_eq!(c.lifecycle_for("x"), LifecycleConfig::default());
    }

    #[test]
    fn keys_and_per_rule_life_cycles() {
        let c = parse(
            "[agent]\nwindow = \"2s\"\nprocesses = [\"mongod\", \"mdiag-spin\"]\n\
             [agent.lifecycle]\nresolve_after = 4\n\
             [agent.rules.\"host.swappiness\"]\nfire_in = 1\nof_last = 2\n",
        )
        .unwrap();
        assert_eq!(c.window, Duration::from_secs(2));
        assert_eq!(c.lifecycle_for("other").resolve_after, 4);
        let r = c.lifecycle_for("host.swappiness");
        assert_eq!((r.fire_in, r.of_last, r.resolve_after), (1, 2, 4));
    }

    /// The example shipped for /etc/mdiag/mdiag.toml states every default:
    /// it parses, and changes nothing.
    #[test]
    fn the_packaged_example_is_the_defaults() {
        let text = include_str!("../../../packaging/mdiag.toml");
        let mut c = parse(text).unwrap();
        assert_eq!(
            c.lifecycle.over(LifecycleConfig::default()),
            LifecycleConfig::default()
        );
        c.lifecycle = LifecycleSection::default();
        assert_eq!(c, AgentConfig::default());
    }

    #[test]
    fn the_web_config_file_is_a_path() {
        let c = parse("[agent]\nweb_config_file = \"/etc/mdiag/web-config.yml\"\n").unwrap();
        assert_eq!(
            c.web_config_file.as_deref(),
            Some(Path::new("/etc/mdiag/web-config.yml"))
        );
        assert_eq!(AgentConfig::default().web_config_file, None);
    }

    #[test]
    fn mistakes_name_the_key() {
        let e = parse("[agent]\nwindw = \"2s\"\n").unwrap_err().to_string();
        assert!(e.contains("windw"), "{e}");
        let e = parse("[agent]\nwindow = \"soon\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("soon"), "{e}");
        let e = parse("[agent]\nwindow = \"10ms\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("window"), "{e}");
        let e = parse("[agent]\nalloc_budget = 0.5\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("alloc_budget"), "{e}");
        let e = parse("[agent]\nprobe_budget = 1.5\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("probe_budget"), "{e}");
        let e = parse("[agent.lifecycle]\nfire_in = 9\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("fire_in"), "{e}");
    }
}
