//! A run's request AG-UI -> A2A, its plan (docs/design.md#5-run-options,
//! docs/design.md#7-human-in-the-loop, docs/design.md#8-forwarding-lane): what a run asks the
//! upstream to do — which message, to which task, with which options. What else the frontend
//! knows rides along through the forwarding lane ([`super::lane`]).
//!
//! Only the new part of the conversation goes upstream — the latest user message, or the
//! answer to an interrupt — never the transcript: history lives in the A2A server. The user
//! message's AG-UI id becomes its A2A messageId (docs/design.md#4-threads-and-contexts), so
//! history rebuilt from A2A carries the ids the client already holds. threadId and runId are
//! never sent.

use serde::Deserialize;
use serde_json::Value;

use super::dialect::Reply;
use super::interrupt::InterruptId;
use super::lane::{CueOverrides, StateForm};
use super::state::ClientView;
use crate::a2a::model::{OutgoingMessage, Part, PartContent};
use crate::agui::input::{Message, ResumeEntry, ResumeStatus};
use crate::agui::{Role, RunAgentInput};
use crate::error::RequestError;
use crate::ids::{ContextId, TaskId};

/// How to talk to the upstream for this run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Stream,
    Send,
}

/// `forwardedProps.a2a`, parsed (docs/design.md#5-run-options): absent or `null` is the
/// default, a wrong value is `422 invalid_forwarded_props` naming its key, unknown keys are
/// ignored. Read with serde through [`Props`], whose fields spell the keys.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(from = "Props")]
pub(crate) struct RunOptions {
    pub mode: Option<Mode>,
    pub context_id: Option<ContextId>,
    pub task_id: Option<TaskId>,
    pub subscribe_only: bool,
    pub history_length: Option<u32>,
    /// The run's forwarding cues (docs/design.md#5-run-options,
    /// docs/design.md#8-forwarding-lane).
    pub cues: CueOverrides,
}

/// The keys of `forwardedProps.a2a` as they are written, each read by a function that
/// refuses a wrong value with that key's own message. Absent keys are not set.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Props {
    #[serde(deserialize_with = "props::mode")]
    mode: Option<Mode>,
    #[serde(deserialize_with = "props::context_id")]
    context_id: Option<ContextId>,
    #[serde(deserialize_with = "props::task_id")]
    task_id: Option<TaskId>,
    #[serde(deserialize_with = "props::subscribe_only")]
    subscribe_only: bool,
    #[serde(deserialize_with = "props::history_length")]
    history_length: Option<u32>,
    #[serde(deserialize_with = "props::forward_context")]
    forward_context: Option<bool>,
    #[serde(deserialize_with = "props::forward_tools")]
    forward_tools: Option<bool>,
    #[serde(deserialize_with = "props::include_system_messages")]
    include_system_messages: Option<bool>,
    #[serde(deserialize_with = "props::include_developer_messages")]
    include_developer_messages: Option<bool>,
    #[serde(deserialize_with = "props::forward_state")]
    forward_state: Option<Option<StateForm>>,
}

impl From<Props> for RunOptions {
    fn from(p: Props) -> Self {
        Self {
            mode: p.mode,
            context_id: p.context_id,
            task_id: p.task_id,
            subscribe_only: p.subscribe_only,
            history_length: p.history_length,
            cues: CueOverrides {
                context: p.forward_context,
                tools: p.forward_tools,
                system: p.include_system_messages,
                developer: p.include_developer_messages,
                state: p.forward_state,
            },
        }
    }
}

/// One reader per key of [`Props`]: the value's type read by serde, any failure replaced by
/// the key's message (`forwardedProps.a2a.<key> must be …`). `null` reads as absent.
mod props {
    use serde::de::{Deserialize, Deserializer, Error};

    use super::{ContextId, Mode, StateForm, TaskId};

    fn wrong<E: Error>(key: &str, must: &str) -> E {
        E::custom(format!("forwardedProps.a2a.{key} must be {must}"))
    }

    fn string<'de, D: Deserializer<'de>>(d: D, key: &str) -> Result<Option<String>, D::Error> {
        match Option::<String>::deserialize(d) {
            Ok(s) if s.as_deref() != Some("") => Ok(s),
            _ => Err(wrong(key, "a non-empty string")),
        }
    }

    fn flag<'de, D: Deserializer<'de>>(d: D, key: &str) -> Result<Option<bool>, D::Error> {
        Option::<bool>::deserialize(d).map_err(|_| wrong(key, "a boolean"))
    }

