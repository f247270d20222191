//! `/readyz` for a fleet (docs/operations.md#readiness): `503` only for what taking this
//! replica out of service fixes — here, draining after `SIGTERM`, tried on the gateway
//! binary — while an agent that is down is a `200` naming it (`503` with `?strict` or
//! `readiness.strict: true`). The store's side is in `redis.rs`, with a real Redis.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::binary::demo_binary;
use crate::support::*;

/// `/readyz` with `query` (`""`, `"?strict"`, ...): its status and body.
async fn readyz(base: &str, query: &str) -> (u16, Value) {
    let resp = reqwest::get(format!("{base}/readyz{query}")).await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

/// An agent URL on a port nobody listens on.
fn down_url() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("http://127.0.0.1:{port}")
}

/// `/readyz` (with `query`) once `ref`'s card was read, so that only `down` is named.
async fn only_down_named(gw: &Gateway, query: &str) -> (u16, Value) {
    wait_until(
        "only the agent that is down is named",
        Duration::from_secs(10),
        async || {
            let (status, body) = readyz(&gw.base, query).await;
            if body["agents"] == json!(["down"]) {
                Ok((status, body))
            } else {
                Err(format!("{status} {body}"))
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn readyz_names_one_agent_down_among_two_with_200_and_strict_is_503() {
    let down = down_url();
    let gw = Gateway::with_agents(&[("ref", upstream("both")), ("down", &down)]).await;
    let (status, body) = only_down_named(&gw, "").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "degraded", "{body}");
    assert!(
        !body.to_string().contains(&down),
        "no URL in a public body: {body}"
    );
    // `strict` with any value, or none, among other parameters or alone.
    for query in [
        "?strict",
        "?strict=",
        "?strict=1",
        "?strict=false",
        "?x=1&strict",
    ] {
        let (status, body) = readyz(&gw.base, query).await;
        assert_eq!(status, 503, "{query}: {body}");
        assert_eq!(body["status"], "not_ready", "{query}: {body}");
        assert_eq!(body["agents"], json!(["down"]), "{query}: {body}");
    }
    // Other parameters are not `strict`.
    let (status, _) = readyz(&gw.base, "?strictly=1").await;
    assert_eq!(status, 200);
    // The agent that is up serves, and the one that is down ends its run in the stream.
    let steps = drive(
        &gw.agent_url("ref"),
        "readyz-up",
        json!([{"message": "echo up"}]),
    )
    .await;
    assert_eq!(assistant_texts(&steps[0]), ["up"]);
    let steps = drive(
        &gw.agent_url("down"),
        "readyz-down",
        json!([{"message": "echo x"}]),
    )
    .await;
    assert_eq!(steps[0]["runErrors"][0]["code"], "upstream_unavailable");
}

#[tokio::test(flavor = "multi_thread")]
async fn readyz_with_readiness_strict_configured_is_503_while_an_agent_is_down() {
    let down = down_url();
    let config = json!({"readiness": {"strict": true}, "agents": [
        {"name": "ref", "url": upstream("both")},
        {"name": "down", "url": down},
    ]});
    let gw = Gateway::start(&config.to_string(), false).await;
    let (status, body) = only_down_named(&gw, "").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "not_ready", "{body}");
    // Strict is not "always 503": with every agent up it is ready.
    let config = json!({"readiness": {"strict": true}, "agents": [
        {"name": "ref", "url": upstream("both")},
    ]});
    let gw = Gateway::start(&config.to_string(), false).await;
    let body = wait_until(
        "the strict gateway is ready",
        Duration::from_secs(10),
        async || match readyz(&gw.base, "").await {
            (200, body) => Ok(body),
            (status, body) => Err(format!("{status} {body}")),
        },
    )
    .await;
    assert_eq!(body, json!({"status": "ready"}));
}

/// A run's whole SSE body, from a response already open.
async fn rest_of(mut resp: reqwest::Response, mut text: String) -> String {
    while let Some(chunk) = resp.chunk().await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    text
}

fn last_event(sse: &str) -> Value {
    let data = sse
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .next_back()
        .expect("an event");
    serde_json::from_str(data).unwrap()
}

/// docs/operations.md#readiness: at `SIGTERM` `/readyz` turns 503 at once while the
/// listener still serves (endpoints drop the pod before it refuses connections), open runs
/// finish, one that arrives meanwhile is served, and the process exits 0 after the last.
#[tokio::test(flavor = "multi_thread")]
async fn readyz_answers_503_at_once_on_sigterm_while_runs_finish() {
    let config = json!({"agents": [], "timeouts": {"shutdown_drain": 20000}});
    let mut gw = demo_binary(&config, "readyz-drain").await;
    let url = format!("{}/agents/demo", gw.base);
    let client = reqwest::Client::new();
    // `slow 25`: 25 ticks 100 ms apart.
    let mut open = client
        .post(&url)
        .json(&run_input("readyz-drain", "slow 25"))
        .send()
        .await
        .unwrap();
    let first = String::from_utf8_lossy(&open.chunk().await.unwrap().unwrap()).into_owned();
    assert!(first.contains("RUN_STARTED"), "{first}");
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &gw.pid().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let signalled = Instant::now();
    // Every answer from the signal on is a 503 on a new connection: never a refusal.
    let body = loop {
        let resp = reqwest::Client::new()
            .get(format!("{}/readyz", gw.base))
            .send()
            .await
            .unwrap_or_else(|e| panic!("/readyz refused while a run is open: {e}"));
        let status = resp.status().as_u16();
        let body: Value = resp.json().await.unwrap();
        if status == 503 {
            break body;
        }
        assert_eq!(status, 200, "{body}");
        assert!(
            signalled.elapsed() < Duration::from_millis(500),
            "/readyz still {status} {:?} after SIGTERM: {}",
            signalled.elapsed(),
            gw.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(body["status"], "draining", "{body}");
    let (status, _) = readyz(&gw.base, "?strict").await;
    assert_eq!(status, 503);
    // A run that arrives while draining (the load balancer has not seen the 503 yet) is
    // served.
    let late = client
        .post(&url)
        .json(&run_input("readyz-late", "echo late"))
        .send()
        .await
        .unwrap();
    assert_eq!(late.status(), 200);
    let late = rest_of(late, String::new()).await;
    assert_eq!(last_event(&late)["type"], "RUN_FINISHED", "{late}");
    // The open run finishes: drained, not cut.
    let sse = rest_of(open, first).await;
    assert_eq!(last_event(&sse)["type"], "RUN_FINISHED", "{sse}");
    assert!(sse.matches("TEXT_MESSAGE_CONTENT").count() >= 25, "{sse}");
    let exit = tokio::time::timeout(Duration::from_secs(5), gw.child.wait())
        .await
        .expect("the gateway exits once its runs are done")
        .unwrap();
    assert!(exit.success(), "{exit}");
    assert!(
        signalled.elapsed() < Duration::from_secs(10),
        "{:?}",
        signalled.elapsed()
    );
    assert!(reqwest::get(format!("{}/readyz", gw.base)).await.is_err());
}
