//! Certificates made in tests (rcgen, ring): a CA, certificates it signs,
//! and the files a TLS Secret or a web config names. Shared by the unit
//! tests of `agent/web_config.rs` and `agent/web_reload.rs` (declared once,
//! in `agent/mod.rs`) and the integration tests
//! (`metrics_tls.rs`, `packaging.rs`) and the root suite
//! (`tests/root/metrics_tls.rs`) through `#[path]`.
#![allow(
    dead_code,
    clippy::unwrap_used,
    reason = "each test crate uses part of it; a failure is the test failing"
)]

use std::path::Path;

/// A self-signed CA.
pub struct Ca(rcgen::CertifiedIssuer<'static, rcgen::KeyPair>);

impl Ca {
    pub fn new() -> Self {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        // Subjects of their own: with rcgen's one default subject for
        // both, OpenSSL (curl) takes the leaf for self-signed.
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "mdiag test CA");
        let key = rcgen::KeyPair::generate().unwrap();
        Self(rcgen::CertifiedIssuer::self_signed(params, key).unwrap())
    }

    /// The CA's certificate, PEM.
    pub fn pem(&self) -> String {
        self.0.pem()
    }

    /// A certificate this CA signed for `names` (its SANs): (certificate
    /// PEM, key PEM).
    pub fn sign(&self, names: &[&str]) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|s| (*s).to_owned()).collect();
        let mut params = rcgen::CertificateParams::new(names.clone()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, names.join(" "));
        let cert = params.signed_by(&key, &self.0).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// Writes into `dir` a certificate for `names` and its key as `files`
    /// .0 and .1, and this CA as `files`.2.
    pub fn write(&self, dir: &Path, names: &[&str], files: [&str; 3]) {
        let (cert, key) = self.sign(names);
        for (name, pem) in files.into_iter().zip([cert, key, self.pem()]) {
            std::fs::write(dir.join(name), pem).unwrap();
        }
    }
}
