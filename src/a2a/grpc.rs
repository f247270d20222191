//! The gRPC binding (A2A 1.0 §10, `lf.a2a.v1.A2AService`): a [`Call`] as its request
//! message ([`request`], pure), answers decoded from the generated messages straight into
//! the version-neutral model ([`super::model`]), gRPC statuses into the one error table
//! ([`super::errors`]).
//!
//! Transport: `tonic` over HTTP/2, h2c for `http://` interfaces, the agent's TLS
//! ([`super::tls`]) for `https://`; one lazily connected channel per endpoint, shared by the
//! client's copies. Headers travel as metadata (`a2a-version`, the extensions header, the
//! agent's static headers, `forward_identity`, `traceparent`); the tenant is the request
//! field. Deadlines are the caller's (`timeouts.upstream_call` for unary calls and a
//! subscription's first answer, the run's bounds for events), sent as `grpc-timeout` too;
//! a message is decoded only up to `limits.max_event_bytes`.
//!
//! Errors: a2a-sdk 1.3.0 (`server/request_handlers/grpc_handler.py`) aborts with the
//! table's status and a `google.rpc.Status` in `grpc-status-details-bin` whose
//! `google.rpc.ErrorInfo` (domain `a2a-protocol.org`) names the error by reason; the reason
//! decides. A status without one is an A2A error only where one error owns the code
//! (`NOT_FOUND`, `INVALID_ARGUMENT`, `INTERNAL`); anything else is the upstream unavailable.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt;
use prost::Message as _;
use reqwest::header::HeaderMap;
use serde_json::Value;

use super::call::{Answer, Call, SendArgs, PUSH_AUTH_SCHEME};
use super::errors::ClientError;
use super::errors::EventStream;
use super::model::{
    Artifact, ArtifactUpdate, Message, Part, PartContent, Role, RpcError, StatusUpdate,
    StreamEvent, Task, TaskPage, TaskState, TaskStatus,
};

/// The code generated from `proto/a2a.proto`: the client used here, the server the demo
/// agent implements (`crate::demo`).
#[allow(unreachable_pub, clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("lf.a2a.v1");
}

/// `google.rpc.Status` and its error details (`proto/google/rpc/`).
#[allow(unreachable_pub, dead_code, clippy::all, clippy::pedantic)]
pub(crate) mod rpc {
    tonic::include_proto!("google.rpc");
}

type Service = pb::a2a_service_client::A2aServiceClient<tonic::transport::Channel>;

/// The endpoint's HTTP/2 channel, connected on first use (a channel needs a runtime) and
/// shared by every copy of the client.
#[derive(Debug, Clone, Default)]
pub(super) struct Transport(Arc<OnceLock<tonic::transport::Channel>>);

/// One call's context: where, with which metadata and tenant, within which bounds.
pub(super) struct Exchange {
    pub(super) transport: Transport,
    pub(super) url: url::Url,
    pub(super) headers: HeaderMap,
    pub(super) max_message_bytes: usize,
    /// The deadline sent as `grpc-timeout` (the caller bounds the wait itself).
    pub(super) timeout: Option<Duration>,
    pub(super) connect_timeout: Duration,
    /// The agent's TLS (`https://` interfaces).
    pub(super) tls: super::tls::AgentTls,
}

impl Exchange {
    fn service(&self) -> Result<Service, ClientError> {
        let channel = match self.transport.0.get() {
            Some(channel) => channel.clone(),
            None => {
                let channel = self.channel()?;
                self.transport.0.get_or_init(|| channel).clone()
            }
        };
        Ok(Service::new(channel)
            .max_decoding_message_size(self.max_message_bytes)
            .max_encoding_message_size(usize::MAX))
    }

