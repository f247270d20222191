//! Delegation to other agents (docs/mapping.md#delegation-to-other-agents), over streams
//! recorded from kagent-adk 0.10.4 (A2A 0.3), kagent `main` (A2A 1.0) and ADK `AgentTool`
//! (`fixtures/a2a/frameworks/kagent/README.md`, `tests/frameworks/adk/README.md`).

use serde_json::{json, Value};

use super::*;
use crate::config::Subagents;

const KAGENT_TOOL: &str = "kagent__NS__k8s_agent";

/// Every recorded delegation stream, each ending its run.
const DELEGATIONS: [&str; 7] = [
    "frameworks/kagent/subagent.sse",
    "frameworks/kagent/subagent-fail.sse",
    "frameworks/kagent/subagent-approve.sse",
    "frameworks/kagent/main/subagent.sse",
    "frameworks/kagent/main/subagent-fail.sse",
    "frameworks/kagent/main/subagent-approve.sse",
    "frameworks/adk/stream-none/agent-tool.sse",
];

fn with(v1_client: bool, subagents: Subagents, tools: &[&str]) -> RunFrame {
    RunFrame {
        subagents,
        subagent_tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        ..frame(v1_client)
    }
}

/// The events of `path` for a 1.0 client of an agent whose `subagent_tools` are `tools`.
fn v1(path: &str, tools: &[&str]) -> Vec<Value> {
    project_with(path, with(true, Subagents::Inline, tools))
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// The one call of `name` in `events`: its id.
fn call_id(events: &[Value], name: &str) -> String {
    let calls: Vec<&Value> = of_type(events, "TOOL_CALL_START")
        .into_iter()
        .filter(|e| e["toolCallName"] == name)
        .collect();
    assert_eq!(calls.len(), 1, "{events:#?}");
    calls[0]["toolCallId"].as_str().unwrap().to_owned()
}

fn position(events: &[Value], kind: &str) -> usize {
    events
        .iter()
        .position(|e| e["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind}: {:?}", types(events)))
}

#[test]
fn a_kagent_delegation_is_a_subagent_inside_its_tool_call() {
    for path in [
        "frameworks/kagent/subagent.sse",
        "frameworks/kagent/main/subagent.sse",
    ] {
        let events = v1(path, &[]);
        let id = call_id(&events, KAGENT_TOOL);
        let started = of_type(&events, "SUBAGENT_STARTED");
        assert_eq!(started.len(), 1, "{path}");
        assert_eq!(started[0]["subagentRunId"], format!("{id}:subagent"));
        assert_eq!(started[0]["name"], KAGENT_TOOL);
        assert_eq!(started[0]["parentToolCallId"], id.as_str());
        let finished = of_type(&events, "SUBAGENT_FINISHED");
        assert_eq!(finished.len(), 1, "{path}");
        assert_eq!(finished[0]["subagentRunId"], format!("{id}:subagent"));
        assert_eq!(finished[0]["outcome"], json!({"type": "success"}));
        assert_eq!(
            finished[0]["result"], "There are 3 pods in default.",
            "{path}"
        );
        let session = &finished[0]["metadata"]["a2a"]["subagentSessionId"];
        assert!(session.is_string(), "{path}: the child's session");
        // The call, then the sub-agent, then its result back to the parent.
        let order = [
            "TOOL_CALL_END",
            "SUBAGENT_STARTED",
            "SUBAGENT_FINISHED",
            "TOOL_CALL_RESULT",
        ]
        .map(|k| position(&events, k));
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{path}: {order:?}");
        // The tool call and its result stay the parent's, as before.
        for e in &events {
            assert!(
                e.get("subagentRunId").is_none()
                    || e["type"].as_str().unwrap().starts_with("SUBAGENT")
            );
        }
        assert_eq!(terminal(&events)["outcome"]["type"], "success");
    }
    // kagent 0.10 stamps the session on the call too: STARTED names it.
    let events = v1("frameworks/kagent/subagent.sse", &[]);
    let started = &of_type(&events, "SUBAGENT_STARTED")[0];
    assert!(started["metadata"]["a2a"]["subagentSessionId"].is_string());
}

#[test]
fn a_failed_child_is_a_subagent_error_and_the_run_goes_on() {
    for path in [
        "frameworks/kagent/subagent-fail.sse",
        "frameworks/kagent/main/subagent-fail.sse",
    ] {
        let events = v1(path, &[]);
        let errors = of_type(&events, "SUBAGENT_ERROR");
        assert_eq!(errors.len(), 1, "{path}: {:?}", types(&events));
        assert_eq!(errors[0]["message"], "scripted child failure");
        assert_eq!(errors[0]["code"], "subagent_failed");
        assert!(of_type(&events, "SUBAGENT_FINISHED").is_empty());
        assert_eq!(terminal(&events)["outcome"]["type"], "success", "{path}");
    }
}

#[test]
fn a_nested_approval_suspends_the_subagent_on_the_runs_interrupt() {
    for path in [
        "frameworks/kagent/subagent-approve.sse",
        "frameworks/kagent/main/subagent-approve.sse",
    ] {
        let events = v1(path, &[]);
        let id = call_id(&events, KAGENT_TOOL);
        let interrupt = &terminal(&events)["outcome"]["interrupts"][0];
        assert!(interrupt["id"].is_string(), "{path}");
        assert!(of_type(&events, "SUBAGENT_STARTED")[0]["parentToolCallId"] == id.as_str());
        let finished = of_type(&events, "SUBAGENT_FINISHED");
        assert_eq!(finished.len(), 1, "{path}: {:?}", types(&events));
        assert_eq!(
            finished[0]["outcome"],
            json!({"type": "suspended", "interruptIds": [interrupt["id"]]}),
            "{path}"
        );
        assert!(
            position(&events, "SUBAGENT_FINISHED") < position(&events, "ACTIVITY_SNAPSHOT"),
            "{path}: suspended before the interrupt is announced"
        );
    }
}

#[test]
fn a_resumed_run_settles_the_suspended_subagent_under_the_same_id() {
    let before = v1("frameworks/kagent/subagent-approve.sse", &[]);
    let id = call_id(&before, KAGENT_TOOL);
    let events = v1("frameworks/kagent/subagent-approve-resume.sse", &[]);
    assert_eq!(
        types(&events)
            .into_iter()
            .filter(|t| t.starts_with("SUBAGENT") || t.starts_with("TOOL_CALL"))
            .collect::<Vec<_>>(),
        ["SUBAGENT_STARTED", "SUBAGENT_FINISHED", "TOOL_CALL_RESULT"],
        "the call is not repeated; the result alone settles it"
    );
    let started = &of_type(&events, "SUBAGENT_STARTED")[0];
    assert_eq!(started["subagentRunId"], format!("{id}:subagent"));
    assert_eq!(started["parentToolCallId"], id.as_str());
    assert_eq!(started["name"], KAGENT_TOOL);
    let finished = &of_type(&events, "SUBAGENT_FINISHED")[0];
    assert_eq!(finished["outcome"]["type"], "success");
}

#[test]
fn adk_agent_tools_are_subagents_only_when_configured() {
    let path = "frameworks/adk/stream-none/agent-tool.sse";
    let plain = v1(path, &[]);
    assert!(
        of_type(&plain, "SUBAGENT_STARTED").is_empty(),
        "no mark on the wire"
    );
    let events = v1(path, &["weather_agent"]);
    let id = call_id(&events, "weather_agent");
    let started = of_type(&events, "SUBAGENT_STARTED");
    assert_eq!(started[0]["parentToolCallId"], id.as_str());
    assert!(started[0].get("metadata").is_none(), "ADK names no session");
    let finished = of_type(&events, "SUBAGENT_FINISHED");
    assert_eq!(finished[0]["result"], "It is sunny in Paris.");
    let without: Vec<&Value> = events
        .iter()
        .filter(|e| !e["type"].as_str().unwrap().starts_with("SUBAGENT"))
        .collect();
    assert_eq!(
        without,
        plain.iter().collect::<Vec<_>>(),
        "nothing else changes"
    );
}

/// `subagents: inline` and a client without `protocolVersion: "1.0"`: today's output, byte
/// for byte — nothing of delegation, the same events whatever the agent's tools are.
/// `attributed`: the same events plus the 1.0 events as `CUSTOM` ones (0.0.48 refuses an
/// unknown type).
#[test]
fn old_clients_get_todays_output_unless_the_agent_is_attributed() {
    for path in DELEGATIONS {
        let tools = ["weather_agent"];
        let inline = project_with(path, with(false, Subagents::Inline, &tools));
        let unconfigured = project_with(path, with(false, Subagents::Inline, &[]));
        let encode =
            |events: &[Value]| -> Vec<String> { events.iter().map(|e| e.to_string()).collect() };
        assert_eq!(encode(&inline), encode(&unconfigured), "{path}");
        for e in &inline {
            let kind = e["type"].as_str().unwrap();
            assert!(
                !kind.starts_with("SUBAGENT") && kind != "CUSTOM",
                "{path}: {kind}"
            );
        }
        let attributed = project_with(path, with(false, Subagents::Attributed, &tools));
        let (custom, rest): (Vec<Value>, Vec<Value>) =
            attributed.into_iter().partition(|e| e["type"] == "CUSTOM");
        assert_eq!(encode(&rest), encode(&inline), "{path}");
        let as_v1: Vec<Value> = v1(path, &tools)
            .into_iter()
            .filter(|e| e["type"].as_str().unwrap().starts_with("SUBAGENT"))
            .collect();
        assert!(!custom.is_empty(), "{path}");
        assert_eq!(custom.len(), as_v1.len(), "{path}");
        for (c, e) in custom.iter().zip(&as_v1) {
            assert_eq!(c["name"], e["type"]);
            let mut fields = e.clone();
            fields.as_object_mut().unwrap().remove("type");
            assert_eq!(c["value"], fields);
        }
    }
}

/// A hostile upstream delegating without end: at most `MAX_TRACKED_SUBAGENTS` are tracked,
/// the rest stay tool calls, and every one started is closed before the run ends.
#[test]
fn delegations_past_the_cap_stay_tool_calls_and_all_close() {
    let mut results = vec![working_task()];
    let n = 300;
    for i in 0..n {
        results.push(agent_update(
            &format!("m{i}"),
            json!([{"data": {"id": format!("c{i}"), "name": KAGENT_TOOL,
                "args": {"request": "x"}}, "metadata": {"adk_type": "function_call"}}]),
        ));
    }
    results.push(json!({"statusUpdate": {"taskId": "T", "contextId": "C",
        "status": {"state": "TASK_STATE_COMPLETED"}}}));
    let events = project_results(&results, with(true, Subagents::Inline, &[]));
    assert_eq!(of_type(&events, "TOOL_CALL_START").len(), n);
    let started = of_type(&events, "SUBAGENT_STARTED").len();
    assert_eq!(
        started,
        crate::bridge::projector::subagents::MAX_TRACKED_SUBAGENTS
    );
    let unanswered = of_type(&events, "SUBAGENT_ERROR");
    assert_eq!(unanswered.len(), started, "closed before RUN_FINISHED");
    assert_eq!(unanswered[0]["code"], "subagent_unanswered");
}
