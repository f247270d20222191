//! One AG-UI run, end to end: the only async orchestration in the gateway.
//!
//! A run is a task owned by its response stream ([`RunEvents`]): it makes the upstream A2A
//! calls, feeds the projector, and hands each upstream event's AG-UI events to the response
//! as one batch over a bounded channel (framing is the HTTP layer's). A stream dropped early
//! (the client left) aborts the run and its upstream request.
//!
//! What lives here and nowhere else: timeouts between upstream events (first event, idle,
//! whole run) and the events-per-run limit (the route streams, so no HTTP layer can time
//! it); recovery of a dropped upstream stream (resubscribe, bounded, with backoff; the
//! projector keeps recovered text from repeating); cancel-on-disconnect; binding the thread
//! to its context. What does not: any translation (the projector), any rule of the envelope.
//! The projector is the one record of whether the run started and ended; whatever happens —
//! an upstream failure, a timeout, shutdown, even a panic — the run ends through
//! [`Projector::fail`], so the client gets `RUN_STARTED` + `STATE_SNAPSHOT` first and exactly
//! one terminal event last.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt};
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use reqwest::header::{HeaderName, HeaderValue};

use crate::a2a::client::{ClientError, EventStream};
use crate::a2a::model::{OutgoingMessage, ProtocolVersion, StreamEvent, Task};
use crate::a2a::rpc_code;
use crate::agui::input::Message as ClientMessage;
use crate::agui::Outcome;
use crate::agui::{Event, RunAgentInput};
use crate::binding::{BindingStore, ThreadRecord};
use crate::bridge::context::ContextSource;
use crate::bridge::request::{Action, Answer, Mode, Plan};
use crate::bridge::{dialect, interrupt, lane};
use crate::bridge::{Projector, RunFrame};
use crate::config::{ContextIds, Limits, TimeoutSettings};
use crate::error::RunError;
use crate::metrics::{Metrics, OpenStream, RunOutcome};
use crate::redact::Shown;
use crate::registry::{self, with_identity, Agent, Registry, Resolved};
use crate::telemetry::{RunEnd, RunTrace};

/// Pick-up reads at most this many `ListTasks` pages of this many tasks, each task with at
/// most [`PICK_UP_HISTORY`] messages (every page is bounded by `limits.max_event_bytes`, all
/// of them together by `timeouts.upstream_call`).
const PICK_UP_PAGES: usize = 5;
const PICK_UP_PAGE_SIZE: u32 = 50;
const PICK_UP_HISTORY: u32 = 200;
/// Resubscribe attempts after the upstream stream drops.
const RECOVERY_ATTEMPTS: u32 = 3;
/// Event batches buffered between the run and its response, so at most this many batches
/// are held for a slow client.
const CHANNEL_CAPACITY: usize = 16;
/// Read path batching (`pump`): the upstream events already delivered are projected into
/// one batch while it holds only text (at most this many upstream events and
/// [`MAX_BATCH_TEXT_BYTES`] of it); any other event ends the batch. A batch thus holds what
/// one upstream event makes, or at most that much text: a slow client costs at most
/// [`CHANNEL_CAPACITY`] of them, as before batching.
const MAX_BATCH_EVENTS: usize = 64;
const MAX_BATCH_TEXT_BYTES: usize = 64 * 1024;

/// How a read batch left the stream.
enum Batch {
    /// The run finished (its terminal event is sent).
    Finished,
    /// Still open: read on.
    Open,
    /// Reading ahead met the stream's end or an error, handled next.
    Ended(Box<Option<Result<StreamEvent, ClientError>>>),
}

/// Everything a run needs, handed over by the HTTP handler.
pub(crate) struct RunRequest {
    pub agent: Arc<Agent>,
    pub registry: Arc<Registry>,
    pub bindings: Arc<BindingStore>,
    pub input: RunAgentInput,
    pub plan: Plan,
    pub limits: Limits,
    pub timeouts: TimeoutSettings,
    /// Held for the run's lifetime (`limits.max_concurrent_runs`).
    pub permit: OwnedSemaphorePermit,
    /// Becomes `true` when the gateway stops: open runs end with `RUN_ERROR`.
    pub stop: tokio::sync::watch::Receiver<bool>,
    /// The caller's identity: the owner of the thread's binding (DESIGN §11).
    pub owner: String,
    /// The caller may see contexts not created through the gateway (DESIGN §11), so a
    /// threadId the upstream knows as a context may be picked up.
    pub may_pick_up: bool,
    pub metrics: Arc<Metrics>,
    /// The run's span, when traces are on (DESIGN §10).
    pub trace: Option<RunTrace>,
}

/// The run's measures (DESIGN §10): events sent, how it ended, how long it took; recorded
/// once, when the terminal event goes out, or when the run is dropped without one (the
/// client left).
struct RunMeter {
    metrics: Arc<Metrics>,
    agent: String,
    started: std::time::Instant,
    trace: Option<RunTrace>,
    /// `(outcome, error code)` of the terminal event, once sent.
    ended: Mutex<Option<(RunOutcome, Option<String>)>>,
    /// What the run span's end says of the task, filled by the run as it learns it.
    task: Mutex<TaskFacts>,
}

