//! The demo agent's gRPC binding (A2A 1.0 §10): `lf.a2a.v1.A2AService`, the server tonic
//! generates from `proto/a2a.proto` (`build.rs`), mounted in the demo's router at
//! `/lf.a2a.v1.A2AService/*` and reached over HTTP/2 with prior knowledge on the demo's one
//! port (`super::serve`).
//!
//! Every call needs `a2a-version: 1.x` metadata; the tenant field is accepted and ignored.
//! Answers are the generated messages built from [`TaskView`]s and updates; a failure is the
//! table's gRPC status with a `google.rpc.Status` in `grpc-status-details-bin` whose
//! `ErrorInfo` names the A2A error by reason (`crate::a2a::errors`), as a2a-sdk 1.3.0's
//! `request_handlers/grpc_handler.py` aborts. Push notification configs and the extended card
//! are not offered: their RPCs answer the A2A error that says so. A request message is
//! decoded only up to [`super::MAX_REQUEST_BYTES`].

use std::time::SystemTime;

use prost::Message as _;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::store::{AgentMessage, TaskView, Turn, Update};
use super::{Answer, Event, Failure, Incoming, ListQuery, Reply, Sent, Shared};
use crate::a2a::errors;
use crate::a2a::grpc::pb::a2a_service_server::{A2aService, A2aServiceServer, SERVICE_NAME};
use crate::a2a::grpc::{code_of, pb, rpc};
use crate::a2a::model::TaskState;
use crate::a2a::rpc_code;

/// The service, and the route it answers under.
pub(super) fn service(demo: Shared) -> (String, A2aServiceServer<Agent>) {
    let server =
        A2aServiceServer::new(Agent(demo)).max_decoding_message_size(super::MAX_REQUEST_BYTES);
    (format!("/{SERVICE_NAME}/{{*method}}"), server)
}

/// The demo agent, as the generated server calls it.
pub(super) struct Agent(Shared);

type Events = ReceiverStream<Result<pb::StreamResponse, Status>>;

fn v1<T>(request: &Request<T>) -> Result<(), Status> {
    let header = request
        .metadata()
        .get(super::A2A_VERSION)
        .and_then(|v| v.to_str().ok());
    if super::asks_v1(header) {
        Ok(())
    } else {
        Err(grpc_status(&Failure::version()))
    }
}

/// A failure as gRPC writes it: the table's status code, the `ErrorInfo` reason in the
/// details (an error outside the table: `INTERNAL`).
fn grpc_status(f: &Failure) -> Status {
    let (code, reason) = f.a2a().map_or(("INTERNAL", "INTERNAL_ERROR"), |e| {
        (e.grpc_status, e.reason)
    });
    let code = code_of(code);
    let info = rpc::ErrorInfo {
        reason: reason.to_owned(),
        domain: errors::ERROR_DOMAIN.to_owned(),
        metadata: Default::default(),
    };
    let details = rpc::Status {
        code: code as i32,
        message: f.message.clone(),
        details: vec![prost_types::Any {
            type_url: errors::ERROR_INFO_TYPE.to_owned(),
            value: info.encode_to_vec(),
        }],
    };
    Status::with_details(code, f.message.clone(), details.encode_to_vec().into())
}

fn failed(f: Failure) -> Status {
    grpc_status(&f)
}

/// A request's count field (`historyLength`, `pageSize`): negative is invalid.
fn count(n: Option<i32>, name: &str) -> Result<Option<u64>, Status> {
    n.map(|n| {
        u64::try_from(n).map_err(|_| {
            let msg = format!("{name} must not be negative");
            grpc_status(&Failure::new(rpc_code::INVALID_PARAMS, msg))
        })
    })
    .transpose()
}

fn history_length(n: Option<i32>) -> Result<Option<usize>, Status> {
    Ok(count(n, "history_length")?.map(|n| usize::try_from(n).unwrap_or(usize::MAX)))
}

fn incoming(request: pb::SendMessageRequest) -> Incoming {
    let m = request.message.unwrap_or_default();
    let text = m
        .parts
        .into_iter()
        .filter_map(|p| match p.content {
            Some(pb::part::Content::Text(t)) => Some(t),
            _ => None,
        })
        .collect();
    let given = |s: String| Some(s).filter(|s| !s.is_empty());
    Incoming {
        message_id: given(m.message_id),
        context_id: given(m.context_id),
        task_id: given(m.task_id),
        text,
    }
}