    pub(super) fn mode<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Mode>, D::Error> {
        match string(d, "mode")?.as_deref() {
            None => Ok(None),
            Some("stream") => Ok(Some(Mode::Stream)),
            Some("send") => Ok(Some(Mode::Send)),
            Some(other) => Err(wrong(
                "mode",
                &format!("\"stream\" or \"send\", not {other:?}"),
            )),
        }
    }

    pub(super) fn context_id<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<ContextId>, D::Error> {
        Ok(string(d, "contextId")?.map(ContextId::new))
    }

    pub(super) fn task_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<TaskId>, D::Error> {
        Ok(string(d, "taskId")?.map(TaskId::new))
    }

    pub(super) fn subscribe_only<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        flag(d, "subscribeOnly").map(Option::unwrap_or_default)
    }

    pub(super) fn history_length<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        Option::<u32>::deserialize(d).map_err(|_| wrong("historyLength", "a non-negative integer"))
    }

    pub(super) fn forward_context<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<bool>, D::Error> {
        flag(d, "forwardContext")
    }

    pub(super) fn forward_tools<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
        flag(d, "forwardTools")
    }

    pub(super) fn include_system_messages<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<bool>, D::Error> {
        flag(d, "includeSystemMessages")
    }

    pub(super) fn include_developer_messages<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<bool>, D::Error> {
        flag(d, "includeDeveloperMessages")
    }

    /// `true` / `"whole"`, `"patch"`, or `false` (no state).
    pub(super) fn forward_state<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Option<StateForm>>, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Written {
            Flag(bool),
            Form(String),
        }
        let must = || wrong("forwardState", "true, false, \"whole\" or \"patch\"");
        match Option::<Written>::deserialize(d).map_err(|_| must())? {
            None => Ok(None),
            Some(Written::Flag(false)) => Ok(Some(None)),
            Some(Written::Flag(true)) => Ok(Some(Some(StateForm::Whole))),
            Some(Written::Form(f)) if f == "whole" => Ok(Some(Some(StateForm::Whole))),
            Some(Written::Form(f)) if f == "patch" => Ok(Some(Some(StateForm::Patch))),
            Some(Written::Form(_)) => Err(must()),
        }
    }
}

fn bad_props(message: impl Into<String>) -> RequestError {
    RequestError::InvalidForwardedProps(message.into())
}

/// What the run does upstream.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    /// Send a message (new task, or more input for the task `task_id` names).
    Send(OutgoingMessage),
    /// Answer a waiting task (a resume, or a plain message while the task waits,
    /// docs/design.md#7-human-in-the-loop): written in the task's dialect once its current
    /// question is read.
    Answer(Answer),
    /// Cancel the waiting task (a `cancelled` resume).
    Cancel { task_id: TaskId },
    /// Reattach to a live task without sending anything.
    Subscribe { task_id: TaskId },
    /// Refuse the run with `RUN_ERROR` (a resume that cannot be carried out,
    /// docs/design.md#7-human-in-the-loop).
    Refuse(BadResume),
}

/// The parsed intent of one run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    pub options: RunOptions,
    /// `state.a2a.contextId`, for the resolution of docs/design.md#4-threads-and-contexts
    /// ([`super::context`]).
    pub state_context_id: Option<ContextId>,
    pub action: Action,
    /// Interrupts this run resolves, for the activity/state bookkeeping.
    pub resolves: Vec<InterruptId>,
}

/// An answer to a waiting task, before it is written in the task's dialect.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    pub task_id: TaskId,
    /// The A2A messageId of the answer: the user message's id, or `<interruptId>:response`
    /// for a payload (the same for a replayed resume).
    pub message_id: String,
    pub reply: Reply,
    /// The interrupts answered (all of `task_id`).
    pub interrupts: Vec<InterruptId>,
    /// The task came from the client's state only (a plain message while it waits): if the
    /// task no longer waits, the message starts a new task in the same context instead.
    pub from_state: bool,
    /// Set by [`Plan::bind_context`].
    pub context_id: Option<String>,
}

impl Answer {
    /// The answer written as the message for `question` (the task's current one).
    pub(crate) fn message(&self, question: &super::dialect::Question) -> OutgoingMessage {
        let id = self.interrupts.first().map(ToString::to_string);
        let written = super::dialect::answer(question, &self.reply, id.as_deref().unwrap_or(""));
        OutgoingMessage {
            message_id: self.message_id.clone(),
            parts: written.parts,
            context_id: self.context_id.clone(),
            task_id: Some(self.task_id.to_string()),
            metadata: written.metadata,
            extensions: written.extensions,
        }
    }

