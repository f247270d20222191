//! The HTTP+JSON binding of A2A 1.0 (A2A 1.0 §11, docs/bindings.md): what a call looks like
//! on the wire, and what its answers say.
//!
//! - Requests: a [`Call`] as `a2a.proto`'s `google.api.http` rules say: `tenant` and the
//!   task id go into the path (`{url}/{tenant}/tasks/{id}:cancel`), the rest is the JSON
//!   body of a POST (a send's is the 1.0 JSON-RPC params, [`jsonrpc::params`]) or the query
//!   of a GET (camelCase names: `?historyLength=2`). Path segments are percent-encoded, so a
//!   task id cannot reach another route.
//! - Answers: the same 1.0 ProtoJSON objects as JSON-RPC results, without an envelope;
//!   stream frames are bare `StreamResponse`s ([`super::wire_v1`]).
//! - Errors: a non-2xx status with a `google.rpc.Status` body (`{"error": {code, status,
//!   message, details}}`), mapped through [`super::errors`]; the same body in an
//!   `event: error` frame ends a stream.
//!
//! The client's HTTP transport reads answers through [`HttpJson`], this binding's
//! [`JsonCodec`]. Data only: no I/O here. The client sends, bounds and reads (`client.rs`).

use serde::Deserialize;
use serde_json::{Map, Value};
use url::Url;

use super::call::{Answer, Call, ErrorInBody, HttpRequest, JsonCodec};
use super::errors::{self, ClientError};
use super::model::{ProtocolVersion, RpcError, StreamEvent};
use super::{jsonrpc, wire_v1, Operation};
use crate::ids::TaskId;

/// A value that cannot be one path segment: empty, or only dots (URLs read `.`, `..` and
/// their percent-encodings as moves between segments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unaddressable {
    TaskId,
    Tenant,
}

impl From<Unaddressable> for ClientError {
    fn from(e: Unaddressable) -> Self {
        match e {
            // No task can have that id on this upstream.
            Unaddressable::TaskId => ClientError::Rpc(RpcError {
                code: super::rpc_code::TASK_NOT_FOUND,
                message: "the task id cannot be an HTTP+JSON path segment".into(),
                data: None,
            }),
            Unaddressable::Tenant => {
                ClientError::Invalid("the tenant cannot be an HTTP+JSON path segment".into())
            }
        }
    }
}

/// The binding's codec as the HTTP transport reads through it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HttpJson;

impl JsonCodec for HttpJson {
    /// A2A 1.0.1 prefers `application/a2a+json`; servers of 1.0.0 answer `application/json`.
    fn accept(&self) -> &'static str {
        "application/a2a+json, application/json"
    }

    fn answer(&self, op: Operation, _: ProtocolVersion, body: &str) -> Result<Answer, ClientError> {
        answer(op, body)
    }

    fn frame(&self, _: ProtocolVersion, data: &str) -> Result<StreamEvent, ClientError> {
        frame(data)
    }

    /// A non-2xx answer's `google.rpc.Status` names the A2A error (A2A 1.0 §11.6).
    fn error_body(&self) -> Option<ErrorInBody> {
        Some(error_of)
    }
}

