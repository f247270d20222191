//! Configuration: the file (YAML or TOML), flags and env, validated into runtime
//! [`Settings`] (docs/design.md#2-running-it-and-configuration).
//!
//! File types ([`FileConfig`]) mirror the documented keys exactly and reject unknown keys;
//! bounds are non-zero by type and deserialized straight into the types the gateway runs
//! with ([`Limits`], [`Timeouts`]: one table of keys and defaults each), so a `0` is refused
//! as the file is read, naming its key. Runtime types ([`Settings`], [`AgentSettings`]) hold
//! parsed values only (URLs, durations, resolved header values), so nothing downstream
//! re-validates. An agent's defaults are the file's ([`AgentConfig::new`]), for the flag and
//! the demo agent alike. Precedence: flags and env over the file over defaults.
//!
//! Validation goes on past a problem: [`settings`] answers every problem it found at once
//! ([`ConfigErrors`]), so one `--validate-only` names, say, every unset `env:` reference.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::num::{NonZeroU64, NonZeroUsize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use url::Url;

use crate::a2a::card::{self, Binding, Pins};
use crate::a2a::model::ProtocolVersion;

pub(crate) mod inbound;
pub mod store;
pub mod upstream;

pub use store::{Password, RedisSettings, StoreConfig, Topology};

/// The config file, as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FileConfig {
    pub listen: Option<String>,
    /// `memory`, a Redis URL, or the map form (docs/operations.md#managed-redis).
    pub binding_store: Option<store::StoreFileConfig>,
    /// Seconds a Redis binding lives after its last use (default 30 days); `0` is refused as
    /// the file is read.
    pub binding_ttl_s: Option<NonZeroU64>,
    /// Browser origins allowed to call the gateway (CORS); none by default.
    pub cors_origins: Vec<String>,
    /// Allow a non-loopback `listen` without inbound auth (docs/design.md#11-security).
    pub insecure_no_auth: bool,
    /// Inbound auth: API keys and JWT.
    pub auth: AuthConfig,
    pub agents: Vec<AgentConfig>,
    pub limits: Limits,
    pub timeouts: Timeouts,
    /// Runs per caller identity (docs/design.md#2-running-it-and-configuration,
    /// docs/design.md#11-security); none by default.
    pub rate_limits: Option<RateLimits>,
    /// OpenTelemetry traces (docs/design.md#10-observability); off unless an endpoint is given.
    pub telemetry: TelemetryConfig,
    /// `/metrics` without inbound auth even when auth is configured.
    pub metrics_public: bool,
    /// CopilotKit runtime routes (docs/design.md#3-http-surface).
    pub copilotkit: CopilotKitConfig,
    /// What `/readyz` answers 503 for (docs/operations.md#readiness).
    pub readiness: Readiness,
    /// A2A push notifications received (docs/design.md#the-live-inbox); off by default.
    pub push: PushConfig,
    /// The live inbox's poll and bounds (docs/design.md#the-live-inbox).
    pub inbox: InboxConfig,
}

/// `readiness` (docs/operations.md#readiness): by default `/readyz` answers 503 only while
/// the replica drains; `strict: true` also while an agent's card is unread or the binding
/// store does not answer, as `GET /readyz?strict` does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Readiness {
    pub strict: bool,
}

/// `copilotkit` (docs/design.md#2-running-it-and-configuration, docs/design.md#3-http-surface).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CopilotKitConfig {
    /// Where the CopilotKit runtime routes are mounted; `""` turns them off.
    pub base_path: String,
    /// The agent that answers as `default` under the base path (a CopilotKit app that names
    /// no agent asks for `default`); unset: the only agent, when there is one.
    pub default_agent: Option<String>,
}

impl Default for CopilotKitConfig {
    fn default() -> Self {
        Self {
            base_path: "/copilotkit".into(),
            default_agent: None,
        }
    }
}

/// `rate_limits` (docs/design.md#2-running-it-and-configuration): a token bucket per caller
/// identity (anonymous callers: one per client address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimits {
    /// Sustained runs per minute.
    pub runs_per_minute: u32,
    /// Runs allowed at once above the sustained rate.
    #[serde(default = "default_burst")]
    pub burst: u32,
}

fn default_burst() -> u32 {
    1
}

/// `telemetry` (docs/design.md#2-running-it-and-configuration,
/// docs/design.md#10-observability).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryConfig {
    /// OTLP/HTTP base URL (the gateway posts to `<endpoint>/v1/traces`); the environment's
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` when unset.
    pub otlp_endpoint: Option<String>,
}

/// A secret, or a reference to one (`env:NAME`, `file:/path`, or the literal value): its
/// `Debug` prints `[redacted]`, so no config dump shows it.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// The value, for the one place that uses it.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Self(s.to_owned()))
    }
}

/// `auth`: inbound caller authentication (docs/design.md#2-running-it-and-configuration,
/// docs/design.md#11-security); parsed by [`inbound`], checked by `crate::auth`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// `Authorization: Bearer <key>`.
    pub api_keys: Vec<ApiKeyConfig>,
    /// `Authorization: Bearer <JWT>`.
    pub jwt: Option<JwtConfig>,
}

/// One inbound API key, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApiKeyConfig {
    /// The caller identity the key authenticates.
    pub name: String,
    /// The key, by reference.
    pub key: Secret,
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// `auth.jwt`, as written: exactly one of `jwks_file` and `hs256_secret`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JwtConfig {
    pub issuer: String,
    pub audience: String,
    /// RS256/ES256 public keys (a JWKS document), read at start.
    #[serde(default)]
    pub jwks_file: Option<PathBuf>,
    /// The HS256 secret, by reference.
    #[serde(default)]
    pub hs256_secret: Option<Secret>,
    #[serde(default = "default_identity_claim")]
    pub identity_claim: String,
    #[serde(default = "default_scopes_claim")]
    pub scopes_claim: String,
}

fn default_identity_claim() -> String {
    "sub".into()
}

fn default_scopes_claim() -> String {
    "scope".into()
}

/// One upstream agent, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    pub name: String,
    pub url: String,
    #[serde(default)]
    pub protocol: ProtocolChoice,
    #[serde(default)]
    pub context_ids: ContextIds,
    #[serde(default)]
    pub cancel_on_disconnect: bool,
    /// Header name -> value reference (`env:NAME`, `file:/path`, or a literal).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Who may see and pick up contexts not created through the gateway
    /// (docs/design.md#11-security).
    #[serde(default)]
    pub visibility: Visibility,
    /// A header that carries the caller identity on every upstream call of a run.
    #[serde(default)]
    pub forward_identity: Option<String>,
    /// Cues forwarded on every run unless the run says otherwise (docs/design.md#5-run-options,
    /// docs/design.md#8-forwarding-lane).
    #[serde(default)]
    pub forward: Vec<ForwardCue>,
    /// Activate the gateway's extensions even when the card does not declare them.
    #[serde(default)]
    pub force_extensions: bool,
    /// The A2A binding (docs/bindings.md): the card's order, or a pin.
    #[serde(default)]
    pub binding: BindingChoice,
    /// How delegation to another agent shows to clients that do not declare AG-UI 1.0
    /// (docs/mapping.md#delegation-to-other-agents).
    #[serde(default)]
    pub subagents: Subagents,
    /// The agent's tools that are other agents (ADK `AgentTool`): nothing on the wire tells
    /// them from an ordinary tool (docs/dialects.md#delegation).
    #[serde(default)]
    pub subagent_tools: Vec<String>,
    /// The tenant sent on every call, in place of the selected interface's.
    #[serde(default)]
    pub tenant: Option<String>,
    /// Upstream TLS: extra roots, mTLS, the name to verify (docs/security.md#upstream-trust).
    #[serde(default)]
    pub tls: Option<upstream::TlsConfig>,
    /// How the gateway authenticates to the agent (docs/security.md#upstream-credentials).
    #[serde(default)]
    pub credentials: Option<upstream::CredentialsConfig>,
    /// Push notifications from this agent (docs/design.md#the-live-inbox).
    #[serde(default)]
    pub push: PushChoice,
}

impl AgentConfig {
    /// An agent named `name` at `url` with every other key at the file's default, read the
    /// way the file is read: the `--agent` flag and the demo agent get exactly the defaults
    /// an agent of the file gets, written once (each field's `serde` default).
    pub fn new(name: &str, url: &str) -> Self {
        use serde::de::value::{Error, MapDeserializer};
        let keys = MapDeserializer::<_, Error>::new([("name", name), ("url", url)].into_iter());
        Self::deserialize(keys).expect("name and url are an agent's only required keys")
    }
}

/// `binding`: the first interface of the card the gateway speaks (`auto`), or a pin, by
/// the binding's configuration name ([`Binding::config_name`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BindingChoice {
    #[default]
    Auto,
    Pinned(Binding),
}

impl BindingChoice {
    /// The pinned binding, if any.
    pub fn pinned(self) -> Option<Binding> {
        match self {
            Self::Auto => None,
            Self::Pinned(b) => Some(b),
        }
    }
}

impl<'de> Deserialize<'de> for BindingChoice {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        if raw == "auto" {
            return Ok(Self::Auto);
        }
        Binding::of_config(&raw).map(Self::Pinned).ok_or_else(|| {
            let names: Vec<&str> = Binding::ALL.map(Binding::config_name).to_vec();
            serde::de::Error::custom(format!(
                "unknown binding `{raw}`, expected auto, {}",
                names.join(", ")
            ))
        })
    }
}

/// One cue of the forwarding lane (`forward: [...]`, docs/design.md#5-run-options;
/// `docs/forwarding.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ForwardCue {
    /// `RunAgentInput.context`.
    Context,
    /// The app's state, whole.
    State,
    /// The app's state as a patch since the gateway's last projection.
    StatePatch,
    /// `RunAgentInput.tools` (frontend tools).
    Tools,
    /// The transcript's system messages.
    System,
    /// The transcript's developer messages.
    Developer,
}

