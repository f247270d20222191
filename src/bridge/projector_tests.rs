//! Projection tests over recorded A2A streams (`fixtures/a2a`), one or more per row of
//! `docs/mapping.md`, each checked against the run invariants of the module header.

use std::collections::HashSet;

use serde_json::{json, Value};

use super::*;
use crate::a2a::client::ClientError;
use crate::a2a::jsonrpc::frame as decode_frame;
use crate::a2a::model::PartContent;
use crate::a2a::model::ProtocolVersion;
use crate::a2a::sse::Parser;

fn fixture(path: &str) -> String {
    let full = format!("{}/fixtures/a2a/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

fn version_of(path: &str) -> ProtocolVersion {
    let v1_framework = [
        "frameworks/adk/",
        "frameworks/kagent/main/",
        "frameworks/pydantic_ai/",
        "frameworks/a2a_js/",
    ]
    .iter()
    .any(|p| path.starts_with(p));
    if path.starts_with("v1/") || (v1_framework && !path.contains("/v0_3/")) {
        ProtocolVersion::V1
    } else {
        ProtocolVersion::V0_3
    }
}

/// The fixture's upstream items, read as the client reads them: the crate's SSE parser and
/// frame decoder (a `.json` fixture is one plain JSON answer to a streaming call).
fn items(path: &str) -> Vec<Result<StreamEvent, ClientError>> {
    let version = version_of(path);
    let body = fixture(path);
    if !path.ends_with(".sse") {
        return vec![decode_frame(version, &body)];
    }
    let mut parser = Parser::new(1 << 24);
    parser.push(body.as_bytes());
    parser.push(b"\n\n");
    std::iter::from_fn(|| parser.next_frame().expect("a well-formed fixture"))
        .map(|frame| decode_frame(version, &frame.data))
        .collect()
}

fn frame(v1_client: bool) -> RunFrame {
    RunFrame {
        thread_id: "thread-1".into(),
        run_id: "run-1".into(),
        v1_client,
        client_state: Some(json!({"app": {"keep": true}})),
        context_id: None,
        task_id: None,
        max_artifact_bytes: 1 << 20,
        max_text_bytes: 1 << 20,
        state_limits: crate::bridge::state::StateLimits::default(),
        resolves: Vec::new(),
        state_digests: false,
        subagents: crate::config::Subagents::Inline,
        subagent_tools: Vec::new(),
    }
}

/// Feeds a fixture through a projector as `run.rs` does: events until the run finishes; an
/// upstream error ends it through the same conversion ([`RunError`] from [`ClientError`]).
fn feed(path: &str, frame: RunFrame) -> (Projector, Vec<Event>) {
    let mut p = Projector::new(frame);
    let mut out = p.start();
    for item in items(path) {
        match item {
            Ok(event) => out.extend(p.apply(&event)),
            Err(e) => out.extend(p.fail(&RunError::from(&e))),
        }
        if p.is_finished() {
            break;
        }
    }
    (p, out)
}

/// The events of a fixture whose stream completes the run, checked against the invariants.
fn project_with(path: &str, frame: RunFrame) -> Vec<Value> {
    let (mut p, mut out) = feed(path, frame);
    let closing = p
        .end_of_stream()
        .unwrap_or_else(|| panic!("{path}: the stream ended with the task open"));
    out.extend(closing);
    checked(&out)
}

fn project(path: &str) -> Vec<Value> {
    project_with(path, frame(true))
}

fn no_nulls(v: &Value, at: &str) {
    if let Value::Object(m) = v {
        for (k, x) in m {
            assert!(!x.is_null(), "null field {at}/{k}");
        }
    }
}

/// The events as JSON, after checking the run invariants on them.
fn checked(out: &[Event]) -> Vec<Value> {
    let events: Vec<Value> = out
        .iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    check_invariants(&events);
    events
}

/// The invariants of every run (module header).
fn check_invariants(events: &[Value]) {
    assert_eq!(events[0]["type"], "RUN_STARTED", "{events:#?}");
    assert_eq!(events[1]["type"], "STATE_SNAPSHOT");
    let terminal: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "RUN_FINISHED" || e["type"] == "RUN_ERROR")
        .collect();
    assert_eq!(terminal.len(), 1, "exactly one terminal event");
    let last = events.last().unwrap();
    assert!(last["type"] == "RUN_FINISHED" || last["type"] == "RUN_ERROR");
    let mut state = Value::Null;
    let mut open = HashSet::new();
    let mut seen = HashSet::new();
    // Reasoning spans and messages (`@ag-ui/client` 1.0.0's verifier refuses a terminal
    // event while one is open).
    let mut spans = HashSet::new();
    let mut thinking = HashSet::new();
    // Sub-agents: open ones, and every one started (an id is never reused in a run).
    let mut subagents = HashSet::new();
    let mut started = HashSet::new();
    for e in events {
        no_nulls(e, e["type"].as_str().unwrap());
        match e["type"].as_str().unwrap() {
            "STATE_SNAPSHOT" => state = e["snapshot"].clone(),
            "STATE_DELTA" => {
                let patch: json_patch::Patch = serde_json::from_value(e["delta"].clone()).unwrap();
                json_patch::patch(&mut state, &patch)
                    .unwrap_or_else(|err| panic!("delta {e} does not apply: {err}"));
            }
            "TEXT_MESSAGE_START" => {
                let id = e["messageId"].as_str().unwrap().to_owned();
                assert!(seen.insert(id.clone()), "message {id} started twice");
                assert!(open.insert(id));
            }
            "TEXT_MESSAGE_CONTENT" => {
                assert!(open.contains(e["messageId"].as_str().unwrap()));
                assert_ne!(e["delta"], "", "empty delta");
            }
            "TEXT_MESSAGE_END" => assert!(open.remove(e["messageId"].as_str().unwrap())),
            "REASONING_START" => {
                let id = e["messageId"].as_str().unwrap().to_owned();
                assert!(seen.insert(id.clone()), "reasoning {id} started twice");
                assert!(spans.insert(id));
            }
            "REASONING_MESSAGE_START" => {
                assert_eq!(e["role"], "reasoning");
                let id = e["messageId"].as_str().unwrap();
                assert!(spans.contains(id), "a reasoning message inside its span");
                assert!(thinking.insert(id.to_owned()));
            }
            "REASONING_MESSAGE_CONTENT" => {
                assert!(thinking.contains(e["messageId"].as_str().unwrap()));
                assert_ne!(e["delta"], "", "empty delta");
            }
            "REASONING_MESSAGE_END" => assert!(thinking.remove(e["messageId"].as_str().unwrap())),
            "REASONING_END" => {
                let id = e["messageId"].as_str().unwrap();
                assert!(
                    !thinking.contains(id),
                    "span {id} closed before its message"
                );
                assert!(spans.remove(id));
            }
            "SUBAGENT_STARTED" => {
                let id = e["subagentRunId"].as_str().unwrap().to_owned();
                assert!(started.insert(id.clone()), "subagent {id} started twice");
                subagents.insert(id);
            }
            "SUBAGENT_FINISHED" | "SUBAGENT_ERROR" => {
                let id = e["subagentRunId"].as_str().unwrap();
                assert!(subagents.remove(id), "subagent {id} closed but not open");
            }
            "RUN_FINISHED" | "RUN_ERROR" => {
                assert!(
                    subagents.is_empty(),
                    "open subagents at the end: {subagents:?}"
                );
                assert!(open.is_empty(), "open messages at the end: {open:?}");
                assert!(
                    spans.is_empty() && thinking.is_empty(),
                    "open reasoning at the end: {spans:?}"
                );
            }
            _ => {}
        }
    }
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// The final state after applying every snapshot and delta.
fn final_state(events: &[Value]) -> Value {
    let mut state = Value::Null;
    for e in events {
        match e["type"].as_str().unwrap() {
            "STATE_SNAPSHOT" => state = e["snapshot"].clone(),
            "STATE_DELTA" => {
                let patch: json_patch::Patch = serde_json::from_value(e["delta"].clone()).unwrap();
                json_patch::patch(&mut state, &patch).unwrap();
            }
            _ => {}
        }
    }
    state
}

/// Text per message id, in order of first appearance.
fn texts(events: &[Value]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for e in events {
        let id = e["messageId"].as_str().unwrap_or_default().to_owned();
        match e["type"].as_str().unwrap() {
            "TEXT_MESSAGE_START" => out.push((id, String::new())),
            "TEXT_MESSAGE_CONTENT" => {
                let slot = out.iter_mut().find(|(i, _)| *i == id).unwrap();
                slot.1.push_str(e["delta"].as_str().unwrap());
            }
            _ => {}
        }
    }
    out
}

fn terminal(events: &[Value]) -> &Value {
    events.last().unwrap()
}

#[test]
fn streamed_text_keeps_a2a_message_ids_in_both_versions() {
    for path in ["v1/stream-echo.sse", "v0_3/stream-echo.sse"] {
        let events = project(path);
        let t: Vec<String> = texts(&events).into_iter().map(|(_, t)| t).collect();
        // One reply, one message: the chunks join, the final whole text is an echo.
        assert_eq!(t, ["hello brave world "], "{path}");
        let ids: Vec<String> = texts(&events).into_iter().map(|(i, _)| i).collect();
        let body = fixture(path);
        assert!(
            ids.iter().all(|id| body.contains(id.as_str())),
            "ids are A2A messageIds"
        );
        assert_eq!(
            terminal(&events)["outcome"],
            json!({"type": "success"}),
            "{path}"
        );
        let start = &events[0];
        assert_eq!(start["threadId"], "thread-1");
        assert!(start["metadata"]["a2a"]["contextId"].is_string());
        assert!(start["metadata"]["a2a"]["taskId"].is_string());
        let state = final_state(&events);
        assert_eq!(state["a2a"]["task"]["state"], "completed");
        assert_eq!(
            state["a2a"]["contextId"],
            start["metadata"]["a2a"]["contextId"]
        );
        assert_eq!(state["app"], json!({"keep": true}), "foreign keys survive");
    }
}

#[test]
fn js_sdk_streams_project_the_same_way() {
    let events = project("js_0_2/stream-echo.sse");
    let t: Vec<String> = texts(&events).into_iter().map(|(_, t)| t).collect();
    assert_eq!(t, ["hello brave world"]);
    assert_eq!(terminal(&events)["type"], "RUN_FINISHED");
    let events = project("js_0_2/stream-chunks.sse");
    assert_eq!(
        texts(&events).len(),
        1,
        "cumulative text under fresh messageIds is one reply"
    );
}

#[test]
fn message_re_sent_with_more_text_yields_only_the_delta() {
    let events = project("synthetic/a2ui-and-unknown.sse");
    let m1: Vec<&Value> = events
        .iter()
        .filter(|e| e["messageId"] == "m1" && e["type"] == "TEXT_MESSAGE_CONTENT")
        .collect();
    assert_eq!(m1.len(), 2);
    assert_eq!(m1[0]["delta"], "Hel");
    assert_eq!(m1[1]["delta"], "lo");
}

#[test]
fn message_only_reply_is_a_success() {
    for path in [
        "v1/stream-msg.sse",
        "v0_3/stream-msg.sse",
        "v1/send-msg.json",
        "v0_3/send-msg.json",
    ] {
        let events = project(path);
        assert_eq!(
            types(&events),
            [
                "RUN_STARTED",
                "STATE_SNAPSHOT",
                "TEXT_MESSAGE_START",
                "TEXT_MESSAGE_CONTENT",
                "TEXT_MESSAGE_END",
                "RUN_FINISHED"
            ],
            "{path}"
        );
        assert!(
            events[0]["metadata"]["a2a"].get("taskId").is_none(),
            "no task for a message reply"
        );
    }
}

#[test]
fn artifacts_project_to_state_with_appends_and_stream_as_text() {
    for path in ["v1/stream-artifact.sse", "v0_3/stream-artifact.sse"] {
        let events = project(path);
        let state = final_state(&events);
        let art = &state["view"]["artifacts"]["artifact-1"];
        assert_eq!(art["text"], "Hello from artifact.", "{path}");
        assert_eq!(art["complete"], true);
        assert_eq!(art["name"], "result.txt");
        assert_eq!(art["parts"].as_array().unwrap().len(), 3);
        let deltas: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "STATE_DELTA")
            .collect();
        // The append chunks add one part each, never the whole artifact again.
        let appends = deltas
            .iter()
            .filter(|d| {
                d["delta"][0]["path"]
                    .as_str()
                    .unwrap()
                    .ends_with("/parts/-")
            })
            .count();
        assert_eq!(appends, 2);
        let t = texts(&events);
        assert!(t.iter().any(|(_, text)| text == "Hello from artifact."));
    }
    let events = project("js_0_2/stream-artifact.sse");
    let state = final_state(&events);
    let arts = state["view"]["artifacts"].as_object().unwrap();
    assert_eq!(arts.len(), 1);
    let art = arts.values().next().unwrap();
    assert_eq!(
        art["text"],
        "Lorem ipsum dolor sit amet, consectetur adipiscing."
    );
}

#[test]
fn blocking_send_result_projects_aggregated_artifacts() {
    for path in ["v1/send-artifact.json", "v0_3/send-artifact.json"] {
        let events = project(path);
        let state = final_state(&events);
        assert_eq!(
            state["view"]["artifacts"]["artifact-1"]["text"], "Hello from artifact.",
            "{path}"
        );
        assert_eq!(terminal(&events)["type"], "RUN_FINISHED");
    }
}

#[test]
fn artifact_paths_from_metadata_are_honoured_but_never_over_a2a() {
    let events = project("synthetic/a2ui-and-unknown.sse");
    let state = final_state(&events);
    assert_eq!(state["docs"]["report"]["text"], "A");
    assert_eq!(
        state["view"]["artifacts"]["evil"]["parts"][0]["data"],
        json!({"x": 1})
    );
    assert_eq!(state["a2a"]["task"]["state"], "completed");
}

#[test]
fn a2ui_operations_become_activity_events_and_unknown_items_raw() {
    let events = project("synthetic/a2ui-and-unknown.sse");
    let snap = events
        .iter()
        .find(|e| e["type"] == "ACTIVITY_SNAPSHOT")
        .unwrap();
    assert_eq!(snap["messageId"], "s1");
    assert_eq!(snap["activityType"], "a2ui-surface");
    let delta = events
        .iter()
        .find(|e| e["type"] == "ACTIVITY_DELTA")
        .unwrap();
    assert_eq!(delta["patch"][0]["path"], "/operations/-");
    let raw = events.iter().find(|e| e["type"] == "RAW").unwrap();
    assert_eq!(raw["source"], "a2a");
    assert_eq!(raw["event"]["kind"], "push-notification-thing");
    assert_eq!(terminal(&events)["type"], "RUN_FINISHED");
}

#[test]
fn failed_and_rejected_tasks_are_run_errors() {
    for (path, code, message) in [
        (
            "v1/stream-fail.sse",
            "a2a_task_failed",
            "Simulated failure.",
        ),
        (
            "v0_3/stream-fail.sse",
            "a2a_task_failed",
            "Simulated failure.",
        ),
        (
            "v1/stream-reject.sse",
            "a2a_task_rejected",
            "I will not do that.",
        ),
        (
            "v0_3/stream-reject.sse",
            "a2a_task_rejected",
            "I will not do that.",
        ),
        ("v1/send-fail.json", "a2a_task_failed", "Simulated failure."),
    ] {
        let events = project(path);
        let last = terminal(&events);
        assert_eq!(last["type"], "RUN_ERROR", "{path}");
        assert_eq!(last["code"], code);
        assert_eq!(last["message"], message);
        assert!(
            texts(&events).is_empty(),
            "failure text is not chat: {path}"
        );
    }
    let events = project("js_0_2/stream-fail.sse");
    assert_eq!(terminal(&events)["code"], "a2a_task_failed");
}

#[test]
fn json_rpc_errors_in_a_stream_are_run_errors() {
    for path in [
        "v1/stream-crash.sse",
        "v0_3/stream-crash.sse",
        "v1/stream-unknown-task.json",
        "v0_3/stream-unknown-task.sse",
        "v1/send-crash.json",
    ] {
        let events = project(path);
        let last = terminal(&events);
        assert_eq!(last["type"], "RUN_ERROR", "{path}");
        let code = last["code"].as_str().unwrap();
        assert!(code.starts_with("a2a_error_-32"), "{path}: {code}");
        assert!(
            last["message"]
                .as_str()
                .unwrap()
                .contains(&code["a2a_error_".len()..]),
            "{path}: the message names the JSON-RPC code"
        );
    }
}

#[test]
fn a_cut_stream_without_terminal_state_needs_recovery() {
    let (mut p, out) = feed("v1/subscribe-running-cut.sse", frame(true));
    assert!(!p.is_finished());
    assert!(
        p.end_of_stream().is_none(),
        "an open task at EOF is recovered, not finished"
    );
    assert!(p.task_id().is_some(), "recovery knows which task to follow");
    assert!(!out.iter().any(Event::is_terminal));
}

#[test]
fn canceled_is_cancelled_for_v1_clients_and_plain_for_old_ones() {
    for path in [
        "v1/cancel-running-origin.sse",
        "v0_3/cancel-running-origin.sse",
    ] {
        let events = project(path);
        assert_eq!(
            terminal(&events)["outcome"],
            json!({"type": "cancelled"}),
            "{path}"
        );
        let events = project_with(path, frame(false));
        assert!(terminal(&events).get("outcome").is_none(), "{path}");
        assert_eq!(terminal(&events)["type"], "RUN_FINISHED");
    }
}

#[test]
fn old_clients_get_no_success_outcome() {
    let events = project_with("v1/stream-echo.sse", frame(false));
    assert!(terminal(&events).get("outcome").is_none());
}

#[test]
fn input_required_finishes_with_an_interrupt() {
    for path in [
        "v1/stream-approve.sse",
        "v0_3/stream-approve.sse",
        "js_0_2/stream-approve.sse",
        "v1/send-approve.json",
    ] {
        let events = project(path);
        let last = terminal(&events);
        let interrupts = last["outcome"]["interrupts"].as_array().unwrap();
        assert_eq!(last["outcome"]["type"], "interrupt", "{path}");
        assert_eq!(interrupts.len(), 1);
        let i = &interrupts[0];
        assert_eq!(i["reason"], "input_required");
        let task_id = events[0]["metadata"]["a2a"]["taskId"].as_str().unwrap();
        assert_eq!(i["metadata"]["a2a"]["taskId"], task_id);
        assert!(i["id"]
            .as_str()
            .unwrap()
            .starts_with(&format!("a2a:{task_id}:")));
        let state = final_state(&events);
        assert_eq!(
            state["a2a"]["pendingInterrupts"][i["id"].as_str().unwrap()]["taskId"],
            task_id
        );
        let activity = &events[events.len() - 2];
        assert_eq!(activity["type"], "ACTIVITY_SNAPSHOT");
        assert_eq!(activity["content"]["stage"], "awaiting_input");
        assert_eq!(activity["content"]["taskId"], task_id);
    }
}

#[test]
fn auth_required_uses_the_namespaced_reason() {
    for path in ["v1/stream-auth.sse", "v0_3/stream-auth.sse"] {
        let events = project(path);
        assert_eq!(
            terminal(&events)["outcome"]["interrupts"][0]["reason"],
            "a2a:auth_required",
            "{path}"
        );
    }
}

#[test]
fn a_structured_request_becomes_the_response_schema() {
    for path in ["v1/stream-form.sse", "v0_3/stream-form.sse"] {
        let events = project(path);
        let i = &terminal(&events)["outcome"]["interrupts"][0];
        assert_eq!(
            i["responseSchema"]["required"],
            json!(["approved"]),
            "{path}"
        );
        assert_eq!(i["message"], "Please fill in the approval form.");
    }
}

#[test]
fn follow_up_streams_finish_the_resumed_task() {
    for path in [
        "v1/stream-approve-followup.sse",
        "v0_3/stream-approve-followup.sse",
        "v1/stream-auth-followup.sse",
    ] {
        let mut f = frame(true);
        f.context_id = Some("known-context".into());
        let events = project_with(path, f);
        assert_eq!(terminal(&events)["outcome"]["type"], "success", "{path}");
        assert!(texts(&events)
            .iter()
            .any(|(_, t)| t.starts_with("Approved") || t.starts_with("Authenticated")));
    }
}

#[test]
fn agent_state_deltas_update_the_app_state() {
    for path in ["v1/stream-state.sse", "v0_3/stream-state.sse"] {
        let events = project(path);
        assert_eq!(final_state(&events)["progress"], json!(50.0), "{path}");
    }
}

#[test]
fn run_started_waits_for_the_context_unless_known() {
    let mut p = Projector::new(frame(true));
    assert!(
        p.start().is_empty(),
        "held back until the contextId is known"
    );
    let mut f = frame(true);
    f.context_id = Some("c".into());
    let mut p = Projector::new(f);
    assert_eq!(p.start().len(), 2);
}

#[test]
fn failing_before_any_event_still_starts_the_run() {
    let mut p = Projector::new(frame(true));
    let refused = RunError::UpstreamUnavailable("connection refused".into());
    let events = checked(&p.fail(&refused));
    assert_eq!(events[2]["code"], "upstream_unavailable");
    assert!(
        p.fail(&RunError::Internal).is_empty(),
        "only one terminal event"
    );
}

#[test]
fn artifact_byte_limit_ends_the_run() {
    let mut f = frame(true);
    f.max_artifact_bytes = 8;
    let events = project_with("v1/stream-artifact.sse", f);
    assert_eq!(terminal(&events)["code"], "limit_exceeded");
}

#[test]
fn resubscribe_snapshot_does_not_repeat_text() {
    // The original stream, then the subscribe stream of the same task: the snapshot's
    // status message was already streamed and must not be sent twice.
    let mut f = frame(true);
    f.context_id = None;
    let mut p = Projector::new(f);
    let mut out = Vec::new();
    let origin = items("v1/subscribe-running-origin.sse");
    let sub = items("v1/subscribe-running.sse");
    let Ok(StreamEvent::Task(snapshot)) = &sub[0] else {
        panic!("snapshot first")
    };
    let status_id = snapshot.status.message.as_ref().unwrap().message_id.clone();
    for item in origin {
        let Ok(e) = item else { continue };
        let seen = matches!(&e, StreamEvent::StatusUpdate(s) if s.status.message.as_ref().is_some_and(|m| m.message_id == status_id));
        out.extend(p.apply(&e));
        if seen {
            break;
        }
    }
    for item in sub {
        let Ok(e) = item else { continue };
        out.extend(p.apply(&e));
    }
    let events = checked(&out);
    let starts = events
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_START" && e["messageId"] == status_id.as_str())
        .count();
    assert_eq!(starts, 1);
}

#[test]
fn a_resume_run_moves_the_answered_activity_on() {
    let mut f = frame(true);
    f.context_id = Some("c".into());
    f.resolves = vec![InterruptId::parse("a2a:T:q").unwrap()];
    let events = project_with("v1/stream-approve-followup.sse", f);
    // Resolved only once the upstream accepted the answer (its first event).
    assert_eq!(events[2]["type"], "STATE_DELTA");
    assert_eq!(events[2]["delta"][0]["path"], "/a2a/pendingInterrupts");
    let delta = &events[3];
    assert_eq!(delta["type"], "ACTIVITY_DELTA");
    assert_eq!(delta["messageId"], "a2a:T:q");
    assert_eq!(delta["patch"][0]["value"], "resolved");
}

#[test]
fn recovery_replays_missed_history_once_then_follows_the_subscription() {
    let mut p = Projector::new(frame(true));
    let mut out = Vec::new();
    // The original stream is cut after the task and its first WORKING status.
    for item in items("v1/subscribe-running-origin.sse").into_iter().take(2) {
        let Ok(e) = item else { panic!() };
        out.extend(p.apply(&e));
    }
    assert!(
        p.end_of_stream().is_none(),
        "an unfinished task needs recovery"
    );
    let mut sub = items("v1/subscribe-running.sse").into_iter();
    let Some(Ok(StreamEvent::Task(snapshot))) = sub.next() else {
        panic!("snapshot first")
    };
    out.extend(p.apply_recovered(&snapshot, Some("msg-subscribe-running-origin")));
    for item in sub {
        let Ok(e) = item else { continue };
        out.extend(p.apply(&e));
    }
    let events = checked(&out);
    let t: Vec<String> = texts(&events).into_iter().map(|(_, t)| t).collect();
    let expected: Vec<String> = (1..=10)
        .map(|i| format!("tick {i}/10"))
        .chain(["slow 10 done".to_owned()])
        .collect();
    assert_eq!(
        t, expected,
        "the user's own message is not replayed, no tick twice"
    );
    assert_eq!(terminal(&events)["outcome"]["type"], "success");
}

/// Projects 1.0 stream results built in the test (hostile shapes too large to record).
fn project_results(results: &[Value], frame: RunFrame) -> Vec<Value> {
    let mut p = Projector::new(frame);
    let mut out = p.start();
    for r in results {
        out.extend(p.apply(&ProtocolVersion::V1.decode_event(&r.to_string())));
        if p.is_finished() {
            break;
        }
    }
    if let Some(events) = p.end_of_stream() {
        out.extend(events);
    }
    checked(&out)
}

fn working_task() -> Value {
    json!({"task": {"id": "T", "contextId": "C", "status": {"state": "TASK_STATE_WORKING"}}})
}

fn agent_update(message_id: &str, parts: Value) -> Value {
    json!({"statusUpdate": {"taskId": "T", "contextId": "C", "status": {"state": "TASK_STATE_WORKING",
        "message": {"messageId": message_id, "role": "ROLE_AGENT", "parts": parts}}}})
}

#[test]
fn a_deep_artifact_path_ends_the_run_instead_of_building_it() {
    for segments in [33, 20_000] {
        let path = "/a".repeat(segments);
        let artifact = json!({"artifactUpdate": {"taskId": "T", "contextId": "C",
            "artifact": {"artifactId": "x", "parts": [{"text": "hi"}], "metadata": {"path": path}}}});
        let events = project_results(&[working_task(), artifact], frame(true));
        assert_eq!(terminal(&events)["code"], "limit_exceeded", "{segments}");
        assert!(
            !types(&events).contains(&"STATE_DELTA") || events.len() < 10,
            "no parents were made"
        );
    }
}

#[test]
fn a_copy_bomb_from_the_agent_ends_the_run() {
    let bomb: Vec<Value> = (0..22)
        .map(|i| json!({"op": "copy", "from": "", "path": format!("/k{i}")}))
        .collect();
    let part = json!([{"data": {"type": "agui-state-delta", "patch": bomb}}]);
    let events = project_results(&[working_task(), agent_update("m", part)], frame(true));
    assert_eq!(terminal(&events)["code"], "limit_exceeded");
    assert!(
        final_state(&events).get("k0").is_none(),
        "nothing was copied"
    );
}

#[test]
fn endless_text_under_one_message_id_ends_the_run() {
    let mut results = vec![working_task()];
    for i in 0..64u8 {
        let chunk = char::from(b'a' + i % 26).to_string().repeat(64 * 1024);
        results.push(agent_update("same", json!([{ "text": chunk }])));
    }
    let events = project_results(&results, frame(true));
    assert_eq!(terminal(&events)["code"], "limit_exceeded");
    let streamed: usize = texts(&events).iter().map(|(_, t)| t.len()).sum();
    assert!(
        streamed <= 1 << 20,
        "at most max_text_bytes reached the client"
    );
}

#[test]
fn cumulative_re_sends_count_only_their_new_text() {
    // a2a-js re-sends one messageId with the whole text so far: 200 sends of a growing
    // 10 KiB reply are 2 MB on the wire but 10 KiB of text.
    let mut results = vec![working_task()];
    let mut text = String::new();
    for _ in 0..200 {
        text.push_str(&"x".repeat(50));
        results.push(agent_update("m", json!([{ "text": text }])));
    }
    results.push(json!({"statusUpdate": {"taskId": "T", "contextId": "C",
        "status": {"state": "TASK_STATE_COMPLETED"}}}));
    let mut f = frame(true);
    f.max_text_bytes = 20_000;
    let events = project_results(&results, f);
    assert!(types(&events).contains(&"TEXT_MESSAGE_CONTENT"));
    assert_eq!(terminal(&events)["type"], "RUN_FINISHED");
}

#[test]
fn history_rebuilds_the_messages_the_live_projection_gave() {
    // docs/design.md#4-threads-and-contexts: every message the client got live is in the
    // rebuilt history with the same id and text (a blocking send's result streams only its
    // last status message live).
    for path in [
        "v1/send-artifact.json",
        "v1/send-echo.json",
        "v0_3/send-artifact.json",
    ] {
        let Some(Ok(StreamEvent::Task(task))) = items(path).into_iter().next() else {
            panic!("{path}: a task result")
        };
        let sent = task.history.first().map(|m| m.message_id.clone());
        let mut p = Projector::new(frame(true));
        let mut live = p.apply_recovered(&task, sent.as_deref());
        live.extend(p.end_of_stream().unwrap_or_default());
        let live: Vec<(String, String)> = texts(&checked(&live));
        let rebuilt: Vec<(String, String)> = rebuilt_json(&[&task])
            .iter()
            .filter(|m| m["role"] == "assistant")
            .map(|m| {
                let id = m["id"].as_str().unwrap().to_owned();
                (id, m["content"].as_str().unwrap().to_owned())
            })
            .collect();
        assert!(!live.is_empty(), "{path}");
        for message in &live {
            assert!(
                rebuilt.contains(message),
                "{path}: {message:?} not in {rebuilt:?}"
            );
        }
    }
}

// One reply, one message (docs/design.md#6-projection-a2a-to-ag-ui), over streams recorded
// from the real frameworks (`fixtures/a2a/frameworks/*`, recorded by
// `tests/frameworks/*/record.*`).

#[test]
fn every_framework_shows_its_reply_once_in_one_message() {
    for path in [
        "frameworks/strands/default/hello.sse",
        "frameworks/strands/compliant/hello.sse",
        "frameworks/adk/hello.sse",
        "frameworks/adk/v0_3/hello.sse",
        "frameworks/adk/stream-none/hello.sse",
        "frameworks/adk/executor-v2/hello.sse",
        "frameworks/pydantic_ai/hello.sse",
        "frameworks/a2a_js/hello.sse",
        "frameworks/a2a_js/chunks.sse",
    ] {
        let events = project(path);
        let replies: Vec<String> = texts(&events).into_iter().map(|(_, t)| t).collect();
        assert_eq!(replies.len(), 1, "{path}: {replies:?}");
        assert_eq!(
            replies[0].matches("This reply arrives in chunks.").count(),
            1,
            "{path}: {replies:?}"
        );
        assert_eq!(terminal(&events)["outcome"]["type"], "success", "{path}");
    }
}

/// A recorded run projected as `run.rs` projects it: a stream event by event; a blocking
/// send's task result as a recovered snapshot after the sent message.
fn project_run(path: &str) -> Vec<Value> {
    if path.ends_with(".sse") {
        return project(path);
    }
    let task = task_of(path);
    let sent = task.history.first().map(|m| m.message_id.clone());
    let mut p = Projector::new(frame(true));
    let mut out = p.apply_recovered(&task, sent.as_deref());
    out.extend(p.end_of_stream().unwrap_or_default());
    checked(&out)
}

/// The task of a recorded blocking send or `GetTask` answer.
fn task_of(path: &str) -> Task {
    if let Some(Ok(StreamEvent::Task(task))) = items(path).into_iter().next() {
        return task;
    }
    let envelope: Value = serde_json::from_str(&fixture(path)).unwrap();
    version_of(path)
        .decode_task(&envelope["result"].to_string())
        .unwrap_or_else(|| panic!("{path}: a task"))
}

#[test]
fn adk_tool_calls_are_tool_calls_shown_once() {
    // The legacy executor sends calls and results in status messages (and its history); the
    // new one (`executor-v2/`) in artifacts: the partial call, the same call again as the
    // final replace of that artifact, the response as another artifact.
    for path in [
        "frameworks/adk/tool.sse",
        "frameworks/adk/v0_3/tool.sse",
        "frameworks/adk/stream-none/tool.sse",
        "frameworks/adk/tool-send.json",
        "frameworks/adk/v0_3/tool-send.json",
        "frameworks/adk/executor-v2/tool.sse",
        "frameworks/adk/executor-v2/tool-send.json",
    ] {
        let events = project_run(path);
        let starts: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "TOOL_CALL_START")
            .collect();
        assert_eq!(starts.len(), 1, "{path}: ADK sends each call twice");
        assert_eq!(starts[0]["toolCallName"], "get_weather");
        let id = starts[0]["toolCallId"].as_str().unwrap();
        let args: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "TOOL_CALL_ARGS")
            .collect();
        assert_eq!(args.len(), 1, "{path}");
        assert_eq!(args[0]["toolCallId"], id);
        let args: Value = serde_json::from_str(args[0]["delta"].as_str().unwrap()).unwrap();
        assert_eq!(args, json!({"city": "Paris"}), "{path}");
        assert_eq!(
            types(&events)
                .iter()
                .filter(|t| **t == "TOOL_CALL_END")
                .count(),
            1,
            "{path}"
        );
        let results: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "TOOL_CALL_RESULT")
            .collect();
        assert_eq!(results.len(), 1, "{path}");
        assert_eq!(results[0]["toolCallId"], id);
        assert_eq!(results[0]["messageId"], format!("{id}:result"));
        let content: Value = serde_json::from_str(results[0]["content"].as_str().unwrap()).unwrap();
        assert_eq!(content, json!({"forecast": "sunny"}), "{path}");
        let replies: Vec<String> = texts(&events).into_iter().map(|(_, t)| t).collect();
        assert_eq!(replies, ["It is sunny in Paris."], "{path}");
        assert!(
            !types(&events).contains(&"RAW"),
            "{path}: nothing left as RAW"
        );
    }
}

