//! AG-UI 1.0 events the gateway emits (a subset of `@ag-ui/core` 1.0.0 `EventSchema`).
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
    },
    RunError {
        message: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<String>,
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
        messages: Vec<Value>,
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
}

impl Event {
    /// `RUN_FINISHED` and `RUN_ERROR` end a run; nothing may follow them.
    pub(crate) fn is_terminal(&self) -> bool {
        matches!(self, Self::RunFinished { .. } | Self::RunError { .. })
    }

    /// A `RUN_ERROR` with a machine-readable code (from [`crate::error::RunError`]).
    pub(crate) fn run_error(code: impl Into<String>, message: impl Into<String>) -> Self {
        Self::RunError {
            message: message.into(),
            code: Some(code.into()),
        }
    }
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
        };
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "outcome": {"type": "success"}})
        );
        let e = Event::RunError {
            message: "m".into(),
            code: None,
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
}
