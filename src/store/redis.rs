//! The Redis store (docs/operations.md#managed-redis): bindings shared by replicas, surviving
//! restarts, on a standalone Redis, a Redis Cluster or the master a set of sentinels names,
//! over TLS or not, as an ACL user ([`connection`]).
//!
//! One key per binding, [`key`]: `agui-a2a-gateway:binding:<owner>:<agent>:<threadId>`, each
//! component with `%` written `%25` and `:` written `%3A`, so `:` only ever separates
//! components and no two (owner, agent, threadId) triples share a key. The value is the
//! contextId. Every key expires `binding_ttl_s` after its last use: `GETEX … EX` refreshes
//! it on every read, `SET … EX` on every write. A server without `GETEX` (Redis 6.0), or one
//! that refuses it (an ACL), is detected on the first refusal; from then on a read is `EXPIRE`
//! then `GET` (a miss costs the `EXPIRE` alone), with the same expiry.
//!
//! **Every command touches exactly one key**, and no command is sent in a multi-key pipeline
//! or transaction: in a Redis Cluster each key may live on another node, and a command over
//! two keys in two slots is refused (`CROSSSLOT`). Keep it so; it is why cluster mode needs
//! nothing else. The ACL a gateway needs is in docs/operations.md#managed-redis.
//!
//! An outage never fails a run. Connections are made on first use (the gateway starts with
//! Redis down) and again after they break. Every call is bounded by [`CALL_TIMEOUT`] — a
//! dedicated constant, not `timeouts.upstream_call`: the lookup sits before `RUN_STARTED`,
//! and a store that takes longer than this is better skipped; connecting, the TLS handshake,
//! asking the sentinels and discovering a cluster's slots are inside it. A failed call pauses
//! the store for [`PAUSE_AFTER_FAILURE`]: meanwhile reads answer "no binding" and writes are
//! dropped at once (each logged and counted), so runs during an outage do not each wait out
//! the timeout; the readiness `PING` always goes to Redis, lifts the pause when it is
//! answered and never sets it. A failure is named by its [`FailureKind`] (auth, tls,
//! timeout, ...), never with the password.
//!
//! Replies: a value is at most [`MAX_VALUE_BYTES`] (the store writes ids and small JSON
//! records; anything larger is refused as a broken reply). The `redis` crate reads a reply
//! whole before it is seen here, so a hostile server can make one call hold up to Redis's
//! own bulk limit for the call's duration; it cannot make the store keep it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use super::{ContextOrigin, FailureKind, ThreadMark, ThreadRecord};
use crate::bridge::interrupt::InterruptId;
use crate::config::RedisSettings;
use crate::ids::{CallerId, ContextId, TaskId, ThreadId};
use ::redis::{Cmd, FromRedisValue};
use tokio::time::Instant;

pub(crate) mod connection;

use connection::{Connection, Retry};

/// Prefix of every key the gateway writes (docs/design.md#4-threads-and-contexts).
pub(crate) const KEY_PREFIX: &str = "agui-a2a-gateway:binding:";
/// Prefix of the ownership index: agent + contextId -> the owner and thread that created it.
pub(crate) const OWNER_PREFIX: &str = "agui-a2a-gateway:context:";
/// Bound of one Redis call (`GETEX`, `SET`), connection included.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(1);
/// Bound of the readiness `PING` (short enough for a probe with a 1 s timeout).
pub(crate) const PING_TIMEOUT: Duration = Duration::from_millis(500);
/// After a failed call, reads and writes skip Redis for this long.
pub(crate) const PAUSE_AFTER_FAILURE: Duration = Duration::from_secs(1);
/// The largest value the store reads back: its records are ids and small JSON.
pub(crate) const MAX_VALUE_BYTES: usize = 64 * 1024;

/// The Redis key of `owner`'s `thread_id` on `agent`.
pub(crate) fn key(owner: &CallerId, agent: &str, thread_id: &ThreadId) -> String {
    let (owner, thread_id) = (owner.as_str(), thread_id.as_str());
    let mut key =
        String::with_capacity(KEY_PREFIX.len() + owner.len() + agent.len() + thread_id.len() + 2);
    key.push_str(KEY_PREFIX);
    escape_into(&mut key, owner);
    key.push(':');
    escape_into(&mut key, agent);
    key.push(':');
    escape_into(&mut key, thread_id);
    key
}

/// Prefix of answer claims: agent + interruptId, held while one run answers it.
pub(crate) const ANSWER_PREFIX: &str = "agui-a2a-gateway:answer:";