#[derive(Default)]
struct TaskFacts {
    context_id: Option<String>,
    task_id: Option<String>,
    state: Option<String>,
}

impl RunMeter {
    /// Counts `events` and notes the terminal one.
    fn sent(&self, events: &[Event]) {
        self.metrics.events_sent(&self.agent, events.len());
        let Some(last) = events.last().filter(|e| e.is_terminal()) else {
            return;
        };
        let ended = match last {
            Event::RunError { code, .. } => (RunOutcome::Error, code.clone()),
            Event::RunFinished {
                outcome: Some(Outcome::Interrupt { .. }),
                ..
            } => (RunOutcome::Interrupt, None),
            Event::RunFinished {
                outcome: Some(Outcome::Cancelled),
                ..
            } => (RunOutcome::Cancelled, None),
            _ => (RunOutcome::Success, None),
        };
        if let Ok(mut slot) = self.ended.lock() {
            slot.get_or_insert(ended);
        }
    }

    /// The run's task as last known (for the span).
    fn learn(&self, projector: &Projector) {
        if let Ok(mut facts) = self.task.lock() {
            facts.context_id = projector.context_id().map(str::to_owned);
            facts.task_id = projector.task_id().map(str::to_owned);
            facts.state = projector.state().and_then(|s| {
                s.pointer("/a2a/task/state")
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_owned)
            });
        }
    }
}

impl Drop for RunMeter {
    fn drop(&mut self) {
        let ended = self.ended.lock().ok().and_then(|mut e| e.take());
        // A run dropped before its terminal event: the client left.
        let (outcome, code) =
            ended.unwrap_or((RunOutcome::Error, Some("client_disconnected".to_owned())));
        self.metrics.run_ended(
            &self.agent,
            outcome,
            code.as_deref(),
            self.started.elapsed(),
        );
        if let Some(trace) = &self.trace {
            let facts = self
                .task
                .lock()
                .map(|mut f| std::mem::take(&mut *f))
                .unwrap_or_default();
            trace.end(RunEnd {
                context_id: facts.context_id.as_deref(),
                task_id: facts.task_id.as_deref(),
                task_state: facts.state.as_deref(),
                outcome: outcome.as_str(),
                error: code.as_deref(),
            });
        }
    }
}

/// The client went away (or read nothing for `timeouts.client_write`); stop quietly.
struct Disconnected;

/// Hands event batches to the response.
#[derive(Clone)]
struct Sink {
    tx: mpsc::Sender<Vec<Event>>,
    /// `timeouts.client_write`: a client that takes nothing for this long is gone. (The
    /// connection's write timeout closes it; this ends the run even if it did not.)
    client_write: Duration,
    meter: Arc<RunMeter>,
}

impl Sink {
    async fn emit(&self, events: Vec<Event>) -> Result<(), Disconnected> {
        if events.is_empty() {
            return Ok(());
        }
        self.meter.sent(&events);
        match tokio::time::timeout(self.client_write, self.tx.send(events)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(Disconnected),
            Err(_) => {
                tracing::info!("the client read nothing within timeouts.client_write; run ended");
                Err(Disconnected)
            }
        }
    }
}

/// The AG-UI event batches of one run, in order. Dropping it early aborts the run.
pub(crate) struct RunEvents {
    /// The run's task, aborted (with its upstream request) if the client leaves first.
    run: Option<tokio::task::JoinHandle<()>>,
    rx: mpsc::Receiver<Vec<Event>>,
    /// The task to cancel if the client leaves first (`cancel_on_disconnect`).
    cancel_on_drop: Arc<Mutex<Option<CancelOnDrop>>>,
    /// Counts the stream in `agui_gateway_open_streams` while it is open.
    _open: OpenStream,
}

struct CancelOnDrop {
    client: crate::a2a::client::Client,
    task_id: String,
}

impl Stream for RunEvents {
    type Item = Vec<Event>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Vec<Event>>> {
        let polled = self.rx.poll_recv(cx);
        if let Poll::Ready(None) = polled {
            // The run is over and its sender dropped: whatever was left has been handed on.
            self.run = None;
        }
        polled
    }
}

impl Drop for RunEvents {
    fn drop(&mut self) {
        let Some(run) = self.run.take() else { return };
        if run.is_finished() {
            return;
        }
        run.abort();
        tracing::info!("client disconnected before the run ended");
        let pending = self.cancel_on_drop.lock().ok().and_then(|mut c| c.take());
        if let Some(CancelOnDrop { client, task_id }) = pending {
            // Bounded by `timeouts.upstream_call` like every unary call.
            tokio::spawn(async move {
                let task = Shown(&task_id);
                match client.cancel_task(&task_id).await {
                    Ok(_) => {
                        tracing::info!(task_id = %task, "task cancelled after client disconnect")
                    }
                    Err(e) => {
                        tracing::warn!(task_id = %task, error = %e, "cancel on disconnect failed")
                    }
                }
            });
        }
    }
}

