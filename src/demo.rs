//! The embedded demo A2A agent (`--demo`): a real A2A JSON-RPC server on its own loopback
//! listener, speaking 1.0 and 0.3 on the same URL (the method name picks the codec, as in
//! a2a-sdk's compatibility layer). It makes a fresh `cargo run -- --demo` useful, serves as
//! one of the test peers, and drives the benchmark.
//!
//! Scripted by the first word of the user's message (DESIGN §2): `echo X`, `artifact`,
//! `approve`, `auth`, `fail`, `slow N`, `bench N K`, plus `idle S` (a quiet open task, for
//! the benchmark's memory figure); anything else gets a message listing them.
//! Tasks live in memory for the process lifetime.

use std::collections::BTreeMap;
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
use dashmap::DashMap;
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;

use crate::a2a::model::{ProtocolVersion, TaskState};

mod scenarios;
mod wire;

use scenarios::{apply, is_final, script, user_text, Emitter};
use wire::{message_json, rpc_error, rpc_result, task_json, update_json, wrap_task};

const HELP: &str = "I am the agui-a2a-gateway demo agent. Start your message with one of: \
`echo <text>` (streams the text word by word), `artifact` (an artifact in chunks), \
`approve` (asks for your approval, then completes), `auth` (asks you to authenticate), \
`fail` (fails), `slow <N>` (N ticks 100 ms apart), `bench <N> <K> [R]` (N events of K bytes, R per second or as fast as possible), \
`idle <S>` (a quiet task that completes after S seconds).";

/// What happened to a task, version-neutral; encoded per request version.
#[derive(Debug, Clone)]
enum Update {
    Status {
        state: TaskState,
        message: Option<AgentMessage>,
    },
    Artifact {
        id: String,
        name: String,
        text: String,
        append: bool,
        last_chunk: bool,
    },
}

#[derive(Debug, Clone)]
struct AgentMessage {
    id: String,
    text: String,
}

impl AgentMessage {
    fn new(text: impl Into<String>) -> Self {
        Self {
            id: uuid::Uuid::new_v4().to_string(),
            text: text.into(),
        }
    }
}

#[derive(Debug, Clone)]
struct Turn {
    id: String,
    user: bool,
    text: String,
}

#[derive(Debug)]
struct TaskRecord {
    context_id: String,
    state: TaskState,
    status_message: Option<AgentMessage>,
    timestamp: String,
    history: Vec<Turn>,
    artifacts: BTreeMap<String, (String, Vec<String>)>,
    /// What the task waits for (`approve` / `auth`), when interrupted.
    waiting: Option<&'static str>,
    updates: broadcast::Sender<Update>,
    worker: Option<tokio::task::AbortHandle>,
    created: u64,
}

#[derive(Default)]
struct Demo {
    tasks: DashMap<String, TaskRecord>,
    seq: std::sync::atomic::AtomicU64,
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
        return rpc_error(&Value::Null, -32700, "Parse error");
    };
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    let method = req
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let params = req.get("params").cloned().unwrap_or(json!({}));
    let v1_header = headers
        .get("a2a-version")
        .and_then(|h| h.to_str().ok())
        .is_some_and(|h| h.starts_with("1."));
    let (version, op) = match method {
        "SendStreamingMessage" => (ProtocolVersion::V1, "stream"),
        "SendMessage" => (ProtocolVersion::V1, "send"),
        "GetTask" => (ProtocolVersion::V1, "get"),
        "CancelTask" => (ProtocolVersion::V1, "cancel"),
        "SubscribeToTask" => (ProtocolVersion::V1, "subscribe"),
        "ListTasks" => (ProtocolVersion::V1, "list"),
        "message/stream" => (ProtocolVersion::V0_3, "stream"),
        "message/send" => (ProtocolVersion::V0_3, "send"),
        "tasks/get" => (ProtocolVersion::V0_3, "get"),
        "tasks/cancel" => (ProtocolVersion::V0_3, "cancel"),
        "tasks/resubscribe" => (ProtocolVersion::V0_3, "subscribe"),
        _ => return rpc_error(&id, -32601, "Method not found"),
    };
    // Like a2a-sdk 1.3.0: 1.0 methods need `A2A-Version: 1.x`, 0.3 methods must not have it.
    if (version == ProtocolVersion::V1) != v1_header {
        let msg = format!("A2A version header does not match method {method}");
        return rpc_error(&id, -32009, &msg);
    }
    match op {
        "stream" | "send" => send(demo, version, id, params, op == "stream").await,
        "get" => get_task(&demo, version, &id, &params),
        "cancel" => cancel(&demo, version, &id, &params),
        "subscribe" => subscribe(demo, version, id, &params),
        _ => list(&demo, &id, &params),
    }
}

