//! `/metrics` with a web configuration file, through the real server
//! (`mdiag::agent::serve`, no BPF needed) and a real HTTPS client (hyper's
//! over tokio-rustls): the right CA and password read the metrics, a wrong
//! or missing password gets 401, plain HTTP gets nothing, and with client
//! certificates required a client without one (or with one from another
//! CA) is refused. Certificates are made here (rcgen).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers: a failure is the test failing"
)]

use std::{net::SocketAddr, path::Path, sync::Arc};

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
    let web = WebConfig::load(&path).unwrap();
    let published = Arc::new(Published::default());
    published.set(METRICS.to_owned());
    serve::start("127.0.0.1:0".parse().unwrap(), published, Some(&web)).unwrap()
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
            send(TokioIo::new(stream), req).await
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
