//! The ids a conversation is keyed by, as types (docs/design.md#4-threads-and-contexts,
//! docs/design.md#11-security): the AG-UI client's [`ThreadId`], the A2A [`ContextId`] and
//! [`TaskId`], and the [`CallerId`] that owns a thread. Each is made where it enters the
//! gateway — a request's body or path, an upstream's answer, inbound auth, the binding store
//! — and from then on cannot be passed where another is expected (a binding is keyed by four
//! ids, three of them these).
//!
//! An id is opaque: any string its source sends, compared and stored byte for byte, never
//! parsed or normalised (its bound, `limits.max_id_bytes`, is checked where the request is
//! read). On the wire and in the binding store it is the bare string (`serde(transparent)`),
//! so its JSON and Redis keys are those of the string. Turning one kind into another is
//! named where the design does it ([`ContextId::of_thread`], [`ThreadId::of_context`]).
//!
//! The A2A model (`crate::a2a::model`), the projector and the plan of a message
//! (`crate::bridge::request`) carry ids as the wire's strings, as the AG-UI events do; they
//! become these types where the gateway keys, records or checks by them: the binding store,
//! a run's bookkeeping, ownership, the threads API.

use std::fmt;

/// Declares an opaque id type over a `String`, visible as `$vis` says.
macro_rules! id {
    ($(#[$doc:meta])* $vis:vis $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
        )]
        #[serde(transparent)]
        $vis struct $name(String);

        impl $name {
            /// The id its source wrote.
            $vis fn new(id: impl Into<String>) -> Self {
                Self(id.into())
            }

            $vis fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

id! {
    /// An AG-UI thread, as the client names it (`RunAgentInput.threadId`, the threads API's
    /// `{threadId}`). Never sent upstream (docs/design.md#4-threads-and-contexts).
    pub(crate) ThreadId
}

id! {
    /// An A2A context: one conversation on the upstream, minted by the A2A server (or the
    /// threadId itself, [`ContextId::of_thread`]).
    pub(crate) ContextId
}

id! {
    /// An A2A task: one unit of work in a context. Public: the A2A client's operations on
    /// a task take it (`crate::a2a::TaskId`).
    pub TaskId
}

id! {
    /// Who is calling (docs/design.md#11-security): an API key's name, a JWT's identity claim,
    /// or the anonymous caller; the owner of the threads it starts.
    pub(crate) CallerId
}

impl ContextId {
    /// The threadId asked of the upstream as a context: pick-up, and agents with
    /// `context_ids: client` (docs/design.md#4-threads-and-contexts).
    pub(crate) fn of_thread(thread_id: &ThreadId) -> Self {
        Self(thread_id.0.clone())
    }
}

impl ThreadId {
    /// A context not created through the gateway, shown as a thread: its contextId is its
    /// threadId (docs/design.md#4-threads-and-contexts, pick-up).
    pub(crate) fn of_context(context_id: &ContextId) -> Self {
        Self(context_id.0.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An id is the bare string on the wire and in the store, both ways, whatever it holds.
    #[test]
    fn an_id_is_its_string_on_the_wire() {
        for raw in ["t-1", "", "a:b%3A", "é \"x\""] {
            let id = ThreadId::new(raw);
            assert_eq!(id.as_str(), raw);
            assert_eq!(id.to_string(), raw);
            let json = serde_json::to_string(&id).unwrap();
            assert_eq!(json, serde_json::to_string(raw).unwrap());
            assert_eq!(serde_json::from_str::<ThreadId>(&json).unwrap(), id);
        }
        let owner: (CallerId, ThreadId) = serde_json::from_str(r#"["alice","t1"]"#).unwrap();
        assert_eq!(owner, (CallerId::new("alice"), ThreadId::new("t1")));
        assert!(serde_json::from_str::<TaskId>("1").is_err(), "not a string");
        let thread = ThreadId::new("t");
        assert_eq!(ContextId::of_thread(&thread).as_str(), thread.as_str());
        let context = ContextId::new("c");
        assert_eq!(ThreadId::of_context(&context).as_str(), context.as_str());
    }
}
