//! The token endpoint client: the one home of the requests the gateway makes to an
//! authorization server (docs/security.md#upstream-credentials) — OAuth2 client credentials
//! (RFC 6749 §4.4) and token exchange (RFC 8693 §2.1) — and of reading their answers.
//!
//! Own code rather than the `oauth2` crate: that crate has no RFC 8693 grant (a token
//! exchange would be hand-built beside it anyway), and its reqwest client reads a response
//! body whole with no size bound (a hostile or broken endpoint could make the gateway buffer
//! without limit). `differential_tests` checks that for client credentials both send the same
//! parameters and client authentication and agree on which token responses are usable, with
//! the differences listed there.
//!
//! Invariants:
//! - Client authentication is `client_secret_basic` (RFC 6749 §2.3.1: id and secret each
//!   form-urlencoded, then Basic) or `private_key_jwt` (RFC 7523 §2.2: a fresh assertion per
//!   request, `iss` = `sub` = client id, `aud` = the token URL, a random `jti`, valid for
//!   [`ASSERTION_LIFETIME`]).
//! - Each request is bounded by `timeouts.upstream_call` (head and body) and its answer by
//!   [`MAX_RESPONSE_BYTES`]; redirects are not followed (the agent's client follows none).
//! - A usable answer is a JSON object with a non-empty `access_token` that fits a header,
//!   `token_type` Bearer (any case; RFC 6750), and `expires_in` a non-negative integer or
//!   absent ([`DEFAULT_LIFETIME`] then, RFC 6749 §5.1 leaves it to the server's documentation),
//!   cut to [`MAX_LIFETIME`].
//! - An error names the HTTP status and the RFC 6749 §5.2 `error` code when it is a short
//!   token; never the body, never `error_description`, never a token or secret.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use reqwest::header::{HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::Value;

use crate::config::upstream::{ClientAuth, TokenEndpoint};

/// A token endpoint's answer larger than this is refused (a token response is a few KiB).
pub(crate) const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// The lifetime of a token whose answer has no `expires_in`.
pub(crate) const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);
/// A longer `expires_in` is taken as this: the token is fetched again at least daily.
pub(crate) const MAX_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// How long a `private_key_jwt` client assertion is valid.
pub(crate) const ASSERTION_LIFETIME: Duration = Duration::from_secs(60);
/// The longest RFC 6749 §5.2 `error` code shown.
const MAX_ERROR_CODE: usize = 64;

/// RFC 6749 §4.4.2.
const GRANT_CLIENT_CREDENTIALS: &str = "client_credentials";
/// RFC 8693 §2.1.
const GRANT_TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// RFC 8693 §3: what the gateway asks for.
const TOKEN_TYPE_ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";
/// RFC 7523 §2.2.
const ASSERTION_TYPE_JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// What the gateway asks a token endpoint for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Grant<'a> {
    /// RFC 6749 §4.4: a token for the gateway itself.
    ClientCredentials,
    /// RFC 8693: a token for the caller whose JWT `subject_token` is.
    TokenExchange { subject_token: &'a str },
}

/// A token the endpoint issued: the `Authorization` value to send and how long it lives.
#[derive(Clone)]
pub(crate) struct Issued {
    /// `Bearer <access_token>`, marked sensitive.
    pub(crate) authorization: HeaderValue,
    pub(crate) lifetime: Duration,
}

impl std::fmt::Debug for Issued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issued")
            .field("authorization", &"[redacted]")
            .field("lifetime", &self.lifetime)
            .finish()
    }
}

/// One configured token endpoint, called with the agent's HTTP client.
#[derive(Debug, Clone)]
pub(crate) struct TokenClient {
    endpoint: TokenEndpoint,
    http: reqwest::Client,
    /// `timeouts.upstream_call`.
    timeout: Duration,
}

impl TokenClient {
    pub(crate) fn new(endpoint: TokenEndpoint, http: reqwest::Client, timeout: Duration) -> Self {
        Self {
            endpoint,
            http,
            timeout,
        }
    }

