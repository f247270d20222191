//! # agui-a2a-gateway
//!
//! A stateless HTTP gateway between AG-UI frontends and A2A agents.
//!
//! ## Layout
//! - [`agui`]: AG-UI protocol data (events out, `RunAgentInput` in). No I/O.
//! - [`a2a`]: the only module that knows how A2A versions are spelled on the wire: model,
//!   codecs, cards, client (`docs/versions.md`).
//! - [`bridge`]: pure translation, A2A -> AG-UI projection and AG-UI -> A2A requests.
//! - [`run`]: the one async module that owns a run: upstream calls, timeouts, limits,
//!   recovery, and the terminal-event guarantee.
//! - [`registry`]: configured agents, their cards, readiness.
//! - [`upstream`]: what the gateway presents to agents: TLS and credentials.
//! - [`ids`]: the ids a conversation is keyed by (thread, context, task, caller), as types.
//! - [`auth`]: inbound auth: who is calling (API keys, JWT), the caller of every request.
//! - [`store`]: the binding store (owner + agent + threadId -> contextId): memory or Redis.
//! - [`error`]: the error vocabulary: request errors (HTTP) and run errors (`RUN_ERROR`).
//! - [`http`]: thin axum handlers, the inbound HTTP/1.1 server and the SSE body.
//! - [`http1`]: HTTP/1.1 message framing, shared by the inbound server and the upstream reader.
//! - [`config`]: file + flags -> validated [`config::Settings`].
//! - [`redact`]: what may be shown or logged (userinfo, foreign strings).
//! - [`json`]: JSON read alike by both protocols (`null` as absent, non-empty strings).
//! - [`metrics`]: the Prometheus metrics served at `/metrics`.
//! - [`inbox`]: the live inbox: every agent's conversations kept by pushes, runs and one
//!   shared poll, and the change feed of `GET /threads/events`.
//! - [`push`]: A2A push notifications received: tokens, registrations, push bodies.
//! - [`telemetry`]: traces over OTLP: a span per run and per upstream call.
//! - [`demo`]: the embedded demo A2A agent (`--demo`).
//! - [`app`]: build the app from settings and serve it; the state its handlers and runs share.

pub mod a2a;
pub(crate) mod agui;
pub mod app;
pub(crate) mod auth;
pub(crate) mod bridge;
pub mod config;
pub mod demo;
pub(crate) mod error;
pub(crate) mod http;
pub(crate) mod http1;
pub(crate) mod ids;
pub(crate) mod inbox;
pub(crate) mod json;
pub(crate) mod metrics;
pub(crate) mod push;
pub(crate) mod redact;
pub(crate) mod registry;
pub(crate) mod run;
pub(crate) mod store;
pub mod telemetry;
pub(crate) mod upstream;

#[cfg(test)]
mod tests {
    /// The layouts in the crate's and the bridge's headers name every module they declare
    /// (`[`name`]`), so a module added is a module described.
    #[test]
    fn module_headers_name_every_module() {
        for (file, text) in [
            ("src/lib.rs", include_str!("lib.rs")),
            ("src/bridge.rs", include_str!("bridge.rs")),
        ] {
            let declared = text.lines().filter_map(|line| {
                let rest = line
                    .strip_prefix("pub mod ")
                    .or_else(|| line.strip_prefix("pub(crate) mod "))
                    .or_else(|| line.strip_prefix("mod "))?;
                rest.strip_suffix(';')
            });
            for name in declared {
                assert!(
                    text.contains(&format!("[`{name}`]")),
                    "{file}'s header does not name {name}"
                );
            }
        }
    }
}