/// The Redis key of the claim on the answer to `interrupt_id` on `agent` (the id as
/// [`InterruptId`] writes it, so every spelling of one question is one claim).
pub(crate) fn answer_key(agent: &str, interrupt_id: &InterruptId) -> String {
    let mut key = String::from(ANSWER_PREFIX);
    escape_into(&mut key, agent);
    key.push(':');
    escape_into(&mut key, &interrupt_id.to_string());
    key
}

/// Prefix of the thread index: one hash per owner and agent, threadId -> ThreadRecord JSON.
pub(crate) const THREADS_PREFIX: &str = "agui-a2a-gateway:threads:";

/// The Redis key of `owner`'s thread index on `agent`.
pub(crate) fn threads_key(owner: &CallerId, agent: &str) -> String {
    let mut key = String::from(THREADS_PREFIX);
    escape_into(&mut key, owner.as_str());
    key.push(':');
    escape_into(&mut key, agent);
    key
}

/// The Redis key of the ownership record of `context_id` on `agent`.
pub(crate) fn owner_key(agent: &str, context_id: &ContextId) -> String {
    let mut key = String::from(OWNER_PREFIX);
    escape_into(&mut key, agent);
    key.push(':');
    escape_into(&mut key, context_id.as_str());
    key
}

/// The value of an ownership record: `["owner", "threadId"]` as JSON.
fn owner_record(owner: &CallerId, thread_id: &ThreadId) -> String {
    serde_json::json!([owner, thread_id]).to_string()
}

fn escape_into(out: &mut String, component: &str) {
    for c in component.chars() {
        match c {
            '%' => out.push_str("%25"),
            ':' => out.push_str("%3A"),
            c => out.push(c),
        }
    }
}

/// Why a call did not reach an answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Unavailable {
    /// Skipped: Redis failed a moment ago ([`PAUSE_AFTER_FAILURE`]).
    #[error("skipped: the store failed less than a second ago")]
    Paused,
    /// The call failed or timed out.
    #[error("{reason}")]
    Failed { kind: FailureKind, reason: String },
}

impl Unavailable {
    /// Which kind of failure, for `agui_gateway_binding_store_errors_total{kind}`.
    pub(crate) fn kind(&self) -> FailureKind {
        match self {
            Self::Paused => FailureKind::Skipped,
            Self::Failed { kind, .. } => *kind,
        }
    }

    fn of(e: &::redis::RedisError) -> Self {
        let kind = FailureKind::of(e);
        let reason = match kind {
            FailureKind::Tls => crate::a2a::tls::explain_for(
                e,
                "the Redis server",
                "tls.ca_file, or the OS store without it",
            ),
            _ => None,
        };
        Self::Failed {
            kind,
            reason: reason.unwrap_or_else(|| e.to_string()),
        }
    }

    fn broken_reply(what: &str) -> Self {
        Self::Failed {
            kind: FailureKind::Server,
            reason: format!("a reply the store cannot have written: {what}"),
        }
    }
}

/// The Redis binding store.
#[derive(Debug)]
pub(crate) struct RedisStore {
    connection: Connection,
    /// What the relay's subscription connects with ([`RedisStore::subscribe_changes`]).
    settings: RedisSettings,
    /// `binding_ttl_s`.
    ttl_s: u64,
    /// Whether the server takes `GETEX` (until it refuses it once).
    getex: AtomicBool,
    /// Operations skip Redis until then (set by a failure).
    paused_until: Mutex<Option<Instant>>,
    /// The URL without userinfo, for logs (not for `/readyz`, which anyone may read).
    shown: String,
}

/// The store's URL without userinfo.
impl std::fmt::Display for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl RedisStore {
    /// A store on the Redis `settings` describe, whose bindings live `ttl` after their last
    /// use. Does not wait for Redis: the connection is made in the background, and again
    /// whenever it is lost. Must be called within the tokio runtime.
    pub(crate) fn new(settings: &RedisSettings, ttl: Duration) -> Result<Self, String> {
        let shown = settings.shown.clone();
        let connection =
            Connection::new(settings, CALL_TIMEOUT).map_err(|e| format!("{shown}: {e}"))?;
        let store = Self {
            connection,
            settings: settings.clone(),
            ttl_s: ttl.as_secs().max(1),
            getex: AtomicBool::new(true),
            paused_until: Mutex::new(None),
            shown,
        };
        Ok(store)
    }

    /// Connects now rather than on the first run, and says whether it worked.
    pub(crate) async fn announce(&self) {
        match self.ping().await {
            Ok(()) => tracing::info!(store = %self.shown, "binding store connected"),
            Err(e) => {
                tracing::warn!(store = %self.shown, kind = e.kind().as_str(), error = %e, "binding store not reachable yet; runs go on without it")
            }
        }
    }

