//! Configured upstream agents, their agent cards, and readiness
//! (docs/design.md#2-running-it-and-configuration, docs/design.md#3-http-surface).
//!
//! Cards are read at start and refreshed in the background (every
//! [`REFRESH_INTERVAL`] while healthy, every [`RETRY_INTERVAL`] while not). A run on an
//! agent whose card was never read tries once more before failing with
//! `upstream_unavailable`: the gateway starts and serves even when an upstream is down.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Serialize;

use crate::a2a::call_headers::CallHeaders;
use crate::a2a::card::{self, AgentCard};
use crate::a2a::client::{CallContext, Client, Endpoint};
use crate::a2a::model::ProtocolVersion;
use crate::a2a::tls::AgentTls;
use crate::agui::capabilities::AgentCapabilities;
use crate::auth::Caller;
use crate::bridge::capabilities;
use crate::config::{AgentSettings, ForwardCue, Secret};
use crate::telemetry::RunTrace;
use crate::upstream::credentials::Credentials;

/// Card refresh period while an agent is ready.
pub(crate) const REFRESH_INTERVAL: Duration = Duration::from_secs(60);
/// Card retry period while an agent is not ready.
pub(crate) const RETRY_INTERVAL: Duration = Duration::from_secs(5);

/// What the gateway is configured to present to an agent, as the card's security model
/// weighs it.
fn presented(s: &AgentSettings) -> card::security::Presented {
    let authorization_header = s.headers.contains_key(reqwest::header::AUTHORIZATION);
    card::security::Presented {
        bearer: s.credentials.is_some() || authorization_header,
        authorization_header,
        headers: s.headers.keys().map(|h| h.as_str().to_owned()).collect(),
        client_certificate: s.tls.client_identity.is_some(),
    }
}

/// What a successfully read card resolves to: shared (`Arc`) by every run and request on
/// the agent, which call through its client with a context of their own ([`Upstream`]), so
/// neither the card nor the client is ever copied per run.
#[derive(Debug)]
pub struct Resolved {
    pub card: Arc<AgentCard>,
    pub client: Client,
    pub streaming: bool,
}

impl Resolved {
    /// The protocol version in use.
    pub fn version(&self) -> ProtocolVersion {
        self.client.version()
    }
}

/// An agent as the calls made for one caller reach it: the agent's resolution (shared) and
/// the context each of those calls carries ([`call_context`]). Reads as the resolution it
/// holds (`upstream.client`, `upstream.card`); each call is given `&upstream.ctx`.
#[derive(Debug)]
pub(crate) struct Upstream {
    pub resolved: Arc<Resolved>,
    pub ctx: CallContext,
}

impl std::ops::Deref for Upstream {
    type Target = Resolved;

    fn deref(&self) -> &Resolved {
        &self.resolved
    }
}

/// The caller identity header every upstream call made for `owner` carries
/// (`forward_identity`, docs/design.md#11-security): `None` when the agent forwards none, an
/// error when the identity cannot be a header value. The one home of that rule: runs, thread
/// reads, CopilotKit connect and stop all call upstream with a context from
/// [`call_context`], which uses this.
pub(crate) fn caller_identity(
    settings: &AgentSettings,
    owner: &str,
) -> Result<Option<(HeaderName, HeaderValue)>, String> {
    let Some(name) = &settings.forward_identity else {
        return Ok(None);
    };
    let value = HeaderValue::from_str(owner).map_err(|_| {
        format!("the caller identity is not a valid value of the {name} header (forward_identity)")
    })?;
    Ok(Some((name.clone(), value)))
}

/// The context of every call made to `agent` for the caller `owner`, whose inbound bearer
/// was `token` (a JWT caller's), within the run `trace` if traced: the caller identity
/// header ([`caller_identity`]) and the caller's credentials when the agent's depend on the
/// caller (`token_exchange`, `forward_caller_token`; docs/security.md#upstream-credentials;
/// else the agent's own, which its client carries). A caller without the token such
/// credentials need gets a context whose calls fail with `upstream_auth_failed` before
/// anything is sent. The one place runs, thread reads, CopilotKit connect and stop get
/// their context.
pub(crate) fn call_context(
    agent: &Agent,
    owner: &str,
    token: Option<&Secret>,
    trace: Option<RunTrace>,
) -> Result<CallContext, String> {
    let identity = caller_identity(&agent.settings, owner)?;
    let credentials = agent.credentials.for_caller(token);
    Ok(CallContext::new(trace, identity, credentials))
}

/// The extensions the gateway understands that `card` declares: asked for on every call
/// (kagent's HITL extension: with it kagent sends structured approvals instead of text).
fn understood_extensions(card: &AgentCard) -> Vec<String> {
    crate::bridge::dialect::UNDERSTOOD_EXTENSIONS
        .iter()
        .filter(|uri| card.declares_extension(uri))
        .map(|uri| (*uri).to_owned())
        .collect()
}

