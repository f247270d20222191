//! A2A errors across bindings: the one table (A2A 1.0 §5.4, as a2a-sdk 1.3.0 and
//! @a2a-js/sdk 1.3.0 send it).
//!
//! Every binding's error lands on the JSON-RPC code of the same A2A error
//! ([`super::model::RpcError`], [`ClientError::Rpc`]), so everything above `a2a/` (the
//! stale-task rule of a resume, `RUN_ERROR a2a_error_<code>`, metrics) sees one vocabulary
//! whichever binding carried it. JSON-RPC errors carry the code itself; an HTTP+JSON error
//! body is a `google.rpc.Status` whose `google.rpc.ErrorInfo` detail names the error by
//! `reason` (domain `a2a-protocol.org`; the spec says every A2A error MUST carry it); a gRPC
//! status carries the same detail in `grpc-status-details-bin`. A body without a reason is
//! mapped by its HTTP status where one A2A error owns that status ([`BY_HTTP_STATUS`]), a
//! gRPC status by its code; anything else is not an A2A error (the caller reports the
//! status, never the body).
//!
//! Data only: no I/O here. [`ClientError`] (why a call gave no usable answer) and the
//! [`EventStream`] it ends live here too, so every binding's code reaches them without an
//! import circle.

use std::time::Duration;

use super::model::RpcError;
use super::rpc_code;

/// A stream of upstream events; ends after an error item.
pub type EventStream = std::pin::Pin<
    Box<dyn futures::Stream<Item = Result<super::model::StreamEvent, ClientError>> + Send>,
>;

/// Why a call to the upstream did not give a usable answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// Connection refused, DNS, TLS, a non-2xx status (redirects included), a cut body.
    #[error("upstream unavailable: {0}")]
    Unavailable(String),
    /// A unary call (or a stream's response head) took longer than `timeouts.upstream_call`.
    #[error("no answer from the upstream within timeouts.upstream_call ({} ms)", .0.as_millis())]
    Timeout(Duration),
    /// The upstream answered with a JSON-RPC error (its message shown cut and escaped).
    #[error("upstream error {}: {}", .0.code, crate::redact::Shown(&.0.message))]
    Rpc(RpcError),
    /// The upstream answered something that is not A2A.
    #[error("invalid upstream response: {0}")]
    Invalid(String),
    /// One upstream event exceeded `limits.max_event_bytes`.
    #[error("an upstream event or response exceeds {limit} bytes (limits.max_event_bytes)")]
    EventTooLarge { limit: usize },
    /// The operation does not exist in the upstream's protocol version.
    #[error("{0} is not supported by A2A {1}")]
    Unsupported(&'static str, &'static str),
    /// The agent refused the gateway's credential (HTTP 401 or 403, gRPC `UNAUTHENTICATED`
    /// or `PERMISSION_DENIED`); the text names the status, never the body.
    #[error("the agent refused the gateway's credentials: {0}")]
    Unauthorized(Refusal),
    /// No credential for the call could be had (a token endpoint that failed, a caller
    /// without a token); the text names why, never a secret.
    #[error("no upstream credentials: {0}")]
    Credentials(String),
}

/// An agent's refusal of a credential: whether a fresh one may help (a 401 or
/// `UNAUTHENTICATED`: the credential was not accepted; a 403: it was, and is not allowed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub stale: bool,
    /// The status and the redacted URL.
    pub shown: String,
}

/// The statuses that refuse the gateway's credentials, in each binding's spelling, and
/// whether a fresh credential may be accepted: a 401 / `UNAUTHENTICATED` says the credential
/// was not accepted (RFC 9110 §15.5.2), a 403 / `PERMISSION_DENIED` that it was and is not
/// allowed (§15.5.4). The one place either binding's refusal is decided.
pub const REFUSALS: [(u16, &str, bool); 2] = [
    (401, "UNAUTHENTICATED", true),
    (403, "PERMISSION_DENIED", false),
];

impl Refusal {
    /// An HTTP answer's status as a refusal of `shown_url`'s credentials, if it is one.
    pub fn of_http(status: u16, shown_url: &str) -> Option<Self> {
        let (_, _, stale) = REFUSALS.iter().find(|(s, _, _)| *s == status)?;
        Some(Self {
            stale: *stale,
            shown: format!("HTTP {status} from {shown_url}"),
        })
    }