fn unoffered<T>(code: i64, what: &str) -> Result<T, Status> {
    Err(grpc_status(&Failure::new(
        code,
        format!("The demo agent offers no {what}"),
    )))
}

#[tonic::async_trait]
impl A2aService for Agent {
    async fn send_message(
        &self,
        request: Request<pb::SendMessageRequest>,
    ) -> Result<Response<pb::SendMessageResponse>, Status> {
        v1(&request)?;
        let answer = super::send_blocking(&self.0, incoming(request.into_inner()))
            .await
            .map_err(failed)?;
        use pb::send_message_response::Payload;
        let payload = match answer {
            Answer::Reply(r) => Payload::Message(reply(&r)),
            Answer::Task(t) => Payload::Task(task(&t)),
        };
        Ok(Response::new(pb::SendMessageResponse {
            payload: Some(payload),
        }))
    }

    type SendStreamingMessageStream = Events;

    async fn send_streaming_message(
        &self,
        request: Request<pb::SendMessageRequest>,
    ) -> Result<Response<Events>, Status> {
        v1(&request)?;
        let events = match super::send(&self.0, incoming(request.into_inner())).map_err(failed)? {
            Sent::Reply(r) => {
                let (tx, rx) = tokio::sync::mpsc::channel(1);
                let only = pb::StreamResponse {
                    payload: Some(pb::stream_response::Payload::Message(reply(&r))),
                };
                let _ = tx.try_send(Ok(only));
                ReceiverStream::new(rx)
            }
            Sent::Turn(feed) => feed.encoded(|e| Ok(stream_response(e))),
        };
        Ok(Response::new(events))
    }

    async fn get_task(
        &self,
        request: Request<pb::GetTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        v1(&request)?;
        let r = request.into_inner();
        let t =
            super::get_task(&self.0, &r.id, history_length(r.history_length)?).map_err(failed)?;
        Ok(Response::new(task(&t)))
    }

    async fn list_tasks(
        &self,
        request: Request<pb::ListTasksRequest>,
    ) -> Result<Response<pb::ListTasksResponse>, Status> {
        v1(&request)?;
        let r = request.into_inner();
        let given = |s: String| Some(s).filter(|s| !s.is_empty());
        let query = ListQuery {
            context_id: given(r.context_id),
            page_size: count(r.page_size, "page_size")?,
            page_token: given(r.page_token),
            history_length: history_length(r.history_length)?,
        };
        let page = super::list(&self.0, &query).map_err(failed)?;
        let size = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
        Ok(Response::new(pb::ListTasksResponse {
            tasks: page.tasks.iter().map(task).collect(),
            next_page_token: page.next_page_token,
            page_size: size(page.page_size),
            total_size: size(page.total_size),
        }))
    }

    async fn cancel_task(
        &self,
        request: Request<pb::CancelTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        v1(&request)?;
        let t = super::cancel(&self.0, &request.into_inner().id).map_err(failed)?;
        Ok(Response::new(task(&t)))
    }

    type SubscribeToTaskStream = Events;

    async fn subscribe_to_task(
        &self,
        request: Request<pb::SubscribeToTaskRequest>,
    ) -> Result<Response<Events>, Status> {
        v1(&request)?;
        let feed = super::subscribe(&self.0, &request.into_inner().id).map_err(failed)?;
        Ok(Response::new(feed.encoded(|e| Ok(stream_response(e)))))
    }

    async fn create_task_push_notification_config(
        &self,
        _: Request<pb::TaskPushNotificationConfig>,
    ) -> Result<Response<pb::TaskPushNotificationConfig>, Status> {
        unoffered(
            rpc_code::PUSH_NOTIFICATION_NOT_SUPPORTED,
            "push notifications",
        )
    }

    async fn get_task_push_notification_config(
        &self,
        _: Request<pb::GetTaskPushNotificationConfigRequest>,
    ) -> Result<Response<pb::TaskPushNotificationConfig>, Status> {
        unoffered(
            rpc_code::PUSH_NOTIFICATION_NOT_SUPPORTED,
            "push notifications",
        )
    }

    async fn list_task_push_notification_configs(
        &self,
        _: Request<pb::ListTaskPushNotificationConfigsRequest>,
    ) -> Result<Response<pb::ListTaskPushNotificationConfigsResponse>, Status> {
        unoffered(
            rpc_code::PUSH_NOTIFICATION_NOT_SUPPORTED,
            "push notifications",
        )
    }

