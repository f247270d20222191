//! An agent's credentials at run time (docs/security.md#upstream-credentials): the
//! [`CallHeaders`] sources the A2A client asks, once per call, for the headers that
//! authenticate the gateway (or the caller) to the agent.
//!
//! Built once per agent from its parsed settings ([`Credentials::new`]), so caches live as
//! long as the gateway, across card refreshes:
//! - the agent's source ([`Credentials::for_agent`]) carries `oauth2` client credentials
//!   (one token for every run, [`cache::TokenCell`]), a `bearer` (fixed, or a file read again
//!   when it changes) and every `file:` header; every call of the agent and its card reads
//!   carry it;
//! - a caller's source ([`Credentials::for_caller`]) is made per request for the kinds that
//!   depend on the caller: `forward_caller_token` sends the caller's bearer as is,
//!   `token_exchange` sends the token the endpoint exchanged for it (RFC 8693), cached per
//!   caller token (keyed by its SHA-256, never the token) until shortly before the exchanged
//!   token's expiry and never past the caller token's own `exp`, at most [`MAX_EXCHANGED`]
//!   callers. A caller without a JWT (an API key) gets no credentials: its calls fail with
//!   `upstream_auth_failed` before anything is sent.
//!
//! On an agent's 401 the client calls [`CallHeaders::refused`] with what it sent: a cached
//! token that is the one sent is dropped, files are read again, and the client retries once.
//!
//! Invariants: credential header values are marked sensitive; nothing here logs, shows or
//! puts in an error a token, a secret, a key or a file's content (`Debug` of every type
//! here says `[redacted]` or leaves them out); errors name the endpoint's status and error
//! code, or a file's path.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use futures::future::BoxFuture;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION};
use sha2::{Digest, Sha256};

use crate::a2a::call_headers::CallHeaders;
use crate::config::upstream::{UpstreamCredentials, ValueSource};
use crate::config::{AgentSettings, Secret};

pub(crate) mod cache;
pub(crate) mod endpoint;
pub(crate) mod files;

use cache::{Cells, Clock, TokenCell};
use endpoint::{Grant, TokenClient};
use files::WatchedFile;

/// Token exchange keeps the tokens of at most this many caller tokens.
pub(crate) const MAX_EXCHANGED: usize = 10_000;
/// A caller token's claims are read (for `exp`) only up to this size.
const MAX_SUBJECT_BYTES: usize = 16 * 1024;

/// One agent's credentials.
#[derive(Debug)]
pub(crate) struct Credentials {
    kind: Option<&'static str>,
    /// What every call of the agent carries, if anything.
    agent: Option<Arc<AgentHeaders>>,
    /// The kinds that depend on the caller.
    caller: Option<CallerKind>,
}

#[derive(Debug, Clone)]
enum CallerKind {
    Forward,
    Exchange(Arc<Exchange>),
}

/// Token exchange: the endpoint and the tokens it issued, per caller token.
#[derive(Debug)]
struct Exchange {
    client: TokenClient,
    cells: Cells<[u8; 32]>,
}

impl Credentials {
    /// The credentials of the agent `settings` configures; token endpoints are called with
    /// `http` (the agent's client: its TLS settings, no redirects) within `timeout`
    /// (`timeouts.upstream_call`).
    pub(crate) fn new(settings: &AgentSettings, http: reqwest::Client, timeout: Duration) -> Self {
        Self::with_clock(settings, http, timeout, Clock::default())
    }

    fn with_clock(
        settings: &AgentSettings,
        http: reqwest::Client,
        timeout: Duration,
        clock: Clock,
    ) -> Self {
        let files = settings
            .header_files
            .iter()
            .map(|(name, path)| {
                let start = settings.headers.get(name).cloned();
                (
                    name.clone(),
                    WatchedFile::new(path.clone(), files::verbatim, start),
                )
            })
            .collect::<Vec<_>>();
        let mut caller = None;
        let auth = match &settings.credentials {
            None => None,
            Some(UpstreamCredentials::OAuth2(endpoint)) => {
                Some(AgentAuth::OAuth2(Box::new(ClientCredentials {
                    client: TokenClient::new(endpoint.clone(), http, timeout),
                    cell: TokenCell::new(clock),
                })))
            }
            Some(UpstreamCredentials::Bearer(ValueSource::Fixed(token))) => {
                Some(AgentAuth::Fixed(fixed_bearer(token)))
            }
            Some(UpstreamCredentials::Bearer(ValueSource::File(path))) => Some(AgentAuth::File(
                WatchedFile::new(path.clone(), files::bearer, None),
            )),
            Some(UpstreamCredentials::TokenExchange(endpoint)) => {
                caller = Some(CallerKind::Exchange(Arc::new(Exchange {
                    client: TokenClient::new(endpoint.clone(), http, timeout),
                    cells: Cells::new(clock, MAX_EXCHANGED),
                })));
                None
            }
            Some(UpstreamCredentials::ForwardCallerToken) => {
                caller = Some(CallerKind::Forward);
                None
            }
        };
        let agent =
            (!files.is_empty() || auth.is_some()).then(|| Arc::new(AgentHeaders { files, auth }));
        Self {
            kind: settings.credentials.as_ref().map(UpstreamCredentials::kind),
            agent,
            caller,
        }
    }

