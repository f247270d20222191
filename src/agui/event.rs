//! AG-UI 1.0 events the gateway emits (a subset of `@ag-ui/core` 1.0.0 `EventSchema`).
//! `SUBAGENT_*` events go only to clients that declared 1.0 (0.0.48 refuses a type it does
//! not know); others get them as [`Event::Custom`] ([`Event::as_custom`]).
//!
//! Invariants every value upholds on the wire: `type` is SCREAMING_SNAKE_CASE, fields are
//! camelCase, and an optional field is omitted, never `null` (a `null` in an optional field
//! fails the run in `@ag-ui/client` 1.0.0). Bridge-specific data lives in `metadata` under
//! the `a2a` key, never in undeclared fields (the client strips those).

use serde::Serialize;
use serde_json::Value;

use super::Role;

/// One AG-UI event.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(
    tag = "type",
    rename_all = "SCREAMING_SNAKE_CASE",
    rename_all_fields = "camelCase"
)]
pub(crate) enum Event {
    RunStarted {
        thread_id: String,
        run_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<Value>,
    },
    RunFinished {
        thread_id: String,
        run_id: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        outcome: Option<Outcome>,
        /// The run's token usage (AG-UI 1.0; only for 1.0 clients).
        #[serde(skip_serializing_if = "Option::is_none")]
        usage: Option<Vec<TokenUsage>>,
    },
    RunError {
        message: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<String>,
        /// Token usage accrued before the failure (AG-UI 1.0; only for 1.0 clients).
        #[serde(skip_serializing_if = "Option::is_none")]
        usage: Option<Vec<TokenUsage>>,
    },
    TextMessageStart {
        message_id: String,
        role: Role,
    },
    TextMessageContent {
        message_id: String,
        delta: String,
    },
    TextMessageEnd {
        message_id: String,
    },
    ToolCallStart {
        tool_call_id: String,
        tool_call_name: String,
    },
    /// The call's arguments as JSON text.
    ToolCallArgs {
        tool_call_id: String,
        delta: String,
    },
    ToolCallEnd {
        tool_call_id: String,
    },
    /// Opens a span of the agent's reasoning (its `messageId` is the reasoning message's).
    ReasoningStart {
        message_id: String,
    },
    /// Mints a `reasoning` message.
    ReasoningMessageStart {
        message_id: String,
        /// Always [`Role::Reasoning`].
        role: Role,
    },
    /// Never empty (`@ag-ui/core` refuses an empty delta).
    ReasoningMessageContent {
        message_id: String,
        delta: String,
    },
    ReasoningMessageEnd {
        message_id: String,
    },
    ReasoningEnd {
        message_id: String,
    },
    /// Mints a `tool` message carrying the call's result.
    ToolCallResult {
        message_id: String,
        tool_call_id: String,
        content: String,
        role: Role,
    },
    /// The whole state, already serialized: a snapshot is written once, never held as a
    /// second copy of the document's value tree.
    StateSnapshot {
        snapshot: RawJson,
    },
    /// RFC 6902 operations, each applying cleanly to the state before it.
    StateDelta {
        delta: Vec<json_patch::PatchOperation>,
    },
    MessagesSnapshot {
        messages: Vec<Message>,
    },
    ActivitySnapshot {
        message_id: String,
        activity_type: String,
        content: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        replace: Option<bool>,
    },
    ActivityDelta {
        message_id: String,
        activity_type: String,
        patch: Vec<json_patch::PatchOperation>,
    },
    Raw {
        event: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        source: Option<String>,
    },
    /// An application-defined event (every AG-UI version defines `CUSTOM`).
    Custom {
        name: String,
        value: Value,
    },
    /// A delegation to another agent began (AG-UI 1.0; 0.0.48 does not define it).
    SubagentStarted {
        subagent_run_id: String,
        name: String,
        /// The parent's tool call that delegates.
        #[serde(skip_serializing_if = "Option::is_none")]
        parent_tool_call_id: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<Value>,
    },
    /// The delegation's segment of this run ended: the sub-agent answered, or waits.
    SubagentFinished {
        subagent_run_id: String,
        /// The sub-agent's answer.
        #[serde(skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        outcome: Option<SubagentOutcome>,
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<Value>,
    },
    /// The sub-agent failed; the run goes on (its parent handles the failure).
    SubagentError {
        subagent_run_id: String,
        message: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        metadata: Option<Value>,
    },
}

/// `SUBAGENT_FINISHED.outcome` (AG-UI 1.0).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub(crate) enum SubagentOutcome {
    Success,
    /// The sub-agent waits for outside input: the run's interrupts it waits on.
    Suspended {
        #[serde(rename = "interruptIds", skip_serializing_if = "Vec::is_empty")]
        interrupt_ids: Vec<String>,
    },
}

impl Event {
    /// A `RUN_ERROR` with a machine-readable code and no usage.
    pub(crate) fn run_error(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::RunError {
            message: message.into(),
            code: Some(code.into()),
            usage: None,
        }
    }

