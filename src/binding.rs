//! The threadId -> contextId binding store (DESIGN §4): the only thing the gateway may
//! remember. It holds ids only, never content.
//!
//! `memory` is bounded: past [`MEMORY_CAPACITY`] bindings an arbitrary eighth is evicted
//! (a lost binding is recovered from the client's state or `forwardedProps`, so eviction
//! costs a lookup, never a conversation).

use dashmap::DashMap;

/// Bindings kept by the memory store before eviction.
pub(crate) const MEMORY_CAPACITY: usize = 100_000;

/// A binding store.
#[derive(Debug, Default)]
pub(crate) struct BindingStore {
    memory: DashMap<(String, String), String>,
}

impl BindingStore {
    /// An empty in-memory store.
    pub(crate) fn memory() -> Self {
        Self::default()
    }

    /// The contextId bound to `thread_id` on `agent`.
    pub(crate) async fn get(&self, agent: &str, thread_id: &str) -> Option<String> {
        self.memory
            .get(&(agent.to_owned(), thread_id.to_owned()))
            .map(|v| v.clone())
    }

    /// Binds `thread_id` on `agent` to `context_id`.
    pub(crate) async fn put(&self, agent: &str, thread_id: &str, context_id: &str) {
        if self.memory.len() >= MEMORY_CAPACITY {
            let victims: Vec<_> = self
                .memory
                .iter()
                .take(MEMORY_CAPACITY / 8)
                .map(|e| e.key().clone())
                .collect();
            for k in victims {
                self.memory.remove(&k);
            }
        }
        self.memory.insert(
            (agent.to_owned(), thread_id.to_owned()),
            context_id.to_owned(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn binds_per_agent_and_thread() {
        let s = BindingStore::memory();
        s.put("a", "t", "c1").await;
        s.put("b", "t", "c2").await;
        assert_eq!(s.get("a", "t").await.as_deref(), Some("c1"));
        assert_eq!(s.get("b", "t").await.as_deref(), Some("c2"));
        assert_eq!(s.get("a", "other").await, None);
    }
}
