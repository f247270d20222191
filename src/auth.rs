//! Inbound auth (docs/design.md#11-security): who is calling.
//!
//! When inbound auth is configured, every request except the open routes carries
//! `Authorization: Bearer <token>`. The open routes are the ones `crate::http::router`
//! mounts outside this middleware (the probes, `/openapi.json`, the console's files,
//! `/metrics` with `metrics_public`): it never looks at a path. The token is
//! - a configured API key: compared in constant time on SHA-256 digests, against every key
//!   with no early exit, so neither a key's bytes nor its length leak through timing; the
//!   caller is the key's `name`, with its `scopes`;
//! - or a JWT (`auth.jwt`): signature (HS256 with a configured secret, or RS256/ES256 with a
//!   key of the JWKS file read at start), `iss`, `aud`, `exp` and `nbf` (with [`LEEWAY_S`]
//!   of leeway) checked by `jsonwebtoken` ([`jwt`]); the caller is the identity claim, its scopes the
//!   scopes claim (a space-separated string or an array of strings).
//!
//! The keys come parsed from `crate::config::inbound` (the `auth` section, checked at start);
//! this module only checks requests against them.
//!
//! [`require_caller`] (a `from_fn_with_state` middleware) puts the [`Caller`] into the
//! request's extensions; handlers take it as an extractor. Without inbound auth every
//! request is the one [`ANONYMOUS`] caller, who sees every context ([`SCOPE_THREADS_ALL`]).
//!
//! What it never does: log or echo a token or key, or say which check a token failed beyond
//! "missing", "invalid" or "expired" (an expired token was correctly signed, so saying so
//! tells nothing to someone without a key). CORS preflights never get here: the CORS layer
//! outside answers them.

use std::sync::Arc;

use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::config::inbound::{key_digest, ApiKey, AuthSettings};
use crate::config::{Secret, Visibility};
use crate::error::{Rejection, RequestError};
use crate::ids::CallerId;
use crate::redact::Shown;

mod jwt;

/// The caller of every request when no inbound auth is configured.
pub(crate) const ANONYMOUS: &str = "anonymous";
/// The scope that sees every context of every agent (docs/design.md#11-security).
pub(crate) const SCOPE_THREADS_ALL: &str = "threads:all";
/// A longer bearer token is refused without being parsed.
const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// Who is calling: an API key's name, a JWT's identity claim, or [`ANONYMOUS`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caller {
    pub(crate) id: CallerId,
    pub(crate) scopes: Vec<String>,
    /// The bearer, when a JWT authenticated the caller: what `token_exchange` and
    /// `forward_caller_token` send upstream (docs/security.md#upstream-credentials). A
    /// [`Secret`]: `Debug` prints `[redacted]`.
    pub(crate) token: Option<Secret>,
}

impl Caller {
    /// The one caller of a gateway without inbound auth: every context is visible to it.
    pub(crate) fn anonymous() -> Self {
        Self {
            id: CallerId::new(ANONYMOUS),
            scopes: vec![SCOPE_THREADS_ALL.to_owned()],
            token: None,
        }
    }

    /// Whether this caller is named [`ANONYMOUS`], as the caller of a gateway without
    /// inbound auth is (its rate limit bucket is per address).
    pub(crate) fn is_anonymous(&self) -> bool {
        self.id.as_str() == ANONYMOUS
    }

    pub(crate) fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|s| s == scope)
    }

    /// Whether this caller may see and pick up contexts of an agent that were not created
    /// through the gateway (docs/design.md#11-security): on agents with `visibility: shared`,
    /// or with scope `threads:all`.
    pub(crate) fn may_see_foreign(&self, visibility: Visibility) -> bool {
        visibility == Visibility::Shared || self.has_scope(SCOPE_THREADS_ALL)
    }

    /// Whether this caller may use a context that `created_by` created through the gateway
    /// (docs/design.md#11-security): its own, or any with scope `threads:all`. Someone else's
    /// is refused as unknown (404), never as forbidden.
    pub(crate) fn may_use(&self, created_by: &CallerId) -> bool {
        *created_by == self.id || self.has_scope(SCOPE_THREADS_ALL)
    }

    /// Whether this caller may use a context whose creator through the gateway is
    /// `created_by` (`None`: not created through the gateway) on an agent of `visibility`:
    /// the one rule the ownership check, thread lookups and thread lists apply.
    pub(crate) fn may_use_context(
        &self,
        created_by: Option<&CallerId>,
        visibility: Visibility,
    ) -> bool {
        match created_by {
            Some(creator) => self.may_use(creator),
            None => self.may_see_foreign(visibility),
        }
    }
}