/// Starts the run; its events arrive in batches on the returned stream.
pub(crate) fn start(req: RunRequest) -> RunEvents {
    let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
    let agent = req.agent.settings.name.clone();
    let open = req.metrics.stream_opened(&agent);
    let sink = Sink {
        tx,
        client_write: req.timeouts.client_write,
        meter: Arc::new(RunMeter {
            metrics: req.metrics.clone(),
            agent,
            started: std::time::Instant::now(),
            trace: req.trace.clone(),
            ended: Mutex::new(None),
            task: Mutex::new(TaskFacts::default()),
        }),
    };
    let cancel_on_drop = Arc::new(Mutex::new(None));
    let run = tokio::spawn(drive(Box::new(req), sink, cancel_on_drop.clone()));
    RunEvents {
        run: Some(run),
        rx,
        cancel_on_drop,
        _open: open,
    }
}

/// Prepares and executes the run, ending it through the projector whatever happens.
///
/// The request, the run and their futures live in boxes: a future's size is that of its
/// largest state, so the task then holds what the current step needs, not every step's
/// state for the whole stream (memory per open stream, docs/performance.md).
async fn drive(req: Box<RunRequest>, sink: Sink, cancel_on_drop: Arc<Mutex<Option<CancelOnDrop>>>) {
    let (thread_id, run_id) = (req.input.thread_id.clone(), req.input.run_id.clone());
    let run_timeout = req.timeouts.run;
    let mut stop = req.stop.clone();
    let preparing = sink.clone();
    let prepared =
        Box::pin(async move { Box::new(Run::prepare(*req, preparing, cancel_on_drop).await) });
    let prepared = std::panic::AssertUnwindSafe(prepared).catch_unwind().await;
    let mut run = match prepared {
        Ok(run) => run,
        Err(_) => {
            tracing::error!(thread_id = %Shown(&thread_id), run_id = %Shown(&run_id), "run panicked");
            let _ = sink.emit(unprepared_failure(thread_id, run_id)).await;
            return;
        }
    };
    let executed = std::panic::AssertUnwindSafe(Box::pin(run.execute())).catch_unwind();
    let ended = tokio::select! {
        result = tokio::time::timeout(run_timeout, executed) => match result {
            Ok(Ok(_)) => None,
            Ok(Err(_panic)) => {
                tracing::error!(thread_id = %Shown(&thread_id), run_id = %Shown(&run_id), "run panicked");
                Some(RunError::Internal)
            }
            Err(_) => Some(RunError::UpstreamTimeout(format!(
                "the run exceeded timeouts.run ({} ms)",
                run_timeout.as_millis()
            ))),
        },
        _ = stop.wait_for(|stopped| *stopped) => Some(RunError::Shutdown),
    };
    // Every path above ends the run; should one not have, it still gets its terminal event.
    let error = ended.unwrap_or(RunError::Internal);
    let events = run.projector.fail(&error);
    let _ = run.sink.emit(events).await;
    run.disarm_cancel();
    run.sink.meter.learn(&run.projector);
}

/// The text an event carries if it is a text message event (its delta), else `None`: the
/// weight of a batch in [`Run::pump`].
fn text_bytes_of(event: &Event) -> Option<usize> {
    match event {
        Event::TextMessageContent { delta, .. } => Some(delta.len()),
        Event::TextMessageStart { .. } | Event::TextMessageEnd { .. } => Some(0),
        _ => None,
    }
}

/// The events of a run whose preparation panicked.
fn unprepared_failure(thread_id: String, run_id: String) -> Vec<Event> {
    let mut projector = Projector::new(RunFrame {
        thread_id,
        run_id,
        ..RunFrame::default()
    });
    projector.fail(&RunError::Internal)
}

struct Run {
    thread_id: String,
    /// The caller's identity, the owner of the thread's binding.
    owner: String,
    /// The client's transcript, for a complete `MESSAGES_SNAPSHOT` on reattach.
    client_messages: Vec<ClientMessage>,
    agent: Arc<Agent>,
    registry: Arc<Registry>,
    bindings: Arc<BindingStore>,
    plan: Plan,
    limits: Limits,
    timeouts: TimeoutSettings,
    projector: Projector,
    sink: Sink,
    upstream_events: u64,
    /// Held for the run's lifetime (`limits.max_concurrent_runs`).
    _permit: OwnedSemaphorePermit,
    cancel_on_drop: Arc<Mutex<Option<CancelOnDrop>>>,
    /// The contextId was written to the binding store.
    bound: bool,
    /// What the binding store held for the thread (reading it renewed it).
    stored_binding: Option<String>,
    /// The task `cancel_on_drop` is armed for.
    armed_task: Option<String>,
    /// The last task recorded for the thread in the binding store.
    recorded_task: Option<String>,
    /// The A2A messageId this run sent, to find its place in task history on recovery.
    sent_message_id: Option<String>,
    /// The threadId is asked of the upstream as a known context before the message goes.
    pick_up: bool,
    /// What the forwarding lane adds to the message's metadata (DESIGN §8).
    lane: serde_json::Map<String, serde_json::Value>,
    /// The run's span, parent of each upstream call's (DESIGN §10).
    trace: Option<RunTrace>,
    /// When the run started, for `agui_gateway_time_to_first_event_seconds`.
    started: std::time::Instant,
    first_event_seen: bool,
}