fn sse(frames: impl futures::Stream<Item = Value> + Send + 'static) -> Response {
    Sse::new(frames.map(|v| Ok::<_, Infallible>(SseEvent::default().data(v.to_string()))))
        .into_response()
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
        return rpc_error(&id, -32602, "message must have a text part");
    }
    let user_id = message
        .get("messageId")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let given_ctx = message
        .get("contextId")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let given_task = message
        .get("taskId")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let first_word = text
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    let known = [
        "echo", "artifact", "approve", "auth", "fail", "slow", "bench",
    ];
    if given_task.is_none() && !known.contains(&first_word.as_str()) {
        // Anything else: a helpful message-only reply (no task).
        let ctx = given_ctx.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let reply = AgentMessage::new(HELP);
        let mut m = message_json(v, &reply, "", &ctx, false);
        m.as_object_mut().map(|o| o.remove("taskId"));
        let result = match v {
            ProtocolVersion::V1 => json!({"message": m}),
            ProtocolVersion::V0_3 => m,
        };
        let frame = rpc_result(&id, result);
        return if streaming {
            sse(futures::stream::iter([frame]))
        } else {
            Json(frame).into_response()
        };
    }
    // Resolve or create the task.
    let (task_id, follow_up) = if let Some(tid) = given_task {
        let Some(mut t) = demo.tasks.get_mut(&tid) else {
            return rpc_error(&id, -32001, &format!("Task {tid} not found"));
        };
        if given_ctx.as_deref().is_some_and(|c| c != t.context_id) {
            return rpc_error(&id, -32602, "Context does not match the task's context");
        }
        let Some(kind) = t.waiting.take().filter(|_| t.state.is_interrupted()) else {
            let msg = format!(
                "Task {tid} is in state {} and takes no input",
                t.state.as_v1()
            );
            return rpc_error(&id, -32004, &msg);
        };
        t.history.push(Turn {
            id: user_id,
            user: true,
            text: text.clone(),
        });
        (tid, Some(kind))
    } else {
        let tid = uuid::Uuid::new_v4().to_string();
        let (tx, _) = broadcast::channel(1024);
        let record = TaskRecord {
            context_id: given_ctx.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
            state: TaskState::Submitted,
            status_message: None,
            timestamp: now(),
            history: vec![Turn {
                id: user_id,
                user: true,
                text: text.clone(),
            }],
            artifacts: BTreeMap::new(),
            waiting: None,
            updates: tx,
            worker: None,
            created: demo.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        };
        demo.tasks.insert(tid.clone(), record);
        (tid, None)
    };
    let (ctx, snapshot) = {
        let t = demo.tasks.get(&task_id).expect("just stored");
        (t.context_id.clone(), task_json(v, &task_id, &t))
    };
    // The origin stream reads this turn's updates with backpressure (`Emitter`).
    let (origin_tx, mut rx) = mpsc::channel::<Update>(256);
    let (tx, out) = mpsc::channel::<Value>(256);
    let first = if follow_up.is_none() {
        Some(rpc_result(&id, wrap_task(v, snapshot)))
    } else {
        None
    };
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
    let worker = tokio::spawn(script(emitter, text, follow_up));
    if let Some(mut t) = demo.tasks.get_mut(&task_id) {
        t.worker = Some(worker.abort_handle());
    }
    if streaming {
        return sse(ReceiverStream::new(out));
    }
    // Blocking send: wait for a terminal or interrupted state, answer with the task.
    let mut out = out;
    while out.recv().await.is_some() {}
    let t = demo.tasks.get(&task_id).expect("task exists");
    Json(rpc_result(&id, wrap_task(v, task_json(v, &task_id, &t)))).into_response()
}

