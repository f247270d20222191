//! Sessions (DESIGN §4): a conversation started by any A2A client is picked up over AG-UI
//! with its turns, and one started over AG-UI is continued by any A2A client.

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
