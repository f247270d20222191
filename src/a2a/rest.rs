//! The HTTP+JSON binding of A2A 1.0 (A2A 1.0 §11, docs/bindings.md): what a call looks like
//! on the wire, and what its answers say.
//!
//! - Requests: a call's params (the same object a JSON-RPC call carries) are transcoded as
//!   `a2a.proto`'s `google.api.http` rules say: `tenant` and the task id go into the path
//!   (`{url}/{tenant}/tasks/{id}:cancel`), the rest is the JSON body of a POST or the query
//!   of a GET (camelCase names: `?historyLength=2`). Path segments are percent-encoded, so a
//!   task id cannot reach another route.
//! - Answers: the same 1.0 ProtoJSON objects as JSON-RPC results, without an envelope;
//!   stream frames are bare `StreamResponse`s ([`super::wire_v1`]).
//! - Errors: a non-2xx status with a `google.rpc.Status` body (`{"error": {code, status,
//!   message, details}}`), mapped through [`super::errors`]; the same body in an
//!   `event: error` frame ends a stream.
//!
//! Data only: no I/O here. The client sends, bounds and reads (`client.rs`).

use serde::Deserialize;
use serde_json::{Map, Value};
use url::Url;

use super::model::{RpcError, StreamEvent};
use super::{errors, wire_v1, Operation};

/// One HTTP+JSON request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub method: reqwest::Method,
    pub url: Url,
    /// The JSON body of a POST.
    pub body: Option<Value>,
}

/// A value that cannot be one path segment: empty, or only dots (URLs read `.`, `..` and
/// their percent-encodings as moves between segments).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unaddressable {
    TaskId,
    Tenant,
}

