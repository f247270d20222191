//! The embedded demo A2A agent (`--demo`, docs/design.md#2-running-it-and-configuration): a
//! real A2A server on its own loopback listener, serving every binding the gateway speaks on
//! one origin (docs/bindings.md): JSON-RPC (1.0 and 0.3 on the same URL; the method name
//! picks the codec, as in a2a-sdk's compatibility layer), HTTP+JSON (A2A 1.0 §11, its routes
//! under the same URL) and gRPC (`lf.a2a.v1.A2AService`, h2c). It makes a fresh
//! `cargo run -- --demo` useful, serves as one of the test peers, and drives the benchmark.
//! Its card is served at the 1.0 `agent-card.json` and the 0.2 `agent.json` paths and lists
//! the three interfaces, JSON-RPC first (what `binding: auto` picks).
//!
//! Layout: `scenarios` is what the agent does (parsed from the first word of the user's
//! message), `store` what it remembers; this file is what every binding calls — send, get,
//! cancel, subscribe, list, binding-neutral, answering [`TaskView`]s, [`Feed`]s of events and
//! [`Failure`]s (an A2A error by its JSON-RPC code: the one error table,
//! `crate::a2a::errors`, gives the other bindings' spelling) — and the server. Each binding's
//! wire is its own module: `jsonrpc` (envelope, method names, both versions), `rest`
//! (HTTP+JSON routes and `google.rpc.Status` error bodies), `grpc` (the generated server),
//! with `wire` the JSON objects the two JSON bindings share.
//!
//! One port: hyper-util's auto server tells HTTP/2 with prior knowledge (gRPC) from
//! HTTP/1.1 (the card, JSON-RPC, HTTP+JSON) by a connection's first bytes, and one router
//! serves both. So every interface the card lists has the card's origin, as the gateway
//! requires of card URLs. [`spawn_tls`] serves the same behind TLS ([`tls_config`]: ALPN
//! `h2` and `http/1.1`, so every binding works), its card listing `https://` interfaces:
//! an agent behind a private CA, for tests and the benchmark.
//!
//! Invariants: memory is bounded whatever callers send (each bound is written once, where it
//! is named here):
//! - a request body, and a gRPC request message, is at most `MAX_REQUEST_BYTES`;
//! - a connection's first byte comes within `HEAD_TIMEOUT`, a TLS handshake and an HTTP/1.1
//!   head each within it too; HTTP/2 has hyper's bounds (16 KiB of headers, 1 MiB
//!   flow-control windows, reset-flood limits) and at most
//!   `store::Limits::DEFAULT.live_tasks` concurrent streams per connection (a gRPC client
//!   multiplexes all its streams on one; the live-task cap bounds them anyway);
//! - a message's text is at most `MAX_TEXT_BYTES`, else invalid params;
//! - at most `store::Limits::DEFAULT.live_tasks` tasks are live; a new task beyond that is
//!   refused (`UnsupportedOperation`);
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

/// The name the demo agent is configured under (`--demo`).
pub const AGENT_NAME: &str = "demo";

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{DefaultBodyLimit, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc, Semaphore};
use tokio_stream::wrappers::ReceiverStream;

use crate::a2a::card::Binding;
use crate::a2a::errors::{self, A2aError};
use crate::a2a::model::TaskState;
use crate::a2a::rpc_code;

mod grpc;
mod jsonrpc;
mod rest;
mod scenarios;
mod store;
pub(crate) mod wire;

use scenarios::{is_final, play, Emitter, Scenario, Step};
use store::{AgentMessage, AtCapacity, Limits, Store, Subscription, TaskView, Turn, Update};

/// The agent card's paths: A2A 1.0 / 0.3, and 0.2's (still read by 0.3-era clients).
const CARD_PATHS: [&str; 2] = ["/.well-known/agent-card.json", "/.well-known/agent.json"];

/// The longest text a message may carry (bytes); longer is refused as invalid params.
const MAX_TEXT_BYTES: usize = 16 * 1024;