/// One configured agent.
#[derive(Debug)]
pub struct Agent {
    pub settings: AgentSettings,
    /// How the agent is reached: its reqwest client and the TLS of the connections its
    /// clients open themselves (docs/security.md#upstream-trust).
    transport: Transport,
    /// Its credentials at run time: token caches live here, across card reads.
    pub(crate) credentials: Credentials,
    resolved: RwLock<Option<Arc<Resolved>>>,
    last_error: RwLock<Option<String>>,
    /// Why the card read last offers nothing the gateway can call (for `/readyz`).
    unusable: RwLock<Option<String>>,
}

/// An agent's HTTP client and TLS: agents without `tls` settings share one.
#[derive(Debug, Clone)]
struct Transport {
    http: reqwest::Client,
    tls: AgentTls,
}

impl Transport {
    /// docs/design.md#9-reliability-and-limits: redirects are never followed (a redirect
    /// could carry the agent's credentials to another origin); a 3xx is an error like any
    /// non-2xx.
    fn new(tls: AgentTls, connect_timeout: Duration) -> Result<Self, String> {
        let builder = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .tcp_nodelay(true)
            .pool_max_idle_per_host(64);
        let http = tls
            .reqwest(builder)
            .build()
            .map_err(|e| format!("the upstream HTTP client: {e}"))?;
        Ok(Self { http, tls })
    }
}

/// Why a card read gave no resolution.
#[derive(Debug)]
struct Unready {
    /// For logs and `GET /agents` (`error`).
    detail: String,
    /// For `/readyz`, which anyone may read: only what the (public) card offered, when it
    /// was read and offers no interface the gateway speaks, why the TLS handshake was
    /// refused ([`AgentTls::explain`]: no URL, nothing the agent sent), or why no upstream
    /// credentials could be had (a token endpoint's status and error code, a file's path;
    /// no secret).
    unusable: Option<String>,
}

impl From<String> for Unready {
    fn from(detail: String) -> Self {
        Self {
            detail,
            unusable: None,
        }
    }
}

impl Agent {
    /// Whether what the agent is configured to present meets its card's security
    /// (docs/security.md#the-cards-security); `None` before the card was read or when it
    /// declares none.
    pub(crate) fn security(&self) -> Option<card::security::Verdict> {
        self.security_of(&self.resolved()?.card)
    }

    fn security_of(&self, card: &AgentCard) -> Option<card::security::Verdict> {
        let security = card.security();
        if security.schemes.is_empty() && security.requirements.is_empty() {
            return None;
        }
        Some(security.verdict(&presented(&self.settings)))
    }

    /// The current card resolution, if one succeeded.
    pub fn resolved(&self) -> Option<Arc<Resolved>> {
        self.resolved.read().ok()?.clone()
    }

    /// The summary served by `GET /agents`.
    pub(crate) fn summary(&self) -> AgentSummary {
        self.summary_of(self.resolved().as_deref())
    }

    fn summary_of(&self, resolved: Option<&Resolved>) -> AgentSummary {
        let mut summary = AgentSummary {
            binding: None,
            capabilities: None,
            card: None,
            credentials: None,
            description: None,
            error: None,
            name: self.settings.name.clone(),
            protocol_version: None,
            ready: resolved.is_some(),
            security: None,
            skills: None,
            streaming: None,
            tenant: None,
            url: None,
        };
        match resolved {
            Some(r) => {
                summary.binding = Some(r.client.binding().as_str());
                summary.description = Some(r.card.description.clone());
                summary.protocol_version = Some(r.version().as_str());
                summary.security = self.security_of(&r.card);
                summary.skills = Some(r.card.skills.clone());
                summary.streaming = Some(r.streaming);
                summary.tenant = r.client.tenant().map(str::to_owned);
                summary.url = Some(r.client.endpoint_url());
            }
            None => summary.error = self.last_error.read().ok().and_then(|e| e.clone()),
        }
        summary
    }

    /// The agent's AG-UI capabilities (docs/mapping.md#capabilities).
    pub(crate) fn capabilities(&self) -> AgentCapabilities {
        self.capabilities_of(self.resolved().as_deref())
    }

    fn capabilities_of(&self, resolved: Option<&Resolved>) -> AgentCapabilities {
        let served = capabilities::Served {
            streaming: resolved.is_some_and(|r| r.streaming),
            forwards_tools: self.settings.forward.contains(&ForwardCue::Tools),
            delegates: !self.settings.subagent_tools.is_empty(),
        };
        capabilities::of(
            &self.settings.name,
            resolved.map(|r| r.card.as_ref()),
            served,
        )
    }