/// The request of `call` under the interface URL `base`, `tenant` (if not empty) its first
/// path segment.
pub(crate) fn request(
    base: &Url,
    call: &Call<'_>,
    tenant: Option<&str>,
) -> Result<HttpRequest, Unaddressable> {
    let mut path: Vec<String> = Vec::new();
    // A2A 1.0 §11: every route has a twin under `/{tenant}`.
    if let Some(tenant) = tenant.filter(|t| !t.is_empty()) {
        path.push(segment(tenant).ok_or(Unaddressable::Tenant)?);
    }
    let id = |id: &TaskId| segment(id.as_str()).ok_or(Unaddressable::TaskId);
    let mut query: Vec<(&str, String)> = Vec::new();
    let empty = || Some(Value::Object(Map::new()));
    let (method, body) = match *call {
        Call::Send(_) => {
            path.push("message:send".into());
            let body = jsonrpc::params(call, ProtocolVersion::V1);
            (reqwest::Method::POST, Some(body))
        }
        Call::Stream(_) => {
            path.push("message:stream".into());
            let body = jsonrpc::params(call, ProtocolVersion::V1);
            (reqwest::Method::POST, Some(body))
        }
        Call::GetTask {
            id: task,
            history_length,
        } => {
            path.extend(["tasks".into(), id(task)?]);
            if let Some(n) = history_length {
                query.push(("historyLength", n.to_string()));
            }
            (reqwest::Method::GET, None)
        }
        Call::ListTasks(list) => {
            path.push("tasks".into());
            // Sorted by name, as the query has always been written.
            if let Some(c) = list.context_id {
                query.push(("contextId", c.to_owned()));
            }
            query.push(("historyLength", list.history_length.to_string()));
            query.push(("includeArtifacts", list.include_artifacts.to_string()));
            query.push(("pageSize", list.page_size.to_string()));
            if let Some(t) = list.page_token {
                query.push(("pageToken", t.to_owned()));
            }
            (reqwest::Method::GET, None)
        }
        Call::ExtendedCard => {
            path.push("extendedAgentCard".into());
            (reqwest::Method::GET, None)
        }
        Call::CancelTask { id: task } => {
            path.extend(["tasks".into(), format!("{}:cancel", id(task)?)]);
            (reqwest::Method::POST, empty())
        }
        // The body is the 1.0 `TaskPushNotificationConfig` (`body: "*"`), its task id the
        // path's too.
        Call::SetPushConfig(push) => {
            path.extend([
                "tasks".into(),
                id(push.task_id)?,
                "pushNotificationConfigs".into(),
            ]);
            let body = jsonrpc::params(call, ProtocolVersion::V1);
            (reqwest::Method::POST, Some(body))
        }
        // The proto annotates GET; the spec's prose, which we follow, says POST (a2a-sdk and
        // @a2a-js/sdk route both).
        Call::Subscribe { id: task } => {
            path.extend(["tasks".into(), format!("{}:subscribe", id(task)?)]);
            (reqwest::Method::POST, empty())
        }
    };
    let mut url = base.clone();
    url.set_fragment(None);
    let mut full = base.path().trim_end_matches('/').to_owned();
    for s in &path {
        full.push('/');
        full.push_str(s);
    }
    url.set_path(&full);
    if !query.is_empty() {
        url.query_pairs_mut().extend_pairs(query);
    }
    Ok(HttpRequest { method, url, body })
}

/// A unary call's answer: the body, the 1.0 ProtoJSON result of `op` ([`Answer::of_json`]);
/// a body that is not JSON is described by its size, never echoed.
pub fn answer(op: Operation, text: &str) -> Result<Answer, ClientError> {
    match serde_json::from_str::<serde::de::IgnoredAny>(text) {
        Ok(_) => Answer::of_json(op, ProtocolVersion::V1, text),
        Err(_) => Err(not_a2a(text)),
    }
}

/// One stream item (an SSE frame's data, or a plain JSON body answering a streaming call).
pub fn frame(data: &str) -> Result<StreamEvent, ClientError> {
    match decode_frame(data) {
        Ok(event) => Ok(event),
        Err(FrameError::A2a(e)) => Err(ClientError::Rpc(e)),
        Err(FrameError::Other) => Err(ClientError::Unavailable(
            "the upstream ended the stream with an error that names no A2A error".into(),
        )),
        Err(FrameError::Invalid) => Err(not_a2a(data)),
    }
}

/// An answer that is not JSON: described by its size, never echoed.
fn not_a2a(text: &str) -> ClientError {
    ClientError::Invalid(format!(
        "the upstream answered {} bytes that are not A2A JSON",
        text.len()
    ))
}

/// `raw` as one path segment, everything but RFC 3986 unreserved characters
/// percent-encoded; `None` when it cannot be one ([`Unaddressable`]).
fn segment(raw: &str) -> Option<String> {
    if raw.bytes().all(|b| b == b'.') {
        return None;
    }
    let mut out = String::with_capacity(raw.len());
    for b in raw.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    Some(out)
}

/// `google.rpc.Status` as the HTTP+JSON binding sends it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Status {
    code: Option<i64>,
    message: String,
    details: Vec<Value>,
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: Status,
}

