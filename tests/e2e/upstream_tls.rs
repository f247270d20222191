//! Upstream TLS and the card's security through the gateway (docs/security.md#upstream-trust,
//! docs/security.md#the-cards-security): the a2a-sdk reference agent over https with a
//! certificate from the test's own CA, requiring a client certificate; the gateway trusting
//! that CA (`tls.ca_file`) and presenting its own (`tls.client_cert` / `client_key`) runs
//! the whole AG-UI matrix over the direct stream reader; every refused handshake (no client
//! certificate, an unknown CA, a name mismatch, an expired certificate) is named in `/readyz`
//! and in the run's `RUN_ERROR upstream_unavailable`, without key material; a card that
//! requires what nothing configured presents is a warning, and an extended card is read
//! with the agent's credential.

use serde_json::{json, Value};

use crate::identity_support::*;
use crate::pki::{CertKey, Pki, OTHER_NAME};
use crate::support::*;

/// A gateway with agent `ref` at `url`, its config extended by `extra`.
async fn gateway(url: &str, extra: Value) -> Gateway {
    let mut agent = json!({"name": "ref", "url": url});
    agent
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    Gateway::start(&json!({ "agents": [agent] }).to_string(), false).await
}

fn path(p: &std::path::Path) -> String {
    p.display().to_string()
}

/// `tls` settings trusting `pki`'s CA, presenting `client` when given.
fn tls(pki: &Pki, client: Option<&CertKey>) -> Value {
    let mut tls = json!({"ca_file": path(&pki.ca)});
    if let Some(c) = client {
        tls["client_cert"] = json!(format!("file:{}", path(&c.cert)));
        tls["client_key"] = json!(format!("file:{}", path(&c.key)));
    }
    tls
}

/// `/readyz` once the agent's card read has failed (200, degraded: docs/operations.md#readiness):
/// its body.
async fn not_ready(gw: &Gateway) -> Value {
    let mut body = Value::Null;
    wait_until(
        "/readyz names the agent",
        std::time::Duration::from_secs(10),
        async || {
            let resp = reqwest::get(format!("{}/readyz", gw.base)).await.unwrap();
            let status = resp.status().as_u16();
            body = resp.json().await.unwrap();
            match (status, body["reasons"]["ref"].is_string()) {
                (200, true) if body["status"] == "degraded" => Ok(()),
                _ => {
                    let view: Value = get_json(gw.agent_url("ref")).await;
                    Err(format!("{status} {body} {view}"))
                }
            }
        },
    )
    .await;
    body
}

/// A run's single `RUN_ERROR upstream_unavailable`, and its message.
async fn failed_run(gw: &Gateway, thread: &str) -> String {
    let body = run_input(thread, "echo hi");
    let run = post_run(
        &gw.agent_url("ref"),
        &body,
        std::time::Duration::from_secs(20),
    )
    .await;
    let event = assert_run_error(&run, "upstream_unavailable");
    event["message"].as_str().unwrap().to_owned()
}