    /// `RUN_FINISHED` and `RUN_ERROR` end a run; nothing may follow them.
    pub(crate) fn is_terminal(&self) -> bool {
        matches!(self, Self::RunFinished { .. } | Self::RunError { .. })
    }

    /// The same event as a `CUSTOM` event every client version defines: named after its
    /// type, its fields the value (how a `SUBAGENT_*` event reaches a client that did not
    /// declare AG-UI 1.0, docs/mapping.md#delegation-to-other-agents).
    pub(crate) fn as_custom(&self) -> Self {
        let mut value = serde_json::to_value(self).unwrap_or_default();
        let name = match value.as_object_mut().and_then(|o| o.remove("type")) {
            Some(Value::String(name)) => name,
            _ => String::new(),
        };
        Self::Custom { name, value }
    }
}

/// Token counts of one provider and model (AG-UI 1.0 `TokenUsage`): `inputTokens` and
/// `outputTokens` are totals, `reasoningTokens` and `cachedInputTokens` parts of them, and
/// `totalTokens` their sum. A count the agent did not report is absent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TokenUsage {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
}

/// JSON already serialized (compared by its text).
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub(crate) struct RawJson(pub Box<serde_json::value::RawValue>);

impl PartialEq for RawJson {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

/// `RUN_FINISHED.outcome`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub(crate) enum Outcome {
    Success {
        /// Frontend tool calls the app is to run (AG-UI 1.0; only for 1.0 clients).
        #[serde(rename = "pendingToolCallIds", skip_serializing_if = "Vec::is_empty")]
        pending_tool_call_ids: Vec<String>,
    },
    Interrupt {
        interrupts: Vec<Interrupt>,
    },
    /// AG-UI 1.0 only; 0.0.x clients reject it (agui.md §10).
    Cancelled,
}

/// One open question of an interrupted run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Interrupt {
    pub id: String,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_schema: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// One message of a `MESSAGES_SNAPSHOT` (AG-UI 1.0 `Message`): a turn rebuilt from A2A
/// history, or a client's own message echoed back as it sent it.
///
/// The fields are declared in alphabetical order, the order in which the JSON maps used
/// before this type wrote them, so a rebuilt message's bytes on the wire are unchanged.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Message {
    /// Text for rebuilt turns (`""` while a rebuilt reply has none yet; a `reasoning`
    /// message's reasoning text); an echoed message's
    /// content as the client sent it (a string or content parts). Absent on an assistant
    /// message that only calls tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
    pub id: String,
    pub role: Role,
    /// The call a `tool` message answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The calls of a rebuilt assistant message (an echoed message keeps its own in `rest`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Every other field of an echoed client message, unchanged.
    #[serde(flatten)]
    pub rest: serde_json::Map<String, Value>,
}

impl Message {
    /// A text message.
    pub(crate) fn text(id: impl Into<String>, role: Role, text: impl Into<String>) -> Self {
        Self {
            content: Some(Value::String(text.into())),
            ..Self::bare(id.into(), role)
        }
    }

    /// An assistant message that calls one tool: `arguments` is JSON text.
    pub(crate) fn tool_call(id: String, name: String, arguments: String) -> Self {
        Self {
            tool_calls: vec![ToolCall {
                function: FunctionCall { arguments, name },
                id: id.clone(),
                kind: "function",
            }],
            ..Self::bare(id, Role::Assistant)
        }
    }

    /// A `tool` message: the result of the call `tool_call_id`, as text.
    pub(crate) fn tool_result(id: String, tool_call_id: String, content: String) -> Self {
        Self {
            content: Some(Value::String(content)),
            tool_call_id: Some(tool_call_id),
            ..Self::bare(id, Role::Tool)
        }
    }

    fn bare(id: String, role: Role) -> Self {
        Self {
            content: None,
            id,
            role,
            tool_call_id: None,
            tool_calls: Vec::new(),
            rest: serde_json::Map::new(),
        }
    }

    /// The text content, if the content is text.
    pub(crate) fn text_content(&self) -> Option<&str> {
        self.content.as_ref().and_then(Value::as_str)
    }
}

impl From<&super::input::Message> for Message {
    /// The client's message as it sent it.
    fn from(m: &super::input::Message) -> Self {
        Self {
            content: m.content.clone(),
            tool_call_id: m.tool_call_id.clone(),
            rest: m.rest.clone(),
            ..Self::bare(m.id.clone(), m.role.clone())
        }
    }
}

impl From<Message> for super::input::Message {
    /// A snapshot's message as a client would send it back: what a client holds after the
    /// snapshot (CopilotKit's `connect` runs as that client).
    fn from(m: Message) -> Self {
        let mut rest = m.rest;
        if !m.tool_calls.is_empty() {
            rest.insert("toolCalls".into(), serde_json::json!(m.tool_calls));
        }
        Self {
            id: m.id,
            role: m.role,
            content: m.content,
            tool_call_id: m.tool_call_id,
            rest,
        }
    }
}

