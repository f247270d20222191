//! A token endpoint on 127.0.0.1 for the credentials' unit tests: it records what each
//! request sent (form, Basic credentials), issues `token-<n>` tokens, and can be told to
//! refuse, answer too much, hang, redirect, or hold its answers until released.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::{json, Value};
use tokio::sync::{watch, Notify};

use super::endpoint::TokenClient;
use crate::config::upstream::{ClientAuth, TokenEndpoint};

/// How the endpoint answers.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// A token `token-<n>` (n counts requests) with this `expires_in` (`None`: absent).
    Token(Option<u64>),
    /// This status and body, `text/plain`.
    Status(u16, String),
    /// This status and body, `application/json`.
    Json(u16, String),
    /// More than the gateway reads.
    Huge,
    /// Never answers.
    Hang,
    /// A 307 to itself.
    Redirect,
}

/// One request as the endpoint saw it.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) form: HashMap<String, String>,
    /// The Basic credentials, form-urlencoding undone (RFC 6749 §2.3.1).
    pub(crate) basic: Option<(String, String)>,
    pub(crate) content_type: String,
}

#[derive(Debug)]
struct Inner {
    reply: Mutex<Reply>,
    seen: Mutex<Vec<Seen>>,
    arrived: Notify,
    /// While `true`, answers wait.
    held: watch::Sender<bool>,
}

/// The running endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Idp {
    inner: Arc<Inner>,
    url: url::Url,
}

/// A client id and how it authenticates.
#[derive(Debug, Clone)]
pub(crate) struct Auth {
    id: String,
    auth: ClientAuth,
}

pub(crate) fn secret_auth(id: &str, secret: &str) -> Auth {
    Auth {
        id: id.to_owned(),
        auth: ClientAuth::Secret(secret.parse().unwrap()),
    }
}

/// `private_key_jwt` with a key of `fixtures/auth`.
pub(crate) fn key_auth(pem: &str) -> Auth {
    let pem = std::fs::read(fixture(pem)).unwrap();
    let (key, algorithm) = match jsonwebtoken::EncodingKey::from_rsa_pem(&pem) {
        Ok(k) => (k, jsonwebtoken::Algorithm::RS256),
        Err(_) => (
            jsonwebtoken::EncodingKey::from_ec_pem(&pem).unwrap(),
            jsonwebtoken::Algorithm::ES256,
        ),
    };
    Auth {
        id: "gw-client".into(),
        auth: ClientAuth::PrivateKeyJwt {
            key: Arc::new(key),
            algorithm,
        },
    }
}

/// The public key `kid` of `fixtures/auth/jwks.json`.
pub(crate) fn decoding_key(kid: &str) -> jsonwebtoken::DecodingKey {
    let jwks: jsonwebtoken::jwk::JwkSet =
        serde_json::from_str(&std::fs::read_to_string(fixture("jwks.json")).unwrap()).unwrap();
    jsonwebtoken::DecodingKey::from_jwk(jwks.find(kid).unwrap()).unwrap()
}

fn fixture(name: &str) -> String {
    format!("{}/fixtures/auth/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// How long the tests' token requests may take.
pub(crate) const TIMEOUT: Duration = Duration::from_millis(500);

/// A client of an endpoint that is not listening.
pub(crate) async fn down_client(auth: Auth) -> TokenClient {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/token", listener.local_addr().unwrap());
    drop(listener);
    TokenClient::new(endpoint(url.parse().unwrap(), auth), http(), TIMEOUT)
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn endpoint(token_url: url::Url, auth: Auth) -> TokenEndpoint {
    TokenEndpoint {
        token_url,
        client_id: auth.id,
        client_auth: auth.auth,
        scopes: vec!["agents.invoke".into(), "agents.read".into()],
        audience: Some("https://agent.test".into()),
        resource: Some("https://agent.test/a2a".into()),
        subject_token_type: Default::default(),
    }
}

impl Idp {
    pub(crate) async fn start() -> Self {
        let inner = Arc::new(Inner {
            reply: Mutex::new(Reply::Token(Some(3600))),
            seen: Mutex::new(Vec::new()),
            arrived: Notify::new(),
            held: watch::channel(false).0,
        });
        let app = axum::Router::new()
            .route("/token", axum::routing::post(token))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            inner,
            url: url.parse().unwrap(),
        }
    }

    pub(crate) fn token_url(&self) -> &url::Url {
        &self.url
    }

    pub(crate) fn endpoint(&self, auth: Auth) -> TokenEndpoint {
        endpoint(self.url.clone(), auth)
    }

    pub(crate) fn client(&self, auth: Auth) -> TokenClient {
        TokenClient::new(self.endpoint(auth), http(), TIMEOUT)
    }

    pub(crate) fn set(&self, reply: Reply) {
        *self.inner.reply.lock().unwrap() = reply;
    }

    pub(crate) fn requests(&self) -> Vec<Seen> {
        self.inner.seen.lock().unwrap().clone()
    }

    pub(crate) fn count(&self) -> usize {
        self.inner.seen.lock().unwrap().len()
    }

    /// Answers wait until [`Idp::release`].
    pub(crate) fn hold(&self) {
        self.inner.held.send_replace(true);
    }

    pub(crate) fn release(&self) {
        self.inner.held.send_replace(false);
    }

    /// Waits until `n` requests have arrived.
    pub(crate) async fn arrived(&self, n: usize) {
        loop {
            let notified = self.inner.arrived.notified();
            if self.count() >= n {
                return;
            }
            notified.await;
        }
    }
}

async fn token(State(idp): State<Arc<Inner>>, headers: HeaderMap, body: String) -> Response {
    let form = url::form_urlencoded::parse(body.as_bytes())
        .into_owned()
        .collect();
    let basic = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|raw| {
            let raw = String::from_utf8(raw).ok()?;
            let (id, secret) = raw.split_once(':')?;
            let undo = |s: &str| {
                url::form_urlencoded::parse(format!("v={s}").as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default()
            };
            Some((undo(id), undo(secret)))
        });
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let n = {
        let mut seen = idp.seen.lock().unwrap();
        seen.push(Seen {
            form,
            basic,
            content_type,
        });
        seen.len()
    };
    idp.arrived.notify_waiters();
    let mut held = idp.held.subscribe();
    let _ = held.wait_for(|h| !h).await;
    let reply = idp.reply.lock().unwrap().clone();
    match reply {
        Reply::Token(expires_in) => {
            let mut answer = json!({"access_token": format!("token-{n}"), "token_type": "Bearer"});
            if let Some(s) = expires_in {
                answer["expires_in"] = Value::from(s);
            }
            axum::Json(answer).into_response()
        }
        Reply::Status(code, body) => (StatusCode::from_u16(code).unwrap(), body).into_response(),
        Reply::Json(code, body) => (
            StatusCode::from_u16(code).unwrap(),
            [("content-type", "application/json")],
            body,
        )
            .into_response(),
        Reply::Huge => "x"
            .repeat(super::endpoint::MAX_RESPONSE_BYTES + 1)
            .into_response(),
        Reply::Hang => std::future::pending().await,
        Reply::Redirect => {
            (StatusCode::TEMPORARY_REDIRECT, [("location", "/token")]).into_response()
        }
    }
}
