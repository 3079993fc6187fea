//! `/metrics` with a web configuration file, through the real server
//! (`mdiag::agent::serve`, no BPF needed) and a real HTTPS client (hyper's
//! over tokio-rustls): the right CA and password read the metrics, a wrong
//! or missing password gets 401, plain HTTP gets nothing, and with client
//! certificates required a client without one (or with one from another
//! CA) is refused. Certificates are made here (rcgen).
//!
//! Renewal without a restart: a certificate replaced while a client scrapes
//! (as the kubelet updates a secret volume) is presented by the next
//! handshakes and no scrape fails meanwhile; a broken replacement keeps the
//! previous certificate serving; a new client CA admits its clients.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers: a failure is the test failing"
)]

use std::{
    net::SocketAddr,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use base64::Engine;
use http_body_util::{BodyExt, Empty};
use hyper::{Request, StatusCode, body::Bytes};
use hyper_util::rt::TokioIo;
use mdiag::agent::{
    serve::{self, Published},
    web_config::WebConfig,
};
use rustls::{
    ClientConfig, RootCertStore,
    pki_types::{CertificateDer, PrivateKeyDer, ServerName, pem::PemObject},
};

const METRICS: &str = "# TYPE mdiag_test gauge\nmdiag_test 1\n# EOF\n";
const PASSWORD: &str = "correct horse";

#[path = "support/pki.rs"]
mod support;
use support::Ca;

/// Writes the server's files and a web config with `extra` TLS lines into
/// `dir`; starts the server on a free loopback port.
fn server(dir: &Path, ca: &Ca, extra_tls: &str) -> SocketAddr {
    ca.write(
        dir,
        &["localhost", "127.0.0.1"],
        ["server.crt", "server.key", "ca.crt"],
    );
    let hash = bcrypt::hash(PASSWORD, 4).unwrap();
    let path = dir.join("web-config.yml");
    std::fs::write(
        &path,
        format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n{extra_tls}\
             basic_auth_users:\n  prometheus: {hash}\n"
        ),
    )
    .unwrap();
    start(&path).0
}

/// Starts the server with the web config file `path`, on a free loopback port.
fn start(path: &Path) -> (SocketAddr, Arc<Published>) {
    let web = WebConfig::load(path).unwrap();
    let published = Arc::new(Published::default());
    published.set(METRICS.to_owned());
    let addr = serve::start(
        "127.0.0.1:0".parse().unwrap(),
        published.clone(),
        Some(&web),
    )
    .unwrap();
    (addr, published)
}

/// A client trusting `ca`, showing `identity` (certificate and key PEM) if given.
fn client(ca: &Ca, identity: Option<(String, String)>) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.pem().as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    Arc::new(match identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => builder
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(cert.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap(),
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
    })
}

struct Answer {
    status: StatusCode,
    challenge: Option<String>,
    body: String,
    /// The certificate the server presented (DER), over TLS.
    cert: Option<Vec<u8>>,
}

/// GET /metrics over one new connection: TLS with `tls`, else plain; with
/// basic auth `password` for user prometheus if given.
async fn get(
    addr: SocketAddr,
    tls: Option<Arc<ClientConfig>>,
    password: Option<&str>,
) -> Result<Answer, String> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let mut req = Request::get(format!("https://localhost:{}/metrics", addr.port()))
        .header(hyper::header::HOST, "localhost");
    if let Some(p) = password {
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("prometheus:{p}"));
        req = req.header(hyper::header::AUTHORIZATION, format!("Basic {b64}"));
    }
    let req = req.body(Empty::<Bytes>::new()).unwrap();
    match tls {
        None => send(TokioIo::new(tcp), req).await,
        Some(config) => {
            let name = ServerName::try_from("localhost").unwrap();
            let stream = tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await
                .map_err(|e| format!("handshake: {e}"))?;
            let cert = stream
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .map(|c| c.to_vec());
            let answer = send(TokioIo::new(stream), req).await?;
            Ok(Answer { cert, ..answer })
        }
    }
}

