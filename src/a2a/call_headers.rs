//! Headers decided per call: the seam through which credentials that change (OAuth2 tokens,
//! exchanged tokens, the caller's bearer, files re-read when they change;
//! docs/security.md#upstream-credentials) reach every binding's calls.
//!
//! The A2A client knows only this trait; `crate::upstream` implements it. Invariants the
//! client keeps ([`super::client::Client`]): the headers are asked for once per call (a
//! stream is one call) and set on that call only; an agent's `401` (gRPC `UNAUTHENTICATED`)
//! to them is told with [`CallHeaders::refused`] and the call is made once more with fresh
//! ones, never more; a failure to get them ends the call with
//! [`super::errors::ClientError::Credentials`] before anything is sent.

use futures::future::BoxFuture;
use reqwest::header::HeaderMap;

/// Where a call's changing headers come from.
pub trait CallHeaders: Send + Sync + std::fmt::Debug {
    /// The headers for the next call. `Err`: why none could be had (no secret in it).
    fn headers(&self) -> BoxFuture<'_, Result<HeaderMap, String>>;

    /// The agent answered `sent` with a 401: a cached credential among them is stale.
    fn refused(&self, sent: &HeaderMap);
}
