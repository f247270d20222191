//! Conversations as the threads API shows them (docs/design.md#3-http-surface): A2A tasks
//! grouped by context, newest first, each with a status read from its last task; and the
//! inbox across agents, where an agent that could not be read is named in `unavailable`,
//! never left out as if it had nothing to show. Pure: the HTTP layer fetches the tasks (A2A
//! 1.0 `ListTasks`) or the bindings, decides which agents could not be read, and pages over
//! what this returns.

use serde::Serialize;

use crate::a2a::model::{Task, TaskState};
use crate::ids::{ContextId, TaskId, ThreadId};

/// A conversation's status, from its last task's state (docs/design.md#3-http-surface).
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
    pub id: TaskId,
    /// The task state in the lowercase 0.3 spelling, as in `/a2a/task/state`.
    pub state: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

/// One conversation of an agent. The wire types of this module declare their fields in
/// alphabetical order, the order in which the threads API has always written them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ThreadSummary {
    pub context_id: ContextId,
    pub last_task: LastTask,
    pub status: ThreadStatus,
    pub thread_id: ThreadId,
}

/// Groups `tasks` (newest first, as `ListTasks` answers) into conversations, newest first:
/// one per context, described by its newest task. `thread_of` names the thread a context
/// belongs to (the client's threadId for a context created through the gateway; the
/// contextId itself otherwise, [`ThreadId::of_context`], which is how a conversation started
/// elsewhere is picked up).
pub(crate) fn summarize(
    tasks: &[Task],
    thread_of: impl Fn(&ContextId) -> ThreadId,
) -> Vec<ThreadSummary> {
    let mut out: Vec<ThreadSummary> = Vec::new();
    for task in tasks {
        let Some(context_id) = task.context_id.as_deref().map(ContextId::new) else {
            continue;
        };
        if out.iter().any(|t| t.context_id == context_id) {
            continue;
        }
        out.push(ThreadSummary {
            thread_id: thread_of(&context_id),
            context_id,
            status: ThreadStatus::of(&task.status.state),
            last_task: LastTask {
                id: TaskId::new(task.id.as_str()),
                state: task.status.state.as_str().to_owned(),
                updated_at: task.status.timestamp.clone(),
            },
        });
    }
    out
}

/// An agent whose conversations could not be read, as the inbox names it
/// (docs/design.md#3-http-surface).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Unavailable {
    pub agent: String,
    /// The request error's code: `upstream_unavailable` or `upstream_timeout`.
    pub code: &'static str,
}

/// One conversation in the inbox: a thread and its agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct InboxThread {
    pub agent: String,
    #[serde(flatten)]
    pub thread: ThreadSummary,
}

/// The inbox across agents: every conversation read, newest first, and the agents that could
/// not be read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Inbox {
    pub threads: Vec<InboxThread>,
    pub unavailable: Vec<Unavailable>,
}

/// Merges each agent's conversations (or the code of why they could not be read) into the
/// inbox: threads newest first by their last task's time (those without one last; agents
/// keep their order on ties), unreadable agents in `unavailable`, in the order given.
pub(crate) fn inbox(
    per_agent: impl IntoIterator<Item = (String, Result<Vec<ThreadSummary>, &'static str>)>,
) -> Inbox {
    let mut out = Inbox::default();
    for (agent, read) in per_agent {
        match read {
            Ok(threads) => out
                .threads
                .extend(threads.into_iter().map(|thread| InboxThread {
                    agent: agent.clone(),
                    thread,
                })),
            Err(code) => out.unavailable.push(Unavailable { agent, code }),
        }
    }
    out.threads.sort_by(|a, b| {
        let at = |t: &InboxThread| t.thread.last_task.updated_at.clone();
        at(b).cmp(&at(a))
    });
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
        let threads = summarize(&tasks, |c| ThreadId::new(format!("thread-of-{c}")));
        assert_eq!(threads.len(), 2);
        assert_eq!(threads[0].thread_id.as_str(), "thread-of-c1");
        assert_eq!(threads[0].status, ThreadStatus::InputRequired);
        assert_eq!(threads[0].last_task.id.as_str(), "t3");
        assert_eq!(threads[1].status, ThreadStatus::Idle);
        assert_eq!(
            serde_json::to_value(&threads[0]).unwrap()["status"],
            "input-required"
        );
    }

    #[test]
    fn the_inbox_merges_agents_newest_first_and_names_those_not_read() {
        let a = summarize(
            &[
                task("a2", "ca2", "input-required", "2026-01-04"),
                task("a1", "ca1", "completed", "2026-01-01"),
            ],
            ThreadId::of_context,
        );
        let b = summarize(
            &[task("b1", "cb1", "working", "2026-01-02")],
            ThreadId::of_context,
        );
        let merged = inbox([
            ("a".to_owned(), Ok(a)),
            ("down".to_owned(), Err("upstream_unavailable")),
            ("b".to_owned(), Ok(b)),
            ("slow".to_owned(), Err("upstream_timeout")),
        ]);
        let order: Vec<(&str, &str)> = merged
            .threads
            .iter()
            .map(|t| (t.agent.as_str(), t.thread.last_task.id.as_str()))
            .collect();
        assert_eq!(order, [("a", "a2"), ("b", "b1"), ("a", "a1")]);
        assert_eq!(
            serde_json::to_value(&merged.unavailable).unwrap(),
            json!([{"agent": "down", "code": "upstream_unavailable"},
                {"agent": "slow", "code": "upstream_timeout"}])
        );
        let item = serde_json::to_value(&merged.threads[0]).unwrap();
        assert_eq!(
            (&item["agent"], &item["threadId"], &item["status"]),
            (&json!("a"), &json!("ca2"), &json!("input-required"))
        );
        let quiet = inbox([("quiet".to_owned(), Ok(Vec::new()))]);
        assert_eq!(
            quiet,
            Inbox::default(),
            "an agent with nothing is not unavailable"
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