    /// `GETEX key EX ttl`: the binding, its life renewed.
    pub(crate) async fn get(
        &self,
        owner: &CallerId,
        agent: &str,
        thread_id: &ThreadId,
    ) -> Result<Option<ContextId>, Unavailable> {
        let found = self.get_renewed(&key(owner, agent, thread_id)).await?;
        Ok(found.map(ContextId::new))
    }

    /// `SET key contextId EX ttl`, and the context's ownership record (`["owner",
    /// "threadId"]` as JSON) with the same life.
    pub(crate) async fn put(
        &self,
        owner: &CallerId,
        agent: &str,
        thread_id: &ThreadId,
        context_id: &ContextId,
        origin: ContextOrigin,
    ) -> Result<(), Unavailable> {
        let mut binding = ::redis::cmd("SET");
        binding
            .arg(key(owner, agent, thread_id))
            .arg(context_id.as_str())
            .arg("EX")
            .arg(self.ttl_s);
        let thread = ThreadRecord {
            thread_id: thread_id.clone(),
            context_id: context_id.clone(),
            task_id: None,
        };
        let mut ownership = ::redis::cmd("SET");
        ownership
            .arg(owner_key(agent, context_id))
            .arg(owner_record(owner, thread_id))
            .arg("EX")
            .arg(self.ttl_s);
        // Three keys, written at once (one command each, so any node may hold each): the run
        // waits for one round trip, not three. A picked-up context keeps its creator (none).
        let (bound, indexed, owned) = tokio::join!(
            self.call::<()>(&binding, Retry::Once),
            self.index(owner, agent, &thread),
            async {
                match origin {
                    ContextOrigin::Created => self.call::<()>(&ownership, Retry::Once).await,
                    ContextOrigin::PickedUp => Ok(()),
                }
            },
        );
        bound.and(indexed).and(owned)
    }