async fn send<S>(io: TokioIo<S>, req: Request<Empty<Bytes>>) -> Result<Answer, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let res = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = res.status();
    let challenge = res
        .headers()
        .get(hyper::header::WWW_AUTHENTICATE)
        .map(|v| v.to_str().unwrap().to_owned());
    let body = res
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok(Answer {
        status,
        challenge,
        body: String::from_utf8_lossy(&body).into_owned(),
        cert: None,
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn https_with_basic_auth() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new();
    let addr = server(dir.path(), &ca, "");
    let tls = client(&ca, None);
    runtime().block_on(async {
        let ok = get(addr, Some(tls.clone()), Some(PASSWORD)).await.unwrap();
        assert_eq!(ok.status, StatusCode::OK, "{}", ok.body);
        assert_eq!(ok.body, METRICS);
        // Remembered or not, the same password passes again.
        let again = get(addr, Some(tls.clone()), Some(PASSWORD)).await.unwrap();
        assert_eq!(again.status, StatusCode::OK);
        for password in [Some("wrong"), Some(""), None] {
            let no = get(addr, Some(tls.clone()), password).await.unwrap();
            assert_eq!(no.status, StatusCode::UNAUTHORIZED, "{password:?}");
            assert_eq!(no.challenge.as_deref(), Some("Basic realm=\"mdiag\""));
            assert!(!no.body.contains("mdiag_test"), "{}", no.body);
        }
        // Plain HTTP to the TLS port gets no HTTP answer at all.
        let plain = get(addr, None, Some(PASSWORD)).await;
        assert!(
            plain.is_err(),
            "plain HTTP answered: {}",
            plain.unwrap().body
        );
        // A client that does not trust the agent's CA does not connect.
        let stranger = client(&Ca::new(), None);
        let e = get(addr, Some(stranger), Some(PASSWORD))
            .await
            .err()
            .unwrap();
        assert!(e.contains("handshake"), "{e}");
    });
}

#[test]
fn client_certificates_are_required_and_verified() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new();
    let addr = server(
        dir.path(),
        &ca,
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n",
    );
    runtime().block_on(async {
        let with_cert = client(&ca, Some(ca.sign(&["prometheus"])));
        let ok = get(addr, Some(with_cert), Some(PASSWORD)).await.unwrap();
        assert_eq!(ok.status, StatusCode::OK, "{}", ok.body);
        assert_eq!(ok.body, METRICS);
        // No certificate, or one another CA signed: no answer, even with
        // the right password.
        let other = Ca::new();
        for identity in [None, Some(other.sign(&["prometheus"]))] {
            let shown = identity.is_some();
            let r = get(addr, Some(client(&ca, identity)), Some(PASSWORD)).await;
            assert!(
                r.is_err(),
                "certificate shown: {shown}: answered {}",
                r.unwrap().status
            );
        }
    });
}

/// A certificate's DER, from its PEM.
fn der(pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(pem.as_bytes())
        .unwrap()
        .to_vec()
}

/// `config` with a full handshake on every connection: a resumed session
/// presents no certificate, so what a client sees would be the old one.
fn fresh_handshakes(config: Arc<ClientConfig>) -> Arc<ClientConfig> {
    let mut c = (*config).clone();
    c.resumption = rustls::client::Resumption::disabled();
    Arc::new(c)
}

