//! The token endpoint client against the `oauth2` crate (pinned), the reference for OAuth2
//! client credentials (RFC 6749 §4.4): both send their requests to the same capture server
//! ([`super::test_idp`]), which must see the same parameters and client authentication, and
//! both read the same corpus of token responses, which they must accept or refuse alike.
//!
//! Where they differ on purpose, the corpus says so ([`Verdict::Stricter`], [`Verdict::Laxer`]),
//! and the test checks the difference is still there: a change in either is noticed.
//! `oauth2` leaves the token type to its caller (it parses `mac` and extensions); the gateway
//! sends only bearer tokens, so "oauth2 accepts" here means it parsed a Bearer token.

use oauth2::basic::{BasicClient, BasicTokenType};
use oauth2::{ClientId, ClientSecret, Scope, TokenResponse as _, TokenUrl};

use super::endpoint::{Grant, TokenClient};
use super::test_idp::{self, Idp, Reply};

const ID: &str = "gw id+plus&amp";
const SECRET: &str = "s3cr:t=%25 &+";

/// Whether the gateway agrees with `oauth2` on a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Both accept (`true`) or both refuse.
    Agree(bool),
    /// The gateway refuses what `oauth2` accepts.
    Stricter,
    /// The gateway accepts what `oauth2` refuses.
    Laxer,
}

fn ours(idp: &Idp) -> TokenClient {
    idp.client(test_idp::secret_auth(ID, SECRET))
}

/// `oauth2`'s client credentials request with the same settings as [`ours`].
async fn reference(idp: &Idp) -> Result<String, String> {
    let endpoint = idp.endpoint(test_idp::secret_auth(ID, SECRET));
    let client = BasicClient::new(ClientId::new(ID.into()))
        .set_client_secret(ClientSecret::new(SECRET.into()))
        .set_token_uri(TokenUrl::new(idp.token_url().to_string()).unwrap());
    let mut request = client
        .exchange_client_credentials()
        .add_scopes(endpoint.scopes.iter().cloned().map(Scope::new));
    for (name, value) in [
        ("audience", &endpoint.audience),
        ("resource", &endpoint.resource),
    ] {
        if let Some(v) = value {
            request = request.add_extra_param(name, v.clone());
        }
    }
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    match request.request_async(&http).await {
        Ok(token) if *token.token_type() == BasicTokenType::Bearer => {
            Ok(token.access_token().secret().clone())
        }
        Ok(token) => Err(format!("token type {:?}", token.token_type())),
        Err(e) => Err(e.to_string()),
    }
}

#[tokio::test]
async fn client_credentials_send_what_oauth2_sends() {
    let idp = Idp::start().await;
    ours(&idp).request(Grant::ClientCredentials).await.unwrap();
    reference(&idp).await.unwrap();
    let seen = idp.requests();
    let (a, b) = (&seen[0], &seen[1]);
    assert_eq!(a.form, b.form, "the same parameters");
    assert_eq!(a.basic, b.basic, "the same client authentication");
    assert_eq!(
        a.basic.as_ref().unwrap(),
        &(ID.to_owned(), SECRET.to_owned())
    );
    assert_eq!(a.content_type, b.content_type);
}

