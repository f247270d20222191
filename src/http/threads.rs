//! The threads API (docs/design.md#3-http-surface): an agent's conversations, one
//! conversation, and the inbox across agents — each scoped to its caller
//! (docs/design.md#11-security).
//!
//! Conversations come from the upstream's A2A 1.0 `ListTasks` (at most [`LIST_PAGES`]
//! pages of [`LIST_PAGE_SIZE`] tasks, the newest, within one `timeouts.upstream_call`),
//! grouped and given a status by `bridge::threads`; a list asks for no artifacts, a thread's
//! detail asks for them (its messages are rebuilt from them too). A context the gateway created belongs to the caller that created it
//! and shows under that caller's threadId; someone else's is hidden (a 404 when asked for),
//! unless the caller has scope `threads:all`; a context not created through the gateway is
//! shown, under its contextId as threadId, only on agents with `visibility: shared` or to
//! callers with `threads:all` (without inbound auth, the one anonymous caller). An A2A 0.3
//! upstream has no `ListTasks`: its list is the caller's own threads as the binding store
//! knows them, each read with `GetTask` (`source: "bindings"`).
//!
//! An agent that cannot be read never looks like an empty list
//! (docs/design.md#3-http-surface): its card not read, its `ListTasks` failed, or (0.3) a
//! `GetTask` failed or the reads overran `timeouts.upstream_call`. Then its list and a
//! thread's detail answer `502 upstream_unavailable` / `504 upstream_timeout`
//! ([`RequestError::from`] a client error), and the inbox answers the agents it could read
//! plus `unavailable: [{agent, code}]` for the others. The only upstream answer taken as
//! "nothing there" is a task the upstream says it does not know (expired): that thread is
//! left out of a 0.3 list, and its detail is a 404.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::Json;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::AgentRef;
use crate::a2a::call::ListTasks;
use crate::a2a::client::ClientError;
use crate::a2a::model::{StreamEvent, Task};
use crate::a2a::Operation;
use crate::agui::event;
use crate::app::state::AppState;
use crate::auth::Caller;
use crate::bridge::state::ClientView;
use crate::bridge::threads::{self, ThreadStatus, ThreadSummary};
use crate::bridge::{history, Projector, RunFrame};
use crate::config::Limits;
use crate::error::RequestError;
use crate::ids::{ContextId, TaskId, ThreadId};
use crate::inbox::{book, Read};
use crate::registry::{Agent, Upstream};

use crate::inbox::poll::{LIST_PAGES, LIST_PAGE_SIZE};
/// Threads read from the binding store for an upstream without `ListTasks`, and `GetTask`
/// calls in flight at once for them.
const BINDINGS_LIMIT: usize = 200;
const GET_CONCURRENCY: usize = 8;
/// Messages per task read for a thread's detail.
const DETAIL_HISTORY: u32 = 200;
/// Threads per page of a list: the default and the most.
const DEFAULT_PAGE_SIZE: usize = 20;
const MAX_PAGE_SIZE: usize = 100;

/// `status`, `pageSize`, `pageToken`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListQuery {
    status: Option<String>,
    page_size: Option<usize>,
    page_token: Option<String>,
}

/// A query string that does not parse is a 400 `invalid_query` like any other bad query.
fn query(q: Result<Query<ListQuery>, QueryRejection>) -> Result<ListQuery, RequestError> {
    q.map(|Query(q)| q)
        .map_err(|e| RequestError::InvalidQuery(e.body_text()))
}

/// Where a list came from.
const SOURCE_UPSTREAM: &str = "upstream";
const SOURCE_BINDINGS: &str = "bindings";