/// Writes `text` to `path` as renewers do: a new file renamed over the old.
fn replace(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// `cert` and `key` as the kubelet writes a secret volume (how cert-manager's
/// renewals reach a pod): the files in a new directory, a new `..data` link
/// to it renamed over the old one, `tls.crt` and `tls.key` links through
/// `..data`.
fn secret_volume(dir: &Path, version: u32, cert: &str, key: &str) {
    let data = format!("..2026_01_01_00_00_0{version}");
    std::fs::create_dir(dir.join(&data)).unwrap();
    std::fs::write(dir.join(&data).join("tls.crt"), cert).unwrap();
    std::fs::write(dir.join(&data).join("tls.key"), key).unwrap();
    std::os::unix::fs::symlink(&data, dir.join("..data_tmp")).unwrap();
    std::fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    for f in ["tls.crt", "tls.key"] {
        if std::fs::symlink_metadata(dir.join(f)).is_err() {
            std::os::unix::fs::symlink(format!("..data/{f}"), dir.join(f)).unwrap();
        }
    }
}

/// Scrapes over new connections until `done` holds for the certificate
/// one presented; every scrape must read the metrics. The certificates
/// presented, in order.
async fn scrape_until(
    addr: SocketAddr,
    tls: Arc<ClientConfig>,
    mut done: impl FnMut(&[u8]) -> bool,
) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut certs = Vec::new();
    loop {
        let a = get(addr, Some(tls.clone()), None)
            .await
            .unwrap_or_else(|e| panic!("scrape {} failed: {e}", certs.len() + 1));
        assert_eq!(a.status, StatusCode::OK, "scrape {}", certs.len() + 1);
        assert_eq!(a.body, METRICS);
        let cert = a.cert.unwrap();
        let stop = done(&cert);
        certs.push(cert);
        if stop {
            return certs;
        }
        assert!(
            Instant::now() < deadline,
            "still waiting after {} scrapes in 60 s",
            certs.len()
        );
        // Pacing, not synchronisation: the loop ends on what it sees.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

const FILES: &str = "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n";

#[test]
fn a_renewed_certificate_is_presented_while_scrapes_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = Ca::new();
    let (cert1, key1) = ca.sign(&["localhost", "127.0.0.1"]);
    let (cert2, key2) = ca.sign(&["localhost", "127.0.0.1", "renewed.example"]);
    let (old, new) = (der(&cert1), der(&cert2));
    assert_ne!(old, new);
    secret_volume(d, 1, &cert1, &key1);
    std::fs::write(d.join("web-config.yml"), FILES).unwrap();
    let (addr, published) = start(&d.join("web-config.yml"));
    let tls = fresh_handshakes(client(&ca, None));
    runtime().block_on(async {
        let scrapes = Arc::new(AtomicUsize::new(0));
        let (counted, new2) = (scrapes.clone(), new.clone());
        let mut news = 0;
        // Scrapes until three handshakes in a row presented the new one.
        let scraper = tokio::spawn(scrape_until(addr, tls, move |c| {
            counted.fetch_add(1, Ordering::SeqCst);
            news = if c == new2 { news + 1 } else { 0 };
            news == 3
        }));
        let deadline = Instant::now() + Duration::from_secs(60);
        while scrapes.load(Ordering::SeqCst) < 3 {
            assert!(Instant::now() < deadline, "the scraper did not start");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        secret_volume(d, 2, &cert2, &key2);
        let certs = scraper.await.unwrap();
        let first_new = certs.iter().position(|c| *c == new).unwrap();
        assert!(first_new >= 3, "the new certificate came before the swap");
        assert!(
            certs[..first_new].iter().all(|c| *c == old),
            "neither certificate presented"
        );
        assert!(
            certs[first_new..].iter().all(|c| *c == new),
            "the old certificate came back"
        );
    });
    // The swap replaced both files at once: read once, never half-way.
    let r = published.tls_reloads();
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!((r[0].files, r[0].ok, r[0].failed), ("certificate", 1, 0));
}

#[test]
fn a_broken_renewal_keeps_the_previous_certificate_serving() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = Ca::new();
    ca.write(d, &["localhost"], ["tls.crt", "tls.key", "ca.crt"]);
    let old = der(&std::fs::read_to_string(d.join("tls.crt")).unwrap());
    std::fs::write(d.join("web-config.yml"), FILES).unwrap();
    let (addr, published) = start(&d.join("web-config.yml"));
    let tls = fresh_handshakes(client(&ca, None));
    let failed = || published.tls_reloads()[0].failed;
    let (cert2, key2) = ca.sign(&["localhost", "renewed.example"]);
    runtime().block_on(async {
        // A certificate whose key is not the key file's; then no
        // certificate at all. Each is seen, and the old one still served.
        let (mismatched, _) = ca.sign(&["localhost", "mismatched.example"]);
        let broken = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        for (i, text) in [mismatched.as_str(), broken].into_iter().enumerate() {
            replace(&d.join("tls.crt"), text);
            let certs = scrape_until(addr, tls.clone(), |_| failed() > i as u64).await;
            assert!(certs.iter().all(|c| *c == old), "step {i}: not the old one");
            assert!(published.tls_reloads()[0].failing);
        }
        // Fixed by a good pair: served from then on.
        replace(&d.join("tls.key"), &key2);
        replace(&d.join("tls.crt"), &cert2);
        let new = der(&cert2);
        let certs = scrape_until(addr, tls.clone(), |c| c == new).await;
        assert!(certs.iter().all(|c| *c == old || *c == new));
    });
    let r = published.tls_reloads()[0];
    assert!(r.ok == 1 && !r.failing && r.failed >= 2, "{r:?}");
}

#[test]
fn a_new_client_ca_admits_its_clients_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = Ca::new();
    let path = d.join("web-config.yml");
    std::fs::write(
        &path,
        format!(
            "{FILES}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n"
        ),
    )
    .unwrap();
    ca.write(d, &["localhost"], ["tls.crt", "tls.key", "ca.crt"]);
    let (addr, published) = start(&path);
    let scrapers = Ca::new();
    let newcomer = fresh_handshakes(client(&ca, Some(scrapers.sign(&["prometheus"]))));
    let old_client = fresh_handshakes(client(&ca, Some(ca.sign(&["prometheus"]))));
    runtime().block_on(async {
        assert!(get(addr, Some(old_client.clone()), None).await.is_ok());
        assert!(get(addr, Some(newcomer.clone()), None).await.is_err());
        replace(&d.join("ca.crt"), &scrapers.pem());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(a) = get(addr, Some(newcomer.clone()), None).await {
                assert_eq!(a.status, StatusCode::OK);
                assert_eq!(a.body, METRICS);
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the new CA was not taken in 60 s"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The old CA is no longer trusted.
        assert!(get(addr, Some(old_client), None).await.is_err());
    });
    let r = published.tls_reloads();
    let ca_reloads = r.iter().find(|c| c.files == "client_ca").unwrap();
    assert_eq!((ca_reloads.ok, ca_reloads.failed), (1, 0), "{r:?}");
}