#[tokio::test]
async fn token_responses_are_accepted_and_refused_alike() {
    use Verdict::*;
    let json = |body: &str| Reply::Json(200, body.to_owned());
    let corpus: Vec<(&str, Reply, Verdict)> = vec![
        (
            "plain",
            json(r#"{"access_token":"a","token_type":"Bearer","expires_in":60}"#),
            Agree(true),
        ),
        (
            "type in any case",
            json(r#"{"access_token":"a","token_type":"BEARER"}"#),
            Agree(true),
        ),
        (
            "no expires_in",
            json(r#"{"access_token":"a","token_type":"bearer"}"#),
            Agree(true),
        ),
        (
            "null expires_in",
            json(r#"{"access_token":"a","token_type":"bearer","expires_in":null}"#),
            Agree(true),
        ),
        (
            "extra members",
            json(r#"{"access_token":"a","token_type":"bearer","refresh_token":"r","x":[1]}"#),
            Agree(true),
        ),
        (
            "expires_in u64::MAX",
            json(r#"{"access_token":"a","token_type":"bearer","expires_in":18446744073709551615}"#),
            Agree(true),
        ),
        (
            "no access_token",
            json(r#"{"token_type":"bearer","expires_in":60}"#),
            Agree(false),
        ),
        (
            "access_token a number",
            json(r#"{"access_token":7,"token_type":"bearer"}"#),
            Agree(false),
        ),
        (
            "no token_type",
            json(r#"{"access_token":"a"}"#),
            Agree(false),
        ),
        (
            "token_type mac",
            json(r#"{"access_token":"a","token_type":"mac"}"#),
            Agree(false),
        ),
        (
            "token_type N_A",
            json(r#"{"access_token":"a","token_type":"N_A"}"#),
            Agree(false),
        ),
        (
            "expires_in a string",
            json(r#"{"access_token":"a","token_type":"bearer","expires_in":"60"}"#),
            Agree(false),
        ),
        (
            "expires_in negative",
            json(r#"{"access_token":"a","token_type":"bearer","expires_in":-5}"#),
            Agree(false),
        ),
        (
            "expires_in a fraction",
            json(r#"{"access_token":"a","token_type":"bearer","expires_in":1.5}"#),
            Agree(false),
        ),
        (
            "expires_in past u64",
            json(r#"{"access_token":"a","token_type":"bearer","expires_in":1e20}"#),
            Agree(false),
        ),
        (
            "not JSON",
            json("access_token=a&token_type=bearer"),
            Agree(false),
        ),
        (
            "a JSON array",
            json(r#"[{"access_token":"a","token_type":"bearer"}]"#),
            Agree(false),
        ),
        (
            "an error",
            Reply::Json(400, r#"{"error":"invalid_client"}"#.into()),
            Agree(false),
        ),
        (
            "a token with a 201",
            Reply::Json(201, r#"{"access_token":"a","token_type":"bearer"}"#.into()),
            Agree(false),
        ),
        (
            "a server error",
            Reply::Status(500, "oops".into()),
            Agree(false),
        ),
        ("a redirect", Reply::Redirect, Agree(false)),
        // The gateway could never send these as a header value.
        (
            "empty access_token",
            json(r#"{"access_token":"","token_type":"bearer"}"#),
            Stricter,
        ),
        (
            "access_token with a newline",
            json(r#"{"access_token":"a\nb","token_type":"bearer"}"#),
            Stricter,
        ),
        // The gateway ignores `scope` (the agent decides what the token allows); oauth2
        // parses it and refuses an array.
        (
            "scope an array",
            json(r#"{"access_token":"a","token_type":"bearer","scope":["x"]}"#),
            Laxer,
        ),
        // The gateway reads the body as JSON whatever its media type; oauth2 refuses a
        // declared type other than JSON.
        (
            "JSON served as text/plain",
            Reply::Status(200, r#"{"access_token":"a","token_type":"bearer"}"#.into()),
            Laxer,
        ),
        // oauth2 reads a body of any size.
        (
            "a body over 64 KiB",
            json(&format!(
                r#"{{"access_token":"a","token_type":"bearer","pad":"{}"}}"#,
                "x".repeat(super::endpoint::MAX_RESPONSE_BYTES)
            )),
            Stricter,
        ),
    ];
    let idp = Idp::start().await;
    let mut wrong = Vec::new();
    for (name, reply, verdict) in corpus {
        idp.set(reply);
        let we = ours(&idp).request(Grant::ClientCredentials).await.is_ok();
        let they = reference(&idp).await.is_ok();
        let seen = match (we, they) {
            (true, true) | (false, false) => Agree(we),
            (false, true) => Stricter,
            (true, false) => Laxer,
        };
        if seen != verdict {
            wrong.push(format!(
                "{name}: expected {verdict:?}, saw {seen:?} (ours {we}, oauth2 {they})"
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
