//! CopilotKit's thread routes under `copilotkit.base_path` (docs/copilotkit.md,
//! docs/design.md#3-http-surface): the caller's thread list, a thread's messages, state and
//! events, and the mutations CopilotKit's client sends (rename, unarchive, archive, delete),
//! answered from A2A and the binding store — what CopilotKit's own runtime answers only with
//! its Intelligence service.
//!
//! The shapes are CopilotKit's: its client (`@copilotkit/core` 1.74 `threads.ts`,
//! `createThreadFetchObservable`, `createThreadMutationObservable`) asks `GET
//! {base}/threads?agentId=A[&includeArchived=true][&limit=N][&cursor=C]` and reads
//! `{threads, nextCursor}`; it sends `PATCH {base}/threads/{id}` with `{agentId, name}` or
//! `{agentId, archived: false}`, `POST {base}/threads/{id}/archive` and `DELETE
//! {base}/threads/{id}` with `{agentId}`, and reads nothing of their answers but the status (a
//! non-2xx rolls the change back and reports it). The runtime's handlers
//! (`packages/runtime/src/v2/runtime/handlers/intelligence/threads.ts`) answer `{threadId,
//! archived: true}`, `{threadId, deleted: true}`, the updated record, `{messages}`, `{state}`
//! and `{events}`.
//!
//! Invariants:
//! - The list is [`threads::visible_threads`] (the threads API's ownership rule,
//!   docs/design.md#11-security), less what the caller deleted, and less what it archived
//!   unless `includeArchived=true`; newest first; pages of `limit` (at most
//!   [`MAX_LIMIT`], default [`DEFAULT_LIMIT`]) at the offset `cursor`.
//! - A thread's `name` is the caller's rename, else its first user message clipped to
//!   [`TITLE_CHARS`] characters, else `null`.
//! - `messages`, `state` and `events` are what `connect` restores
//!   ([`history::restored`], then the same `reattach` projection the run path makes): the same messages, ids and order.
//! - Marks ([`ThreadMark`]) are per caller and agent, kept in the binding store; they never
//!   touch the A2A history. A store that does not answer is a `503 store_unavailable`, never
//!   a list that shows deleted threads or a mutation reported as kept.
//! - The list and the reads call the upstream as a `connect` does, and take a token of the
//!   caller's `rate_limits` bucket as runs do; the mutations touch the store only (an
//!   upstream check at most) and take none.
//! - Someone else's thread is a 404; an agent named by `agentId` that cannot be read is a
//!   502/504; the list across agents names the unreadable ones in `unavailable`.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, Request, State};
use axum::routing::{get, patch, post};
use axum::{Extension, Json, Router};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::{threads, AgentRef, ClientAddr};
use crate::a2a::model::Task;
use crate::agui::{Event, Role};
use crate::app::state::AppState;
use crate::auth::Caller;
use crate::bridge::threads::{InboxThread, ThreadSummary};
use crate::bridge::{history, Projector, RunFrame};
use crate::error::RequestError;
use crate::ids::{ContextId, ThreadId};
use crate::registry::Agent;
use crate::store::ThreadMark;

/// Threads per page: without `limit`, and the most a `limit` may ask.
pub(crate) const DEFAULT_LIMIT: usize = 50;
pub(crate) const MAX_LIMIT: usize = 100;
/// A title made from the first user message is clipped to this many characters.
pub(crate) const TITLE_CHARS: usize = 80;
/// The longest name a rename may give, in characters.
pub(crate) const MAX_NAME_CHARS: usize = 200;
/// Threads of a page whose history is read at once (for their titles and creation times).
const READ_CONCURRENCY: usize = 8;
/// The `runId` of the replay `events` answers (no run of the client's).
const REPLAY_RUN_ID: &str = "history";