/// `GET /agents/{name}/threads`.
pub(crate) async fn list(
    State(s): State<AppState>,
    AgentRef(agent): AgentRef,
    caller: Caller,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<ThreadPage<ThreadSummary>>, RequestError> {
    let q = query(q)?;
    let (threads, source) = visible_threads(&s, &agent, &caller).await?;
    Ok(Json(page(threads, |t| t.status, source, &q)?))
}

/// `GET /threads`: every agent's visible conversations, newest first, each with `agent`;
/// the agents that could not be read in `unavailable` (always present). Answered from the
/// live inbox (docs/design.md#the-live-inbox): before an agent's first shared read completes
/// the request waits for it (at most `timeouts.upstream_call`), never reading it itself;
/// agents the inbox does not keep ([`Read::Live`]: A2A 0.3, per-caller credentials) are
/// read for the caller as before. `readAt`: when the oldest of the polled agents' reads was
/// made.
pub(crate) async fn inbox(
    State(s): State<AppState>,
    caller: Caller,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<InboxPage>, RequestError> {
    let q = query(q)?;
    s.inbox.first_reads(s.timeouts.upstream_call()).await;
    // Every live agent at once: one that does not answer costs the inbox one
    // `timeouts.upstream_call`, not one per agent.
    let reads = s.registry.all().map(|agent| {
        let (s, caller) = (&s, &caller);
        async move {
            let name = agent.settings.name.clone();
            let read = match s.inbox.read_of(&name) {
                Some(Read::Polled(_) | Read::Pushed) => {
                    Ok((s.inbox.threads_for(caller, &name), SOURCE_UPSTREAM))
                }
                Some(Read::Failed(code)) => Err(code),
                Some(Read::Pending) => Err(crate::error::UPSTREAM_TIMEOUT),
                Some(Read::Live) | None => visible_threads(s, agent, caller).await.map_err(|e| {
                    tracing::warn!(agent = %name, code = e.code(), error = %e,
                            "the inbox could not read an agent's conversations");
                    e.code()
                }),
            };
            (name, read)
        }
    });
    let read = futures::future::join_all(reads).await;
    let source = if read
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok())
        .all(|(_, source)| *source == SOURCE_UPSTREAM)
    {
        SOURCE_UPSTREAM
    } else {
        SOURCE_BINDINGS
    };
    let inbox = threads::inbox(read.into_iter().map(|(name, r)| (name, r.map(|(t, _)| t))));
    let page = page(inbox.threads, |t| t.thread.status, source, &q)?;
    Ok(Json(InboxPage {
        page,
        read_at: s.inbox.read_at().and_then(rfc3339),
        unavailable: inbox.unavailable,
    }))
}

/// `at` as RFC 3339 UTC.
fn rfc3339(at: std::time::SystemTime) -> Option<String> {
    time::OffsetDateTime::from(at)
        .format(&time::format_description::well_known::Rfc3339)
        .ok()
}

/// `GET /agents/{name}/threads/{threadId}`: the conversation with its messages (rebuilt from
/// A2A history), its state (the projection of its last task) and pending interrupts.
pub(crate) async fn detail(
    State(s): State<AppState>,
    AgentRef(agent): AgentRef,
    Path((_, thread_id)): Path<(String, ThreadId)>,
    caller: Caller,
) -> Result<Json<ThreadDetail>, RequestError> {
    let context_id = context_of(&s, &agent, &caller, &thread_id)
        .await?
        .ok_or(RequestError::UnknownThread)?;
    let mut tasks = match tasks_of(&s, &agent, &caller, &thread_id, &context_id).await {
        Ok(tasks) => tasks,
        // A2A 0.3: the thread's last task is gone upstream (expired).
        Err(e) if e.is_task_not_found() => return Err(RequestError::UnknownThread),
        Err(e) => return Err(RequestError::from(&e)),
    };
    let body = detail_body(&s.limits, &thread_id, &context_id, &mut tasks)
        .ok_or(RequestError::UnknownThread)?;
    Ok(Json(body))
}

/// A thread's detail from its context's tasks, newest first (`None`: no task): its list
/// item, `messages`, `state` and `pendingInterrupts` (the entries at the state's
/// `/a2a/pendingInterrupts`, under the same name).
fn detail_body(
    limits: &Limits,
    thread_id: &ThreadId,
    context_id: &ContextId,
    tasks: &mut [Task],
) -> Option<ThreadDetail> {
    let summary = threads::summarize(tasks, |_| thread_id.clone())
        .into_iter()
        .next()?;
    tasks.reverse();
    let oldest_first: Vec<&Task> = tasks.iter().collect();
    let messages = history::messages(&oldest_first);
    let (state, pending_interrupts) = projected_state(limits, thread_id, context_id, tasks.last());
    let ThreadSummary {
        context_id,
        last_task,
        status,
        thread_id,
    } = summary;
    Some(ThreadDetail {
        context_id,
        last_task,
        messages,
        pending_interrupts,
        state,
        status,
        thread_id,
    })
}

/// The context of the caller's thread `thread_id` (docs/design.md#4-threads-and-contexts,
/// docs/design.md#11-security): the one its binding names; else the threadId itself when that
/// is a context the caller may see. `Ok(None)`: a thread the caller has not started and may
/// not see as a context (a new one, for all the caller can tell); `Err`: a context someone
/// else created.
pub(crate) async fn context_of(
    s: &AppState,
    agent: &Agent,
    caller: &Caller,
    thread_id: &ThreadId,
) -> Result<Option<ContextId>, RequestError> {
    let name = &agent.settings.name;
    if let Some(context) = s.store.get(&caller.id, name, thread_id).await {
        return Ok(Some(context));
    }
    let asked = ContextId::of_thread(thread_id);
    let creator = s.store.owner_of(name, &asked).await.map(|(c, _)| c);
    let visible = caller.may_use_context(creator.as_ref(), agent.settings.visibility);
    if creator.is_some() && !visible {
        // Someone else's context: unknown, not a new thread.
        return Err(RequestError::UnknownThread);
    }
    Ok(visible.then_some(asked))
}

/// The tasks of the thread's context, newest first, each with its artifacts and at most
/// [`DETAIL_HISTORY`] messages: from `ListTasks`, or (A2A 0.3) the thread's last task as the
/// binding store recorded it for `caller`.
pub(crate) async fn tasks_of(
    s: &AppState,
    agent: &Agent,
    caller: &Caller,
    thread_id: &ThreadId,
    context_id: &ContextId,
) -> Result<Vec<Task>, ClientError> {
    let owner = &caller.id;
    let upstream = resolve(s, agent, caller).await?;
    if upstream.client.supports(Operation::ListTasks) {
        let context_id = context_id.as_str();
        let page = upstream
            .client
            .list_tasks(
                &upstream.ctx,
                ListTasks {
                    context_id: Some(context_id),
                    page_size: LIST_PAGE_SIZE,
                    page_token: None,
                    history_length: DETAIL_HISTORY,
                    include_artifacts: true,
                },
            )
            .await?;
        return Ok(page
            .tasks
            .into_iter()
            .filter(|t| t.context_id.as_deref() == Some(context_id))
            .collect());
    }
    let records = s
        .store
        .threads_of(owner, &agent.settings.name, BINDINGS_LIMIT)
        .await;
    let Some(task_id) = records
        .into_iter()
        .find(|r| r.thread_id == *thread_id)
        .and_then(|r| r.task_id)
    else {
        return Ok(Vec::new());
    };
    let task = upstream
        .client
        .get_task(&upstream.ctx, &task_id, Some(DETAIL_HISTORY))
        .await?;
    Ok(vec![task])
}

/// The agent's resolution for calls made on behalf of `caller`. An agent whose card cannot be
/// read is unavailable, like an upstream that refuses the connection.
async fn resolve(s: &AppState, agent: &Agent, caller: &Caller) -> Result<Upstream, ClientError> {
    s.registry
        .resolve_as(agent, caller)
        .await
        .map_err(ClientError::Unavailable)
}

/// The state the run path would have projected for the conversation's last task, and its
/// pending interrupts (the entries at `/a2a/pendingInterrupts`).
fn projected_state(
    limits: &Limits,
    thread_id: &ThreadId,
    context_id: &ContextId,
    last: Option<&Task>,
) -> (Value, Vec<Value>) {
    let mut projector = Projector::new(RunFrame {
        thread_id: thread_id.to_string(),
        context_id: Some(context_id.to_string()),
        ..RunFrame::limited(limits)
    });
    projector.start();
    if let Some(task) = last {
        projector.apply(&StreamEvent::Task(task.clone()));
    }
    let state = projector.state().cloned().unwrap_or_else(|| json!({}));
    let pending = ClientView::of(Some(&state))
        .pending_interrupt_entries()
        .into_iter()
        .cloned()
        .collect();
    (state, pending)
}

/// The conversations of `agent` the caller may see, newest first, and their source; a 502
/// or 504 when the agent cannot be read.
pub(crate) async fn visible_threads(
    s: &AppState,
    agent: &Agent,
    caller: &Caller,
) -> Result<(Vec<ThreadSummary>, &'static str), RequestError> {
    let upstream = resolve(s, agent, caller)
        .await
        .map_err(|e| RequestError::from(&e))?;
    if !upstream.client.supports(Operation::ListTasks) {
        let threads = from_bindings(s, agent, caller, &upstream).await?;
        return Ok((threads, SOURCE_BINDINGS));
    }
    let tasks = upstream
        .client
        .list_tasks_paged(
            &upstream.ctx,
            ListTasks::first(None, LIST_PAGE_SIZE),
            LIST_PAGES,
        )
        .await
        .map_err(|e| RequestError::from(&e))?;
    let mut visible = Vec::new();
    for thread in threads::summarize(&tasks, ThreadId::of_context) {
        let creator = s
            .store
            .owner_of(&agent.settings.name, &thread.context_id)
            .await;
        let visibility = agent.settings.visibility;
        visible.extend(book::shown(caller, visibility, thread, creator.as_ref()));
    }
    Ok((visible, SOURCE_UPSTREAM))
}

/// An upstream without `ListTasks` (A2A 0.3): the caller's own threads as the binding store
/// knows them, each with its last task read with `GetTask` (at most [`BINDINGS_LIMIT`]
/// threads, [`GET_CONCURRENCY`] calls at a time, all within one `timeouts.upstream_call`).
/// A read that fails, or reads that overrun the deadline, fail the list: a list missing
/// threads the agent could not be asked about would pass for the whole of it.
async fn from_bindings(
    s: &AppState,
    agent: &Agent,
    caller: &Caller,
    upstream: &Upstream,
) -> Result<Vec<ThreadSummary>, RequestError> {
    let records = s
        .store
        .threads_of(&caller.id, &agent.settings.name, BINDINGS_LIMIT)
        .await;
    let task_ids: Vec<TaskId> = records.iter().filter_map(|r| r.task_id.clone()).collect();
    let reads = task_ids.into_iter().map(|task_id| async move {
        upstream
            .client
            .get_task(&upstream.ctx, &task_id, Some(0))
            .await
    });
    let read_all = async {
        let mut reads = futures::stream::iter(reads).buffer_unordered(GET_CONCURRENCY);
        let mut tasks = Vec::new();
        while let Some(read) = reads.next().await {
            match read {
                Ok(task) => tasks.push(task),
                // Expired upstream: the thread has nothing left to show.
                Err(e) if e.is_task_not_found() => {}
                Err(e) => return Err(RequestError::from(&e)),
            }
        }
        Ok(tasks)
    };
    let bound = s.timeouts.upstream_call();
    let mut tasks: Vec<Task> = tokio::time::timeout(bound, read_all)
        .await
        .map_err(|_| RequestError::from(&ClientError::Timeout(bound)))??;
    // Newest first, as `ListTasks` answers.
    tasks.sort_by(|a, b| b.status.timestamp.cmp(&a.status.timestamp));
    Ok(threads::summarize(&tasks, |context| {
        records
            .iter()
            .find(|r| r.context_id == *context)
            .map_or_else(|| ThreadId::of_context(context), |r| r.thread_id.clone())
    }))
}

/// One page of a thread list (`GET /agents/{name}/threads`, and the inbox's threads). The
/// wire types of this module declare their fields in alphabetical order, the order in which
/// the threads API has always written them.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ThreadPage<T> {
    /// The offset of the next page, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_page_token: Option<String>,
    /// `upstream` (`ListTasks`) or `bindings` (the binding store, A2A 0.3).
    source: &'static str,
    threads: Vec<T>,
}

