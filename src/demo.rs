//! The embedded demo A2A agent (`--demo`, docs/design.md#2-running-it-and-configuration): a real
//! A2A JSON-RPC server on its own
//! loopback listener, speaking 1.0 and 0.3 on the same URL (the method name picks the codec,
//! as in a2a-sdk's compatibility layer; the method table is [`Operation::of_method`]). It
//! makes a fresh `cargo run -- --demo` useful, serves as one of the test peers, and drives
//! the benchmark. Its card is served at the 1.0 `agent-card.json` and the 0.2 `agent.json`
//! paths.
//!
//! Layout: `scenarios` is what the agent does (parsed from the first word of the user's
//! message), `store` what it remembers, `wire` how it writes both versions; this file
//! is the JSON-RPC endpoint.
//!
//! Invariants: memory is bounded whatever callers send (each bound is written once, where it
//! is named here):
//! - a message's text is at most `MAX_TEXT_BYTES`, else invalid params;
//! - at most `store::Limits::DEFAULT.live_tasks` tasks are live; a new task beyond that is
//!   refused with a JSON-RPC error;
//! - finished tasks are evicted oldest-finished first beyond its `finished_tasks`;
//! - a task's history keeps its last `history_turns` turns within `history_bytes`; `bench`
//!   events never enter it;
//! - scenario arguments are capped, and over-cap ones answered with the cap (`Scenario`'s
//!   `MAX_*`); at most `Scenario::MAX_RUNNING_BENCHES` benches run at once;
//! - a stream's queue holds about `scenarios::STREAM_BUFFER_BYTES` at most.
//!
//! Not bounded here: the number of connections. The listener is loopback-only, and the
//! gateway in front caps concurrent runs and cuts clients that stop reading, which closes
//! the demo stream too.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{mpsc, Semaphore};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;

use crate::a2a::model::{ProtocolVersion, TaskState};
use crate::a2a::{rpc_code, Operation};

mod scenarios;
mod store;
mod wire;

use scenarios::{is_final, play, user_text, Emitter, Scenario, Step};
use store::{AgentMessage, AtCapacity, Limits, Store, Subscription, Turn, Update};
use wire::{message_json, rpc_error, rpc_result, task_json, update_json, wrap_task};

/// The agent card's paths: A2A 1.0 / 0.3, and 0.2's (still read by 0.3-era clients).
const CARD_PATHS: [&str; 2] = ["/.well-known/agent-card.json", "/.well-known/agent.json"];

/// The longest text a message may carry (bytes); longer is refused as invalid params.
const MAX_TEXT_BYTES: usize = 16 * 1024;

/// Queue length of an answer's stream (an answer completes in two updates).
const ANSWER_BUFFER: usize = 16;

/// `ListTasks` page size: A2A 1.0 default and maximum.
const PAGE_SIZE: (usize, usize) = (50, 100);

struct Demo {
    tasks: Store,
    /// One permit per bench that may run at once.
    benches: Arc<Semaphore>,
    card: Value,
}

type Shared = Arc<Demo>;

fn now() -> String {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, day) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        d.subsec_micros()
    )
}

/// Days since 1970-01-01 to a civil date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (
        if m <= 2 {
            era * 400 + yoe + 1
        } else {
            era * 400 + yoe
        },
        m,
        d,
    )
}

/// Nanoseconds since the Unix epoch; the benchmark stamps events with it.
pub fn stamp_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
}

// ---- JSON-RPC endpoint ----

async fn rpc(State(demo): State<Shared>, headers: HeaderMap, body: axum::body::Bytes) -> Response {
    let Ok(req) = serde_json::from_slice::<Value>(&body) else {
        return rpc_error(&Value::Null, rpc_code::PARSE_ERROR, "Parse error");
    };
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    let method = req
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let params = req.get("params").cloned().unwrap_or(json!({}));
    let Some((version, op)) = Operation::of_method(method) else {
        return rpc_error(&id, rpc_code::METHOD_NOT_FOUND, "Method not found");
    };
    // Like a2a-sdk 1.3.0: 1.0 methods need `A2A-Version: 1.x`, 0.3 methods must not have it.
    let v1_header = headers
        .get("a2a-version")
        .and_then(|h| h.to_str().ok())
        .is_some_and(|h| h.starts_with("1."));
    if (version == ProtocolVersion::V1) != v1_header {
        let msg = format!("A2A version header does not match method {method}");
        return rpc_error(&id, rpc_code::VERSION_NOT_SUPPORTED, &msg);
    }
    match op {
        Operation::Stream => send(demo, version, id, params, true).await,
        Operation::Send => send(demo, version, id, params, false).await,
        Operation::GetTask => get_task(&demo, version, &id, &params),
        Operation::CancelTask => cancel(&demo, version, &id, &params),
        Operation::Subscribe => subscribe(demo, version, id, &params),
        Operation::ListTasks => list(&demo, &id, &params),
        // The demo serves no extended card (its card does not declare one).
        Operation::ExtendedCard => rpc_error(
            &id,
            rpc_code::UNSUPPORTED_OPERATION,
            "the demo agent has no extended card",
        ),
    }
}

