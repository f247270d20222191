//! The JSON-RPC binding of A2A 1.0 (§9) and 0.3 (§7), docs/bindings.md: a [`Call`] as the
//! request body a POST to the interface URL carries, and the response (or one streamed
//! frame) as the model.
//!
//! - Requests: `{"jsonrpc": "2.0", id, method, params}`; the method is the version's name of
//!   the operation ([`super::ProtocolVersion::method`]), the params the version's ProtoJSON
//!   ([`super::wire_v1`], [`super::wire_v0_3`]); a 1.0 call's tenant is the `tenant` field
//!   (0.3 has none). An operation the version lacks (0.3's `ListTasks`) has no request.
//! - Answers: the envelope's `result`, decoded as the operation's result ([`Answer::of_json`]),
//!   or its `error`, kept as the A2A error it is (codes in [`super::rpc_code`]); anything
//!   else is described by its size, never echoed (docs/design.md#3-http-surface).
//! - Stream frames: each SSE frame's data is one whole response; 1.0 marks error frames
//!   with `event: error`, 0.3 does not: the envelope decides either way.
//!
//! The client's HTTP transport reads answers through [`JsonRpc`], this binding's
//! [`JsonCodec`]. Data only: no I/O here. The client sends, bounds and reads (`client.rs`).

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::call::{Answer, Call, HttpRequest, JsonCodec, ListTasks};
use super::errors::ClientError;
use super::model::{ProtocolVersion, RpcError, StreamEvent};
use super::Operation;

/// A JSON-RPC 2.0 response envelope, borrowed from the frame text.
#[derive(Debug, Deserialize)]
pub struct Envelope<'a> {
    #[serde(borrow, default)]
    pub result: Option<&'a RawValue>,
    #[serde(default)]
    pub error: Option<RpcError>,
}

/// What one JSON-RPC response carries: its result (raw JSON text) or its error.
#[derive(Debug)]
pub enum RpcReply<'a> {
    Result(&'a str),
    Error(RpcError),
}

/// Splits a JSON-RPC response into its result or error; `None` if it is neither.
pub fn parse_envelope(text: &str) -> Option<RpcReply<'_>> {
    let env: Envelope<'_> = serde_json::from_str(text).ok()?;
    match (env.error, env.result) {
        (Some(e), _) => Some(RpcReply::Error(e)),
        (None, Some(r)) => Some(RpcReply::Result(r.get())),
        (None, None) => None,
    }
}

/// A JSON-RPC request body.
pub fn request_body(id: u64, method: &str, params: Value) -> Value {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The request body of `call` in `version`, numbered `id`, carrying `tenant` (1.0 only);
/// [`ClientError::Unsupported`] when the version lacks the operation.
pub(crate) fn request(
    call: &Call<'_>,
    version: ProtocolVersion,
    tenant: Option<&str>,
    id: u64,
) -> Result<Value, ClientError> {
    let op = call.operation();
    let method = version
        .method(op)
        .ok_or(ClientError::Unsupported(op.name(), version.as_str()))?;
    let mut params = params(call, version);
    if let (Some(tenant), ProtocolVersion::V1) = (tenant, version) {
        params["tenant"] = Value::from(tenant);
    }
    Ok(request_body(id, method, params))
}

/// `call` as the HTTP request that carries it: a POST of its [`request`] body to the
/// interface URL `url`.
pub(crate) fn http_request(
    url: &url::Url,
    call: &Call<'_>,
    version: ProtocolVersion,
    tenant: Option<&str>,
    id: u64,
) -> Result<HttpRequest, ClientError> {
    Ok(HttpRequest {
        method: reqwest::Method::POST,
        url: url.clone(),
        body: Some(request(call, version, tenant, id)?),
    })
}

/// The binding's codec as the HTTP transport reads through it. A non-2xx answer is not
/// JSON-RPC: its body is never read (the status says what is wrong).
#[derive(Debug, Clone, Copy)]
pub(crate) struct JsonRpc;

impl JsonCodec for JsonRpc {
    fn accept(&self) -> &'static str {
        "application/json"
    }

    fn answer(
        &self,
        op: Operation,
        version: ProtocolVersion,
        body: &str,
    ) -> Result<Answer, ClientError> {
        answer(op, version, body)
    }

    fn frame(&self, version: ProtocolVersion, data: &str) -> Result<StreamEvent, ClientError> {
        frame(version, data)
    }
}