    /// A gRPC status code (its canonical name) as a refusal, if it is one.
    pub fn of_grpc(code: &str, shown_url: &str) -> Option<Self> {
        let (_, _, stale) = REFUSALS.iter().find(|(_, c, _)| *c == code)?;
        Some(Self {
            stale: *stale,
            shown: format!("gRPC status {code} from {shown_url}"),
        })
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl ClientError {
    /// The upstream does not know the task (A2A `TaskNotFoundError`, the same code in 1.0
    /// and 0.3): it never existed there, or it expired.
    pub fn is_task_not_found(&self) -> bool {
        matches!(self, Self::Rpc(rpc) if rpc.code == rpc_code::TASK_NOT_FOUND)
    }
}

/// One A2A error in every binding's spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct A2aError {
    /// The `google.rpc.ErrorInfo` reason.
    pub reason: &'static str,
    /// The JSON-RPC error code.
    pub rpc_code: i64,
    /// The HTTP status of the HTTP+JSON binding (A2A 1.0.1, both SDKs).
    pub http_status: u16,
    /// The gRPC status code name.
    pub grpc_status: &'static str,
}

const fn row(
    reason: &'static str,
    rpc_code: i64,
    http_status: u16,
    grpc_status: &'static str,
) -> A2aError {
    A2aError {
        reason,
        rpc_code,
        http_status,
        grpc_status,
    }
}

/// The table. The A2A errors first (A2A 1.0 §5.4), then the JSON-RPC ones a2a-sdk also
/// names by reason (`utils/errors.py` `A2A_ERROR_MAPPING`).
pub const TABLE: [A2aError; 13] = [
    row("TASK_NOT_FOUND", rpc_code::TASK_NOT_FOUND, 404, "NOT_FOUND"),
    row(
        "TASK_NOT_CANCELABLE",
        rpc_code::TASK_NOT_CANCELABLE,
        400,
        "FAILED_PRECONDITION",
    ),
    row(
        "PUSH_NOTIFICATION_NOT_SUPPORTED",
        rpc_code::PUSH_NOTIFICATION_NOT_SUPPORTED,
        400,
        "FAILED_PRECONDITION",
    ),
    row(
        "UNSUPPORTED_OPERATION",
        rpc_code::UNSUPPORTED_OPERATION,
        400,
        "FAILED_PRECONDITION",
    ),
    row(
        "CONTENT_TYPE_NOT_SUPPORTED",
        rpc_code::CONTENT_TYPE_NOT_SUPPORTED,
        400,
        "INVALID_ARGUMENT",
    ),
    row(
        "INVALID_AGENT_RESPONSE",
        rpc_code::INVALID_AGENT_RESPONSE,
        500,
        "INTERNAL",
    ),
    row(
        "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
        rpc_code::EXTENDED_AGENT_CARD_NOT_CONFIGURED,
        400,
        "FAILED_PRECONDITION",
    ),
    row(
        "EXTENSION_SUPPORT_REQUIRED",
        rpc_code::EXTENSION_SUPPORT_REQUIRED,
        400,
        "FAILED_PRECONDITION",
    ),
    row(
        "VERSION_NOT_SUPPORTED",
        rpc_code::VERSION_NOT_SUPPORTED,
        400,
        "FAILED_PRECONDITION",
    ),
    row(
        "INVALID_PARAMS",
        rpc_code::INVALID_PARAMS,
        400,
        "INVALID_ARGUMENT",
    ),
    row(
        "INVALID_REQUEST",
        rpc_code::INVALID_REQUEST,
        400,
        "INVALID_ARGUMENT",
    ),
    row(
        "METHOD_NOT_FOUND",
        rpc_code::METHOD_NOT_FOUND,
        404,
        "NOT_FOUND",
    ),
    row("INTERNAL_ERROR", rpc_code::INTERNAL_ERROR, 500, "INTERNAL"),
];

/// An error body without a reason: the A2A error its HTTP status stands for. 404, 400 and
/// 500 as A2A 1.0.1 assigns them (task not found, invalid params, internal); 409, 415 as
/// A2A 1.0.0 did (task not cancelable, content type not supported; 1.0.1 moved both to
/// 400). Other statuses (401, 403, 429, 502, 503, …) are the server's or a proxy's, not an
/// A2A error.
pub const BY_HTTP_STATUS: [(u16, &str); 5] = [
    (400, "INVALID_PARAMS"),
    (404, "TASK_NOT_FOUND"),
    (409, "TASK_NOT_CANCELABLE"),
    (415, "CONTENT_TYPE_NOT_SUPPORTED"),
    (500, "INTERNAL_ERROR"),
];

/// A gRPC status without a reason: the A2A error its code stands for, where one error
/// owns the code in [`TABLE`] as a2a-sdk 1.3.0 assigns them (`NOT_FOUND` is also
/// `METHOD_NOT_FOUND`, which a gRPC server reports as `UNIMPLEMENTED` instead).
/// `FAILED_PRECONDITION` is shared by six errors: not mapped.
pub const BY_GRPC_STATUS: [(&str, &str); 3] = [
    ("NOT_FOUND", "TASK_NOT_FOUND"),
    ("INVALID_ARGUMENT", "INVALID_PARAMS"),
    ("INTERNAL", "INTERNAL_ERROR"),
];

/// The `@type` of a `google.rpc.ErrorInfo` detail (a type URL as the JSON bindings write it;
/// readers match its suffix).
pub const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";

/// The `ErrorInfo.domain` of A2A errors (A2A 1.0 §5.4).
pub const ERROR_DOMAIN: &str = "a2a-protocol.org";

/// The error with this JSON-RPC code (what a server, the demo agent, answers in the other
/// bindings' spelling).
pub fn by_rpc_code(code: i64) -> Option<&'static A2aError> {
    TABLE.iter().find(|e| e.rpc_code == code)
}