    /// The configured kind (`oauth2`, `token_exchange`, ...), for `GET /agents/{name}`.
    pub(crate) fn kind(&self) -> Option<&'static str> {
        self.kind
    }

    /// The source every call of the agent carries (its card reads too); `None`: no header
    /// changes per call.
    pub(crate) fn for_agent(&self) -> Option<Arc<dyn CallHeaders>> {
        self.agent.clone().map(|a| a as Arc<dyn CallHeaders>)
    }

    /// The source of calls made for a caller whose inbound bearer was `token` (set only
    /// when a JWT authenticated it); `None`: the kind does not depend on the caller, and
    /// [`Credentials::for_agent`] serves.
    pub(crate) fn for_caller(&self, token: Option<&Secret>) -> Option<Arc<dyn CallHeaders>> {
        let kind = self.caller.as_ref()?;
        let auth = match (kind, token) {
            (CallerKind::Forward, Some(token)) => {
                match HeaderValue::from_str(&files::bearer(token.expose())) {
                    Ok(v) => CallerAuth::Forward(sensitive(v)),
                    Err(_) => CallerAuth::Missing("forward_caller_token"),
                }
            }
            (CallerKind::Exchange(exchange), Some(token)) => {
                let key: [u8; 32] = Sha256::digest(token.expose().as_bytes()).into();
                CallerAuth::Exchange {
                    cell: exchange.cells.cell(&key),
                    cap: subject_expiry(token.expose(), exchange.cells.clock()),
                    exchange: exchange.clone(),
                    subject: token.clone(),
                }
            }
            (CallerKind::Forward, None) => CallerAuth::Missing("forward_caller_token"),
            (CallerKind::Exchange(_), None) => CallerAuth::Missing("token_exchange"),
        };
        Some(Arc::new(CallerHeaders {
            agent: self.agent.clone(),
            auth,
        }))
    }
}

/// `Bearer <token>` of a fixed `bearer`, marked sensitive.
fn fixed_bearer(token: &Secret) -> Result<HeaderValue, String> {
    HeaderValue::from_str(&files::bearer(token.expose()))
        .map(sensitive)
        .map_err(|_| "the configured bearer is not a valid header value".to_owned())
}

fn sensitive(mut v: HeaderValue) -> HeaderValue {
    v.set_sensitive(true);
    v
}

/// When a caller's JWT expires, read from its (already verified) claims; `None` when it
/// says nothing readable.
fn subject_expiry(jwt: &str, clock: &Clock) -> Option<Instant> {
    if jwt.len() > MAX_SUBJECT_BYTES {
        return None;
    }
    let payload = jwt.split('.').nth(1)?;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let exp = serde_json::from_slice::<serde_json::Value>(&raw)
        .ok()?
        .get("exp")?
        .as_u64()?;
    let unix_now = SystemTime::now().duration_since(UNIX_EPOCH).ok()?.as_secs();
    let left = Duration::from_secs(exp.saturating_sub(unix_now)).min(endpoint::MAX_LIFETIME);
    Some(clock.now() + left)
}

/// OAuth2 client credentials: the endpoint, and the one token of the agent.
struct ClientCredentials {
    client: TokenClient,
    cell: TokenCell,
}

/// The agent's own headers: `file:` headers and its credential.
pub(crate) struct AgentHeaders {
    files: Vec<(HeaderName, WatchedFile)>,
    auth: Option<AgentAuth>,
}

