//! The inbox's relay between replicas (docs/design.md#the-live-inbox): with the Redis store,
//! every change a replica's inbox takes from a push or a run ([`super::Inbox::update`]) is
//! published on `agui-a2a-gateway:inbox-changes` (`SPUBLISH`, sharded pub/sub, on a
//! cluster; the master in sentinel mode) as a small JSON [`Message`], and every other
//! replica's inbox applies it, so a feed subscriber on any replica sees it within moments.
//! The memory store has no relay (one replica).
//!
//! Invariants:
//! - No echo: what came from the relay or from the shared poll reads is never published
//!   (each replica reads those itself), and a replica ignores its own messages (`replica`,
//!   random per process).
//! - Bounded: a message is at most [`MAX_MESSAGE_BYTES`] (larger ones are dropped, sent or
//!   received); the queue from the inbox to the publisher and the one from the subscription
//!   to the inbox hold at most [`QUEUE`] each; neither side ever waits on the other (a full
//!   queue drops the change, counted). Dropped changes are not lost for good: the book
//!   converges with the next shared read or push of the task.
//! - The subscription is a connection of its own with the store's TLS, user and (rotating)
//!   password. When it drops, it is made again with backoff ([`BACKOFF_MIN`] doubling to
//!   [`BACKOFF_MAX`]), and since changes may have been missed meanwhile, the agents kept by
//!   the shared poll are re-read from the store's shared reads at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::{PushInfo, PushKind, Value};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, watch, Notify};

use super::book::{Creator, Observation};
use super::Inbox;
use crate::ids::{CallerId, ThreadId};
use crate::metrics::inbox::RelayDrop;
use crate::metrics::Metrics;
use crate::store::RedisStore;

/// The largest relayed message, sent or received (an observation is a few hundred bytes).
pub(crate) const MAX_MESSAGE_BYTES: usize = 8 * 1024;
/// The changes each of the relay's queues holds.
pub(crate) const QUEUE: usize = 1024;
/// The first wait before the subscription is made again, doubled each failure up to
/// [`BACKOFF_MAX`].
pub(crate) const BACKOFF_MIN: Duration = Duration::from_millis(100);
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(5);

/// One relayed change: who relayed it, the agent, what the replica observed, and the
/// context's creator when it knew one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Message {
    pub replica: String,
    pub agent: String,
    #[serde(flatten)]
    pub observation: Observation,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creator: Option<RelayedCreator>,
}

/// [`Creator`] on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RelayedCreator {
    pub owner: CallerId,
    pub thread_id: ThreadId,
}

impl Message {
    /// The JSON of the message; `None` above [`MAX_MESSAGE_BYTES`].
    pub(crate) fn encode(&self) -> Option<String> {
        let json = serde_json::to_string(self).ok()?;
        (json.len() <= MAX_MESSAGE_BYTES).then_some(json)
    }

    /// A received message, bounded and checked.
    pub(crate) fn decode(raw: &[u8]) -> Result<Self, RelayDrop> {
        if raw.len() > MAX_MESSAGE_BYTES {
            return Err(RelayDrop::Oversize);
        }
        serde_json::from_slice(raw).map_err(|_| RelayDrop::Malformed)
    }

    pub(crate) fn creator(&self) -> Option<Creator> {
        self.creator
            .as_ref()
            .map(|c| (c.owner.clone(), c.thread_id.clone()))
    }
}

/// The relay's side the inbox holds: this replica's id and the queue to the publisher.
#[derive(Debug)]
pub(crate) struct Relay {
    replica: String,
    out: mpsc::Sender<String>,
    /// The publisher's end, taken by [`spawn`].
    out_rx: Mutex<Option<mpsc::Receiver<String>>>,
    redis: Arc<RedisStore>,
}

impl Relay {
    pub(crate) fn new(redis: Arc<RedisStore>, metrics: &Metrics) -> Self {
        metrics.inbox.know_relay();
        let (out, out_rx) = mpsc::channel(QUEUE);
        Self {
            replica: crate::push::token()[..16].to_owned(),
            out,
            out_rx: Mutex::new(Some(out_rx)),
            redis,
        }
    }