    /// Asks the endpoint for a token. `Err`: why none was issued (no secret, no body).
    pub(crate) async fn request(&self, grant: Grant<'_>) -> Result<Issued, String> {
        let (form, authorization) = self.form(grant)?;
        let mut req = self
            .http
            .post(self.endpoint.token_url.clone())
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ACCEPT, "application/json")
            .body(form)
            .timeout(self.timeout);
        if let Some(value) = authorization {
            req = req.header(AUTHORIZATION, value);
        }
        let answer = async {
            let resp = req.send().await.map_err(|e| {
                let e = e.without_url();
                if e.is_timeout() {
                    self.timed_out()
                } else {
                    format!(
                        "the token endpoint cannot be reached: {}",
                        crate::a2a::client::describe(&e)
                    )
                }
            })?;
            let status = resp.status().as_u16();
            let body = crate::a2a::client::read_limited(resp, MAX_RESPONSE_BYTES, None)
                .await
                .map_err(|e| match e {
                    crate::a2a::errors::ClientError::EventTooLarge { .. } => {
                        format!("the token endpoint answered more than {MAX_RESPONSE_BYTES} bytes")
                    }
                    _ => "the token endpoint's answer broke off".to_owned(),
                })?;
            parse_response(status, &body)
        };
        tokio::time::timeout(self.timeout, answer)
            .await
            .unwrap_or_else(|_| Err(self.timed_out()))
    }

    fn timed_out(&self) -> String {
        format!(
            "the token endpoint did not answer within timeouts.upstream_call ({} ms)",
            self.timeout.as_millis()
        )
    }

    /// The request body of `grant`, form-urlencoded, and the `Authorization` header of
    /// `client_secret_basic`.
    pub(crate) fn form(&self, grant: Grant<'_>) -> Result<(String, Option<HeaderValue>), String> {
        let e = &self.endpoint;
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        match grant {
            Grant::ClientCredentials => {
                form.append_pair("grant_type", GRANT_CLIENT_CREDENTIALS);
            }
            Grant::TokenExchange { subject_token } => {
                form.append_pair("grant_type", GRANT_TOKEN_EXCHANGE)
                    .append_pair("subject_token", subject_token)
                    .append_pair("subject_token_type", e.subject_token_type.uri())
                    .append_pair("requested_token_type", TOKEN_TYPE_ACCESS_TOKEN);
            }
        }
        if !e.scopes.is_empty() {
            form.append_pair("scope", &e.scopes.join(" "));
        }
        if let Some(audience) = &e.audience {
            form.append_pair("audience", audience);
        }
        if let Some(resource) = &e.resource {
            form.append_pair("resource", resource);
        }
        let authorization = match &e.client_auth {
            ClientAuth::Secret(secret) => {
                let id: String =
                    url::form_urlencoded::byte_serialize(e.client_id.as_bytes()).collect();
                let secret: String =
                    url::form_urlencoded::byte_serialize(secret.expose().as_bytes()).collect();
                let basic =
                    base64::engine::general_purpose::STANDARD.encode(format!("{id}:{secret}"));
                let mut value = HeaderValue::from_str(&format!("Basic {basic}"))
                    .map_err(|_| "the client credentials do not fit a header".to_owned())?;
                value.set_sensitive(true);
                Some(value)
            }
            ClientAuth::PrivateKeyJwt { key, algorithm } => {
                let assertion = self.assertion(key, *algorithm)?;
                form.append_pair("client_id", &e.client_id)
                    .append_pair("client_assertion_type", ASSERTION_TYPE_JWT_BEARER)
                    .append_pair("client_assertion", &assertion);
                None
            }
        };
        Ok((form.finish(), authorization))
    }

    /// An RFC 7523 §2.2 client assertion, valid for [`ASSERTION_LIFETIME`].
    fn assertion(
        &self,
        key: &jsonwebtoken::EncodingKey,
        algorithm: jsonwebtoken::Algorithm,
    ) -> Result<String, String> {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let id = &self.endpoint.client_id;
        let claims = serde_json::json!({
            "iss": id,
            "sub": id,
            "aud": self.endpoint.token_url.as_str(),
            "jti": uuid::Uuid::new_v4().to_string(),
            "iat": now,
            "exp": now + ASSERTION_LIFETIME.as_secs(),
        });
        jsonwebtoken::encode(&jsonwebtoken::Header::new(algorithm), &claims, key)
            .map_err(|_| "the client assertion could not be signed".to_owned())
    }
}