/// The params of `call` in `version`'s ProtoJSON (the HTTP+JSON binding's body of a send
/// is the 1.0 one).
pub(super) fn params(call: &Call<'_>, version: ProtocolVersion) -> Value {
    use serde_json::json;
    match *call {
        Call::Stream(s) | Call::Send(s) => version.send_params(s.message, s.history_length),
        Call::GetTask { id, history_length } => {
            let mut params = json!({ "id": id.as_str() });
            if let Some(n) = history_length {
                params["historyLength"] = n.into();
            }
            params
        }
        Call::CancelTask { id } | Call::Subscribe { id } => json!({ "id": id.as_str() }),
        Call::ListTasks(list) => list_params(&list),
        Call::ExtendedCard => json!({}),
        Call::SetPushConfig(push) => version.push_config_params(&push),
    }
}

/// `ListTasks` params (1.0).
fn list_params(list: &ListTasks<'_>) -> Value {
    let mut params = serde_json::json!({
        "pageSize": list.page_size,
        "historyLength": list.history_length,
        "includeArtifacts": list.include_artifacts,
    });
    if let Some(c) = list.context_id {
        params["contextId"] = Value::from(c);
    }
    if let Some(t) = list.page_token {
        params["pageToken"] = Value::from(t);
    }
    params
}

/// A unary call's response: the result of `op`, or the A2A error it carries.
pub fn answer(op: Operation, version: ProtocolVersion, text: &str) -> Result<Answer, ClientError> {
    match parse_envelope(text) {
        Some(RpcReply::Result(r)) => Answer::of_json(op, version, r),
        Some(RpcReply::Error(e)) => Err(ClientError::Rpc(e)),
        None => Err(not_jsonrpc(text)),
    }
}

/// One streamed JSON-RPC response (an SSE frame's data, or a plain JSON body answering a
/// streaming call) as an upstream item.
pub fn frame(version: ProtocolVersion, data: &str) -> Result<StreamEvent, ClientError> {
    if let Some(decoded) = version.decode_response(data) {
        return decoded.map_err(ClientError::Rpc);
    }
    match parse_envelope(data) {
        Some(RpcReply::Result(r)) => Ok(version.decode_event(r)),
        Some(RpcReply::Error(e)) => Err(ClientError::Rpc(e)),
        None => Err(not_jsonrpc(data)),
    }
}

