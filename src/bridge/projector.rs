//! The projection A2A -> AG-UI (docs/design.md#6-projection-a2a-to-ag-ui, `docs/mapping.md`):
//! pure, synchronous, no I/O, no clock, no randomness.
//!
//! Invariants of the events a [`Projector`] returns, over its whole life:
//! - `RUN_STARTED` comes first (held back until the A2A contextId is known,
//!   docs/design.md#4-threads-and-contexts), immediately followed by one `STATE_SNAPSHOT`;
//! - exactly one terminal event (`RUN_FINISHED` or `RUN_ERROR`) comes last, and nothing after;
//! - every `TEXT_MESSAGE_START` is closed before `RUN_FINISHED`;
//! - every `STATE_DELTA` applies cleanly to the state before it (checked on the shadow);
//! - every `REASONING_START` / `REASONING_MESSAGE_START` is closed before the terminal event;
//! - every `SUBAGENT_STARTED` is closed (`SUBAGENT_FINISHED` / `SUBAGENT_ERROR`) before the
//!   terminal event, and none is started twice;
//! - 1.0-only shapes (`cancelled` outcome, `usage`, `SUBAGENT_*`) only for clients that
//!   declared AG-UI 1.0.
//!
//! This module holds the run's lifecycle (a [`Phase`]: not started, running with its shadow
//! state, finished) and the task and status events; a message's parts are [`parts`]', an
//! artifact's [`artifacts`]', delegation to other agents [`subagents`]'.

use std::collections::{HashMap, HashSet};

use serde_json::{json, Map, Value};

use super::dialect;
use super::dialect::Dialect;
use super::interrupt::{self, InterruptId};
use super::reply::{Voice, Voices};
use super::state::{self, add, layout, Op, Refusal, Shadow, StateLimits, Writer};
use super::tools::{self, ToolItem};
use super::usage::{Tally, Tokens};
use super::{history, lane};
use crate::a2a::model::{Part, Role, StatusUpdate, StreamEvent, Task, TaskState, TaskStatus};
use crate::agui::event::TokenUsage;
use crate::agui::input::Message as ClientMessage;
use crate::agui::{Event, Interrupt, Outcome};
use crate::error::RunError;
use json_patch::jsonptr::PointerBuf;

mod artifacts;
mod parts;
mod subagents;

use artifacts::ArtifactTrack;
use parts::raw_event;

/// What the projector needs to know about the run before the first upstream event.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunFrame {
    pub thread_id: String,
    pub run_id: String,
    /// The client declared AG-UI 1.0 (`protocolVersion: "1.0"`).
    pub v1_client: bool,
    /// The client's state; moved into the shadow when the run starts.
    pub client_state: Option<Value>,
    /// Known before the run (resume, explicit ids, client context ids).
    pub context_id: Option<String>,
    pub task_id: Option<String>,
    /// `limits.max_artifact_bytes_per_run`.
    pub max_artifact_bytes: usize,
    /// `limits.max_text_bytes_per_run`.
    pub max_text_bytes: usize,
    /// What the state document is held to.
    pub state_limits: StateLimits,
    /// The app's state goes to the agent: the run ends by recording the digests of what it
    /// projected (`/a2a/stateDigests`), the base of the next run's state patch
    /// (`docs/forwarding.md`).
    pub state_digests: bool,
    /// `subagents`: how delegation shows to a client that did not declare 1.0.
    pub subagents: crate::config::Subagents,
    /// `subagent_tools`: the agent's tools that are other agents.
    pub subagent_tools: Vec<String>,
    /// Interrupts this run answers: once the upstream accepts the answer their activity
    /// moves to `stage: "resolved"` and `/a2a/pendingInterrupts` empties
    /// (docs/design.md#7-human-in-the-loop).
    pub resolves: Vec<InterruptId>,
}

