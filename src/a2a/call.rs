//! One A2A call as a value: [`Call`] names the operation and holds its typed arguments (a
//! task's id is a [`TaskId`] from here on), and [`Answer`] is what it returned, in the
//! version-neutral model. Each binding has one pure codec from a `Call` to its wire request
//! and from its wire answer back to an `Answer` ([`super::jsonrpc`], [`super::rest`],
//! [`super::grpc`]); the client ([`super::client::Client`]) picks the codec once, by the
//! endpoint's binding, and only sends, bounds, authorizes, traces and counts.
//!
//! The two JSON bindings share a transport (HTTP, `client/http.rs`): their requests are
//! [`HttpRequest`]s, and the transport reads what answers them through the binding's
//! [`JsonCodec`], so it never asks which binding it carries.
//!
//! An operation's name is the table in `src/a2a.rs` ([`super::ProtocolVersion::method`]);
//! nothing here spells it. Data only: no I/O here.

use super::card::AgentCard;
use super::errors::ClientError;
use super::model::{OutgoingMessage, ProtocolVersion, RpcError, StreamEvent, Task, TaskPage};
use super::Operation;
use crate::ids::TaskId;

/// One A2A call and its arguments.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Call<'a> {
    /// `SendStreamingMessage`: events until the task is final or interrupted.
    Stream(SendArgs<'a>),
    /// `SendMessage` (blocking): a Task or a Message.
    Send(SendArgs<'a>),
    /// `GetTask`, with at most `history_length` messages of history.
    GetTask {
        id: &'a TaskId,
        history_length: Option<u32>,
    },
    /// `CancelTask`.
    CancelTask { id: &'a TaskId },
    /// `SubscribeToTask`: the events of a task still running.
    Subscribe { id: &'a TaskId },
    /// `ListTasks` (1.0 only).
    ListTasks(ListTasks<'a>),
    /// `GetExtendedAgentCard`: the card served to authenticated callers.
    ExtendedCard,
    /// `CreateTaskPushNotificationConfig`: where the agent posts the task's updates.
    SetPushConfig(PushConfig<'a>),
}

/// The arguments of a send or stream call.
#[derive(Debug, Clone, Copy)]
pub struct SendArgs<'a> {
    pub message: &'a OutgoingMessage,
    pub history_length: Option<u32>,
}

/// The arguments of `ListTasks`. A2A 1.0 leaves a task's artifacts out of a listing unless
/// `include_artifacts` is set (a2a-sdk strips them): a conversation rebuilt from the listing
/// needs them (artifact text, ADK's new executor's tool calls).
#[derive(Debug, Clone, Copy, Default)]
pub struct ListTasks<'a> {
    /// Only the tasks of this context, if given.
    pub context_id: Option<&'a str>,
    pub page_size: u32,
    pub page_token: Option<&'a str>,
    pub history_length: u32,
    pub include_artifacts: bool,
}

impl<'a> ListTasks<'a> {
    /// The first page of up to `page_size` tasks (of `context_id`, if given), without their
    /// history or artifacts.
    pub fn first(context_id: Option<&'a str>, page_size: u32) -> Self {
        Self {
            context_id,
            page_size,
            ..Self::default()
        }
    }

    /// The same listing with the tasks' artifacts.
    pub fn with_artifacts(self) -> Self {
        Self {
            include_artifacts: true,
            ..self
        }
    }
}

/// The authentication scheme of a push config: its `credentials` are the config's token,
/// sent back by the agent as `Authorization: Bearer <token>`.
pub const PUSH_AUTH_SCHEME: &str = "Bearer";

/// The arguments of a push config's registration (A2A 1.0 `TaskPushNotificationConfig`):
/// the agent posts the updates of task `task_id` to `url` with `token`, which is set both as
/// the config's `token` and as its `authentication`'s credentials ([`PUSH_AUTH_SCHEME`]),
/// since SDKs send one (`X-A2A-Notification-Token`) or the other (`Authorization`). The
/// token is a secret: never shown (`Debug` leaves it out).
#[derive(Clone, Copy)]
pub struct PushConfig<'a> {
    pub task_id: &'a TaskId,
    /// The config's id on the task (one task may have several).
    pub id: &'a str,
    pub url: &'a str,
    pub token: &'a str,
}

impl std::fmt::Debug for PushConfig<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PushConfig")
            .field("task_id", self.task_id)
            .field("id", &self.id)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl Call<'_> {
    /// The operation this call is.
    pub(crate) fn operation(&self) -> Operation {
        match self {
            Self::Stream(_) => Operation::Stream,
            Self::Send(_) => Operation::Send,
            Self::GetTask { .. } => Operation::GetTask,
            Self::CancelTask { .. } => Operation::CancelTask,
            Self::Subscribe { .. } => Operation::Subscribe,
            Self::ListTasks(_) => Operation::ListTasks,
            Self::ExtendedCard => Operation::ExtendedCard,
            Self::SetPushConfig(_) => Operation::SetPushConfig,
        }
    }

    /// The extensions the call's message uses (A2A 1.0 §4.6): asked for on its headers.
    pub(crate) fn extensions(&self) -> &[String] {
        match self {
            Self::Stream(s) | Self::Send(s) => &s.message.extensions,
            _ => &[],
        }
    }
}

/// A JSON binding's call as HTTP sends it: JSON-RPC's POST to the interface URL, or one of
/// HTTP+JSON's routes.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpRequest {
    pub method: reqwest::Method,
    pub url: url::Url,
    /// The JSON body of a POST.
    pub body: Option<serde_json::Value>,
}

