//! CopilotKit runtime routes (docs/design.md#3-http-surface) under `copilotkit.base_path`: a
//! second thin adapter over the run path and the threads API, so a CopilotKit frontend
//! (`runtimeUrl` = the base path) talks to A2A agents with no CopilotKit runtime in between.
//! Same auth, ownership and limits as every other route (the router's layers wrap these too).
//!
//! The shapes, from CopilotKit's own runtime (github.com/CopilotKit/CopilotKit at e9387e0,
//! `packages/runtime/src/v2/runtime/`; the client is `packages/core/src/agent.ts`,
//! `ProxiedCopilotRuntimeAgent`):
//! - `GET {base}/info` (`handlers/get-runtime-info.ts`): `RuntimeInfo` of
//!   `packages/shared/src/utils/types.ts`: `{version, agents: {<id>: {name, className,
//!   description, capabilities?}}, audioFileTranscriptionEnabled, mode: "sse",
//!   threadEndpoints: {list, inspect, mutations, realtimeMetadata}, suggestions, a2uiEnabled,
//!   openGenerativeUIEnabled, telemetryDisabled}`; `capabilities` is AG-UI's
//!   `AgentCapabilities` (`transport`, `state`, `humanInTheLoop`, …). `suggestions: false`
//!   makes the client generate suggestions with a plain run.
//! - `POST {base}/agent/{id}/run` (`handlers/handle-run.ts`): the body is a `RunAgentInput`,
//!   the answer the run's SSE: here exactly `POST /agents/{id}`.
//! - `POST {base}/agent/{id}/connect` (`handlers/handle-connect.ts`, `sse/connect.ts`,
//!   `runner/in-memory.ts` `connect`): the body is a `RunAgentInput` (only `threadId` is
//!   read there; `lastSeenEventId` may ride along). The in-memory runner replays the thread's
//!   stored events, then bridges the live run if one runs; a thread it does not know is an
//!   empty stream (no events), which the client accepts — an error there would show as
//!   `AGENT_CONNECT_FAILED` on every page load of a new thread (`core/run-handler.ts`
//!   `connectAgent`). Here: the thread's A2A history as one run (`RUN_STARTED`,
//!   `STATE_SNAPSHOT`, `MESSAGES_SNAPSHOT` of every turn, the last task's state with its
//!   pending interrupts), then that task's further events while it runs (`subscribeOnly`,
//!   [`crate::run`] `follow`), one terminal event last.
//! - `POST {base}/agent/{id}/stop/{threadId}` (`handlers/handle-stop.ts`): no body;
//!   `{stopped: true, interrupt: {type: "RUN_ERROR", message, code: "STOPPED"}}` or
//!   `{stopped: false, message}`; the client fires it and ignores the answer. Here: A2A
//!   `CancelTask` on the thread's tasks that still work; the open run stream sees the task
//!   end as canceled.
//! - `POST {base}` (`endpoints/single-route-helpers.ts`, `core/fetch-handler.ts`): the
//!   single-route envelope `{method, params, body}`; `method` is `info`, `agent/run`,
//!   `agent/connect` (`params.agentId`, `body` the `RunAgentInput`) or `agent/stop`
//!   (`params.agentId`, `params.threadId`), or `resource/request` (`params.path` under
//!   `/threads`, `params.httpMethod`, `body`: the thread routes of
//!   [`super::copilotkit_threads`], sent this way when `info` says
//!   `singleRoute.resourceOperations`). CopilotKit also has `agent/suggest`, `transcribe` and
//!   `inspector/metadata`; the gateway has none of them (a 422).
//!
//! A thread is the caller's (docs/design.md#11-security): one a caller has not started is new
//! to them (an empty connect, nothing to stop); naming a context someone else created is a
//! 404.

