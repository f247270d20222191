//! Every stream the gateway replays passes the event verifier of every client version it
//! serves (docs/mapping.md#replays): `@ag-ui/client` 1.0.0, and 0.0.59 and 0.0.48, the
//! clients CopilotKit React 1.74 and `@copilotkitnext/core` 1.54 ship. A replay is a stream
//! that opens with what the thread already holds: CopilotKit's `connect` (the thread's history
//! as one run, then the live task), a pick-up (a run on a thread whose context the gateway did
//! not start here) and a reattach (`subscribeOnly` on a running task). Each scenario's thread —
//! answered, waiting for an approval, for credentials, for a form, failed, rejected, canceled,
//! with an artifact, with a frontend tool call still unanswered — is replayed each way, asked
//! once as a 1.0 client (`protocolVersion: "1.0"`) and once as an older one, and each
//! stream is judged by the verifiers of the versions that would have asked it that way.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;

const WITHIN: Duration = Duration::from_secs(20);

/// The client versions a stream is judged by: node_modules dirs under `tests/`.
const V1_CLIENTS: &[&str] = &["tests/client"];
const OLDER_CLIENTS: &[&str] = &["tests/client-0.0.59", "tests/copilotkit"];

/// One recorded stream and who asked for it.
struct Recorded {
    name: String,
    v1: bool,
    events: Vec<Value>,
}

/// `body` as a 1.0 client or an older one would send it.
fn asked(mut body: Value, v1: bool) -> Value {
    if v1 {
        body["protocolVersion"] = json!("1.0");
    }
    body
}

fn input(thread: &str, run: &str, messages: Value, props: Value) -> Value {
    json!({"threadId": thread, "runId": run, "messages": messages, "state": {}, "tools": [],
        "context": [], "forwardedProps": props})
}

fn user(thread: &str, n: u32, text: &str) -> Value {
    json!({"id": format!("{thread}-user-{n}"), "role": "user", "content": text})
}

/// The contextId the gateway bound the run's thread to.
fn context_of(run: &SseRun) -> String {
    run.events
        .iter()
        .find(|e| e["type"] == "RUN_STARTED")
        .and_then(|e| e["metadata"]["a2a"]["contextId"].as_str())
        .unwrap_or_else(|| panic!("RUN_STARTED names the context: {:?}", run.types()))
        .to_owned()
}

/// A reload: the page holds nothing of `thread`, CopilotKit connects at `connect_url`; the
/// replay, which must hold the thread's messages.
async fn reload(connect_url: &str, thread: &str, v1: bool) -> SseRun {
    let connect = input(thread, &format!("{thread}-c"), json!([]), json!({}));
    let replay = post_run(connect_url, &asked(connect, v1), WITHIN).await;
    assert!(
        replay.types().contains(&"MESSAGES_SNAPSHOT"),
        "{thread}: connect replays the thread: {:?}",
        replay.types()
    );
    replay
}

/// POSTs `body` to `url` and reads what arrives for `after`, then leaves (a client gone).
async fn leave_after(url: &str, body: &Value, after: Duration) -> Vec<Value> {
    let mut resp = reqwest::Client::new()
        .post(url)
        .json(body)
        .send()
        .await
        .unwrap();
    let mut raw = Vec::new();
    let _ = tokio::time::timeout(after, async {
        while let Ok(Some(chunk)) = resp.chunk().await {
            raw.extend_from_slice(&chunk);
        }
    })
    .await;
    sse_events(&String::from_utf8_lossy(&raw))
}

