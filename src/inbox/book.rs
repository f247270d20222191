//! The inbox's pure core (docs/design.md#the-live-inbox): per agent, the latest of each
//! conversation as `GET /threads` shows it, and who created it through the gateway.
//!
//! Invariants:
//! - Updates come at least once and in any order (pushes, the shared poll, runs, other
//!   replicas): [`Book::apply`] keeps an update only when it is newer than what the
//!   conversation holds (its task status time, compared as instants; a finished task is
//!   never reopened by a late update of the same task), so duplicates and reordering change
//!   nothing and every replica converges on the same book.
//! - Bounded: at most `inbox.max_threads_per_agent` conversations per agent; the one whose
//!   last task is oldest goes first.
//! - Who may see a conversation is decided by [`shown`], the one home of the rule, which the
//!   live reads of `GET /agents/{name}/threads` use too.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::a2a::model::{StreamEvent, Task, TaskState, TaskStatus};
use crate::auth::Caller;
use crate::bridge::threads::{LastTask, ThreadStatus, ThreadSummary};
use crate::config::Visibility;
use crate::ids::{CallerId, ContextId, TaskId, ThreadId};

/// Who created a context through the gateway: its owner and the owner's threadId.
pub(crate) type Creator = (CallerId, ThreadId);

/// The conversation `thread` as `caller` may see it (docs/design.md#11-security): a context
/// the gateway created (`creator`) is its creator's (shown under the creator's threadId) and
/// seen by the creator and `threads:all` callers; any other context is seen on agents with
/// `visibility: shared` or by `threads:all` callers, under its contextId. `None`: hidden.
pub(crate) fn shown(
    caller: &Caller,
    visibility: Visibility,
    mut thread: ThreadSummary,
    creator: Option<&Creator>,
) -> Option<ThreadSummary> {
    if !caller.may_use_context(creator.map(|(c, _)| c), visibility) {
        return None;
    }
    if let Some((_, creator_thread)) = creator {
        thread.thread_id = creator_thread.clone();
    }
    Some(thread)
}

/// What one update says about a task: its context, its state and the state's time. The
/// form in which updates travel between replicas too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Observation {
    pub context_id: ContextId,
    pub task_id: TaskId,
    /// The lowercase 0.3 spelling, as `lastTask.state` shows it.
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

impl Observation {
    /// What a task says.
    pub(crate) fn of_task(task: &Task) -> Option<Self> {
        Self::of_status(&task.id, task.context_id.as_deref(), &task.status)
    }

    /// What a stream event or push says: a task or a status update; anything else (a
    /// message, an artifact) says nothing about the conversation's status.
    pub(crate) fn of_event(event: &StreamEvent) -> Option<Self> {
        let status = event.status()?;
        Self::of_status(event.task_id()?, event.context_id(), status)
    }

    fn of_status(task_id: &str, context_id: Option<&str>, status: &TaskStatus) -> Option<Self> {
        Some(Self {
            context_id: ContextId::new(context_id.filter(|c| !c.is_empty())?),
            task_id: TaskId::new(task_id),
            state: status.state.as_str().to_owned(),
            timestamp: status.timestamp.clone(),
        })
    }

    fn task_state(&self) -> TaskState {
        TaskState::parse(&self.state)
    }
}

/// One conversation changed: the item as `GET /threads` shows it to its creator (before
/// [`shown`] renames it per reader), and its creator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    pub agent: String,
    pub thread: ThreadSummary,
    pub creator: Option<Creator>,
}

/// One conversation of the book.
#[derive(Debug, Clone)]
struct Entry {
    thread: ThreadSummary,
    creator: Option<Creator>,
    /// The last task's status time, parsed.
    at: Option<OffsetDateTime>,
}

/// Every agent's conversations.
#[derive(Debug)]
pub(crate) struct Book {
    max_per_agent: usize,
    agents: HashMap<String, HashMap<ContextId, Entry>>,
}

impl Book {
    pub(crate) fn new(max_per_agent: usize) -> Self {
        Self {
            max_per_agent: max_per_agent.max(1),
            agents: HashMap::new(),
        }
    }

    /// Whether the book holds `context_id` of `agent` (its creator then is known: it is
    /// looked up once, when a context is first seen).
    pub(crate) fn knows(&self, agent: &str, context_id: &ContextId) -> bool {
        self.agents
            .get(agent)
            .is_some_and(|a| a.contains_key(context_id))
    }