use axum::extract::{Path, Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::encoding::Encoding;
use super::{threads, AgentRef};
use crate::agui::{Event, RunAgentInput};
use crate::app::state::AppState;
use crate::auth::Caller;
use crate::bridge::request::RunOptions;
use crate::bridge::{history, Projector, RunFrame};
use crate::config::COPILOTKIT_DEFAULT_AGENT;
use crate::error::{RequestError, RunError};
use crate::ids::{ContextId, TaskId, ThreadId};
use crate::redact::Shown;
use crate::registry::Agent;

/// The routes under `base` (none when `base` is `None`).
pub(crate) fn routes(base: Option<&str>) -> Router<AppState> {
    let Some(base) = base else {
        return Router::new();
    };
    Router::new()
        .route(&format!("{base}/info"), get(info))
        .route(&format!("{base}/agent/{{id}}/run"), post(super::run_agent))
        .route(&format!("{base}/agent/{{id}}/connect"), post(connect))
        .route(
            &format!("{base}/agent/{{id}}/stop/{{thread_id}}"),
            post(stop),
        )
        .route(base, post(single_route))
}

/// What `info` advertises of the thread routes (`copilotkit_threads`): no realtime metadata
/// (a Phoenix socket to Intelligence, which would also switch the client to Intelligence's
/// memories).
fn thread_endpoints() -> Value {
    json!({"list": true, "inspect": true, "mutations": true, "realtimeMetadata": false})
}

/// `GET {base}/info`: the agents keyed by id, and the one answering as `default` under that
/// id too (`copilotkit.default_agent`).
async fn info(State(s): State<AppState>) -> Json<Value> {
    let mut agents: Map<String, Value> = s
        .registry
        .all()
        .map(|a| (a.settings.name.clone(), describe(a)))
        .collect();
    if let Some(default) = s.copilotkit_default_agent.as_deref() {
        if let Some(described) = agents.get(default).cloned() {
            agents.insert(COPILOTKIT_DEFAULT_AGENT.to_owned(), described);
        }
    }
    Json(json!({
        "version": env!("CARGO_PKG_VERSION"),
        "agents": agents,
        "audioFileTranscriptionEnabled": false,
        "mode": "sse",
        "threadEndpoints": thread_endpoints(),
        // The single-route transport sends the thread routes in the envelope
        // (`resource/request`) when told so, and then reads these `threadEndpoints`.
        "singleRoute": {"resourceOperations": true, "threadEndpoints": thread_endpoints()},
        "suggestions": false,
        "a2uiEnabled": false,
        "openGenerativeUIEnabled": false,
        "telemetryDisabled": true,
    }))
}

/// CopilotKit's `AgentDescription` of an agent: its card's description and its AG-UI
/// capabilities (docs/mapping.md#capabilities).
fn describe(agent: &Agent) -> Value {
    json!({
        "name": agent.settings.name,
        "className": "A2AAgent",
        "description": agent.summary().description.unwrap_or_default(),
        "capabilities": agent.capabilities(),
    })
}

/// `POST {base}/agent/{id}/connect`: reattach to the caller's thread after a page reload.
async fn connect(
    State(s): State<AppState>,
    AgentRef(agent): AgentRef,
    caller: Caller,
    req: Request,
) -> Result<Response, RequestError> {
    let mut body = super::read_run(&s, &caller, req).await?;
    let encoding = body.encoding;
    let stream = |batches| stream(batches, encoding);
    let input = &mut body.input;
    let thread_id = input.thread_id.clone();
    let Some(context_id) = threads::context_of(&s, &agent, &caller, &thread_id).await? else {
        return Ok(stream(Vec::new()));
    };
    let tasks = match threads::tasks_of(&s, &agent, &caller, &thread_id, &context_id).await {
        Ok(tasks) => tasks,
        Err(e) => return Ok(stream(vec![failed(&s, input, &RunError::from(&e))])),
    };
    let Some(last) = tasks.first() else {
        return Ok(stream(Vec::new()));
    };
    // The whole conversation as what the client holds: the run's reattach to the last task
    // then sends it complete in its `MESSAGES_SNAPSHOT` (a snapshot deletes what it leaves
    // out), and follows the task if it still runs.
    let held = history::restored(&input.messages, &tasks);
    input.messages = held.into_iter().map(Into::into).collect();
    input.resume.clear();
    let options = RunOptions::subscribe(TaskId::new(&last.id), context_id);
    super::start_run(&s, agent, &caller, body, options, "connect").await
}

/// `POST {base}/agent/{id}/stop/{threadId}`: cancel the caller's thread's running tasks;
/// logged as a `stop`, with how many tasks it cancelled.
async fn stop(
    State(s): State<AppState>,
    AgentRef(agent): AgentRef,
    Path((_, thread_id)): Path<(String, ThreadId)>,
    caller: Caller,
) -> Result<Json<Value>, RequestError> {
    let cancelled = match threads::context_of(&s, &agent, &caller, &thread_id).await? {
        Some(context_id) => cancel_live(&s, &agent, &caller, &thread_id, &context_id).await,
        None => Ok(0),
    };
    let (agent, caller) = (&agent.settings.name, Shown(caller.id.as_str()));
    let thread = Shown(thread_id.as_str());
    match &cancelled {
        Ok(n) => tracing::info!(%agent, %caller, thread_id = %thread, cancelled = n, "stop"),
        Err(e) => tracing::info!(%agent, %caller, thread_id = %thread, error = %e, "stop"),
    }
    Ok(match cancelled {
        Ok(0) => not_stopped(&format!("No active run for thread '{thread_id}'.")),
        Ok(_) => Json(json!({"stopped": true, "interrupt": {
            "type": "RUN_ERROR", "message": "Run stopped by user", "code": "STOPPED"}})),
        Err(e) => not_stopped(&e.to_string()),
    })
}

fn not_stopped(message: &str) -> Json<Value> {
    Json(json!({"stopped": false, "message": message}))
}

/// `CancelTask` for each task of the thread still at work; how many the upstream cancelled.
async fn cancel_live(
    s: &AppState,
    agent: &Agent,
    caller: &Caller,
    thread_id: &ThreadId,
    context_id: &ContextId,
) -> Result<usize, RunError> {
    let tasks = threads::tasks_of(s, agent, caller, thread_id, context_id)
        .await
        .map_err(|e| RunError::from(&e))?;
    let live = tasks.iter().filter(|t| {
        let state = &t.status.state;
        !state.is_terminal() && !state.is_interrupted()
    });
    let upstream = s
        .registry
        .resolve_as(agent, caller)
        .await
        .map_err(RunError::UpstreamUnavailable)?;
    // All the cancels together within `timeouts.upstream_call`, like one call.
    let cancel_all = async {
        let mut cancelled = 0;
        for task in live {
            match upstream
                .client
                .cancel_task(&upstream.ctx, &TaskId::new(&task.id))
                .await
            {
                Ok(_) => cancelled += 1,
                Err(e) => return Err(RunError::from(&e)),
            }
        }
        Ok(cancelled)
    };
    let bound = s.timeouts.upstream_call();
    tokio::time::timeout(bound, cancel_all)
        .await
        .unwrap_or_else(|_| Err(RunError::timeout("upstream_call", bound)))
}

/// The single-route envelope.
#[derive(Debug, Deserialize)]
struct Envelope {
    method: String,
    #[serde(default)]
    params: Map<String, Value>,
    #[serde(default)]
    body: Option<Value>,
}

/// `POST {base}`: `{method, params, body}`, dispatched to the handlers above.
async fn single_route(
    State(s): State<AppState>,
    caller: Caller,
    req: Request,
) -> Result<Response, RequestError> {
    if !super::is_json(&req) {
        return Err(RequestError::UnsupportedMediaType);
    }
    let (parts, body) = req.into_parts();
    // A body in memory is part of a run's cost (docs/design.md#9-reliability-and-limits):
    // read within a run slot, as on the run route; the method then takes its own.
    let reading = s
        .runs
        .clone()
        .try_acquire_owned()
        .map_err(|_| RequestError::TooManyRuns(s.limits.max_concurrent_runs.get()))?;
    let raw = super::read_body(&s, body).await?;
    let envelope: Envelope = serde_json::from_slice(&raw).map_err(super::json_error)?;
    drop((raw, reading));
    let param = |key: &str| {
        envelope
            .params
            .get(key)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| {
                RequestError::InvalidRunInput(format!("params.{key} must be a non-empty string"))
            })
    };
    // The body of `agent/run` and `agent/connect` is their request's, as on their own route.
    let inner = |body: &Option<Value>| {
        let bytes = serde_json::to_vec(body.as_ref().unwrap_or(&Value::Null)).unwrap_or_default();
        Request::from_parts(parts.clone(), axum::body::Body::from(bytes))
    };
    match envelope.method.as_str() {
        "info" => Ok(info(State(s)).await.into_response()),
        "agent/run" => {
            let agent = AgentRef::copilotkit(&s, &param("agentId")?)?;
            super::run_agent(State(s), agent, caller, inner(&envelope.body)).await
        }
        "agent/connect" => {
            let agent = AgentRef::copilotkit(&s, &param("agentId")?)?;
            connect(State(s), agent, caller, inner(&envelope.body)).await
        }
        "agent/stop" => {
            let (id, thread_id) = (param("agentId")?, ThreadId::new(param("threadId")?));
            let agent = AgentRef::copilotkit(&s, &id)?;
            let stopped = stop(State(s), agent, Path((id, thread_id)), caller).await?;
            Ok(stopped.into_response())
        }
        "resource/request" => {
            let body = envelope.body.as_ref();
            super::copilotkit_threads::resource(s, &parts, &envelope.params, body).await
        }
        other => Err(RequestError::InvalidRunInput(format!(
            "method {other:?} is not served here: info, agent/run, agent/connect, agent/stop or \
             resource/request"
        ))),
    }
}

