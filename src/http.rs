//! The HTTP surface (DESIGN §3): thin axum handlers, the router, and the error format.
//!
//! Two error regimes: before the stream starts, a problem with the request itself is a
//! JSON body `{"error": {"code", "message"}}` with a fitting status; after the `200`, every
//! failure is one `RUN_ERROR` event (produced by [`crate::run`]). Anything upstream — even
//! an unreachable agent — is reported in the stream, never as an HTTP error.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::json;
use tokio::sync::Semaphore;

use crate::agui::RunAgentInput;
use crate::binding::BindingStore;
use crate::bridge::request;
use crate::config::{Limits, TimeoutSettings};
use crate::redact::Shown;
use crate::registry::Registry;
use crate::run::{self, RunRequest};

pub mod listener;

/// Interval of SSE keep-alive comments on run streams.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Shared state of the handlers.
#[derive(Clone)]
pub struct AppState {
    pub registry: Arc<Registry>,
    pub bindings: Arc<BindingStore>,
    pub limits: Limits,
    pub timeouts: TimeoutSettings,
    pub runs: Arc<Semaphore>,
    /// Flipped to `true` when open runs must end (shutdown after the drain period).
    pub stop: tokio::sync::watch::Receiver<bool>,
    /// Browser origins allowed cross-origin access.
    pub cors_origins: Vec<HeaderValue>,
}

/// A request problem, reported before any stream starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    #[error("no agent named {0:?} is configured")]
    UnknownAgent(String),
    #[error("{0}")]
    Malformed(String),
    #[error("{message}")]
    Invalid { code: &'static str, message: String },
    #[error("request body exceeds limits.max_body_bytes ({0} bytes)")]
    TooLarge(usize),
    #[error("state exceeds limits.max_state_bytes ({0} bytes)")]
    StateTooLarge(usize),
    #[error("the request body did not arrive within timeouts.body_read ({0} ms)")]
    BodyTimeout(u128),
    #[error("expected Content-Type: application/json")]
    UnsupportedMediaType,
    #[error("the gateway is running limits.max_concurrent_runs ({0}) runs; retry later")]
    Busy(usize),
}

impl ApiError {
    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            Self::UnknownAgent(_) => (StatusCode::NOT_FOUND, "unknown_agent"),
            Self::Malformed(_) => (StatusCode::BAD_REQUEST, "malformed_json"),
            Self::Invalid { code, .. } => (StatusCode::UNPROCESSABLE_ENTITY, code),
            Self::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large"),
            Self::StateTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "state_too_large"),
            Self::BodyTimeout(_) => (StatusCode::REQUEST_TIMEOUT, "body_timeout"),
            Self::UnsupportedMediaType => {
                (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
            }
            Self::Busy(_) => (StatusCode::TOO_MANY_REQUESTS, "too_many_runs"),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        let body = json!({"error": {"code": code, "message": self.to_string()}});
        (status, Json(body)).into_response()
    }
}

impl From<request::InvalidInput> for ApiError {
    fn from(e: request::InvalidInput) -> Self {
        Self::Invalid {
            code: e.code,
            message: e.message,
        }
    }
}

/// CORS for the configured browser origins only (none: no CORS headers, so browsers keep
/// cross-origin pages out). Preflights are answered before anything else.
fn cors(origins: &[HeaderValue]) -> tower_http::cors::CorsLayer {
    use axum::http::Method;
    tower_http::cors::CorsLayer::new()
        .allow_origin(origins.to_vec())
        .allow_methods([Method::GET, Method::POST])
        .allow_headers([header::CONTENT_TYPE, header::ACCEPT, header::AUTHORIZATION])
        .max_age(Duration::from_secs(600))
}

/// The router over `state`.
pub fn router(state: AppState) -> Router {
    let cors = cors(&state.cors_origins);
    Router::new()
        .route("/agents", get(list_agents))
        .route("/agents/{name}", post(run_agent).get(get_agent))
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/readyz", get(readyz))
        .fallback(|| async {
            (
                StatusCode::NOT_FOUND,
                Json(json!({"error": {"code": "not_found", "message": "no such route"}})),
            )
        })
        .layer(cors)
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

async fn list_agents(State(s): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({"agents": s.registry.all().map(|a| a.summary()).collect::<Vec<_>>()}))
}

async fn get_agent(
    State(s): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let agent = s.registry.get(&name).ok_or(ApiError::UnknownAgent(name))?;
    Ok(Json(agent.detail()))
}

async fn readyz(State(s): State<AppState>) -> Response {
    let not_ready = s.registry.not_ready();
    if not_ready.is_empty() {
        Json(json!({"status": "ready"})).into_response()
    } else {
        let body = json!({"status": "not_ready", "agents": not_ready});
        (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
    }
}

fn is_json(req: &Request) -> bool {
    req.headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| {
            let mime = mime.trim().to_ascii_lowercase();
            mime == "application/json" || mime.ends_with("+json")
        })
}

/// A body over the limit is a 413; one that could not be read at all (the client went away
/// mid-upload) a 400.
fn body_error(e: &axum::Error, limit: usize) -> ApiError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if err.is::<http_body_util::LengthLimitError>() {
            return ApiError::TooLarge(limit);
        }
        source = err.source();
    }
    ApiError::Malformed(format!("could not read the request body: {e}"))
}

