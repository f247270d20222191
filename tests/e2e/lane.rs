//! The forwarding lane (docs/design.md#5-run-options, docs/design.md#8-forwarding-lane;
//! docs/forwarding.md) end to end: what the frontend knows reaches a real a2a-sdk 1.3.0 agent
//! (`ref_agent.py`, whose `inspect` scenario reports the message metadata, extensions,
//! activation header and parts it received), driven by `@ag-ui/client`; and an agent that
//! knows nothing of the lane gets exactly what it got before (the scriptable fake records
//! every request).

use serde_json::{json, Value};

use crate::fake::{task, update, Answer, Fake};
use crate::support::*;

const CONTEXT_EXT: &str = "urn:agui-a2a-gateway:ext:agui-context:v1";
const STATE_EXT: &str = "urn:agui-a2a-gateway:ext:shared-state:v1";

/// What the `inspect` scenario reported: the data part of its `inspect` artifact.
fn inspected(step: &Value) -> Value {
    let artifacts = step["state"]["view"]["artifacts"]
        .as_object()
        .unwrap_or_else(|| panic!("no artifacts: {}", step["state"]));
    let report = artifacts
        .values()
        .find(|a| a["name"] == "inspect")
        .unwrap_or_else(|| panic!("no inspect artifact: {artifacts:?}"));
    report["parts"][0]["data"].clone()
}

/// A gateway serving `url` as agent `lane`, with extra agent settings.
async fn gateway(url: &str, settings: Value) -> Gateway {
    let mut agent = json!({"name": "lane", "url": url});
    agent
        .as_object_mut()
        .unwrap()
        .extend(settings.as_object().cloned().unwrap_or_default());
    Gateway::start(&json!({"agents": [agent]}).to_string(), false).await
}

fn props(cues: Value) -> Value {
    json!({"a2a": cues})
}

const TOOLS: &str = r#"[{"name": "pick_color", "description": "Ask the user for a color",
    "parameters": {"type": "object", "properties": {"palette": {"type": "string"}}}}]"#;