fn sse(frames: impl futures::Stream<Item = Value> + Send + 'static) -> Response {
    Sse::new(frames.map(|v| Ok::<_, Infallible>(SseEvent::default().data(v.to_string()))))
        .into_response()
}

/// A message-only reply (no task): the help text, or why a scenario was refused.
fn reply(
    v: ProtocolVersion,
    id: &Value,
    ctx: Option<String>,
    text: &str,
    streaming: bool,
) -> Response {
    let ctx = ctx.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let reply = AgentMessage::new(text);
    let mut m = message_json(v, (&reply.id, &reply.text), "", &ctx, false);
    m.as_object_mut().map(|o| o.remove("taskId"));
    let result = match v {
        ProtocolVersion::V1 => json!({"message": m}),
        ProtocolVersion::V0_3 => m,
    };
    let frame = rpc_result(id, result);
    if streaming {
        sse(futures::stream::iter([frame]))
    } else {
        Json(frame).into_response()
    }
}

async fn send(
    demo: Shared,
    v: ProtocolVersion,
    id: Value,
    params: Value,
    streaming: bool,
) -> Response {
    let message = params.get("message").cloned().unwrap_or(Value::Null);
    let text = user_text(&message);
    if text.trim().is_empty() {
        return rpc_error(
            &id,
            rpc_code::INVALID_PARAMS,
            "message must have a text part",
        );
    }
    if text.len() > MAX_TEXT_BYTES {
        let msg = format!(
            "message text is {} bytes; the demo agent takes at most {MAX_TEXT_BYTES}",
            text.len()
        );
        return rpc_error(&id, rpc_code::INVALID_PARAMS, &msg);
    }
    let field = |name: &str| message.get(name).and_then(Value::as_str).map(str::to_owned);
    let user = Turn {
        id: field("messageId").unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        user: true,
        text: text.clone(),
    };
    let given_ctx = field("contextId");
    // Resolve the task: an answer to a waiting one, or a new one playing a scenario.
    let (task_id, step, slot, buffer) = if let Some(tid) = field("taskId") {
        let Some(mut t) = demo.tasks.get_mut(&tid) else {
            return rpc_error(
                &id,
                rpc_code::TASK_NOT_FOUND,
                &format!("Task {tid} not found"),
            );
        };
        if given_ctx.as_deref().is_some_and(|c| c != t.context_id) {
            let msg = "Context does not match the task's context";
            return rpc_error(&id, rpc_code::INVALID_PARAMS, msg);
        }
        if !std::mem::take(&mut t.awaits_answer) {
            let msg = format!(
                "Task {tid} is in state {} and takes no input",
                t.state.as_v1()
            );
            return rpc_error(&id, rpc_code::UNSUPPORTED_OPERATION, &msg);
        }
        let auth = t.state == TaskState::AuthRequired;
        // The question (the status message) goes into history before its answer.
        t.retire_status_message();
        t.history.push(user);
        (tid, Step::Answer { auth, text }, None, ANSWER_BUFFER)
    } else {
        let scenario = match Scenario::parse(&text) {
            Ok(s) => s,
            Err(refusal) => return reply(v, &id, given_ctx, &refusal.text(), streaming),
        };
        let slot = match scenario.slot(&demo.benches) {
            Ok(slot) => slot,
            Err(msg) => return rpc_error(&id, rpc_code::UNSUPPORTED_OPERATION, &msg),
        };
        let ctx = given_ctx.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let buffer = scenario.buffer();
        let tid = match demo.tasks.create(ctx, user, buffer) {
            Ok(tid) => tid,
            Err(AtCapacity(cap)) => {
                let msg = format!(
                    "The demo agent is at its cap of {cap} live tasks; \
                     wait for some to finish or cancel them."
                );
                return rpc_error(&id, rpc_code::UNSUPPORTED_OPERATION, &msg);
            }
        };
        (tid, Step::Start(scenario), slot, buffer)
    };
    let (ctx, snapshot) = {
        let Some(t) = demo.tasks.get(&task_id) else {
            return rpc_error(&id, rpc_code::TASK_NOT_FOUND, "Task not found");
        };
        (t.context_id.clone(), task_json(v, &task_id, &t, None))
    };
    // The origin stream reads this turn's updates with backpressure (`Emitter`).
    let (origin_tx, mut rx) = mpsc::channel::<Update>(buffer);
    let (tx, out) = mpsc::channel::<Value>(buffer);
    let first = matches!(step, Step::Start(_)).then(|| rpc_result(&id, wrap_task(v, snapshot)));
    let forward = {
        let (id, task_id, ctx) = (id.clone(), task_id.clone(), ctx.clone());
        async move {
            if let Some(f) = first {
                if tx.send(f).await.is_err() {
                    return;
                }
            }
            while let Some(u) = rx.recv().await {
                let done = matches!(&u, Update::Status { state, .. } if is_final(state));
                let frame = rpc_result(&id, update_json(v, &u, &task_id, &ctx));
                if tx.send(frame).await.is_err() || done {
                    return;
                }
            }
        }
    };
    tokio::spawn(forward);
    let emitter = Emitter {
        demo: demo.clone(),
        task_id: task_id.clone(),
        origin: origin_tx,
    };
    let worker = tokio::spawn(play(emitter, step, slot));
    if let Some(mut t) = demo.tasks.get_mut(&task_id) {
        t.worker = Some(worker.abort_handle());
    }
    if streaming {
        return sse(ReceiverStream::new(out));
    }
    // Blocking send: wait for a terminal or interrupted state, answer with the task.
    let mut out = out;
    while out.recv().await.is_some() {}
    match demo.tasks.get(&task_id) {
        Some(t) => Json(rpc_result(
            &id,
            wrap_task(v, task_json(v, &task_id, &t, None)),
        ))
        .into_response(),
        // Finished and already evicted by a thousand others finishing meanwhile.
        None => rpc_error(
            &id,
            rpc_code::TASK_NOT_FOUND,
            "Task finished and was evicted",
        ),
    }
}

