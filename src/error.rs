//! The gateway's error vocabulary: the one home of every error code a client can see
//! (docs/design.md#3-http-surface, docs/design.md#6-projection-a2a-to-ag-ui,
//! docs/design.md#9-reliability-and-limits).
//!
//! Two regimes:
//! - [`RequestError`]: a problem with the request itself, found before the stream starts;
//!   an HTTP status and a JSON body `{"error": {"code", "message"}}` (rendered by `http`).
//! - [`RunError`]: anything after the `200`, upstream or inside the gateway; exactly one
//!   `RUN_ERROR {code, message}` event ends the stream.
//!
//! Codes are `snake_case` and stable: clients and tests match on them. Messages are ours;
//! foreign text in them is cut and escaped ([`crate::redact`]).

use std::borrow::Cow;
use std::time::Duration;

use axum::http::StatusCode;

use crate::a2a::client::ClientError;

/// Why a request has no caller (inbound auth, `crate::auth`): a `401 unauthorized`. The
/// messages say what to fix, never which secret or claim failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Rejection {
    #[error("this route needs credentials: Authorization: Bearer <API key or JWT>")]
    Missing,
    #[error("the bearer credentials are not valid")]
    Invalid,
    #[error("the bearer token has expired")]
    Expired,
}

impl Rejection {
    /// The `WWW-Authenticate` challenge (RFC 6750 §3).
    pub(crate) fn challenge(self) -> &'static str {
        match self {
            Self::Missing => "Bearer",
            Self::Invalid | Self::Expired => "Bearer error=\"invalid_token\"",
        }
    }
}

