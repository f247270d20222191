//! The HTTP surface (docs/design.md#3-http-surface): thin axum handlers and the router (its
//! routes' first segments in [`routes`]); the accept loop with the client-side limits
//! ([`listener`]); the body of a run stream ([`stream`]) in the encoding the request asks
//! for ([`encoding`]).
//!
//! Two error regimes ([`crate::error`]): before the stream starts, a problem with the
//! request itself is a JSON body `{"error": {"code", "message"}}` with its status; after the
//! `200`, every failure is one `RUN_ERROR` event (ended by [`crate::run`]). Anything upstream
//! — even an unreachable agent — is reported in the stream, never as an HTTP error. The run
//! slot is taken before the body is read; the body is read within `timeouts.body_read`.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{FromRequestParts, RawPathParams, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;
use tokio::sync::OwnedSemaphorePermit;

use crate::agui::RunAgentInput;
use crate::app::state::AppState;
use crate::auth::{self, Caller};
use crate::bridge::request;
use crate::config::Limits;
use crate::error::RequestError;
use crate::ids::{ContextId, TaskId};
use crate::redact::Shown;
use crate::registry::Agent;
use crate::run::{self, RunRequest};

pub(crate) mod console;
pub(crate) mod copilotkit;
pub(crate) mod copilotkit_threads;
#[cfg(test)]
mod differential_tests;
pub(crate) mod encoding;
pub(crate) mod feed;
#[cfg(test)]
mod fuzz_tests;
pub(crate) mod listener;
pub(crate) mod push;
pub(crate) mod ratelimit;
pub(crate) mod routes;
pub(crate) mod server;
pub(crate) mod stream;
pub(crate) mod threads;

use encoding::Encoding;
use stream::EventBody;

/// The client's address, put on every request by the accept loop ([`listener`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientAddr(pub std::net::SocketAddr);

/// The agent a route names, by its `{name}` path parameter (CopilotKit's routes: `{id}`):
/// the one lookup of every handler that serves an agent. A name no agent has is `404
/// unknown_agent`, before anything else of the request is read.
pub(crate) struct AgentRef(pub Arc<Agent>);

impl AgentRef {
    /// The configured agent `name`, or `404 unknown_agent`.
    pub(crate) fn named(s: &AppState, name: &str) -> Result<Self, RequestError> {
        s.registry
            .get(name)
            .map(AgentRef)
            .ok_or_else(|| RequestError::UnknownAgent(name.to_owned()))
    }

    /// The agent a CopilotKit route's `id` names: `default` is `copilotkit.default_agent`
    /// when one answers as it (docs/design.md#3-http-surface), any other id the agent of that
    /// name.
    pub(crate) fn copilotkit(s: &AppState, id: &str) -> Result<Self, RequestError> {
        match &s.copilotkit_default_agent {
            Some(default) if id == crate::config::COPILOTKIT_DEFAULT_AGENT => {
                Self::named(s, default)
            }
            _ => Self::named(s, id),
        }
    }
}

impl FromRequestParts<AppState> for AgentRef {
    type Rejection = RequestError;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, RequestError> {
        // A parameter that is not UTF-8 names no agent, nor does any route without one.
        let params = RawPathParams::from_request_parts(parts, s)
            .await
            .map_err(|_| RequestError::NoRoute)?;
        // `/agents/{name}` names an agent; CopilotKit's `{base}/agent/{id}` an agent id.
        match params.iter().find(|(key, _)| matches!(*key, "name" | "id")) {
            Some(("id", id)) => Self::copilotkit(s, id),
            Some((_, name)) => Self::named(s, name),
            None => Err(RequestError::NoRoute),
        }
    }
}

/// The OpenAPI document of this surface (docs/design.md#3-http-surface), served at
/// `/openapi.json`; a test keeps it and the router in step.
pub(crate) const OPENAPI: &str = include_str!("../openapi/openapi.json");

impl IntoResponse for RequestError {
    fn into_response(self) -> Response {
        // The error body (docs/design.md#3-http-surface): the top-level `message` repeats the
        // error's, for clients (CopilotKit) that show only that field.
        let message = self.to_string();
        let body = json!({"error": {"code": self.code(), "message": &message}, "message": message});
        let mut resp = (self.status(), Json(body)).into_response();
        if let Some(secs) = self.retry_after() {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if let Some(challenge) = self.www_authenticate() {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(challenge),
            );
        }
        resp
    }
}

