//! The live inbox (docs/design.md#the-live-inbox): every agent's conversations as `GET
//! /threads` shows them, kept by the gateway rather than read for each viewer, and the change
//! feed of `GET /threads/events`.
//!
//! Kept by: pushes (`crate::http::push`), runs ([`Inbox::observe`]), and for agents without
//! push one shared `ListTasks` poll per agent per `inbox.poll_s` ([`poll`]; with Redis one
//! replica at a time polls, the others read what it shared); with Redis also by the changes
//! the other replicas took from their pushes and runs ([`relay`]: only those are relayed,
//! never what came from the relay or the shared reads). The pure core is [`book`]
//! (ordering, duplicates, bounds, who sees what) and [`feed`] (ids, resume window,
//! subscribers); this module holds them under one lock, so a change is applied and queued
//! for the subscribers at once, and a subscriber's snapshot or resume is exact. The lock is
//! never held across an await.
//!
//! Agents the inbox does not keep (an A2A 0.3 agent has no `ListTasks`; an agent whose
//! credentials are per caller cannot be read once for all) are [`Read::Live`]: `GET /threads`
//! reads them per caller as before (`crate::http::threads`); so is an agent told who calls
//! (`forward_identity`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use crate::auth::Caller;
use crate::bridge::threads::{self, ThreadSummary};
use crate::config::{InboxConfig, PushSettings, Timeouts, Visibility};
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::store::Store;

pub(crate) mod book;
pub(crate) mod feed;
pub(crate) mod poll;
pub(crate) mod relay;

use book::{Book, Change, Creator, Observation};
use feed::{Feed, Full, Numbered, Start};

/// How an agent's conversations were last read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read {
    /// Not yet: a request waits for the first read (bounded by `timeouts.upstream_call`).
    Pending,
    /// Read (by this replica's poll, or another's it shared) at this time.
    Polled(SystemTime),
    /// The last read failed with this code (`upstream_unavailable`, `upstream_timeout`,
    /// `upstream_auth_failed`): the agent is named in `unavailable`.
    Failed(&'static str),
    /// Kept by pushes: as current as the last push.
    Pushed,
    /// Not kept here: read per caller.
    Live,
}

/// One agent's slot.
#[derive(Debug)]
struct Slot {
    visibility: Visibility,
    read: watch::Sender<Read>,
}

#[derive(Debug)]
struct State {
    book: Book,
    feed: Feed,
}

/// The inbox.
pub(crate) struct Inbox {
    state: Mutex<State>,
    agents: HashMap<String, Slot>,
    store: Arc<Store>,
    metrics: Arc<Metrics>,
    config: InboxConfig,
    /// What the shared reads need ([`poll::spawn`]), and whether they were started.
    registry: Arc<Registry>,
    push: PushSettings,
    timeouts: Timeouts,
    stop: watch::Receiver<bool>,
    started: std::sync::Once,
    /// With the Redis store: the relay of changes between replicas ([`relay`]).
    relay: Option<relay::Relay>,
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox")
            .field("agents", &self.agents.len())
            .finish_non_exhaustive()
    }
}

/// A subscriber's stream start: the items to send first, as of `id`.
#[derive(Debug)]
pub(crate) enum Opening {
    /// `event: snapshot`: the caller's inbox now, and the agents that could not be read.
    Snapshot {
        threads: Vec<threads::InboxThread>,
        unavailable: Vec<threads::Unavailable>,
        id: String,
    },
    /// The changes missed since `Last-Event-ID`, each with its id.
    Resume(Vec<(String, threads::InboxThread)>),
}

impl Inbox {
    /// The inbox of `registry`'s agents, empty; its shared reads start with [`Inbox::start`]
    /// (or the first request that needs them).
    pub(crate) fn new(
        registry: Arc<Registry>,
        store: Arc<Store>,
        metrics: Arc<Metrics>,
        settings: &crate::config::Settings,
        stop: watch::Receiver<bool>,
    ) -> Arc<Self> {
        let config = settings.inbox;
        let agents = registry
            .all()
            .map(|a| {
                metrics.inbox.know_agent(&a.settings.name);
                let slot = Slot {
                    visibility: a.settings.visibility,
                    read: watch::channel(Read::Pending).0,
                };
                (a.settings.name.clone(), slot)
            })
            .collect();
        let m = &metrics.inbox;
        m.bound("inbox.poll_s", config.poll_s.get());
        m.bound(
            "inbox.max_threads_per_agent",
            config.max_threads_per_agent.get() as u64,
        );
        m.bound("inbox.max_subscribers", config.max_subscribers.get() as u64);
        m.bound(
            "inbox.max_subscribers_per_caller",
            config.max_subscribers_per_caller.get() as u64,
        );
        m.bound(
            "inbox.subscriber_buffer",
            config.subscriber_buffer.get() as u64,
        );
        m.bound("inbox.resume_window", config.resume_window.get() as u64);
        let epoch = crate::push::token()[..12].to_owned();
        let relay = store
            .redis_store()
            .map(|redis| relay::Relay::new(redis, &metrics));
        Arc::new(Self {
            state: Mutex::new(State {
                book: Book::new(config.max_threads_per_agent.get()),
                feed: Feed::new(
                    epoch,
                    config.resume_window.get(),
                    config.max_subscribers.get(),
                    config.max_subscribers_per_caller.get(),
                    config.subscriber_buffer.get(),
                ),
            }),
            agents,
            store,
            metrics,
            config,
            registry,
            push: settings.push.clone(),
            timeouts: settings.timeouts,
            stop,
            started: std::sync::Once::new(),
            relay,
        })
    }

