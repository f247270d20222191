//! Peers of the identity tests (tests/identity/README.md): the OAuth2 authorization server
//! (`tests/identity/oauth_server.mjs`, oauth2-mock-server 9.3.0 behind a verifying front) and
//! the reference agent with its identity flags (`tests/upstream/ref_agent.py` behind
//! `tests/upstream/auth_guard.py`), each a process of its own on 127.0.0.1, killed on drop, and
//! the calls a test makes to their control routes (`/stats`, `/admin/*`, `/_test/*`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use serde_json::{json, Value};

use crate::pki::{CertKey, Pki};
use crate::support::{require, root, spawn_ready};

/// The OAuth server's default client id (`--client-id`).
/// The claims of a JWT, unverified (the peers verify; tests only read what they issued).
pub fn claims(token: &str) -> Value {
    use base64::Engine as _;
    let payload = token.split('.').nth(1).expect("a JWT");
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload)
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

pub const CLIENT_ID: &str = "agui-gateway";
/// The client secret the helpers configure (`--client-secret`). TEST-ONLY.
pub const CLIENT_SECRET: &str = "e2e-client-secret-3f9a";
/// RFC 8693 grant type.
pub const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// RFC 7523 client assertion type.
pub const JWT_BEARER_ASSERTION: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// RFC 8693 token type of a JWT subject token.
pub const TOKEN_TYPE_JWT: &str = "urn:ietf:params:oauth:token-type:jwt";

/// How an [`OauthServer`] is started (`oauth_server.mjs` flags).
#[derive(Debug, Clone)]
pub struct OauthOptions {
    /// `--expires-in`: the lifetime of every token it issues, in seconds.
    pub expires_in: u64,
    /// `--client-secret`: client_secret_basic / client_secret_post accepted with it.
    pub client_secret: Option<String>,
    /// `--client-public-key`: private_key_jwt accepted, verified with this key (PEM or JWK).
    pub client_public_key: Option<PathBuf>,
    /// `--subject-jwks-file`: keys trusted for token-exchange subject tokens, besides its own.
    pub subject_jwks_file: Option<PathBuf>,
}

impl Default for OauthOptions {
    fn default() -> Self {
        Self {
            expires_in: 60,
            client_secret: Some(CLIENT_SECRET.to_owned()),
            client_public_key: None,
            subject_jwks_file: None,
        }
    }
}

/// A running `oauth_server.mjs`; its signing key is kept in a file of its own, so
/// [`OauthServer::restart`] brings it back on the same port with the same key.
#[derive(Debug)]
pub struct OauthServer {
    /// `http://127.0.0.1:<port>`: the issuer (`iss` of its tokens).
    pub issuer: String,
    args: Vec<String>,
    key_file: PathBuf,
    child: Option<Child>,
}

impl OauthServer {
    pub fn start(opts: &OauthOptions) -> Self {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let key_file = std::env::temp_dir().join(format!(
            "agui-e2e-oauth-key-{}-{}.json",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&key_file);
        let mut args = vec!["--expires-in".to_owned(), opts.expires_in.to_string()];
        let mut flag = |name: &str, value: Option<String>| {
            if let Some(v) = value {
                args.extend([name.to_owned(), v]);
            }
        };
        flag("--client-secret", opts.client_secret.clone());
        flag("--client-public-key", path_arg(&opts.client_public_key));
        flag("--subject-jwks-file", path_arg(&opts.subject_jwks_file));
        let mut server = Self {
            issuer: String::new(),
            args,
            key_file,
            child: None,
        };
        server.spawn("0");
        server
    }

    fn spawn(&mut self, port: &str) {
        let dir = root().join("tests/identity");
        require(
            &dir.join("node_modules/oauth2-mock-server"),
            "oauth2-mock-server",
        );
        let mut cmd = Command::new("node");
        cmd.arg(dir.join("oauth_server.mjs"))
            .args(["--port", port, "--key-file"])
            .arg(&self.key_file)
            .args(&self.args);
        let (child, url) = spawn_ready(&mut cmd, "the OAuth server");
        self.issuer = url;
        self.child = Some(child);
    }

    /// `<issuer>/token`.
    pub fn token_url(&self) -> String {
        format!("{}/token", self.issuer)
    }

    /// `<issuer>/jwks`: its public keys.
    pub fn jwks_url(&self) -> String {
        format!("{}/jwks", self.issuer)
    }

    /// The port it listens on.
    pub fn port(&self) -> String {
        self.issuer.rsplit(':').next().unwrap().to_owned()
    }

    /// Kills the server and waits until it is gone: connections to its port are refused.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills it (if running) and starts it again on the same port with the same signing
    /// key; its statistics start from zero.
    pub fn restart(&mut self) {
        self.kill();
        let port = self.port();
        self.spawn(&port);
    }

    async fn admin(&self, path: &str) -> Value {
        let resp = reqwest::Client::new()
            .post(format!("{}{path}", self.issuer))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "POST {path}");
        resp.json().await.unwrap()
    }

