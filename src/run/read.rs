//! The run's read loop: an upstream event stream into the projector, one batch at a time,
//! until the run finishes. What it bounds and nothing else does (the route streams, so no
//! HTTP layer can): the wait for the first event (`timeouts.first_event`) and between events
//! (`timeouts.idle`), the events of a run (`limits.max_events_per_run`), and a batch (at most
//! [`MAX_BATCH_EVENTS`] upstream events and [`MAX_BATCH_TEXT_BYTES`] of text, only text).
//! A stream that breaks or ends with the task unfinished is recovered (resubscribe, at most
//! [`RECOVERY_ATTEMPTS`] times with backoff, or the task read if it finished meanwhile); a
//! run that cannot be recovered ends with `RUN_ERROR` naming why the stream ended.
//!
//! The upstream is reached only through [`Resubscribe`], so the loop is unit-tested with a
//! scripted stream on tokio's paused clock (the tests below).

use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};

use super::meter::Disconnected;
use super::Run;
use crate::a2a::client::{ClientError, EventStream};
use crate::a2a::model::{StreamEvent, Task};
use crate::a2a::rpc_code;
use crate::agui::Event;
use crate::error::RunError;
use crate::ids::TaskId;
use crate::redact::Shown;
use crate::registry::Upstream;
use std::time::Duration;

/// What the read loop asks of the upstream besides the stream it reads: resubscribing to a
/// task and reading it after a cut. The seam its unit tests script.
pub(super) trait Resubscribe: Sync {
    /// Whether the agent streams (only then can a task be resubscribed).
    fn streams(&self) -> bool;
    /// `SubscribeToTask` (A2A 1.0 §3.1.6; 0.3 `tasks/resubscribe`).
    fn subscribe<'a>(
        &'a self,
        task_id: &'a TaskId,
    ) -> BoxFuture<'a, Result<EventStream, ClientError>>;
    /// `GetTask`.
    fn get_task<'a>(&'a self, task_id: &'a TaskId) -> BoxFuture<'a, Result<Task, ClientError>>;
}

impl Resubscribe for Upstream {
    fn streams(&self) -> bool {
        self.streaming
    }

    fn subscribe<'a>(
        &'a self,
        task_id: &'a TaskId,
    ) -> BoxFuture<'a, Result<EventStream, ClientError>> {
        self.client.subscribe(&self.ctx, task_id).boxed()
    }

    fn get_task<'a>(&'a self, task_id: &'a TaskId) -> BoxFuture<'a, Result<Task, ClientError>> {
        self.client.get_task(&self.ctx, task_id, None).boxed()
    }
}

/// Resubscribe attempts after the upstream stream drops.
const RECOVERY_ATTEMPTS: u32 = 3;
/// The wait before the first attempt, doubled before each next one (100, 200, 400 ms).
const RECOVERY_BACKOFF: Duration = Duration::from_millis(100);

/// Read path batching (`pump`): the upstream events already delivered are projected into
/// one batch while it holds only text (at most this many upstream events and
/// [`MAX_BATCH_TEXT_BYTES`] of it); any other event ends the batch. A batch thus holds what
/// one upstream event makes, or at most that much text: a slow client costs at most
/// `CHANNEL_CAPACITY` of them, as before batching.
pub(super) const MAX_BATCH_EVENTS: usize = 64;
pub(super) const MAX_BATCH_TEXT_BYTES: usize = 64 * 1024;

/// How a read batch left the stream.
enum Batch {
    /// The run finished (its terminal event is sent).
    Finished,
    /// Still open: read on.
    Open,
    /// Reading ahead met the stream's end or an error, handled next.
    Ended(Box<Option<Result<StreamEvent, ClientError>>>),
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

impl Run {
    /// Reads an upstream stream into the projector until the run finishes.
    pub(super) async fn pump(
        &mut self,
        upstream: &dyn Resubscribe,
        mut stream: EventStream,
    ) -> Result<(), Disconnected> {
        let mut first = true;
        // What reading ahead met after a batch (the stream's end or an error): handled
        // first next time round.
        let mut carried: Option<Box<Option<Result<StreamEvent, ClientError>>>> = None;
        loop {
            let (key, wait) = if first {
                ("first_event", self.env.timeouts.first_event())
            } else {
                ("idle", self.env.timeouts.idle())
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
        upstream: &dyn Resubscribe,
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
        if self.upstream_events > self.env.limits.max_events_per_run.get() {
            return Err(RunError::LimitExceeded(format!(
                "the upstream sent more than limits.max_events_per_run ({}) events",
                self.env.limits.max_events_per_run
            )));
        }
        Ok(())
    }

    pub(super) async fn end_of_stream(
        &mut self,
        upstream: &dyn Resubscribe,
    ) -> Result<(), Disconnected> {
        match self.projector.end_of_stream() {
            Some(events) => self.sink.emit(events).await,
            None => Box::pin(self.recover(upstream, None)).await,
        }
    }

    /// docs/design.md#9-reliability-and-limits: the stream ended (or broke, for `reason`)
    /// with the task unfinished. Resubscribe (bounded, with backoff), or read the task if it
    /// finished meanwhile. A run that fails names why the stream ended (a framing error, a
    /// reset), not only that it did.
    async fn recover(
        &mut self,
        upstream: &dyn Resubscribe,
        reason: Option<String>,
    ) -> Result<(), Disconnected> {
        let ended = match &reason {
            Some(reason) => format!("the upstream stream broke ({reason})"),
            None => "the upstream stream ended".to_owned(),
        };
        let Some(task_id) = self.projector.task_id().map(TaskId::new) else {
            let msg = format!("{ended} before any task or reply");
            return self.fail(RunError::UpstreamStreamEnded(msg)).await;
        };
        let mut last_error = format!("{ended} before the task finished");
        for attempt in 0..RECOVERY_ATTEMPTS {
            tokio::time::sleep(RECOVERY_BACKOFF * (1 << attempt)).await;
            if !upstream.streams() {
                break;
            }
            match upstream.subscribe(&task_id).await {
                Ok(mut stream) => {
                    tracing::info!(task_id = %Shown(task_id.as_str()), attempt, "resubscribed to the task");
                    // The first frame is the task snapshot (A2A 1.0 §3.1.6): it fills the gap.
                    if let Ok(Some(Ok(StreamEvent::Task(task)))) =
                        tokio::time::timeout(self.env.timeouts.first_event(), stream.next()).await
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
                // Refused (an agent without resubscribe answers -32601): asking again will
                // not help; the task read decides, and a failure names the cut first.
                Err(e @ ClientError::Rpc(_)) => {
                    last_error =
                        format!("{ended} before the task finished; resubscribing was refused: {e}");
                    break;
                }
                Err(e) => {
                    last_error =
                        format!("{ended} before the task finished; resubscribing failed: {e}")
                }
            }
        }
        match upstream.get_task(&task_id).await {
            Ok(task) if task.status.state.is_terminal() || task.status.state.is_interrupted() => {
                let sent = self.sent_message_id.as_deref();
                let events = self.projector.apply_recovered(&task, sent);
                self.emit(events).await
            }
            Ok(_) | Err(_) => self.fail(RunError::UpstreamStreamEnded(last_error)).await,
        }
    }
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;
