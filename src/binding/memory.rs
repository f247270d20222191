//! `binding_store: memory`: bindings in this process only, bounded.
//!
//! Past its capacity ([`CAPACITY`] by default) an arbitrary eighth of the bindings is
//! evicted before the next one is added; a lost binding is recovered from the client's
//! state or `forwardedProps`, so eviction costs a lookup, never a conversation. Nothing
//! expires otherwise: `binding_ttl_s` is for Redis, where bindings outlive the process.

use dashmap::DashMap;

/// Bindings kept before eviction.
pub(crate) const CAPACITY: usize = 100_000;

/// (owner, agent, threadId): a tuple, so no id can run into its neighbour.
type Key = (String, String, String);

/// The in-memory binding store.
#[derive(Debug)]
pub(crate) struct MemoryStore {
    map: DashMap<Key, String>,
    capacity: usize,
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
            capacity: capacity.max(8),
        }
    }

    fn key(owner: &str, agent: &str, thread_id: &str) -> Key {
        (owner.to_owned(), agent.to_owned(), thread_id.to_owned())
    }

    pub(crate) fn get(&self, owner: &str, agent: &str, thread_id: &str) -> Option<String> {
        self.map
            .get(&Self::key(owner, agent, thread_id))
            .map(|v| v.clone())
    }

    pub(crate) fn put(&self, owner: &str, agent: &str, thread_id: &str, context_id: &str) {
        let key = Self::key(owner, agent, thread_id);
        if self.map.len() >= self.capacity && !self.map.contains_key(&key) {
            let victims: Vec<_> = self
                .map
                .iter()
                .take(self.capacity / 8)
                .map(|e| e.key().clone())
                .collect();
            for k in victims {
                self.map.remove(&k);
            }
        }
        self.map.insert(key, context_id.to_owned());
    }

    /// Bindings held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_per_owner_agent_and_thread() {
        let s = MemoryStore::default();
        s.put("alice", "a", "t", "c1");
        s.put("alice", "b", "t", "c2");
        s.put("bob", "a", "t", "c3");
        assert_eq!(s.get("alice", "a", "t").as_deref(), Some("c1"));
        assert_eq!(s.get("alice", "b", "t").as_deref(), Some("c2"));
        assert_eq!(s.get("bob", "a", "t").as_deref(), Some("c3"));
        assert_eq!(s.get("carol", "a", "t"), None);
        assert_eq!(s.get("alice", "a", "other"), None);
        // Ids with the separators of a flat key cannot reach another owner's binding.
        s.put("x:y", "a", "t", "c4");
        assert_eq!(s.get("x", "y:a", "t"), None);
        // A rebind replaces.
        s.put("alice", "a", "t", "c5");
        assert_eq!(s.get("alice", "a", "t").as_deref(), Some("c5"));
    }

    #[test]
    fn stays_bounded_and_evicts() {
        let s = MemoryStore::with_capacity(64);
        for i in 0..1_000 {
            s.put("o", "a", &format!("t{i}"), &format!("c{i}"));
            assert!(s.len() <= 64, "{} bindings after {i}", s.len());
        }
        // The newest binding survives its own insertion.
        assert_eq!(s.get("o", "a", "t999").as_deref(), Some("c999"));
        let kept = (0..1_000)
            .filter(|i| s.get("o", "a", &format!("t{i}")).is_some())
            .count();
        assert!((56..=64).contains(&kept), "{kept}");
        // Rebinding a thread that is held does not evict anything.
        let before = s.len();
        s.put("o", "a", "t999", "again");
        assert_eq!(s.len(), before);
    }
}