/// Handlers read the caller that [`require_caller`] established. Missing (a route outside
/// the middleware) is a 401, never an anonymous pass.
impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = RequestError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or(RequestError::Unauthorized(Rejection::Missing))
    }
}

/// Establishes callers from `Authorization` headers, built once from the parsed `auth`
/// settings.
#[derive(Debug, Default)]
pub(crate) struct Authenticator {
    /// [`AuthSettings::is_configured`] of the settings it was built from.
    configured: bool,
    api_keys: Vec<ApiKey>,
    jwt: Option<jwt::JwtVerifier>,
}

impl Authenticator {
    /// No inbound auth: every request is [`Caller::anonymous`].
    #[cfg(test)]
    pub(crate) fn none() -> Self {
        Self::default()
    }

    /// Checks callers against `settings` (parsed and validated by `config`).
    pub(crate) fn new(settings: &AuthSettings) -> Self {
        Self {
            configured: settings.is_configured(),
            api_keys: settings.api_keys.clone(),
            jwt: settings.jwt.as_ref().map(jwt::JwtVerifier::new),
        }
    }

    /// Whether any inbound auth is configured.
    pub(crate) fn is_configured(&self) -> bool {
        self.configured
    }

    /// The caller of a request with this `Authorization` header.
    pub(crate) fn authenticate(
        &self,
        authorization: Option<&HeaderValue>,
    ) -> Result<Caller, Rejection> {
        if !self.is_configured() {
            return Ok(Caller::anonymous());
        }
        let token = bearer(authorization).ok_or(Rejection::Missing)?;
        if token.len() > MAX_TOKEN_BYTES {
            return Err(Rejection::Invalid);
        }
        if let Some(key) = self.api_key(token) {
            return Ok(Caller {
                id: CallerId::new(key.name.clone()),
                scopes: key.scopes.clone(),
                token: None,
            });
        }
        match &self.jwt {
            Some(jwt) => jwt.verify(token).map(|caller| Caller {
                token: token.parse().ok(),
                ..caller
            }),
            None => Err(Rejection::Invalid),
        }
    }

    /// The API key `token` is, compared against every key without stopping at a match.
    fn api_key(&self, token: &str) -> Option<&ApiKey> {
        let presented = key_digest(token.as_bytes());
        let mut found = None;
        for key in &self.api_keys {
            if bool::from(key.digest.ct_eq(&presented)) {
                found = Some(key);
            }
        }
        found
    }
}

