//! Issued tokens kept until shortly before they expire, and fetched once for every caller
//! waiting on them (docs/security.md#upstream-credentials).
//!
//! A [`TokenCell`] holds one token:
//! - it is used until [`refresh_ahead`] of its lifetime remains (min(60 s, half of it)), then
//!   the next caller fetches a new one;
//! - single flight: one fetch at a time; callers that arrive during a fetch wait for it and
//!   take its token (or its failure) instead of fetching again;
//! - a failure is remembered for [`FAILURE_BACKOFF`]: callers within it get that failure
//!   (or the previous token, while it has not expired) without a request, so fifty waiting
//!   runs make one request, not fifty;
//! - [`TokenCell::refused`] drops the token only when it is the one the agent refused (a
//!   refusal of an older token does not throw away a newer one).
//!
//! [`Cells`] keeps one cell per key (token exchange: per caller token), at most a bound of
//! them: expired ones go first, then the least recently used.
//!
//! Time comes from a [`Clock`] so tests can move it; production reads `Instant::now()`.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::header::HeaderValue;

use super::endpoint::Issued;

/// How long a failed fetch is answered from memory before the next caller tries again.
pub(crate) const FAILURE_BACKOFF: Duration = Duration::from_secs(1);
/// Refresh at most this long before expiry.
const MAX_REFRESH_AHEAD: Duration = Duration::from_secs(60);

/// How long before its expiry a token of `lifetime` is replaced: min(60 s, half of it).
pub(crate) fn refresh_ahead(lifetime: Duration) -> Duration {
    MAX_REFRESH_AHEAD.min(lifetime / 2)
}

/// Now, and in tests a now that can be moved forward.
#[derive(Debug, Clone, Default)]
pub(crate) struct Clock {
    #[cfg(test)]
    offset: Arc<Mutex<Duration>>,
}

impl Clock {
    pub(crate) fn now(&self) -> Instant {
        #[cfg(test)]
        return Instant::now() + *self.offset.lock().unwrap();
        #[cfg(not(test))]
        Instant::now()
    }

    #[cfg(test)]
    pub(crate) fn advance(&self, by: Duration) {
        *self.offset.lock().unwrap() += by;
    }
}

/// A cached token.
#[derive(Clone)]
struct Token {
    /// The `Authorization` value, marked sensitive.
    authorization: HeaderValue,
    obtained: Instant,
    refresh_at: Instant,
    expires_at: Instant,
}

/// A remembered failure.
#[derive(Debug, Clone)]
struct Failure {
    at: Instant,
    why: String,
}

#[derive(Default)]
struct Slot {
    token: Option<Token>,
    failure: Option<Failure>,
}

/// One token, fetched once for all its callers.
pub(crate) struct TokenCell {
    clock: Clock,
    slot: Mutex<Slot>,
    /// Held by the one caller fetching.
    flight: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for TokenCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cached = self.slot.lock().is_ok_and(|s| s.token.is_some());
        f.debug_struct("TokenCell")
            .field("cached", &cached)
            .finish_non_exhaustive()
    }
}

/// What a cell can answer without fetching.
enum Ready {
    Token(HeaderValue),
    Failed(String),
    Fetch,
}

impl TokenCell {
    pub(crate) fn new(clock: Clock) -> Self {
        Self {
            clock,
            slot: Mutex::new(Slot::default()),
            flight: tokio::sync::Mutex::new(()),
        }
    }