/// `GET /threads`: a page of the inbox and the agents that could not be read (always
/// present).
#[derive(Debug, Serialize)]
pub(crate) struct InboxPage {
    #[serde(flatten)]
    page: ThreadPage<threads::InboxThread>,
    /// When the oldest read of an agent kept by the shared poll was made (RFC 3339); absent
    /// when no such agent was read (docs/design.md#the-live-inbox).
    #[serde(rename = "readAt", skip_serializing_if = "Option::is_none")]
    read_at: Option<String>,
    unavailable: Vec<threads::Unavailable>,
}

/// `GET /agents/{name}/threads/{threadId}`: the list item plus the conversation.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ThreadDetail {
    context_id: ContextId,
    last_task: threads::LastTask,
    /// Rebuilt from A2A history (`history::messages`).
    messages: Vec<event::Message>,
    /// The entries at the state's `/a2a/pendingInterrupts`, under the same name
    /// (`state::layout::PENDING_INTERRUPTS`; a test holds the two spellings equal).
    pending_interrupts: Vec<Value>,
    /// The docs/design.md#6-projection-a2a-to-ag-ui projection of the last task.
    state: Value,
    status: ThreadStatus,
    thread_id: ThreadId,
}

/// Filters by `status` and cuts one page (`pageToken` is the offset of the page).
fn page<T>(
    items: Vec<T>,
    status_of: impl Fn(&T) -> ThreadStatus,
    source: &'static str,
    q: &ListQuery,
) -> Result<ThreadPage<T>, RequestError> {
    let status = match q.status.as_deref() {
        None => None,
        Some(raw) => Some(ThreadStatus::parse(raw).ok_or_else(|| {
            RequestError::InvalidQuery(format!(
                "status must be one of idle, working, input-required, auth-required, failed, not {raw:?}"
            ))
        })?),
    };
    let size = match q.page_size {
        None => DEFAULT_PAGE_SIZE,
        Some(n) if (1..=MAX_PAGE_SIZE).contains(&n) => n,
        Some(n) => {
            return Err(RequestError::InvalidQuery(format!(
                "pageSize must be 1 to {MAX_PAGE_SIZE}, not {n}"
            )))
        }
    };
    // The tokens we issue: a decimal offset, at most 19 digits (as the OpenAPI says).
    let offset = match q.page_token.as_deref() {
        None | Some("") => 0,
        Some(t) if t.len() <= 19 && t.bytes().all(|b| b.is_ascii_digit()) => {
            t.parse::<usize>().unwrap_or(usize::MAX)
        }
        Some(_) => {
            return Err(RequestError::InvalidQuery(
                "pageToken is not one we issued".into(),
            ))
        }
    };
    let matching: Vec<T> = items
        .into_iter()
        .filter(|t| status.is_none_or(|s| status_of(t) == s))
        .collect();
    let total = matching.len();
    let threads: Vec<T> = matching.into_iter().skip(offset).take(size).collect();
    Ok(ThreadPage {
        next_page_token: (offset + size < total).then(|| (offset + size).to_string()),
        source,
        threads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::model::ProtocolVersion;
    use crate::bridge::state::layout;

    fn summary(id: &str, status: ThreadStatus) -> ThreadSummary {
        ThreadSummary {
            context_id: ContextId::new(format!("c-{id}")),
            last_task: threads::LastTask {
                id: TaskId::new(format!("t-{id}")),
                state: "working".into(),
                updated_at: Some("2026-01-01".into()),
            },
            status,
            thread_id: ThreadId::new(id),
        }
    }

    fn query(status: Option<&str>, page_size: Option<usize>) -> ListQuery {
        ListQuery {
            status: status.map(str::to_owned),
            page_size,
            page_token: None,
        }
    }

    #[test]
    fn bodies_keep_the_json_of_before() {
        // As the JSON maps of before wrote them: keys sorted.
        let items = vec![
            summary("a", ThreadStatus::Working),
            summary("b", ThreadStatus::InputRequired),
            summary("c", ThreadStatus::InputRequired),
        ];
        let list = page(
            items.clone(),
            |t| t.status,
            SOURCE_UPSTREAM,
            &query(None, Some(1)),
        );
        let before =
            json!({"threads": [json!(items[0])], "source": "upstream", "nextPageToken": "1"});
        assert_eq!(
            serde_json::to_string(&list.unwrap()).unwrap(),
            before.to_string()
        );
        let waiting = page(
            items.clone(),
            |t| t.status,
            SOURCE_BINDINGS,
            &query(Some("input-required"), None),
        );
        let before = json!({"threads": [json!(items[1]), json!(items[2])], "source": "bindings"});
        assert_eq!(
            serde_json::to_string(&waiting.unwrap()).unwrap(),
            before.to_string()
        );

        let inbox = threads::inbox([
            ("x".to_owned(), Ok(vec![items[0].clone()])),
            ("down".to_owned(), Err("upstream_unavailable")),
        ]);
        let body = InboxPage {
            page: page(
                inbox.threads.clone(),
                |t| t.thread.status,
                SOURCE_UPSTREAM,
                &query(None, None),
            )
            .unwrap(),
            read_at: None,
            unavailable: inbox.unavailable.clone(),
        };
        let before = json!({"threads": [json!(inbox.threads[0])], "source": "upstream",
            "unavailable": [{"agent": "down", "code": "upstream_unavailable"}]});
        assert_eq!(serde_json::to_string(&body).unwrap(), before.to_string());
        assert_eq!(
            serde_json::to_value(&body).unwrap()["threads"][0]["agent"],
            "x"
        );

        let messages = vec![event::Message::text("m", crate::agui::Role::User, "hi")];
        let detail = ThreadDetail {
            context_id: ContextId::new("c-a"),
            last_task: items[0].last_task.clone(),
            messages: messages.clone(),
            pending_interrupts: vec![json!({"id": "a2a:T:q"})],
            state: json!({"a2a": {}}),
            status: ThreadStatus::Working,
            thread_id: ThreadId::new("a"),
        };
        let mut before = json!(items[0]);
        before["messages"] = json!(messages);
        before["state"] = json!({"a2a": {}});
        before["pendingInterrupts"] = json!([{"id": "a2a:T:q"}]);
        assert_eq!(serde_json::to_string(&detail).unwrap(), before.to_string());
    }

    #[test]
    fn bad_queries_are_refused() {
        let items = vec![summary("a", ThreadStatus::Idle)];
        for q in [
            query(Some("bogus"), None),
            query(None, Some(0)),
            query(None, Some(101)),
        ] {
            let e = page(items.clone(), |t| t.status, SOURCE_UPSTREAM, &q).unwrap_err();
            assert_eq!(e.code(), "invalid_query");
        }
    }

    /// A thread's `pendingInterrupts` is the state's `/a2a/pendingInterrupts` under the
    /// same name (one constant, `state::layout`), and the OpenAPI describes it by that name.
    #[test]
    fn the_detail_lists_the_state_pending_interrupts_under_their_name() {
        let raw: Value = serde_json::from_str(include_str!(
            "../../fixtures/a2a/v1/get-input-required.json"
        ))
        .unwrap();
        let task = ProtocolVersion::V1
            .decode_task(&raw["result"].to_string())
            .unwrap();
        let context_id = ContextId::new(task.context_id.clone().unwrap());
        let limits = crate::config::Limits::default();
        let thread_id = ThreadId::new("t");
        let detail = detail_body(&limits, &thread_id, &context_id, &mut [task]).unwrap();
        let body = serde_json::to_value(detail).unwrap();
        let in_state: Vec<&Value> = body["state"][layout::A2A][layout::PENDING_INTERRUPTS]
            .as_object()
            .unwrap()
            .values()
            .collect();
        assert_eq!(in_state.len(), 1, "{body}");
        assert_eq!(body[layout::PENDING_INTERRUPTS], json!(in_state));
        let spec: Value = serde_json::from_str(super::super::OPENAPI).unwrap();
        let detail = &spec["paths"]["/agents/{name}/threads/{threadId}"]["get"]["responses"]["200"]
            ["content"]["application/json"]["schema"]["allOf"][1]["properties"];
        assert!(detail.get(layout::PENDING_INTERRUPTS).is_some(), "{detail}");
    }
}