    /// The detail served by `GET /agents/{name}`: the summary plus the card's identity, the
    /// endpoint in use and the agent's capabilities.
    pub(crate) fn detail(&self) -> AgentSummary {
        let resolved = self.resolved();
        AgentSummary {
            capabilities: Some(self.capabilities_of(resolved.as_deref())),
            card: resolved.as_deref().map(|r| CardIdentity {
                endpoint: r.client.endpoint_url(),
                name: r.card.name.clone(),
                version: r.card.version.clone(),
            }),
            credentials: self.credentials.kind(),
            ..self.summary_of(resolved.as_deref())
        }
    }
}

/// An agent as `GET /agents` lists it (docs/design.md#3-http-surface), and with `card` as
/// `GET /agents/{name}` shows it: what its card says once the card was read (`ready`), else
/// why it could not be read (`error`, once a read failed); never credentials or URL
/// userinfo. Fields in alphabetical order, the order the JSON maps used before this type
/// wrote them, so the bytes on the wire are unchanged.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AgentSummary {
    /// The A2A binding in use (`JSONRPC`, `HTTP+JSON`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binding: Option<&'static str>,
    /// `GET /agents/{name}` only: AG-UI's `AgentCapabilities`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<AgentCapabilities>,
    /// `GET /agents/{name}` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub card: Option<CardIdentity>,
    /// `GET /agents/{name}` only: the kind of credentials configured (`oauth2`, ...), never
    /// a value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credentials: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub name: String,
    /// `"1.0"` or `"0.3"`: the version spoken with the agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<&'static str>,
    pub ready: bool,
    /// The card's declared security and whether the configuration meets it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security: Option<card::security::Verdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skills: Option<Vec<card::Skill>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streaming: Option<bool>,
    /// The tenant sent on every call, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    /// The selected interface's URL, userinfo redacted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// The card's identity and the endpoint in use.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CardIdentity {
    /// The endpoint URL, userinfo redacted.
    pub endpoint: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// Cards larger than this are refused (a card is a few KiB).
const MAX_CARD_BYTES: usize = 1024 * 1024;

/// Reads a card body, refusing more than [`MAX_CARD_BYTES`].
async fn read_card(resp: reqwest::Response, timeout: Duration) -> Result<AgentCard, String> {
    let body = crate::a2a::client::read_limited(resp, MAX_CARD_BYTES, Some(timeout))
        .await
        .map_err(|e| e.to_string())?;
    serde_json::from_slice(&body).map_err(|e| format!("not an agent card: {e}"))
}

/// All configured agents.
#[derive(Debug)]
pub struct Registry {
    agents: BTreeMap<String, Arc<Agent>>,
    call_timeout: Duration,
    max_event_bytes: usize,
    metrics: Option<Arc<crate::metrics::Metrics>>,
    /// Clients read `http://` streams themselves, connecting within this bound.
    direct_streams: Option<Duration>,
}

impl Registry {
    /// A registry over `agents`; nothing is fetched yet. Each agent's HTTP client and TLS
    /// are built here (connecting within `connect_timeout`); `Err` names an agent whose TLS
    /// settings rustls refuses.
    pub fn new(
        agents: Vec<AgentSettings>,
        connect_timeout: Duration,
        call_timeout: Duration,
        max_event_bytes: usize,
    ) -> Result<Self, String> {
        let mut built = BTreeMap::new();
        for s in agents {
            // One TLS per agent, even with default settings: what a refused handshake
            // teaches (a client certificate asked for) is the agent's own.
            let tls = AgentTls::new(&s.tls).map_err(|e| format!("agent {}: {e}", s.name))?;
            let transport = Transport::new(tls, connect_timeout)?;
            let agent = Agent {
                // Token endpoints are called with the agent's client (its TLS, no redirects).
                credentials: Credentials::new(&s, transport.http.clone(), call_timeout),
                settings: s,
                transport,
                resolved: RwLock::new(None),
                last_error: RwLock::new(None),
                unusable: RwLock::new(None),
            };
            built.insert(agent.settings.name.clone(), Arc::new(agent));
        }
        Ok(Self {
            agents: built,
            call_timeout,
            max_event_bytes,
            metrics: None,
            direct_streams: None,
        })
    }

    /// Clients read their `http://` streams themselves ([`Client::with_direct_streams`]).
    pub(crate) fn with_direct_streams(mut self, connect_timeout: Duration) -> Self {
        self.direct_streams = Some(connect_timeout);
        self
    }