/// Runs `streams` through the verifier of each client of its kind; the failures.
async fn verify(streams: &[Recorded]) -> Vec<String> {
    let mut failures = Vec::new();
    for (clients, v1) in [(V1_CLIENTS, true), (OLDER_CLIENTS, false)] {
        for dir in clients {
            require(
                &root().join(dir).join("node_modules/@ag-ui/client"),
                "an @ag-ui/client version",
            );
        }
        let streams: Vec<Value> = streams
            .iter()
            .filter(|s| s.v1 == v1)
            .map(|s| json!({"name": s.name, "events": s.events}))
            .collect();
        let mut node = tokio::process::Command::new("node")
            .arg("tests/client/verify.mjs")
            .current_dir(root())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("run node");
        let input = json!({"clients": clients, "streams": streams}).to_string();
        let mut stdin = node.stdin.take().unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut stdin, input.as_bytes())
            .await
            .unwrap();
        drop(stdin);
        let out = tokio::time::timeout(WITHIN, node.wait_with_output())
            .await
            .expect("the verifier ends")
            .unwrap();
        let report: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("verify.mjs: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(
            report.as_object().map(|r| r.len()),
            Some(clients.len()),
            "{report}"
        );
        for (version, results) in report.as_object().unwrap() {
            assert_eq!(results.as_object().unwrap().len(), streams.len());
            for (stream, verdict) in results.as_object().unwrap() {
                if verdict != "ok" {
                    failures.push(format!("{version} refuses {stream}: {verdict}"));
                }
            }
        }
    }
    failures
}

#[tokio::test(flavor = "multi_thread")]
async fn every_replay_passes_each_clients_verifier() {
    let up = upstream("both");
    let gw = Gateway::with_agents(&[("ref", up)]).await;
    let run_url = gw.agent_url("ref");
    let connect_url = format!("{}/copilotkit/agent/ref/connect", gw.base);
    let mut recorded = Vec::new();
    let mut record = |name: String, v1: bool, run: SseRun| {
        assert_eq!(run.status, 200, "{name}: {}", run.raw);
        assert!(
            matches!(
                run.types().last().copied(),
                Some("RUN_FINISHED" | "RUN_ERROR")
            ),
            "{name}: {:?}",
            run.types()
        );
        recorded.push(Recorded {
            name,
            v1,
            events: run.events,
        });
    };
    let pid = std::process::id();
    for v1 in [true, false] {
        let who = if v1 { "v1" } else { "older" };
        for scenario in [
            "echo answered",
            "artifact",
            "approve",
            "auth",
            "form",
            "fail",
            "reject",
            "frontend",
        ] {
            let word = scenario.split(' ').next().unwrap();
            let thread = format!("replay-{who}-{word}-{pid}");
            let body = input(
                &thread,
                &format!("{thread}-1"),
                json!([user(&thread, 1, scenario)]),
                json!({}),
            );
            let live = post_run(&run_url, &asked(body, v1), WITHIN).await;
            let context = context_of(&live);
            record(format!("{who} {word}: the live run"), v1, live);
            let replay = reload(&connect_url, &thread, v1).await;
            record(format!("{who} {word}: connect"), v1, replay);
            // A pick-up: the same conversation by its contextId, as another client of the
            // same caller would name it, with a new turn.
            let pick = input(
                &context,
                &format!("{thread}-p"),
                json!([user(&context, 2, "echo picked up")]),
                json!({}),
            );
            let picked = post_run(&run_url, &asked(pick, v1), WITHIN).await;
            assert!(
                picked.types().contains(&"MESSAGES_SNAPSHOT"),
                "{who} {word}: the pick-up opens with the turns: {:?}",
                picked.types()
            );
            record(format!("{who} {word}: pick-up"), v1, picked);
        }
        // A canceled task, and a reattach to a running one: `slow`, left by its client,
        // reattached with `subscribeOnly`, then stopped through CopilotKit.
        let thread = format!("replay-{who}-slow-{pid}");
        let slow = input(
            &thread,
            &format!("{thread}-1"),
            json!([user(&thread, 1, "slow 40")]),
            json!({}),
        );
        let left = leave_after(&run_url, &asked(slow, v1), Duration::from_millis(600)).await;
        assert!(
            left.iter().any(|e| e["type"] == "TEXT_MESSAGE_CONTENT"),
            "the task ticks: {left:?}"
        );
        let task = left
            .iter()
            .filter(|e| e["type"] == "STATE_DELTA")
            .flat_map(|e| e["delta"].as_array().cloned().unwrap_or_default())
            .find(|op| op["path"] == "/a2a/task")
            .and_then(|op| op["value"]["id"].as_str().map(str::to_owned))
            .unwrap_or_else(|| panic!("the task's id in a /a2a/task delta: {left:?}"));
        let stop_url = format!("{}/copilotkit/agent/ref/stop/{thread}", gw.base);
        let stopper = async {
            tokio::time::sleep(Duration::from_millis(800)).await;
            let stopped = reqwest::Client::new().post(&stop_url).send().await.unwrap();
            assert_eq!(stopped.status(), 200);
        };
        let reattach = input(
            &thread,
            &format!("{thread}-r"),
            json!([]),
            json!({"a2a": {"subscribeOnly": true, "taskId": task}}),
        );
        let reattach = asked(reattach, v1);
        let (reattached, ()) = tokio::join!(post_run(&run_url, &reattach, WITHIN), stopper);
        assert!(
            reattached.types().contains(&"MESSAGES_SNAPSHOT"),
            "{} {}",
            reattached.status,
            reattached.raw
        );
        record(format!("{who} slow: reattach, then stop"), v1, reattached);
        let replay = reload(&connect_url, &thread, v1).await;
        record(format!("{who} slow: connect after the stop"), v1, replay);
    }
    assert_eq!(recorded.len(), 2 * (8 * 3 + 2));
    let failures = verify(&recorded).await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The verifiers judge: a replay that ends with a text message still open is refused by
/// every version (what ag-ui #2813 reports), so the test above can fail.
#[tokio::test(flavor = "multi_thread")]
async fn the_verifiers_refuse_a_replay_left_open() {
    let open = |v1| Recorded {
        name: "open".into(),
        v1,
        events: vec![
            json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r"}),
            json!({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}),
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}),
        ],
    };
    let failures = verify(&[open(true), open(false)]).await;
    assert_eq!(failures.len(), 3, "{failures:?}");
    for f in &failures {
        assert!(f.contains("still active"), "{f}");
    }
}

