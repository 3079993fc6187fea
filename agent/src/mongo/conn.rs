//! Which mongod to poll, and how to say it without leaking credentials.
//!
//! The connection string comes from `--uri`, else the environment variable
//! [`ENV_URI`], else a config file (`--config FILE`, or [`DEFAULT_CONFIG`]
//! when it exists) with a `[mongodb] uri = "..."` table. TLS and every other
//! driver option pass through the URI untouched. Before a URI is shown,
//! logged or recorded it goes through [`redact`]; driver errors go through
//! [`Redactor::scrub`], which removes the password wherever it appears.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Environment variable holding the connection string.
pub const ENV_URI: &str = "MDIAG_MONGODB_URI";
/// Config file read when no `--config` is given, if it exists.
pub const DEFAULT_CONFIG: &str = "/etc/mdiag/mdiag.toml";
/// mongod's default port.
pub const DEFAULT_PORT: u16 = 27017;

/// Query options whose values are secrets.
const SECRET_OPTIONS: &[&str] = &[
    "authmechanismproperties",
    "tlscertificatekeyfilepassword",
    "sslpemkeypassword",
    "password",
];

#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    #[error("cannot read the config file {}: {source}; fix the path given with --config", path.display())]
    ConfigRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("config file {}: {why}; expected a table like [mongodb] uri = \"mongodb://host:27017\"", path.display())]
    ConfigSyntax { path: PathBuf, why: String },
    #[error(
        "{from}: {why}; expected mongodb://[user:password@]host[:port][/?options] or mongodb+srv://..."
    )]
    BadUri { from: String, why: String },
}

/// A connection string and where it came from.
#[derive(Clone, PartialEq, Eq)]
pub struct Connection {
    /// The URI as given (may hold credentials: never print it, use [`Self::redacted`]).
    pub uri: String,
    /// "--uri", "MDIAG_MONGODB_URI" or "config file PATH".
    pub from: String,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("uri", &redact(&self.uri))
            .field("from", &self.from)
            .finish()
    }
}

impl Connection {
    pub fn redacted(&self) -> String {
        redact(&self.uri)
    }

    /// The hosts of the URI, `None` for `mongodb+srv` (resolved through DNS).
    pub fn hosts(&self) -> Option<Vec<(String, u16)>> {
        parse(&self.uri).ok()?.hosts
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    mongodb: Option<MongoSection>,
    /// `mdiag agent`'s section, checked by `agent::config`.
    #[allow(
        dead_code,
        reason = "parsed so the file's keys are known; the agent checks it"
    )]
    agent: Option<toml::Table>,
    /// The fleet store's section, checked by `fleet::config`.
    #[allow(
        dead_code,
        reason = "parsed so the file's keys are known; fleet::config checks it"
    )]
    fleet: Option<toml::Table>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MongoSection {
    uri: Option<String>,
}

/// Picks the connection: `flag` (`--uri`), else `env` (the value of
/// [`ENV_URI`]), else the config file: `config` (`--config`, must exist) or
/// `default_config` when it exists. `None`: mongod is not polled.
pub fn resolve(
    flag: Option<&str>,
    env: Option<String>,
    config: Option<&Path>,
    default_config: &Path,
) -> Result<Option<Connection>, ConnError> {
    let found = if let Some(uri) = flag {
        Some(Connection {
            uri: uri.to_owned(),
            from: "--uri".into(),
        })
    } else if let Some(uri) = env.filter(|u| !u.trim().is_empty()) {
        Some(Connection {
            uri,
            from: ENV_URI.into(),
        })
    } else {
        let path = match config {
            Some(p) => Some(p),
            None => default_config.exists().then_some(default_config),
        };
        match path {
            Some(path) => read_config(path)?.map(|uri| Connection {
                uri,
                from: format!("config file {}", path.display()),
            }),
            None => None,
        }
    };
    if let Some(c) = &found {
        parse(&c.uri).map_err(|why| ConnError::BadUri {
            from: c.from.clone(),
            why,
        })?;
    }
    Ok(found)
}

