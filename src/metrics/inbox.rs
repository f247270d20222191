//! The live inbox's metrics (docs/design.md#10-observability, docs/design.md#the-live-inbox):
//! pushes received by result, shared polls by agent and result, the feed's subscribers and
//! those dropped or refused, the conversations held, and the configured bounds. Labels are
//! config names and closed sets only: a push to a name no agent has counts under
//! [`UNKNOWN_AGENT`], never under the name it gave.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The `agent` label of pushes to a name no agent has.
pub(crate) const UNKNOWN_AGENT: &str = "";

/// What became of a push (`result` label of `agui_gateway_push_received_total`): accepted,
/// or the reason of its refusal. Every refusal answers the same `401` but for
/// [`PushResult::TooLarge`] (`413`) and [`PushResult::RateLimited`] (`429`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PushResult {
    /// Taken (whether or not it changed the inbox).
    Accepted,
    UnknownAgent,
    /// `push.enabled` off, or `push: off` for the agent.
    PushOff,
    MissingToken,
    /// No registration for the task the body names.
    UnknownTask,
    WrongToken,
    /// Not a `StreamResponse` nor a 0.3 task.
    Malformed,
    TooLarge,
    RateLimited,
}

impl PushResult {
    pub(crate) const ALL: [Self; 9] = [
        Self::Accepted,
        Self::UnknownAgent,
        Self::PushOff,
        Self::MissingToken,
        Self::UnknownTask,
        Self::WrongToken,
        Self::Malformed,
        Self::TooLarge,
        Self::RateLimited,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::UnknownAgent => "unknown_agent",
            Self::PushOff => "push_off",
            Self::MissingToken => "missing_token",
            Self::UnknownTask => "unknown_task",
            Self::WrongToken => "wrong_token",
            Self::Malformed => "malformed",
            Self::TooLarge => "too_large",
            Self::RateLimited => "rate_limited",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PushLabels {
    agent: String,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PollLabels {
    agent: String,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RelayLabels {
    direction: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RelayDropLabels {
    reason: &'static str,
}

/// Why a relayed change was dropped (`reason` label of
/// `agui_gateway_inbox_relay_dropped_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RelayDrop {
    /// Larger than the relay's message bound (sent or received).
    Oversize,
    /// The bounded queue between the subscription (or the inbox) and the relay was full.
    QueueFull,
    /// A received message that does not decode.
    Malformed,
    /// `PUBLISH`/`SPUBLISH` failed.
    PublishFailed,
}

impl RelayDrop {
    pub(crate) const ALL: [Self; 4] = [
        Self::Oversize,
        Self::QueueFull,
        Self::Malformed,
        Self::PublishFailed,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Oversize => "oversize",
            Self::QueueFull => "queue_full",
            Self::Malformed => "malformed",
            Self::PublishFailed => "publish_failed",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BoundLabels {
    bound: &'static str,
}

/// The inbox's metrics, registered with the gateway's.
#[derive(Debug)]
pub(crate) struct InboxMetrics {
    pushes: Family<PushLabels, Counter>,
    polls: Family<PollLabels, Counter>,
    subscribers: Gauge,
    dropped: Counter,
    refused: Family<BoundLabels, Counter>,
    threads: Gauge,
    bounds: Family<BoundLabels, Gauge>,
    relayed: Family<RelayLabels, Counter>,
    relay_dropped: Family<RelayDropLabels, Counter>,
    relay_resubscribed: Counter,
}

impl InboxMetrics {
    pub(super) fn register(registry: &mut Registry) -> Self {
        let m = Self {
            pushes: Family::default(),
            polls: Family::default(),
            subscribers: Gauge::default(),
            dropped: Counter::default(),
            refused: Family::default(),
            threads: Gauge::default(),
            bounds: Family::default(),
            relayed: Family::default(),
            relay_dropped: Family::default(),
            relay_resubscribed: Counter::default(),
        };
        registry.register(
            "agui_gateway_push_received",
            "A2A push notifications received, by agent and result (accepted, or why refused).",
            m.pushes.clone(),
        );
        registry.register(
            "agui_gateway_inbox_polls",
            "Shared ListTasks polls of agents without push, by agent and result.",
            m.polls.clone(),
        );
        registry.register(
            "agui_gateway_feed_subscribers",
            "Open GET /threads/events streams.",
            m.subscribers.clone(),
        );
        registry.register(
            "agui_gateway_feed_subscribers_dropped",
            "Change feed subscribers dropped for falling behind (inbox.subscriber_buffer).",
            m.dropped.clone(),
        );
        registry.register(
            "agui_gateway_feed_subscribers_refused",
            "Change feed subscriptions refused (429), by the bound that was full.",
            m.refused.clone(),
        );
        registry.register(
            "agui_gateway_inbox_threads",
            "Conversations the inbox holds, every agent's.",
            m.threads.clone(),
        );
        registry.register(
            "agui_gateway_inbox_bound",
            "The live inbox's configured bounds (push.* and inbox.*), by key.",
            m.bounds.clone(),
        );
        registry.register(
            "agui_gateway_inbox_relayed",
            "Inbox changes relayed between replicas through Redis pub/sub: out (published) and in (applied from another replica).",
            m.relayed.clone(),
        );
        registry.register(
            "agui_gateway_inbox_relay_dropped",
            "Inbox changes the relay dropped, by reason.",
            m.relay_dropped.clone(),
        );
        registry.register(
            "agui_gateway_inbox_relay_resubscribed",
            "Times the relay's subscription was made again after it dropped (the shared reads are re-read then).",
            m.relay_resubscribed.clone(),
        );
        m
    }

    /// Starts the relay's series at zero (Redis only: the memory store has no relay).
    pub(crate) fn know_relay(&self) {
        for direction in ["out", "in"] {
            let _ = self.relayed.get_or_create(&RelayLabels { direction });
        }
        for reason in RelayDrop::ALL {
            let _ = self.relay_dropped.get_or_create(&RelayDropLabels {
                reason: reason.as_str(),
            });
        }
    }

    /// A change relayed out (`true`: published) or in (applied from another replica).
    pub(crate) fn relayed(&self, out: bool) {
        let direction = if out { "out" } else { "in" };
        self.relayed.get_or_create(&RelayLabels { direction }).inc();
    }

    pub(crate) fn relay_dropped(&self, reason: RelayDrop) {
        self.relay_dropped
            .get_or_create(&RelayDropLabels {
                reason: reason.as_str(),
            })
            .inc();
    }

    pub(crate) fn relay_resubscribed(&self) {
        self.relay_resubscribed.inc();
    }

    /// Starts every agent's push and poll series at zero.
    pub(crate) fn know_agent(&self, agent: &str) {
        for result in PushResult::ALL {
            let _ = self.pushes.get_or_create(&PushLabels {
                agent: agent.to_owned(),
                result: result.as_str(),
            });
        }
        for result in ["ok", "error"] {
            let _ = self.polls.get_or_create(&PollLabels {
                agent: agent.to_owned(),
                result,
            });
        }
    }

    /// A configured bound, by its key (`inbox.max_subscribers`).
    pub(crate) fn bound(&self, key: &'static str, value: u64) {
        self.bounds
            .get_or_create(&BoundLabels { bound: key })
            .set(i64::try_from(value).unwrap_or(i64::MAX));
    }

    pub(crate) fn push(&self, agent: &str, result: PushResult) {
        self.pushes
            .get_or_create(&PushLabels {
                agent: agent.to_owned(),
                result: result.as_str(),
            })
            .inc();
    }

    pub(crate) fn poll(&self, agent: &str, ok: bool) {
        self.polls
            .get_or_create(&PollLabels {
                agent: agent.to_owned(),
                result: if ok { "ok" } else { "error" },
            })
            .inc();
    }

    pub(crate) fn subscribers(&self, n: usize) {
        self.subscribers.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    pub(crate) fn dropped(&self, n: usize) {
        self.dropped.inc_by(n as u64);
    }

    pub(crate) fn refused(&self, bound: &'static str) {
        self.refused.get_or_create(&BoundLabels { bound }).inc();
    }

    pub(crate) fn threads(&self, n: usize) {
        self.threads.set(i64::try_from(n).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_names_every_inbox_series() {
        let mut registry = Registry::default();
        let m = InboxMetrics::register(&mut registry);
        m.know_agent("ref");
        m.push("ref", PushResult::WrongToken);
        m.push(UNKNOWN_AGENT, PushResult::UnknownAgent);
        m.poll("ref", true);
        m.subscribers(3);
        m.dropped(1);
        m.refused("inbox.max_subscribers");
        m.threads(7);
        m.bound("inbox.poll_s", 10);
        m.know_relay();
        m.relayed(true);
        m.relay_dropped(RelayDrop::Oversize);
        m.relay_resubscribed();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            r#"agui_gateway_push_received_total{agent="ref",result="wrong_token"} 1"#,
            r#"agui_gateway_push_received_total{agent="ref",result="accepted"} 0"#,
            r#"agui_gateway_push_received_total{agent="",result="unknown_agent"} 1"#,
            r#"agui_gateway_inbox_polls_total{agent="ref",result="ok"} 1"#,
            "agui_gateway_feed_subscribers 3",
            "agui_gateway_feed_subscribers_dropped_total 1",
            r#"agui_gateway_feed_subscribers_refused_total{bound="inbox.max_subscribers"} 1"#,
            "agui_gateway_inbox_threads 7",
            r#"agui_gateway_inbox_bound{bound="inbox.poll_s"} 10"#,
            r#"agui_gateway_inbox_relayed_total{direction="out"} 1"#,
            r#"agui_gateway_inbox_relayed_total{direction="in"} 0"#,
            r#"agui_gateway_inbox_relay_dropped_total{reason="oversize"} 1"#,
            r#"agui_gateway_inbox_relay_dropped_total{reason="queue_full"} 0"#,
            "agui_gateway_inbox_relay_resubscribed_total 1",
        ] {
            assert!(text.contains(line), "{line} missing in:\n{text}");
        }
    }
}
