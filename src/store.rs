//! The binding store (docs/design.md#4-threads-and-contexts, docs/design.md#11-security):
//! owner + agent + threadId -> contextId, the only thing the gateway may remember. It holds
//! ids and owners only, never content.
//!
//! Two kinds: [`memory`] (the default: per process, bounded, evicting) and [`redis`] (shared
//! by replicas, survives restarts, entries expire after `binding_ttl_s` without use).
//!
//! The store is an optimisation of the resolution order in [`crate::bridge::context`], never
//! a dependency of a run: a binding that is lost (evicted, expired, or the store down) costs
//! one lookup, and the run falls back to the context the client carries in its state or
//! `forwardedProps`, or starts a new conversation. So [`Store::get`] and
//! [`Store::put`] cannot fail; failures are logged and counted by [`FailureKind`]
//! ([`Store::errors`], `agui_gateway_binding_store_errors_total{kind}`), and shown by
//! `/readyz` through [`Store::check`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::bridge::interrupt::InterruptId;
use crate::ids::{CallerId, ContextId, TaskId, ThreadId};
use crate::redact::Shown;

pub(crate) mod memory;
pub(crate) mod redis;

pub(crate) use self::memory::MemoryStore;
pub(crate) use self::redis::{RedisStore, Unavailable};

/// Whether binding a thread records its caller as the context's creator (`owner_of`,
/// docs/identity.md#ownership): a context picked up from the upstream (started by another A2A
/// client) stays as visible as it was; the caller that picked it up only binds its thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ContextOrigin {
    /// The gateway created the context for this caller (or the caller already owns it).
    Created,
    /// The run picked up a conversation that already had tasks upstream.
    PickedUp,
}

impl ContextOrigin {
    /// The origin of a run's context by where it came from
    /// ([`crate::bridge::context::ContextSource`]): a new context (none named), the caller's
    /// own binding, or its threadId as a context (until a pick-up finds tasks there) are the
    /// caller's; `None` for one the client named (props, state), which the store's creator
    /// record decides.
    pub(crate) fn of(source: Option<crate::bridge::context::ContextSource>) -> Option<Self> {
        use crate::bridge::context::ContextSource as S;
        match source {
            None | Some(S::Binding | S::ThreadId) => Some(Self::Created),
            Some(S::ForwardedProps | S::ClientState) => None,
        }
    }
}

/// One thread as the store knows it (ids only).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ThreadRecord {
    pub thread_id: ThreadId,
    pub context_id: ContextId,
    /// The thread's last task, once one was seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<TaskId>,
}

/// Why a store operation failed: the `kind` label of
/// `agui_gateway_binding_store_errors_total` and the `kind` of `/readyz`'s `bindingStore`
/// (docs/operations.md#managed-redis).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Refused credentials (`WRONGPASS`, `NOAUTH`) or a command the ACL user may not run.
    Auth,
    /// The TLS handshake failed (named: unknown CA, expired, a client certificate refused).
    Tls,
    /// No answer in time.
    Timeout,
    /// Refused, reset or closed connections; names that do not resolve.
    Connection,
    /// The cluster is down, a slot has no node, redirections ran out.
    Cluster,
    /// No sentinel names the master.
    Sentinel,
    /// Any other error reply, or a reply the store cannot have written.
    Server,
    /// Skipped: the store failed less than a second before.
    Skipped,
}

impl FailureKind {
    /// Every kind, in the order of the metric's series.
    pub const ALL: [Self; 8] = [
        Self::Auth,
        Self::Tls,
        Self::Timeout,
        Self::Connection,
        Self::Cluster,
        Self::Sentinel,
        Self::Server,
        Self::Skipped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auth => "auth",
            Self::Tls => "tls",
            Self::Timeout => "timeout",
            Self::Connection => "connection",
            Self::Cluster => "cluster",
            Self::Sentinel => "sentinel",
            Self::Server => "server",
            Self::Skipped => "skipped",
        }
    }

    /// The kind of a `redis` crate error.
    fn of(e: &::redis::RedisError) -> Self {
        use ::redis::{ErrorKind as K, ServerErrorKind as S};
        if crate::a2a::tls::explain(e).is_some() {
            return Self::Tls;
        }
        if matches!(e.code(), Some("WRONGPASS" | "NOAUTH" | "NOPERM")) {
            return Self::Auth;
        }
        match e.kind() {
            K::AuthenticationFailed | K::Server(S::NoPerm) => Self::Auth,
            K::Server(S::Moved | S::Ask | S::TryAgain | S::ClusterDown | S::CrossSlot)
            | K::ClusterConnectionNotFound => Self::Cluster,
            K::MasterNameNotFoundBySentinel
            | K::NoValidReplicasFoundBySentinel
            | K::EmptySentinelList => Self::Sentinel,
            _ if e.is_timeout() => Self::Timeout,
            _ if e.is_io_error() || e.is_connection_refusal() || e.is_connection_dropped() => {
                Self::Connection
            }
            _ => Self::Server,
        }
    }
}

