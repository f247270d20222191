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
    },
    Result {
        id: String,
        /// The result as text (`TOOL_CALL_RESULT.content`).
        content: String,
    },
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
        }),
        ADK_FUNCTION_RESPONSE | FRONTEND_TOOL_RESULT | "tool-result" => Some(ToolItem::Result {
            id: first_str(data, &["id", "toolCallId"])?.to_owned(),
            content: as_text(
                ["response", "content", "result", "output"]
                    .iter()
                    .find_map(|k| data.get(*k)),
            ),
        }),
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
                args: r#"{"city":"Paris"}"#.into()
            })
        );
        let meta = json!({"adk_type": "function_response"});
        let result =
            json!({"id": "adk-1", "name": "get_weather", "response": {"forecast": "sunny"}});
        assert_eq!(
            read(&result, Some(&meta)),
            Some(ToolItem::Result {
                id: "adk-1".into(),
                content: r#"{"forecast":"sunny"}"#.into()
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
    fn gateway_calls_need_an_id() {
        let call =
            json!({"type": "agui-tool-call", "toolCallId": "c1", "name": "pick", "args": "{}"});
        assert!(matches!(read(&call, None), Some(ToolItem::Call { .. })));
        let anonymous = json!({"type": "agui-tool-call", "name": "pick"});
        assert_eq!(read(&anonymous, None), None);
    }
}