/// The upstream no longer takes input on this task: unknown, or finished (A2A 1.0 §3.3.2,
/// transcripts §2.33-2.34).
fn is_stale_task(e: &ClientError) -> bool {
    e.is_task_not_found()
        || matches!(e, ClientError::Rpc(rpc) if rpc.code == rpc_code::UNSUPPORTED_OPERATION)
}

impl Run {
    /// Resolves the context id (DESIGN §4, [`crate::bridge::context`]) and builds the
    /// projector. The client's state moves into the projector: it is never copied.
    async fn prepare(
        req: RunRequest,
        sink: Sink,
        cancel_on_drop: Arc<Mutex<Option<CancelOnDrop>>>,
    ) -> Self {
        let RunRequest {
            agent,
            registry,
            bindings,
            mut input,
            mut plan,
            limits,
            timeouts,
            permit,
            stop: _,
            may_pick_up,
            owner,
            metrics: _,
            trace,
        } = req;
        let mut candidates = plan.context_candidates();
        if candidates.needs_binding() {
            let (agent, thread) = (&agent.settings.name, &input.thread_id);
            candidates.binding = bindings.get(&owner, agent, thread).await;
        }
        if agent.settings.context_ids == ContextIds::Client {
            candidates.thread_id = Some(input.thread_id.clone());
        }
        let cues = lane::Cues::defaults(&agent.settings.forward).with(&plan.options.cues);
        let carried = lane::carry(&input, &cues);
        let stored_binding = candidates.binding.clone();
        let resolved = candidates.resolve();
        let pick_up = may_pick_up
            && ContextSource::asks_upstream(resolved.as_ref().map(|(_, source)| *source))
            && matches!(&plan.action, Action::Send(m) if m.task_id.is_none());
        let context_id = resolved.map(|(id, _)| id);
        plan.bind_context(context_id.as_deref());
        let frame = RunFrame {
            thread_id: input.thread_id.clone(),
            run_id: input.run_id.clone(),
            v1_client: input.is_v1_client(),
            client_state: input.state.take(),
            context_id,
            task_id: plan.task_id().map(str::to_owned),
            resolves: match plan.action {
                Action::Refuse(_) => Vec::new(),
                _ => plan.resolves.clone(),
            },
            // Whenever the agent is given the state, what it was given is recorded.
            state_digests: cues.state.is_some(),
            ..RunFrame::limited(&limits)
        };
        Self {
            thread_id: std::mem::take(&mut input.thread_id),
            owner,
            client_messages: std::mem::take(&mut input.messages),
            agent,
            registry,
            bindings,
            plan,
            limits,
            timeouts,
            projector: Projector::new(frame),
            sink,
            upstream_events: 0,
            _permit: permit,
            cancel_on_drop,
            bound: false,
            stored_binding,
            armed_task: None,
            recorded_task: None,
            sent_message_id: None,
            pick_up,
            lane: carried,
            trace,
            started: std::time::Instant::now(),
            first_event_seen: false,
        }
    }

    async fn fail(&mut self, error: RunError) -> Result<(), Disconnected> {
        let events = self.projector.fail(&error);
        self.sink.emit(events).await
    }

    async fn fail_with(&mut self, e: &ClientError) -> Result<(), Disconnected> {
        self.fail(RunError::from(e)).await
    }

    /// Hands `events` on after the bookkeeping their ids allow.
    async fn emit(&mut self, events: Vec<Event>) -> Result<(), Disconnected> {
        self.after_apply().await;
        self.sink.emit(events).await
    }

    async fn apply(&mut self, event: &StreamEvent) -> Result<(), Disconnected> {
        let mut events = Vec::new();
        self.project(event, &mut events);
        self.emit(events).await
    }

    /// Projects one upstream event, its AG-UI events appended to `out`.
    fn project(&mut self, event: &StreamEvent, out: &mut Vec<Event>) {
        self.first_event();
        out.extend(self.projector.apply(event));
    }

    /// The upstream's first event of the run (`agui_gateway_time_to_first_event_seconds`).
    fn first_event(&mut self) {
        if !self.first_event_seen {
            self.first_event_seen = true;
            let agent = &self.agent.settings.name;
            self.sink
                .meter
                .metrics
                .first_event(agent, self.started.elapsed());
        }
    }

