//! AG-UI's HTTP+Protobuf encoding (docs/mapping.md#encodings): `@ag-ui/client` 1.0.0's
//! HttpAgent asking for it gets the events it gets over SSE, for the demo's text, interrupt
//! and failure and a tool call; `@ag-ui/proto`'s own decoder reads every frame of a raw body;
//! `*/*` (curl), no `Accept` and clients before AG-UI 1.0 stay SSE; errors before the stream
//! stay JSON.

use serde_json::{json, Value};

use crate::fake::{update, update_with_data, Answer, Fake};
use crate::support::*;

const PROTO: &str = "application/vnd.ag-ui.event+proto";

/// `value` with the strings that differ between two runs of one scenario made alike: the
/// thread's name, ids the agent mints (UUIDs), times.
fn normalized(value: &Value, thread: &str, ids: &mut Vec<String>) -> Value {
    match value {
        Value::String(s) => {
            let mut s = s.replace(thread, "THREAD");
            for uuid in uuids(&s.clone()) {
                let n = ids.iter().position(|u| *u == uuid).unwrap_or_else(|| {
                    ids.push(uuid.clone());
                    ids.len() - 1
                });
                s = s.replace(&uuid, &format!("ID{n}"));
            }
            Value::String(s)
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| normalized(v, thread, ids)).collect())
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = if matches!(k.as_str(), "timestamp" | "updatedAt") {
                        json!("TIME")
                    } else {
                        normalized(v, thread, ids)
                    };
                    let k = normalized(&json!(k), thread, ids);
                    (k.as_str().unwrap_or_default().to_owned(), v)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The UUIDs (8-4-4-4-12 hex) in `s`.
fn uuids(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 36 <= b.len() {
        let w = &b[i..i + 36];
        let is_uuid = w.iter().enumerate().all(|(j, c)| match j {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        });
        if is_uuid {
            out.push(s[i..i + 36].to_owned());
            i += 36;
        } else {
            i += 1;
        }
    }
    out
}

/// Drives `steps` on `url` over SSE and over protobuf (threads `<thread>-sse`,
/// `<thread>-proto`); asserts the client accepted both, each in the encoding asked for, and
/// that both gave the same events. Returns the protobuf run's steps.
async fn same_events_both_ways(url: &str, thread: &str, steps: Value) -> Vec<Value> {
    let mut runs = Vec::new();
    for (encoding, accept) in [("sse", None), ("proto", Some(PROTO))] {
        let thread_id = format!("{thread}-{encoding}");
        let mut script = json!({"url": url, "threadId": thread_id, "steps": steps});
        if let Some(accept) = accept {
            script["accept"] = json!(accept);
        }
        let driven = drive_with(script).await;
        for step in &driven {
            assert_accepted(step);
            assert_eq!(
                step["contentType"],
                accept.unwrap_or("text/event-stream"),
                "{thread}"
            );
        }
        let mut ids = Vec::new();
        let events: Vec<Value> = driven
            .iter()
            .map(|s| normalized(&s["events"], &thread_id, &mut ids))
            .collect();
        runs.push((driven, events));
    }
    let (proto, proto_events) = runs.pop().unwrap();
    let (_, sse_events) = runs.pop().unwrap();
    for (n, (p, s)) in proto_events.iter().zip(&sse_events).enumerate() {
        let (p, s) = (p.as_array().unwrap(), s.as_array().unwrap());
        for (i, (p, s)) in p.iter().zip(s).enumerate() {
            assert_eq!(p, s, "{thread}, step {n}, event {i}");
        }
        assert_eq!(p.len(), s.len(), "{thread}, step {n}: events");
    }
    proto
}

#[tokio::test(flavor = "multi_thread")]
async fn the_client_gets_over_protobuf_the_events_it_gets_over_sse() {
    let gw = Gateway::start("{}", true).await;
    let url = gw.agent_url("demo");
    let text = same_events_both_ways(
        &url,
        "pb-text",
        json!([{"message": "echo hello brave world"}]),
    )
    .await;
    assert_eq!(assistant_texts(&text[0]), ["hello brave world"]);
    assert_eq!(last_event(&text[0])["outcome"]["type"], "success");

    let approve = same_events_both_ways(
        &url,
        "pb-approve",
        json!([{"message": "approve"}, {"resume": {"status": "resolved", "payload": "yes"}}]),
    )
    .await;
    assert_eq!(last_event(&approve[0])["outcome"]["type"], "interrupt");
    assert_eq!(
        approve[0]["pendingInterrupts"][0]["message"],
        "Do you approve? Reply yes or no."
    );
    assert_eq!(last_event(&approve[1])["outcome"]["type"], "success");

    let failed = same_events_both_ways(&url, "pb-fail", json!([{"message": "fail"}])).await;
    assert_eq!(last_event(&failed[0])["type"], "RUN_ERROR");
    assert_eq!(failed[0]["runErrors"].as_array().unwrap().len(), 1);

    // CopilotKit's run route shares the writer.
    let ck = format!("{}/copilotkit/agent/demo/run", gw.base);
    same_events_both_ways(&ck, "pb-ck", json!([{"message": "echo via copilotkit"}])).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_call_and_its_result_arrive_alike_over_protobuf() {
    let up = Fake::start_responder(|method, _| {
        (method == "SendStreamingMessage").then(|| {
            Answer::Frames(vec![
                crate::fake::task("TASK_STATE_WORKING", None),
                update_with_data(
                    "TASK_STATE_WORKING",
                    "m-call",
                    json!({"type": "tool-call", "toolCallId": "c1", "name": "lookup",
                           "args": {"city": "Paris", "n": [1, 2.5, null]}}),
                ),
                update_with_data(
                    "TASK_STATE_WORKING",
                    "m-result",
                    json!({"type": "tool-result", "toolCallId": "c1", "content": "sunny"}),
                ),
                update("TASK_STATE_COMPLETED", Some(("m-done", "It is sunny."))),
            ])
        })
    })
    .await;
    let gw = Gateway::with_agents(&[("tools", &up.url)]).await;
    let steps = same_events_both_ways(
        &gw.agent_url("tools"),
        "pb-tool",
        json!([{"message": "weather?"}]),
    )
    .await;
    let types: Vec<&str> = steps[0]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    for kind in [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
        "TOOL_CALL_RESULT",
    ] {
        assert!(types.contains(&kind), "{kind} in {types:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn proto_frames_decode_with_agui_protos_own_decoder() {
    let gw = Gateway::start("{}", true).await;
    let body = |thread: &str, text: &str| {
        json!({"threadId": thread, "runId": "r1", "protocolVersion": "1.0",
               "messages": [{"id": "u1", "role": "user", "content": text}],
               "state": {"k": [1, "two", {"three": null}]}})
    };
    let decoded = decode_protobuf(json!({"url": gw.agent_url("demo"), "accept": PROTO,
        "body": body("pb-raw", "approve")}))
    .await;
    assert_eq!(decoded["status"], 200);
    assert_eq!(decoded["contentType"], PROTO);
    assert!(decoded["error"].is_null(), "{}", decoded["error"]);
    assert_eq!(decoded["trailingBytes"], 0, "the body is whole frames");
    let events = decoded["events"].as_array().unwrap();
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(types.first(), Some(&"RUN_STARTED"));
    assert_eq!(types.last(), Some(&"RUN_FINISHED"));
    assert!(types.contains(&"STATE_SNAPSHOT") && types.contains(&"ACTIVITY_SNAPSHOT"));
    assert_eq!(events[0]["threadId"], "pb-raw");
    assert_eq!(events[0]["runId"], "r1");
    let snapshot = events
        .iter()
        .find(|e| e["type"] == "STATE_SNAPSHOT")
        .unwrap();
    assert_eq!(
        snapshot["snapshot"]["k"],
        json!([1, "two", {"three": null}])
    );
    let finished = events.last().unwrap();
    assert_eq!(finished["outcome"]["type"], "interrupt");
    assert!(finished["outcome"]["interrupts"][0]["id"].is_string());

    // The same request as SSE (on a thread of its own), event for event.
    let sse = reqwest::Client::new()
        .post(gw.agent_url("demo"))
        .json(&body("pb-raw-sse", "echo same"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let proto = decode_protobuf(json!({"url": gw.agent_url("demo"), "accept": PROTO,
        "body": body("pb-raw-proto", "echo same")}))
    .await;
    let sse_types: Vec<String> = sse
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str::<Value>(d).unwrap()["type"].to_string())
        .collect();
    let proto_types: Vec<String> = proto["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].to_string())
        .collect();
    assert_eq!(proto_types, sse_types);
}

#[tokio::test(flavor = "multi_thread")]
async fn wildcards_and_no_accept_get_sse_and_errors_stay_json() {
    let gw = Gateway::start("{}", true).await;
    let body = json!({"threadId": "pb-curl", "runId": "r1", "protocolVersion": "1.0",
        "messages": [{"id": "u1", "role": "user", "content": "echo hi"}]});
    for accept in [
        Some("*/*"),
        None,
        Some(&*format!("{PROTO};q=0, text/event-stream")),
    ] {
        let mut req = reqwest::Client::new()
            .post(gw.agent_url("demo"))
            .json(&body);
        if let Some(accept) = accept {
            req = req.header("accept", accept);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(
            resp.headers()["content-type"],
            "text/event-stream",
            "{accept:?}"
        );
        let text = resp.text().await.unwrap();
        assert!(
            text.starts_with("data: {\"type\":\"RUN_STARTED\""),
            "{accept:?}: {text}"
        );
    }
    // Before the stream, a problem is JSON whatever was asked for.
    let resp = reqwest::Client::new()
        .post(gw.agent_url("nobody"))
        .header("accept", PROTO)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    assert_eq!(resp.headers()["content-type"], "application/json");
    // CopilotKit's connect answers in the encoding asked for, an empty stream too.
    let resp = reqwest::Client::new()
        .post(format!("{}/copilotkit/agent/demo/connect", gw.base))
        .header("accept", PROTO)
        .json(
            &json!({"threadId": "pb-never-seen", "runId": "r1", "protocolVersion": "1.0",
            "messages": []}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], PROTO);
    assert!(resp.bytes().await.unwrap().is_empty());
    // A client before AG-UI 1.0 (no `protocolVersion`) gets SSE: its schema lacks arms.
    let mut old = body.clone();
    old.as_object_mut().unwrap().remove("protocolVersion");
    old["threadId"] = json!("pb-old-client");
    let resp = reqwest::Client::new()
        .post(gw.agent_url("demo"))
        .header("accept", PROTO)
        .json(&old)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
}