/// `subagents`: how a delegation to another agent shows to a client that does not declare
/// AG-UI 1.0 (docs/mapping.md#delegation-to-other-agents); 1.0 clients get `SUBAGENT_*`
/// events whatever this says.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Subagents {
    /// As an ordinary tool call, byte for byte as before delegation was recognised.
    #[default]
    Inline,
    /// Attributed too: `CUSTOM` events named after the 1.0 `SUBAGENT_*` events, which
    /// every client version defines.
    Attributed,
}

/// At most this many `subagent_tools` per agent.
pub const MAX_SUBAGENT_TOOLS: usize = 256;
/// A `subagent_tools` name is at most this long (a model's function name is far shorter).
const MAX_SUBAGENT_TOOL_BYTES: usize = 128;

/// `visibility`: who may see contexts on the upstream that were not created through the
/// gateway (docs/design.md#11-security).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    /// Only callers with scope `threads:all` (default).
    #[default]
    Owner,
    /// Every caller.
    Shared,
}

/// `protocol`: detect from the card, or pin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum ProtocolChoice {
    #[default]
    #[serde(rename = "auto")]
    Auto,
    #[serde(rename = "1.0")]
    V1,
    #[serde(rename = "0.3")]
    V0_3,
}

impl ProtocolChoice {
    /// The pinned version, if any.
    pub fn pinned(self) -> Option<ProtocolVersion> {
        match self {
            Self::Auto => None,
            Self::V1 => Some(ProtocolVersion::V1),
            Self::V0_3 => Some(ProtocolVersion::V0_3),
        }
    }
}

/// `context_ids`: who mints A2A context ids (docs/design.md#4-threads-and-contexts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContextIds {
    /// The server mints them; the first run of a thread sends none (default).
    #[default]
    Server,
    /// The agent accepts client context ids: the threadId is sent as contextId.
    Client,
}

/// A section of bounds (`limits`, `timeouts`) from one table: each key with its type, its
/// meaning and its default, written once. It declares the struct the file deserializes into
/// (non-zero by type, so a `0` is refused as the file is read, naming the key), its
/// `Default`, and [`Bound`]'s list of every key and default as the file writes it, which a
/// test holds `config/gateway.example.yaml` and docs/design.md's tables to. With
/// `accessors`, each key also reads as a method (a [`Millis`] as a `Duration`).
macro_rules! bounds {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $($(#[$fmeta:meta])* $field:ident: $ty:ty = $default:expr,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
        #[serde(deny_unknown_fields, default)]
        pub struct $name {
            $($(#[$fmeta])* pub $field: $ty,)*
        }

        impl Default for $name {
            fn default() -> Self {
                Self { $($field: $default,)* }
            }
        }

        impl $name {
            /// Every key of the section and its value as the file writes it, in order.
            pub fn keys(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($field), Bound::written(&self.$field)),)*]
            }
        }
    };
    (
        $(#[$meta:meta])*
        pub struct $name:ident with accessors {
            $($(#[$fmeta:meta])* $field:ident: $ty:ty = $default:expr,)*
        }
    ) => {
        bounds! {
            $(#[$meta])*
            pub struct $name {
                $($(#[$fmeta])* $field: $ty = $default,)*
            }
        }

        impl $name {
            $($(#[$fmeta])* pub fn $field(&self) -> Duration { self.$field.get() })*
        }
    };
}

/// A bound as the config file writes it: a positive integer.
pub trait Bound {
    /// The value in the file's unit.
    fn written(&self) -> u64;
}

impl Bound for NonZeroUsize {
    fn written(&self) -> u64 {
        self.get() as u64
    }
}

impl Bound for NonZeroU64 {
    fn written(&self) -> u64 {
        self.get()
    }
}

/// A timeout as the file writes it: milliseconds, non-zero by type, so a zero timeout
/// cannot be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Millis(pub NonZeroU64);

impl Millis {
    /// `ms` milliseconds; a zero panics (at compile time in a `const`), like [`nonzero`].
    pub const fn new(ms: u64) -> Self {
        Self(nonzero_u64(ms))
    }

    pub fn get(self) -> Duration {
        Duration::from_millis(self.0.get())
    }
}

impl Bound for Millis {
    fn written(&self) -> u64 {
        self.0.get()
    }
}

/// `n` as a [`NonZeroUsize`]; a zero panics (at compile time in a `const`). For defaults and
/// tests, which write their bounds as literals.
pub const fn nonzero(n: usize) -> NonZeroUsize {
    match NonZeroUsize::new(n) {
        Some(n) => n,
        None => panic!("a bound must be greater than 0"),
    }
}

/// `n` as a [`NonZeroU64`]; like [`nonzero`].
pub const fn nonzero_u64(n: u64) -> NonZeroU64 {
    match NonZeroU64::new(n) {
        Some(n) => n,
        None => panic!("a bound must be greater than 0"),
    }
}

bounds! {
    /// `limits` (docs/design.md#2-running-it-and-configuration,
    /// docs/design.md#9-reliability-and-limits). Every one is enforced; exceeding one is a
    /// clear error. The file's shape is the runtime setting: a `0` is refused as it is read,
    /// naming the key (``limits.max_body_bytes: invalid value: integer `0`, expected a
    /// nonzero usize``), and nothing downstream meets a zero bound.
    pub struct Limits {
        /// A request body; 413 above.
        max_body_bytes: NonZeroUsize = nonzero(8 * 1024 * 1024),
        /// The client's `state`, serialized; 413 above.
        max_state_bytes: NonZeroUsize = nonzero(1024 * 1024),
        /// threadId, runId, message ids and other ids of a request; 422 above.
        max_id_bytes: NonZeroUsize = nonzero(256),
        /// One upstream event or unary response.
        max_event_bytes: NonZeroUsize = nonzero(4 * 1024 * 1024),
        max_events_per_run: NonZeroU64 = nonzero_u64(100_000),
        /// Text the upstream streams in one run (all messages and artifacts).
        max_text_bytes_per_run: NonZeroUsize = nonzero(16 * 1024 * 1024),
        max_artifact_bytes_per_run: NonZeroUsize = nonzero(64 * 1024 * 1024),
        /// JSON-pointer segments of any projected path or patch.
        max_state_depth: NonZeroUsize = nonzero(32),
        max_concurrent_runs: NonZeroUsize = nonzero(1024),
        /// Open client connections; beyond it new connections are closed at once.
        max_connections: NonZeroUsize = nonzero(4096),
    }
}

bounds! {
    /// `timeouts`, in milliseconds as written ([`Millis`]), each read as a `Duration`; like
    /// [`Limits`], a `0` is refused as the file is read.
    pub struct Timeouts with accessors {
        /// Opening a connection to an upstream.
        connect: Millis = Millis::new(5_000),
        /// A client's request head; also how long an idle keep-alive connection is kept.
        header_read: Millis = Millis::new(10_000),
        /// A client's request body.
        body_read: Millis = Millis::new(30_000),
        /// A client that accepts no bytes for this long is cut and its run ended.
        client_write: Millis = Millis::new(30_000),
        /// Every unary upstream call (card, GetTask, CancelTask, ListTasks) and the response
        /// head of a streaming one.
        upstream_call: Millis = Millis::new(30_000),
        /// The wait for a run's first upstream event.
        first_event: Millis = Millis::new(60_000),
        /// The wait between two upstream events of a run.
        idle: Millis = Millis::new(300_000),
        /// A whole run.
        run: Millis = Millis::new(3_600_000),
        /// How long open connections may finish at shutdown.
        shutdown_drain: Millis = Millis::new(20_000),
    }
}

/// `listen` when neither the flag, `GATEWAY_LISTEN` nor the file sets it.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// The listen address to use: the flag (or `GATEWAY_LISTEN`), then the file's `listen`, then
/// [`DEFAULT_LISTEN`]. Serving and `--healthcheck` both ask this.
pub fn listen_or_default(flag: Option<String>, file: Option<String>) -> String {
    flag.or(file).unwrap_or_else(|| DEFAULT_LISTEN.into())
}

/// `binding_ttl_s` when not set: 30 days.
pub const DEFAULT_BINDING_TTL_S: u64 = 30 * 24 * 3600;

/// One validated upstream agent.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    pub name: String,
    /// The configured URL: base URL or card URL.
    pub url: Url,
    pub context_ids: ContextIds,
    pub cancel_on_disconnect: bool,
    pub headers: HeaderMap,
    pub visibility: Visibility,
    /// The header that carries the caller identity upstream (`forward_identity`), if any.
    pub forward_identity: Option<HeaderName>,
    /// Cues forwarded by default (`forward`).
    pub forward: Vec<ForwardCue>,
    /// `force_extensions`.
    pub force_extensions: bool,
    /// `subagents`.
    pub subagents: Subagents,
    /// `subagent_tools`: tool names that are other agents.
    pub subagent_tools: Vec<String>,
    /// `binding`, `protocol` and `tenant`: what the card's selection must respect.
    pub pins: Pins,
    /// The `headers` given as `file:` references: read again when the file changes (their
    /// values at start are in `headers`).
    pub header_files: Vec<(HeaderName, std::path::PathBuf)>,
    /// `tls`, parsed (defaults: the OS store and the built-in roots, no client certificate).
    pub tls: crate::a2a::tls::TlsTrust,
    /// `credentials`, parsed.
    pub credentials: Option<upstream::UpstreamCredentials>,
    /// `push`.
    pub push: PushChoice,
}

impl AgentSettings {
    /// An agent at `url` with every setting at its default ([`AgentConfig::new`]; the
    /// built-in demo agent). `name` must be a valid agent name.
    pub fn plain(name: String, url: Url) -> Self {
        let config = AgentConfig::new(&name, url.as_str());
        agent_settings(0, &config, false).expect("a valid name and an http(s) URL")
    }
}

/// The validated configuration the gateway runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Every address the listen address resolved to (at least one; [`listen_addresses`]).
    pub listen: Vec<SocketAddr>,
    pub binding_store: StoreConfig,
    /// How long a Redis binding lives after its last use.
    pub binding_ttl: Duration,
    /// Exact origins (`scheme://host[:port]`) allowed cross-origin access.
    pub cors_origins: Vec<reqwest::header::HeaderValue>,
    pub agents: Vec<AgentSettings>,
    pub limits: Limits,
    pub timeouts: Timeouts,
    pub demo: bool,
    /// Who may call: API keys and JWT, or nobody checked (one anonymous caller).
    pub(crate) auth: Arc<inbound::AuthSettings>,
    pub rate_limits: Option<RateLimits>,
    /// The OTLP/HTTP traces endpoint (`<base>/v1/traces`), if traces are on.
    pub otlp_traces: Option<Url>,
    pub metrics_public: bool,
    /// Where the CopilotKit runtime routes are mounted (no trailing `/`); `None`: off.
    pub copilotkit_base_path: Option<String>,
    /// The agent answering as [`COPILOTKIT_DEFAULT_AGENT`] under the base path, if any.
    pub copilotkit_default_agent: Option<String>,
    /// `readiness` (docs/operations.md#readiness).
    pub readiness: Readiness,
    /// `push`, validated.
    pub push: PushSettings,
    /// `inbox`.
    pub inbox: InboxConfig,
}

/// What the command line and environment say (applied over the file).
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub listen: Option<String>,
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub otlp_endpoint: Option<String>,
    pub binding_store: Option<String>,
    /// `--cors-origin` values, added to the file's `cors_origins`.
    pub cors_origins: Vec<String>,
    /// `NAME=URL` pairs.
    pub agents: Vec<String>,
    pub demo: bool,
    /// `--api-key NAME=REF` values, added to the file's `auth.api_keys`.
    pub api_keys: Vec<Secret>,
    /// `--insecure-no-auth`.
    pub insecure_no_auth: bool,
}

/// A configuration problem, naming the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ConfigError {
    pub key: String,
    pub message: String,
}

/// Every problem of a configuration (at least one), in the order they were found; shown
/// one per line. A slice of [`ConfigError`]s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(Vec<ConfigError>);

impl std::ops::Deref for ConfigErrors {
    type Target = [ConfigError];
    fn deref(&self) -> &[ConfigError] {
        &self.0
    }
}

impl std::fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> Self {
        Self(vec![e])
    }
}

/// The problems found so far: a check records its problem and validation goes on.
#[derive(Debug, Default)]
pub(crate) struct Problems(Vec<ConfigError>);

impl Problems {
    /// `checked`'s value, or `None` with its problems recorded.
    pub(crate) fn take<T>(&mut self, checked: Result<T, impl Into<ConfigErrors>>) -> Option<T> {
        match checked {
            Ok(v) => Some(v),
            Err(e) => {
                self.0.extend(e.into().0);
                None
            }
        }
    }

    pub(crate) fn push(&mut self, e: ConfigError) {
        self.0.push(e);
    }

    /// `Ok` when nothing was recorded.
    pub(crate) fn finish(self) -> Result<(), ConfigErrors> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(ConfigErrors(self.0))
        }
    }
}

impl From<Problems> for ConfigErrors {
    fn from(p: Problems) -> Self {
        Self(p.0)
    }
}

pub(crate) fn err(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.into(),
        message: message.into(),
    }
}