/// The routes under `base` (none when `base` is `None`).
pub(crate) fn routes(base: Option<&str>) -> Router<AppState> {
    let Some(base) = base else {
        return Router::new();
    };
    Router::new()
        .route(&format!("{base}/threads"), get(list))
        .route(
            &format!("{base}/threads/{{thread_id}}"),
            patch(update).delete(delete),
        )
        .route(
            &format!("{base}/threads/{{thread_id}}/archive"),
            post(archive),
        )
        .route(
            &format!("{base}/threads/{{thread_id}}/messages"),
            get(messages),
        )
        .route(&format!("{base}/threads/{{thread_id}}/state"), get(state))
        .route(&format!("{base}/threads/{{thread_id}}/events"), get(events))
}

/// CopilotKit's `ThreadRecord` (docs/design.md#3a-copilotkits-thread-routes).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ThreadRecord {
    /// The threadId the client passes to run and connect (the contextId of a conversation
    /// started outside the gateway).
    id: ThreadId,
    agent_id: String,
    name: Option<String>,
    archived: bool,
    created_at: String,
    updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_run_at: Option<String>,
    /// Always `""`: the gateway has no organizations.
    organization_id: &'static str,
    created_by_id: String,
}

/// `agentId`, `includeArchived`, `limit`, `cursor` (as CopilotKit's client spells them).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ListQuery {
    agent_id: Option<String>,
    include_archived: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
}

/// A page's bounds, read from the query: `(offset, size)`.
fn bounds(q: &ListQuery) -> Result<(usize, usize), RequestError> {
    let size = match q.limit.as_deref() {
        None | Some("") => DEFAULT_LIMIT,
        Some(raw) => match raw.parse::<usize>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
            _ => {
                return Err(RequestError::InvalidQuery(format!(
                    "limit must be 1 to {MAX_LIMIT}, not {raw:?}"
                )))
            }
        },
    };
    // The cursors we issue: a decimal offset, at most 19 digits.
    let offset = match q.cursor.as_deref() {
        None | Some("") => 0,
        Some(c) if c.len() <= 19 && c.bytes().all(|b| b.is_ascii_digit()) => {
            c.parse::<usize>().unwrap_or(usize::MAX)
        }
        Some(_) => {
            return Err(RequestError::InvalidQuery(
                "cursor is not one we issued".into(),
            ))
        }
    };
    Ok((offset, size))
}

/// The agents a request names: the one `agentId` names (as CopilotKit's routes read ids:
/// `default` is `copilotkit.default_agent`), with the id to show; else every agent.
fn agents_named(
    s: &AppState,
    agent_id: Option<&str>,
) -> Result<Vec<(String, Arc<Agent>)>, RequestError> {
    Ok(match agent_id.filter(|id| !id.is_empty()) {
        Some(id) => vec![(id.to_owned(), AgentRef::copilotkit(s, id)?.0)],
        None => s
            .registry
            .all()
            .map(|a| (a.settings.name.clone(), a.clone()))
            .collect(),
    })
}

fn store_error(kind: crate::store::FailureKind) -> RequestError {
    RequestError::StoreUnavailable(kind.as_str())
}