    /// A channel connecting through the agent's TLS ([`super::tls::AgentTls::connect`], ALPN
    /// `h2`) for `https://`, plain TCP (h2c) for `http://`; tonic's own TLS is not built in.
    fn channel(&self) -> Result<tonic::transport::Channel, ClientError> {
        let endpoint = tonic::transport::Endpoint::from_shared(self.url.to_string())
            .map_err(|e| ClientError::Unavailable(format!("gRPC endpoint: {e}")))?
            .connect_timeout(self.connect_timeout)
            .tcp_nodelay(true);
        let (tls, url) = (self.tls.clone(), self.url.clone());
        let connector = tower::service_fn(move |_: tonic::transport::Uri| {
            let (tls, url) = (tls.clone(), url.clone());
            async move {
                let io = tls.connect(&url, super::tls::Alpn::H2).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(io))
            }
        });
        Ok(endpoint.connect_with_connector_lazy(connector))
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        *request.metadata_mut() = tonic::metadata::MetadataMap::from_headers(self.headers.clone());
        if let Some(t) = self.timeout {
            request.set_timeout(t);
        }
        request
    }

    fn status(&self, status: &tonic::Status) -> ClientError {
        match error_of(status, &self.url, self.max_message_bytes) {
            ClientError::Unavailable(shown) => match self.tls.explain(status) {
                Some(reason) => ClientError::Unavailable(format!(
                    "{reason} ({})",
                    crate::redact::url(&self.url)
                )),
                None => ClientError::Unavailable(shown),
            },
            other => other,
        }
    }

    /// A unary call's answer.
    pub(super) async fn unary(self, request: Request) -> Result<Answer, ClientError> {
        let mut service = self.service()?;
        let status = |s: tonic::Status| self.status(&s);
        Ok(match request {
            Request::Send(r) => {
                let answer = service.send_message(self.request(r)).await;
                Answer::Event(send_answer(answer.map_err(status)?.into_inner()))
            }
            Request::GetTask(r) => {
                let answer = service.get_task(self.request(r)).await;
                Answer::Task(task(answer.map_err(status)?.into_inner()))
            }
            Request::CancelTask(r) => {
                let answer = service.cancel_task(self.request(r)).await;
                Answer::Task(task(answer.map_err(status)?.into_inner()))
            }
            Request::ListTasks(r) => {
                let answer = service.list_tasks(self.request(r)).await;
                Answer::Page(page(answer.map_err(status)?.into_inner()))
            }
            Request::ExtendedCard(r) => {
                let answer = service.get_extended_agent_card(self.request(r)).await;
                Answer::Card(Box::new(card(answer.map_err(status)?.into_inner())))
            }
            // The stored config it answers is not kept (`Answer::PushConfigSet`).
            Request::SetPushConfig(r) => {
                let answer = service.create_task_push_notification_config(self.request(r));
                answer.await.map_err(status)?;
                Answer::PushConfigSet
            }
            Request::Stream(_) | Request::Subscribe(_) => return Err(not_unary()),
        })
    }

    /// A server stream's events (`SendStreamingMessage`, `SubscribeToTask`).
    pub(super) async fn stream(self, request: Request) -> Result<EventStream, ClientError> {
        let mut service = self.service()?;
        let answer = match request {
            Request::Stream(r) => service.send_streaming_message(self.request(r)).await,
            Request::Subscribe(r) => service.subscribe_to_task(self.request(r)).await,
            _ => return Err(not_unary()),
        };
        Ok(self.events(answer.map_err(|s| self.status(&s))?.into_inner()))
    }

    /// A server stream's messages as events; it ends after its first error.
    fn events(&self, stream: tonic::Streaming<pb::StreamResponse>) -> EventStream {
        let (url, limit) = (self.url.clone(), self.max_message_bytes);
        let events = futures::stream::unfold(Some(stream), move |stream| {
            let url = url.clone();
            async move {
                let mut stream = stream?;
                match stream.message().await {
                    Ok(Some(item)) => Some((Ok(stream_event(item)), Some(stream))),
                    Ok(None) => None,
                    Err(status) => Some((Err(error_of(&status, &url, limit)), None)),
                }
            }
        });
        Box::pin(events.boxed())
    }
}