/// How a JSON binding reads what answers its [`HttpRequest`]s: the half of its codec the
/// HTTP transport needs. `version` is the endpoint's (HTTP+JSON is 1.0's alone).
pub(crate) trait JsonCodec: Send + Sync {
    /// The `Accept` of a unary call (a stream accepts `text/event-stream`).
    fn accept(&self) -> &'static str;

    /// A unary call's answer: the body of a 2xx response to `op`.
    fn answer(
        &self,
        op: Operation,
        version: ProtocolVersion,
        body: &str,
    ) -> Result<Answer, ClientError>;

    /// One stream item: an SSE frame's data, or a plain JSON body answering a streaming call.
    fn frame(&self, version: ProtocolVersion, data: &str) -> Result<StreamEvent, ClientError>;

    /// Where the body of a non-2xx answer names an A2A error: what reads it. `None`, the
    /// default: such a body is never read.
    fn error_body(&self) -> Option<ErrorInBody> {
        None
    }
}

/// Reads the A2A error a non-2xx answer's body names, if any: (HTTP status, body).
pub(crate) type ErrorInBody = fn(u16, &[u8]) -> Option<RpcError>;

/// What a unary call returned.
#[derive(Debug, Clone)]
pub enum Answer {
    /// `SendMessage`: a Task or a Message.
    Event(StreamEvent),
    /// `GetTask`, `CancelTask`.
    Task(Task),
    /// `ListTasks`.
    Page(TaskPage),
    /// `GetExtendedAgentCard`.
    Card(Box<AgentCard>),
    /// `CreateTaskPushNotificationConfig`: the agent stored the config (what it answered,
    /// the config as stored, is not kept).
    PushConfigSet,
}

impl Answer {
    /// A JSON binding's result (a JSON-RPC response's `result`, an HTTP+JSON body) of `op`,
    /// in `version`'s ProtoJSON; an object that is not what `op` returns is described,
    /// never echoed.
    pub fn of_json(
        op: Operation,
        version: ProtocolVersion,
        result: &str,
    ) -> Result<Self, ClientError> {
        match op {
            Operation::Stream | Operation::Send | Operation::Subscribe => {
                Ok(Self::Event(version.decode_event(result)))
            }
            Operation::GetTask | Operation::CancelTask => version
                .decode_task(result)
                .map(Self::Task)
                .ok_or_else(|| not_a("Task", result)),
            Operation::ListTasks => serde_json::from_str(result)
                .map(Self::Page)
                .map_err(|_| not_a("task page", result)),
            Operation::ExtendedCard => serde_json::from_str(result)
                .map(|card| Self::Card(Box::new(card)))
                .map_err(|_| not_a("AgentCard", result)),
            Operation::SetPushConfig => {
                serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(result)
                    .map(|_| Self::PushConfigSet)
                    .map_err(|_| not_a("push notification config", result))
            }
        }
    }

    pub fn into_event(self) -> Result<StreamEvent, ClientError> {
        match self {
            Self::Event(e) => Ok(e),
            other => Err(other.mismatch()),
        }
    }

    pub fn into_task(self) -> Result<Task, ClientError> {
        match self {
            Self::Task(t) => Ok(t),
            other => Err(other.mismatch()),
        }
    }

    pub fn into_page(self) -> Result<TaskPage, ClientError> {
        match self {
            Self::Page(p) => Ok(p),
            other => Err(other.mismatch()),
        }
    }

    pub fn into_card(self) -> Result<AgentCard, ClientError> {
        match self {
            Self::Card(c) => Ok(*c),
            other => Err(other.mismatch()),
        }
    }

    pub fn into_push_config_set(self) -> Result<(), ClientError> {
        match self {
            Self::PushConfigSet => Ok(()),
            other => Err(other.mismatch()),
        }
    }

    /// A codec's answer of another operation's kind (a bug of ours, not the upstream's).
    fn mismatch(&self) -> ClientError {
        ClientError::Invalid("an answer of another operation's kind".into())
    }
}

/// A result that is not the expected A2A object: described, never echoed.
pub(super) fn not_a(what: &str, result: &str) -> ClientError {
    ClientError::Invalid(format!(
        "the upstream's result ({} bytes) is not a {what}",
        result.len()
    ))
}
