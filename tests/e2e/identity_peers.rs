//! The identity test peers on their own, without the gateway (tests/identity/README.md): the
//! OAuth2 server issues, refuses and exchanges tokens as RFC 6749 / 7523 / 8693 say, the
//! reference agent's verifying front lets through only what it should, over https with a
//! client certificate from the test's own CA. The gateway's identity tests stand on these.

use std::time::Duration;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use crate::identity_support::*;
use crate::pki::{Pki, OTHER_NAME};
use crate::support::{root, wait_until};

/// The audience the agents of these tests want in a token.
const AUD: &str = "https://agent.e2e.test";

/// A caller's JWT for `sub`, signed with a TEST-ONLY key of `fixtures/auth/` (what the
/// gateway's inbound auth accepts, and what it exchanges).
fn caller_jwt(pem: &str, kid: &str, sub: &str) -> String {
    let pem = std::fs::read(root().join("fixtures/auth").join(pem)).unwrap();
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.to_owned());
    let exp = jsonwebtoken::get_current_timestamp() + 300;
    let claims = json!({"sub": sub, "iss": "https://issuer.e2e.test", "aud": "agui-a2a-gateway", "exp": exp});
    jsonwebtoken::encode(&header, &claims, &EncodingKey::from_rsa_pem(&pem).unwrap()).unwrap()
}

/// An RFC 7523 client assertion for [`CLIENT_ID`] to `aud`, signed with the PKI's ES256 key.
fn client_assertion(pki: &Pki, aud: &str, jti: &str) -> String {
    let key = EncodingKey::from_ec_pem(&std::fs::read(&pki.jwt_key).unwrap()).unwrap();
    let now = jsonwebtoken::get_current_timestamp();
    let claims = json!({"iss": CLIENT_ID, "sub": CLIENT_ID, "aud": aud, "jti": jti,
        "iat": now, "exp": now + 60});
    jsonwebtoken::encode(&Header::new(Algorithm::ES256), &claims, &key).unwrap()
}