/// CORS for the configured browser origins only (none: no CORS headers, so browsers keep
/// cross-origin pages out). Preflights are answered before anything else.
fn cors(origins: &[HeaderValue]) -> tower_http::cors::CorsLayer {
    use axum::http::Method;
    tower_http::cors::CorsLayer::new()
        .allow_origin(origins.to_vec())
        // PATCH and DELETE: CopilotKit's thread rename/unarchive and delete
        // (`copilotkit_threads`).
        .allow_methods([Method::GET, Method::POST, Method::PATCH, Method::DELETE])
        .allow_headers([header::CONTENT_TYPE, header::ACCEPT, header::AUTHORIZATION])
        // CopilotKit's `credentials: "include"`; only ever with the exact origins above.
        .allow_credentials(true)
        .max_age(Duration::from_secs(600))
}

/// The router over `state`: the routes that need a caller inside the auth middleware
/// (`auth::require_caller`), the open ones outside it; both answer a wrong method with a JSON
/// 405, and an unknown path is a guarded one (401 before 404).
pub(crate) fn router(state: AppState) -> Router {
    let cors = cors(&state.cors_origins);
    let metrics = Router::new().route("/metrics", get(metrics));
    let (guarded_metrics, open_metrics) = if state.metrics_public {
        (Router::new(), metrics)
    } else {
        (metrics, Router::new())
    };
    let guarded = Router::new()
        .route("/agents", get(list_agents))
        .route("/agents/{name}", post(run_agent).get(get_agent))
        .route("/agents/{name}/threads", get(threads::list))
        .route("/agents/{name}/threads/{thread_id}", get(threads::detail))
        .route("/threads", get(threads::inbox))
        .route("/threads/events", get(feed::events))
        .merge(copilotkit::routes(state.copilotkit_base_path.as_deref()))
        .merge(copilotkit_threads::routes(
            state.copilotkit_base_path.as_deref(),
        ))
        .merge(guarded_metrics)
        .fallback(|| async { RequestError::NoRoute })
        .method_not_allowed_fallback(|| async { RequestError::MethodNotAllowed })
        .layer(middleware::from_fn_with_state(
            state.auth.clone(),
            auth::require_caller,
        ));
    // The open routes (docs/design.md#3-http-surface, docs/security.md): the probes, the
    // API's description, the console's files, and the metrics when `metrics_public`.
    let open = Router::new()
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/readyz", get(readyz))
        .route("/openapi.json", get(openapi))
        // The token a push carries is its credential (docs/design.md#the-live-inbox).
        .route("/a2a/push/{agent}", post(push::receive))
        .merge(console::routes())
        .merge(open_metrics)
        .method_not_allowed_fallback(|| async { RequestError::MethodNotAllowed });
    guarded
        .merge(open)
        // Outside auth: preflights are answered before it, and 401s carry CORS headers.
        .layer(cors)
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

/// `GET /metrics`: Prometheus text (docs/design.md#10-observability).
async fn metrics(State(s): State<AppState>) -> Response {
    let mut resp = s.metrics.encode().into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    resp
}

/// `GET /openapi.json`.
async fn openapi() -> Response {
    let mut resp = OPENAPI.into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

/// `GET /agents`.
#[derive(Debug, serde::Serialize)]
struct AgentList {
    agents: Vec<crate::registry::AgentSummary>,
}

async fn list_agents(State(s): State<AppState>) -> Json<AgentList> {
    let agents = s.registry.all().map(|a| a.summary()).collect();
    Json(AgentList { agents })
}

async fn get_agent(AgentRef(agent): AgentRef) -> Json<crate::registry::AgentSummary> {
    Json(agent.detail())
}

/// `GET /readyz` (docs/operations.md#readiness): `503` only for what taking this replica
/// out of service fixes — draining after the shutdown signal (`"draining"`); else `200`,
/// `"ready"` or, with an agent's card unread or the binding store not answering,
/// `"degraded"`, naming them: `agents` (whose card is unread; absent when `"ready"`),
/// `reasons` (by agent: what a card that was read offered when the gateway speaks none of
/// it, a refused TLS handshake, no upstream credentials), `bindingStore`, and `warnings`
/// (an unmet card security requirement: never degraded on its own,
/// docs/security.md#the-cards-security). With `?strict` (any value, or none) or
/// `readiness.strict: true`, degraded is `503 "not_ready"`. Nothing else is said: this
/// route is open to anyone.
async fn readyz(
    State(s): State<AppState>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Response {
    let strict = s.readiness.strict
        || query.as_deref().is_some_and(|q| {
            url::form_urlencoded::parse(q.as_bytes()).any(|(key, _)| key == "strict")
        });
    let draining = s.draining.load(std::sync::atomic::Ordering::SeqCst);
    let not_read = s.registry.not_ready();
    let store = s.store.check().await;
    let degraded = !not_read.is_empty() || store.is_err();
    let (status, code) = match (draining, degraded, strict) {
        (true, _, _) => ("draining", StatusCode::SERVICE_UNAVAILABLE),
        (false, true, true) => ("not_ready", StatusCode::SERVICE_UNAVAILABLE),
        (false, true, false) => ("degraded", StatusCode::OK),
        (false, false, _) => ("ready", StatusCode::OK),
    };
    let mut body = json!({ "status": status });
    if status != "ready" {
        body["agents"] = json!(not_read);
    }
    let reasons = s.registry.unusable();
    if !reasons.is_empty() {
        body["reasons"] = json!(reasons);
    }
    if let Err(store) = store {
        body["bindingStore"] = store;
    }
    let warnings = s.registry.warnings();
    if !warnings.is_empty() {
        body["warnings"] = json!(warnings);
    }
    (code, Json(body)).into_response()
}

pub(crate) fn is_json(req: &Request) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| {
            let mime = mime.trim().to_ascii_lowercase();
            mime == "application/json" || mime.ends_with("+json")
        })
}

/// A body over the limit is a 413; one whose framing breaks RFC 9112 a 400
/// `malformed_request`; one that could not be read at all (the client went away
/// mid-upload) a 400.
pub(super) fn body_error(e: &axum::Error, limit: usize) -> RequestError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if err.is::<http_body_util::LengthLimitError>() {
            return RequestError::BodyTooLarge(limit);
        }
        match err.downcast_ref::<server::BodyError>() {
            Some(server::BodyError::Framing(why)) => return RequestError::MalformedRequest(why.0),
            Some(server::BodyError::TooLarge) => return RequestError::BodyTooLarge(limit),
            _ => {}
        }
        source = err.source();
    }
    RequestError::MalformedJson(format!("could not read the request body: {e}"))
}