fn clamp(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

fn non_empty(s: String) -> Option<String> {
    Some(s).filter(|s| !s.is_empty())
}

/// A gRPC status as a [`ClientError`]: the A2A error its `ErrorInfo` names, else the one
/// its code stands for, else the upstream unavailable (never echoing more than the
/// status message, which [`ClientError::Rpc`] shows cut and escaped).
pub(super) fn error_of(status: &tonic::Status, url: &url::Url, limit: usize) -> ClientError {
    use tonic::Code;
    let named = rpc::Status::decode(status.details())
        .ok()
        .into_iter()
        .flat_map(|s| s.details)
        .filter(|any| any.type_url.ends_with("/google.rpc.ErrorInfo"))
        .filter_map(|any| rpc::ErrorInfo::decode(any.value.as_slice()).ok())
        .find_map(|info| super::errors::by_reason(&info.reason));
    if let Some(a2a) = named.or_else(|| super::errors::by_grpc_status(code_name(status.code()))) {
        return ClientError::Rpc(RpcError {
            code: a2a.rpc_code,
            message: status.message().to_owned(),
            data: None,
        });
    }
    let shown_url = crate::redact::url(url);
    if let Some(refusal) = super::errors::Refusal::of_grpc(code_name(status.code()), &shown_url) {
        return ClientError::Unauthorized(refusal);
    }
    match status.code() {
        // tonic's own refusal of a message past max_decoding_message_size.
        Code::OutOfRange | Code::ResourceExhausted
            if status.message().contains("message length too large") =>
        {
            ClientError::EventTooLarge { limit }
        }
        // (A refused TLS handshake is named by the caller, which knows the agent's TLS.)
        code => {
            ClientError::Unavailable(format!("gRPC status {} from {shown_url}", code_name(code)))
        }
    }
}

/// The code of a canonical name (the inverse of [`code_name`]); `UNKNOWN` for a name that
/// is none.
pub(crate) fn code_of(name: &str) -> tonic::Code {
    (0..=16)
        .map(tonic::Code::from_i32)
        .find(|c| code_name(*c) == name)
        .unwrap_or(tonic::Code::Unknown)
}

/// A code's canonical name (`NOT_FOUND`), as the error table spells it.
fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "CANCELLED",
        Unknown => "UNKNOWN",
        InvalidArgument => "INVALID_ARGUMENT",
        DeadlineExceeded => "DEADLINE_EXCEEDED",
        NotFound => "NOT_FOUND",
        AlreadyExists => "ALREADY_EXISTS",
        PermissionDenied => "PERMISSION_DENIED",
        ResourceExhausted => "RESOURCE_EXHAUSTED",
        FailedPrecondition => "FAILED_PRECONDITION",
        Aborted => "ABORTED",
        OutOfRange => "OUT_OF_RANGE",
        Unimplemented => "UNIMPLEMENTED",
        Internal => "INTERNAL",
        Unavailable => "UNAVAILABLE",
        DataLoss => "DATA_LOSS",
        Unauthenticated => "UNAUTHENTICATED",
    }
}

// ---- model -> proto (requests) ----

/// One call's request message.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Request {
    Stream(pb::SendMessageRequest),
    Send(pb::SendMessageRequest),
    GetTask(pb::GetTaskRequest),
    CancelTask(pb::CancelTaskRequest),
    Subscribe(pb::SubscribeToTaskRequest),
    ListTasks(pb::ListTasksRequest),
    ExtendedCard(pb::GetExtendedAgentCardRequest),
    SetPushConfig(pb::TaskPushNotificationConfig),
}

