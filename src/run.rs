//! One AG-UI run, end to end: the only async orchestration in the gateway.
//!
//! A run is a task owned by its SSE response body ([`RunBody`]): it makes the upstream A2A
//! calls and feeds a bounded channel the body drains; a body dropped early (the client
//! left) aborts the run and its upstream request. It guarantees the AG-UI envelope whatever
//! happens upstream or inside the gateway: `RUN_STARTED` first, exactly one `RUN_FINISHED`
//! or `RUN_ERROR` last (a panic still ends in `RUN_ERROR`). Timeouts (first event, idle, whole run) and limits
//! (events per run) live here, not in an HTTP layer, because the route streams. A dropped
//! upstream stream of an unfinished task is resubscribed (bounded, with backoff) and the
//! projector's dedup by messageId keeps recovered text from repeating. A client disconnect
//! does not cancel the A2A task unless the agent's `cancel_on_disconnect` says so.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::{FutureExt, Stream, StreamExt};
use tokio::sync::{mpsc, OwnedSemaphorePermit};

use crate::a2a::client::{ClientError, EventStream};
use crate::a2a::model::{StreamEvent, Task};
use crate::a2a::rpc_code;
use crate::agui::{Event, RunAgentInput};
use crate::binding::BindingStore;
use crate::bridge::request::{Action, Mode, Plan};
use crate::bridge::state::StateLimits;
use crate::bridge::{codes, history, Projector, RunFrame};
use crate::config::{ContextIds, Limits, TimeoutSettings};
use crate::redact::Shown;
use crate::registry::{Agent, Registry, Resolved};

/// Resubscribe attempts after the upstream stream drops.
const RECOVERY_ATTEMPTS: u32 = 3;
/// SSE chunks buffered between the run and its response body (each one upstream event's
/// worth, so at most this many events are held for a slow client).
const CHANNEL_CAPACITY: usize = 16;
/// Ready chunks are merged into one write up to this size.
const MAX_MERGED_CHUNK: usize = 64 * 1024;

/// Everything a run needs, handed over by the HTTP handler.
pub struct RunRequest {
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
}

/// The client went away; stop quietly.
struct Disconnected;

/// Sends events to the response, remembering what the envelope guarantee needs. The
/// events of one upstream event travel as one SSE chunk (one channel hop, one write).
#[derive(Clone)]
struct Sink {
    tx: mpsc::Sender<Bytes>,
    started: Arc<AtomicBool>,
    ended: Arc<AtomicBool>,
    /// `timeouts.client_write`: a client that takes nothing for this long is gone. (The
    /// connection's own write timeout closes it; this ends the run even if it did not.)
    client_write: Duration,
}

impl Sink {
    async fn emit(&self, events: Vec<Event>) -> Result<(), Disconnected> {
        if events.is_empty() {
            return Ok(());
        }
        let mut chunk = Vec::with_capacity(256 * events.len());
        for e in &events {
            if matches!(e, Event::RunStarted { .. }) {
                self.started.store(true, Ordering::Relaxed);
            }
            if e.is_terminal() {
                self.ended.store(true, Ordering::Relaxed);
            }
            encode_sse(e, &mut chunk);
        }
        match tokio::time::timeout(self.client_write, self.tx.send(Bytes::from(chunk))).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(Disconnected),
            Err(_) => {
                tracing::info!("the client read nothing within timeouts.client_write; run ended");
                Err(Disconnected)
            }
        }
    }
}

/// Appends one SSE frame: `data: <compact JSON>\n\n`, LF only (CRLF breaks
/// `@ag-ui/client`, agui.md §5.2). Compact JSON has no raw newlines, so one `data:` line.
fn encode_sse(event: &Event, out: &mut Vec<u8>) {
    out.extend_from_slice(b"data: ");
    crate::agui::event::encode_into(event, out);
    out.extend_from_slice(b"\n\n");
}

/// The SSE body of one run. Reading the upstream and projecting run on the run's task while
/// the connection writes, so under load the events that piled up leave in one write.
pub struct RunBody {
    /// The run's task, aborted (with its upstream request) if the client leaves first.
    run: Option<tokio::task::JoinHandle<()>>,
    rx: mpsc::Receiver<Bytes>,
    /// The task to cancel if the client leaves first (`cancel_on_disconnect`).
    cancel_on_drop: Arc<Mutex<Option<CancelOnDrop>>>,
}

struct CancelOnDrop {
    client: crate::a2a::client::Client,
    task_id: String,
}

