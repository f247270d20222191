//! Building and serving the gateway: `build(Settings) -> App`, `bind(listen addresses)`,
//! `App::serve(listener, shutdown)` (or `serve_all` on every listen address). `main` only
//! parses flags, sets up logging and calls these, so tests and the benchmark run exactly the
//! same app. What the handlers and the runs share is its [`state`].

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::config::{AgentSettings, Settings, StoreConfig};
use crate::http;
use crate::http::listener;
use crate::http::server::ConnectionLimits;
use crate::registry::Registry;
pub use crate::store::{FailureKind, StoreErrors};
use crate::store::{RedisStore, Store};

pub(crate) mod state;

/// How often the drain looks whether runs are still open.
const RUNS_POLL: Duration = Duration::from_millis(50);

use self::state::Shared;

/// A built gateway, ready to serve.
#[derive(Debug)]
pub struct App {
    pub router: axum::Router,
    pub registry: Arc<Registry>,
    pub settings: Settings,
    /// Ends open runs when set (after the shutdown drain).
    stop: tokio::sync::watch::Sender<bool>,
    /// Set at the shutdown signal: `/readyz` answers 503 (docs/operations.md#readiness).
    draining: Arc<AtomicBool>,
    /// The run slots: all of them free when no run is open.
    runs: Arc<tokio::sync::Semaphore>,
    binding_store_errors: Arc<StoreErrors>,
    /// Flushed when serving ends.
    traces: Option<Arc<crate::telemetry::Traces>>,
}

/// Why the gateway could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("cannot start the demo agent: {0}")]
    Demo(std::io::Error),
    #[error("binding_store: {0}")]
    Store(String),
    #[error("cannot reach the agents: {0}")]
    Upstream(String),
    #[error("telemetry: {0}")]
    Telemetry(String),
}

/// Builds the app: starts the demo agent if asked, and the card refresher.
pub async fn build(mut settings: Settings) -> Result<App, BuildError> {
    if settings.demo {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(BuildError::Demo)?;
        let base = crate::demo::spawn(listener)
            .await
            .map_err(BuildError::Demo)?;
        tracing::info!(url = %base, "demo agent listening");
        settings.agents.push(AgentSettings::plain(
            crate::demo::AGENT_NAME.into(),
            url::Url::parse(&base).expect("a loopback URL"),
        ));
    }
    let store = match &settings.binding_store {
        StoreConfig::Memory => Store::memory(),
        // Does not wait for Redis: the gateway starts and serves with the store down.
        StoreConfig::Redis(redis) => {
            let redis =
                Arc::new(RedisStore::new(redis, settings.binding_ttl).map_err(BuildError::Store)?);
            let connecting = redis.clone();
            tokio::spawn(async move { connecting.announce().await });
            Store::redis(redis)
        }
    };
    let binding_store_errors = store.errors();
    let metrics = Arc::new(crate::metrics::Metrics::new(binding_store_errors.clone()));
    metrics.know_agents(settings.agents.iter().map(|a| a.name.as_str()));
    let registry = Registry::new(
        settings.agents.clone(),
        settings.timeouts.connect(),
        settings.timeouts.upstream_call(),
        settings.limits.max_event_bytes.get(),
    )
    .map_err(BuildError::Upstream)?
    .with_metrics(metrics.clone());
    // Streams from `http://` upstreams are read by the run itself (a2a::direct), unless the
    // environment sets a proxy: reqwest honours it.
    let registry = Arc::new(if crate::a2a::direct::proxy_configured() {
        registry
    } else {
        registry.with_direct_streams(settings.timeouts.connect())
    });
    registry.clone().spawn_refresher();
    let traces = match &settings.otlp_traces {
        Some(endpoint) => {
            let traces =
                crate::telemetry::Traces::start(endpoint).map_err(BuildError::Telemetry)?;
            tracing::info!(endpoint = %crate::redact::url(endpoint), "traces exported over OTLP/HTTP");
            Some(Arc::new(traces))
        }
        None => None,
    };
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let state = Shared::new(
        &settings,
        registry.clone(),
        store,
        metrics,
        traces.clone(),
        stop_rx,
    );
    // The live inbox's relay across replicas starts now; its shared reads with the first
    // viewer (`GET /threads` or its feed): a gateway nobody reviews through costs its agents
    // nothing (docs/design.md#the-live-inbox).
    state.inbox.start_relay();
    let (draining, runs) = (state.draining.clone(), state.runs.clone());
    Ok(App {
        router: http::router(state.into()),
        registry,
        settings,
        stop,
        draining,
        runs,
        binding_store_errors,
        traces,
    })
}

