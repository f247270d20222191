//! What a run hands on and measures: [`Sink`] passes event batches to the response (a client
//! that takes nothing for `timeouts.client_write` is gone: [`Disconnected`]), and
//! [`RunMeter`] records the run once (docs/design.md §10): events sent, how it ended, how
//! long it took, the tokens its agent reported using, and what the run span's end says of
//! the task — when the terminal event goes out, or when the run is dropped without one (the
//! client left).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use crate::agui::{Event, Outcome};
use crate::bridge::state::TaskEntry;
use crate::bridge::usage::Tokens;
use crate::bridge::Projector;
use crate::metrics::{Metrics, RunOutcome, TokenKind};
use crate::telemetry::{RunEnd, RunTrace};

/// The run's measures (docs/design.md#10-observability): events sent, how it ended, how long
/// it took; recorded once, when the terminal event goes out, or when the run is dropped
/// without one (the client left).
pub(super) struct RunMeter {
    pub(super) metrics: Arc<Metrics>,
    pub(super) agent: String,
    pub(super) started: std::time::Instant,
    pub(super) trace: Option<RunTrace>,
    /// `(outcome, error code)` of the terminal event, once sent.
    pub(super) ended: Mutex<Option<(RunOutcome, Option<String>)>>,
    /// What the run span's end says of the task, filled by the run as it learns it.
    pub(super) task: Mutex<TaskFacts>,
}

#[derive(Default)]
pub(super) struct TaskFacts {
    pub(super) context_id: Option<String>,
    pub(super) task_id: Option<String>,
    pub(super) state: Option<String>,
    /// The token usage the agent reported (`agui_gateway_tokens_total`).
    pub(super) usage: Option<Tokens>,
}

impl RunMeter {
    /// Counts `events` and notes the terminal one.
    pub(super) fn sent(&self, events: &[Event]) {
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
    pub(super) fn learn(&self, projector: &Projector) {
        if let Ok(mut facts) = self.task.lock() {
            facts.context_id = projector.context_id().map(str::to_owned);
            facts.task_id = projector.task_id().map(str::to_owned);
            facts.usage = projector.usage();
            facts.state = projector
                .state()
                .and_then(TaskEntry::of)
                .map(|task| task.state.into_owned());
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
        let facts = self
            .task
            .lock()
            .map(|mut f| std::mem::take(&mut *f))
            .unwrap_or_default();
        if let Some(usage) = facts.usage {
            for (kind, n) in [
                (TokenKind::Input, usage.input),
                (TokenKind::Output, usage.output),
                (TokenKind::Reasoning, usage.reasoning),
                (TokenKind::Cached, usage.cached),
            ] {
                if let Some(n) = n {
                    self.metrics.tokens_used(&self.agent, kind, n);
                }
            }
        }
        if let Some(trace) = &self.trace {
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
pub(super) struct Disconnected;

/// Hands event batches to the response.
#[derive(Clone)]
pub(super) struct Sink {
    pub(super) tx: mpsc::Sender<Vec<Event>>,
    /// `timeouts.client_write`: a client that takes nothing for this long is gone. (The
    /// connection's write timeout closes it; this ends the run even if it did not.)
    pub(super) client_write: Duration,
    pub(super) meter: Arc<RunMeter>,
}

impl Sink {
    pub(super) async fn emit(&self, events: Vec<Event>) -> Result<(), Disconnected> {
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