    /// Bookkeeping once ids are known: bind the thread to its context (DESIGN §4) and arm
    /// the cancel-on-disconnect for the task.
    async fn after_apply(&mut self) {
        if !self.bound {
            if let Some(context_id) = self.projector.context_id().map(str::to_owned) {
                let agent = &self.agent.settings.name;
                let thread = &self.thread_id;
                if self.stored_binding.as_deref() != Some(context_id.as_str()) {
                    // Boxed, as every rare await of the run: a future's size is that of its
                    // largest state, held for the whole stream (memory per open stream).
                    Box::pin(self.bindings.put(&self.owner, agent, thread, &context_id)).await;
                }
                self.bound = true;
            }
        }
        // The thread's last task, once per task (the thread list of upstreams without
        // `ListTasks` reads its status from it).
        let task = self.projector.task_id();
        if task.is_some() && task != self.recorded_task.as_deref() {
            if let (Some(task_id), Some(context_id)) = (task, self.projector.context_id()) {
                let record = ThreadRecord {
                    thread_id: self.thread_id.clone(),
                    context_id: context_id.to_owned(),
                    task_id: Some(task_id.to_owned()),
                };
                let agent = &self.agent.settings.name;
                Box::pin(self.bindings.put_task(&self.owner, agent, &record)).await;
                self.recorded_task = record.task_id;
            }
        }
        if !self.agent.settings.cancel_on_disconnect {
            return;
        }
        // Re-armed only when the task to cancel changes, not on every event.
        let wanted = (!self.projector.is_finished())
            .then(|| self.projector.task_id().map(str::to_owned))
            .flatten();
        if wanted == self.armed_task {
            return;
        }
        let armed = match (&wanted, self.agent.resolved(), self.identity()) {
            (Some(task_id), Some(upstream), Ok(identity)) => Some(CancelOnDrop {
                client: with_identity(&upstream.client, identity),
                task_id: task_id.clone(),
            }),
            _ => None,
        };
        if let Ok(mut slot) = self.cancel_on_drop.lock() {
            *slot = armed;
        }
        self.armed_task = wanted;
    }

    /// The caller identity header every upstream call of this run carries.
    fn identity(&self) -> Result<Option<(HeaderName, HeaderValue)>, RunError> {
        registry::caller_identity(&self.agent.settings, &self.owner)
            .map_err(RunError::UpstreamUnavailable)
    }

    fn disarm_cancel(&self) {
        if let Ok(mut slot) = self.cancel_on_drop.lock() {
            *slot = None;
        }
    }

    async fn execute(&mut self) -> Result<(), Disconnected> {
        let early = self.projector.start();
        self.sink.emit(early).await?;
        if let Action::Refuse(reason) = &self.plan.action {
            let error = RunError::InvalidResume(reason.0.clone());
            return self.fail(error).await;
        }
        // Boxed, like every step below: execute's future lives as long as the run, so a
        // step's state must not size it (memory per open stream, docs/performance.md).
        let upstream = match Box::pin(self.registry.resolve(&self.agent)).await {
            Ok(r) => r,
            Err(e) => {
                let msg = format!("agent {} is not reachable: {e}", self.agent.settings.name);
                return self.fail(RunError::UpstreamUnavailable(msg)).await;
            }
        };
        // Every call of the run goes through this resolution: with the caller identity if
        // the agent forwards it.
        let upstream = match (self.identity(), &self.trace) {
            (Ok(None), None) => upstream,
            (Ok(identity), trace) => {
                let client = with_identity(&upstream.client, identity);
                upstream.with_client(match trace {
                    Some(t) => client.traced(t.clone()),
                    None => client,
                })
            }
            (Err(e), _) => return self.fail(e).await,
        };
        if self.pick_up {
            Box::pin(self.pick_up(&upstream)).await?;
        }
        match self.plan.action.clone() {
            Action::Refuse(_) => Ok(()),
            Action::Cancel { task_id } => Box::pin(self.cancel(&upstream, &task_id)).await,
            Action::Subscribe { task_id } => {
                Box::pin(self.subscribe_only(&upstream, &task_id)).await
            }
            Action::Send(message) => Box::pin(self.send_or_fail(&upstream, &message)).await,
            Action::Answer(answer) => Box::pin(self.answer(&upstream, &answer)).await,
        }
    }

    /// Sends `message`, ending the run with the upstream's error if it refuses.
    async fn send_or_fail(
        &mut self,
        upstream: &Resolved,
        message: &OutgoingMessage,
    ) -> Result<(), Disconnected> {
        let mut message = message.clone();
        let force = self.agent.settings.force_extensions;
        lane::attach(
            &mut message,
            &self.lane,
            |uri| upstream.card.declares_extension(uri),
            force,
        );
        let message = &message;
        self.sent_message_id = Some(message.message_id.clone());
        let streaming = upstream.streaming && self.plan.options.mode != Some(Mode::Send);
        match self.send(upstream, message, streaming).await {
            Ok(()) => Ok(()),
            Err(e) => Box::pin(self.fail_with(&e)).await,
        }
    }

