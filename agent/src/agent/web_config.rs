//! The web configuration file of `/metrics` off loopback: the format every
//! Prometheus exporter reads with `--web.config.file` (exporter-toolkit's
//! `docs/web-configuration.md`), so an operator writes the same YAML for the
//! agent as for node_exporter. Named by `[agent] web_config_file`.
//!
//! Supported: `tls_server_config` (certificate and key from PEM files or
//! inline, client certificates verified against a CA, TLS versions),
//! `basic_auth_users` (bcrypt hashes), `http_server_config.headers`. What
//! rustls or mdiag does not do (`cipher_suites`, `curve_preferences`,
//! `client_allowed_sans`, `rate_limit`, `http2: true`, client certificates
//! accepted unverified) is an error naming the key, never silently dropped.
//! This file is read once, at start (a change of it waits for a restart);
//! the certificate, key and client CA files it names are read again when
//! they change, as the toolkit does (`web_reload.rs`).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    str::FromStr,
};

use serde::Deserialize;

use super::web_tls::{self, ClientAuth, TlsSettings};

/// Why the web configuration file cannot be used (each names the file and,
/// where there is one, the key).
#[derive(Debug, thiserror::Error)]
pub enum WebConfigError {
    #[error("web config file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("web config file {}: {why}", path.display())]
    Syntax { path: PathBuf, why: String },
    #[error("web config file {}: {key}: {why}", path.display())]
    Value {
        path: PathBuf,
        key: String,
        why: String,
    },
}

/// The file as written (every key the toolkit documents, so one mdiag does
/// not support is named as such rather than as unknown).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    tls_server_config: Option<TlsSection>,
    http_server_config: Option<HttpSection>,
    #[serde(default)]
    basic_auth_users: BTreeMap<String, String>,
    rate_limit: Option<serde_norway::Value>,
}

/// `tls_server_config`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TlsSection {
    pub cert: Option<String>,
    pub key: Option<String>,
    pub client_ca: Option<String>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    pub client_ca_file: Option<PathBuf>,
    pub client_auth_type: Option<String>,
    pub min_version: Option<String>,
    pub max_version: Option<String>,
    pub prefer_server_cipher_suites: Option<bool>,
    client_allowed_sans: Option<Vec<String>>,
    cipher_suites: Option<Vec<String>>,
    curve_preferences: Option<Vec<String>>,
}

/// `http_server_config`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpSection {
    http2: Option<bool>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

/// The response headers `http_server_config.headers` may set.
const HEADERS: [&str; 5] = [
    "Content-Security-Policy",
    "X-Frame-Options",
    "X-Content-Type-Options",
    "X-XSS-Protection",
    "Strict-Transport-Security",
];

/// The settings in effect. `Debug` shows no secret (no key, no hash).
#[derive(Clone)]
pub struct WebConfig {
    pub path: PathBuf,
    pub tls: Option<TlsSettings>,
    /// User name → bcrypt hash (checked to parse at load).
    pub users: BTreeMap<String, String>,
    /// Added to every response.
    pub headers: Vec<(String, String)>,
}

impl std::fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebConfig")
            .field("path", &self.path)
            .field("tls", &self.tls)
            .field("basic_auth_users", &self.users.keys().collect::<Vec<_>>())
            .field("headers", &self.headers)
            .finish()
    }
}