impl RunFrame {
    /// A frame held to `limits` (text, artifacts, state); the rest is the run's to fill in.
    /// `Default` alone would allow nothing.
    pub(crate) fn limited(limits: &crate::config::Limits) -> Self {
        Self {
            max_artifact_bytes: limits.max_artifact_bytes_per_run.get(),
            max_text_bytes: limits.max_text_bytes_per_run.get(),
            state_limits: StateLimits::from_config(limits),
            ..Self::default()
        }
    }
}

/// A run's life: `RUN_STARTED` not sent yet (the A2A contextId is awaited), running with the
/// client state as projected so far, or finished (its terminal event went out; the state as
/// it ended stays readable, nothing more is projected).
#[derive(Debug)]
enum Phase {
    NotStarted,
    Running(Shadow),
    Finished(Option<Shadow>),
}

impl Phase {
    fn is_finished(&self) -> bool {
        matches!(self, Phase::Finished(_))
    }

    /// The state as projected so far (or as the run ended).
    fn shadow(&self) -> Option<&Shadow> {
        match self {
            Phase::Running(shadow) | Phase::Finished(Some(shadow)) => Some(shadow),
            _ => None,
        }
    }

    /// The state a running run may still change.
    fn running_mut(&mut self) -> Option<&mut Shadow> {
        match self {
            Phase::Running(shadow) => Some(shadow),
            _ => None,
        }
    }

    /// The terminal event goes out: the run is finished, its state kept.
    fn finish(&mut self) {
        let shadow = match std::mem::replace(self, Phase::NotStarted) {
            Phase::Running(shadow) => Some(shadow),
            Phase::Finished(shadow) => shadow,
            Phase::NotStarted => None,
        };
        *self = Phase::Finished(shadow);
    }
}

/// Projects one run's A2A stream into AG-UI events.
#[derive(Debug)]
pub(crate) struct Projector {
    frame: RunFrame,
    /// Where the run is in its life, with the client state as projected so far.
    phase: Phase,
    saw_task: bool,
    saw_reply: bool,
    /// Which AG-UI message each piece of agent text, answer or reasoning, goes to (one
    /// reply, one message).
    voices: Voices,
    /// The token usage the agent reported in this run.
    usage: Tally,
    artifacts: HashMap<String, ArtifactTrack>,
    surfaces: HashSet<String>,
    /// Tool calls and results projected in this run, by call id.
    tool_calls: HashSet<String>,
    tool_results: HashSet<String>,
    artifact_bytes: usize,
    /// Text accepted from the upstream so far (`limits.max_text_bytes_per_run`).
    text_bytes: usize,
    anonymous: usize,
    /// The upstream accepted this run's message (its first event came): the interrupts the
    /// run answers are resolved.
    accepted: bool,
    /// Interrupt ids whose waiting status, re-published at the head of the answer's stream,
    /// is history and not the outcome (docs/design.md#7-human-in-the-loop; the a2a-js SDK opens
    /// with the task).
    answered: Vec<InterruptId>,
    /// Every event so far was such a re-published status.
    only_stale: bool,
    /// The task id and state `/a2a/task` shows now.
    projected_task: Option<(String, TaskState)>,
    /// The delegations to other agents seen in this run.
    subagents: subagents::Tracked,
}

impl Projector {
    /// A projector for one run.
    pub(crate) fn new(frame: RunFrame) -> Self {
        Self {
            frame,
            phase: Phase::NotStarted,
            saw_task: false,
            saw_reply: false,
            voices: Voices::default(),
            usage: Tally::default(),
            artifacts: HashMap::new(),
            surfaces: HashSet::new(),
            tool_calls: HashSet::new(),
            tool_results: HashSet::new(),
            artifact_bytes: 0,
            text_bytes: 0,
            anonymous: 0,
            accepted: false,
            answered: Vec::new(),
            only_stale: true,
            projected_task: None,
            subagents: subagents::Tracked::default(),
        }
    }