/// Delegation (docs/mapping.md#delegation-to-other-agents): a kagent parent delegating to a
/// kagent child, the agent configured `subagents: attributed`, so 1.0 clients get `SUBAGENT_*`
/// events and older ones the same as `CUSTOM` events. The live runs (answered, and waiting on
/// the child's approval) and CopilotKit's `connect` of each thread pass every verifier, 0.0.x
/// ones after their `EventSchemas` parse (0.0.48 refuses a `SUBAGENT_*` type it does not know).
#[tokio::test(flavor = "multi_thread")]
async fn delegation_streams_pass_each_clients_verifier() {
    let peer = crate::frameworks::kagent_delegation();
    let config =
        json!({"agents": [{"name": "kagent", "url": peer.url, "subagents": "attributed"}]});
    let gw = Gateway::start(&config.to_string(), false).await;
    let run_url = gw.agent_url("kagent");
    let connect_url = format!("{}/copilotkit/agent/kagent/connect", gw.base);
    let pid = std::process::id();
    let mut recorded = Vec::new();
    for v1 in [true, false] {
        let who = if v1 { "v1" } else { "older" };
        for (word, text) in [("list", "list pods"), ("delete", "delete pod nginx-7d9c5")] {
            let thread = format!("replay-delegate-{who}-{word}-{pid}");
            let body = input(
                &thread,
                &format!("{thread}-1"),
                json!([user(&thread, 1, text)]),
                json!({}),
            );
            let live = post_run(&run_url, &asked(body, v1), Duration::from_secs(60)).await;
            let kinds: Vec<String> = live
                .events
                .iter()
                .map(|e| match e["type"].as_str() {
                    Some("CUSTOM") => format!("CUSTOM {}", e["name"].as_str().unwrap_or("")),
                    other => other.unwrap_or("").to_owned(),
                })
                .collect();
            let started = if v1 {
                "SUBAGENT_STARTED"
            } else {
                "CUSTOM SUBAGENT_STARTED"
            };
            assert!(
                kinds.iter().any(|k| k == started),
                "{who} {word}: {kinds:?}"
            );
            recorded.push(Recorded {
                name: format!("{who} delegate {word}: the live run"),
                v1,
                events: live.events,
            });
            let replay = reload(&connect_url, &thread, v1).await;
            recorded.push(Recorded {
                name: format!("{who} delegate {word}: connect"),
                v1,
                events: replay.events,
            });
        }
    }
    let failures = verify(&recorded).await;
    assert!(failures.is_empty(), "{failures:#?}");
}
