//! The demo agent's tasks, in memory and bounded
//! (docs/design.md#2-running-it-and-configuration: "its memory is bounded"). It records what
//! happens to a task and publishes it to subscribers; it knows nothing of scenarios or wire
//! versions.
//!
//! What a binding encodes is a [`TaskView`]: a copy of a task taken under its lock, so a
//! writer never holds a task while it encodes.
//!
//! Invariants (the numbers are [`Limits::DEFAULT`]):
//! - At most `live_tasks` tasks are live (not in a terminal state) at once. A task holds a
//!   permit from its creation until it reaches a terminal state; [`Store::create`] refuses a
//!   task beyond the cap. A task waiting for input stays live until answered or canceled.
//! - At most `finished_tasks` finished tasks are kept, evicted oldest-finished first (then
//!   `GetTask` answers TaskNotFound). A count rather than a TTL: the bound holds however
//!   fast tasks finish, and a quiet demo keeps its last answers for as long as it runs.
//! - A task's history holds at most `history_turns` turns and `history_bytes` bytes of text:
//!   the oldest turns go first, and a single turn longer than the budget is cut to it.
//!   Progress messages ([`AgentMessage::progress`], the `bench` events) never enter history.
//! - Subscribers cost nothing until one subscribes: a task's broadcast channel is made on
//!   the first subscription and dropped when the task ends.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use dashmap::mapref::one::{Ref, RefMut};
use dashmap::DashMap;
use tokio::sync::{broadcast, OwnedSemaphorePermit, Semaphore};

use crate::a2a::model::TaskState;

/// The store's bounds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    /// Tasks not in a terminal state (working, submitted, waiting for input).
    pub(super) live_tasks: usize,
    /// Finished tasks kept for `GetTask`/`ListTasks`.
    pub(super) finished_tasks: usize,
    /// Turns of one task's history.
    pub(super) history_turns: usize,
    /// Bytes of text in one task's history.
    pub(super) history_bytes: usize,
    /// Subscriptions open on one task at once.
    pub(super) subscribers: usize,
}

impl Limits {
    /// Room for the benchmark's open streams (issue 12 asks about 10,000); worst case a few
    /// hundred MiB (mostly the history budget times the task counts: 10,240 live tasks of
    /// at most 32 KiB of history is 320 MiB, and a quiet task holds far less).
    pub(super) const DEFAULT: Limits = Limits {
        live_tasks: 10_240,
        finished_tasks: 1000,
        history_turns: 64,
        history_bytes: 32 * 1024,
        subscribers: 4,
    };
}

/// What happened to a task, version-neutral; encoded per request version.
#[derive(Debug, Clone)]
pub(super) enum Update {
    Status {
        state: TaskState,
        message: Option<AgentMessage>,
    },
    Artifact {
        id: String,
        name: String,
        text: String,
        append: bool,
        last_chunk: bool,
    },
}

/// An agent message.
#[derive(Debug, Clone)]
pub(super) struct AgentMessage {
    pub(super) id: String,
    pub(super) text: String,
    /// Moves into history when the next status replaces it (a2a-sdk's TaskManager does
    /// this for every status message; progress messages opt out).
    pub(super) kept: bool,
}

impl AgentMessage {
    pub(super) fn new(text: impl Into<String>) -> Self {
        Self {
            id: uuid::Uuid::new_v4().to_string(),
            text: text.into(),
            kept: true,
        }
    }

    /// A message that is streamed but never recorded in history.
    pub(super) fn progress(text: String) -> Self {
        Self {
            kept: false,
            ..Self::new(text)
        }
    }
}

/// One message of a task's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Turn {
    pub(super) id: String,
    pub(super) user: bool,
    pub(super) text: String,
}

/// A task's history, bounded in turns and bytes (oldest first out).
#[derive(Debug)]
pub(super) struct History {
    turns: VecDeque<Turn>,
    bytes: usize,
    max_turns: usize,
    max_bytes: usize,
}

impl History {
    fn new(limits: &Limits) -> Self {
        Self {
            turns: VecDeque::new(),
            bytes: 0,
            max_turns: limits.history_turns,
            max_bytes: limits.history_bytes,
        }
    }