fn read_config(path: &Path) -> Result<Option<String>, ConnError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConnError::ConfigRead {
        path: path.to_owned(),
        source,
    })?;
    let file: ConfigFile = toml::from_str(&text).map_err(|e| ConnError::ConfigSyntax {
        path: path.to_owned(),
        // toml's message quotes the offending line, which may hold a password.
        why: crate::config_file::describe(&text, &e),
    })?;
    Ok(file.mongodb.and_then(|m| m.uri))
}

/// Whether `uri` is a connection string mdiag can use (why not, if not).
pub fn check_uri(uri: &str) -> Result<(), String> {
    parse(uri).map(|_| ())
}

/// The parts of a connection string mdiag needs.
#[derive(Debug, PartialEq, Eq)]
struct Parsed<'a> {
    scheme: &'a str,
    /// `user:password` before the '@', if any.
    userinfo: Option<&'a str>,
    /// Hosts with ports (`None` for mongodb+srv).
    hosts: Option<Vec<(String, u16)>>,
    /// Everything after the hosts ("/db?opts"), may be empty.
    rest: &'a str,
    host_text: &'a str,
}

fn parse(uri: &str) -> Result<Parsed<'_>, String> {
    let (scheme, after) = uri
        .split_once("://")
        .ok_or_else(|| "no scheme (mongodb://)".to_string())?;
    if scheme != "mongodb" && scheme != "mongodb+srv" {
        return Err(format!("unknown scheme {scheme:?}"));
    }
    // The user information ends at the last '@' before the options.
    let query_start = after.find('?').unwrap_or(after.len());
    let (userinfo, hosts_and_rest) = match after[..query_start].rfind('@') {
        Some(at) => (Some(&after[..at]), &after[at + 1..]),
        None => (None, after),
    };
    let end = hosts_and_rest
        .find(['/', '?'])
        .unwrap_or(hosts_and_rest.len());
    let (host_text, rest) = hosts_and_rest.split_at(end);
    if host_text.is_empty() {
        return Err("no host".into());
    }
    let hosts = if scheme == "mongodb" {
        let mut hosts = Vec::new();
        for h in host_text.split(',') {
            hosts.push(split_host(h)?);
        }
        Some(hosts)
    } else {
        None
    };
    Ok(Parsed {
        scheme,
        userinfo,
        hosts,
        rest,
        host_text,
    })
}

fn split_host(h: &str) -> Result<(String, u16), String> {
    let bad_port = |p: &str| format!("bad port {p:?} in host {h:?}");
    if let Some(v6) = h.strip_prefix('[') {
        let (addr, tail) = v6
            .split_once(']')
            .ok_or_else(|| format!("unclosed '[' in host {h:?}"))?;
        let port = match tail.strip_prefix(':') {
            Some(p) => p.parse().map_err(|_| bad_port(p))?,
            None if tail.is_empty() => DEFAULT_PORT,
            None => return Err(format!("unexpected {tail:?} after host {h:?}")),
        };
        return Ok((addr.to_owned(), port));
    }
    match h.rsplit_once(':') {
        Some((host, p)) => Ok((host.to_owned(), p.parse().map_err(|_| bad_port(p))?)),
        None if h.is_empty() => Err("empty host".into()),
        None => Ok((h.to_owned(), DEFAULT_PORT)),
    }
}

/// The URI without credentials: the user information becomes `***` and the
/// values of secret options (`authMechanismProperties`,
/// `tlsCertificateKeyFilePassword`, ...) become `***`. A string that does
/// not parse as a connection string is replaced entirely.
pub fn redact(uri: &str) -> String {
    let Ok(p) = parse(uri) else {
        return "<connection string not shown: it does not parse>".into();
    };
    let mut out = format!("{}://", p.scheme);
    if p.userinfo.is_some() {
        out.push_str("***@");
    }
    out.push_str(p.host_text);
    match p.rest.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            let opts: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if SECRET_OPTIONS.contains(&k.to_ascii_lowercase().as_str()) => {
                        format!("{k}=***")
                    }
                    _ => kv.to_owned(),
                })
                .collect();
            out.push_str(&opts.join("&"));
        }
        None => out.push_str(p.rest),
    }
    out
}