#[tokio::test(flavor = "multi_thread")]
async fn each_cue_alone_and_together_reaches_the_agent_under_its_extension() {
    let tools: Value = serde_json::from_str(TOOLS).unwrap();
    let context = json!([{"description": "page", "value": "checkout"}]);
    for versions in ["both", "0.3"] {
        let gw = gateway(lane_upstream(versions), json!({})).await;
        let cases = [
            (json!({"forwardContext": true}), json!({"context": context})),
            (json!({"forwardTools": true}), json!({"tools": tools})),
            (
                json!({"includeSystemMessages": true}),
                json!({"system": ["You are terse."]}),
            ),
            (
                json!({"forwardContext": true, "forwardTools": true}),
                json!({"context": context, "tools": tools}),
            ),
        ];
        for (i, (cues, expected)) in cases.iter().enumerate() {
            let thread = format!("lane-cue-{versions}-{i}");
            let steps = drive_with(json!({
                "url": gw.agent_url("lane"), "threadId": thread,
                "initialState": {"cart": {"items": "two"}},
                "steps": [{"system": "You are terse.", "message": "inspect",
                    "forwardedProps": props(cues.clone()), "tools": tools, "context": context}]
            }))
            .await;
            assert_accepted(&steps[0]);
            let got = inspected(&steps[0]);
            assert_eq!(
                got["metadata"][CONTEXT_EXT]
                    .as_object()
                    .map(|m| m.keys().cloned().collect::<Vec<_>>()),
                expected
                    .as_object()
                    .map(|m| m.keys().cloned().collect::<Vec<_>>()),
                "{versions} {cues}: {got}"
            );
            for (k, v) in expected.as_object().unwrap() {
                assert_eq!(&got["metadata"][CONTEXT_EXT][k], v, "{versions} {cues}");
            }
            assert!(got["metadata"][STATE_EXT].is_null(), "state not asked for");
            // The card declares the extensions: activated in the message and the header.
            assert_eq!(got["extensions"], json!([CONTEXT_EXT]), "{versions}: {got}");
            assert_eq!(got["header"], CONTEXT_EXT, "{versions}: {got}");
        }
        // State: whole, with everything together.
        let steps = drive_with(json!({
            "url": gw.agent_url("lane"), "threadId": format!("lane-all-{versions}"),
            "initialState": {"cart": {"items": "two"}},
            "steps": [{"message": "inspect", "tools": tools, "context": context,
                "forwardedProps": props(json!({"forwardContext": true, "forwardTools": true,
                    "forwardState": true}))}]
        }))
        .await;
        let got = inspected(&steps[0]);
        assert_eq!(
            got["metadata"][STATE_EXT],
            json!({"state": {"cart": {"items": "two"}}}),
            "{versions}: only the app's own state: {got}"
        );
        let mut activated: Vec<String> = serde_json::from_value(got["extensions"].clone()).unwrap();
        activated.sort();
        assert_eq!(activated, [CONTEXT_EXT, STATE_EXT], "{versions}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_extension_header_needs_a_declaring_card_or_force() {
    for versions in ["both", "0.3"] {
        // The plain upstream's card declares nothing: metadata goes, no activation.
        let plain = gateway(upstream(versions), json!({})).await;
        let forced = gateway(upstream(versions), json!({"force_extensions": true})).await;
        for (gw, activated) in [(&plain, false), (&forced, true)] {
            let steps = drive(
                &gw.agent_url("lane"),
                &format!("lane-gate-{versions}-{activated}"),
                json!([{"message": "inspect", "context": [{"description": "d", "value": "v"}],
                    "forwardedProps": props(json!({"forwardContext": true}))}]),
            )
            .await;
            let got = inspected(&steps[0]);
            assert!(
                got["metadata"][CONTEXT_EXT].is_object(),
                "{versions}: {got}"
            );
            if activated {
                assert_eq!(got["extensions"], json!([CONTEXT_EXT]), "{versions}: {got}");
                assert_eq!(got["header"], CONTEXT_EXT, "{versions}: {got}");
            } else {
                assert_eq!(got["extensions"], json!([]), "{versions}: {got}");
                assert!(got["header"].is_null(), "{versions}: {got}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_frontend_tool_round_trip() {
    let tools: Value = serde_json::from_str(TOOLS).unwrap();
    let gw = gateway(lane_upstream("both"), json!({"forward": ["tools"]})).await;
    let steps = drive(
        &gw.agent_url("lane"),
        "lane-frontend",
        json!([
            {"message": "frontend", "tools": tools},
            {"toolResult": {"content": "red"}, "tools": tools}
        ]),
    )
    .await;
    assert_accepted(&steps[0]);
    let finished = last_event(&steps[0]);
    assert_eq!(
        finished["outcome"],
        json!({"type": "success", "pendingToolCallIds": ["call-pick-1"]}),
        "the run ends for the app to run the tool"
    );
    let call = steps[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["toolCalls"].as_array().cloned().unwrap_or_default())
        .find(|c| c["id"] == "call-pick-1")
        .expect("the tool call reaches the client");
    assert_eq!(call["function"]["name"], "pick_color");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"palette": "warm"}));
    assert_accepted(&steps[1]);
    assert_eq!(
        assistant_texts(&steps[1]).last().map(String::as_str),
        Some("You picked red."),
        "the agent goes on with the tool's result"
    );
    assert_eq!(steps[1]["state"]["a2a"]["task"]["state"], "completed");
}

#[tokio::test(flavor = "multi_thread")]
async fn images_reach_the_agent_as_file_parts_by_bytes_and_by_url() {
    let gw = gateway(upstream("both"), json!({})).await;
    let png = "iVBORw0KGgo=";
    let steps = drive(
        &gw.agent_url("lane"),
        "lane-images",
        json!([{"message": [
            {"type": "text", "text": "inspect these"},
            {"type": "image", "source": {"type": "data", "value": png, "mimeType": "image/png"}},
            {"type": "image", "source": {"type": "url", "value": "https://example.invalid/cat.png",
                "mimeType": "image/png"}}
        ]}]),
    )
    .await;
    assert_accepted(&steps[0]);
    let parts = inspected(&steps[0])["parts"].to_string();
    assert!(parts.contains(png), "bytes as a file part: {parts}");
    assert!(
        parts.contains("https://example.invalid/cat.png"),
        "a URL as a file part, not fetched: {parts}"
    );
    assert!(parts.contains("image/png"), "{parts}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_state_goes_whole_first_then_as_a_patch_of_what_changed() {
    let gw = gateway(lane_upstream("both"), json!({"forward": ["state_patch"]})).await;
    let steps = drive_with(json!({
        "url": gw.agent_url("lane"), "threadId": "lane-patch",
        "initialState": {"a": 1, "b": 2, "c": 3},
        "steps": [
            {"message": "statepatch"},
            {"message": "statepatch again", "state": {"b": 20, "c": null}}
        ]
    }))
    .await;
    assert_accepted(&steps[0]);
    assert_eq!(
        assistant_texts(&steps[0]).last().map(String::as_str),
        Some("state keys: a,b,c")
    );
    assert!(steps[0]["state"]["a2a"]["stateDigests"].is_object());
    assert_eq!(
        assistant_texts(&steps[1]).last().map(String::as_str),
        Some("patch: add /b, add /c"),
        "only what changed since the last projection"
    );
}

/// An agent that knows nothing of the lane: a normal answer to every message.
async fn plain_upstream() -> Fake {
    Fake::start_responder(|method, _| match method {
        "SendStreamingMessage" => Some(Answer::Frames(vec![
            task("TASK_STATE_SUBMITTED", None),
            update("TASK_STATE_COMPLETED", Some(("a1", "ok"))),
        ])),
        _ => None,
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plain_agent_sees_byte_for_byte_the_same_message_without_cues() {
    let up = plain_upstream().await;
    let gw = gateway(&up.url, json!({})).await;
    let body = |thread: &str, extra: Value| {
        let mut b = json!({"threadId": thread, "runId": "r",
            "messages": [{"id": "m1", "role": "user", "content": "hello"}],
            "tools": [{"name": "t", "description": "", "parameters": {}}],
            "context": [{"description": "d", "value": "v"}],
            "state": {"app": 1}});
        b.as_object_mut()
            .unwrap()
            .extend(extra.as_object().cloned().unwrap_or_default());
        b
    };
    let within = std::time::Duration::from_secs(20);
    post_run(&gw.agent_url("lane"), &body("plain-1", json!({})), within).await;
    let off = json!({"forwardedProps": {"a2a": {"forwardContext": false, "forwardTools": false,
        "forwardState": false, "includeSystemMessages": false}}});
    post_run(&gw.agent_url("lane"), &body("plain-2", off), within).await;
    let on = json!({"forwardedProps": {"a2a": {"forwardContext": true}}});
    post_run(&gw.agent_url("lane"), &body("plain-3", on), within).await;
    let sends: Vec<_> = up
        .requests()
        .into_iter()
        .filter(|r| r.method == "SendStreamingMessage")
        .collect();
    assert_eq!(sends.len(), 3);
    let expected = json!({"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hello"}]});
    for r in &sends[..2] {
        let sent: Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(
            sent["params"]["message"], expected,
            "exactly the message the gateway sent before the lane"
        );
        assert_eq!(r.header("a2a-extensions"), None);
    }
    let params = |body: &str| serde_json::from_str::<Value>(body).unwrap()["params"].to_string();
    assert_eq!(
        params(&sends[0].body),
        params(&sends[1].body),
        "byte for byte (the JSON-RPC id aside)"
    );
    // A cue on for an agent whose card declares nothing: metadata, no activation.
    let third: Value = serde_json::from_str(&sends[2].body).unwrap();
    assert!(third["params"]["message"]["metadata"][CONTEXT_EXT].is_object());
    assert!(third["params"]["message"].get("extensions").is_none());
    assert_eq!(sends[2].header("a2a-extensions"), None);
}