/// `GET {base}/threads`: the caller's threads, newest first, one page.
async fn list(
    State(s): State<AppState>,
    caller: Caller,
    addr: Option<Extension<ClientAddr>>,
    q: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Value>, RequestError> {
    super::check_rate(&s, &caller, addr.map(|a| a.0 .0.ip()))?;
    let Query(q) = q.map_err(|e| RequestError::InvalidQuery(e.body_text()))?;
    let (offset, size) = bounds(&q)?;
    let include_archived = q.include_archived.as_deref() == Some("true");
    let one_agent = q.agent_id.as_deref().is_some_and(|id| !id.is_empty());
    let agents = agents_named(&s, q.agent_id.as_deref())?;
    // Every agent at once: one that does not answer costs the list one
    // `timeouts.upstream_call`.
    let reads = agents.iter().map(|(shown, agent)| {
        let (s, caller) = (&s, &caller);
        async move {
            let name = &agent.settings.name;
            let (read, marks) = tokio::join!(
                threads::visible_threads(s, agent, caller),
                s.store.marks_of(&caller.id, name)
            );
            (shown.clone(), read, marks)
        }
    });
    let mut marks: HashMap<String, HashMap<ThreadId, ThreadMark>> = HashMap::new();
    let mut per_agent = Vec::new();
    for (shown, read, agent_marks) in futures::future::join_all(reads).await {
        let agent_marks = agent_marks.map_err(store_error)?;
        let read = match read {
            Ok((threads, _)) => Ok(threads),
            Err(e) if one_agent => return Err(e),
            Err(e) => {
                tracing::warn!(agent = %shown, code = e.code(), error = %e,
                    "the CopilotKit thread list could not read an agent's conversations");
                Err(e.code())
            }
        };
        let read = read.map(|threads| {
            threads
                .into_iter()
                .filter(|t| match agent_marks.get(&t.thread_id) {
                    Some(m) => !m.deleted && (include_archived || !m.archived),
                    None => true,
                })
                .collect::<Vec<ThreadSummary>>()
        });
        marks.insert(shown.clone(), agent_marks);
        per_agent.push((shown, read));
    }
    // Newest first across agents (the inbox's merge).
    let merged = crate::bridge::threads::inbox(per_agent);
    let total = merged.threads.len();
    let page: Vec<InboxThread> = merged.threads.into_iter().skip(offset).take(size).collect();
    let records = records(&s, &caller, &agents, &marks, page).await;
    let next = offset.saturating_add(size);
    let mut body = json!({
        "threads": records,
        "nextCursor": (next < total).then(|| next.to_string()),
    });
    if !one_agent {
        body["unavailable"] = json!(merged.unavailable);
    }
    Ok(Json(body))
}

/// The records of a page: each thread's history read (at most [`READ_CONCURRENCY`] at once,
/// all within one `timeouts.upstream_call`) for its title and creation time; a thread whose
/// history cannot be read keeps its rename (or no name) and its last task's time.
async fn records(
    s: &AppState,
    caller: &Caller,
    agents: &[(String, Arc<Agent>)],
    marks: &HashMap<String, HashMap<ThreadId, ThreadMark>>,
    page: Vec<InboxThread>,
) -> Vec<ThreadRecord> {
    // Owned inputs: the reads' futures borrow nothing of the page.
    let inputs: Vec<(usize, Option<Arc<Agent>>, ThreadId, ContextId)> = page
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let agent = agents.iter().find(|(shown, _)| *shown == item.agent);
            let t = &item.thread;
            let agent = agent.map(|(_, a)| a.clone());
            (i, agent, t.thread_id.clone(), t.context_id.clone())
        })
        .collect();
    let reads = inputs
        .into_iter()
        .map(|(i, agent, thread_id, context_id)| async move {
            let tasks = match agent {
                Some(agent) => threads::tasks_of(s, &agent, caller, &thread_id, &context_id)
                    .await
                    .ok(),
                None => None,
            };
            (i, tasks)
        });
    let mut reads = futures::stream::iter(reads).buffer_unordered(READ_CONCURRENCY);
    let mut histories: Vec<Option<Vec<Task>>> = vec![None; page.len()];
    // What was read by the deadline counts; the rest of the page keeps its rename (or no name).
    let deadline = tokio::time::Instant::now() + s.timeouts.upstream_call();
    loop {
        match tokio::time::timeout_at(deadline, reads.next()).await {
            Ok(Some((i, tasks))) => histories[i] = tasks,
            Ok(None) => break,
            Err(_) => {
                tracing::warn!(
                    "the CopilotKit thread list could not read every thread's history in time"
                );
                break;
            }
        }
    }
    drop(reads);
    let read = page.into_iter().zip(histories);
    read.into_iter()
        .map(|(item, tasks)| {
            let mark = marks
                .get(&item.agent)
                .and_then(|m| m.get(&item.thread.thread_id));
            record(
                &caller.id,
                &item.agent,
                &item.thread,
                mark,
                tasks.as_deref(),
            )
        })
        .collect()
}