impl WebConfig {
    /// Reads and checks `path`: every file it names is read now, so a
    /// missing certificate stops the agent at start, naming it.
    pub fn load(path: &Path) -> Result<Self, WebConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| WebConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses the file's text; relative file names are taken from the
    /// file's own directory (as the toolkit does).
    pub fn parse(text: &str, path: &Path) -> Result<Self, WebConfigError> {
        let bad = |key: &str, why: String| WebConfigError::Value {
            path: path.to_owned(),
            key: key.to_owned(),
            why,
        };
        // An empty file (or comments only) is YAML's null: no TLS, no auth.
        let file: File = match serde_norway::from_str::<Option<File>>(text) {
            Ok(f) => f.unwrap_or_default(),
            Err(e) => {
                return Err(WebConfigError::Syntax {
                    path: path.to_owned(),
                    why: e.to_string(),
                });
            }
        };
        if file.rate_limit.is_some() {
            return Err(bad(
                "rate_limit",
                "not supported by mdiag (one scrape copies one string); remove it".into(),
            ));
        }
        let headers = match file.http_server_config {
            Some(h) => http_headers(h).map_err(|(k, why)| bad(&k, why))?,
            None => Vec::new(),
        };
        for (user, hash) in &file.basic_auth_users {
            if let Err(e) = bcrypt::HashParts::from_str(hash) {
                return Err(bad(
                    &format!("basic_auth_users.{user}"),
                    format!(
                        "not a bcrypt hash ({e}); make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`"
                    ),
                ));
            }
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        let tls = match file.tls_server_config {
            Some(t) => web_tls::settings(t, dir).map_err(|(k, why)| bad(&k, why))?,
            None => None,
        };
        Ok(Self {
            path: path.to_owned(),
            tls,
            users: file.basic_auth_users,
            headers,
        })
    }

    /// Whether a client must prove who it is (a password or a verified
    /// certificate) to read `/metrics`.
    pub fn authenticates(&self) -> bool {
        !self.users.is_empty()
            || self
                .tls
                .as_ref()
                .is_some_and(|t| t.client_auth == ClientAuth::RequireAndVerify)
    }

    /// The settings in effect, for `mdiag check-config`: file names, user
    /// names, versions; no key, no hash.
    pub fn summary(&self) -> String {
        let tls = self.tls.as_ref().map_or_else(
            || "off (plain HTTP)".to_owned(),
            |t| {
                let reload = if t.reloads().is_empty() {
                    ""
                } else {
                    " (files read again when they change)"
                };
                format!(
                    "on: certificate {}, key {}, versions {} to {}, client certificates: {}{reload}",
                    t.cert_source,
                    t.key_source,
                    t.min_version,
                    t.max_version,
                    t.client_auth.describe(t.client_ca_source.as_deref()),
                )
            },
        );
        let users = if self.users.is_empty() {
            "none (no password asked)".to_owned()
        } else {
            self.users.keys().cloned().collect::<Vec<_>>().join(", ")
        };
        let headers = if self.headers.is_empty() {
            "none".to_owned()
        } else {
            self.headers
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join("; ")
        };
        format!(
            "  file: {}\n  tls: {tls}\n  basic_auth_users: {users}\n  headers: {headers}\n",
            self.path.display()
        )
    }
}

/// The warning the agent logs at start when `/metrics` is open to more
/// than this host: listening off loopback with no authentication (anyone
/// who reaches the port reads it), or with passwords over plain HTTP.
/// Loopback, or TLS with a password or a verified client certificate: none.
pub fn exposure(listen: std::net::SocketAddr, web: Option<&WebConfig>) -> Option<String> {
    if listen.ip().is_loopback() {
        return None;
    }
    let fix = "set [agent] web_config_file (TLS and basic auth, docs/agent.md), \
               keep listen on loopback, or restrict the port (firewall, NetworkPolicy)";
    match web {
        Some(w) if w.authenticates() && w.tls.is_some() => None,
        Some(w) if w.authenticates() => Some(format!(
            "/metrics listens on {listen} without TLS: the basic auth password crosses the network in clear text; \
             set tls_server_config in {}",
            w.path.display()
        )),
        _ => Some(format!(
            "/metrics listens on {listen} without authentication: anyone who reaches the port reads the host's metrics; {fix}"
        )),
    }
}

fn http_headers(h: HttpSection) -> Result<Vec<(String, String)>, (String, String)> {
    if h.http2 == Some(true) {
        return Err((
            "http_server_config.http2".into(),
            "mdiag serves HTTP/1.1 only: remove the key or set it to false".into(),
        ));
    }
    let mut out = Vec::new();
    for (name, value) in h.headers {
        let key = format!("http_server_config.headers.{name}");
        let Some(known) = HEADERS.iter().find(|k| k.eq_ignore_ascii_case(&name)) else {
            return Err((key, format!("not one of {}", HEADERS.join(", "))));
        };
        if value.is_empty() {
            continue;
        }
        if hyper::header::HeaderValue::from_str(&value).is_err() {
            return Err((key, "not a valid header value".into()));
        }
        out.push(((*known).to_owned(), value));
    }
    Ok(out)
}

/// Keys of `tls_server_config` the toolkit has and mdiag refuses, with why.
pub(super) fn unsupported_tls_keys(t: &TlsSection) -> Option<(String, String)> {
    let rustls_defaults =
        "not supported by mdiag: rustls chooses them (its defaults are safe); remove the key";
    if t.cipher_suites.as_ref().is_some_and(|v| !v.is_empty()) {
        return Some((
            "tls_server_config.cipher_suites".into(),
            rustls_defaults.into(),
        ));
    }
    if t.curve_preferences.as_ref().is_some_and(|v| !v.is_empty()) {
        return Some((
            "tls_server_config.curve_preferences".into(),
            rustls_defaults.into(),
        ));
    }
    if t.client_allowed_sans
        .as_ref()
        .is_some_and(|v| !v.is_empty())
    {
        return Some((
            "tls_server_config.client_allowed_sans".into(),
            "not supported by mdiag: trust a CA that signs only the scrapers' certificates".into(),
        ));
    }
    None
}

#[cfg(test)]
#[path = "web_config_tests.rs"]
mod tests;