/// The largest request body (JSON bindings) or request message (gRPC) read.
const MAX_REQUEST_BYTES: usize = 2 * 1024 * 1024;

/// A connection's first byte, and an HTTP/1.1 request head, come within this.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);

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

/// Nanoseconds since the Unix epoch; the benchmark stamps events with it.
pub fn stamp_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
}

/// The header (gRPC: metadata key) that names the A2A version a call speaks.
const A2A_VERSION: &str = "a2a-version";

/// Whether a call's [`A2A_VERSION`] asks for A2A 1.0; a2a-sdk 1.3.0 reads a missing one as
/// 0.3. Every binding reads it from a map of headers or metadata through `get`.
fn asks_v1(value: Option<&str>) -> bool {
    value.is_some_and(|v| v.starts_with("1."))
}

/// An A2A error the demo answers with: the JSON-RPC code names it, [`Failure::a2a`] its
/// row of the error table (the HTTP+JSON and gRPC spelling).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Failure {
    code: i64,
    message: String,
}

impl Failure {
    fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// Its row of the error table; `None` for JSON-RPC's own errors (parse error, …).
    fn a2a(&self) -> Option<&'static A2aError> {
        errors::by_rpc_code(self.code)
    }

    /// A 1.0-only binding (HTTP+JSON, gRPC) called without `A2A-Version: 1.x` (the value
    /// is not echoed).
    fn version() -> Self {
        Self::new(
            rpc_code::VERSION_NOT_SUPPORTED,
            "This binding speaks A2A 1.0: send A2A-Version: 1.0",
        )
    }

    fn task_not_found() -> Self {
        Self::new(rpc_code::TASK_NOT_FOUND, "Task not found")
    }
}

// ---- what every binding calls ----

/// A user message as every binding delivers it (ids absent when empty).
#[derive(Debug, Default)]
struct Incoming {
    message_id: Option<String>,
    context_id: Option<String>,
    task_id: Option<String>,
    /// Its text parts, joined.
    text: String,
}

/// A message-only answer, no task: the help text, or why a scenario was refused.
#[derive(Debug)]
struct Reply {
    message: AgentMessage,
    context_id: String,
}

/// What a message started.
enum Sent {
    Reply(Reply),
    /// A turn of a task: its events from now until it is final or waits for input.
    Turn(Feed),
}

/// What a blocking send answers.
enum Answer {
    Reply(Reply),
    Task(TaskView),
}

/// Where a feed's updates come from.
enum Source {
    /// The turn the request started (sent with backpressure, `scenarios::Emitter`): ends
    /// when the task is final or waits for input.
    Origin(mpsc::Receiver<Update>),
    /// A subscription: stays open across interrupts, ends with the task; a subscriber that
    /// falls behind misses what it could not hold.
    Subscription(broadcast::Receiver<Update>),
}

impl Source {
    /// The next update and whether it is the feed's last; `None` once the source is done.
    async fn next(&mut self) -> Option<(Update, bool)> {
        match self {
            Source::Origin(rx) => {
                let u = rx.recv().await?;
                let last = matches!(&u, Update::Status { state, .. } if is_final(state));
                Some((u, last))
            }
            Source::Subscription(rx) => loop {
                match rx.recv().await {
                    Ok(u) => {
                        let last =
                            matches!(&u, Update::Status { state, .. } if state.is_terminal());
                        return Some((u, last));
                    }
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return None,
                }
            },
        }
    }
}

/// One task's events for one stream: the task as the stream starts (a new task's, a
/// subscription's snapshot; none for an answer's turn), then its updates.
struct Feed {
    task_id: String,
    context_id: String,
    first: Option<TaskView>,
    source: Source,
    /// Queue length of the encoded stream (the scenario's, `Scenario::buffer`).
    buffer: usize,
}

/// One event of a feed, for a binding to encode.
enum Event<'a> {
    Task(&'a TaskView),
    Update {
        update: &'a Update,
        task_id: &'a str,
        context_id: &'a str,
    },
}