    /// DESIGN §7 resume: the task's current question is read first (GetTask), so the answer
    /// goes out in the dialect of that question, and only while the task still waits on the
    /// interrupt answered: a replayed resume sends nothing and follows the task instead. A
    /// plain message for a task that no longer waits (or is gone) starts a new task.
    async fn answer(&mut self, upstream: &Resolved, answer: &Answer) -> Result<(), Disconnected> {
        let task = match upstream.client.get_task(&answer.task_id, None).await {
            Ok(task) => Some(task),
            Err(e) if answer.from_state && is_stale_task(&e) => None,
            Err(e) => return self.fail_with(&e).await,
        };
        let Some(task) = task else {
            tracing::info!("the waiting task in the client's state is gone; starting a new task");
            return self.send_or_fail(upstream, &answer.as_new_message()).await;
        };
        let asked = task
            .status
            .state
            .is_interrupted()
            .then(|| interrupt::interrupt_id(&task.id, &task.status));
        // The question answered: the task's current one, or — when the task still waits but
        // its status lost the question (strands keeps the task waiting after refusing an
        // answer, its status without the message) — the one the interrupt id names.
        let question = match &asked {
            Some(id) if answer.from_state || answer.interrupts.contains(id) => {
                task.status.message.as_ref()
            }
            Some(_) if task.status.message.is_none() => answer
                .interrupts
                .iter()
                .filter_map(|i| interrupt::message_of(i))
                .find_map(|m| task.history.iter().rev().find(|h| h.message_id == m)),
            _ => None,
        };
        match (asked, question) {
            (Some(id), question) if question.is_some() || answer.from_state => {
                let message = answer.message(&dialect::read(question));
                self.send_answer(upstream, &task, &id, &message).await
            }
            _ if answer.from_state => {
                tracing::info!(
                    "the task in the client's state no longer waits; starting a new task"
                );
                self.send_or_fail(upstream, &answer.as_new_message()).await
            }
            // Answered already (a replayed resume) or moved on: nothing is sent twice; the
            // run shows where the task is now and follows it if it is still live.
            _ => {
                tracing::info!(task_id = %Shown(&task.id), "resume of an interrupt the task no longer waits on; following the task");
                self.follow(upstream, &task).await
            }
        }
    }

    /// Sends the answer to the question `interrupt_id` of `task` once: a run that finds
    /// another answering it (a resume sent twice at once) follows the task instead; a claim
    /// the upstream refused is given back, so a proper answer can follow.
    async fn send_answer(
        &mut self,
        upstream: &Resolved,
        task: &Task,
        interrupt_id: &str,
        message: &OutgoingMessage,
    ) -> Result<(), Disconnected> {
        let agent = self.agent.settings.name.clone();
        self.projector.answering(interrupt_id);
        let claimed = self
            .bindings
            .claim_answer(&agent, interrupt_id, self.timeouts.run)
            .await;
        if !claimed {
            tracing::info!(task_id = %Shown(&task.id), "another run is answering this question; following the task");
            return self.follow(upstream, task).await;
        }
        let sent = self.send_or_fail(upstream, message).await;
        if !self.projector.was_accepted() {
            self.bindings.release_answer(&agent, interrupt_id).await;
        }
        sent
    }

    /// DESIGN §4 pick-up: if the upstream (A2A 1.0) knows the threadId as a context, the
    /// message goes into that context and the run opens with its earlier turns. Without
    /// `ListTasks` (0.3) or when it fails, the thread is simply new (docs/identity.md).
    async fn pick_up(&mut self, upstream: &Resolved) -> Result<(), Disconnected> {
        if upstream.version() != ProtocolVersion::V1 {
            return Ok(());
        }
        let context_id = self.thread_id.clone();
        let listed = upstream
            .client
            .list_tasks_paged(
                Some(&context_id),
                PICK_UP_PAGE_SIZE,
                PICK_UP_PAGES,
                PICK_UP_HISTORY,
            )
            .await;
        let mut tasks = match listed {
            Ok(tasks) => tasks,
            Err(e) => {
                tracing::info!(error = %e, "ListTasks failed; the thread is new to the upstream");
                return Ok(());
            }
        };
        tasks.retain(|t| t.context_id.as_deref() == Some(context_id.as_str()));
        if tasks.is_empty() {
            return Ok(());
        }
        // ListTasks answers newest first; a conversation reads oldest first.
        tasks.reverse();
        let tasks: Vec<&Task> = tasks.iter().collect();
        self.plan.bind_context(Some(&context_id));
        let events = self
            .projector
            .pick_up(&context_id, &tasks, &self.client_messages);
        self.emit(events).await
    }

    /// Sends the message; `Err` only for an upstream error before any event.
    ///
    /// Every step but the stream's is boxed: this future lives as long as the stream, so
    /// it holds only what reading the stream needs (memory per open stream).
    async fn send(
        &mut self,
        upstream: &Resolved,
        message: &OutgoingMessage,
        streaming: bool,
    ) -> Result<(), ClientError> {
        if !streaming {
            return Box::pin(self.send_unary(upstream, message)).await;
        }
        let history = self.plan.options.history_length;
        let open = Box::pin(upstream.client.stream_message(message, history));
        let first_event = self.timeouts.first_event;
        let stream = match tokio::time::timeout(first_event, open).await {
            Ok(r) => r?,
            Err(_) => {
                let timed_out = RunError::timeout("first_event", first_event);
                let _ = Box::pin(self.fail(timed_out)).await;
                return Ok(());
            }
        };
        let _ = self.pump(upstream, stream).await;
        Ok(())
    }

