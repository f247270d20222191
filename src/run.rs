//! One AG-UI run, end to end: the only async orchestration in the gateway.
//!
//! A run is a task owned by its response stream ([`RunEvents`]): it makes the upstream A2A
//! calls, feeds the projector, and hands each upstream event's AG-UI events to the response
//! as one batch over a bounded channel (framing is the HTTP layer's). A stream dropped early
//! (the client left) aborts the run and its upstream request. A run goes by an [`Env`] (the
//! registry, the binding store, limits, timeouts, metrics, the stop signal) and by nothing of
//! the HTTP layer.
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

use futures::{FutureExt, Stream};
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use crate::a2a::call::ListTasks;
use crate::a2a::client::{CallContext, ClientError};
use crate::a2a::model::{OutgoingMessage, StreamEvent, Task};
use crate::a2a::Operation;
use crate::agui::input::Message as ClientMessage;
use crate::agui::{Event, RunAgentInput};
use crate::bridge::context::ContextSource;
use crate::bridge::request::{Action, Mode, Plan};
use crate::bridge::state::ClientView;
use crate::bridge::{history, lane};
use crate::bridge::{Projector, RunFrame};
use crate::config::{ContextIds, Limits, Secret, Timeouts};
use crate::error::RunError;
use crate::ids::{CallerId, ContextId, TaskId, ThreadId};
use crate::metrics::{Metrics, OpenStream};
use crate::redact::Shown;
use crate::registry::{self, Agent, Registry, Upstream};
use crate::store::{ContextOrigin, Store, ThreadRecord};
use crate::telemetry::RunTrace;

mod inbox;
mod meter;
mod read;
mod resume;

use meter::{Disconnected, RunMeter, Sink, TaskFacts};

/// Pick-up reads at most this many `ListTasks` pages of this many tasks, each task with its
/// artifacts and at most [`PICK_UP_HISTORY`] messages (every page is bounded by `limits.max_event_bytes`, all
/// of them together by `timeouts.upstream_call`).
const PICK_UP_PAGES: usize = 5;
const PICK_UP_PAGE_SIZE: u32 = 50;
const PICK_UP_HISTORY: u32 = 200;
/// Event batches buffered between the run and its response, so at most this many batches
/// are held for a slow client.
const CHANNEL_CAPACITY: usize = 16;

/// What every run of the gateway goes by, and nothing else: the registry, the binding
/// store, the limits and timeouts, the metrics and the stop signal. Built once and shared
/// (`Arc`); the HTTP layer's own parts (auth, CORS, rate limits, run slots) are not in it,
/// so a run depends on nothing above it.
#[derive(Clone)]
pub(crate) struct Env {
    pub registry: Arc<Registry>,
    pub store: Arc<Store>,
    pub limits: Limits,
    pub timeouts: Timeouts,
    pub metrics: Arc<Metrics>,
    /// Flipped to `true` when open runs must end (shutdown after the drain period): they
    /// end with `RUN_ERROR`.
    pub stop: tokio::sync::watch::Receiver<bool>,
    /// The live inbox (docs/design.md#the-live-inbox): `GET /threads`, its change feed, and
    /// what pushes and runs tell it.
    pub inbox: Arc<crate::inbox::Inbox>,
    /// `push` (docs/design.md#the-live-inbox): whether runs register push notifications.
    pub push: crate::config::PushSettings,
}

