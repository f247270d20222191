//! The contextId of a run (docs/design.md#4-threads-and-contexts): the one place the resolution
//! order is written.
//!
//! Explicit ids first (the client named the context), then what the gateway remembers, then
//! the threadId itself when the upstream knows it as a context (pick-up: an A2A 1.0
//! `ListTasks` by the run, [`ContextSource::asks_upstream`]) or the agent accepts client
//! context ids; otherwise none, and the A2A server mints one (late binding: `RUN_STARTED`
//! waits for it).

use crate::ids::{ContextId, ThreadId};

/// Where a run's contextId came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContextSource {
    /// `forwardedProps.a2a.contextId`.
    ForwardedProps,
    /// `state.a2a.contextId`, as the gateway projected it on an earlier run.
    ClientState,
    /// The binding store (owner + threadId -> contextId).
    Binding,
    /// The threadId itself (`context_ids: client` agents).
    ThreadId,
}

/// Every source a run's contextId may come from.
#[derive(Debug, Clone, Default)]
pub(crate) struct ContextCandidates {
    pub forwarded_props: Option<ContextId>,
    pub client_state: Option<ContextId>,
    pub binding: Option<ContextId>,
    /// The threadId, when the agent accepts client context ids.
    pub thread_id: Option<ContextId>,
}

impl ContextSource {
    /// Whether the threadId is asked of the upstream as a known context (pick-up,
    /// docs/design.md#4-threads-and-contexts, step 4): only when nothing explicit or remembered
    /// named the context.
    pub(crate) fn asks_upstream(source: Option<ContextSource>) -> bool {
        matches!(source, None | Some(ContextSource::ThreadId))
    }

    /// The context whose history a run sending a new message reads before it sends, to
    /// open with it (docs/identity.md, "Opening with the history"); decided once per run
    /// from what the run already has, never per event:
    /// - pick-up: nothing named the context, and the caller may see contexts not created
    ///   through the gateway: the threadId, if the upstream knows it as a context;
    /// - catch-up: the context is known (props, state, binding) and the client does not
    ///   hold the thread (`holds_the_thread` false: it sends no earlier turn — a second
    ///   device, tab or terminal — or its state names another task than the thread's last
    ///   one — a tab that missed another's turns): that context;
    /// - otherwise none: a client holding the thread costs no upstream call.
    pub(crate) fn history_to_read(
        resolved: Option<(&ContextId, ContextSource)>,
        thread_id: &ThreadId,
        may_pick_up: bool,
        holds_the_thread: bool,
    ) -> Option<ContextId> {
        match resolved {
            _ if !Self::asks_upstream(resolved.map(|(_, s)| s)) => {
                let (context, _) = resolved?;
                (!holds_the_thread).then(|| context.clone())
            }
            _ => may_pick_up.then(|| ContextId::of_thread(thread_id)),
        }
    }
}

impl ContextCandidates {
    /// Whether the binding store is asked: only when no explicit id decides (a run that
    /// carries its context does not wait on the store).
    pub(crate) fn needs_binding(&self) -> bool {
        self.forwarded_props.is_none() && self.client_state.is_none()
    }

    /// The first candidate in docs/design.md#4-threads-and-contexts order.
    pub(crate) fn resolve(self) -> Option<(ContextId, ContextSource)> {
        let ordered = [
            (self.forwarded_props, ContextSource::ForwardedProps),
            (self.client_state, ContextSource::ClientState),
            (self.binding, ContextSource::Binding),
            (self.thread_id, ContextSource::ThreadId),
        ];
        ordered
            .into_iter()
            .find_map(|(id, source)| id.map(|id| (id, source)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(id: &str) -> Option<ContextId> {
        Some(ContextId::new(id))
    }

    #[test]
    fn explicit_ids_win_then_memory_then_the_thread() {
        let all = ContextCandidates {
            forwarded_props: context("p"),
            client_state: context("s"),
            binding: context("b"),
            thread_id: context("t"),
        };
        assert_eq!(
            all.clone().resolve().unwrap().1,
            ContextSource::ForwardedProps
        );
        let no_props = ContextCandidates {
            forwarded_props: None,
            ..all.clone()
        };
        assert_eq!(no_props.clone().resolve().unwrap().0.as_str(), "s");
        let remembered = ContextCandidates {
            client_state: None,
            ..no_props
        };
        assert_eq!(
            remembered.clone().resolve().unwrap().1,
            ContextSource::Binding
        );
        let thread = ContextCandidates {
            binding: None,
            ..remembered
        };
        assert_eq!(thread.resolve().unwrap().1, ContextSource::ThreadId);
        assert!(ContextCandidates::default().resolve().is_none());
        assert!(ContextSource::asks_upstream(None));
        assert!(ContextSource::asks_upstream(Some(ContextSource::ThreadId)));
        assert!(!ContextSource::asks_upstream(Some(ContextSource::Binding)));
    }

    #[test]
    fn history_is_read_for_a_pick_up_or_a_client_that_holds_no_turn() {
        use ContextSource::{Binding, ClientState, ForwardedProps};
        let t = ThreadId::new("t");
        let read = |resolved: Option<(&str, ContextSource)>, may_pick_up, holds| {
            let resolved = resolved.map(|(id, source)| (ContextId::new(id), source));
            let resolved = resolved.as_ref().map(|(id, source)| (id, *source));
            ContextSource::history_to_read(resolved, &t, may_pick_up, holds).map(String::from)
        };
        // Pick-up: only for callers who may see foreign contexts, whatever the client holds.
        assert_eq!(read(None, true, true).as_deref(), Some("t"));
        assert_eq!(
            read(Some(("t", ContextSource::ThreadId)), true, false).as_deref(),
            Some("t")
        );
        assert_eq!(read(None, false, false), None);
        // Catch-up: a known context, a client without its turns (a second device).
        for source in [Binding, ClientState, ForwardedProps] {
            assert_eq!(
                read(Some(("c", source)), false, false).as_deref(),
                Some("c")
            );
            assert_eq!(read(Some(("c", source)), true, true), None);
        }
    }
}