impl Stream for RunBody {
    type Item = Bytes;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let first = match self.rx.poll_recv(cx) {
            Poll::Ready(Some(chunk)) => chunk,
            Poll::Ready(None) => {
                // The run is over and its sender dropped: whatever was left has been sent.
                self.run = None;
                return Poll::Ready(None);
            }
            Poll::Pending => return Poll::Pending,
        };
        // Hand over everything else already waiting as the same write: under load that is
        // one write for many events, and it never waits for more.
        let mut merged: Option<Vec<u8>> = None;
        while let Ok(chunk) = self.rx.try_recv() {
            let buf = merged.get_or_insert_with(|| first.to_vec());
            buf.extend_from_slice(&chunk);
            if buf.len() >= MAX_MERGED_CHUNK {
                break;
            }
        }
        Poll::Ready(Some(merged.map_or(first, Bytes::from)))
    }
}

impl Drop for RunBody {
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

/// Starts the run and returns its SSE byte stream (keep-alives are the caller's).
pub fn start(req: RunRequest) -> RunBody {
    let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
    let sink = Sink {
        tx,
        started: Arc::default(),
        ended: Arc::default(),
        client_write: req.timeouts.client_write,
    };
    let guard = sink.clone();
    let cancel_on_drop = Arc::new(Mutex::new(None));
    let (thread_id, run_id) = (req.input.thread_id.clone(), req.input.run_id.clone());
    let run = drive(req, sink, cancel_on_drop.clone());
    let producer = async move {
        let outcome = std::panic::AssertUnwindSafe(run).catch_unwind().await;
        if outcome.is_err() {
            tracing::error!(thread_id = %Shown(&thread_id), run_id = %Shown(&run_id), "run panicked");
        }
        // Whatever happened, the client gets a terminal event.
        if !guard.ended.load(Ordering::Relaxed) {
            let mut events = Vec::new();
            if !guard.started.load(Ordering::Relaxed) {
                events.push(Event::RunStarted {
                    thread_id,
                    run_id,
                    metadata: None,
                });
            }
            events.push(Event::run_error(
                codes::INTERNAL,
                "the gateway failed while running this request",
            ));
            let _ = guard.emit(events).await;
        }
    };
    RunBody {
        run: Some(tokio::spawn(producer)),
        rx,
        cancel_on_drop,
    }
}

async fn drive(req: RunRequest, sink: Sink, cancel_on_drop: Arc<Mutex<Option<CancelOnDrop>>>) {
    let run_timeout = req.timeouts.run;
    let mut stop = req.stop.clone();
    let mut run = Run::prepare(req, sink, cancel_on_drop).await;
    let ended = tokio::select! {
        result = tokio::time::timeout(run_timeout, run.execute()) => result.err().map(|_| {
            let ms = run_timeout.as_millis();
            (codes::TIMEOUT, format!("the run exceeded timeouts.run ({ms} ms)"))
        }),
        _ = stop.wait_for(|stopped| *stopped) => Some((
            codes::SHUTDOWN,
            "the gateway is shutting down; the A2A task goes on and can be reattached".to_owned(),
        )),
    };
    if let Some((code, message)) = ended {
        let events = run.projector.fail(code, &message);
        let _ = run.sink.emit(events).await;
    }
    run.disarm_cancel();
}

struct Run {
    thread_id: String,
    /// The client's transcript, for a complete `MESSAGES_SNAPSHOT` on reattach.
    client_messages: Vec<crate::agui::input::Message>,
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
    /// The task `cancel_on_drop` is armed for.
    armed_task: Option<String>,
    /// The A2A messageId this run sent, to find its place in task history on recovery.
    sent_message_id: Option<String>,
}

fn error_code(e: &ClientError) -> String {
    match e {
        ClientError::Unavailable(_) => codes::UPSTREAM_UNAVAILABLE.into(),
        ClientError::Timeout(_) => codes::TIMEOUT.into(),
        ClientError::Rpc(rpc) => codes::rpc(rpc.code),
        ClientError::Invalid(_) | ClientError::Unsupported(..) => codes::UPSTREAM_INVALID.into(),
        ClientError::EventTooLarge { .. } => codes::LIMIT_EXCEEDED.into(),
    }
}

fn is_stale_task(e: &ClientError) -> bool {
    // TaskNotFound, or a terminal task (A2A 1.0 §3.3.2, transcripts §2.33-2.34).
    matches!(e, ClientError::Rpc(rpc)
        if rpc.code == rpc_code::TASK_NOT_FOUND || rpc.code == rpc_code::UNSUPPORTED_OPERATION)
}

impl Run {
    /// Resolves the context id (DESIGN §4 order: forwardedProps, state, binding store;
    /// the threadId itself only for agents that accept client context ids) and builds
    /// the projector.
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
        } = req;
        if plan.context_id.is_none() {
            plan.context_id = bindings.get(&agent.settings.name, &input.thread_id).await;
        }
        if plan.context_id.is_none() && agent.settings.context_ids == ContextIds::Client {
            plan.context_id = Some(input.thread_id.clone());
        }
        let task_id = match &plan.action {
            Action::Send(m) => m.task_id.clone(),
            Action::Cancel { task_id } | Action::Subscribe { task_id } => Some(task_id.clone()),
            Action::Refuse(_) => None,
        };
        if let Action::Send(m) = &mut plan.action {
            m.context_id = plan.context_id.clone();
        }
        let frame = RunFrame {
            thread_id: input.thread_id.clone(),
            run_id: input.run_id.clone(),
            v1_client: input.is_v1_client(),
            client_state: input.state.take(),
            context_id: plan.context_id.clone(),
            task_id,
            max_artifact_bytes: limits.max_artifact_bytes_per_run,
            max_text_bytes: limits.max_text_bytes_per_run,
            state_limits: StateLimits::from_config(&limits),
            resolves: match plan.action {
                Action::Refuse(_) => Vec::new(),
                _ => plan.resolves.clone(),
            },
        };
        Self {
            thread_id: input.thread_id.clone(),
            client_messages: input.messages.clone(),
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
            armed_task: None,
            sent_message_id: None,
        }
    }

    async fn fail(&mut self, code: &str, message: &str) -> Result<(), Disconnected> {
        let events = self.projector.fail(code, message);
        self.sink.emit(events).await
    }

    async fn fail_with(&mut self, e: &ClientError) -> Result<(), Disconnected> {
        self.fail(&error_code(e), &e.to_string()).await
    }

    async fn apply(&mut self, event: &StreamEvent) -> Result<(), Disconnected> {
        let events = self.projector.apply(event);
        self.after_apply().await;
        self.sink.emit(events).await
    }

    /// Bookkeeping once ids are known: bind the thread to its context (DESIGN §4) and arm
    /// the cancel-on-disconnect for the task.
    async fn after_apply(&mut self) {
        if !self.bound {
            if let Some(context_id) = self.projector.context_id().map(str::to_owned) {
                let agent = &self.agent.settings.name;
                self.bindings.put(agent, &self.thread_id, &context_id).await;
                self.bound = true;
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
        let armed = match (&wanted, self.agent.resolved()) {
            (Some(task_id), Some(upstream)) => Some(CancelOnDrop {
                client: upstream.client.clone(),
                task_id: task_id.clone(),
            }),
            _ => None,
        };
        if let Ok(mut slot) = self.cancel_on_drop.lock() {
            *slot = armed;
        }
        self.armed_task = wanted;
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
            let message = reason.0.clone();
            return self.fail(codes::BAD_RESUME, &message).await;
        }
        let upstream = match self.registry.resolve(&self.agent).await {
            Ok(r) => r,
            Err(e) => {
                let msg = format!("agent {} is not reachable: {e}", self.agent.settings.name);
                return self.fail(codes::UPSTREAM_UNAVAILABLE, &msg).await;
            }
        };
        match self.plan.action.clone() {
            Action::Refuse(_) => Ok(()),
            Action::Cancel { task_id } => self.cancel(&upstream, &task_id).await,
            Action::Subscribe { task_id } => self.subscribe_only(&upstream, &task_id).await,
            Action::Send(message) => {
                self.sent_message_id = Some(message.message_id.clone());
                let streaming = upstream.streaming && self.plan.options.mode != Some(Mode::Send);
                let mut result = self.send(&upstream, &message, streaming).await;
                // A waiting task remembered in the client's state may be gone or finished:
                // then the message starts a new task in the same context.
                if let Err(e) = &result {
                    if self.plan.task_from_state && is_stale_task(e) {
                        tracing::info!(error = %e, "task from client state is stale; starting a new task");
                        let mut fresh = message.clone();
                        fresh.task_id = None;
                        result = self.send(&upstream, &fresh, streaming).await;
                    }
                }
                match result {
                    Ok(()) => Ok(()),
                    Err(e) => self.fail_with(&e).await,
                }
            }
        }
    }

    /// Sends the message; `Err` only for an upstream error before any event.
    async fn send(
        &mut self,
        upstream: &Resolved,
        message: &crate::a2a::model::OutgoingMessage,
        streaming: bool,
    ) -> Result<(), ClientError> {
        let history = self.plan.options.history_length;
        if streaming {
            let open = upstream.client.stream_message(message, history);
            let stream = match tokio::time::timeout(self.timeouts.first_event, open).await {
                Ok(r) => r?,
                Err(_) => {
                    let _ = self
                        .timeout_error("first_event", self.timeouts.first_event)
                        .await;
                    return Ok(());
                }
            };
            let _ = self.pump(upstream, stream).await;
            return Ok(());
        }
        let result = upstream
            .client
            .send_message(message, history, Some(self.timeouts.run))
            .await?;
        if self.apply(&result).await.is_ok() {
            let _ = self.end_of_stream(upstream).await;
        }
        Ok(())
    }

    /// `RUN_ERROR upstream_timeout` naming the `timeouts.<key>` setting that elapsed.
    async fn timeout_error(&mut self, key: &str, ms: Duration) -> Result<(), Disconnected> {
        let msg = format!(
            "no event from the upstream within timeouts.{key} ({} ms)",
            ms.as_millis()
        );
        self.fail(codes::TIMEOUT, &msg).await
    }

    /// Reads an upstream stream into the projector until the run finishes.
    async fn pump(
        &mut self,
        upstream: &Resolved,
        mut stream: EventStream,
    ) -> Result<(), Disconnected> {
        let mut first = true;
        loop {
            let (key, wait) = if first {
                ("first_event", self.timeouts.first_event)
            } else {
                ("idle", self.timeouts.idle)
            };
            first = false;
            match tokio::time::timeout(wait, stream.next()).await {
                Err(_) => return self.timeout_error(key, wait).await,
                Ok(Some(Ok(event))) => {
                    self.upstream_events += 1;
                    if self.upstream_events > self.limits.max_events_per_run {
                        let msg = format!(
                            "the upstream sent more than limits.max_events_per_run ({}) events",
                            self.limits.max_events_per_run
                        );
                        return self.fail(codes::LIMIT_EXCEEDED, &msg).await;
                    }
                    self.apply(&event).await?;
                    if self.projector.is_finished() {
                        return Ok(());
                    }
                }
                Ok(Some(Err(ClientError::Unavailable(reason)))) => {
                    tracing::warn!(%reason, "upstream stream broke");
                    return Box::pin(self.recover(upstream)).await;
                }
                Ok(Some(Err(e))) => return self.fail_with(&e).await,
                Ok(None) => return self.end_of_stream(upstream).await,
            }
        }
    }

    async fn end_of_stream(&mut self, upstream: &Resolved) -> Result<(), Disconnected> {
        match self.projector.end_of_stream() {
            Some(events) => self.sink.emit(events).await,
            None => Box::pin(self.recover(upstream)).await,
        }
    }

    /// DESIGN §9: the stream ended with the task unfinished. Resubscribe (bounded, with
    /// backoff), or read the task if it finished meanwhile.
    async fn recover(&mut self, upstream: &Resolved) -> Result<(), Disconnected> {
        let Some(task_id) = self.projector.task_id().map(str::to_owned) else {
            return self
                .fail(
                    codes::UPSTREAM_STREAM_ENDED,
                    "the upstream stream ended before any task or reply",
                )
                .await;
        };
        let mut last_error = String::from("the upstream stream ended before the task finished");
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
                        let events = self
                            .projector
                            .apply_recovered(&task, self.sent_message_id.as_deref());
                        self.after_apply().await;
                        self.sink.emit(events).await?;
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
                let events = self
                    .projector
                    .apply_recovered(&task, self.sent_message_id.as_deref());
                self.after_apply().await;
                self.sink.emit(events).await
            }
            Ok(_) | Err(_) => self.fail(codes::UPSTREAM_STREAM_ENDED, &last_error).await,
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
        let task: Task = match upstream
            .client
            .get_task(task_id, self.plan.options.history_length)
            .await
        {
            Ok(t) => t,
            Err(e) => return self.fail_with(&e).await,
        };
        let snapshot = StreamEvent::Task(task.clone());
        self.projector.mark_shown(&task);
        let mut events = self.projector.apply(&snapshot);
        let messages = Event::MessagesSnapshot {
            messages: history::merge(&self.client_messages, history::messages(&[&task])),
        };
        // MESSAGES_SNAPSHOT right after RUN_STARTED + STATE_SNAPSHOT.
        let at = events
            .iter()
            .position(|e| matches!(e, Event::StateSnapshot { .. }))
            .map_or(0, |i| i + 1);
        events.insert(at, messages);
        self.sink.emit(events).await?;
        if self.projector.is_finished() {
            return Ok(());
        }
        if !upstream.streaming {
            return self
                .fail(
                    codes::UPSTREAM_INVALID,
                    "the agent does not stream; cannot follow its task",
                )
                .await;
        }
        match upstream.client.subscribe(task_id).await {
            Ok(stream) => self.pump(upstream, stream).await,
            Err(e) => self.fail_with(&e).await,
        }
    }
}