/// Everything a run needs, handed over by the HTTP handler.
pub(crate) struct RunRequest {
    pub agent: Arc<Agent>,
    /// What the run goes by ([`Env`]).
    pub env: Arc<Env>,
    pub input: RunAgentInput,
    pub plan: Plan,
    /// Held for the run's lifetime (`limits.max_concurrent_runs`).
    pub permit: OwnedSemaphorePermit,
    /// The caller's identity: the owner of the thread's binding (docs/design.md#11-security).
    pub owner: CallerId,
    /// The caller's bearer when a JWT authenticated it (the caller-dependent upstream
    /// credentials send or exchange it, docs/security.md#upstream-credentials).
    pub caller_token: Option<Secret>,
    /// The caller may see contexts not created through the gateway
    /// (docs/design.md#11-security), so a threadId the upstream knows as a context may be
    /// picked up.
    pub may_pick_up: bool,
    /// The run's span, when traces are on (docs/design.md#10-observability).
    pub trace: Option<RunTrace>,
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
    upstream: Upstream,
    task_id: TaskId,
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
        if let Some(CancelOnDrop { upstream, task_id }) = pending {
            // Bounded by `timeouts.upstream_call` like every unary call.
            tokio::spawn(async move {
                let task = Shown(task_id.as_str());
                match upstream.client.cancel_task(&upstream.ctx, &task_id).await {
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
    let open = req.env.metrics.stream_opened(&agent);
    let sink = Sink {
        tx,
        client_write: req.env.timeouts.client_write(),
        meter: Arc::new(RunMeter {
            metrics: req.env.metrics.clone(),
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
    let run_timeout = req.env.timeouts.run();
    let mut stop = req.env.stop.clone();
    let preparing = sink.clone();
    let prepared =
        Box::pin(async move { Box::new(Run::prepare(*req, preparing, cancel_on_drop).await) });
    let prepared = std::panic::AssertUnwindSafe(prepared).catch_unwind().await;
    let mut run = match prepared {
        Ok(run) => run,
        Err(_) => {
            tracing::error!(thread_id = %Shown(thread_id.as_str()), run_id = %Shown(&run_id), "run panicked");
            let _ = sink.emit(unprepared_failure(thread_id, run_id)).await;
            return;
        }
    };
    let ended = bounded(run_timeout, &mut stop, Box::pin(run.execute())).await;
    if matches!(ended, Some(RunError::Internal)) {
        tracing::error!(thread_id = %Shown(thread_id.as_str()), run_id = %Shown(&run_id), "run panicked");
    }
    // Every path above ends the run; should one not have, it still gets its terminal event.
    let error = ended.unwrap_or(RunError::Internal);
    let events = run.projector.fail(&error);
    let _ = run.sink.emit(events).await;
    run.disarm_cancel();
    run.sink.meter.learn(&run.projector);
}

/// Runs `work` within `timeouts.run` until `stop` turns `true`: `None` if it ended by itself,
/// else why the run ends (the run timeout, shutdown, or a panic caught as
/// [`RunError::Internal`]).
async fn bounded<W: std::future::Future>(
    run_timeout: std::time::Duration,
    stop: &mut tokio::sync::watch::Receiver<bool>,
    work: W,
) -> Option<RunError> {
    let work = std::panic::AssertUnwindSafe(work).catch_unwind();
    tokio::select! {
        result = tokio::time::timeout(run_timeout, work) => match result {
            Ok(Ok(_)) => None,
            Ok(Err(_panic)) => Some(RunError::Internal),
            Err(_) => Some(RunError::UpstreamTimeout(format!(
                "the run exceeded timeouts.run ({} ms)",
                run_timeout.as_millis()
            ))),
        },
        _ = stop.wait_for(|stopped| *stopped) => Some(RunError::Shutdown),
    }
}

/// The events of a run whose preparation panicked.
fn unprepared_failure(thread_id: ThreadId, run_id: String) -> Vec<Event> {
    let mut projector = Projector::new(RunFrame {
        thread_id: thread_id.into(),
        run_id,
        ..RunFrame::default()
    });
    projector.fail(&RunError::Internal)
}

struct Run {
    thread_id: ThreadId,
    /// The caller's identity, the owner of the thread's binding.
    owner: CallerId,
    /// The caller's bearer, if a JWT ([`RunRequest::caller_token`]).
    caller_token: Option<Secret>,
    /// The client's transcript, for a complete `MESSAGES_SNAPSHOT` on reattach.
    client_messages: Vec<ClientMessage>,
    agent: Arc<Agent>,
    /// The registry, binding store, limits and timeouts the run goes by.
    env: Arc<Env>,
    plan: Plan,
    projector: Projector,
    sink: Sink,
    upstream_events: u64,
    /// Held for the run's lifetime (`limits.max_concurrent_runs`).
    _permit: OwnedSemaphorePermit,
    cancel_on_drop: Arc<Mutex<Option<CancelOnDrop>>>,
    /// The contextId was written to the binding store.
    bound: bool,
    /// Whether the run's context was created for this caller or picked up from the upstream
    /// (its binding then records no creator, docs/identity.md#ownership); `None`: named by
    /// the client (props, state), the store's creator record decides.
    origin: Option<ContextOrigin>,
    /// What the binding store held for the thread (reading it renewed it).
    stored_binding: Option<ContextId>,
    /// The task `cancel_on_drop` is armed for.
    armed_task: Option<TaskId>,
    /// The last task recorded for the thread in the binding store.
    recorded_task: Option<TaskId>,
    /// What the run tells the live inbox ([`inbox::Told`]).
    told: inbox::Told,
    /// The A2A messageId this run sent, to find its place in task history on recovery.
    sent_message_id: Option<String>,
    /// The context whose history is read before the message goes, to open the run with it
    /// (pick-up or catch-up, [`ContextSource::history_to_read`]).
    pick_up: Option<ContextId>,
    /// What the forwarding lane adds to the message's metadata
    /// (docs/design.md#8-forwarding-lane).
    lane: serde_json::Map<String, serde_json::Value>,
    /// The run's span, parent of each upstream call's (docs/design.md#10-observability).
    trace: Option<RunTrace>,
    /// When the run started, for `agui_gateway_time_to_first_event_seconds`.
    started: std::time::Instant,
    first_event_seen: bool,
}

/// Whether the client holds the thread it continues (docs/identity.md, "Opening with the
/// history"): it sends earlier turns, and the task its state names is the thread's last one
/// the binding store recorded (one store lookup, only for a client that sends turns).
async fn holds_the_thread(
    input: &RunAgentInput,
    store: &Store,
    owner: &CallerId,
    agent: &Agent,
) -> bool {
    if !history::holds_earlier_turns(&input.messages) {
        return false;
    }
    let Some(seen) = ClientView::of(input.state.as_ref()).task_id() else {
        return true;
    };
    let agent = &agent.settings.name;
    let last = store.last_task(owner, agent, &input.thread_id).await;
    last.is_none_or(|last| last.as_str() == seen)
}

impl Run {
    /// Resolves the context id (docs/design.md#4-threads-and-contexts,
    /// [`crate::bridge::context`]) and builds the projector. The client's state moves into
    /// the projector: it is never copied.
    async fn prepare(
        req: RunRequest,
        sink: Sink,
        cancel_on_drop: Arc<Mutex<Option<CancelOnDrop>>>,
    ) -> Self {
        let RunRequest {
            agent,
            env,
            mut input,
            mut plan,
            permit,
            may_pick_up,
            owner,
            caller_token,
            trace,
        } = req;
        let mut candidates = plan.context_candidates();
        if candidates.needs_binding() {
            let (agent, thread) = (&agent.settings.name, &input.thread_id);
            candidates.binding = env.store.get(&owner, agent, thread).await;
        }
        if agent.settings.context_ids == ContextIds::Client {
            candidates.thread_id = Some(ContextId::of_thread(&input.thread_id));
        }
        let cues = lane::Cues::defaults(&agent.settings.forward).with(&plan.options.cues);
        let carried = lane::carry(&input, &cues);
        let stored_binding = candidates.binding.clone();
        let resolved = candidates.resolve();
        let sends_new_message = matches!(&plan.action, Action::Send(m) if m.task_id.is_none());
        let holds_the_thread = sends_new_message
            && resolved.is_some()
            && Box::pin(holds_the_thread(&input, &env.store, &owner, &agent)).await;
        let pick_up = ContextSource::history_to_read(
            resolved.as_ref().map(|(id, source)| (id, *source)),
            &input.thread_id,
            may_pick_up,
            holds_the_thread,
        )
        .filter(|_| sends_new_message);
        let origin = ContextOrigin::of(resolved.as_ref().map(|(_, source)| *source));
        let context_id = resolved.map(|(id, _)| id);
        plan.bind_context(context_id.as_ref());
        let frame = RunFrame {
            thread_id: input.thread_id.to_string(),
            run_id: input.run_id.clone(),
            v1_client: input.is_v1_client(),
            client_state: input.state.take(),
            context_id: context_id.map(String::from),
            task_id: plan.task_id().map(str::to_owned),
            resolves: match plan.action {
                Action::Refuse(_) => Vec::new(),
                _ => plan.resolves.clone(),
            },
            // Whenever the agent is given the state, what it was given is recorded.
            state_digests: cues.state.is_some(),
            subagents: agent.settings.subagents,
            subagent_tools: agent.settings.subagent_tools.clone(),
            ..RunFrame::limited(&env.limits)
        };
        Self {
            thread_id: input.thread_id,
            owner,
            caller_token,
            client_messages: std::mem::take(&mut input.messages),
            agent,
            env,
            plan,
            projector: Projector::new(frame),
            sink,
            upstream_events: 0,
            _permit: permit,
            cancel_on_drop,
            bound: false,
            origin,
            stored_binding,
            armed_task: None,
            recorded_task: None,
            told: inbox::Told::default(),
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
        self.told.saw(event);
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

    /// Bookkeeping once ids are known: bind the thread to its context
    /// (docs/design.md#4-threads-and-contexts) and arm the cancel-on-disconnect for the task.
    async fn after_apply(&mut self) {
        if !self.bound {
            if let Some(context_id) = self.projector.context_id().map(ContextId::new) {
                let agent = &self.agent.settings.name;
                let thread = &self.thread_id;
                if self.stored_binding.as_ref() != Some(&context_id) {
                    // Boxed, as every rare await of the run: a future's size is that of its
                    // largest state, held for the whole stream (memory per open stream).
                    let origin = match self.origin {
                        Some(known) => known,
                        None => Box::pin(self.origin_of(&context_id)).await,
                    };
                    let put = self
                        .env
                        .store
                        .put(&self.owner, agent, thread, &context_id, origin);
                    Box::pin(put).await;
                }
                self.bound = true;
            }
        }
        // The thread's last task, once per task (the thread list of upstreams without
        // `ListTasks` reads its status from it).
        let task = self.projector.task_id();
        if task.is_some() && task != self.recorded_task.as_ref().map(TaskId::as_str) {
            if let (Some(task_id), Some(context_id)) = (task, self.projector.context_id()) {
                let record = ThreadRecord {
                    thread_id: self.thread_id.clone(),
                    context_id: ContextId::new(context_id),
                    task_id: Some(TaskId::new(task_id)),
                };
                let agent = &self.agent.settings.name;
                Box::pin(self.env.store.put_task(&self.owner, agent, &record)).await;
                if let Some(task_id) = &record.task_id {
                    self.register_push(task_id);
                }
                self.recorded_task = record.task_id;
            }
        }
        if let Some(seen) = self.told.take_news() {
            let agent = &self.agent.settings.name;
            Box::pin(self.env.inbox.update(agent, &seen)).await;
        }
        if !self.agent.settings.cancel_on_disconnect {
            return;
        }
        // Re-armed only when the task to cancel changes, not on every event.
        let wanted = (!self.projector.is_finished())
            .then(|| self.projector.task_id().map(TaskId::new))
            .flatten();
        if wanted == self.armed_task {
            return;
        }
        let armed = match (&wanted, self.agent.resolved()) {
            (Some(task_id), Some(resolved)) => match self.call_context(None) {
                Ok(ctx) => Some(CancelOnDrop {
                    upstream: Upstream { resolved, ctx },
                    task_id: task_id.clone(),
                }),
                Err(_) => None,
            },
            _ => None,
        };
        if let Ok(mut slot) = self.cancel_on_drop.lock() {
            *slot = armed;
        }
        self.armed_task = wanted;
    }

    /// The context of this run's upstream calls, within `trace` if traced: the caller
    /// identity header and the caller's credentials ([`registry::call_context`]).
    fn call_context(&self, trace: Option<RunTrace>) -> Result<CallContext, RunError> {
        let token = self.caller_token.as_ref();
        registry::call_context(&self.agent, self.owner.as_str(), token, trace)
            .map_err(RunError::UpstreamUnavailable)
    }

    /// The origin of a context the client named (props, state): the caller's own while the
    /// store records a creator (the request was refused otherwise), else one the gateway did
    /// not create, or forgot (docs/identity.md#ownership).
    async fn origin_of(&self, context_id: &ContextId) -> ContextOrigin {
        match self
            .env
            .store
            .owner_of(&self.agent.settings.name, context_id)
            .await
        {
            Some(_) => ContextOrigin::Created,
            None => ContextOrigin::PickedUp,
        }
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
        let resolved = match Box::pin(self.env.registry.resolve(&self.agent)).await {
            Ok(r) => r,
            Err(e) => {
                let msg = format!("agent {} is not reachable: {e}", self.agent.settings.name);
                return self.fail(RunError::UpstreamUnavailable(msg)).await;
            }
        };
        // Every call of the run carries this context: the run's trace, the caller identity
        // if the agent forwards it, and the caller's credentials if the agent's depend on it.
        let upstream = match self.call_context(self.trace.clone()) {
            Ok(ctx) => Upstream { resolved, ctx },
            Err(e) => return self.fail(e).await,
        };
        if let Some(context_id) = self.pick_up.take() {
            Box::pin(self.pick_up(&upstream, context_id)).await?;
        }
        // The action moves out of the plan: the message it sends is never copied.
        match self.plan.take_action() {
            Action::Refuse(_) => Ok(()),
            Action::Cancel { task_id } => Box::pin(self.cancel(&upstream, &task_id)).await,
            Action::Subscribe { task_id } => {
                Box::pin(self.subscribe_only(&upstream, &task_id)).await
            }
            Action::Send(message) => Box::pin(self.send_or_fail(&upstream, message)).await,
            Action::Answer(answer) => Box::pin(self.answer(&upstream, answer)).await,
        }
    }

    /// Sends `message`, ending the run with the upstream's error if it refuses.
    async fn send_or_fail(
        &mut self,
        upstream: &Upstream,
        mut message: OutgoingMessage,
    ) -> Result<(), Disconnected> {
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

    /// docs/design.md#4-threads-and-contexts pick-up and catch-up: if the upstream (A2A 1.0)
    /// has tasks in `context_id` (the threadId asked as a context, or the run's known context
    /// for a client that holds none of its turns), the message goes into that context and the
    /// run opens with its earlier turns. Without `ListTasks` (0.3) or when it fails, nothing
    /// is shown (docs/identity.md).
    async fn pick_up(
        &mut self,
        upstream: &Upstream,
        context_id: ContextId,
    ) -> Result<(), Disconnected> {
        if !upstream.client.supports(Operation::ListTasks) {
            return Ok(());
        }
        let listed = upstream
            .client
            .list_tasks_paged(
                &upstream.ctx,
                ListTasks {
                    context_id: Some(context_id.as_str()),
                    page_size: PICK_UP_PAGE_SIZE,
                    page_token: None,
                    history_length: PICK_UP_HISTORY,
                    include_artifacts: true,
                },
                PICK_UP_PAGES,
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
        self.origin = Some(ContextOrigin::PickedUp);
        let events = self
            .projector
            .pick_up(context_id.as_str(), &tasks, &self.client_messages);
        self.emit(events).await
    }

    /// Sends the message; `Err` only for an upstream error before any event.
    ///
    /// Every step but the stream's is boxed: this future lives as long as the stream, so
    /// it holds only what reading the stream needs (memory per open stream).
    async fn send(
        &mut self,
        upstream: &Upstream,
        message: &OutgoingMessage,
        streaming: bool,
    ) -> Result<(), ClientError> {
        if !streaming {
            return Box::pin(self.send_unary(upstream, message)).await;
        }
        let history = self.plan.options.history_length;
        let open = Box::pin(
            upstream
                .client
                .stream_message(&upstream.ctx, message, history),
        );
        let first_event = self.env.timeouts.first_event();
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
        upstream: &Upstream,
        message: &OutgoingMessage,
    ) -> Result<(), ClientError> {
        let history = self.plan.options.history_length;
        let result = upstream
            .client
            .send_message(
                &upstream.ctx,
                message,
                history,
                Some(self.env.timeouts.run()),
            )
            .await?;
        // A task result holds the whole turn in its history: projected like a recovered
        // snapshot, so the live view and a later rebuild agree
        // (docs/design.md#4-threads-and-contexts).
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
}
