//! CopilotKit's thread routes under `/copilotkit` (docs/copilotkit.md, issue 31): the list,
//! a thread's messages/state/events (what `connect` restores), rename/archive/delete kept per
//! caller in the binding store, with the demo agent and the a2a-sdk reference agent over
//! JSON-RPC and HTTP+JSON; two API-key callers; a thread started by a plain A2A client; the
//! marks surviving a gateway restart on Redis.

use std::time::Duration;

use serde_json::{json, Value};

use crate::redis::RedisServer;
use crate::support::*;

const ALICE: &str = "ck-threads-alice-key-0123456789";
const BOB: &str = "ck-threads-bob-key-0123456789ab";
const WITHIN: Duration = Duration::from_secs(20);

fn auth() -> Value {
    json!({"api_keys": [{"name": "alice", "key": ALICE}, {"name": "bob", "key": BOB}]})
}

fn ck(gw: &Gateway, path: &str) -> String {
    format!("{}/copilotkit{path}", gw.base)
}

/// One request as the caller with `key` (none: no credentials); the status and JSON body.
async fn call(method: &str, url: &str, key: Option<&str>, body: Option<Value>) -> (u16, Value) {
    let client = reqwest::Client::new();
    let mut req = client.request(method.parse().unwrap(), url);
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = tokio::time::timeout(WITHIN, req.send())
        .await
        .unwrap()
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// The thread list for `agent` as `key` (`extra`: more query), asserted 200.
async fn list(gw: &Gateway, key: &str, agent: &str, extra: &str) -> Value {
    let url = ck(gw, &format!("/threads?agentId={agent}{extra}"));
    let (status, body) = call("GET", &url, Some(key), None).await;
    assert_eq!(status, 200, "{url}: {body}");
    body
}

fn ids(list: &Value) -> Vec<String> {
    list["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect()
}

fn thread<'a>(list: &'a Value, id: &str) -> &'a Value {
    list["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .unwrap_or_else(|| panic!("{id} in {list}"))
}

/// A CopilotKit run of one user message on `thread`, as `key`, finished.
async fn run(gw: &Gateway, agent: &str, key: &str, thread: &str, n: u32, text: &str) {
    let body = json!({"threadId": thread, "runId": format!("{thread}-run-{n}"),
        "messages": [{"id": format!("{thread}-user-{n}"), "role": "user", "content": text}],
        "state": {}, "tools": [], "context": [], "forwardedProps": {}});
    let resp = post_as(&ck(gw, &format!("/agent/{agent}/run")), key, &body).await;
    assert_eq!(resp.status(), 200);
    let text = tokio::time::timeout(WITHIN, resp.text())
        .await
        .unwrap()
        .unwrap();
    assert!(text.contains("RUN_FINISHED"), "{text}");
}

/// A page reload's `connect` for `thread` as `key`: its events.
async fn connect(gw: &Gateway, agent: &str, key: &str, thread: &str) -> Vec<Value> {
    let body = json!({"threadId": thread, "runId": format!("{thread}-connect"), "messages": [],
        "state": {}, "tools": [], "context": [], "forwardedProps": {}});
    let resp = post_as(&ck(gw, &format!("/agent/{agent}/connect")), key, &body).await;
    assert_eq!(resp.status(), 200);
    let raw = tokio::time::timeout(WITHIN, resp.text())
        .await
        .unwrap()
        .unwrap();
    sse_events(&raw)
}

fn snapshot_of(events: &[Value]) -> Value {
    events
        .iter()
        .find(|e| e["type"] == "MESSAGES_SNAPSHOT")
        .unwrap_or_else(|| panic!("a MESSAGES_SNAPSHOT in {events:?}"))["messages"]
        .clone()
}

/// The route's `messages` are `connect`'s `MESSAGES_SNAPSHOT`: the same messages, ids and
/// order; `events` replays the same snapshot; `state` names the thread's context.
async fn assert_reads_as_connect(gw: &Gateway, agent: &str, key: &str, thread: &str) -> Value {
    let restored = snapshot_of(&connect(gw, agent, key, thread).await);
    assert!(!restored.as_array().unwrap().is_empty());
    let q = format!("?agentId={agent}");
    let (status, messages) = call(
        "GET",
        &ck(gw, &format!("/threads/{thread}/messages{q}")),
        Some(key),
        None,
    )
    .await;
    assert_eq!(status, 200, "{messages}");
    assert_eq!(messages["messages"], restored);
    // Without agentId: the agent that holds the caller's thread.
    let (_, found) = call(
        "GET",
        &ck(gw, &format!("/threads/{thread}/messages")),
        Some(key),
        None,
    )
    .await;
    assert_eq!(found["messages"], restored);
    let (status, events) = call(
        "GET",
        &ck(gw, &format!("/threads/{thread}/events{q}")),
        Some(key),
        None,
    )
    .await;
    assert_eq!(status, 200, "{events}");
    let events = events["events"].as_array().unwrap().clone();
    assert_eq!(events[0]["type"], "RUN_STARTED");
    assert_eq!(events[0]["threadId"], thread);
    assert_eq!(snapshot_of(&events), restored);
    let (status, state) = call(
        "GET",
        &ck(gw, &format!("/threads/{thread}/state{q}")),
        Some(key),
        None,
    )
    .await;
    assert_eq!(status, 200, "{state}");
    assert!(state["state"]["a2a"]["contextId"].is_string(), "{state}");
    restored
}

async fn mutate(gw: &Gateway, method: &str, path: &str, key: &str, body: Value) -> (u16, Value) {
    call(method, &ck(gw, path), Some(key), Some(body)).await
}

#[tokio::test(flavor = "multi_thread")]
async fn the_demo_agents_threads_list_read_rename_archive_and_delete() {
    let config = json!({"auth": auth()});
    let gw = Gateway::start(&config.to_string(), true).await;
    wait_ready(&gw).await;
    let (_, info) = call("GET", &ck(&gw, "/info"), Some(ALICE), None).await;
    assert_eq!(
        info["threadEndpoints"],
        json!({"list": true, "inspect": true, "mutations": true, "realtimeMetadata": false})
    );
    assert_eq!(info["mode"], "sse");

    run(&gw, "demo", ALICE, "ck-a-one", 1, "echo the first thread").await;
    run(&gw, "demo", ALICE, "ck-a-two", 1, "echo the second thread").await;
    run(&gw, "demo", ALICE, "ck-a-two", 2, "echo more").await;
    run(&gw, "demo", BOB, "ck-b-one", 1, "echo bob's thread").await;

    // Newest first, titled by the first user message, the caller's own only.
    let mine = list(&gw, ALICE, "demo", "").await;
    assert_eq!(ids(&mine), ["ck-a-two", "ck-a-one"], "{mine}");
    assert_eq!(mine["nextCursor"], Value::Null);
    let two = thread(&mine, "ck-a-two");
    assert_eq!(two["name"], "echo the second thread");
    assert_eq!(
        (
            &two["agentId"],
            &two["archived"],
            &two["organizationId"],
            &two["createdById"]
        ),
        (&json!("demo"), &json!(false), &json!(""), &json!("alice"))
    );
    for field in ["createdAt", "updatedAt", "lastRunAt"] {
        assert!(two[field].as_str().unwrap().starts_with("20"), "{two}");
    }
    assert!(
        two["createdAt"].as_str() <= two["lastRunAt"].as_str(),
        "{two}"
    );
    let theirs = list(&gw, BOB, "demo", "").await;
    assert_eq!(ids(&theirs), ["ck-b-one"]);
    // `default` is the only agent; across agents, with `unavailable`.
    assert_eq!(ids(&list(&gw, ALICE, "default", "").await), ids(&mine));
    let (_, across) = call("GET", &ck(&gw, "/threads"), Some(ALICE), None).await;
    assert_eq!(ids(&across), ids(&mine));
    assert_eq!(across["unavailable"], json!([]));

    // Pages.
    let first = list(&gw, ALICE, "demo", "&limit=1").await;
    assert_eq!(ids(&first), ["ck-a-two"]);
    let cursor = first["nextCursor"].as_str().unwrap().to_owned();
    let next = list(&gw, ALICE, "demo", &format!("&limit=1&cursor={cursor}")).await;
    assert_eq!(
        (ids(&next), &next["nextCursor"]),
        (vec!["ck-a-one".to_owned()], &Value::Null)
    );

    assert_reads_as_connect(&gw, "demo", ALICE, "ck-a-two").await;

    // Someone else's thread is a 404 on every route; no credentials a 401.
    let body = json!({"agentId": "demo", "name": "mine now"});
    for (method, path) in [
        ("GET", "/threads/ck-a-one/messages"),
        ("GET", "/threads/ck-a-one/state?agentId=demo"),
        ("GET", "/threads/ck-a-one/events"),
        ("PATCH", "/threads/ck-a-one"),
        ("POST", "/threads/ck-a-one/archive"),
        ("DELETE", "/threads/ck-a-one"),
    ] {
        let (status, err) = mutate(&gw, method, path, BOB, body.clone()).await;
        assert_eq!(
            (status, err["error"]["code"].as_str()),
            (404, Some("unknown_thread")),
            "{method} {path}"
        );
        let (status, _) = call(method, &ck(&gw, path), None, Some(body.clone())).await;
        assert_eq!(status, 401, "{method} {path}");
    }
    let (status, _) = call("GET", &ck(&gw, "/threads?agentId=demo"), None, None).await;
    assert_eq!(status, 401);

    // Rename: the record comes back, and the list keeps the name.
    let (status, renamed) = mutate(
        &gw,
        "PATCH",
        "/threads/ck-a-one",
        ALICE,
        json!({"agentId": "demo", "name": "  Groceries "}),
    )
    .await;
    assert_eq!(status, 200, "{renamed}");
    assert_eq!(
        (&renamed["id"], &renamed["name"]),
        (&json!("ck-a-one"), &json!("Groceries"))
    );
    assert_eq!(renamed["createdById"], "alice");
    assert_eq!(
        thread(&list(&gw, ALICE, "demo", "").await, "ck-a-one")["name"],
        "Groceries"
    );
    assert_eq!(
        thread(&list(&gw, BOB, "demo", "").await, "ck-b-one")["name"],
        "echo bob's thread"
    );

    // Archive: gone from the list, back with includeArchived, and back after an unarchive.
    let (status, archived) = mutate(
        &gw,
        "POST",
        "/threads/ck-a-two/archive",
        ALICE,
        json!({"agentId": "demo"}),
    )
    .await;
    assert_eq!(
        (status, archived),
        (200, json!({"threadId": "ck-a-two", "archived": true}))
    );
    assert_eq!(ids(&list(&gw, ALICE, "demo", "").await), ["ck-a-one"]);
    let all = list(&gw, ALICE, "demo", "&includeArchived=true").await;
    assert_eq!(ids(&all), ["ck-a-two", "ck-a-one"]);
    assert_eq!(thread(&all, "ck-a-two")["archived"], true);
    let (status, back) = mutate(
        &gw,
        "PATCH",
        "/threads/ck-a-two",
        ALICE,
        json!({"agentId": "demo", "archived": false}),
    )
    .await;
    assert_eq!((status, &back["archived"]), (200, &json!(false)), "{back}");
    assert_eq!(
        ids(&list(&gw, ALICE, "demo", "").await),
        ["ck-a-two", "ck-a-one"]
    );

    // Delete: gone even with includeArchived; the A2A history stays (connect restores it).
    let (status, deleted) = mutate(
        &gw,
        "DELETE",
        "/threads/ck-a-one",
        ALICE,
        json!({"agentId": "demo"}),
    )
    .await;
    assert_eq!(
        (status, deleted),
        (200, json!({"threadId": "ck-a-one", "deleted": true}))
    );
    assert_eq!(
        ids(&list(&gw, ALICE, "demo", "&includeArchived=true").await),
        ["ck-a-two"]
    );
    let restored = snapshot_of(&connect(&gw, "demo", ALICE, "ck-a-one").await);
    assert_eq!(restored[0]["content"], "echo the first thread");

    // The single-route envelope (`resource/request`), as CopilotKit's single transport sends
    // the thread routes when `/info` says `singleRoute.resourceOperations`.
    assert_eq!(info["singleRoute"]["resourceOperations"], true);
    assert_eq!(
        info["singleRoute"]["threadEndpoints"],
        info["threadEndpoints"]
    );
    let envelope = |path: &str, method: &str, body: Value| json!({"method": "resource/request", "params": {"path": path, "httpMethod": method}, "body": body});
    let (status, listed) = mutate(
        &gw,
        "POST",
        "",
        ALICE,
        envelope("/threads?agentId=demo&limit=1", "GET", Value::Null),
    )
    .await;
    assert_eq!(
        (status, ids(&listed)),
        (200, vec!["ck-a-two".to_owned()]),
        "{listed}"
    );
    let rename = envelope(
        "/threads/ck-a-two",
        "PATCH",
        json!({"agentId": "demo", "name": "Via the envelope"}),
    );
    let (status, renamed) = mutate(&gw, "POST", "", ALICE, rename.clone()).await;
    assert_eq!(
        (status, &renamed["name"]),
        (200, &json!("Via the envelope")),
        "{renamed}"
    );
    assert_eq!(mutate(&gw, "POST", "", BOB, rename).await.0, 404);
    let (status, _) = call(
        "POST",
        &ck(&gw, ""),
        None,
        Some(envelope("/threads", "GET", Value::Null)),
    )
    .await;
    assert_eq!(status, 401);
    for (path, method) in [
        ("/memories", "GET"),
        ("/threads", "PUT"),
        ("/agent/demo/run", "POST"),
    ] {
        let (status, err) =
            mutate(&gw, "POST", "", ALICE, envelope(path, method, Value::Null)).await;
        assert_eq!(status, 422, "{path} {method}: {err}");
    }

    // Bad requests.
    for (method, path, body, status, code) in [
        (
            "PATCH",
            "/threads/ck-a-two",
            json!({"name": "x"}),
            422,
            "invalid_thread_update",
        ),
        (
            "PATCH",
            "/threads/ck-a-two",
            json!({"agentId": "demo"}),
            422,
            "invalid_thread_update",
        ),
        (
            "PATCH",
            "/threads/ck-a-two",
            json!({"agentId": "demo", "name": ""}),
            422,
            "invalid_thread_update",
        ),
        (
            "PATCH",
            "/threads/ck-a-two",
            json!({"agentId": "demo", "name": "x".repeat(201)}),
            422,
            "invalid_thread_update",
        ),
        (
            "POST",
            "/threads/ck-a-two/archive",
            json!({"agentId": "nope"}),
            404,
            "unknown_agent",
        ),
        (
            "GET",
            "/threads?agentId=demo&limit=0",
            Value::Null,
            400,
            "invalid_query",
        ),
        (
            "GET",
            "/threads?agentId=demo&limit=101",
            Value::Null,
            400,
            "invalid_query",
        ),
        (
            "GET",
            "/threads?agentId=demo&cursor=abc",
            Value::Null,
            400,
            "invalid_query",
        ),
        (
            "GET",
            "/threads?agentId=nope",
            Value::Null,
            404,
            "unknown_agent",
        ),
        (
            "GET",
            "/threads/no-such-thread/messages",
            Value::Null,
            404,
            "unknown_thread",
        ),
    ] {
        let body = (!body.is_null()).then_some(body);
        let (got, err) = call(method, &ck(&gw, path), Some(ALICE), body).await;
        assert_eq!(
            (got, err["error"]["code"].as_str()),
            (status, Some(code)),
            "{method} {path}: {err}"
        );
    }
    let too_big = json!({"agentId": "demo", "name": "x".repeat(9 << 20)});
    let (status, _) = mutate(&gw, "PATCH", "/threads/ck-a-two", ALICE, too_big).await;
    assert_eq!(status, 413);
}

/// The a2a-sdk reference agent over JSON-RPC and over HTTP+JSON, with `visibility: shared`:
/// a thread started by a plain A2A client shows in both callers' lists (under its
/// contextId), titled by its first message; a caller's marks are its own.
#[tokio::test(flavor = "multi_thread")]
async fn the_reference_agents_threads_over_each_binding() {
    for binding in ["jsonrpc", "http+json"] {
        let up = Upstream::start("both");
        let config = json!({"auth": auth(), "agents": [
            {"name": "ref", "url": up.url, "binding": binding, "visibility": "shared"}]});
        let gw = Gateway::start(&config.to_string(), false).await;
        wait_ready(&gw).await;
        let mine = format!("ck-ref-{}", binding.replace('+', "-"));
        run(&gw, "ref", ALICE, &mine, 1, "echo via the gateway").await;
        let plain = format!(
            "plain-ctx-{}-{}",
            binding.replace('+', "-"),
            std::process::id()
        );
        a2a_send(&up.url, "plain-msg-1", &plain, "echo from a plain client").await;

        let alices = list(&gw, ALICE, "ref", "").await;
        assert_eq!(
            ids(&alices),
            [plain.clone(), mine.clone()],
            "{binding}: {alices}"
        );
        assert_eq!(thread(&alices, &mine)["name"], "echo via the gateway");
        assert_eq!(thread(&alices, &plain)["name"], "echo from a plain client");
        let bobs = list(&gw, BOB, "ref", "").await;
        assert_eq!(ids(&bobs), [plain.as_str()], "{binding}: {bobs}");

        assert_reads_as_connect(&gw, "ref", ALICE, &mine).await;

        // Alice's marks leave Bob's list as it was.
        let (status, body) = mutate(
            &gw,
            "POST",
            &format!("/threads/{plain}/archive"),
            ALICE,
            json!({"agentId": "ref"}),
        )
        .await;
        assert_eq!(status, 200, "{binding}: {body}");
        let (status, _) = mutate(
            &gw,
            "PATCH",
            &format!("/threads/{mine}"),
            ALICE,
            json!({"agentId": "ref", "name": "Mine"}),
        )
        .await;
        assert_eq!(status, 200);
        let alices = list(&gw, ALICE, "ref", "").await;
        assert_eq!(ids(&alices), [mine.as_str()], "{binding}");
        assert_eq!(thread(&alices, &mine)["name"], "Mine");
        let bobs = list(&gw, BOB, "ref", "").await;
        assert_eq!(thread(&bobs, &plain)["archived"], false, "{binding}");
        let (status, _) = mutate(
            &gw,
            "DELETE",
            &format!("/threads/{mine}"),
            BOB,
            json!({"agentId": "ref"}),
        )
        .await;
        assert_eq!(status, 404, "{binding}: bob deletes alice's thread");
        // A `connect` to a context started elsewhere binds it to its caller without claiming
        // it: it stays in both callers' lists (docs/identity.md#ownership).
        let restored = assert_reads_as_connect(&gw, "ref", BOB, &plain).await;
        assert_eq!(restored[0]["content"], "echo from a plain client");
        let alices = list(&gw, ALICE, "ref", "&includeArchived=true").await;
        assert!(ids(&alices).contains(&plain), "{binding}: {alices}");
        let bobs = list(&gw, BOB, "ref", "").await;
        assert!(ids(&bobs).contains(&plain), "{binding}: {bobs}");
    }
}

/// Renames, archives and deletes are kept in Redis: a gateway started after the first one
/// stopped shows them (the reference agent keeps the conversations).
#[tokio::test(flavor = "multi_thread")]
async fn marks_survive_a_gateway_restart_on_redis() {
    let redis = RedisServer::start().await;
    let up = Upstream::start("both");
    let config = json!({"auth": auth(), "binding_store": redis.url(),
        "agents": [{"name": "ref", "url": up.url}]})
    .to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let (gw, server) = Gateway::start_until(&config, false, async {
        let _ = stopped.await;
    })
    .await;
    wait_ready(&gw).await;
    for (thread, text) in [
        ("keep", "echo kept"),
        ("rename", "echo renamed"),
        ("hide", "echo hidden"),
        ("drop", "echo dropped"),
    ] {
        run(&gw, "ref", ALICE, &format!("ck-redis-{thread}"), 1, text).await;
    }
    let body = json!({"agentId": "ref"});
    let renamed = json!({"agentId": "ref", "name": "A new name"});
    assert_eq!(
        mutate(&gw, "PATCH", "/threads/ck-redis-rename", ALICE, renamed)
            .await
            .0,
        200
    );
    assert_eq!(
        mutate(
            &gw,
            "POST",
            "/threads/ck-redis-hide/archive",
            ALICE,
            body.clone()
        )
        .await
        .0,
        200
    );
    assert_eq!(
        mutate(&gw, "DELETE", "/threads/ck-redis-drop", ALICE, body)
            .await
            .0,
        200
    );
    let before = list(&gw, ALICE, "ref", "&includeArchived=true").await;
    stop.send(()).unwrap();
    tokio::time::timeout(WITHIN, server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();

    let gw = Gateway::start(&config, false).await;
    wait_ready(&gw).await;
    let after = list(&gw, ALICE, "ref", "").await;
    assert_eq!(ids(&after), ["ck-redis-rename", "ck-redis-keep"], "{after}");
    assert_eq!(thread(&after, "ck-redis-rename")["name"], "A new name");
    assert_eq!(thread(&after, "ck-redis-keep")["name"], "echo kept");
    let all = list(&gw, ALICE, "ref", "&includeArchived=true").await;
    assert_eq!(all["threads"], before["threads"]);
    assert_eq!(thread(&all, "ck-redis-hide")["archived"], true);
    // Bob never had them.
    assert!(ids(&list(&gw, BOB, "ref", "&includeArchived=true").await).is_empty());
}

/// An agent named by `agentId` that cannot be read is a 502 (CopilotKit's client shows the
/// list's error), never an empty list; across agents it is named in `unavailable`.
#[tokio::test(flavor = "multi_thread")]
async fn an_agent_that_cannot_be_read_is_named_not_empty() {
    let config = json!({"agents": [{"name": "gone", "url": closed_url()}]});
    let gw = Gateway::start(&config.to_string(), true).await;
    run(&gw, "demo", "none", "ck-up", 1, "echo still here").await;
    let (status, err) = call("GET", &ck(&gw, "/threads?agentId=gone"), None, None).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (502, Some("upstream_unavailable")),
        "{err}"
    );
    let (status, across) = call("GET", &ck(&gw, "/threads"), None, None).await;
    assert_eq!(status, 200);
    assert_eq!(ids(&across), ["ck-up"]);
    assert_eq!(
        across["unavailable"],
        json!([{"agent": "gone", "code": "upstream_unavailable"}])
    );
}

/// The list and the reads call the upstream as `connect` does: they draw on the caller's
/// `rate_limits` bucket like runs (`429 rate_limited` with `Retry-After`); mutations do not.
#[tokio::test(flavor = "multi_thread")]
async fn the_list_and_reads_are_rate_limited_like_runs() {
    let config = json!({"auth": auth(), "rate_limits": {"runs_per_minute": 1, "burst": 2}});
    let gw = Gateway::start(&config.to_string(), true).await;
    run(&gw, "demo", ALICE, "ck-rate", 1, "echo limited").await;
    let (status, _) = call("GET", &ck(&gw, "/threads?agentId=demo"), Some(ALICE), None).await;
    assert_eq!(status, 200);
    let resp = reqwest::Client::new()
        .get(ck(&gw, "/threads/ck-rate/messages"))
        .bearer_auth(ALICE)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 429);
    assert!(resp.headers().contains_key("retry-after"));
    let (status, body) = mutate(
        &gw,
        "POST",
        "/threads/ck-rate/archive",
        ALICE,
        json!({"agentId": "demo"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    // Another caller's bucket is its own.
    let (status, _) = call("GET", &ck(&gw, "/threads?agentId=demo"), Some(BOB), None).await;
    assert_eq!(status, 200);
}