fn task_param(params: &Value) -> String {
    params
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// `historyLength` of GetTask / ListTasks (absent: the whole history).
fn history_length(params: &Value) -> Option<usize> {
    params
        .get("historyLength")
        .and_then(Value::as_u64)
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

fn get_task(demo: &Demo, v: ProtocolVersion, id: &Value, params: &Value) -> Response {
    let tid = task_param(params);
    match demo.tasks.get(&tid) {
        Some(t) => {
            let task = task_json(v, &tid, &t, history_length(params));
            Json(rpc_result(id, task)).into_response()
        }
        None => rpc_error(id, rpc_code::TASK_NOT_FOUND, "Task not found"),
    }
}

fn cancel(demo: &Demo, v: ProtocolVersion, id: &Value, params: &Value) -> Response {
    let tid = task_param(params);
    {
        let Some(t) = demo.tasks.get(&tid) else {
            return rpc_error(id, rpc_code::TASK_NOT_FOUND, "Task not found");
        };
        if t.state.is_terminal() {
            return rpc_error(id, rpc_code::TASK_NOT_CANCELABLE, "Task cannot be canceled");
        }
        if let Some(w) = &t.worker {
            w.abort();
        }
    }
    let canceled = Update::Status {
        state: TaskState::Canceled,
        message: Some(AgentMessage::new("Canceled by client.")),
    };
    match demo
        .tasks
        .record(&tid, &canceled, |t| task_json(v, &tid, t, None))
    {
        Some(task) => Json(rpc_result(id, task)).into_response(),
        // It finished on its own in the meantime.
        None => rpc_error(id, rpc_code::TASK_NOT_CANCELABLE, "Task cannot be canceled"),
    }
}

fn subscribe(demo: Shared, v: ProtocolVersion, id: Value, params: &Value) -> Response {
    let tid = task_param(params);
    let view = |t: &store::TaskRecord| (task_json(v, &tid, t, None), t.context_id.clone());
    let (mut rx, (snapshot, ctx), buffer) = match demo.tasks.subscribe(&tid, view) {
        Subscription::Live {
            updates,
            view,
            buffer,
        } => (updates, view, buffer),
        Subscription::Unknown => return rpc_error(&id, rpc_code::TASK_NOT_FOUND, "Task not found"),
        Subscription::Finished(state) => {
            let msg = format!("Task {tid} is in terminal state: {}", state.as_v1());
            return rpc_error(&id, rpc_code::UNSUPPORTED_OPERATION, &msg);
        }
        Subscription::Full(cap) => {
            let msg = format!("Task {tid} has {cap} subscriptions already, its cap");
            return rpc_error(&id, rpc_code::UNSUPPORTED_OPERATION, &msg);
        }
    };
    let (tx, out) = mpsc::channel::<Value>(buffer);
    tokio::spawn(async move {
        if tx
            .send(rpc_result(&id, wrap_task(v, snapshot)))
            .await
            .is_err()
        {
            return;
        }
        loop {
            let u = match rx.recv().await {
                Ok(u) => u,
                // A subscriber that fell behind misses what it could not hold.
                Err(RecvError::Lagged(_)) => continue,
                Err(RecvError::Closed) => return,
            };
            // Unlike the origin stream, a subscription stays open across input-required.
            let done = matches!(&u, Update::Status { state, .. } if state.is_terminal());
            let frame = rpc_result(&id, update_json(v, &u, &tid, &ctx));
            if tx.send(frame).await.is_err() || done {
                return;
            }
        }
    });
    sse(ReceiverStream::new(out))
}

/// `ListTasks` (1.0): newest first, paged; the page token is the creation number of the
/// last task of the previous page.
fn list(demo: &Demo, id: &Value, params: &Value) -> Response {
    let ctx = params.get("contextId").and_then(Value::as_str);
    let page_size = params
        .get("pageSize")
        .and_then(Value::as_u64)
        .filter(|n| *n > 0)
        .map_or(PAGE_SIZE.0, |n| usize::try_from(n).unwrap_or(usize::MAX))
        .min(PAGE_SIZE.1);
    let token = params
        .get("pageToken")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty());
    let before = match token.map(str::parse::<u64>) {
        None => u64::MAX,
        Some(Ok(created)) => created,
        Some(Err(_)) => return rpc_error(id, rpc_code::INVALID_PARAMS, "Invalid pageToken"),
    };
    let mut matching: Vec<(u64, String)> = demo
        .tasks
        .iter()
        .filter(|t| ctx.is_none_or(|c| t.context_id == c))
        .map(|t| (t.created, t.key().clone()))
        .collect();
    matching.sort_by_key(|t| std::cmp::Reverse(t.0));
    let total = matching.len();
    let rest: Vec<&(u64, String)> = matching.iter().filter(|t| t.0 < before).collect();
    let page = &rest[..rest.len().min(page_size)];
    let next = match (rest.len() > page.len(), page.last()) {
        (true, Some(last)) => last.0.to_string(),
        _ => String::new(),
    };
    let history = history_length(params);
    let tasks: Vec<Value> = page
        .iter()
        .filter_map(|(_, tid)| {
            let t = demo.tasks.get(tid)?;
            Some(task_json(ProtocolVersion::V1, tid, &t, history))
        })
        .collect();
    Json(rpc_result(
        id,
        json!({"tasks": tasks, "nextPageToken": next, "pageSize": page_size, "totalSize": total}),
    ))
    .into_response()
}

/// The agent card, both versions' fields; what it lists comes from [`Scenario`].
fn card(base: &str) -> Value {
    json!({
        "name": "agui-a2a-gateway demo agent",
        "description": format!("Scripted demo agent: {}.", Scenario::usages(", ")),
        "supportedInterfaces": [
            {"url": base, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": base, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
        ],
        "version": env!("CARGO_PKG_VERSION"),
        "capabilities": {"streaming": true, "pushNotifications": false},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "demo", "name": "Scripted scenarios", "tags": ["demo"],
            "description": Scenario::usages(" | "),
            "examples": Scenario::examples()}],
        // 0.3 card fields, as a2a-sdk serves them for a dual-version agent.
        "protocolVersion": "0.3.0",
        "url": base,
        "preferredTransport": "JSONRPC"
    })
}