/// The events of a run that ended before the run path was reached.
fn failed(s: &AppState, input: &RunAgentInput, error: &RunError) -> Vec<Event> {
    let mut projector = Projector::new(RunFrame {
        thread_id: input.thread_id.to_string(),
        run_id: input.run_id.clone(),
        ..RunFrame::limited(&s.limits)
    });
    projector.fail(error)
}

/// A run stream of `batches` (none: an empty stream, nothing to reattach to).
fn stream(batches: Vec<Vec<Event>>, encoding: Encoding) -> Response {
    super::event_stream(futures::stream::iter(batches), encoding)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::body::Body;
    use axum::http::Request as HttpRequest;
    use serde_json::{json, Value};
    use tower::ServiceExt;

    /// The log, as JSON lines.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    /// Each request is logged as what it is: a run as `run`, a reconnect as `connect`, a
    /// stop as `stop` (with how many tasks it cancelled), never a stop as a run.
    #[tokio::test]
    async fn runs_connects_and_stops_are_logged_as_such() {
        let log = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .json()
            .with_max_level(tracing::Level::INFO)
            .with_writer(log.clone())
            .finish();
        // The test's runtime runs on this thread: every task logs here.
        let _guard = tracing::subscriber::set_default(subscriber);
        let over = crate::config::Overrides {
            demo: true,
            ..Default::default()
        };
        let settings = crate::config::settings(Default::default(), over).unwrap();
        let app = crate::app::build(settings).await.unwrap();
        let call = |uri: &str, body: Value| {
            let req = HttpRequest::builder()
                .method("POST")
                .uri(uri)
                .header("content-type", "application/json")
                .body(Body::from(body.to_string()))
                .unwrap();
            let app = app.router.clone();
            async move {
                let resp = app.oneshot(req).await.unwrap();
                assert_eq!(resp.status(), 200);
                axum::body::to_bytes(resp.into_body(), 1 << 20)
                    .await
                    .unwrap()
            }
        };
        let input = |run: &str, messages: Value| {
            json!({"threadId": "t-log", "runId": run, "state": {}, "tools": [], "context": [],
                "forwardedProps": {}, "messages": messages})
        };
        let hi = json!([{"id": "m1", "role": "user", "content": "echo hi"}]);
        call("/copilotkit/agent/demo/run", input("r1", hi)).await;
        call("/copilotkit/agent/demo/connect", input("r2", json!([]))).await;
        let answer = call("/copilotkit/agent/demo/stop/t-log", json!({})).await;
        assert_eq!(
            serde_json::from_slice::<Value>(&answer).unwrap()["stopped"],
            false
        );
        let envelope =
            json!({"method": "agent/stop", "params": {"agentId": "demo", "threadId": "t-log"}});
        call("/copilotkit", envelope).await;
        let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
        let requests: Vec<(String, String)> = text
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .filter(|e| {
                e["target"]
                    .as_str()
                    .unwrap()
                    .starts_with("agui_a2a_gateway::http")
            })
            .map(|e| {
                let fields = &e["fields"];
                let message = fields["message"].as_str().unwrap().to_owned();
                (
                    message,
                    fields["thread_id"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let expected =
            ["run", "connect", "stop", "stop"].map(|m| (m.to_owned(), "t-log".to_owned()));
        assert_eq!(requests, expected, "{text}");
        assert!(text.contains("\"cancelled\":0"), "{text}");
    }
}