/// Parses a run body: a JSON syntax error is a 400, a JSON that is not a `RunAgentInput`
/// a 422 naming the problem, a `state` over `limits.max_state_bytes` a 413 (measured on
/// the raw text before anything is built from it), an id over `limits.max_id_bytes` a 422.
pub(crate) fn parse_input(body: &[u8], limits: &Limits) -> Result<RunAgentInput, RequestError> {
    /// Only the state's extent: its text is skipped, not parsed into values.
    #[derive(serde::Deserialize)]
    struct StateExtent<'a> {
        #[serde(borrow, default)]
        state: Option<&'a serde_json::value::RawValue>,
    }
    let extent: StateExtent<'_> = serde_json::from_slice(body).map_err(json_error)?;
    if extent
        .state
        .is_some_and(|s| s.get().len() > limits.max_state_bytes.get())
    {
        return Err(RequestError::StateTooLarge(limits.max_state_bytes.get()));
    }
    let input: RunAgentInput = serde_json::from_slice(body).map_err(json_error)?;
    request::check_ids(&input, limits.max_id_bytes.get())?;
    Ok(input)
}

pub(crate) fn json_error(e: serde_json::Error) -> RequestError {
    match e.classify() {
        serde_json::error::Category::Data => RequestError::InvalidRunInput(e.to_string()),
        _ => RequestError::MalformedJson(format!("body is not valid JSON: {e}")),
    }
}

/// docs/design.md#4-threads-and-contexts, docs/design.md#11-security: explicit ids are honoured
/// only for contexts the caller may use. A named
/// context (props, state) created by someone else is unknown; so is a named task (props,
/// a resumed interrupt, `subscribeOnly`, a waiting task in state) whose context is someone
/// else's, or foreign to a caller who may not see foreign contexts. A caller with
/// `threads:all` (the anonymous one without inbound auth) may use any: nothing is asked.
async fn check_ownership(
    s: &AppState,
    agent: &Agent,
    caller: &Caller,
    plan: &request::Plan,
) -> Result<(), RequestError> {
    if caller.has_scope(auth::SCOPE_THREADS_ALL) {
        return Ok(());
    }
    let name = &agent.settings.name;
    for context_id in [&plan.options.context_id, &plan.state_context_id]
        .into_iter()
        .flatten()
    {
        if let Some((owner, _)) = s.store.owner_of(name, context_id).await {
            if !caller.may_use(&owner) {
                return Err(RequestError::UnknownThread);
            }
        }
    }
    let Some(task_id) = plan.task_id() else {
        return Ok(());
    };
    // Boxed: only a run naming a task asks the upstream, and the call's state is KiBs.
    let Some(context_id) = Box::pin(task_context(s, agent, caller, task_id)).await else {
        return Ok(());
    };
    // No ownership record (a forgotten one: memory store restarted, TTL elapsed): the
    // client that names the task's context itself is trusted with it.
    let named = [&plan.options.context_id, &plan.state_context_id]
        .into_iter()
        .flatten()
        .any(|c| *c == context_id);
    let creator = s.store.owner_of(name, &context_id).await.map(|(c, _)| c);
    let allowed = (creator.is_none() && named)
        || caller.may_use_context(creator.as_ref(), agent.settings.visibility);
    if allowed {
        Ok(())
    } else {
        Err(RequestError::UnknownThread)
    }
}

