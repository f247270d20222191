//! An agent's `tls` and `credentials` sections (docs/security.md#upstream-trust), as written
//! and parsed: the trust [`crate::a2a::tls`] builds its TLS configuration from, and what
//! [`crate::upstream`] builds credential sources from.
//!
//! Parsed at start, so a certificate, key or token endpoint that cannot be used is a
//! configuration problem named at start (by key), never a surprise on the first run. Every
//! problem is named, like the rest of the configuration. What it never does: echo a secret,
//! a key, or a file's content; secrets stay [`Secret`]s and key material prints as
//! `[redacted]`.
//!
//! Rules kept here (one home): exactly one kind of credentials per agent; `forward_caller_token`
//! and `token_exchange` need JWT inbound auth (they send or exchange the caller's JWT); a
//! token endpoint is `https://` unless it is on loopback; `client_secret` and
//! `private_key_jwt` exclude each other.

use std::path::PathBuf;
use std::sync::Arc;

use jsonwebtoken::{Algorithm, EncodingKey};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde::Deserialize;
use url::Url;

use super::{err, resolve_reference, ConfigError, Problems, Secret};
use crate::a2a::tls::{ClientIdentity, TlsTrust};

/// `agents[].tls`, as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsConfig {
    /// A PEM bundle of extra trusted roots (a path).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// The mTLS client certificate chain (PEM), by reference (`file:`, `env:` or literal).
    #[serde(default)]
    pub client_cert: Option<Secret>,
    /// Its private key (PEM, PKCS#8, PKCS#1 or SEC1), by reference.
    #[serde(default)]
    pub client_key: Option<Secret>,
    /// The name the agent's certificate must carry (and the SNI where the gateway sets it),
    /// in place of the URL's host.
    #[serde(default)]
    pub server_name: Option<String>,
}

/// `agents[].credentials`, as written: exactly one of its keys.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredentialsConfig {
    #[serde(default)]
    pub oauth2: Option<TokenEndpointConfig>,
    #[serde(default)]
    pub token_exchange: Option<TokenEndpointConfig>,
    #[serde(default)]
    pub forward_caller_token: Option<bool>,
    #[serde(default)]
    pub bearer: Option<Secret>,
}

/// `credentials.oauth2` / `credentials.token_exchange`, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenEndpointConfig {
    pub token_url: String,
    pub client_id: String,
    /// By reference.
    #[serde(default)]
    pub client_secret: Option<Secret>,
    /// The PEM private key (RSA or EC P-256) of an RFC 7523 client assertion, by reference.
    #[serde(default)]
    pub private_key_jwt: Option<Secret>,
    #[serde(default)]
    pub scopes: Vec<String>,
    /// RFC 8693 `audience` (also sent by most providers' client credentials grants).
    #[serde(default)]
    pub audience: Option<String>,
    /// RFC 8707 `resource`.
    #[serde(default)]
    pub resource: Option<String>,
    /// `token_exchange` only: how the caller's JWT is typed to the token endpoint (RFC 8693
    /// §3): `access_token` (default; what Keycloak's and Okta's exchanges take) or `jwt`.
    #[serde(default)]
    pub subject_token_type: Option<SubjectTokenType>,
}

/// RFC 8693 §3: the type the caller's inbound JWT is sent as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubjectTokenType {
    /// `urn:ietf:params:oauth:token-type:access_token`.
    #[default]
    AccessToken,
    /// `urn:ietf:params:oauth:token-type:jwt`.
    Jwt,
}

impl SubjectTokenType {
    /// The RFC 8693 URI.
    pub fn uri(self) -> &'static str {
        match self {
            Self::AccessToken => "urn:ietf:params:oauth:token-type:access_token",
            Self::Jwt => "urn:ietf:params:oauth:token-type:jwt",
        }
    }
}

/// `agents[].credentials`, parsed: how the gateway authenticates to the agent
/// (docs/security.md#upstream-credentials).
#[derive(Debug, Clone)]
pub enum UpstreamCredentials {
    /// OAuth2 client credentials (RFC 6749 §4.4): one token for every run.
    OAuth2(TokenEndpoint),
    /// RFC 8693: each caller's inbound JWT exchanged for a token of its own.
    TokenExchange(TokenEndpoint),
    /// The caller's own bearer, sent as is.
    ForwardCallerToken,
    /// A fixed bearer, or one read again from its file when the file changes.
    Bearer(ValueSource),
}