    /// The user's message as a new task in the context (the waiting task is gone); its parts
    /// move, never copied.
    pub(crate) fn into_new_message(self) -> OutgoingMessage {
        let parts = match self.reply {
            Reply::Message(parts) => parts,
            Reply::Payload(p) => vec![Part::data(p)],
            reply @ Reply::ToolResults(_) => {
                super::dialect::answer(&super::dialect::read(None), &reply, "").parts
            }
        };
        OutgoingMessage {
            message_id: self.message_id,
            parts,
            context_id: self.context_id,
            task_id: None,
            ..OutgoingMessage::default()
        }
    }
}

impl Plan {
    /// The context candidates this plan knows (docs/design.md#4-threads-and-contexts); the
    /// run adds the binding store's.
    pub(crate) fn context_candidates(&self) -> super::context::ContextCandidates {
        super::context::ContextCandidates {
            forwarded_props: self.options.context_id.clone(),
            client_state: self.state_context_id.clone(),
            ..Default::default()
        }
    }

    /// The action, moved out to be carried out (what it sends is never copied); the plan keeps
    /// a `Refuse` with no reason in its place, which nothing reads.
    pub(crate) fn take_action(&mut self) -> Action {
        std::mem::replace(&mut self.action, Action::Refuse(BadResume(String::new())))
    }

    /// Sends the message (if any) in the resolved context: the one place the outgoing
    /// message learns its contextId.
    pub(crate) fn bind_context(&mut self, context_id: Option<&ContextId>) {
        let context_id = || context_id.map(|c| c.as_str().to_owned());
        match &mut self.action {
            Action::Send(m) => m.context_id = context_id(),
            Action::Answer(a) => a.context_id = context_id(),
            _ => {}
        }
    }

    /// The task this run acts on, if it is known before any event.
    pub(crate) fn task_id(&self) -> Option<&str> {
        match &self.action {
            Action::Send(m) => m.task_id.as_deref(),
            Action::Answer(a) => Some(a.task_id.as_str()),
            Action::Cancel { task_id } | Action::Subscribe { task_id } => Some(task_id.as_str()),
            Action::Refuse(_) => None,
        }
    }
}

impl RunOptions {
    /// Reads `forwardedProps.a2a` (none, or not an object: the defaults).
    pub(crate) fn parse(input: &RunAgentInput) -> Result<Self, RequestError> {
        match input.a2a_props() {
            None => Ok(Self::default()),
            Some(props) => Self::deserialize(props).map_err(|e| bad_props(e.to_string())),
        }
    }

    /// The options of a reattach to `task_id` in `context_id` (`subscribeOnly`), as
    /// CopilotKit's `connect` runs it.
    pub(crate) fn subscribe(task_id: TaskId, context_id: ContextId) -> Self {
        Self {
            subscribe_only: true,
            task_id: Some(task_id),
            context_id: Some(context_id),
            ..Self::default()
        }
    }
}

/// `state.a2a`, as the gateway projected it on an earlier run.
fn client_view(input: &RunAgentInput) -> ClientView<'_> {
    ClientView::of(input.state.as_ref())
}

/// The interrupts the client's state says are open (those whose ids are ours).
fn pending_ids(input: &RunAgentInput) -> Option<Vec<InterruptId>> {
    let ids = client_view(input).pending_interrupts()?;
    Some(ids.into_iter().filter_map(InterruptId::parse).collect())
}

/// Every id of the request within `limits.max_id_bytes`
/// (docs/design.md#9-reliability-and-limits): threadId, runId, message ids, resumed interrupt
/// ids, explicit A2A ids.
pub(crate) fn check_ids(input: &RunAgentInput, max: usize) -> Result<(), RequestError> {
    let props = input.a2a_props();
    let prop = |key: &'static str| props.and_then(|p| p.get(key)?.as_str()).map(|v| (key, v));
    let fields = [
        ("threadId", input.thread_id.as_str()),
        ("runId", input.run_id.as_str()),
    ]
    .into_iter()
    .chain(
        input
            .messages
            .iter()
            .map(|m| ("messages[].id", m.id.as_str())),
    )
    .chain(
        input
            .resume
            .iter()
            .map(|r| ("resume[].interruptId", r.interrupt_id.as_str())),
    )
    .chain(prop("contextId"))
    .chain(prop("taskId"));
    for (field, id) in fields {
        if id.len() > max {
            return Err(RequestError::IdTooLong {
                field,
                len: id.len(),
                max,
            });
        }
    }
    Ok(())
}

