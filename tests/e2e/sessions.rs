//! Sessions (docs/design.md#4-threads-and-contexts): a conversation started by any A2A client
//! is picked up over AG-UI with its turns, and one started over AG-UI is continued by any A2A
//! client.

use serde_json::{json, Value};

use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_conversation_started_over_a2a_is_picked_up_with_its_turns() {
    let up = upstream("both");
    // The motivating case of the sessions issue: a client-chosen contextId over A2A...
    let context = format!("my-task-001-{}", std::process::id());
    let first = "Investigate the failing test in pkg/foo";
    a2a_send(up, "m1", &context, first).await;
    // ...later picked up over AG-UI with threadId = that contextId.
    let gw = Gateway::with_agents(&[("ref", up)]).await;
    let step = drive_message(&gw.agent_url("ref"), &context, "echo continue it").await;
    let types = event_types(&step);
    assert_eq!(
        &types[..3],
        ["RUN_STARTED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT"]
    );
    let transcript = transcript(&step);
    assert_eq!(
        transcript[..3],
        [
            ("user".to_owned(), first.to_owned()),
            ("assistant".to_owned(), format!("unknown scenario: {first}")),
            ("user".to_owned(), "echo continue it".to_owned()),
        ]
    );
    assert_eq!(
        transcript.last().unwrap(),
        &("assistant".to_owned(), "continue it".to_owned())
    );
    let snapshot = step["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "MESSAGES_SNAPSHOT")
        .unwrap();
    assert_eq!(snapshot["messages"][0]["id"], "m1", "A2A ids are kept");
    // The new turn landed in the same context.
    assert_eq!(step["state"]["a2a"]["contextId"], context.as_str());
    assert_eq!(
        step["events"][0]["metadata"]["a2a"]["contextId"],
        context.as_str()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_new_thread_is_not_picked_up() {
    let gw = Gateway::with_agents(&[("ref", upstream("both"))]).await;
    let thread = format!("fresh-thread-{}", std::process::id());
    let step = drive_message(&gw.agent_url("ref"), &thread, "echo hi").await;
    assert!(!event_types(&step).contains(&"MESSAGES_SNAPSHOT".to_owned()));
    assert_ne!(
        step["state"]["a2a"]["contextId"],
        thread.as_str(),
        "a threadId unknown upstream is never sent as a contextId"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_conversation_started_over_ag_ui_is_continued_by_an_a2a_client() {
    let up = upstream("both");
    let gw = Gateway::with_agents(&[("ref", up)]).await;
    let step = drive_message(&gw.agent_url("ref"), "agui-first", "echo from the browser").await;
    let context = step["events"][0]["metadata"]["a2a"]["contextId"]
        .as_str()
        .unwrap()
        .to_owned();
    let reply = a2a_send(up, "a2a-next", &context, "echo from a script").await;
    assert_eq!(reply["result"]["contextId"], context.as_str());
}

/// Issue 19.1: client B opens a thread client A talks on with only its own new message: the
/// run opens with the thread's history (the ids A holds), then the new turn; client A, who
/// holds the history, gets no snapshot.
#[tokio::test(flavor = "multi_thread")]
async fn a_second_client_on_a_thread_opens_with_its_history() {
    let gw = Gateway::start("{}", true).await;
    let url = gw.agent_url("demo");
    let thread = "two-devices";
    let a = drive(
        &url,
        thread,
        json!([{"message": "echo one"}, {"message": "echo two"}]),
    )
    .await;
    for step in &a {
        assert_accepted(step);
        assert!(!event_types(step).contains(&"MESSAGES_SNAPSHOT".to_owned()));
    }
    let held: Vec<Value> = a[1]["messages"].as_array().unwrap().clone();

    let b = drive_with(json!({"url": url, "threadId": thread,
        "steps": [{"message": "echo three", "messageId": "device-b-1"}]}))
    .await;
    assert_accepted(&b[0]);
    let types = event_types(&b[0]);
    assert_eq!(
        &types[..3],
        ["RUN_STARTED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT"],
        "{types:?}"
    );
    let b_transcript = transcript(&b[0]);
    let expected: Vec<(String, String)> = [
        ("user", "echo one"),
        ("assistant", "one"),
        ("user", "echo two"),
        ("assistant", "two"),
        ("user", "echo three"),
        ("assistant", "three"),
    ]
    .iter()
    .map(|(r, c)| (r.to_string(), c.to_string()))
    .collect();
    assert_eq!(b_transcript, expected);
    // The history carries the ids client A holds (the live projection's).
    let ids = |messages: &[Value]| -> Vec<String> {
        messages
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let b_messages = b[0]["messages"].as_array().unwrap();
    assert_eq!(ids(&b_messages[..4]), ids(&held));

    // Client A's tab (its messages and state as its last run left them) missed B's turn:
    // its state names an older task than the thread's last, so its next run opens with the
    // history too, its own new question last.
    let a_next = drive_with(json!({"url": url, "threadId": thread,
        "initialMessages": held, "initialState": a[1]["state"],
        "steps": [{"message": "echo four", "messageId": "device-a-3"}]}))
    .await;
    assert_accepted(&a_next[0]);
    let mut all = expected.clone();
    all.push(("user".into(), "echo four".into()));
    all.push(("assistant".into(), "four".into()));
    assert_eq!(transcript(&a_next[0]), all);
    assert!(event_types(&a_next[0]).contains(&"MESSAGES_SNAPSHOT".to_owned()));
}

/// Issue 19.2: an answered approval reloads in the order it was said, through the thread
/// detail and CopilotKit's connect.
#[tokio::test(flavor = "multi_thread")]
async fn an_answered_approval_reloads_in_order() {
    let gw = Gateway::start("{}", true).await;
    let url = gw.agent_url("demo");
    let thread = "answered-approval";
    let steps = drive(
        &url,
        thread,
        json!([{"message": "approve"}, {"resume": {"status": "resolved", "payload": "yes"}}]),
    )
    .await;
    for step in &steps {
        assert_accepted(step);
    }
    let said = [
        "approve",
        "Do you approve? Reply yes or no.",
        "yes",
        "Approved: yes",
    ];
    let contents = |messages: &Value| -> Vec<String> {
        messages
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user" || m["role"] == "assistant")
            .map(|m| m["content"].as_str().unwrap_or_default().trim().to_owned())
            .collect()
    };
    let detail: Value = reqwest::get(format!("{url}/threads/{thread}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(contents(&detail["messages"]), said, "{detail}");
    let connect = format!("{}/copilotkit/agent/demo/connect", gw.base);
    let body = json!({"threadId": thread, "runId": "reload", "messages": [], "state": {},
        "tools": [], "context": [], "forwardedProps": {}});
    let reloaded = post_run(&connect, &body, std::time::Duration::from_secs(20)).await;
    let snapshot = reloaded
        .events
        .iter()
        .find(|e| e["type"] == "MESSAGES_SNAPSHOT")
        .expect("a MESSAGES_SNAPSHOT");
    assert_eq!(contents(&snapshot["messages"]), said, "{}", reloaded.raw);
}