/// The token of an answer with HTTP `status` and `body` (RFC 6749 §5.1, §5.2).
pub(crate) fn parse_response(status: u16, body: &[u8]) -> Result<Issued, String> {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    // RFC 6749 §5.1: a token comes with 200 OK.
    if status != 200 {
        let code = json
            .as_ref()
            .and_then(|j| j.get("error"))
            .and_then(Value::as_str)
            .filter(|c| is_error_code(c));
        return Err(match code {
            Some(code) => format!("the token endpoint refused the request: {code} (HTTP {status})"),
            None => format!("the token endpoint refused the request (HTTP {status})"),
        });
    }
    let invalid =
        |what: &str| format!("the token endpoint's answer is not a usable token response: {what}");
    let Some(Value::Object(answer)) = json else {
        return Err(invalid("not a JSON object"));
    };
    let token = match answer.get("access_token") {
        Some(Value::String(t)) if !t.is_empty() => t,
        _ => return Err(invalid("no access_token")),
    };
    match answer.get("token_type") {
        Some(Value::String(t)) if t.eq_ignore_ascii_case("bearer") => {}
        _ => return Err(invalid("token_type is not Bearer")),
    }
    let lifetime = match answer.get("expires_in") {
        None | Some(Value::Null) => DEFAULT_LIFETIME,
        Some(Value::Number(n)) => match n.as_u64() {
            Some(s) => Duration::from_secs(s).min(MAX_LIFETIME),
            None => return Err(invalid("expires_in is not a non-negative integer")),
        },
        Some(_) => return Err(invalid("expires_in is not a number")),
    };
    let mut authorization = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| invalid("the access_token does not fit a header"))?;
    authorization.set_sensitive(true);
    Ok(Issued {
        authorization,
        lifetime,
    })
}