    /// Starts the shared reads of every agent ([`poll`]), once. Must be called within the
    /// tokio runtime.
    pub(crate) fn start(self: &Arc<Self>) {
        self.started.call_once(|| {
            poll::spawn(
                self.clone(),
                self.registry.clone(),
                self.push.clone(),
                self.timeouts,
                self.stop.clone(),
            );
        });
    }

    /// Starts the relay across replicas (Redis; nothing for the memory store): at build, since
    /// a replica no one views still publishes what its pushes and runs see, and its subscribers
    /// may come at any time.
    pub(crate) fn start_relay(self: &Arc<Self>) {
        relay::spawn(self.clone(), self.stop.clone());
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding it cannot leave the book half-changed in a way that
        // matters more than losing the inbox: go on with it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `inbox` as configured.
    pub(crate) fn config(&self) -> &InboxConfig {
        &self.config
    }

    /// Applies `update`, which this replica saw (a push or a run), to `agent`'s conversation
    /// (its creator looked up in the binding store the first time the context is seen), and
    /// relays the change to the other replicas ([`relay`]); `true` when it changed the inbox.
    pub(crate) async fn update(&self, agent: &str, update: &Observation) -> bool {
        let Some(creator) = self.take(agent, update).await else {
            return false;
        };
        if let Some(relay) = &self.relay {
            relay.send(agent, update, creator.as_ref(), &self.metrics);
        }
        true
    }

    /// Applies `update` from a shared read (which every replica reads itself, so it is not
    /// relayed); `true` when it changed the inbox.
    pub(crate) async fn absorb(&self, agent: &str, update: &Observation) -> bool {
        self.take(agent, update).await.is_some()
    }

    /// Applies a change another replica relayed (never relayed again), with the creator it
    /// knew (looked up here when it knew none and the context is new here).
    async fn relayed(&self, message: &relay::Message) -> bool {
        match message.creator() {
            Some(creator) if self.agents.contains_key(&message.agent) => self
                .apply(&message.agent, &message.observation, Some(creator))
                .is_some(),
            Some(_) => false,
            None => self
                .take(&message.agent, &message.observation)
                .await
                .is_some(),
        }
    }

    /// Applies `update`, its creator looked up for a context not seen yet: `Some(creator)`
    /// when it changed the inbox.
    async fn take(&self, agent: &str, update: &Observation) -> Option<Option<Creator>> {
        if !self.agents.contains_key(agent) {
            return None;
        }
        let known = self.lock().book.knows(agent, &update.context_id);
        let creator = if known {
            None
        } else {
            self.store.owner_of(agent, &update.context_id).await
        };
        self.apply(agent, update, creator)
    }

    /// Applies `update` with its creator, and queues the change for the subscribers:
    /// `Some(the conversation's creator)` when it changed.
    fn apply(
        &self,
        agent: &str,
        update: &Observation,
        creator: Option<Creator>,
    ) -> Option<Option<Creator>> {
        let mut state = self.lock();
        let change = state.book.apply(agent, update, creator)?;
        let creator = change.creator.clone();
        let held = state.book.len();
        let visibility = self.visibility(agent);
        let dropped = state
            .feed
            .publish(change, |caller, c| sees(caller, visibility, c));
        let subscribers = state.feed.subscribers();
        drop(state);
        let m = &self.metrics.inbox;
        m.threads(held);
        m.dropped(dropped);
        m.subscribers(subscribers);
        Some(creator)
    }

    fn visibility(&self, agent: &str) -> Visibility {
        self.agents
            .get(agent)
            .map_or(Visibility::Owner, |s| s.visibility)
    }

    /// Records how `agent` was read.
    pub(crate) fn set_read(&self, agent: &str, read: Read) {
        if let Some(slot) = self.agents.get(agent) {
            slot.read.send_replace(read);
        }
    }

    /// How `agent` was last read (`None`: no such agent).
    pub(crate) fn read_of(&self, agent: &str) -> Option<Read> {
        self.agents.get(agent).map(|s| *s.read.borrow())
    }

    /// Waits until every agent was read once (or is known not to be kept here), at most
    /// `bound`: the shared first read, never one of its own.
    pub(crate) async fn first_reads(self: &Arc<Self>, bound: Duration) {
        self.start();
        let waits = self.agents.values().map(|slot| {
            let mut rx = slot.read.subscribe();
            async move {
                let _ = rx.wait_for(|r| *r != Read::Pending).await;
            }
        });
        let _ = tokio::time::timeout(bound, futures::future::join_all(waits)).await;
    }

    /// `agent`'s conversations `caller` may see, newest first.
    pub(crate) fn threads_for(&self, caller: &Caller, agent: &str) -> Vec<ThreadSummary> {
        let visibility = self.visibility(agent);
        let all = self.lock().book.threads(agent);
        all.into_iter()
            .filter_map(|(t, creator)| book::shown(caller, visibility, t, creator.as_ref()))
            .collect()
    }

    /// The caller's inbox across the agents kept here, and those that could not be read.
    fn snapshot(&self, caller: &Caller, state: &State) -> threads::Inbox {
        let mut names: Vec<&String> = self.agents.keys().collect();
        names.sort();
        let per_agent = names.into_iter().filter_map(|name| {
            let visibility = self.visibility(name);
            match self.read_of(name)? {
                Read::Live => None,
                Read::Failed(code) => Some((name.clone(), Err(code))),
                Read::Pending => Some((name.clone(), Err(crate::error::UPSTREAM_TIMEOUT))),
                Read::Polled(_) | Read::Pushed => {
                    let shown = state
                        .book
                        .threads(name)
                        .into_iter()
                        .filter_map(|(t, c)| book::shown(caller, visibility, t, c.as_ref()))
                        .collect();
                    Some((name.clone(), Ok(shown)))
                }
            }
        });
        threads::inbox(per_agent)
    }

    /// Subscribes `caller` to the change feed, resuming after `last_id` when it can.
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        caller: &Caller,
        last_id: Option<&str>,
    ) -> Result<(Subscription, Opening), Full> {
        let mut state = self.lock();
        let (receiver, start) = match state.feed.subscribe(caller, last_id) {
            Ok(s) => s,
            Err(full) => {
                drop(state);
                self.metrics.inbox.refused(full.key());
                return Err(full);
            }
        };
        let opening = match start {
            Start::Snapshot => {
                let inbox = self.snapshot(caller, &state);
                Opening::Snapshot {
                    threads: inbox.threads,
                    unavailable: inbox.unavailable,
                    id: state.feed.latest_id(),
                }
            }
            Start::Resume(changes) => Opening::Resume(
                changes
                    .iter()
                    .filter_map(|n| {
                        let item = self.item_for(caller, n)?;
                        Some((state.feed.id(n.seq), item))
                    })
                    .collect(),
            ),
        };
        let subscribers = state.feed.subscribers();
        drop(state);
        self.metrics.inbox.subscribers(subscribers);
        Ok((
            Subscription {
                inbox: self.clone(),
                receiver,
            },
            opening,
        ))
    }