/// What a run showed, in order, as the client's messages hold it: `["text", id, text]`,
/// `["call", id, name, args]`, `["result", messageId, toolCallId, content]`.
fn shown(events: &[Value]) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for e in events {
        match e["type"].as_str().unwrap() {
            "TEXT_MESSAGE_START" => out.push(json!(["text", e["messageId"], ""])),
            "TEXT_MESSAGE_CONTENT" => {
                let m = out
                    .iter_mut()
                    .find(|m| m[0] == "text" && m[1] == e["messageId"])
                    .unwrap();
                m[2] = json!(format!(
                    "{}{}",
                    m[2].as_str().unwrap(),
                    e["delta"].as_str().unwrap()
                ));
            }
            "TOOL_CALL_START" => out.push(json!(["call", e["toolCallId"], e["toolCallName"], ""])),
            "TOOL_CALL_ARGS" => {
                let m = out
                    .iter_mut()
                    .find(|m| m[0] == "call" && m[1] == e["toolCallId"])
                    .unwrap();
                m[3] = json!(format!(
                    "{}{}",
                    m[3].as_str().unwrap(),
                    e["delta"].as_str().unwrap()
                ));
            }
            "TOOL_CALL_RESULT" => out.push(json!([
                "result",
                e["messageId"],
                e["toolCallId"],
                e["content"]
            ])),
            _ => {}
        }
    }
    out
}