impl Feed {
    /// The feed's events, each encoded by `encode`, forwarded by a task of its own into a
    /// queue of [`Feed::buffer`] (a reader that stops reading stops the scenario).
    fn encoded<T: Send + 'static>(
        self,
        encode: impl Fn(Event<'_>) -> T + Send + 'static,
    ) -> ReceiverStream<T> {
        let (tx, out) = mpsc::channel(self.buffer);
        let Feed {
            task_id,
            context_id,
            first,
            mut source,
            ..
        } = self;
        tokio::spawn(async move {
            if let Some(view) = first {
                if tx.send(encode(Event::Task(&view))).await.is_err() {
                    return;
                }
            }
            while let Some((update, last)) = source.next().await {
                let frame = encode(Event::Update {
                    update: &update,
                    task_id: &task_id,
                    context_id: &context_id,
                });
                if tx.send(frame).await.is_err() || last {
                    return;
                }
            }
        });
        ReceiverStream::new(out)
    }

    /// Waits for the feed's last event (a blocking send: final, or waiting for input).
    async fn finish(mut self) {
        while let Some((_, last)) = self.source.next().await {
            if last {
                return;
            }
        }
    }
}

/// `SendMessage` / `SendStreamingMessage`: an answer to a waiting task, or a new task
/// playing the scenario the text names, or a reply when it names none.
fn send(demo: &Shared, m: Incoming) -> Result<Sent, Failure> {
    if m.text.trim().is_empty() {
        let msg = "message must have a text part";
        return Err(Failure::new(rpc_code::INVALID_PARAMS, msg));
    }
    if m.text.len() > MAX_TEXT_BYTES {
        let msg = format!(
            "message text is {} bytes; the demo agent takes at most {MAX_TEXT_BYTES}",
            m.text.len()
        );
        return Err(Failure::new(rpc_code::INVALID_PARAMS, msg));
    }
    let user = Turn {
        id: m
            .message_id
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        user: true,
        text: m.text.clone(),
    };
    let given_ctx = m.context_id;
    // Resolve the task: an answer to a waiting one, or a new one playing a scenario.
    let (task_id, step, slot, buffer) = if let Some(tid) = m.task_id {
        let Some(mut t) = demo.tasks.get_mut(&tid) else {
            let msg = format!("Task {tid} not found");
            return Err(Failure::new(rpc_code::TASK_NOT_FOUND, msg));
        };
        if given_ctx.as_deref().is_some_and(|c| c != t.context_id) {
            let msg = "Context does not match the task's context";
            return Err(Failure::new(rpc_code::INVALID_PARAMS, msg));
        }
        if !std::mem::take(&mut t.awaits_answer) {
            let msg = format!(
                "Task {tid} is in state {} and takes no input",
                t.state.as_v1()
            );
            return Err(Failure::new(rpc_code::UNSUPPORTED_OPERATION, msg));
        }
        let auth = t.state == TaskState::AuthRequired;
        // The question (the status message) goes into history before its answer.
        t.retire_status_message();
        t.history.push(user);
        let text = m.text;
        (tid, Step::Answer { auth, text }, None, ANSWER_BUFFER)
    } else {
        let scenario = match Scenario::parse(&m.text) {
            Ok(s) => s,
            Err(refusal) => {
                return Ok(Sent::Reply(Reply {
                    message: AgentMessage::new(refusal.text()),
                    context_id: given_ctx.unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
                }))
            }
        };
        let slot = scenario
            .slot(&demo.benches)
            .map_err(|msg| Failure::new(rpc_code::UNSUPPORTED_OPERATION, msg))?;
        let ctx = given_ctx.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let buffer = scenario.buffer();
        let tid = demo
            .tasks
            .create(ctx, user, buffer)
            .map_err(|AtCapacity(cap)| {
                let msg = format!(
                    "The demo agent is at its cap of {cap} live tasks; \
                 wait for some to finish or cancel them."
                );
                Failure::new(rpc_code::UNSUPPORTED_OPERATION, msg)
            })?;
        (tid, Step::Start(scenario), slot, buffer)
    };
    let (context_id, snapshot) = {
        let t = demo
            .tasks
            .get(&task_id)
            .ok_or_else(Failure::task_not_found)?;
        (t.context_id.clone(), TaskView::of(&task_id, &t, None))
    };
    // The origin stream reads this turn's updates with backpressure (`Emitter`).
    let (origin, rx) = mpsc::channel::<Update>(buffer);
    let first = matches!(step, Step::Start(_)).then_some(snapshot);
    let emitter = Emitter {
        demo: demo.clone(),
        task_id: task_id.clone(),
        origin,
    };
    let worker = tokio::spawn(play(emitter, step, slot));
    if let Some(mut t) = demo.tasks.get_mut(&task_id) {
        t.worker = Some(worker.abort_handle());
    }
    Ok(Sent::Turn(Feed {
        task_id,
        context_id,
        first,
        source: Source::Origin(rx),
        buffer,
    }))
}