    /// GET /stats: `{"total", "requests": {grant: n}, "issued": {grant: n}, "refused":
    /// {error: n}, "log": [{grant_type, client_id, auth_method, audience, resource, scope,
    /// subject_sub, aud, status, error}]}`.
    pub async fn stats(&self) -> Value {
        reqwest::get(format!("{}/stats", self.issuer))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// How many token requests of `grant` (e.g. `client_credentials`, [`TOKEN_EXCHANGE`])
    /// reached it, issued or not.
    pub async fn token_requests(&self, grant: &str) -> u64 {
        self.stats().await["requests"][grant].as_u64().unwrap_or(0)
    }

    /// POST /admin/reset: statistics back to zero.
    pub async fn reset_stats(&self) {
        self.admin("/admin/reset").await;
    }

    /// POST /admin/down: the token endpoint refuses for `seconds` (None: until [`Self::up`]):
    /// `close` (the connection is closed unanswered), `503` (temporarily_unavailable), `hang`
    /// (no answer until the outage ends), `huge` (a 200 of 8 MiB).
    pub async fn down(&self, mode: &str, seconds: Option<f64>) {
        let mut path = format!("/admin/down?mode={mode}");
        if let Some(s) = seconds {
            path.push_str(&format!("&seconds={s}"));
        }
        self.admin(&path).await;
    }

    /// POST /admin/up: the token endpoint answers again.
    pub async fn up(&self) {
        self.admin("/admin/up").await;
    }

    /// POST /admin/expires-in: the lifetime of tokens issued from now on.
    pub async fn set_expires_in(&self, seconds: u64) {
        self.admin(&format!("/admin/expires-in?seconds={seconds}"))
            .await;
    }

    /// POST /admin/mint: a token signed with its key holding `claims` (plus iss, iat, nbf,
    /// exp; `"expires_in"` in `claims` sets exp, negative for an expired token).
    pub async fn mint(&self, claims: Value) -> String {
        let resp = reqwest::Client::new()
            .post(format!("{}/admin/mint", self.issuer))
            .json(&claims)
            .send()
            .await
            .unwrap();
        let body: Value = resp.json().await.unwrap();
        body["access_token"].as_str().unwrap().to_owned()
    }

    /// Its JWKS (public keys), e.g. to write a gateway's `auth.jwt.jwks_file`.
    pub async fn jwks(&self) -> Value {
        reqwest::get(self.jwks_url())
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// A token request with `form`, authenticated with client_secret_basic
    /// ([`CLIENT_ID`], [`CLIENT_SECRET`]); the raw response.
    pub async fn token_request(&self, form: &[(&str, &str)]) -> reqwest::Response {
        reqwest::Client::new()
            .post(self.token_url())
            .basic_auth(CLIENT_ID, Some(CLIENT_SECRET))
            .form(form)
            .send()
            .await
            .unwrap()
    }

    /// A client_credentials access token for `audience`, as the gateway would get one.
    pub async fn client_credentials(&self, audience: &str) -> String {
        let resp = self
            .token_request(&[("grant_type", "client_credentials"), ("audience", audience)])
            .await;
        assert_eq!(resp.status(), 200, "client_credentials");
        let body: Value = resp.json().await.unwrap();
        body["access_token"].as_str().unwrap().to_owned()
    }
}

impl Drop for OauthServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_file(&self.key_file);
    }
}