    /// A change as `caller` sees it (`None`: hidden from the caller).
    fn item_for(&self, caller: &Caller, n: &Numbered) -> Option<threads::InboxThread> {
        let c = &n.change;
        let visibility = self.visibility(&c.agent);
        let thread = book::shown(caller, visibility, c.thread.clone(), c.creator.as_ref())?;
        Some(threads::InboxThread {
            agent: c.agent.clone(),
            thread,
        })
    }

    fn unsubscribe(&self, id: u64) {
        let mut state = self.lock();
        state.feed.unsubscribe(id);
        let n = state.feed.subscribers();
        drop(state);
        self.metrics.inbox.subscribers(n);
    }

    /// The time of the oldest last read of the agents kept by polling: the inbox is at least
    /// that fresh (agents kept by pushes are as fresh as their last push).
    pub(crate) fn read_at(&self) -> Option<SystemTime> {
        self.agents
            .values()
            .filter_map(|s| match *s.read.borrow() {
                Read::Polled(at) => Some(at),
                _ => None,
            })
            .min()
    }
}

/// Whether `caller` may see `change` on an agent with `visibility` ([`book::shown`]'s rule).
fn sees(caller: &Caller, visibility: Visibility, change: &Change) -> bool {
    caller.may_use_context(change.creator.as_ref().map(|(c, _)| c), visibility)
}

/// One subscriber of the change feed; unsubscribes when dropped.
#[derive(Debug)]
pub(crate) struct Subscription {
    inbox: Arc<Inbox>,
    receiver: feed::Receiver,
}

/// What a subscription reads next.
#[derive(Debug)]
pub(crate) enum Next {
    /// A change the caller may see, with its id.
    Change(String, threads::InboxThread),
    /// The subscriber fell behind (`inbox.subscriber_buffer`) and was dropped.
    Overrun,
    /// The feed ended.
    End,
}

impl Subscription {
    /// The next change for `caller`.
    pub(crate) async fn next(&mut self, caller: &Caller) -> Next {
        loop {
            match self.receiver.rx.recv().await {
                Some(n) => {
                    if let Some(item) = self.inbox.item_for(caller, &n) {
                        let id = self.inbox.lock().feed.id(n.seq);
                        return Next::Change(id, item);
                    }
                }
                None if self
                    .receiver
                    .overrun
                    .load(std::sync::atomic::Ordering::SeqCst) =>
                {
                    return Next::Overrun
                }
                None => return Next::End,
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.inbox.unsubscribe(self.receiver.id);
    }
}