/// Reads a config file; `.toml` files are TOML, everything else YAML.
pub fn read_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| err(path.display().to_string(), format!("cannot read: {e}")))?;
    let is_toml = path.extension().is_some_and(|e| e == "toml");
    if is_toml {
        toml::from_str(&text).map_err(|e| err(path.display().to_string(), e.to_string()))
    } else {
        serde_yaml_ng::from_str::<Option<FileConfig>>(&text)
            .map(Option::unwrap_or_default)
            .map_err(|e| err(path.display().to_string(), e.to_string()))
    }
}

/// Agent names are path segments: letters, digits, `-`, `_`, `.`.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn parse_url(key: &str, raw: &str) -> Result<Url, ConfigError> {
    let url = Url::parse(raw).map_err(|e| err(key, format!("{raw:?} is not a URL: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(err(
            key,
            format!("{raw:?} must be an http(s) URL with a host"),
        ));
    }
    Ok(url)
}

/// Resolves a value reference: `env:NAME`, `file:/path` (trimmed) or a literal.
pub(crate) fn resolve_reference(key: &str, raw: &str) -> Result<String, ConfigError> {
    if let Some(var) = raw.strip_prefix("env:") {
        std::env::var(var).map_err(|_| err(key, format!("environment variable {var} is not set")))
    } else if let Some(path) = raw.strip_prefix("file:") {
        std::fs::read_to_string(path)
            .map(|s| s.trim().to_owned())
            .map_err(|e| err(key, format!("cannot read {path}: {e}")))
    } else {
        Ok(raw.to_owned())
    }
}

/// One agent, validated; `jwt_inbound`: whether inbound auth has JWTs (some credentials
/// need them).
fn agent_settings(
    i: usize,
    a: &AgentConfig,
    jwt_inbound: bool,
) -> Result<AgentSettings, ConfigErrors> {
    let key = format!("agents[{i}]");
    let mut problems = Problems::default();
    if !valid_name(&a.name) {
        problems.push(err(
            format!("{key}.name"),
            format!("{:?} must be 1-64 letters, digits, '-', '_' or '.'", a.name),
        ));
    }
    let url = problems.take(parse_url(&format!("{key}.url"), &a.url));
    let mut headers = HeaderMap::new();
    let mut header_files = Vec::new();
    for (name, reference) in &a.headers {
        let hkey = format!("{key}.headers.{name}");
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| err(&hkey, "not a valid header name"))
            .and_then(|hname| {
                let value = resolve_reference(&hkey, reference)?;
                let hvalue = HeaderValue::from_str(&value)
                    .map_err(|_| err(&hkey, "value is not a valid header value"))?;
                Ok((hname, hvalue))
            });
        if let Some((hname, hvalue)) = problems.take(header) {
            if let Some(path) = reference.strip_prefix("file:") {
                header_files.push((hname.clone(), path.into()));
            }
            headers.insert(hname, hvalue);
        }
    }
    let forward_identity = match &a.forward_identity {
        None => None,
        Some(name) => problems.take(identity_header(
            &format!("{key}.forward_identity"),
            name,
            &headers,
        )),
    };
    let binding = a.binding.pinned();
    if let Some(b) = binding.filter(|b| !card::speaks(*b)) {
        problems.push(err(
            format!("{key}.binding"),
            format!(
                "the gateway does not speak {} yet (it speaks {})",
                b.as_str(),
                card::spoken()
            ),
        ));
    }
    // A tenant is an HTTP+JSON path segment: `.` and `..` cannot be one.
    if a.tenant
        .as_deref()
        .is_some_and(|t| t.bytes().all(|b| b == b'.'))
    {
        problems.push(err(
            format!("{key}.tenant"),
            "must not be empty or only dots",
        ));
    }
    let tls = a.tls.as_ref().map_or_else(Default::default, |tls| {
        upstream::tls_settings(&key, tls, &mut problems)
    });
    let credentials = a
        .credentials
        .as_ref()
        .and_then(|c| upstream::credentials_settings(&key, c, jwt_inbound, &mut problems));
    subagent_tools(
        &format!("{key}.subagent_tools"),
        &a.subagent_tools,
        &mut problems,
    );
    if credentials.is_some() && headers.contains_key(reqwest::header::AUTHORIZATION) {
        problems.push(err(
            format!("{key}.credentials"),
            "headers already set Authorization: use one or the other",
        ));
    }
    let Some(url) = url else {
        return Err(problems.into());
    };
    problems.finish()?;
    Ok(AgentSettings {
        name: a.name.clone(),
        url,
        context_ids: a.context_ids,
        cancel_on_disconnect: a.cancel_on_disconnect,
        headers,
        visibility: a.visibility,
        forward_identity,
        forward: a.forward.clone(),
        force_extensions: a.force_extensions,
        subagents: a.subagents,
        subagent_tools: a.subagent_tools.clone(),
        pins: Pins {
            version: a.protocol.pinned(),
            binding,
            tenant: a.tenant.clone(),
        },
        header_files,
        tls,
        credentials,
        push: a.push,
    })
}