/// A request problem, reported before any stream starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RequestError {
    #[error("no agent named {0:?} is configured")]
    UnknownAgent(String),
    #[error("no such route")]
    NoRoute,
    /// A thread or context that does not exist for this caller (also someone else's).
    #[error("no such thread")]
    UnknownThread,
    #[error("{0}")]
    MalformedJson(String),
    /// A query parameter that does not parse.
    #[error("{0}")]
    InvalidQuery(String),
    #[error("not a RunAgentInput: {0}")]
    InvalidRunInput(String),
    #[error("{0}")]
    InvalidForwardedProps(String),
    #[error("subscribeOnly needs a task: forwardedProps.a2a.taskId or state.a2a.task.id")]
    NoTask,
    #[error("messages holds no user message to send to the agent")]
    NoUserMessage,
    #[error("the latest user message has no content")]
    EmptyMessage,
    #[error("{field} is {len} bytes; limits.max_id_bytes is {max}")]
    IdTooLong {
        field: &'static str,
        len: usize,
        max: usize,
    },
    #[error("request body exceeds limits.max_body_bytes ({0} bytes)")]
    BodyTooLarge(usize),
    #[error("state exceeds limits.max_state_bytes ({0} bytes)")]
    StateTooLarge(usize),
    #[error("the request body did not arrive within timeouts.body_read ({} ms)", .0.as_millis())]
    BodyTimeout(Duration),
    #[error("expected Content-Type: application/json")]
    UnsupportedMediaType,
    #[error("the gateway is running limits.max_concurrent_runs ({0}) runs; retry later")]
    TooManyRuns(usize),
    #[error("too many runs from this caller (rate_limits); retry in {0} s")]
    RateLimited(u64),
    #[error("{0}")]
    Unauthorized(Rejection),
    /// An HTTP/1.1 request that does not parse (RFC 9112), found by the server itself.
    #[error("a malformed HTTP request: {0}")]
    MalformedRequest(&'static str),
    #[error("the request head exceeds {0} bytes or its header count limit")]
    HeadTooLarge(usize),
    #[error("the request head did not arrive within timeouts.header_read ({} ms)", .0.as_millis())]
    HeadTimeout(Duration),
    #[error("only the chunked transfer coding is accepted")]
    UnsupportedTransferEncoding,
    /// A route that exists, asked with another method.
    #[error("this route does not take that method")]
    MethodNotAllowed,
    /// An agent a listing needs could not be read (docs/design.md#3-http-surface: never an
    /// empty list in its place).
    #[error("{0}")]
    UpstreamUnavailable(String),
    /// An agent a listing needs did not answer within `timeouts.upstream_call`.
    #[error("{0}")]
    UpstreamTimeout(String),
    /// The gateway could not authenticate to an agent a listing needs.
    #[error("{0}")]
    UpstreamAuthFailed(String),
    /// A CopilotKit thread mutation whose body is not one (docs/copilotkit.md).
    #[error("{0}")]
    InvalidThreadUpdate(String),
    /// The binding store did not answer where the answer depends on it (CopilotKit's thread
    /// list and its mutations, docs/copilotkit.md).
    #[error("the binding store did not answer ({0}); retry later")]
    StoreUnavailable(&'static str),
    /// A push body over `push.max_body_bytes` (docs/design.md#the-live-inbox).
    #[error("push body exceeds push.max_body_bytes ({0} bytes)")]
    PushTooLarge(usize),
    /// Pushes of an agent over `push.max_per_second`.
    #[error("too many pushes for this agent (push.max_per_second); retry in {0} s")]
    PushRateLimited(u64),
    /// A change feed over one of its bounds, named by its key.
    #[error("too many change feed subscribers ({0}); retry later")]
    TooManySubscribers(&'static str),
}

/// The code of an upstream that cannot be reached, before a stream (a 502) or in one.
pub(crate) const UPSTREAM_UNAVAILABLE: &str = "upstream_unavailable";
/// The code of an upstream that did not answer in time, before a stream (a 504) or in one.
pub(crate) const UPSTREAM_TIMEOUT: &str = "upstream_timeout";
/// The code of an upstream the gateway could not authenticate to (no credential could be
/// had, or the agent refused it; docs/security.md#upstream-credentials), before a stream (a
/// 502) or in one.
pub(crate) const UPSTREAM_AUTH_FAILED: &str = "upstream_auth_failed";

impl RequestError {
    /// The machine-readable code.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Self::UnknownAgent(_) => "unknown_agent",
            Self::NoRoute => "not_found",
            Self::UnknownThread => "unknown_thread",
            Self::MalformedJson(_) => "malformed_json",
            Self::InvalidQuery(_) => "invalid_query",
            Self::InvalidRunInput(_) => "invalid_run_input",
            Self::InvalidForwardedProps(_) => "invalid_forwarded_props",
            Self::NoTask => "no_task",
            Self::NoUserMessage => "no_user_message",
            Self::EmptyMessage => "empty_message",
            Self::IdTooLong { .. } => "id_too_long",
            Self::BodyTooLarge(_) => "body_too_large",
            Self::StateTooLarge(_) => "state_too_large",
            Self::BodyTimeout(_) => "body_timeout",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::TooManyRuns(_) => "too_many_runs",
            Self::RateLimited(_) => "rate_limited",
            Self::Unauthorized(_) => "unauthorized",
            Self::MalformedRequest(_) => "malformed_request",
            Self::HeadTooLarge(_) => "request_head_too_large",
            Self::HeadTimeout(_) => "head_timeout",
            Self::UnsupportedTransferEncoding => "unsupported_transfer_encoding",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::UpstreamUnavailable(_) => UPSTREAM_UNAVAILABLE,
            Self::UpstreamTimeout(_) => UPSTREAM_TIMEOUT,
            Self::UpstreamAuthFailed(_) => UPSTREAM_AUTH_FAILED,
            Self::InvalidThreadUpdate(_) => "invalid_thread_update",
            Self::StoreUnavailable(_) => "store_unavailable",
            Self::PushTooLarge(_) => "body_too_large",
            Self::PushRateLimited(_) => "rate_limited",
            Self::TooManySubscribers(_) => "too_many_subscribers",
        }
    }

    /// Seconds a client should wait before retrying (`Retry-After`,
    /// docs/design.md#3-http-surface), if any.
    pub(crate) fn retry_after(&self) -> Option<u64> {
        match self {
            Self::TooManyRuns(_) | Self::StoreUnavailable(_) | Self::TooManySubscribers(_) => {
                Some(1)
            }
            Self::RateLimited(secs) | Self::PushRateLimited(secs) => Some((*secs).max(1)),
            _ => None,
        }
    }

    /// The `WWW-Authenticate` challenge of a 401, if this is one.
    pub(crate) fn www_authenticate(&self) -> Option<&'static str> {
        match self {
            Self::Unauthorized(r) => Some(r.challenge()),
            _ => None,
        }
    }

    /// The HTTP status (exhaustive: a new variant must choose one).
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Self::UnknownAgent(_) | Self::NoRoute | Self::UnknownThread => StatusCode::NOT_FOUND,
            Self::MalformedJson(_) | Self::InvalidQuery(_) | Self::MalformedRequest(_) => {
                StatusCode::BAD_REQUEST
            }
            Self::InvalidRunInput(_)
            | Self::InvalidForwardedProps(_)
            | Self::NoTask
            | Self::NoUserMessage
            | Self::EmptyMessage
            | Self::IdTooLong { .. }
            | Self::InvalidThreadUpdate(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::BodyTooLarge(_) | Self::StateTooLarge(_) | Self::PushTooLarge(_) => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            Self::BodyTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::TooManyRuns(_)
            | Self::RateLimited(_)
            | Self::PushRateLimited(_)
            | Self::TooManySubscribers(_) => StatusCode::TOO_MANY_REQUESTS,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::HeadTooLarge(_) => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Self::HeadTimeout(_) => StatusCode::REQUEST_TIMEOUT,
            Self::UnsupportedTransferEncoding => StatusCode::NOT_IMPLEMENTED,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::UpstreamUnavailable(_) | Self::UpstreamAuthFailed(_) => StatusCode::BAD_GATEWAY,
            Self::UpstreamTimeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::StoreUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// Why a run ended in `RUN_ERROR`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RunError {
    /// The A2A task `failed` (its status text, or ours).
    #[error("{0}")]
    TaskFailed(String),
    /// The A2A task was `rejected`.
    #[error("{0}")]
    TaskRejected(String),
    /// A JSON-RPC error from the upstream: code `a2a_error_<code>`.
    #[error("{message}")]
    Rpc { code: i64, message: String },
    #[error("{0}")]
    UpstreamUnavailable(String),
    /// The stream ended with the task unfinished and it could not be recovered.
    #[error("{0}")]
    UpstreamStreamEnded(String),
    /// The upstream answered something that is not A2A.
    #[error("{0}")]
    UpstreamInvalid(String),
    #[error("{0}")]
    UpstreamTimeout(String),
    /// No credential for the agent could be had, or the agent refused it.
    #[error("{0}")]
    UpstreamAuthFailed(String),
    /// A configured limit was exceeded (events, text, artifacts, state, event size).
    #[error("{0}")]
    LimitExceeded(String),
    /// A resume that cannot be carried out (docs/design.md#7-human-in-the-loop).
    #[error("{0}")]
    InvalidResume(String),
    #[error("the gateway is shutting down; the A2A task goes on and can be reattached")]
    Shutdown,
    #[error("the gateway failed while running this request")]
    Internal,
}

