//! A hostile A2A 1.0 upstream (issue 5, docs/design.md#9-reliability-and-limits): what a
//! compromised or prompt-injected agent can send. Each abuse ends in one clear `RUN_ERROR`
//! within its timeout, and the same gateway serves a normal run afterwards.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use crate::fake::{
    artifact, card, redirector, task, update, update_with_data, Answer, Fake, Recorder,
    FOREIGN_MARKER,
};
use crate::support::*;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// A gateway with the demo agent and the hostile upstream as agent `hostile`; `config`
/// adds `limits`, `timeouts` (and may replace `agents`).
async fn gateway(up: &Fake, config: Value) -> Gateway {
    let mut config = config;
    if config.get("agents").is_none() {
        config["agents"] = json!([{"name": "hostile", "url": up.url}]);
    }
    Gateway::start(&config.to_string(), true).await
}

/// Runs `body` on agent `hostile`: it ends within `within` in exactly one `RUN_ERROR`
/// with `code`; then the gateway still serves a normal run. Returns the run and its error.
async fn expect_run_error(
    gw: &Gateway,
    body: Value,
    code: &str,
    within: Duration,
) -> (SseRun, Value) {
    let thread = body["threadId"].as_str().unwrap().to_owned();
    let run = post_run(&gw.agent_url("hostile"), &body, within).await;
    let error = assert_run_error(&run, code);
    assert!(
        error["message"].as_str().is_some_and(|m| m.len() > 5),
        "a message that says what happened: {error}"
    );
    assert_serves(gw, &format!("{thread}-after")).await;
    (run, error)
}

/// The whole abuse in one: a hostile upstream scripted with `script`, a gateway with
/// `config`, one run that must end in `RUN_ERROR code` within `within`, a normal run after.
async fn abuse(
    script: Vec<(&str, Answer)>,
    config: Value,
    thread: &str,
    code: &str,
    within: Duration,
) -> (Fake, SseRun, Value) {
    let up = Fake::start(script).await;
    let gw = gateway(&up, config).await;
    let (run, error) = expect_run_error(&gw, run_input(thread, "go"), code, within).await;
    (up, run, error)
}

/// A JSON pointer of `n` segments `/a/a/...`.
fn deep_path(n: usize) -> String {
    "/a".repeat(n)
}