    /// Queues a change this replica observed for publishing; never waits (a full queue or an
    /// oversize message drops it, counted).
    pub(crate) fn send(
        &self,
        agent: &str,
        observation: &Observation,
        creator: Option<&Creator>,
        metrics: &Metrics,
    ) {
        let message = Message {
            replica: self.replica.clone(),
            agent: agent.to_owned(),
            observation: observation.clone(),
            creator: creator.map(|(owner, thread_id)| RelayedCreator {
                owner: owner.clone(),
                thread_id: thread_id.clone(),
            }),
        };
        let Some(json) = message.encode() else {
            metrics.inbox.relay_dropped(RelayDrop::Oversize);
            return;
        };
        if self.out.try_send(json).is_err() {
            metrics.inbox.relay_dropped(RelayDrop::QueueFull);
        }
    }

    /// Whether `message` is this replica's own (the subscription receives those too).
    pub(crate) fn is_own(&self, message: &Message) -> bool {
        own(&self.replica, message)
    }
}

/// Whether `message` was relayed by `replica`.
fn own(replica: &str, message: &Message) -> bool {
    message.replica == replica
}

/// The payload of a pub/sub push (`message` or `smessage`: `[channel, payload]`).
fn payload(info: &PushInfo) -> Option<&[u8]> {
    if !matches!(info.kind, PushKind::Message | PushKind::SMessage) {
        return None;
    }
    match info.data.get(1)? {
        Value::BulkString(b) => Some(b),
        _ => None,
    }
}

/// Starts the publisher and the subscription of `inbox`'s relay; both end when `stop` is
/// set.
pub(crate) fn spawn(inbox: Arc<Inbox>, stop: watch::Receiver<bool>) {
    let Some(relay) = inbox.relay.as_ref() else {
        return;
    };
    let taken = relay
        .out_rx
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some(rx) = taken {
        tokio::spawn(publish(
            relay.redis.clone(),
            inbox.metrics.clone(),
            rx,
            stop.clone(),
        ));
    }
    tokio::spawn(subscribe(inbox, stop));
}

async fn publish(
    redis: Arc<RedisStore>,
    metrics: Arc<Metrics>,
    mut rx: mpsc::Receiver<String>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let json = tokio::select! {
            m = rx.recv() => match m { Some(m) => m, None => return },
            _ = stop.wait_for(|s| *s) => return,
        };
        match redis.publish_change(&json).await {
            Ok(_) => metrics.inbox.relayed(true),
            Err(e) => {
                tracing::debug!(error = %e, "the inbox relay could not publish a change");
                metrics.inbox.relay_dropped(RelayDrop::PublishFailed);
            }
        }
    }
}

async fn subscribe(inbox: Arc<Inbox>, mut stop: watch::Receiver<bool>) {
    let Some(relay) = inbox.relay.as_ref() else {
        return;
    };
    let metrics = inbox.metrics.clone();
    let mut backoff = BACKOFF_MIN;
    let mut subscribed_once = false;
    loop {
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(QUEUE);
        let gone = Arc::new(Notify::new());
        let closed = Arc::new(AtomicBool::new(false));
        let sink = {
            let (gone, closed, metrics) = (gone.clone(), closed.clone(), metrics.clone());
            move |info: PushInfo| -> Result<(), ()> {
                if info.kind == PushKind::Disconnection {
                    closed.store(true, Ordering::SeqCst);
                    gone.notify_one();
                    return Ok(());
                }
                let Some(raw) = payload(&info) else {
                    return Ok(());
                };
                if raw.len() > MAX_MESSAGE_BYTES {
                    metrics.inbox.relay_dropped(RelayDrop::Oversize);
                    return Ok(());
                }
                match tx.try_send(raw.to_vec()) {
                    Ok(()) => Ok(()),
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        metrics.inbox.relay_dropped(RelayDrop::QueueFull);
                        Ok(())
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => Err(()),
                }
            }
        };
        let subscription = tokio::select! {
            s = relay.redis.subscribe_changes(sink) => s,
            _ = stop.wait_for(|s| *s) => return,
        };
        let subscription = match subscription {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, retry_ms = backoff.as_millis() as u64, "the inbox relay could not subscribe; changes seen by other replicas arrive with the shared reads until it can");
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = stop.wait_for(|s| *s) => return,
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        backoff = BACKOFF_MIN;
        if subscribed_once {
            // Changes may have been missed while the subscription was down.
            metrics.inbox.relay_resubscribed();
            tracing::info!("the inbox relay subscribed again; re-reading the shared reads");
            super::poll::reread(&inbox).await;
        }
        subscribed_once = true;
        loop {
            let raw = tokio::select! {
                raw = rx.recv() => raw,
                _ = gone.notified() => None,
                _ = stop.wait_for(|s| *s) => return,
            };
            let Some(raw) = raw else { break };
            receive(&inbox, relay, &raw).await;
            if closed.load(Ordering::SeqCst) {
                break;
            }
        }
        drop(subscription);
        tracing::warn!("the inbox relay's subscription dropped; subscribing again");
    }
}