    pub(super) fn push(&mut self, mut turn: Turn) {
        if turn.text.len() > self.max_bytes {
            let mut cut = self.max_bytes;
            while !turn.text.is_char_boundary(cut) {
                cut -= 1;
            }
            // A fresh string: truncating in place would keep the whole allocation.
            turn.text = turn.text[..cut].to_owned();
        }
        self.bytes += turn.text.len();
        self.turns.push_back(turn);
        while self.turns.len() > self.max_turns || self.bytes > self.max_bytes {
            let Some(old) = self.turns.pop_front() else {
                break;
            };
            self.bytes -= old.text.len();
        }
    }

    /// The last `n` turns (all of them for `None`), oldest first.
    pub(super) fn last(&self, n: Option<usize>) -> impl Iterator<Item = &Turn> {
        let n = n.unwrap_or(self.turns.len()).min(self.turns.len());
        self.turns.iter().skip(self.turns.len() - n)
    }
}

/// One task.
#[derive(Debug)]
pub(super) struct TaskRecord {
    pub(super) context_id: String,
    pub(super) state: TaskState,
    pub(super) status_message: Option<AgentMessage>,
    pub(super) timestamp: SystemTime,
    pub(super) history: History,
    pub(super) artifacts: BTreeMap<String, (String, Vec<String>)>,
    /// Interrupted and not yet answered: the next message to the task is its answer.
    pub(super) awaits_answer: bool,
    /// The running scenario, for `CancelTask`.
    pub(super) worker: Option<tokio::task::AbortHandle>,
    /// Creation order, for `ListTasks` (newest first) and its page tokens.
    pub(super) created: u64,
    /// Queue length of one subscription, sized by the scenario's event size.
    pub(super) buffer: usize,
    updates: Option<broadcast::Sender<Update>>,
    live: Option<OwnedSemaphorePermit>,
}

impl TaskRecord {
    /// Moves the status message into history, as a2a-sdk's TaskManager does whenever a new
    /// status or a user message (an answer) comes: history then reads in the order things
    /// were said (the question before its answer).
    pub(super) fn retire_status_message(&mut self) {
        if let Some(prev) = self.status_message.take().filter(|m| m.kept) {
            self.history.push(Turn {
                id: prev.id,
                user: false,
                text: prev.text,
            });
        }
    }
}

/// A task as it is at one instant, for a binding to encode: its history cut to the last
/// `history_length` turns (all for `None`).
#[derive(Debug, Clone)]
pub(super) struct TaskView {
    pub(super) id: String,
    pub(super) context_id: String,
    pub(super) state: TaskState,
    pub(super) status_message: Option<AgentMessage>,
    pub(super) timestamp: SystemTime,
    pub(super) history: Vec<Turn>,
    /// `(id, name, texts)`, by id.
    pub(super) artifacts: Vec<(String, String, Vec<String>)>,
}

impl TaskView {
    pub(super) fn of(id: &str, t: &TaskRecord, history_length: Option<usize>) -> Self {
        Self {
            id: id.to_owned(),
            context_id: t.context_id.clone(),
            state: t.state.clone(),
            status_message: t.status_message.clone(),
            timestamp: t.timestamp,
            history: t.history.last(history_length).cloned().collect(),
            artifacts: t
                .artifacts
                .iter()
                .map(|(id, (name, texts))| (id.clone(), name.clone(), texts.clone()))
                .collect(),
        }
    }
}

/// The live-task cap was reached.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct AtCapacity(pub(super) usize);

/// The answer to a subscription request.
#[derive(Debug)]
pub(super) enum Subscription<T> {
    Unknown,
    /// The task ended in this state: nothing more will happen.
    Finished(TaskState),
    /// The task has this many subscriptions, its cap.
    Full(usize),
    /// Updates from now on, `view` of the task as of now, and the queue length its
    /// subscribers should use.
    Live {
        updates: broadcast::Receiver<Update>,
        view: T,
        buffer: usize,
    },
}

/// Every task of the demo agent.
#[derive(Debug)]
pub(super) struct Store {
    tasks: DashMap<String, TaskRecord>,
    /// Finished task ids, oldest-finished first.
    finished: Mutex<VecDeque<String>>,
    live: Arc<Semaphore>,
    seq: AtomicU64,
    limits: Limits,
}

impl Store {
    pub(super) fn new(limits: Limits) -> Self {
        Self {
            tasks: DashMap::new(),
            finished: Mutex::new(VecDeque::new()),
            live: Arc::new(Semaphore::new(limits.live_tasks)),
            seq: AtomicU64::new(0),
            limits,
        }
    }