impl UpstreamCredentials {
    /// The kind's name as configured (for `GET /agents` and logs).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::OAuth2(_) => "oauth2",
            Self::TokenExchange(_) => "token_exchange",
            Self::ForwardCallerToken => "forward_caller_token",
            Self::Bearer(_) => "bearer",
        }
    }

    /// Whether the credential depends on the caller (then a call without a caller, such as
    /// the card's, carries none).
    pub fn per_caller(&self) -> bool {
        matches!(self, Self::TokenExchange(_) | Self::ForwardCallerToken)
    }
}

/// A token endpoint and how the gateway authenticates to it.
#[derive(Debug, Clone)]
pub struct TokenEndpoint {
    pub token_url: Url,
    pub client_id: String,
    pub client_auth: ClientAuth,
    pub scopes: Vec<String>,
    pub audience: Option<String>,
    pub resource: Option<String>,
    /// How a token exchange types the caller's JWT.
    pub subject_token_type: SubjectTokenType,
}

/// How the gateway proves itself to a token endpoint.
#[derive(Clone)]
pub enum ClientAuth {
    /// `client_secret_basic` (RFC 6749 §2.3.1).
    Secret(Secret),
    /// `private_key_jwt` (RFC 7523 §2.2, OpenID Connect Core §9): an assertion signed with
    /// this key.
    PrivateKeyJwt {
        key: Arc<EncodingKey>,
        algorithm: Algorithm,
    },
}

impl std::fmt::Debug for ClientAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Secret(_) => f.write_str("Secret([redacted])"),
            Self::PrivateKeyJwt { algorithm, .. } => {
                write!(f, "PrivateKeyJwt({algorithm:?}, [redacted])")
            }
        }
    }
}

/// A value by reference that may change while the gateway runs: a `file:` reference is read
/// again when the file changes (Kubernetes projected tokens rotate on disk); `env:` and
/// literal values are fixed at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueSource {
    Fixed(Secret),
    File(PathBuf),
}

impl ValueSource {
    /// The source of `raw` (a reference), its current value checked by `check` now.
    pub(crate) fn parse(
        key: &str,
        raw: &str,
        check: impl Fn(&str) -> Result<(), String>,
    ) -> Result<Self, ConfigError> {
        let value = resolve_reference(key, raw)?;
        check(&value).map_err(|m| err(key, m))?;
        Ok(match raw.strip_prefix("file:") {
            Some(path) => Self::File(PathBuf::from(path)),
            None => Self::Fixed(Secret(value)),
        })
    }
}

/// A header value: visible ASCII and spaces (what `HeaderValue::from_str` takes).
pub(crate) fn header_value_check(value: &str) -> Result<(), String> {
    match reqwest::header::HeaderValue::from_str(value) {
        Ok(_) if !value.is_empty() => Ok(()),
        _ => Err("the value is empty or not a valid header value".into()),
    }
}