/// A blocking `SendMessage`: waits for a terminal or interrupted state, answers the task.
async fn send_blocking(demo: &Shared, m: Incoming) -> Result<Answer, Failure> {
    let feed = match send(demo, m)? {
        Sent::Reply(r) => return Ok(Answer::Reply(r)),
        Sent::Turn(feed) => feed,
    };
    let task_id = feed.task_id.clone();
    feed.finish().await;
    match demo.tasks.get(&task_id) {
        Some(t) => Ok(Answer::Task(TaskView::of(&task_id, &t, None))),
        // Finished and already evicted by a thousand others finishing meanwhile.
        None => Err(Failure::new(
            rpc_code::TASK_NOT_FOUND,
            "Task finished and was evicted",
        )),
    }
}

/// `GetTask`, with the last `history_length` turns (all for `None`).
fn get_task(demo: &Demo, id: &str, history_length: Option<usize>) -> Result<TaskView, Failure> {
    let t = demo.tasks.get(id).ok_or_else(Failure::task_not_found)?;
    Ok(TaskView::of(id, &t, history_length))
}

/// `CancelTask`: stops the task's scenario and records it canceled.
fn cancel(demo: &Demo, id: &str) -> Result<TaskView, Failure> {
    let not_cancelable = || Failure::new(rpc_code::TASK_NOT_CANCELABLE, "Task cannot be canceled");
    {
        let t = demo.tasks.get(id).ok_or_else(Failure::task_not_found)?;
        if t.state.is_terminal() {
            return Err(not_cancelable());
        }
        if let Some(w) = &t.worker {
            w.abort();
        }
    }
    let canceled = Update::Status {
        state: TaskState::Canceled,
        message: Some(AgentMessage::new("Canceled by client.")),
    };
    demo.tasks
        .record(id, &canceled, |t| TaskView::of(id, t, None))
        // It finished on its own in the meantime.
        .ok_or_else(not_cancelable)
}

/// `SubscribeToTask`: the task as of now, then its updates until it ends.
fn subscribe(demo: &Demo, id: &str) -> Result<Feed, Failure> {
    let view = |t: &store::TaskRecord| TaskView::of(id, t, None);
    match demo.tasks.subscribe(id, view) {
        Subscription::Live {
            updates,
            view,
            buffer,
        } => Ok(Feed {
            task_id: id.to_owned(),
            context_id: view.context_id.clone(),
            first: Some(view),
            source: Source::Subscription(updates),
            buffer,
        }),
        Subscription::Unknown => Err(Failure::task_not_found()),
        Subscription::Finished(state) => {
            let msg = format!("Task {id} is in terminal state: {}", state.as_v1());
            Err(Failure::new(rpc_code::UNSUPPORTED_OPERATION, msg))
        }
        Subscription::Full(cap) => {
            let msg = format!("Task {id} has {cap} subscriptions already, its cap");
            Err(Failure::new(rpc_code::UNSUPPORTED_OPERATION, msg))
        }
    }
}