    /// The run answers the interrupt `id` (its task's current question): a status of the
    /// task still waiting on it at the head of the stream is the old snapshot, not the
    /// outcome.
    pub(crate) fn answering(&mut self, id: InterruptId) {
        self.answered.push(id);
    }

    /// True if `event` re-publishes a status this run answers
    /// (docs/design.md#7-human-in-the-loop): the a2a-js SDK opens every execution with the
    /// task as it was, still waiting on the old question.
    fn is_stale_snapshot(&self, event: &StreamEvent) -> bool {
        match event {
            StreamEvent::Task(t) => self.is_stale_status(&t.id, &t.status),
            StreamEvent::StatusUpdate(u) => self.is_stale_status(&u.task_id, &u.status),
            _ => false,
        }
    }

    /// True if `status` of `task_id` still waits on a question this run answers.
    fn is_stale_status(&self, task_id: &str, status: &TaskStatus) -> bool {
        status.state.is_interrupted() && {
            let id = InterruptId::of_status(task_id, status);
            self.answered.contains(&id) || self.frame.resolves.contains(&id)
        }
    }

    /// The upstream accepted the answer (docs/design.md#7-human-in-the-loop): the answered
    /// interrupts are resolved now, not before — a refused answer leaves them pending.
    fn accept(&mut self, out: &mut Vec<Event>) {
        if self.accepted || self.phase.is_finished() {
            return;
        }
        self.accepted = true;
        if self.frame.resolves.is_empty() {
            return;
        }
        self.delta(
            vec![state::replace(layout::pending_interrupts(), json!({}))],
            Writer::Gateway,
            out,
        );
        for id in &self.frame.resolves {
            out.push(Event::ActivityDelta {
                message_id: id.to_string(),
                activity_type: interrupt::ACTIVITY_TYPE.into(),
                patch: vec![state::replace(
                    PointerBuf::from_tokens(["stage"]),
                    json!("resolved"),
                )],
            });
        }
    }

    /// True once the upstream accepted the run's message (its first event came).
    pub(crate) fn was_accepted(&self) -> bool {
        self.accepted
    }

    /// True once the terminal event was returned.
    pub(crate) fn is_finished(&self) -> bool {
        self.phase.is_finished()
    }

    /// The A2A context id bound to this run, once known.
    pub(crate) fn context_id(&self) -> Option<&str> {
        self.frame.context_id.as_deref()
    }

    /// The state document as projected so far (once the run started).
    pub(crate) fn state(&self) -> Option<&Value> {
        self.phase.shadow().map(Shadow::doc)
    }

    /// The A2A task id of this run, once known.
    pub(crate) fn task_id(&self) -> Option<&str> {
        self.frame.task_id.as_deref()
    }

    /// `RUN_STARTED` + `STATE_SNAPSHOT` right away when the context is already known;
    /// otherwise nothing (they wait for the first upstream event).
    pub(crate) fn start(&mut self) -> Vec<Event> {
        let mut out = Vec::new();
        if self.frame.context_id.is_some() {
            self.ensure_started(&mut out);
        }
        out
    }

    /// Projects one upstream event.
    pub(crate) fn apply(&mut self, event: &StreamEvent) -> Vec<Event> {
        let mut out = Vec::new();
        if self.phase.is_finished() {
            return out;
        }
        // A message's taskId names the task it belongs to, not this run's (A2A 1.0 §3.1.2).
        let task_id = match event {
            StreamEvent::Message(_) => None,
            _ => event.task_id(),
        };
        self.learn_ids(event.context_id(), task_id);
        self.ensure_started(&mut out);
        self.accept(&mut out);
        if self.only_stale && self.is_stale_snapshot(event) {
            return out;
        }
        self.only_stale = false;
        self.count_usage(event);
        match event {
            StreamEvent::Task(task) => self.on_task(task, &mut out),
            StreamEvent::Message(msg) => {
                self.on_message(msg, false, &mut out);
                // A message before any task is the whole reply (A2A 1.0 §3.1.2).
                if !self.saw_task {
                    self.saw_reply = true;
                    self.finish_success(&mut out);
                }
            }
            StreamEvent::StatusUpdate(update) => self.on_status(update, &mut out),
            StreamEvent::ArtifactUpdate(update) => self.on_artifact_update(update, &mut out),
            StreamEvent::Unknown(raw) => out.push(raw_event(raw.clone())),
        }
        end_at_terminal(&mut out);
        out
    }