    /// `SET key 1 NX PX ttl`: `true` if this run now holds the claim.
    pub(crate) async fn claim_answer(
        &self,
        agent: &str,
        interrupt_id: &InterruptId,
        ttl: Duration,
    ) -> Result<bool, Unavailable> {
        let mut cmd = ::redis::cmd("SET");
        cmd.arg(answer_key(agent, interrupt_id))
            .arg(1)
            .arg("NX")
            .arg("PX")
            .arg(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1));
        // Not sent twice: a second SET NX after a lost reply would find its own claim.
        let set: Option<String> = self.call(&cmd, Retry::Never).await?;
        Ok(set.is_some())
    }

    /// `DEL` of the claim.
    pub(crate) async fn release_answer(
        &self,
        agent: &str,
        interrupt_id: &InterruptId,
    ) -> Result<(), Unavailable> {
        let mut cmd = ::redis::cmd("DEL");
        cmd.arg(answer_key(agent, interrupt_id));
        self.call::<()>(&cmd, Retry::Once).await
    }

    /// Records the thread's context and last task in the owner's thread index (`HSET`),
    /// the index's life renewed.
    async fn index(
        &self,
        owner: &CallerId,
        agent: &str,
        record: &ThreadRecord,
    ) -> Result<(), Unavailable> {
        let key = threads_key(owner, agent);
        let json = serde_json::to_string(record).unwrap_or_default();
        let mut cmd = ::redis::cmd("HSET");
        cmd.arg(&key).arg(record.thread_id.as_str()).arg(json);
        self.call::<()>(&cmd, Retry::Once).await?;
        let mut cmd = ::redis::cmd("EXPIRE");
        cmd.arg(&key).arg(self.ttl_s);
        self.call(&cmd, Retry::Once).await
    }

    /// The thread's last task, in the owner's thread index.
    pub(crate) async fn put_task(
        &self,
        owner: &CallerId,
        agent: &str,
        record: &ThreadRecord,
    ) -> Result<(), Unavailable> {
        self.index(owner, agent, record).await
    }

    /// The last task of `owner`'s thread (`HGET` in the thread index).
    pub(crate) async fn last_task(
        &self,
        owner: &CallerId,
        agent: &str,
        thread_id: &ThreadId,
    ) -> Result<Option<TaskId>, Unavailable> {
        let mut cmd = ::redis::cmd("HGET");
        cmd.arg(threads_key(owner, agent)).arg(thread_id.as_str());
        let json = self.call(&cmd, Retry::Once).await.and_then(checked)?;
        Ok(json
            .and_then(|j| serde_json::from_str::<ThreadRecord>(&j).ok())
            .and_then(|r| r.task_id))
    }

    /// The fields and values of the hash `key` (`HSCAN`), at least `limit` of them when the
    /// hash has as many. Bounded: HSCAN may answer few fields per call, so the number of
    /// calls is bounded too; a page far over its `COUNT` or a value over [`MAX_VALUE_BYTES`]
    /// (`what` names it) is a broken reply.
    async fn hscan(
        &self,
        key: &str,
        limit: usize,
        what: &str,
    ) -> Result<Vec<(String, String)>, Unavailable> {
        let mut out = Vec::new();
        let mut cursor = 0u64;
        for _ in 0..limit.div_ceil(10).max(10) {
            let mut cmd = ::redis::cmd("HSCAN");
            cmd.arg(key).arg(cursor).arg("COUNT").arg(100);
            let (next, fields): (u64, Vec<String>) = self.call(&cmd, Retry::Once).await?;
            if fields.len() > 2 * 1000 {
                return Err(Unavailable::broken_reply(
                    "an HSCAN page far over its COUNT",
                ));
            }
            if fields.iter().any(|f| f.len() > MAX_VALUE_BYTES) {
                return Err(Unavailable::broken_reply(&format!("{what} over the bound")));
            }
            let mut pairs = fields.into_iter();
            while let (Some(field), Some(value)) = (pairs.next(), pairs.next()) {
                out.push((field, value));
            }
            cursor = next;
            if cursor == 0 || out.len() >= limit {
                break;
            }
        }
        Ok(out)
    }

    /// `owner`'s threads on `agent` (`HSCAN`), at most `limit`.
    pub(crate) async fn threads_of(
        &self,
        owner: &CallerId,
        agent: &str,
        limit: usize,
    ) -> Result<Vec<ThreadRecord>, Unavailable> {
        let key = threads_key(owner, agent);
        let fields = self.hscan(&key, limit, "a thread record").await?;
        let mut out: Vec<ThreadRecord> = fields
            .iter()
            .filter_map(|(_, json)| serde_json::from_str(json).ok())
            .collect();
        out.truncate(limit);
        Ok(out)
    }

    /// The owner and threadId that created `context_id` on `agent`, its life renewed.
    pub(crate) async fn owner_of(
        &self,
        agent: &str,
        context_id: &ContextId,
    ) -> Result<Option<(CallerId, ThreadId)>, Unavailable> {
        let raw = self.get_renewed(&owner_key(agent, context_id)).await?;
        Ok(raw.and_then(|r| serde_json::from_str(&r).ok()))
    }

    /// `key`'s value, its life renewed: `GETEX key EX ttl`, or on a server that refuses
    /// `GETEX`, `EXPIRE` then (when the key exists) `GET`.
    async fn get_renewed(&self, key: &str) -> Result<Option<String>, Unavailable> {
        if self.getex.load(Ordering::Relaxed) {
            let mut cmd = ::redis::cmd("GETEX");
            cmd.arg(key).arg("EX").arg(self.ttl_s);
            match self.call::<Option<String>>(&cmd, Retry::Once).await {
                Err(Unavailable::Failed { reason, .. }) if refuses_getex(&reason) => {
                    if self.getex.swap(false, Ordering::Relaxed) {
                        tracing::info!(store = %self.shown, "the binding store refuses GETEX (Redis before 6.2, or an ACL): reads use EXPIRE and GET");
                        // The refusal paused the store: it answered, so lift it.
                        self.record(true);
                    }
                }
                answer => return answer.and_then(checked),
            }
        }
        let mut cmd = ::redis::cmd("EXPIRE");
        cmd.arg(key).arg(self.ttl_s);
        if self.call::<i64>(&cmd, Retry::Once).await? == 0 {
            return Ok(None);
        }
        let mut cmd = ::redis::cmd("GET");
        cmd.arg(key);
        self.call::<Option<String>>(&cmd, Retry::Once)
            .await
            .and_then(checked)
    }

    /// Readiness: Redis answers `PING` within [`PING_TIMEOUT`] (in sentinel mode, after the
    /// sentinels named the master). Ignores the pause, and lifts it when answered.
    pub(crate) async fn ping(&self) -> Result<(), Unavailable> {
        let ping = self.connection.ping();
        let answer = match tokio::time::timeout(PING_TIMEOUT, ping).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Unavailable::of(&e)),
            Err(_) => Err(timed_out(PING_TIMEOUT)),
        };
        // A probe lifts the pause when answered, and never sets it: the next run's call meets
        // the failure itself, and is counted by its kind.
        if answer.is_ok() {
            self.record(true);
        }
        answer
    }

    /// One call within [`CALL_TIMEOUT`] (a retry on a new connection included), skipped while
    /// the store is paused.
    async fn call<T: FromRedisValue>(&self, cmd: &Cmd, retry: Retry) -> Result<T, Unavailable> {
        if self.is_paused() {
            return Err(Unavailable::Paused);
        }
        let query = self.connection.query::<T>(cmd, retry);
        let result = match tokio::time::timeout(CALL_TIMEOUT, query).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Unavailable::of(&e)),
            Err(_) => Err(timed_out(CALL_TIMEOUT)),
        };
        self.record(result.is_ok());
        result
    }

    fn is_paused(&self) -> bool {
        let paused = self.paused_until.lock().map(|p| *p).unwrap_or(None);
        paused.is_some_and(|until| Instant::now() < until)
    }

    fn record(&self, ok: bool) {
        let Ok(mut paused) = self.paused_until.lock() else {
            return;
        };
        if ok {
            if paused.take().is_some() {
                tracing::info!(store = %self.shown, "binding store answers again");
            }
        } else {
            *paused = Some(Instant::now() + PAUSE_AFTER_FAILURE);
        }
    }
}

