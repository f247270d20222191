//! `rate_limits` (docs/design.md#2-running-it-and-configuration, docs/design.md#11-security): a
//! token bucket of runs per caller identity, built on
//! `governor` (GCRA). Anonymous callers (no inbound auth) share one bucket per client
//! address. Over the limit a run request is a 429 `rate_limited` with `Retry-After`.
//!
//! Memory: one small entry per key seen; keys idle long enough to have a full bucket again
//! are dropped every [`SWEEP_EVERY`] checks, so a stream of new addresses cannot grow it
//! without bound.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};

use crate::config::RateLimits;

/// Checks between sweeps of idle keys.
const SWEEP_EVERY: u64 = 4096;

/// The run limiter.
#[derive(Debug)]
pub(crate) struct RunLimiter {
    limiter: DefaultKeyedRateLimiter<String>,
    checks: AtomicU64,
}

impl RunLimiter {
    pub(crate) fn new(limits: RateLimits) -> Self {
        let per_minute = NonZeroU32::new(limits.runs_per_minute).unwrap_or(NonZeroU32::MIN);
        let burst = NonZeroU32::new(limits.burst).unwrap_or(NonZeroU32::MIN);
        Self {
            limiter: governor::RateLimiter::keyed(Quota::per_minute(per_minute).allow_burst(burst)),
            checks: AtomicU64::new(0),
        }
    }

    /// The bucket of a caller: its identity, or (anonymous) its address.
    pub(crate) fn key(caller: &str, anonymous: bool, addr: Option<IpAddr>) -> String {
        match (anonymous, addr) {
            (true, Some(ip)) => format!("{caller}@{ip}"),
            _ => caller.to_owned(),
        }
    }

    /// `Ok` if the run may start; else the seconds to wait.
    pub(crate) fn check(&self, key: &str) -> Result<(), u64> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.limiter.retain_recent();
        }
        self.limiter
            .check_key(&key.to_owned())
            .map_err(|not_until| {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
            })
    }
}

/// `push.max_per_second`, one bucket per agent (agent names come from config: bounded).
#[derive(Debug)]
pub(crate) struct PushLimiter(DefaultKeyedRateLimiter<String>);

impl PushLimiter {
    pub(crate) fn new(per_second: std::num::NonZeroU32) -> Self {
        Self(governor::RateLimiter::keyed(Quota::per_second(per_second)))
    }

    /// `Ok` if a push of `agent` may be taken now; else the seconds to wait.
    pub(crate) fn check(&self, agent: &str) -> Result<(), u64> {
        self.0.check_key(&agent.to_owned()).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            wait.as_secs() + u64::from(wait.subsec_nanos() > 0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_is_limited_and_another_is_not() {
        let l = RunLimiter::new(RateLimits {
            runs_per_minute: 60,
            burst: 2,
        });
        assert!(l.check("a").is_ok());
        assert!(l.check("a").is_ok());
        let wait = l.check("a").unwrap_err();
        assert!((1..=2).contains(&wait), "{wait}");
        assert!(l.check("b").is_ok(), "buckets are per caller");
    }

    #[test]
    fn anonymous_callers_share_a_bucket_per_address() {
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(
            RunLimiter::key("anonymous", true, Some(ip)),
            "anonymous@10.0.0.1"
        );
        assert_eq!(RunLimiter::key("alice", false, Some(ip)), "alice");
    }
}