/// The latest user message of the transcript.
fn latest_user_message(input: &RunAgentInput) -> Option<&Message> {
    input.messages.iter().rev().find(|m| m.role == Role::User)
}

/// Text, file and data parts of an AG-UI message's content (string or `ContentPart[]`,
/// including the legacy `binary` part of 0.0.x clients).
pub(crate) fn content_parts(content: Option<&Value>) -> Vec<Part> {
    match content {
        Some(Value::String(s)) if s.trim().is_empty() => Vec::new(),
        Some(Value::String(s)) => vec![Part::text(s.clone())],
        Some(Value::Array(items)) => items.iter().filter_map(content_part).collect(),
        Some(other @ Value::Object(_)) => vec![Part::data(other.clone())],
        _ => Vec::new(),
    }
}

fn content_part(item: &Value) -> Option<Part> {
    let kind = item.get("type")?.as_str()?;
    let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    match kind {
        "text" => Some(Part::text(
            str_of(item, "text").filter(|t| !t.trim().is_empty())?,
        )),
        "binary" => {
            let content = if let Some(d) = str_of(item, "data") {
                PartContent::Bytes(d)
            } else {
                PartContent::Url(str_of(item, "url")?)
            };
            Some(Part {
                content,
                media_type: str_of(item, "mimeType"),
                filename: str_of(item, "filename"),
                metadata: None,
            })
        }
        "image" | "audio" | "video" | "document" => {
            let source = item.get("source")?;
            let value = str_of(source, "value")?;
            // File URLs are passed through, never fetched
            // (docs/design.md#9-reliability-and-limits).
            let content = match source.get("type").and_then(Value::as_str) {
                Some("data") => PartContent::Bytes(value),
                _ => PartContent::Url(value),
            };
            let filename = item.get("metadata").and_then(|m| str_of(m, "filename"));
            Some(Part {
                content,
                media_type: str_of(source, "mimeType"),
                filename,
                metadata: None,
            })
        }
        _ => Some(Part::data(item.clone())),
    }
}

/// Builds the run's plan with its `options` (read from the input with [`RunOptions::parse`],
/// or given by the route). `Err` is a request problem (422 before the stream).
pub(crate) fn plan(input: &RunAgentInput, options: RunOptions) -> Result<Plan, RequestError> {
    let state_context_id = client_view(input).context_id().map(ContextId::new);
    let user = latest_user_message(input);
    if options.subscribe_only {
        let task_id = options
            .task_id
            .clone()
            .or_else(|| client_view(input).task_id().map(TaskId::new))
            .ok_or(RequestError::NoTask)?;
        return Ok(Plan {
            options,
            state_context_id,
            action: Action::Subscribe { task_id },
            resolves: Vec::new(),
        });
    }
    let results = trailing_tool_results(input);
    if input.resume.is_empty() && !results.is_empty() {
        return Ok(tool_results_plan(input, options, state_context_id, results));
    }
    if input.resume.is_empty() {
        let user = user.ok_or(RequestError::NoUserMessage)?;
        let parts = content_parts(user.content.as_ref());
        if parts.is_empty() {
            return Err(RequestError::EmptyMessage);
        }
        // A client without resume support answers a waiting task with a plain message
        // (docs/design.md#7-human-in-the-loop, last rule); an explicit taskId is sent as given.
        let waiting = client_view(input)
            .waiting_task_id()
            .filter(|_| options.task_id.is_none());
        let action = match waiting {
            Some(task_id) => Action::Answer(Answer {
                task_id: TaskId::new(task_id),
                message_id: user.id.clone(),
                reply: Reply::Message(parts),
                interrupts: pending_ids(input).unwrap_or_default(),
                from_state: true,
                context_id: None,
            }),
            None => Action::Send(OutgoingMessage {
                message_id: user.id.clone(),
                parts,
                context_id: None,
                task_id: options.task_id.clone().map(String::from),
                ..OutgoingMessage::default()
            }),
        };
        let resolves = match &action {
            Action::Send(m) if m.task_id.is_none() => Vec::new(),
            _ => pending_ids(input).unwrap_or_default(),
        };
        return Ok(Plan {
            options,
            state_context_id,
            action,
            resolves,
        });
    }
    let (action, resolves) = match resume_action(input) {
        Ok(resumed) => resumed,
        Err(refusal) => (Action::Refuse(refusal), Vec::new()),
    };
    Ok(Plan {
        options,
        state_context_id,
        action,
        resolves,
    })
}