fn path_arg(path: &Option<PathBuf>) -> Option<String> {
    path.as_ref().map(|p| p.display().to_string())
}

/// The identity flags of a [`RefAgent`] (ref_agent.py's usage), built up one by one.
#[derive(Debug, Clone)]
pub struct AgentFlags {
    args: Vec<String>,
    /// The CA that signed the agent's server certificate, when it serves https.
    ca: Option<PathBuf>,
    /// The client identity its control calls present, when it requires one.
    client: Option<CertKey>,
}

impl AgentFlags {
    /// An agent for `versions` (`both`, `1.0`, `0.3`, `rest`).
    pub fn new(versions: &str) -> Self {
        Self {
            args: vec!["--versions".into(), versions.into()],
            ca: None,
            client: None,
        }
    }

    fn arg(mut self, flag: &str, value: impl Into<String>) -> Self {
        self.args.extend([flag.to_owned(), value.into()]);
        self
    }

    fn path(self, flag: &str, value: &Path) -> Self {
        self.arg(flag, value.display().to_string())
    }

    /// `--require-jwt JWKS_URL --audience AUD`.
    pub fn require_jwt(self, jwks_url: &str, audience: &str) -> Self {
        self.arg("--require-jwt", jwks_url)
            .arg("--audience", audience)
    }

    /// `--issuer ISS`: JWTs must come from it.
    pub fn issuer(self, iss: &str) -> Self {
        self.arg("--issuer", iss)
    }

    /// `--require-scope SCOPE`: JWTs must hold it (also the card's oauth2 scope).
    pub fn require_scope(self, scope: &str) -> Self {
        self.arg("--require-scope", scope)
    }

    /// `--require-bearer FILE`: `Authorization: Bearer <FILE's current content>`.
    pub fn require_bearer(self, file: &Path) -> Self {
        self.path("--require-bearer", file)
    }

    /// `--require-api-key FILE`: `X-API-Key: <FILE's current content>`.
    pub fn require_api_key(self, file: &Path) -> Self {
        self.path("--require-api-key", file)
    }

    /// `--card-security KINDS`: one requirement of all of KINDS (comma-separated: oauth2,
    /// oidc, bearer, apikey, mtls); call again for an alternative.
    pub fn card_security(self, kinds: &str) -> Self {
        self.arg("--card-security", kinds)
    }

    /// `--oauth-issuer URL`: where the card's oauth2 / oidc schemes point.
    pub fn oauth_issuer(self, url: &str) -> Self {
        self.arg("--oauth-issuer", url)
    }

    /// `--extended-card`: declares and serves (behind the checks) an extended card with the
    /// extra skill `extended`.
    pub fn extended_card(mut self) -> Self {
        self.args.push("--extended-card".into());
        self
    }

    /// `--tls-cert/--tls-key` of `server`, signed by `pki`'s CA: https.
    pub fn tls(mut self, pki: &Pki, server: &CertKey) -> Self {
        self.ca = Some(pki.ca.clone());
        self.path("--tls-cert", &server.cert)
            .path("--tls-key", &server.key)
    }

    /// `--tls-client-ca` of `pki`: a client certificate signed by its CA is required (its
    /// control calls present `pki.client`). After [`Self::tls`].
    pub fn mtls(mut self, pki: &Pki) -> Self {
        self.client = Some(pki.client.clone());
        self.path("--tls-client-ca", &pki.ca)
    }
}

