//! The accept loop: HTTP/1.1 connections with the client-side limits of DESIGN §9.
//!
//! `axum::serve` has no header-read timeout, no connection cap and no write timeout, so
//! connections are served here with hyper directly:
//! - at most `limits.max_connections` at once: a connection beyond it is closed as soon
//!   as it is accepted (it never waits in memory);
//! - `timeouts.header_read` bounds the request head, and also an idle keep-alive
//!   connection (hyper starts the same timer while it waits for the next request head);
//! - `timeouts.client_write`: a write the client does not accept for that long fails the
//!   connection, which drops the response body and with it the run (its slot and buffers
//!   are freed, its upstream request aborted);
//! - `TCP_NODELAY`: SSE frames are small, and Nagle's algorithm with delayed ACKs would
//!   hold each one back by up to ~40 ms.
//!
//! The body-read timeout is the run handler's (it knows the route streams afterwards).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_io_timeout::TimeoutStream;

/// How often refusals at the connection cap are logged, at most.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// What the accept loop enforces.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ConnectionLimits {
    pub max_connections: usize,
    pub header_read: Duration,
    pub client_write: Duration,
}

/// Serves `router` on `listener` until `shutdown` resolves, then stops accepting and
/// returns a future that resolves once every open connection has closed.
pub(crate) async fn serve(
    listener: TcpListener,
    router: axum::Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) -> impl Future<Output = ()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read)
        .keep_alive(true);
    tokio::pin!(shutdown);
    let mut refused: u64 = 0;
    let mut last_warning: Option<std::time::Instant> = None;
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(conn) => conn,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(tcp);
            // One line per ten seconds of refusals at most: a flood must not flood the logs.
            refused += 1;
            if last_warning.is_none_or(|at| at.elapsed() >= REFUSAL_LOG_INTERVAL) {
                tracing::warn!(%peer, refused, max = limits.max_connections, "limits.max_connections reached; connections closed");
                last_warning = Some(std::time::Instant::now());
                refused = 0;
            }
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let mut io = TimeoutStream::new(tcp);
        io.set_write_timeout(Some(limits.client_write));
        // Handlers learn the client's address (anonymous callers' rate-limit bucket).
        let service = TowerToHyperService::new(tower::ServiceExt::map_request(
            router.clone(),
            move |mut req: axum::http::Request<hyper::body::Incoming>| {
                req.extensions_mut().insert(super::ClientAddr(peer));
                req
            },
        ));
        let conn = http.serve_connection(TokioIo::new(Box::pin(io)), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(%peer, error = %e, "connection ended");
            }
            drop(slot);
        });
    }
    drop(listener);
    async move { graceful.shutdown().await }
}