/// A connection string for commands shown to people (mongosh in a fix):
/// `uri` with no user information at all and without the options whose
/// value is secret (or was redacted to `***`), and whether it named a user
/// (the server wants authentication). `None` when `uri` does not parse.
pub fn without_credentials(uri: &str) -> Option<(String, bool)> {
    let p = parse(uri).ok()?;
    let mut out = format!("{}://{}", p.scheme, p.host_text);
    match p.rest.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            let kept: Vec<&str> = query
                .split('&')
                .filter(|kv| match kv.split_once('=') {
                    Some((k, v)) => {
                        v != "***" && !SECRET_OPTIONS.contains(&k.to_ascii_lowercase().as_str())
                    }
                    None => !kv.is_empty(),
                })
                .collect();
            if !kept.is_empty() {
                out.push('?');
                out.push_str(&kept.join("&"));
            }
        }
        None => out.push_str(p.rest),
    }
    Some((out, p.userinfo.is_some()))
}

/// Removes a connection's secrets from any text (driver errors, logs).
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    pub fn for_uri(uri: &str) -> Self {
        let mut secrets = vec![uri.to_owned()];
        if let Ok(p) = parse(uri) {
            if let Some(info) = p.userinfo {
                secrets.push(info.to_owned());
                if let Some((user, pass)) = info.split_once(':') {
                    // The password raw and percent-decoded; the user name too.
                    secrets.extend([
                        pass.to_owned(),
                        percent_decode(pass),
                        user.to_owned(),
                        percent_decode(user),
                    ]);
                }
            }
            if let Some((_, query)) = p.rest.split_once('?') {
                for kv in query.split('&') {
                    if let Some((k, v)) = kv.split_once('=')
                        && SECRET_OPTIONS.contains(&k.to_ascii_lowercase().as_str())
                    {
                        secrets.push(v.to_owned());
                        secrets.push(percent_decode(v));
                    }
                }
            }
        }
        // Longest first, so a secret containing another is removed whole;
        // very short ones (a one-letter user) would eat ordinary words.
        secrets.retain(|s| s.len() >= 3);
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Self { secrets }
    }

    /// `text` with every secret replaced by `***`.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "***");
            }
        }
        out
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = s.get(i + 1..i + 3)
            && let Ok(b) = u8::from_str_radix(hex, 16)
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_get_the_uri_without_any_credentials() {
        let (uri, auth) = without_credentials(
            "mongodb://admin:s3cr%40t@db1:27018,db2/admin?replicaSet=rs0&authMechanismProperties=AWS_SESSION_TOKEN:tok&tls=true",
        )
        .unwrap();
        assert_eq!(uri, "mongodb://db1:27018,db2/admin?replicaSet=rs0&tls=true");
        assert!(auth);
        assert!(!uri.contains("s3cr") && !uri.contains("admin:") && !uri.contains("tok"));
        // A redacted URI gives the same, and no user means no authentication.
        let redacted = redact("mongodb://u:p@h:1/?authSource=admin");
        assert_eq!(
            without_credentials(&redacted),
            Some(("mongodb://h:1/?authSource=admin".into(), true))
        );
        assert_eq!(
            without_credentials("mongodb://127.0.0.1:27017"),
            Some(("mongodb://127.0.0.1:27017".into(), false))
        );
        assert_eq!(without_credentials("not a uri"), None);
    }

    #[test]
    fn redaction_removes_credentials_and_secret_options() {
        assert_eq!(
            redact("mongodb://admin:s3cr%40t@db1:27017,db2/admin?tls=true&replicaSet=rs0"),
            "mongodb://***@db1:27017,db2/admin?tls=true&replicaSet=rs0"
        );
        assert_eq!(
            redact("mongodb://127.0.0.1:27017"),
            "mongodb://127.0.0.1:27017"
        );
        assert_eq!(
            redact(
                "mongodb+srv://u:p@cluster0.example.net/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:abc&tlsCertificateKeyFilePassword=pw"
            ),
            "mongodb+srv://***@cluster0.example.net/?authMechanism=MONGODB-AWS&authMechanismProperties=***&tlsCertificateKeyFilePassword=***"
        );
        // A '/' or '@' in an unescaped password still ends up hidden.
        let r = redact("mongodb://bob:pa/ss@word@host:1");
        assert_eq!(r, "mongodb://***@host:1");
        assert!(!redact("not a uri with secret").contains("secret"));
    }

    #[test]
    fn scrub_removes_passwords_from_error_text() {
        let uri = "mongodb://alice:top%2Fsecret@db:27017/?tlsCertificateKeyFilePassword=keypass";
        let r = Redactor::for_uri(uri);
        let text = format!(
            "error connecting to {uri}: auth failed for alice with top/secret and top%2Fsecret, key keypass"
        );
        let s = r.scrub(&text);
        for secret in ["top/secret", "top%2Fsecret", "keypass", "alice"] {
            assert!(!s.contains(secret), "{secret} in {s}");
        }
        assert!(s.contains("auth failed"));
        let c = Connection {
            uri: uri.into(),
            from: "--uri".into(),
        };
        assert!(!format!("{c:?}").contains("secret"));
    }

    #[test]
    fn hosts_and_ports() {
        let c = |u: &str| Connection {
            uri: u.into(),
            from: "--uri".into(),
        };
        assert_eq!(
            c("mongodb://127.0.0.1:27018").hosts(),
            Some(vec![("127.0.0.1".into(), 27018)])
        );
        assert_eq!(
            c("mongodb://u:p@[::1]:28000,localhost/?x=1").hosts(),
            Some(vec![("::1".into(), 28000), ("localhost".into(), 27017)])
        );
        assert_eq!(c("mongodb+srv://cluster.example.net").hosts(), None);
        assert!(parse("http://x").is_err());
        assert!(parse("mongodb://").is_err());
        assert!(parse("mongodb://h:notaport").is_err());
    }

    #[test]
    fn precedence_flag_env_config() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("mdiag.toml");
        std::fs::write(&cfg, "[mongodb]\nuri = \"mongodb://cfg:1\"\n").unwrap();
        let missing_default = dir.path().join("absent.toml");
        let env = || Some("mongodb://env:2".to_string());
        let r = resolve(Some("mongodb://flag:3"), env(), Some(&cfg), &cfg)
            .unwrap()
            .unwrap();
        assert_eq!(
            (r.uri.as_str(), r.from.as_str()),
            ("mongodb://flag:3", "--uri")
        );
        let r = resolve(None, env(), Some(&cfg), &cfg).unwrap().unwrap();
        assert_eq!(
            (r.uri.as_str(), r.from.as_str()),
            ("mongodb://env:2", ENV_URI)
        );
        let r = resolve(None, Some("  ".into()), Some(&cfg), &missing_default)
            .unwrap()
            .unwrap();
        assert_eq!(r.uri, "mongodb://cfg:1");
        assert!(r.from.starts_with("config file "));
        // The default config is used only when it exists.
        let r = resolve(None, None, None, &cfg).unwrap().unwrap();
        assert_eq!(r.uri, "mongodb://cfg:1");
        assert!(
            resolve(None, None, None, &missing_default)
                .unwrap()
                .is_none()
        );
        // An explicit config that is missing or wrong is an error naming it.
        let e = resolve(None, None, Some(&missing_default), &cfg).unwrap_err();
        assert!(e.to_string().contains("absent.toml"), "{e}");
        std::fs::write(
            &cfg,
            "[mongodb]\nuri = \"mongodb://u:hunter2@h\"\nport = 5\n",
        )
        .unwrap();
        let e = resolve(None, None, Some(&cfg), &cfg)
            .unwrap_err()
            .to_string();
        assert!(e.contains("mdiag.toml") && !e.contains("hunter2"), "{e}");
        // A config without a [mongodb] table: no polling.
        std::fs::write(&cfg, "").unwrap();
        assert!(resolve(None, None, Some(&cfg), &cfg).unwrap().is_none());
        // A bad URI names its source and does not echo the credentials.
        let e = resolve(Some("mongo://u:hunter2@h"), None, None, &missing_default)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--uri") && !e.contains("hunter2"), "{e}");
    }
}