/// Nothing of a key or certificate in what the gateway shows.
fn no_key_material(shown: &str, pki: &Pki) {
    for file in [&pki.client.key, &pki.server.key, &pki.client.cert] {
        let pem = std::fs::read_to_string(file).unwrap();
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        assert!(!shown.contains(&body[..40]), "key material shown: {shown}");
    }
    assert!(!shown.contains("BEGIN"), "PEM shown: {shown}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_mtls_agent_behind_a_private_ca_runs_the_matrix_with_the_gateways_certificate() {
    let pki = Pki::create();
    let agent = RefAgent::start(AgentFlags::new("both").tls(&pki, &pki.server).mtls(&pki));
    assert!(agent.url.starts_with("https://"), "{}", agent.url);
    let gw = gateway(&agent.url, json!({"tls": tls(&pki, Some(&pki.client))})).await;
    wait_ready(&gw).await;
    let view: Value = get_json(gw.agent_url("ref")).await;
    assert!(
        view["url"].as_str().unwrap().starts_with("https://"),
        "{view}"
    );
    no_key_material(&view.to_string(), &pki);
    let steps = drive(
        &gw.agent_url("ref"),
        "tls-matrix",
        json!([
            {"message": "echo hello over mutual TLS"},
            {"message": "artifact"},
            {"message": "approve"},
            {"resume": {"status": "resolved", "payload": "yes, go ahead"}},
        ]),
    )
    .await;
    assert_accepted(&steps[0]);
    assert_eq!(assistant_texts(&steps[0]), ["hello over mutual TLS"]);
    assert_accepted(&steps[1]);
    assert_eq!(
        steps[1]["state"]["view"]["artifacts"]["artifact-1"]["text"],
        "Hello from artifact."
    );
    assert_eq!(
        steps[2]["pendingInterrupts"].as_array().unwrap().len(),
        1,
        "{}",
        steps[2]
    );
    assert_accepted(&steps[3]);
    assert_eq!(
        assistant_texts(&steps[3]).last().map(String::as_str),
        Some("Approved: yes, go ahead")
    );
    // The blocking send and a thread read over the same TLS (reqwest's HTTP client).
    let send = drive(
        &gw.agent_url("ref"),
        "tls-send",
        json!([{"message": "echo unary", "forwardedProps": {"a2a": {"mode": "send"}}}]),
    )
    .await;
    assert_eq!(assistant_texts(&send[0]), ["unary"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn refused_handshakes_are_named_in_readyz_and_in_the_run_error() {
    let pki = Pki::create();
    let mtls = RefAgent::start(AgentFlags::new("1.0").tls(&pki, &pki.server).mtls(&pki));
    let unknown = RefAgent::start(AgentFlags::new("1.0").tls(&pki, &pki.unknown_ca));
    let expired = RefAgent::start(AgentFlags::new("1.0").tls(&pki, &pki.expired));
    let cases: [(&RefAgent, Value, &str); 4] = [
        (&mtls, tls(&pki, None), "client certificate"),
        (
            &mtls,
            tls(&pki, Some(&pki.foreign_client)),
            "client certificate",
        ),
        (&unknown, tls(&pki, None), "signed by an unknown CA"),
        (&expired, tls(&pki, None), "expired"),
    ];
    for (i, (agent, tls, reason)) in cases.into_iter().enumerate() {
        let gw = gateway(&agent.url, json!({ "tls": tls })).await;
        let ready = not_ready(&gw).await;
        let shown = ready["reasons"]["ref"].as_str().unwrap();
        assert!(shown.contains(reason), "case {i}: {ready}");
        assert!(
            !shown.contains("127.0.0.1"),
            "case {i}: /readyz names no URL: {ready}"
        );
        let message = failed_run(&gw, &format!("tls-refused-{i}")).await;
        assert!(message.contains(reason), "case {i}: {message}");
        no_key_material(&format!("{ready} {message}"), &pki);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_certificate_for_another_name_needs_tls_server_name() {
    let pki = Pki::create();
    let agent = RefAgent::start(AgentFlags::new("1.0").tls(&pki, &pki.other_name));
    let gw = gateway(&agent.url, json!({"tls": tls(&pki, None)})).await;
    let ready = not_ready(&gw).await;
    assert!(
        ready["reasons"]["ref"]
            .as_str()
            .unwrap()
            .contains("tls.server_name"),
        "{ready}"
    );
    let mut named = tls(&pki, None);
    named["server_name"] = json!(OTHER_NAME);
    let gw = gateway(&agent.url, json!({ "tls": named })).await;
    wait_ready(&gw).await;
    let steps = drive(
        &gw.agent_url("ref"),
        "tls-name",
        json!([{"message": "echo named"}]),
    )
    .await;
    assert_eq!(assistant_texts(&steps[0]), ["named"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_cards_security_is_shown_warned_and_an_extended_card_read_with_credentials() {
    let dir = std::env::temp_dir().join(format!("gw-card-security-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let token_file = dir.join("bearer");
    std::fs::write(&token_file, "e2e-static-bearer-9c1d").unwrap();
    let agent = RefAgent::start(
        AgentFlags::new("1.0")
            .require_bearer(&token_file)
            .card_security("bearer")
            .extended_card(),
    );
    // Nothing configured presents a bearer: shown, warned in /readyz, and the public card.
    let gw = gateway(&agent.url, json!({})).await;
    let mut ready = Value::Null;
    wait_until(
        "/readyz warns",
        std::time::Duration::from_secs(10),
        async || {
            ready = get_json(format!("{}/readyz", gw.base)).await;
            ready["warnings"]["ref"]
                .is_string()
                .then_some(())
                .ok_or(ready.to_string())
        },
    )
    .await;
    assert_eq!(
        ready["status"], "ready",
        "a declared requirement does not unready: {ready}"
    );
    assert!(
        ready["warnings"]["ref"]
            .as_str()
            .unwrap()
            .contains("bearer"),
        "{ready}"
    );
    let view: Value = get_json(gw.agent_url("ref")).await;
    assert_eq!(view["security"]["satisfiedBy"], Value::Null, "{view}");
    assert_eq!(view["security"]["schemes"][0]["type"], "http", "{view}");
    let skills = |v: &Value| -> Vec<String> {
        v["skills"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(!skills(&view).contains(&"extended".to_owned()), "{view}");
    // The bearer as a header: satisfied, no warning, the extended card's skills.
    let gw = gateway(
        &agent.url,
        json!({"headers": {"Authorization": "Bearer e2e-static-bearer-9c1d"}}),
    )
    .await;
    wait_ready(&gw).await;
    let ready: Value = get_json(format!("{}/readyz", gw.base)).await;
    assert_eq!(ready, json!({"status": "ready"}));
    let view: Value = get_json(gw.agent_url("ref")).await;
    assert_eq!(
        view["security"]["satisfiedBy"].as_array().unwrap().len(),
        1,
        "{view}"
    );
    assert!(skills(&view).contains(&"extended".to_owned()), "{view}");
    assert!(!view.to_string().contains("e2e-static-bearer"), "{view}");
    let steps = drive(
        &gw.agent_url("ref"),
        "card-security",
        json!([{"message": "echo ok"}]),
    )
    .await;
    assert_eq!(assistant_texts(&steps[0]), ["ok"]);
}
