//! The inbox's shared read of each agent (docs/design.md#the-live-inbox): one task per
//! agent, waking every `inbox.poll_s`.
//!
//! - An agent without push (`push.enabled` off, `push: off`, or a card without
//!   `capabilities.pushNotifications`) that has `ListTasks` is read with one `ListTasks`
//!   ([`LIST_PAGES`] pages of [`LIST_PAGE_SIZE`] tasks, within `timeouts.upstream_call`) per
//!   interval, as the gateway (no caller identity). With Redis, the replica that takes the
//!   interval's lease (`lease:poll:<agent>`, `SET NX PX poll_s`) reads and shares the read
//!   (`inbox:<agent>`); the others apply what it shared. So the agent sees one `ListTasks`
//!   per interval, whatever the number of replicas and viewers.
//! - An agent with push is read that way once (its conversations before this replica
//!   started), then kept by its pushes alone.
//! - An agent without `ListTasks` (A2A 0.3), or whose credentials are per caller
//!   (`token_exchange`, `forward_caller_token`) or that is told who calls
//!   (`forward_identity`), is not kept here ([`Read::Live`]).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

use super::book::Observation;
use super::{Inbox, Read};
use crate::a2a::call::ListTasks;
use crate::a2a::client::{CallContext, ClientError};
use crate::a2a::Operation;
use crate::config::upstream::UpstreamCredentials;
use crate::config::{PushChoice, PushSettings, Timeouts};
use crate::error::RequestError;
use crate::registry::{Agent, Registry};

/// `ListTasks` pages read for a list, and tasks per page: the shared poll's and the live
/// reads' (`crate::http::threads`) one bound.
pub(crate) const LIST_PAGES: usize = 5;
pub(crate) const LIST_PAGE_SIZE: u32 = 100;
/// How often a replica that does not hold the lease looks for the shared read it waits for.
const SHARED_READ_RETRY: Duration = Duration::from_millis(200);

/// How an agent is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Poll,
    Push,
    Live,
}

/// How `agent` is kept, from its settings and its card (`Err`: the card cannot be read).
pub(crate) async fn mode(
    registry: &Registry,
    agent: &Agent,
    push: &PushSettings,
) -> Result<Mode, &'static str> {
    let resolved = registry
        .resolve(agent)
        .await
        .map_err(|_| crate::error::UPSTREAM_UNAVAILABLE)?;
    let per_caller = matches!(
        agent.settings.credentials,
        Some(UpstreamCredentials::TokenExchange(_) | UpstreamCredentials::ForwardCallerToken)
    );
    // A read made once for all carries no caller: an agent told who calls
    // (`forward_identity`) may answer each caller differently.
    let identified = agent.settings.forward_identity.is_some();
    if per_caller || identified || !resolved.client.supports(Operation::ListTasks) {
        return Ok(Mode::Live);
    }
    Ok(if pushes(agent, push, &resolved.card) {
        Mode::Push
    } else {
        Mode::Poll
    })
}

/// Whether the gateway registers push notifications with `agent`
/// (docs/design.md#the-live-inbox): `push.enabled`, `push: auto`, and a card that declares
/// `capabilities.pushNotifications`.
pub(crate) fn pushes(
    agent: &Agent,
    push: &PushSettings,
    card: &crate::a2a::card::AgentCard,
) -> bool {
    push.enabled
        && agent.settings.push == PushChoice::Auto
        && card.capabilities.push_notifications == Some(true)
}

/// One read as replicas share it.
#[derive(Debug, Serialize, Deserialize)]
struct Shared {
    /// When it was read, in milliseconds since the epoch.
    at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(default)]
    tasks: Vec<Observation>,
}