/// Parses a run body: a JSON syntax error is a 400, a JSON that is not a `RunAgentInput`
/// a 422 naming the problem, a `state` over `limits.max_state_bytes` a 413 (measured on
/// the raw text before anything is built from it), an id over `limits.max_id_bytes` a 422.
pub fn parse_input(body: &[u8], limits: &Limits) -> Result<RunAgentInput, ApiError> {
    /// Only the state's extent: its text is skipped, not parsed into values.
    #[derive(serde::Deserialize)]
    struct StateExtent<'a> {
        #[serde(borrow, default)]
        state: Option<&'a serde_json::value::RawValue>,
    }
    let extent: StateExtent<'_> = serde_json::from_slice(body).map_err(json_error)?;
    if extent
        .state
        .is_some_and(|s| s.get().len() > limits.max_state_bytes)
    {
        return Err(ApiError::StateTooLarge(limits.max_state_bytes));
    }
    let input: RunAgentInput = serde_json::from_slice(body).map_err(json_error)?;
    request::check_ids(&input, limits.max_id_bytes)?;
    Ok(input)
}

fn json_error(e: serde_json::Error) -> ApiError {
    match e.classify() {
        serde_json::error::Category::Data => ApiError::Invalid {
            code: "invalid_run_input",
            message: format!("not a RunAgentInput: {e}"),
        },
        _ => ApiError::Malformed(format!("body is not valid JSON: {e}")),
    }
}

/// `POST /agents/{name}`: an AG-UI run.
async fn run_agent(
    State(s): State<AppState>,
    Path(name): Path<String>,
    req: Request,
) -> Result<Response, ApiError> {
    let agent = s.registry.get(&name).ok_or(ApiError::UnknownAgent(name))?;
    if !is_json(&req) {
        return Err(ApiError::UnsupportedMediaType);
    }
    // The slot first: a body in memory is part of a run's cost (DESIGN §9).
    let permit = s
        .runs
        .clone()
        .try_acquire_owned()
        .map_err(|_| ApiError::Busy(s.limits.max_concurrent_runs))?;
    let limit = s.limits.max_body_bytes;
    let read = axum::body::to_bytes(req.into_body(), limit);
    let body = tokio::time::timeout(s.timeouts.body_read, read)
        .await
        .map_err(|_| ApiError::BodyTimeout(s.timeouts.body_read.as_millis()))?
        .map_err(|e| body_error(&e, limit))?;
    let input = parse_input(&body, &s.limits)?;
    drop(body);
    let plan = request::plan(&input)?;
    tracing::info!(agent = %agent.settings.name, thread_id = %Shown(&input.thread_id), run_id = %Shown(&input.run_id), "run");
    let events = run::start(RunRequest {
        agent,
        registry: s.registry.clone(),
        bindings: s.bindings.clone(),
        input,
        plan,
        limits: s.limits.clone(),
        timeouts: s.timeouts,
        permit,
        stop: s.stop.clone(),
    });
    let mut resp = Response::new(Body::from_stream(with_keep_alive(events, KEEP_ALIVE)));
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    Ok(resp)
}

/// The run's SSE chunks, with a `: keep-alive` comment after every `interval` of silence
/// (comment lines are ignored by SSE parsers, `@ag-ui/client` included).
fn with_keep_alive(
    events: impl Stream<Item = Bytes> + Send + Unpin + 'static,
    interval: Duration,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send {
    futures::stream::unfold(events, move |mut events| async move {
        let item = match tokio::time::timeout(interval, events.next()).await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => return None,
            Err(_) => Bytes::from_static(b": keep-alive\n\n"),
        };
        Some((Ok(item), events))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request as HttpRequest;
    use tower::ServiceExt;

    fn state() -> AppState {
        let config = crate::config::settings(
            Default::default(),
            crate::config::Overrides {
                demo: true,
                ..Default::default()
            },
        )
        .unwrap();
        AppState {
            registry: Arc::new(Registry::new(
                Vec::new(),
                reqwest::Client::new(),
                Duration::from_secs(1),
                1024,
            )),
            bindings: Arc::new(BindingStore::memory()),
            limits: config.limits,
            timeouts: config.timeouts,
            runs: Arc::new(Semaphore::new(1)),
            stop: tokio::sync::watch::channel(false).1,
            cors_origins: vec![HeaderValue::from_static("https://app.example")],
        }
    }

    #[tokio::test(start_paused = true)]
    async fn quiet_streams_get_keep_alive_comments_and_end_with_the_run() {
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(4);
        let events = tokio_stream::wrappers::ReceiverStream::new(rx);
        let mut body = Box::pin(with_keep_alive(events, KEEP_ALIVE));
        let first = body.next().await.unwrap().unwrap();
        assert_eq!(&first[..], b": keep-alive\n\n");
        tx.send(Bytes::from_static(b"data: {}\n\n")).await.unwrap();
        assert_eq!(&body.next().await.unwrap().unwrap()[..], b"data: {}\n\n");
        drop(tx);
        assert!(
            body.next().await.is_none(),
            "the body ends when the run does"
        );
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
                let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
                    .await
                    .unwrap();
                let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
                assert_ne!(
                    body["error"]["code"], "not_found",
                    "{method} {path} is not routed"
                );
            }
        }
        assert_eq!(operations, 5);
        let unrouted = HttpRequest::builder()
            .uri("/nope")
            .body(Body::empty())
            .unwrap();
        let resp = router(state()).oneshot(unrouted).await.unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    }
}