/// The request of `call`, the tenant its field (empty: none).
pub(super) fn request(call: &Call<'_>, tenant: &str) -> Request {
    let tenant = tenant.to_owned();
    match *call {
        Call::Stream(s) => Request::Stream(send_request(s, tenant)),
        Call::Send(s) => Request::Send(send_request(s, tenant)),
        Call::GetTask { id, history_length } => Request::GetTask(pb::GetTaskRequest {
            tenant,
            id: id.as_str().to_owned(),
            history_length: history_length.map(clamp),
        }),
        Call::CancelTask { id } => Request::CancelTask(pb::CancelTaskRequest {
            tenant,
            id: id.as_str().to_owned(),
            metadata: None,
        }),
        Call::Subscribe { id } => Request::Subscribe(pb::SubscribeToTaskRequest {
            tenant,
            id: id.as_str().to_owned(),
        }),
        Call::ListTasks(list) => Request::ListTasks(pb::ListTasksRequest {
            tenant,
            context_id: list.context_id.unwrap_or_default().to_owned(),
            page_size: Some(clamp(list.page_size)),
            page_token: list.page_token.unwrap_or_default().to_owned(),
            history_length: Some(clamp(list.history_length)),
            include_artifacts: Some(list.include_artifacts),
            ..Default::default()
        }),
        Call::ExtendedCard => Request::ExtendedCard(pb::GetExtendedAgentCardRequest { tenant }),
        Call::SetPushConfig(push) => Request::SetPushConfig(pb::TaskPushNotificationConfig {
            tenant,
            id: push.id.to_owned(),
            task_id: push.task_id.as_str().to_owned(),
            url: push.url.to_owned(),
            token: push.token.to_owned(),
            authentication: Some(pb::AuthenticationInfo {
                scheme: PUSH_AUTH_SCHEME.to_owned(),
                credentials: push.token.to_owned(),
            }),
        }),
    }
}

/// A streaming request sent as a unary call, or the reverse (a bug of ours).
fn not_unary() -> ClientError {
    ClientError::Invalid("a gRPC request sent as the other kind of call".into())
}

fn send_request(send: SendArgs<'_>, tenant: String) -> pb::SendMessageRequest {
    let msg = send.message;
    pb::SendMessageRequest {
        tenant,
        message: Some(pb::Message {
            message_id: msg.message_id.clone(),
            context_id: msg.context_id.clone().unwrap_or_default(),
            task_id: msg.task_id.clone().unwrap_or_default(),
            role: pb::Role::User as i32,
            parts: msg.parts.iter().map(encode_part).collect(),
            metadata: msg.metadata.as_ref().and_then(encode_struct),
            extensions: msg.extensions.clone(),
            reference_task_ids: Vec::new(),
        }),
        configuration: send.history_length.map(|n| pb::SendMessageConfiguration {
            history_length: Some(clamp(n)),
            ..Default::default()
        }),
        metadata: None,
    }
}

fn encode_part(part: &Part) -> pb::Part {
    use pb::part::Content;
    let content = match &part.content {
        PartContent::Text(t) => Some(Content::Text(t.clone())),
        PartContent::Bytes(b) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .ok()
            .map(Content::Raw),
        PartContent::Url(u) => Some(Content::Url(u.clone())),
        PartContent::Data(d) => Some(Content::Data(crate::json::to_protobuf(d))),
        PartContent::Unknown(v) => Some(Content::Data(crate::json::to_protobuf(v))),
    };
    pb::Part {
        content,
        metadata: part.metadata.as_ref().and_then(encode_struct),
        filename: part.filename.clone().unwrap_or_default(),
        media_type: part.media_type.clone().unwrap_or_default(),
    }
}

/// A JSON object as a `Struct` (anything else: none).
fn encode_struct(v: &Value) -> Option<prost_types::Struct> {
    v.as_object().map(crate::json::to_protobuf_struct)
}

// ---- proto -> model (answers) ----

/// `SendMessage`'s answer: a Task or a Message (an empty one is kept as an unknown event).
fn send_answer(answer: pb::SendMessageResponse) -> StreamEvent {
    match answer.payload {
        Some(pb::send_message_response::Payload::Task(t)) => StreamEvent::Task(task(t)),
        Some(pb::send_message_response::Payload::Message(m)) => StreamEvent::Message(message(m)),
        None => StreamEvent::Unknown(Value::Object(Default::default())),
    }
}

