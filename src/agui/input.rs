//! `RunAgentInput`, the body of `POST /agents/{name}` (AG-UI 1.0, agui.md §4).
//!
//! Parsed leniently so 0.0.x and 1.0 clients both work: unknown fields are ignored, `null`
//! reads as absent, `tools`/`context` default to empty, every message role is accepted
//! (an unknown one as [`Role::Other`]).
//! Only `threadId`, `runId` and `messages` are required.

use serde::Deserialize;
use serde_json::Value;

use super::Role;
use crate::ids::ThreadId;
use crate::json::null_default;

/// The request body of an AG-UI run.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RunAgentInput {
    pub thread_id: ThreadId,
    pub run_id: String,
    pub messages: Vec<Message>,
    #[serde(default)]
    pub protocol_version: Option<String>,
    #[serde(default)]
    pub state: Option<Value>,
    #[serde(default)]
    pub forwarded_props: Option<Value>,
    #[serde(default, deserialize_with = "null_default")]
    pub resume: Vec<ResumeEntry>,
    /// Frontend tools (`{name, description, parameters}`), forwarded with `forwardTools`.
    #[serde(default, deserialize_with = "null_default")]
    pub tools: Vec<Value>,
    /// Readable context (`{description, value}`), forwarded with `forwardContext`.
    #[serde(default, deserialize_with = "null_default")]
    pub context: Vec<Value>,
}

impl RunAgentInput {
    /// True when the client speaks AG-UI 1.0 and accepts 1.0-only shapes.
    pub(crate) fn is_v1_client(&self) -> bool {
        self.protocol_version
            .as_deref()
            .and_then(|v| v.split('.').next())
            .and_then(|major| major.parse::<u32>().ok())
            .is_some_and(|major| major >= 1)
    }

    /// `forwardedProps.a2a`, the gateway's run options (docs/design.md#5-run-options).
    pub(crate) fn a2a_props(&self) -> Option<&serde_json::Map<String, Value>> {
        self.forwarded_props.as_ref()?.get("a2a")?.as_object()
    }
}

/// One message of the client's transcript.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Message {
    pub id: String,
    pub role: Role,
    /// A string, an array of content parts, or absent (assistant messages with tool calls).
    #[serde(default)]
    pub content: Option<Value>,
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// Every other field, kept so the message can be echoed back unchanged
    /// ([`super::event::Message`]'s `From`).
    #[serde(flatten)]
    pub rest: serde_json::Map<String, Value>,
}

/// An answer to an interrupt (AG-UI 1.0 `ResumeEntry`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ResumeEntry {
    pub interrupt_id: String,
    pub status: ResumeStatus,
    #[serde(default)]
    pub payload: Option<Value>,
}

/// Whether an interrupt was answered or abandoned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ResumeStatus {
    Resolved,
    Cancelled,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lenient_about_nulls_and_unknown_fields() {
        let input: RunAgentInput = serde_json::from_value(json!({
            "threadId": "t", "runId": "r", "messages": [{"id": "m", "role": "user", "content": "hi"}],
            "tools": null, "state": null, "somethingNew": 1, "protocolVersion": "1.0"
        }))
        .unwrap();
        assert!(input.state.is_none());
        assert!(input.is_v1_client());
    }

    #[test]
    fn a_message_of_an_unknown_role_is_echoed_unchanged() {
        let sent = json!({"id": "m", "role": "thinking", "content": "hmm", "encryptedValue": "x"});
        let m: Message = serde_json::from_value(sent.clone()).unwrap();
        assert_eq!(m.role, Role::Other("thinking".into()));
        let echoed = super::super::event::Message::from(&m);
        assert_eq!(serde_json::to_value(echoed).unwrap(), sent);
    }

    #[test]
    fn old_clients_are_not_v1() {
        let input: RunAgentInput =
            serde_json::from_value(json!({"threadId": "t", "runId": "r", "messages": []})).unwrap();
        assert!(!input.is_v1_client());
    }
}