/// `history::messages` as JSON, the shape a `MESSAGES_SNAPSHOT` carries.
fn rebuilt_json(tasks: &[&crate::a2a::model::Task]) -> Vec<Value> {
    history::messages(tasks)
        .iter()
        .map(|m| serde_json::to_value(m).unwrap())
        .collect()
}

/// The same view of rebuilt messages (`history::messages`), user turns left out.
fn rebuilt(messages: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for m in messages.iter().filter(|m| m["role"] != "user") {
        if m["role"] == "tool" {
            out.push(json!(["result", m["id"], m["toolCallId"], m["content"]]));
            continue;
        }
        for call in m["toolCalls"].as_array().into_iter().flatten() {
            let f = &call["function"];
            out.push(json!(["call", call["id"], f["name"], f["arguments"]]));
        }
        if let Some(text) = m["content"].as_str() {
            out.push(json!(["text", m["id"], text]));
        }
    }
    out
}

#[test]
fn a_rebuilt_thread_shows_the_tool_calls_of_the_live_run() {
    // docs/design.md#4-threads-and-contexts: a thread read back shows the tool calls, results
    // and text the live run showed, under the same ids and in the same order, wherever ADK
    // carried them.
    for (live, read_back) in [
        (
            "frameworks/adk/executor-v2/tool.sse",
            "frameworks/adk/executor-v2/tool-get.json",
        ),
        (
            "frameworks/adk/executor-v2/tool-send.json",
            "frameworks/adk/executor-v2/tool-send.json",
        ),
        (
            "frameworks/adk/tool-send.json",
            "frameworks/adk/tool-send.json",
        ),
        (
            "frameworks/adk/v0_3/tool-send.json",
            "frameworks/adk/v0_3/tool-send.json",
        ),
    ] {
        let live_view = shown(&project_run(live));
        assert_eq!(
            live_view
                .iter()
                .map(|m| m[0].as_str().unwrap())
                .collect::<Vec<_>>(),
            ["call", "result", "text"],
            "{live}: {live_view:#?}"
        );
        let task = task_of(read_back);
        assert_eq!(
            rebuilt(&rebuilt_json(&[&task])),
            live_view,
            "{read_back} rebuilds what {live} showed"
        );
    }
}