/// Failed or skipped operations, by kind, since start.
#[derive(Debug, Default)]
pub struct StoreErrors([AtomicU64; FailureKind::ALL.len()]);

impl StoreErrors {
    pub(crate) fn add(&self, kind: FailureKind) {
        self.0[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The count of `kind`.
    pub fn of(&self, kind: FailureKind) -> u64 {
        self.0[kind as usize].load(Ordering::Relaxed)
    }

    /// The count of every kind.
    pub fn total(&self) -> u64 {
        FailureKind::ALL.iter().map(|k| self.of(*k)).sum()
    }
}

/// A binding store: one of the kinds, and the count of its failures.
#[derive(Debug)]
pub(crate) struct Store {
    kind: Kind,
    /// Failed or skipped operations (`agui_gateway_binding_store_errors_total`).
    errors: Arc<StoreErrors>,
}

#[derive(Debug)]
enum Kind {
    /// Boxed: the memory store is a handful of maps, the Redis one a pointer.
    Memory(Box<MemoryStore>),
    Redis(Arc<RedisStore>),
}

impl Store {
    /// An empty in-memory store.
    pub(crate) fn memory() -> Self {
        Self::of(Kind::Memory(Box::default()))
    }

    /// A store on Redis.
    pub(crate) fn redis(store: Arc<RedisStore>) -> Self {
        Self::of(Kind::Redis(store))
    }

    fn of(kind: Kind) -> Self {
        Self {
            kind,
            errors: Arc::default(),
        }
    }

    /// The contextId `owner` bound to `thread_id` on `agent`, if the store has it and
    /// answers.
    pub(crate) async fn get(
        &self,
        owner: &CallerId,
        agent: &str,
        thread_id: &ThreadId,
    ) -> Option<ContextId> {
        match &self.kind {
            Kind::Memory(m) => m.get(owner, agent, thread_id),
            Kind::Redis(r) => match r.get(owner, agent, thread_id).await {
                Ok(found) => found,
                Err(e) => {
                    self.errors.add(e.kind());
                    // A skip is logged once, when the store failed.
                    if let Unavailable::Failed { kind, reason } = e {
                        tracing::warn!(store = %r, kind = kind.as_str(), %reason, "binding lookup failed; the run goes on without it")
                    }
                    None
                }
            },
        }
    }

    /// Binds `owner`'s `thread_id` on `agent` to `context_id`, recording `owner` as the
    /// context's creator when `origin` says it created it. A store that fails loses the
    /// binding (logged and counted), never the run.
    pub(crate) async fn put(
        &self,
        owner: &CallerId,
        agent: &str,
        thread_id: &ThreadId,
        context_id: &ContextId,
        origin: ContextOrigin,
    ) {
        let stored = match &self.kind {
            Kind::Memory(m) => {
                m.put(owner, agent, thread_id, context_id, origin);
                Ok(())
            }
            Kind::Redis(r) => r
                .put(owner, agent, thread_id, context_id, origin)
                .await
                .map_err(|e| (r.to_string(), e)),
        };
        if let Err((store, reason)) = stored {
            self.errors.add(reason.kind());
            tracing::warn!(%store, agent, thread_id = %Shown(thread_id.as_str()), kind = reason.kind().as_str(), %reason, "binding not stored; the client's state still carries the context");
        }
    }

    /// Records the context and last task of `owner`'s thread (for the thread list of
    /// upstreams without `ListTasks`). Losing it costs the thread its place in that list.
    pub(crate) async fn put_task(&self, owner: &CallerId, agent: &str, record: &ThreadRecord) {
        let stored = match &self.kind {
            Kind::Memory(m) => {
                m.put_task(owner, agent, record);
                Ok(())
            }
            Kind::Redis(r) => r.put_task(owner, agent, record).await,
        };
        if let Err(e) = stored {
            self.errors.add(e.kind());
        }
    }

    /// The last task recorded for `owner`'s `thread_id` on `agent`, if the store has it and
    /// answers (a failure reads as none: the run then shows no history it was not asked for).
    pub(crate) async fn last_task(
        &self,
        owner: &CallerId,
        agent: &str,
        thread_id: &ThreadId,
    ) -> Option<TaskId> {
        match &self.kind {
            Kind::Memory(m) => m.last_task(owner, agent, thread_id),
            Kind::Redis(r) => r
                .last_task(owner, agent, thread_id)
                .await
                .unwrap_or_else(|e| {
                    self.errors.add(e.kind());
                    None
                }),
        }
    }

    /// `owner`'s threads on `agent` with their context and last task, at most `limit`.
    pub(crate) async fn threads_of(
        &self,
        owner: &CallerId,
        agent: &str,
        limit: usize,
    ) -> Vec<ThreadRecord> {
        match &self.kind {
            Kind::Memory(m) => m.threads_of(owner, agent, limit),
            Kind::Redis(r) => r.threads_of(owner, agent, limit).await.unwrap_or_else(|e| {
                self.errors.add(e.kind());
                Vec::new()
            }),
        }
    }

    /// Who created `context_id` on `agent` through the gateway: `(owner, threadId)`. `None`
    /// for a context the gateway did not create (or forgot, or cannot ask about now).
    pub(crate) async fn owner_of(
        &self,
        agent: &str,
        context_id: &ContextId,
    ) -> Option<(CallerId, ThreadId)> {
        match &self.kind {
            Kind::Memory(m) => m.owner_of(agent, context_id),
            Kind::Redis(r) => r.owner_of(agent, context_id).await.unwrap_or_else(|e| {
                self.errors.add(e.kind());
                None
            }),
        }
    }

    /// Claims the answer to `interrupt_id` on `agent` for one run
    /// (docs/design.md#7-human-in-the-loop: a resume sent twice at once goes upstream once):
    /// `false` if another run holds it. The claim lasts `ttl` — an interrupt is answered once
    /// — unless released after a refusal. A store that does not answer grants it (the GetTask
    /// check still stops sequential replays).
    pub(crate) async fn claim_answer(
        &self,
        agent: &str,
        interrupt_id: &InterruptId,
        ttl: std::time::Duration,
    ) -> bool {
        match &self.kind {
            Kind::Memory(m) => m.claim_answer(agent, interrupt_id, ttl),
            Kind::Redis(r) => r
                .claim_answer(agent, interrupt_id, ttl)
                .await
                .unwrap_or_else(|e| {
                    self.errors.add(e.kind());
                    true
                }),
        }
    }

    /// Gives a claim back: the upstream did not take the answer, another may be sent.
    pub(crate) async fn release_answer(&self, agent: &str, interrupt_id: &InterruptId) {
        match &self.kind {
            Kind::Memory(m) => m.release_answer(agent, interrupt_id),
            Kind::Redis(r) => {
                if let Err(e) = r.release_answer(agent, interrupt_id).await {
                    self.errors.add(e.kind());
                }
            }
        }
    }

    /// The count of failed operations since start, by kind, live.
    pub(crate) fn errors(&self) -> Arc<StoreErrors> {
        self.errors.clone()
    }

    /// `memory` or `redis`.
    pub(crate) fn kind(&self) -> &'static str {
        match self.kind {
            Kind::Memory(_) => "memory",
            Kind::Redis(_) => "redis",
        }
    }

    /// Readiness (`/readyz`): `Err` with a JSON description naming the store when it does
    /// not answer.
    pub(crate) async fn check(&self) -> Result<(), Value> {
        match &self.kind {
            Kind::Memory(_) => Ok(()),
            // `store`: which store; `kind`: why it failed (no URL: anyone may read this).
            // Not counted in `errors`: a probe observes the store, it is no operation of a
            // run (a failure is counted when a run's call meets it).
            Kind::Redis(r) => r.ping().await.map_err(|e| {
                json!({"store": self.kind(), "kind": e.kind().as_str(), "error": e.to_string()})
            }),
        }
    }

    // ---- the live inbox (docs/design.md#the-live-inbox) ----

    /// Registers the push token of `task_id` on `agent` (its SHA-256 digest, never the token
    /// itself, [`crate::push::digest`]), for `binding_ttl_s` like a binding, so any replica
    /// accepts the task's pushes. A store that fails loses it (logged and counted): the
    /// task's pushes are then refused, and the shared poll still sees the task.
    pub(crate) async fn put_push_token(&self, agent: &str, task_id: &TaskId, token: &str) {
        let digest = crate::push::digest(token);
        let stored = match &self.kind {
            Kind::Memory(m) => {
                m.put_push_token(agent, task_id, digest);
                Ok(())
            }
            Kind::Redis(r) => r.put_push_token(agent, task_id, &digest).await,
        };
        if let Err(e) = stored {
            self.errors.add(e.kind());
            tracing::warn!(
                agent,
                kind = e.kind().as_str(),
                "push registration not stored; the task's pushes will be refused"
            );
        }
    }

    /// The digest of the push token registered for `task_id` on `agent`, if any (a store
    /// that does not answer: none, so the push is refused and the agent sends it again).
    pub(crate) async fn push_token(&self, agent: &str, task_id: &TaskId) -> Option<String> {
        match &self.kind {
            Kind::Memory(m) => m.push_token(agent, task_id),
            Kind::Redis(r) => r.push_token(agent, task_id).await.unwrap_or_else(|e| {
                self.errors.add(e.kind());
                None
            }),
        }
    }

    /// Takes the lease `name` for `ttl` (one replica at a time does what it guards): the
    /// memory store always grants it (one process); Redis grants it to the first replica
    /// to ask (`SET NX PX`). A store that does not answer grants it: each replica then does
    /// the work itself, as if alone.
    pub(crate) async fn lease(&self, name: &str, ttl: std::time::Duration) -> bool {
        match &self.kind {
            Kind::Memory(_) => true,
            Kind::Redis(r) => r.lease(name, ttl).await.unwrap_or_else(|e| {
                self.errors.add(e.kind());
                true
            }),
        }
    }

    /// Shares the last read of `agent`'s conversations with the other replicas for `ttl`
    /// (Redis only; the memory store has no other replica).
    pub(crate) async fn put_inbox_read(&self, agent: &str, read: &str, ttl: std::time::Duration) {
        if let Kind::Redis(r) = &self.kind {
            if let Err(e) = r.put_inbox_read(agent, read, ttl).await {
                self.errors.add(e.kind());
            }
        }
    }

    /// The Redis store, when it is one: the inbox relays its changes through it
    /// (docs/design.md#the-live-inbox); the memory store has no other replica.
    pub(crate) fn redis_store(&self) -> Option<Arc<RedisStore>> {
        match &self.kind {
            Kind::Memory(_) => None,
            Kind::Redis(r) => Some(r.clone()),
        }
    }

    /// The last read of `agent`'s conversations another replica shared, if any.
    pub(crate) async fn inbox_read(&self, agent: &str) -> Option<String> {
        match &self.kind {
            Kind::Memory(_) => None,
            Kind::Redis(r) => r.inbox_read(agent).await.unwrap_or_else(|e| {
                self.errors.add(e.kind());
                None
            }),
        }
    }
}

/// What a caller did to one of its threads in CopilotKit's thread list
/// (docs/copilotkit.md#the-thread-list): a rename, archived, deleted. Per caller and agent,
/// kept with the binding store's life (`binding_ttl_s` on Redis); it only hides or names a
/// thread for that caller and never touches the A2A history.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ThreadMark {
    /// The caller's name for the thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub archived: bool,
    #[serde(default)]
    pub deleted: bool,
    /// When the caller last changed the mark (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

/// Marks read for one owner and agent at most (more are left out of the read).
pub(crate) const MARKS_LIMIT: usize = 2_000;

impl Store {
    /// `owner`'s thread marks on `agent` (at most [`MARKS_LIMIT`]); `Err` with the failure's
    /// kind when the store does not answer (counted): the thread list must not show what
    /// the caller deleted as if the store had nothing.
    pub(crate) async fn marks_of(
        &self,
        owner: &CallerId,
        agent: &str,
    ) -> Result<std::collections::HashMap<ThreadId, ThreadMark>, FailureKind> {
        match &self.kind {
            Kind::Memory(m) => Ok(m.marks_of(owner, agent, MARKS_LIMIT)),
            Kind::Redis(r) => r.marks_of(owner, agent, MARKS_LIMIT).await.map_err(|e| {
                self.errors.add(e.kind());
                e.kind()
            }),
        }
    }