async fn token_error(resp: reqwest::Response) -> (u16, Option<String>, Value) {
    let status = resp.status().as_u16();
    let challenge = resp
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, challenge, resp.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_credentials_token_opens_the_mtls_agent_and_nothing_else_does() {
    let pki = Pki::create();
    let idp = OauthServer::start(&OauthOptions::default());
    let agent = RefAgent::start(
        AgentFlags::new("both")
            .require_jwt(&idp.jwks_url(), AUD)
            .issuer(&idp.issuer)
            .card_security("oauth2")
            .tls(&pki, &pki.server)
            .mtls(&pki),
    );
    assert!(agent.url.starts_with("https://127.0.0.1:"), "{}", agent.url);

    // The card is open, lists https URLs of its own origin and declares OAuth2 (1.0 and 0.3).
    let card = agent.card().await;
    for interface in card["supportedInterfaces"].as_array().unwrap() {
        assert!(
            interface["url"].as_str().unwrap().starts_with(&agent.url),
            "{interface}"
        );
    }
    let flow = &card["securitySchemes"]["oauth2"]["oauth2SecurityScheme"]["flows"];
    assert_eq!(flow["clientCredentials"]["tokenUrl"], idp.token_url());
    assert_eq!(
        card["securityRequirements"][0]["schemes"]["oauth2"]["list"],
        json!(["agents.invoke"])
    );
    assert_eq!(card["security"], json!([{"oauth2": ["agents.invoke"]}]));

    // A token for the agent's audience, over mTLS: the agent sees the client as subject.
    let token = idp.client_credentials(AUD).await;
    let issued = claims(&token);
    assert_eq!(
        (issued["sub"].as_str(), issued["aud"].as_str()),
        (Some(CLIENT_ID), Some(AUD))
    );
    let (status, text) = agent.send_text(Some(&token), "whoami").await;
    assert_eq!((status, text.as_str()), (200, "you are agui-gateway"));
    assert_eq!(agent.subjects().await, [CLIENT_ID]);

    // No token, a token for another audience, a forced refusal: 401 with a Bearer challenge.
    let other = idp.client_credentials("https://other.e2e.test").await;
    for (bearer, reason) in [(None, "missing"), (Some(other.as_str()), "wrong audience")] {
        let resp = agent.rpc(bearer, "GetTask", json!({"id": "t"})).await;
        assert_eq!(resp.status(), 401, "{reason}");
        let challenge = resp.headers()["www-authenticate"].to_str().unwrap();
        assert!(challenge.starts_with("Bearer realm="), "{challenge}");
        assert_eq!(
            challenge.contains(r#"error="invalid_token""#),
            bearer.is_some()
        );
        assert_eq!(agent.seen().await.last().unwrap()["reason"], reason);
    }
    agent.unauthorize(1).await;
    assert_eq!(agent.send_text(Some(&token), "whoami").await.0, 401);
    assert_eq!(agent.send_text(Some(&token), "whoami").await.0, 200);
    let seen = agent.seen().await;
    let last: Vec<_> = seen[seen.len() - 2..]
        .iter()
        .map(|e| (e["status"].clone(), e["reason"].clone(), e["rpc"].clone()))
        .collect();
    assert_eq!(
        last,
        [
            (json!(401), json!("forced"), json!("SendMessage")),
            (json!(200), Value::Null, json!("SendMessage"))
        ]
    );

    // Without a client certificate, or with one from another CA, or trusting no test CA:
    // the handshake fails, nothing reaches the agent.
    let before = agent.seen().await.len();
    let card_url = format!("{}.well-known/agent-card.json", agent.url);
    for (what, client) in [
        ("no client certificate", pki.client(None)),
        (
            "a foreign client certificate",
            pki.client(Some(&pki.foreign_client)),
        ),
        ("the web roots only", reqwest::Client::new()),
    ] {
        let refused = client.get(&card_url).send().await;
        assert!(refused.is_err(), "{what}: {refused:?}");
    }
    assert_eq!(agent.seen().await.len(), before);
    assert_eq!(idp.token_requests("client_credentials").await, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_is_refused_from_its_expiry_on() {
    let idp = OauthServer::start(&OauthOptions::default());
    let agent = RefAgent::start(AgentFlags::new("1.0").require_jwt(&idp.jwks_url(), AUD));
    idp.set_expires_in(2).await;
    let token = idp.client_credentials(AUD).await;
    let exp = claims(&token)["exp"].as_u64().unwrap();
    assert_eq!(exp - claims(&token)["iat"].as_u64().unwrap(), 2);
    assert_eq!(agent.send_text(Some(&token), "echo fresh").await.0, 200);
    wait_until(
        "the agent refuses the expired token",
        Duration::from_secs(6),
        async || match agent.send_text(Some(&token), "echo late").await.0 {
            401 => Ok(()),
            other => Err(format!("status {other}")),
        },
    )
    .await;
    assert!(jsonwebtoken::get_current_timestamp() >= exp);
    assert_eq!(agent.seen().await.last().unwrap()["reason"], "expired");
    // A fresh token is accepted again.
    let fresh = idp.client_credentials(AUD).await;
    assert_eq!(agent.send_text(Some(&fresh), "echo again").await.0, 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn clients_are_authenticated_by_secret_or_private_key_jwt() {
    let pki = Pki::create();
    for public_key in [&pki.jwt_public_pem, &pki.jwt_public_jwk] {
        let idp = OauthServer::start(&OauthOptions {
            client_public_key: Some(public_key.clone()),
            ..Default::default()
        });
        let client = reqwest::Client::new();
        let post =
            |form: Vec<(&'static str, String)>| client.post(idp.token_url()).form(&form).send();
        let assertion = client_assertion(&pki, &idp.token_url(), "jti-1");
        let with_assertion = |a: &str| {
            vec![
                ("grant_type", "client_credentials".to_owned()),
                ("audience", AUD.to_owned()),
                ("client_assertion_type", JWT_BEARER_ASSERTION.to_owned()),
                ("client_assertion", a.to_owned()),
            ]
        };
        let ok = post(with_assertion(&assertion)).await.unwrap();
        assert_eq!(ok.status(), 200, "{}", public_key.display());
        let body: Value = ok.json().await.unwrap();
        assert_eq!(
            claims(body["access_token"].as_str().unwrap())["sub"],
            CLIENT_ID
        );
        assert_eq!(body["expires_in"], 60);

        // Replayed, for the issuer instead of the token endpoint (accepted), for another
        // audience, signed by another key: only the issuer one passes.
        let replay = post(with_assertion(&assertion)).await.unwrap();
        let (status, _, err) = token_error(replay).await;
        assert_eq!(
            (status, err["error"].as_str()),
            (401, Some("invalid_client")),
            "{err}"
        );
        let to_issuer = client_assertion(&pki, &idp.issuer, "jti-2");
        assert_eq!(
            post(with_assertion(&to_issuer)).await.unwrap().status(),
            200
        );
        let elsewhere = client_assertion(&pki, "https://elsewhere.test/token", "jti-3");
        let (status, _, _) = token_error(post(with_assertion(&elsewhere)).await.unwrap()).await;
        assert_eq!(status, 401);
        let other = Pki::create();
        let foreign = client_assertion(&other, &idp.token_url(), "jti-4");
        let (status, _, _) = token_error(post(with_assertion(&foreign)).await.unwrap()).await;
        assert_eq!(status, 401);
    }

    // The secret, in the Basic header or in the body; a wrong one is 401 invalid_client,
    // with a Basic challenge when Basic was tried (RFC 6749 5.2).
    let idp = OauthServer::start(&OauthOptions::default());
    let form = [
        ("grant_type", "client_credentials"),
        ("scope", "agents.invoke"),
    ];
    let ok: Value = idp.token_request(&form).await.json().await.unwrap();
    assert_eq!(ok["scope"], "agents.invoke");
    assert_eq!(
        claims(ok["access_token"].as_str().unwrap())["scope"],
        "agents.invoke"
    );
    let client = reqwest::Client::new();
    let post_secret = client
        .post(idp.token_url())
        .form(&[
            ("grant_type", "client_credentials"),
            ("client_id", CLIENT_ID),
            ("client_secret", CLIENT_SECRET),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(post_secret.status(), 200);
    let wrong = client
        .post(idp.token_url())
        .basic_auth(CLIENT_ID, Some("not-the-secret"))
        .form(&form)
        .send()
        .await
        .unwrap();
    let (status, challenge, err) = token_error(wrong).await;
    assert_eq!(
        (status, err["error"].as_str()),
        (401, Some("invalid_client"))
    );
    assert!(challenge.unwrap().starts_with("Basic"));
    let anonymous = client
        .post(idp.token_url())
        .form(&form)
        .send()
        .await
        .unwrap();
    assert_eq!(token_error(anonymous).await.2["error"], "invalid_client");
    assert!(!serde_json::to_string(&idp.stats().await)
        .unwrap()
        .contains(CLIENT_SECRET));
}

#[tokio::test(flavor = "multi_thread")]
async fn token_exchange_keeps_the_callers_subject_up_to_the_agent() {
    let idp = OauthServer::start(&OauthOptions {
        subject_jwks_file: Some(root().join("fixtures/auth/jwks.json")),
        ..Default::default()
    });
    let agent = RefAgent::start(AgentFlags::new("both").require_jwt(&idp.jwks_url(), AUD));
    let exchange = |subject: String| {
        let idp = &idp;
        async move {
            idp.token_request(&[
                ("grant_type", TOKEN_EXCHANGE),
                ("subject_token", &subject),
                ("subject_token_type", TOKEN_TYPE_JWT),
                ("audience", AUD),
            ])
            .await
        }
    };
    for user in ["alice", "bob"] {
        let resp = exchange(caller_jwt("test-rsa.pem", "test-rsa", user)).await;
        assert_eq!(resp.status(), 200);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(
            body["issued_token_type"],
            "urn:ietf:params:oauth:token-type:access_token"
        );
        let token = body["access_token"].as_str().unwrap();
        let c = claims(token);
        assert_eq!(
            (c["sub"].as_str(), c["aud"].as_str()),
            (Some(user), Some(AUD))
        );
        assert_eq!(c["act"], json!({"sub": CLIENT_ID}));
        let (status, text) = agent.send_text(Some(token), "whoami").await;
        assert_eq!((status, text), (200, format!("you are {user}")));
    }
    assert_eq!(agent.subjects().await, ["alice", "bob"]);
    // The server's own tokens are subject tokens too.
    let own = idp.mint(json!({"sub": "carol"})).await;
    assert_eq!(exchange(own).await.status(), 200);

    // A subject token signed by a key nobody trusts, or expired: invalid_request (RFC 8693
    // 2.2.2), and no token.
    let forged = caller_jwt("test-rsa-other.pem", "test-rsa", "mallory");
    let expired = idp.mint(json!({"sub": "dave", "expires_in": -30})).await;
    for subject in [forged, expired] {
        let (status, _, err) = token_error(exchange(subject).await).await;
        assert_eq!(
            (status, err["error"].as_str()),
            (400, Some("invalid_request")),
            "{err}"
        );
    }
    let stats = idp.stats().await;
    assert_eq!(stats["requests"][TOKEN_EXCHANGE], 5);
    assert_eq!(stats["issued"][TOKEN_EXCHANGE], 3);
    let subjects: Vec<_> = stats["log"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["subject_sub"].as_str())
        .collect();
    assert_eq!(subjects, ["alice", "bob", "carol"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rotated_bearer_file_is_honoured_at_once_and_unlocks_the_extended_card() {
    let pki = Pki::create();
    let file = pki.dir.path().join("agent-bearer");
    std::fs::write(&file, "first-bearer\n").unwrap();
    let agent = RefAgent::start(
        AgentFlags::new("both")
            .require_bearer(&file)
            .card_security("bearer")
            .extended_card(),
    );
    assert_eq!(
        agent.send_text(Some("first-bearer"), "echo one").await.0,
        200
    );
    std::fs::write(&file, "second-bearer").unwrap();
    assert_eq!(
        agent.send_text(Some("first-bearer"), "echo two").await.0,
        401
    );
    assert_eq!(
        agent.send_text(Some("second-bearer"), "echo two").await.0,
        200
    );

    // The public card says an extended one exists; only a caller with the bearer gets it.
    let card = agent.card().await;
    assert_eq!(card["capabilities"]["extendedAgentCard"], true);
    assert_eq!(card["supportsAuthenticatedExtendedCard"], true);
    let skills = |card: &Value| -> Vec<String> {
        card["skills"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(skills(&card), ["scripted"]);
    let refused = agent.rpc(None, "GetExtendedAgentCard", json!({})).await;
    assert_eq!(refused.status(), 401);
    let extended: Value = agent
        .rpc(Some("second-bearer"), "GetExtendedAgentCard", json!({}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(skills(&extended["result"]), ["scripted", "extended"]);

    // A 0.3-only agent declares the same the 0.3 way and serves its extended card on
    // agent/getAuthenticatedExtendedCard.
    let legacy = RefAgent::start(
        AgentFlags::new("0.3")
            .require_bearer(&file)
            .card_security("oauth2")
            .oauth_issuer("http://127.0.0.1:9")
            .extended_card(),
    );
    let card = legacy.card().await;
    assert_eq!(card["protocolVersion"], "0.3.0");
    assert_eq!(card["supportsAuthenticatedExtendedCard"], true);
    assert_eq!(card["security"], json!([{"oauth2": ["agents.invoke"]}]));
    let scheme = &card["securitySchemes"]["oauth2"];
    assert_eq!(scheme["type"], "oauth2");
    assert_eq!(
        scheme["flows"]["clientCredentials"]["tokenUrl"],
        "http://127.0.0.1:9/token"
    );
    let get_extended = |bearer: Option<&'static str>| {
        let mut req = legacy.client().post(&legacy.url).json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "agent/getAuthenticatedExtendedCard"}),
        );
        if let Some(b) = bearer {
            req = req.bearer_auth(b);
        }
        req.send()
    };
    assert_eq!(get_extended(None).await.unwrap().status(), 401);
    let extended: Value = get_extended(Some("second-bearer"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(skills(&extended["result"]), ["scripted", "extended"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn server_certificates_are_refused_for_the_reason_they_are_wrong() {
    let pki = Pki::create();
    let trusting = pki.client(None);
    for (what, cert) in [("expired", &pki.expired), ("unknown CA", &pki.unknown_ca)] {
        let agent = RefAgent::start(AgentFlags::new("1.0").tls(&pki, cert));
        let err = trusting
            .get(format!("{}.well-known/agent-card.json", agent.url))
            .send()
            .await
            .expect_err(what);
        let chain = format!("{err:?}");
        let expected = if what == "expired" {
            "Expired"
        } else {
            "UnknownIssuer"
        };
        assert!(chain.contains(expected), "{what}: {chain}");
        if what == "unknown CA" {
            // The certificate itself is sound: a client trusting its CA gets through.
            let root = std::fs::read(&pki.unknown_ca_root).unwrap();
            let resp = reqwest::Client::builder()
                .use_rustls_tls()
                .tls_built_in_root_certs(false)
                .add_root_certificate(reqwest::Certificate::from_pem(&root).unwrap())
                .build()
                .unwrap()
                .get(format!("{}.well-known/agent-card.json", agent.url))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
        }
    }
    // The certificate for another name: refused at 127.0.0.1, accepted under its name.
    let agent = RefAgent::start(AgentFlags::new("1.0").tls(&pki, &pki.other_name));
    let card = format!("{}.well-known/agent-card.json", agent.url);
    let err = trusting.get(&card).send().await.expect_err("name mismatch");
    assert!(format!("{err:?}").contains("NotValidForName"), "{err:?}");
    let addr: std::net::SocketAddr = agent.url["https://".len()..]
        .trim_end_matches('/')
        .parse()
        .unwrap();
    let by_name = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(
            reqwest::Certificate::from_pem(&std::fs::read(&pki.ca).unwrap()).unwrap(),
        )
        .resolve(OTHER_NAME, addr)
        .build()
        .unwrap();
    let resp = by_name
        .get(format!(
            "https://{OTHER_NAME}:{}/.well-known/agent-card.json",
            addr.port()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_token_endpoint_goes_down_and_comes_back_with_the_same_key() {
    let idp = OauthServer::start(&OauthOptions::default());
    let cc = [("grant_type", "client_credentials"), ("audience", AUD)];
    let kid = |jwks: &Value| jwks["keys"][0]["kid"].clone();
    let first_kid = kid(&idp.jwks().await);

    idp.down("close", None).await;
    let closed = reqwest::Client::new()
        .post(idp.token_url())
        .basic_auth(CLIENT_ID, Some(CLIENT_SECRET))
        .form(&cc)
        .send()
        .await;
    assert!(closed.is_err(), "{closed:?}");
    idp.down("503", Some(30.0)).await;
    let (status, _, err) = token_error(idp.token_request(&cc).await).await;
    assert_eq!(
        (status, err["error"].as_str()),
        (503, Some("temporarily_unavailable"))
    );
    idp.up().await;
    assert_eq!(idp.token_request(&cc).await.status(), 200);
    let stats = idp.stats().await;
    assert_eq!(
        stats["requests"]["client_credentials"], 3,
        "each try counted"
    );
    assert_eq!(stats["issued"]["client_credentials"], 1);
    assert_eq!(
        stats["refused"],
        json!({"down:close": 1, "down:503": 1}),
        "{stats}"
    );
    // An outage of a given length ends by itself.
    idp.down("503", Some(0.5)).await;
    assert_eq!(idp.token_request(&cc).await.status(), 503);
    wait_until(
        "the outage ends",
        Duration::from_secs(5),
        async || match idp.token_request(&cc).await.status().as_u16() {
            200 => Ok(()),
            other => Err(format!("status {other}")),
        },
    )
    .await;

    // Killed: connections refused; restarted on the same port, with the same key.
    let mut idp = idp;
    idp.kill();
    let gone = reqwest::Client::new()
        .post(idp.token_url())
        .form(&cc)
        .send()
        .await;
    assert!(gone.unwrap_err().is_connect());
    let issuer = idp.issuer.clone();
    idp.restart();
    assert_eq!(idp.issuer, issuer);
    assert_eq!(kid(&idp.jwks().await), first_kid);
    let token = idp.client_credentials(AUD).await;
    assert_eq!(claims(&token)["iss"], issuer.as_str());
    assert_eq!(
        idp.token_requests("client_credentials").await,
        1,
        "a new process counts anew"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn concurrent_token_requests_are_each_counted() {
    let idp = OauthServer::start(&OauthOptions::default());
    let form = [("grant_type", "client_credentials"), ("audience", AUD)];
    let all = futures::future::join_all((0..20).map(|_| idp.token_request(&form))).await;
    assert!(all.iter().all(|r| r.status() == 200));
    assert_eq!(idp.token_requests("client_credentials").await, 20);
    idp.reset_stats().await;
    assert_eq!(idp.token_requests("client_credentials").await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_api_key_agent_and_a_scope_demanding_agent_declare_and_check_what_they_need() {
    let pki = Pki::create();
    let key_file = pki.dir.path().join("agent-api-key");
    std::fs::write(&key_file, "e2e-agent-api-key").unwrap();
    let keyed = RefAgent::start(
        AgentFlags::new("1.0")
            .require_api_key(&key_file)
            .card_security("apikey"),
    );
    let scheme = &keyed.card().await["securitySchemes"]["apikey"]["apiKeySecurityScheme"];
    assert_eq!(
        (scheme["location"].as_str(), scheme["name"].as_str()),
        (Some("header"), Some("X-API-Key"))
    );
    let call = |key: Option<&'static str>| {
        let mut req = keyed
            .client()
            .post(&keyed.url)
            .header("A2A-Version", "1.0")
            .json(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "none"}}),
            );
        if let Some(k) = key {
            req = req.header("X-API-Key", k);
        }
        req.send()
    };
    assert_eq!(call(None).await.unwrap().status(), 401);
    assert_eq!(call(Some("wrong")).await.unwrap().status(), 401);
    // Through the check: the SDK answers (the task does not exist).
    assert_eq!(call(Some("e2e-agent-api-key")).await.unwrap().status(), 200);
    let seen = keyed.seen().await;
    assert_eq!(seen.last().unwrap()["auth"], "api-key");
    keyed.forget_seen().await;
    assert!(keyed.seen().await.is_empty());

    let idp = OauthServer::start(&OauthOptions::default());
    let scoped = RefAgent::start(
        AgentFlags::new("1.0")
            .require_jwt(&idp.jwks_url(), AUD)
            .require_scope("agents.invoke")
            .card_security("oidc")
            .oauth_issuer(&idp.issuer),
    );
    let card = scoped.card().await;
    let discovery = card["securitySchemes"]["oidc"]["openIdConnectSecurityScheme"]
        ["openIdConnectUrl"]
        .as_str()
        .unwrap()
        .to_owned();
    let config: Value = reqwest::get(&discovery)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(config["token_endpoint"], idp.token_url());
    assert!(config["token_endpoint_auth_methods_supported"]
        .as_array()
        .unwrap()
        .contains(&json!("private_key_jwt")));
    let unscoped = idp.client_credentials(AUD).await;
    assert_eq!(scoped.send_text(Some(&unscoped), "echo x").await.0, 401);
    assert_eq!(
        scoped.seen().await.last().unwrap()["reason"],
        "insufficient scope"
    );
    let resp = idp
        .token_request(&[
            ("grant_type", "client_credentials"),
            ("audience", AUD),
            ("scope", "agents.invoke"),
        ])
        .await;
    let body: Value = resp.json().await.unwrap();
    let token = body["access_token"].as_str().unwrap();
    assert_eq!(
        scoped.send_text(Some(token), "echo x").await,
        (200, "x".to_owned())
    );
}