/// A thread's record from its list item, its mark and (when read) its tasks, newest first.
fn record(
    caller: &crate::ids::CallerId,
    agent_id: &str,
    thread: &ThreadSummary,
    mark: Option<&ThreadMark>,
    tasks: Option<&[Task]>,
) -> ThreadRecord {
    let last_run_at = thread.last_task.updated_at.clone();
    let created_at = tasks
        .and_then(|t| t.last())
        .and_then(|oldest| oldest.status.timestamp.clone())
        .or_else(|| last_run_at.clone())
        .unwrap_or_else(epoch);
    let updated_at = [last_run_at.clone(), mark.and_then(|m| m.updated_at.clone())]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or_else(|| created_at.clone());
    let name = mark
        .and_then(|m| m.name.clone())
        .or_else(|| tasks.and_then(title));
    ThreadRecord {
        id: thread.thread_id.clone(),
        agent_id: agent_id.to_owned(),
        name,
        archived: mark.is_some_and(|m| m.archived),
        created_at,
        updated_at,
        last_run_at,
        organization_id: "",
        created_by_id: caller.to_string(),
    }
}

fn epoch() -> String {
    crate::demo::wire::rfc3339(std::time::UNIX_EPOCH)
}

/// The first user message of the conversation `connect` restores, clipped to
/// [`TITLE_CHARS`] characters (`None`: no user message with text).
fn title(tasks: &[Task]) -> Option<String> {
    let messages = history::restored(&[], tasks);
    let first = messages.iter().find(|m| m.role == Role::User)?;
    let text = match first.content.as_ref()? {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => return None,
    };
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.is_empty() {
        return None;
    }
    Some(text.chars().take(TITLE_CHARS).collect())
}

/// `agentId` of the reads (optional: without it, the agent that holds the caller's thread).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ThreadQuery {
    agent_id: Option<String>,
}

/// A thread the caller may read: its agent, context and tasks (newest first).
struct Found {
    context_id: ContextId,
    tasks: Vec<Task>,
}

/// The caller's thread `thread_id`: on the agent `agent_id` names, else on the first agent
/// that holds it. Someone else's, or one no agent holds, is a 404; an agent that cannot be
/// read (and holds nothing found elsewhere) a 502/504.
async fn find(
    s: &AppState,
    caller: &Caller,
    thread_id: &ThreadId,
    agent_id: Option<&str>,
) -> Result<Found, RequestError> {
    check_id(s, thread_id)?;
    let mut failure = None;
    for (_, agent) in agents_named(s, agent_id)? {
        let context_id = match threads::context_of(s, &agent, caller, thread_id).await {
            Ok(Some(context)) => context,
            Ok(None) | Err(_) => continue,
        };
        match threads::tasks_of(s, &agent, caller, thread_id, &context_id).await {
            Ok(tasks) if !tasks.is_empty() => return Ok(Found { context_id, tasks }),
            Ok(_) => {}
            Err(e) if e.is_task_not_found() => {}
            Err(e) => failure = Some(RequestError::from(&e)),
        }
    }
    Err(failure.unwrap_or(RequestError::UnknownThread))
}

/// A threadId over `limits.max_id_bytes` names no thread the gateway keeps.
fn check_id(s: &AppState, thread_id: &ThreadId) -> Result<(), RequestError> {
    let (len, max) = (thread_id.as_str().len(), s.limits.max_id_bytes.get());
    if len > max {
        return Err(RequestError::IdTooLong {
            field: "threadId",
            len,
            max,
        });
    }
    Ok(())
}

