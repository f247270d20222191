//! Tool calls carried in A2A data parts (docs/design.md#6-projection-a2a-to-ag-ui tool-call
//! row, `docs/mapping.md`): the one place that knows each framework's shape of a call and of
//! its result.
//!
//! - ADK (`google/adk/a2a/converters/part_converter.py`): `{"id", "name", "args"}` with part
//!   metadata `adk_type: function_call`, `{"id", "name", "response"}` with `function_response`
//!   (kagent's ADK runtime writes the same with the `kagent_` prefix);
//! - the gateway's own lane (docs/design.md#8-forwarding-lane): `{"type": "agui-tool-call",
//!   toolCallId, name, args}` and `{"type": "agui-tool-result", toolCallId, content}`;
//! - `@ag-ui/a2a`'s `{"type": "tool-call", ...}` / `{"type": "tool-result", ...}`.
//!
//! Also the one place that knows how a framework marks a call as a **delegation** to another
//! agent and what its result says of that agent (docs/dialects.md#delegation): kagent's
//! agent-as-tool marks ([`delegation`], [`ChildReport`], [`settle`]), and ADK `AgentTool`,
//! which nothing on the wire tells from an ordinary tool, named in the agent's configuration.
//!
//! A call without an id is not a call here (its id is what ties a result and a resume to it):
//! such a part stays a `RAW` event.
//!
//! Where they travel: in agent and status messages (ADK's legacy executor, kagent, the
//! gateway's lane), or in artifacts (ADK's new executor, `converters/from_adk_event.py`: every
//! ADK event with parts becomes an artifact update, its function calls and responses
//! included). Both the live projection and the history rebuild read an artifact's calls with
//! [`in_parts`] *after* the artifact's text — the model writes its text before its calls, and
//! a task's artifacts keep only their final version — so a rebuilt thread holds the calls in
//! the order and under the ids the live run showed. Each call and result is shown once per
//! call id, however often it is re-sent (ADK sends every call twice, and again in the task).

use serde_json::Value;

use crate::a2a::model::{Part, PartContent};
use crate::json::str_at;

/// Part `metadata` key naming the kind of an ADK part (`google/adk/a2a/converters/utils.py`).
pub(crate) const ADK_TYPE: &str = "adk_type";
/// The ADK kind of a function call part.
pub(crate) const ADK_FUNCTION_CALL: &str = "function_call";
/// The ADK kind of a function response part.
pub(crate) const ADK_FUNCTION_RESPONSE: &str = "function_response";
/// Part `metadata` key marking a long-running ADK call (its task waits for the response).
const ADK_LONG_RUNNING: &str = "adk_is_long_running";
/// kagent's Python ADK runtime writes the same keys with its own prefix.
const KAGENT_TYPE: &str = "kagent_type";
const KAGENT_LONG_RUNNING: &str = "kagent_is_long_running";

/// `type` of a data part calling a frontend tool (docs/design.md#8-forwarding-lane).
pub(crate) const FRONTEND_TOOL_CALL: &str = "agui-tool-call";
/// `type` of the data part carrying a frontend tool's result back.
pub(crate) const FRONTEND_TOOL_RESULT: &str = "agui-tool-result";

/// The ADK reading of a part's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AdkPart<'a> {
    pub kind: &'a str,
    pub long_running: bool,
    /// Written with kagent's keys.
    pub kagent: bool,
}

/// The ADK kind of a part, under `adk_` keys or kagent's (`adk_` first, as kagent reads them).
pub(crate) fn adk_part(metadata: Option<&Value>) -> Option<AdkPart<'_>> {
    let m = metadata?;
    let (kind, long_running, kagent) = match str_at(m, ADK_TYPE) {
        Some(kind) => (kind, ADK_LONG_RUNNING, false),
        None => (str_at(m, KAGENT_TYPE)?, KAGENT_LONG_RUNNING, true),
    };
    Some(AdkPart {
        kind,
        long_running: m.get(long_running) == Some(&Value::Bool(true)),
        kagent,
    })
}

