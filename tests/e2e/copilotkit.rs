//! The CopilotKit runtime routes (docs/design.md#3-http-surface) under the default base path
//! `/copilotkit`: `info`, `agent/{id}/run`, `agent/{id}/connect` (history, then the live
//! task), `agent/{id}/stop/{threadId}` (CancelTask), and the single-route envelope `POST
//! {base}`, each scoped to its caller (docs/design.md#11-security).

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;

const WITHIN: Duration = Duration::from_secs(20);

fn ck(gw: &Gateway, path: &str) -> String {
    format!("{}/copilotkit{path}", gw.base)
}

/// A CopilotKit connect body: the thread, a fresh run, the messages the page holds.
fn connect_input(thread: &str, messages: Value) -> Value {
    json!({"threadId": thread, "runId": format!("{thread}-connect"), "messages": messages,
        "state": {}, "tools": [], "context": [], "forwardedProps": {}})
}

/// The run stream ended in exactly one terminal event, last, a `RUN_FINISHED`, and began
/// with `RUN_STARTED` (what `@ag-ui/client`'s event verification asks of one run).
fn assert_one_run(run: &SseRun) {
    assert_run_finished(run);
    let terminals = run
        .types()
        .iter()
        .filter(|t| matches!(**t, "RUN_FINISHED" | "RUN_ERROR"))
        .count();
    let starts = run.types().iter().filter(|t| **t == "RUN_STARTED").count();
    assert_eq!((starts, terminals), (1, 1), "{:?}", run.types());
}

fn snapshot(run: &SseRun) -> Vec<(String, String)> {
    let snap = run
        .events
        .iter()
        .find(|e| e["type"] == "MESSAGES_SNAPSHOT")
        .unwrap_or_else(|| panic!("a MESSAGES_SNAPSHOT: {:?}", run.types()));
    turns(&snap["messages"])
}

/// `(role, trimmed text)` of each AG-UI message of `messages`.
fn turns(messages: &Value) -> Vec<(String, String)> {
    messages
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let content = m["content"].as_str().unwrap_or_default().trim().to_owned();
            (m["role"].as_str().unwrap().to_owned(), content)
        })
        .collect()
}

fn pair(role: &str, content: &str) -> (String, String) {
    (role.to_owned(), content.to_owned())
}

