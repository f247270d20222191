//! A2A 0.3 JSON-RPC wire codec.
//!
//! 0.3 discriminates with an inline `kind` (`task`, `message`, `status-update`,
//! `artifact-update`; parts `text` / `file` / `data`), spells states in kebab case and has a
//! `final` flag that is *not* a reliable end marker (a2a-sdk's 0.3 adapter sends
//! `final:false` on input-required and then closes), so the gateway ignores it and ends on
//! state or stream close. Requests carry no `A2A-Version` header.

use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::call::{PushConfig, PUSH_AUTH_SCHEME};
use super::model::{OutgoingMessage, Part, PartContent, StreamEvent, Task};

#[derive(Deserialize)]
struct Kind {
    kind: Option<String>,
}

/// Decodes a stream frame result or a `message/send` result (bare object with `kind`).
pub(super) fn decode_event(raw: &str) -> StreamEvent {
    let kind = serde_json::from_str::<Kind>(raw).ok().and_then(|k| k.kind);
    let decoded = match kind.as_deref() {
        Some("task") => serde_json::from_str(raw).map(StreamEvent::Task).ok(),
        Some("message") => serde_json::from_str(raw).map(StreamEvent::Message).ok(),
        Some("status-update") => serde_json::from_str(raw)
            .map(StreamEvent::StatusUpdate)
            .ok(),
        Some("artifact-update") => serde_json::from_str(raw)
            .map(StreamEvent::ArtifactUpdate)
            .ok(),
        _ => None,
    };
    decoded.unwrap_or_else(|| super::unknown(raw))
}

/// Decodes a bare Task (`tasks/get`, `tasks/cancel` results).
pub(super) fn decode_task(raw: &str) -> Option<Task> {
    serde_json::from_str(raw).ok()
}

fn encode_part(part: &Part) -> Value {
    let mut obj = match &part.content {
        PartContent::Text(t) => json!({"kind": "text", "text": t}),
        // 0.3 DataPart.data must be an object: wrap anything else.
        PartContent::Data(d @ Value::Object(_)) => json!({"kind": "data", "data": d}),
        PartContent::Data(d) => json!({"kind": "data", "data": {"value": d}}),
        PartContent::Bytes(_) | PartContent::Url(_) => {
            let mut file = Map::new();
            match &part.content {
                PartContent::Bytes(b) => file.insert("bytes".into(), json!(b)),
                PartContent::Url(u) => file.insert("uri".into(), json!(u)),
                _ => None,
            };
            if let Some(m) = &part.media_type {
                file.insert("mimeType".into(), json!(m));
            }
            if let Some(f) = &part.filename {
                file.insert("name".into(), json!(f));
            }
            json!({"kind": "file", "file": file})
        }
        PartContent::Unknown(v) => return v.clone(),
    };
    if let Some(m) = &part.metadata {
        obj["metadata"] = m.clone();
    }
    obj
}

/// Encodes a user message.
pub(super) fn encode_message(msg: &OutgoingMessage) -> Value {
    super::encode_message(msg, "user", Some("message"), encode_part)
}

/// `message/send` / `message/stream` params; 0.3 asks for a blocking send explicitly.
pub(super) fn send_params(msg: &OutgoingMessage, history_length: Option<u32>) -> Value {
    let mut config = json!({ "blocking": true });
    if let Some(n) = history_length {
        config["historyLength"] = json!(n);
    }
    json!({ "message": encode_message(msg), "configuration": config })
}

/// `tasks/pushNotificationConfig/set` params: the config nested under the task id, its
/// authentication a list of schemes (`{taskId, pushNotificationConfig: {id, url, token,
/// authentication: {schemes, credentials}}}`).
pub(super) fn push_config_params(push: &PushConfig<'_>) -> Value {
    json!({
        "taskId": push.task_id.as_str(),
        "pushNotificationConfig": {
            "id": push.id,
            "url": push.url,
            "token": push.token,
            "authentication": {"schemes": [PUSH_AUTH_SCHEME], "credentials": push.token},
        },
    })
}