/// `tls`, parsed; problems pushed to `problems`.
pub(crate) fn tls_settings(key: &str, tls: &TlsConfig, problems: &mut Problems) -> TlsTrust {
    let mut out = TlsTrust::default();
    if let Some(path) = &tls.ca_file {
        let k = format!("{key}.tls.ca_file");
        match std::fs::read(path) {
            Err(e) => problems.push(err(&k, format!("cannot read {}: {e}", path.display()))),
            Ok(pem) => match certificates(&pem) {
                Ok(roots) => out.extra_roots = roots,
                Err(m) => problems.push(err(&k, format!("{}: {m}", path.display()))),
            },
        }
    }
    match (&tls.client_cert, &tls.client_key) {
        (None, None) => {}
        (Some(_), None) | (None, Some(_)) => problems.push(err(
            format!("{key}.tls"),
            "client_cert and client_key go together (mTLS)",
        )),
        (Some(cert), Some(private)) => {
            let chain = problems.take(
                resolve_reference(&format!("{key}.tls.client_cert"), cert.expose()).and_then(
                    |pem| {
                        certificates(pem.as_bytes())
                            .map_err(|m| err(format!("{key}.tls.client_cert"), m))
                    },
                ),
            );
            let private = problems.take(
                resolve_reference(&format!("{key}.tls.client_key"), private.expose()).and_then(
                    |pem| {
                        PrivateKeyDer::from_pem_slice(pem.as_bytes()).map_err(|_| {
                            err(
                                format!("{key}.tls.client_key"),
                                "no PEM private key (PKCS#8, PKCS#1 or SEC1) found",
                            )
                        })
                    },
                ),
            );
            if let (Some(chain), Some(private)) = (chain, private) {
                out.client_identity = Some(ClientIdentity {
                    chain,
                    key: Arc::new(private),
                });
            }
        }
    }
    if let Some(name) = &tls.server_name {
        match ServerName::try_from(name.clone()) {
            Ok(name) => out.server_name = Some(name),
            Err(_) => problems.push(err(
                format!("{key}.tls.server_name"),
                format!("{name:?} is not a DNS name or an IP address"),
            )),
        }
    }
    // What rustls itself refuses (a key that does not sign for its certificate, a CA
    // certificate that cannot be a root) is named now, not when the agent is first called.
    if let Err(e) = crate::a2a::tls::AgentTls::new(&out) {
        problems.push(err(format!("{key}.tls"), e));
    }
    out
}

/// The certificates of a PEM bundle: at least one, and nothing unreadable.
fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(pem).collect();
    match certs {
        Ok(certs) if !certs.is_empty() => Ok(certs),
        Ok(_) => Err("no PEM certificate found".into()),
        Err(_) => Err("a malformed PEM certificate".into()),
    }
}

/// `credentials`, parsed; `jwt_inbound`: whether inbound auth has JWTs (the caller-token
/// kinds need them). `None` when it has a problem (pushed to `problems`).
pub(crate) fn credentials_settings(
    key: &str,
    c: &CredentialsConfig,
    jwt_inbound: bool,
    problems: &mut Problems,
) -> Option<UpstreamCredentials> {
    let key = format!("{key}.credentials");
    let kinds = [
        c.oauth2.is_some(),
        c.token_exchange.is_some(),
        c.forward_caller_token.is_some(),
        c.bearer.is_some(),
    ];
    if kinds.iter().filter(|k| **k).count() != 1 {
        problems.push(err(
            &key,
            "exactly one of oauth2, token_exchange, forward_caller_token, bearer",
        ));
        return None;
    }
    let needs_jwt = |problems: &mut Problems, kind: &str| {
        if !jwt_inbound {
            problems.push(err(
                format!("{key}.{kind}"),
                "needs JWT inbound auth (auth.jwt): it uses the caller's JWT",
            ));
        }
    };
    if let Some(o) = &c.oauth2 {
        if o.subject_token_type.is_some() {
            problems.push(err(
                format!("{key}.oauth2.subject_token_type"),
                "only a token_exchange sends a subject token",
            ));
        }
        let endpoint = token_endpoint(&format!("{key}.oauth2"), o, problems)?;
        return Some(UpstreamCredentials::OAuth2(endpoint));
    }
    if let Some(x) = &c.token_exchange {
        needs_jwt(problems, "token_exchange");
        let endpoint = token_endpoint(&format!("{key}.token_exchange"), x, problems)?;
        return Some(UpstreamCredentials::TokenExchange(endpoint));
    }
    if let Some(forward) = c.forward_caller_token {
        if !forward {
            problems.push(err(
                format!("{key}.forward_caller_token"),
                "only `true` is meaningful; leave credentials out for none",
            ));
            return None;
        }
        needs_jwt(problems, "forward_caller_token");
        return Some(UpstreamCredentials::ForwardCallerToken);
    }
    let bearer = c.bearer.as_ref()?;
    let k = format!("{key}.bearer");
    problems
        .take(ValueSource::parse(&k, bearer.expose(), header_value_check))
        .map(UpstreamCredentials::Bearer)
}

