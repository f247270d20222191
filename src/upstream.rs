//! How the gateway authenticates to upstream agents (docs/security.md#upstream-credentials):
//! [`credentials`]: OAuth2 client credentials, token exchange, the caller's bearer, bearer
//! files re-read when they change. (The TLS of upstream connections is the A2A client's own:
//! `crate::a2a::tls`.)
//!
//! Built from the parsed configuration (`crate::config::upstream`); reaches the A2A client
//! only through its seam ([`crate::a2a::call_headers::CallHeaders`]), so `crate::a2a` never
//! imports this module.

pub(crate) mod credentials;
