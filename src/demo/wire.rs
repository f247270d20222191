//! The demo agent's own A2A encoding, both versions (the gateway only decodes; a peer needs
//! its own writer): 1.0 ProtoJSON member names and `TASK_STATE_*`, 0.3 `kind` tags and
//! kebab-case states, and the JSON-RPC envelope. Pure functions of the task records; the
//! error codes come from [`crate::a2a::rpc_code`].

use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use super::now;
use super::store::{AgentMessage, TaskRecord, Update};
use crate::a2a::model::{ProtocolVersion, TaskState};

/// A message with one text part; `user` picks the role.
pub(super) fn message_json(
    v: ProtocolVersion,
    (id, text): (&str, &str),
    task_id: &str,
    ctx: &str,
    user: bool,
) -> Value {
    match v {
        ProtocolVersion::V1 => json!({
            "messageId": id, "contextId": ctx, "taskId": task_id,
            "role": if user { "ROLE_USER" } else { "ROLE_AGENT" },
            "parts": [{"text": text}],
        }),
        ProtocolVersion::V0_3 => json!({
            "kind": "message", "messageId": id, "contextId": ctx, "taskId": task_id,
            "role": if user { "user" } else { "agent" },
            "parts": [{"kind": "text", "text": text}],
        }),
    }
}

pub(super) fn state_json(v: ProtocolVersion, s: &TaskState) -> String {
    match v {
        ProtocolVersion::V1 => s.as_v1(),
        ProtocolVersion::V0_3 => s.as_str().to_owned(),
    }
}

pub(super) fn status_json(
    v: ProtocolVersion,
    state: &TaskState,
    msg: Option<&AgentMessage>,
    task_id: &str,
    ctx: &str,
    ts: &str,
) -> Value {
    let mut s = json!({"state": state_json(v, state), "timestamp": ts});
    if let Some(m) = msg {
        s["message"] = message_json(v, (&m.id, &m.text), task_id, ctx, false);
    }
    s
}

pub(super) fn artifact_json(v: ProtocolVersion, id: &str, name: &str, texts: &[String]) -> Value {
    let parts: Vec<Value> = texts
        .iter()
        .map(|t| match v {
            ProtocolVersion::V1 => json!({"text": t}),
            ProtocolVersion::V0_3 => json!({"kind": "text", "text": t}),
        })
        .collect();
    json!({"artifactId": id, "name": name, "parts": parts})
}

/// A task with the last `history_length` turns of its history (all for `None`).
pub(super) fn task_json(
    v: ProtocolVersion,
    id: &str,
    t: &TaskRecord,
    history_length: Option<usize>,
) -> Value {
    let history: Vec<Value> = t
        .history
        .last(history_length)
        .map(|turn| message_json(v, (&turn.id, &turn.text), id, &t.context_id, turn.user))
        .collect();
    let artifacts: Vec<Value> = t
        .artifacts
        .iter()
        .map(|(aid, (name, texts))| artifact_json(v, aid, name, texts))
        .collect();
    let mut task = json!({
        "id": id, "contextId": t.context_id,
        "status": status_json(v, &t.state, t.status_message.as_ref(), id, &t.context_id, &t.timestamp),
        "history": history,
    });
    if !artifacts.is_empty() {
        task["artifacts"] = json!(artifacts);
    }
    if v == ProtocolVersion::V0_3 {
        task["kind"] = json!("task");
    }
    task
}

pub(super) fn update_json(v: ProtocolVersion, u: &Update, task_id: &str, ctx: &str) -> Value {
    match (v, u) {
        (_, Update::Status { state, message }) => {
            let status = status_json(v, state, message.as_ref(), task_id, ctx, &now());
            match v {
                ProtocolVersion::V1 => {
                    json!({"statusUpdate": {"taskId": task_id, "contextId": ctx, "status": status}})
                }
                ProtocolVersion::V0_3 => {
                    json!({"kind": "status-update", "taskId": task_id, "contextId": ctx, "status": status, "final": state.is_terminal()})
                }
            }
        }
        (
            _,
            Update::Artifact {
                id,
                name,
                text,
                append,
                last_chunk,
            },
        ) => {
            let artifact = artifact_json(v, id, name, std::slice::from_ref(text));
            match v {
                ProtocolVersion::V1 => {
                    let mut a = json!({"taskId": task_id, "contextId": ctx, "artifact": artifact});
                    // ProtoJSON omits false booleans.
                    if *append {
                        a["append"] = json!(true);
                    }
                    if *last_chunk {
                        a["lastChunk"] = json!(true);
                    }
                    json!({"artifactUpdate": a})
                }
                ProtocolVersion::V0_3 => {
                    json!({"kind": "artifact-update", "taskId": task_id, "contextId": ctx,
                    "artifact": artifact, "append": append, "lastChunk": last_chunk})
                }
            }
        }
    }
}

pub(super) fn wrap_task(v: ProtocolVersion, task: Value) -> Value {
    match v {
        ProtocolVersion::V1 => json!({"task": task}),
        ProtocolVersion::V0_3 => task,
    }
}

pub(super) fn rpc_result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub(super) fn rpc_error(id: &Value, code: i64, message: &str) -> Response {
    Json(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
        .into_response()
}
