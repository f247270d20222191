//! End-to-end tests: the real gateway on 127.0.0.1, real A2A upstreams (Python a2a-sdk 1.3.0
//! speaking 1.0+0.3, 1.0 only, 0.3 only, HTTP+JSON only, and the embedded demo agent),
//! driven by the real AG-UI client (`@ag-ui/client` 1.0.0 HttpAgent). Peers are installed
//! by `scripts/test`.

// The helper modules share their items with this file through `pub`.
#![allow(unreachable_pub)]

mod abuse;
mod auth;
mod binary;
mod bindings;
mod console;
mod copilotkit;
mod copilotkit_threads;
mod credentials;
mod fake;
mod frameworks;
mod helm;
mod hostile;
mod identity_peers;
mod identity_support;
mod inbox;
mod lane;
mod ops;
mod pki;
mod protobuf;
mod push;
mod react;
mod readiness;
mod readme;
mod ready_line;
mod redis;
mod redis_servers;
mod redis_topologies;
mod replays;
mod sessions;
mod support;
mod threads;
mod upstream_tls;
mod upstream_view;

use std::time::Duration;

use fake::{task, update, Answer, Fake};
use serde_json::{json, Value};
use support::*;

#[tokio::test(flavor = "multi_thread")]
async fn streamed_text_reaches_the_client_on_every_protocol_version() {
    for (mode, steps) in
        drive_each_mode("echo", json!([{"message": "echo hello brave world"}])).await
    {
        let s = &steps[0];
        assert_accepted(s);
        assert_eq!(assistant_texts(s), ["hello brave world"], "{mode}");
        assert_eq!(last_event(s)["type"], "RUN_FINISHED");
        assert_eq!(last_event(s)["outcome"]["type"], "success");
        assert_eq!(s["state"]["a2a"]["task"]["state"], "completed", "{mode}");
        let started = &s["events"][0];
        assert_eq!(started["threadId"], format!("echo-{mode}"));
        assert_eq!(
            started["metadata"]["a2a"]["contextId"],
            s["state"]["a2a"]["contextId"]
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_protocol_version_follows_the_card() {
    let gw = Gateway::with_agents(&[
        ("v03", upstream("0.3")),
        ("v1", upstream("1.0")),
        ("both", upstream("both")),
    ])
    .await;
    // Reading the cards happens in the background: wait for readiness.
    wait_ready(&gw).await;
    let agents: Value = reqwest::get(format!("{}/agents", gw.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let find = |name: &str| {
        agents["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(find("v03")["protocolVersion"], "0.3");
    assert_eq!(find("v1")["protocolVersion"], "1.0");
    assert_eq!(
        find("both")["protocolVersion"],
        "1.0",
        "1.0 preferred when both are offered"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn artifacts_stream_as_text_and_land_in_state() {
    for (mode, steps) in drive_each_mode("art", json!([{"message": "artifact"}])).await {
        let s = &steps[0];
        assert_accepted(s);
        let art = &s["state"]["view"]["artifacts"]["artifact-1"];
        assert_eq!(art["text"], "Hello from artifact.", "{mode}");
        assert_eq!(art["complete"], true);
        assert_eq!(art["parts"].as_array().unwrap().len(), 3);
        assert_eq!(
            assistant_texts(s),
            ["Hello from artifact.", "Artifact ready."]
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn input_required_interrupts_and_resumes_on_the_same_task() {
    for (mode, steps) in drive_each_mode("hitl", json!([{"message": "approve"}, {"resume": {"status": "resolved", "payload": "yes, go ahead"}}])).await {
        let (ask, answer) = (&steps[0], &steps[1]);
        assert_accepted(ask);
        let pending = ask["pendingInterrupts"].as_array().unwrap();
        assert_eq!(pending.len(), 1, "{mode}");
        assert_eq!(pending[0]["reason"], "input_required");
        assert_eq!(pending[0]["message"], "Do you approve? Reply yes or no.");
        let task_id = ask["state"]["a2a"]["task"]["id"].clone();
        assert_eq!(pending[0]["metadata"]["a2a"]["taskId"], task_id);
        assert_eq!(ask["state"]["a2a"]["task"]["state"], "input-required");
        assert_eq!(activity(ask)["content"]["stage"], "awaiting_input");

        assert_accepted(answer);
        assert!(answer["pendingInterrupts"].as_array().unwrap().is_empty());
        assert_eq!(
            answer["state"]["a2a"]["task"]["id"], task_id,
            "resumed on the same task ({mode})"
        );
        assert_eq!(answer["state"]["a2a"]["task"]["state"], "completed");
        assert_eq!(answer["state"]["a2a"]["pendingInterrupts"], json!({}));
        assert_eq!(
            assistant_texts(answer).last().unwrap(),
            "Approved: yes, go ahead"
        );
        assert_eq!(activity(answer)["content"]["stage"], "resolved");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resume_sent_twice_at_once_reaches_the_agent_once() {
    // The task keeps waiting on its question however often it is read (as while an answer is
    // on its way): only the claim keeps the second run from answering again.
    let up = Fake::start_responder(|method, _| match method {
        "GetTask" => Some(Answer::Json(json!({"result": task(
            "TASK_STATE_INPUT_REQUIRED", Some(("q", "Proceed?")))["task"]}))),
        "SendStreamingMessage" => Some(Answer::Frames(vec![
            update("TASK_STATE_WORKING", None),
            update("TASK_STATE_COMPLETED", Some(("done", "Proceeding."))),
        ])),
        "SubscribeToTask" => Some(Answer::Frames(vec![
            task("TASK_STATE_INPUT_REQUIRED", Some(("q", "Proceed?"))),
            update("TASK_STATE_COMPLETED", Some(("done", "Proceeding."))),
        ])),
        _ => None,
    })
    .await;
    let gw = Gateway::with_agents(&[("up", &up.url)]).await;
    let body = json!({"threadId": "double-resume", "runId": "r2", "messages": [],
        "protocolVersion": "1.0",
        "state": {"a2a": {"contextId": "C1", "task": {"id": "T1", "state": "input-required"},
            "pendingInterrupts": {"a2a:T1:q": {"id": "a2a:T1:q"}}}},
        "resume": [{"interruptId": "a2a:T1:q", "status": "resolved", "payload": "yes"}]});
    let within = std::time::Duration::from_secs(20);
    let url = gw.agent_url("up");
    let (a, b) = tokio::join!(post_run(&url, &body, within), post_run(&url, &body, within));
    for run in [&a, &b] {
        assert_eq!(run.status, 200);
        assert_run_finished(run);
        assert_eq!(
            run.events.last().unwrap()["outcome"]["type"],
            "success",
            "{}",
            run.raw
        );
    }
    let sends = up
        .calls()
        .iter()
        .filter(|m| *m == "SendStreamingMessage")
        .count();
    assert_eq!(sends, 1, "the answer went upstream once: {:?}", up.calls());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interrupt_of_a_task_whose_ids_hold_colons_resumes_that_task() {
    // docs/identity.md "Interrupt ids": any task id and status message id round-trip.
    const TASK: &str = "urn:task:50%:é";
    const QUESTION: &str = "q:1%";
    let waiting = json!({"id": TASK, "contextId": "C1", "status": {"state": "TASK_STATE_INPUT_REQUIRED",
        "message": {"messageId": QUESTION, "role": "ROLE_AGENT", "parts": [{"text": "Proceed?"}]}}});
    let asked = waiting.clone();
    let up = Fake::start_responder(move |method, params| match method {
        "GetTask" => Some(Answer::Json(json!({"result": asked}))),
        "SendStreamingMessage" if params["message"]["taskId"] == TASK => {
            Some(Answer::Frames(vec![
                json!({"statusUpdate": {"taskId": TASK, "contextId": "C1",
                "status": {"state": "TASK_STATE_COMPLETED", "message": {"messageId": "done",
                    "role": "ROLE_AGENT", "parts": [{"text": "Proceeding."}]}}}}),
            ]))
        }
        "SendStreamingMessage" => Some(Answer::Frames(vec![json!({"task": asked})])),
        _ => None,
    })
    .await;
    let gw = Gateway::with_agents(&[("up", &up.url)]).await;
    let within = Duration::from_secs(20);
    let first = json!({"threadId": "colons", "runId": "r1", "protocolVersion": "1.0",
        "messages": [{"id": "u1", "role": "user", "content": "go"}]});
    let run = post_run(&gw.agent_url("up"), &first, within).await;
    assert_run_finished(&run);
    let interrupt = &run.events.last().unwrap()["outcome"]["interrupts"][0];
    let id = interrupt["id"].as_str().unwrap().to_owned();
    assert_eq!(id, "a2a:urn:task:50%:é:q%3A1%25");
    assert_eq!(interrupt["metadata"]["a2a"]["taskId"], TASK);
    let resume = json!({"threadId": "colons", "runId": "r2", "protocolVersion": "1.0", "messages": [],
        "state": {"a2a": {"contextId": "C1", "task": {"id": TASK, "state": "input-required"},
            "pendingInterrupts": {&id: {"id": &id}}}},
        "resume": [{"interruptId": &id, "status": "resolved", "payload": "yes"}]});
    let run = post_run(&gw.agent_url("up"), &resume, within).await;
    assert_run_finished(&run);
    assert_eq!(
        run.events.last().unwrap()["outcome"]["type"],
        "success",
        "{}",
        run.raw
    );
    let resolved = run
        .events
        .iter()
        .find(|e| e["type"] == "ACTIVITY_DELTA")
        .unwrap();
    assert_eq!(resolved["messageId"], id.as_str());
    let answer = up
        .requests()
        .into_iter()
        .rfind(|r| r.method == "SendStreamingMessage")
        .map(|r| serde_json::from_str::<Value>(&r.body).unwrap())
        .unwrap();
    assert_eq!(
        answer["params"]["message"]["taskId"], TASK,
        "the answer went to its task"
    );
    assert_eq!(
        answer["params"]["message"]["messageId"],
        format!("{id}:response")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn auth_required_and_a_plain_answer_without_resume() {
    let gw = Gateway::with_agents(&[("ref", upstream("both"))]).await;
    // A client without resume support answers with a plain user message
    // (docs/design.md#7-human-in-the-loop).
    let steps = drive(
        &gw.agent_url("ref"),
        "auth-plain",
        json!([{"message": "auth"}]),
    )
    .await;
    assert_eq!(
        steps[0]["pendingInterrupts"][0]["reason"],
        "a2a:auth_required"
    );
    let state = steps[0]["state"].clone();
    let steps = drive_with(json!({
        "url": gw.agent_url("ref"), "threadId": "auth-plain-2", "initialState": state,
        "steps": [{"message": "token-123"}]
    }))
    .await;
    assert_accepted(&steps[0]);
    assert_eq!(
        assistant_texts(&steps[0]),
        ["Authenticated, thanks: token-123"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn structured_requests_carry_a_response_schema() {
    let gw = Gateway::with_agents(&[("ref", upstream("both"))]).await;
    let steps = drive(
        &gw.agent_url("ref"),
        "form",
        json!([{"message": "form"}, {"resume": {"status": "resolved", "payload": {"approved": true, "text": "ok"}}}]),
    )
    .await;
    assert_accepted(&steps[0]);
    assert_eq!(
        steps[0]["pendingInterrupts"][0]["responseSchema"]["required"],
        json!(["approved"])
    );
    assert_accepted(&steps[1]);
    assert_eq!(assistant_texts(&steps[1]).last().unwrap(), "Approved: ok");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_resume_cancels_the_task() {
    let gw = Gateway::with_agents(&[("ref", upstream("both"))]).await;
    let steps = drive(
        &gw.agent_url("ref"),
        "cancel",
        json!([{"message": "approve"}, {"resume": {"status": "cancelled"}}]),
    )
    .await;
    assert_accepted(&steps[1]);
    assert_eq!(last_event(&steps[1])["outcome"]["type"], "cancelled");
    assert_eq!(steps[1]["state"]["a2a"]["task"]["state"], "canceled");
}

#[tokio::test(flavor = "multi_thread")]
async fn failures_are_run_errors_never_successes() {
    for mode in MODES {
        let gw = Gateway::with_agents(&[("ref", upstream(mode))]).await;
        for (text, code) in [
            ("fail", "a2a_task_failed"),
            ("reject", "a2a_task_rejected"),
            ("crash", "a2a_error_-32603"),
        ] {
            let steps = drive(
                &gw.agent_url("ref"),
                &format!("{text}-{mode}"),
                json!([{"message": text}]),
            )
            .await;
            let s = &steps[0];
            assert!(s["failed"].is_null(), "{}", s["failed"]);
            assert_eq!(s["runErrors"][0]["code"], code, "{text} on {mode}");
            assert_eq!(last_event(s)["type"], "RUN_ERROR");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn message_only_replies_finish_successfully() {
    for (mode, steps) in drive_each_mode("msg", json!([{"message": "msg hi there"}])).await {
        assert_accepted(&steps[0]);
        assert_eq!(assistant_texts(&steps[0]), ["hi there"], "{mode}");
        assert_eq!(last_event(&steps[0])["outcome"]["type"], "success");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn agent_state_updates_reach_the_app_state() {
    let gw = Gateway::with_agents(&[("ref", upstream("both"))]).await;
    let steps = drive_with(json!({
        "url": gw.agent_url("ref"), "threadId": "state", "initialState": {"mine": [1, 2]},
        "steps": [{"message": "state"}]
    }))
    .await;
    assert_accepted(&steps[0]);
    assert_eq!(steps[0]["state"]["progress"].as_f64(), Some(50.0));
    assert_eq!(
        steps[0]["state"]["mine"],
        json!([1, 2]),
        "foreign keys are kept"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn later_turns_continue_the_server_context_not_the_thread_id() {
    let gw = Gateway::with_agents(&[("ref", upstream("both"))]).await;
    let steps = drive(
        &gw.agent_url("ref"),
        "multi-turn",
        json!([{"message": "echo one"}, {"message": "echo two"}]),
    )
    .await;
    assert_accepted(&steps[0]);
    assert_accepted(&steps[1]);
    let first = steps[0]["state"]["a2a"]["contextId"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(
        first, "multi-turn",
        "the threadId is never sent as a contextId"
    );
    assert_eq!(steps[1]["state"]["a2a"]["contextId"], first.as_str());
    assert_ne!(
        steps[1]["state"]["a2a"]["task"]["id"],
        steps[0]["state"]["a2a"]["task"]["id"]
    );
    // The binding store carries the context even when the client sends no state.
    let steps = drive(
        &gw.agent_url("ref"),
        "multi-turn",
        json!([{"message": "echo three"}]),
    )
    .await;
    assert_eq!(steps[0]["state"]["a2a"]["contextId"], first.as_str());
}

#[tokio::test(flavor = "multi_thread")]
async fn blocking_send_mode_projects_the_same_way() {
    for (mode, steps) in drive_each_mode(
        "send",
        json!([{"message": "artifact", "forwardedProps": {"a2a": {"mode": "send"}}}]),
    )
    .await
    {
        assert_accepted(&steps[0]);
        assert_eq!(
            steps[0]["state"]["view"]["artifacts"]["artifact-1"]["text"], "Hello from artifact.",
            "{mode}"
        );
        assert_eq!(last_event(&steps[0])["outcome"]["type"], "success");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn demo_agent_streams_text_and_interrupts() {
    let gw = Gateway::start("{}", true).await;
    let steps = drive(
        &gw.agent_url("demo"),
        "demo",
        json!([{"message": "echo hi from the demo"}, {"message": "approve"}, {"resume": {"status": "resolved", "payload": "yes"}}, {"message": "artifact"}, {"message": "what can you do?"}]),
    )
    .await;
    for s in &steps {
        assert_accepted(s);
    }
    assert_eq!(assistant_texts(&steps[0]), ["hi from the demo"]);
    assert_eq!(steps[1]["pendingInterrupts"].as_array().unwrap().len(), 1);
    assert_eq!(assistant_texts(&steps[2]).last().unwrap(), "Approved: yes");
    assert_eq!(
        steps[3]["state"]["view"]["artifacts"]["artifact-1"]["text"],
        "Hello from artifact."
    );
    assert!(assistant_texts(&steps[4])
        .last()
        .unwrap()
        .contains("echo <text>"));
}

#[tokio::test(flavor = "multi_thread")]
async fn demo_agent_pinned_to_0_3_works_end_to_end() {
    let demo = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = agui_a2a_gateway::demo::spawn(demo).await.unwrap();
    let gw = Gateway::start(
        &json!({"agents": [{"name": "d", "url": base, "protocol": "0.3"}]}).to_string(),
        false,
    )
    .await;
    let steps = drive(
        &gw.agent_url("d"),
        "demo03",
        json!([{"message": "echo pinned"}, {"message": "fail"}]),
    )
    .await;
    assert_accepted(&steps[0]);
    assert_eq!(assistant_texts(&steps[0]), ["pinned"]);
    assert_eq!(steps[1]["runErrors"][0]["code"], "a2a_task_failed");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_upstream_is_a_run_error_not_an_http_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let gw = Gateway::with_agents(&[("down", &format!("http://127.0.0.1:{port}"))]).await;
    // docs/operations.md#readiness: served, degraded, the agent named.
    let ready = reqwest::get(format!("{}/readyz", gw.base)).await.unwrap();
    assert_eq!(ready.status(), 200);
    let body: Value = ready.json().await.unwrap();
    assert_eq!(body["status"], "degraded");
    assert_eq!(body["agents"], json!(["down"]));
    let steps = drive(
        &gw.agent_url("down"),
        "down",
        json!([{"message": "echo x"}]),
    )
    .await;
    assert!(steps[0]["failed"].is_null());
    assert_eq!(steps[0]["runErrors"][0]["code"], "upstream_unavailable");
    assert_eq!(
        event_types(&steps[0]),
        ["RUN_STARTED", "STATE_SNAPSHOT", "RUN_ERROR"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_resume_is_refused_in_the_stream() {
    let gw = Gateway::with_agents(&[("ref", upstream("both"))]).await;
    let resp = reqwest::Client::new()
        .post(gw.agent_url("ref"))
        .json(&json!({"threadId": "t", "runId": "r", "messages": [],
            "state": {"a2a": {"pendingInterrupts": {"a2a:T:q": {}}}},
            "resume": [{"interruptId": "a2a:T:old", "status": "resolved", "payload": "y"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let body = resp.text().await.unwrap();
    assert!(body.contains(r#""code":"invalid_resume""#), "{body}");
    assert!(!body.contains('\r'), "LF-only SSE framing");
}

#[tokio::test(flavor = "multi_thread")]
async fn request_errors_are_json_before_the_stream() {
    // A small body limit, so the too-large body is fully sent before the gateway answers.
    let config = json!({"agents": [{"name": "ref", "url": upstream("both")}], "limits": {"max_body_bytes": 2048}});
    let gw = Gateway::start(&config.to_string(), false).await;
    let client = reqwest::Client::new();
    let good = run_input("t", "echo x");
    let cases: Vec<(reqwest::RequestBuilder, u16, &str)> = vec![
        (client.post(gw.agent_url("nope")).json(&good), 404, "unknown_agent"),
        (client.post(gw.agent_url("ref")).body("{}").header("content-type", "text/plain"), 415, "unsupported_media_type"),
        (client.post(gw.agent_url("ref")).body("{nope").header("content-type", "application/json"), 400, "malformed_json"),
        (client.post(gw.agent_url("ref")).json(&json!({"threadId": "t"})), 422, "invalid_run_input"),
        (client.post(gw.agent_url("ref")).json(&json!({"threadId": "t", "runId": "r", "messages": []})), 422, "no_user_message"),
        (
            client.post(gw.agent_url("ref")).json(&json!({"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "x"}], "forwardedProps": {"a2a": {"mode": 3}}})),
            422,
            "invalid_forwarded_props",
        ),
        (client.post(gw.agent_url("ref")).body(vec![b' '; 4096]).header("content-type", "application/json"), 413, "body_too_large"),
        (client.get(format!("{}/agents/nope", gw.base)), 404, "unknown_agent"),
    ];
    for (req, status, code) in cases {
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "{code}");
        assert!(resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json"));
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], code);
        assert!(body["error"]["message"].as_str().unwrap().len() > 5);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn old_clients_get_no_1_0_only_shapes() {
    let gw = Gateway::with_agents(&[("ref", upstream("both"))]).await;
    let body = reqwest::Client::new()
        .post(gw.agent_url("ref"))
        .json(&run_input("t", "echo old"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let last = body.trim_end().lines().last().unwrap();
    assert_eq!(
        last,
        r#"data: {"type":"RUN_FINISHED","threadId":"t","runId":"t-run"}"#
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cut_stream_is_resubscribed_without_repeating_text() {
    let up = Fake::start(vec![
        (
            "SendStreamingMessage",
            Answer::Frames(vec![
                task("TASK_STATE_SUBMITTED", None),
                update("TASK_STATE_WORKING", Some(("m1", "part one "))),
            ]),
        ),
        (
            "SubscribeToTask",
            Answer::Frames(vec![
                task("TASK_STATE_WORKING", Some(("m1", "part one "))),
                update("TASK_STATE_WORKING", Some(("m2", "part two"))),
                update("TASK_STATE_COMPLETED", None),
            ]),
        ),
    ])
    .await;
    let gw = Gateway::with_agents(&[("fake", &up.url)]).await;
    let steps = drive(&gw.agent_url("fake"), "cut", json!([{"message": "go"}])).await;
    assert_accepted(&steps[0]);
    assert_eq!(assistant_texts(&steps[0]), ["part one part two"]);
    assert_eq!(last_event(&steps[0])["outcome"]["type"], "success");
    // ListTasks first: is the threadId a context the upstream knows (pick-up,
    // docs/design.md#4-threads-and-contexts)?
    assert_eq!(
        up.calls(),
        ["ListTasks", "SendStreamingMessage", "SubscribeToTask"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_that_finished_while_away_is_read_with_get_task() {
    let finished = json!({"id": "T1", "contextId": "C1", "status": {"state": "TASK_STATE_COMPLETED",
        "message": {"messageId": "m9", "role": "ROLE_AGENT", "parts": [{"text": "done while away"}]}}});
    let up = Fake::start(vec![
        (
            "SendStreamingMessage",
            Answer::Frames(vec![task("TASK_STATE_WORKING", None)]),
        ),
        // a2a-sdk answers a subscribe to a finished task with -32004 as plain JSON.
        (
            "SubscribeToTask",
            Answer::Json(
                json!({"error": {"code": -32004, "message": "Task T1 is in terminal state"}}),
            ),
        ),
        ("GetTask", Answer::Json(json!({"result": finished}))),
    ])
    .await;
    let gw = Gateway::with_agents(&[("fake", &up.url)]).await;
    let steps = drive(&gw.agent_url("fake"), "away", json!([{"message": "go"}])).await;
    assert_accepted(&steps[0]);
    assert_eq!(assistant_texts(&steps[0]), ["done while away"]);
    assert_eq!(last_event(&steps[0])["outcome"]["type"], "success");
    assert_eq!(
        up.calls(),
        [
            "ListTasks",
            "SendStreamingMessage",
            "SubscribeToTask",
            "GetTask"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn stalls_broken_upstreams_and_oversized_events_end_in_run_errors() {
    let big = "x".repeat(4096);
    let up = Fake::start(vec![
        (
            "SendStreamingMessage",
            Answer::FramesThenStall(
                vec![task("TASK_STATE_WORKING", None)],
                Duration::from_secs(30),
            ),
        ),
        (
            "SendStreamingMessage",
            Answer::Status(axum::http::StatusCode::INTERNAL_SERVER_ERROR),
        ),
        (
            "SendStreamingMessage",
            Answer::Raw("data: this is not json\r\n\r\n".into()),
        ),
        (
            "SendStreamingMessage",
            Answer::Frames(vec![update("TASK_STATE_WORKING", Some(("m", &big)))]),
        ),
        ("SendStreamingMessage", Answer::Raw(String::new())),
        (
            "SendStreamingMessage",
            Answer::Frames(
                (0..10)
                    .map(|i| update("TASK_STATE_WORKING", Some((&format!("m{i}"), "tick"))))
                    .collect(),
            ),
        ),
    ])
    .await;
    let config = json!({"agents": [{"name": "fake", "url": up.url}],
        "timeouts": {"idle": 300}, "limits": {"max_event_bytes": 1024, "max_events_per_run": 5}});
    let gw = Gateway::start(&config.to_string(), false).await;
    for (thread, code) in [
        ("stall", "upstream_timeout"),
        ("http500", "upstream_unavailable"),
        ("garbage", "upstream_invalid_response"),
        ("big", "limit_exceeded"),
        ("empty", "upstream_stream_ended"),
        ("chatty", "limit_exceeded"),
    ] {
        let steps = drive(&gw.agent_url("fake"), thread, json!([{"message": "go"}])).await;
        assert!(
            steps[0]["failed"].is_null(),
            "{thread}: {}",
            steps[0]["failed"]
        );
        assert_eq!(steps[0]["runErrors"][0]["code"], code, "{thread}");
        assert_eq!(event_types(&steps[0])[0], "RUN_STARTED");
    }
}

/// The state of a task read straight from a 1.0 upstream, bypassing the gateway.
async fn upstream_task_state(upstream_url: &str, task_id: &str) -> String {
    let task = upstream_get_task(upstream_url, "1.0", task_id).await;
    task["status"]["state"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn subscribe_only_reattaches_to_a_running_task() {
    let gw = Gateway::with_agents(&[("ref", upstream("both"))]).await;
    let steps = drive(
        &gw.agent_url("ref"),
        "reattach",
        json!([
            {"message": "slow 8", "abortOnEvent": "TEXT_MESSAGE_CONTENT"},
            {"forwardedProps": {"a2a": {"subscribeOnly": true}}}
        ]),
    )
    .await;
    let (left, back) = (&steps[0], &steps[1]);
    assert!(
        left["state"]["a2a"]["task"]["id"].is_string(),
        "the first run saw the task"
    );
    assert_accepted(back);
    let types = event_types(back);
    assert_eq!(
        types[..3],
        ["RUN_STARTED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT"]
    );
    assert_eq!(last_event(back)["outcome"]["type"], "success");
    let texts = assistant_texts(back);
    let expected: Vec<String> = (1..=8)
        .map(|i| format!("tick {i}/8"))
        .chain(["slow 8 done".to_owned()])
        .collect();
    assert_eq!(
        texts, expected,
        "every tick once, in order, across the reattach"
    );
    assert_eq!(
        transcript(back).iter().filter(|(r, _)| r == "user").count(),
        1
    );
    assert_eq!(back["state"]["a2a"]["task"]["state"], "completed");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_client_disconnect_leaves_the_task_running_unless_configured() {
    let up = upstream("both");
    let config = json!({"agents": [
        {"name": "keep", "url": up},
        {"name": "cancel", "url": up, "cancel_on_disconnect": true}
    ]});
    let gw = Gateway::start(&config.to_string(), false).await;
    let mut tasks = Vec::new();
    for agent in ["keep", "cancel"] {
        let steps = drive(
            &gw.agent_url(agent),
            &format!("leave-{agent}"),
            json!([{"message": "slow 300", "abortOnEvent": "STATE_SNAPSHOT"}]),
        )
        .await;
        let task_id = steps[0]["events"][0]["metadata"]["a2a"]["taskId"]
            .as_str()
            .unwrap()
            .to_owned();
        tasks.push(task_id);
    }
    // The cancel is sent when the gateway notices the disconnect.
    wait_until(
        "the task of the disconnected run is canceled",
        Duration::from_secs(3),
        async || match upstream_task_state(up, &tasks[1]).await.as_str() {
            "TASK_STATE_CANCELED" => Ok(()),
            other => Err(format!("task state {other}")),
        },
    )
    .await;
    assert_eq!(
        upstream_task_state(up, &tasks[0]).await,
        "TASK_STATE_WORKING"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stale_waiting_task_in_client_state_starts_a_new_task() {
    let gw = Gateway::with_agents(&[("ref", upstream("both"))]).await;
    let stale = json!({"a2a": {"task": {"id": "no-such-task", "state": "input-required"},
        "pendingInterrupts": {"a2a:no-such-task:q": {"id": "a2a:no-such-task:q"}}}});
    let steps = drive_with(json!({
        "url": gw.agent_url("ref"), "threadId": "stale", "initialState": stale,
        "steps": [{"message": "echo fresh start"}]
    }))
    .await;
    assert_accepted(&steps[0]);
    assert_eq!(assistant_texts(&steps[0]).last().unwrap(), "fresh start");
    assert_ne!(steps[0]["state"]["a2a"]["task"]["id"], "no-such-task");
    assert_eq!(steps[0]["state"]["a2a"]["pendingInterrupts"], json!({}));
}

#[tokio::test(flavor = "multi_thread")]
async fn runs_beyond_the_concurrency_limit_get_429() {
    let config = json!({"agents": [{"name": "ref", "url": upstream("both")}], "limits": {"max_concurrent_runs": 1}});
    let gw = Gateway::start(&config.to_string(), false).await;
    let client = reqwest::Client::new();
    let body = |text: &str| run_input("t", text);
    let first = client
        .post(gw.agent_url("ref"))
        .json(&body("slow 5"))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    let second = client
        .post(gw.agent_url("ref"))
        .json(&body("echo x"))
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 429);
    assert_eq!(second.headers()["retry-after"], "1");
    let err: Value = second.json().await.unwrap();
    assert_eq!(err["error"]["code"], "too_many_runs");
    // The slot is free again once the first run has ended.
    let finished = first.text().await.unwrap();
    assert!(finished.contains("RUN_FINISHED"));
    wait_until(
        "the first run's stream is closed",
        Duration::from_secs(5),
        async || match open_streams(&gw, "ref").await {
            0 => Ok(()),
            open => Err(format!("{open} open streams")),
        },
    )
    .await;
    let third = client
        .post(gw.agent_url("ref"))
        .json(&body("echo x"))
        .send()
        .await
        .unwrap();
    assert_eq!(third.status(), 200);
    assert!(third.text().await.unwrap().contains("RUN_FINISHED"));
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_ends_open_runs_with_a_terminal_event() {
    let config = json!({"agents": [{"name": "ref", "url": upstream("both")}], "timeouts": {"shutdown_drain": 300}});
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (gw, server) = Gateway::start_until(&config.to_string(), false, async {
        let _ = stop_rx.await;
    })
    .await;
    let body = run_input("t", "slow 100");
    let mut resp = reqwest::Client::new()
        .post(gw.agent_url("ref"))
        .json(&body)
        .send()
        .await
        .unwrap();
    let first = resp.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("RUN_STARTED"));
    stop_tx.send(()).unwrap();
    let started = std::time::Instant::now();
    let mut rest = String::new();
    while let Some(chunk) = resp.chunk().await.unwrap() {
        rest.push_str(&String::from_utf8_lossy(&chunk));
    }
    let last = rest.trim_end().lines().last().unwrap().to_owned();
    assert!(
        last.contains(r#""type":"RUN_ERROR""#) && last.contains("gateway_shutdown"),
        "{last}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    tokio::time::timeout(Duration::from_secs(6), server)
        .await
        .expect("server stops")
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_a2a_client_lists_a_contexts_tasks_on_1_0_and_says_no_on_0_3() {
    use agui_a2a_gateway::a2a::client::{CallContext, Client, ClientError, Endpoint};
    use agui_a2a_gateway::a2a::model::ProtocolVersion;
    use agui_a2a_gateway::a2a::TaskId;
    let gw = Gateway::with_agents(&[("ref", upstream("both"))]).await;
    let steps = drive(
        &gw.agent_url("ref"),
        "listing",
        json!([{"message": "echo one"}, {"message": "echo two"}]),
    )
    .await;
    let context = steps[1]["state"]["a2a"]["contextId"]
        .as_str()
        .unwrap()
        .to_owned();
    let client = |version| {
        let endpoint = Endpoint::json_rpc(
            upstream("both").parse().unwrap(),
            version,
            Default::default(),
        );
        Client::new(
            reqwest::Client::new(),
            endpoint,
            1 << 20,
            Duration::from_secs(10),
        )
    };
    let page = client(ProtocolVersion::V1)
        .list_tasks(
            &CallContext::none(),
            agui_a2a_gateway::a2a::call::ListTasks::first(Some(&context), 10),
        )
        .await
        .unwrap();
    assert_eq!(page.tasks.len(), 2);
    assert_eq!(
        page.tasks[0].id,
        steps[1]["state"]["a2a"]["task"]["id"].as_str().unwrap(),
        "newest first"
    );
    let v03 = client(ProtocolVersion::V0_3)
        .list_tasks(
            &CallContext::none(),
            agui_a2a_gateway::a2a::call::ListTasks::first(Some(&context), 10),
        )
        .await;
    assert!(matches!(v03, Err(ClientError::Unsupported(..))));
    // GetTask and CancelTask in both versions, on a finished task.
    for version in [ProtocolVersion::V1, ProtocolVersion::V0_3] {
        let task_id = TaskId::new(&page.tasks[0].id);
        let task = client(version)
            .get_task(&CallContext::none(), &task_id, Some(1))
            .await
            .unwrap();
        assert!(task.status.state.is_terminal());
        let cancel = client(version)
            .cancel_task(&CallContext::none(), &task_id)
            .await;
        assert!(
            matches!(cancel, Err(ClientError::Rpc(ref e)) if e.code == -32002),
            "{version:?}: {cancel:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_that_do_not_stream_are_called_with_a_blocking_send() {
    let done = json!({"task": {"id": "T1", "contextId": "C1", "status": {"state": "TASK_STATE_COMPLETED",
        "message": {"messageId": "m1", "role": "ROLE_AGENT", "parts": [{"text": "sent, not streamed"}]}}}});
    let up = Fake::start_with(
        vec![("SendMessage", Answer::Json(json!({"result": done})))],
        false,
    )
    .await;
    let gw = Gateway::with_agents(&[("plain", &up.url)]).await;
    let steps = drive(&gw.agent_url("plain"), "plain", json!([{"message": "hi"}])).await;
    assert_accepted(&steps[0]);
    assert_eq!(assistant_texts(&steps[0]), ["sent, not streamed"]);
    assert_eq!(up.calls(), ["ListTasks", "SendMessage"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn agents_accepting_client_context_ids_get_the_thread_id() {
    let config =
        json!({"agents": [{"name": "ref", "url": upstream("both"), "context_ids": "client"}]});
    let gw = Gateway::start(&config.to_string(), false).await;
    let step = drive_message(&gw.agent_url("ref"), "thread-as-context", "echo hi").await;
    assert_eq!(step["state"]["a2a"]["contextId"], "thread-as-context");
    assert_eq!(
        step["events"][0]["metadata"]["a2a"]["contextId"],
        "thread-as-context"
    );
}
