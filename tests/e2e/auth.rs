//! Inbound auth end to end (docs/design.md#11-security): the gateway with `auth:` configured
//! and the demo agent; API keys over plain HTTP and through the real AG-UI client, JWTs
//! signed by the TEST-ONLY keys of `fixtures/auth/`, and `--validate-only`'s loopback rule on
//! the binary.

use std::process::Command;

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

use crate::support::*;

const KEY: &str = "e2e-console-key-0123456789";
const ISS: &str = "https://issuer.e2e.test";
const AUD: &str = "agui-a2a-gateway";
const ORIGIN: &str = "https://app.example";

async fn gateway() -> Gateway {
    let config = json!({
        "cors_origins": [ORIGIN],
        "auth": {
            "api_keys": [{"name": "console", "key": KEY, "scopes": ["threads:all"]}],
            "jwt": {
                "issuer": ISS,
                "audience": AUD,
                "jwks_file": root().join("fixtures/auth/jwks.json"),
            },
        },
    });
    Gateway::start(&config.to_string(), true).await
}

/// A token for `sub` signed with a fixture key; `exp_in` seconds from now (negative: past).
fn jwt(alg: Algorithm, kid: &str, pem: &str, sub: &str, exp_in: i64) -> String {
    let pem = std::fs::read(root().join("fixtures/auth").join(pem)).unwrap();
    let key = match alg {
        Algorithm::RS256 => EncodingKey::from_rsa_pem(&pem).unwrap(),
        Algorithm::ES256 => EncodingKey::from_ec_pem(&pem).unwrap(),
        other => panic!("{other:?}"),
    };
    let exp = jsonwebtoken::get_current_timestamp() as i64 + exp_in;
    let mut header = Header::new(alg);
    header.kid = Some(kid.to_owned());
    let claims = json!({"sub": sub, "iss": ISS, "aud": AUD, "exp": exp, "scope": "threads:read"});
    jsonwebtoken::encode(&header, &claims, &key).unwrap()
}