    /// Reattaches to a live task from its snapshot (`subscribeOnly`,
    /// docs/design.md#5-run-options): the run's start, a complete `MESSAGES_SNAPSHOT` (the
    /// client's messages merged with the task's history,
    /// docs/design.md#4-threads-and-contexts), then the snapshot's state; messages already in
    /// the snapshot are not streamed again.
    pub(crate) fn reattach(
        &mut self,
        task: &Task,
        client_messages: &[ClientMessage],
    ) -> Vec<Event> {
        let Some(mut out) = self.start_from(task) else {
            return Vec::new();
        };
        self.accept(&mut out);
        out.push(Event::MessagesSnapshot {
            messages: history::merge(client_messages, history::messages(&[task])),
        });
        self.mark_shown(task);
        // Still waiting on the question this run answers (another run's answer is on its
        // way): not the outcome; the run follows the task.
        if self.is_stale_status(&task.id, &task.status) {
            return out;
        }
        self.on_task(task, &mut out);
        end_at_terminal(&mut out);
        out
    }

    /// Picks up a conversation the client has not seen
    /// (docs/design.md#4-threads-and-contexts): the run starts in `context_id` with a
    /// `MESSAGES_SNAPSHOT` of its earlier turns (`tasks`, oldest first), then the client's
    /// own turns A2A does not hold yet (its new message) as text messages: `@ag-ui/client`
    /// keeps the messages it holds in its own order and appends the rest, so the new message
    /// would otherwise stay before the history. Nothing of the history is streamed again.
    pub(crate) fn pick_up(
        &mut self,
        context_id: &str,
        tasks: &[&Task],
        client_messages: &[ClientMessage],
    ) -> Vec<Event> {
        let mut out = Vec::new();
        if self.phase.is_finished() {
            return out;
        }
        self.learn_ids(Some(context_id), None);
        self.ensure_started(&mut out);
        let earlier = history::messages(tasks);
        let unheld = history::unheld_turns(client_messages, &earlier);
        out.push(Event::MessagesSnapshot { messages: earlier });
        for (id, role, text) in unheld {
            let message_id = id.to_owned();
            out.push(Event::TextMessageStart {
                message_id: message_id.clone(),
                role,
            });
            if !text.is_empty() {
                out.push(Event::TextMessageContent {
                    message_id: message_id.clone(),
                    delta: text,
                });
            }
            out.push(Event::TextMessageEnd { message_id });
        }
        for task in tasks {
            self.mark_shown(task);
        }
        out
    }

    /// Starts (if not yet) from a task snapshot; `None` once the run is finished.
    fn start_from(&mut self, task: &Task) -> Option<Vec<Event>> {
        if self.phase.is_finished() {
            return None;
        }
        self.learn_ids(task.context_id.as_deref(), Some(&task.id));
        let mut out = Vec::new();
        self.ensure_started(&mut out);
        Some(out)
    }

    /// Adopts the upstream's context and task ids where the run does not know them yet
    /// (late binding, docs/design.md#4-threads-and-contexts).
    fn learn_ids(&mut self, context_id: Option<&str>, task_id: Option<&str>) {
        if self.frame.context_id.is_none() {
            self.frame.context_id = context_id.map(str::to_owned);
        }
        if self.frame.task_id.is_none() {
            self.frame.task_id = task_id.map(str::to_owned);
        }
    }

