//! `binding_store: memory`: bindings in this process only, bounded.
//!
//! Past its capacity ([`CAPACITY`] by default) an arbitrary eighth of the bindings is
//! evicted before the next one is added; a lost binding is recovered from the client's
//! state or `forwardedProps`, so eviction costs a lookup, never a conversation. Nothing
//! expires otherwise: `binding_ttl_s` is for Redis, where bindings outlive the process.

use dashmap::DashMap;

use super::{ContextOrigin, ThreadMark, ThreadRecord};
use crate::bridge::interrupt::InterruptId;
use crate::ids::{CallerId, ContextId, TaskId, ThreadId};

/// Bindings kept before eviction.
pub(crate) const CAPACITY: usize = 100_000;

/// (owner, agent, threadId): a tuple, so no id can run into its neighbour.
type Key = (CallerId, String, ThreadId);

/// The in-memory binding store.
#[derive(Debug)]
pub(crate) struct MemoryStore {
    map: DashMap<Key, ContextId>,
    /// (agent, contextId) -> (owner, threadId): who created a context through the gateway.
    owners: DashMap<(String, ContextId), (CallerId, ThreadId)>,
    /// (owner, agent, threadId) -> the thread's last task.
    tasks: DashMap<Key, TaskId>,
    /// (agent, interruptId) -> until when its answer is claimed.
    answers: DashMap<(String, String), std::time::Instant>,
    capacity: usize,
    /// (owner, agent, threadId) -> the caller's mark on the thread (CopilotKit's list).
    marks: DashMap<Key, ThreadMark>,
    /// (agent, taskId) -> the digest of the task's push token.
    push_tokens: DashMap<(String, TaskId), String>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::with_capacity(CAPACITY)
    }
}

impl MemoryStore {
    /// A store that keeps at most `capacity` bindings (at least 8).
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        Self {
            map: DashMap::new(),
            owners: DashMap::new(),
            tasks: DashMap::new(),
            answers: DashMap::new(),
            capacity: capacity.max(8),
            marks: DashMap::new(),
            push_tokens: DashMap::new(),
        }
    }

    pub(crate) fn claim_answer(
        &self,
        agent: &str,
        interrupt_id: &InterruptId,
        ttl: std::time::Duration,
    ) -> bool {
        let now = std::time::Instant::now();
        let key = (agent.to_owned(), interrupt_id.to_string());
        evict_if_full(&self.answers, &key, self.capacity);
        match self.answers.entry(key) {
            dashmap::Entry::Occupied(held) if *held.get() > now => false,
            dashmap::Entry::Occupied(mut expired) => {
                expired.insert(now + ttl);
                true
            }
            dashmap::Entry::Vacant(free) => {
                free.insert(now + ttl);
                true
            }
        }
    }

    pub(crate) fn release_answer(&self, agent: &str, interrupt_id: &InterruptId) {
        self.answers
            .remove(&(agent.to_owned(), interrupt_id.to_string()));
    }

    fn key(owner: &CallerId, agent: &str, thread_id: &ThreadId) -> Key {
        (owner.clone(), agent.to_owned(), thread_id.clone())
    }

    pub(crate) fn get(
        &self,
        owner: &CallerId,
        agent: &str,
        thread_id: &ThreadId,
    ) -> Option<ContextId> {
        self.map
            .get(&Self::key(owner, agent, thread_id))
            .map(|v| v.clone())
    }

    pub(crate) fn put(
        &self,
        owner: &CallerId,
        agent: &str,
        thread_id: &ThreadId,
        context_id: &ContextId,
        origin: ContextOrigin,
    ) {
        let key = Self::key(owner, agent, thread_id);
        evict_if_full(&self.map, &key, self.capacity);
        self.map.insert(key, context_id.clone());
        if origin == ContextOrigin::PickedUp {
            return;
        }
        let context = (agent.to_owned(), context_id.clone());
        evict_if_full(&self.owners, &context, self.capacity);
        self.owners
            .entry(context)
            .or_insert_with(|| (owner.clone(), thread_id.clone()));
    }

    pub(crate) fn put_task(&self, owner: &CallerId, agent: &str, record: &ThreadRecord) {
        let Some(task_id) = &record.task_id else {
            return;
        };
        let key = Self::key(owner, agent, &record.thread_id);
        evict_if_full(&self.tasks, &key, self.capacity);
        self.tasks.insert(key, task_id.clone());
    }

    pub(crate) fn last_task(
        &self,
        owner: &CallerId,
        agent: &str,
        thread_id: &ThreadId,
    ) -> Option<TaskId> {
        self.tasks
            .get(&Self::key(owner, agent, thread_id))
            .map(|t| t.clone())
    }

    pub(crate) fn threads_of(
        &self,
        owner: &CallerId,
        agent: &str,
        limit: usize,
    ) -> Vec<ThreadRecord> {
        self.map
            .iter()
            .filter(|e| e.key().0 == *owner && e.key().1 == agent)
            .take(limit)
            .map(|e| ThreadRecord {
                thread_id: e.key().2.clone(),
                context_id: e.value().clone(),
                task_id: self.tasks.get(e.key()).map(|t| t.clone()),
            })
            .collect()
    }

    /// The owner and threadId that created `context_id` on `agent`.
    pub(crate) fn owner_of(
        &self,
        agent: &str,
        context_id: &ContextId,
    ) -> Option<(CallerId, ThreadId)> {
        let context = (agent.to_owned(), context_id.clone());
        self.owners.get(&context).map(|v| v.clone())
    }

    pub(crate) fn marks_of(
        &self,
        owner: &CallerId,
        agent: &str,
        limit: usize,
    ) -> std::collections::HashMap<ThreadId, ThreadMark> {
        self.marks
            .iter()
            .filter(|e| e.key().0 == *owner && e.key().1 == agent)
            .take(limit)
            .map(|e| (e.key().2.clone(), e.value().clone()))
            .collect()
    }

    pub(crate) fn mark_of(
        &self,
        owner: &CallerId,
        agent: &str,
        thread_id: &ThreadId,
    ) -> Option<ThreadMark> {
        self.marks
            .get(&Self::key(owner, agent, thread_id))
            .map(|m| m.clone())
    }

    pub(crate) fn set_mark(
        &self,
        owner: &CallerId,
        agent: &str,
        thread_id: &ThreadId,
        mark: &ThreadMark,
    ) {
        let key = Self::key(owner, agent, thread_id);
        evict_if_full(&self.marks, &key, self.capacity);
        self.marks.insert(key, mark.clone());
    }

    /// Bindings held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

