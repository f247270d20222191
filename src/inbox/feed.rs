//! The change feed's bookkeeping (docs/design.md#the-live-inbox): event ids, the window of
//! recent changes a `Last-Event-ID` resumes from, and the subscribers with their bounded
//! queues. No I/O: the inbox ([`super::Inbox`]) holds it under its lock, so a subscriber
//! registers, and reads its snapshot or resume, atomically with respect to changes.
//!
//! Invariants: ids are `<epoch>-<seq>`, the epoch random per process, so an id of another
//! replica or an earlier process never resumes here (a fresh snapshot instead); a resume is
//! granted only when every change after the id is still in the window; publishing never
//! waits: a subscriber whose queue is full is dropped (told why by its stream), the others
//! go on; at most `inbox.max_subscribers` subscribers, `inbox.max_subscribers_per_caller`
//! per caller identity.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;

use super::book::Change;
use crate::auth::Caller;
use crate::ids::CallerId;

/// A change with its sequence number.
#[derive(Debug)]
pub(crate) struct Numbered {
    pub seq: u64,
    pub change: Change,
}

/// Why a subscription was refused: the bound that is full, by its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// `inbox.max_subscribers`.
    Total,
    /// `inbox.max_subscribers_per_caller`.
    PerCaller,
}

impl Full {
    /// The config key of the bound.
    pub(crate) fn key(self) -> &'static str {
        match self {
            Self::Total => "inbox.max_subscribers",
            Self::PerCaller => "inbox.max_subscribers_per_caller",
        }
    }
}

/// How a subscriber's stream starts.
#[derive(Debug)]
pub(crate) enum Start {
    /// The changes after its `Last-Event-ID`, in order.
    Resume(Vec<Arc<Numbered>>),
    /// A fresh snapshot (no id, or one that cannot be resumed).
    Snapshot,
}

/// One subscriber's side of the feed.
#[derive(Debug)]
struct Subscriber {
    caller: Caller,
    tx: mpsc::Sender<Arc<Numbered>>,
    /// Set when it was dropped for falling behind.
    overrun: Arc<AtomicBool>,
}

/// What a subscriber reads: its queue, and whether it was dropped for falling behind.
#[derive(Debug)]
pub(crate) struct Receiver {
    pub id: u64,
    pub rx: mpsc::Receiver<Arc<Numbered>>,
    pub overrun: Arc<AtomicBool>,
}

/// The feed's state.
#[derive(Debug)]
pub(crate) struct Feed {
    epoch: String,
    next_seq: u64,
    window: VecDeque<Arc<Numbered>>,
    window_len: usize,
    subscribers: HashMap<u64, Subscriber>,
    per_caller: HashMap<CallerId, usize>,
    next_id: u64,
    max_total: usize,
    max_per_caller: usize,
    buffer: usize,
}

impl Feed {
    pub(crate) fn new(
        epoch: String,
        window_len: usize,
        max_total: usize,
        max_per_caller: usize,
        buffer: usize,
    ) -> Self {
        Self {
            epoch,
            next_seq: 1,
            window: VecDeque::new(),
            window_len: window_len.max(1),
            subscribers: HashMap::new(),
            per_caller: HashMap::new(),
            next_id: 0,
            max_total,
            max_per_caller,
            buffer: buffer.max(1),
        }
    }

    /// The event id of `seq`.
    pub(crate) fn id(&self, seq: u64) -> String {
        format!("{}-{seq}", self.epoch)
    }

    /// The id of the latest change (`<epoch>-0` before any): what a snapshot is as of.
    pub(crate) fn latest_id(&self) -> String {
        self.id(self.next_seq - 1)
    }