impl Status {
    /// The A2A error this status is, by its `ErrorInfo` reason, else by `http_status`.
    fn rpc_error(self, http_status: Option<u16>) -> Option<RpcError> {
        let reason = self.details.iter().find_map(|d| {
            let is_info = d
                .get("@type")
                .and_then(Value::as_str)
                .is_none_or(|t| t.ends_with("google.rpc.ErrorInfo"));
            d.get("reason").and_then(Value::as_str).filter(|_| is_info)
        });
        let known = reason
            .and_then(errors::by_reason)
            .or_else(|| errors::by_http_status(http_status?))?;
        Some(RpcError {
            code: known.rpc_code,
            message: self.message,
            data: None,
        })
    }
}

/// The A2A error a non-2xx answer's body names (A2A 1.0 §11.6); `None` when the body is
/// not a `google.rpc.Status` that maps to one.
pub fn error_of(http_status: u16, body: &[u8]) -> Option<RpcError> {
    let parsed: ErrorBody = serde_json::from_slice(body).ok()?;
    parsed.error.rpc_error(Some(http_status))
}

/// An HTTP+JSON stream frame (or plain-JSON answer to a streaming call) that is no event.
#[derive(Debug, Clone, PartialEq)]
pub enum FrameError {
    /// An `{"error": …}` frame that names an A2A error.
    A2a(RpcError),
    /// An `{"error": …}` frame that does not.
    Other,
    /// Not JSON.
    Invalid,
}