    async fn get_extended_agent_card(
        &self,
        _: Request<pb::GetExtendedAgentCardRequest>,
    ) -> Result<Response<pb::AgentCard>, Status> {
        unoffered(
            rpc_code::EXTENDED_AGENT_CARD_NOT_CONFIGURED,
            "extended agent card",
        )
    }

    async fn delete_task_push_notification_config(
        &self,
        _: Request<pb::DeleteTaskPushNotificationConfigRequest>,
    ) -> Result<Response<()>, Status> {
        unoffered(
            rpc_code::PUSH_NOTIFICATION_NOT_SUPPORTED,
            "push notifications",
        )
    }
}

// ---- the demo's records as generated messages ----

fn text_part(text: &str) -> pb::Part {
    pb::Part {
        content: Some(pb::part::Content::Text(text.to_owned())),
        ..Default::default()
    }
}

fn message((id, text): (&str, &str), task_id: &str, ctx: &str, user: bool) -> pb::Message {
    let role = if user {
        pb::Role::User
    } else {
        pb::Role::Agent
    };
    pb::Message {
        message_id: id.to_owned(),
        context_id: ctx.to_owned(),
        task_id: task_id.to_owned(),
        role: role as i32,
        parts: vec![text_part(text)],
        ..Default::default()
    }
}

fn reply(r: &Reply) -> pb::Message {
    message((&r.message.id, &r.message.text), "", &r.context_id, false)
}

fn state(s: &TaskState) -> i32 {
    pb::TaskState::from_str_name(&s.as_v1()).unwrap_or(pb::TaskState::Unspecified) as i32
}

fn status(
    s: &TaskState,
    msg: Option<&AgentMessage>,
    (task_id, ctx): (&str, &str),
    at: SystemTime,
) -> pb::TaskStatus {
    pb::TaskStatus {
        state: state(s),
        message: msg.map(|m| message((&m.id, &m.text), task_id, ctx, false)),
        timestamp: Some(at.into()),
    }
}

fn artifact(id: &str, name: &str, texts: &[String]) -> pb::Artifact {
    pb::Artifact {
        artifact_id: id.to_owned(),
        name: name.to_owned(),
        parts: texts.iter().map(|t| text_part(t)).collect(),
        ..Default::default()
    }
}

fn task(t: &TaskView) -> pb::Task {
    let (id, ctx) = (t.id.as_str(), t.context_id.as_str());
    let turn = |turn: &Turn| message((&turn.id, &turn.text), id, ctx, turn.user);
    pb::Task {
        id: id.to_owned(),
        context_id: ctx.to_owned(),
        status: Some(status(
            &t.state,
            t.status_message.as_ref(),
            (id, ctx),
            t.timestamp,
        )),
        artifacts: t
            .artifacts
            .iter()
            .map(|(aid, name, texts)| artifact(aid, name, texts))
            .collect(),
        history: t.history.iter().map(turn).collect(),
        metadata: None,
    }
}