    /// The mark of `owner`'s `thread_id` on `agent`, if any.
    pub(crate) async fn mark_of(
        &self,
        owner: &CallerId,
        agent: &str,
        thread_id: &ThreadId,
    ) -> Result<Option<ThreadMark>, FailureKind> {
        match &self.kind {
            Kind::Memory(m) => Ok(m.mark_of(owner, agent, thread_id)),
            Kind::Redis(r) => r.mark_of(owner, agent, thread_id).await.map_err(|e| {
                self.errors.add(e.kind());
                e.kind()
            }),
        }
    }

    /// Records the mark of `owner`'s `thread_id` on `agent`; `Err` when the store did not
    /// keep it (the caller is told: a rename or a delete that was not kept is no success).
    pub(crate) async fn set_mark(
        &self,
        owner: &CallerId,
        agent: &str,
        thread_id: &ThreadId,
        mark: &ThreadMark,
    ) -> Result<(), FailureKind> {
        match &self.kind {
            Kind::Memory(m) => {
                m.set_mark(owner, agent, thread_id, mark);
                Ok(())
            }
            Kind::Redis(r) => r.set_mark(owner, agent, thread_id, mark).await.map_err(|e| {
                self.errors.add(e.kind());
                tracing::warn!(store = %r, agent, kind = e.kind().as_str(), reason = %e, "thread mark not stored");
                e.kind()
            }),
        }
    }
}