    /// Applies `update` to `agent`'s conversation; `creator` is used for a context the book
    /// does not know yet. `Some` when the conversation changed, `None` for an update that
    /// is not newer than what the book holds (a duplicate, or one that arrived late).
    pub(crate) fn apply(
        &mut self,
        agent: &str,
        update: &Observation,
        creator: Option<Creator>,
    ) -> Option<Change> {
        let at = instant(update.timestamp.as_deref());
        let threads = self.agents.entry(agent.to_owned()).or_default();
        let summary = |creator: &Option<Creator>| ThreadSummary {
            context_id: update.context_id.clone(),
            last_task: LastTask {
                id: update.task_id.clone(),
                state: update.state.clone(),
                updated_at: update.timestamp.clone(),
            },
            status: ThreadStatus::of(&update.task_state()),
            thread_id: creator.as_ref().map_or_else(
                || ThreadId::of_context(&update.context_id),
                |(_, t)| t.clone(),
            ),
        };
        if let Some(entry) = threads.get_mut(&update.context_id) {
            if !newer(update, at, entry) {
                return None;
            }
            entry.thread = summary(&entry.creator);
            entry.at = at;
            return Some(Change {
                agent: agent.to_owned(),
                thread: entry.thread.clone(),
                creator: entry.creator.clone(),
            });
        }
        if threads.len() >= self.max_per_agent {
            let oldest = threads
                .iter()
                .min_by_key(|(_, e)| e.at)
                .map(|(c, _)| c.clone());
            if let Some(oldest) = oldest {
                // An update older than every kept conversation is the one that goes.
                if threads.get(&oldest).is_some_and(|e| e.at > at) {
                    return None;
                }
                threads.remove(&oldest);
            }
        }
        let thread = summary(&creator);
        threads.insert(
            update.context_id.clone(),
            Entry {
                thread: thread.clone(),
                creator: creator.clone(),
                at,
            },
        );
        Some(Change {
            agent: agent.to_owned(),
            thread,
            creator,
        })
    }

    /// `agent`'s conversations, newest first, with their creators.
    pub(crate) fn threads(&self, agent: &str) -> Vec<(ThreadSummary, Option<Creator>)> {
        let mut out: Vec<(&Entry, _)> = self
            .agents
            .get(agent)
            .map(|a| a.values().map(|e| (e, ())).collect())
            .unwrap_or_default();
        out.sort_by_key(|(e, _)| std::cmp::Reverse(e.at));
        out.into_iter()
            .map(|(e, _)| (e.thread.clone(), e.creator.clone()))
            .collect()
    }

    /// Conversations held, in all.
    pub(crate) fn len(&self) -> usize {
        self.agents.values().map(HashMap::len).sum()
    }
}

/// Whether `update` (at `at`) is newer than `entry`: a later status time; without times, a
/// different task or state. The same task once finished stays finished.
fn newer(update: &Observation, at: Option<OffsetDateTime>, entry: &Entry) -> bool {
    let same_task = update.task_id == entry.thread.last_task.id;
    if same_task && TaskState::parse(&entry.thread.last_task.state).is_terminal() {
        let state = update.task_state();
        if !state.is_terminal() || update.state == entry.thread.last_task.state {
            return false;
        }
    }
    match (at, entry.at) {
        (Some(new), Some(old)) => new > old,
        (Some(_), None) => true,
        (None, Some(_)) if same_task => false,
        (None, _) => !same_task || update.state != entry.thread.last_task.state,
    }
}