/// The context of the task `task_id`, from the upstream (bounded by
/// `timeouts.upstream_call`); `None` for a task the upstream cannot show (left to the run,
/// which reports it in the stream).
async fn task_context(
    s: &AppState,
    agent: &Agent,
    caller: &Caller,
    task_id: &str,
) -> Option<ContextId> {
    // The task's context, from the upstream (bounded by `timeouts.upstream_call`); a task
    // the upstream cannot show is left to the run, which reports it in the stream.
    let upstream = s.registry.resolve_as(agent, caller).await.ok()?;
    let task_id = TaskId::new(task_id);
    let task = upstream
        .client
        .get_task(&upstream.ctx, &task_id, Some(0))
        .await
        .ok()?;
    task.context_id.map(ContextId::new)
}

/// `POST /agents/{name}`: an AG-UI run.
pub(crate) async fn run_agent(
    State(s): State<AppState>,
    AgentRef(agent): AgentRef,
    caller: Caller,
    req: Request,
) -> Result<Response, RequestError> {
    let body = read_run(&s, &caller, req).await?;
    let options = request::RunOptions::parse(&body.input)?;
    start_run(&s, agent, &caller, body, options, "run").await
}

/// A run request as read: its body, its headers (for the trace context), the encoding its
/// stream is to be written in, and the run slot it holds.
#[derive(Debug)]
pub(crate) struct RunBody {
    pub input: RunAgentInput,
    pub headers: HeaderMap,
    pub encoding: Encoding,
    pub permit: OwnedSemaphorePermit,
}

/// Reads a run's body within its limits, once the caller's rate and a run slot allow it.
pub(crate) async fn read_run(
    s: &AppState,
    caller: &Caller,
    req: Request,
) -> Result<RunBody, RequestError> {
    let addr = req.extensions().get::<ClientAddr>().map(|a| a.0.ip());
    check_rate(s, caller, addr)?;
    if !is_json(&req) {
        return Err(RequestError::UnsupportedMediaType);
    }
    let headers = req.headers().clone();
    // The slot first: a body in memory is part of a run's cost
    // (docs/design.md#9-reliability-and-limits).
    let permit = s
        .runs
        .clone()
        .try_acquire_owned()
        .map_err(|_| RequestError::TooManyRuns(s.limits.max_concurrent_runs.get()))?;
    let body = read_body(s, req.into_body()).await?;
    let input = parse_input(&body, &s.limits)?;
    Ok(RunBody {
        encoding: Encoding::negotiate(&headers, input.is_v1_client()),
        input,
        headers,
        permit,
    })
}

/// Takes one token of the caller's `rate_limits` bucket (the client's address for the
/// anonymous caller): `429 rate_limited` when it is empty. Runs, and the CopilotKit thread
/// reads that call the upstream as a `connect` does.
pub(crate) fn check_rate(
    s: &AppState,
    caller: &Caller,
    addr: Option<std::net::IpAddr>,
) -> Result<(), RequestError> {
    if let Some(limiter) = &s.run_limiter {
        let key = ratelimit::RunLimiter::key(caller.id.as_str(), caller.is_anonymous(), addr);
        if let Err(wait) = limiter.check(&key) {
            s.metrics.rate_limited();
            return Err(RequestError::RateLimited(wait));
        }
    }
    Ok(())
}

/// A request body, within `limits.max_body_bytes` and `timeouts.body_read`.
pub(crate) async fn read_body(s: &AppState, body: Body) -> Result<bytes::Bytes, RequestError> {
    let limit = s.limits.max_body_bytes.get();
    let read = axum::body::to_bytes(body, limit);
    tokio::time::timeout(s.timeouts.body_read(), read)
        .await
        .map_err(|_| RequestError::BodyTimeout(s.timeouts.body_read()))?
        .map_err(|e| body_error(&e, limit))
}