/// The error a `google.rpc.ErrorInfo` reason names.
pub fn by_reason(reason: &str) -> Option<&'static A2aError> {
    TABLE.iter().find(|e| e.reason == reason)
}

/// The error a reasonless error body with this HTTP status stands for.
pub fn by_http_status(status: u16) -> Option<&'static A2aError> {
    let (_, reason) = BY_HTTP_STATUS.iter().find(|(s, _)| *s == status)?;
    by_reason(reason)
}

/// The error a reasonless gRPC status with this code (its canonical name) stands for.
pub fn by_grpc_status(code: &str) -> Option<&'static A2aError> {
    let (_, reason) = BY_GRPC_STATUS.iter().find(|(c, _)| *c == code)?;
    by_reason(reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_codes_and_fallbacks_are_each_named_once() {
        for (i, e) in TABLE.iter().enumerate() {
            assert!(
                TABLE[i + 1..]
                    .iter()
                    .all(|o| o.reason != e.reason && o.rpc_code != e.rpc_code),
                "{e:?} twice"
            );
            assert!(rpc_code::RESERVED.contains(&e.rpc_code), "{e:?}");
        }
        for (status, reason) in BY_HTTP_STATUS {
            assert!(by_reason(reason).is_some(), "{status} -> {reason}");
        }
        assert_eq!(
            by_reason("TASK_NOT_FOUND").map(|e| e.rpc_code),
            Some(rpc_code::TASK_NOT_FOUND)
        );
        assert_eq!(
            by_http_status(409).map(|e| e.rpc_code),
            Some(rpc_code::TASK_NOT_CANCELABLE)
        );
        assert_eq!(by_http_status(503), None);
        for (code, reason) in BY_GRPC_STATUS {
            assert_eq!(by_reason(reason).map(|e| e.grpc_status), Some(code));
        }
        assert_eq!(by_reason("SOMETHING_ELSE"), None);
        for e in &TABLE {
            assert_eq!(by_rpc_code(e.rpc_code), Some(e));
        }
        assert_eq!(by_rpc_code(rpc_code::PARSE_ERROR), None);
    }

    /// Which status refuses the credentials, and whether a retry with fresh ones may help,
    /// is the same rule in both bindings; nothing else is a refusal.
    #[test]
    fn refusals_are_decided_by_one_table() {
        let url = "http://h/";
        let cases = [
            (
                Refusal::of_http(401, url),
                Some((true, "HTTP 401 from http://h/")),
            ),
            (
                Refusal::of_http(403, url),
                Some((false, "HTTP 403 from http://h/")),
            ),
            (Refusal::of_http(404, url), None),
            (Refusal::of_http(407, url), None),
            (
                Refusal::of_grpc("UNAUTHENTICATED", url),
                Some((true, "gRPC status UNAUTHENTICATED from http://h/")),
            ),
            (
                Refusal::of_grpc("PERMISSION_DENIED", url),
                Some((false, "gRPC status PERMISSION_DENIED from http://h/")),
            ),
            (Refusal::of_grpc("NOT_FOUND", url), None),
        ];
        for (i, (refusal, expected)) in cases.into_iter().enumerate() {
            let got = refusal.as_ref().map(|r| (r.stale, r.shown.as_str()));
            assert_eq!(got, expected, "case {i}");
        }
    }
}