/// Applies one received message, unless it is this replica's own or does not decode.
async fn receive(inbox: &Inbox, relay: &Relay, raw: &[u8]) {
    let message = match Message::decode(raw) {
        Ok(m) => m,
        Err(reason) => {
            inbox.metrics.inbox.relay_dropped(reason);
            return;
        }
    };
    if relay.is_own(&message) {
        return;
    }
    inbox.metrics.inbox.relayed(false);
    inbox.relayed(&message).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{ContextId, TaskId};

    fn message(replica: &str) -> Message {
        Message {
            replica: replica.into(),
            agent: "ref".into(),
            observation: Observation {
                context_id: ContextId::new("ctx-1"),
                task_id: TaskId::new("task-1"),
                state: "input-required".into(),
                timestamp: Some("2026-01-01T00:00:00Z".into()),
            },
            creator: Some(RelayedCreator {
                owner: CallerId::new("alice"),
                thread_id: ThreadId::new("t1"),
            }),
        }
    }

    #[test]
    fn a_message_travels_as_small_flat_json_and_back() {
        let m = message("r1");
        let json = m.encode().unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["replica"], "r1");
        assert_eq!(v["agent"], "ref");
        assert_eq!(v["contextId"], "ctx-1");
        assert_eq!(v["taskId"], "task-1");
        assert_eq!(v["state"], "input-required");
        assert_eq!(v["creator"]["owner"], "alice");
        assert_eq!(v["creator"]["threadId"], "t1");
        assert_eq!(Message::decode(json.as_bytes()).unwrap(), m);
        assert_eq!(
            m.creator(),
            Some((CallerId::new("alice"), ThreadId::new("t1")))
        );
        let mut bare = m.clone();
        bare.creator = None;
        bare.observation.timestamp = None;
        let json = bare.encode().unwrap();
        assert!(!json.contains("creator") && !json.contains("timestamp"));
        assert_eq!(Message::decode(json.as_bytes()).unwrap(), bare);
    }

    #[test]
    fn oversize_and_malformed_messages_are_dropped() {
        let mut big = message("r1");
        big.agent = "a".repeat(MAX_MESSAGE_BYTES);
        assert_eq!(big.encode(), None, "not sent");
        let raw = serde_json::to_vec(&big).unwrap();
        assert_eq!(Message::decode(&raw), Err(RelayDrop::Oversize));
        assert_eq!(
            Message::decode(b"{\"replica\":1}"),
            Err(RelayDrop::Malformed)
        );
        assert_eq!(Message::decode(b"not json"), Err(RelayDrop::Malformed));
    }

    #[test]
    fn a_replica_ignores_its_own_messages() {
        let m = message("r1");
        assert!(own("r1", &m));
        assert!(!own("r2", &m));
        assert!(!own("", &m));
    }

    #[test]
    fn only_message_pushes_carry_a_payload() {
        let data = vec![
            Value::BulkString(b"agui-a2a-gateway:inbox-changes".to_vec()),
            Value::BulkString(b"{}".to_vec()),
        ];
        for kind in [PushKind::Message, PushKind::SMessage] {
            let info = PushInfo {
                kind,
                data: data.clone(),
            };
            assert_eq!(payload(&info), Some(&b"{}"[..]));
        }
        let info = PushInfo {
            kind: PushKind::Subscribe,
            data,
        };
        assert_eq!(payload(&info), None);
    }
}