impl MemoryStore {
    pub(crate) fn put_push_token(&self, agent: &str, task_id: &TaskId, digest: String) {
        let key = (agent.to_owned(), task_id.clone());
        evict_if_full(&self.push_tokens, &key, self.capacity);
        self.push_tokens.insert(key, digest);
    }

    pub(crate) fn push_token(&self, agent: &str, task_id: &TaskId) -> Option<String> {
        self.push_tokens
            .get(&(agent.to_owned(), task_id.clone()))
            .map(|d| d.clone())
    }
}

/// Makes room for `key` in a map at `capacity`: an arbitrary eighth is evicted.
fn evict_if_full<K, V>(map: &DashMap<K, V>, key: &K, capacity: usize)
where
    K: Eq + std::hash::Hash + Clone,
{
    if map.len() < capacity || map.contains_key(key) {
        return;
    }
    let victims: Vec<K> = map
        .iter()
        .take(capacity / 8)
        .map(|e| e.key().clone())
        .collect();
    for k in victims {
        map.remove(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(id: &str) -> CallerId {
        CallerId::new(id)
    }

    fn thread(id: &str) -> ThreadId {
        ThreadId::new(id)
    }

    fn context(id: &str) -> ContextId {
        ContextId::new(id)
    }

    #[test]
    fn an_answer_is_claimed_once_until_released_or_expired() {
        let s = MemoryStore::default();
        let long = std::time::Duration::from_secs(60);
        let i = InterruptId::parse("a2a:t:1:q").unwrap();
        assert!(s.claim_answer("a", &i, long));
        assert!(!s.claim_answer("a", &i, long), "held");
        assert!(s.claim_answer("b", &i, long), "per agent");
        s.release_answer("a", &i);
        assert!(s.claim_answer("a", &i, std::time::Duration::ZERO));
        assert!(s.claim_answer("a", &i, long), "an expired claim is free");
    }

    #[test]
    fn a_context_remembers_who_created_it() {
        let s = MemoryStore::default();
        s.put(
            &who("alice"),
            "a",
            &thread("t1"),
            &context("c1"),
            ContextOrigin::Created,
        );
        s.put(
            &who("bob"),
            "a",
            &thread("t2"),
            &context("c1"),
            ContextOrigin::Created,
        );
        assert_eq!(
            s.owner_of("a", &context("c1")),
            Some((who("alice"), thread("t1"))),
            "the first owner stays the owner"
        );
        assert_eq!(s.owner_of("b", &context("c1")), None);
    }

    #[test]
    fn binds_per_owner_agent_and_thread() {
        let s = MemoryStore::default();
        s.put(
            &who("alice"),
            "a",
            &thread("t"),
            &context("c1"),
            ContextOrigin::Created,
        );
        s.put(
            &who("alice"),
            "b",
            &thread("t"),
            &context("c2"),
            ContextOrigin::Created,
        );
        s.put(
            &who("bob"),
            "a",
            &thread("t"),
            &context("c3"),
            ContextOrigin::Created,
        );
        assert_eq!(s.get(&who("alice"), "a", &thread("t")), Some(context("c1")));
        assert_eq!(s.get(&who("alice"), "b", &thread("t")), Some(context("c2")));
        assert_eq!(s.get(&who("bob"), "a", &thread("t")), Some(context("c3")));
        assert_eq!(s.get(&who("carol"), "a", &thread("t")), None);
        assert_eq!(s.get(&who("alice"), "a", &thread("other")), None);
        // Ids with the separators of a flat key cannot reach another owner's binding.
        s.put(
            &who("x:y"),
            "a",
            &thread("t"),
            &context("c4"),
            ContextOrigin::Created,
        );
        assert_eq!(s.get(&who("x"), "y:a", &thread("t")), None);
        // A rebind replaces.
        s.put(
            &who("alice"),
            "a",
            &thread("t"),
            &context("c5"),
            ContextOrigin::Created,
        );
        assert_eq!(s.get(&who("alice"), "a", &thread("t")), Some(context("c5")));
    }

    #[test]
    fn thread_marks_are_per_owner_and_agent() {
        let s = MemoryStore::default();
        let mark = ThreadMark {
            name: Some("n".into()),
            archived: true,
            ..Default::default()
        };
        s.set_mark(&who("alice"), "a", &thread("t"), &mark);
        assert_eq!(
            s.mark_of(&who("alice"), "a", &thread("t")),
            Some(mark.clone())
        );
        assert_eq!(s.mark_of(&who("bob"), "a", &thread("t")), None);
        assert_eq!(s.mark_of(&who("alice"), "b", &thread("t")), None);
        let marks = s.marks_of(&who("alice"), "a", 10);
        assert_eq!(marks.len(), 1);
        assert_eq!(marks[&thread("t")], mark);
        assert!(s.marks_of(&who("bob"), "a", 10).is_empty());
    }

    #[test]
    fn push_tokens_are_per_agent_and_task_and_bounded() {
        let s = MemoryStore::with_capacity(64);
        let task = TaskId::new("t");
        s.put_push_token("a", &task, "d1".into());
        assert_eq!(s.push_token("a", &task).as_deref(), Some("d1"));
        assert_eq!(s.push_token("b", &task), None);
        assert_eq!(s.push_token("a", &TaskId::new("u")), None);
        for i in 0..1_000 {
            s.put_push_token("a", &TaskId::new(format!("t{i}")), "d".into());
        }
        assert!(s.push_tokens.len() <= 64);
    }

    #[test]
    fn stays_bounded_and_evicts() {
        let s = MemoryStore::with_capacity(64);
        for i in 0..1_000 {
            s.put(
                &who("o"),
                "a",
                &thread(&format!("t{i}")),
                &context(&format!("c{i}")),
                ContextOrigin::Created,
            );
            assert!(s.len() <= 64, "{} bindings after {i}", s.len());
        }
        // The newest binding survives its own insertion.
        assert_eq!(
            s.get(&who("o"), "a", &thread("t999")),
            Some(context("c999"))
        );
        let kept = (0..1_000)
            .filter(|i| s.get(&who("o"), "a", &thread(&format!("t{i}"))).is_some())
            .count();
        assert!((56..=64).contains(&kept), "{kept}");
        // Rebinding a thread that is held does not evict anything.
        let before = s.len();
        s.put(
            &who("o"),
            "a",
            &thread("t999"),
            &context("again"),
            ContextOrigin::Created,
        );
        assert_eq!(s.len(), before);
    }

    /// A picked-up context binds the caller's thread but records no creator: it stays as
    /// visible as it was (docs/identity.md#ownership).
    #[test]
    fn a_picked_up_context_binds_without_claiming_it() {
        let s = MemoryStore::default();
        s.put(
            &who("bob"),
            "a",
            &thread("t"),
            &context("elsewhere"),
            ContextOrigin::PickedUp,
        );
        assert_eq!(
            s.get(&who("bob"), "a", &thread("t")),
            Some(context("elsewhere"))
        );
        assert_eq!(s.owner_of("a", &context("elsewhere")), None);
        s.put(
            &who("bob"),
            "a",
            &thread("u"),
            &context("mine"),
            ContextOrigin::Created,
        );
        assert_eq!(
            s.owner_of("a", &context("mine")),
            Some((who("bob"), thread("u")))
        );
    }
}