/// `subagent_tools`: at most [`MAX_SUBAGENT_TOOLS`] distinct names, each 1 to 128 bytes with
/// no whitespace or control character (a tool name as a model calls it).
fn subagent_tools(key: &str, names: &[String], problems: &mut Problems) {
    if names.len() > MAX_SUBAGENT_TOOLS {
        problems.push(err(key, format!("at most {MAX_SUBAGENT_TOOLS} names")));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, name) in names.iter().enumerate() {
        let valid = !name.is_empty()
            && name.len() <= MAX_SUBAGENT_TOOL_BYTES
            && !name.chars().any(|c| c.is_whitespace() || c.is_control());
        if !valid {
            problems.push(err(
                format!("{key}[{i}]"),
                format!("{name:?} must be 1-{MAX_SUBAGENT_TOOL_BYTES} bytes without whitespace"),
            ));
        } else if !seen.insert(name.as_str()) {
            problems.push(err(
                format!("{key}[{i}]"),
                format!("{name:?} is listed twice"),
            ));
        }
    }
}

/// `forward_identity`: a valid header name that neither the gateway
/// ([`crate::a2a::client::owned_headers`]) nor `headers` sets, and not `Authorization` (the
/// agent's credential, set with `headers`).
fn identity_header(key: &str, name: &str, headers: &HeaderMap) -> Result<HeaderName, ConfigError> {
    let hname = HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| err(key, format!("{name:?} is not a valid header name")))?;
    if hname == reqwest::header::AUTHORIZATION {
        return Err(err(
            key,
            format!("{name:?} carries the agent's credential (headers), not the caller identity"),
        ));
    }
    if crate::a2a::client::owned_headers().any(|owned| owned == hname) {
        return Err(err(
            key,
            format!("{name:?} is set by the gateway and cannot carry the caller identity"),
        ));
    }
    if headers.contains_key(&hname) {
        return Err(err(
            key,
            format!("{name:?} is already set by this agent's headers"),
        ));
    }
    Ok(hname)
}

/// An exact browser origin: `http(s)://host[:port]`, no path.
fn parse_origin(raw: &str) -> Result<reqwest::header::HeaderValue, ConfigError> {
    let bad = || {
        err(
            "cors_origins",
            format!("{raw:?} must be an origin like https://app.example"),
        )
    };
    let url = Url::parse(raw).map_err(|_| bad())?;
    let bare = matches!(url.scheme(), "http" | "https")
        && url.host_str().is_some()
        && url.path() == "/"
        && url.query().is_none()
        && url.fragment().is_none();
    if !bare {
        return Err(bad());
    }
    let origin = url.origin().ascii_serialization();
    reqwest::header::HeaderValue::from_str(&origin).map_err(|_| bad())
}

/// The addresses a listen address `HOST:PORT` stands for: an IP address as it is, a host
/// name (`localhost:8080`) as the system resolves it, every address once, in its order.
/// The gateway listens on each of them.
pub fn listen_addresses(raw: &str) -> Result<Vec<SocketAddr>, ConfigError> {
    if let Ok(addr) = raw.parse::<SocketAddr>() {
        return Ok(vec![addr]);
    }
    let bad = |why: &str| err("listen", format!("{raw:?} {why}"));
    let Some((host, port)) = raw.rsplit_once(':') else {
        return Err(bad("is not HOST:PORT"));
    };
    let port: u16 = port.parse().map_err(|_| bad("is not HOST:PORT"))?;
    if host.is_empty() || host.contains(':') || host.starts_with('[') {
        return Err(bad("is not HOST:PORT"));
    }
    let resolved = (host, port)
        .to_socket_addrs()
        .map_err(|e| bad(&format!("does not resolve: {e}")))?;
    let mut addrs: Vec<SocketAddr> = Vec::new();
    for addr in resolved {
        if !addrs.contains(&addr) {
            addrs.push(addr);
        }
    }
    if addrs.is_empty() {
        return Err(bad("resolves to no address"));
    }
    Ok(addrs)
}

/// Validates a file config with overrides into runtime settings, or names every problem.
pub fn settings(file: FileConfig, over: Overrides) -> Result<Settings, ConfigErrors> {
    let mut problems = Problems::default();
    let listen_raw = listen_or_default(over.listen, file.listen);
    let listen = problems.take(listen_addresses(&listen_raw));
    // The flag (or GATEWAY_BINDING_STORE) takes a URL and replaces the file's store.
    let binding_store = problems.take(match (over.binding_store, &file.binding_store) {
        (Some(url), _) => store::parse_url_form(&url),
        (None, Some(store::StoreFileConfig::Url(url))) => store::parse_url_form(url),
        (None, Some(store::StoreFileConfig::Map(map))) => {
            store::parse_map(map).map(|r| StoreConfig::Redis(Box::new(r)))
        }
        (None, None) => Ok(StoreConfig::Memory),
    });
    let mut agents = Vec::new();
    let jwt_inbound = file.auth.jwt.is_some();
    for (i, a) in file.agents.iter().enumerate() {
        agents.extend(problems.take(agent_settings(i, a, jwt_inbound)));
    }
    for raw in &over.agents {
        let Some((name, url)) = raw.split_once('=') else {
            problems.push(err("--agent", format!("{raw:?} must be NAME=URL")));
            continue;
        };
        let cfg = AgentConfig::new(name, url);
        // A flag replaces a file agent of the same name.
        let parsed = agent_settings(agents.len(), &cfg, jwt_inbound).map_err(|errors| {
            let flagged = errors.iter().map(|e| err("--agent", e.message.clone()));
            ConfigErrors(flagged.collect())
        });
        if let Some(parsed) = problems.take(parsed) {
            agents.retain(|a| a.name != parsed.name);
            agents.push(parsed);
        }
    }
    let mut seen = std::collections::HashSet::new();
    for a in &agents {
        if !seen.insert(a.name.as_str()) {
            problems.push(err(
                "agents",
                format!("agent name {:?} is used twice", a.name),
            ));
        }
        if over.demo && a.name == crate::demo::AGENT_NAME {
            problems.push(err(
                "agents",
                format!("the name {:?} is taken by --demo", crate::demo::AGENT_NAME),
            ));
        }
    }
    if file.agents.is_empty() && over.agents.is_empty() && !over.demo {
        problems.push(err(
            "agents",
            "no agent configured: use --agent NAME=URL, a config file, or --demo",
        ));
    }
    let mut cors_origins = Vec::new();
    for raw in file.cors_origins.iter().chain(&over.cors_origins) {
        cors_origins.extend(problems.take(parse_origin(raw)));
    }
    let auth = problems.take(inbound::parse(&file.auth, &over.api_keys));
    // docs/design.md#11-security: without inbound auth, loopback only unless explicitly waived.
    let waived = file.insecure_no_auth || over.insecure_no_auth;
    if let (Some(listen), Some(auth)) = (&listen, &auth) {
        let open = listen.iter().find(|a| !a.ip().is_loopback());
        if let Some(open) = open.filter(|_| !(auth.is_configured() || waived)) {
            problems.push(err(
                "listen",
                format!(
                    "{open} is not a loopback address and no inbound auth is configured: \
                     configure auth (auth.api_keys, auth.jwt or --api-key), or set \
                     insecure_no_auth: true (--insecure-no-auth) if something in front \
                     authenticates callers"
                ),
            ));
        }
    }
    let rate_limits = problems.take(rate_limits(file.rate_limits));
    let otlp_traces = problems.take(otlp_traces(
        file.telemetry.otlp_endpoint,
        over.otlp_endpoint,
    ));
    let copilotkit_base_path = problems.take(copilotkit_base_path(&file.copilotkit.base_path));
    let push = problems.take(push_settings(&file.push));
    let mut agent_names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
    if over.demo {
        agent_names.push(crate::demo::AGENT_NAME);
    }
    let copilotkit_default_agent = problems.take(copilotkit_default_agent(
        file.copilotkit.default_agent.as_deref(),
        &agent_names,
    ));
    // A `None` above recorded its problem.
    let (
        Some(listen),
        Some(binding_store),
        Some(auth),
        Some(rate_limits),
        Some(otlp_traces),
        Some(copilotkit_base_path),
        Some(copilotkit_default_agent),
        Some(push),
    ) = (
        listen,
        binding_store,
        auth,
        rate_limits,
        otlp_traces,
        copilotkit_base_path,
        copilotkit_default_agent,
        push,
    )
    else {
        return Err(problems.into());
    };
    problems.finish()?;
    Ok(Settings {
        listen,
        binding_store,
        binding_ttl: Duration::from_secs(
            file.binding_ttl_s
                .map_or(DEFAULT_BINDING_TTL_S, NonZeroU64::get),
        ),
        cors_origins,
        agents,
        limits: file.limits,
        timeouts: file.timeouts,
        demo: over.demo,
        auth: Arc::new(auth),
        rate_limits,
        otlp_traces,
        metrics_public: file.metrics_public,
        copilotkit_base_path,
        copilotkit_default_agent,
        readiness: file.readiness,
        push,
        inbox: file.inbox,
    })
}