    /// The `Authorization` value: the cached token, or one `fetch` gets (capped to live no
    /// longer than `cap`, an instant such as the subject token's expiry). `Err`: why none.
    pub(crate) async fn get<F, Fut>(
        &self,
        cap: Option<Instant>,
        fetch: F,
    ) -> Result<HeaderValue, String>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Issued, String>>,
    {
        let asked = self.clock.now();
        match self.ready(asked, None) {
            Ready::Token(t) => return Ok(t),
            Ready::Failed(why) => return Err(why),
            Ready::Fetch => {}
        }
        let _flight = self.flight.lock().await;
        // What a fetch finished while this caller waited serves it too.
        match self.ready(self.clock.now(), Some(asked)) {
            Ready::Token(t) => return Ok(t),
            Ready::Failed(why) => return Err(why),
            Ready::Fetch => {}
        }
        let result = fetch().await;
        let now = self.clock.now();
        let mut slot = self
            .slot
            .lock()
            .map_err(|_| "a credentials lock was poisoned")?;
        match result {
            Ok(issued) => {
                let mut expires_at = now + issued.lifetime;
                if let Some(cap) = cap {
                    expires_at = expires_at.min(cap);
                }
                let lifetime = expires_at.saturating_duration_since(now);
                let token = Token {
                    authorization: issued.authorization,
                    obtained: now,
                    refresh_at: expires_at - refresh_ahead(lifetime),
                    expires_at,
                };
                slot.failure = None;
                Ok(slot.token.insert(token).authorization.clone())
            }
            Err(why) => {
                slot.failure = Some(Failure {
                    at: now,
                    why: why.clone(),
                });
                // The previous token, while it lives, serves through a failed refresh.
                match &slot.token {
                    Some(t) if now < t.expires_at => Ok(t.authorization.clone()),
                    _ => Err(why),
                }
            }
        }
    }

    /// What the cell answers at `now` without fetching; `waited_since`: when a caller that
    /// waited on a fetch began to wait (a token obtained since then is its answer while it
    /// has not expired, even one already due for refresh).
    fn ready(&self, now: Instant, waited_since: Option<Instant>) -> Ready {
        let Ok(slot) = self.slot.lock() else {
            return Ready::Failed("a credentials lock was poisoned".into());
        };
        let live = slot.token.as_ref().filter(|t| now < t.expires_at);
        if let Some(t) = live {
            let fetched_for_me = waited_since.is_some_and(|w| t.obtained >= w);
            if now < t.refresh_at || fetched_for_me {
                return Ready::Token(t.authorization.clone());
            }
        }
        match &slot.failure {
            Some(f) if now < f.at + FAILURE_BACKOFF => match live {
                Some(t) => Ready::Token(t.authorization.clone()),
                None => Ready::Failed(f.why.clone()),
            },
            _ => Ready::Fetch,
        }
    }

    /// The agent refused `sent` (an `Authorization` value): drop the cached token if it is
    /// that one.
    pub(crate) fn refused(&self, sent: Option<&HeaderValue>) {
        if let (Ok(mut slot), Some(sent)) = (self.slot.lock(), sent) {
            if slot.token.as_ref().is_some_and(|t| t.authorization == sent) {
                slot.token = None;
            }
        }
    }

    /// Whether the cell holds nothing worth keeping at `now`: no live token, no failure
    /// within its backoff.
    fn is_spent(&self, now: Instant) -> bool {
        self.slot.lock().is_ok_and(|s| {
            s.token.as_ref().is_none_or(|t| now >= t.expires_at)
                && s.failure
                    .as_ref()
                    .is_none_or(|f| now >= f.at + FAILURE_BACKOFF)
        })
    }
}

/// One [`TokenCell`] per key, at most `max` of them.
pub(crate) struct Cells<K> {
    clock: Clock,
    max: usize,
    cells: Mutex<HashMap<K, (Arc<TokenCell>, Instant)>>,
}

impl<K> std::fmt::Debug for Cells<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cells")
            .field("len", &self.cells.lock().map_or(0, |c| c.len()))
            .field("max", &self.max)
            .finish()
    }
}

