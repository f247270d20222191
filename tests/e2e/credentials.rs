//! Upstream credentials end to end (docs/security.md#upstream-credentials): the gateway
//! against a real OAuth2 server issuing tokens that expire in seconds and a reference agent
//! that refuses expired, wrong-audience or missing tokens (tests/identity/README.md). OAuth2
//! client credentials across an expiry, fifty runs and one token request, a forced 401
//! recovered, the token endpoint down and back, token exchange and the caller's own token
//! per caller, a rotated bearer file, and nothing secret in anything the gateway says.

use std::time::Duration;

use serde_json::{json, Value};

use crate::binary::{Launch, TempDir};
use crate::identity_support::*;
use crate::support::*;

/// The audience the agents of these tests want in a token.
const AUD: &str = "https://agent.e2e.test";
/// The gateway's inbound JWT settings for callers signed with `fixtures/auth` keys.
const CALLER_ISS: &str = "https://issuer.e2e.test";
const CALLER_AUD: &str = "agui-a2a-gateway";
/// An inbound API key (a caller without a JWT). TEST-ONLY.
const API_KEY: &str = "e2e-api-key-0123456789";

fn unix_now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// A caller's JWT for `sub`, signed with the TEST-ONLY key `fixtures/auth/test-rsa.pem`:
/// what the gateway's inbound auth ([`caller_auth`]) accepts.
fn caller_jwt(sub: &str) -> String {
    use jsonwebtoken::{Algorithm, EncodingKey, Header};
    let pem = std::fs::read(root().join("fixtures/auth/test-rsa.pem")).unwrap();
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some("test-rsa".into());
    let claims = json!({"sub": sub, "iss": CALLER_ISS, "aud": CALLER_AUD,
        "exp": unix_now() + 300});
    jsonwebtoken::encode(&header, &claims, &EncodingKey::from_rsa_pem(&pem).unwrap()).unwrap()
}

/// Inbound auth: JWTs of `fixtures/auth` keys, and one API key.
fn caller_auth() -> Value {
    json!({"jwt": {"issuer": CALLER_ISS, "audience": CALLER_AUD,
            "jwks_file": root().join("fixtures/auth/jwks.json")},
        "api_keys": [{"name": "ci", "key": API_KEY}]})
}