/// Plans the run with its `options`, checks the ids it names are the caller's, and streams
/// it; `what` names the request in the log (`run`, or CopilotKit's `connect`).
pub(crate) async fn start_run(
    s: &AppState,
    agent: Arc<Agent>,
    caller: &Caller,
    body: RunBody,
    options: request::RunOptions,
    what: &'static str,
) -> Result<Response, RequestError> {
    let RunBody {
        input,
        headers,
        encoding,
        permit,
    } = body;
    let plan = request::plan(&input, options)?;
    check_ownership(s, &agent, caller, &plan).await?;
    // docs/design.md#10-observability: the run's span, child of the client's `traceparent`;
    // logs carry its id.
    let trace = s
        .traces
        .as_ref()
        .map(|t| t.run(&headers, &agent.settings.name, input.thread_id.as_str()));
    let trace_id = trace.as_ref().map(|t| t.trace_id()).unwrap_or_default();
    tracing::info!(agent = %agent.settings.name, caller = %Shown(caller.id.as_str()), thread_id = %Shown(input.thread_id.as_str()), run_id = %Shown(&input.run_id), trace_id, "{what}");
    // Contexts not created through the gateway (docs/design.md#11-security).
    let may_pick_up = caller.may_see_foreign(agent.settings.visibility);
    let events = run::start(RunRequest {
        agent,
        env: s.run.clone(),
        input,
        plan,
        permit,
        may_pick_up,
        owner: caller.id.clone(),
        caller_token: caller.token.clone(),
        trace,
    });
    Ok(event_stream(events, encoding))
}

