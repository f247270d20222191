//! A scriptable A2A 1.0 upstream for failure modes a well-behaved server does not produce
//! (cut streams, stalls, oversized or garbage events, HTTP errors). Each JSON-RPC method
//! answers with a fixed SSE body or status, in the order scripted.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::StatusCode;
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
}

#[derive(Clone, Default)]
struct Script {
    answers: Arc<Mutex<Vec<(String, Answer)>>>,
    calls: Arc<Mutex<Vec<String>>>,
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
        let script = Script {
            answers: Arc::new(Mutex::new(
                answers
                    .into_iter()
                    .map(|(m, a)| (m.to_owned(), a))
                    .collect(),
            )),
            calls: Arc::default(),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let card = json!({
            "name": "fake", "description": "scripted failures", "version": "1",
            "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
            "capabilities": {"streaming": streaming}, "skills": []
        });
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

async fn rpc(State(script): State<Script>, Json(req): Json<Value>) -> Response {
    let method = req["method"].as_str().unwrap_or_default().to_owned();
    script.calls.lock().unwrap().push(method.clone());
    let answer = {
        let mut answers = script.answers.lock().unwrap();
        let i = answers.iter().position(|(m, _)| *m == method);
        i.map(|i| answers.remove(i).1)
    };
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
                        tokio::time::sleep(stall).await;
                        None
                    }
                }
            });
            sse(Body::from_stream(stream))
        }
    }
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
