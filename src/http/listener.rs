//! The accept loop: HTTP/1.1 connections with the client-side limits of
//! docs/design.md#9-reliability-and-limits, each served by [`super::server`] in a task of its
//! own.
//!
//! - at most `limits.max_connections` at once: a connection beyond it is closed as soon
//!   as it is accepted (it never waits in memory);
//! - `timeouts.header_read` bounds each request head, and also an idle keep-alive
//!   connection (the same timer runs while it waits for the next request head);
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

use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use super::server::{self, ConnectionLimits};

/// How often refusals at the connection cap are logged, at most.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// The next connection on any of `listeners`, asking them in turn from `turn` on (a busy
/// one does not starve the others).
async fn accept_any(
    listeners: &[TcpListener],
    turn: usize,
) -> std::io::Result<(tokio::net::TcpStream, std::net::SocketAddr)> {
    std::future::poll_fn(|cx| {
        for i in 0..listeners.len() {
            let listener = &listeners[(turn + i) % listeners.len()];
            if let std::task::Poll::Ready(accepted) = listener.poll_accept(cx) {
                return std::task::Poll::Ready(accepted);
            }
        }
        std::task::Poll::Pending
    })
    .await
}

/// Serves `router` on `listeners` (one per listen address; the connection cap spans them)
/// until `shutdown` resolves, then stops accepting and returns a future that resolves once
/// every open connection has closed (idle ones close at once, the others after the response
/// they are writing).
pub(crate) async fn serve(
    listeners: Vec<TcpListener>,
    router: axum::Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
) -> impl Future<Output = ()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let (closing, closing_seen) = watch::channel(false);
    tokio::pin!(shutdown);
    let mut refused: u64 = 0;
    let mut last_warning: Option<std::time::Instant> = None;
    let mut turn: usize = 0;
    loop {
        turn = turn.wrapping_add(1);
        let (tcp, peer) = tokio::select! {
            accepted = accept_any(&listeners, turn) => match accepted {
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
        // Spawned as it is: a wrapping `async` block would hold the connection's future twice.
        tokio::spawn(server::serve_connection(
            tcp,
            peer,
            router.clone(),
            limits,
            closing_seen.clone(),
            slot,
        ));
    }
    drop(listeners);
    let _ = closing.send(true);
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    async move {
        // Every slot back: every connection closed.
        let _ = slots.acquire_many(all).await;
        drop(closing);
    }
}
