//! The A2A side: the version-neutral model, the two wire codecs, the operations as values
//! ([`call`]), one codec per binding ([`jsonrpc`], [`rest`], [`grpc`]), their one error
//! table ([`errors`]), agent cards and the client. The operations' names are the table
//! here ([`ProtocolVersion::method`]). This is the only module of the gateway that knows how
//! the versions and bindings are spelled on the wire; everything above it sees [`model`]
//! types and asks
//! [`client::Client::supports`] for an operation rather than comparing versions (the demo
//! agent, an A2A server, writes its own answers). See `docs/versions.md`, `docs/bindings.md`.

pub mod call;
pub mod call_headers;
pub mod card;
pub mod client;
pub(crate) mod direct;
pub mod errors;
pub mod grpc;
pub mod jsonrpc;
pub mod model;
pub mod rest;
pub mod sse;
pub mod tls;
mod wire_v0_3;
mod wire_v1;

/// A task's id, as the client's operations on a task take it ([`call::Call`]).
pub use crate::ids::TaskId;

use serde_json::Value;

use model::{OutgoingMessage, ProtocolVersion, RpcError, StreamEvent, Task};

/// JSON-RPC error codes of A2A (A2A 1.0 §9.5 / 0.3 §8; JSON-RPC 2.0 §5.1). The only
/// place these numbers are written.
pub mod rpc_code {
    /// Invalid JSON was received.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON sent is not a valid request.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid method parameters.
    pub const INVALID_PARAMS: i64 = -32602;
    /// An internal error of the server.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// `TaskNotFoundError`: the task id is unknown (or expired).
    pub const TASK_NOT_FOUND: i64 = -32001;
    /// `TaskNotCancelableError`: the task is in a state that cannot be canceled.
    pub const TASK_NOT_CANCELABLE: i64 = -32002;
    /// `PushNotificationNotSupportedError`.
    pub const PUSH_NOTIFICATION_NOT_SUPPORTED: i64 = -32003;
    /// `UnsupportedOperationError`: a2a-sdk answers a message to, or a subscription on, a
    /// task in a terminal state with this code.
    pub const UNSUPPORTED_OPERATION: i64 = -32004;
    /// `ContentTypeNotSupportedError`: a part's media type is not accepted.
    pub const CONTENT_TYPE_NOT_SUPPORTED: i64 = -32005;
    /// `InvalidAgentResponseError`: the agent produced a non-conformant response.
    pub const INVALID_AGENT_RESPONSE: i64 = -32006;
    /// `ExtendedAgentCardNotConfiguredError`.
    pub const EXTENDED_AGENT_CARD_NOT_CONFIGURED: i64 = -32007;
    /// `ExtensionSupportRequiredError` (1.0): a required extension was not activated.
    pub const EXTENSION_SUPPORT_REQUIRED: i64 = -32008;
    /// `VersionNotSupportedError` (1.0): the `A2A-Version` header does not match.
    pub const VERSION_NOT_SUPPORTED: i64 = -32009;
    /// The codes JSON-RPC 2.0 reserves for predefined and implementation errors (§5.1);
    /// anything else an upstream sends is its own.
    pub const RESERVED: std::ops::RangeInclusive<i64> = -32768..=-32000;
}

/// The A2A operations the gateway calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Stream,
    Send,
    GetTask,
    CancelTask,
    Subscribe,
    ListTasks,
    /// The card served to authenticated callers.
    ExtendedCard,
    /// Registers where the agent posts a task's updates (push notifications).
    SetPushConfig,
}

impl Operation {
    /// Every operation, for tables.
    pub const ALL: [Operation; 8] = [
        Operation::Stream,
        Operation::Send,
        Operation::GetTask,
        Operation::CancelTask,
        Operation::Subscribe,
        Operation::ListTasks,
        Operation::ExtendedCard,
        Operation::SetPushConfig,
    ];

    /// The operation's name: its A2A 1.0 method (1.0 has every operation).
    pub fn name(self) -> &'static str {
        ProtocolVersion::V1.method(self).unwrap_or("?")
    }

    /// The version and operation of a JSON-RPC method name (the inverse of
    /// [`ProtocolVersion::method`]); `None` for a method neither version has.
    pub fn of_method(method: &str) -> Option<(ProtocolVersion, Operation)> {
        ProtocolVersion::ALL
            .into_iter()
            .flat_map(|v| Operation::ALL.into_iter().map(move |op| (v, op)))
            .find(|(v, op)| v.method(*op) == Some(method))
    }
}

