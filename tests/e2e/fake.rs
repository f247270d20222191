//! A scriptable A2A 1.0 upstream for failure modes a well-behaved server does not produce
//! (cut streams, stalls, oversized or garbage events, HTTP errors), and the hostile ones a
//! compromised agent would try (redirects to another origin, answers that never come,
//! endless streams). Each JSON-RPC method answers with a fixed SSE body or status, in the
//! order scripted; a responder function may answer whatever the script does not. Every
//! request is recorded (method and headers). [`Recorder`] is a second local server that
//! only records what reaches it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use serde_json::{json, Value};

/// One scripted answer.
#[derive(Clone)]
pub enum Answer {
    /// SSE frames (each a JSON-RPC `result` object), then EOF; CRLF framing like sse-starlette.
    Frames(Vec<Value>),
    /// SSE frames, then the stream stays open without a byte for `Duration`.
    FramesThenStall(Vec<Value>, Duration),
    /// A raw body with `text/event-stream`.
    Raw(String),
    /// A plain JSON-RPC response body (`{"result"}` or `{"error"}`), as unary calls and
    /// a2a-sdk's errors before a stream get.
    Json(Value),
    Status(StatusCode),
    /// Never answers: no status line, no headers, until the caller gives up.
    Hang,
    /// `307 Temporary Redirect` to this absolute URL (with a small body of its own).
    Redirect(String),
    /// SSE frames made on demand: `frame(i)` for i = 0, 1, ... until it returns `None`.
    /// Each frame is made only when the caller has read the previous ones.
    Generated(Arc<dyn Fn(usize) -> Option<Value> + Send + Sync>),
}

/// Answers what the script does not: `(method, params) -> answer`, `None` for "not scripted".
pub type Responder = Arc<dyn Fn(&str, &Value) -> Option<Answer> + Send + Sync>;

/// One request as the server received it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    /// The value of header `name` (case-insensitive), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Clone, Default)]
struct Script {
    answers: Arc<Mutex<Vec<(String, Answer)>>>,
    calls: Arc<Mutex<Vec<String>>>,
    requests: Arc<Mutex<Vec<Recorded>>>,
    responder: Option<Responder>,
}

pub struct Fake {
    pub url: String,
    script: Script,
}

impl Fake {
    /// Starts a fake answering `method` with each answer in turn.
    pub async fn start(answers: Vec<(&str, Answer)>) -> Self {
        Self::start_with(answers, true).await
    }

    /// Like [`Fake::start`], with the card's `capabilities.streaming`.
    pub async fn start_with(answers: Vec<(&str, Answer)>, streaming: bool) -> Self {
        Self::start_full(answers, streaming, None).await
    }

    /// A streaming fake answering every call with `responder(method, params)`.
    pub async fn start_responder(
        responder: impl Fn(&str, &Value) -> Option<Answer> + Send + Sync + 'static,
    ) -> Self {
        Self::start_full(Vec::new(), true, Some(Arc::new(responder))).await
    }

    async fn start_full(
        answers: Vec<(&str, Answer)>,
        streaming: bool,
        responder: Option<Responder>,
    ) -> Self {
        let script = Script {
            answers: Arc::new(Mutex::new(
                answers
                    .into_iter()
                    .map(|(m, a)| (m.to_owned(), a))
                    .collect(),
            )),
            calls: Arc::default(),
            requests: Arc::default(),
            responder,
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let card = card("fake", "scripted failures", &url, streaming);
        let app = Router::new()
            .route(
                "/.well-known/agent-card.json",
                get(move || async move { Json(card) }),
            )
            .route("/", post(rpc))
            .with_state(script.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, script }
    }

    /// The JSON-RPC methods called so far.
    pub fn calls(&self) -> Vec<String> {
        self.script.calls.lock().unwrap().clone()
    }

    /// The JSON-RPC requests received so far (`method` is the JSON-RPC method).
    pub fn requests(&self) -> Vec<Recorded> {
        self.script.requests.lock().unwrap().clone()
    }
}

fn frame(result: &Value) -> String {
    format!(
        "data: {}\r\n\r\n",
        json!({"jsonrpc": "2.0", "id": 1, "result": result})
    )
}

fn sse(body: Body) -> Response {
    ([("content-type", "text/event-stream")], body).into_response()
}

async fn rpc(State(script): State<Script>, headers: HeaderMap, Json(req): Json<Value>) -> Response {
    let method = req["method"].as_str().unwrap_or_default().to_owned();
    script.calls.lock().unwrap().push(method.clone());
    script.requests.lock().unwrap().push(Recorded {
        method: method.clone(),
        path: "/".into(),
        headers: header_list(&headers),
        body: req.to_string(),
    });
    let answer = {
        let mut answers = script.answers.lock().unwrap();
        let i = answers.iter().position(|(m, _)| *m == method);
        i.map(|i| answers.remove(i).1)
    };
    let answer = answer.or_else(|| {
        script
            .responder
            .as_ref()
            .and_then(|r| r(&method, &req["params"]))
    });
    match answer {
        None => Json(json!({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32601, "message": "not scripted"}})).into_response(),
        Some(Answer::Status(s)) => (s, "scripted failure").into_response(),
        Some(Answer::Raw(body)) => sse(Body::from(body)),
        Some(Answer::Json(mut v)) => {
            v["jsonrpc"] = json!("2.0");
            v["id"] = req["id"].clone();
            Json(v).into_response()
        }
        Some(Answer::Frames(frames)) => sse(Body::from(frames.iter().map(frame).collect::<String>())),
        Some(Answer::FramesThenStall(frames, stall)) => {
            let head: String = frames.iter().map(frame).collect();
            let stream = futures::stream::unfold(Some(head), move |head| async move {
                match head {
                    Some(h) => Some((Ok::<_, std::io::Error>(Bytes::from(h)), None)),
                    None => {
                        // The scripted stall itself (what the test is about), then EOF.
                        tokio::time::sleep(stall).await;
                        None
                    }
                }
            });
            sse(Body::from_stream(stream))
        }
        Some(Answer::Hang) => std::future::pending().await,
        Some(Answer::Redirect(location)) => redirect(&location),
        Some(Answer::Generated(make)) => {
            let stream = futures::stream::unfold(0usize, move |i| {
                let make = make.clone();
                async move {
                    let f = make(i)?;
                    Some((Ok::<_, std::io::Error>(Bytes::from(frame(&f))), i + 1))
                }
            });
            sse(Body::from_stream(stream))
        }
    }
}

