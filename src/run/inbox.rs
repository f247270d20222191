//! What a run tells the live inbox (docs/design.md#the-live-inbox): each change of its task's
//! state as the run sees it (the inbox then shows it at once, with no poll), and, for an
//! agent with push notifications, a push registration for every task the run creates or
//! resumes, so the agent reports the task's later changes even when no stream is open.
//!
//! Invariants: the inbox hears a state once per change, not once per event (a stream of
//! artifacts or of `working` ticks costs it nothing); a registration is sent once per task
//! per run, off the run's path (a slow or refusing agent never delays the stream), with a
//! fresh token stored before the agent can use it; the token is never logged.

use std::sync::Arc;

use crate::a2a::call::PushConfig;
use crate::a2a::model::{StreamEvent, TaskState};
use crate::ids::TaskId;
use crate::inbox::book::Observation;
use crate::redact::Shown;
use crate::registry;

use super::Run;

/// The id of the gateway's push configuration on a task: the same on every registration, so
/// a resumed task's new registration replaces the old one instead of adding a second.
pub(crate) const PUSH_CONFIG_ID: &str = "agui-a2a-gateway";

/// The task state a run last told the inbox, and what it has yet to tell.
#[derive(Debug, Default)]
pub(super) struct Told {
    last: Option<(TaskId, TaskState)>,
    news: Option<Observation>,
}

impl Told {
    /// Notes what `event` says of the task, if it changes what the inbox was told. Called for
    /// every event: an unchanged state is seen without allocating.
    pub(super) fn saw(&mut self, event: &StreamEvent) {
        let (Some(status), Some(task_id)) = (event.status(), event.task_id()) else {
            return;
        };
        let unchanged = self
            .last
            .as_ref()
            .is_some_and(|(task, state)| task.as_str() == task_id && *state == status.state);
        if unchanged {
            return;
        }
        if let Some(seen) = Observation::of_event(event) {
            self.last = Some((seen.task_id.clone(), status.state.clone()));
            self.news = Some(seen);
        }
    }

    /// The change to tell, once.
    pub(super) fn take_news(&mut self) -> Option<Observation> {
        self.news.take()
    }
}

impl Run {
    /// Registers push notifications for `task_id` when the agent takes them
    /// (`crate::inbox::poll::pushes`): a fresh token stored, then the configuration sent
    /// upstream with the run's call context, in a task of its own (bounded by
    /// `timeouts.upstream_call` like every unary call).
    pub(super) fn register_push(&self, task_id: &TaskId) {
        let Some(public_url) = &self.env.push.public_url else {
            return;
        };
        let Some(resolved) = self.agent.resolved() else {
            return;
        };
        if !crate::inbox::poll::pushes(&self.agent, &self.env.push, &resolved.card) {
            return;
        }
        let owner = self.owner.as_str();
        let token = self.caller_token.as_ref();
        let Ok(ctx) = registry::call_context(&self.agent, owner, token, self.trace.clone()) else {
            return;
        };
        let agent = self.agent.settings.name.clone();
        let registration = crate::push::registration(&agent, public_url);
        let (store, task_id) = (Arc::clone(&self.env.store), task_id.clone());
        tokio::spawn(async move {
            store
                .put_push_token(&agent, &task_id, &registration.token)
                .await;
            let config = PushConfig {
                task_id: &task_id,
                id: PUSH_CONFIG_ID,
                url: &registration.url,
                token: &registration.token,
            };
            let task = Shown(task_id.as_str());
            match resolved.client.set_push_config(&ctx, config).await {
                Ok(()) => tracing::debug!(%agent, task_id = %task, "push notifications registered"),
                Err(e) => tracing::warn!(%agent, task_id = %task, error = %e,
                    "push registration refused; the inbox learns of this task by its runs and polls"),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::model::{Task, TaskStatus};

    fn task(id: &str, state: TaskState) -> StreamEvent {
        StreamEvent::Task(Task {
            id: id.into(),
            context_id: Some("c".into()),
            status: TaskStatus {
                state,
                message: None,
                timestamp: None,
            },
            artifacts: Vec::new(),
            history: Vec::new(),
            metadata: None,
        })
    }

    /// The inbox hears each change once: a repeated state says nothing new, a new state or
    /// a new task does.
    #[test]
    fn each_change_is_told_once() {
        let mut told = Told::default();
        told.saw(&task("t1", TaskState::Working));
        assert_eq!(told.take_news().map(|o| o.state), Some("working".into()));
        assert_eq!(told.take_news(), None);
        told.saw(&task("t1", TaskState::Working));
        assert_eq!(told.take_news(), None);
        told.saw(&task("t1", TaskState::InputRequired));
        assert_eq!(
            told.take_news().map(|o| o.state),
            Some("input-required".into())
        );
        told.saw(&task("t2", TaskState::InputRequired));
        assert_eq!(told.take_news().map(|o| o.task_id), Some(TaskId::new("t2")));
    }
}