/// Decodes one frame's data: its event (unknown members: `StreamEvent::Unknown`), or why
/// it is none.
pub fn decode_frame(data: &str) -> Result<StreamEvent, FrameError> {
    match wire_v1::decode_bare(data) {
        Some(Ok(event)) => Ok(event),
        Some(Err(error)) => match serde_json::from_str::<Status>(error) {
            Ok(status) => {
                let http = status.code.and_then(|c| u16::try_from(c).ok());
                Err(status
                    .rpc_error(http)
                    .map_or(FrameError::Other, FrameError::A2a))
            }
            Err(_) => Err(FrameError::Other),
        },
        None if serde_json::from_str::<serde::de::IgnoredAny>(data).is_ok() => {
            Ok(wire_v1::decode_event(data))
        }
        None => Err(FrameError::Invalid),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::call::{ListTasks, PushConfig, SendArgs};
    use crate::a2a::model::OutgoingMessage;
    use crate::a2a::rpc_code;
    use serde_json::json;

    fn base(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    /// Every operation's route, method, query and body (a table: the call, the tenant, what
    /// goes on the wire).
    #[test]
    fn each_call_has_its_route() {
        let b = base("https://h/v1/projects/p/a2a/");
        let (t1, odd) = (TaskId::new("t1"), TaskId::new("x:y"));
        let msg = OutgoingMessage {
            message_id: "m".into(),
            ..OutgoingMessage::default()
        };
        let send = SendArgs {
            message: &msg,
            history_length: None,
        };
        let list = ListTasks {
            context_id: Some("c 1"),
            page_size: 20,
            page_token: Some("tok"),
            history_length: 0,
            include_artifacts: true,
        };
        let sent = json!({"message": {"messageId": "m", "parts": [], "role": "ROLE_USER"}});
        let push = |task_id| PushConfig {
            task_id,
            id: "p1",
            url: "http://gw/a2a/push/a",
            token: "tok",
        };
        let config = |task_id: &str| {
            json!({"taskId": task_id, "id": "p1", "url": "http://gw/a2a/push/a", "token": "tok",
                "authentication": {"scheme": "Bearer", "credentials": "tok"}})
        };
        let cases = [
            (
                Call::Send(send),
                None,
                "POST",
                "/v1/projects/p/a2a/message:send",
                None,
                Some(sent.clone()),
            ),
            (
                Call::Stream(send),
                Some("acme"),
                "POST",
                "/v1/projects/p/a2a/acme/message:stream",
                None,
                Some(sent),
            ),
            (
                Call::GetTask {
                    id: &t1,
                    history_length: None,
                },
                None,
                "GET",
                "/v1/projects/p/a2a/tasks/t1",
                None,
                None,
            ),
            (
                Call::GetTask {
                    id: &t1,
                    history_length: Some(2),
                },
                Some("acme"),
                "GET",
                "/v1/projects/p/a2a/acme/tasks/t1",
                Some("historyLength=2"),
                None,
            ),
            (
                Call::CancelTask { id: &t1 },
                None,
                "POST",
                "/v1/projects/p/a2a/tasks/t1:cancel",
                None,
                Some(json!({})),
            ),
            (
                Call::CancelTask { id: &odd },
                Some("t/../u"),
                "POST",
                "/v1/projects/p/a2a/t%2F..%2Fu/tasks/x%3Ay:cancel",
                None,
                Some(json!({})),
            ),
            (
                Call::Subscribe { id: &t1 },
                Some(""),
                "POST",
                "/v1/projects/p/a2a/tasks/t1:subscribe",
                None,
                Some(json!({})),
            ),
            (
                Call::ListTasks(ListTasks::default()),
                None,
                "GET",
                "/v1/projects/p/a2a/tasks",
                Some("historyLength=0&includeArtifacts=false&pageSize=0"),
                None,
            ),
            (
                Call::ListTasks(list),
                Some("acme"),
                "GET",
                "/v1/projects/p/a2a/acme/tasks",
                Some(
                    "contextId=c+1&historyLength=0&includeArtifacts=true&pageSize=20&pageToken=tok",
                ),
                None,
            ),
            (
                Call::ExtendedCard,
                None,
                "GET",
                "/v1/projects/p/a2a/extendedAgentCard",
                None,
                None,
            ),
            (
                Call::SetPushConfig(push(&t1)),
                None,
                "POST",
                "/v1/projects/p/a2a/tasks/t1/pushNotificationConfigs",
                None,
                Some(config("t1")),
            ),
            (
                Call::SetPushConfig(push(&odd)),
                Some("acme"),
                "POST",
                "/v1/projects/p/a2a/acme/tasks/x%3Ay/pushNotificationConfigs",
                None,
                Some(config("x:y")),
            ),
        ];
        for (call, tenant, method, path, query, body) in cases {
            let r = request(&b, &call, tenant).unwrap();
            assert_eq!(
                (r.method.as_str(), r.url.path(), r.url.query(), r.body),
                (method, path, query, body),
                "{call:?} {tenant:?}"
            );
        }
    }

    #[test]
    fn ids_and_tenants_cannot_leave_their_segment() {
        let b = base("http://h/a2a");
        for (id, path) in [
            ("../../admin", "/a2a/tasks/..%2F..%2Fadmin"),
            ("a/b?c#d", "/a2a/tasks/a%2Fb%3Fc%23d"),
            ("v1.2", "/a2a/tasks/v1.2"),
            ("é", "/a2a/tasks/%C3%A9"),
        ] {
            let id = TaskId::new(id);
            let call = Call::GetTask {
                id: &id,
                history_length: None,
            };
            let r = request(&b, &call, None).unwrap();
            assert_eq!((r.url.path(), r.url.query()), (path, None), "{id}");
        }
        for id in ["", ".", ".."] {
            let id = TaskId::new(id);
            assert_eq!(
                request(&b, &Call::Subscribe { id: &id }, None),
                Err(Unaddressable::TaskId),
                "{id:?}"
            );
        }
        assert_eq!(
            request(&b, &Call::ExtendedCard, Some("..")),
            Err(Unaddressable::Tenant)
        );
    }

    /// A unary answer is the bare result; a body that is not JSON is described, not echoed.
    #[test]
    fn answers_are_bare_results() {
        let task = r#"{"id":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}"#;
        let t = answer(Operation::GetTask, task)
            .unwrap()
            .into_task()
            .unwrap();
        assert_eq!(t.id, "t");
        let e = answer(Operation::GetTask, "<html>")
            .unwrap_err()
            .to_string();
        assert!(e.contains("6 bytes that are not A2A JSON"), "{e}");
        let e = answer(Operation::ListTasks, "1").unwrap_err().to_string();
        assert!(e.contains("not a task page"), "{e}");
    }

    /// What a2a-sdk 1.3.0 sends (transcripts §5.8-5.10, `utils/error_handlers.py`) and
    /// @a2a-js/sdk 1.3.0's `toRestErrorBody`.
    #[test]
    fn error_bodies_map_by_reason_then_status() {
        let body = |code: u16, status: &str, reason: Option<&str>| {
            let details = match reason {
                Some(r) => json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": r, "domain": "a2a-protocol.org", "metadata": {}}]),
                None => json!([]),
            };
            json!({"error": {"code": code, "status": status, "message": "m", "details": details}})
                .to_string()
        };
        let code = |status: u16, b: String| error_of(status, b.as_bytes()).map(|e| e.code);
        assert_eq!(
            code(404, body(404, "NOT_FOUND", Some("TASK_NOT_FOUND"))),
            Some(rpc_code::TASK_NOT_FOUND)
        );
        assert_eq!(
            code(404, body(404, "NOT_FOUND", Some("METHOD_NOT_FOUND"))),
            Some(rpc_code::METHOD_NOT_FOUND)
        );
        assert_eq!(
            code(
                400,
                body(400, "FAILED_PRECONDITION", Some("TASK_NOT_CANCELABLE"))
            ),
            Some(rpc_code::TASK_NOT_CANCELABLE)
        );
        assert_eq!(
            code(
                400,
                body(400, "FAILED_PRECONDITION", Some("UNSUPPORTED_OPERATION"))
            ),
            Some(rpc_code::UNSUPPORTED_OPERATION)
        );
        assert_eq!(
            code(
                400,
                body(400, "FAILED_PRECONDITION", Some("VERSION_NOT_SUPPORTED"))
            ),
            Some(rpc_code::VERSION_NOT_SUPPORTED)
        );
        // No reason: the status, where one A2A error owns it (1.0.0's 409 included).
        assert_eq!(
            code(409, body(409, "FAILED_PRECONDITION", None)),
            Some(rpc_code::TASK_NOT_CANCELABLE)
        );
        assert_eq!(
            code(400, body(400, "INVALID_ARGUMENT", None)),
            Some(rpc_code::INVALID_PARAMS)
        );
        assert_eq!(
            code(500, body(500, "INTERNAL", None)),
            Some(rpc_code::INTERNAL_ERROR)
        );
        assert_eq!(code(403, body(403, "PERMISSION_DENIED", None)), None);
        // Not a google.rpc.Status: not an A2A error, whatever the status.
        assert_eq!(code(404, "Not Found".into()), None);
        assert_eq!(
            code(500, r#"{"error": "Failed to retrieve agent card"}"#.into()),
            None
        );
        let e = error_of(
            404,
            body(404, "NOT_FOUND", Some("TASK_NOT_FOUND")).as_bytes(),
        )
        .unwrap();
        assert_eq!(e.message, "m");
    }

    #[test]
    fn frames_are_bare_stream_responses_or_errors() {
        let status = r#"{"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}}"#;
        assert!(matches!(
            decode_frame(status),
            Ok(StreamEvent::StatusUpdate(_))
        ));
        let error = r#"{"error": {"code": 400, "status": "FAILED_PRECONDITION", "message": "gone",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "UNSUPPORTED_OPERATION"}]}}"#;
        assert_eq!(
            decode_frame(error),
            Err(FrameError::A2a(RpcError {
                code: rpc_code::UNSUPPORTED_OPERATION,
                message: "gone".into(),
                data: None
            }))
        );
        assert_eq!(
            decode_frame(r#"{"error": {"code": 503, "message": "x"}}"#),
            Err(FrameError::Other)
        );
        assert_eq!(decode_frame(r#"{"error": "x"}"#), Err(FrameError::Other));
        assert!(matches!(
            decode_frame(r#"{"novel": 1}"#),
            Ok(StreamEvent::Unknown(_))
        ));
        assert_eq!(decode_frame("not json"), Err(FrameError::Invalid));
    }

    /// Every recorded 1.0 JSON-RPC stream decodes the same without its envelope.
    #[test]
    fn recorded_frames_decode_as_their_json_rpc_twins() {
        let full = format!(
            "{}/fixtures/a2a/v1/stream-echo.sse",
            env!("CARGO_MANIFEST_DIR")
        );
        let body = std::fs::read_to_string(full).unwrap();
        let mut n = 0;
        for line in body.lines().filter_map(|l| l.strip_prefix("data:")) {
            let envelope: Value = serde_json::from_str(line.trim()).unwrap();
            let bare = envelope["result"].to_string();
            let rpc =
                crate::a2a::jsonrpc::frame(crate::a2a::model::ProtocolVersion::V1, line.trim())
                    .unwrap();
            assert_eq!(decode_frame(&bare), Ok(rpc));
            n += 1;
        }
        assert!(n > 2);
    }
}
