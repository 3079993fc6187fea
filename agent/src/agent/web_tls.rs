//! `tls_server_config` of the web configuration file made into a rustls
//! server configuration: certificate chain and key from PEM (files or
//! inline), client certificates verified against `client_ca_file`, TLS 1.2
//! and 1.3 (rustls has nothing older). The crypto provider is ring, the one
//! the mongodb driver already links: one provider in the binary.
//!
//! Files are read again when they change (`web_reload.rs`), each through
//! rustls' own hooks: the certificate and key through a certificate
//! resolver of ours ([`CertFiles`]), asked at every handshake; a changed
//! client CA makes a new server configuration (a new verifier, over the same
//! resolver), which every new connection takes from [`TlsSettings::server`]
//! (a verifier cannot swap its CA underneath: rustls borrows the CA names it
//! sends in the certificate request from the verifier itself). That new
//! configuration has a new session cache, so a session opened under
//! the old CA is not resumed under the new one. Start and reload read the
//! files with the same code: what a restart would refuse, a reload refuses.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use rustls::{
    RootCertStore, ServerConfig, SupportedProtocolVersion,
    crypto::CryptoProvider,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier},
    sign::CertifiedKey,
};

use super::web_config::{TlsSection, unsupported_tls_keys};
use super::web_reload::{ReloadCounts, Reloading};

/// Who must show a client certificate (`client_auth_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// `NoClientCert` (the default).
    None,
    /// `VerifyClientCertIfGiven`: verified when given, optional.
    VerifyIfGiven,
    /// `RequireAndVerifyClientCert`: no verified certificate, no connection.
    RequireAndVerify,
}

impl ClientAuth {
    fn parse(s: Option<&str>) -> Result<Self, String> {
        match s.unwrap_or("") {
            "" | "NoClientCert" => Ok(Self::None),
            "VerifyClientCertIfGiven" => Ok(Self::VerifyIfGiven),
            "RequireAndVerifyClientCert" => Ok(Self::RequireAndVerify),
            "RequestClientCert" | "RequireAnyClientCert" => Err(format!(
                "{} accepts certificates without verifying them: not supported by mdiag; use RequireAndVerifyClientCert",
                s.unwrap_or("")
            )),
            other => Err(format!(
                "{other:?} is not one of NoClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert"
            )),
        }
    }

    /// As `mdiag check-config` shows it.
    pub fn describe(self, ca: Option<&str>) -> String {
        let ca = ca.unwrap_or("-");
        match self {
            Self::None => "not asked (NoClientCert)".into(),
            Self::VerifyIfGiven => format!("verified against {ca} when given"),
            Self::RequireAndVerify => format!("required, verified against {ca}"),
        }
    }
}

/// The TLS settings in effect. `Debug` shows where the key came from, not
/// the key.
#[derive(Clone)]
pub struct TlsSettings {
    server: Arc<Reloading<Arc<ServerConfig>>>,
    certs: Arc<CertFiles>,
    pub cert_source: String,
    pub key_source: String,
    pub client_ca_source: Option<String>,
    pub client_auth: ClientAuth,
    pub min_version: &'static str,
    pub max_version: &'static str,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("cert", &self.cert_source)
            .field("key", &self.key_source)
            .field("client_ca", &self.client_ca_source)
            .field("client_auth", &self.client_auth)
            .field("versions", &(self.min_version, self.max_version))
            .finish_non_exhaustive()
    }
}

impl TlsSettings {
    /// The server configuration for a new connection: a new one when the
    /// client CA file changed (its certificate is the resolver's, which
    /// follows the certificate files at each handshake).
    pub fn server(&self) -> Arc<ServerConfig> {
        self.server.get()
    }