    /// Counts every upstream call in `metrics` (`agui_gateway_upstream_requests_total`).
    pub(crate) fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The agent called `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Agent>> {
        self.agents.get(name).cloned()
    }

    /// All agents, by name.
    pub fn all(&self) -> impl Iterator<Item = &Arc<Agent>> {
        self.agents.values()
    }

    /// The names of agents whose card has not been read.
    pub fn not_ready(&self) -> Vec<String> {
        self.agents
            .values()
            .filter(|a| a.resolved().is_none())
            .map(|a| a.settings.name.clone())
            .collect()
    }

    /// Why agents whose card was read cannot be called: what their card offered, by name
    /// (for `/readyz`).
    pub fn unusable(&self) -> BTreeMap<String, String> {
        self.agents
            .values()
            .filter(|a| a.resolved().is_none())
            .filter_map(|a| {
                let reason = a.unusable.read().ok()?.clone()?;
                Some((a.settings.name.clone(), reason))
            })
            .collect()
    }

    /// Agents whose card requires security that nothing configured for them satisfies, and
    /// why (the start-up warning; `/readyz` `warnings`).
    pub fn warnings(&self) -> BTreeMap<String, String> {
        self.agents
            .values()
            .filter_map(|a| {
                let unmet = a.security()?.unmet()?;
                Some((a.settings.name.clone(), unmet))
            })
            .collect()
    }

    /// The agent's resolution, reading the card now if it never was (boxed: every run
    /// resolves, almost always from what was read, and a card read's state is several KiB).
    pub async fn resolve(&self, agent: &Agent) -> Result<Arc<Resolved>, String> {
        match agent.resolved() {
            Some(r) => Ok(r),
            None => Box::pin(self.refresh(agent)).await,
        }
    }

    /// The agent as calls made on behalf of `caller` reach it (untraced; with the caller
    /// identity header and the caller's credentials, [`call_context`]).
    pub(crate) async fn resolve_as(
        &self,
        agent: &Agent,
        caller: &Caller,
    ) -> Result<Upstream, String> {
        let resolved = self
            .resolve(agent)
            .await
            .map_err(|e| format!("agent {} is not reachable: {e}", agent.settings.name))?;
        let owner = caller.id.as_str();
        let ctx = call_context(agent, owner, caller.token.as_ref(), None)?;
        Ok(Upstream { resolved, ctx })
    }

    /// Reads the agent's card and updates its resolution.
    pub async fn refresh(&self, agent: &Agent) -> Result<Arc<Resolved>, String> {
        let result = self.fetch(agent).await;
        if let Ok(mut slot) = agent.unusable.write() {
            *slot = result.as_ref().err().and_then(|e| e.unusable.clone());
        }
        let result = result.map_err(|e| e.detail);
        match &result {
            Ok(r) => {
                let before = agent.resolved();
                let changed = before.is_none_or(|b| {
                    b.client.endpoint_url() != r.client.endpoint_url()
                        || b.version() != r.version()
                        || b.client.binding() != r.client.binding()
                        || b.client.tenant() != r.client.tenant()
                        || b.streaming != r.streaming
                });
                if changed {
                    tracing::info!(agent = %agent.settings.name, endpoint = %r.client.endpoint_url(),
                        binding = r.client.binding().as_str(), version = r.version().as_str(),
                        streaming = r.streaming, "agent card read");
                    let unmet = agent.security_of(&r.card).and_then(|v| v.unmet());
                    if let Some(unmet) = unmet {
                        tracing::warn!(agent = %agent.settings.name, problem = %unmet,
                            "runs on this agent will likely be refused");
                    }
                }
                if let Ok(mut slot) = agent.resolved.write() {
                    *slot = Some(r.clone());
                }
                if let Ok(mut e) = agent.last_error.write() {
                    *e = None;
                }
            }
            Err(e) => {
                tracing::warn!(agent = %agent.settings.name, error = %e, "agent card not read");
                if let Ok(mut slot) = agent.last_error.write() {
                    *slot = Some(e.clone());
                }
            }
        }
        result
    }

    async fn fetch(&self, agent: &Agent) -> Result<Arc<Resolved>, Unready> {
        let s = &agent.settings;
        // The agent's credentials go with its card reads too (not a caller's: there is none);
        // a token endpoint that fails makes the agent unready, and says so in `/readyz`.
        let credentials = agent.credentials.for_agent();
        let mut errors = Vec::new();
        // A refused TLS handshake, by its reason: `/readyz` may name it (no URL, no text of
        // the agent's).
        let mut tls_refusal = None;
        for url in card::card_urls(&s.url) {
            let shown = crate::redact::url(&url);
            let resp = self
                .read_card_at(&url, agent, credentials.as_deref())
                .await?;
            let card: AgentCard = match resp {
                Ok(r) if r.status().is_success() => match read_card(r, self.call_timeout).await {
                    Ok(c) => c,
                    Err(e) => {
                        errors.push(format!("{shown}: {e}"));
                        continue;
                    }
                },
                Ok(r) => {
                    errors.push(format!("{shown}: HTTP {}", r.status()));
                    continue;
                }
                Err(e) => {
                    let refusal = agent.transport.tls.explain(&e);
                    let said = match &refusal {
                        Some(reason) => reason.clone(),
                        None => crate::a2a::client::describe(&e),
                    };
                    errors.push(format!("{shown}: {said}"));
                    tls_refusal = tls_refusal.or(refusal);
                    continue;
                }
            };
            // Card URLs must stay on the configured origin
            // (docs/design.md#9-reliability-and-limits); the configured URL
            // itself (or its directory, for a card URL) is the fallback endpoint.
            let fallback = if s.url.path().ends_with(".json") {
                s.url.join("/").unwrap_or_else(|_| s.url.clone())
            } else {
                s.url.clone()
            };
            let selection = card
                .select(&s.pins, &s.url, &fallback)
                .map_err(|reason| Unready {
                    detail: format!("{shown}: {reason}"),
                    unusable: Some(reason),
                })?;
            let client = self.client_for(agent, &card, selection);
            let (card, client) = self.extended(agent, card, client, &fallback).await;
            let streaming = card.streaming();
            return Ok(Arc::new(Resolved {
                card: Arc::new(card),
                client,
                streaming,
            }));
        }
        Err(Unready {
            detail: errors.join("; "),
            unusable: tls_refusal,
        })
    }

    /// The client of the interface `selection` of `agent`'s `card`.
    fn client_for(&self, agent: &Agent, card: &AgentCard, selection: card::Selection) -> Client {
        let endpoint = Endpoint {
            url: selection.url,
            version: selection.version,
            binding: selection.binding,
            tenant: selection.tenant,
            headers: agent.settings.headers.clone(),
        };
        let client = Client::new(
            agent.transport.http.clone(),
            endpoint,
            self.max_event_bytes,
            self.call_timeout,
        )
        .with_tls(agent.transport.tls.clone())
        .with_extensions(&understood_extensions(card));
        // Every call carries the agent's credentials (docs/security.md#upstream-credentials).
        let client = match agent.credentials.for_agent() {
            Some(source) => client.with_call_headers(source),
            None => client,
        };
        let client = match self.direct_streams {
            Some(connect_timeout) => client.with_direct_streams(connect_timeout),
            None => client,
        };
        match &self.metrics {
            Some(metrics) => {
                let (metrics, agent) = (metrics.clone(), agent.settings.name.clone());
                let binding = selection.binding;
                client.observed(crate::a2a::client::CallHook(Arc::new(move |method, ok| {
                    metrics.upstream_call(&agent, method, binding, ok)
                })))
            }
            None => client,
        }
    }

    /// The extended card in place of the public one, when the public card says there is
    /// one and the gateway presents the agent a credential of its own
    /// (docs/security.md#the-cards-security): its skills and interfaces are used. Read
    /// with `client` (the public card's selection); one that cannot be read or selects
    /// nothing the gateway speaks leaves the public card in use, with a warning.
    async fn extended(
        &self,
        agent: &Agent,
        card: AgentCard,
        client: Client,
        fallback: &url::Url,
    ) -> (AgentCard, Client) {
        let s = &agent.settings;
        let presents = presented(s);
        let agent_credential = s.credentials.as_ref().is_some_and(|c| !c.per_caller())
            || presents.authorization_header
            || presents.client_certificate;
        if !card.has_extended_card() || !agent_credential {
            return (card, client);
        }
        let extended = match client.get_extended_card(&CallContext::none()).await {
            Ok(extended) => extended,
            Err(e) => {
                tracing::warn!(agent = %s.name, error = %e, "the extended agent card was not read; using the public card");
                return (card, client);
            }
        };
        match extended.select(&s.pins, &s.url, fallback) {
            Ok(selection) => {
                let client = self.client_for(agent, &extended, selection);
                (extended, client)
            }
            Err(reason) => {
                tracing::warn!(agent = %s.name, reason = %reason, "the extended agent card offers no interface the gateway speaks; using the public card");
                (card, client)
            }
        }
    }

    /// The answer to a card read at `url`, with the agent's headers and `credentials`' (asked
    /// once; after a 401 the source is told and asked once more, like every call,
    /// docs/security.md#upstream-credentials). `Err`: no credentials could be had.
    async fn read_card_at(
        &self,
        url: &url::Url,
        agent: &Agent,
        credentials: Option<&dyn CallHeaders>,
    ) -> Result<reqwest::Result<reqwest::Response>, Unready> {
        let get = |extra: HeaderMap| {
            agent
                .transport
                .http
                .get(url.clone())
                .headers(agent.settings.headers.clone())
                .headers(extra)
                .timeout(self.call_timeout)
                .send()
        };
        let Some(source) = credentials else {
            return Ok(get(HeaderMap::new()).await);
        };
        let unready = |e: String| {
            let reason = format!("no upstream credentials: {e}");
            Unready {
                detail: reason.clone(),
                unusable: Some(reason),
            }
        };
        let sent = source.headers().await.map_err(unready)?;
        let resp = get(sent.clone()).await;
        if !matches!(&resp, Ok(r) if r.status() == reqwest::StatusCode::UNAUTHORIZED) {
            return Ok(resp);
        }
        source.refused(&sent);
        Ok(get(source.headers().await.map_err(unready)?).await)
    }

    /// Reads every card now, then keeps them fresh in the background.
    pub fn spawn_refresher(self: Arc<Self>) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                let mut all_ready = true;
                for agent in self.agents.values() {
                    all_ready &= self.refresh(agent).await.is_ok();
                }
                let wait = if all_ready {
                    REFRESH_INTERVAL
                } else {
                    RETRY_INTERVAL
                };
                tokio::time::sleep(wait).await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::client::ClientError;
    use crate::config::upstream::{UpstreamCredentials, ValueSource};
    use crate::ids::TaskId;
    use crate::upstream::credentials::test_idp;
    use serde_json::{json, Value};

    #[test]
    fn summaries_keep_the_json_of_before() {
        let agent = resolved_agent(card::Binding::JsonRpc, ProtocolVersion::V1, Some("acme"));
        *agent.resolved.write().unwrap() = None;
        // The detail adds the capabilities (docs/mapping.md#capabilities), checked there.
        let capabilities = serde_json::to_value(agent.capabilities()).unwrap();
        assert_eq!(
            serde_json::to_value(agent.detail()).unwrap(),
            json!({"capabilities": capabilities, "name": "a", "ready": false})
        );
        *agent.last_error.write().unwrap() = Some("refused".into());
        assert_eq!(
            serde_json::to_string(&agent.summary()).unwrap(),
            r#"{"error":"refused","name":"a","ready":false}"#
        );
        let agent = resolved_agent(card::Binding::JsonRpc, ProtocolVersion::V1, Some("acme"));
        let resolved = agent.resolved().unwrap();
        let card = &resolved.card;
        // As the JSON maps of before wrote it: keys sorted, no userinfo.
        let mut before = json!({"name": "a", "ready": true, "description": card.description,
            "protocolVersion": "1.0", "binding": "JSONRPC", "url": "http://127.0.0.1:9/rest",
            "tenant": "acme", "streaming": true, "skills": card.skills});
        assert_eq!(
            serde_json::to_string(&agent.summary()).unwrap(),
            before.to_string()
        );
        let mut identity = json!({"name": card.name, "endpoint": "http://127.0.0.1:9/rest"});
        if let Some(version) = &card.version {
            identity["version"] = json!(version);
        }
        before["card"] = identity;
        before["capabilities"] = serde_json::to_value(agent.capabilities()).unwrap();
        assert_eq!(serde_json::to_value(agent.detail()).unwrap(), before);
    }

    /// Every run resolves its agent, almost always from the card read before: that must
    /// not hold a card read's state (docs/performance.md, memory per open stream).
    #[test]
    fn resolving_holds_no_card_read() {
        let settings = crate::config::settings(
            Default::default(),
            crate::config::Overrides {
                agents: vec!["a=http://127.0.0.1:9/".into()],
                ..Default::default()
            },
        )
        .unwrap()
        .agents;
        let registry = Registry::new(settings, REFRESH_INTERVAL, REFRESH_INTERVAL, 1024).unwrap();
        let agent = registry.get("a").unwrap();
        let size = size_of_val(&registry.resolve(&agent));
        assert!(size <= 256, "{size} bytes");
    }

    /// An agent whose card resolved to `binding`, `version` and `tenant`.
    fn resolved_agent(
        binding: card::Binding,
        version: ProtocolVersion,
        tenant: Option<&str>,
    ) -> Agent {
        let settings = crate::config::settings(
            Default::default(),
            crate::config::Overrides {
                agents: vec!["a=http://127.0.0.1:9/".into()],
                ..Default::default()
            },
        )
        .unwrap()
        .agents
        .remove(0);
        let card: AgentCard =
            serde_json::from_str(include_str!("../fixtures/a2a/agent-card.json")).unwrap();
        let endpoint = Endpoint {
            url: "http://user:pw@127.0.0.1:9/rest".parse().unwrap(),
            version,
            binding,
            tenant: tenant.map(str::to_owned),
            headers: Default::default(),
        };
        let client = Client::new(reqwest::Client::new(), endpoint, 1024, REFRESH_INTERVAL);
        let tls = AgentTls::default_trust().clone();
        Agent {
            credentials: Credentials::new(&settings, reqwest::Client::new(), REFRESH_INTERVAL),
            settings,
            transport: Transport::new(tls, REFRESH_INTERVAL).unwrap(),
            resolved: RwLock::new(Some(Arc::new(Resolved {
                card: Arc::new(card),
                client,
                streaming: true,
            }))),
            last_error: RwLock::new(None),
            unusable: RwLock::new(None),
        }
    }

    /// `openapi/openapi.json`'s `Agent` names every member `GET /agents` and
    /// `GET /agents/{name}` answer with, and every binding the gateway speaks.
    #[test]
    fn the_openapi_agent_schema_keeps_up_with_the_answers() {
        let spec: Value = serde_json::from_str(include_str!("../openapi/openapi.json")).unwrap();
        let schema = &spec["components"]["schemas"]["Agent"];
        for (binding, version) in card::SPOKEN {
            let agent = resolved_agent(*binding, *version, Some("acme"));
            let detail = serde_json::to_value(agent.detail()).unwrap();
            assert_eq!(detail["binding"], binding.as_str());
            assert_eq!(detail["url"], "http://127.0.0.1:9/rest", "no userinfo");
            assert_eq!(detail["tenant"], "acme");
            for key in detail.as_object().unwrap().keys() {
                assert!(schema["properties"][key].is_object(), "{key} undocumented");
            }
            for key in detail["card"].as_object().unwrap().keys() {
                assert!(
                    schema["properties"]["card"]["properties"][key].is_object(),
                    "card.{key} undocumented"
                );
            }
            let bindings = schema["properties"]["binding"]["enum"].as_array().unwrap();
            assert!(bindings.contains(&json!(binding.as_str())), "{binding:?}");
        }
        let untenanted = resolved_agent(card::Binding::JsonRpc, ProtocolVersion::V1, None);
        let summary = serde_json::to_value(untenanted.summary()).unwrap();
        assert!(summary.get("tenant").is_none());
        // The kind of credentials, in the detail only, and never a value.
        let kinds = schema["properties"]["credentials"]["enum"]
            .as_array()
            .unwrap();
        let mut settings = untenanted.settings.clone();
        settings.credentials = Some(UpstreamCredentials::Bearer(ValueSource::Fixed(
            "bearer-value-never-shown".parse().unwrap(),
        )));
        let agent = Agent {
            credentials: Credentials::new(&settings, reqwest::Client::new(), REFRESH_INTERVAL),
            settings,
            ..untenanted
        };
        let detail = serde_json::to_value(agent.detail()).unwrap();
        assert_eq!(detail["credentials"], "bearer");
        assert!(kinds.contains(&detail["credentials"]));
        assert!(!detail.to_string().contains("bearer-value-never-shown"));
        assert!(serde_json::to_value(agent.summary())
            .unwrap()
            .get("credentials")
            .is_none());
    }

    /// An agent on 127.0.0.1 that takes only the bearer `accept` holds, and records the
    /// `Authorization` of every request.
    #[derive(Clone, Default)]
    struct Guarded {
        accept: Arc<std::sync::Mutex<String>>,
        seen: Arc<std::sync::Mutex<Vec<String>>>,
    }

    impl Guarded {
        async fn start(self) -> url::Url {
            use axum::http::{HeaderMap, StatusCode};
            use axum::response::IntoResponse;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let base = format!("http://{}/", listener.local_addr().unwrap());
            let card = json!({"name": "guarded", "description": "d", "version": "1",
                "supportedInterfaces": [{"url": base, "protocolBinding": "JSONRPC",
                    "protocolVersion": "1.0"}],
                "capabilities": {"streaming": true}, "skills": [],
                "defaultInputModes": [], "defaultOutputModes": []});
            let check = move |me: &Guarded, headers: &HeaderMap| {
                let sent = headers
                    .get("authorization")
                    .map(|v| v.to_str().unwrap().to_owned())
                    .unwrap_or_default();
                me.seen.lock().unwrap().push(sent.clone());
                sent == *me.accept.lock().unwrap()
            };
            let app = axum::Router::new()
                .route(
                    "/.well-known/agent-card.json",
                    axum::routing::get(
                        move |axum::extract::State(me): axum::extract::State<Guarded>,
                              headers: HeaderMap| async move {
                            if check(&me, &headers) {
                                axum::Json(card).into_response()
                            } else {
                                StatusCode::UNAUTHORIZED.into_response()
                            }
                        },
                    ),
                )
                .route(
                    "/",
                    axum::routing::post(
                        move |axum::extract::State(me): axum::extract::State<Guarded>,
                              headers: HeaderMap,
                              axum::Json(rpc): axum::Json<Value>| async move {
                            if !check(&me, &headers) {
                                return StatusCode::UNAUTHORIZED.into_response();
                            }
                            axum::Json(json!({"jsonrpc": "2.0", "id": rpc["id"],
                                "error": {"code": -32001, "message": "Task not found"}}))
                            .into_response()
                        },
                    ),
                )
                .with_state(self);
            tokio::spawn(async move { axum::serve(listener, app).await });
            base.parse().unwrap()
        }

        fn seen(&self) -> Vec<String> {
            self.seen.lock().unwrap().clone()
        }
    }

    fn registry_of(url: url::Url, credentials: UpstreamCredentials) -> (Registry, Arc<Agent>) {
        let mut settings = AgentSettings::plain("g".into(), url);
        settings.credentials = Some(credentials);
        let registry =
            Registry::new(vec![settings], REFRESH_INTERVAL, REFRESH_INTERVAL, 1 << 20).unwrap();
        let agent = registry.get("g").unwrap();
        (registry, agent)
    }

    fn oauth2(idp: &test_idp::Idp) -> UpstreamCredentials {
        UpstreamCredentials::OAuth2(idp.endpoint(test_idp::secret_auth("gw", "client-secret-x")))
    }

    #[tokio::test]
    async fn card_reads_and_calls_carry_the_agents_credentials_and_retry_once() {
        let idp = test_idp::Idp::start().await;
        let agent_side = Guarded::default();
        // The token the endpoint issues first is refused: the second one serves.
        *agent_side.accept.lock().unwrap() = "Bearer token-2".into();
        let url = agent_side.clone().start().await;
        let (registry, agent) = registry_of(url, oauth2(&idp));
        registry.refresh(&agent).await.unwrap();
        assert_eq!(agent_side.seen(), ["Bearer token-1", "Bearer token-2"]);
        assert_eq!(agent.detail().credentials, Some("oauth2"));
        // Every call of the resolved client carries the same token, fetched once.
        let client = &agent.resolved().unwrap().client;
        let none = CallContext::none();
        let e = client
            .get_task(&none, &TaskId::new("t"), None)
            .await
            .unwrap_err();
        assert!(e.is_task_not_found(), "{e}");
        assert_eq!(agent_side.seen()[2], "Bearer token-2");
        assert_eq!(idp.count(), 2);
    }

    #[tokio::test]
    async fn a_token_endpoint_outage_makes_the_agent_unready_and_says_why() {
        let idp = test_idp::Idp::start().await;
        idp.set(test_idp::Reply::Status(503, "client-secret-x".into()));
        let agent_side = Guarded::default();
        let url = agent_side.clone().start().await;
        let (registry, agent) = registry_of(url, oauth2(&idp));
        let e = registry.refresh(&agent).await.unwrap_err();
        let why = "no upstream credentials: the token endpoint refused the request (HTTP 503)";
        assert_eq!(e, why);
        assert_eq!(registry.unusable()["g"], why);
        assert!(
            agent_side.seen().is_empty(),
            "nothing sent without credentials"
        );
    }

    #[tokio::test]
    async fn calls_for_a_caller_carry_the_callers_token_or_fail_before_sending() {
        let agent_side = Guarded::default();
        *agent_side.accept.lock().unwrap() = "Bearer caller.jwt.token".into();
        let url = agent_side.clone().start().await;
        let (registry, agent) = registry_of(url, UpstreamCredentials::ForwardCallerToken);
        // The card read carries no caller's token: this agent's card is public.
        *agent_side.accept.lock().unwrap() = String::new();
        registry.refresh(&agent).await.unwrap();
        *agent_side.accept.lock().unwrap() = "Bearer caller.jwt.token".into();
        let jwt_caller = Caller {
            id: crate::ids::CallerId::new("alice"),
            scopes: vec![],
            token: Some("caller.jwt.token".parse().unwrap()),
        };
        let upstream = registry.resolve_as(&agent, &jwt_caller).await.unwrap();
        let e = upstream
            .client
            .get_task(&upstream.ctx, &TaskId::new("t"), None)
            .await
            .unwrap_err();
        assert!(e.is_task_not_found(), "{e}");
        let key_caller = Caller {
            token: None,
            ..jwt_caller
        };
        let seen = agent_side.seen().len();
        let upstream = registry.resolve_as(&agent, &key_caller).await.unwrap();
        let e = upstream
            .client
            .get_task(&upstream.ctx, &TaskId::new("t"), None)
            .await
            .unwrap_err();
        assert!(
            matches!(&e, ClientError::Credentials(m) if m.contains("needs the caller's JWT")),
            "{e}"
        );
        assert_eq!(agent_side.seen().len(), seen, "nothing sent");
        // The agent's own client carries no caller's token.
        let e = agent
            .resolved()
            .unwrap()
            .client
            .get_task(&CallContext::none(), &TaskId::new("t"), None)
            .await
            .unwrap_err();
        assert!(matches!(e, ClientError::Unauthorized(_)), "{e}");
    }

    #[test]
    fn declared_extensions_the_gateway_understands_are_asked_for() {
        let card: AgentCard = serde_json::from_value(json!({"name": "k",
            "capabilities": {"extensions": [{"uri": "https://kagent.dev/extensions/hitl/v1"},
                {"uri": "urn:other"}]}}))
        .unwrap();
        assert_eq!(
            understood_extensions(&card),
            ["https://kagent.dev/extensions/hitl/v1"]
        );
        let plain: AgentCard = serde_json::from_value(json!({"name": "p"})).unwrap();
        assert!(
            understood_extensions(&plain).is_empty(),
            "plain agents get no extension header"
        );
    }
}
