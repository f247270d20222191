//! Everything the upstream received (docs/design.md#4-threads-and-contexts,
//! docs/design.md#11-security): a gateway with inbound API keys in front of the scriptable
//! fake, a few runs with distinctive thread and run ids, then every request the upstream
//! recorded (method, headers, body) is checked. The runId never goes upstream; the threadId
//! only as the `contextId` filter of a pick-up `ListTasks`; the inbound key never; the
//! agent's static headers and the `forward_identity` header go on every call; without
//! `forward_identity` no caller identity leaves the gateway.

use std::time::Duration;

use serde_json::{json, Value};

use crate::fake::{task, update, Answer, Fake, Recorded};
use crate::support::*;

const INBOUND_KEY: &str = "alice-inbound-key-0123456789";
const UPSTREAM_SECRET: &str = "upstream-secret-1";
const THREADS: [&str; 3] = ["THREAD-MARKER-1", "THREAD-MARKER-2", "THREAD-MARKER-3"];
const RUNS: [&str; 4] = [
    "RUN-MARKER-1",
    "RUN-MARKER-2",
    "RUN-MARKER-3",
    "RUN-MARKER-4",
];

/// A streaming upstream: a normal answer (submitted, working with text, completed); a
/// message with id `msg-cut` gets a stream that ends unfinished, completed by
/// `SubscribeToTask`; `SendMessage` completes at once; `ListTasks` knows no context.
async fn upstream() -> Fake {
    Fake::start_responder(|method, params| match method {
        "SendStreamingMessage" if params["message"]["messageId"] == "msg-cut" => {
            Some(Answer::Frames(vec![
                task("TASK_STATE_SUBMITTED", None),
                update("TASK_STATE_WORKING", Some(("a-cut", "part one "))),
            ]))
        }
        "SendStreamingMessage" => Some(Answer::Frames(vec![
            task("TASK_STATE_SUBMITTED", None),
            update("TASK_STATE_WORKING", Some(("a1", "hello there"))),
            update("TASK_STATE_COMPLETED", None),
        ])),
        "SubscribeToTask" => Some(Answer::Frames(vec![
            task("TASK_STATE_WORKING", Some(("a-cut", "part one "))),
            update("TASK_STATE_COMPLETED", Some(("a-cut2", "part two"))),
        ])),
        "SendMessage" => Some(Answer::Json(json!({"result": task(
            "TASK_STATE_COMPLETED",
            Some(("a-send", "sent, not streamed")),
        )}))),
        "ListTasks" => Some(Answer::Json(json!({"result": {"tasks": []}}))),
        _ => None,
    })
    .await
}

async fn gateway(up: &Fake, forward_identity: bool) -> Gateway {
    let mut agent = json!({
        "name": "up",
        "url": up.url,
        "headers": {"X-Api-Key": UPSTREAM_SECRET},
        // Contexts started elsewhere are visible to every caller: the pick-up lookup runs.
        "visibility": "shared",
    });
    if forward_identity {
        agent["forward_identity"] = json!("X-Caller");
    }
    let config = json!({
        "auth": {"api_keys": [{"name": "alice", "key": INBOUND_KEY}]},
        "agents": [agent],
    });
    Gateway::start(&config.to_string(), false).await
}

/// One run as alice; the message ids carry no marker (they go upstream as messageIds).
async fn run(gw: &Gateway, thread: &str, run: &str, message_id: &str, extra: Value) -> String {
    let mut body = json!({
        "threadId": thread,
        "runId": run,
        "messages": [{"id": message_id, "role": "user", "content": "hello"}],
    });
    if let Value::Object(extra) = extra {
        body.as_object_mut().unwrap().extend(extra);
    }
    let resp = reqwest::Client::new()
        .post(gw.agent_url("up"))
        .bearer_auth(INBOUND_KEY)
        .json(&body)
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    assert!(text.contains("RUN_FINISHED"), "{thread}/{run}: {text}");
    text
}