    /// Records the agent text and tool calls of a task snapshot as already shown (they went
    /// out in a `MESSAGES_SNAPSHOT`), so projecting the snapshot does not stream them again.
    fn mark_shown(&mut self, task: &Task) {
        for m in task.history.iter().chain(task.status.message.iter()) {
            if m.role == Role::User {
                continue;
            }
            if !m.message_id.is_empty() {
                self.shown(&m.message_id, &m.parts);
            }
            self.tools_shown(&m.parts);
        }
        for artifact in &task.artifacts {
            let key = history::artifact_key(&task.id, artifact);
            self.shown(
                &history::artifact_message_id(&task.id, &key),
                &artifact.parts,
            );
            self.tools_shown(&artifact.parts);
        }
    }

    /// Records the answer and reasoning text of `parts`, from `source`, as already shown.
    fn shown(&mut self, source: &str, parts: &[Part]) {
        let (answer, reasoning) = dialect::split_text(parts);
        self.voices.shown(Voice::Answer, source, &answer);
        if !reasoning.is_empty() {
            self.voices.shown(Voice::Reasoning, source, &reasoning);
        }
    }

    /// Records the tool calls and results among `parts` as already shown.
    fn tools_shown(&mut self, parts: &[Part]) {
        for item in tools::in_parts(parts) {
            match item {
                ToolItem::Call { id, .. } => self.tool_calls.insert(id),
                ToolItem::Result { id, .. } => self.tool_results.insert(id),
            };
        }
    }

    /// Projects a resubscribe snapshot after a dropped stream: first the agent messages of
    /// its history that came after `after_message_id` (this run's own message) and were
    /// missed while the stream was down, then the snapshot itself. Nothing already streamed
    /// is repeated.
    pub(crate) fn apply_recovered(
        &mut self,
        task: &Task,
        after_message_id: Option<&str>,
    ) -> Vec<Event> {
        let Some(mut out) = self.start_from(task) else {
            return Vec::new();
        };
        self.accept(&mut out);
        self.count_task_usage(task);
        let start = after_message_id
            .and_then(|id| task.history.iter().position(|m| m.message_id == id))
            .map_or(task.history.len(), |i| i + 1);
        for m in &task.history[start..] {
            self.on_message(m, false, &mut out);
        }
        self.on_task(task, &mut out);
        end_at_terminal(&mut out);
        out
    }

    /// The upstream stream ended. `Some` with the closing events if the run is complete
    /// (or was already finished); `None` if the task is still open and needs recovery.
    pub(crate) fn end_of_stream(&mut self) -> Option<Vec<Event>> {
        if self.phase.is_finished() {
            return Some(Vec::new());
        }
        if self.saw_reply {
            let mut out = Vec::new();
            self.finish_success(&mut out);
            return Some(out);
        }
        None
    }

    /// Ends the run with `RUN_ERROR` (no-op if already finished).
    pub(crate) fn fail(&mut self, error: &RunError) -> Vec<Event> {
        let mut out = Vec::new();
        if self.phase.is_finished() {
            return out;
        }
        self.ensure_started(&mut out);
        self.close_messages(&mut out);
        self.abandon_subagents(&mut out);
        self.phase.finish();
        out.push(Event::RunError {
            message: error.to_string(),
            code: Some(error.code().into()),
            usage: self.usage_for_client(),
        });
        out
    }

    /// The token usage the agent reported in this run so far (`None`: none).
    pub(crate) fn usage(&self) -> Option<Tokens> {
        self.usage.total()
    }

    /// `usage` of the terminal event: AG-UI 1.0 defines it, so 1.0 clients get it
    /// (docs/design.md#6-projection-a2a-to-ag-ui); older ones get none.
    fn usage_for_client(&self) -> Option<Vec<TokenUsage>> {
        let usage = self.usage.total().filter(|_| self.frame.v1_client)?;
        Some(vec![usage.to_wire()])
    }

