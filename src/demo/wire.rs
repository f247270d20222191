//! The demo agent's JSON encoding, both versions, shared by the two JSON bindings (the
//! gateway only decodes; a peer needs its own writer): 1.0 ProtoJSON member names and
//! `TASK_STATE_*` (the objects of JSON-RPC 1.0 results and of HTTP+JSON answers alike), 0.3
//! `kind` tags and kebab-case states (JSON-RPC 0.3), and what both read from a request: the
//! user's message, a `ListTasks` query. SSE framing for both JSON bindings' streams. Pure
//! functions of [`TaskView`]s and updates; the envelopes are the bindings' own
//! (`jsonrpc`, `rest`).

use std::convert::Infallible;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio_stream::StreamExt;

use super::store::{AgentMessage, TaskView, Update};
use super::{Answer, Event, Incoming, ListQuery, Page, Reply};
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
    (task_id, ctx): (&str, &str),
    at: SystemTime,
) -> Value {
    let mut s = json!({"state": state_json(v, state), "timestamp": rfc3339(at)});
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

/// A task, as its view holds it.
pub(super) fn task_json(v: ProtocolVersion, t: &TaskView) -> Value {
    let (id, ctx) = (t.id.as_str(), t.context_id.as_str());
    let history: Vec<Value> = t
        .history
        .iter()
        .map(|turn| message_json(v, (&turn.id, &turn.text), id, ctx, turn.user))
        .collect();
    let artifacts: Vec<Value> = t
        .artifacts
        .iter()
        .map(|(aid, name, texts)| artifact_json(v, aid, name, texts))
        .collect();
    let status = status_json(
        v,
        &t.state,
        t.status_message.as_ref(),
        (id, ctx),
        t.timestamp,
    );
    let mut task = json!({"id": id, "contextId": ctx, "status": status, "history": history});
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
            let status = status_json(
                v,
                state,
                message.as_ref(),
                (task_id, ctx),
                SystemTime::now(),
            );
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

/// A stream result or blocking-send result holding a task (1.0: `{"task": …}`).
pub(super) fn wrap_task(v: ProtocolVersion, task: Value) -> Value {
    match v {
        ProtocolVersion::V1 => json!({"task": task}),
        ProtocolVersion::V0_3 => task,
    }
}

/// One event of a stream (1.0: a `StreamResponse`).
pub(super) fn event_json(v: ProtocolVersion, e: Event<'_>) -> Value {
    match e {
        Event::Task(t) => wrap_task(v, task_json(v, t)),
        Event::Update {
            update,
            task_id,
            context_id,
        } => update_json(v, update, task_id, context_id),
    }
}

/// A message-only answer (no task), as a stream's only event or a blocking send's result
/// (1.0: `{"message": …}`).
pub(super) fn reply_json(v: ProtocolVersion, r: &Reply) -> Value {
    let mut m = message_json(
        v,
        (&r.message.id, &r.message.text),
        "",
        &r.context_id,
        false,
    );
    m.as_object_mut().map(|o| o.remove("taskId"));
    match v {
        ProtocolVersion::V1 => json!({"message": m}),
        ProtocolVersion::V0_3 => m,
    }
}

/// A blocking send's result (1.0: a `SendMessageResponse`).
pub(super) fn answer_json(v: ProtocolVersion, a: &Answer) -> Value {
    match a {
        Answer::Reply(r) => reply_json(v, r),
        Answer::Task(t) => wrap_task(v, task_json(v, t)),
    }
}

/// A `ListTasks` result (1.0 only).
pub(super) fn page_json(p: &Page) -> Value {
    let tasks: Vec<Value> = p
        .tasks
        .iter()
        .map(|t| task_json(ProtocolVersion::V1, t))
        .collect();
    json!({"tasks": tasks, "nextPageToken": p.next_page_token, "pageSize": p.page_size,
        "totalSize": p.total_size})
}

/// The user's message of a send's params (`{message, configuration?}`, the same object in
/// both versions and both JSON bindings).
pub(super) fn incoming(params: &Value) -> Incoming {
    let message = params.get("message").unwrap_or(&Value::Null);
    let field = |name: &str| {
        message
            .get(name)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let text = message
        .get("parts")
        .and_then(Value::as_array)
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("")
        })
        .unwrap_or_default();
    Incoming {
        message_id: field("messageId"),
        context_id: field("contextId"),
        task_id: field("taskId"),
        text,
    }
}

/// `historyLength` of a `GetTask` / `ListTasks` params object (absent: the whole history).
pub(super) fn history_length(params: &Value) -> Option<usize> {
    params
        .get("historyLength")
        .and_then(Value::as_u64)
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

/// A `ListTasks` params object.
pub(super) fn list_query(params: &Value) -> ListQuery {
    let string = |name: &str| {
        params
            .get(name)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    ListQuery {
        context_id: string("contextId"),
        page_size: params.get("pageSize").and_then(Value::as_u64),
        page_token: string("pageToken"),
        history_length: history_length(params),
    }
}

/// An SSE response, one JSON value per `data:` frame.
pub(super) fn sse(frames: impl futures::Stream<Item = Value> + Send + 'static) -> Response {
    Sse::new(frames.map(|v| Ok::<_, Infallible>(SseEvent::default().data(v.to_string()))))
        .into_response()
}

/// An instant as RFC 3339 UTC with microseconds (`2024-10-04T12:00:00.000000Z`).
pub(crate) fn rfc3339(at: SystemTime) -> String {
    let d = at.duration_since(UNIX_EPOCH).unwrap_or_default();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339() {
        let (y, m, d) = civil_from_days(20_000);
        assert_eq!((y, m, d), (2024, 10, 4));
        let at = UNIX_EPOCH + std::time::Duration::from_micros(1_728_000_000_000_001);
        assert_eq!(rfc3339(at), "2024-10-04T00:00:00.000001Z");
    }

    #[test]
    fn a_message_reads_the_same_from_either_version() {
        for params in [
            json!({"message": {"messageId": "m", "contextId": "c", "role": "ROLE_USER",
                "parts": [{"text": "echo "}, {"text": "hi"}]}}),
            json!({"message": {"kind": "message", "messageId": "m", "contextId": "c",
                "role": "user", "parts": [{"kind": "text", "text": "echo "}, {"kind": "text", "text": "hi"}]}}),
        ] {
            let m = incoming(&params);
            assert_eq!(m.text, "echo hi");
            assert_eq!(
                (m.message_id.as_deref(), m.context_id.as_deref(), m.task_id),
                (Some("m"), Some("c"), None)
            );
        }
        assert_eq!(incoming(&json!({})).text, "");
    }
}