/// The results of frontend tools that end the transcript (`tool` messages after the
/// assistant's calls), in order, with the id of the first: the run carries them back
/// (docs/design.md#8-forwarding-lane).
fn trailing_tool_results(input: &RunAgentInput) -> Vec<(&Message, String, Value)> {
    let mut results: Vec<(&Message, String, Value)> = input
        .messages
        .iter()
        .rev()
        .take_while(|m| m.role == Role::Tool)
        .filter_map(|m| {
            let id = m.tool_call_id.clone()?;
            Some((m, id, m.content.clone().unwrap_or(Value::Null)))
        })
        .collect();
    results.reverse();
    results
}

/// A run that carries frontend tool results to the task that called the tools (the
/// waiting task of the client's state, or `taskId`), or to a new task in the context when
/// there is none.
fn tool_results_plan(
    input: &RunAgentInput,
    options: RunOptions,
    state_context_id: Option<ContextId>,
    results: Vec<(&Message, String, Value)>,
) -> Plan {
    let message_id = results[0].0.id.clone();
    let reply = Reply::ToolResults(results.into_iter().map(|(_, id, c)| (id, c)).collect());
    let waiting = client_view(input).waiting_task_id().map(TaskId::new);
    let from_state = options.task_id.is_none();
    let action = match options.task_id.clone().or(waiting) {
        Some(task_id) => Action::Answer(Answer {
            task_id,
            message_id,
            reply,
            interrupts: pending_ids(input).unwrap_or_default(),
            from_state,
            context_id: None,
        }),
        None => Action::Send(OutgoingMessage {
            message_id,
            parts: super::dialect::answer(&super::dialect::read(None), &reply, "").parts,
            ..OutgoingMessage::default()
        }),
    };
    let resolves = match &action {
        Action::Answer(_) => pending_ids(input).unwrap_or_default(),
        _ => Vec::new(),
    };
    Plan {
        options,
        state_context_id,
        action,
        resolves,
    }
}

/// Why a resume cannot be carried out (a `RUN_ERROR`, docs/design.md#7-human-in-the-loop).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct BadResume(pub String);