#[test]
fn tool_calls_in_artifacts_are_shown_once_however_often_re_sent() {
    // ADK's new executor when the model says something before calling: the text chunk, the
    // call appended to the same artifact, then the final replace holding both; the response;
    // the reply. Then the task again (a resubscribe snapshot), its history holding the call
    // as a message too.
    let call = json!({"data": {"id": "c1", "name": "get_weather", "args": {"city": "Paris"}},
        "metadata": {"adk_type": "function_call"}});
    let response = json!({"data": {"id": "c1", "name": "get_weather", "response": {"forecast": "sunny"}},
        "metadata": {"adk_type": "function_response"}});
    let check = json!({"text": "Let me check."});
    let artifact = |id: &str, parts: Value, append: bool, last: bool| {
        json!({"artifactUpdate": {"taskId": "T", "contextId": "C", "append": append, "lastChunk": last,
            "artifact": {"artifactId": id, "parts": parts}}})
    };
    let mut results = vec![
        working_task(),
        artifact("A", json!([check]), false, false),
        artifact("A", json!([call]), true, false),
        artifact("A", json!([check, call]), false, true),
        artifact("B", json!([response]), false, true),
        artifact("B", json!([response]), false, true),
        artifact("C", json!([{"text": "It is sunny."}]), false, true),
    ];
    let task = json!({"id": "T", "contextId": "C", "status": {"state": "TASK_STATE_COMPLETED"},
        "history": [
            {"messageId": "u", "role": "ROLE_USER", "parts": [{"text": "weather?"}]},
            {"messageId": "m", "role": "ROLE_AGENT", "parts": [call]}],
        "artifacts": [
            {"artifactId": "A", "parts": [check, call]},
            {"artifactId": "B", "parts": [response]},
            {"artifactId": "C", "parts": [{"text": "It is sunny."}]}]});
    let expected = json!([
        ["text", "T:A", "Let me check."],
        ["call", "c1", "get_weather", r#"{"city":"Paris"}"#],
        ["result", "c1:result", "c1", r#"{"forecast":"sunny"}"#],
        ["text", "T:C", "It is sunny."]
    ]);
    // Live, with the task re-sent whole at the end of the stream.
    results.push(json!({"task": task}));
    let events = project_results(&results, frame(true));
    assert_eq!(json!(shown(&events)), expected, "{events:#?}");
    assert_eq!(terminal(&events)["outcome"]["type"], "success");
    // Recovered: the stream cut after the call, the rest from the snapshot, history included.
    let mut p = Projector::new(frame(true));
    let mut out = Vec::new();
    for r in &results[..4] {
        out.extend(p.apply(&ProtocolVersion::V1.decode_event(&r.to_string())));
    }
    let snapshot = ProtocolVersion::V1.decode_task(&task.to_string()).unwrap();
    out.extend(p.apply_recovered(&snapshot, Some("u")));
    assert_eq!(json!(shown(&checked(&out))), expected);
    // Read back: ADK's task keeps the calls of its artifacts only there; a call also in the
    // history is still shown once.
    let mut read_back = task.clone();
    read_back["history"].as_array_mut().unwrap().truncate(1);
    let read_back = ProtocolVersion::V1
        .decode_task(&read_back.to_string())
        .unwrap();
    assert_eq!(json!(rebuilt(&rebuilt_json(&[&read_back]))), expected);
    let calls = rebuilt(&rebuilt_json(&[&snapshot]))
        .into_iter()
        .filter(|m| m[0] == "call")
        .count();
    assert_eq!(calls, 1);
    // Reattached to the finished task: shown in the snapshot, not streamed again.
    let mut p = Projector::new(frame(true));
    let events = checked(&p.reattach(&snapshot, &[]));
    assert!(shown(&events).is_empty(), "{events:#?}");
    assert_eq!(terminal(&events)["outcome"]["type"], "success");
}

/// The interrupt a recorded stream ends with.
fn interrupt_of(events: &[Value]) -> &Value {
    let last = terminal(events);
    assert_eq!(last["outcome"]["type"], "interrupt", "{last}");
    &last["outcome"]["interrupts"][0]
}

#[test]
fn each_framework_question_is_an_interrupt_with_a_question() {
    for (path, tool_call) in [
        ("frameworks/strands/default/approve.sse", false),
        ("frameworks/strands/compliant/approve.sse", false),
        ("frameworks/adk/approve.sse", true),
        ("frameworks/adk/v0_3/approve.sse", true),
        // ADK's new executor too keeps the call a question waits on in the status message.
        ("frameworks/adk/executor-v2/approve.sse", true),
        ("frameworks/a2a_js/approve.sse", false),
    ] {
        let mut f = frame(true);
        f.max_text_bytes = 1 << 20;
        let (mut p, mut out) = feed(path, f);
        out.extend(p.end_of_stream().unwrap_or_default());
        let events = checked(&out);
        let interrupt = interrupt_of(&events);
        assert_eq!(
            interrupt["message"], "Approve sending the report?",
            "{path}: {interrupt}"
        );
        assert_eq!(interrupt["toolCallId"].is_string(), tool_call, "{path}");
        assert!(
            interrupt["responseSchema"].is_object() || !tool_call,
            "{path}"
        );
        assert!(
            !types(&events).contains(&"RAW"),
            "{path}: the request is not RAW"
        );
    }
}

/// The A2A message of the interrupted status a recorded stream ends with.
fn question_of(path: &str) -> crate::a2a::model::Message {
    items(path)
        .into_iter()
        .rev()
        .filter_map(Result::ok)
        .find_map(|e| match e {
            StreamEvent::StatusUpdate(u) if u.status.state.is_interrupted() => u.status.message,
            _ => None,
        })
        .expect("an interrupted status")
}

#[test]
fn answers_are_written_in_the_shape_each_framework_accepts() {
    use super::super::dialect::{answer, read, Reply};
    let payload = Reply::Payload(json!("yes, send it"));
    // strands: only interruptResponse data parts (the recorded accepted resume).
    let asked = read(Some(&question_of("frameworks/strands/default/approve.sse")));
    let written = answer(&asked, &payload, "i");
    let accepted: Value = serde_json::from_str(&fixture(
        "frameworks/strands/default/approve-resume.request.json",
    ))
    .unwrap();
    let sent = &accepted["params"]["message"]["parts"][0]["data"];
    assert_eq!(written.parts, vec![Part::data(sent.clone())]);
    // ADK: a function_response with the call's id and name.
    let asked = read(Some(&question_of("frameworks/adk/approve.sse")));
    let written = answer(&asked, &payload, "i");
    let accepted: Value =
        serde_json::from_str(&fixture("frameworks/adk/approve-resume.request.json")).unwrap();
    let sent = &accepted["params"]["message"]["parts"][0];
    let PartContent::Data(data) = &written.parts[0].content else {
        panic!("a data part")
    };
    assert_eq!(data["id"], sent["data"]["id"]);
    assert_eq!(data["name"], sent["data"]["name"]);
    assert_eq!(written.parts[0].metadata, Some(sent["metadata"].clone()));
    // kagent ≤ 0.10: a decision data part plus text (its UI's own answer).
    let asked = read(Some(&question_of("frameworks/kagent/approval.sse")));
    let written = answer(&asked, &Reply::Payload(json!({"approved": true})), "i");
    let accepted: Value =
        serde_json::from_str(&fixture("frameworks/kagent/approval-resume.request.json")).unwrap();
    let sent = &accepted["params"]["message"]["parts"][0]["data"];
    assert_eq!(written.parts[0], Part::data(sent.clone()));
    assert_eq!(
        asked.tool_call_id.as_deref(),
        Some("call_Qm3x8RkT2vYp9LwN4aHc7DfE")
    );
    // a2a-js: plain text.
    let asked = read(Some(&question_of("frameworks/a2a_js/approve.sse")));
    assert_eq!(
        answer(&asked, &payload, "i").parts,
        vec![Part::text("yes, send it")]
    );
}

#[test]
fn a_resume_stream_opening_with_the_old_question_follows_the_task() {
    // @a2a-js/sdk re-publishes the task, still input-required, before the answer's outcome.
    let question = items("frameworks/a2a_js/approve.sse")
        .into_iter()
        .filter_map(Result::ok)
        .find_map(|e| match e {
            StreamEvent::StatusUpdate(u) if u.status.state.is_interrupted() => {
                Some(InterruptId::of_status(&u.task_id, &u.status))
            }
            _ => None,
        })
        .unwrap();
    let mut f = frame(true);
    f.context_id = Some("c".into());
    f.resolves = vec![question];
    let events = project_with("frameworks/a2a_js/approve-resume.sse", f);
    assert_eq!(terminal(&events)["outcome"]["type"], "success");
    let replies: Vec<String> = texts(&events).into_iter().map(|(_, t)| t).collect();
    assert_eq!(
        replies,
        ["Done: yes, send it."],
        "the old question is not streamed again"
    );
}

#[test]
fn a_refused_answer_leaves_the_interrupt_pending() {
    let mut f = frame(true);
    f.context_id = Some("c".into());
    f.resolves = vec![InterruptId::parse("a2a:T:q").unwrap()];
    f.client_state = Some(json!({"a2a": {"pendingInterrupts": {"a2a:T:q": {"id": "a2a:T:q"}}}}));
    let events = project_with("frameworks/strands/default/approve-wrong-resume.sse", f);
    assert_eq!(terminal(&events)["code"], "a2a_error_-32602");
    assert!(!types(&events).contains(&"ACTIVITY_DELTA"), "not resolved");
    assert!(final_state(&events)["a2a"]["pendingInterrupts"]["a2a:T:q"].is_object());
}

#[test]
fn a_rebuilt_history_shows_what_the_live_runs_showed() {
    // docs/design.md#4-threads-and-contexts: the ask and the answer's run, live, against the
    // task read back afterwards.
    for dir in [
        "frameworks/adk",
        "frameworks/adk/v0_3",
        "frameworks/strands/default",
        "frameworks/strands/compliant",
    ] {
        let mut live = Vec::new();
        for run in ["approve.sse", "approve-resume.sse"] {
            let mut f = frame(true);
            f.context_id = Some("c".into());
            let (mut p, mut out) = feed(&format!("{dir}/{run}"), f);
            out.extend(p.end_of_stream().unwrap_or_default());
            live.extend(texts(&checked(&out)));
        }
        let path = format!("{dir}/approve-get.json");
        let envelope: Value = serde_json::from_str(&fixture(&path)).unwrap();
        let task = version_of(&path)
            .decode_task(&envelope["result"].to_string())
            .unwrap_or_else(|| panic!("{path}: a task"));
        let rebuilt: Vec<(String, String)> = rebuilt_json(&[&task])
            .iter()
            .filter(|m| m["role"] == "assistant" && m["content"].is_string())
            .map(|m| {
                let id = m["id"].as_str().unwrap().to_owned();
                (id, m["content"].as_str().unwrap().trim().to_owned())
            })
            .collect();
        assert!(!live.is_empty(), "{dir}");
        for (id, text) in &live {
            let text = text.trim().to_owned();
            assert!(
                rebuilt.contains(&(id.clone(), text.clone())),
                "{dir}: {id} {text:?} not in {rebuilt:?}"
            );
        }
    }
}

#[test]
fn a_frontend_tool_call_ends_the_run_for_the_app_to_run_it() {
    // docs/design.md#8-forwarding-lane: the agent waits (input-required) on an
    // `agui-tool-call`.
    let results = [
        working_task(),
        json!({"statusUpdate": {"taskId": "T", "contextId": "C", "status": {
            "state": "TASK_STATE_INPUT_REQUIRED", "message": {"messageId": "q", "role": "ROLE_AGENT",
            "parts": [{"data": {"type": "agui-tool-call", "toolCallId": "call-1",
                "name": "pick_color", "args": {"palette": "warm"}}}]}}}}),
    ];
    let events = project_results(&results, frame(true));
    let start = events
        .iter()
        .find(|e| e["type"] == "TOOL_CALL_START")
        .expect("the call is shown");
    assert_eq!(start["toolCallName"], "pick_color");
    let last = terminal(&events);
    assert_eq!(
        last["outcome"],
        json!({"type": "success", "pendingToolCallIds": ["call-1"]})
    );
    assert_eq!(
        final_state(&events)["a2a"]["task"]["state"],
        "input-required"
    );
    assert!(
        !types(&events).contains(&"ACTIVITY_SNAPSHOT"),
        "no interrupt"
    );
}

#[test]
fn a_completed_tasks_artifacts_are_complete_without_a_last_chunk() {
    let results = [
        working_task(),
        json!({"artifactUpdate": {"taskId": "T", "contextId": "C",
            "artifact": {"artifactId": "a1", "parts": [{"text": "half"}]}}}),
        json!({"artifactUpdate": {"taskId": "T", "contextId": "C", "append": true,
            "artifact": {"artifactId": "a1", "parts": [{"text": " and half"}]}}}),
        json!({"statusUpdate": {"taskId": "T", "contextId": "C",
            "status": {"state": "TASK_STATE_COMPLETED"}}}),
    ];
    let events = project_results(&results, frame(true));
    let artifact = &final_state(&events)["view"]["artifacts"]["a1"];
    assert_eq!(artifact["complete"], true);
    assert_eq!(artifact["text"], "half and half");
}

#[test]
fn state_updates_in_a_question_still_apply() {
    let results = [
        working_task(),
        json!({"statusUpdate": {"taskId": "T", "contextId": "C", "status": {
            "state": "TASK_STATE_INPUT_REQUIRED", "message": {"messageId": "q", "role": "ROLE_AGENT",
            "parts": [{"text": "Confirm?"},
                {"data": {"type": "agui-state-delta", "patch": [{"op": "add", "path": "/plan", "value": "p"}]}},
                {"data": {"type": "a2a.input.request", "schema": {"type": "object"}}}]}}}}),
    ];
    let events = project_results(&results, frame(true));
    assert_eq!(final_state(&events)["plan"], "p");
    assert!(
        !types(&events).contains(&"RAW"),
        "the request is no RAW event"
    );
    assert_eq!(terminal(&events)["outcome"]["type"], "interrupt");
}

// Reasoning and token usage (docs/mapping.md, the reasoning and usage rows, "Token usage"),
// over the think script recorded from ADK 2.13 (`tests/frameworks/adk/record.py`, both
// executors) and kagent-adk 0.10.4 (`tests/frameworks/kagent/record.py`).

/// Reasoning text per reasoning message id, in order of first appearance.
fn reasoning(events: &[Value]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for e in events {
        let id = e["messageId"].as_str().unwrap_or_default().to_owned();
        match e["type"].as_str().unwrap() {
            "REASONING_MESSAGE_START" => out.push((id, String::new())),
            "REASONING_MESSAGE_CONTENT" => {
                let slot = out.iter_mut().find(|(i, _)| *i == id).unwrap();
                slot.1.push_str(e["delta"].as_str().unwrap());
            }
            _ => {}
        }
    }
    out
}

const THINK_RUNS: [(&str, [&str; 2], &str); 3] = [
    (
        "frameworks/adk/think.sse",
        [
            "The user wants the weather. I should call get_weather.",
            "The tool says sunny.",
        ],
        "It is sunny in Paris.",
    ),
    (
        "frameworks/adk/executor-v2/think.sse",
        [
            "The user wants the weather. I should call get_weather.",
            "The tool says sunny.",
        ],
        "It is sunny in Paris.",
    ),
    (
        "frameworks/kagent/think.sse",
        [
            "The user wants the weather. I should call get_weather.",
            "The tool says sunny.",
        ],
        "It is sunny in Paris.",
    ),
];

#[test]
fn thought_parts_are_reasoning_and_never_answer_text() {
    for v1_client in [true, false] {
        for (path, thoughts, answer) in THINK_RUNS {
            let events = project_with(path, frame(v1_client));
            let said: Vec<String> = reasoning(&events).into_iter().map(|(_, t)| t).collect();
            assert_eq!(said, thoughts, "{path}: one reasoning message per stretch");
            let replies: Vec<String> = texts(&events).into_iter().map(|(_, t)| t).collect();
            assert_eq!(
                replies,
                [answer],
                "{path}: the thoughts stay out of the answer"
            );
            // Thinking, then the call, then thinking again, then the answer.
            let order: Vec<&str> = types(&events)
                .into_iter()
                .filter(|t| {
                    ["REASONING_START", "TOOL_CALL_START", "TEXT_MESSAGE_START"].contains(t)
                })
                .collect();
            assert_eq!(
                order,
                [
                    "REASONING_START",
                    "TOOL_CALL_START",
                    "REASONING_START",
                    "TEXT_MESSAGE_START"
                ],
                "{path}"
            );
            for (id, _) in reasoning(&events) {
                assert!(id.ends_with(":reasoning"), "{path}: {id}");
            }
        }
    }
}

#[test]
fn usage_is_summed_per_model_call_for_v1_clients_only() {
    // The same two model calls: ADK reports each on every chunk (its running total) and again
    // on its final event; kagent once per call, then the last call's once more on the final
    // status.
    let usage = &json!([{"inputTokens": 270, "outputTokens": 34, "totalTokens": 304,
        "reasoningTokens": 20, "cachedInputTokens": 200}]);
    for path in [
        "frameworks/adk/think.sse",
        "frameworks/adk/executor-v2/think.sse",
        "frameworks/kagent/think.sse",
    ] {
        let events = project(path);
        assert_eq!(terminal(&events)["usage"], *usage, "{path}");
        let (mut p, mut out) = feed(path, frame(false));
        out.extend(p.end_of_stream().unwrap_or_default());
        let old = checked(&out);
        assert!(old.iter().all(|e| e.get("usage").is_none()), "{path}");
        let counted = p
            .usage()
            .map(|t| serde_json::to_value(t.to_wire()).unwrap());
        assert_eq!(
            counted.as_ref(),
            usage.get(0),
            "{path}: counted all the same"
        );
    }
    let plain = project("frameworks/adk/tool.sse");
    assert!(
        terminal(&plain).get("usage").is_none(),
        "no report, no usage"
    );
}

#[test]
fn a_failed_run_carries_the_usage_accrued_before() {
    let mut p = Projector::new(frame(true));
    let mut out = Vec::new();
    for item in items("frameworks/adk/think.sse").into_iter().take(4) {
        out.extend(p.apply(&item.unwrap()));
    }
    out.extend(p.fail(&RunError::UpstreamStreamEnded("cut".into())));
    let events = checked(&out);
    assert_eq!(terminal(&events)["type"], "RUN_ERROR");
    assert_eq!(
        terminal(&events)["usage"],
        json!([{"inputTokens": 120, "outputTokens": 0, "totalTokens": 120,
            "reasoningTokens": 0, "cachedInputTokens": 100}])
    );
}

#[test]
fn hostile_usage_neither_crashes_nor_overflows() {
    let status = |usage: Value| {
        json!({"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_WORKING"},
            "metadata": {"adk_usage_metadata": usage}}})
    };
    let results = [
        status(json!({"promptTokenCount": 1e308, "candidatesTokenCount": 1e308})),
        status(json!({"promptTokenCount": 9_007_199_254_740_991u64, "thoughtsTokenCount": "lots"})),
        status(json!({"promptTokenCount": -3, "candidatesTokenCount": [1]})),
        status(json!("not an object")),
        json!({"statusUpdate": {"taskId": "t", "contextId": "c",
            "status": {"state": "TASK_STATE_COMPLETED"}}}),
    ];
    let events = project_results(&results, frame(true));
    let max = crate::bridge::usage::Tokens::MAX;
    assert_eq!(
        terminal(&events)["usage"],
        json!([{"inputTokens": max, "outputTokens": max, "totalTokens": max}])
    );
}