    /// `SendMessage` (no stream): the result is the turn.
    async fn send_unary(
        &mut self,
        upstream: &Resolved,
        message: &OutgoingMessage,
    ) -> Result<(), ClientError> {
        let history = self.plan.options.history_length;
        let result = upstream
            .client
            .send_message(message, history, Some(self.timeouts.run))
            .await?;
        // A task result holds the whole turn in its history: projected like a recovered
        // snapshot, so the live view and a later rebuild agree (DESIGN §4).
        self.first_event();
        let projected = match &result {
            StreamEvent::Task(task) => {
                let events = self
                    .projector
                    .apply_recovered(task, Some(&message.message_id));
                self.emit(events).await
            }
            other => self.apply(other).await,
        };
        if projected.is_ok() {
            let _ = self.end_of_stream(upstream).await;
        }
        Ok(())
    }

    /// Reads an upstream stream into the projector until the run finishes.
    async fn pump(
        &mut self,
        upstream: &Resolved,
        mut stream: EventStream,
    ) -> Result<(), Disconnected> {
        let mut first = true;
        // What reading ahead met after a batch (the stream's end or an error): handled
        // first next time round.
        let mut carried: Option<Box<Option<Result<StreamEvent, ClientError>>>> = None;
        loop {
            let (key, wait) = if first {
                ("first_event", self.timeouts.first_event)
            } else {
                ("idle", self.timeouts.idle)
            };
            first = false;
            let item = match carried.take() {
                Some(item) => *item,
                None => match tokio::time::timeout(wait, stream.next()).await {
                    Ok(item) => item,
                    Err(_) => return Box::pin(self.fail(RunError::timeout(key, wait))).await,
                },
            };
            // The item's work is boxed: this loop's future lives as long as the stream, so
            // it holds only what waiting for the next event needs (memory per open stream,
            // docs/performance.md); a batch costs one allocation.
            match Box::pin(self.handle(item, &mut stream, upstream)).await? {
                Batch::Finished => return Ok(()),
                Batch::Ended(item) => carried = Some(item),
                Batch::Open => {}
            }
        }
    }

    /// What the stream delivered: an event (projected with what follows it, [`Self::batch`]),
    /// a broken stream (recovered), an error or the end of the stream (both end the run).
    async fn handle(
        &mut self,
        item: Option<Result<StreamEvent, ClientError>>,
        stream: &mut EventStream,
        upstream: &Resolved,
    ) -> Result<Batch, Disconnected> {
        match item {
            Some(Ok(event)) => return self.batch(event, stream).await,
            Some(Err(ClientError::Unavailable(reason))) => {
                tracing::warn!(%reason, "upstream stream broke");
                Box::pin(self.recover(upstream, Some(reason))).await?;
            }
            Some(Err(e)) => self.fail_with(&e).await?,
            None => self.end_of_stream(upstream).await?,
        }
        Ok(Batch::Finished)
    }

    /// Projects `event` and the events the upstream already delivered after it as one batch
    /// (one channel send, one write): nothing waits for more than is ready, and a batch is
    /// at most `MAX_BATCH_EVENTS` events and `MAX_BATCH_TEXT_BYTES` of text.
    async fn batch(
        &mut self,
        mut event: StreamEvent,
        stream: &mut EventStream,
    ) -> Result<Batch, Disconnected> {
        let mut batch = Vec::new();
        let (mut drained, mut text_bytes) = (0, 0);
        let mut ended = None;
        loop {
            if let Err(limit) = self.count_event() {
                self.emit(batch).await?;
                self.fail(limit).await?;
                return Ok(Batch::Finished);
            }
            let before = batch.len();
            self.project(&event, &mut batch);
            drained += 1;
            let text = batch[before..]
                .iter()
                .map(text_bytes_of)
                .sum::<Option<usize>>();
            text_bytes += text.unwrap_or(usize::MAX / 2);
            if self.projector.is_finished()
                || drained == MAX_BATCH_EVENTS
                || text_bytes > MAX_BATCH_TEXT_BYTES
            {
                break;
            }
            let mut ready = stream.next().now_or_never();
            if ready.is_none() {
                // One scheduler turn for the upstream connection to decode the next event
                // it already read (through reqwest, hyper hands a body on one chunk at a
                // time from its own task; the direct reader needs none); a quiet stream
                // loses only that turn.
                tokio::task::yield_now().await;
                ready = stream.next().now_or_never();
            }
            match ready {
                Some(Some(Ok(next))) => event = next,
                Some(item) => {
                    ended = Some(item);
                    break;
                }
                None => break,
            }
        }
        self.emit(batch).await?;
        Ok(if self.projector.is_finished() {
            Batch::Finished
        } else if let Some(item) = ended {
            Batch::Ended(Box::new(item))
        } else {
            Batch::Open
        })
    }

