//! Conversations as the threads API shows them (DESIGN §3): A2A tasks grouped by context,
//! newest first, each with a status read from its last task. Pure: the HTTP layer fetches
//! the tasks (A2A 1.0 `ListTasks`) or the bindings and pages over what this returns.

use serde::Serialize;

use crate::a2a::model::{Task, TaskState};

/// A conversation's status, from its last task's state (DESIGN §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ThreadStatus {
    /// Nothing is running: the last task completed or was canceled.
    Idle,
    Working,
    InputRequired,
    AuthRequired,
    /// The last task failed or was rejected.
    Failed,
}

impl ThreadStatus {
    const ALL: [ThreadStatus; 5] = [
        Self::Idle,
        Self::Working,
        Self::InputRequired,
        Self::AuthRequired,
        Self::Failed,
    ];

    /// The status a task in `state` gives its conversation.
    pub(crate) fn of(state: &TaskState) -> Self {
        match state {
            TaskState::Submitted | TaskState::Working | TaskState::Unknown(_) => Self::Working,
            TaskState::InputRequired => Self::InputRequired,
            TaskState::AuthRequired => Self::AuthRequired,
            TaskState::Failed | TaskState::Rejected => Self::Failed,
            TaskState::Completed | TaskState::Canceled => Self::Idle,
        }
    }

    /// The wire spelling (also the `status` query value).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Working => "working",
            Self::InputRequired => "input-required",
            Self::AuthRequired => "auth-required",
            Self::Failed => "failed",
        }
    }

    /// Parses the `status` query value.
    pub(crate) fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.as_str() == raw)
    }
}

impl Serialize for ThreadStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// The last task of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LastTask {
    pub id: String,
    /// The task state in the lowercase 0.3 spelling, as in `/a2a/task/state`.
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

/// One conversation of an agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ThreadSummary {
    pub thread_id: String,
    pub context_id: String,
    pub status: ThreadStatus,
    pub last_task: LastTask,
}

/// Groups `tasks` (newest first, as `ListTasks` answers) into conversations, newest first:
/// one per context, described by its newest task. `thread_of` names the thread a context
/// belongs to (the client's threadId for a context created through the gateway; the
/// contextId itself otherwise, which is how a conversation started elsewhere is picked up).
pub(crate) fn summarize(tasks: &[Task], thread_of: impl Fn(&str) -> String) -> Vec<ThreadSummary> {
    let mut out: Vec<ThreadSummary> = Vec::new();
    for task in tasks {
        let Some(context_id) = task.context_id.as_deref() else {
            continue;
        };
        if out.iter().any(|t| t.context_id == context_id) {
            continue;
        }
        out.push(ThreadSummary {
            thread_id: thread_of(context_id),
            context_id: context_id.to_owned(),
            status: ThreadStatus::of(&task.status.state),
            last_task: LastTask {
                id: task.id.clone(),
                state: task.status.state.as_str().to_owned(),
                updated_at: task.status.timestamp.clone(),
            },
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task(id: &str, context: &str, state: &str, at: &str) -> Task {
        serde_json::from_value(json!({"id": id, "contextId": context,
            "status": {"state": state, "timestamp": at}}))
        .unwrap()
    }

    #[test]
    fn one_thread_per_context_described_by_its_newest_task() {
        let tasks = [
            task("t3", "c1", "input-required", "2026-01-03"),
            task("t2", "c2", "completed", "2026-01-02"),
            task("t1", "c1", "completed", "2026-01-01"),
        ];
        let threads = summarize(&tasks, |c| format!("thread-of-{c}"));
        assert_eq!(threads.len(), 2);
        assert_eq!(threads[0].thread_id, "thread-of-c1");
        assert_eq!(threads[0].status, ThreadStatus::InputRequired);
        assert_eq!(threads[0].last_task.id, "t3");
        assert_eq!(threads[1].status, ThreadStatus::Idle);
        assert_eq!(
            serde_json::to_value(&threads[0]).unwrap()["status"],
            "input-required"
        );
    }

    #[test]
    fn statuses_parse_from_their_query_spelling() {
        assert_eq!(
            ThreadStatus::parse("input-required"),
            Some(ThreadStatus::InputRequired)
        );
        assert_eq!(ThreadStatus::parse("idle"), Some(ThreadStatus::Idle));
        assert_eq!(ThreadStatus::parse("bogus"), None);
        assert_eq!(ThreadStatus::of(&TaskState::Rejected), ThreadStatus::Failed);
    }
}