fn token_endpoint(
    key: &str,
    c: &TokenEndpointConfig,
    problems: &mut Problems,
) -> Option<TokenEndpoint> {
    let url = problems.take(token_url(&format!("{key}.token_url"), &c.token_url));
    if c.client_id.is_empty() {
        problems.push(err(format!("{key}.client_id"), "must not be empty"));
    }
    let client_auth = match (&c.client_secret, &c.private_key_jwt) {
        (Some(secret), None) => problems
            .take(resolve_reference(
                &format!("{key}.client_secret"),
                secret.expose(),
            ))
            .map(|s| ClientAuth::Secret(Secret(s))),
        (None, Some(pem)) => problems.take(signing_key(&format!("{key}.private_key_jwt"), pem)),
        _ => {
            problems.push(err(key, "exactly one of client_secret, private_key_jwt"));
            None
        }
    };
    for (name, value) in [("audience", &c.audience), ("resource", &c.resource)] {
        if value.as_deref().is_some_and(str::is_empty) {
            problems.push(err(format!("{key}.{name}"), "must not be empty"));
        }
    }
    if c.resource
        .as_deref()
        .is_some_and(|r| Url::parse(r).is_err())
    {
        // RFC 8707 §2: an absolute URI.
        problems.push(err(format!("{key}.resource"), "must be an absolute URI"));
    }
    Some(TokenEndpoint {
        token_url: url?,
        client_id: c.client_id.clone(),
        client_auth: client_auth?,
        scopes: c.scopes.clone(),
        audience: c.audience.clone(),
        resource: c.resource.clone(),
        subject_token_type: c.subject_token_type.unwrap_or_default(),
    })
}

/// A token endpoint URL: `https://`, or `http://` on a loopback host (a token travels
/// back on it; RFC 6749 §3.2 requires TLS).
fn token_url(key: &str, raw: &str) -> Result<Url, ConfigError> {
    let url = Url::parse(raw).map_err(|_| err(key, format!("{raw:?} is not a URL")))?;
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    match url.scheme() {
        "https" if url.host().is_some() => Ok(url),
        "http" if loopback => Ok(url),
        _ => Err(err(
            key,
            "must be an https:// URL (http:// only on a loopback host)",
        )),
    }
}