#[test]
fn a_rebuilt_thread_shows_the_reasoning_of_the_live_run() {
    for (live, get) in [
        ("frameworks/adk/think.sse", "frameworks/adk/think-get.json"),
        (
            "frameworks/adk/executor-v2/think.sse",
            "frameworks/adk/executor-v2/think-get.json",
        ),
        (
            "frameworks/kagent/think.sse",
            "frameworks/kagent/think-get.json",
        ),
    ] {
        let events = project(live);
        let task = task_of(get);
        let messages = rebuilt_json(&[&task]);
        let thoughts: Vec<(String, String)> = messages
            .iter()
            .filter(|m| m["role"] == "reasoning")
            .map(|m| {
                (
                    m["id"].as_str().unwrap().into(),
                    m["content"].as_str().unwrap().into(),
                )
            })
            .collect();
        assert_eq!(
            thoughts,
            reasoning(&events),
            "{get}: the live run's ids and text"
        );
        let answers: Vec<(String, String)> = messages
            .iter()
            .filter(|m| m["role"] == "assistant" && m["content"].is_string())
            .map(|m| {
                (
                    m["id"].as_str().unwrap().into(),
                    m["content"].as_str().unwrap().into(),
                )
            })
            .collect();
        assert_eq!(answers, texts(&events), "{get}");
        let roles: Vec<&str> = messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(
            roles,
            [
                "user",
                "reasoning",
                "assistant",
                "tool",
                "reasoning",
                "assistant"
            ],
            "{get}: in the live order"
        );
    }
}

#[path = "projector_subagent_tests.rs"]
mod delegation;