/// An answer that is not JSON-RPC: described by its size, never echoed
/// (docs/design.md#3-http-surface).
fn not_jsonrpc(text: &str) -> ClientError {
    ClientError::Invalid(format!(
        "the upstream answered {} bytes that are not a JSON-RPC response",
        text.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::call::{PushConfig, SendArgs};
    use crate::a2a::model::{OutgoingMessage, Part, Task, TaskState};
    use crate::ids::TaskId;
    use serde_json::json;

    use ProtocolVersion::{V0_3, V1};

    /// Every operation's request in both versions, byte for byte (the tenant only in 1.0).
    #[test]
    fn each_call_is_one_request_body() {
        let id = TaskId::new("t1");
        let msg = OutgoingMessage {
            message_id: "m".into(),
            parts: vec![Part::text("hi")],
            context_id: Some("c".into()),
            ..OutgoingMessage::default()
        };
        let send = SendArgs {
            message: &msg,
            history_length: Some(2),
        };
        let list = ListTasks {
            context_id: Some("c"),
            page_size: 20,
            page_token: Some("tok"),
            history_length: 0,
            include_artifacts: true,
        };
        let push = PushConfig {
            task_id: &id,
            id: "p1",
            url: "http://gw/a2a/push/a",
            token: "tok",
        };
        let cases: [(Call<'_>, ProtocolVersion, &str); 14] = [
            (
                Call::Stream(send),
                V1,
                r#"{"id":7,"jsonrpc":"2.0","method":"SendStreamingMessage","params":{"configuration":{"historyLength":2},"message":{"contextId":"c","messageId":"m","parts":[{"text":"hi"}],"role":"ROLE_USER"},"tenant":"acme"}}"#,
            ),
            (
                Call::Send(send),
                V0_3,
                r#"{"id":7,"jsonrpc":"2.0","method":"message/send","params":{"configuration":{"blocking":true,"historyLength":2},"message":{"contextId":"c","kind":"message","messageId":"m","parts":[{"kind":"text","text":"hi"}],"role":"user"}}}"#,
            ),
            (
                Call::GetTask {
                    id: &id,
                    history_length: Some(3),
                },
                V1,
                r#"{"id":7,"jsonrpc":"2.0","method":"GetTask","params":{"historyLength":3,"id":"t1","tenant":"acme"}}"#,
            ),
            (
                Call::GetTask {
                    id: &id,
                    history_length: None,
                },
                V0_3,
                r#"{"id":7,"jsonrpc":"2.0","method":"tasks/get","params":{"id":"t1"}}"#,
            ),
            (
                Call::CancelTask { id: &id },
                V1,
                r#"{"id":7,"jsonrpc":"2.0","method":"CancelTask","params":{"id":"t1","tenant":"acme"}}"#,
            ),
            (
                Call::CancelTask { id: &id },
                V0_3,
                r#"{"id":7,"jsonrpc":"2.0","method":"tasks/cancel","params":{"id":"t1"}}"#,
            ),
            (
                Call::Subscribe { id: &id },
                V1,
                r#"{"id":7,"jsonrpc":"2.0","method":"SubscribeToTask","params":{"id":"t1","tenant":"acme"}}"#,
            ),
            (
                Call::Subscribe { id: &id },
                V0_3,
                r#"{"id":7,"jsonrpc":"2.0","method":"tasks/resubscribe","params":{"id":"t1"}}"#,
            ),
            (
                Call::ListTasks(list),
                V1,
                r#"{"id":7,"jsonrpc":"2.0","method":"ListTasks","params":{"contextId":"c","historyLength":0,"includeArtifacts":true,"pageSize":20,"pageToken":"tok","tenant":"acme"}}"#,
            ),
            (
                Call::ListTasks(ListTasks {
                    page_size: 1,
                    ..ListTasks::default()
                }),
                V1,
                r#"{"id":7,"jsonrpc":"2.0","method":"ListTasks","params":{"historyLength":0,"includeArtifacts":false,"pageSize":1,"tenant":"acme"}}"#,
            ),
            (
                Call::ExtendedCard,
                V1,
                r#"{"id":7,"jsonrpc":"2.0","method":"GetExtendedAgentCard","params":{"tenant":"acme"}}"#,
            ),
            (
                Call::ExtendedCard,
                V0_3,
                r#"{"id":7,"jsonrpc":"2.0","method":"agent/getAuthenticatedExtendedCard","params":{}}"#,
            ),
            (
                Call::SetPushConfig(push),
                V1,
                r#"{"id":7,"jsonrpc":"2.0","method":"CreateTaskPushNotificationConfig","params":{"authentication":{"credentials":"tok","scheme":"Bearer"},"id":"p1","taskId":"t1","tenant":"acme","token":"tok","url":"http://gw/a2a/push/a"}}"#,
            ),
            (
                Call::SetPushConfig(push),
                V0_3,
                r#"{"id":7,"jsonrpc":"2.0","method":"tasks/pushNotificationConfig/set","params":{"pushNotificationConfig":{"authentication":{"credentials":"tok","schemes":["Bearer"]},"id":"p1","token":"tok","url":"http://gw/a2a/push/a"},"taskId":"t1"}}"#,
            ),
        ];
        for (call, version, expected) in cases {
            let body = request(&call, version, Some("acme"), 7).unwrap();
            assert_eq!(body.to_string(), expected, "{call:?} {version:?}");
        }
        let refused = request(&Call::ListTasks(list), V0_3, None, 7);
        assert!(
            matches!(refused, Err(ClientError::Unsupported("ListTasks", "0.3"))),
            "{refused:?}"
        );
    }

    /// Responses by operation: the result as the model, the error as the A2A error, and
    /// what is neither described by its size.
    #[test]
    fn each_answer_is_its_operations_result_or_an_error() {
        let task = r#"{"id":"t","contextId":"c","status":{"state":"TASK_STATE_COMPLETED"}}"#;
        let ok = |r: &str| format!(r#"{{"jsonrpc":"2.0","id":1,"result":{r}}}"#);
        let Answer::Task(t) = answer(Operation::GetTask, V1, &ok(task)).unwrap() else {
            panic!()
        };
        assert_eq!((t.id.as_str(), t.status.state), ("t", TaskState::Completed));
        let legacy = r#"{"kind":"task","id":"t","contextId":"c","status":{"state":"canceled"}}"#;
        let canceled: Task = answer(Operation::CancelTask, V0_3, &ok(legacy))
            .unwrap()
            .into_task()
            .unwrap();
        assert_eq!(canceled.status.state, TaskState::Canceled);
        let page = answer(
            Operation::ListTasks,
            V1,
            &ok(&format!(r#"{{"tasks":[{task}],"nextPageToken":"n"}}"#)),
        )
        .unwrap()
        .into_page()
        .unwrap();
        assert_eq!(
            (page.tasks.len(), page.next_page_token.as_deref()),
            (1, Some("n"))
        );
        let sent = answer(Operation::Send, V1, &ok(&format!(r#"{{"task":{task}}}"#)));
        assert!(
            matches!(sent, Ok(Answer::Event(StreamEvent::Task(_)))),
            "{sent:?}"
        );
        // The stored config is not kept; a result that is no object is no config, and an
        // agent without push notifications (a2a-sdk 1.3.0's card saying so) answers -32003.
        let stored = r#"{"taskId":"t","id":"p1","url":"http://gw/","token":"tok"}"#;
        for version in [V1, V0_3] {
            let set = answer(Operation::SetPushConfig, version, &ok(stored));
            assert!(set.unwrap().into_push_config_set().is_ok());
            let odd = answer(Operation::SetPushConfig, version, &ok("[]"));
            assert!(matches!(odd, Err(ClientError::Invalid(_))), "{odd:?}");
        }
        let unsupported = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32003,"message":"Push notifications are not supported by the agent"}}"#;
        let refused = answer(Operation::SetPushConfig, V1, unsupported);
        assert!(
            matches!(&refused, Err(ClientError::Rpc(e)) if e.code == crate::a2a::rpc_code::PUSH_NOTIFICATION_NOT_SUPPORTED),
            "{refused:?}"
        );
        let card = answer(Operation::ExtendedCard, V1, &ok(r#"{"name":"a"}"#));
        assert_eq!(card.unwrap().into_card().unwrap().name, "a");
        let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"gone"}}"#;
        let e = answer(Operation::GetTask, V1, error).unwrap_err();
        assert!(e.is_task_not_found(), "{e:?}");
        for (op, text, said) in [
            (Operation::GetTask, ok("[1]"), "is not a Task"),
            (Operation::ListTasks, ok("1"), "is not a task page"),
            (
                Operation::GetTask,
                "<html>".to_owned(),
                "not a JSON-RPC response",
            ),
        ] {
            let e = answer(op, V1, &text).unwrap_err().to_string();
            assert!(e.contains(said) && !e.contains("html"), "{op:?}: {e}");
        }
    }

    #[test]
    fn frames_carry_an_event_or_an_error() {
        let status = json!({"jsonrpc": "2.0", "id": 1, "result": {"statusUpdate":
            {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}}});
        assert!(matches!(
            frame(V1, &status.to_string()),
            Ok(StreamEvent::StatusUpdate(_))
        ));
        let legacy = json!({"jsonrpc": "2.0", "id": 1, "result": {"kind": "status-update",
            "taskId": "t", "contextId": "c", "status": {"state": "working"}, "final": false}});
        assert!(matches!(
            frame(V0_3, &legacy.to_string()),
            Ok(StreamEvent::StatusUpdate(_))
        ));
        let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32004,"message":"no"}}"#;
        for version in ProtocolVersion::ALL {
            assert!(matches!(frame(version, error), Err(ClientError::Rpc(_))));
            assert!(matches!(
                frame(version, "nope"),
                Err(ClientError::Invalid(_))
            ));
        }
    }
}