/// A `ListTasks` request, as every binding delivers it.
#[derive(Debug, Default)]
struct ListQuery {
    context_id: Option<String>,
    /// 0 or absent: the default.
    page_size: Option<u64>,
    page_token: Option<String>,
    history_length: Option<usize>,
}

/// One page of `ListTasks`.
struct Page {
    tasks: Vec<TaskView>,
    /// Empty on the last page.
    next_page_token: String,
    page_size: usize,
    total_size: usize,
}

/// `ListTasks` (1.0): newest first, paged; the page token is the creation number of the
/// last task of the previous page.
fn list(demo: &Demo, q: &ListQuery) -> Result<Page, Failure> {
    let page_size = q
        .page_size
        .filter(|n| *n > 0)
        .map_or(PAGE_SIZE.0, |n| usize::try_from(n).unwrap_or(usize::MAX))
        .min(PAGE_SIZE.1);
    let before = match q.page_token.as_deref().map(str::parse::<u64>) {
        None => u64::MAX,
        Some(Ok(created)) => created,
        Some(Err(_)) => return Err(Failure::new(rpc_code::INVALID_PARAMS, "Invalid pageToken")),
    };
    let ctx = q.context_id.as_deref();
    let mut matching: Vec<(u64, String)> = demo
        .tasks
        .iter()
        .filter(|t| ctx.is_none_or(|c| t.context_id == c))
        .map(|t| (t.created, t.key().clone()))
        .collect();
    matching.sort_by_key(|t| std::cmp::Reverse(t.0));
    let total_size = matching.len();
    let rest: Vec<&(u64, String)> = matching.iter().filter(|t| t.0 < before).collect();
    let page = &rest[..rest.len().min(page_size)];
    let next_page_token = match (rest.len() > page.len(), page.last()) {
        (true, Some(last)) => last.0.to_string(),
        _ => String::new(),
    };
    let tasks = page
        .iter()
        .filter_map(|(_, tid)| {
            let t = demo.tasks.get(tid)?;
            Some(TaskView::of(tid, &t, q.history_length))
        })
        .collect();
    Ok(Page {
        tasks,
        next_page_token,
        page_size,
        total_size,
    })
}

// ---- the card and the server ----

/// The agent card, both versions' fields; what it lists comes from [`Scenario`]. Every
/// interface is at `base`: the bindings share the card's origin.
fn card(base: &str) -> Value {
    let interface = |binding: Binding, version: &str| json!({"url": base, "protocolBinding": binding.as_str(), "protocolVersion": version});
    json!({
        "name": "agui-a2a-gateway demo agent",
        "description": format!("Scripted demo agent: {}.", Scenario::usages(", ")),
        // JSON-RPC first: what `binding: auto` selects.
        "supportedInterfaces": [
            interface(Binding::JsonRpc, "1.0"),
            interface(Binding::HttpJson, "1.0"),
            interface(Binding::Grpc, "1.0"),
            interface(Binding::JsonRpc, "0.3"),
        ],
        "version": env!("CARGO_PKG_VERSION"),
        "provider": {"organization": "agui-a2a-gateway", "url": base},
        "capabilities": {"streaming": true, "pushNotifications": false},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "demo", "name": "Scripted scenarios", "tags": ["demo"],
            "description": Scenario::usages(" | "),
            "examples": Scenario::examples()}],
        // 0.3 card fields, as a2a-sdk serves them for a dual-version agent.
        "protocolVersion": "0.3.0",
        "url": base,
        "preferredTransport": Binding::JsonRpc.as_str()
    })
}

async fn agent_card(State(demo): State<Shared>) -> Json<Value> {
    Json(demo.card.clone())
}

/// The demo agent's router, for a server at `base` (its own URL, ending in `/`): the card,
/// JSON-RPC at `/`, the HTTP+JSON routes, the gRPC service.
pub fn router(base: String) -> Router {
    router_with(&base, Limits::DEFAULT)
}

