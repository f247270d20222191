//! The resume protocol (docs/design.md §7, HITL): a resume reads the task's current question
//! first (`GetTask`), so the answer goes out in that question's dialect and only while the
//! task still waits on the interrupt answered; an answer is sent once (a claim in the binding
//! store: a replayed or concurrent resume follows the task instead); a `cancelled` resume
//! cancels the task; `subscribeOnly` and a replayed resume reattach to the task and follow
//! it. The stream itself is read by [`super::read`].

use super::meter::Disconnected;
use super::Run;
use crate::a2a::client::ClientError;
use crate::a2a::model::{OutgoingMessage, StreamEvent, Task};
use crate::a2a::rpc_code;
use crate::bridge::dialect;
use crate::bridge::interrupt::InterruptId;
use crate::bridge::request::Answer;
use crate::error::RunError;
use crate::ids::TaskId;
use crate::redact::Shown;
use crate::registry::Upstream;

/// The upstream no longer takes input on this task: unknown, or finished (A2A 1.0 §3.3.2,
/// transcripts §2.33-2.34).
fn is_stale_task(e: &ClientError) -> bool {
    e.is_task_not_found()
        || matches!(e, ClientError::Rpc(rpc) if rpc.code == rpc_code::UNSUPPORTED_OPERATION)
}

impl Run {
    /// docs/design.md#7-human-in-the-loop resume: the task's current question is read first
    /// (GetTask), so the answer goes out in the dialect of that question, and only while the
    /// task still waits on the interrupt answered: a replayed resume sends nothing and
    /// follows the task instead. A plain message for a task that no longer waits (or is gone)
    /// starts a new task.
    pub(super) async fn answer(
        &mut self,
        upstream: &Upstream,
        answer: Answer,
    ) -> Result<(), Disconnected> {
        let task = match upstream
            .client
            .get_task(&upstream.ctx, &answer.task_id, None)
            .await
        {
            Ok(task) => Some(task),
            Err(e) if answer.from_state && is_stale_task(&e) => None,
            Err(e) => return self.fail_with(&e).await,
        };
        let Some(task) = task else {
            tracing::info!("the waiting task in the client's state is gone; starting a new task");
            return self.send_or_fail(upstream, answer.into_new_message()).await;
        };
        let asked = task
            .status
            .state
            .is_interrupted()
            .then(|| InterruptId::of_status(&task.id, &task.status));
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
                .map(InterruptId::tail)
                .filter(|m| !m.is_empty())
                .find_map(|m| task.history.iter().rev().find(|h| h.message_id == m)),
            _ => None,
        };
        match (asked, question) {
            (Some(id), question) if question.is_some() || answer.from_state => {
                let message = answer.message(&dialect::read(question));
                self.send_answer(upstream, &task, &id, message).await
            }
            _ if answer.from_state => {
                tracing::info!(
                    "the task in the client's state no longer waits; starting a new task"
                );
                self.send_or_fail(upstream, answer.into_new_message()).await
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
        upstream: &Upstream,
        task: &Task,
        interrupt_id: &InterruptId,
        message: OutgoingMessage,
    ) -> Result<(), Disconnected> {
        let agent = self.agent.settings.name.clone();
        self.projector.answering(interrupt_id.clone());
        let claimed = self
            .env
            .store
            .claim_answer(&agent, interrupt_id, self.env.timeouts.run())
            .await;
        if !claimed {
            tracing::info!(task_id = %Shown(&task.id), "another run is answering this question; following the task");
            return self.follow(upstream, task).await;
        }
        let sent = self.send_or_fail(upstream, message).await;
        if !self.projector.was_accepted() {
            self.env.store.release_answer(&agent, interrupt_id).await;
        }
        sent
    }

    /// A `cancelled` resume: cancel the waiting task and finish as cancelled.
    pub(super) async fn cancel(
        &mut self,
        upstream: &Upstream,
        task_id: &TaskId,
    ) -> Result<(), Disconnected> {
        match upstream.client.cancel_task(&upstream.ctx, task_id).await {
            Ok(task) => {
                self.apply(&StreamEvent::Task(task)).await?;
                let events = self.projector.cancelled();
                self.sink.emit(events).await
            }
            Err(e) => self.fail_with(&e).await,
        }
    }

    /// `subscribeOnly`: snapshot the task, then follow it until it ends.
    pub(super) async fn subscribe_only(
        &mut self,
        upstream: &Upstream,
        task_id: &TaskId,
    ) -> Result<(), Disconnected> {
        let history = self.plan.options.history_length;
        let task = match upstream
            .client
            .get_task(&upstream.ctx, task_id, history)
            .await
        {
            Ok(t) => t,
            Err(e) => return self.fail_with(&e).await,
        };
        self.follow(upstream, &task).await
    }

    /// Reattaches to `task` from its snapshot, then follows it until it ends.
    async fn follow(&mut self, upstream: &Upstream, task: &Task) -> Result<(), Disconnected> {
        let task_id = TaskId::new(&task.id);
        let events = self.projector.reattach(task, &self.client_messages);
        self.emit(events).await?;
        if self.projector.is_finished() {
            return Ok(());
        }
        if !upstream.streaming {
            let msg = "the agent does not stream; cannot follow its task".to_owned();
            return self.fail(RunError::UpstreamInvalid(msg)).await;
        }
        match upstream.client.subscribe(&upstream.ctx, &task_id).await {
            Ok(stream) => self.pump(upstream, stream).await,
            Err(e) => self.fail_with(&e).await,
        }
    }
}