    /// Numbers `change`, keeps it in the window and queues it for each subscriber `sees`
    /// lets see it. Returns how many subscribers were dropped for falling behind.
    pub(crate) fn publish(
        &mut self,
        change: Change,
        sees: impl Fn(&Caller, &Change) -> bool,
    ) -> usize {
        let numbered = Arc::new(Numbered {
            seq: self.next_seq,
            change,
        });
        self.next_seq += 1;
        if self.window.len() == self.window_len {
            self.window.pop_front();
        }
        self.window.push_back(numbered.clone());
        let mut gone = Vec::new();
        let mut overrun = 0;
        for (id, s) in &self.subscribers {
            if !sees(&s.caller, &numbered.change) {
                continue;
            }
            match s.tx.try_send(numbered.clone()) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => {
                    s.overrun.store(true, Ordering::SeqCst);
                    overrun += 1;
                    gone.push(*id);
                }
                Err(mpsc::error::TrySendError::Closed(_)) => gone.push(*id),
            }
        }
        for id in gone {
            self.unsubscribe(id);
        }
        overrun
    }

    /// Registers a subscriber for `caller`, and how its stream starts after `last_id`.
    pub(crate) fn subscribe(
        &mut self,
        caller: &Caller,
        last_id: Option<&str>,
    ) -> Result<(Receiver, Start), Full> {
        if self.subscribers.len() >= self.max_total {
            return Err(Full::Total);
        }
        let mine = self.per_caller.get(&caller.id).copied().unwrap_or(0);
        if mine >= self.max_per_caller {
            return Err(Full::PerCaller);
        }
        let start = match last_id.and_then(|id| self.resume(id)) {
            Some(changes) => Start::Resume(changes),
            None => Start::Snapshot,
        };
        let (tx, rx) = mpsc::channel(self.buffer);
        let overrun = Arc::new(AtomicBool::new(false));
        let id = self.next_id;
        self.next_id += 1;
        self.subscribers.insert(
            id,
            Subscriber {
                caller: caller.clone(),
                tx,
                overrun: overrun.clone(),
            },
        );
        *self.per_caller.entry(caller.id.clone()).or_default() += 1;
        Ok((Receiver { id, rx, overrun }, start))
    }

    /// Removes a subscriber (its stream ended, or it fell behind).
    pub(crate) fn unsubscribe(&mut self, id: u64) {
        let Some(s) = self.subscribers.remove(&id) else {
            return;
        };
        if let Some(n) = self.per_caller.get_mut(&s.caller.id) {
            *n -= 1;
            if *n == 0 {
                self.per_caller.remove(&s.caller.id);
            }
        }
    }

    /// Subscribers now.
    pub(crate) fn subscribers(&self) -> usize {
        self.subscribers.len()
    }

    /// The changes after `last_id`, when every one of them is still in the window.
    fn resume(&self, last_id: &str) -> Option<Vec<Arc<Numbered>>> {
        let (epoch, seq) = last_id.rsplit_once('-')?;
        let seq: u64 = seq.parse().ok()?;
        if epoch != self.epoch || seq >= self.next_seq {
            return None;
        }
        let oldest = self.window.front().map_or(self.next_seq, |n| n.seq);
        if seq + 1 < oldest {
            return None;
        }
        Some(
            self.window
                .iter()
                .filter(|n| n.seq > seq)
                .cloned()
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::threads::{LastTask, ThreadStatus, ThreadSummary};
    use crate::ids::{ContextId, TaskId, ThreadId};

    fn change(i: u32) -> Change {
        Change {
            agent: "a".into(),
            thread: ThreadSummary {
                context_id: ContextId::new(format!("c{i}")),
                last_task: LastTask {
                    id: TaskId::new("t"),
                    state: "working".into(),
                    updated_at: None,
                },
                status: ThreadStatus::Working,
                thread_id: ThreadId::new(format!("c{i}")),
            },
            creator: None,
        }
    }

    fn caller(id: &str) -> Caller {
        Caller {
            id: CallerId::new(id),
            scopes: Vec::new(),
            token: None,
        }
    }

    fn feed() -> Feed {
        Feed::new("e1".into(), 4, 3, 2, 2)
    }

    #[test]
    fn ids_resume_within_the_window_and_this_epoch_only() {
        let mut f = feed();
        assert_eq!(f.latest_id(), "e1-0");
        let (_r, start) = f.subscribe(&caller("x"), Some("e1-0")).unwrap();
        assert!(matches!(start, Start::Resume(v) if v.is_empty()));
        for i in 0..6 {
            f.publish(change(i), |_, _| false);
        }
        assert_eq!(f.latest_id(), "e1-6");
        let resumed = |f: &mut Feed, id: &str| match f.subscribe(&caller("y"), Some(id)) {
            Ok((r, Start::Resume(v))) => {
                f.unsubscribe(r.id);
                Some(v.iter().map(|n| n.seq).collect::<Vec<_>>())
            }
            Ok((r, Start::Snapshot)) => {
                f.unsubscribe(r.id);
                None
            }
            Err(e) => panic!("{e:?}"),
        };
        assert_eq!(resumed(&mut f, "e1-4"), Some(vec![5, 6]));
        assert_eq!(resumed(&mut f, "e1-2"), Some(vec![3, 4, 5, 6]));
        assert_eq!(resumed(&mut f, "e1-1"), None, "change 2 left the window");
        assert_eq!(resumed(&mut f, "e1-6"), Some(vec![]));
        assert_eq!(resumed(&mut f, "e1-7"), None, "from the future");
        assert_eq!(resumed(&mut f, "e0-5"), None, "another process");
        assert_eq!(resumed(&mut f, "garbage"), None);
    }

    #[test]
    fn subscribers_are_bounded_in_all_and_per_caller() {
        let mut f = feed();
        let (a1, _) = f.subscribe(&caller("a"), None).unwrap();
        let _a2 = f.subscribe(&caller("a"), None).unwrap();
        assert_eq!(
            f.subscribe(&caller("a"), None).unwrap_err(),
            Full::PerCaller
        );
        let _b = f.subscribe(&caller("b"), None).unwrap();
        assert_eq!(f.subscribe(&caller("c"), None).unwrap_err(), Full::Total);
        f.unsubscribe(a1.id);
        assert_eq!(f.subscribers(), 2);
        assert!(f.subscribe(&caller("a"), None).is_ok());
    }

    #[test]
    fn a_slow_subscriber_is_dropped_and_never_holds_the_others() {
        let mut f = feed();
        let (mut slow, _) = f.subscribe(&caller("slow"), None).unwrap();
        let (mut quick, _) = f.subscribe(&caller("quick"), None).unwrap();
        let (mut blind, _) = f.subscribe(&caller("blind"), None).unwrap();
        let sees = |c: &Caller, _: &Change| c.id.as_str() != "blind";
        let mut dropped = 0;
        for i in 0..5 {
            dropped += f.publish(change(i), sees);
            while let Ok(n) = quick.rx.try_recv() {
                assert!(n.seq as u32 == i + 1);
            }
        }
        assert_eq!(dropped, 1);
        assert!(slow.overrun.load(Ordering::SeqCst));
        assert!(!quick.overrun.load(Ordering::SeqCst));
        // The slow one reads what was queued, then its queue ends.
        assert_eq!(slow.rx.try_recv().unwrap().seq, 1);
        assert_eq!(slow.rx.try_recv().unwrap().seq, 2);
        assert!(matches!(
            slow.rx.try_recv(),
            Err(mpsc::error::TryRecvError::Disconnected)
        ));
        assert!(blind.rx.try_recv().is_err(), "filtered out");
        assert_eq!(f.subscribers(), 2);
    }
}
