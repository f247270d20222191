//! The end-to-end matrix across A2A bindings (docs/bindings.md): the same AG-UI behaviour
//! whether the gateway reaches the a2a-sdk 1.3.0 reference agent over JSON-RPC, over the
//! SDK's own HTTP+JSON routes — the `rest` upstream, whose card is shaped like Vertex AI
//! Agent Engine's (HTTP+JSON only, under a path prefix, with a tenant) — or over the SDK's
//! own gRPC handler (the `grpc` upstream: a gRPC-only card), judged by the real AG-UI
//! client. Then selection as `/agents` and `/readyz` show it, the A2A client's errors
//! on every binding, and upstreams that break the binding. The embedded demo agent serves
//! every binding on one port too: the same AG-UI session through each, pinned.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{json, Value};

use agui_a2a_gateway::a2a::client::CallContext;
use agui_a2a_gateway::a2a::TaskId;

use crate::support::*;

/// The bindings of the matrix: as `GET /agents` names the one selected, and the reference
/// upstream whose card selects it under `binding: auto`.
const BINDINGS: [(&str, &str); 3] = [("JSONRPC", "1.0"), ("HTTP+JSON", "rest"), ("GRPC", "grpc")];

const WITHIN: Duration = Duration::from_secs(20);

/// A gateway with agent `ref` on the upstream `mode`, its config extended by `extra`.
async fn gateway(mode: &'static str, extra: Value) -> Gateway {
    let mut agent = json!({"name": "ref", "url": upstream(mode)});
    if let Value::Object(extra) = extra {
        agent.as_object_mut().unwrap().extend(extra);
    }
    Gateway::start(&json!({ "agents": [agent] }).to_string(), false).await
}

/// `GET {gw}/agents/{name}`.
async fn agent_view(gw: &Gateway, name: &str) -> Value {
    get_json(gw.agent_url(name)).await
}

/// For each binding: a gateway on its upstream, driven on thread `<thread>-<mode>` with
/// `steps`; asserts the agent called the binding it names.
async fn each_binding(thread: &str, steps: Value) -> Vec<(&'static str, Vec<Value>)> {
    let mut out = Vec::new();
    for (binding, mode) in BINDINGS {
        let gw = gateway(mode, json!({})).await;
        let driven = drive(
            &gw.agent_url("ref"),
            &format!("{thread}-{mode}"),
            steps.clone(),
        )
        .await;
        assert_eq!(agent_view(&gw, "ref").await["binding"], binding);
        out.push((binding, driven));
    }
    out
}

/// The state of a task read straight from the upstream `mode`, over its own binding.
async fn task_state(mode: &'static str, task_id: &str) -> String {
    if mode == "grpc" {
        let a2a = grpc_client(upstream(mode));
        return a2a
            .get_task(&CallContext::none(), &TaskId::new(task_id), None)
            .await
            .unwrap()
            .status
            .state
            .as_v1();
    }
    let task = if mode == "rest" {
        rest_get_task(upstream(mode), task_id).await
    } else {
        upstream_get_task(upstream(mode), "1.0", task_id).await
    };
    task["status"]["state"].as_str().unwrap().to_owned()
}

/// The gateway's own client on a gRPC interface (no tenant, no headers).
fn grpc_client(url: &str) -> agui_a2a_gateway::a2a::client::Client {
    use agui_a2a_gateway::a2a::client::{Client, Endpoint};
    let endpoint = Endpoint {
        binding: agui_a2a_gateway::a2a::card::Binding::Grpc,
        ..Endpoint::json_rpc(
            url.parse().unwrap(),
            agui_a2a_gateway::a2a::model::ProtocolVersion::V1,
            Default::default(),
        )
    };
    Client::new(reqwest::Client::new(), endpoint, 1 << 20, WITHIN)
}