/// Prefix of the thread marks (CopilotKit's list): one hash per owner and agent, threadId ->
/// [`ThreadMark`] JSON.
pub(crate) const MARKS_PREFIX: &str = "agui-a2a-gateway:marks:";

/// The Redis key of `owner`'s thread marks on `agent`.
pub(crate) fn marks_key(owner: &CallerId, agent: &str) -> String {
    let mut key = String::from(MARKS_PREFIX);
    escape_into(&mut key, owner.as_str());
    key.push(':');
    escape_into(&mut key, agent);
    key
}

impl RedisStore {
    /// `owner`'s thread marks on `agent` (`HSCAN`, bounded like [`Self::threads_of`]), the
    /// hash's life renewed.
    pub(crate) async fn marks_of(
        &self,
        owner: &CallerId,
        agent: &str,
        limit: usize,
    ) -> Result<std::collections::HashMap<ThreadId, ThreadMark>, Unavailable> {
        let key = marks_key(owner, agent);
        let fields = self.hscan(&key, limit, "a thread mark").await?;
        let out: std::collections::HashMap<ThreadId, ThreadMark> = fields
            .into_iter()
            .filter_map(|(thread, json)| {
                let mark = serde_json::from_str(&json).ok()?;
                Some((ThreadId::new(thread), mark))
            })
            .collect();
        if !out.is_empty() {
            let mut cmd = ::redis::cmd("EXPIRE");
            cmd.arg(&key).arg(self.ttl_s);
            self.call::<i64>(&cmd, Retry::Once).await?;
        }
        Ok(out)
    }

    /// The mark of `owner`'s `thread_id` (`HGET`).
    pub(crate) async fn mark_of(
        &self,
        owner: &CallerId,
        agent: &str,
        thread_id: &ThreadId,
    ) -> Result<Option<ThreadMark>, Unavailable> {
        let mut cmd = ::redis::cmd("HGET");
        cmd.arg(marks_key(owner, agent)).arg(thread_id.as_str());
        let json = self.call(&cmd, Retry::Once).await.and_then(checked)?;
        Ok(json.and_then(|j| serde_json::from_str(&j).ok()))
    }

    /// Records the mark (`HSET`), the hash's life renewed (`EXPIRE`).
    pub(crate) async fn set_mark(
        &self,
        owner: &CallerId,
        agent: &str,
        thread_id: &ThreadId,
        mark: &ThreadMark,
    ) -> Result<(), Unavailable> {
        let key = marks_key(owner, agent);
        let json = serde_json::to_string(mark).unwrap_or_default();
        let mut cmd = ::redis::cmd("HSET");
        cmd.arg(&key).arg(thread_id.as_str()).arg(json);
        self.call::<()>(&cmd, Retry::Once).await?;
        let mut cmd = ::redis::cmd("EXPIRE");
        cmd.arg(&key).arg(self.ttl_s);
        self.call(&cmd, Retry::Once).await
    }
}

// ---- the live inbox (docs/design.md#the-live-inbox) ----

/// Prefix of push registrations: agent + taskId -> the digest of the task's push token.
pub(crate) const PUSH_PREFIX: &str = "agui-a2a-gateway:push:";
/// Prefix of leases: one replica at a time does what the lease names (the inbox's poll).
pub(crate) const LEASE_PREFIX: &str = "agui-a2a-gateway:lease:";
/// Prefix of the inbox's shared reads: agent -> its conversations as last polled.
pub(crate) const INBOX_PREFIX: &str = "agui-a2a-gateway:inbox:";
/// The largest shared read the store reads back (`inbox.max_threads_per_agent` items of a
/// few hundred bytes each).
pub(crate) const MAX_INBOX_READ_BYTES: usize = 4 * 1024 * 1024;

