//! The gateway's shared state ([`AppState`]): what every handler reads, built once from the
//! settings by [`super::build`] and shared behind one `Arc`, so a request takes it with one
//! reference count, never as copies of its fields. What a run goes by is one part of it
//! ([`crate::run::Env`], its own `Arc`), handed to each run alone: a run sees nothing of the
//! HTTP layer. Nothing in it changes after start but what it holds to be shared (the binding
//! store, the counters, the run slots, the stop and drain signals).

use std::ops::Deref;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use axum::http::HeaderValue;
use tokio::sync::Semaphore;

use crate::auth::Authenticator;
use crate::config::{Readiness, Settings};
use crate::http::ratelimit::RunLimiter;
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::run;
use crate::store::Store;
use crate::telemetry::Traces;

/// The shared state of the handlers and the runs: a handle on one [`Shared`], cloned for
/// each request and each run.
#[derive(Clone)]
pub(crate) struct AppState(Arc<Shared>);

impl Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl From<Shared> for AppState {
    fn from(shared: Shared) -> Self {
        Self(Arc::new(shared))
    }
}

/// What [`AppState`] shares. Its run part's fields read as its own (`state.registry`,
/// `state.limits`: [`Deref`] to [`run::Env`]).
pub(crate) struct Shared {
    /// The registry, binding store, limits, timeouts, metrics and stop signal, as every run
    /// gets them.
    pub run: Arc<run::Env>,
    /// `limits.max_concurrent_runs` slots; a run holds one for its lifetime.
    pub runs: Arc<Semaphore>,
    /// Set at the shutdown signal, before the drain: `/readyz` answers 503 from then on
    /// (docs/operations.md#readiness).
    pub draining: Arc<AtomicBool>,
    /// `readiness` (docs/operations.md#readiness).
    pub readiness: Readiness,
    /// Browser origins allowed cross-origin access.
    pub cors_origins: Vec<HeaderValue>,
    /// Who may call (inbound auth).
    pub auth: Arc<Authenticator>,
    /// `rate_limits`, if configured.
    pub run_limiter: Option<Arc<RunLimiter>>,
    /// `metrics_public`: `/metrics` without inbound auth.
    pub metrics_public: bool,
    /// The traces exporter, when telemetry is configured.
    pub traces: Option<Arc<Traces>>,
    /// Where the CopilotKit runtime routes are mounted, if they are
    /// (`crate::http::copilotkit`).
    pub copilotkit_base_path: Option<String>,
    /// The agent answering as `default` under the base path (`copilotkit.default_agent`).
    pub copilotkit_default_agent: Option<String>,
    /// `push.max_per_second`, per agent.
    pub push_limiter: Arc<crate::http::ratelimit::PushLimiter>,
}

impl Deref for Shared {
    type Target = run::Env;

    fn deref(&self) -> &run::Env {
        &self.run
    }
}

impl Shared {
    /// The state of a gateway with `settings`, over the parts [`super::build`] made of them.
    pub(crate) fn new(
        settings: &Settings,
        registry: Arc<Registry>,
        store: Store,
        metrics: Arc<Metrics>,
        traces: Option<Arc<Traces>>,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        let store = Arc::new(store);
        let inbox = crate::inbox::Inbox::new(
            registry.clone(),
            store.clone(),
            metrics.clone(),
            settings,
            stop.clone(),
        );
        Self {
            run: Arc::new(run::Env {
                registry,
                store,
                limits: settings.limits,
                timeouts: settings.timeouts,
                metrics,
                stop,
                inbox,
                push: settings.push.clone(),
            }),
            runs: Arc::new(Semaphore::new(settings.limits.max_concurrent_runs.get())),
            draining: Arc::new(AtomicBool::new(false)),
            readiness: settings.readiness,
            cors_origins: settings.cors_origins.clone(),
            auth: Arc::new(Authenticator::new(&settings.auth)),
            run_limiter: settings.rate_limits.map(|r| Arc::new(RunLimiter::new(r))),
            metrics_public: settings.metrics_public,
            traces,
            copilotkit_base_path: settings.copilotkit_base_path.clone(),
            copilotkit_default_agent: settings.copilotkit_default_agent.clone(),
            push_limiter: Arc::new(crate::http::ratelimit::PushLimiter::new(
                settings.push.max_per_second,
            )),
        }
    }

    /// The state of a gateway with `settings` and the agents of `registry`, without a
    /// gateway around it: a memory binding store, no traces, never stopped.
    #[cfg(test)]
    pub(crate) fn for_tests(settings: &Settings, registry: Arc<Registry>) -> Self {
        // One sender for every test state, never dropped: a receiver whose sender is gone
        // reads as stopped.
        static NEVER: std::sync::OnceLock<tokio::sync::watch::Sender<bool>> =
            std::sync::OnceLock::new();
        let stop = NEVER
            .get_or_init(|| tokio::sync::watch::channel(false).0)
            .subscribe();
        let metrics = Arc::new(Metrics::new(Default::default()));
        Self::new(settings, registry, Store::memory(), metrics, None, stop)
    }
}