#[tokio::test(flavor = "multi_thread")]
async fn streamed_text_and_artifacts_on_every_binding() {
    let steps = json!([{"message": "echo hello brave world"}, {"message": "artifact"}]);
    for (binding, steps) in each_binding("stream", steps).await {
        let (echo, art) = (&steps[0], &steps[1]);
        assert_accepted(echo);
        assert_eq!(assistant_texts(echo), ["hello brave world"], "{binding}");
        assert_eq!(last_event(echo)["outcome"]["type"], "success", "{binding}");
        assert_accepted(art);
        let artifact = &art["state"]["view"]["artifacts"]["artifact-1"];
        assert_eq!(artifact["text"], "Hello from artifact.", "{binding}");
        assert_eq!(artifact["complete"], true, "{binding}");
        assert_eq!(
            art["state"]["a2a"]["contextId"], echo["state"]["a2a"]["contextId"],
            "{binding}: the second turn continues the context"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_blocking_send_fallback_on_every_binding() {
    let steps = json!([{"message": "artifact", "forwardedProps": {"a2a": {"mode": "send"}}}]);
    for (binding, steps) in each_binding("send", steps).await {
        assert_accepted(&steps[0]);
        assert_eq!(
            steps[0]["state"]["view"]["artifacts"]["artifact-1"]["text"], "Hello from artifact.",
            "{binding}"
        );
        assert_eq!(last_event(&steps[0])["outcome"]["type"], "success");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_interrupts_and_resumes_the_same_task_on_every_binding() {
    let steps = json!([{"message": "approve"}, {"resume": {"status": "resolved", "payload": "yes, go ahead"}}]);
    for (binding, steps) in each_binding("hitl", steps).await {
        let (ask, answer) = (&steps[0], &steps[1]);
        assert_accepted(ask);
        let pending = ask["pendingInterrupts"].as_array().unwrap();
        assert_eq!(pending.len(), 1, "{binding}");
        assert_eq!(pending[0]["message"], "Do you approve? Reply yes or no.");
        assert_eq!(last_event(ask)["outcome"]["type"], "interrupt", "{binding}");
        assert_accepted(answer);
        assert_eq!(
            answer["state"]["a2a"]["task"]["id"], ask["state"]["a2a"]["task"]["id"],
            "{binding}: the same task"
        );
        assert_eq!(answer["state"]["a2a"]["task"]["state"], "completed");
        assert_eq!(
            assistant_texts(answer).last().map(String::as_str),
            Some("Approved: yes, go ahead"),
            "{binding}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn subscribe_only_reattaches_on_every_binding() {
    let steps = json!([
        // Left as soon as the first tick arrives (the task is known by then).
        {"message": "slow 8", "abortOnEvent": "TEXT_MESSAGE_CONTENT"},
        {"forwardedProps": {"a2a": {"subscribeOnly": true}}}
    ]);
    let expected: Vec<String> = (1..=8)
        .map(|i| format!("tick {i}/8"))
        .chain(["slow 8 done".to_owned()])
        .collect();
    for (binding, steps) in each_binding("reattach", steps).await {
        let back = &steps[1];
        assert_accepted(back);
        assert_eq!(
            event_types(back)[..3],
            ["RUN_STARTED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT"],
            "{binding}"
        );
        assert_eq!(last_event(back)["outcome"]["type"], "success", "{binding}");
        assert_eq!(
            assistant_texts(back),
            expected,
            "{binding}: every tick once"
        );
        assert_eq!(back["state"]["a2a"]["task"]["state"], "completed");
    }
}

/// CopilotKit's stop finds the live task through `ListTasks` and cancels it; a client
/// disconnect cancels it when `cancel_on_disconnect` says so.
#[tokio::test(flavor = "multi_thread")]
async fn stop_and_disconnect_cancel_the_task_on_every_binding() {
    for (binding, mode) in BINDINGS {
        let gw = gateway(mode, json!({"cancel_on_disconnect": true})).await;
        let thread = format!("stop-{mode}");
        let run_url = format!("{}/copilotkit/agent/ref/run", gw.base);
        let input = run_input(&thread, "slow 100");
        let live = tokio::spawn(async move { post_run(&run_url, &input, WITHIN).await });
        // Stopped once the task runs (asked again until then: a loaded machine is slow).
        let mut stopped = Value::Null;
        for _ in 0..50 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            stopped = reqwest::Client::new()
                .post(format!("{}/copilotkit/agent/ref/stop/{thread}", gw.base))
                .json(&json!({}))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if stopped["stopped"] == true {
                break;
            }
        }
        assert_eq!(stopped["stopped"], true, "{binding}: {stopped}");
        let run = live.await.unwrap();
        // Its task ended by the cancel, long before its 10 s of ticks.
        assert!(
            run.elapsed < Duration::from_secs(9),
            "{binding}: {:?}",
            run.elapsed
        );
        let task_id = run.events[0]["metadata"]["a2a"]["taskId"].as_str().unwrap();
        assert_eq!(
            task_state(mode, task_id).await,
            "TASK_STATE_CANCELED",
            "{binding}"
        );

        let left = drive(
            &gw.agent_url("ref"),
            &format!("leave-{mode}"),
            json!([{"message": "slow 300", "abortOnEvent": "STATE_SNAPSHOT"}]),
        )
        .await;
        let task_id = left[0]["events"][0]["metadata"]["a2a"]["taskId"]
            .as_str()
            .unwrap()
            .to_owned();
        let mut state = String::new();
        for _ in 0..30 {
            state = task_state(mode, &task_id).await;
            if state == "TASK_STATE_CANCELED" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(
            state, "TASK_STATE_CANCELED",
            "{binding}: cancel on disconnect"
        );
    }
}

/// The threads API lists contexts through `ListTasks` and reads one back.
#[tokio::test(flavor = "multi_thread")]
async fn threads_are_listed_and_read_through_list_tasks_on_every_binding() {
    for (binding, mode) in BINDINGS {
        let gw = gateway(mode, json!({})).await;
        let url = gw.agent_url("ref");
        let (done, wait) = (format!("th-done-{mode}"), format!("th-wait-{mode}"));
        drive_message(&url, &done, "echo all done").await;
        drive_message(&url, &wait, "approve").await;
        let list: Value = get_json(format!("{url}/threads?pageSize=100")).await;
        assert_eq!(list["source"], "upstream", "{binding}: {list}");
        let status_of = |thread: &str| {
            list["threads"]
                .as_array()
                .unwrap()
                .iter()
                .find(|t| t["threadId"] == thread)
                .map(|t| t["status"].as_str().unwrap().to_owned())
        };
        assert_eq!(
            status_of(&done).as_deref(),
            Some("idle"),
            "{binding}: {list}"
        );
        assert_eq!(
            status_of(&wait).as_deref(),
            Some("input-required"),
            "{binding}"
        );
        let read: Value = get_json(format!("{url}/threads/{wait}")).await;
        let messages: Vec<(&str, &str)> = read["messages"]
            .as_array()
            .unwrap_or_else(|| panic!("{binding}: {read}"))
            .iter()
            .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
            .collect();
        assert_eq!(
            messages,
            [
                ("user", "approve"),
                ("assistant", "Do you approve? Reply yes or no.")
            ],
            "{binding}"
        );
        assert_eq!(read["pendingInterrupts"].as_array().unwrap().len(), 1);
    }
}

/// The A2A client answers the same on every binding, errors included: the SDK's
/// `google.rpc.Status` bodies land on the JSON-RPC codes (docs/bindings.md).
#[tokio::test(flavor = "multi_thread")]
async fn the_a2a_client_gets_the_same_answers_and_errors_on_every_binding() {
    use agui_a2a_gateway::a2a::card::Binding;
    use agui_a2a_gateway::a2a::client::{Client, ClientError, Endpoint};
    use agui_a2a_gateway::a2a::model::{OutgoingMessage, Part, ProtocolVersion, StreamEvent};
    let endpoint = |binding: Binding, tenant: Option<&str>| {
        let url = match binding {
            Binding::HttpJson => format!("{}{REST_PREFIX}", upstream("rest")),
            Binding::Grpc => upstream("grpc").to_owned(),
            _ => upstream("1.0").to_owned(),
        };
        Endpoint {
            url: url.parse().unwrap(),
            version: ProtocolVersion::V1,
            binding,
            tenant: tenant.map(str::to_owned),
            headers: Default::default(),
        }
    };
    let client = |endpoint| Client::new(reqwest::Client::new(), endpoint, 1 << 20, WITHIN);
    let code = |e: ClientError| match e {
        ClientError::Rpc(rpc) => rpc.code,
        other => panic!("not an A2A error: {other}"),
    };
    for (binding, tenant) in [
        (Binding::JsonRpc, None),
        (Binding::HttpJson, Some(REST_TENANT)),
        (Binding::Grpc, None),
    ] {
        let a2a = client(endpoint(binding, tenant));
        let msg = OutgoingMessage {
            message_id: format!("client-{}", binding.as_str()),
            parts: vec![Part::text("echo one two")],
            ..Default::default()
        };
        // A stream, read by reqwest and by the direct reader: the same events.
        let mut streamed = Vec::new();
        for reader in [a2a.clone(), a2a.clone().with_direct_streams(WITHIN)] {
            let mut msg = msg.clone();
            msg.message_id = format!("{}-{}", msg.message_id, streamed.len());
            let events: Vec<StreamEvent> = reader
                .stream_message(&CallContext::none(), &msg, None)
                .await
                .unwrap()
                .map(Result::unwrap)
                .collect()
                .await;
            let Some(StreamEvent::StatusUpdate(last)) = events.last() else {
                panic!("{binding:?}: {events:?}");
            };
            assert!(last.status.state.is_terminal(), "{binding:?}: {events:?}");
            streamed.push(events.len());
        }
        assert_eq!(streamed[0], streamed[1], "{binding:?}");
        let Ok(StreamEvent::Task(task)) = a2a
            .send_message(&CallContext::none(), &msg, None, None)
            .await
        else {
            panic!("{binding:?}: a task");
        };
        assert!(task.status.state.is_terminal(), "{binding:?}");
        let task_id = TaskId::new(&task.id);
        let read = a2a
            .get_task(&CallContext::none(), &task_id, Some(1))
            .await
            .unwrap();
        assert_eq!(
            (read.id.as_str(), read.history.len()),
            (task.id.as_str(), 1)
        );
        let context = task.context_id.as_deref();
        let page = a2a
            .list_tasks(
                &CallContext::none(),
                agui_a2a_gateway::a2a::call::ListTasks::first(context, 10).with_artifacts(),
            )
            .await
            .unwrap();
        assert_eq!(page.tasks.len(), 1, "{binding:?}");
        let mut events = a2a
            .subscribe(&CallContext::none(), &task_id)
            .await
            .map(|_| ())
            .err();
        assert_eq!(
            events.take().map(code),
            Some(-32004),
            "{binding:?}: a finished task"
        );
        let cancel = a2a
            .cancel_task(&CallContext::none(), &task_id)
            .await
            .unwrap_err();
        assert_eq!(code(cancel), -32002, "{binding:?}");
        // The reference agent's card declares no push notifications: registering a push
        // config is refused with the A2A error, on every binding.
        let push = agui_a2a_gateway::a2a::call::PushConfig {
            task_id: &task_id,
            id: "p1",
            url: "http://127.0.0.1:9/a2a/push/ref",
            token: "tok",
        };
        let refused = a2a
            .set_push_config(&CallContext::none(), push)
            .await
            .unwrap_err();
        assert_eq!(code(refused), -32003, "{binding:?}: push not supported");
        let missing = a2a
            .get_task(&CallContext::none(), &TaskId::new("no-such-task"), None)
            .await;
        let missing = missing.unwrap_err();
        assert!(missing.is_task_not_found(), "{binding:?}: {missing}");
        let unaddressable = a2a
            .get_task(&CallContext::none(), &TaskId::new(".."), None)
            .await;
        assert!(
            unaddressable.is_err_and(|e| e.is_task_not_found()),
            "{binding:?}"
        );
    }
    // Without its tenant the interface answers nothing A2A: a 404 from the router.
    let untenanted = client(endpoint(Binding::HttpJson, None));
    let err = untenanted
        .get_task(&CallContext::none(), &TaskId::new("t"), None)
        .await;
    let err = err.unwrap_err();
    assert!(
        matches!(&err, ClientError::Unavailable(m) if m.contains("HTTP 404")),
        "{err}"
    );
    // A 0.3 agent refuses `tasks/pushNotificationConfig/set` alike.
    let legacy = Endpoint {
        url: upstream("0.3").parse().unwrap(),
        version: ProtocolVersion::V0_3,
        ..endpoint(Binding::JsonRpc, None)
    };
    let task_id = TaskId::new("t");
    let push = agui_a2a_gateway::a2a::call::PushConfig {
        task_id: &task_id,
        id: "p1",
        url: "http://127.0.0.1:9/a2a/push/ref",
        token: "tok",
    };
    let refused = client(legacy)
        .set_push_config(&CallContext::none(), push)
        .await
        .unwrap_err();
    assert_eq!(code(refused), -32003, "0.3: push not supported");
}

/// The demo agent's three interfaces, each pinned on its URL, give the real AG-UI client the
/// same session — streamed text, an artifact, an approval resumed on its task, a failure,
/// the help text, a reattach — and the threads API lists it through `ListTasks`; `--demo`
/// itself stays on JSON-RPC.
#[tokio::test(flavor = "multi_thread")]
async fn the_demo_agent_serves_the_same_session_on_every_binding() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let demo = agui_a2a_gateway::demo::spawn(listener).await.unwrap();
    let pins = [
        ("JSONRPC", "jsonrpc"),
        ("HTTP+JSON", "http+json"),
        ("GRPC", "grpc"),
    ];
    let agents: Vec<Value> = pins
        .iter()
        .map(|(_, pin)| json!({"name": pin.replace('+', "-"), "url": demo, "binding": pin}))
        .collect();
    let gw = Gateway::start(&json!({ "agents": agents }).to_string(), false).await;
    wait_ready(&gw).await;
    let steps = json!([
        {"message": "echo hello from every binding"},
        {"message": "artifact"},
        {"message": "approve"},
        {"resume": {"status": "resolved", "payload": "yes"}},
        {"message": "fail"},
        {"message": "what can you do?"},
        {"message": "slow 4", "abortOnEvent": "TEXT_MESSAGE_CONTENT"},
        {"forwardedProps": {"a2a": {"subscribeOnly": true}}}
    ]);
    // What a client sees of each step: its assistant texts, how it ended, the task.
    let seen = |step: &Value| {
        assert_accepted(step);
        json!({
            "texts": assistant_texts(step),
            "outcome": last_event(step)["outcome"]["type"],
            "errors": step["runErrors"].as_array().map(|e| e.iter().map(|e| e["code"].clone()).collect::<Vec<_>>()),
            "task": step["state"]["a2a"]["task"]["state"],
            // Ids aside (each binding's task has its own).
            "artifacts": step["state"]["view"]["artifacts"].as_object().map(|all| all.iter()
                .map(|(id, a)| (id.clone(), json!([a["text"], a["complete"], a["parts"]])))
                .collect::<serde_json::Map<_, _>>()),
            "interrupts": step["pendingInterrupts"].as_array().map(Vec::len),
        })
    };
    let mut sessions = Vec::new();
    for (binding, pin) in pins {
        let name = pin.replace('+', "-");
        assert_eq!(agent_view(&gw, &name).await["binding"], binding);
        assert_eq!(agent_view(&gw, &name).await["url"], demo.as_str());
        let thread = format!("demo-{name}");
        let driven = drive(&gw.agent_url(&name), &thread, steps.clone()).await;
        let session: Vec<Value> = driven.iter().map(seen).collect();
        let list: Value = get_json(format!("{}/threads?pageSize=100", gw.agent_url(&name))).await;
        assert_eq!(list["source"], "upstream", "{binding}: {list}");
        assert!(
            list["threads"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["threadId"] == thread.as_str()),
            "{binding}: {list}"
        );
        sessions.push((binding, session));
    }
    let (_, reference) = &sessions[0];
    assert_eq!(reference[0]["texts"], json!(["hello from every binding"]));
    assert_eq!(
        reference[1]["artifacts"]["artifact-1"][0],
        "Hello from artifact."
    );
    assert_eq!(reference[2]["interrupts"], 1);
    let answered = reference[3]["texts"].as_array().unwrap();
    assert_eq!(answered.last().unwrap(), "Approved: yes");
    assert_eq!(reference[4]["errors"], json!(["a2a_task_failed"]));
    assert!(reference[5]["texts"].to_string().contains("echo <text>"));
    let reattached = reference[7]["texts"].as_array().unwrap();
    let ticks = [
        "tick 1/4",
        "tick 2/4",
        "tick 3/4",
        "tick 4/4",
        "slow 4 done",
    ];
    assert_eq!(
        reattached[reattached.len() - 5..],
        ticks.map(Value::from),
        "every tick once"
    );
    for (binding, session) in &sessions[1..] {
        for (i, (step, expected)) in session.iter().zip(reference).enumerate() {
            assert_eq!(step, expected, "{binding}, step {i}");
        }
    }

    let gw = Gateway::start("{}", true).await;
    wait_ready(&gw).await;
    assert_eq!(agent_view(&gw, "demo").await["binding"], "JSONRPC");
}

/// `GET /agents` shows what each card selected; a card offering nothing the gateway
/// speaks leaves its agent not ready, `/readyz` naming what it offered; a binding pin wins
/// over the card's order, and `tenant` over the interface's.
#[tokio::test(flavor = "multi_thread")]
async fn agents_show_the_selected_binding_and_unspoken_cards_are_not_ready() {
    let grpc_only = serve_card(json!([
        {"url": "http://127.0.0.1:1/", "protocolBinding": "GRPC", "protocolVersion": "0.3"}
    ]))
    .await;
    let grpc_first = serve_card(json!([
        {"url": "http://127.0.0.1:1/", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
        {"url": "http://127.0.0.1:1/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ]))
    .await;
    let config = json!({"agents": [
        {"name": "rest", "url": upstream("rest")},
        {"name": "rpc", "url": upstream("1.0")},
        {"name": "pinned", "url": upstream("1.0"), "binding": "http+json"},
        {"name": "retenanted", "url": upstream("rest"), "tenant": "other"},
        {"name": "grpc-only", "url": grpc_only},
        {"name": "grpc-first", "url": grpc_first},
        {"name": "grpc-first-pinned", "url": grpc_first, "binding": "jsonrpc"},
    ]});
    let gw = Gateway::start(&config.to_string(), false).await;
    let mut ready = Value::Null;
    for _ in 0..100 {
        ready = get_json(format!("{}/readyz", gw.base)).await;
        if ready["agents"] == json!(["grpc-only"]) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(ready["status"], "degraded", "{ready}");
    assert_eq!(ready["agents"], json!(["grpc-only"]), "{ready}");
    assert_eq!(
        ready["reasons"]["grpc-only"],
        "the card offers GRPC (0.3); the gateway speaks JSONRPC (1.0, 0.3), HTTP+JSON (1.0), \
         GRPC (1.0)"
    );

    let rest = agent_view(&gw, "rest").await;
    assert_eq!(
        (&rest["binding"], &rest["tenant"], &rest["protocolVersion"]),
        (&json!("HTTP+JSON"), &json!(REST_TENANT), &json!("1.0"))
    );
    assert!(
        rest["url"].as_str().unwrap().ends_with(REST_PREFIX),
        "{rest}"
    );
    let rpc = agent_view(&gw, "rpc").await;
    assert_eq!(rpc["binding"], "JSONRPC", "the card's first interface");
    assert!(rpc.get("tenant").is_none(), "{rpc}");
    let pinned = agent_view(&gw, "pinned").await;
    assert_eq!(pinned["binding"], "HTTP+JSON", "{pinned}");
    assert!(
        pinned["url"].as_str().unwrap().ends_with("/rest"),
        "{pinned}"
    );
    assert_eq!(agent_view(&gw, "retenanted").await["tenant"], "other");
    assert_eq!(
        agent_view(&gw, "grpc-first").await["binding"],
        "GRPC",
        "the card's first interface"
    );
    assert_eq!(
        agent_view(&gw, "grpc-first-pinned").await["binding"],
        "JSONRPC",
        "the pin wins over the card's order"
    );
    let listed: Value = get_json(format!("{}/agents", gw.base)).await;
    let unready = listed["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "grpc-only")
        .unwrap();
    assert_eq!(unready["ready"], false);
    assert!(
        unready["error"].as_str().unwrap().contains("GRPC (0.3)"),
        "{unready}"
    );

    // The pinned interface is the one called; the overriding tenant is the one sent (the
    // `rest` upstream serves its own only: a 404 for another).
    let steps = drive(
        &gw.agent_url("pinned"),
        "pinned",
        json!([{"message": "echo pinned"}]),
    )
    .await;
    assert_accepted(&steps[0]);
    assert_eq!(assistant_texts(&steps[0]), ["pinned"]);
    let wrong = post_run(
        &gw.agent_url("retenanted"),
        &run_input("retenanted", "echo x"),
        WITHIN,
    )
    .await;
    let error = assert_run_error(&wrong, "upstream_unavailable");
    assert!(
        error["message"].as_str().unwrap().contains("404"),
        "{error}"
    );
}

/// A server that serves only an agent card listing `interfaces`; its URL.
async fn serve_card(interfaces: Value) -> String {
    let card = json!({"name": "card-only", "description": "", "version": "1",
        "supportedInterfaces": interfaces, "capabilities": {"streaming": true}, "skills": []});
    let app = axum::Router::new().route(
        "/.well-known/agent-card.json",
        axum::routing::get(move || async move { axum::Json(card) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// One request an HTTP+JSON fake received.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: HeaderMap,
    body: Value,
}

/// An HTTP+JSON-only upstream that answers `message:stream` by the first word of the
/// message (see [`hostile_answer`]) under `/a2a/t1` (tenant `t1`), recording every request.
async fn hostile_rest() -> (String, Arc<Mutex<Vec<Seen>>>) {
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let record = seen.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/", listener.local_addr().unwrap());
    let card = json!({"name": "hostile", "description": "", "version": "1",
        "supportedInterfaces": [{"url": format!("{base}a2a"), "protocolBinding": "HTTP+JSON",
            "protocolVersion": "1.0", "tenant": "t1"}],
        "capabilities": {"streaming": true,
            "extensions": [{"uri": "https://kagent.dev/extensions/hitl/v1"}]},
        "skills": []});
    let app = axum::Router::new()
        .route(
            "/.well-known/agent-card.json",
            axum::routing::get(move || async move { axum::Json(card) }),
        )
        .fallback(
            move |method: Method, uri: Uri, headers: HeaderMap, body: axum::body::Bytes| {
                let record = record.clone();
                async move {
                    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let text = body["message"]["parts"][0]["text"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned();
                    record.lock().unwrap().push(Seen {
                        method: method.to_string(),
                        path: uri.path().to_owned(),
                        headers,
                        body,
                    });
                    if uri.path() != "/a2a/t1/message:stream" {
                        return StatusCode::NOT_FOUND.into_response();
                    }
                    hostile_answer(text.split(' ').next().unwrap_or_default())
                }
            },
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    (base, seen)
}

/// A `google.rpc.Status` error body naming `reason`.
fn status_body(code: u16, status: &str, reason: &str) -> String {
    json!({"error": {"code": code, "status": status, "message": "scripted error",
        "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
            "domain": "a2a-protocol.org", "metadata": {}}]}})
    .to_string()
}

fn sse(frames: &[(Option<&str>, String)]) -> Response {
    let mut body = String::new();
    for (event, data) in frames {
        if let Some(e) = event {
            body.push_str(&format!("event: {e}\r\n"));
        }
        body.push_str(&format!("data: {data}\r\n\r\n"));
    }
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from(body))
        .unwrap()
}

fn hostile_answer(word: &str) -> Response {
    let json = |status: StatusCode, body: String| {
        Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(Body::from(body))
            .unwrap()
    };
    let working = json!({"statusUpdate": {"taskId": "T", "contextId": "C",
        "status": {"state": "TASK_STATE_WORKING",
            "message": {"messageId": "w", "role": "ROLE_AGENT", "parts": [{"text": "working "}]}}}})
    .to_string();
    match word {
        // 10 MB of error body: read no further than the bound, never shown.
        "huge" => json(
            StatusCode::BAD_REQUEST,
            format!(r#"{{"error": {{"code": 400, "message": "{}"}}}}"#, "x".repeat(10 << 20)),
        ),
        "notfound" => json(
            StatusCode::NOT_FOUND,
            status_body(404, "NOT_FOUND", "TASK_NOT_FOUND"),
        ),
        "teapot" => json(
            StatusCode::IM_A_TEAPOT,
            status_body(418, "UNKNOWN", "SOMETHING_ELSE"),
        ),
        "midstream" => sse(&[
            (None, working),
            (
                Some("error"),
                status_body(500, "INTERNAL", "INVALID_AGENT_RESPONSE"),
            ),
        ]),
        "garbage" => sse(&[(None, working), (None, "not json at all".into())]),
        _ => sse(&[
            (None, json!({"task": {"id": "T", "contextId": "C",
                "status": {"state": "TASK_STATE_SUBMITTED"}}})
            .to_string()),
            (None, working),
            (None, json!({"statusUpdate": {"taskId": "T", "contextId": "C",
                "status": {"state": "TASK_STATE_COMPLETED",
                    "message": {"messageId": "d", "role": "ROLE_AGENT", "parts": [{"text": "done"}]}}}})
            .to_string()),
        ]),
    }
}

/// An HTTP+JSON upstream that breaks the binding ends each run with a clear `RUN_ERROR`,
/// nothing of its body shown, and the gateway serves the next run; what it received is an
/// A2A 1.0 HTTP+JSON call with the tenant in the path and every header a JSON-RPC call
/// carries (version, extensions, static headers, the caller's identity).
#[tokio::test(flavor = "multi_thread")]
async fn http_json_upstreams_that_break_the_binding_end_in_run_errors() {
    let (base, seen) = hostile_rest().await;
    let config = json!({
        "auth": {"api_keys": [{"name": "alice", "key": "alice-key-0123456789abcdef"}]},
        "agents": [{"name": "h", "url": base, "forward_identity": "X-Caller",
            "headers": {"X-Api-Key": "static-1"}}],
    });
    let gw = Gateway::start(&config.to_string(), false).await;
    let run = |text: &'static str| {
        let url = gw.agent_url("h");
        async move {
            let client = reqwest::Client::new();
            let started = std::time::Instant::now();
            let resp = client
                .post(&url)
                .bearer_auth("alice-key-0123456789abcdef")
                .json(&run_input(&format!("hostile-{text}"), text))
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let raw = tokio::time::timeout(WITHIN, resp.text())
                .await
                .unwrap()
                .unwrap();
            SseRun {
                status,
                events: sse_events(&raw),
                raw,
                elapsed: started.elapsed(),
                cut: None,
            }
        }
    };
    for (text, code) in [
        ("huge", "upstream_unavailable"),
        ("notfound", "a2a_error_-32001"),
        ("teapot", "upstream_unavailable"),
        ("midstream", "a2a_error_-32006"),
        ("garbage", "upstream_invalid_response"),
    ] {
        let r = run(text).await;
        let error = assert_run_error(&r, code);
        assert!(r.raw.len() < 64 * 1024, "{text}: {} bytes", r.raw.len());
        assert!(!r.raw.contains("xxxx"), "{text}: the body is not shown");
        assert!(
            r.elapsed < Duration::from_secs(10),
            "{text}: {:?}",
            r.elapsed
        );
        if text == "teapot" {
            assert!(
                error["message"].as_str().unwrap().contains("418"),
                "{error}"
            );
        }
        let ok = run("echo").await;
        assert_run_finished(&ok);
    }
    let seen = seen.lock().unwrap().clone();
    let call = seen
        .iter()
        .find(|s| s.path.ends_with("message:stream"))
        .expect("a stream call");
    assert_eq!(
        (call.method.as_str(), call.path.as_str()),
        ("POST", "/a2a/t1/message:stream")
    );
    let header = |name: &str| call.headers.get(name).and_then(|v| v.to_str().ok());
    assert_eq!(header("a2a-version"), Some("1.0"));
    assert_eq!(
        header("a2a-extensions"),
        Some("https://kagent.dev/extensions/hitl/v1")
    );
    assert_eq!(header("x-caller"), Some("alice"));
    assert_eq!(header("x-api-key"), Some("static-1"));
    assert_eq!(header("accept"), Some("text/event-stream"));
    assert_eq!(header("content-type"), Some("application/json"));
    assert!(
        call.body["message"]["messageId"].is_string(),
        "{:?}",
        call.body
    );
    assert!(
        call.body.get("tenant").is_none(),
        "the tenant is in the path only"
    );
    assert!(
        seen.iter().all(|s| s.path.starts_with("/a2a/t1/")),
        "every call under the tenant: {:?}",
        seen.iter().map(|s| &s.path).collect::<Vec<_>>()
    );
}

/// On JSON-RPC the tenant is a request field of every 1.0 call (A2A 1.0 §4.4), here from
/// `agents[].tenant`.
#[tokio::test(flavor = "multi_thread")]
async fn json_rpc_calls_carry_the_tenant_as_a_request_field() {
    use crate::fake::{task, update, Answer, Fake};
    let up = Fake::start_responder(|method, _| match method {
        "SendStreamingMessage" => Some(Answer::Frames(vec![
            task("TASK_STATE_SUBMITTED", None),
            update("TASK_STATE_COMPLETED", Some(("m1", "done"))),
        ])),
        _ => None,
    })
    .await;
    let config = json!({"agents": [{"name": "t", "url": up.url, "tenant": "acme"}]});
    let gw = Gateway::start(&config.to_string(), false).await;
    let run = post_run(&gw.agent_url("t"), &run_input("tenant-rpc", "hi"), WITHIN).await;
    assert_run_finished(&run);
    assert_eq!(agent_view(&gw, "t").await["tenant"], "acme");
    let calls: Vec<Value> = up
        .requests()
        .iter()
        .map(|r| serde_json::from_str(&r.body).unwrap())
        .collect();
    assert!(!calls.is_empty());
    for call in calls {
        assert_eq!(call["params"]["tenant"], "acme", "{call}");
    }
}

/// A gRPC stream that ends without a final status (the SDK's own handler closes the stream
/// with `OK` while its task still works) ends the run with a clear `RUN_ERROR`, and the
/// gateway serves the next run. The gateway resubscribes (the task is not finished); the
/// SDK answers the snapshot and then nothing, so the run's event bound ends it.
#[tokio::test(flavor = "multi_thread")]
async fn a_grpc_stream_without_a_final_status_ends_in_a_run_error() {
    let config = json!({"agents": [{"name": "ref", "url": upstream("grpc")}],
        "timeouts": {"first_event": 1500, "idle": 1500}});
    let gw = Gateway::start(&config.to_string(), false).await;
    let url = gw.agent_url("ref");
    let cut = post_run(&url, &run_input("grpc-hangup", "hangup"), WITHIN).await;
    let error = assert_run_error(&cut, "upstream_timeout");
    assert!(
        error["message"].as_str().unwrap().contains("first_event"),
        "{error}"
    );
    assert!(
        cut.raw.contains("hanging up"),
        "the text before the end is shown"
    );
    assert!(cut.elapsed < Duration::from_secs(10), "{:?}", cut.elapsed);
    let next = post_run(&url, &run_input("grpc-next", "echo still here"), WITHIN).await;
    assert_run_finished(&next);
}