/// A listener on each listen address ([`Settings::listen`]: every address the listen host
/// resolved to), for [`App::serve_all`]. An address the system cannot assign (`::1` of
/// `localhost` with IPv6 off) is skipped with a warning when another one is bound; any other
/// failure is an error.
pub async fn bind(addrs: &[SocketAddr]) -> Result<Vec<TcpListener>, String> {
    let mut listeners = Vec::new();
    let mut unavailable = Vec::new();
    for &addr in addrs {
        match TcpListener::bind(addr).await {
            Ok(l) => listeners.push(l),
            Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => {
                unavailable.push((addr, e));
            }
            Err(e) => return Err(format!("cannot listen on {addr}: {e}")),
        }
    }
    for (addr, e) in &unavailable {
        if listeners.is_empty() {
            return Err(format!("cannot listen on {addr}: {e}"));
        }
        tracing::warn!(%addr, error = %e, "listen address not available here; skipped");
    }
    Ok(listeners)
}

impl App {
    /// Binding store operations that failed since start, by kind, live
    /// (`agui_gateway_binding_store_errors_total{kind}`).
    pub fn binding_store_errors(&self) -> Arc<StoreErrors> {
        self.binding_store_errors.clone()
    }

    /// Serves until `shutdown` resolves, then drains (docs/operations.md#readiness):
    /// `/readyz` answers 503 at once; the listener keeps accepting while runs are open (a
    /// load balancer sees the 503 and drops this replica before it refuses connections),
    /// then stops; open runs get up to `timeouts.shutdown_drain()` from the signal, then
    /// the ones still open end with `RUN_ERROR {code: "gateway_shutdown"}` (their A2A tasks
    /// go on upstream), so no client is left with a stream that ends without a terminal
    /// event.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        self.serve_all(vec![listener], shutdown).await
    }

    /// [`App::serve`] on several listeners at once (every address a listen host name
    /// resolves to), with one connection cap over them all.
    pub async fn serve_all(
        self,
        listeners: Vec<TcpListener>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let timeouts = self.settings.timeouts;
        let limits = ConnectionLimits {
            max_connections: self.settings.limits.max_connections.get(),
            max_body_bytes: self.settings.limits.max_body_bytes.get(),
            header_read: timeouts.header_read(),
            client_write: timeouts.client_write(),
        };
        let traces = self.traces.clone();
        let flush = move || {
            if let Some(t) = traces {
                // The SDK blocks while it exports: off the async threads.
                std::thread::spawn(move || t.shutdown());
            }
        };
        let drain = timeouts.shutdown_drain();
        // The drain's end, set at the signal.
        let deadline = Arc::new(std::sync::OnceLock::new());
        let stop_accepting = {
            let (draining, runs, deadline) =
                (self.draining.clone(), self.runs.clone(), deadline.clone());
            let all_runs = self.settings.limits.max_concurrent_runs.get();
            async move {
                shutdown.await;
                draining.store(true, Ordering::SeqCst);
                let end = tokio::time::Instant::now() + drain;
                let _ = deadline.set(end);
                let open = all_runs - runs.available_permits();
                tracing::info!(open_runs = open, "draining: /readyz answers 503");
                // Polled, not awaited on the semaphore: a waiter there would hold back
                // the runs still let in meanwhile.
                while runs.available_permits() < all_runs && tokio::time::Instant::now() < end {
                    let tick = tokio::time::Instant::now() + RUNS_POLL;
                    tokio::time::sleep_until(tick.min(end)).await;
                }
            }
        };
        let closed = listener::serve(listeners, self.router, limits, stop_accepting).await;
        let end = deadline
            .get()
            .copied()
            .unwrap_or_else(tokio::time::Instant::now);
        tokio::pin!(closed);
        if tokio::time::timeout_at(end, &mut closed).await.is_ok() {
            flush();
            return Ok(());
        }
        tracing::warn!("shutdown drain elapsed; ending the runs still open");
        let _ = self.stop.send(true);
        // Their terminal events are on the way; give the connections a moment to close.
        let _ = tokio::time::timeout(std::time::Duration::from_secs(5), closed).await;
        flush();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every listen address is bound and served (one connection cap over them); an address
    /// the system cannot assign is skipped beside another one, and an error alone.
    #[tokio::test]
    async fn every_listen_address_is_bound_and_served() {
        let loopback: SocketAddr = "127.0.0.1:0".parse().unwrap();
        // TEST-NET-1 (RFC 5737): on no interface here.
        let unassignable: SocketAddr = "192.0.2.1:0".parse().unwrap();
        let e = bind(&[unassignable]).await.unwrap_err();
        assert!(e.starts_with("cannot listen on 192.0.2.1:0"), "{e}");
        let listeners = bind(&[loopback, unassignable, loopback]).await.unwrap();
        let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
        assert_eq!(addrs.len(), 2);
        let over = crate::config::Overrides {
            agents: vec!["a=http://127.0.0.1:9".into()],
            ..Default::default()
        };
        let settings = crate::config::settings(Default::default(), over).unwrap();
        let app = build(settings).await.unwrap();
        tokio::spawn(app.serve_all(listeners, std::future::pending()));
        for addr in addrs {
            let resp = reqwest::get(format!("http://{addr}/healthz"))
                .await
                .unwrap();
            assert_eq!(resp.status(), 200, "{addr}");
        }
    }
}