    /// Counts one upstream event against `limits.max_events_per_run`.
    fn count_event(&mut self) -> Result<(), RunError> {
        self.upstream_events += 1;
        if self.upstream_events > self.limits.max_events_per_run {
            return Err(RunError::LimitExceeded(format!(
                "the upstream sent more than limits.max_events_per_run ({}) events",
                self.limits.max_events_per_run
            )));
        }
        Ok(())
    }

    async fn end_of_stream(&mut self, upstream: &Resolved) -> Result<(), Disconnected> {
        match self.projector.end_of_stream() {
            Some(events) => self.sink.emit(events).await,
            None => Box::pin(self.recover(upstream, None)).await,
        }
    }

    /// DESIGN §9: the stream ended (or broke, for `reason`) with the task unfinished.
    /// Resubscribe (bounded, with backoff), or read the task if it finished meanwhile. A run
    /// that fails names why the stream ended (a framing error, a reset), not only that it did.
    async fn recover(
        &mut self,
        upstream: &Resolved,
        reason: Option<String>,
    ) -> Result<(), Disconnected> {
        let ended = match &reason {
            Some(reason) => format!("the upstream stream broke ({reason})"),
            None => "the upstream stream ended".to_owned(),
        };
        let Some(task_id) = self.projector.task_id().map(str::to_owned) else {
            let msg = format!("{ended} before any task or reply");
            return self.fail(RunError::UpstreamStreamEnded(msg)).await;
        };
        let mut last_error = format!("{ended} before the task finished");
        for attempt in 0..RECOVERY_ATTEMPTS {
            tokio::time::sleep(Duration::from_millis(100 << attempt)).await;
            if !upstream.streaming {
                break;
            }
            match upstream.client.subscribe(&task_id).await {
                Ok(mut stream) => {
                    tracing::info!(task_id = %Shown(&task_id), attempt, "resubscribed to the task");
                    // The first frame is the task snapshot (A2A 1.0 §3.1.6): it fills the gap.
                    if let Ok(Some(Ok(StreamEvent::Task(task)))) =
                        tokio::time::timeout(self.timeouts.first_event, stream.next()).await
                    {
                        let sent = self.sent_message_id.as_deref();
                        let events = self.projector.apply_recovered(&task, sent);
                        self.emit(events).await?;
                        if self.projector.is_finished() {
                            return Ok(());
                        }
                    }
                    return self.pump(upstream, stream).await;
                }
                // The task finished while we were away: its snapshot tells how.
                Err(ClientError::Rpc(rpc)) if rpc.code == rpc_code::UNSUPPORTED_OPERATION => break,
                Err(e @ ClientError::Rpc(_)) => return self.fail_with(&e).await,
                Err(e) => last_error = e.to_string(),
            }
        }
        match upstream.client.get_task(&task_id, None).await {
            Ok(task) if task.status.state.is_terminal() || task.status.state.is_interrupted() => {
                let sent = self.sent_message_id.as_deref();
                let events = self.projector.apply_recovered(&task, sent);
                self.emit(events).await
            }
            Ok(_) | Err(_) => self.fail(RunError::UpstreamStreamEnded(last_error)).await,
        }
    }

    /// A `cancelled` resume: cancel the waiting task and finish as cancelled.
    async fn cancel(&mut self, upstream: &Resolved, task_id: &str) -> Result<(), Disconnected> {
        match upstream.client.cancel_task(task_id).await {
            Ok(task) => {
                self.apply(&StreamEvent::Task(task)).await?;
                let events = self.projector.cancelled();
                self.sink.emit(events).await
            }
            Err(e) => self.fail_with(&e).await,
        }
    }

    /// `subscribeOnly`: snapshot the task, then follow it until it ends.
    async fn subscribe_only(
        &mut self,
        upstream: &Resolved,
        task_id: &str,
    ) -> Result<(), Disconnected> {
        let history = self.plan.options.history_length;
        let task = match upstream.client.get_task(task_id, history).await {
            Ok(t) => t,
            Err(e) => return self.fail_with(&e).await,
        };
        self.follow(upstream, &task).await
    }

    /// Reattaches to `task` from its snapshot, then follows it until it ends.
    async fn follow(&mut self, upstream: &Resolved, task: &Task) -> Result<(), Disconnected> {
        let task_id = task.id.as_str();
        let events = self.projector.reattach(task, &self.client_messages);
        self.emit(events).await?;
        if self.projector.is_finished() {
            return Ok(());
        }
        if !upstream.streaming {
            let msg = "the agent does not stream; cannot follow its task".to_owned();
            return self.fail(RunError::UpstreamInvalid(msg)).await;
        }
        match upstream.client.subscribe(task_id).await {
            Ok(stream) => self.pump(upstream, stream).await,
            Err(e) => self.fail_with(&e).await,
        }
    }
}