/// A tool call or a tool result read from a data part.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ToolItem {
    Call {
        id: String,
        name: String,
        /// The arguments as JSON text (`TOOL_CALL_ARGS.delta`).
        args: String,
        /// kagent ≤ 0.10's mark of a delegation: the child's session, stamped on the call.
        subagent_session: Option<String>,
    },
    Result {
        id: String,
        /// The result as text (`TOOL_CALL_RESULT.content`).
        content: String,
        /// The called tool's name, when the result repeats it (ADK does).
        name: Option<String>,
        /// What the result says of a sub-agent behind the call, if one answered it.
        report: ChildReport,
    },
}

/// kagent ≤ 0.10 stamps the child's session on a delegating call's part metadata
/// (`kagent/adk/converters/event_converter.py` `_process_subagent_session_id`).
const KAGENT_SUBAGENT_SESSION: &str = "kagent_subagent_session_id";
/// kagent names an agent tool `<namespace>__NS__<name>` (its controller's
/// `ConvertToPythonIdentifier(GetObjectRef(agent))`; kagent's UI tests the same,
/// `isAgentToolName`).
const KAGENT_AGENT_TOOL_MARK: &str = "__NS__";
/// Keys of a kagent agent tool's result (`kagent/adk/_remote_a2a_tool.py`; the Go runtime's
/// `remote_a2a_tool.go`).
const SUBAGENT_SESSION: &str = "subagent_session_id";
const PENDING: &str = "pending";
/// ADK `AgentTool`'s answer when its child paused or failed (`google/adk/tools/agent_tool.py`).
const ADK_AGENT_TOOL_ERROR: &str = "Error: agent '";

/// Why a call is taken for a delegation to another agent (docs/dialects.md#delegation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delegation {
    /// kagent ≤ 0.10 stamped the child's session on the call: definitive.
    KagentSession,
    /// The name is a kagent agent tool's (`<ns>__NS__<name>`): kagent's own convention.
    KagentName,
    /// The agent's configuration names the tool (`subagent_tools`).
    Configured,
    /// Only the result says so: it carries the child's session (kagent, any version).
    ResultSession,
}

/// Whether a call of `name` (with kagent's mark `subagent_session`, if any) delegates, given
/// the tools the configuration names as agents.
pub(crate) fn delegation(
    name: &str,
    subagent_session: Option<&str>,
    agent_tools: &[String],
) -> Option<Delegation> {
    if subagent_session.is_some() {
        Some(Delegation::KagentSession)
    } else if name.contains(KAGENT_AGENT_TOOL_MARK) {
        Some(Delegation::KagentName)
    } else if agent_tools.iter().any(|t| t == name) {
        Some(Delegation::Configured)
    } else {
        None
    }
}

/// What a tool result says of the sub-agent behind it, read from kagent's keys (any other
/// result reads as nothing but its `result`).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ChildReport {
    /// `subagent_session_id`: the child's session; its presence marks a delegation's result.
    pub session: Option<String>,
    /// `status: "pending"` (kagent `main`: `waiting_for: "subagent_approval"`): the child
    /// waits for an approval.
    pub waiting: bool,
    /// `error` (kagent's Go runtime, kagent `main`'s HITL failure): the child failed.
    pub error: Option<String>,
    /// `result`: the child's answer (or, from kagent's Python runtime, its failure text).
    pub result: Option<Value>,
}

impl ChildReport {
    fn of(response: Option<&Value>) -> Self {
        let Some(response) = response.filter(|r| r.is_object()) else {
            return Self::default();
        };
        Self {
            session: str_at(response, SUBAGENT_SESSION).map(str::to_owned),
            waiting: str_at(response, "status") == Some(PENDING),
            error: str_at(response, "error").map(str::to_owned),
            result: response.get("result").filter(|r| !r.is_null()).cloned(),
        }
    }
}

/// How a delegation's result settles it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Settled {
    /// The sub-agent answered (its answer, if the result holds one).
    Answered(Option<Value>),
    /// The sub-agent waits for outside input (a nested approval).
    Waiting,
    /// The sub-agent failed.
    Failed(String),
}

