//! `tls_server_config` of the web configuration file made into a rustls
//! server configuration: certificate chain and key from PEM (files or
//! inline), client certificates verified against `client_ca_file`, TLS 1.2
//! and 1.3 (rustls has nothing older). The crypto provider is ring, the one
//! the mongodb driver already links: one provider in the binary.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use rustls::{
    RootCertStore, ServerConfig,
    crypto::CryptoProvider,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::WebPkiClientVerifier,
};

use super::web_config::{TlsSection, unsupported_tls_keys};

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
    pub server: Arc<ServerConfig>,
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

/// (key, why) of the first thing wrong.
type Bad = (String, String);

fn bad(key: &str, why: impl Into<String>) -> Bad {
    (format!("tls_server_config.{key}"), why.into())
}

/// PEM from `inline` or from `file` (relative to `dir`), never both: the
/// text and where it came from.
fn pem_source(
    inline: Option<String>,
    file: Option<PathBuf>,
    key: &str,
    dir: &Path,
) -> Result<Option<(Vec<u8>, String)>, Bad> {
    match (inline, file) {
        (Some(_), Some(_)) => Err(bad(
            &format!("{key}_file"),
            format!("give either {key} (inline) or {key}_file, not both"),
        )),
        (Some(text), None) => Ok(Some((text.into_bytes(), format!("inline {key}")))),
        (None, Some(f)) => {
            let f = dir.join(f);
            let bytes = std::fs::read(&f)
                .map_err(|e| bad(&format!("{key}_file"), format!("{}: {e}", f.display())))?;
            Ok(Some((bytes, f.display().to_string())))
        }
        (None, None) => Ok(None),
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
    let cert = pem_source(t.cert, t.cert_file, "cert", dir)?;
    let key = pem_source(t.key, t.key_file, "key", dir)?;
    let ca = pem_source(t.client_ca, t.client_ca_file, "client_ca", dir)?;
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
    let chain = certificates(&cert.0, &cert.1, "cert_file")?;
    let private = PrivateKeyDer::from_pem_slice(&key.0)
        .map_err(|e| bad("key_file", format!("{}: no private key ({e})", key.1)))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = [
        ("TLS12", &rustls::version::TLS12),
        ("TLS13", &rustls::version::TLS13),
    ]
    .into_iter()
    .filter(|(name, _)| (min_version..=max_version).contains(name))
    .map(|(_, v)| v)
    .collect();
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| bad("min_version", e.to_string()))?;
    let builder = match (&ca, client_auth) {
        (Some(_), ClientAuth::None) => {
            return Err(bad(
                "client_ca_file",
                "set without client_auth_type: set client_auth_type: RequireAndVerifyClientCert",
            ));
        }
        (None, ClientAuth::None) => builder.with_no_client_auth(),
        (None, _) => {
            return Err(bad(
                "client_ca_file",
                "missing: client certificates are verified against it",
            ));
        }
        (Some((pem, source)), auth) => {
            let verifier = client_verifier(pem, source, auth, provider)?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut server = builder
        .with_single_cert(chain, private)
        .map_err(|e| bad("key_file", format!("{} with {}: {e}", key.1, cert.1)))?;
    server.alpn_protocols = vec![b"http/1.1".to_vec()];
    server.ignore_client_order = t.prefer_server_cipher_suites.unwrap_or(true);
    Ok(Some(TlsSettings {
        server: Arc::new(server),
        cert_source: cert.1,
        key_source: key.1,
        client_ca_source: ca.map(|c| c.1),
        client_auth,
        min_version,
        max_version,
    }))
}

fn client_verifier(
    pem: &[u8],
    source: &str,
    auth: ClientAuth,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>, Bad> {
    let mut roots = RootCertStore::empty();
    for c in certificates(pem, source, "client_ca_file")? {
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