/// The request of `op` with `params` (a JSON object, as a JSON-RPC call would carry them)
/// under the interface URL `base`.
pub fn request(base: &Url, op: Operation, params: Value) -> Result<Request, Unaddressable> {
    let mut fields = match params {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    let mut path: Vec<String> = Vec::new();
    // A2A 1.0 §11: every route has a twin under `/{tenant}`.
    if let Some(tenant) = take_string(&mut fields, "tenant") {
        path.push(segment(&tenant).ok_or(Unaddressable::Tenant)?);
    }
    let id = |fields: &mut Map<String, Value>| {
        segment(&take_string(fields, "id").unwrap_or_default()).ok_or(Unaddressable::TaskId)
    };
    let (method, body) = match op {
        Operation::Send => {
            path.push("message:send".into());
            (reqwest::Method::POST, true)
        }
        Operation::Stream => {
            path.push("message:stream".into());
            (reqwest::Method::POST, true)
        }
        Operation::GetTask => {
            path.extend(["tasks".into(), id(&mut fields)?]);
            (reqwest::Method::GET, false)
        }
        Operation::ListTasks => {
            path.push("tasks".into());
            (reqwest::Method::GET, false)
        }
        Operation::ExtendedCard => {
            path.push("extendedAgentCard".into());
            (reqwest::Method::GET, false)
        }
        Operation::CancelTask => {
            path.extend(["tasks".into(), format!("{}:cancel", id(&mut fields)?)]);
            (reqwest::Method::POST, true)
        }
        // The proto annotates GET; the spec's prose, which we follow, says POST (a2a-sdk and
        // @a2a-js/sdk route both).
        Operation::Subscribe => {
            path.extend(["tasks".into(), format!("{}:subscribe", id(&mut fields)?)]);
            (reqwest::Method::POST, true)
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
    if body {
        return Ok(Request {
            method,
            url,
            body: Some(Value::Object(fields)),
        });
    }
    let query: Vec<(String, String)> = fields
        .into_iter()
        .filter_map(|(k, v)| Some((k, query_value(&v)?)))
        .collect();
    if !query.is_empty() {
        url.query_pairs_mut().extend_pairs(query);
    }
    Ok(Request {
        method,
        url,
        body: None,
    })
}

fn take_string(fields: &mut Map<String, Value>, key: &str) -> Option<String> {
    match fields.remove(key)? {
        Value::String(s) if !s.is_empty() => Some(s),
        _ => None,
    }
}

/// A query parameter's value (A2A 1.0 §11.5: scalars as text); `None` for what has none.
fn query_value(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
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
    use crate::a2a::rpc_code;
    use serde_json::json;

    fn base(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn each_operation_has_its_route() {
        let b = base("http://h:1/prefix/a2a/");
        let msg = json!({"message": {"messageId": "m"}});
        let cases = [
            (
                Operation::Send,
                msg.clone(),
                "POST",
                "/prefix/a2a/message:send",
                Some(msg.clone()),
            ),
            (
                Operation::Stream,
                msg.clone(),
                "POST",
                "/prefix/a2a/message:stream",
                Some(msg),
            ),
            (
                Operation::GetTask,
                json!({"id": "t1"}),
                "GET",
                "/prefix/a2a/tasks/t1",
                None,
            ),
            (
                Operation::CancelTask,
                json!({"id": "t1"}),
                "POST",
                "/prefix/a2a/tasks/t1:cancel",
                Some(json!({})),
            ),
            (
                Operation::Subscribe,
                json!({"id": "t1"}),
                "POST",
                "/prefix/a2a/tasks/t1:subscribe",
                Some(json!({})),
            ),
            (
                Operation::ListTasks,
                json!({}),
                "GET",
                "/prefix/a2a/tasks",
                None,
            ),
        ];
        for (op, params, method, path, body) in cases {
            let r = request(&b, op, params).unwrap();
            assert_eq!(
                (r.method.as_str(), r.url.path(), r.url.query(), r.body),
                (method, path, None, body),
                "{op:?}"
            );
        }
    }

    #[test]
    fn the_tenant_leads_the_path_and_the_rest_is_query_or_body() {
        let b = base("https://h/v1/projects/p/a2a");
        let r = request(
            &b,
            Operation::GetTask,
            json!({"id": "t1", "historyLength": 2, "tenant": "acme"}),
        )
        .unwrap();
        assert_eq!(
            r.url.as_str(),
            "https://h/v1/projects/p/a2a/acme/tasks/t1?historyLength=2"
        );
        let mut list =
            crate::a2a::model::ProtocolVersion::list_params(Some("c 1"), 20, Some("tok"), 0, true);
        list["tenant"] = json!("acme");
        let r = request(&b, Operation::ListTasks, list).unwrap();
        assert_eq!(
            r.url.as_str(),
            "https://h/v1/projects/p/a2a/acme/tasks?contextId=c+1&historyLength=0&includeArtifacts=true&pageSize=20&pageToken=tok"
        );
        let r = request(
            &b,
            Operation::Send,
            json!({"message": {"messageId": "m"}, "tenant": "acme"}),
        )
        .unwrap();
        assert_eq!(r.url.path(), "/v1/projects/p/a2a/acme/message:send");
        assert_eq!(
            r.body,
            Some(json!({"message": {"messageId": "m"}})),
            "the tenant is in the path only"
        );
        let r = request(&b, Operation::Send, json!({"message": {}, "tenant": ""})).unwrap();
        assert_eq!(
            r.url.path(),
            "/v1/projects/p/a2a/message:send",
            "an empty tenant is none"
        );
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
            let r = request(&b, Operation::GetTask, json!({"id": id})).unwrap();
            assert_eq!((r.url.path(), r.url.query()), (path, None), "{id}");
        }
        let r = request(
            &b,
            Operation::CancelTask,
            json!({"id": "x:y", "tenant": "t/../u"}),
        )
        .unwrap();
        assert_eq!(r.url.path(), "/a2a/t%2F..%2Fu/tasks/x%3Ay:cancel");
        for id in ["", ".", ".."] {
            assert_eq!(
                request(&b, Operation::Subscribe, json!({"id": id})),
                Err(Unaddressable::TaskId),
                "{id:?}"
            );
        }
        assert_eq!(
            request(&b, Operation::Send, json!({"tenant": ".."})),
            Err(Unaddressable::Tenant)
        );
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
            let rpc = crate::a2a::client::decode_frame(
                crate::a2a::model::ProtocolVersion::V1,
                line.trim(),
            )
            .unwrap();
            assert_eq!(decode_frame(&bare), Ok(rpc));
            n += 1;
        }
        assert!(n > 2);
    }
}