/// The outcome a result `report` gives a delegation recognised as `why`. kagent's Python
/// runtime returns a failure as a plain string (no `subagent_session_id`, no `status`), so a
/// kagent delegation's result without the session is a failure, its text the message; ADK
/// `AgentTool` fails only with its own `Error: agent '…` text (a heuristic: the child's last
/// error message reads like any answer). Documented in docs/dialects.md#delegation.
pub(crate) fn settle(report: &ChildReport, why: Delegation) -> Settled {
    let result_text = || match &report.result {
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => Some(other.to_string()),
        None => None,
    };
    if let Some(error) = &report.error {
        return Settled::Failed(error.clone());
    }
    if report.waiting {
        return Settled::Waiting;
    }
    if report.session.is_some() {
        return Settled::Answered(report.result.clone());
    }
    match why {
        Delegation::KagentSession | Delegation::KagentName | Delegation::ResultSession => {
            Settled::Failed(
                result_text().unwrap_or_else(|| "The sub-agent returned no result.".into()),
            )
        }
        Delegation::Configured => match result_text() {
            Some(text) if text.starts_with(ADK_AGENT_TOOL_ERROR) => Settled::Failed(text),
            _ => Settled::Answered(report.result.clone()),
        },
    }
}

fn first_str<'a>(data: &'a Value, keys: &[&str]) -> Option<&'a str> {
    keys.iter()
        .find_map(|k| data.get(*k).and_then(Value::as_str))
        .filter(|s| !s.is_empty())
}

/// JSON text of arguments or results; a string stays as it is.
fn as_text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "{}".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The framework's kind of a data part (ADK metadata, or the data's `type`).
fn kind<'a>(data: &'a Value, metadata: Option<&'a Value>) -> Option<&'a str> {
    adk_part(metadata)
        .map(|p| p.kind)
        .or_else(|| str_at(data, "type"))
}

/// Reads a tool call or result out of a data part, if it is one.
pub(crate) fn read(data: &Value, metadata: Option<&Value>) -> Option<ToolItem> {
    match kind(data, metadata)? {
        ADK_FUNCTION_CALL | FRONTEND_TOOL_CALL | "tool-call" => Some(ToolItem::Call {
            id: first_str(data, &["id", "toolCallId"])?.to_owned(),
            name: first_str(data, &["name", "toolCallName", "toolName"])?.to_owned(),
            args: as_text(
                ["args", "arguments", "input"]
                    .iter()
                    .find_map(|k| data.get(*k)),
            ),
            subagent_session: metadata
                .and_then(|m| str_at(m, KAGENT_SUBAGENT_SESSION))
                .map(str::to_owned),
        }),
        ADK_FUNCTION_RESPONSE | FRONTEND_TOOL_RESULT | "tool-result" => {
            let response = ["response", "content", "result", "output"]
                .iter()
                .find_map(|k| data.get(*k));
            Some(ToolItem::Result {
                id: first_str(data, &["id", "toolCallId"])?.to_owned(),
                content: as_text(response),
                name: first_str(data, &["name", "toolName"]).map(str::to_owned),
                report: ChildReport::of(response),
            })
        }
        _ => None,
    }
}

/// The tool calls and results among `parts`, in order.
pub(crate) fn in_parts(parts: &[Part]) -> impl Iterator<Item = ToolItem> + '_ {
    parts.iter().filter_map(|part| match &part.content {
        PartContent::Data(data) => read(data, part.metadata.as_ref()),
        _ => None,
    })
}