/// The `RUN_ERROR` code of an upstream's JSON-RPC error is this prefix and its number.
pub(crate) const RPC_CODE_PREFIX: &str = "a2a_error_";

impl RunError {
    /// The `RUN_ERROR` code (docs/design.md#6-projection-a2a-to-ag-ui table).
    pub(crate) fn code(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            Self::TaskFailed(_) => "a2a_task_failed",
            Self::TaskRejected(_) => "a2a_task_rejected",
            Self::Rpc { code, .. } => return Cow::Owned(format!("{RPC_CODE_PREFIX}{code}")),
            Self::UpstreamUnavailable(_) => UPSTREAM_UNAVAILABLE,
            Self::UpstreamStreamEnded(_) => "upstream_stream_ended",
            Self::UpstreamInvalid(_) => "upstream_invalid_response",
            Self::UpstreamTimeout(_) => UPSTREAM_TIMEOUT,
            Self::UpstreamAuthFailed(_) => UPSTREAM_AUTH_FAILED,
            Self::LimitExceeded(_) => "limit_exceeded",
            Self::InvalidResume(_) => "invalid_resume",
            Self::Shutdown => "gateway_shutdown",
            Self::Internal => "internal_error",
        })
    }

    /// `RUN_ERROR upstream_timeout` naming the `timeouts.<key>` setting that elapsed.
    pub(crate) fn timeout(key: &str, after: Duration) -> Self {
        Self::UpstreamTimeout(format!(
            "no event from the upstream within timeouts.{key} ({} ms)",
            after.as_millis()
        ))
    }
}

impl From<&ClientError> for RequestError {
    /// An upstream call a request needed (a listing) failed: a 504 if it timed out, else a
    /// 502, the error described as a run's would be (never the upstream's body).
    fn from(e: &ClientError) -> Self {
        match e {
            ClientError::Timeout(_) => Self::UpstreamTimeout(e.to_string()),
            ClientError::Unauthorized(_) | ClientError::Credentials(_) => {
                Self::UpstreamAuthFailed(e.to_string())
            }
            _ => Self::UpstreamUnavailable(e.to_string()),
        }
    }
}