    /// Takes the usage reports of one upstream event (`usage` module header: a report on
    /// the event itself, else on its message or artifact).
    fn count_usage(&mut self, event: &StreamEvent) {
        let (report, on_task) = match event {
            StreamEvent::Task(task) => return self.count_task_usage(task),
            StreamEvent::Message(m) => (dialect::usage_in(m.metadata.as_ref()), false),
            StreamEvent::StatusUpdate(u) => {
                let message = u.status.message.as_ref().and_then(|m| m.metadata.as_ref());
                let last = u.status.state.is_terminal() || u.status.state.is_interrupted();
                let report =
                    dialect::usage_in(u.metadata.as_ref()).or_else(|| dialect::usage_in(message));
                (report, last)
            }
            StreamEvent::ArtifactUpdate(a) => {
                let report = dialect::usage_in(a.metadata.as_ref())
                    .or_else(|| dialect::usage_in(a.artifact.metadata.as_ref()));
                (report, false)
            }
            StreamEvent::Unknown(_) => (None, false),
        };
        if let Some(report) = report {
            self.usage.report(report, on_task);
        }
    }

    /// A task snapshot's reports: every one repeats what its calls reported.
    fn count_task_usage(&mut self, task: &Task) {
        let status = task
            .status
            .message
            .as_ref()
            .and_then(|m| m.metadata.as_ref());
        let reports = [task.metadata.as_ref(), status]
            .into_iter()
            .chain(task.artifacts.iter().map(|a| a.metadata.as_ref()))
            .filter_map(dialect::usage_in);
        for report in reports {
            self.usage.report(report, true);
        }
    }

    /// Ends the run as cancelled: `{type: "cancelled"}` for 1.0 clients, a plain
    /// `RUN_FINISHED` for older ones (docs/design.md#6-projection-a2a-to-ag-ui).
    pub(crate) fn cancelled(&mut self) -> Vec<Event> {
        let mut out = Vec::new();
        if !self.phase.is_finished() {
            self.ensure_started(&mut out);
            self.finish_cancelled(&mut out);
        }
        out
    }

    /// Emits a `STATE_DELTA` for `ops` after checking and applying them on the shadow
    /// (`state.rs`). Ops that would not apply are dropped with a `RAW` note, never sent;
    /// ops over a limit end the run with `limit_exceeded`.
    fn delta(&mut self, ops: Vec<Op>, writer: Writer, out: &mut Vec<Event>) {
        if ops.is_empty() || self.phase.is_finished() {
            return;
        }
        let Some(shadow) = self.phase.running_mut() else {
            return;
        };
        match shadow.apply(&ops, writer) {
            Ok(()) => out.push(Event::StateDelta { delta: ops }),
            Err(Refusal::Invalid(reason)) => out.push(raw_event(
                json!({"gatewayNote": "state patch skipped", "reason": reason, "patch": ops}),
            )),
            Err(Refusal::Limit(reason)) => out.extend(self.fail(&RunError::LimitExceeded(reason))),
        }
    }

    /// Counts `n` more bytes of upstream text against `limits.max_text_bytes_per_run`;
    /// `false` (and the run ended with `limit_exceeded`) past it.
    fn charge_text(&mut self, n: usize, out: &mut Vec<Event>) -> bool {
        self.text_bytes = self.text_bytes.saturating_add(n);
        if self.text_bytes <= self.frame.max_text_bytes {
            return true;
        }
        let msg = format!(
            "the upstream sent more than limits.max_text_bytes_per_run ({} bytes) of text",
            self.frame.max_text_bytes
        );
        out.extend(self.fail(&RunError::LimitExceeded(msg)));
        false
    }