    /// Creates a submitted task whose history starts with the user's message; refused
    /// when `live_tasks` tasks are live.
    pub(super) fn create(
        &self,
        context_id: String,
        first: Turn,
        buffer: usize,
    ) -> Result<String, AtCapacity> {
        let permit = self
            .live
            .clone()
            .try_acquire_owned()
            .map_err(|_| AtCapacity(self.limits.live_tasks))?;
        let mut history = History::new(&self.limits);
        history.push(first);
        let id = uuid::Uuid::new_v4().to_string();
        let record = TaskRecord {
            context_id,
            state: TaskState::Submitted,
            status_message: None,
            timestamp: SystemTime::now(),
            history,
            artifacts: BTreeMap::new(),
            awaits_answer: false,
            worker: None,
            created: self.seq.fetch_add(1, Ordering::Relaxed),
            buffer,
            updates: None,
            live: Some(permit),
        };
        self.tasks.insert(id.clone(), record);
        Ok(id)
    }

    pub(super) fn get(&self, id: &str) -> Option<Ref<'_, String, TaskRecord>> {
        self.tasks.get(id)
    }

    pub(super) fn get_mut(&self, id: &str) -> Option<RefMut<'_, String, TaskRecord>> {
        self.tasks.get_mut(id)
    }

    /// Every task, in no order.
    pub(super) fn iter(&self) -> dashmap::iter::Iter<'_, String, TaskRecord> {
        self.tasks.iter()
    }

    /// Subscribes to a live task's updates (the channel is made on the first subscription),
    /// with `view` of the task at the same instant, so no update falls between the two.
    pub(super) fn subscribe<T>(
        &self,
        id: &str,
        view: impl FnOnce(&TaskRecord) -> T,
    ) -> Subscription<T> {
        let Some(mut t) = self.tasks.get_mut(id) else {
            return Subscription::Unknown;
        };
        if t.state.is_terminal() {
            return Subscription::Finished(t.state.clone());
        }
        let buffer = t.buffer;
        let tx = t
            .updates
            .get_or_insert_with(|| broadcast::channel(buffer).0);
        if tx.receiver_count() >= self.limits.subscribers {
            return Subscription::Full(self.limits.subscribers);
        }
        let updates = tx.subscribe();
        Subscription::Live {
            updates,
            view: view(&t),
            buffer,
        }
    }

    /// Records an update on a live task and publishes it; returns `view` of the task after
    /// the update (before any eviction). `None` for an unknown or finished task: a
    /// terminal state is final, whatever a worker still sends.
    pub(super) fn record<T>(
        &self,
        id: &str,
        update: &Update,
        view: impl FnOnce(&TaskRecord) -> T,
    ) -> Option<T> {
        let (seen, finished) = {
            let mut t = self.tasks.get_mut(id)?;
            if t.state.is_terminal() {
                return None;
            }
            match update {
                Update::Status { state, message } => {
                    t.retire_status_message();
                    t.state = state.clone();
                    t.status_message = message.clone();
                    t.timestamp = SystemTime::now();
                    t.awaits_answer = state.is_interrupted();
                }
                Update::Artifact {
                    id,
                    name,
                    text,
                    append,
                    ..
                } => {
                    let entry = t
                        .artifacts
                        .entry(id.clone())
                        .or_insert_with(|| (name.clone(), Vec::new()));
                    if !append {
                        entry.1.clear();
                    }
                    entry.1.push(text.clone());
                }
            }
            if let Some(tx) = &t.updates {
                let _ = tx.send(update.clone());
            }
            let finished = t.state.is_terminal();
            if finished {
                // Subscribers have the terminal update; nothing follows it.
                t.updates = None;
                t.live = None;
            }
            (view(&t), finished)
        };
        if finished {
            self.retire(id);
        }
        Some(seen)
    }

    /// Queues a finished task and evicts the oldest finished beyond the cap. Runs without
    /// any task locked (removing from the map while holding one of its entries can
    /// deadlock).
    fn retire(&self, id: &str) {
        let evicted: Vec<String> = {
            let mut queue = self.finished.lock().unwrap_or_else(|e| e.into_inner());
            queue.push_back(id.to_owned());
            let excess = queue.len().saturating_sub(self.limits.finished_tasks);
            queue.drain(..excess).collect()
        };
        for id in evicted {
            self.tasks.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Limits {
        Limits {
            live_tasks: 3,
            finished_tasks: 2,
            history_turns: 4,
            history_bytes: 20,
            subscribers: 1,
        }
    }

    fn turn(text: &str) -> Turn {
        Turn {
            id: text.into(),
            user: true,
            text: text.into(),
        }
    }

    fn finish(store: &Store, id: &str) -> Option<()> {
        let done = Update::Status {
            state: TaskState::Completed,
            message: Some(AgentMessage::new("done")),
        };
        store.record(id, &done, |_| ())
    }

    #[test]
    fn the_oldest_finished_tasks_are_evicted_beyond_the_cap() {
        let store = Store::new(small());
        let ids: Vec<String> = (0..3)
            .map(|i| store.create(format!("c{i}"), turn("hi"), 8).unwrap())
            .collect();
        for id in &ids {
            finish(&store, id);
        }
        assert!(store.get(&ids[0]).is_none(), "first finished, first out");
        assert!(store.get(&ids[1]).is_some());
        assert!(store.get(&ids[2]).is_some());
        assert_eq!(store.iter().count(), 2);
        // A finished task takes no more updates, and is not queued twice.
        assert_eq!(finish(&store, &ids[2]), None);
        let newer = store.create("c".into(), turn("hi"), 8).unwrap();
        finish(&store, &newer);
        assert!(store.get(&ids[1]).is_none());
        assert!(store.get(&ids[2]).is_some());
    }

    #[test]
    fn live_tasks_are_capped_until_one_finishes() {
        let store = Store::new(small());
        let ids: Vec<String> = (0..3)
            .map(|_| store.create("c".into(), turn("hi"), 8).unwrap())
            .collect();
        assert_eq!(store.create("c".into(), turn("hi"), 8), Err(AtCapacity(3)));
        // Waiting for input is still live.
        let ask = Update::Status {
            state: TaskState::InputRequired,
            message: None,
        };
        store.record(&ids[0], &ask, |_| ());
        assert!(store.create("c".into(), turn("hi"), 8).is_err());
        finish(&store, &ids[0]);
        assert!(store.create("c".into(), turn("hi"), 8).is_ok());
    }

    #[test]
    fn history_keeps_the_last_turns_within_its_budget() {
        let mut h = History::new(&small());
        for t in ["a", "b", "c", "d", "e"] {
            h.push(turn(t));
        }
        let texts = |h: &History| h.last(None).map(|t| t.text.clone()).collect::<Vec<_>>();
        assert_eq!(texts(&h), ["b", "c", "d", "e"], "turn bound");
        h.push(turn("0123456789abcdefgh"));
        assert_eq!(texts(&h), ["d", "e", "0123456789abcdefgh"], "byte bound");
        h.push(turn(&format!("a{}", "é".repeat(30))));
        let cut = format!("a{}", "é".repeat(9));
        assert_eq!(
            texts(&h),
            [cut],
            "one long turn is cut to the budget, on a char boundary"
        );
        assert_eq!(h.last(Some(0)).count(), 0);
    }

    #[test]
    fn progress_messages_stay_out_of_history() {
        let store = Store::new(small());
        let id = store.create("c".into(), turn("go"), 8).unwrap();
        for i in 0..10 {
            let tick = Update::Status {
                state: TaskState::Working,
                message: Some(AgentMessage::progress(format!("{i}"))),
            };
            store.record(&id, &tick, |_| ());
        }
        finish(&store, &id);
        let t = store.get(&id).unwrap();
        let turns: Vec<&Turn> = t.history.last(None).collect();
        assert_eq!(turns, [&turn("go")]);
    }

    #[test]
    fn subscriptions_are_capped_and_end_with_the_task() {
        let store = Store::new(small());
        let id = store.create("c".into(), turn("go"), 8).unwrap();
        let Subscription::Live {
            updates: mut rx, ..
        } = store.subscribe(&id, |_| ())
        else {
            panic!("a live task takes a subscription");
        };
        assert!(matches!(
            store.subscribe(&id, |_| ()),
            Subscription::Full(1)
        ));
        finish(&store, &id);
        assert!(matches!(rx.try_recv(), Ok(Update::Status { .. })));
        assert!(matches!(
            rx.try_recv(),
            Err(broadcast::error::TryRecvError::Closed)
        ));
        assert!(matches!(
            store.subscribe(&id, |_| ()),
            Subscription::Finished(TaskState::Completed)
        ));
        assert!(matches!(
            store.subscribe("nope", |_| ()),
            Subscription::Unknown
        ));
    }
}