enum AgentAuth {
    /// Boxed: the token client and its cell are the largest variant by far.
    OAuth2(Box<ClientCredentials>),
    Fixed(Result<HeaderValue, String>),
    File(WatchedFile),
}

impl std::fmt::Debug for AgentHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let files: Vec<_> = self.files.iter().map(|(n, f)| (n, f.path())).collect();
        let auth = match &self.auth {
            None => "none",
            Some(AgentAuth::OAuth2(_)) => "oauth2",
            Some(AgentAuth::Fixed(_)) => "bearer [redacted]",
            Some(AgentAuth::File(_)) => "bearer file",
        };
        f.debug_struct("AgentHeaders")
            .field("files", &files)
            .field("auth", &auth)
            .finish()
    }
}

impl AgentHeaders {
    async fn current(&self) -> Result<HeaderMap, String> {
        let mut map = HeaderMap::new();
        for (name, file) in &self.files {
            map.insert(name.clone(), file.current()?);
        }
        let authorization = match &self.auth {
            None => return Ok(map),
            Some(AgentAuth::OAuth2(oauth2)) => {
                let ClientCredentials { client, cell } = &**oauth2;
                cell.get(None, || client.request(Grant::ClientCredentials))
                    .await?
            }
            Some(AgentAuth::Fixed(value)) => value.clone()?,
            Some(AgentAuth::File(file)) => file.current()?,
        };
        map.insert(AUTHORIZATION, authorization);
        Ok(map)
    }

    fn refused(&self, sent: &HeaderMap) {
        for (_, file) in &self.files {
            file.reread();
        }
        match &self.auth {
            Some(AgentAuth::OAuth2(oauth2)) => oauth2.cell.refused(sent.get(AUTHORIZATION)),
            Some(AgentAuth::File(file)) => file.reread(),
            Some(AgentAuth::Fixed(_)) | None => {}
        }
    }
}

impl CallHeaders for AgentHeaders {
    fn headers(&self) -> BoxFuture<'_, Result<HeaderMap, String>> {
        Box::pin(self.current())
    }

    fn refused(&self, sent: &HeaderMap) {
        AgentHeaders::refused(self, sent);
    }
}

/// One caller's headers: the agent's `file:` headers and the caller's credential.
struct CallerHeaders {
    agent: Option<Arc<AgentHeaders>>,
    auth: CallerAuth,
}

enum CallerAuth {
    Forward(HeaderValue),
    Exchange {
        exchange: Arc<Exchange>,
        subject: Secret,
        cell: Arc<TokenCell>,
        /// The subject token's expiry.
        cap: Option<Instant>,
    },
    /// The caller has no JWT to send or exchange (it authenticated with an API key); the
    /// kind.
    Missing(&'static str),
}

impl std::fmt::Debug for CallerHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let auth = match &self.auth {
            CallerAuth::Forward(_) => "forward_caller_token [redacted]",
            CallerAuth::Exchange { .. } => "token_exchange [redacted]",
            CallerAuth::Missing(kind) => kind,
        };
        f.debug_struct("CallerHeaders")
            .field("agent", &self.agent)
            .field("auth", &auth)
            .finish()
    }
}

impl CallHeaders for CallerHeaders {
    fn headers(&self) -> BoxFuture<'_, Result<HeaderMap, String>> {
        Box::pin(async move {
            let mut map = match &self.agent {
                Some(agent) => agent.current().await?,
                None => HeaderMap::new(),
            };
            let authorization = match &self.auth {
                CallerAuth::Forward(value) => value.clone(),
                CallerAuth::Exchange {
                    exchange,
                    subject,
                    cell,
                    cap,
                } => {
                    let grant = Grant::TokenExchange {
                        subject_token: subject.expose(),
                    };
                    cell.get(*cap, || exchange.client.request(grant)).await?
                }
                CallerAuth::Missing(kind) => {
                    return Err(format!(
                        "{kind} needs the caller's JWT; this caller did not authenticate with one"
                    ))
                }
            };
            map.insert(AUTHORIZATION, authorization);
            Ok(map)
        })
    }

    fn refused(&self, sent: &HeaderMap) {
        if let Some(agent) = &self.agent {
            agent.refused(sent);
        }
        if let CallerAuth::Exchange { cell, .. } = &self.auth {
            cell.refused(sent.get(AUTHORIZATION));
        }
    }
}

#[cfg(test)]
pub(crate) mod test_idp;

#[cfg(test)]
mod differential_tests;

#[cfg(test)]
mod tests;