async fn assert_unauthorized(resp: reqwest::Response, secret: &str) -> Value {
    assert_eq!(resp.status(), 401);
    let challenge = resp.headers()["www-authenticate"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(challenge.starts_with("Bearer"), "{challenge}");
    let text = resp.text().await.unwrap();
    assert!(
        secret.is_empty() || !text.contains(secret),
        "echoed: {text}"
    );
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["error"]["code"], "unauthorized", "{body}");
    // CopilotKit shows only a top-level `message`: it repeats the error's.
    assert_eq!(body["message"], body["error"]["message"], "{body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    body
}

#[tokio::test(flavor = "multi_thread")]
async fn without_valid_credentials_every_route_but_the_open_ones_is_401() {
    let gw = gateway().await;
    let client = reqwest::Client::new();
    let url = |path: &str| format!("{}{path}", gw.base);
    let run = || {
        client
            .post(gw.agent_url("demo"))
            .json(&run_input("t-noauth", "echo hi"))
    };
    for (what, req) in [
        ("run", run()),
        ("list", client.get(url("/agents"))),
        ("detail", client.get(url("/agents/demo"))),
        ("unrouted", client.get(url("/nope"))),
        ("copilotkit info", client.get(url("/copilotkit/info"))),
    ] {
        let body = assert_unauthorized(req.send().await.unwrap(), "").await;
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("Bearer"),
            "{what}: {body}"
        );
    }
    for token in ["wrong-key", &KEY[..KEY.len() - 1], "a.b.c"] {
        let resp = run().bearer_auth(token).send().await.unwrap();
        assert_unauthorized(resp, token).await;
    }
    let basic = run().basic_auth("console", Some(KEY)).send().await.unwrap();
    assert_unauthorized(basic, KEY).await;
    // The probes stay open.
    let health = client.get(url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let ready = client.get(url("/readyz")).send().await.unwrap();
    assert_ne!(ready.status(), 401);
    let ready: Value = ready.json().await.unwrap();
    assert!(ready["status"].is_string());
    // So do the API's description and the console's files (docs/security.md lists them all).
    for open in ["/openapi.json", "/console", "/console/console.js"] {
        let resp = client.get(url(open)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{open}");
    }
    // CORS preflights are answered before auth, and a 401 is readable cross-origin.
    let preflight = client
        .request(reqwest::Method::OPTIONS, gw.agent_url("demo"))
        .header("origin", ORIGIN)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization,content-type",
        )
        .send()
        .await
        .unwrap();
    assert!(preflight.status().is_success(), "{}", preflight.status());
    assert_eq!(preflight.headers()["access-control-allow-origin"], ORIGIN);
    let cross = run().header("origin", ORIGIN).send().await.unwrap();
    assert_eq!(cross.headers()["access-control-allow-origin"], ORIGIN);
    assert_unauthorized(cross, "").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn an_api_key_runs_the_demo_agent() {
    let gw = gateway().await;
    let resp = reqwest::Client::new()
        .post(gw.agent_url("demo"))
        .bearer_auth(KEY)
        .json(&run_input("t-key", "echo hi there"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let events = sse_events(&resp.text().await.unwrap());
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"RUN_STARTED"), "{types:?}");
    assert_eq!(types.last(), Some(&"RUN_FINISHED"), "{types:?}");
    assert!(events.iter().any(|e| e["delta"] == "hi "), "{events:?}");
    let agents: Value = reqwest::Client::new()
        .get(format!("{}/agents", gw.base))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(agents["agents"][0]["name"], "demo");

    // The real AG-UI client, with and without the header.
    let script = |thread: &str, headers: Value| {
        json!({"url": gw.agent_url("demo"), "threadId": thread, "headers": headers,
            "steps": [{"message": "echo from the client"}]})
    };
    let steps = drive_with(script(
        "t-key-client",
        json!({"Authorization": format!("Bearer {KEY}")}),
    ))
    .await;
    assert_accepted(&steps[0]);
    assert_eq!(assistant_texts(&steps[0]), ["from the client"]);
    let refused = drive_with(script("t-key-none", json!({}))).await;
    let failed = refused[0]["failed"].as_str().unwrap_or_default();
    assert!(failed.contains("401"), "{}", refused[0]);
    assert!(refused[0]["events"].as_array().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_jwt_from_the_jwks_file_is_accepted_an_expired_or_foreign_one_refused() {
    let gw = gateway().await;
    let client = reqwest::Client::new();
    let run = |thread: &str, token: &str| {
        client
            .post(gw.agent_url("demo"))
            .bearer_auth(token)
            .json(&run_input(thread, "echo signed"))
            .send()
    };
    for (alg, kid, pem) in [
        (Algorithm::RS256, "test-rsa", "test-rsa.pem"),
        (Algorithm::ES256, "test-ec", "test-ec.pem"),
    ] {
        let token = jwt(alg, kid, pem, "alice", 300);
        let resp = run(&format!("t-jwt-{kid}"), &token).await.unwrap();
        assert_eq!(resp.status(), 200, "{alg:?}");
        let events = sse_events(&resp.text().await.unwrap());
        assert_eq!(events.last().unwrap()["type"], "RUN_FINISHED", "{events:?}");
    }
    let expired = jwt(Algorithm::RS256, "test-rsa", "test-rsa.pem", "alice", -600);
    let body = assert_unauthorized(run("t-jwt-old", &expired).await.unwrap(), &expired).await;
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expired"),
        "{body}"
    );
    // Signed by a key outside the JWKS, claiming a kid that is in it.
    let foreign = jwt(
        Algorithm::RS256,
        "test-rsa",
        "test-rsa-other.pem",
        "alice",
        300,
    );
    let body = assert_unauthorized(run("t-jwt-foreign", &foreign).await.unwrap(), &foreign).await;
    assert!(
        !body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expired"),
        "{body}"
    );
    // A JWT is never mistaken for an API key and vice versa: the key still works alongside.
    let ok = run("t-jwt-key", KEY).await.unwrap();
    assert_eq!(ok.status(), 200);
}

/// Runs the binary with `--config` (written to a temp file) and `--validate-only`.
fn validate(name: &str, yaml: &str, flags: &[&str]) -> (bool, String) {
    let path = std::env::temp_dir().join(format!(
        "agui-a2a-gateway-auth-{}-{name}.yaml",
        std::process::id()
    ));
    std::fs::write(&path, yaml).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_agui-a2a-gateway"))
        .arg("--config")
        .arg(&path)
        .arg("--validate-only")
        .args(flags)
        .env_remove("GATEWAY_LISTEN")
        .output()
        .expect("run the gateway binary");
    let _ = std::fs::remove_file(&path);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn validate_only_refuses_a_non_loopback_listen_without_auth() {
    let agents = "agents: [{name: a, url: 'http://127.0.0.1:9'}]";
    let (ok, text) = validate("open", &format!("listen: 0.0.0.0:0\n{agents}"), &[]);
    assert!(!ok, "{text}");
    assert!(text.contains("listen:"), "{text}");
    assert!(text.contains("insecure_no_auth"), "{text}");
    for (name, yaml, flags) in [
        (
            "waived",
            format!("listen: 0.0.0.0:0\ninsecure_no_auth: true\n{agents}"),
            &[][..],
        ),
        (
            "flag",
            format!("listen: 0.0.0.0:0\n{agents}"),
            &["--insecure-no-auth"][..],
        ),
        (
            "keyed",
            format!("listen: 0.0.0.0:0\n{agents}"),
            &["--api-key", "console=literal-e2e-key-0123"][..],
        ),
        (
            "loopback",
            format!("listen: 127.0.0.1:0\n{agents}"),
            &[][..],
        ),
    ] {
        let (ok, text) = validate(name, &yaml, flags);
        assert!(ok, "{name}: {text}");
        assert!(!text.contains("literal-e2e-key-0123"), "{text}");
    }
    let (ok, text) = validate(
        "bad-jwks",
        &format!(
            "auth: {{jwt: {{issuer: i, audience: a, jwks_file: /nonexistent.json}}}}\n{agents}"
        ),
        &[],
    );
    assert!(!ok);
    assert!(text.contains("auth.jwt.jwks_file"), "{text}");
    let (ok, text) = validate(
        "dup",
        &format!("auth: {{api_keys: [{{name: a, key: secret-one-0123456789}}, {{name: a, key: secret-two-0123456789}}]}}\n{agents}"),
        &[],
    );
    assert!(!ok);
    assert!(text.contains("auth.api_keys[1].name"), "{text}");
    assert!(
        !text.contains("secret-one-0123456789") && !text.contains("secret-two-0123456789"),
        "{text}"
    );
}

/// Picking up a context that was not created through the gateway needs scope `threads:all`
/// when inbound auth is on (docs/design.md#11-security); without auth the anonymous caller
/// has it.
#[tokio::test(flavor = "multi_thread")]
async fn only_threads_all_picks_up_a_context_started_elsewhere() {
    let up = upstream("both");
    let config = json!({
        "agents": [{"name": "ref", "url": up}],
        "auth": {"api_keys": [
            {"name": "ops", "key": "e2e-ops-key-0123456789", "scopes": ["threads:all"]},
            {"name": "plain", "key": "e2e-plain-key-0123456789"},
        ]},
    });
    let gw = Gateway::start(&config.to_string(), false).await;
    for (caller, key, picks_up) in [
        ("plain", "e2e-plain-key-0123456789", false),
        ("ops", "e2e-ops-key-0123456789", true),
    ] {
        // A conversation some other A2A client started with its own contextId.
        let context = format!("elsewhere-{caller}-{}", std::process::id());
        a2a_send(up, "m1", &context, "echo private").await;
        let steps = drive_with(json!({
            "url": gw.agent_url("ref"), "threadId": context,
            "headers": {"Authorization": format!("Bearer {key}")},
            "steps": [{"message": "echo mine"}],
        }))
        .await;
        assert_accepted(&steps[0]);
        let snapshot = event_types(&steps[0]).contains(&"MESSAGES_SNAPSHOT".to_owned());
        assert_eq!(snapshot, picks_up, "{caller}");
        let landed = steps[0]["state"]["a2a"]["contextId"] == context.as_str();
        assert_eq!(landed, picks_up, "{caller}");
        let texts = transcript(&steps[0]);
        assert_eq!(
            texts.iter().any(|(_, c)| c == "private"),
            picks_up,
            "{caller}: {texts:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn two_callers_on_one_thread_id_get_their_own_contexts() {
    // docs/design.md#11-security: bindings are keyed by owner + threadId. Each run sends no
    // state, so only the binding store could join them.
    let (alice, bob) = ("e2e-alice-key-0123456789", "e2e-bob-key-0123456789ab");
    let config = json!({"auth": {"api_keys": [
        {"name": "alice", "key": alice}, {"name": "bob", "key": bob}]}});
    let gw = Gateway::start(&config.to_string(), true).await;
    let context_of = |key: &'static str| {
        let url = gw.agent_url("demo");
        async move {
            let steps = drive_with(json!({"url": url, "threadId": "same-thread",
                "headers": {"Authorization": format!("Bearer {key}")},
                "steps": [{"message": "echo hi"}]}))
            .await;
            assert_accepted(&steps[0]);
            steps[0]["state"]["a2a"]["contextId"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    let alice_first = context_of(alice).await;
    let bob_first = context_of(bob).await;
    assert_ne!(alice_first, bob_first, "bob never joins alice's context");
    assert_eq!(
        context_of(alice).await,
        alice_first,
        "alice's thread stays hers"
    );
    // Bob naming alice's context, in props or in state, is told it does not exist.
    for explicit in [
        json!({"forwardedProps": {"a2a": {"contextId": alice_first}}}),
        json!({"state": {"a2a": {"contextId": alice_first}}}),
    ] {
        let body = with(run_input("bob-snoops", "echo peek"), &explicit);
        let resp = post_as(&gw.agent_url("demo"), bob, &body).await;
        assert_eq!(resp.status(), 404, "{explicit}");
        let err: Value = resp.json().await.unwrap();
        assert_eq!(err["error"]["code"], "unknown_thread");
        // Alice may.
        let resp = post_as(&gw.agent_url("demo"), alice, &body).await;
        assert_eq!(resp.status(), 200, "{explicit}");
        assert!(resp.text().await.unwrap().contains("RUN_FINISHED"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_caller_cannot_resume_or_reattach_to_someone_elses_task() {
    let (alice, bob) = ("e2e-alice-key-0123456789", "e2e-bob-key-0123456789ab");
    let config = json!({"auth": {"api_keys": [
        {"name": "alice", "key": alice}, {"name": "bob", "key": bob}]}});
    let gw = Gateway::start(&config.to_string(), true).await;
    let asked = drive_with(
        json!({"url": gw.agent_url("demo"), "threadId": "alice-asks",
        "headers": {"Authorization": format!("Bearer {alice}")},
        "steps": [{"message": "approve"}]}),
    )
    .await;
    assert_accepted(&asked[0]);
    let interrupt = asked[0]["pendingInterrupts"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let task = asked[0]["state"]["a2a"]["task"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let attempts = [
        json!({"resume": [{"interruptId": interrupt, "status": "resolved", "payload": "yes"}]}),
        json!({"forwardedProps": {"a2a": {"subscribeOnly": true, "taskId": task}}}),
        json!({"forwardedProps": {"a2a": {"taskId": task}}}),
    ];
    for extra in &attempts {
        let body = with(run_input("bob-steals", "yes"), extra);
        let resp = post_as(&gw.agent_url("demo"), bob, &body).await;
        assert_eq!(resp.status(), 404, "bob: {extra}");
    }
    // Alice resumes her own task and it completes.
    let body = with(run_input("alice-asks", "yes"), &attempts[0]);
    let resp = post_as(&gw.agent_url("demo"), alice, &body).await;
    assert_eq!(resp.status(), 200);
    assert!(resp.text().await.unwrap().contains("Approved: yes"));
}