impl<K: std::hash::Hash + Eq + Clone> Cells<K> {
    pub(crate) fn new(clock: Clock, max: usize) -> Self {
        Self {
            clock,
            max: max.max(1),
            cells: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The cell of `key`, made (and room made for it) when there is none.
    pub(crate) fn cell(&self, key: &K) -> Arc<TokenCell> {
        let now = self.clock.now();
        let Ok(mut cells) = self.cells.lock() else {
            return Arc::new(TokenCell::new(self.clock.clone()));
        };
        if let Some((cell, used)) = cells.get_mut(key) {
            *used = now;
            return cell.clone();
        }
        if cells.len() >= self.max {
            cells.retain(|_, (cell, _)| !cell.is_spent(now));
        }
        if cells.len() >= self.max {
            // The least recently used tenth goes, so a full cache does not sort per insert.
            let mut by_use: Vec<(Instant, K)> = cells
                .iter()
                .map(|(k, (_, used))| (*used, k.clone()))
                .collect();
            by_use.sort_by_key(|(used, _)| *used);
            let excess = cells.len() + 1 - self.max;
            for (_, k) in by_use.into_iter().take(excess.max(self.max / 10)) {
                cells.remove(&k);
            }
        }
        let cell = Arc::new(TokenCell::new(self.clock.clone()));
        cells.insert(key.clone(), (cell.clone(), now));
        cell
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.cells.lock().map_or(0, |c| c.len())
    }

    #[cfg(test)]
    pub(crate) fn contains(&self, key: &K) -> bool {
        self.cells.lock().unwrap().contains_key(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn issued(n: usize, lifetime: u64) -> Issued {
        let mut authorization = HeaderValue::from_str(&format!("Bearer t{n}")).unwrap();
        authorization.set_sensitive(true);
        Issued {
            authorization,
            lifetime: Duration::from_secs(lifetime),
        }
    }

    /// A fetch counting its calls, issuing `t<n>` tokens of `lifetime` seconds.
    fn counting(
        count: &AtomicUsize,
        lifetime: u64,
    ) -> impl Future<Output = Result<Issued, String>> + '_ {
        let n = count.fetch_add(1, Ordering::SeqCst) + 1;
        async move { Ok(issued(n, lifetime)) }
    }

    #[tokio::test]
    async fn a_token_is_kept_until_refresh_ahead_of_its_expiry() {
        let clock = Clock::default();
        let cell = TokenCell::new(clock.clone());
        let count = AtomicUsize::new(0);
        assert_eq!(
            cell.get(None, || counting(&count, 600)).await.unwrap(),
            "Bearer t1"
        );
        clock.advance(Duration::from_secs(539));
        assert_eq!(
            cell.get(None, || counting(&count, 600)).await.unwrap(),
            "Bearer t1"
        );
        // 60 s before expiry: the next caller refreshes.
        clock.advance(Duration::from_secs(1));
        assert_eq!(
            cell.get(None, || counting(&count, 600)).await.unwrap(),
            "Bearer t2"
        );
        // A short token refreshes at half its life.
        let short = TokenCell::new(clock.clone());
        assert_eq!(
            short.get(None, || counting(&count, 10)).await.unwrap(),
            "Bearer t3"
        );
        clock.advance(Duration::from_secs(4));
        assert_eq!(
            short.get(None, || counting(&count, 10)).await.unwrap(),
            "Bearer t3"
        );
        clock.advance(Duration::from_secs(1));
        assert_eq!(
            short.get(None, || counting(&count, 10)).await.unwrap(),
            "Bearer t4"
        );
        // A cap shortens the life (the subject token's expiry).
        let capped = TokenCell::new(clock.clone());
        let cap = clock.now() + Duration::from_secs(100);
        capped
            .get(Some(cap), || counting(&count, 3600))
            .await
            .unwrap();
        clock.advance(Duration::from_secs(50));
        assert_eq!(
            capped
                .get(Some(cap), || counting(&count, 3600))
                .await
                .unwrap(),
            "Bearer t6"
        );
        assert_eq!(
            refresh_ahead(Duration::from_secs(3600)),
            Duration::from_secs(60)
        );
    }

    #[tokio::test]
    async fn fifty_concurrent_callers_make_one_fetch() {
        let cell = Arc::new(TokenCell::new(Clock::default()));
        let started = Arc::new(AtomicUsize::new(0));
        let (release, gate) = tokio::sync::watch::channel(false);
        let callers: Vec<_> = (0..50)
            .map(|_| {
                let (cell, started, mut gate) = (cell.clone(), started.clone(), gate.clone());
                tokio::spawn(async move {
                    cell.get(None, || async move {
                        let n = started.fetch_add(1, Ordering::SeqCst) + 1;
                        let _ = gate.wait_for(|open| *open).await;
                        Ok(issued(n, 600))
                    })
                    .await
                })
            })
            .collect();
        // One thread: one yield lets every caller run until it waits (on the gate, or on
        // the caller holding the flight), so all fifty ask before the token exists.
        tokio::task::yield_now().await;
        assert_eq!(started.load(Ordering::SeqCst), 1);
        release.send_replace(true);
        for c in callers {
            assert_eq!(c.await.unwrap().unwrap(), "Bearer t1");
        }
        assert_eq!(started.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_failure_is_remembered_briefly_then_retried() {
        let clock = Clock::default();
        let cell = TokenCell::new(clock.clone());
        let count = AtomicUsize::new(0);
        let failing = || {
            count.fetch_add(1, Ordering::SeqCst);
            async {
                Err::<Issued, _>("the token endpoint refused the request (HTTP 503)".to_owned())
            }
        };
        for _ in 0..5 {
            let e = cell.get(None, failing).await.unwrap_err();
            assert!(e.contains("HTTP 503"), "{e}");
        }
        assert_eq!(
            count.load(Ordering::SeqCst),
            1,
            "within the backoff: no new request"
        );
        clock.advance(FAILURE_BACKOFF);
        let count2 = AtomicUsize::new(0);
        assert_eq!(
            cell.get(None, || counting(&count2, 600)).await.unwrap(),
            "Bearer t1"
        );
        // A failed refresh keeps serving the token that still lives.
        clock.advance(Duration::from_secs(550));
        assert_eq!(cell.get(None, failing).await.unwrap(), "Bearer t1");
        assert_eq!(count.load(Ordering::SeqCst), 2);
        clock.advance(Duration::from_secs(50));
        assert!(
            cell.get(None, failing).await.is_err(),
            "expired, and still failing"
        );
    }

    #[tokio::test]
    async fn a_refusal_drops_only_the_token_refused() {
        let cell = TokenCell::new(Clock::default());
        let count = AtomicUsize::new(0);
        let first = cell.get(None, || counting(&count, 600)).await.unwrap();
        cell.refused(Some(&HeaderValue::from_static("Bearer someone-else")));
        assert_eq!(
            cell.get(None, || counting(&count, 600)).await.unwrap(),
            first
        );
        cell.refused(Some(&first));
        let second = cell.get(None, || counting(&count, 600)).await.unwrap();
        assert_eq!(second, "Bearer t2");
        // A late refusal of the first does not drop the second.
        cell.refused(Some(&first));
        assert_eq!(
            cell.get(None, || counting(&count, 600)).await.unwrap(),
            second
        );
    }

    #[tokio::test]
    async fn cells_are_bounded_spent_ones_first_then_the_oldest() {
        let clock = Clock::default();
        let cells: Cells<u32> = Cells::new(clock.clone(), 20);
        let count = AtomicUsize::new(0);
        for k in 0..20 {
            let lifetime = if k < 5 { 10 } else { 600 };
            cells
                .cell(&k)
                .get(None, || counting(&count, lifetime))
                .await
                .unwrap();
            clock.advance(Duration::from_millis(1));
        }
        assert_eq!(cells.len(), 20);
        clock.advance(Duration::from_secs(11));
        cells.cell(&5); // used: now the most recent of the live ones
        let live = |k: u32| {
            let cell = cells.cell(&k);
            let count = &count;
            async move { cell.get(None, || counting(count, 600)).await.unwrap() }
        };
        live(100).await;
        assert_eq!(cells.len(), 16, "the five expired went");
        assert!((0..5).all(|k| !cells.contains(&k)));
        for k in 101..105 {
            live(k).await;
        }
        assert_eq!(cells.len(), 20);
        cells.cell(&200);
        // Full of live cells: the least recently used tenth (2) went.
        assert_eq!(cells.len(), 19);
        assert!(!cells.contains(&6) && !cells.contains(&7));
        assert!(cells.contains(&5) && cells.contains(&8) && cells.contains(&200));
    }
}