/// Starts the shared read of every agent; the tasks end when `stop` is set.
pub(crate) fn spawn(
    inbox: Arc<Inbox>,
    registry: Arc<Registry>,
    push: PushSettings,
    timeouts: Timeouts,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    for agent in registry.all() {
        let (inbox, registry, push, agent, mut stop) = (
            inbox.clone(),
            registry.clone(),
            push.clone(),
            agent.clone(),
            stop.clone(),
        );
        tokio::spawn(async move {
            let mut read_once = false;
            loop {
                let name = agent.settings.name.as_str();
                match mode(&registry, &agent, &push).await {
                    Err(code) => inbox.set_read(name, Read::Failed(code)),
                    Ok(Mode::Live) => inbox.set_read(name, Read::Live),
                    Ok(Mode::Push) if read_once => inbox.set_read(name, Read::Pushed),
                    Ok(mode) => {
                        read_once = shared_read(&inbox, &registry, &agent, timeouts).await;
                        if mode == Mode::Push && read_once {
                            inbox.set_read(name, Read::Pushed);
                        }
                    }
                }
                tokio::select! {
                    _ = tokio::time::sleep(inbox.config().poll()) => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
            }
        });
    }
}

/// This interval's read of `agent`: its own when it takes the lease, else the one another
/// replica shared. `true` when the inbox now holds a read.
async fn shared_read(
    inbox: &Inbox,
    registry: &Registry,
    agent: &Agent,
    timeouts: Timeouts,
) -> bool {
    let name = agent.settings.name.as_str();
    let poll = inbox.config().poll();
    if inbox.store.lease(&format!("poll:{name}"), poll).await {
        let read = read(registry, agent).await;
        inbox.metrics.inbox.poll(name, read.is_ok());
        let at_ms = millis_now();
        let shared = match &read {
            Ok(tasks) => Shared {
                at_ms,
                error: None,
                tasks: tasks.clone(),
            },
            Err(code) => Shared {
                at_ms,
                error: Some((*code).to_owned()),
                tasks: Vec::new(),
            },
        };
        if let Ok(json) = serde_json::to_string(&shared) {
            inbox.store.put_inbox_read(name, &json, poll * 3).await;
        }
        return apply(inbox, name, shared).await;
    }
    // Another replica holds this interval: its read, once it is there.
    let deadline = tokio::time::Instant::now() + timeouts.upstream_call();
    loop {
        if let Some(shared) = inbox
            .store
            .inbox_read(name)
            .await
            .and_then(|raw| serde_json::from_str::<Shared>(&raw).ok())
        {
            return apply(inbox, name, shared).await;
        }
        if tokio::time::Instant::now() + SHARED_READ_RETRY > deadline {
            return false;
        }
        tokio::time::sleep(SHARED_READ_RETRY).await;
    }
}

/// Applies a read to the inbox, oldest task first.
async fn apply(inbox: &Inbox, name: &str, shared: Shared) -> bool {
    if let Some(error) = shared.error {
        let code = [
            crate::error::UPSTREAM_UNAVAILABLE,
            crate::error::UPSTREAM_TIMEOUT,
            crate::error::UPSTREAM_AUTH_FAILED,
        ]
        .into_iter()
        .find(|c| *c == error)
        .unwrap_or(crate::error::UPSTREAM_UNAVAILABLE);
        inbox.set_read(name, Read::Failed(code));
        return false;
    }
    for update in shared.tasks.iter().rev() {
        inbox.absorb(name, update).await;
    }
    let at = SystemTime::UNIX_EPOCH + Duration::from_millis(shared.at_ms);
    inbox.set_read(name, Read::Polled(at));
    true
}

/// Applies again the shared read of every agent kept by the shared poll (what the relay
/// does after its subscription was down: changes may have been missed meanwhile).
pub(crate) async fn reread(inbox: &Inbox) {
    let names: Vec<String> = inbox
        .agents
        .iter()
        .filter(|(_, slot)| matches!(*slot.read.borrow(), Read::Polled(_)))
        .map(|(name, _)| name.clone())
        .collect();
    for name in names {
        if let Some(shared) = inbox
            .store
            .inbox_read(&name)
            .await
            .and_then(|raw| serde_json::from_str::<Shared>(&raw).ok())
        {
            apply(inbox, &name, shared).await;
        }
    }
}

/// One `ListTasks` read of `agent`, newest first (`Err`: the code of why it failed).
async fn read(registry: &Registry, agent: &Agent) -> Result<Vec<Observation>, &'static str> {
    let resolved = registry
        .resolve(agent)
        .await
        .map_err(|_| crate::error::UPSTREAM_UNAVAILABLE)?;
    let tasks = resolved
        .client
        .list_tasks_paged(
            &CallContext::none(),
            ListTasks::first(None, LIST_PAGE_SIZE),
            LIST_PAGES,
        )
        .await
        .map_err(|e: ClientError| {
            tracing::warn!(agent = %agent.settings.name, error = %e, "the inbox could not read an agent's conversations");
            RequestError::from(&e).code()
        })?;
    Ok(tasks.iter().filter_map(Observation::of_task).collect())
}

fn millis_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