/// `ListTasks`' answer.
fn page(page: pb::ListTasksResponse) -> TaskPage {
    TaskPage {
        tasks: page.tasks.into_iter().map(task).collect(),
        next_page_token: non_empty(page.next_page_token),
    }
}

/// One `StreamResponse` as a stream event (an empty one is kept as an unknown event).
pub(super) fn stream_event(item: pb::StreamResponse) -> StreamEvent {
    use pb::stream_response::Payload;
    match item.payload {
        Some(Payload::Task(t)) => StreamEvent::Task(task(t)),
        Some(Payload::Message(m)) => StreamEvent::Message(message(m)),
        Some(Payload::StatusUpdate(u)) => StreamEvent::StatusUpdate(StatusUpdate {
            task_id: u.task_id,
            context_id: non_empty(u.context_id),
            status: status(u.status),
            metadata: u.metadata.map(decode_struct),
        }),
        Some(Payload::ArtifactUpdate(u)) => StreamEvent::ArtifactUpdate(ArtifactUpdate {
            task_id: u.task_id,
            context_id: non_empty(u.context_id),
            artifact: artifact(u.artifact.unwrap_or_default()),
            append: u.append,
            last_chunk: u.last_chunk,
            metadata: u.metadata.map(decode_struct),
        }),
        None => StreamEvent::Unknown(Value::Object(Default::default())),
    }
}

pub(super) fn task(t: pb::Task) -> Task {
    Task {
        id: t.id,
        context_id: non_empty(t.context_id),
        status: status(t.status),
        artifacts: t.artifacts.into_iter().map(artifact).collect(),
        history: t.history.into_iter().map(message).collect(),
        metadata: t.metadata.map(decode_struct),
    }
}

fn status(s: Option<pb::TaskStatus>) -> TaskStatus {
    let s = s.unwrap_or_default();
    let state = match pb::TaskState::try_from(s.state) {
        Ok(known) => TaskState::parse(known.as_str_name()),
        Err(_) => TaskState::Unknown(s.state.to_string()),
    };
    TaskStatus {
        state,
        message: s.message.map(message),
        timestamp: s.timestamp.map(|t| t.to_string()),
    }
}

/// The parts of a card the gateway uses (`super::card::AgentCard`).
fn card(c: pb::AgentCard) -> super::card::AgentCard {
    use super::card::{AgentCard, Capabilities, Interface, Provider, Skill};
    let capabilities = c.capabilities.unwrap_or_default();
    AgentCard {
        name: c.name,
        description: c.description,
        version: Some(c.version).filter(|v| !v.is_empty()),
        provider: c.provider.map(|p| Provider {
            organization: p.organization,
            url: non_empty(p.url),
        }),
        documentation_url: c.documentation_url,
        default_input_modes: c.default_input_modes,
        default_output_modes: c.default_output_modes,
        supported_interfaces: c
            .supported_interfaces
            .into_iter()
            .map(|i| Interface {
                url: i.url,
                protocol_binding: i.protocol_binding,
                protocol_version: i.protocol_version,
                tenant: i.tenant,
            })
            .collect(),
        capabilities: Capabilities {
            streaming: capabilities.streaming,
            push_notifications: capabilities.push_notifications,
            extensions: capabilities
                .extensions
                .into_iter()
                .map(|e| serde_json::json!({"uri": e.uri, "required": e.required}))
                .collect(),
            extended_agent_card: capabilities.extended_agent_card,
        },
        skills: c
            .skills
            .into_iter()
            .map(|s| Skill {
                description: s.description,
                examples: s.examples,
                id: s.id,
                name: s.name,
            })
            .collect(),
        ..AgentCard::default()
    }
}