    fn ensure_started(&mut self, out: &mut Vec<Event>) {
        if !matches!(self.phase, Phase::NotStarted) {
            return;
        }
        let mut a2a = Map::new();
        if let Some(c) = &self.frame.context_id {
            a2a.insert("contextId".into(), json!(c));
        }
        if let Some(t) = &self.frame.task_id {
            a2a.insert("taskId".into(), json!(t));
        }
        out.push(Event::RunStarted {
            thread_id: self.frame.thread_id.clone(),
            run_id: self.frame.run_id.clone(),
            metadata: (!a2a.is_empty()).then(|| json!({ "a2a": a2a })),
        });
        let shadow = Shadow::new(
            self.frame.client_state.take(),
            self.frame.context_id.as_deref(),
            self.frame.state_limits,
        );
        out.push(Event::StateSnapshot {
            snapshot: shadow.snapshot(),
        });
        self.phase = Phase::Running(shadow);
    }

    fn on_task(&mut self, task: &Task, out: &mut Vec<Event>) {
        self.saw_task = true;
        for artifact in &task.artifacts {
            self.on_artifact(&task.id, artifact, false, true, out);
        }
        self.on_status_of(&task.id, task.context_id.as_deref(), &task.status, out);
    }

    fn on_status(&mut self, update: &StatusUpdate, out: &mut Vec<Event>) {
        self.saw_task = true;
        self.on_status_of(
            &update.task_id,
            update.context_id.as_deref(),
            &update.status,
            out,
        );
    }

    fn on_status_of(
        &mut self,
        task_id: &str,
        context_id: Option<&str>,
        status: &TaskStatus,
        out: &mut Vec<Event>,
    ) {
        let state = &status.state;
        // Failure and cancel texts go to RUN_ERROR / state, not to the chat.
        let chat = !state.is_failure();
        if let (Some(msg), true) = (&status.message, chat) {
            // A question's data parts are the interrupt's request, not events of their own.
            self.on_message(msg, state.is_interrupted(), out);
        }
        // The status text without its thoughts: `/a2a/task`, a failure's message.
        let status_text = status.message.as_ref().map(dialect::answer_text);
        // docs/design.md#6-projection-a2a-to-ag-ui: `/a2a/task` when the state changes, and
        // on the task's last status — not for every chunk of a working task.
        let last = state.is_terminal() || state.is_interrupted();
        let changed = self
            .projected_task
            .as_ref()
            .is_none_or(|(id, s)| id != task_id || s != state);
        if changed || last {
            self.projected_task = Some((task_id.to_owned(), state.clone()));
            self.project_task(task_id, status, status_text.as_deref(), out);
        }
        if self.phase.is_finished() {
            return;
        }
        let message = status_text.filter(|t| !t.is_empty());
        match state {
            TaskState::Completed => {
                self.complete_artifacts(out);
                self.finish_success(out)
            }
            TaskState::Canceled => self.finish_cancelled(out),
            TaskState::Failed => {
                let m = message.unwrap_or_else(|| "The A2A task failed.".into());
                out.extend(self.fail(&RunError::TaskFailed(m)));
            }
            TaskState::Rejected => {
                let m = message.unwrap_or_else(|| "The A2A agent rejected the task.".into());
                out.extend(self.fail(&RunError::TaskRejected(m)));
            }
            TaskState::InputRequired | TaskState::AuthRequired => {
                let asked = dialect::read(status.message.as_ref());
                // docs/design.md#8-forwarding-lane: the agent waits for frontend tools; the
                // run ends for the app to run them, and their results answer the task on the
                // next run.
                if let (TaskState::InputRequired, Dialect::FrontendTools { call_ids }) =
                    (state, &asked.dialect)
                {
                    let pending_tool_call_ids = call_ids.clone();
                    self.finish(
                        Outcome::Success {
                            pending_tool_call_ids,
                        },
                        out,
                    );
                    return;
                }
                let context = context_id.or(self.frame.context_id.as_deref());
                let pending = interrupt::Pending::from_status(
                    task_id,
                    context.unwrap_or_default(),
                    status,
                    asked,
                );
                self.finish_interrupted(pending, out);
            }
            TaskState::Submitted | TaskState::Working | TaskState::Unknown(_) => {}
        }
    }

