//! The threads API (docs/design.md#3-http-surface): an agent's conversations, one conversation, and
//! the inbox
//! across agents — each scoped to its caller (docs/design.md#11-security).
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
//! An agent that cannot be read never looks like an empty list (docs/design.md#3-http-surface): its
//! card not
//! read, its `ListTasks` failed, or (0.3) a `GetTask` failed or the reads overran
//! `timeouts.upstream_call`. Then its list and a thread's detail answer `502
//! upstream_unavailable` / `504 upstream_timeout` ([`RequestError::from`] a client error),
//! and the inbox answers the agents it could read plus `unavailable: [{agent, code}]` for the
//! others. The only upstream answer taken as "nothing there" is a task the upstream says it
//! does not know (expired): that thread is left out of a 0.3 list, and its detail is a 404.

use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::Json;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{AgentRef, AppState};
use crate::a2a::client::ClientError;
use crate::a2a::model::{StreamEvent, Task};
use crate::a2a::Operation;
use crate::auth::Caller;
use crate::bridge::state::{layout, ClientView};
use crate::bridge::threads::{self, ThreadStatus, ThreadSummary};
use crate::bridge::{history, Projector, RunFrame};
use crate::config::Limits;
use crate::error::RequestError;
use crate::registry::{Agent, Resolved};

/// `ListTasks` pages read for a list, and tasks per page.
const LIST_PAGES: usize = 5;
const LIST_PAGE_SIZE: u32 = 100;
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
) -> Result<Json<Value>, RequestError> {
    let q = query(q)?;
    let (threads, source) = visible_threads(&s, &agent, &caller).await?;
    let items: Vec<Value> = threads.iter().map(|t| json!(t)).collect();
    Ok(Json(page(items, source, &q)?))
}