fn message(m: pb::Message) -> Message {
    let role = match pb::Role::try_from(m.role) {
        Ok(pb::Role::User) => Role::User,
        Ok(pb::Role::Agent) => Role::Agent,
        Ok(other) => Role::Unknown(other.as_str_name().to_owned()),
        Err(_) => Role::Unknown(m.role.to_string()),
    };
    Message {
        message_id: m.message_id,
        role,
        parts: m.parts.into_iter().map(part).collect(),
        context_id: non_empty(m.context_id),
        task_id: non_empty(m.task_id),
        metadata: m.metadata.map(decode_struct),
    }
}

fn artifact(a: pb::Artifact) -> Artifact {
    Artifact {
        artifact_id: a.artifact_id,
        name: non_empty(a.name),
        description: non_empty(a.description),
        parts: a.parts.into_iter().map(part).collect(),
        metadata: a.metadata.map(decode_struct),
    }
}

fn part(p: pb::Part) -> Part {
    use pb::part::Content;
    let content = match p.content {
        Some(Content::Text(t)) => PartContent::Text(t),
        Some(Content::Raw(b)) => {
            PartContent::Bytes(base64::engine::general_purpose::STANDARD.encode(b))
        }
        Some(Content::Url(u)) => PartContent::Url(u),
        Some(Content::Data(d)) => PartContent::Data(decode_value(d)),
        None => PartContent::Unknown(Value::Object(Default::default())),
    };
    Part {
        content,
        media_type: non_empty(p.media_type),
        filename: non_empty(p.filename),
        metadata: p.metadata.map(decode_struct),
    }
}

fn decode_struct(s: prost_types::Struct) -> Value {
    Value::Object(
        s.fields
            .into_iter()
            .map(|(k, v)| (k, decode_value(v)))
            .collect(),
    )
}