/// What `connect` sends for the thread, as one replay of its last task: the run's start,
/// its state, the complete `MESSAGES_SNAPSHOT`, and its end when the task no longer runs;
/// and the state it leaves.
fn replay(s: &AppState, thread_id: &ThreadId, found: &Found) -> (Vec<Event>, Value) {
    let held: Vec<crate::agui::input::Message> = history::restored(&[], &found.tasks)
        .into_iter()
        .map(Into::into)
        .collect();
    let mut projector = Projector::new(RunFrame {
        thread_id: thread_id.to_string(),
        run_id: REPLAY_RUN_ID.to_owned(),
        context_id: Some(found.context_id.to_string()),
        ..RunFrame::limited(&s.limits)
    });
    let events = match found.tasks.first() {
        Some(last) => projector.reattach(last, &held),
        None => Vec::new(),
    };
    let state = projector.state().cloned().unwrap_or(Value::Null);
    (events, state)
}

type Read = (
    State<AppState>,
    Path<ThreadId>,
    Caller,
    Option<Extension<ClientAddr>>,
    Result<Query<ThreadQuery>, QueryRejection>,
);

async fn read(
    (State(s), Path(thread_id), caller, addr, q): Read,
) -> Result<(Vec<Event>, Value), RequestError> {
    super::check_rate(&s, &caller, addr.map(|a| a.0 .0.ip()))?;
    let Query(q) = q.map_err(|e| RequestError::InvalidQuery(e.body_text()))?;
    let found = find(&s, &caller, &thread_id, q.agent_id.as_deref()).await?;
    Ok(replay(&s, &thread_id, &found))
}

/// `GET {base}/threads/{id}/messages`: `{messages}` as `connect` restores them.
async fn messages(
    s: State<AppState>,
    id: Path<ThreadId>,
    caller: Caller,
    addr: Option<Extension<ClientAddr>>,
    q: Result<Query<ThreadQuery>, QueryRejection>,
) -> Result<Json<Value>, RequestError> {
    let (events, _) = read((s, id, caller, addr, q)).await?;
    let messages = events
        .into_iter()
        .find_map(|e| match e {
            Event::MessagesSnapshot { messages } => Some(messages),
            _ => None,
        })
        .unwrap_or_default();
    Ok(Json(json!({ "messages": messages })))
}

/// `GET {base}/threads/{id}/state`: `{state}`, the state `connect` leaves.
async fn state(
    s: State<AppState>,
    id: Path<ThreadId>,
    caller: Caller,
    addr: Option<Extension<ClientAddr>>,
    q: Result<Query<ThreadQuery>, QueryRejection>,
) -> Result<Json<Value>, RequestError> {
    let (_, state) = read((s, id, caller, addr, q)).await?;
    Ok(Json(json!({ "state": state })))
}

/// `GET {base}/threads/{id}/events`: `{events}`, the AG-UI events `connect` replays.
async fn events(
    s: State<AppState>,
    id: Path<ThreadId>,
    caller: Caller,
    addr: Option<Extension<ClientAddr>>,
    q: Result<Query<ThreadQuery>, QueryRejection>,
) -> Result<Json<Value>, RequestError> {
    let (events, _) = read((s, id, caller, addr, q)).await?;
    Ok(Json(json!({ "events": events })))
}

/// A mutation's body: `{agentId}` and, for `PATCH`, `name` or `archived`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Mutation {
    agent_id: Option<String>,
    #[serde(default)]
    name: Option<Value>,
    #[serde(default)]
    archived: Option<Value>,
}