async fn post_json(url: &str, key: Option<&str>, body: &Value) -> (u16, Value) {
    let mut req = reqwest::Client::new().post(url).json(body);
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// A run route's answer read to its end, as the caller with `key`.
async fn post_stream(url: &str, key: &str, body: &Value) -> (u16, Vec<Value>) {
    let resp = post_as(url, key, body).await;
    let status = resp.status().as_u16();
    let raw = tokio::time::timeout(WITHIN, resp.text())
        .await
        .unwrap()
        .unwrap();
    let events = if status == 200 {
        sse_events(&raw)
    } else {
        Vec::new()
    };
    (status, events)
}

#[tokio::test(flavor = "multi_thread")]
async fn info_lists_the_agents_keyed_by_id() {
    let gw = Gateway::start("{}", true).await;
    wait_ready(&gw).await;
    let info: Value = reqwest::get(ck(&gw, "/info"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let demo = &info["agents"]["demo"];
    assert_eq!(demo["name"], "demo", "{info}");
    assert!(demo["description"].as_str().unwrap().contains("demo"));
    assert!(demo["className"].is_string());
    // AG-UI's capabilities, from the demo agent's card and what the gateway does.
    let capabilities = &demo["capabilities"];
    assert_eq!(capabilities["transport"]["streaming"], true);
    assert_eq!(
        capabilities["identity"],
        json!({"name": "agui-a2a-gateway demo agent", "type": "a2a",
            "description": demo["description"], "version": env!("CARGO_PKG_VERSION"),
            "provider": "agui-a2a-gateway"}),
        "{info}"
    );
    assert_eq!(
        capabilities["output"]["supportedMimeTypes"],
        json!(["text/plain"])
    );
    assert_eq!(
        capabilities["humanInTheLoop"],
        json!({"supported": true, "approvals": true, "interrupts": true})
    );
    assert_eq!(
        capabilities["multimodal"]["input"],
        json!({"image": false, "audio": false, "video": false, "pdf": false, "file": false})
    );
    // `GET /agents/{name}` answers the same.
    let detail: Value = reqwest::get(gw.agent_url("demo"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(&detail["capabilities"], capabilities);
    // The only agent answers as `default` too, what an app that names no agent asks for.
    assert_eq!(info["agents"]["default"], *demo, "{info}");
    assert_eq!(info["mode"], "sse");
    assert!(info["version"].is_string());
}

/// An app that names no agent (`<CopilotKit>` without `agentId`) asks for `default`:
/// `copilotkit.default_agent` answers, over CopilotKit's own client and both transports, and
/// the thread is that agent's own; with two agents and none named, `default` is unknown.
#[tokio::test(flavor = "multi_thread")]
async fn the_default_agent_answers_an_app_that_names_none() {
    let up = upstream("both");
    let config = json!({
        "agents": [{"name": "ref", "url": up}, {"name": "other", "url": up}],
        "copilotkit": {"default_agent": "ref"},
    });
    let gw = Gateway::start(&config.to_string(), false).await;
    wait_ready(&gw).await;
    for transport in ["rest", "single"] {
        let thread = format!("ck-default-{transport}");
        let steps = copilotkit_session(json!({
            "runtimeUrl": ck(&gw, ""),
            "transport": transport,
            "agentId": "default",
            "threadId": thread,
            "steps": [{"run": "echo by default"}, {"reload": true}],
        }))
        .await;
        for step in &steps {
            assert_eq!(step["connection"], "connected", "{transport}: {step}");
            assert_eq!(step["errors"], json!([]), "{transport}: {step}");
        }
        let turn = vec![
            pair("user", "echo by default"),
            pair("assistant", "by default"),
        ];
        assert_eq!(turns(&steps[0]["messages"]), turn, "{transport}");
        assert_eq!(
            turns(&steps[1]["messages"]),
            turn,
            "{transport}: the reload"
        );
        // The thread is the named agent's: its own route reattaches to it.
        let own = post_run(
            &ck(&gw, "/agent/ref/connect"),
            &connect_input(&thread, json!([])),
            WITHIN,
        )
        .await;
        assert_eq!(own.status, 200);
        assert!(
            own.events.iter().any(|e| e["type"] == "MESSAGES_SNAPSHOT"),
            "{:?}",
            own.events
        );
    }
    let two = Gateway::start(
        &json!({"agents": [{"name": "ref", "url": up}, {"name": "other", "url": up}]}).to_string(),
        false,
    )
    .await;
    let info: Value = reqwest::get(ck(&two, "/info"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(info["agents"].get("default").is_none(), "{info}");
    let unknown = post_run(
        &ck(&two, "/agent/default/run"),
        &run_input("x", "echo"),
        WITHIN,
    )
    .await;
    assert_eq!(unknown.status, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn run_streams_an_agui_run() {
    let gw = Gateway::start("{}", true).await;
    let run = post_run(
        &ck(&gw, "/agent/demo/run"),
        &run_input("ck-run", "echo hello copilot"),
        WITHIN,
    )
    .await;
    assert_one_run(&run);
    let text: String = run
        .events
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text.trim(), "hello copilot");
    let unknown = post_run(&ck(&gw, "/agent/nope/run"), &run_input("x", "echo"), WITHIN).await;
    assert_eq!(unknown.status, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn connect_after_a_finished_run_rebuilds_the_thread() {
    let gw = Gateway::start("{}", true).await;
    let url = ck(&gw, "/agent/demo/run");
    let mut second = run_input("ck-reload", "echo two");
    second["messages"][0]["id"] = json!("ck-reload-user-2");
    second["runId"] = json!("ck-reload-run-2");
    for body in [run_input("ck-reload", "echo one"), second] {
        assert_run_finished(&post_run(&url, &body, WITHIN).await);
    }
    // A page reload: the page holds nothing of the thread.
    let connect = ck(&gw, "/agent/demo/connect");
    let run = post_run(&connect, &connect_input("ck-reload", json!([])), WITHIN).await;
    assert_one_run(&run);
    assert_eq!(
        snapshot(&run),
        [
            pair("user", "echo one"),
            pair("assistant", "one"),
            pair("user", "echo two"),
            pair("assistant", "two"),
        ]
    );
    assert!(run.types().contains(&"STATE_SNAPSHOT"));
    assert_eq!(run.events[0]["threadId"], "ck-reload");
    // A thread with nothing to show yet: an empty stream, which the client accepts.
    let fresh = post_run(&connect, &connect_input("ck-new", json!([])), WITHIN).await;
    assert_eq!(
        (fresh.status, fresh.events.len()),
        (200, 0),
        "{}",
        fresh.raw
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn connect_with_a_pending_interrupt_shows_it() {
    let gw = Gateway::start("{}", true).await;
    let run = post_run(
        &ck(&gw, "/agent/demo/run"),
        &run_input("ck-wait", "approve"),
        WITHIN,
    )
    .await;
    assert_eq!(run.events.last().unwrap()["outcome"]["type"], "interrupt");
    let connect = ck(&gw, "/agent/demo/connect");
    let back = post_run(&connect, &connect_input("ck-wait", json!([])), WITHIN).await;
    assert_one_run(&back);
    let last = back.events.last().unwrap();
    assert_eq!(last["outcome"]["type"], "interrupt", "{last}");
    assert_eq!(
        last["outcome"]["interrupts"][0]["id"],
        run.events.last().unwrap()["outcome"]["interrupts"][0]["id"]
    );
}

/// Waits until the thread's task runs upstream, as the threads API tells: the gateway has
/// bound the thread to its context, and the task is working.
async fn wait_working(gw: &Gateway, thread: &str) {
    wait_until(
        &format!("the task of thread {thread} runs"),
        Duration::from_secs(5),
        async || match thread_status(gw, "ref", thread).await.as_deref() {
            Some("working") => Ok(()),
            other => Err(format!("thread status {other:?}")),
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn connect_while_a_task_runs_streams_its_further_events() {
    let gw = Gateway::with_agents(&[("ref", upstream("both"))]).await;
    let run_url = ck(&gw, "/agent/ref/run");
    let first =
        tokio::spawn(
            async move { post_run(&run_url, &run_input("ck-live", "slow 30"), WITHIN).await },
        );
    wait_working(&gw, "ck-live").await;
    let connect = ck(&gw, "/agent/ref/connect");
    let back = post_run(&connect, &connect_input("ck-live", json!([])), WITHIN).await;
    assert_one_run(&back);
    let types = back.types();
    let snap = types
        .iter()
        .position(|t| *t == "MESSAGES_SNAPSHOT")
        .unwrap();
    assert!(
        types[snap..].contains(&"TEXT_MESSAGE_CONTENT"),
        "the live task's further text: {types:?}"
    );
    assert_eq!(snapshot(&back)[0], pair("user", "slow 30"));
    let streamed: String = back
        .events
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert!(streamed.contains("slow 30 done"), "{streamed}");
    assert_run_finished(&first.await.unwrap());
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_cancels_the_live_task() {
    let up = upstream("both");
    let gw = Gateway::with_agents(&[("ref", up)]).await;
    let run_url = ck(&gw, "/agent/ref/run");
    let live =
        tokio::spawn(
            async move { post_run(&run_url, &run_input("ck-stop", "slow 100"), WITHIN).await },
        );
    wait_working(&gw, "ck-stop").await;
    let (status, stopped) = post_json(&ck(&gw, "/agent/ref/stop/ck-stop"), None, &json!({})).await;
    assert_eq!(
        (status, &stopped["stopped"]),
        (200, &json!(true)),
        "{stopped}"
    );
    assert_eq!(stopped["interrupt"]["code"], "STOPPED");
    // The open run sees its task end, long before its 10 s of ticks.
    let run = live.await.unwrap();
    assert!(run.elapsed < Duration::from_secs(5), "{:?}", run.elapsed);
    let task_id = run.events[0]["metadata"]["a2a"]["taskId"].as_str().unwrap();
    let task = upstream_get_task(up, "1.0", task_id).await;
    assert_eq!(task["status"]["state"], "TASK_STATE_CANCELED", "{task}");
    // Nothing runs any more.
    let (_, again) = post_json(&ck(&gw, "/agent/ref/stop/ck-stop"), None, &json!({})).await;
    assert_eq!(again["stopped"], false, "{again}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_single_route_envelope_serves_each_method() {
    let gw = Gateway::start("{}", true).await;
    let base = ck(&gw, "");
    let (status, info) = post_json(&base, None, &json!({"method": "info"})).await;
    assert_eq!(
        (status, &info["agents"]["demo"]["name"]),
        (200, &json!("demo"))
    );

    let run = json!({"method": "agent/run", "params": {"agentId": "demo"},
        "body": run_input("ck-single", "echo via envelope")});
    assert_one_run(&post_run(&base, &run, WITHIN).await);

    let connect = json!({"method": "agent/connect", "params": {"agentId": "demo"},
        "body": connect_input("ck-single", json!([]))});
    let back = post_run(&base, &connect, WITHIN).await;
    assert_one_run(&back);
    assert_eq!(
        snapshot(&back),
        [
            pair("user", "echo via envelope"),
            pair("assistant", "via envelope")
        ]
    );

    let stop =
        json!({"method": "agent/stop", "params": {"agentId": "demo", "threadId": "ck-single"}});
    let (status, stopped) = post_json(&base, None, &stop).await;
    assert_eq!(
        (status, &stopped["stopped"]),
        (200, &json!(false)),
        "{stopped}"
    );

    let (status, err) = post_json(&base, None, &json!({"method": "transcribe"})).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (422, Some("invalid_run_input"))
    );
    let (status, _) = post_json(&base, None, &json!({"method": "agent/run", "body": {}})).await;
    assert_eq!(status, 422, "agentId is required");
}

#[tokio::test(flavor = "multi_thread")]
async fn another_callers_thread_is_a_404() {
    let (alice, bob) = ("ck-alice-key-0123456789", "ck-bob-key-0123456789");
    let config = json!({"auth": {"api_keys": [
        {"name": "alice", "key": alice}, {"name": "bob", "key": bob}]}});
    let gw = Gateway::start(&config.to_string(), true).await;
    let (status, ran) = post_stream(
        &ck(&gw, "/agent/demo/run"),
        alice,
        &run_input("ck-mine", "echo private"),
    )
    .await;
    assert_eq!(status, 200);
    let context = ran[0]["metadata"]["a2a"]["contextId"].as_str().unwrap();
    let connect = ck(&gw, "/agent/demo/connect");

    // Alice gets her thread back.
    let (status, back) = post_stream(&connect, alice, &connect_input("ck-mine", json!([]))).await;
    assert_eq!(status, 200);
    assert!(back.iter().any(|e| e["type"] == "MESSAGES_SNAPSHOT"));
    // Bob naming her context: a 404, for connect and for stop.
    let resp = post_as(&connect, bob, &connect_input(context, json!([]))).await;
    assert_eq!(resp.status(), 404);
    let stop = ck(&gw, &format!("/agent/demo/stop/{context}"));
    let (status, err) = post_json(&stop, Some(bob), &json!({})).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (404, Some("unknown_thread"))
    );
    // Bob's own thread of the same name is a new one: nothing of hers in it.
    let (status, empty) = post_stream(&connect, bob, &connect_input("ck-mine", json!([]))).await;
    assert_eq!((status, empty.len()), (200, 0), "{empty:?}");
    // And no caller, no answer.
    let resp = reqwest::get(ck(&gw, "/info")).await.unwrap();
    assert_eq!(resp.status(), 401);
}

/// CopilotKit's own client (`@copilotkitnext/core` 1.54.1, a page's `CopilotKitCore` with only
/// `runtimeUrl` and the API key header set) against the Python a2a-sdk agent, over each of
/// CopilotKit's transports: a run, a second turn, a reload that reconnects and sees the
/// whole thread, and a stop while a task runs that cancels it upstream.
#[tokio::test(flavor = "multi_thread")]
async fn copilotkits_own_client_runs_reconnects_and_stops() {
    const KEY: &str = "ck-client-key-0123456789";
    let up = upstream("both");
    let config = json!({
        "auth": {"api_keys": [{"name": "alice", "key": KEY}]},
        "agents": [{"name": "ref", "url": up}],
    });
    let gw = Gateway::start(&config.to_string(), false).await;
    wait_ready(&gw).await;
    for transport in ["rest", "single"] {
        let thread = format!("ck-own-{transport}");
        let steps = copilotkit_session(json!({
            "runtimeUrl": ck(&gw, ""),
            "transport": transport,
            "agentId": "ref",
            "threadId": thread,
            "headers": {"Authorization": format!("Bearer {KEY}")},
            "steps": [
                {"run": "echo hello there"},
                {"run": "echo second turn"},
                {"reload": true},
                {"stopAfter": "slow 100", "onEvent": "TEXT_MESSAGE_CONTENT"},
                {"reload": true},
            ],
        }))
        .await;
        for (n, step) in steps.iter().enumerate() {
            let what = format!("{transport} step {n}: {step}");
            assert_eq!(step["connection"], "connected", "{what}");
            assert_eq!(step["errors"], json!([]), "{what}");
            assert_eq!(step["warnings"], json!([]), "{what}");
            let types = event_types(step);
            assert_eq!(
                types.first().map(String::as_str),
                Some("RUN_STARTED"),
                "{what}"
            );
            assert_eq!(
                types.last().map(String::as_str),
                Some("RUN_FINISHED"),
                "{what}"
            );
        }
        let two_turns = vec![
            pair("user", "echo hello there"),
            pair("assistant", "hello there"),
            pair("user", "echo second turn"),
            pair("assistant", "second turn"),
        ];
        assert_eq!(turns(&steps[1]["messages"]), two_turns, "{transport}");
        // The reloaded page started empty (CopilotKit clears the agent before connecting):
        // everything it shows came from the gateway's connect.
        assert_eq!(turns(&steps[2]["messages"]), two_turns, "{transport}");
        let types = event_types(&steps[2]);
        assert!(types.contains(&"MESSAGES_SNAPSHOT".to_owned()), "{types:?}");

        // The stop: the run ends long before its 10 s of ticks, its task canceled upstream.
        let stopped = &steps[3];
        assert!(stopped["elapsedMs"].as_u64().unwrap() < 5000, "{stopped}");
        let task_id = stopped["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["type"] == "STATE_DELTA")
            .flat_map(|e| e["delta"].as_array().unwrap().clone())
            .find(|op| op["path"] == "/a2a/task")
            .and_then(|op| op["value"]["id"].as_str().map(str::to_owned))
            .unwrap_or_else(|| panic!("a /a/a2a/task delta: {stopped}"));
        let task = upstream_get_task(up, "1.0", &task_id).await;
        assert_eq!(task["status"]["state"], "TASK_STATE_CANCELED", "{task}");
        let after = turns(&steps[4]["messages"]);
        assert_eq!(after[..4], two_turns[..], "{transport}");
        assert_eq!(after[4], pair("user", "slow 100"), "{transport}");
    }
}

/// Whether every run slot of `gw` is taken, asked without running anything: a run request
/// whose body is no RunAgentInput (`{}`) takes a slot only to read it, then answers 422 —
/// or, with no slot free, 429 `too_many_runs`.
async fn run_slots_full(gw: &Gateway) -> bool {
    let (status, answer) = post_json(&gw.agent_url("ref"), None, &json!({})).await;
    match (status, answer["error"]["code"].as_str()) {
        (429, Some("too_many_runs")) => true,
        (422, Some("invalid_run_input")) => false,
        _ => panic!("the slot probe: {status} {answer}"),
    }
}

/// The single-route envelope reads its body within a run slot, as the run route does: while
/// one arrives slowly, a run beyond `max_concurrent_runs` is refused; once it is gone, runs
/// go again.
#[tokio::test(flavor = "multi_thread")]
async fn the_envelope_body_is_read_within_a_run_slot() {
    use tokio::io::AsyncWriteExt;
    let config = json!({"agents": [{"name": "ref", "url": upstream("both")}],
        "limits": {"max_concurrent_runs": 1}});
    let gw = Gateway::start(&config.to_string(), false).await;
    wait_ready(&gw).await;
    let addr = gw.base.trim_start_matches("http://").to_owned();
    let mut slow = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /copilotkit HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"method\":"
    );
    slow.write_all(head.as_bytes()).await.unwrap();
    wait_until(
        "the slow envelope holds the only run slot",
        Duration::from_secs(5),
        async || {
            if run_slots_full(&gw).await {
                return Ok(());
            }
            // Had a probe held the slot the moment the envelope arrived, the envelope would
            // have been refused: its answer would be waiting on the socket.
            let mut answer = [0u8; 512];
            if let Ok(n @ 1..) = slow.try_read(&mut answer) {
                panic!(
                    "the envelope was answered before its body arrived: {}",
                    String::from_utf8_lossy(&answer[..n])
                );
            }
            Err("a run slot is free".to_owned())
        },
    )
    .await;
    let (status, refused) = post_json(&gw.agent_url("ref"), None, &run_input("t", "echo x")).await;
    assert_eq!(
        (status, &refused["error"]["code"]),
        (429, &json!("too_many_runs")),
        "{refused}"
    );
    drop(slow);
    wait_until(
        "the gone envelope's run slot is free",
        Duration::from_secs(5),
        async || match run_slots_full(&gw).await {
            true => Err("no run slot is free".to_owned()),
            false => Ok(()),
        },
    )
    .await;
    let run = post_run(&gw.agent_url("ref"), &run_input("t2", "echo x"), WITHIN).await;
    assert_run_finished(&run);
}