/// Turns `resume[]` into the upstream action. Every entry must be one of our interrupt ids,
/// all for the same task, and (when the client's state lists open interrupts) cover all
/// of them and name no other.
fn resume_action(input: &RunAgentInput) -> Result<(Action, Vec<InterruptId>), BadResume> {
    let entries: &[ResumeEntry] = &input.resume;
    let mut ids: Vec<InterruptId> = Vec::with_capacity(entries.len());
    for e in entries {
        let id = InterruptId::parse(&e.interrupt_id)
            .ok_or_else(|| BadResume(format!("unknown interrupt {:?}", e.interrupt_id)))?;
        if ids
            .first()
            .is_some_and(|first| first.task_id() != id.task_id())
        {
            return Err(BadResume(
                "resume entries name interrupts of different tasks".into(),
            ));
        }
        ids.push(id);
    }
    let task_id = ids
        .first()
        .ok_or_else(|| BadResume("resume is empty".into()))?
        .task_id();
    let task_id = TaskId::new(task_id);
    // Compared by the question they name, however the client spelled them.
    let open = client_view(input).pending_interrupts().unwrap_or_default();
    if !open.is_empty() {
        let open: Vec<(&str, Option<InterruptId>)> = open
            .into_iter()
            .map(|raw| (raw, InterruptId::parse(raw)))
            .collect();
        let is_open = |id: &InterruptId| open.iter().any(|(_, o)| o.as_ref() == Some(id));
        if let Some((stale, _)) = entries.iter().zip(&ids).find(|(_, id)| !is_open(id)) {
            return Err(BadResume(format!(
                "interrupt {:?} is not open on this thread (stale or unknown)",
                stale.interrupt_id
            )));
        }
        if let Some((left, _)) = open
            .iter()
            .find(|(_, o)| o.as_ref().is_none_or(|o| !ids.contains(o)))
        {
            return Err(BadResume(format!("resume leaves interrupt {left:?} open")));
        }
    }
    let resolves = ids;
    let entry = &entries[0];
    if entries.iter().any(|e| e.status == ResumeStatus::Cancelled) {
        return Ok((Action::Cancel { task_id }, resolves));
    }
    let user = latest_user_message(input);
    let (reply, message_id) = match (&entry.payload, user) {
        (Some(payload), _) => (
            Reply::Payload(payload.clone()),
            format!("{}:response", resolves[0]),
        ),
        (None, Some(user)) => (
            Reply::Message(content_parts(user.content.as_ref())),
            user.id.clone(),
        ),
        (None, None) => {
            return Err(BadResume(
                "resume has no payload and the run carries no user message".into(),
            ))
        }
    };
    let answer = Answer {
        task_id,
        message_id,
        reply,
        interrupts: resolves.clone(),
        from_state: false,
        context_id: None,
    };
    Ok((Action::Answer(answer), resolves))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input(v: Value) -> RunAgentInput {
        serde_json::from_value(v).unwrap()
    }

    /// The plan of a run whose options are its own `forwardedProps.a2a`.
    fn plan(input: &RunAgentInput) -> Result<Plan, RequestError> {
        super::plan(input, RunOptions::parse(input)?)
    }

    #[test]
    fn sends_only_the_latest_user_message_with_its_id() {
        let i = input(json!({"threadId": "t", "runId": "r", "messages": [
            {"id": "u1", "role": "user", "content": "first"},
            {"id": "a1", "role": "assistant", "content": "ok"},
            {"id": "u2", "role": "user", "content": [{"type": "text", "text": "second"}]}
        ]}));
        let p = plan(&i).unwrap();
        let Action::Send(m) = p.action else { panic!() };
        assert_eq!(m.message_id, "u2");
        assert_eq!(m.parts, vec![Part::text("second")]);
        assert_eq!(
            m.context_id, None,
            "a threadId is never sent as a contextId"
        );
        assert_eq!(m.task_id, None);
    }

    #[test]
    fn context_comes_from_props_then_state() {
        let base = json!({"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "x"}],
            "state": {"a2a": {"contextId": "from-state"}}});
        let resolved = |v: Value| plan(&input(v)).unwrap().context_candidates().resolve();
        assert_eq!(resolved(base.clone()).unwrap().0.as_str(), "from-state");
        let mut with_props = base;
        with_props["forwardedProps"] = json!({"a2a": {"contextId": "from-props"}});
        assert_eq!(resolved(with_props).unwrap().0.as_str(), "from-props");
    }

    #[test]
    fn a_plain_message_answers_a_waiting_task() {
        let i = input(
            json!({"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "yes"}],
            "state": {"a2a": {"contextId": "c", "task": {"id": "T", "state": "input-required"}}}}),
        );
        let mut p = plan(&i).unwrap();
        let context = p.context_candidates().resolve().map(|(c, _)| c);
        p.bind_context(context.as_ref());
        let Action::Answer(a) = p.action else {
            panic!()
        };
        assert!(a.from_state);
        assert_eq!(a.task_id.as_str(), "T");
        assert_eq!(a.context_id.as_deref(), Some("c"));
    }

    #[test]
    fn bad_options_and_empty_transcripts_are_rejected() {
        let bad = input(
            json!({"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "x"}],
            "forwardedProps": {"a2a": {"mode": "fast"}}}),
        );
        assert_eq!(plan(&bad).unwrap_err().code(), "invalid_forwarded_props");
        let empty = input(json!({"threadId": "t", "runId": "r", "messages": []}));
        assert_eq!(plan(&empty).unwrap_err().code(), "no_user_message");
        let blank = input(
            json!({"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "  "}]}),
        );
        assert_eq!(plan(&blank).unwrap_err().code(), "empty_message");
    }

    #[test]
    fn run_options_read_every_key_and_name_the_one_that_is_wrong() {
        let options = |a2a: Value| {
            let body = json!({"threadId": "t", "runId": "r", "messages": [],
                "forwardedProps": {"a2a": a2a, "other": 1}});
            RunOptions::parse(&input(body))
        };
        let all = options(json!({"mode": "send", "contextId": "c", "taskId": "t",
            "subscribeOnly": true, "historyLength": 3, "forwardContext": true,
            "forwardTools": false, "includeSystemMessages": true, "includeDeveloperMessages": null,
            "forwardState": "patch", "unknownKey": [1]}))
        .unwrap();
        assert_eq!(
            all,
            RunOptions {
                mode: Some(Mode::Send),
                context_id: Some(ContextId::new("c")),
                task_id: Some(TaskId::new("t")),
                subscribe_only: true,
                history_length: Some(3),
                cues: CueOverrides {
                    context: Some(true),
                    tools: Some(false),
                    system: Some(true),
                    developer: None,
                    state: Some(Some(StateForm::Patch)),
                },
            }
        );
        let nulls = json!({"mode": null, "contextId": null, "subscribeOnly": null,
            "historyLength": null, "forwardState": null});
        for defaults in [json!({}), nulls, json!("not an object"), json!(null)] {
            assert_eq!(options(defaults).unwrap(), RunOptions::default());
        }
        for (state, form) in [
            (json!(true), Some(StateForm::Whole)),
            (json!("whole"), Some(StateForm::Whole)),
            (json!(false), None),
        ] {
            let read = options(json!({"forwardState": state})).unwrap();
            assert_eq!(read.cues.state, Some(form));
        }
        // The messages of before, word for word.
        for (a2a, message) in [
            (
                json!({"mode": "fast"}),
                r#"forwardedProps.a2a.mode must be "stream" or "send", not "fast""#,
            ),
            (
                json!({"mode": 1}),
                "forwardedProps.a2a.mode must be a non-empty string",
            ),
            (
                json!({"contextId": ""}),
                "forwardedProps.a2a.contextId must be a non-empty string",
            ),
            (
                json!({"taskId": {}}),
                "forwardedProps.a2a.taskId must be a non-empty string",
            ),
            (
                json!({"subscribeOnly": "yes"}),
                "forwardedProps.a2a.subscribeOnly must be a boolean",
            ),
            (
                json!({"historyLength": -1}),
                "forwardedProps.a2a.historyLength must be a non-negative integer",
            ),
            (
                json!({"historyLength": 1.5}),
                "forwardedProps.a2a.historyLength must be a non-negative integer",
            ),
            (
                json!({"historyLength": 5_000_000_000u64}),
                "forwardedProps.a2a.historyLength must be a non-negative integer",
            ),
            (
                json!({"forwardContext": 1}),
                "forwardedProps.a2a.forwardContext must be a boolean",
            ),
            (
                json!({"forwardTools": "true"}),
                "forwardedProps.a2a.forwardTools must be a boolean",
            ),
            (
                json!({"includeSystemMessages": []}),
                "forwardedProps.a2a.includeSystemMessages must be a boolean",
            ),
            (
                json!({"includeDeveloperMessages": 0}),
                "forwardedProps.a2a.includeDeveloperMessages must be a boolean",
            ),
            (
                json!({"forwardState": "diff"}),
                r#"forwardedProps.a2a.forwardState must be true, false, "whole" or "patch""#,
            ),
            (
                json!({"forwardState": 1}),
                r#"forwardedProps.a2a.forwardState must be true, false, "whole" or "patch""#,
            ),
        ] {
            let e = options(a2a.clone()).unwrap_err();
            assert_eq!(e.code(), "invalid_forwarded_props");
            assert_eq!(e.to_string(), message, "{a2a}");
        }
    }

    #[test]
    fn resume_sends_the_answer_to_the_same_task() {
        let i = input(json!({"threadId": "t", "runId": "r", "messages": [],
            "state": {"a2a": {"contextId": "c", "pendingInterrupts": {"a2a:T:q": {}}}},
            "resume": [{"interruptId": "a2a:T:q", "status": "resolved", "payload": {"approved": true, "text": "yes"}}]}));
        let p = plan(&i).unwrap();
        assert_eq!(p.resolves, vec![InterruptId::parse("a2a:T:q").unwrap()]);
        assert_eq!(p.state_context_id, Some(ContextId::new("c")));
        let Action::Answer(a) = p.action else {
            panic!()
        };
        assert_eq!(a.message_id, "a2a:T:q:response");
        let question = super::super::dialect::read(None);
        let m = a.message(&question);
        assert_eq!(m.task_id.as_deref(), Some("T"));
        assert_eq!(m.parts[0], Part::text("yes"));
        assert!(
            matches!(&m.parts[1].content, PartContent::Data(d) if d["type"] == "a2a.input.response")
        );
    }

    #[test]
    fn a_resume_names_its_task_whatever_its_ids_hold() {
        // docs/identity.md "Interrupt ids": the task id as it is, the tail escaped.
        for (raw, task, tail) in [
            ("a2a:ns:T:1:q", "ns:T:1", "q"),
            ("a2a:50%:é:q%3A1%25", "50%:é", "q:1%"),
            ("a2a:ü✓:input-required", "ü✓", "input-required"),
        ] {
            let i = input(json!({"threadId": "t", "runId": "r", "messages": [],
                "state": {"a2a": {"pendingInterrupts": {raw: {}}}},
                "resume": [{"interruptId": raw, "status": "resolved", "payload": "yes"}]}));
            let p = plan(&i).unwrap();
            assert_eq!(p.resolves[0].tail(), tail);
            let Action::Answer(a) = p.action else {
                panic!("{raw}")
            };
            assert_eq!(a.task_id.as_str(), task);
            assert_eq!(a.message_id, format!("{raw}:response"));
            let cancel = input(json!({"threadId": "t", "runId": "r", "messages": [],
                "resume": [{"interruptId": raw, "status": "cancelled"}]}));
            assert_eq!(
                plan(&cancel).unwrap().action,
                Action::Cancel {
                    task_id: TaskId::new(task)
                }
            );
        }
    }

    #[test]
    fn an_open_interrupt_is_matched_by_the_question_it_names() {
        // The state and the resume spell one question differently (`%3a` / `%3A`).
        let i = input(json!({"threadId": "t", "runId": "r", "messages": [],
            "state": {"a2a": {"pendingInterrupts": {"a2a:T:m%3a1": {}}}},
            "resume": [{"interruptId": "a2a:T:m%3A1", "status": "resolved", "payload": "y"}]}));
        assert!(matches!(plan(&i).unwrap().action, Action::Answer(_)));
        let other_task = input(json!({"threadId": "t", "runId": "r", "messages": [],
            "resume": [{"interruptId": "a2a:T:1:q", "status": "resolved", "payload": "y"},
                {"interruptId": "a2a:T:2:q", "status": "resolved", "payload": "y"}]}));
        assert!(matches!(
            plan(&other_task).unwrap().action,
            Action::Refuse(_)
        ));
    }

    #[test]
    fn frontend_tool_results_answer_the_waiting_task() {
        let i = input(json!({"threadId": "t", "runId": "r", "messages": [
            {"id": "u", "role": "user", "content": "pick a color"},
            {"id": "a", "role": "assistant", "toolCalls": [{"id": "call-1", "type": "function",
                "function": {"name": "pick_color", "arguments": "{}"}}]},
            {"id": "tool-1", "role": "tool", "toolCallId": "call-1", "content": "red"}],
            "state": {"a2a": {"contextId": "c", "task": {"id": "T", "state": "input-required"}}}}));
        let p = plan(&i).unwrap();
        let Action::Answer(a) = p.action else {
            panic!()
        };
        assert_eq!(a.task_id.as_str(), "T");
        assert_eq!(a.message_id, "tool-1");
        let question: crate::a2a::model::Message = serde_json::from_value(json!({
            "messageId": "q", "role": "agent", "parts": [{"kind": "data", "data": {
                "type": "agui-tool-call", "toolCallId": "call-1", "name": "pick_color", "args": {}}}]}))
        .unwrap();
        let m = a.message(&super::super::dialect::read(Some(&question)));
        assert_eq!(
            m.parts,
            vec![Part::data(
                json!({"type": "agui-tool-result", "toolCallId": "call-1", "content": "red"})
            )]
        );
    }

    #[test]
    fn resume_rejects_stale_and_partial_answers() {
        let stale = input(json!({"threadId": "t", "runId": "r", "messages": [],
            "state": {"a2a": {"pendingInterrupts": {"a2a:T:q": {}}}},
            "resume": [{"interruptId": "a2a:T:old", "status": "resolved", "payload": "y"}]}));
        assert!(matches!(plan(&stale).unwrap().action, Action::Refuse(_)));
        let unknown = input(json!({"threadId": "t", "runId": "r", "messages": [],
            "resume": [{"interruptId": "nope", "status": "resolved", "payload": "y"}]}));
        assert!(matches!(plan(&unknown).unwrap().action, Action::Refuse(_)));
    }

    #[test]
    fn ids_over_the_limit_are_refused_naming_the_field() {
        let long = "x".repeat(300);
        for (field, body) in [
            (
                "threadId",
                json!({"threadId": long, "runId": "r", "messages": []}),
            ),
            (
                "runId",
                json!({"threadId": "t", "runId": long, "messages": []}),
            ),
            (
                "messages[].id",
                json!({"threadId": "t", "runId": "r", "messages": [{"id": long, "role": "user", "content": "x"}]}),
            ),
            (
                "contextId",
                json!({"threadId": "t", "runId": "r", "messages": [], "forwardedProps": {"a2a": {"contextId": long}}}),
            ),
        ] {
            let e = check_ids(&input(body), 256).unwrap_err();
            assert_eq!(e.code(), "id_too_long");
            assert!(e.to_string().starts_with(field), "{e}");
        }
        let ok = json!({"threadId": "t", "runId": "r", "messages": [{"id": "m", "role": "user", "content": "x"}]});
        assert!(check_ids(&input(ok), 256).is_ok());
    }
}