fn stream_response(e: Event<'_>) -> pb::StreamResponse {
    use pb::stream_response::Payload;
    let payload = match e {
        Event::Task(t) => Payload::Task(task(t)),
        Event::Update {
            update: Update::Status { state, message },
            task_id,
            context_id,
        } => Payload::StatusUpdate(pb::TaskStatusUpdateEvent {
            task_id: task_id.to_owned(),
            context_id: context_id.to_owned(),
            status: Some(status(
                state,
                message.as_ref(),
                (task_id, context_id),
                SystemTime::now(),
            )),
            metadata: None,
        }),
        Event::Update {
            update:
                Update::Artifact {
                    id,
                    name,
                    text,
                    append,
                    last_chunk,
                },
            task_id,
            context_id,
        } => Payload::ArtifactUpdate(pb::TaskArtifactUpdateEvent {
            task_id: task_id.to_owned(),
            context_id: context_id.to_owned(),
            artifact: Some(artifact(id, name, std::slice::from_ref(text))),
            append: *append,
            last_chunk: *last_chunk,
            metadata: None,
        }),
    };
    pb::StreamResponse {
        payload: Some(payload),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::card::Binding;
    use crate::a2a::client::{CallContext, Client, ClientError, Endpoint};
    use crate::a2a::model::{OutgoingMessage, Part, ProtocolVersion, StreamEvent};
    use crate::ids::TaskId;
    use futures::StreamExt;
    use std::time::Duration;

    /// The demo on a loopback port, and the gateway's own client on its gRPC interface.
    async fn demo() -> (String, Client) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = super::super::spawn(listener).await.unwrap();
        let endpoint = Endpoint {
            binding: Binding::Grpc,
            ..Endpoint::json_rpc(
                base.parse().unwrap(),
                ProtocolVersion::V1,
                Default::default(),
            )
        };
        let client = Client::new(
            reqwest::Client::new(),
            endpoint,
            1 << 20,
            Duration::from_secs(10),
        );
        (base, client)
    }

    fn message(text: &str, task_id: Option<&str>) -> OutgoingMessage {
        OutgoingMessage {
            message_id: uuid::Uuid::new_v4().to_string(),
            parts: vec![Part::text(text)],
            context_id: None,
            task_id: task_id.map(str::to_owned),
            metadata: None,
            extensions: Vec::new(),
        }
    }

    fn code(e: ClientError) -> i64 {
        match e {
            ClientError::Rpc(e) => e.code,
            other => panic!("not an A2A error: {other:?}"),
        }
    }

    /// gRPC over TLS (ALPN `h2`): the demo behind TLS (`spawn_tls`), the gateway's client
    /// trusting the test's CA (`tls.ca_file`) streams through it; trusting only the default
    /// roots, the call fails naming the unknown CA.
    #[tokio::test(flavor = "multi_thread")]
    async fn the_gateway_client_speaks_grpc_over_tls_with_the_agents_trust() {
        let (ca, leaf, key) = crate::a2a::tls::test_pki();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let tls = super::super::tls_config(vec![leaf], key).unwrap();
        let base = super::super::spawn_tls(listener, tls).await.unwrap();
        let endpoint = Endpoint {
            binding: Binding::Grpc,
            ..Endpoint::json_rpc(
                base.parse().unwrap(),
                ProtocolVersion::V1,
                Default::default(),
            )
        };
        let client = |trust: crate::a2a::tls::TlsTrust| {
            let tls = crate::a2a::tls::AgentTls::new(&trust).unwrap();
            Client::new(
                reqwest::Client::new(),
                endpoint.clone(),
                1 << 20,
                Duration::from_secs(10),
            )
            .with_tls(tls)
        };
        let trusted = client(crate::a2a::tls::TlsTrust {
            extra_roots: vec![ca],
            ..Default::default()
        });
        let events: Vec<StreamEvent> = trusted
            .stream_message(&CallContext::none(), &message("echo over tls", None), None)
            .await
            .unwrap()
            .map(Result::unwrap)
            .collect()
            .await;
        let StreamEvent::StatusUpdate(last) = events.last().unwrap() else {
            panic!("{events:?}")
        };
        assert_eq!(last.status.message.as_ref().unwrap().text(), "over tls");
        let untrusted = client(crate::a2a::tls::TlsTrust::default());
        let err = untrusted
            .stream_message(&CallContext::none(), &message("echo refused", None), None)
            .await
            .err()
            .expect("an unknown CA is refused");
        assert!(err.to_string().contains("signed by an unknown CA"), "{err}");
    }

    /// One port: the card over HTTP/1.1, the service over HTTP/2; a stream, an interrupt
    /// answered, the task read, listed and (once final) refused a cancel, each as the
    /// gateway's gRPC client reads it.
    #[tokio::test(flavor = "multi_thread")]
    async fn the_gateway_client_runs_every_operation_on_the_card_port() {
        let (base, client) = demo().await;
        let card: serde_json::Value = reqwest::get(format!("{base}.well-known/agent-card.json"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(card["supportedInterfaces"][2]["protocolBinding"], "GRPC");

        let events: Vec<StreamEvent> = client
            .stream_message(&CallContext::none(), &message("echo hi there", None), None)
            .await
            .unwrap()
            .map(Result::unwrap)
            .collect()
            .await;
        let StreamEvent::Task(started) = &events[0] else {
            panic!("{events:?}")
        };
        let StreamEvent::StatusUpdate(last) = events.last().unwrap() else {
            panic!("{events:?}")
        };
        assert_eq!(last.status.state, TaskState::Completed);
        assert_eq!(last.status.message.as_ref().unwrap().text(), "hi there");
        assert_eq!(events.len(), 5, "the task, working, a word each, completed");

        let asked = client
            .send_message(&CallContext::none(), &message("approve", None), None, None)
            .await
            .unwrap();
        let StreamEvent::Task(waiting) = asked else {
            panic!("{asked:?}")
        };
        assert_eq!(waiting.status.state, TaskState::InputRequired);
        let answered = client
            .send_message(
                &CallContext::none(),
                &message("yes", Some(&waiting.id)),
                None,
                None,
            )
            .await
            .unwrap();
        let StreamEvent::Task(done) = answered else {
            panic!("{answered:?}")
        };
        assert_eq!(done.status.message.unwrap().text(), "Approved: yes");
        let texts: Vec<String> = done.history.iter().map(|m| m.text()).collect();
        assert_eq!(
            texts,
            ["approve", "Do you approve? Reply yes or no.", "yes"]
        );

        let started_id = TaskId::new(&started.id);
        let read = client
            .get_task(&CallContext::none(), &started_id, Some(0))
            .await
            .unwrap();
        assert_eq!(
            (read.status.state, read.history.len()),
            (TaskState::Completed, 0)
        );
        let page = client
            .list_tasks(
                &CallContext::none(),
                crate::a2a::call::ListTasks::first(None, 1).with_artifacts(),
            )
            .await
            .unwrap();
        assert_eq!(page.tasks[0].id, waiting.id, "newest first");
        assert!(page.next_page_token.is_some());
        assert_eq!(
            code(
                client
                    .cancel_task(&CallContext::none(), &started_id)
                    .await
                    .unwrap_err()
            ),
            rpc_code::TASK_NOT_CANCELABLE
        );
        assert_eq!(
            code(
                client
                    .get_task(&CallContext::none(), &TaskId::new("nope"), None)
                    .await
                    .unwrap_err()
            ),
            rpc_code::TASK_NOT_FOUND
        );
        let idle = client
            .stream_message(&CallContext::none(), &message("idle 60", None), None)
            .await
            .unwrap();
        let mut idle = idle;
        let Some(Ok(StreamEvent::Task(quiet))) = idle.next().await else {
            panic!("a task first")
        };
        let quiet_id = TaskId::new(&quiet.id);
        let mut watching = client
            .subscribe(&CallContext::none(), &quiet_id)
            .await
            .unwrap();
        assert!(matches!(
            watching.next().await,
            Some(Ok(StreamEvent::Task(_)))
        ));
        client
            .cancel_task(&CallContext::none(), &quiet_id)
            .await
            .unwrap();
        let mut states = Vec::new();
        while let Some(Ok(StreamEvent::StatusUpdate(u))) = watching.next().await {
            states.push(u.status.state);
        }
        assert_eq!(states.last(), Some(&TaskState::Canceled));
    }

    /// A call without `a2a-version`, and a request over the size bound, are refused with
    /// the statuses the gateway's client maps.
    #[tokio::test(flavor = "multi_thread")]
    async fn unversioned_and_oversized_requests_are_refused() {
        let (base, _) = demo().await;
        let channel = tonic::transport::Endpoint::from_shared(base)
            .unwrap()
            .connect_lazy();
        let mut raw = pb::a2a_service_client::A2aServiceClient::new(channel);
        let get = pb::GetTaskRequest {
            id: "x".into(),
            ..Default::default()
        };
        let refused = raw.get_task(get.clone()).await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::FailedPrecondition);
        let details = rpc::Status::decode(refused.details()).unwrap();
        let info = rpc::ErrorInfo::decode(details.details[0].value.as_slice()).unwrap();
        assert_eq!(details.details[0].type_url, errors::ERROR_INFO_TYPE);
        assert_eq!(
            (info.reason.as_str(), info.domain.as_str()),
            ("VERSION_NOT_SUPPORTED", errors::ERROR_DOMAIN)
        );

        let mut versioned = Request::new(get);
        versioned
            .metadata_mut()
            .insert(crate::demo::A2A_VERSION, "1.0".parse().unwrap());
        let missing = raw.get_task(versioned).await.unwrap_err();
        assert_eq!(missing.code(), tonic::Code::NotFound);

        let huge = pb::SendMessageRequest {
            message: Some(message_of("x".repeat(super::super::MAX_REQUEST_BYTES))),
            ..Default::default()
        };
        let mut huge = Request::new(huge);
        huge.metadata_mut()
            .insert(crate::demo::A2A_VERSION, "1.0".parse().unwrap());
        let too_big = raw.send_message(huge).await.unwrap_err();
        assert_eq!(too_big.code(), tonic::Code::OutOfRange, "{too_big:?}");
    }

    fn message_of(text: String) -> pb::Message {
        pb::Message {
            message_id: "m".into(),
            role: pb::Role::User as i32,
            parts: vec![text_part(&text)],
            ..Default::default()
        }
    }
}