/// One call of an assistant message (AG-UI 1.0 `ToolCall`); fields in alphabetical order, as
/// [`Message`]'s.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ToolCall {
    pub function: FunctionCall,
    pub id: String,
    /// Always `"function"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
}

/// The function a [`ToolCall`] calls.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct FunctionCall {
    /// The arguments as JSON text.
    pub arguments: String,
    pub name: String,
}

/// Appends one event as compact JSON (no newlines) to `out`.
pub(crate) fn encode_into(event: &Event, out: &mut Vec<u8>) {
    let mark = out.len();
    if serde_json::to_writer(&mut *out, event).is_err() {
        out.truncate(mark);
        out.extend_from_slice(encode(event).as_bytes());
    }
}

/// Encodes one event as an SSE `data:` payload (compact JSON, no newlines).
pub(crate) fn encode(event: &Event) -> String {
    // Serializing these types cannot fail: every key is a string and no map is keyed by
    // anything else.
    serde_json::to_string(event).unwrap_or_else(|e| {
        let code = crate::error::RunError::Internal.code();
        format!(r#"{{"type":"RUN_ERROR","message":"encoding failed: {e}","code":"{code}"}}"#)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wire_shape_omits_absent_fields() {
        let e = Event::RunFinished {
            thread_id: "t".into(),
            run_id: "r".into(),
            outcome: Some(Outcome::Success {
                pending_tool_call_ids: Vec::new(),
            }),
            usage: None,
        };
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "success"}})
        );
        let e = Event::RunError {
            message: "m".into(),
            code: None,
            usage: None,
        };
        assert_eq!(encode(&e), r#"{"type":"RUN_ERROR","message":"m"}"#);
        let e = Event::TextMessageStart {
            message_id: "m".into(),
            role: Role::Assistant,
        };
        assert_eq!(
            encode(&e),
            r#"{"type":"TEXT_MESSAGE_START","messageId":"m","role":"assistant"}"#
        );
    }

    #[test]
    fn subagent_events_have_the_1_0_shape_and_downgrade_to_custom() {
        let e = Event::SubagentFinished {
            subagent_run_id: "c1:subagent".into(),
            result: None,
            outcome: Some(SubagentOutcome::Suspended {
                interrupt_ids: vec!["a2a:t:m".into()],
            }),
            metadata: None,
        };
        assert_eq!(
            encode(&e),
            r#"{"type":"SUBAGENT_FINISHED","subagentRunId":"c1:subagent","outcome":{"type":"suspended","interruptIds":["a2a:t:m"]}}"#
        );
        assert_eq!(
            encode(&e.as_custom()),
            r#"{"type":"CUSTOM","name":"SUBAGENT_FINISHED","value":{"outcome":{"interruptIds":["a2a:t:m"],"type":"suspended"},"subagentRunId":"c1:subagent"}}"#
        );
        let e = Event::SubagentStarted {
            subagent_run_id: "c1:subagent".into(),
            name: "k8s".into(),
            parent_tool_call_id: Some("c1".into()),
            metadata: None,
        };
        assert_eq!(
            encode(&e),
            r#"{"type":"SUBAGENT_STARTED","subagentRunId":"c1:subagent","name":"k8s","parentToolCallId":"c1"}"#
        );
    }

    #[test]
    fn snapshot_messages_keep_the_bytes_of_before() {
        let e = Event::MessagesSnapshot {
            messages: vec![
                Message::text("u", Role::User, "hi"),
                Message::tool_call("c1".into(), "pick".into(), "{}".into()),
                Message::tool_result("c1:result".into(), "c1".into(), "red".into()),
            ],
        };
        // As the `json!` maps of before wrote them (keys sorted).
        let before = json!([
            {"id": "u", "role": "user", "content": "hi"},
            {"id": "c1", "role": "assistant", "toolCalls": [
                {"id": "c1", "type": "function", "function": {"name": "pick", "arguments": "{}"}}]},
            {"id": "c1:result", "role": "tool", "toolCallId": "c1", "content": "red"}]);
        assert_eq!(
            encode(&e),
            format!(r#"{{"type":"MESSAGES_SNAPSHOT","messages":{before}}}"#)
        );
    }

    #[test]
    fn a_clients_message_is_echoed_as_sent_and_read_back_the_same() {
        let sent = json!({"id": "a", "role": "assistant", "name": "bot", "toolCalls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]});
        let client: crate::agui::input::Message = serde_json::from_value(sent.clone()).unwrap();
        let echoed = Message::from(&client);
        assert_eq!(serde_json::to_value(&echoed).unwrap(), sent);
        let rebuilt = Message::tool_call("c".into(), "f".into(), "{}".into());
        let held = crate::agui::input::Message::from(rebuilt.clone());
        assert_eq!(
            serde_json::to_value(Message::from(&held)).unwrap(),
            serde_json::to_value(rebuilt).unwrap()
        );
    }
}
