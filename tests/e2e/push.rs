//! A2A push notifications from the SDKs' own senders (docs/design.md#the-live-inbox): the
//! a2a-sdk 1.3.0 reference agent (`--push`) over JSON-RPC, HTTP+JSON and gRPC, and
//! `@a2a-js/sdk` 1.3.0 (`--push`) over JSON-RPC and HTTP+JSON. The gateway registers a push
//! configuration on the task a run creates; a task that finishes after its stream was cut
//! shows as finished on the change feed, carried by the agent's push (the shared poll is an
//! hour away: the inbox sends no `ListTasks` meanwhile); an approval shows on the feed as the run
//! ends in it.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::inbox::{waiting_on, Feed};
use crate::support::*;

/// A push-enabled peer: the reference agent in `mode` (`1.0`, `rest`, `grpc`) or the a2a-js
/// agent (`js`, `js-rest`).
fn push_peer(mode: &str) -> (std::process::Child, String) {
    let mut cmd = if let Some(js) = mode.strip_prefix("js") {
        let mut c = std::process::Command::new("node");
        c.arg(root().join("tests/frameworks/a2a_js/agent.mjs"))
            .args(["--port", "0", "--push"]);
        if js == "-rest" {
            c.args(["--binding", "rest"]);
        }
        c
    } else {
        let python = require(&root().join(".venv/bin/python"), "the Python venv");
        let mut c = std::process::Command::new(python);
        c.arg(root().join("tests/upstream/ref_agent.py"))
            .args(["--versions", mode, "--push"]);
        c
    };
    spawn_ready(&mut cmd, &format!("the push peer {mode}"))
}

/// A gateway with push on, its public URL its own, and the shared poll an hour away.
async fn gateway(agent_url: &str) -> Gateway {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let public = format!("http://{}", listener.local_addr().unwrap());
    let config = json!({
        "agents": [{"name": "p", "url": agent_url}],
        "push": {"enabled": true, "public_url": public},
        "inbox": {"poll_s": 3600},
    });
    let gw = Gateway::start_on(&config.to_string(), listener).await;
    wait_ready(&gw).await;
    gw
}

/// Starts a run of `text` on `thread` and reads its stream only until the task's id shows,
/// then hangs up: the task goes on upstream with no stream open.
async fn start_and_leave(gw: &Gateway, thread: &str, text: &str) -> String {
    let mut resp = reqwest::Client::new()
        .post(gw.agent_url("p"))
        .json(&run_input(thread, text))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut raw = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let chunk = tokio::time::timeout(Duration::from_secs(20), resp.chunk())
            .await
            .expect("the run's first events")
            .unwrap()
            .expect("the run ended before its task showed");
        raw.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(at) = raw.find("\"taskId\":\"") {
            let rest = &raw[at + 10..];
            if let Some(end) = rest.find('"') {
                return rest[..end].to_owned();
            }
        }
    }
    panic!("no task id in the run's first events: {}", tail(&raw, 600));
}

/// One peer: a task finishing with no stream open shows as finished on the feed, carried by
/// the agent's push; an approval shows as the run ends in it; no `ListTasks` meanwhile.
async fn pushes_reach_the_feed(mode: &str) {
    let (mut peer, url) = push_peer(mode);
    let gw = gateway(&url).await;
    let mut feed = Feed::open(&gw.base, None).await.expect("the feed");
    let first = feed
        .next(Duration::from_secs(10))
        .await
        .expect("a snapshot");
    assert_eq!(first.event, "snapshot", "{mode}: {first:?}");
    // The inbox's own reads (`ListTasks`): one at start, then none, whatever happens. (A run
    // on a new thread asks `ListTasks` for a context to pick up: the run's, not the inbox's.)
    let polls = || metric_sum(&gw, "agui_gateway_inbox_polls_total", "");
    let polls_before = polls().await;

    let thread = format!("push-slow-{mode}");
    let task = start_and_leave(&gw, &thread, "slow 15").await;
    let finished = feed
        .until(Duration::from_secs(15), |t| {
            t["lastTask"]["id"] == task.as_str() && t["lastTask"]["state"] == "completed"
        })
        .await;
    assert_eq!(
        finished.data["status"], "idle",
        "{mode}: {:?}",
        finished.data
    );
    assert_eq!(finished.data["threadId"], thread.as_str(), "{mode}");
    let accepted = "result=\"accepted\"";
    let pushed = metric_sum(&gw, "agui_gateway_push_received_total", accepted).await;
    assert!(pushed > 0, "{mode}: no push was accepted");

    let approval = format!("push-approve-{mode}");
    let step = drive_message(&gw.agent_url("p"), &approval, "approve").await;
    assert_accepted(&step);
    let ended = Instant::now();
    let waiting = feed
        .until(Duration::from_secs(5), waiting_on(&approval))
        .await;
    assert!(
        ended.elapsed() < Duration::from_secs(1),
        "{mode}: the approval reached the feed {:?} after the run ended",
        ended.elapsed()
    );
    assert_eq!(waiting.data["lastTask"]["state"], "input-required");
    assert_eq!(polls().await, polls_before, "{mode}: the inbox polled");
    let _ = peer.kill();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reference_agents_pushes_over_json_rpc_reach_the_feed() {
    pushes_reach_the_feed("1.0").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reference_agents_pushes_over_http_json_reach_the_feed() {
    pushes_reach_the_feed("rest").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reference_agents_pushes_over_grpc_reach_the_feed() {
    pushes_reach_the_feed("grpc").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_a2a_js_agents_pushes_over_json_rpc_reach_the_feed() {
    pushes_reach_the_feed("js").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_a2a_js_agents_pushes_over_http_json_reach_the_feed() {
    pushes_reach_the_feed("js-rest").await;
}