/// `credentials.<kind>` pointing at `idp` with the helpers' client.
fn endpoint(idp: &OauthServer) -> Value {
    json!({"token_url": idp.token_url(), "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET, "audience": AUD})
}

/// A gateway with the one agent `secure` at `agent` with `credentials`, and `auth` if any.
async fn gateway(agent: &RefAgent, credentials: Value, auth: Option<Value>) -> Gateway {
    let mut config = json!({"agents": [{"name": "secure", "url": agent.url,
        "credentials": credentials}]});
    if let Some(auth) = auth {
        config["auth"] = auth;
    }
    Gateway::start(&config.to_string(), false).await
}

/// An agent taking only `idp`'s JWTs for [`AUD`].
fn jwt_agent(idp: &OauthServer) -> RefAgent {
    RefAgent::start(
        AgentFlags::new("both")
            .require_jwt(&idp.jwks_url(), AUD)
            .issuer(&idp.issuer),
    )
}

/// A run of `text` on `url` as the caller with `bearer` (if any), read to its end.
async fn run_as(url: &str, bearer: Option<&str>, thread: &str, text: &str) -> SseRun {
    let started = std::time::Instant::now();
    let mut req = reqwest::Client::new()
        .post(url)
        .json(&run_input(thread, text));
    if let Some(b) = bearer {
        req = req.bearer_auth(b);
    }
    let resp = tokio::time::timeout(Duration::from_secs(30), req.send())
        .await
        .expect("the run answered")
        .unwrap();
    let status = resp.status().as_u16();
    let raw = tokio::time::timeout(Duration::from_secs(30), resp.text())
        .await
        .expect("the run ended")
        .unwrap();
    SseRun {
        status,
        events: if status == 200 {
            sse_events(&raw)
        } else {
            vec![]
        },
        raw,
        elapsed: started.elapsed(),
        cut: None,
    }
}

/// The last assistant text of a finished run.
fn reply(run: &SseRun) -> String {
    assert_run_finished(run);
    let mut text = String::new();
    for e in &run.events {
        match e["type"].as_str() {
            // A final status message comes in the snapshot that opens the run's text.
            Some("MESSAGES_SNAPSHOT") => {
                let messages = e["messages"].as_array().unwrap();
                if let Some(last) = messages.iter().rev().find(|m| m["role"] == "assistant") {
                    text = last["content"].as_str().unwrap_or_default().to_owned();
                }
            }
            Some("TEXT_MESSAGE_START") => text.clear(),
            Some("TEXT_MESSAGE_CONTENT") => text.push_str(e["delta"].as_str().unwrap()),
            _ => {}
        }
    }
    text.trim().to_owned()
}

/// What the agent saw of `rpc` calls let through, oldest first: the tokens sent.
async fn tokens_of(agent: &RefAgent, rpc: &str) -> Vec<String> {
    agent
        .seen()
        .await
        .iter()
        .filter(|e| e["rpc"] == rpc && e["status"] == 200)
        .map(|e| e["token"].as_str().unwrap().to_owned())
        .collect()
}

/// Waits until unix time is past `token`'s `exp` by a second (`exp` counts whole seconds):
/// the gateway holds it expired by then.
async fn until_expired(token: &str) {
    let exp = claims(token)["exp"].as_u64().unwrap();
    wait_until(
        "the token has expired",
        Duration::from_secs(90),
        async || match unix_now() {
            now if now > exp => Ok(()),
            now => Err(format!("now {now}, exp {exp}")),
        },
    )
    .await;
}

/// The last token the agent let through (the one the gateway holds, until it fetches
/// another; the agent does not record what comes with its open card).
async fn last_token(agent: &RefAgent) -> String {
    let seen = agent.seen().await;
    let last = seen
        .iter()
        .rev()
        .find(|e| e["status"] == 200 && e["token"].is_string())
        .expect("a call with a token");
    last["token"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn oauth2_tokens_refresh_across_a_long_run_and_after_it() {
    let idp = OauthServer::start(&OauthOptions {
        expires_in: 2,
        ..Default::default()
    });
    let agent = jwt_agent(&idp);
    let gw = gateway(&agent, json!({"oauth2": endpoint(&idp)}), None).await;
    wait_ready(&gw).await;
    let url = gw.agent_url("secure");
    // Three seconds of streaming on a two-second token: the agent checked it at the start.
    let long = run_as(&url, None, "long", "slow 30").await;
    assert_eq!(reply(&long), "slow 30 done");
    let ended = unix_now();
    let stream = tokens_of(&agent, "SendStreamingMessage").await;
    let first = stream.last().unwrap().clone();
    assert!(
        claims(&first)["exp"].as_u64().unwrap() <= ended,
        "the stream's token expired before the run ended"
    );
    // The next run gets a new token, valid when sent.
    assert_eq!(
        reply(&run_as(&url, None, "after", "echo after").await),
        "after"
    );
    let stream = tokens_of(&agent, "SendStreamingMessage").await;
    let next = stream.last().unwrap();
    assert_ne!(next, &first);
    assert_eq!(claims(next)["aud"], AUD);
    assert!(idp.token_requests("client_credentials").await >= 2);
    let refused = agent.seen().await;
    assert!(
        refused.iter().all(|e| e["status"] == 200),
        "no call was refused: {refused:?}"
    );
}

/// A TCP proxy to `target` (`host:port`) that holds every connection until released: the
/// token endpoint made slow, so that runs overlap one token request.
struct HeldProxy {
    url: String,
    release: tokio::sync::watch::Sender<bool>,
    connections: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl HeldProxy {
    async fn start(target: String) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (release, held) = tokio::sync::watch::channel(false);
        let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = connections.clone();
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let (mut held, target) = (held.clone(), target.clone());
                tokio::spawn(async move {
                    let _ = held.wait_for(|released| *released).await;
                    let mut out = tokio::net::TcpStream::connect(target).await.unwrap();
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                });
            }
        });
        Self {
            url,
            release,
            connections,
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn fifty_concurrent_runs_cause_one_token_request() {
    let idp = OauthServer::start(&OauthOptions::default());
    let agent = jwt_agent(&idp);
    // The token endpoint answers only once fifty runs wait for a token.
    let proxy = HeldProxy::start(idp.issuer.trim_start_matches("http://").to_owned()).await;
    let mut oauth2 = endpoint(&idp);
    oauth2["token_url"] = json!(format!("{}/token", proxy.url));
    let gw = gateway(&agent, json!({"oauth2": oauth2}), None).await;
    let url = gw.agent_url("secure");
    let runs: Vec<_> = (0..50)
        .map(|i| {
            let url = url.clone();
            tokio::spawn(async move { run_as(&url, None, &format!("many-{i}"), "echo hi").await })
        })
        .collect();
    wait_until(
        "fifty runs wait on the held token request",
        Duration::from_secs(20),
        async || match (
            open_streams(&gw, "secure").await,
            idp.stats().await["total"].as_u64(),
        ) {
            (50, Some(0)) => Ok(()),
            seen => Err(format!("open streams, token requests: {seen:?}")),
        },
    )
    .await;
    proxy.release.send_replace(true);
    for run in runs {
        assert_eq!(reply(&run.await.unwrap()), "hi");
    }
    assert_eq!(idp.token_requests("client_credentials").await, 1);
    assert_eq!(
        proxy.connections.load(std::sync::atomic::Ordering::SeqCst),
        1
    );
    let stream = tokens_of(&agent, "SendStreamingMessage").await;
    assert_eq!(stream.len(), 50);
    assert!(
        stream.iter().all(|t| t == &stream[0]),
        "one token for all fifty"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agents_401_gets_a_new_token_and_the_call_once_more() {
    let idp = OauthServer::start(&OauthOptions::default());
    let agent = jwt_agent(&idp);
    let gw = gateway(&agent, json!({"oauth2": endpoint(&idp)}), None).await;
    wait_ready(&gw).await;
    let before = idp.token_requests("client_credentials").await;
    agent.forget_seen().await;
    agent.unauthorize(1).await;
    assert_eq!(
        reply(&run_as(&gw.agent_url("secure"), None, "revoked", "echo again").await),
        "again"
    );
    let seen = agent.seen().await;
    let refused = seen.iter().position(|e| e["status"] == 401).expect("a 401");
    assert_eq!(seen[refused]["reason"], "forced");
    let retried = &seen[refused + 1];
    assert_eq!(
        (&retried["rpc"], &retried["status"]),
        (&seen[refused]["rpc"], &json!(200))
    );
    assert_ne!(retried["token"], seen[refused]["token"], "a new token");
    assert_eq!(idp.token_requests("client_credentials").await, before + 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_endpoint_outage_fails_runs_clearly_and_passes() {
    let idp = OauthServer::start(&OauthOptions {
        expires_in: 2,
        ..Default::default()
    });
    let agent = jwt_agent(&idp);
    let gw = gateway(&agent, json!({"oauth2": endpoint(&idp)}), None).await;
    wait_ready(&gw).await;
    let url = gw.agent_url("secure");
    assert_eq!(reply(&run_as(&url, None, "up", "echo up").await), "up");
    idp.down("503", None).await;
    until_expired(&last_token(&agent).await).await;
    let run = run_as(&url, None, "down", "echo x").await;
    let error = assert_run_error(&run, "upstream_auth_failed");
    assert_eq!(
        error["message"],
        "no upstream credentials: the token endpoint refused the request: \
         temporarily_unavailable (HTTP 503)"
    );
    // A gateway started now is not ready, and says why.
    let cold = gateway(&agent, json!({"oauth2": endpoint(&idp)}), None).await;
    let why = wait_until(
        "the new gateway names the token endpoint in /readyz",
        Duration::from_secs(10),
        async || {
            let r: Value = reqwest::get(format!("{}/readyz", cold.base))
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            match r["reasons"]["secure"].as_str() {
                Some(why) => Ok(why.to_owned()),
                None => Err(r.to_string()),
            }
        },
    )
    .await;
    assert!(why.contains("temporarily_unavailable (HTTP 503)"), "{why}");
    // docs/operations.md#readiness: still in service (the IdP is no replica's to fix),
    // out of it only when asked strictly.
    let plain = reqwest::get(format!("{}/readyz", cold.base)).await.unwrap();
    assert_eq!(plain.status(), 200);
    let strict = reqwest::get(format!("{}/readyz?strict", cold.base))
        .await
        .unwrap();
    assert_eq!(strict.status(), 503);
    idp.up().await;
    wait_until("runs pass again", Duration::from_secs(10), async || {
        let run = run_as(&url, None, "back", "echo back").await;
        match run.events.last() {
            Some(e) if e["type"] == "RUN_FINISHED" => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    wait_until(
        "the new gateway is ready",
        Duration::from_secs(15),
        async || match reqwest::get(format!("{}/readyz?strict", cold.base))
            .await
            .unwrap()
            .status()
        {
            reqwest::StatusCode::OK => Ok(()),
            s => Err(s.to_string()),
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn token_exchange_lets_the_agent_see_each_caller() {
    let idp = OauthServer::start(&OauthOptions {
        subject_jwks_file: Some(root().join("fixtures/auth/jwks.json")),
        ..Default::default()
    });
    let agent = jwt_agent(&idp);
    let gw = gateway(
        &agent,
        json!({"token_exchange": endpoint(&idp)}),
        Some(caller_auth()),
    )
    .await;
    let url = gw.agent_url("secure");
    let (alice, bob) = (caller_jwt("alice"), caller_jwt("bob"));
    for (token, user) in [(&alice, "alice"), (&bob, "bob"), (&alice, "alice")] {
        let run = run_as(&url, Some(token), &format!("who-{user}"), "whoami").await;
        assert_eq!(reply(&run), format!("you are {user}"));
    }
    // Alice's second run used the token exchanged for her first.
    assert_eq!(idp.token_requests(TOKEN_EXCHANGE).await, 2);
    let stats = idp.stats().await;
    let subjects: Vec<_> = stats["log"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["grant_type"] == TOKEN_EXCHANGE)
        .map(|e| e["subject_sub"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(subjects, ["alice", "bob"]);
    let subjects = agent.subjects().await;
    assert!(subjects.contains(&"alice".to_owned()) && subjects.contains(&"bob".to_owned()));
    assert!(
        subjects.iter().all(|s| s == "alice" || s == "bob"),
        "{subjects:?}"
    );
    // A caller with an API key has no JWT to exchange: a clear error, nothing sent.
    let before = agent.seen().await.len();
    let run = run_as(&url, Some(API_KEY), "key-caller", "whoami").await;
    let error = assert_run_error(&run, "upstream_auth_failed");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("needs the caller's JWT"),
        "{error}"
    );
    assert_eq!(
        agent.seen().await.len(),
        before,
        "nothing reached the agent"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn forward_caller_token_sends_the_callers_own_jwt() {
    let idp = OauthServer::start(&OauthOptions::default());
    let agent = jwt_agent(&idp);
    // The gateway trusts the same issuer as the agent: the caller's token serves both.
    let jwks = std::env::temp_dir().join(format!("agui-e2e-fwd-jwks-{}.json", std::process::id()));
    std::fs::write(&jwks, idp.jwks().await.to_string()).unwrap();
    let auth = json!({"jwt": {"issuer": idp.issuer, "audience": AUD, "jwks_file": jwks}});
    let gw = gateway(&agent, json!({"forward_caller_token": true}), Some(auth)).await;
    let carol = idp.mint(json!({"sub": "carol", "aud": AUD})).await;
    let run = run_as(&gw.agent_url("secure"), Some(&carol), "fwd", "whoami").await;
    assert_eq!(reply(&run), "you are carol");
    assert_eq!(tokens_of(&agent, "SendStreamingMessage").await, [carol]);
    let _ = std::fs::remove_file(jwks);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rotated_bearer_file_is_picked_up_by_the_next_run() {
    let dir = TempDir::new("bearer");
    let (wanted, ours) = (dir.0.join("agent-wants"), dir.0.join("gateway-sends"));
    std::fs::write(&wanted, "bearer-one").unwrap();
    std::fs::write(&ours, "bearer-one\n").unwrap();
    let agent = RefAgent::start(AgentFlags::new("both").require_bearer(&wanted));
    let bearer = format!("file:{}", ours.display());
    let gw = gateway(&agent, json!({"bearer": bearer}), None).await;
    let url = gw.agent_url("secure");
    assert_eq!(reply(&run_as(&url, None, "b1", "echo one").await), "one");
    // Both ends rotate (the way a projected token is renewed): the next run sends the new
    // value at once, never refused.
    agent.forget_seen().await;
    std::fs::write(&wanted, "bearer-two").unwrap();
    std::fs::write(&ours, "bearer-two").unwrap();
    assert_eq!(reply(&run_as(&url, None, "b2", "echo two").await), "two");
    let seen = agent.seen().await;
    assert!(seen.iter().all(|e| e["status"] == 200), "{seen:?}");
    // The agent rotates first: until the gateway's file follows, runs are refused clearly.
    std::fs::write(&wanted, "bearer-three").unwrap();
    let run = run_as(&url, None, "b3", "echo three").await;
    assert_run_error(&run, "upstream_auth_failed");
    std::fs::write(&ours, "bearer-three").unwrap();
    assert_eq!(reply(&run_as(&url, None, "b4", "echo four").await), "four");
    let tokens = tokens_of(&agent, "SendStreamingMessage").await;
    assert_eq!(tokens, ["bearer-two", "bearer-three"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn no_token_or_secret_shows_in_logs_metrics_errors_or_agents() {
    let idp = OauthServer::start(&OauthOptions {
        subject_jwks_file: Some(root().join("fixtures/auth/jwks.json")),
        ..Default::default()
    });
    let agent = jwt_agent(&idp);
    let dir = TempDir::new("secrets");
    let bearer_file = dir.0.join("bearer");
    let bearer = "file-bearer-value-7d1c";
    std::fs::write(&bearer_file, bearer).unwrap();
    let bearer_agent = RefAgent::start(AgentFlags::new("both").require_bearer(&bearer_file));
    let config = json!({
    "auth": caller_auth(),
    "agents": [
        {"name": "cc", "url": agent.url, "credentials": {"oauth2": {
            "token_url": idp.token_url(), "client_id": CLIENT_ID,
            "client_secret": "env:E2E_CLIENT_SECRET", "audience": AUD}}},
        {"name": "tx", "url": agent.url, "credentials": {"token_exchange": {
            "token_url": idp.token_url(), "client_id": CLIENT_ID,
            "client_secret": "env:E2E_CLIENT_SECRET", "audience": AUD}}},
        {"name": "file", "url": bearer_agent.url,
            "credentials": {"bearer": format!("file:{}", bearer_file.display())}},
    ]});
    // Every level of its own modules and the libraries'.
    let gw = Launch {
        config: &config.to_string(),
        env: &[("E2E_CLIENT_SECRET", CLIENT_SECRET)],
        log: "trace",
        ..Launch::default()
    }
    .start("secrets-gateway")
    .await
    .ready()
    .await;
    let alice = caller_jwt("alice");
    let mut answers = Vec::new();
    for (agent_name, text) in [("cc", "echo a"), ("tx", "whoami"), ("file", "echo f")] {
        let run = run_as(&gw.agent_url(agent_name), Some(&alice), agent_name, text).await;
        assert_run_finished(&run);
        answers.push(run.raw);
    }
    // A forced 401 recovered, a refused caller, a token endpoint outage.
    agent.unauthorize(1).await;
    answers.push(
        run_as(&gw.agent_url("cc"), Some(&alice), "cc-401", "echo b")
            .await
            .raw,
    );
    answers.push(
        run_as(&gw.agent_url("tx"), Some(API_KEY), "tx-key", "whoami")
            .await
            .raw,
    );
    idp.down("503", None).await;
    let bob = caller_jwt("bob");
    let failed = run_as(&gw.agent_url("tx"), Some(&bob), "tx-down", "whoami").await;
    assert_run_error(&failed, "upstream_auth_failed");
    answers.push(failed.raw);
    idp.up().await;
    for (path, kind) in [
        ("/agents", None),
        ("/agents/cc", Some("oauth2")),
        ("/agents/tx", Some("token_exchange")),
        ("/agents/file", Some("bearer")),
        ("/metrics", None),
    ] {
        let resp = reqwest::Client::new()
            .get(format!("{}{path}", gw.base))
            .bearer_auth(API_KEY)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        let text = resp.text().await.unwrap();
        if let Some(kind) = kind {
            let detail: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(detail["credentials"], kind, "{path}");
        }
        answers.push(text);
    }
    let readyz = reqwest::get(format!("{}/readyz", gw.base)).await.unwrap();
    answers.push(readyz.text().await.unwrap());
    // Every token the agents were sent, and every secret the gateway holds.
    let mut secrets: Vec<String> = vec![CLIENT_SECRET.into(), bearer.into(), alice, bob];
    for e in agent
        .seen()
        .await
        .iter()
        .chain(bearer_agent.seen().await.iter())
    {
        if let Some(t) = e["token"].as_str() {
            secrets.push(t.to_owned());
        }
    }
    let log = gw.log();
    // Every level was on (`RUST_LOG=trace`: debug lines of the gateway and its libraries),
    // and the runs are in it.
    assert!(log.contains(r#""level":"DEBUG""#), "{}", tail(&log, 2000));
    assert!(
        log.contains(r#""thread_id":"tx-down""#),
        "{}",
        tail(&log, 2000)
    );
    for secret in &secrets {
        // Also a JWT's signature alone (it is what makes the token usable).
        let signature = secret.rsplit('.').next().unwrap();
        for (what, text) in answers
            .iter()
            .map(|a| ("an answer", a))
            .chain([("the log", &log)])
        {
            assert!(
                !text.contains(secret.as_str()) && !text.contains(signature),
                "{what} shows a secret: {}",
                &secret[..8.min(secret.len())]
            );
        }
    }
}