fn decode_value(v: prost_types::Value) -> Value {
    use prost_types::value::Kind;
    match v.kind {
        None | Some(Kind::NullValue(_)) => Value::Null,
        Some(Kind::BoolValue(b)) => Value::Bool(b),
        // Whole numbers read as integers, as their JSON spelling would.
        Some(Kind::NumberValue(n)) if n.fract() == 0.0 && n.abs() < 9.0e15 => Value::from(n as i64),
        Some(Kind::NumberValue(n)) => {
            serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
        }
        Some(Kind::StringValue(s)) => Value::String(s),
        Some(Kind::ListValue(l)) => Value::Array(l.values.into_iter().map(decode_value).collect()),
        Some(Kind::StructValue(s)) => decode_struct(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::model::OutgoingMessage;
    use serde_json::json;

    fn text(t: &str) -> pb::Part {
        pb::Part {
            content: Some(pb::part::Content::Text(t.into())),
            ..Default::default()
        }
    }

    /// Every payload of a `StreamResponse` lands on the model as the JSON bindings' would:
    /// states by their 1.0 names, empty strings absent, bytes base64, `Struct`s as JSON.
    #[test]
    fn stream_responses_decode_into_the_model() {
        use pb::stream_response::Payload;
        let status = pb::TaskStatus {
            state: pb::TaskState::InputRequired as i32,
            message: Some(pb::Message {
                message_id: "m".into(),
                role: pb::Role::Agent as i32,
                parts: vec![text("approve?")],
                ..Default::default()
            }),
            timestamp: Some(prost_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 0,
            }),
        };
        let update = stream_event(pb::StreamResponse {
            payload: Some(Payload::StatusUpdate(pb::TaskStatusUpdateEvent {
                task_id: "t".into(),
                context_id: "c".into(),
                status: Some(status),
                metadata: encode_struct(&json!({"k": [1, 1.5, "s", null, {"b": true}]})),
            })),
        });
        let StreamEvent::StatusUpdate(u) = update else {
            panic!("{update:?}")
        };
        assert_eq!(u.status.state, TaskState::InputRequired);
        assert_eq!(u.context_id.as_deref(), Some("c"));
        assert_eq!(u.status.message.as_ref().unwrap().text(), "approve?");
        assert_eq!(u.status.message.unwrap().role, Role::Agent);
        assert_eq!(u.status.timestamp.as_deref(), Some("2023-11-14T22:13:20Z"));
        assert_eq!(
            u.metadata,
            Some(json!({"k": [1, 1.5, "s", null, {"b": true}]}))
        );

        let chunk = stream_event(pb::StreamResponse {
            payload: Some(Payload::ArtifactUpdate(pb::TaskArtifactUpdateEvent {
                task_id: "t".into(),
                artifact: Some(pb::Artifact {
                    artifact_id: "a".into(),
                    parts: vec![
                        text("hi"),
                        pb::Part {
                            content: Some(pb::part::Content::Raw(vec![0, 1])),
                            media_type: "a/b".into(),
                            filename: "f".into(),
                            ..Default::default()
                        },
                        pb::Part {
                            content: Some(pb::part::Content::Data(crate::json::to_protobuf(
                                &json!({"x": 1}),
                            ))),
                            ..Default::default()
                        },
                    ],
                    ..Default::default()
                }),
                append: true,
                last_chunk: false,
                ..Default::default()
            })),
        });
        let StreamEvent::ArtifactUpdate(a) = chunk else {
            panic!("{chunk:?}")
        };
        assert!(a.append && !a.last_chunk && a.context_id.is_none());
        assert_eq!(a.artifact.parts[0], Part::text("hi"));
        assert_eq!(
            a.artifact.parts[1].content,
            PartContent::Bytes("AAE=".into())
        );
        assert_eq!(a.artifact.parts[1].filename.as_deref(), Some("f"));
        assert_eq!(
            a.artifact.parts[2].content,
            PartContent::Data(json!({"x": 1}))
        );

        let snapshot = stream_event(pb::StreamResponse {
            payload: Some(Payload::Task(pb::Task {
                id: "t".into(),
                status: Some(pb::TaskStatus {
                    state: 42,
                    ..Default::default()
                }),
                history: vec![pb::Message {
                    role: pb::Role::User as i32,
                    ..Default::default()
                }],
                ..Default::default()
            })),
        });
        let StreamEvent::Task(t) = snapshot else {
            panic!("{snapshot:?}")
        };
        assert_eq!(t.status.state, TaskState::Unknown("42".into()));
        assert_eq!(t.history[0].role, Role::User);
        assert!(matches!(
            stream_event(pb::StreamResponse { payload: None }),
            StreamEvent::Unknown(_)
        ));
    }

    /// The outgoing message carries what the JSON bindings' does: ids, the user role,
    /// parts (bytes decoded from base64), metadata, extensions; the tenant is the field.
    #[test]
    fn a_send_request_carries_the_message_and_tenant() {
        let msg = OutgoingMessage {
            message_id: "m".into(),
            parts: vec![
                Part::text("hi"),
                Part {
                    content: PartContent::Bytes("AAE=".into()),
                    ..Part::text("")
                },
            ],
            context_id: Some("c".into()),
            task_id: None,
            metadata: Some(json!({"approval": {"ok": true}})),
            extensions: vec!["urn:x".into()],
        };
        let send = SendArgs {
            message: &msg,
            history_length: Some(3),
        };
        let Request::Send(req) = request(&Call::Send(send), "acme") else {
            panic!()
        };
        assert_eq!(req.tenant, "acme");
        assert_eq!(req.configuration.unwrap().history_length, Some(3));
        let m = req.message.unwrap();
        assert_eq!(m.role, pb::Role::User as i32);
        assert_eq!((m.context_id.as_str(), m.task_id.as_str()), ("c", ""));
        assert_eq!(m.extensions, ["urn:x"]);
        assert_eq!(m.parts[1].content, Some(pb::part::Content::Raw(vec![0, 1])));
        assert_eq!(
            decode_struct(m.metadata.unwrap()),
            json!({"approval": {"ok": true}})
        );
    }

    /// A push config's registration is the flat `TaskPushNotificationConfig`, the tenant its
    /// field, the token both the config's and the `Bearer` credentials; the token never
    /// shows in the arguments' `Debug`.
    #[test]
    fn a_push_config_request_is_the_flat_config() {
        let task_id = crate::ids::TaskId::new("t1");
        let push = crate::a2a::call::PushConfig {
            task_id: &task_id,
            id: "p1",
            url: "http://gw/a2a/push/a",
            token: "s3cret",
        };
        let Request::SetPushConfig(req) = request(&Call::SetPushConfig(push), "acme") else {
            panic!()
        };
        let expected = pb::TaskPushNotificationConfig {
            tenant: "acme".into(),
            id: "p1".into(),
            task_id: "t1".into(),
            url: "http://gw/a2a/push/a".into(),
            token: "s3cret".into(),
            authentication: Some(pb::AuthenticationInfo {
                scheme: "Bearer".into(),
                credentials: "s3cret".into(),
            }),
        };
        assert_eq!(req, expected);
        let shown = format!("{push:?}");
        assert!(!shown.contains("s3cret") && shown.contains("p1"), "{shown}");
    }

    fn rich(code: tonic::Code, reason: &str) -> tonic::Status {
        let info = rpc::ErrorInfo {
            reason: reason.into(),
            domain: "a2a-protocol.org".into(),
            metadata: Default::default(),
        };
        let status = rpc::Status {
            code: code as i32,
            message: "no such task".into(),
            details: vec![prost_types::Any {
                type_url: "type.googleapis.com/google.rpc.ErrorInfo".into(),
                value: info.encode_to_vec(),
            }],
        };
        tonic::Status::with_details(code, "no such task", status.encode_to_vec().into())
    }

    /// Statuses as a2a-sdk 1.3.0 sends them (an `ErrorInfo` reason in the details) land
    /// on the table's JSON-RPC codes; the reason decides over the code; a bare code is an
    /// A2A error only where one error owns it; the rest is the upstream unavailable.
    #[test]
    fn statuses_map_through_the_error_table() {
        use super::super::rpc_code;
        let url: url::Url = "http://127.0.0.1:9/".parse().unwrap();
        let code = |s: &tonic::Status| match error_of(s, &url, 10) {
            ClientError::Rpc(e) => Some(e.code),
            _ => None,
        };
        let not_found = error_of(&rich(tonic::Code::NotFound, "TASK_NOT_FOUND"), &url, 10);
        assert!(not_found.is_task_not_found(), "{not_found:?}");
        assert_eq!(
            code(&rich(
                tonic::Code::FailedPrecondition,
                "TASK_NOT_CANCELABLE"
            )),
            Some(rpc_code::TASK_NOT_CANCELABLE)
        );
        assert_eq!(
            code(&rich(tonic::Code::NotFound, "METHOD_NOT_FOUND")),
            Some(rpc_code::METHOD_NOT_FOUND)
        );
        assert_eq!(
            code(&tonic::Status::not_found("gone")),
            Some(rpc_code::TASK_NOT_FOUND)
        );
        assert_eq!(
            code(&tonic::Status::invalid_argument("bad")),
            Some(rpc_code::INVALID_PARAMS)
        );
        assert_eq!(code(&tonic::Status::failed_precondition("?")), None);
        let down = error_of(&tonic::Status::unavailable("refused"), &url, 10);
        assert!(
            matches!(&down, ClientError::Unavailable(m) if m.contains("UNAVAILABLE")),
            "{down:?}"
        );
        let big = tonic::Status::out_of_range(
            "Error, decoded message length too large: found 11 bytes, the limit is: 10 bytes",
        );
        assert!(matches!(
            error_of(&big, &url, 10),
            ClientError::EventTooLarge { limit: 10 }
        ));
    }

    #[test]
    fn every_table_status_names_its_code() {
        for e in &super::super::errors::TABLE {
            assert_eq!(code_name(code_of(e.grpc_status)), e.grpc_status);
        }
        assert_eq!(code_of("NOT_FOUND"), tonic::Code::NotFound);
        assert_eq!(code_of("nonsense"), tonic::Code::Unknown);
    }
}