/// `GET /threads`: every agent's visible conversations, newest first, each with `agent`;
/// the agents that could not be read in `unavailable` (always present).
pub(crate) async fn inbox(
    State(s): State<AppState>,
    caller: Caller,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Value>, RequestError> {
    let q = query(q)?;
    // Every agent at once: one that does not answer costs the inbox one
    // `timeouts.upstream_call`, not one per agent.
    let reads = s.registry.all().map(|agent| {
        let (s, caller) = (&s, &caller);
        async move {
            let name = agent.settings.name.clone();
            let read = visible_threads(s, agent, caller).await;
            if let Err(e) = &read {
                tracing::warn!(agent = %name, code = e.code(), error = %e,
                    "the inbox could not read an agent's conversations");
            }
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
    let inbox = threads::inbox(
        read.into_iter()
            .map(|(name, r)| (name, r.map(|(t, _)| t).map_err(|e| e.code()))),
    );
    let items: Vec<Value> = inbox.threads.iter().map(|t| json!(t)).collect();
    let mut body = page(items, source, &q)?;
    body["unavailable"] = json!(inbox.unavailable);
    Ok(Json(body))
}

/// `GET /agents/{name}/threads/{threadId}`: the conversation with its messages (rebuilt from
/// A2A history), its state (the projection of its last task) and pending interrupts.
pub(crate) async fn detail(
    State(s): State<AppState>,
    AgentRef(agent): AgentRef,
    Path((_, thread_id)): Path<(String, String)>,
    caller: Caller,
) -> Result<Json<Value>, RequestError> {
    let context_id = context_of(&s, &agent, &caller, &thread_id)
        .await?
        .ok_or(RequestError::UnknownThread)?;
    let mut tasks = match tasks_of(&s, &agent, &caller.name, &thread_id, &context_id).await {
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
    thread_id: &str,
    context_id: &str,
    tasks: &mut [Task],
) -> Option<Value> {
    let summary = threads::summarize(tasks, |_| thread_id.to_owned())
        .into_iter()
        .next()?;
    tasks.reverse();
    let oldest_first: Vec<&Task> = tasks.iter().collect();
    let messages = history::messages(&oldest_first);
    let (state, pending) = projected_state(limits, thread_id, context_id, tasks.last());
    let mut body = json!(summary);
    body["messages"] = json!(messages);
    body["state"] = state;
    body[layout::PENDING_INTERRUPTS] = pending;
    Some(body)
}

/// The context of the caller's thread `thread_id` (docs/design.md#4-threads-and-contexts,
/// docs/design.md#11-security): the one its binding
/// names; else the threadId itself when that is a context the caller may see. `Ok(None)`: a
/// thread the caller has not started and may not see as a context (a new one, for all the
/// caller can tell); `Err`: a context someone else created.
pub(crate) async fn context_of(
    s: &AppState,
    agent: &Agent,
    caller: &Caller,
    thread_id: &str,
) -> Result<Option<String>, RequestError> {
    let name = &agent.settings.name;
    if let Some(context) = s.bindings.get(&caller.name, name, thread_id).await {
        return Ok(Some(context));
    }
    let creator = s.bindings.owner_of(name, thread_id).await.map(|(c, _)| c);
    let visible = caller.may_use_context(creator.as_deref(), agent.settings.visibility);
    if creator.is_some() && !visible {
        // Someone else's context: unknown, not a new thread.
        return Err(RequestError::UnknownThread);
    }
    Ok(visible.then(|| thread_id.to_owned()))
}

/// The tasks of the thread's context, newest first, each with its artifacts and at most
/// [`DETAIL_HISTORY`] messages: from `ListTasks`, or (A2A 0.3) the thread's last task as the
/// binding store recorded it for `owner`.
pub(crate) async fn tasks_of(
    s: &AppState,
    agent: &Agent,
    owner: &str,
    thread_id: &str,
    context_id: &str,
) -> Result<Vec<Task>, ClientError> {
    let upstream = resolve(s, agent, owner).await?;
    if upstream.client.supports(Operation::ListTasks) {
        let page = upstream
            .client
            .list_tasks(Some(context_id), LIST_PAGE_SIZE, None, DETAIL_HISTORY, true)
            .await?;
        return Ok(page
            .tasks
            .into_iter()
            .filter(|t| t.context_id.as_deref() == Some(context_id))
            .collect());
    }
    let records = s
        .bindings
        .threads_of(owner, &agent.settings.name, BINDINGS_LIMIT)
        .await;
    let Some(task_id) = records
        .into_iter()
        .find(|r| r.thread_id == thread_id)
        .and_then(|r| r.task_id)
    else {
        return Ok(Vec::new());
    };
    let task = upstream
        .client
        .get_task(&task_id, Some(DETAIL_HISTORY))
        .await?;
    Ok(vec![task])
}

/// The agent's resolution for calls made on behalf of `owner`. An agent whose card cannot be
/// read is unavailable, like an upstream that refuses the connection.
async fn resolve(s: &AppState, agent: &Agent, owner: &str) -> Result<Arc<Resolved>, ClientError> {
    s.registry
        .resolve_as(agent, owner)
        .await
        .map_err(ClientError::Unavailable)
}

/// The state the run path would have projected for the conversation's last task, and its
/// pending interrupts.
fn projected_state(
    limits: &Limits,
    thread_id: &str,
    context_id: &str,
    last: Option<&Task>,
) -> (Value, Value) {
    let mut projector = Projector::new(RunFrame {
        thread_id: thread_id.to_owned(),
        context_id: Some(context_id.to_owned()),
        ..RunFrame::limited(limits)
    });
    projector.start();
    if let Some(task) = last {
        projector.apply(&StreamEvent::Task(task.clone()));
    }
    let state = projector.state().cloned().unwrap_or_else(|| json!({}));
    let pending: Vec<&Value> = ClientView::of(Some(&state)).pending_interrupt_entries();
    let pending = json!(pending);
    (state, pending)
}

/// The conversations of `agent` the caller may see, newest first, and their source; a 502
/// or 504 when the agent cannot be read.
async fn visible_threads(
    s: &AppState,
    agent: &Agent,
    caller: &Caller,
) -> Result<(Vec<ThreadSummary>, &'static str), RequestError> {
    let upstream = resolve(s, agent, &caller.name)
        .await
        .map_err(|e| RequestError::from(&e))?;
    if !upstream.client.supports(Operation::ListTasks) {
        let threads = from_bindings(s, agent, caller, &upstream).await?;
        return Ok((threads, SOURCE_BINDINGS));
    }
    let tasks = upstream
        .client
        .list_tasks_paged(None, LIST_PAGE_SIZE, LIST_PAGES, 0, false)
        .await
        .map_err(|e| RequestError::from(&e))?;
    let mut visible = Vec::new();
    for mut thread in threads::summarize(&tasks, str::to_owned) {
        let record = s
            .bindings
            .owner_of(&agent.settings.name, &thread.context_id)
            .await;
        let creator = record.as_ref().map(|(c, _)| c.as_str());
        if !caller.may_use_context(creator, agent.settings.visibility) {
            continue;
        }
        if let Some((_, creator_thread)) = record {
            thread.thread_id = creator_thread;
        }
        visible.push(thread);
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
    upstream: &Resolved,
) -> Result<Vec<ThreadSummary>, RequestError> {
    let records = s
        .bindings
        .threads_of(&caller.name, &agent.settings.name, BINDINGS_LIMIT)
        .await;
    let task_ids: Vec<String> = records.iter().filter_map(|r| r.task_id.clone()).collect();
    let reads = task_ids.into_iter().map(|task_id| {
        let client = upstream.client.clone();
        async move { client.get_task(&task_id, Some(0)).await }
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
    let bound = s.timeouts.upstream_call;
    let mut tasks: Vec<Task> = tokio::time::timeout(bound, read_all)
        .await
        .map_err(|_| RequestError::from(&ClientError::Timeout(bound)))??;
    // Newest first, as `ListTasks` answers.
    tasks.sort_by(|a, b| b.status.timestamp.cmp(&a.status.timestamp));
    Ok(threads::summarize(&tasks, |context| {
        records
            .iter()
            .find(|r| r.context_id == context)
            .map_or_else(|| context.to_owned(), |r| r.thread_id.clone())
    }))
}

/// Filters by `status` and cuts one page (`pageToken` is the offset of the page): the
/// list's body.
fn page(items: Vec<Value>, source: &str, q: &ListQuery) -> Result<Value, RequestError> {
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
    let matching: Vec<Value> = items
        .into_iter()
        .filter(|t| status.is_none_or(|s| t["status"] == s.as_str()))
        .collect();
    let total = matching.len();
    let threads: Vec<Value> = matching.into_iter().skip(offset).take(size).collect();
    let mut body = json!({"threads": threads, "source": source});
    if offset + size < total {
        body["nextPageToken"] = json!((offset + size).to_string());
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::model::ProtocolVersion;

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
        let context_id = task.context_id.clone().unwrap();
        let limits = crate::config::Limits::default();
        let body = detail_body(&limits, "t", &context_id, &mut [task]).unwrap();
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