/// The agent id a CopilotKit app asks for when it names none (`useAgent()` without an id;
/// docs/design.md#3-http-surface).
pub const COPILOTKIT_DEFAULT_AGENT: &str = "default";

/// `copilotkit.default_agent`: the configured agent that answers as `default`, or, unset,
/// the only agent when there is one. An agent named `default` answers as itself: naming
/// another one then is an error.
fn copilotkit_default_agent(
    configured: Option<&str>,
    agents: &[&str],
) -> Result<Option<String>, ConfigError> {
    let refused = |why: String| Err(err("copilotkit.default_agent", why));
    if agents.contains(&COPILOTKIT_DEFAULT_AGENT) {
        return match configured {
            Some(name) if name != COPILOTKIT_DEFAULT_AGENT => refused(format!(
                "an agent is named {COPILOTKIT_DEFAULT_AGENT:?} and answers as it: {name:?} cannot"
            )),
            _ => Ok(None),
        };
    }
    match (configured, agents) {
        (Some(name), _) if agents.contains(&name) => Ok(Some(name.to_owned())),
        (Some(name), _) => refused(format!(
            "{name:?} is not a configured agent (agents: {})",
            agents.join(", ")
        )),
        (None, [only]) => Ok(Some((*only).to_owned())),
        (None, _) => Ok(None),
    }
}

/// `copilotkit.base_path`: `""` (off) or an absolute path of plain segments, not `/`.
fn copilotkit_base_path(raw: &str) -> Result<Option<String>, ConfigError> {
    let path = raw.trim_end_matches('/');
    if raw.is_empty() {
        return Ok(None);
    }
    let plain = |seg: &str| {
        !seg.is_empty()
            && seg
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
    };
    // The gateway's own routes keep their first segment.
    let own = crate::http::routes::is_own(path);
    if !path.starts_with('/') || !path[1..].split('/').all(plain) || own {
        return Err(err(
            "copilotkit.base_path",
            format!("must be \"\" (off) or a path such as /copilotkit, not {raw:?}"),
        ));
    }
    Ok(Some(path.to_owned()))
}

fn rate_limits(r: Option<RateLimits>) -> Result<Option<RateLimits>, ConfigError> {
    match r {
        Some(r) if r.runs_per_minute == 0 => Err(err(
            "rate_limits.runs_per_minute",
            "must be at least 1 (leave rate_limits out for no limit)",
        )),
        Some(r) if r.burst == 0 => Err(err("rate_limits.burst", "must be at least 1")),
        other => Ok(other),
    }
}

/// `telemetry.otlp_endpoint`, else `OTEL_EXPORTER_OTLP_ENDPOINT`: the base URL, to which the
/// OTLP/HTTP traces path is added.
fn otlp_traces(file: Option<String>, env: Option<String>) -> Result<Option<Url>, ConfigError> {
    let Some(raw) = file.or(env).filter(|s| !s.trim().is_empty()) else {
        return Ok(None);
    };
    let key = "telemetry.otlp_endpoint";
    let base = parse_url(key, raw.trim())?;
    let path = format!("{}/v1/traces", base.path().trim_end_matches('/'));
    let mut url = base;
    url.set_path(&path);
    Ok(Some(url))
}

/// `push` (docs/design.md#the-live-inbox), as written: A2A push notifications received at
/// `POST /a2a/push/{agent}`. The two bounds' defaults are [`DEFAULT_PUSH_MAX_BODY_BYTES`] and
/// [`DEFAULT_PUSH_MAX_PER_SECOND`], written once.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PushConfig {
    pub enabled: bool,
    /// Where the agents reach this gateway (`<public_url>/a2a/push/<agent>`).
    pub public_url: Option<String>,
    /// A push body; 413 above.
    pub max_body_bytes: NonZeroUsize,
    /// Pushes per agent per second; 429 above.
    pub max_per_second: std::num::NonZeroU32,
}

/// `push.max_body_bytes` when not set: 1 MiB.
pub const DEFAULT_PUSH_MAX_BODY_BYTES: usize = 1024 * 1024;
/// `push.max_per_second` when not set.
pub const DEFAULT_PUSH_MAX_PER_SECOND: u32 = 50;

impl Default for PushConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            public_url: None,
            max_body_bytes: nonzero(DEFAULT_PUSH_MAX_BODY_BYTES),
            max_per_second: std::num::NonZeroU32::new(DEFAULT_PUSH_MAX_PER_SECOND)
                .expect("a positive default"),
        }
    }
}

/// `push`, validated: `public_url` is an http(s) URL (required when `enabled`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushSettings {
    pub enabled: bool,
    /// Without a trailing `/`.
    pub public_url: Option<Url>,
    pub max_body_bytes: usize,
    pub max_per_second: std::num::NonZeroU32,
}

impl Default for PushSettings {
    fn default() -> Self {
        push_settings(&PushConfig::default()).expect("the defaults are valid")
    }
}

fn push_settings(p: &PushConfig) -> Result<PushSettings, ConfigError> {
    let public_url = match p.public_url.as_deref() {
        None if p.enabled => {
            return Err(err(
                "push.public_url",
                "push.enabled needs the http(s) URL at which the agents reach this gateway",
            ))
        }
        None => None,
        Some(raw) => {
            let url = parse_url("push.public_url", raw)?;
            if url.query().is_some() || url.fragment().is_some() {
                return Err(err(
                    "push.public_url",
                    format!("{raw:?} must have no query or fragment"),
                ));
            }
            Some(url)
        }
    };
    Ok(PushSettings {
        enabled: p.enabled,
        public_url,
        max_body_bytes: p.max_body_bytes.get(),
        max_per_second: p.max_per_second,
    })
}

/// `agents[].push`: whether the gateway registers push notifications with this agent
/// (docs/design.md#the-live-inbox).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PushChoice {
    /// When `push.enabled` and the card declares `capabilities.pushNotifications`.
    #[default]
    Auto,
    /// Never: the agent is read by the shared poll.
    Off,
}

bounds! {
    /// `inbox` (docs/design.md#the-live-inbox): the shared poll of agents without push and
    /// the bounds of the inbox and its change feed; like [`Limits`], a `0` is refused as the
    /// file is read.
    pub struct InboxConfig {
        /// Seconds between two shared `ListTasks` polls of an agent without push.
        poll_s: NonZeroU64 = nonzero_u64(10),
        /// Conversations kept per agent (the oldest are dropped first).
        max_threads_per_agent: NonZeroUsize = nonzero(1000),
        /// Open `GET /threads/events` streams in all; 429 above.
        max_subscribers: NonZeroUsize = nonzero(1024),
        /// Open `GET /threads/events` streams per caller identity; 429 above.
        max_subscribers_per_caller: NonZeroUsize = nonzero(16),
        /// Changes queued for one subscriber; a subscriber that falls this far behind is
        /// dropped with `event: error`.
        subscriber_buffer: NonZeroUsize = nonzero(256),
        /// Recent changes kept for `Last-Event-ID` resumes.
        resume_window: NonZeroUsize = nonzero(1024),
    }
}