/// A key of one of the inbox's prefixes: the prefix, then each part escaped, `:` between.
pub(crate) fn inbox_key(prefix: &str, parts: &[&str]) -> String {
    let mut key = String::from(prefix);
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            key.push(':');
        }
        escape_into(&mut key, part);
    }
    key
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl RedisStore {
    /// `SET push:<agent>:<taskId> digest EX binding_ttl_s`.
    pub(crate) async fn put_push_token(
        &self,
        agent: &str,
        task_id: &TaskId,
        digest: &str,
    ) -> Result<(), Unavailable> {
        let mut cmd = ::redis::cmd("SET");
        cmd.arg(inbox_key(PUSH_PREFIX, &[agent, task_id.as_str()]))
            .arg(digest)
            .arg("EX")
            .arg(self.ttl_s);
        self.call::<()>(&cmd, Retry::Once).await
    }

    /// `GET push:<agent>:<taskId>`.
    pub(crate) async fn push_token(
        &self,
        agent: &str,
        task_id: &TaskId,
    ) -> Result<Option<String>, Unavailable> {
        let mut cmd = ::redis::cmd("GET");
        cmd.arg(inbox_key(PUSH_PREFIX, &[agent, task_id.as_str()]));
        self.call(&cmd, Retry::Once).await.and_then(checked)
    }

    /// `SET lease:<name> 1 NX PX ttl`: `true` if this replica now holds it.
    pub(crate) async fn lease(&self, name: &str, ttl: Duration) -> Result<bool, Unavailable> {
        let mut cmd = ::redis::cmd("SET");
        cmd.arg(inbox_key(LEASE_PREFIX, &[name]))
            .arg(1)
            .arg("NX")
            .arg("PX")
            .arg(millis(ttl));
        // Not sent twice: a second SET NX after a lost reply would find its own lease.
        let set: Option<String> = self.call(&cmd, Retry::Never).await?;
        Ok(set.is_some())
    }

    /// `SET inbox:<agent> read PX ttl`.
    pub(crate) async fn put_inbox_read(
        &self,
        agent: &str,
        read: &str,
        ttl: Duration,
    ) -> Result<(), Unavailable> {
        let mut cmd = ::redis::cmd("SET");
        cmd.arg(inbox_key(INBOX_PREFIX, &[agent]))
            .arg(read)
            .arg("PX")
            .arg(millis(ttl));
        self.call::<()>(&cmd, Retry::Once).await
    }

    /// `GET inbox:<agent>`, at most [`MAX_INBOX_READ_BYTES`].
    pub(crate) async fn inbox_read(&self, agent: &str) -> Result<Option<String>, Unavailable> {
        let mut cmd = ::redis::cmd("GET");
        cmd.arg(inbox_key(INBOX_PREFIX, &[agent]));
        match self.call::<Option<String>>(&cmd, Retry::Once).await? {
            Some(v) if v.len() > MAX_INBOX_READ_BYTES => Err(Unavailable::broken_reply(&format!(
                "an inbox read of {} bytes",
                v.len()
            ))),
            v => Ok(v),
        }
    }
}

/// The channel the inbox's relay publishes each change on (docs/design.md#the-live-inbox).
pub(crate) const CHANGES_CHANNEL: &str = "agui-a2a-gateway:inbox-changes";

impl RedisStore {
    /// `PUBLISH inbox-changes message` (`SPUBLISH` on a cluster; the master in sentinel
    /// mode): how many replicas' subscriptions received it (on a cluster, of its shard).
    pub(crate) async fn publish_change(&self, message: &str) -> Result<u64, Unavailable> {
        let verb = match self.settings.topology {
            crate::config::Topology::Cluster(_) => "SPUBLISH",
            _ => "PUBLISH",
        };
        let mut cmd = ::redis::cmd(verb);
        cmd.arg(CHANGES_CHANNEL).arg(message);
        // Not sent twice: a change received twice changes nothing, but one is enough.
        self.call(&cmd, Retry::Never).await
    }

    /// Subscribes to [`CHANGES_CHANNEL`] on a connection of its own (same TLS, user and
    /// password as the store's), its messages and its end sent to `sink`.
    pub(crate) async fn subscribe_changes(
        &self,
        sink: impl ::redis::aio::AsyncPushSender,
    ) -> Result<connection::Subscription, Unavailable> {
        let made = tokio::time::timeout(
            CALL_TIMEOUT * 2,
            connection::subscribe(&self.settings, CALL_TIMEOUT, CHANGES_CHANNEL, sink),
        )
        .await;
        match made {
            Err(_) => Err(timed_out(CALL_TIMEOUT * 2)),
            Ok(Err(e)) => Err(Unavailable::of(&e)),
            Ok(Ok(s)) => Ok(s),
        }
    }
}

fn timed_out(after: Duration) -> Unavailable {
    Unavailable::Failed {
        kind: FailureKind::Timeout,
        reason: format!("no answer within {} ms", after.as_millis()),
    }
}