/// The thread a mutation names, the caller's: its agent (by the body's `agentId`, as
/// CopilotKit's runtime requires one) and its body. A thread the caller has no binding for
/// must exist upstream as a context the caller may see.
async fn mutated(
    s: &AppState,
    caller: &Caller,
    thread_id: &ThreadId,
    req: Request,
) -> Result<(String, Arc<Agent>, Mutation), RequestError> {
    check_id(s, thread_id)?;
    if !super::is_json(&req) {
        return Err(RequestError::UnsupportedMediaType);
    }
    let raw = super::read_body(s, req.into_body()).await?;
    let body: Mutation = serde_json::from_slice(&raw).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => RequestError::InvalidThreadUpdate(e.to_string()),
        _ => RequestError::MalformedJson(format!("body is not valid JSON: {e}")),
    })?;
    let Some(agent_id) = body.agent_id.clone().filter(|id| !id.is_empty()) else {
        return Err(RequestError::InvalidThreadUpdate(
            "agentId must be a non-empty string".into(),
        ));
    };
    let AgentRef(agent) = AgentRef::copilotkit(s, &agent_id)?;
    let name = &agent.settings.name;
    if s.store.get(&caller.id, name, thread_id).await.is_none() {
        find(s, caller, thread_id, Some(&agent_id)).await?;
    }
    Ok((agent_id, agent, body))
}

/// Changes the caller's mark on the thread with `change`, stamped now.
async fn remark(
    s: &AppState,
    caller: &Caller,
    agent: &Agent,
    thread_id: &ThreadId,
    change: impl FnOnce(&mut ThreadMark),
) -> Result<ThreadMark, RequestError> {
    let name = &agent.settings.name;
    let store = &s.store;
    let mut mark = store
        .mark_of(&caller.id, name, thread_id)
        .await
        .map_err(store_error)?
        .unwrap_or_default();
    change(&mut mark);
    mark.updated_at = Some(crate::demo::wire::rfc3339(std::time::SystemTime::now()));
    store
        .set_mark(&caller.id, name, thread_id, &mark)
        .await
        .map_err(store_error)?;
    tracing::info!(agent = %name, caller = %crate::redact::Shown(caller.id.as_str()),
        thread_id = %crate::redact::Shown(thread_id.as_str()),
        archived = mark.archived, deleted = mark.deleted, renamed = mark.name.is_some(),
        "thread marked");
    Ok(mark)
}

/// `PATCH {base}/threads/{id}`: rename (`name`) and/or (un)archive (`archived`); the
/// updated record.
async fn update(
    State(s): State<AppState>,
    Path(thread_id): Path<ThreadId>,
    caller: Caller,
    req: Request,
) -> Result<Json<ThreadRecord>, RequestError> {
    let (agent_id, agent, body) = mutated(&s, &caller, &thread_id, req).await?;
    let name = match &body.name {
        None => None,
        Some(Value::String(n)) => {
            let n = n.trim();
            if n.is_empty() || n.chars().count() > MAX_NAME_CHARS {
                return Err(RequestError::InvalidThreadUpdate(format!(
                    "name must be 1 to {MAX_NAME_CHARS} characters"
                )));
            }
            Some(n.to_owned())
        }
        Some(_) => {
            return Err(RequestError::InvalidThreadUpdate(
                "name must be a string".into(),
            ))
        }
    };
    let archived = match &body.archived {
        None => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => {
            return Err(RequestError::InvalidThreadUpdate(
                "archived must be true or false".into(),
            ))
        }
    };
    if name.is_none() && archived.is_none() {
        return Err(RequestError::InvalidThreadUpdate(
            "nothing to change: name or archived".into(),
        ));
    }
    let mark = remark(&s, &caller, &agent, &thread_id, |m| {
        if let Some(name) = name {
            m.name = Some(name);
        }
        if let Some(archived) = archived {
            m.archived = archived;
        }
    })
    .await?;
    // The record as the list shows it.
    let found = find(&s, &caller, &thread_id, Some(&agent_id)).await.ok();
    let summary = found.as_ref().and_then(|f| {
        crate::bridge::threads::summarize(&f.tasks, |_| thread_id.clone())
            .into_iter()
            .next()
    });
    let record = match (summary, found) {
        (Some(summary), Some(found)) => record(
            &caller.id,
            &agent_id,
            &summary,
            Some(&mark),
            Some(&found.tasks),
        ),
        _ => {
            let now = mark.updated_at.clone().unwrap_or_else(epoch);
            ThreadRecord {
                id: thread_id.clone(),
                agent_id,
                name: mark.name.clone(),
                archived: mark.archived,
                created_at: now.clone(),
                updated_at: now,
                last_run_at: None,
                organization_id: "",
                created_by_id: caller.id.to_string(),
            }
        }
    };
    Ok(Json(record))
}