    /// Reloads so far of the files watched (none for inline PEM).
    pub fn reloads(&self) -> Vec<ReloadCounts> {
        let certs = &self.certs.0;
        [
            certs.watches_files().then(|| certs.counts()),
            self.server.watches_files().then(|| self.server.counts()),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// The certificate in service at `now` (tests: the clock moved on).
    #[cfg(test)]
    pub(super) fn certificate_at(&self, now: std::time::Instant) -> Arc<CertifiedKey> {
        self.certs.0.get_at(now)
    }

    /// The server configuration at `now` (tests: the clock moved on).
    #[cfg(test)]
    pub(super) fn server_at(&self, now: std::time::Instant) -> Arc<ServerConfig> {
        self.server.get_at(now)
    }
}

/// (key, why) of the first thing wrong.
pub(super) type Bad = (String, String);

fn bad(key: &str, why: impl Into<String>) -> Bad {
    (format!("tls_server_config.{key}"), why.into())
}

/// PEM given inline or as a file; `key` is its key in the file (`cert`,
/// `key`, `client_ca`).
#[derive(Debug, Clone)]
enum Source {
    Inline { pem: Arc<[u8]>, key: &'static str },
    File { path: PathBuf, key: &'static str },
}

impl Source {
    /// From `inline` or from `file` (relative to `dir`), never both.
    fn new(
        inline: Option<String>,
        file: Option<PathBuf>,
        key: &'static str,
        dir: &Path,
    ) -> Result<Option<Self>, Bad> {
        match (inline, file) {
            (Some(_), Some(_)) => Err(bad(
                &format!("{key}_file"),
                format!("give either {key} (inline) or {key}_file, not both"),
            )),
            (Some(text), None) => Ok(Some(Self::Inline {
                pem: text.into_bytes().into(),
                key,
            })),
            (None, Some(f)) => Ok(Some(Self::File {
                path: dir.join(f),
                key,
            })),
            (None, None) => Ok(None),
        }
    }

    /// Where it comes from, as messages name it.
    fn name(&self) -> String {
        match self {
            Self::Inline { key, .. } => format!("inline {key}"),
            Self::File { path, .. } => path.display().to_string(),
        }
    }

    /// The file to watch, if any.
    fn file(&self) -> Option<PathBuf> {
        match self {
            Self::Inline { .. } => None,
            Self::File { path, .. } => Some(path.clone()),
        }
    }

    fn read(&self) -> Result<Arc<[u8]>, Bad> {
        match self {
            Self::Inline { pem, .. } => Ok(pem.clone()),
            Self::File { path, key } => std::fs::read(path)
                .map(Into::into)
                .map_err(|e| bad(&format!("{key}_file"), format!("{}: {e}", path.display()))),
        }
    }
}

/// The certificates of a PEM text (at least one).
fn certificates(pem: &[u8], source: &str, key: &str) -> Result<Vec<CertificateDer<'static>>, Bad> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(key, format!("{source}: {e}")))?;
    if certs.is_empty() {
        return Err(bad(key, format!("{source}: no CERTIFICATE in it")));
    }
    Ok(certs)
}

/// The certificate chain of `cert` with the key of `key`, checked to be
/// the certificate's.
fn certified_key(
    cert: &Source,
    key: &Source,
    provider: &CryptoProvider,
) -> Result<Arc<CertifiedKey>, Bad> {
    let chain = certificates(&cert.read()?, &cert.name(), "cert_file")?;
    let private = PrivateKeyDer::from_pem_slice(&key.read()?)
        .map_err(|e| bad("key_file", format!("{}: no private key ({e})", key.name())))?;
    CertifiedKey::from_der(chain, private, provider)
        .map(Arc::new)
        .map_err(|e| {
            bad(
                "key_file",
                format!("{} with {}: {e}", key.name(), cert.name()),
            )
        })
}

/// The certificate and key the server shows: the files' current pair, read
/// again when they change.
#[derive(Debug)]
struct CertFiles(Reloading<Arc<CertifiedKey>>);

impl CertFiles {
    fn new(cert: Source, key: Source, provider: Arc<CryptoProvider>) -> Result<Self, Bad> {
        let files = cert.file().into_iter().chain(key.file()).collect();
        Reloading::new("certificate", files, move || {
            certified_key(&cert, &key, &provider)
        })
        .map(Self)
    }
}

impl ResolvesServerCert for CertFiles {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.get())
    }
}

fn version(s: Option<&str>, default: &'static str, key: &str) -> Result<&'static str, Bad> {
    match s.unwrap_or(default) {
        "TLS12" => Ok("TLS12"),
        "TLS13" => Ok("TLS13"),
        "TLS10" | "TLS11" => Err(bad(
            key,
            "rustls speaks TLS12 and TLS13 only (older versions are broken)",
        )),
        other => Err(bad(key, format!("{other:?} is not TLS12 or TLS13"))),
    }
}

/// What a server configuration is made of: everything but the client CA's
/// content, which is read at each build.
struct Recipe {
    provider: Arc<CryptoProvider>,
    versions: Vec<&'static SupportedProtocolVersion>,
    client_auth: ClientAuth,
    ca: Option<Source>,
    certs: Arc<CertFiles>,
    ignore_client_order: bool,
}

impl Recipe {
    fn build(&self) -> Result<Arc<ServerConfig>, Bad> {
        let builder = ServerConfig::builder_with_provider(self.provider.clone())
            .with_protocol_versions(&self.versions)
            .map_err(|e| bad("min_version", e.to_string()))?;
        let builder = match &self.ca {
            None => builder.with_no_client_auth(),
            Some(ca) => builder.with_client_cert_verifier(client_verifier(
                ca,
                self.client_auth,
                self.provider.clone(),
            )?),
        };
        let mut server = builder.with_cert_resolver(self.certs.clone());
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        server.ignore_client_order = self.ignore_client_order;
        Ok(Arc::new(server))
    }
}

/// The rustls configuration of `t`; `None` when it names no certificate and
/// nothing else (the toolkit's "TLS off").
pub(super) fn settings(t: TlsSection, dir: &Path) -> Result<Option<TlsSettings>, Bad> {
    if let Some(e) = unsupported_tls_keys(&t) {
        return Err(e);
    }
    let client_auth =
        ClientAuth::parse(t.client_auth_type.as_deref()).map_err(|e| bad("client_auth_type", e))?;
    let min_version = version(t.min_version.as_deref(), "TLS12", "min_version")?;
    let max_version = version(t.max_version.as_deref(), "TLS13", "max_version")?;
    if min_version > max_version {
        return Err(bad(
            "min_version",
            format!("{min_version} is above max_version {max_version}"),
        ));
    }
    let cert = Source::new(t.cert, t.cert_file, "cert", dir)?;
    let key = Source::new(t.key, t.key_file, "key", dir)?;
    let ca = Source::new(t.client_ca, t.client_ca_file, "client_ca", dir)?;
    let (cert, key) = match (cert, key) {
        (None, None) if ca.is_none() && client_auth == ClientAuth::None => return Ok(None),
        (Some(c), Some(k)) => (c, k),
        (None, _) => {
            return Err(bad(
                "cert_file",
                "missing: TLS needs cert_file and key_file",
            ));
        }
        (_, None) => return Err(bad("key_file", "missing: TLS needs cert_file and key_file")),
    };
    match (&ca, client_auth) {
        (Some(_), ClientAuth::None) => {
            return Err(bad(
                "client_ca_file",
                "set without client_auth_type: set client_auth_type: RequireAndVerifyClientCert",
            ));
        }
        (None, ClientAuth::VerifyIfGiven | ClientAuth::RequireAndVerify) => {
            return Err(bad(
                "client_ca_file",
                "missing: client certificates are verified against it",
            ));
        }
        _ => {}
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions = [
        ("TLS12", &rustls::version::TLS12),
        ("TLS13", &rustls::version::TLS13),
    ]
    .into_iter()
    .filter(|(name, _)| (min_version..=max_version).contains(name))
    .map(|(_, v)| v)
    .collect();
    let (cert_source, key_source) = (cert.name(), key.name());
    let client_ca_source = ca.as_ref().map(Source::name);
    let certs = Arc::new(CertFiles::new(cert, key, provider.clone())?);
    let recipe = Recipe {
        provider,
        versions,
        client_auth,
        ca: ca.clone(),
        certs: certs.clone(),
        ignore_client_order: t.prefer_server_cipher_suites.unwrap_or(true),
    };
    let ca_file = ca.and_then(|c| c.file()).into_iter().collect();
    let server = Reloading::new("client_ca", ca_file, move || recipe.build())?;
    Ok(Some(TlsSettings {
        server: Arc::new(server),
        certs,
        cert_source,
        key_source,
        client_ca_source,
        client_auth,
        min_version,
        max_version,
    }))
}

fn client_verifier(
    ca: &Source,
    auth: ClientAuth,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, Bad> {
    let source = ca.name();
    let mut roots = RootCertStore::empty();
    for c in certificates(&ca.read()?, &source, "client_ca_file")? {
        roots
            .add(c)
            .map_err(|e| bad("client_ca_file", format!("{source}: {e}")))?;
    }
    let mut v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
    if auth == ClientAuth::VerifyIfGiven {
        v = v.allow_unauthenticated();
    }
    v.build()
        .map_err(|e| bad("client_ca_file", format!("{source}: {e}")))
}