/// A reference agent with identity flags, killed on drop.
#[derive(Debug)]
pub struct RefAgent {
    /// Its base URL (`https://...` with TLS), as its card lists it.
    pub url: String,
    child: Child,
    client: reqwest::Client,
}

impl RefAgent {
    pub fn start(flags: AgentFlags) -> Self {
        let python = require(&root().join(".venv/bin/python"), "the Python venv");
        let mut cmd = Command::new(python);
        cmd.arg(root().join("tests/upstream/ref_agent.py"))
            .args(&flags.args);
        let (child, url) = spawn_ready(&mut cmd, "the reference agent (identity)");
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .timeout(std::time::Duration::from_secs(20));
        if let Some(ca) = &flags.ca {
            let ca = reqwest::Certificate::from_pem(&std::fs::read(ca).unwrap()).unwrap();
            builder = builder
                .tls_built_in_root_certs(false)
                .add_root_certificate(ca);
        }
        if let Some(id) = &flags.client {
            builder = builder.identity(reqwest::Identity::from_pem(&id.identity_pem()).unwrap());
        }
        Self {
            url,
            child,
            client: builder.build().unwrap(),
        }
    }

    /// A client that reaches it: trusts its CA, presents the client certificate it needs.
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// GET /_test/seen: every request it saw (the card's too), oldest first: `{"method",
    /// "path", "rpc", "status" (200 let through, 401 refused), "reason", "auth", "token",
    /// "sub", "aud", "scope", "act"}`.
    pub async fn seen(&self) -> Vec<Value> {
        let resp = self
            .client
            .get(format!("{}_test/seen", self.url))
            .send()
            .await
            .unwrap();
        resp.json().await.unwrap()
    }

    /// The `sub` of every request let through with a JWT, in order.
    pub async fn subjects(&self) -> Vec<String> {
        self.seen()
            .await
            .iter()
            .filter(|e| e["status"] == 200)
            .filter_map(|e| e["sub"].as_str().map(str::to_owned))
            .collect()
    }

    /// DELETE /_test/seen.
    pub async fn forget_seen(&self) {
        let resp = self
            .client
            .delete(format!("{}_test/seen", self.url))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
    }

    /// POST /_test/unauthorize?n=N: its next `n` requests that would pass are refused 401.
    pub async fn unauthorize(&self, n: u32) {
        let resp = self
            .client
            .post(format!("{}_test/unauthorize?n={n}", self.url))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
    }

    /// Its card (GET /.well-known/agent-card.json, no credentials).
    pub async fn card(&self) -> Value {
        let resp = self
            .client
            .get(format!("{}.well-known/agent-card.json", self.url))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "the card is open");
        resp.json().await.unwrap()
    }

    /// One A2A 1.0 JSON-RPC call with `bearer` (if any) through [`Self::client`].
    pub async fn rpc(
        &self,
        bearer: Option<&str>,
        method: &str,
        params: Value,
    ) -> reqwest::Response {
        let mut req = self
            .client
            .post(&self.url)
            .header("A2A-Version", "1.0")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
        if let Some(token) = bearer {
            req = req.bearer_auth(token);
        }
        req.send().await.unwrap()
    }

    /// A blocking `SendMessage` of `text` with `bearer`; the status and, on 200, the text of
    /// the task's final status message (e.g. `whoami` -> "you are <sub>").
    pub async fn send_text(&self, bearer: Option<&str>, text: &str) -> (u16, String) {
        let message = json!({"message": {"messageId": uuid::Uuid::new_v4().to_string(),
            "role": "ROLE_USER", "parts": [{"text": text}]}});
        let resp = self.rpc(bearer, "SendMessage", message).await;
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap_or(Value::Null);
        let text = body["result"]["task"]["status"]["message"]["parts"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        (status, text)
    }
}

impl Drop for RefAgent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