/// An RFC 6749 §5.2 `error` code worth showing: a short token of letters, digits and `_.-`
/// (every registered code is one), so an answer cannot put text of its choosing in a log.
fn is_error_code(code: &str) -> bool {
    !code.is_empty()
        && code.len() <= MAX_ERROR_CODE
        && code
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::credentials::test_idp::{self, Idp, Reply};

    #[test]
    fn token_responses_are_read_strictly() {
        let ok = parse_response(
            200,
            br#"{"access_token":"t-1","token_type":"bearer","expires_in":120}"#,
        )
        .unwrap();
        assert_eq!(ok.authorization, "Bearer t-1");
        assert!(ok.authorization.is_sensitive());
        assert_eq!(ok.lifetime, Duration::from_secs(120));
        let no_expiry =
            parse_response(200, br#"{"access_token":"t","token_type":"Bearer"}"#).unwrap();
        assert_eq!(no_expiry.lifetime, DEFAULT_LIFETIME);
        let huge = parse_response(
            200,
            br#"{"access_token":"t","token_type":"Bearer","expires_in":18446744073709551615}"#,
        )
        .unwrap();
        assert_eq!(huge.lifetime, MAX_LIFETIME);
        for (body, why) in [
            (&br#"{"token_type":"Bearer"}"#[..], "no access_token"),
            (
                br#"{"access_token":"","token_type":"Bearer"}"#,
                "no access_token",
            ),
            (
                br#"{"access_token":7,"token_type":"Bearer"}"#,
                "no access_token",
            ),
            (br#"{"access_token":"t","token_type":"mac"}"#, "Bearer"),
            (br#"{"access_token":"t"}"#, "Bearer"),
            (
                br#"{"access_token":"t","token_type":"Bearer","expires_in":"60"}"#,
                "number",
            ),
            (
                br#"{"access_token":"t","token_type":"Bearer","expires_in":-1}"#,
                "non-negative",
            ),
            (
                br#"{"access_token":"t","token_type":"Bearer","expires_in":1.5}"#,
                "non-negative",
            ),
            (
                br#"{"access_token":"a\nb","token_type":"Bearer"}"#,
                "header",
            ),
            (br#"["access_token"]"#, "JSON object"),
            (b"access_token=t", "JSON object"),
        ] {
            let e = parse_response(200, body).unwrap_err();
            assert!(e.contains(why), "{}: {e}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn error_answers_show_the_code_and_nothing_else() {
        let e = parse_response(
            401,
            br#"{"error":"invalid_client","error_description":"secret hunter2 is wrong"}"#,
        )
        .unwrap_err();
        assert_eq!(
            e,
            "the token endpoint refused the request: invalid_client (HTTP 401)"
        );
        for body in [
            &br#"{"error":"bad\ncode forged: line"}"#[..],
            b"<html>hunter2</html>",
            br#"{"error":7}"#,
        ] {
            let e = parse_response(400, body).unwrap_err();
            assert!(!e.contains("hunter2") && !e.contains('\n'), "{e}");
            assert!(e.ends_with("(HTTP 400)"), "{e}");
        }
        let long = format!(r#"{{"error":"{}"}}"#, "e".repeat(MAX_ERROR_CODE + 1));
        let e = parse_response(400, long.as_bytes()).unwrap_err();
        assert_eq!(e, "the token endpoint refused the request (HTTP 400)");
    }

    #[tokio::test]
    async fn client_credentials_with_a_secret_send_the_rfc_6749_form() {
        let idp = Idp::start().await;
        let client = idp.client(test_idp::secret_auth("id with space", "s3cr:t&"));
        let issued = client.request(Grant::ClientCredentials).await.unwrap();
        assert_eq!(issued.authorization, "Bearer token-1");
        let seen = idp.requests();
        assert_eq!(seen.len(), 1);
        let form = &seen[0].form;
        assert_eq!(form["grant_type"], "client_credentials");
        assert_eq!(form["scope"], "agents.invoke agents.read");
        assert_eq!(form["audience"], "https://agent.test");
        assert_eq!(form["resource"], "https://agent.test/a2a");
        assert!(!form.contains_key("client_id") && !form.contains_key("client_secret"));
        assert_eq!(
            seen[0].basic.as_ref().unwrap(),
            &("id with space".to_owned(), "s3cr:t&".to_owned())
        );
        assert_eq!(seen[0].content_type, "application/x-www-form-urlencoded");
    }

    #[tokio::test]
    async fn token_exchange_sends_the_rfc_8693_form() {
        let idp = Idp::start().await;
        let client = idp.client(test_idp::secret_auth("gw", "pw"));
        client
            .request(Grant::TokenExchange {
                subject_token: "caller.jwt.value",
            })
            .await
            .unwrap();
        let form = &idp.requests()[0].form;
        assert_eq!(form["grant_type"], GRANT_TOKEN_EXCHANGE);
        assert_eq!(form["subject_token"], "caller.jwt.value");
        assert_eq!(
            form["subject_token_type"], "urn:ietf:params:oauth:token-type:access_token",
            "the default: what Keycloak's and Okta's exchanges take"
        );
        assert_eq!(form["requested_token_type"], TOKEN_TYPE_ACCESS_TOKEN);
        assert_eq!(form["audience"], "https://agent.test");
    }

    /// The claims of `assertion` verified with the public key `kid`, for the audience `aud`.
    fn verified(
        assertion: &str,
        kid: &str,
        alg: jsonwebtoken::Algorithm,
        aud: &url::Url,
    ) -> Result<Value, jsonwebtoken::errors::Error> {
        let mut validation = jsonwebtoken::Validation::new(alg);
        validation.set_audience(&[aud.as_str()]);
        validation.set_issuer(&["gw-client"]);
        validation.set_required_spec_claims(&["exp", "iss", "sub", "aud"]);
        jsonwebtoken::decode::<Value>(assertion, &test_idp::decoding_key(kid), &validation)
            .map(|t| t.claims)
    }

    #[tokio::test]
    async fn private_key_jwt_assertions_verify_against_the_public_key() {
        let idp = Idp::start().await;
        for (pem, kid, alg) in [
            ("test-rsa.pem", "test-rsa", jsonwebtoken::Algorithm::RS256),
            ("test-ec.pem", "test-ec", jsonwebtoken::Algorithm::ES256),
        ] {
            let client = idp.client(test_idp::key_auth(pem));
            client.request(Grant::ClientCredentials).await.unwrap();
            let seen = idp.requests().pop().unwrap();
            assert!(seen.basic.is_none());
            let form = &seen.form;
            assert_eq!(form["client_id"], "gw-client");
            assert_eq!(form["client_assertion_type"], ASSERTION_TYPE_JWT_BEARER);
            let claims = verified(&form["client_assertion"], kid, alg, idp.token_url()).unwrap();
            assert_eq!(claims["sub"], "gw-client");
            let (iat, exp) = (
                claims["iat"].as_u64().unwrap(),
                claims["exp"].as_u64().unwrap(),
            );
            assert_eq!(exp - iat, ASSERTION_LIFETIME.as_secs());
            assert!(claims["jti"].as_str().is_some_and(|j| j.len() >= 32));
        }
        // Signed by another key, it does not verify against the public key.
        let client = idp.client(test_idp::key_auth("test-rsa-other.pem"));
        client.request(Grant::ClientCredentials).await.unwrap();
        let other = idp.requests().pop().unwrap().form["client_assertion"].clone();
        let alg = jsonwebtoken::Algorithm::RS256;
        assert!(verified(&other, "test-rsa", alg, idp.token_url()).is_err());
        // Every assertion is new.
        let client = idp.client(test_idp::key_auth("test-rsa.pem"));
        client.request(Grant::ClientCredentials).await.unwrap();
        client.request(Grant::ClientCredentials).await.unwrap();
        let seen = idp.requests();
        let n = seen.len();
        assert_ne!(
            seen[n - 1].form["client_assertion"],
            seen[n - 2].form["client_assertion"]
        );
    }

    #[tokio::test]
    async fn failures_are_bounded_and_never_echo_the_body() {
        let idp = Idp::start().await;
        let client = idp.client(test_idp::secret_auth("gw", "client-secret-value"));
        idp.set(Reply::Status(
            400,
            r#"{"error":"invalid_scope","error_description":"client-secret-value"}"#.into(),
        ));
        let e = client.request(Grant::ClientCredentials).await.unwrap_err();
        assert_eq!(
            e,
            "the token endpoint refused the request: invalid_scope (HTTP 400)"
        );
        idp.set(Reply::Status(500, "client-secret-value token-1".into()));
        let e = client.request(Grant::ClientCredentials).await.unwrap_err();
        assert_eq!(e, "the token endpoint refused the request (HTTP 500)");
        idp.set(Reply::Huge);
        let e = client.request(Grant::ClientCredentials).await.unwrap_err();
        assert!(e.contains("more than 65536 bytes"), "{e}");
        idp.set(Reply::Hang);
        let e = client.request(Grant::ClientCredentials).await.unwrap_err();
        assert!(e.contains("timeouts.upstream_call"), "{e}");
        idp.set(Reply::Redirect);
        let e = client.request(Grant::ClientCredentials).await.unwrap_err();
        assert_eq!(e, "the token endpoint refused the request (HTTP 307)");
        assert_eq!(idp.requests().len(), 5, "the redirect was not followed");
        let down = test_idp::down_client(test_idp::secret_auth("gw", "client-secret-value")).await;
        let e = down.request(Grant::ClientCredentials).await.unwrap_err();
        assert!(e.starts_with("the token endpoint cannot be reached"), "{e}");
        assert!(!e.contains("127.0.0.1"), "no URL: {e}");
    }
}