    /// `STATE_DELTA add /a2a/task` for `status` of `task_id`.
    fn project_task(
        &mut self,
        task_id: &str,
        status: &TaskStatus,
        text: Option<&str>,
        out: &mut Vec<Event>,
    ) {
        let task = state::TaskEntry {
            id: task_id.into(),
            state: status.state.as_str().into(),
            message: text.filter(|t| !t.is_empty()).map(Into::into),
            updated_at: status.timestamp.as_deref().map(Into::into),
        };
        self.delta(
            vec![add(layout::task(), task.to_value())],
            Writer::Gateway,
            out,
        );
    }

    fn finish_success(&mut self, out: &mut Vec<Event>) {
        self.finish(
            Outcome::Success {
                pending_tool_call_ids: Vec::new(),
            },
            out,
        );
    }

    fn finish_cancelled(&mut self, out: &mut Vec<Event>) {
        self.finish(Outcome::Cancelled, out);
    }

    /// Records what the app state looks like at the run's end, for the next run's state
    /// patch (only when the lane forwards the state).
    fn record_state_digests(&mut self, out: &mut Vec<Event>) {
        let Some(shadow) = self.phase.shadow().filter(|_| self.frame.state_digests) else {
            return;
        };
        let digests = lane::digests(&lane::app_state(Some(shadow.doc())));
        self.delta(
            vec![add(layout::state_digests(), digests)],
            Writer::Gateway,
            out,
        );
    }

    /// Closes what is open and ends the run with `RUN_FINISHED`. The outcome goes to AG-UI
    /// 1.0 clients only: older ones read an absent outcome as success and reject
    /// `cancelled` (agui.md §2.1, §10).
    fn finish(&mut self, outcome: Outcome, out: &mut Vec<Event>) {
        if self.phase.is_finished() {
            return;
        }
        self.close_messages(out);
        self.abandon_subagents(out);
        self.record_state_digests(out);
        if self.phase.is_finished() {
            return;
        }
        self.phase.finish();
        out.push(Event::RunFinished {
            thread_id: self.frame.thread_id.clone(),
            run_id: self.frame.run_id.clone(),
            outcome: self.frame.v1_client.then_some(outcome),
            usage: self.usage_for_client(),
        });
    }

    /// docs/design.md#7-human-in-the-loop: close messages, flush state
    /// (`/a2a/pendingInterrupts/<id>`), announce the
    /// activity, then `RUN_FINISHED` with the interrupt outcome.
    fn finish_interrupted(&mut self, pending: interrupt::Pending, out: &mut Vec<Event>) {
        if self.phase.is_finished() {
            return;
        }
        self.close_messages(out);
        let id = pending.id.to_string();
        self.suspend_subagents(&id, pending.tool_call_id.as_deref(), out);
        self.record_state_digests(out);
        let entry = pending.state_entry();
        self.delta(
            vec![add(layout::pending_interrupt(&id), entry)],
            Writer::Gateway,
            out,
        );
        if self.phase.is_finished() {
            return;
        }
        out.push(Event::ActivitySnapshot {
            message_id: id,
            activity_type: interrupt::ACTIVITY_TYPE.into(),
            content: pending.activity_content("awaiting_input"),
            replace: None,
        });
        self.phase.finish();
        out.push(Event::RunFinished {
            thread_id: self.frame.thread_id.clone(),
            run_id: self.frame.run_id.clone(),
            outcome: Some(Outcome::Interrupt {
                interrupts: vec![Interrupt::from(&pending)],
            }),
            usage: self.usage_for_client(),
        });
    }
}

/// Drops anything after the first terminal event (the run's last event,
/// docs/design.md#6-projection-a2a-to-ag-ui).
fn end_at_terminal(out: &mut Vec<Event>) {
    if let Some(i) = out.iter().position(Event::is_terminal) {
        out.truncate(i + 1);
    }
}

#[cfg(test)]
#[path = "projector_tests.rs"]
mod tests;