impl From<&ClientError> for RunError {
    fn from(e: &ClientError) -> Self {
        let message = e.to_string();
        match e {
            ClientError::Unavailable(_) => Self::UpstreamUnavailable(message),
            ClientError::Timeout(_) => Self::UpstreamTimeout(message),
            ClientError::Rpc(rpc) => Self::Rpc {
                code: rpc.code,
                message,
            },
            ClientError::Invalid(_) | ClientError::Unsupported(..) => {
                Self::UpstreamInvalid(message)
            }
            ClientError::EventTooLarge { .. } => Self::LimitExceeded(message),
            ClientError::Unauthorized(_) | ClientError::Credentials(_) => {
                Self::UpstreamAuthFailed(message)
            }
        }
    }
}

/// One request error of each kind (for tests that compare the vocabulary with documents).
#[cfg(test)]
pub(crate) fn every_request_error() -> Vec<RequestError> {
    use RequestError::*;
    let all = vec![
        UnknownAgent(String::new()),
        NoRoute,
        UnknownThread,
        MalformedJson(String::new()),
        InvalidQuery(String::new()),
        InvalidRunInput(String::new()),
        InvalidForwardedProps(String::new()),
        NoTask,
        NoUserMessage,
        EmptyMessage,
        IdTooLong {
            field: "threadId",
            len: 0,
            max: 0,
        },
        BodyTooLarge(0),
        StateTooLarge(0),
        BodyTimeout(Duration::ZERO),
        UnsupportedMediaType,
        TooManyRuns(0),
        RateLimited(1),
        Unauthorized(Rejection::Missing),
        MalformedRequest(""),
        HeadTooLarge(0),
        HeadTimeout(Duration::ZERO),
        UnsupportedTransferEncoding,
        MethodNotAllowed,
        UpstreamUnavailable(String::new()),
        UpstreamTimeout(String::new()),
        UpstreamAuthFailed(String::new()),
        InvalidThreadUpdate(String::new()),
        StoreUnavailable("timeout"),
        PushTooLarge(0),
        PushRateLimited(1),
        TooManySubscribers(""),
    ];
    // A new variant fails to compile here until it is added to the list above.
    for e in &all {
        match e {
            UnknownAgent(_)
            | NoRoute
            | UnknownThread
            | MalformedJson(_)
            | InvalidQuery(_)
            | InvalidRunInput(_)
            | InvalidForwardedProps(_)
            | NoTask
            | NoUserMessage
            | EmptyMessage
            | IdTooLong { .. }
            | BodyTooLarge(_)
            | StateTooLarge(_)
            | BodyTimeout(_)
            | UnsupportedMediaType
            | TooManyRuns(_)
            | RateLimited(_)
            | Unauthorized(_)
            | MalformedRequest(_)
            | HeadTooLarge(_)
            | HeadTimeout(_)
            | UnsupportedTransferEncoding
            | MethodNotAllowed
            | UpstreamUnavailable(_)
            | UpstreamTimeout(_)
            | UpstreamAuthFailed(_)
            | InvalidThreadUpdate(_)
            | StoreUnavailable(_)
            | PushTooLarge(_)
            | PushRateLimited(_)
            | TooManySubscribers(_) => {}
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::model::RpcError;

    #[test]
    fn client_errors_map_to_their_codes() {
        let rpc = ClientError::Rpc(RpcError {
            code: crate::a2a::rpc_code::TASK_NOT_FOUND,
            message: "Task not found".into(),
            data: None,
        });
        assert_eq!(RunError::from(&rpc).code(), "a2a_error_-32001");
        let timeout = ClientError::Timeout(Duration::from_millis(5));
        assert_eq!(RunError::from(&timeout).code(), "upstream_timeout");
        let big = ClientError::EventTooLarge { limit: 1 };
        assert_eq!(RunError::from(&big).code(), "limit_exceeded");
        assert_eq!(RunError::Internal.code(), "internal_error");
    }

    #[test]
    fn request_errors_have_one_status_each() {
        let e = RequestError::IdTooLong {
            field: "threadId",
            len: 300,
            max: 256,
        };
        assert_eq!((e.status().as_u16(), e.code()), (422, "id_too_long"));
        assert_eq!(RequestError::StateTooLarge(1).status().as_u16(), 413);
        assert_eq!(RequestError::TooManyRuns(1).retry_after(), Some(1));
        assert_eq!(RequestError::NoTask.retry_after(), None);
        assert_eq!(
            RequestError::BodyTimeout(Duration::from_secs(1))
                .status()
                .as_u16(),
            408
        );
    }
}