impl InboxConfig {
    /// `poll_s` as a `Duration`.
    pub fn poll(&self) -> Duration {
        Duration::from_secs(self.poll_s.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(s: &str) -> Result<FileConfig, String> {
        serde_yaml_ng::from_str(s).map_err(|e| e.to_string())
    }

    #[test]
    fn the_example_config_is_valid() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/gateway.example.yaml");
        std::env::set_var("REF_AUTHORIZATION", "Bearer secret");
        std::env::set_var("CONSOLE_KEY", "example-console-key");
        std::env::set_var("JWT_SECRET", "example-jwt-secret-of-at-least-32-bytes");
        let s = settings(read_file(&path).unwrap(), Overrides::default()).unwrap();
        assert!(s.auth.is_configured());
        assert_eq!(s.agents[0].name, "ref");
        assert_eq!(s.agents[0].headers["authorization"], "Bearer secret");
        assert_eq!(s.agents[0].visibility, Visibility::Owner);
        assert_eq!(s.agents[0].forward_identity.as_ref().unwrap(), "x-caller");
        assert_eq!(s.binding_ttl, Duration::from_secs(DEFAULT_BINDING_TTL_S));
        assert_eq!(s.readiness, Readiness { strict: false });
        assert_eq!(s.push, PushSettings::default());
        assert_eq!(s.inbox, InboxConfig::default());
    }

    /// `readiness` is off by default, `strict: true` turns it on, and an unknown key under it
    /// is refused by name.
    #[test]
    fn readiness_is_lenient_unless_strict() {
        let agents = "agents: [{name: a, url: 'http://x'}]\n";
        let lenient = settings(yaml(agents).unwrap(), Overrides::default()).unwrap();
        assert!(!lenient.readiness.strict);
        let strict = yaml(&format!("{agents}readiness: {{strict: true}}")).unwrap();
        let strict = settings(strict, Overrides::default()).unwrap();
        assert!(strict.readiness.strict);
        let unknown = yaml(&format!("{agents}readiness: {{strcit: true}}")).unwrap_err();
        assert!(unknown.contains("strcit"), "{unknown}");
    }

    /// `push.enabled` needs an http(s) `public_url`; the bounds are positive; an agent's
    /// `push` is `auto` or `off`; each problem names its key.
    #[test]
    fn push_needs_a_public_url_and_names_its_keys() {
        let base = "agents: [{name: a, url: 'http://x'}]\n";
        let check = |extra: &str| {
            let file = yaml(&format!("{base}{extra}")).map_err(|e| e.to_string())?;
            settings(file, Overrides::default()).map_err(|e| e.to_string())
        };
        let e = check("push: {enabled: true}").unwrap_err();
        assert!(e.contains("push.public_url"), "{e}");
        let e = check("push: {enabled: true, public_url: 'ftp://gw'}").unwrap_err();
        assert!(
            e.contains("push.public_url") && e.contains("http(s)"),
            "{e}"
        );
        let e = check("push: {max_per_second: 0}").unwrap_err();
        assert!(e.contains("max_per_second"), "{e}");
        let e = check("inbox: {poll_s: 0}").unwrap_err();
        assert!(e.contains("poll_s"), "{e}");
        let s =
            check("push: {enabled: true, public_url: 'https://gw.internal:8443/base'}").unwrap();
        assert!(s.push.enabled);
        assert_eq!(s.push.max_body_bytes, DEFAULT_PUSH_MAX_BODY_BYTES);
        assert_eq!(s.agents[0].push, PushChoice::Auto);
        let e = yaml("agents: [{name: a, url: 'http://x', push: sometimes}]").unwrap_err();
        assert!(e.contains("push"), "{e}");
        let off = yaml("agents: [{name: a, url: 'http://x', push: 'off'}]").unwrap();
        assert_eq!(off.agents[0].push, PushChoice::Off);
    }

    /// The nineteen bounds' one table ([`Limits`], [`Timeouts`]) is what the example config
    /// and docs/design.md's tables state, key for key and value for value, in order: a
    /// default changed in the code and not in both fails here (and the other way round).
    #[test]
    fn the_example_and_the_docs_state_the_default_bounds() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
        let sections = [
            ("limits", Limits::default().keys()),
            ("timeouts", Timeouts::default().keys()),
            ("inbox", InboxConfig::default().keys()),
        ];
        let example: serde_yaml_ng::Value =
            serde_yaml_ng::from_str(&read("config/gateway.example.yaml")).unwrap();
        let design = read("docs/design.md");
        for (section, defaults) in &sections {
            let written: Vec<(String, u64)> = example[section]
                .as_mapping()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.as_str().unwrap().to_owned(), v.as_u64().unwrap()))
                .collect();
            let expected: Vec<(String, u64)> =
                defaults.iter().map(|(k, v)| (k.to_string(), *v)).collect();
            assert_eq!(written, expected, "config/gateway.example.yaml: {section}");
            // The section's table: `### Limits` / `### Timeouts`, rows `| `key` | `value` |`.
            let heading = format!("### {}{}", section[..1].to_uppercase(), &section[1..]);
            let table = design
                .split(&heading)
                .nth(1)
                .unwrap()
                .split("\n#")
                .next()
                .unwrap();
            let rows: Vec<(String, u64)> = table
                .lines()
                .filter_map(|line| {
                    let mut cells = line.split('|').map(str::trim).skip(1);
                    let key = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
                    let value = cells.next()?.split('`').nth(1)?.parse().ok()?;
                    Some((key.to_owned(), value))
                })
                .collect();
            assert_eq!(rows, expected, "docs/design.md {heading}");
        }
        // Elsewhere a default is quoted beside its key: "`limits.max_id_bytes` (256)",
        // "`timeouts.body_read` (30 s)", "(8 MiB)". Each quote states the table's value.
        let defaults: BTreeMap<String, u64> = sections
            .iter()
            .flat_map(|(section, keys)| {
                keys.iter()
                    .map(move |(k, v)| (format!("{section}.{k}"), *v))
            })
            .collect();
        let mut docs = vec![("README.md".to_owned(), read("README.md"))];
        docs.push(("deploy/README.md".to_owned(), read("deploy/README.md")));
        for entry in std::fs::read_dir(root.join("docs")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "md") {
                let text = std::fs::read_to_string(&path).unwrap();
                docs.push((path.display().to_string(), text));
            }
        }
        let mut quoted = 0;
        for (doc, text) in &docs {
            for (key, rest) in text.split('`').zip(text.split('`').skip(1)) {
                let Some(default) = defaults.get(key) else {
                    continue;
                };
                let Some(value) = rest.strip_prefix(" (").and_then(|r| r.split(')').next()) else {
                    continue;
                };
                let (number, unit) = value.split_once(' ').unwrap_or((value, ""));
                let Ok(number) = number.parse::<u64>() else {
                    continue;
                };
                let written = match unit {
                    "" | "ms" => number,
                    "s" => number * 1000,
                    "KiB" => number * 1024,
                    "MiB" => number * 1024 * 1024,
                    _ => continue,
                };
                assert_eq!(written, *default, "{doc}: `{key}` ({value})");
                quoted += 1;
            }
        }
        assert!(quoted >= 10, "{quoted} quoted defaults found");
    }

    /// docs/design.md's key table has a row for every key of an agent (`agents[].<key>`) and
    /// for no other, as serde knows them (its refusal of an unknown key lists them all).
    #[test]
    fn the_design_key_table_names_every_agent_key() {
        let refusal = yaml("agents: [{name: a, url: 'http://x', unknown: 1}]").unwrap_err();
        let listed = refusal.split("expected one of ").nth(1).unwrap();
        let keys: std::collections::BTreeSet<&str> = listed
            .split(", ")
            .filter_map(|k| k.split('`').nth(1))
            .collect();
        assert!(keys.contains("credentials") && keys.len() > 10, "{refusal}");
        let design =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/design.md"))
                .unwrap();
        let rows: std::collections::BTreeSet<&str> = design
            .lines()
            .filter_map(|l| l.strip_prefix("| `agents[].")?.split('`').next())
            .collect();
        assert_eq!(rows, keys);
    }

    /// `subagents` defaults to `inline`; `subagent_tools` names are checked, each problem
    /// named by its index.
    #[test]
    fn subagent_keys_default_to_inline_and_names_are_checked() {
        let plain = settings(
            yaml("agents: [{name: a, url: 'http://x'}]").unwrap(),
            Overrides::default(),
        )
        .unwrap();
        assert_eq!(plain.agents[0].subagents, Subagents::Inline);
        assert!(plain.agents[0].subagent_tools.is_empty());
        let ok = yaml(
            "agents: [{name: a, url: 'http://x', subagents: attributed, \
             subagent_tools: [weather_agent]}]",
        )
        .unwrap();
        let ok = settings(ok, Overrides::default()).unwrap();
        assert_eq!(ok.agents[0].subagents, Subagents::Attributed);
        assert_eq!(ok.agents[0].subagent_tools, ["weather_agent"]);
        let bad =
            yaml("agents: [{name: a, url: 'http://x', subagent_tools: [w, '', 'two words', w]}]")
                .unwrap();
        let keys: Vec<String> = settings(bad, Overrides::default())
            .unwrap_err()
            .iter()
            .map(|e| e.key.clone())
            .collect();
        assert_eq!(
            keys,
            [
                "agents[0].subagent_tools[1]",
                "agents[0].subagent_tools[2]",
                "agents[0].subagent_tools[3]"
            ]
        );
        assert!(yaml("agents: [{name: a, url: 'http://x', subagents: nested}]").is_err());
    }

    #[test]
    fn unknown_keys_and_bad_values_name_the_key() {
        assert!(yaml("agents: []\nlisten_port: 1")
            .unwrap_err()
            .contains("listen_port"));
        let bad_url = yaml("agents: [{name: a, url: 'ftp://x'}]").unwrap();
        assert_eq!(
            settings(bad_url, Overrides::default()).unwrap_err()[0].key,
            "agents[0].url"
        );
        let bad_proto = yaml("agents: [{name: a, url: 'http://x', protocol: '2.0'}]");
        assert!(bad_proto.is_err());
        let zero = yaml("agents: [{name: a, url: 'http://x'}]\ntimeouts: {idle: 0}").unwrap_err();
        assert!(zero.contains("timeouts.idle"), "{zero}");
    }

    /// docs/design.md#9-reliability-and-limits: a zero limit or timeout is refused as the file
    /// is read, and the error names the key (YAML by its path, TOML by the line it quotes).
    #[test]
    fn a_zero_bound_is_refused_naming_the_key() {
        let limits = [
            "max_body_bytes",
            "max_state_bytes",
            "max_id_bytes",
            "max_event_bytes",
            "max_events_per_run",
            "max_text_bytes_per_run",
            "max_artifact_bytes_per_run",
            "max_state_depth",
            "max_concurrent_runs",
            "max_connections",
        ];
        let timeouts = [
            "connect",
            "header_read",
            "body_read",
            "client_write",
            "upstream_call",
            "first_event",
            "idle",
            "run",
            "shutdown_drain",
        ];
        let keys = limits.map(|k| ("limits", k)).into_iter();
        for (section, key) in keys.chain(timeouts.map(|k| ("timeouts", k))) {
            let one = yaml(&format!("{section}: {{{key}: 1}}")).unwrap();
            let parsed = settings(
                one,
                Overrides {
                    demo: true,
                    ..Default::default()
                },
            );
            assert!(parsed.is_ok(), "{section}.{key}: 1");
            let e = yaml(&format!("{section}:\n  {key}: 0\n")).unwrap_err();
            assert!(
                e.contains(&format!("{section}.{key}: invalid value")),
                "{e}"
            );
            let e = toml::from_str::<FileConfig>(&format!("[{section}]\n{key} = 0\n"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("{key} = 0")), "{e}");
            assert!(e.contains("expected a nonzero"), "{e}");
        }
    }

    /// `binding` and `tenant` (docs/bindings.md): pins the selection respects (every binding
    /// can be pinned); a tenant that cannot be a path segment is refused.
    #[test]
    fn binding_and_tenant_pin_the_selection() {
        let file = yaml(
            "agents: [{name: a, url: 'http://x', binding: http+json, tenant: acme, protocol: '1.0'}, \
             {name: b, url: 'http://x'}]",
        )
        .unwrap();
        let s = settings(file, Overrides::default()).unwrap();
        assert_eq!(
            s.agents[0].pins,
            Pins {
                version: Some(ProtocolVersion::V1),
                binding: Some(Binding::HttpJson),
                tenant: Some("acme".into()),
            }
        );
        assert_eq!(s.agents[1].pins, Pins::default());
        let grpc = yaml("agents: [{name: a, url: 'http://x', binding: grpc}]").unwrap();
        let s = settings(grpc, Overrides::default()).unwrap();
        assert_eq!(s.agents[0].pins.binding, Some(Binding::Grpc));
        let refused = yaml("agents: [{name: a, url: 'http://x', tenant: '..'}]").unwrap();
        let errors = settings(refused, Overrides::default()).unwrap_err();
        let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(keys, ["agents[0].tenant"]);
        assert!(yaml("agents: [{name: a, url: 'http://x', binding: soap}]").is_err());
    }

    #[test]
    fn flags_override_the_file() {
        let file = yaml("listen: 127.0.0.1:1\nagents: [{name: a, url: 'http://x'}]").unwrap();
        let s = settings(
            file,
            Overrides {
                listen: Some("127.0.0.1:2".into()),
                agents: vec!["a=http://y:9".into(), "b=http://z".into()],
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(s.listen, ["127.0.0.1:2".parse().unwrap()]);
        assert_eq!(s.agents.len(), 2);
        assert_eq!(
            s.agents
                .iter()
                .find(|a| a.name == "a")
                .unwrap()
                .url
                .as_str(),
            "http://y:9/"
        );
    }

    #[test]
    fn copilotkit_default_agent_is_the_named_or_the_only_agent() {
        let default = |agents: &str, configured: &str, demo: bool| {
            let file = yaml(&format!("agents: [{agents}]\ncopilotkit: {{{configured}}}")).unwrap();
            let over = Overrides {
                demo,
                ..Overrides::default()
            };
            settings(file, over).map(|s| s.copilotkit_default_agent)
        };
        let (a, ab) = (
            "{name: a, url: 'http://x'}",
            "{name: a, url: 'http://x'}, {name: b, url: 'http://y'}",
        );
        assert_eq!(default(a, "", false).unwrap().as_deref(), Some("a"));
        assert_eq!(default(ab, "", false).unwrap(), None);
        assert_eq!(
            default(ab, "default_agent: b", false).unwrap().as_deref(),
            Some("b")
        );
        assert_eq!(default("", "", true).unwrap().as_deref(), Some("demo"));
        assert_eq!(default(a, "", true).unwrap(), None, "a and the demo");
        // An agent named `default` answers as itself.
        let named_default = "{name: default, url: 'http://x'}, {name: b, url: 'http://y'}";
        assert_eq!(default(named_default, "", false).unwrap(), None);
        for (agents, bad) in [
            (ab, "default_agent: c"),
            (named_default, "default_agent: b"),
        ] {
            let e = default(agents, bad, false).unwrap_err();
            assert_eq!(e[0].key, "copilotkit.default_agent", "{bad}: {e:?}");
        }
    }

    #[test]
    fn copilotkit_base_path_is_a_plain_path_or_off() {
        let base = |raw: &str| {
            let file = yaml(&format!(
                "agents: [{{name: a, url: 'http://x'}}]\ncopilotkit: {{base_path: '{raw}'}}"
            ))
            .unwrap();
            settings(file, Overrides::default()).map(|s| s.copilotkit_base_path)
        };
        let file = yaml("agents: [{name: a, url: 'http://x'}]").unwrap();
        let default = settings(file, Overrides::default()).unwrap();
        assert_eq!(default.copilotkit_base_path.as_deref(), Some("/copilotkit"));
        assert_eq!(base("/api/ck/").unwrap().as_deref(), Some("/api/ck"));
        assert_eq!(base("").unwrap(), None);
        for bad in ["/", "ck", "/a//b", "/{x}", "/agents", "/threads/ck"] {
            assert_eq!(
                base(bad).unwrap_err()[0].key,
                "copilotkit.base_path",
                "{bad}"
            );
        }
    }

    #[test]
    fn cors_origins_are_exact_origins() {
        let ok = yaml("agents: [{name: a, url: 'http://x'}]\ncors_origins: ['https://app.example', 'http://127.0.0.1:3000']").unwrap();
        let s = settings(ok, Overrides::default()).unwrap();
        assert_eq!(s.cors_origins[0], "https://app.example");
        assert_eq!(s.cors_origins[1], "http://127.0.0.1:3000");
        for bad in ["*", "https://app.example/path", "ftp://x"] {
            let file = yaml(&format!(
                "agents: [{{name: a, url: 'http://x'}}]\ncors_origins: ['{bad}']"
            ))
            .unwrap();
            assert_eq!(
                settings(file, Overrides::default()).unwrap_err()[0].key,
                "cors_origins",
                "{bad}"
            );
        }
    }

    #[test]
    fn binding_stores_are_checked_without_connecting() {
        let store = |raw: &str| {
            let file = yaml(&format!(
                "binding_store: '{raw}'\nagents: [{{name: a, url: 'http://x'}}]"
            ))
            .unwrap();
            settings(file, Overrides::default())
        };
        // Nothing listens on these: validation does not connect.
        for ok in [
            "redis://127.0.0.1:1/0",
            "redis://redis.internal:6379",
            "redis://:secret@127.0.0.1:6379/3",
            "rediss://127.0.0.1:6379",
        ] {
            let s = store(ok).unwrap();
            assert!(matches!(s.binding_store, StoreConfig::Redis(_)), "{ok}");
            assert_eq!(s.binding_ttl, Duration::from_secs(DEFAULT_BINDING_TTL_S));
        }
        assert!(matches!(
            store("memory").unwrap().binding_store,
            StoreConfig::Memory
        ));
        for bad in [
            "postgres",
            "redis://",
            "redis://127.0.0.1:6379/x",
            "redis://127.0.0.1:6379/0?timeout=1",
            "http://127.0.0.1:6379",
        ] {
            assert_eq!(store(bad).unwrap_err()[0].key, "binding_store", "{bad}");
        }
        let shown = store("redis://:secret@127.0.0.1:6379/x").unwrap_err();
        assert!(!shown.to_string().contains("secret"), "{shown}");
        // The flag (and GATEWAY_BINDING_STORE) wins over the file.
        let file = yaml("binding_store: memory\nagents: [{name: a, url: 'http://x'}]").unwrap();
        let over = Overrides {
            binding_store: Some("redis://127.0.0.1:6379/1".into()),
            ..Default::default()
        };
        let s = settings(file, over).unwrap();
        assert!(matches!(s.binding_store, StoreConfig::Redis(r) if r.db == 1));
    }

    #[test]
    fn binding_ttl_is_positive() {
        let file = yaml("binding_ttl_s: 60\nagents: [{name: a, url: 'http://x'}]").unwrap();
        let s = settings(file, Overrides::default()).unwrap();
        assert_eq!(s.binding_ttl, Duration::from_secs(60));
        let zero = yaml("binding_ttl_s: 0\nagents: [{name: a, url: 'http://x'}]").unwrap_err();
        assert!(zero.contains("binding_ttl_s: invalid value"), "{zero}");
        assert!(yaml("binding_ttl_s: -1\nagents: []").is_err());
    }

    #[test]
    fn a_non_loopback_listen_needs_inbound_auth_or_the_waiver() {
        let agents = "agents: [{name: a, url: 'http://x'}]";
        let open = yaml(&format!("listen: 0.0.0.0:0\n{agents}")).unwrap();
        let e = settings(open.clone(), Overrides::default()).unwrap_err()[0].clone();
        assert_eq!(e.key, "listen");
        assert!(e.message.contains("insecure_no_auth"), "{e}");
        let waived = Overrides {
            insecure_no_auth: true,
            ..Default::default()
        };
        assert!(!settings(open.clone(), waived).unwrap().auth.is_configured());
        let keyed = Overrides {
            api_keys: vec!["console=literal-test-key".parse().unwrap()],
            ..Default::default()
        };
        assert!(settings(open, keyed).unwrap().auth.is_configured());
        for ok in [
            "listen: 0.0.0.0:0\ninsecure_no_auth: true",
            "listen: 0.0.0.0:0\nauth: {api_keys: [{name: a, key: key-0123456789abc}]}",
            "listen: '[::1]:0'",
            "listen: 127.0.0.2:0",
        ] {
            let file = yaml(&format!("{ok}\n{agents}")).unwrap();
            assert!(settings(file, Overrides::default()).is_ok(), "{ok}");
        }
        let flag = Overrides {
            listen: Some("[::]:0".into()),
            ..Default::default()
        };
        let file = yaml(agents).unwrap();
        assert_eq!(settings(file, flag).unwrap_err()[0].key, "listen");
    }

    #[test]
    fn visibility_and_forward_identity_are_checked() {
        let agent = |extra: &str| {
            let file = yaml(&format!(
                "agents: [{{name: a, url: 'http://x', headers: {{X-Api-Key: k}}{extra}}}]"
            ))?;
            settings(file, Overrides::default()).map_err(|e| e.to_string())
        };
        let plain = agent("").unwrap();
        assert_eq!(plain.agents[0].visibility, Visibility::Owner);
        assert!(plain.agents[0].forward_identity.is_none());
        let set = agent(", visibility: shared, forward_identity: X-Caller").unwrap();
        assert_eq!(set.agents[0].visibility, Visibility::Shared);
        assert_eq!(set.agents[0].forward_identity.as_ref().unwrap(), "x-caller");
        assert!(agent(", visibility: public").is_err());
        for bad in [
            "'X Caller'",
            "''",
            "Authorization",
            "content-type",
            "Accept",
            "A2A-Version",
            "x-api-key",
        ] {
            let e = agent(&format!(", forward_identity: {bad}")).unwrap_err();
            assert!(e.starts_with("agents[0].forward_identity"), "{bad}: {e}");
        }
    }

    /// `forward_identity` may name none of the headers the gateway sets on upstream calls,
    /// in any case: each would be overwritten or doubled by the client.
    #[test]
    fn forward_identity_refuses_every_owned_header() {
        let named = |name: &str| {
            let file = yaml(&format!(
                "agents: [{{name: a, url: 'http://x', forward_identity: '{name}'}}]"
            ))
            .unwrap();
            settings(file, Overrides::default()).map_err(|e| e.to_string())
        };
        let owned: Vec<String> = crate::a2a::client::owned_headers()
            .map(|h| h.as_str().to_owned())
            .collect();
        for listed in [
            "a2a-extensions",
            "x-a2a-extensions",
            "traceparent",
            "tracestate",
            "a2a-version",
            "content-type",
            "accept",
            "host",
        ] {
            assert!(
                owned.iter().any(|o| o == listed),
                "{listed} not owned: {owned:?}"
            );
        }
        for name in &owned {
            for spelled in [name.clone(), name.to_uppercase()] {
                let e = named(&spelled).unwrap_err();
                assert!(
                    e.contains("agents[0].forward_identity") && e.contains("set by the gateway"),
                    "{spelled}: {e}"
                );
            }
        }
        assert!(named("X-Caller").is_ok());
    }

    #[test]
    fn listen_addresses_resolve_host_names() {
        let v4: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(listen_addresses("127.0.0.1:8080").unwrap(), [v4]);
        assert_eq!(
            listen_addresses("[::1]:0").unwrap(),
            ["[::1]:0".parse::<SocketAddr>().unwrap()]
        );
        // `localhost` is loopback wherever it resolves (127.0.0.1, and ::1 where listed).
        let local = listen_addresses("localhost:8080").unwrap();
        assert!(local.contains(&v4), "{local:?}");
        assert!(local
            .iter()
            .all(|a| a.ip().is_loopback() && a.port() == 8080));
        for bad in [
            "localhost",
            "8080",
            ":8080",
            "localhost:http",
            "::1:8080",
            "[::1]",
        ] {
            let e = listen_addresses(bad).unwrap_err();
            assert_eq!(
                (e.key.as_str(), e.message.ends_with("is not HOST:PORT")),
                ("listen", true),
                "{bad}: {e}"
            );
        }
        let e = listen_addresses("no-such-host.invalid:8080").unwrap_err();
        assert!(e.message.contains("does not resolve"), "{e}");
        // A host name is a listen address like any other, loopback rule included.
        let agents = "agents: [{name: a, url: 'http://x'}]";
        let s = settings(
            yaml(&format!("listen: localhost:0\n{agents}")).unwrap(),
            Overrides::default(),
        )
        .unwrap();
        assert!(s.listen.iter().all(|a| a.ip().is_loopback()));
        // The default is DEFAULT_LISTEN.
        let s = settings(yaml(agents).unwrap(), Overrides::default()).unwrap();
        assert_eq!(s.listen, listen_addresses(DEFAULT_LISTEN).unwrap());
    }

    /// Validation goes on past a problem: every unset reference (and every other problem)
    /// is named at once, in the order they are checked.
    #[test]
    fn every_problem_is_named_at_once() {
        let file = yaml(
            "listen: nowhere\n\
             auth: {api_keys: [{name: k, key: env:CONFIG_TEST_UNSET_1}]}\n\
             agents:\n\
             - {name: a, url: 'http://x', headers: {A: env:CONFIG_TEST_UNSET_2, B: env:CONFIG_TEST_UNSET_3}}\n\
             - {name: b, url: 'ftp://x'}",
        )
        .unwrap();
        let over = Overrides {
            agents: vec!["c".into()],
            ..Default::default()
        };
        let errors = settings(file, over).unwrap_err();
        let keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "listen",
                "agents[0].headers.A",
                "agents[0].headers.B",
                "agents[1].url",
                "--agent",
                "auth.api_keys[0].key",
            ]
        );
        for var in [
            "CONFIG_TEST_UNSET_1",
            "CONFIG_TEST_UNSET_2",
            "CONFIG_TEST_UNSET_3",
        ] {
            assert!(
                errors
                    .to_string()
                    .contains(&format!("environment variable {var} is not set")),
                "{errors}"
            );
        }
        assert_eq!(errors.to_string().lines().count(), keys.len());
    }

    #[test]
    fn no_agents_is_an_error_unless_demo() {
        assert!(settings(FileConfig::default(), Overrides::default()).is_err());
        let demo = Overrides {
            demo: true,
            ..Default::default()
        };
        assert!(settings(FileConfig::default(), demo).is_ok());
    }
}