/// A `200` response streaming `batches` in `encoding`.
pub(crate) fn event_stream<S>(batches: S, encoding: Encoding) -> Response
where
    EventBody<S>:
        futures::Stream<Item = Result<bytes::Bytes, std::convert::Infallible>> + Send + 'static,
{
    let body = EventBody::new(batches, encoding, stream::KEEP_ALIVE);
    let mut resp = Response::new(Body::from_stream(body));
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(encoding.content_type()),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::state::Shared;
    use crate::registry::Registry;
    use axum::body::Body;
    use axum::http::Request as HttpRequest;
    use tower::ServiceExt;

    /// The state of a gateway with no agent, one run slot, one browser origin and the
    /// CopilotKit routes, to adjust before it is shared.
    fn shared() -> Shared {
        let config = crate::config::settings(
            Default::default(),
            crate::config::Overrides {
                demo: true,
                ..Default::default()
            },
        )
        .unwrap();
        let registry = Arc::new(
            Registry::new(
                Vec::new(),
                Duration::from_secs(1),
                Duration::from_secs(1),
                1024,
            )
            .unwrap(),
        );
        Shared {
            runs: Arc::new(tokio::sync::Semaphore::new(1)),
            cors_origins: vec![HeaderValue::from_static("https://app.example")],
            copilotkit_base_path: Some("/copilotkit".into()),
            ..Shared::for_tests(&config, registry)
        }
    }

    fn state() -> AppState {
        shared().into()
    }

    /// docs/operations.md#readiness, every row: an agent whose card is unread is `200
    /// degraded`, `503 not_ready` asked strictly (the query, with any value or none, or the
    /// config); draining is `503` whatever else holds; all read is `200 ready`.
    #[tokio::test]
    async fn readyz_is_503_only_draining_or_strict() {
        let down = crate::config::AgentSettings::plain(
            "down".into(),
            url::Url::parse("http://127.0.0.1:9").unwrap(),
        );
        let with = |agents: Vec<crate::config::AgentSettings>, strict: bool| {
            let registry =
                Registry::new(agents, Duration::from_secs(1), Duration::from_secs(1), 1024);
            let base = shared();
            let run = crate::run::Env {
                registry: Arc::new(registry.unwrap()),
                store: base.run.store.clone(),
                limits: base.run.limits,
                timeouts: base.run.timeouts,
                metrics: base.run.metrics.clone(),
                stop: base.run.stop.clone(),
                inbox: base.run.inbox.clone(),
                push: base.run.push.clone(),
            };
            let mut s = Shared {
                run: Arc::new(run),
                ..base
            };
            s.readiness.strict = strict;
            AppState::from(s)
        };
        let ask = |state: &AppState, uri: &'static str| {
            let app = router(state.clone());
            async move {
                let req = HttpRequest::builder().uri(uri).body(Body::empty()).unwrap();
                let resp = app.oneshot(req).await.unwrap();
                let status = resp.status().as_u16();
                let body = axum::body::to_bytes(resp.into_body(), 1 << 16)
                    .await
                    .unwrap();
                let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
                (status, body)
            }
        };
        let degraded = with(vec![down.clone()], false);
        let (status, body) = ask(&degraded, "/readyz").await;
        assert_eq!(status, 200);
        assert_eq!(body, json!({"status": "degraded", "agents": ["down"]}));
        for uri in ["/readyz?strict", "/readyz?strict=", "/readyz?a=b&strict=no"] {
            let (status, body) = ask(&degraded, uri).await;
            assert_eq!(status, 503, "{uri}");
            assert_eq!(
                body,
                json!({"status": "not_ready", "agents": ["down"]}),
                "{uri}"
            );
        }
        assert_eq!(ask(&degraded, "/readyz?strictly").await.0, 200);
        let strict = with(vec![down], true);
        assert_eq!(ask(&strict, "/readyz").await.0, 503);
        let ready = with(Vec::new(), true);
        assert_eq!(
            ask(&ready, "/readyz?strict").await,
            (200, json!({"status": "ready"}))
        );
        for state in [&degraded, &strict, &ready] {
            state
                .draining
                .store(true, std::sync::atomic::Ordering::SeqCst);
            let (status, body) = ask(state, "/readyz").await;
            assert_eq!(
                (status, &body["status"]),
                (503, &json!("draining")),
                "{body}"
            );
        }
    }

    #[tokio::test]
    async fn cors_answers_listed_origins_only() {
        let preflight = |origin: &'static str| {
            HttpRequest::builder()
                .method("OPTIONS")
                .uri("/agents/demo")
                .header("origin", origin)
                .header("access-control-request-method", "POST")
                .header("access-control-request-headers", "content-type")
                .body(Body::empty())
                .unwrap()
        };
        let ok = router(state())
            .oneshot(preflight("https://app.example"))
            .await
            .unwrap();
        assert_eq!(
            ok.headers()["access-control-allow-origin"],
            "https://app.example"
        );
        let other = router(state())
            .oneshot(preflight("https://evil.example"))
            .await
            .unwrap();
        assert!(other.headers().get("access-control-allow-origin").is_none());
    }

    /// Every JSON error repeats its message at the top level (CopilotKit shows only that);
    /// a known route asked with another method is a JSON 405, an unknown one a JSON 404.
    #[tokio::test]
    async fn errors_are_json_with_a_top_level_message_and_405_is_one() {
        for (method, uri, status, code) in [
            (
                "DELETE",
                "/agents",
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
            ),
            (
                "PUT",
                "/agents/x",
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
            ),
            ("GET", "/nope", StatusCode::NOT_FOUND, "not_found"),
        ] {
            let req = HttpRequest::builder()
                .method(method)
                .uri(uri)
                .body(Body::empty())
                .unwrap();
            let resp = router(state()).oneshot(req).await.unwrap();
            assert_eq!(resp.status(), status, "{method} {uri}");
            let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
                .await
                .unwrap();
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(body["error"]["code"], code, "{body}");
            assert_eq!(body["message"], body["error"]["message"], "{body}");
        }
    }

    /// Each first segment of [`routes::OWN`] is the router's (none answers 404), so the list
    /// the CopilotKit base path is checked against is what the router mounts.
    #[tokio::test]
    async fn every_listed_first_segment_is_routed() {
        let app = router(state());
        for segment in routes::OWN {
            // `a2a` holds only the push route (POST /a2a/push/{agent}).
            let (method, uri) = match segment {
                "a2a" => ("POST", "/a2a/push/x".to_owned()),
                _ => ("GET", format!("/{segment}")),
            };
            let req = HttpRequest::builder()
                .method(method)
                .uri(&uri)
                .body(Body::empty())
                .unwrap();
            let resp = app.clone().oneshot(req).await.unwrap();
            assert_ne!(resp.status(), StatusCode::NOT_FOUND, "{uri}");
        }
        let req = HttpRequest::builder()
            .uri("/nope")
            .body(Body::empty())
            .unwrap();
        let resp = app.oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    }

    /// With inbound auth configured, exactly these answer without credentials (the list
    /// README and docs/security.md give): the probes, the OpenAPI description, the
    /// console's files, and `/metrics` only with `metrics_public`. Every described
    /// operation and the console's files are tried.
    #[tokio::test]
    async fn with_inbound_auth_only_the_documented_routes_are_open() {
        let spec: serde_json::Value = serde_json::from_str(OPENAPI).unwrap();
        let mut requests = Vec::new();
        for (path, item) in spec["paths"].as_object().unwrap() {
            for method in ["get", "post"] {
                if item.get(method).is_some() {
                    let uri = path
                        .replace("{name}", "demo")
                        .replace("{threadId}", "t")
                        .replace("{file}", "console.js");
                    requests.push((method.to_uppercase(), uri));
                }
            }
        }
        for uri in ["/console/", "/console/index.html", "/console/nope", "/nope"] {
            requests.push(("GET".to_owned(), uri.to_owned()));
        }
        let keyed: crate::config::AuthConfig =
            serde_yaml_ng::from_str("api_keys: [{name: console, key: k-0123456789abcdef}]")
                .unwrap();
        for metrics_public in [false, true] {
            let mut s = shared();
            s.auth = Arc::new(crate::auth::Authenticator::new(
                &crate::config::inbound::parse(&keyed, &[]).unwrap(),
            ));
            s.metrics_public = metrics_public;
            let app = router(s.into());
            let mut open = Vec::new();
            for (method, uri) in &requests {
                let req = HttpRequest::builder()
                    .method(method.as_str())
                    .uri(uri)
                    .header("content-type", "application/json")
                    .body(Body::from("{}"))
                    .unwrap();
                let resp = app.clone().oneshot(req).await.unwrap();
                if resp.status() != StatusCode::UNAUTHORIZED {
                    open.push(format!("{method} {uri}"));
                }
            }
            open.sort();
            let mut expected = vec![
                "GET /console",
                "GET /console/",
                "GET /console/console.js",
                "GET /console/index.html",
                "GET /console/nope",
                "GET /healthz",
                "GET /openapi.json",
                "GET /readyz",
            ];
            if metrics_public {
                expected.push("GET /metrics");
                expected.sort();
            }
            assert_eq!(open, expected, "metrics_public: {metrics_public}");
            // Another method on an open route is the same JSON 405 as on a guarded one,
            // without credentials.
            for uri in [
                "/healthz",
                "/readyz",
                "/openapi.json",
                "/console",
                "/console/x",
            ] {
                let req = HttpRequest::builder()
                    .method("POST")
                    .uri(uri)
                    .body(Body::empty())
                    .unwrap();
                let resp = app.clone().oneshot(req).await.unwrap();
                assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED, "{uri}");
                let body = axum::body::to_bytes(resp.into_body(), 1 << 16)
                    .await
                    .unwrap();
                let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
                assert_eq!(body["error"]["code"], "method_not_allowed", "{uri}");
            }
        }
    }

    /// Every route that names an agent answers a name no agent has with the same JSON `404
    /// unknown_agent` (one lookup, [`AgentRef`]): each described operation with `{name}`,
    /// and the CopilotKit envelope's methods that name one.
    #[tokio::test]
    async fn every_route_naming_an_agent_answers_an_unknown_one_alike() {
        let spec: serde_json::Value = serde_json::from_str(OPENAPI).unwrap();
        let mut requests = Vec::new();
        for (path, item) in spec["paths"].as_object().unwrap() {
            for method in ["get", "post"] {
                if path.contains("{name}") && item.get(method).is_some() {
                    let uri = path.replace("{name}", "nope").replace("{threadId}", "t");
                    requests.push((method.to_uppercase(), uri, json!({})));
                }
            }
        }
        assert_eq!(requests.len(), 7, "{requests:?}");
        for method in ["agent/run", "agent/connect", "agent/stop"] {
            let envelope = json!({"method": method, "params": {"agentId": "nope", "threadId": "t"},
                "body": {"threadId": "t", "runId": "r", "messages": []}});
            requests.push(("POST".to_owned(), "/copilotkit".to_owned(), envelope));
        }
        for (method, uri, body) in requests {
            let req = HttpRequest::builder()
                .method(method.as_str())
                .uri(&uri)
                .header("content-type", "application/json")
                .body(Body::from(body.to_string()))
                .unwrap();
            let resp = router(state()).oneshot(req).await.unwrap();
            assert_eq!(
                resp.status(),
                StatusCode::NOT_FOUND,
                "{method} {uri} {body}"
            );
            let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
                .await
                .unwrap();
            let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(
                body["error"]["code"], "unknown_agent",
                "{method} {uri}: {body}"
            );
            assert!(body["message"].as_str().unwrap().contains("nope"), "{body}");
        }
    }

    /// The error codes `openapi/openapi.json` lists are exactly the request errors' codes.
    #[test]
    fn openapi_lists_every_request_error_code() {
        let spec: serde_json::Value =
            serde_json::from_str(include_str!("../openapi/openapi.json")).unwrap();
        let listed: std::collections::BTreeSet<&str> = spec["components"]["schemas"]["Error"]
            ["properties"]["error"]["properties"]["code"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        let codes: std::collections::BTreeSet<&str> = crate::error::every_request_error()
            .iter()
            .map(RequestError::code)
            .collect();
        assert_eq!(listed, codes);
    }

    /// An agent that cannot be read (here: nothing listens at its URL, so its card is never
    /// read) is a 502 on its thread list and its thread, and is named in the inbox's
    /// `unavailable` — never an empty list (docs/design.md#3-http-surface). The OpenAPI's
    /// codes for it are the request errors'.
    #[tokio::test]
    async fn an_agent_that_cannot_be_read_is_never_an_empty_list() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let config = crate::config::settings(
            Default::default(),
            crate::config::Overrides {
                agents: vec![format!("down=http://{closed}")],
                ..Default::default()
            },
        )
        .unwrap();
        let mut s = shared();
        let registry = Registry::new(
            config.agents,
            Duration::from_secs(1),
            Duration::from_secs(1),
            1024,
        );
        s.run = Arc::new(crate::run::Env {
            registry: Arc::new(registry.unwrap()),
            ..(*s.run).clone()
        });
        let s = AppState::from(s);
        let get = |uri: &str| {
            let req = HttpRequest::builder().uri(uri).body(Body::empty()).unwrap();
            let app = router(s.clone());
            async move {
                let resp = app.oneshot(req).await.unwrap();
                let status = resp.status();
                let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
                    .await
                    .unwrap();
                let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
                (status, body)
            }
        };
        for uri in ["/agents/down/threads", "/agents/down/threads/t1"] {
            let (status, body) = get(uri).await;
            assert_eq!(status, StatusCode::BAD_GATEWAY, "{uri}: {body}");
            assert_eq!(body["error"]["code"], "upstream_unavailable", "{body}");
            assert!(
                body["message"].as_str().unwrap().contains("down"),
                "names the agent: {body}"
            );
        }
        let (status, inbox) = get("/threads?status=input-required").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            inbox["unavailable"],
            json!([{"agent": "down", "code": "upstream_unavailable"}])
        );
        assert_eq!(inbox["threads"], json!([]));

        let spec: serde_json::Value = serde_json::from_str(OPENAPI).unwrap();
        let codes = &spec["components"]["schemas"]["Unavailable"]["properties"]["code"]["enum"];
        let upstream = [
            RequestError::UpstreamUnavailable(String::new()),
            RequestError::UpstreamTimeout(String::new()),
            RequestError::UpstreamAuthFailed(String::new()),
        ];
        assert_eq!(*codes, json!(upstream.map(|e| e.code())));
    }

    /// Every operation in `openapi/openapi.json` is routed (no fallback 404, no 405), so
    /// the checked-in description cannot drift from the router.
    #[tokio::test]
    async fn openapi_describes_routed_operations() {
        let spec: serde_json::Value =
            serde_json::from_str(include_str!("../openapi/openapi.json")).unwrap();
        let paths = spec["paths"].as_object().unwrap();
        let mut operations = 0;
        for (path, item) in paths {
            for method in ["get", "post", "put", "delete", "patch"] {
                if item.get(method).is_none() {
                    continue;
                }
                operations += 1;
                let uri = path.replace("{name}", "x");
                let req = HttpRequest::builder()
                    .method(method.to_uppercase().as_str())
                    .uri(&uri)
                    .header("content-type", "application/json")
                    .body(Body::from("{}"))
                    .unwrap();
                let resp = router(state()).oneshot(req).await.unwrap();
                assert_ne!(
                    resp.status(),
                    StatusCode::METHOD_NOT_ALLOWED,
                    "{method} {path}"
                );
                if path == "/threads/events" {
                    assert_eq!(resp.status(), StatusCode::OK);
                    // A change feed: it does not end.
                    continue;
                }
                let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
                    .await
                    .unwrap();
                let body: serde_json::Value =
                    serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
                assert_ne!(
                    body["error"]["code"], "not_found",
                    "{method} {path} is not routed"
                );
            }
        }
        // The router's operations, each described (a route added without its description
        // fails here).
        assert_eq!(operations, 26);
        let unrouted = HttpRequest::builder()
            .uri("/nope")
            .body(Body::empty())
            .unwrap();
        let resp = router(state()).oneshot(unrouted).await.unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    }
}