/// `POST {base}/threads/{id}/archive`: `{threadId, archived: true}`.
async fn archive(
    State(s): State<AppState>,
    Path(thread_id): Path<ThreadId>,
    caller: Caller,
    req: Request,
) -> Result<Json<Value>, RequestError> {
    let (_, agent, _) = mutated(&s, &caller, &thread_id, req).await?;
    remark(&s, &caller, &agent, &thread_id, |m| m.archived = true).await?;
    Ok(Json(json!({"threadId": thread_id, "archived": true})))
}

/// `DELETE {base}/threads/{id}` (body `{agentId}`): `{threadId, deleted: true}`. The thread
/// leaves the caller's list; its A2A history stays.
async fn delete(
    State(s): State<AppState>,
    Path(thread_id): Path<ThreadId>,
    caller: Caller,
    req: Request,
) -> Result<Json<Value>, RequestError> {
    let (_, agent, _) = mutated(&s, &caller, &thread_id, req).await?;
    remark(&s, &caller, &agent, &thread_id, |m| m.deleted = true).await?;
    Ok(Json(json!({"threadId": thread_id, "deleted": true})))
}

/// CopilotKit's single-route envelope for these routes (`method: "resource/request"`,
/// `params: {path, httpMethod}`, `body`; `@copilotkit/core` `createSingleRouteResourceRequest`,
/// used when `/info` says `singleRoute.resourceOperations`): the request as it would have come
/// on its own route, with the envelope's caller. Only `/threads` paths are served (CopilotKit
/// also sends `/memories` and `/annotate` this way: Intelligence's, not here).
pub(crate) async fn resource(
    s: AppState,
    parts: &axum::http::request::Parts,
    params: &serde_json::Map<String, Value>,
    body: Option<&Value>,
) -> Result<axum::response::Response, RequestError> {
    use tower::ServiceExt;
    let text = |key: &str| params.get(key).and_then(Value::as_str).unwrap_or_default();
    let (path, method) = (text("path"), text("httpMethod").to_ascii_uppercase());
    let threads =
        path == "/threads" || path.starts_with("/threads/") || path.starts_with("/threads?");
    if !threads {
        return Err(RequestError::InvalidRunInput(format!(
            "params.path must be a /threads path, not {:?}",
            crate::redact::Shown(path)
        )));
    }
    let method: axum::http::Method = match method.as_str() {
        "GET" | "POST" | "PATCH" | "DELETE" => method.parse().map_err(|_| RequestError::NoRoute)?,
        _ => {
            return Err(RequestError::InvalidRunInput(
                "params.httpMethod must be GET, POST, PATCH or DELETE".into(),
            ))
        }
    };
    let base = s.copilotkit_base_path.clone().unwrap_or_default();
    let uri: axum::http::Uri = format!("{base}{path}")
        .parse()
        .map_err(|_| RequestError::InvalidRunInput("params.path is not a path".into()))?;
    let bytes = body
        .map(|b| serde_json::to_vec(b).unwrap_or_default())
        .unwrap_or_default();
    let mut inner = Request::new(axum::body::Body::from(bytes));
    *inner.method_mut() = method;
    *inner.uri_mut() = uri;
    *inner.headers_mut() = parts.headers.clone();
    *inner.extensions_mut() = parts.extensions.clone();
    let router = routes(Some(&base))
        .fallback(|| async { RequestError::NoRoute })
        .method_not_allowed_fallback(|| async { RequestError::MethodNotAllowed })
        .with_state(s);
    Ok(router.oneshot(inner).await.unwrap_or_else(|e| match e {}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::threads::{LastTask, ThreadStatus};
    use crate::ids::{CallerId, TaskId};

    fn task(id: &str, at: &str, history: Value) -> Task {
        serde_json::from_value(json!({"id": id, "contextId": "c",
            "status": {"state": "completed", "timestamp": at}, "history": history}))
        .unwrap()
    }

    fn summary(at: Option<&str>) -> ThreadSummary {
        ThreadSummary {
            context_id: ContextId::new("c"),
            last_task: LastTask {
                id: TaskId::new("t2"),
                state: "completed".into(),
                updated_at: at.map(str::to_owned),
            },
            status: ThreadStatus::Idle,
            thread_id: ThreadId::new("th"),
        }
    }

    #[test]
    fn a_record_names_a_thread_by_its_rename_else_its_first_user_message() {
        let long = "word ".repeat(40);
        let tasks = [
            task(
                "t2",
                "2026-01-02T00:00:00Z",
                json!([
                {"kind": "message", "messageId": "m3", "role": "user", "parts": [{"kind": "text", "text": "second"}]}]),
            ),
            task(
                "t1",
                "2026-01-01T00:00:00Z",
                json!([
                {"kind": "message", "messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": long}]},
                {"kind": "message", "messageId": "m2", "role": "agent", "parts": [{"kind": "text", "text": "reply"}]}]),
            ),
        ];
        let who = CallerId::new("alice");
        let thread = summary(Some("2026-01-02T00:00:00Z"));
        let r = record(&who, "demo", &thread, None, Some(&tasks));
        let name = r.name.clone().unwrap();
        assert_eq!(name.chars().count(), TITLE_CHARS, "{name}");
        assert!(name.starts_with("word word"), "{name}");
        assert_eq!(r.created_at, "2026-01-01T00:00:00Z");
        assert_eq!(r.last_run_at.as_deref(), Some("2026-01-02T00:00:00Z"));
        let body = serde_json::to_value(&r).unwrap();
        assert_eq!(body["organizationId"], "");
        assert_eq!(body["createdById"], "alice");
        assert_eq!(body["agentId"], "demo");
        assert_eq!(body["archived"], false);

        let mark = ThreadMark {
            name: Some("Mine".into()),
            archived: true,
            deleted: false,
            updated_at: Some("2026-02-01T00:00:00Z".into()),
        };
        let r = record(&who, "demo", &thread, Some(&mark), Some(&tasks));
        assert_eq!(r.name.as_deref(), Some("Mine"));
        assert!(r.archived);
        assert_eq!(r.updated_at, "2026-02-01T00:00:00Z");

        // No history read, no time: a name of null, and times that still sort.
        let r = record(&who, "demo", &summary(None), None, None);
        assert_eq!(serde_json::to_value(&r).unwrap()["name"], Value::Null);
        assert_eq!(r.created_at, epoch());
        assert!(serde_json::to_value(&r).unwrap().get("lastRunAt").is_none());
    }

    #[test]
    fn pages_are_bounded_and_cursors_are_ours() {
        let q = |limit: Option<&str>, cursor: Option<&str>| ListQuery {
            limit: limit.map(str::to_owned),
            cursor: cursor.map(str::to_owned),
            ..Default::default()
        };
        assert_eq!(bounds(&q(None, None)).unwrap(), (0, DEFAULT_LIMIT));
        assert_eq!(bounds(&q(Some("5"), Some("10"))).unwrap(), (10, 5));
        for bad in [
            q(Some("0"), None),
            q(Some("101"), None),
            q(Some("x"), None),
            q(None, Some("abc")),
            q(None, Some(&"9".repeat(20))),
        ] {
            assert_eq!(bounds(&bad).unwrap_err().code(), "invalid_query");
        }
    }
}