/// Whether a failed `GETEX` says the server does not take it (an unknown command: Redis
/// before 6.2; or one this user may not run) rather than that the store failed.
fn refuses_getex(reason: &str) -> bool {
    let reason = reason.to_ascii_lowercase();
    reason.contains("unknown command") || (reason.contains("noperm") && reason.contains("getex"))
}

/// A value no larger than the store writes.
fn checked(value: Option<String>) -> Result<Option<String>, Unavailable> {
    match value {
        Some(v) if v.len() > MAX_VALUE_BYTES => Err(Unavailable::broken_reply(&format!(
            "a value of {} bytes",
            v.len()
        ))),
        v => Ok(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inverse of [`key`], to show it loses nothing.
    fn parse(key: &str) -> Option<(String, String, String)> {
        fn unescape(s: &str) -> String {
            let mut out = String::new();
            let mut rest = s;
            while let Some(i) = rest.find('%') {
                out.push_str(&rest[..i]);
                let code = rest.get(i + 1..i + 3).expect("an escape has two digits");
                out.push(match code {
                    "25" => '%',
                    "3A" => ':',
                    other => panic!("unknown escape %{other}"),
                });
                rest = &rest[i + 3..];
            }
            out.push_str(rest);
            out
        }
        let rest = key.strip_prefix(KEY_PREFIX)?;
        let mut parts = rest.split(':');
        let (o, a, t) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        Some((unescape(o), unescape(a), unescape(t)))
    }

    #[test]
    fn keys_read_plainly() {
        assert_eq!(
            key(
                &CallerId::new("anonymous"),
                "demo",
                &ThreadId::new("thread-1")
            ),
            "agui-a2a-gateway:binding:anonymous:demo:thread-1"
        );
        assert_eq!(
            key(&CallerId::new("a:b"), "x%3Ay", &ThreadId::new("t:")),
            "agui-a2a-gateway:binding:a%3Ab:x%253Ay:t%3A"
        );
    }

    /// What bindings written before are stored under, and as, is found and read the same.
    #[test]
    fn keys_and_records_keep_their_bytes() {
        let (owner, thread) = (CallerId::new("o:1"), ThreadId::new("t%1"));
        let context = ContextId::new("c:1");
        assert_eq!(threads_key(&owner, "a"), "agui-a2a-gateway:threads:o%3A1:a");
        assert_eq!(owner_key("a", &context), "agui-a2a-gateway:context:a:c%3A1");
        assert_eq!(owner_record(&owner, &thread), r#"["o:1","t%1"]"#);
        assert_eq!(
            marks_key(&owner, "a:b"),
            "agui-a2a-gateway:marks:o%3A1:a%3Ab"
        );
        let mark = ThreadMark {
            name: Some("n".into()),
            archived: true,
            deleted: false,
            updated_at: None,
        };
        let json = r#"{"name":"n","archived":true,"deleted":false}"#;
        assert_eq!(serde_json::to_string(&mark).unwrap(), json);
        assert_eq!(serde_json::from_str::<ThreadMark>(json).unwrap(), mark);
        let record = ThreadRecord {
            thread_id: thread,
            context_id: context,
            task_id: Some(TaskId::new("k")),
        };
        let json = r#"{"threadId":"t%1","contextId":"c:1","taskId":"k"}"#;
        assert_eq!(serde_json::to_string(&record).unwrap(), json);
        assert_eq!(serde_json::from_str::<ThreadRecord>(json).unwrap(), record);
    }

    #[test]
    fn an_answer_claim_is_one_key_per_question() {
        let id = |raw| InterruptId::parse(raw).unwrap();
        assert_eq!(
            answer_key("a", &id("a2a:t:1:q")),
            "agui-a2a-gateway:answer:a:a2a%3At%3A1%3Aq"
        );
        assert_eq!(
            answer_key("a", &id("a2a:T:m%3a1")),
            answer_key("a", &id("a2a:T:m%3A1")),
            "however the client spelled it"
        );
    }

    #[test]
    fn keys_do_not_collide() {
        let ids = [
            "", ":", "::", "a", "a:", ":a", "a:b", "%", "%3A", "%25", "%3a", "a%3Ab", "é:ü",
        ];
        let mut seen = std::collections::HashMap::new();
        for o in ids {
            for a in ids {
                for t in ids {
                    let k = key(&CallerId::new(o), a, &ThreadId::new(t));
                    // Three components, exactly: ':' only separates.
                    assert_eq!(parse(&k), Some((o.into(), a.into(), t.into())), "{k}");
                    if let Some(prev) = seen.insert(k.clone(), (o, a, t)) {
                        panic!("{k} for both {prev:?} and {:?}", (o, a, t));
                    }
                }
            }
        }
        assert_eq!(seen.len(), ids.len().pow(3));
    }
}

/// A broken or hostile server costs a bounded failure, named by kind, never a hang.
#[cfg(test)]
mod hostile_tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A server on a free port that answers every command with `answer(command)`.
    async fn fake(answer: fn(&str) -> Vec<u8>) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n) = socket.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        let text = String::from_utf8_lossy(&buf[..n]).to_string();
                        // One answer per command in what arrived (RESP arrays start with '*').
                        for command in text.split('*').filter(|c| !c.is_empty()) {
                            if socket.write_all(&answer(command)).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        port
    }

    fn store(yaml: &str) -> RedisStore {
        let config: crate::config::store::RedisStoreConfig = serde_yaml_ng::from_str(yaml).unwrap();
        let settings = crate::config::store::parse_map(&config).unwrap();
        RedisStore::new(&settings, Duration::from_secs(60)).unwrap()
    }

    async fn bounded<T>(bound: Duration, f: impl std::future::Future<Output = T>) -> T {
        let started = Instant::now();
        let out = tokio::time::timeout(bound * 3, f)
            .await
            .expect("the store's own bound holds");
        assert!(started.elapsed() < bound + Duration::from_millis(500));
        out
    }

    fn thread() -> (CallerId, ThreadId) {
        (CallerId::new("o"), ThreadId::new("t"))
    }

    #[tokio::test]
    async fn garbage_replies_are_a_failure_not_a_crash() {
        let port = fake(|_| b"garbage that is not RESP\r\n\x00\xff".to_vec()).await;
        let store = store(&format!("url: redis://127.0.0.1:{port}/0"));
        let (owner, thread) = thread();
        let got = bounded(CALL_TIMEOUT, store.get(&owner, "a", &thread)).await;
        assert!(matches!(got, Err(Unavailable::Failed { .. })), "{got:?}");
        assert!(bounded(PING_TIMEOUT, store.ping()).await.is_err());
    }

    #[tokio::test]
    async fn a_reply_larger_than_the_store_writes_is_refused() {
        let port = fake(|command| {
            if command.contains("GETEX") {
                let big = "x".repeat(MAX_VALUE_BYTES + 1);
                format!("${}\r\n{big}\r\n", big.len()).into_bytes()
            } else {
                b"+OK\r\n".to_vec()
            }
        })
        .await;
        let store = store(&format!("url: redis://127.0.0.1:{port}/0"));
        let (owner, thread) = thread();
        let got = bounded(CALL_TIMEOUT, store.get(&owner, "a", &thread)).await;
        match got {
            Err(e @ Unavailable::Failed { .. }) => {
                assert_eq!(e.kind(), FailureKind::Server);
                assert!(e.to_string().contains("cannot have written"), "{e}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn a_tls_handshake_that_never_ends_times_out() {
        // Accepts, reads the ClientHello, and never answers.
        let port = fake(|_| Vec::new()).await;
        let store = store(&format!("url: rediss://127.0.0.1:{port}/0"));
        let got = bounded(PING_TIMEOUT, store.ping()).await;
        assert_eq!(got.unwrap_err().kind(), FailureKind::Timeout);
        let (owner, thread) = thread();
        let got = bounded(CALL_TIMEOUT, store.get(&owner, "a", &thread)).await;
        assert!(got.is_err());
    }

    #[tokio::test]
    async fn a_sentinel_naming_an_unreachable_master_is_a_failure() {
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        // `closed`: nothing listens there once `l` is dropped.
        let answer: fn(&str) -> Vec<u8> = |command| {
            if command
                .to_ascii_lowercase()
                .contains("get-master-addr-by-name")
            {
                let port = CLOSED
                    .load(std::sync::atomic::Ordering::Relaxed)
                    .to_string();
                format!("*2\r\n$9\r\n127.0.0.1\r\n${}\r\n{port}\r\n", port.len()).into_bytes()
            } else {
                b"+OK\r\n".to_vec()
            }
        };
        static CLOSED: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
        CLOSED.store(closed, std::sync::atomic::Ordering::Relaxed);
        let sentinel = fake(answer).await;
        let named = store(&format!(
            "mode: sentinel\nnodes: ['127.0.0.1:{sentinel}']\nmaster_name: mymaster"
        ));
        let got = bounded(PING_TIMEOUT, named.ping()).await;
        assert_eq!(got.unwrap_err().kind(), FailureKind::Connection);
        let (owner, thread) = thread();
        let got = bounded(CALL_TIMEOUT, named.get(&owner, "a", &thread)).await;
        assert!(got.is_err());
        // No sentinel answers at all.
        let silent = store(&format!(
            "mode: sentinel\nnodes: ['127.0.0.1:{closed}']\nmaster_name: mymaster"
        ));
        assert!(bounded(PING_TIMEOUT, silent.ping()).await.is_err());
    }
}