fn router_with(base: &str, limits: Limits) -> Router {
    let demo: Shared = Arc::new(Demo {
        tasks: Store::new(limits),
        benches: Arc::new(Semaphore::new(Scenario::MAX_RUNNING_BENCHES)),
        card: card(base),
    });
    let (grpc_path, grpc_service) = grpc::service(demo.clone());
    CARD_PATHS
        .into_iter()
        .fold(Router::new(), |r, path| r.route(path, get(agent_card)))
        .route("/", post(jsonrpc::endpoint))
        .merge(rest::routes())
        .with_state(demo)
        .route_service(&grpc_path, grpc_service)
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BYTES))
}

/// Serves the demo agent on `listener` until the process ends; returns its base URL.
pub async fn spawn(listener: tokio::net::TcpListener) -> std::io::Result<String> {
    let addr: SocketAddr = listener.local_addr()?;
    let base = format!("http://{addr}/");
    let app = router(base.clone());
    tokio::spawn(serve(listener, app, None));
    Ok(base)
}

/// The demo's TLS server configuration: the certificate `chain` and its `key`, ALPN `h2`
/// (gRPC, and HTTP/2 for the JSON bindings where a client offers it) and `http/1.1`.
pub fn tls_config(
    chain: Vec<rustls_pki_types::CertificateDer<'static>>,
    key: rustls_pki_types::PrivateKeyDer<'static>,
) -> Result<Arc<rustls::ServerConfig>, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves the demo agent behind TLS with `tls` (as [`tls_config`] makes it) on `listener`
/// until the process ends; returns its base URL, `https://`, which the card lists for
/// every interface.
pub async fn spawn_tls(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
) -> std::io::Result<String> {
    let addr: SocketAddr = listener.local_addr()?;
    let base = format!("https://{addr}/");
    let app = router(base.clone());
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    tokio::spawn(serve(listener, app, Some(acceptor)));
    Ok(base)
}