fn task_param(params: &Value) -> String {
    params
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn get_task(demo: &Demo, v: ProtocolVersion, id: &Value, params: &Value) -> Response {
    let tid = task_param(params);
    match demo.tasks.get(&tid) {
        Some(t) => Json(rpc_result(id, task_json(v, &tid, &t))).into_response(),
        None => rpc_error(id, -32001, "Task not found"),
    }
}

fn cancel(demo: &Demo, v: ProtocolVersion, id: &Value, params: &Value) -> Response {
    let tid = task_param(params);
    {
        let Some(t) = demo.tasks.get(&tid) else {
            return rpc_error(id, -32001, "Task not found");
        };
        if t.state.is_terminal() {
            return rpc_error(id, -32002, "Task cannot be canceled");
        }
        if let Some(w) = &t.worker {
            w.abort();
        }
    }
    apply(
        demo,
        &tid,
        Update::Status {
            state: TaskState::Canceled,
            message: Some(AgentMessage::new("Canceled by client.")),
        },
    );
    let t = demo.tasks.get(&tid).expect("exists");
    Json(rpc_result(id, task_json(v, &tid, &t))).into_response()
}

fn subscribe(demo: Shared, v: ProtocolVersion, id: Value, params: &Value) -> Response {
    let tid = task_param(params);
    let (snapshot, mut rx, ctx) = {
        let Some(t) = demo.tasks.get(&tid) else {
            return rpc_error(&id, -32001, "Task not found");
        };
        if t.state.is_terminal() {
            return rpc_error(
                &id,
                -32004,
                &format!("Task {tid} is in terminal state: {}", t.state.as_v1()),
            );
        }
        (
            task_json(v, &tid, &t),
            t.updates.subscribe(),
            t.context_id.clone(),
        )
    };
    let (tx, out) = mpsc::channel::<Value>(1024);
    tokio::spawn(async move {
        if tx
            .send(rpc_result(&id, wrap_task(v, snapshot)))
            .await
            .is_err()
        {
            return;
        }
        while let Ok(u) = rx.recv().await {
            // Unlike the origin stream, a subscription stays open across input-required.
            let done = matches!(&u, Update::Status { state, .. } if state.is_terminal());
            if tx
                .send(rpc_result(&id, update_json(v, &u, &tid, &ctx)))
                .await
                .is_err()
                || done
            {
                return;
            }
        }
    });
    sse(ReceiverStream::new(out))
}

fn list(demo: &Demo, id: &Value, params: &Value) -> Response {
    let ctx = params.get("contextId").and_then(Value::as_str);
    let mut tasks: Vec<(u64, Value)> = demo
        .tasks
        .iter()
        .filter(|t| ctx.is_none_or(|c| t.context_id == c))
        .map(|t| {
            (
                t.created,
                task_json(ProtocolVersion::V1, t.key(), t.value()),
            )
        })
        .collect();
    tasks.sort_by_key(|t| std::cmp::Reverse(t.0));
    let tasks: Vec<Value> = tasks.into_iter().map(|(_, t)| t).collect();
    let total = tasks.len();
    Json(rpc_result(
        id,
        json!({"tasks": tasks, "nextPageToken": "", "pageSize": total, "totalSize": total}),
    ))
    .into_response()
}

fn card(base: &str) -> Value {
    json!({
        "name": "agui-a2a-gateway demo agent",
        "description": "Scripted demo agent: echo X, artifact, approve, auth, fail, slow N, bench N K.",
        "supportedInterfaces": [
            {"url": base, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": base, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
        ],
        "version": env!("CARGO_PKG_VERSION"),
        "capabilities": {"streaming": true, "pushNotifications": false},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "demo", "name": "Scripted scenarios", "tags": ["demo"],
            "description": "echo X | artifact | approve | auth | fail | slow N | bench N K",
            "examples": ["echo hello world", "artifact", "approve", "slow 5"]}],
        // 0.3 card fields, as a2a-sdk serves them for a dual-version agent.
        "protocolVersion": "0.3.0",
        "url": base,
        "preferredTransport": "JSONRPC"
    })
}

/// The demo agent's router, for a server at `base` (its own URL, ending in `/`).
pub fn router(base: String) -> Router {
    let demo: Shared = Arc::default();
    let card = card(&base);
    Router::new()
        .route("/", post(rpc))
        .route(
            "/.well-known/agent-card.json",
            get(move || async move { Json(card) }),
        )
        .with_state(demo)
}

/// Serves the demo agent on `listener` until the process ends; returns its base URL.
pub async fn spawn(listener: tokio::net::TcpListener) -> std::io::Result<String> {
    let addr: SocketAddr = listener.local_addr()?;
    let base = format!("http://{addr}/");
    let app = router(base.clone());
    tokio::spawn(async move {
        if let Err(e) = axum::serve(crate::app::nodelay(listener), app).await {
            tracing::error!(error = %e, "demo agent stopped");
        }
    });
    Ok(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339() {
        let (y, m, d) = civil_from_days(20_000);
        assert_eq!((y, m, d), (2024, 10, 4));
        assert!(now().ends_with('Z'));
    }
}
