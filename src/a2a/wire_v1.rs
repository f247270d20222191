//! A2A 1.0 wire codec (ProtoJSON), shared by the JSON-RPC and HTTP+JSON bindings: the
//! same objects, with or without a JSON-RPC envelope.
//!
//! 1.0 discriminates by member name: a stream result holds exactly one of `task`, `message`,
//! `statusUpdate`, `artifactUpdate` (A2A 1.0 §3.2.3); parts are `{"text"}`, `{"raw"}`,
//! `{"url"}` or `{"data"}`; enums are `TASK_STATE_*` / `ROLE_*`. Every request carries
//! `A2A-Version: 1.0` (added by the client), without which a2a-sdk answers -32009.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::call::{PushConfig, PUSH_AUTH_SCHEME};
use super::model::{
    ArtifactUpdate, Message, OutgoingMessage, Part, PartContent, StatusUpdate, StreamEvent, Task,
};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StreamResponse {
    task: Option<Task>,
    message: Option<Message>,
    status_update: Option<StatusUpdate>,
    artifact_update: Option<ArtifactUpdate>,
}

impl StreamResponse {
    /// The one member it holds; `None` when it holds none we know.
    fn event(self) -> Option<StreamEvent> {
        match self {
            Self { task: Some(t), .. } => Some(StreamEvent::Task(t)),
            Self {
                message: Some(m), ..
            } => Some(StreamEvent::Message(m)),
            Self {
                status_update: Some(s),
                ..
            } => Some(StreamEvent::StatusUpdate(s)),
            Self {
                artifact_update: Some(a),
                ..
            } => Some(StreamEvent::ArtifactUpdate(a)),
            _ => None,
        }
    }
}

/// Decodes a `StreamResponse` / `SendMessageResponse` result.
pub(super) fn decode_event(raw: &str) -> StreamEvent {
    match serde_json::from_str::<StreamResponse>(raw)
        .ok()
        .and_then(StreamResponse::event)
    {
        Some(event) => event,
        None => super::unknown(raw),
    }
}

/// A whole JSON-RPC response whose result is a `StreamResponse`: the envelope and the event
/// parsed in one pass (the per-event fast path of a stream).
#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    result: Option<StreamResponse>,
    #[serde(default)]
    error: Option<super::model::RpcError>,
}

/// Decodes a whole response in one pass; `None` when it is not a plain event or error
/// (the two-step decode then classifies it, unknown results included).
pub(super) fn decode_response(text: &str) -> Option<Result<StreamEvent, super::model::RpcError>> {
    match serde_json::from_str::<Response>(text).ok()? {
        Response { error: Some(e), .. } => Some(Err(e)),
        Response {
            result: Some(result),
            ..
        } => result.event().map(Ok),
        _ => None,
    }
}

/// A bare `StreamResponse` or an HTTP+JSON error body (`{"error": google.rpc.Status}`): an
/// HTTP+JSON stream frame, read in one pass.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BareFrame<'a> {
    task: Option<Task>,
    message: Option<Message>,
    status_update: Option<StatusUpdate>,
    artifact_update: Option<ArtifactUpdate>,
    #[serde(borrow)]
    error: Option<&'a serde_json::value::RawValue>,
}

/// Decodes an HTTP+JSON frame in one pass: its event, or the raw JSON of its `error`;
/// `None` when it is neither (unknown members, not JSON: [`decode_event`] classifies it).
pub(super) fn decode_bare(text: &str) -> Option<Result<StreamEvent, &str>> {
    let frame: BareFrame<'_> = serde_json::from_str(text).ok()?;
    if let Some(error) = frame.error {
        return Some(Err(error.get()));
    }
    StreamResponse {
        task: frame.task,
        message: frame.message,
        status_update: frame.status_update,
        artifact_update: frame.artifact_update,
    }
    .event()
    .map(Ok)
}

/// Decodes a bare Task (`GetTask`, `CancelTask` results).
pub(super) fn decode_task(raw: &str) -> Option<Task> {
    serde_json::from_str(raw).ok()
}

fn encode_part(part: &Part) -> Value {
    let mut obj = Map::new();
    match &part.content {
        PartContent::Text(t) => obj.insert("text".into(), json!(t)),
        PartContent::Bytes(b) => obj.insert("raw".into(), json!(b)),
        PartContent::Url(u) => obj.insert("url".into(), json!(u)),
        PartContent::Data(d) => obj.insert("data".into(), d.clone()),
        PartContent::Unknown(v) => return v.clone(),
    };
    if let Some(m) = &part.media_type {
        obj.insert("mediaType".into(), json!(m));
    }
    if let Some(f) = &part.filename {
        obj.insert("filename".into(), json!(f));
    }
    if let Some(m) = &part.metadata {
        obj.insert("metadata".into(), m.clone());
    }
    Value::Object(obj)
}

/// Encodes a user message.
pub(super) fn encode_message(msg: &OutgoingMessage) -> Value {
    super::encode_message(msg, "ROLE_USER", None, encode_part)
}

/// `CreateTaskPushNotificationConfig` params: the flat `TaskPushNotificationConfig`
/// (`{taskId, id, url, token, authentication: {scheme, credentials}}`; the tenant is added
/// with every call's).
pub(super) fn push_config_params(push: &PushConfig<'_>) -> Value {
    json!({
        "taskId": push.task_id.as_str(),
        "id": push.id,
        "url": push.url,
        "token": push.token,
        "authentication": {"scheme": PUSH_AUTH_SCHEME, "credentials": push.token},
    })
}

/// `SendMessage` / `SendStreamingMessage` params. 1.0 sends block by default
/// (`returnImmediately: false`), so no configuration is needed for a blocking send.
pub(super) fn send_params(msg: &OutgoingMessage, history_length: Option<u32>) -> Value {
    let mut params = json!({ "message": encode_message(msg) });
    if let Some(n) = history_length {
        params["configuration"] = json!({ "historyLength": n });
    }
    params
}