/// The inbox, the thread list and detail, CopilotKit connect and stop for `thread`, as alice.
async fn read_outside_runs(gw: &Gateway, thread: &str) {
    let client = reqwest::Client::new();
    let gets = [
        format!("{}/threads", gw.base),
        format!("{}/threads", gw.agent_url("up")),
        format!("{}/threads/{thread}", gw.agent_url("up")),
    ];
    for url in gets {
        let resp = client
            .get(&url)
            .bearer_auth(INBOUND_KEY)
            .send()
            .await
            .unwrap();
        // The detail is 404: this upstream's ListTasks knows no task of the thread.
        assert!(matches!(resp.status().as_u16(), 200 | 404), "{url}");
    }
    let connect = json!({"threadId": thread, "runId": "connect", "messages": []});
    let posts = [
        (format!("{}/copilotkit/agent/up/connect", gw.base), connect),
        (
            format!("{}/copilotkit/agent/up/stop/{thread}", gw.base),
            json!({}),
        ),
    ];
    for (url, body) in posts {
        let resp = client.post(&url).bearer_auth(INBOUND_KEY).json(&body);
        let resp = resp.timeout(Duration::from_secs(20)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{url}");
        resp.text().await.unwrap();
    }
}

/// What a recorded request shows of `needle` outside the one place it may be: the threadId
/// only as `params.contextId` of a `ListTasks`. Returns a description of each leak.
fn leaks(requests: &[Recorded], needle: &str, thread_filter_allowed: bool) -> Vec<String> {
    let mut found = Vec::new();
    for r in requests {
        let mut body: Value = serde_json::from_str(&r.body).unwrap_or(Value::Null);
        if thread_filter_allowed && r.method == "ListTasks" && body["params"]["contextId"] == needle
        {
            body["params"]["contextId"] = json!("<filter>");
        }
        let headers = format!("{:?}", r.headers);
        for (part, text) in [
            ("method", r.method.clone()),
            ("path", r.path.clone()),
            ("headers", headers),
            ("body", body.to_string()),
            // The raw body too, in case it is not JSON at all.
            (
                "raw body",
                if body.is_null() {
                    r.body.clone()
                } else {
                    String::new()
                },
            ),
        ] {
            if text.contains(needle) {
                found.push(format!("{needle} in the {part} of {}: {text}", r.method));
            }
        }
    }
    found
}

#[test]
fn the_leak_check_catches_a_thread_id_in_a_message() {
    let sent = |method: &str, body: Value| Recorded {
        method: method.into(),
        path: "/".into(),
        headers: vec![("x-caller".into(), "alice".into())],
        body: body.to_string(),
    };
    let filter = sent(
        "ListTasks",
        json!({"params": {"contextId": "THREAD-MARKER-1", "pageSize": 50}}),
    );
    assert!(leaks(std::slice::from_ref(&filter), "THREAD-MARKER-1", true).is_empty());
    assert_eq!(leaks(&[filter], "THREAD-MARKER-1", false).len(), 1);
    let in_message = sent(
        "SendStreamingMessage",
        json!({"params": {"message": {"contextId": "THREAD-MARKER-1", "parts": []}}}),
    );
    assert_eq!(leaks(&[in_message], "THREAD-MARKER-1", true).len(), 1);
    let in_list_elsewhere = sent(
        "ListTasks",
        json!({"params": {"contextId": "THREAD-MARKER-1", "pageToken": "THREAD-MARKER-1"}}),
    );
    assert_eq!(
        leaks(&[in_list_elsewhere], "THREAD-MARKER-1", true).len(),
        1
    );
    let mut in_header = sent("GetTask", json!({}));
    in_header
        .headers
        .push(("x-thread".into(), "THREAD-MARKER-1".into()));
    assert_eq!(leaks(&[in_header], "THREAD-MARKER-1", true).len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_upstream_sees_no_inbound_ids_or_keys_and_every_call_carries_the_caller() {
    let up = upstream().await;
    let gw = gateway(&up, true).await;
    // A new thread (pick-up asks ListTasks), its second run (the bound context), a stream
    // cut and recovered by SubscribeToTask, and a blocking send.
    run(&gw, THREADS[0], RUNS[0], "msg-1", json!({})).await;
    run(&gw, THREADS[0], RUNS[1], "msg-2", json!({})).await;
    let cut = run(&gw, THREADS[1], RUNS[2], "msg-cut", json!({})).await;
    assert!(cut.contains("part two"), "{cut}");
    let send = json!({"forwardedProps": {"a2a": {"mode": "send"}}});
    let sent = run(&gw, THREADS[2], RUNS[3], "msg-3", send).await;
    assert!(sent.contains("sent, not streamed"), "{sent}");
    // The routes that read or cancel on the caller's behalf outside a run: the inbox, a
    // thread's list and detail, CopilotKit's connect and stop.
    let before = up.requests().len();
    read_outside_runs(&gw, THREADS[0]).await;
    assert!(up.requests().len() >= before + 4, "{:?}", up.calls());

    let requests = up.requests();
    let methods: Vec<&str> = requests.iter().map(|r| r.method.as_str()).collect();
    for method in [
        "ListTasks",
        "SendStreamingMessage",
        "SubscribeToTask",
        "SendMessage",
    ] {
        assert!(methods.contains(&method), "no {method} in {methods:?}");
    }
    // The pick-up lookup is the threadId's one way upstream.
    let lookups: Vec<&str> = requests
        .iter()
        .filter(|r| r.method == "ListTasks")
        .filter_map(|r| {
            let body: Value = serde_json::from_str(&r.body).ok()?;
            THREADS
                .into_iter()
                .find(|t| body["params"]["contextId"] == *t)
        })
        .collect();
    assert!(lookups.contains(&THREADS[0]), "{methods:?}");

    let mut problems = Vec::new();
    for thread in THREADS {
        problems.extend(leaks(&requests, thread, true));
    }
    for needle in RUNS.into_iter().chain([INBOUND_KEY]) {
        problems.extend(leaks(&requests, needle, false));
    }
    for r in &requests {
        if r.header("x-api-key") != Some(UPSTREAM_SECRET) {
            problems.push(format!("{} without X-Api-Key: {:?}", r.method, r.headers));
        }
        if r.header("x-caller") != Some("alice") {
            problems.push(format!(
                "{} without X-Caller: alice: {:?}",
                r.method, r.headers
            ));
        }
        if r.header("authorization").is_some() {
            problems.push(format!("{} with an Authorization header", r.method));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");

    // Without forward_identity the caller stays at the gateway.
    let quiet_up = upstream().await;
    let quiet = gateway(&quiet_up, false).await;
    run(&quiet, THREADS[0], RUNS[0], "msg-1", json!({})).await;
    run(&quiet, THREADS[1], RUNS[2], "msg-cut", json!({})).await;
    let requests = quiet_up.requests();
    assert!(requests.len() >= 4, "{requests:?}");
    for r in &requests {
        assert_eq!(r.header("x-api-key"), Some(UPSTREAM_SECRET), "{r:?}");
        assert!(r.header("x-caller").is_none(), "{r:?}");
        assert!(!r.headers.iter().any(|(_, v)| v.contains("alice")), "{r:?}");
    }
}
