//! The `/metrics` endpoint: hyper on its own thread and runtime, answering
//! from the last exposition the main loop published. A scrape copies one
//! string: it never waits for the probes, a window or mongod, and a slow
//! attach in the main loop never delays it.
//!
//! With a web configuration file (`web_config.rs`) the same server speaks
//! TLS (tokio-rustls) and asks for basic auth (`web_auth.rs`) on every path,
//! as an exporter-toolkit exporter does. Each connection takes the TLS
//! configuration in effect then (`web_tls.rs`: certificate files and client
//! CA are read again when they change).

use std::{
    convert::Infallible,
    net::SocketAddr,
    sync::{
        Arc, OnceLock, RwLock,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode, body::Bytes, service::service_fn};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use super::web_auth::{BasicAuth, CHALLENGE};
use super::web_config::WebConfig;
use super::web_reload::ReloadCounts;
use super::web_tls::TlsSettings;

/// A client that has not finished its TLS handshake by then is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// OpenMetrics text, as `prometheus-client` writes it.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What the main loop publishes and the server reads; and what the server
/// counts for the main loop's metrics.
#[derive(Debug, Default)]
pub struct Published {
    text: RwLock<String>,
    scrapes: AtomicU64,
    /// The TLS settings served, for their reload counts.
    tls: OnceLock<TlsSettings>,
}

impl Published {
    pub fn set(&self, text: String) {
        // A poisoned lock only means a panic elsewhere mid-write: the
        // string is still a whole one.
        *self.text.write().unwrap_or_else(|p| p.into_inner()) = text;
    }

    fn get(&self) -> String {
        self.text.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn scrapes(&self) -> u64 {
        self.scrapes.load(Ordering::Relaxed)
    }

    /// Reloads of the TLS files so far (empty without TLS from files).
    pub fn tls_reloads(&self) -> Vec<ReloadCounts> {
        self.tls.get().map(TlsSettings::reloads).unwrap_or_default()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "cannot listen on {addr} for /metrics: {source}; choose another address with [agent] listen in the config file"
    )]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("web config file {}: basic_auth_users: {source}", path.display())]
    Auth {
        path: std::path::PathBuf,
        source: bcrypt::BcryptError,
    },
}

/// What the web configuration file makes of the server.
struct Web {
    tls: Option<TlsSettings>,
    auth: Option<Arc<BasicAuth>>,
    headers: Vec<(hyper::header::HeaderName, hyper::header::HeaderValue)>,
}

impl Web {
    fn new(config: Option<&WebConfig>) -> Result<Self, ServeError> {
        let Some(c) = config else {
            return Ok(Self {
                tls: None,
                auth: None,
                headers: Vec::new(),
            });
        };
        let auth = if c.users.is_empty() {
            None
        } else {
            let a = BasicAuth::new(c.users.clone()).map_err(|source| ServeError::Auth {
                path: c.path.clone(),
                source,
            })?;
            Some(Arc::new(a))
        };
        // WebConfig checked names and values; one that fails here is left out.
        let headers = c
            .headers
            .iter()
            .filter_map(|(k, v)| {
                Some((
                    hyper::header::HeaderName::from_bytes(k.as_bytes()).ok()?,
                    hyper::header::HeaderValue::from_str(v).ok()?,
                ))
            })
            .collect();
        Ok(Self {
            tls: c.tls.clone(),
            auth,
            headers,
        })
    }
}

/// Binds `addr` now (so a taken port is an error at start) and serves on a
/// thread of its own until the process ends, with TLS and basic auth when
/// `web` says so. Returns the bound address.
pub fn start(
    addr: SocketAddr,
    published: Arc<Published>,
    web: Option<&WebConfig>,
) -> Result<SocketAddr, ServeError> {
    let web = Arc::new(Web::new(web)?);
    if let Some(t) = &web.tls {
        // Set once: a second server on the same Published keeps the first's.
        let _ = published.tls.set(t.clone());
    }
    let std_listener =
        std::net::TcpListener::bind(addr).map_err(|source| ServeError::Bind { addr, source })?;
    let local = std_listener
        .local_addr()
        .map_err(|source| ServeError::Bind { addr, source })?;
    std_listener
        .set_nonblocking(true)
        .map_err(|source| ServeError::Bind { addr, source })?;
    std::thread::Builder::new()
        .name("mdiag-metrics".into())
        .spawn(move || serve(std_listener, published, web))
        .map_err(|source| ServeError::Bind { addr, source })?;
    Ok(local)
}

fn serve(std_listener: std::net::TcpListener, published: Arc<Published>, web: Arc<Web>) {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("metrics endpoint: cannot start its runtime: {e}");
            return;
        }
    };
    rt.block_on(async move {
        let listener = match tokio::net::TcpListener::from_std(std_listener) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!("metrics endpoint: {e}");
                return;
            }
        };
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let published = published.clone();
            let web = web.clone();
            tokio::spawn(async move {
                match web.tls.as_ref().map(TlsSettings::server) {
                    None => connection(stream, published, web).await,
                    Some(server) => {
                        let acceptor = tokio_rustls::TlsAcceptor::from(server);
                        match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
                        {
                            Ok(Ok(tls)) => connection(tls, published, web).await,
                            Ok(Err(e)) => tracing::debug!("metrics endpoint TLS handshake: {e}"),
                            Err(_) => tracing::debug!("metrics endpoint TLS handshake: timed out"),
                        }
                    }
                }
            });
        }
    });
}

/// Serves one connection (plain or TLS) until the client closes it.
async fn connection<S>(stream: S, published: Arc<Published>, web: Arc<Web>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req| answer(req, published.clone(), web.clone()));
    let conn =
        hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    if let Err(e) = conn.await {
        tracing::debug!("metrics endpoint connection: {e}");
    }
}

async fn answer(
    req: Request<hyper::body::Incoming>,
    published: Arc<Published>,
    web: Arc<Web>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let allowed = match &web.auth {
        None => true,
        Some(auth) => {
            let header = req
                .headers()
                .get(hyper::header::AUTHORIZATION)
                .map(|v| v.as_bytes().to_vec());
            auth.allows(header.as_deref()).await
        }
    };
    let mut response = if allowed {
        route(req.method(), req.uri().path(), &published)
    } else {
        let mut r = reply(
            StatusCode::UNAUTHORIZED,
            "text/plain; charset=utf-8",
            "unauthorized: the agent's web config file asks for basic auth\n".into(),
        );
        r.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static(CHALLENGE),
        );
        r
    };
    for (k, v) in &web.headers {
        response.headers_mut().insert(k.clone(), v.clone());
    }
    Ok(response)
}

fn reply(status: StatusCode, ctype: &str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(ctype) {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

/// The answer to an allowed request, by path.
fn route(method: &Method, path: &str, published: &Published) -> Response<Full<Bytes>> {
    match (method, path) {
        (&Method::GET, "/metrics") => {
            published.scrapes.fetch_add(1, Ordering::Relaxed);
            reply(StatusCode::OK, CONTENT_TYPE, published.get())
        }
        (&Method::GET, "/") => reply(
            StatusCode::OK,
            "text/plain; charset=utf-8",
            "mdiag agent: metrics at /metrics\n".into(),
        ),
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found: the agent serves /metrics\n".into(),
        ),
    }
}