/// Accepts connections (behind TLS with `tls`) and serves each as HTTP/1.1 or HTTP/2, told
/// by its first bytes (over TLS too, whatever ALPN chose); with `TCP_NODELAY`: SSE frames
/// and gRPC messages are small, and Nagle's algorithm with delayed ACKs would hold each one
/// back by up to ~40 ms. The TLS handshake is bounded by `HEAD_TIMEOUT` too.
async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    tls: Option<tokio_rustls::TlsAcceptor>,
) {
    use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
    use hyper_util::server::conn::auto;
    let mut server = auto::Builder::new(TokioExecutor::new());
    server
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEAD_TIMEOUT);
    server
        .http2()
        .max_concurrent_streams(u32::try_from(Limits::DEFAULT.live_tasks).unwrap_or(u32::MAX));
    let server = Arc::new(server);
    loop {
        let tcp = match listener.accept().await {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of descriptors and the like: wait for some to close, as axum::serve.
                tracing::warn!(error = %e, "demo agent: accept failed");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let (server, app, tls) = (server.clone(), app.clone(), tls.clone());
        tokio::spawn(async move {
            // Nothing is read (no version told, no head timed) until a first byte comes.
            match tokio::time::timeout(HEAD_TIMEOUT, tcp.peek(&mut [0; 1])).await {
                Ok(Ok(n)) if n > 0 => {}
                _ => return,
            }
            let service = hyper_util::service::TowerToHyperService::new(app);
            let Some(tls) = tls else {
                let _ = server
                    .serve_connection_with_upgrades(TokioIo::new(tcp), service)
                    .await;
                return;
            };
            let Ok(Ok(tls)) = tokio::time::timeout(HEAD_TIMEOUT, tls.accept(tcp)).await else {
                return;
            };
            let _ = server
                .serve_connection_with_upgrades(TokioIo::new(tls), service)
                .await;
        });
    }
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
            req = req.header(A2A_VERSION, "1.0");
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
        // Every binding on the card's origin, JSON-RPC first (what `binding: auto` takes).
        let offered: Vec<(&str, &str, &str)> = cards[0]["supportedInterfaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                let s = |k: &str| i[k].as_str().unwrap();
                (s("protocolBinding"), s("protocolVersion"), s("url"))
            })
            .collect();
        assert_eq!(
            offered,
            [
                ("JSONRPC", "1.0", BASE),
                ("HTTP+JSON", "1.0", BASE),
                ("GRPC", "1.0", BASE),
                ("JSONRPC", "0.3", BASE)
            ]
        );
        let examples = cards[0]["skills"][0]["examples"].as_array().unwrap();
        assert_eq!(examples.len(), Scenario::catalogue().len());
        let description = cards[0]["description"].as_str().unwrap();
        for s in Scenario::catalogue() {
            assert!(description.contains(s.usage()), "{description} lacks {s}");
        }
    }

    /// Behind TLS (`spawn_tls`): the card, read trusting the test's CA, lists every
    /// interface at its `https://` origin and comes over HTTP/2 where the client offers it
    /// (ALPN); the gateway's client streams over JSON-RPC (its own reader over TLS, ALPN
    /// `http/1.1`) and sends over HTTP+JSON. (gRPC over TLS: `grpc::tests`.)
    #[tokio::test(flavor = "multi_thread")]
    async fn behind_tls_the_card_is_https_and_the_json_bindings_serve() {
        use crate::a2a::client::{CallContext, Client, Endpoint};
        use crate::a2a::model::{OutgoingMessage, Part, ProtocolVersion, StreamEvent};
        use crate::a2a::tls::{AgentTls, TlsTrust};
        use futures::StreamExt;
        let (ca, leaf, key) = crate::a2a::tls::test_pki();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tls = tls_config(vec![leaf], key).unwrap();
        let base = spawn_tls(listener, tls).await.unwrap();
        assert!(base.starts_with("https://127.0.0.1:"), "{base}");
        let trust = AgentTls::new(&TlsTrust {
            extra_roots: vec![ca],
            ..Default::default()
        })
        .unwrap();
        let http = trust.reqwest(reqwest::Client::builder()).build().unwrap();
        let resp = http
            .get(format!("{base}.well-known/agent-card.json"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.version(), reqwest::Version::HTTP_2);
        let card: Value = resp.json().await.unwrap();
        let urls: Vec<&str> = card["supportedInterfaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["url"].as_str().unwrap())
            .collect();
        assert_eq!(urls, [base.as_str(); 4]);

        let client = |binding| {
            let endpoint = Endpoint {
                binding,
                ..Endpoint::json_rpc(
                    base.parse().unwrap(),
                    ProtocolVersion::V1,
                    Default::default(),
                )
            };
            Client::new(http.clone(), endpoint, 1 << 20, Duration::from_secs(10))
                .with_tls(trust.clone())
                .with_direct_streams(Duration::from_secs(10))
        };
        let message = |text: &str| OutgoingMessage {
            message_id: uuid::Uuid::new_v4().to_string(),
            parts: vec![Part::text(text)],
            ..Default::default()
        };
        let events: Vec<StreamEvent> = client(Binding::JsonRpc)
            .stream_message(&CallContext::none(), &message("echo over tls"), None)
            .await
            .unwrap()
            .map(Result::unwrap)
            .collect()
            .await;
        let Some(StreamEvent::StatusUpdate(last)) = events.last() else {
            panic!("{events:?}")
        };
        assert_eq!(last.status.state, TaskState::Completed);
        assert_eq!(last.status.message.as_ref().unwrap().text(), "over tls");
        let sent = client(Binding::HttpJson)
            .send_message(&CallContext::none(), &message("approve"), None, None)
            .await
            .unwrap();
        let StreamEvent::Task(task) = sent else {
            panic!("{sent:?}")
        };
        assert_eq!(task.status.state, TaskState::InputRequired);
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
}