async fn agent_card(State(demo): State<Shared>) -> Json<Value> {
    Json(demo.card.clone())
}

/// The demo agent's router, for a server at `base` (its own URL, ending in `/`).
pub fn router(base: String) -> Router {
    router_with(&base, Limits::DEFAULT)
}

fn router_with(base: &str, limits: Limits) -> Router {
    let demo: Shared = Arc::new(Demo {
        tasks: Store::new(limits),
        benches: Arc::new(Semaphore::new(Scenario::MAX_RUNNING_BENCHES)),
        card: card(base),
    });
    CARD_PATHS
        .into_iter()
        .fold(Router::new().route("/", post(rpc)), |r, path| {
            r.route(path, get(agent_card))
        })
        .with_state(demo)
}

/// Serves the demo agent on `listener` until the process ends; returns its base URL.
pub async fn spawn(listener: tokio::net::TcpListener) -> std::io::Result<String> {
    let addr: SocketAddr = listener.local_addr()?;
    let base = format!("http://{addr}/");
    let app = router(base.clone());
    tokio::spawn(async move {
        if let Err(e) = axum::serve(nodelay(listener), app).await {
            tracing::error!(error = %e, "demo agent stopped");
        }
    });
    Ok(base)
}

/// Accepts with `TCP_NODELAY`: SSE frames are small, and Nagle's algorithm with delayed
/// ACKs would hold each one back by up to ~40 ms.
fn nodelay(
    listener: tokio::net::TcpListener,
) -> impl axum::serve::Listener<Addr = std::net::SocketAddr> {
    use axum::serve::ListenerExt;
    listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    const BASE: &str = "http://127.0.0.1:1/";

    /// Calls `method` and returns the JSON-RPC frames of the answer (one for a JSON
    /// answer, one per event for a stream).
    async fn call(app: &Router, method: &str, params: Value) -> Vec<Value> {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        let mut req = axum::http::Request::post("/");
        if !method.contains('/') {
            req = req.header("A2A-Version", "1.0");
        }
        let req = req.body(axum::body::Body::from(body.to_string())).unwrap();
        let resp = app.clone().oneshot(req).await.unwrap();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        if text.starts_with('{') {
            return vec![serde_json::from_str(&text).unwrap()];
        }
        text.lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }

    fn message(text: &str) -> Value {
        json!({"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": text}]}})
    }

    /// The status texts of a stream's frames, with their states.
    fn statuses(frames: &[Value]) -> Vec<(String, String)> {
        frames
            .iter()
            .filter_map(|f| f["result"]["statusUpdate"]["status"].as_object())
            .map(|s| {
                let text = s
                    .get("message")
                    .map_or("", |m| m["parts"][0]["text"].as_str().unwrap_or_default());
                (s["state"].as_str().unwrap().to_owned(), text.to_owned())
            })
            .collect()
    }

    fn error_code(frames: &[Value]) -> i64 {
        frames[0]["error"]["code"].as_i64().expect("an error")
    }

    #[tokio::test]
    async fn the_card_is_served_at_both_well_known_paths() {
        let app = router(BASE.into());
        let mut cards = Vec::new();
        for path in CARD_PATHS {
            let req = axum::http::Request::get(path)
                .body(axum::body::Body::empty())
                .unwrap();
            let resp = app.clone().oneshot(req).await.unwrap();
            assert_eq!(resp.status(), 200, "{path}");
            let bytes = resp.into_body().collect().await.unwrap().to_bytes();
            cards.push(serde_json::from_slice::<Value>(&bytes).unwrap());
        }
        assert_eq!(cards[0], cards[1]);
        assert_eq!(cards[0]["url"], BASE);
        let examples = cards[0]["skills"][0]["examples"].as_array().unwrap();
        assert_eq!(examples.len(), Scenario::catalogue().len());
        let description = cards[0]["description"].as_str().unwrap();
        for s in Scenario::catalogue() {
            assert!(description.contains(s.usage()), "{description} lacks {s}");
        }
    }

    #[tokio::test]
    async fn methods_come_from_the_a2a_table() {
        let app = router(BASE.into());
        let unknown = call(&app, "tasks/list", json!({})).await;
        assert_eq!(error_code(&unknown), rpc_code::METHOD_NOT_FOUND);
        // 0.3 has no ListTasks; 1.0 has.
        let listed = call(&app, "ListTasks", json!({})).await;
        assert_eq!(listed[0]["result"]["tasks"], json!([]));
        let missing = call(&app, "tasks/get", json!({"id": "nope"})).await;
        assert_eq!(error_code(&missing), rpc_code::TASK_NOT_FOUND);
    }

    #[tokio::test]
    async fn echo_streams_word_by_word_then_completes() {
        let app = router(BASE.into());
        let frames = call(&app, "SendStreamingMessage", message("echo a b c")).await;
        assert_eq!(
            frames[0]["result"]["task"]["status"]["state"],
            "TASK_STATE_SUBMITTED"
        );
        let working = "TASK_STATE_WORKING".to_owned();
        assert_eq!(
            statuses(&frames),
            [
                (working.clone(), String::new()),
                (working.clone(), "a ".into()),
                (working.clone(), "b ".into()),
                (working, "c ".into()),
                ("TASK_STATE_COMPLETED".into(), "a b c".into()),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn idle_is_a_quiet_task_that_completes_after_its_seconds() {
        let app = router(BASE.into());
        let started = tokio::time::Instant::now();
        let frames = call(&app, "message/stream", message("idle 30")).await;
        assert_eq!(
            frames[0]["result"]["kind"], "task",
            "a task, not the help text"
        );
        let states: Vec<&str> = frames[1..]
            .iter()
            .map(|f| f["result"]["status"]["state"].as_str().unwrap())
            .collect();
        assert_eq!(states, ["working", "completed"], "quiet in between");
        assert_eq!(
            frames[2]["result"]["status"]["message"]["parts"][0]["text"],
            "idle 30 done"
        );
        assert!(started.elapsed() >= std::time::Duration::from_secs(30));
    }

    #[tokio::test]
    async fn over_cap_arguments_get_a_reply_naming_the_cap() {
        let app = router(BASE.into());
        for (text, cap) in [
            ("bench 2000000 64", "1000000"),
            ("bench 10 2000000", "1048576"),
            ("slow 100001", "100000"),
            ("idle 3601", "3600"),
        ] {
            let frames = call(&app, "SendMessage", message(text)).await;
            let reply = &frames[0]["result"]["message"];
            let said = reply["parts"][0]["text"].as_str().unwrap();
            assert!(said.contains(cap), "{text}: {said}");
            assert!(reply.get("taskId").is_none(), "{text}: no task");
        }
        let listed = call(&app, "ListTasks", json!({})).await;
        assert_eq!(listed[0]["result"]["totalSize"], 0);
    }

    #[tokio::test]
    async fn a_task_beyond_the_live_cap_is_refused_until_one_ends() {
        let limits = Limits {
            live_tasks: 1,
            ..Limits::DEFAULT
        };
        let app = router_with(BASE, limits);
        let waiting = call(&app, "SendMessage", message("approve")).await;
        let task = &waiting[0]["result"]["task"];
        assert_eq!(task["status"]["state"], "TASK_STATE_INPUT_REQUIRED");
        let refused = call(&app, "SendMessage", message("fail")).await;
        assert_eq!(error_code(&refused), rpc_code::UNSUPPORTED_OPERATION);
        let said = refused[0]["error"]["message"].as_str().unwrap();
        assert!(said.contains("cap of 1 live tasks"), "{said}");
        let canceled = call(&app, "CancelTask", json!({"id": task["id"]})).await;
        assert_eq!(
            canceled[0]["result"]["status"]["state"],
            "TASK_STATE_CANCELED"
        );
        let failed = call(&app, "SendMessage", message("fail")).await;
        assert_eq!(
            failed[0]["result"]["task"]["status"]["state"],
            "TASK_STATE_FAILED"
        );
    }

    #[tokio::test]
    async fn approve_completes_with_the_answer() {
        let app = router(BASE.into());
        let waiting = call(&app, "SendMessage", message("approve")).await;
        let task = &waiting[0]["result"]["task"];
        let mut answer = message("yes");
        answer["message"]["taskId"] = task["id"].clone();
        let done = call(&app, "SendMessage", answer).await;
        let status = &done[0]["result"]["task"]["status"];
        assert_eq!(status["state"], "TASK_STATE_COMPLETED");
        assert_eq!(status["message"]["parts"][0]["text"], "Approved: yes");
        // History reads in the order things were said: the question before its answer.
        let texts: Vec<&str> = done[0]["result"]["task"]["history"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["parts"][0]["text"].as_str().unwrap())
            .collect();
        assert_eq!(
            texts,
            ["approve", "Do you approve? Reply yes or no.", "yes"]
        );
    }

    #[test]
    fn timestamps_are_rfc3339() {
        let (y, m, d) = civil_from_days(20_000);
        assert_eq!((y, m, d), (2024, 10, 4));
        assert!(now().ends_with('Z'));
    }
}
