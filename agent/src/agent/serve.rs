//! The `/metrics` endpoint: hyper on its own thread and runtime, answering
//! from the last exposition the main loop published. A scrape copies one
//! string: it never waits for the probes, a window or mongod, and a slow
//! attach in the main loop never delays it.

use std::{
    convert::Infallible,
    net::SocketAddr,
    sync::{
        Arc, RwLock,
        atomic::{AtomicU64, Ordering},
    },
};

use http_body_util::Full;
use hyper::{Method, Request, Response, StatusCode, body::Bytes, service::service_fn};
use hyper_util::rt::TokioIo;

/// OpenMetrics text, as `prometheus-client` writes it.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What the main loop publishes and the server reads.
#[derive(Debug, Default)]
pub struct Published {
    text: RwLock<String>,
    scrapes: AtomicU64,
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
}

/// Binds `addr` now (so a taken port is an error at start) and serves on a
/// thread of its own until the process ends. Returns the bound address.
pub fn start(addr: SocketAddr, published: Arc<Published>) -> Result<SocketAddr, ServeError> {
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
        .spawn(move || serve(std_listener, published))
        .map_err(|source| ServeError::Bind { addr, source })?;
    Ok(local)
}

fn serve(std_listener: std::net::TcpListener, published: Arc<Published>) {
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
            tokio::spawn(async move {
                let service = service_fn(move |req| answer(req, published.clone()));
                let conn = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service);
                if let Err(e) = conn.await {
                    tracing::debug!("metrics endpoint connection: {e}");
                }
            });
        }
    });
}

async fn answer(
    req: Request<hyper::body::Incoming>,
    published: Arc<Published>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |status, ctype: &str, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        if let Ok(v) = hyper::header::HeaderValue::from_str(ctype) {
            r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
        }
        r
    };
    Ok(match (req.method(), req.uri().path()) {
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
    })
}