/// An RFC 3339 time as an instant (`None`: absent or not RFC 3339).
fn instant(timestamp: Option<&str>) -> Option<OffsetDateTime> {
    OffsetDateTime::parse(timestamp?, &time::format_description::well_known::Rfc3339).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(context: &str, task: &str, state: &str, at: Option<&str>) -> Observation {
        Observation {
            context_id: ContextId::new(context),
            task_id: TaskId::new(task),
            state: state.into(),
            timestamp: at.map(str::to_owned),
        }
    }

    const T1: &str = "2026-01-01T00:00:01Z";
    const T2: &str = "2026-01-01T00:00:01.5Z";
    const T3: &str = "2026-01-01T01:00:02+01:00";

    #[test]
    fn only_newer_updates_change_a_conversation() {
        let mut b = Book::new(10);
        let first = b
            .apply("a", &obs("c", "t", "working", Some(T1)), None)
            .unwrap();
        assert_eq!(first.thread.status, ThreadStatus::Working);
        assert_eq!(first.thread.thread_id.as_str(), "c");
        assert!(
            b.apply("a", &obs("c", "t", "working", Some(T1)), None)
                .is_none(),
            "a duplicate"
        );
        let later = b
            .apply("a", &obs("c", "t", "input-required", Some(T2)), None)
            .unwrap();
        assert_eq!(later.thread.status, ThreadStatus::InputRequired);
        // `.5Z` is after `Z` as an instant, though not as a string.
        assert!(
            b.apply("a", &obs("c", "t", "working", Some(T1)), None)
                .is_none(),
            "late"
        );
        // 01:00:02+01:00 is 00:00:02Z: after T2.
        let done = b
            .apply("a", &obs("c", "t", "completed", Some(T3)), None)
            .unwrap();
        assert_eq!(done.thread.status, ThreadStatus::Idle);
        assert_eq!(done.thread.last_task.state, "completed");
        assert!(b
            .apply("a", &obs("c", "t", "completed", None), None)
            .is_none());
        assert!(
            b.apply(
                "a",
                &obs("c", "t", "working", Some("2027-01-01T00:00:00Z")),
                None
            )
            .is_none(),
            "a finished task is never reopened"
        );
        let next = b
            .apply(
                "a",
                &obs("c", "t2", "working", Some("2027-01-01T00:00:00Z")),
                None,
            )
            .unwrap();
        assert_eq!(next.thread.last_task.id.as_str(), "t2");
        assert_eq!(b.len(), 1);
    }

    /// Any order of the same updates ends in the same book.
    #[test]
    fn reordering_and_duplicates_converge() {
        let updates = [
            obs("c", "t", "submitted", Some("2026-01-01T00:00:00Z")),
            obs("c", "t", "working", Some("2026-01-01T00:00:01Z")),
            obs("c", "t", "input-required", Some("2026-01-01T00:00:02Z")),
            obs("c", "t", "working", Some("2026-01-01T00:00:03Z")),
            obs("c", "t", "completed", Some("2026-01-01T00:00:04Z")),
            obs("d", "u", "failed", Some("2026-01-01T00:00:00Z")),
        ];
        let mut orders: Vec<Vec<usize>> = vec![(0..6).collect(), (0..6).rev().collect()];
        orders.push(vec![2, 0, 4, 1, 3, 5, 4, 2]);
        orders.push(vec![5, 3, 3, 1, 4, 0, 2]);
        let mut ends = Vec::new();
        for order in orders {
            let mut b = Book::new(10);
            for i in order {
                b.apply("a", &updates[i], None);
            }
            ends.push(b.threads("a"));
        }
        assert!(ends.windows(2).all(|w| w[0] == w[1]), "{ends:?}");
        assert_eq!(ends[0][0].0.last_task.state, "completed");
    }

    #[test]
    fn a_created_context_shows_under_its_creator_thread_to_whom_may_see_it() {
        let mut b = Book::new(10);
        let creator = (CallerId::new("alice"), ThreadId::new("alice-thread"));
        b.apply(
            "a",
            &obs("c1", "t", "working", Some(T1)),
            Some(creator.clone()),
        );
        b.apply("a", &obs("c2", "u", "working", Some(T2)), None);
        let caller = |id: &str, scopes: &[&str]| Caller {
            id: CallerId::new(id),
            scopes: scopes.iter().map(|s| s.to_string()).collect(),
            token: None,
        };
        let see = |c: &Caller, v: Visibility| -> Vec<String> {
            b.threads("a")
                .into_iter()
                .filter_map(|(t, creator)| shown(c, v, t, creator.as_ref()))
                .map(|t| t.thread_id.as_str().to_owned())
                .collect()
        };
        let alice = caller("alice", &[]);
        let bob = caller("bob", &[]);
        let admin = caller("ops", &["threads:all"]);
        assert_eq!(see(&alice, Visibility::Owner), ["alice-thread"]);
        assert!(see(&bob, Visibility::Owner).is_empty());
        assert_eq!(see(&bob, Visibility::Shared), ["c2"]);
        assert_eq!(see(&admin, Visibility::Owner), ["c2", "alice-thread"]);
        // The creator stays what was first seen.
        let later = b
            .apply("a", &obs("c1", "t", "completed", Some(T3)), None)
            .unwrap();
        assert_eq!(later.creator, Some(creator));
        assert_eq!(later.thread.thread_id.as_str(), "alice-thread");
    }

    #[test]
    fn the_book_is_bounded_per_agent_and_keeps_the_newest() {
        let mut b = Book::new(3);
        for i in 0..10 {
            let at = format!("2026-01-01T00:00:{i:02}Z");
            assert!(b
                .apply("a", &obs(&format!("c{i}"), "t", "working", Some(&at)), None)
                .is_some());
        }
        b.apply("other", &obs("x", "t", "working", Some(T1)), None);
        assert_eq!(b.len(), 4);
        let kept: Vec<String> = b
            .threads("a")
            .iter()
            .map(|(t, _)| t.context_id.as_str().to_owned())
            .collect();
        assert_eq!(kept, ["c9", "c8", "c7"]);
        assert!(
            b.apply("a", &obs("old", "t", "working", Some(T1)), None)
                .is_none(),
            "older than all kept"
        );
    }

    #[test]
    fn events_and_tasks_say_what_they_can() {
        let task: Task = serde_json::from_value(serde_json::json!({"id": "t",
            "contextId": "c", "status": {"state": "input-required", "timestamp": T1}}))
        .unwrap();
        let o = Observation::of_event(&StreamEvent::Task(task.clone())).unwrap();
        assert_eq!(o, obs("c", "t", "input-required", Some(T1)));
        let round: Observation = serde_json::from_str(&serde_json::to_string(&o).unwrap()).unwrap();
        assert_eq!(round, o);
        let mut no_context = task;
        no_context.context_id = None;
        assert!(Observation::of_task(&no_context).is_none());
    }
}
