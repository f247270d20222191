//! What the gateway presents to upstream agents, beside the A2A calls themselves
//! (docs/security.md#upstream-trust): the TLS configuration of each agent ([`tls`]: which
//! roots are trusted, the client certificate, the name verified) and its credentials
//! ([`credentials`]: OAuth2 client credentials, token exchange, the caller's bearer, bearer
//! files re-read when they change).
//!
//! Built from the parsed configuration (`crate::config::upstream`); reaches the A2A client
//! only through its seams (a `reqwest::Client` / rustls configuration per agent, and
//! [`crate::a2a::call_headers::CallHeaders`]), so `crate::a2a` never imports this module.

pub(crate) mod credentials;
pub(crate) mod tls;