/// The token of `Authorization: Bearer <token>` (scheme case-insensitive, RFC 7235).
fn bearer(authorization: Option<&HeaderValue>) -> Option<&str> {
    let value = authorization?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The middleware: establishes the caller of every request it wraps and puts it in the
/// request's extensions, or answers 401. Open routes are mounted outside it.
pub(crate) async fn require_caller(
    State(auth): State<Arc<Authenticator>>,
    mut req: Request,
    next: Next,
) -> Response {
    match auth.authenticate(req.headers().get(header::AUTHORIZATION)) {
        Ok(caller) => {
            req.extensions_mut().insert(caller);
            next.run(req).await
        }
        Err(rejection) => {
            tracing::debug!(reason = %rejection, path = %Shown(req.uri().path()), "unauthorized");
            RequestError::Unauthorized(rejection).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::config::inbound::test_support::{self, fixture, AUD, HS_SECRET, ISS};
    use crate::config::{AuthConfig, ConfigErrors, Secret};
    use jsonwebtoken::{Algorithm, EncodingKey, Header};
    use serde_json::json;

    fn build(yaml: &str, flags: &[&str]) -> Result<Authenticator, ConfigErrors> {
        test_support::build(yaml, flags).map(|s| Authenticator::new(&s))
    }

    fn jwks_auth() -> Authenticator {
        build(
            &format!(
                "jwt: {{issuer: '{ISS}', audience: {AUD}, jwks_file: '{}'}}",
                fixture("jwks.json")
            ),
            &[],
        )
        .unwrap()
    }

    fn hs_auth() -> Authenticator {
        build(
            &format!("jwt: {{issuer: '{ISS}', audience: {AUD}, hs256_secret: '{HS_SECRET}'}}"),
            &[],
        )
        .unwrap()
    }

    fn now() -> u64 {
        jsonwebtoken::get_current_timestamp()
    }

    fn claims() -> Value {
        json!({"sub": "alice", "iss": ISS, "aud": AUD, "exp": now() + 300})
    }

    fn with(mut base: Value, key: &str, value: Value) -> Value {
        if value.is_null() {
            base.as_object_mut().unwrap().remove(key);
        } else {
            base[key] = value;
        }
        base
    }

    fn hs256(claims: &Value, secret: &str) -> String {
        jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            claims,
            &EncodingKey::from_secret(secret.as_bytes()),
        )
        .unwrap()
    }

    fn signed(alg: Algorithm, kid: Option<&str>, pem: &str, claims: &Value) -> String {
        let pem = std::fs::read(fixture(pem)).unwrap();
        let key = match alg {
            Algorithm::RS256 => EncodingKey::from_rsa_pem(&pem).unwrap(),
            Algorithm::ES256 => EncodingKey::from_ec_pem(&pem).unwrap(),
            other => panic!("{other:?}"),
        };
        let mut header = Header::new(alg);
        header.kid = kid.map(str::to_owned);
        jsonwebtoken::encode(&header, claims, &key).unwrap()
    }

    fn check(auth: &Authenticator, token: &str) -> Result<Caller, Rejection> {
        let value = HeaderValue::from_str(&format!("Bearer {token}")).unwrap();
        auth.authenticate(Some(&value))
    }

    #[test]
    fn without_auth_everyone_is_the_anonymous_caller() {
        let auth = Authenticator::none();
        assert!(!auth.is_configured());
        let caller = auth.authenticate(None).unwrap();
        assert_eq!(caller.id.as_str(), ANONYMOUS);
        assert!(caller.is_anonymous());
        assert!(caller.has_scope(SCOPE_THREADS_ALL));
    }

    #[test]
    fn api_keys_match_exactly() {
        std::env::set_var("AUTH_TEST_KEY", "key-from-env-0123");
        let auth = build(
            "api_keys: [{name: console, key: env:AUTH_TEST_KEY, scopes: [threads:all]}, {name: ci, key: literal-key-0123}]",
            &["cli=flag-key-01234567"],
        )
        .unwrap();
        assert!(auth.is_configured());
        let console = check(&auth, "key-from-env-0123").unwrap();
        assert_eq!(console.id.as_str(), "console");
        assert!(console.has_scope("threads:all"));
        assert!(!console.has_scope("threads"));
        assert_eq!(check(&auth, "literal-key-0123").unwrap().id.as_str(), "ci");
        assert_eq!(
            check(&auth, "flag-key-01234567").unwrap().scopes,
            Vec::<String>::new()
        );
        for wrong in [
            "key-from-env-012",
            "key-from-env-01234",
            "KEY-FROM-ENV-0123",
            "x",
        ] {
            assert_eq!(check(&auth, wrong), Err(Rejection::Invalid), "{wrong}");
        }
        assert_eq!(auth.authenticate(None), Err(Rejection::Missing));
        let basic = HeaderValue::from_static("Basic a2V5LWZyb20tZW52");
        assert_eq!(auth.authenticate(Some(&basic)), Err(Rejection::Missing));
        let bare = HeaderValue::from_static("Bearer ");
        assert_eq!(auth.authenticate(Some(&bare)), Err(Rejection::Missing));
        let lower = HeaderValue::from_static("bearer literal-key-0123");
        assert_eq!(auth.authenticate(Some(&lower)).unwrap().id.as_str(), "ci");
        let huge = "k".repeat(MAX_TOKEN_BYTES + 1);
        assert_eq!(check(&auth, &huge), Err(Rejection::Invalid));
    }

    #[test]
    fn secrets_never_show_in_debug() {
        let auth = build(
            &format!(
                "api_keys: [{{name: console, key: super-secret-key}}]\njwt: {{issuer: '{ISS}', audience: {AUD}, hs256_secret: '{HS_SECRET}'}}"
            ),
            &["cli=flag-secret-key-0"],
        )
        .unwrap();
        let file: AuthConfig =
            serde_yaml_ng::from_str("api_keys: [{name: console, key: super-secret-key}]").unwrap();
        let flag: Secret = "cli=flag-secret-key-0".parse().unwrap();
        for shown in [
            format!("{auth:?}"),
            format!("{file:?}"),
            format!("{flag:?}"),
        ] {
            for secret in ["super-secret-key", "flag-secret-key-0", HS_SECRET] {
                assert!(!shown.contains(secret), "{shown}");
            }
        }
        assert!(format!("{auth:?}").contains("console"));
    }

    #[test]
    fn hs256_checks_signature_issuer_audience_and_expiry() {
        let auth = hs_auth();
        let good = check(&auth, &hs256(&claims(), HS_SECRET)).unwrap();
        assert_eq!(good.id.as_str(), "alice");
        assert!(good.scopes.is_empty());
        let expired = with(claims(), "exp", json!(now() - 120));
        assert_eq!(
            check(&auth, &hs256(&expired, HS_SECRET)),
            Err(Rejection::Expired)
        );
        // Within the leeway it still passes.
        let just = with(claims(), "exp", json!(now() - 5));
        assert!(check(&auth, &hs256(&just, HS_SECRET)).is_ok());
        for (claim, value) in [
            ("aud", json!("someone-else")),
            ("aud", Value::Null),
            ("iss", json!("https://evil.test")),
            ("iss", Value::Null),
            ("exp", Value::Null),
            ("nbf", json!(now() + 3600)),
            ("sub", Value::Null),
            ("sub", json!(42)),
            ("sub", json!("")),
        ] {
            let token = hs256(&with(claims(), claim, value.clone()), HS_SECRET);
            assert_eq!(
                check(&auth, &token),
                Err(Rejection::Invalid),
                "{claim}={value}"
            );
        }
        let other_secret = hs256(&claims(), "another-secret-of-at-least-32-bytes!");
        assert_eq!(check(&auth, &other_secret), Err(Rejection::Invalid));
        // A correctly signed but expired token with a wrong signature is just invalid.
        let forged = hs256(&expired, "another-secret-of-at-least-32-bytes!");
        assert_eq!(check(&auth, &forged), Err(Rejection::Invalid));
        assert_eq!(check(&auth, "not.a.jwt"), Err(Rejection::Invalid));
    }

    #[test]
    fn only_a_jwt_caller_carries_its_token_and_debug_hides_it() {
        let token = hs256(&claims(), HS_SECRET);
        let caller = check(&hs_auth(), &token).unwrap();
        assert_eq!(
            caller.token.as_ref().map(Secret::expose),
            Some(token.as_str())
        );
        assert!(!format!("{caller:?}").contains(&token));
        let keys = build("api_keys: [{name: ci, key: literal-key-0123}]", &[]).unwrap();
        assert_eq!(check(&keys, "literal-key-0123").unwrap().token, None);
        assert_eq!(Caller::anonymous().token, None);
    }

    #[test]
    fn jwks_keys_verify_rs256_and_es256() {
        let auth = jwks_auth();
        let rs = signed(
            Algorithm::RS256,
            Some("test-rsa"),
            "test-rsa.pem",
            &claims(),
        );
        assert_eq!(check(&auth, &rs).unwrap().id.as_str(), "alice");
        let no_kid = signed(Algorithm::RS256, None, "test-rsa.pem", &claims());
        assert_eq!(check(&auth, &no_kid).unwrap().id.as_str(), "alice");
        let es = signed(Algorithm::ES256, Some("test-ec"), "test-ec.pem", &claims());
        assert_eq!(check(&auth, &es).unwrap().id.as_str(), "alice");
        // Signed by a key that is not in the set, with or without a kid that is.
        for kid in [Some("test-rsa"), None, Some("unknown")] {
            let other = signed(Algorithm::RS256, kid, "test-rsa-other.pem", &claims());
            assert_eq!(check(&auth, &other), Err(Rejection::Invalid), "{kid:?}");
        }
        // The right key under the wrong kid is not tried.
        let wrong_kid = signed(Algorithm::RS256, Some("test-ec"), "test-rsa.pem", &claims());
        assert_eq!(check(&auth, &wrong_kid), Err(Rejection::Invalid));
        let expired = with(claims(), "exp", json!(now() - 120));
        let old = signed(Algorithm::RS256, Some("test-rsa"), "test-rsa.pem", &expired);
        assert_eq!(check(&auth, &old), Err(Rejection::Expired));
        // Algorithm confusion: an HMAC token keyed with the public JWKS text is refused.
        let jwks_text = std::fs::read_to_string(fixture("jwks.json")).unwrap();
        assert_eq!(
            check(&auth, &hs256(&claims(), &jwks_text)),
            Err(Rejection::Invalid)
        );
    }

    #[test]
    fn scopes_come_from_a_string_or_an_array() {
        let auth = hs_auth();
        let from_string = with(claims(), "scope", json!("threads:all  read"));
        assert_eq!(
            check(&auth, &hs256(&from_string, HS_SECRET))
                .unwrap()
                .scopes,
            ["threads:all", "read"]
        );
        let from_array = with(claims(), "scope", json!(["threads:all", 7, "read"]));
        assert_eq!(
            check(&auth, &hs256(&from_array, HS_SECRET)).unwrap().scopes,
            ["threads:all", "read"]
        );
        let custom = build(
            &format!("jwt: {{issuer: '{ISS}', audience: {AUD}, hs256_secret: '{HS_SECRET}', identity_claim: email, scopes_claim: scp}}"),
            &[],
        )
        .unwrap();
        let claims = json!({"email": "a@example.test", "scp": ["x"], "sub": "ignored", "iss": ISS, "aud": [AUD, "other"], "exp": now() + 60});
        let caller = check(&custom, &hs256(&claims, HS_SECRET)).unwrap();
        assert_eq!(
            (caller.id.as_str(), caller.scopes),
            ("a@example.test", vec!["x".to_owned()])
        );
    }

    #[tokio::test]
    async fn the_middleware_guards_every_route_it_wraps() {
        use axum::body::Body;
        use axum::routing::get;
        use tower::ServiceExt;

        let auth =
            Arc::new(build("api_keys: [{name: console, key: k-0123456789abcdef}]", &[]).unwrap());
        // The probes' paths get no pass here: a route is open only when mounted outside.
        let app = axum::Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .route(
                "/who",
                get(|caller: Caller| async move { String::from(caller.id) }),
            )
            .layer(axum::middleware::from_fn_with_state(auth, require_caller))
            .route("/open", get(|| async { "open" }));
        let call = |path: &str, token: Option<&str>| {
            let mut req = axum::http::Request::builder().uri(path);
            if let Some(t) = token {
                req = req.header("authorization", format!("Bearer {t}"));
            }
            app.clone().oneshot(req.body(Body::empty()).unwrap())
        };
        assert_eq!(call("/open", None).await.unwrap().status(), 200);
        for (token, challenge) in [
            (None, "Bearer"),
            (Some("wrong"), "Bearer error=\"invalid_token\""),
        ] {
            for path in ["/who", "/healthz", "/unrouted"] {
                let resp = call(path, token).await.unwrap();
                assert_eq!(resp.status(), 401);
                assert_eq!(resp.headers()["www-authenticate"], challenge);
                let body = axum::body::to_bytes(resp.into_body(), 1 << 16)
                    .await
                    .unwrap();
                let body: Value = serde_json::from_slice(&body).unwrap();
                assert_eq!(body["error"]["code"], "unauthorized");
                assert!(!body.to_string().contains("wrong"));
            }
        }
        let resp = call("/who", Some("k-0123456789abcdef")).await.unwrap();
        assert_eq!(resp.status(), 200);
        let body = axum::body::to_bytes(resp.into_body(), 1 << 16)
            .await
            .unwrap();
        assert_eq!(&body[..], b"console");
    }
}