/// The AG-UI id of the `tool` message carrying a call's result.
pub(crate) fn result_message_id(call_id: &str) -> String {
    format!("{call_id}:result")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn adk_calls_and_results_are_read_from_their_metadata() {
        let meta = json!({"adk_type": "function_call"});
        let call = json!({"id": "adk-1", "name": "get_weather", "args": {"city": "Paris"}});
        assert_eq!(
            read(&call, Some(&meta)),
            Some(ToolItem::Call {
                id: "adk-1".into(),
                name: "get_weather".into(),
                args: r#"{"city":"Paris"}"#.into(),
                subagent_session: None,
            })
        );
        let meta = json!({"adk_type": "function_response"});
        let result =
            json!({"id": "adk-1", "name": "get_weather", "response": {"forecast": "sunny"}});
        assert_eq!(
            read(&result, Some(&meta)),
            Some(ToolItem::Result {
                id: "adk-1".into(),
                content: r#"{"forecast":"sunny"}"#.into(),
                name: Some("get_weather".into()),
                report: ChildReport::default(),
            })
        );
        assert_eq!(read(&call, None), None, "no metadata, no type: not a call");
    }

    #[test]
    fn parts_yield_their_calls_and_results_in_order() {
        let parts = [
            Part::text("Let me check."),
            Part {
                metadata: Some(json!({"adk_type": "function_call"})),
                ..Part::data(json!({"id": "adk-1", "name": "get_weather", "args": {}}))
            },
            Part::data(json!({"type": "agui-tool-result", "toolCallId": "adk-1", "content": "ok"})),
            Part::data(json!({"forecast": "sunny"})),
        ];
        let ids: Vec<(bool, String)> = in_parts(&parts)
            .map(|item| match item {
                ToolItem::Call { id, .. } => (true, id),
                ToolItem::Result { id, .. } => (false, id),
            })
            .collect();
        assert_eq!(ids, [(true, "adk-1".into()), (false, "adk-1".into())]);
    }

    #[test]
    fn kagent_marks_delegations_and_their_results() {
        let tools = ["weather_agent".to_owned()];
        let meta = json!({"kagent_type": "function_call", "kagent_subagent_session_id": "s1"});
        let call = json!({"id": "c1", "name": "kagent__NS__k8s_agent", "args": {"request": "x"}});
        let Some(ToolItem::Call {
            subagent_session, ..
        }) = read(&call, Some(&meta))
        else {
            panic!("a call")
        };
        assert_eq!(subagent_session.as_deref(), Some("s1"));
        assert_eq!(
            delegation("kagent__NS__k8s_agent", Some("s1"), &[]),
            Some(Delegation::KagentSession)
        );
        assert_eq!(
            delegation("kagent__NS__k8s_agent", None, &[]),
            Some(Delegation::KagentName)
        );
        assert_eq!(
            delegation("weather_agent", None, &tools),
            Some(Delegation::Configured)
        );
        assert_eq!(delegation("get_weather", None, &tools), None);
        // `args == {request}` alone is any tool's schema: not a mark.

        let answered = ChildReport::of(Some(
            &json!({"result": "3 pods", "subagent_session_id": "s1", "kagent_usage_metadata": {}}),
        ));
        assert_eq!(
            settle(&answered, Delegation::KagentName),
            Settled::Answered(Some(json!("3 pods")))
        );
        let pending = ChildReport::of(Some(&json!({"status": "pending",
            "waiting_for": "subagent_approval", "subagent_session_id": "s1"})));
        assert_eq!(
            settle(&pending, Delegation::ResultSession),
            Settled::Waiting
        );
        let go = ChildReport::of(Some(&json!({"error": "boom", "subagent_session_id": "s1"})));
        assert_eq!(
            settle(&go, Delegation::ResultSession),
            Settled::Failed("boom".into())
        );
        let python = ChildReport::of(Some(&json!({"result": "scripted child failure"})));
        assert_eq!(
            settle(&python, Delegation::KagentSession),
            Settled::Failed("scripted child failure".into())
        );
        assert_eq!(
            settle(&python, Delegation::Configured),
            Settled::Answered(Some(json!("scripted child failure"))),
            "ADK AgentTool: an answer unless ADK's own error text"
        );
        let adk = ChildReport::of(Some(&json!({"result": "Error: agent 'w' stopped waiting"})));
        assert!(matches!(
            settle(&adk, Delegation::Configured),
            Settled::Failed(_)
        ));
        assert_eq!(
            ChildReport::of(Some(&json!("text"))),
            ChildReport::default()
        );
    }

    #[test]
    fn gateway_calls_need_an_id() {
        let call =
            json!({"type": "agui-tool-call", "toolCallId": "c1", "name": "pick", "args": "{}"});
        assert!(matches!(read(&call, None), Some(ToolItem::Call { .. })));
        let anonymous = json!({"type": "agui-tool-call", "name": "pick"});
        assert_eq!(read(&anonymous, None), None);
    }
}