/// The client assertion key: RSA signs RS256, EC P-256 ES256.
fn signing_key(key: &str, reference: &Secret) -> Result<ClientAuth, ConfigError> {
    let pem = resolve_reference(key, reference.expose())?;
    let pem = pem.as_bytes();
    if let Ok(k) = EncodingKey::from_rsa_pem(pem) {
        return Ok(ClientAuth::PrivateKeyJwt {
            key: Arc::new(k),
            algorithm: Algorithm::RS256,
        });
    }
    if let Ok(k) = EncodingKey::from_ec_pem(pem) {
        return Ok(ClientAuth::PrivateKeyJwt {
            key: Arc::new(k),
            algorithm: Algorithm::ES256,
        });
    }
    Err(err(
        key,
        "no RSA or EC P-256 private key in PEM (PKCS#8 or PKCS#1) found",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str, jwt: bool) -> (Option<UpstreamCredentials>, Vec<String>) {
        let c: CredentialsConfig = serde_yaml_ng::from_str(yaml).unwrap();
        let mut problems = Problems::default();
        let out = credentials_settings("agents[0]", &c, jwt, &mut problems);
        let keys = match problems.finish() {
            Ok(()) => vec![],
            Err(e) => e.iter().map(|e| e.to_string()).collect(),
        };
        (out, keys)
    }

    #[test]
    fn exactly_one_kind_of_credentials() {
        let (out, problems) = parse("{bearer: abc, forward_caller_token: true}", true);
        assert!(out.is_none());
        assert!(problems[0].contains("exactly one"), "{problems:?}");
        let (out, problems) = parse("{}", true);
        assert!(out.is_none() && problems.len() == 1);
        let (out, problems) = parse("{bearer: abc}", false);
        assert!(matches!(
            out,
            Some(UpstreamCredentials::Bearer(ValueSource::Fixed(_)))
        ));
        assert!(problems.is_empty());
    }

    #[test]
    fn caller_token_kinds_need_jwt_inbound_auth() {
        let (_, problems) = parse("{forward_caller_token: true}", false);
        assert!(problems[0].contains("auth.jwt"), "{problems:?}");
        let (out, problems) = parse("{forward_caller_token: true}", true);
        assert!(
            matches!(out, Some(UpstreamCredentials::ForwardCallerToken)) && problems.is_empty()
        );
        let (_, problems) = parse(
            "{token_exchange: {token_url: 'http://127.0.0.1:1/t', client_id: c, client_secret: s}}",
            false,
        );
        assert!(problems[0].contains("token_exchange"), "{problems:?}");
        let (out, _) = parse(
            "{token_exchange: {token_url: 'http://127.0.0.1:1/t', client_id: c, client_secret: s, \
             subject_token_type: jwt}}",
            true,
        );
        assert!(
            matches!(out, Some(UpstreamCredentials::TokenExchange(e)) if e.subject_token_type == SubjectTokenType::Jwt)
        );
        let (_, problems) = parse(
            "{oauth2: {token_url: 'http://127.0.0.1:1/t', client_id: c, client_secret: s, \
             subject_token_type: jwt}}",
            false,
        );
        assert!(
            problems[0].contains("oauth2.subject_token_type"),
            "{problems:?}"
        );
    }

    #[test]
    fn token_endpoints_are_https_or_loopback_and_secrets_never_shown() {
        let (out, problems) = parse(
            "{oauth2: {token_url: 'http://idp.example/t', client_id: c, client_secret: hunter2-secret}}",
            false,
        );
        assert!(out.is_none());
        assert!(
            problems.iter().any(|p| p.contains("token_url")),
            "{problems:?}"
        );
        let (out, problems) = parse(
            "{oauth2: {token_url: 'https://idp.example/t', client_id: c, client_secret: hunter2-secret, \
             scopes: [a], resource: 'https://agent.example'}}",
            false,
        );
        assert!(problems.is_empty(), "{problems:?}");
        let shown = format!("{out:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        let (_, problems) = parse(
            "{oauth2: {token_url: 'https://idp.example/t', client_id: c}}",
            false,
        );
        assert!(
            problems[0].contains("client_secret, private_key_jwt"),
            "{problems:?}"
        );
        let (_, problems) = parse(
            "{oauth2: {token_url: 'https://idp.example/t', client_id: c, private_key_jwt: not-a-key}}",
            false,
        );
        assert!(problems[0].contains("private_key_jwt"), "{problems:?}");
        assert!(!problems[0].contains("not-a-key"), "{problems:?}");
    }

    #[test]
    fn a_bearer_file_is_watched_and_checked_now() {
        let dir = std::env::temp_dir().join(format!("gw-cred-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("token");
        std::fs::write(&file, "abc\n").unwrap();
        let (out, problems) = parse(&format!("{{bearer: 'file:{}'}}", file.display()), false);
        assert!(problems.is_empty(), "{problems:?}");
        assert!(
            matches!(out, Some(UpstreamCredentials::Bearer(ValueSource::File(p))) if p == file)
        );
        std::fs::write(&file, "bad\u{7}value").unwrap();
        let (out, problems) = parse(&format!("{{bearer: 'file:{}'}}", file.display()), false);
        assert!(
            out.is_none() && problems[0].contains("header value"),
            "{problems:?}"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn tls_problems_name_their_key() {
        let tls: TlsConfig = serde_yaml_ng::from_str(
            "{ca_file: /nonexistent/ca.pem, client_cert: 'file:/nonexistent/c', server_name: 'not a name'}",
        )
        .unwrap();
        let mut problems = Problems::default();
        let out = tls_settings("agents[0]", &tls, &mut problems);
        let shown: Vec<String> = problems
            .finish()
            .unwrap_err()
            .iter()
            .map(|e| e.to_string())
            .collect();
        assert!(out.client_identity.is_none() && out.server_name.is_none());
        for k in ["tls.ca_file", "agents[0].tls:", "tls.server_name"] {
            assert!(shown.iter().any(|s| s.contains(k)), "{k}: {shown:?}");
        }
        let tls: TlsConfig = serde_yaml_ng::from_str("{ca_file: /etc/hostname}").unwrap();
        let mut problems = Problems::default();
        tls_settings("agents[0]", &tls, &mut problems);
        assert!(problems
            .finish()
            .unwrap_err()
            .iter()
            .any(|e| e.to_string().contains("no PEM")));
    }
}