impl ProtocolVersion {
    /// The JSON-RPC method name of an operation (A2A 1.0 §9 / 0.3 §7); `None` where the
    /// version has no such method (0.3 has no `ListTasks`).
    pub fn method(self, op: Operation) -> Option<&'static str> {
        Some(match (self, op) {
            (Self::V1, Operation::Stream) => "SendStreamingMessage",
            (Self::V1, Operation::Send) => "SendMessage",
            (Self::V1, Operation::GetTask) => "GetTask",
            (Self::V1, Operation::CancelTask) => "CancelTask",
            (Self::V1, Operation::Subscribe) => "SubscribeToTask",
            (Self::V1, Operation::ListTasks) => "ListTasks",
            (Self::V1, Operation::ExtendedCard) => "GetExtendedAgentCard",
            (Self::V1, Operation::SetPushConfig) => "CreateTaskPushNotificationConfig",
            (Self::V0_3, Operation::Stream) => "message/stream",
            (Self::V0_3, Operation::Send) => "message/send",
            (Self::V0_3, Operation::GetTask) => "tasks/get",
            (Self::V0_3, Operation::CancelTask) => "tasks/cancel",
            (Self::V0_3, Operation::Subscribe) => "tasks/resubscribe",
            (Self::V0_3, Operation::ListTasks) => return None,
            (Self::V0_3, Operation::ExtendedCard) => "agent/getAuthenticatedExtendedCard",
            (Self::V0_3, Operation::SetPushConfig) => "tasks/pushNotificationConfig/set",
        })
    }

    /// Decodes a whole JSON-RPC response carrying one event or an error in one pass, where
    /// the version has such a path (1.0); `None`: use [`jsonrpc::parse_envelope`] and
    /// [`ProtocolVersion::decode_event`], which also classify unknown results.
    pub fn decode_response(self, text: &str) -> Option<Result<StreamEvent, RpcError>> {
        match self {
            Self::V1 => wire_v1::decode_response(text),
            Self::V0_3 => None,
        }
    }

    /// Decodes one stream result or blocking-send result.
    pub fn decode_event(self, raw: &str) -> StreamEvent {
        match self {
            Self::V1 => wire_v1::decode_event(raw),
            Self::V0_3 => wire_v0_3::decode_event(raw),
        }
    }

    /// Decodes a bare Task (GetTask / CancelTask results; same shape in both versions
    /// apart from 0.3's `kind`, which the model ignores).
    pub fn decode_task(self, raw: &str) -> Option<Task> {
        match self {
            Self::V1 => wire_v1::decode_task(raw),
            Self::V0_3 => wire_v0_3::decode_task(raw),
        }
    }

    /// Params of a send or stream call.
    pub fn send_params(self, msg: &OutgoingMessage, history_length: Option<u32>) -> Value {
        match self {
            Self::V1 => wire_v1::send_params(msg, history_length),
            Self::V0_3 => wire_v0_3::send_params(msg, history_length),
        }
    }

    /// Params of a push config's registration (1.0's flat `TaskPushNotificationConfig`, 0.3's
    /// config nested under the task id).
    pub fn push_config_params(self, push: &call::PushConfig<'_>) -> Value {
        match self {
            Self::V1 => wire_v1::push_config_params(push),
            Self::V0_3 => wire_v0_3::push_config_params(push),
        }
    }
}

/// A user message in either version: the fields are shared, the role spelling, the 0.3
/// `kind` tag and the part shape are the version's.
fn encode_message(
    msg: &OutgoingMessage,
    role: &str,
    kind: Option<&str>,
    encode_part: fn(&model::Part) -> Value,
) -> Value {
    let mut obj = serde_json::Map::new();
    if let Some(k) = kind {
        obj.insert("kind".into(), Value::from(k));
    }
    obj.insert("messageId".into(), Value::from(msg.message_id.as_str()));
    obj.insert("role".into(), Value::from(role));
    let parts = msg.parts.iter().map(encode_part).collect();
    obj.insert("parts".into(), Value::Array(parts));
    if let Some(c) = &msg.context_id {
        obj.insert("contextId".into(), Value::from(c.as_str()));
    }
    if let Some(t) = &msg.task_id {
        obj.insert("taskId".into(), Value::from(t.as_str()));
    }
    if let Some(m) = &msg.metadata {
        obj.insert("metadata".into(), m.clone());
    }
    if !msg.extensions.is_empty() {
        obj.insert("extensions".into(), Value::from(msg.extensions.clone()));
    }
    Value::Object(obj)
}

/// Keeps JSON we could not classify, for a `RAW` event.
fn unknown(raw: &str) -> StreamEvent {
    StreamEvent::Unknown(serde_json::from_str(raw).unwrap_or(Value::Null))
}