fn header_list(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

fn redirect(location: &str) -> Response {
    (
        StatusCode::TEMPORARY_REDIRECT,
        [("location", location.to_owned())],
        "moved; follow the Location",
    )
        .into_response()
}

/// What [`Recorder`] answers: a marker no client of the gateway may ever see.
pub const FOREIGN_MARKER: &str = "SECRET-FOREIGN-BODY";

/// A second local server (another origin) that records every request and answers with
/// [`FOREIGN_MARKER`]: an agent card naming it at `/.well-known/…`, and to anything else a
/// JSON-RPC stream whose agent message is the marker. Nothing should ever reach it.
pub struct Recorder {
    pub url: String,
    seen: Arc<Mutex<Vec<Recorded>>>,
}

impl Recorder {
    pub async fn start() -> Self {
        let seen: Arc<Mutex<Vec<Recorded>>> = Arc::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let (log, base) = (seen.clone(), url.clone());
        let app = Router::new().fallback(
            move |method: axum::http::Method,
                  uri: axum::http::Uri,
                  headers: HeaderMap,
                  body: Bytes| {
                let (log, base) = (log.clone(), base.clone());
                async move {
                    log.lock().unwrap().push(Recorded {
                        method: method.to_string(),
                        path: uri.to_string(),
                        headers: header_list(&headers),
                        body: String::from_utf8_lossy(&body).into_owned(),
                    });
                    if uri.path().starts_with("/.well-known/") {
                        let card = card(FOREIGN_MARKER, FOREIGN_MARKER, &base, true);
                        return Json(card).into_response();
                    }
                    let reply = json!({"message": {"messageId": FOREIGN_MARKER, "role": "ROLE_AGENT",
                        "parts": [{"text": FOREIGN_MARKER}]}});
                    sse(Body::from(frame(&reply)))
                }
            },
        );
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { url, seen }
    }

    /// Every request that reached this server.
    pub fn requests(&self) -> Vec<Recorded> {
        self.seen.lock().unwrap().clone()
    }
}

/// A server answering every request (any method, any path) with `307` to `location`.
pub struct Redirector {
    pub url: String,
    hits: Arc<AtomicUsize>,
}

impl Redirector {
    /// How many requests it answered.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

pub async fn redirector(location: String) -> Redirector {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let app = Router::new().fallback(move || {
        let location = location.clone();
        counter.fetch_add(1, Ordering::SeqCst);
        async move { redirect(&location) }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    Redirector { url, hits }
}

/// The 1.0 card of a JSON-RPC agent at `url`.
pub fn card(name: &str, description: &str, url: &str, streaming: bool) -> Value {
    json!({
        "name": name, "description": description, "version": "1",
        "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": streaming}, "skills": []
    })
}

/// A 1.0 `task` result.
pub fn task(state: &str, message: Option<(&str, &str)>) -> Value {
    json!({"task": {"id": "T1", "contextId": "C1", "status": status(state, message)}})
}

/// A 1.0 `statusUpdate` result.
pub fn update(state: &str, message: Option<(&str, &str)>) -> Value {
    json!({"statusUpdate": {"taskId": "T1", "contextId": "C1", "status": status(state, message)}})
}

fn status(state: &str, message: Option<(&str, &str)>) -> Value {
    let mut s = json!({"state": state});
    if let Some((id, text)) = message {
        s["message"] = json!({"messageId": id, "role": "ROLE_AGENT", "parts": [{"text": text}]});
    }
    s
}

/// A 1.0 `statusUpdate` whose status message carries one data part.
pub fn update_with_data(state: &str, message_id: &str, data: Value) -> Value {
    json!({"statusUpdate": {"taskId": "T1", "contextId": "C1", "status": {"state": state,
        "message": {"messageId": message_id, "role": "ROLE_AGENT", "parts": [{"data": data}]}}}})
}

/// A 1.0 `artifactUpdate`: one whole artifact (one text part, last chunk) with `metadata`.
pub fn artifact(artifact_id: &str, text: &str, metadata: Value) -> Value {
    json!({"artifactUpdate": {"taskId": "T1", "contextId": "C1", "lastChunk": true,
        "artifact": {"artifactId": artifact_id, "name": "report", "parts": [{"text": text}],
            "metadata": metadata}}})
}