/// A finished run with an artifact projected at `path`.
fn artifact_run(path: &str) -> Answer {
    Answer::Frames(vec![
        task("TASK_STATE_WORKING", None),
        artifact("report-1", "the report", json!({"path": path})),
        update("TASK_STATE_COMPLETED", Some(("m-done", "done"))),
    ])
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deep_artifact_path_is_refused_not_a_crash() {
    let up = Fake::start(vec![
        // A reasonable path is projected where the agent asked (the control).
        ("SendStreamingMessage", artifact_run("/docs/report")),
        // 20,000 segments: before the fix, a 20,000-deep document overflowed the stack.
        ("SendStreamingMessage", artifact_run(&deep_path(20_000))),
        // Deeper than limits.max_state_depth.
        ("SendStreamingMessage", artifact_run(&deep_path(40))),
        // The same agent still works afterwards.
        ("SendStreamingMessage", artifact_run("/docs/report")),
    ])
    .await;
    let gw = gateway(&up, json!({"limits": {"max_state_depth": 32}})).await;
    let ok = drive_message(&gw.agent_url("hostile"), "deep-ok", "go").await;
    assert_eq!(ok["state"]["docs"]["report"]["text"], "the report");

    for (thread, within) in [("deep-20000", secs(10)), ("deep-40", secs(10))] {
        let (run, error) =
            expect_run_error(&gw, run_input(thread, "go"), "limit_exceeded", within).await;
        assert!(
            !run.raw.contains(&deep_path(33)),
            "{thread}: no patch deeper than the limit reached the client: {error}"
        );
    }
    let again = drive_message(&gw.agent_url("hostile"), "deep-again", "go").await;
    assert_eq!(again["state"]["docs"]["report"]["text"], "the report");
}

/// `agui-state-delta` ops in an agent's working status message.
fn state_delta_run(patch: Value) -> Answer {
    Answer::Frames(vec![
        task("TASK_STATE_WORKING", None),
        update_with_data(
            "TASK_STATE_WORKING",
            "m-patch",
            json!({"type": "agui-state-delta", "patch": patch}),
        ),
        update("TASK_STATE_COMPLETED", Some(("m-done", "done"))),
    ])
}

#[tokio::test(flavor = "multi_thread")]
async fn a_copy_bomb_patch_is_refused() {
    // 22 copies of the whole document into itself: 2^22 times the state.
    let root_bomb: Vec<Value> = (0..22)
        .map(|n| json!({"op": "copy", "from": "", "path": format!("/k{n}")}))
        .collect();
    // The same doubling without copying from the root or an ancestor of the target:
    // 14 doublings of 1 KiB (16 MiB) is over limits.max_state_bytes (1 MiB by default).
    let mut sibling_bomb =
        vec![json!({"op": "add", "path": "/a", "value": {"s": "x".repeat(1024)}})];
    for n in 0..14 {
        sibling_bomb.push(json!({"op": "copy", "from": "/a", "path": "/b"}));
        sibling_bomb.push(json!({"op": "copy", "from": "/b", "path": format!("/a/n{n}")}));
    }
    let up = Fake::start(vec![
        (
            "SendStreamingMessage",
            state_delta_run(json!([{"op": "add", "path": "/progress", "value": 50}])),
        ),
        ("SendStreamingMessage", state_delta_run(json!(root_bomb))),
        ("SendStreamingMessage", state_delta_run(json!(sibling_bomb))),
    ])
    .await;
    let gw = gateway(&up, json!({"limits": {"max_state_bytes": 1 << 20}})).await;
    // The control: an agent's small patch reaches the app state.
    let ok = drive_message(&gw.agent_url("hostile"), "patch-ok", "go").await;
    assert_eq!(ok["state"]["progress"].as_f64(), Some(50.0));
    // Finishing at all proves the process did not run out of memory.
    expect_run_error(
        &gw,
        run_input("root-bomb", "go"),
        "limit_exceeded",
        secs(10),
    )
    .await;
    let (run, _) = expect_run_error(
        &gw,
        run_input("sibling-bomb", "go"),
        "limit_exceeded",
        secs(10),
    )
    .await;
    assert!(
        run.raw.len() < 2 << 20,
        "the client never got the doubled state ({} bytes)",
        run.raw.len()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn redirects_are_not_followed_and_foreign_bodies_never_shown() {
    let foreign = Recorder::start().await;
    let up = Fake::start(vec![(
        "SendStreamingMessage",
        Answer::Redirect(foreign.url.clone()),
    )])
    .await;
    let card_jump = redirector(format!("{}.well-known/agent-card.json", foreign.url)).await;
    let config = json!({"agents": [
        {"name": "hostile", "url": up.url, "headers": {"X-Api-Key": "k-123"}},
        {"name": "cardjump", "url": card_jump.url, "headers": {"X-Api-Key": "k-123"}},
    ]});
    let gw = gateway(&up, config).await;

    let (run, error) = expect_run_error(
        &gw,
        run_input("redirect", "go"),
        "upstream_unavailable",
        secs(10),
    )
    .await;
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("307"), "the status is named: {message}");
    assert!(!run.raw.contains(FOREIGN_MARKER), "{}", run.raw);
    assert!(
        !run.raw.contains("follow the Location"),
        "the upstream's own body is not echoed: {message}"
    );
    // The configured header went to the configured upstream, and nowhere else.
    let sent = up.requests();
    let rpc = sent
        .iter()
        .find(|r| r.method == "SendStreamingMessage")
        .expect("the run called the upstream");
    assert_eq!(rpc.header("x-api-key"), Some("k-123"));

    // A card that redirects: the agent is not ready, and the redirect is not followed.
    // Once the gateway is done reading the card (an error recorded, or, were the redirect
    // followed, a card read), what it made of it shows in `/agents`.
    let (agents, item) = wait_until(
        "the gateway has read (or failed to read) the card of cardjump",
        Duration::from_secs(5),
        async || {
            let agents: Value = reqwest::get(format!("{}/agents", gw.base))
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let item = agents["agents"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["name"] == "cardjump")
                .expect("cardjump listed")
                .clone();
            if item["ready"] == true || item.get("error").is_some() {
                Ok((agents, item))
            } else {
                Err(format!(
                    "{item} (card asked for {} times)",
                    card_jump.hits()
                ))
            }
        },
    )
    .await;
    assert!(card_jump.hits() > 0, "the gateway asked for the card");
    assert_eq!(item["ready"], false, "{item}");
    assert!(!agents.to_string().contains(FOREIGN_MARKER), "{agents}");
    let jumped = post_run(
        &gw.agent_url("cardjump"),
        &run_input("cardjump", "go"),
        secs(10),
    )
    .await;
    assert_run_error(&jumped, "upstream_unavailable");
    assert!(!jumped.raw.contains(FOREIGN_MARKER), "{}", jumped.raw);

    let seen = foreign.requests();
    assert!(
        seen.is_empty(),
        "the other origin received {} request(s), e.g. {} {} ({} bytes) with x-api-key {:?}",
        seen.len(),
        seen[0].method,
        seen[0].path,
        seen[0].body.len(),
        seen[0].header("x-api-key")
    );
}

/// Timeouts that leave `upstream_call` as the only one short enough to end the run.
fn only_upstream_call(ms: u64) -> Value {
    json!({"timeouts": {"upstream_call": ms, "first_event": 30000, "idle": 30000, "run": 40000}})
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_resubscribe_ends_within_the_upstream_call_timeout() {
    let up = Fake::start_responder(|method, _| match method {
        // The stream is cut with the task still working ...
        "SendStreamingMessage" => Some(Answer::Frames(vec![task("TASK_STATE_WORKING", None)])),
        // ... and neither the resubscribe nor the snapshot ever answer.
        "SubscribeToTask" | "GetTask" => Some(Answer::Hang),
        _ => None,
    })
    .await;
    let gw = gateway(&up, only_upstream_call(500)).await;
    let run = post_run(
        &gw.agent_url("hostile"),
        &run_input("stalled-resub", "go"),
        secs(8),
    )
    .await;
    let last = run.events.last().cloned().unwrap_or_default();
    let code = last["code"].as_str().unwrap_or_default();
    assert!(
        ["upstream_timeout", "upstream_stream_ended"].contains(&code),
        "{last}"
    );
    assert_run_error(&run, code);
    assert!(
        up.calls().iter().any(|c| c == "SubscribeToTask"),
        "the gateway tried to resubscribe: {:?}",
        up.calls()
    );
    assert!(
        run.elapsed >= Duration::from_millis(500),
        "{:?}",
        run.elapsed
    );
    assert_serves(&gw, "stalled-resub-after").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_get_task_ends_within_the_upstream_call_timeout() {
    let up = Fake::start_responder(|method, _| (method == "GetTask").then_some(Answer::Hang)).await;
    let gw = gateway(&up, only_upstream_call(700)).await;
    let mut body = run_input("stalled-get", "go");
    body["forwardedProps"] = json!({"a2a": {"subscribeOnly": true, "taskId": "T1"}});
    let (run, _) = expect_run_error(&gw, body, "upstream_timeout", secs(5)).await;
    assert!(
        run.elapsed >= Duration::from_millis(700),
        "{:?}",
        run.elapsed
    );
    assert!(
        up.calls().iter().any(|c| c == "GetTask"),
        "{:?}",
        up.calls()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn endless_text_under_one_message_id_hits_the_text_limit() {
    const CHUNK: usize = 512 * 1024;
    let made = Arc::new(AtomicUsize::new(0));
    let counter = made.clone();
    // 200 status updates under one messageId, each 512 KiB of new text (a different
    // letter each time, so never a cumulative re-send of the text before).
    let endless = Answer::Generated(Arc::new(move |i: usize| {
        counter.fetch_add(1, Ordering::SeqCst);
        match i {
            0 => Some(task("TASK_STATE_WORKING", None)),
            1..=200 => {
                let letter = char::from(b'a' + (i % 26) as u8);
                let text = letter.to_string().repeat(CHUNK);
                Some(update("TASK_STATE_WORKING", Some(("m-endless", &text))))
            }
            _ => None,
        }
    }));
    let limit = 4 << 20;
    let (_up, run, _) = abuse(
        vec![("SendStreamingMessage", endless)],
        json!({"limits": {"max_text_bytes_per_run": limit}}),
        "endless",
        "limit_exceeded",
        secs(20),
    )
    .await;
    let streamed: usize = run
        .events
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|e| e["delta"].as_str().map_or(0, str::len))
        .sum();
    assert!(
        streamed <= limit + CHUNK,
        "text reaching the client stops near the limit: {streamed} bytes"
    );
    // Kept as a time, not a condition: "the gateway stopped reading" is an absence, so the
    // fake is given a while in which a gateway still reading would have it make more.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let made = made.load(Ordering::SeqCst);
    assert!(
        made < 100,
        "the gateway stopped reading the upstream ({made} of 201 events made)"
    );
}

/// A raw A2A 1.0 JSON-RPC upstream (one request per connection) whose message stream sends
/// one working task, then `tail`: bytes that are not HTTP/1.1 chunked framing. It has no
/// resubscribe (`-32601`) and no longer knows the task (`-32001`).
async fn framing_breaker(tail: &'static str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let card = card("breaker", "a stream with broken framing", &url, true);
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let card = card.clone();
            tokio::spawn(async move {
                let mut read = Vec::new();
                let mut buf = [0u8; 4096];
                let head_end = loop {
                    if let Some(i) = read.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => read.extend_from_slice(&buf[..n]),
                    }
                };
                let head = String::from_utf8_lossy(&read[..head_end]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse().unwrap());
                while read.len() < head_end + length {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => read.extend_from_slice(&buf[..n]),
                    }
                }
                let json = |body: Value| {
                    let body = body.to_string();
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    )
                };
                let answer = if head.starts_with("get ") {
                    json(card)
                } else {
                    let call: Value = serde_json::from_slice(&read[head_end..]).unwrap();
                    let error = |code: i64| {
                        json(json!({"jsonrpc": "2.0", "id": call["id"],
                            "error": {"code": code, "message": "no"}}))
                    };
                    match call["method"].as_str().unwrap_or_default() {
                        "SendStreamingMessage" => {
                            let frame = json!({"jsonrpc": "2.0", "id": call["id"],
                                "result": task("TASK_STATE_WORKING", None)});
                            let event = format!("data: {frame}\r\n\r\n");
                            format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                                 transfer-encoding: chunked\r\nconnection: close\r\n\r\n\
                                 {:x}\r\n{event}\r\n{tail}",
                                event.len()
                            )
                        }
                        "SubscribeToTask" => error(-32601),
                        _ => error(-32001),
                    }
                };
                let _ = conn.write_all(answer.as_bytes()).await;
                // Held open: the stream ends on its framing, not on the connection's end.
                tokio::time::sleep(secs(5)).await;
            });
        }
    });
    url
}

/// docs/design.md#9-reliability-and-limits: a stream that breaks on its framing (a chunk
/// size that is not hex, a chunk line ended by a bare LF) at an agent without resubscribe
/// ends in a `RUN_ERROR` naming the framing error first and the refused recovery after it.
#[tokio::test(flavor = "multi_thread")]
async fn a_framing_error_stays_the_cause_when_recovery_is_refused() {
    for (tail, framing) in [
        ("zz\r\n", "a chunk size that is not hex digits"),
        ("1a\n", "a chunked body line ended by a bare LF"),
    ] {
        let url = framing_breaker(tail).await;
        let config = json!({"agents": [{"name": "hostile", "url": url}]});
        let gw = Gateway::start(&config.to_string(), true).await;
        let body = run_input("framing-refused", "go");
        let (_, error) = expect_run_error(&gw, body, "upstream_stream_ended", secs(10)).await;
        let message = error["message"].as_str().unwrap();
        let (cause, refused) = (message.find(framing), message.find("-32601"));
        assert!(
            matches!((cause, refused), (Some(c), Some(r)) if c < r),
            "{message}"
        );
    }
}
