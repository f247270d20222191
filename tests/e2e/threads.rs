//! The threads API (docs/design.md#3-http-surface) on the demo agent: the list with real
//! statuses, paged and filtered, one thread's messages, state and pending interrupts, the
//! inbox across agents, the scope of each caller (docs/design.md#11-security), and agents
//! that cannot be read: never an empty list, always a 502/504 or a name in the inbox's
//! `unavailable`.

use serde_json::{json, Value};

use crate::fake::{Answer, Fake};
use crate::support::*;

async fn get(url: &str, key: Option<&str>) -> (u16, Value) {
    let mut req = reqwest::Client::new().get(url);
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap())
}

fn ids(list: &Value) -> Vec<(String, String)> {
    list["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["threadId"].as_str().unwrap().to_owned(),
                t["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn threads_are_listed_with_their_live_status_and_read_back() {
    // The inbox is kept by one shared poll per interval (docs/design.md#the-live-inbox).
    let gw = Gateway::start(r#"{"inbox": {"poll_s": 1}}"#, true).await;
    let url = gw.agent_url("demo");
    drive_message(&url, "th-done", "echo all done").await;
    drive_message(&url, "th-wait", "approve").await;
    drive(&url, "th-fail", json!([{"message": "fail"}])).await;

    let (status, list) = get(&format!("{url}/threads"), None).await;
    assert_eq!(status, 200);
    assert_eq!(list["source"], "upstream");
    let listed = ids(&list);
    assert_eq!(
        listed,
        [
            ("th-fail".to_owned(), "failed".to_owned()),
            ("th-wait".to_owned(), "input-required".to_owned()),
            ("th-done".to_owned(), "idle".to_owned()),
        ],
        "newest first, each under the client's threadId"
    );
    let (_, waiting) = get(&format!("{url}/threads?status=input-required"), None).await;
    assert_eq!(
        ids(&waiting),
        [("th-wait".to_owned(), "input-required".to_owned())]
    );
    let (_, first) = get(&format!("{url}/threads?pageSize=2"), None).await;
    assert_eq!(first["threads"].as_array().unwrap().len(), 2);
    let token = first["nextPageToken"].as_str().unwrap();
    let (_, second) = get(&format!("{url}/threads?pageSize=2&pageToken={token}"), None).await;
    assert_eq!(ids(&second), [("th-done".to_owned(), "idle".to_owned())]);
    assert!(second.get("nextPageToken").is_none());
    let (bad, err) = get(&format!("{url}/threads?status=sleeping"), None).await;
    assert_eq!(
        (bad, err["error"]["code"].as_str()),
        (400, Some("invalid_query"))
    );

    // The inbox across agents: what waits for a human, once the shared poll read it.
    let waiting = format!("{}/threads?status=input-required", gw.base);
    let inbox = wait_until(
        "the inbox shows th-wait",
        std::time::Duration::from_secs(5),
        async || {
            let (_, inbox) = get(&waiting, None).await;
            match inbox["threads"][0]["threadId"] == "th-wait" {
                true => Ok(inbox),
                false => Err(inbox.to_string()),
            }
        },
    )
    .await;
    assert_eq!(inbox["threads"][0]["agent"], "demo");
    assert_eq!(inbox["threads"][0]["threadId"], "th-wait");

    // One thread: messages rebuilt from A2A history, state, pending interrupts.
    let (status, wait) = get(&format!("{url}/threads/th-wait"), None).await;
    assert_eq!(status, 200, "{wait}");
    let messages: Vec<(&str, &str)> = wait["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(
        messages,
        [
            ("user", "approve"),
            ("assistant", "Do you approve? Reply yes or no.")
        ]
    );
    assert_eq!(
        wait["messages"][0]["id"], "th-wait-user-1",
        "the client's ids"
    );
    assert_eq!(
        wait["state"]["a2a"]["task"]["state"], "input-required",
        "{wait}"
    );
    assert_eq!(wait["pendingInterrupts"].as_array().unwrap().len(), 1);
    let (missing, err) = get(&format!("{url}/threads/no-such-thread"), None).await;
    assert_eq!(
        (missing, err["error"]["code"].as_str()),
        (404, Some("unknown_thread"))
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_caller_lists_and_reads_only_its_own_threads() {
    let (alice, bob) = ("e2e-alice-key-0123456789", "e2e-bob-key-0123456789ab");
    let config = json!({"auth": {"api_keys": [
        {"name": "alice", "key": alice}, {"name": "bob", "key": bob}]}});
    let gw = Gateway::start(&config.to_string(), true).await;
    let url = gw.agent_url("demo");
    let steps = drive_with(json!({"url": url, "threadId": "alice-thread",
        "headers": {"Authorization": format!("Bearer {alice}")},
        "steps": [{"message": "approve"}]}))
    .await;
    assert_accepted(&steps[0]);
    let context = steps[0]["state"]["a2a"]["contextId"]
        .as_str()
        .unwrap()
        .to_owned();

    let (_, mine) = get(&format!("{url}/threads"), Some(alice)).await;
    assert_eq!(
        ids(&mine),
        [("alice-thread".to_owned(), "input-required".to_owned())]
    );
    let (_, theirs) = get(&format!("{url}/threads"), Some(bob)).await;
    assert!(ids(&theirs).is_empty(), "{theirs}");
    let (_, inbox) = get(&format!("{}/threads", gw.base), Some(bob)).await;
    assert!(ids(&inbox).is_empty());
    for thread in ["alice-thread", context.as_str()] {
        let (status, _) = get(&format!("{url}/threads/{thread}"), Some(bob)).await;
        assert_eq!(status, 404, "bob reads {thread}");
    }
    let (status, _) = get(&format!("{url}/threads/alice-thread"), Some(alice)).await;
    assert_eq!(status, 200);
    let (unauth, _) = get(&format!("{url}/threads"), None).await;
    assert_eq!(unauth, 401);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_list_tasks_the_list_comes_from_the_bindings() {
    // A2A 0.3 has no ListTasks: the caller's threads come from the binding store, each with
    // the live status of its last task (GetTask).
    let gw = Gateway::with_agents(&[("old", upstream("0.3"))]).await;
    let url = gw.agent_url("old");
    let suffix = std::process::id();
    let (done, wait) = (format!("v03-done-{suffix}"), format!("v03-wait-{suffix}"));
    drive_message(&url, &done, "echo all done").await;
    drive_message(&url, &wait, "approve").await;
    let (status, list) = get(&format!("{url}/threads"), None).await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list["source"], "bindings");
    let mut listed = ids(&list);
    listed.sort();
    assert_eq!(
        listed,
        [
            (done.clone(), "idle".to_owned()),
            (wait.clone(), "input-required".to_owned())
        ]
    );
    let (status, detail) = get(&format!("{url}/threads/{wait}"), None).await;
    assert_eq!(status, 200, "{detail}");
    assert_eq!(detail["status"], "input-required");
    assert_eq!(detail["pendingInterrupts"].as_array().unwrap().len(), 1);
    assert_eq!(
        detail["messages"].as_array().unwrap().last().unwrap()["content"],
        "Do you approve? Reply yes or no."
    );
}

/// `(agent, threadId)` of an inbox's threads.
fn inbox_ids(inbox: &Value) -> Vec<(String, String)> {
    inbox["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let field = |k: &str| t[k].as_str().unwrap().to_owned();
            (field("agent"), field("threadId"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_cannot_be_read_never_looks_like_an_empty_inbox() {
    // `gone`: an upstream of this test's own, used and then killed; pinned to A2A 0.3 as
    // `gone03` its list comes from the bindings and `GetTask`. `never`: nothing ever listened
    // at its URL (its card was never read). `slow`: its `ListTasks` never answers. The demo
    // agent keeps answering, with a thread waiting for approval.
    let mut own = Upstream::start("both");
    let slow =
        Fake::start_responder(|method, _| (method == "ListTasks").then_some(Answer::Hang)).await;
    let config = json!({
        "agents": [
            {"name": "gone", "url": own.url},
            {"name": "gone03", "url": own.url, "protocol": "0.3"},
            {"name": "never", "url": closed_url()},
            {"name": "slow", "url": slow.url},
        ],
        "timeouts": {"upstream_call": 2000},
        "inbox": {"poll_s": 1},
    });
    let gw = Gateway::start(&config.to_string(), true).await;
    drive_message(&gw.agent_url("demo"), "live-wait", "approve").await;
    drive_message(&gw.agent_url("gone"), "gone-wait", "approve").await;
    drive_message(&gw.agent_url("gone03"), "gone03-wait", "approve").await;
    let waiting = format!("{}/threads?status=input-required", gw.base);
    let pair = |a: &str, t: &str| (a.to_owned(), t.to_owned());
    // (`gone` also sees `gone03`'s context under its contextId: one upstream, shared.)
    let within = std::time::Duration::from_secs(8);
    wait_until("the inbox lists every waiting thread", within, async || {
        let (status, inbox) = get(&waiting, None).await;
        assert_eq!(status, 200, "{inbox}");
        let listed = inbox_ids(&inbox);
        let all = [
            pair("demo", "live-wait"),
            pair("gone", "gone-wait"),
            pair("gone03", "gone03-wait"),
        ]
        .iter()
        .all(|e| listed.contains(e));
        all.then_some(()).ok_or(inbox.to_string())
    })
    .await;

    own.kill();
    // The inbox learns it at the next shared read of each agent.
    let inbox = wait_until("the dead agents are unavailable", within, async || {
        let (status, inbox) = get(&waiting, None).await;
        assert_eq!(status, 200, "{inbox}");
        let down = inbox["unavailable"].as_array().map_or(0, Vec::len) == 4;
        down.then_some(inbox.clone()).ok_or(inbox.to_string())
    })
    .await;
    assert_eq!(
        inbox_ids(&inbox),
        [pair("demo", "live-wait")],
        "the agents that answer are listed: {inbox}"
    );
    assert_eq!(
        inbox["unavailable"],
        json!([
            {"agent": "gone", "code": "upstream_unavailable"},
            {"agent": "gone03", "code": "upstream_unavailable"},
            {"agent": "never", "code": "upstream_unavailable"},
            {"agent": "slow", "code": "upstream_timeout"},
        ]),
        "{inbox}"
    );

    // Each of them alone: a 502 (504) JSON error, on its list and on a thread of it.
    for (path, status, code) in [
        ("gone/threads", 502, "upstream_unavailable"),
        ("gone03/threads", 502, "upstream_unavailable"),
        ("never/threads", 502, "upstream_unavailable"),
        ("slow/threads", 504, "upstream_timeout"),
        ("gone/threads/gone-wait", 502, "upstream_unavailable"),
        ("gone03/threads/gone03-wait", 502, "upstream_unavailable"),
    ] {
        let (got, err) = get(&format!("{}/agents/{path}", gw.base), None).await;
        assert_eq!(
            (got, err["error"]["code"].as_str()),
            (status, Some(code)),
            "{path}: {err}"
        );
        let message = err["message"].as_str().expect("a top-level message");
        assert_eq!(message, err["error"]["message"], "{err}");
        assert!(message.len() > 10, "{path}: {message:?}");
    }
    let (status, live) = get(&format!("{}/threads", gw.agent_url("demo")), None).await;
    assert_eq!((status, ids(&live).len()), (200, 1), "{live}");

    // Every agent answering: `unavailable` is still there, empty.
    let gw = Gateway::start("{}", true).await;
    let (_, inbox) = get(&format!("{}/threads", gw.base), None).await;
    assert_eq!(inbox["unavailable"], json!([]), "{inbox}");
}
