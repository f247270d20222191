//! The version-neutral A2A data model.
//!
//! Both wire versions (1.0 ProtoJSON and 0.3 `kind`-tagged JSON) deserialize into these types;
//! nothing outside `a2a/` ever sees a version difference. Parsing is deliberately lenient:
//! unknown fields are ignored, absent booleans read as `false` (ProtoJSON omits defaults,
//! A2A 1.0 §5.5), unknown enum spellings are kept verbatim, and a part of an unknown shape is
//! kept as raw JSON. Data only: no I/O here.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::json::null_default;

/// Lifecycle state of an A2A task, spelling-neutral.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskState {
    Submitted,
    Working,
    InputRequired,
    AuthRequired,
    Completed,
    Failed,
    Canceled,
    Rejected,
    /// `unknown` (0.3), `TASK_STATE_UNSPECIFIED` (1.0) or a spelling we do not know.
    Unknown(String),
}

impl TaskState {
    /// Parses both spellings: 1.0 `TASK_STATE_INPUT_REQUIRED` and 0.3 `input-required`
    /// (and gRPC 0.3's British `CANCELLED`).
    pub fn parse(raw: &str) -> Self {
        let key = raw
            .strip_prefix("TASK_STATE_")
            .unwrap_or(raw)
            .to_ascii_lowercase()
            .replace('_', "-");
        match key.as_str() {
            "submitted" => Self::Submitted,
            "working" => Self::Working,
            "input-required" => Self::InputRequired,
            "auth-required" => Self::AuthRequired,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "canceled" | "cancelled" => Self::Canceled,
            "rejected" => Self::Rejected,
            _ => Self::Unknown(raw.to_owned()),
        }
    }

    /// The lowercase 0.3 spelling, used in the projected AG-UI state
    /// (docs/design.md#6-projection-a2a-to-ag-ui).
    pub fn as_str(&self) -> &str {
        match self {
            Self::Submitted => "submitted",
            Self::Working => "working",
            Self::InputRequired => "input-required",
            Self::AuthRequired => "auth-required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Canceled => "canceled",
            Self::Rejected => "rejected",
            Self::Unknown(_) => "unknown",
        }
    }

    /// The 1.0 ProtoJSON spelling.
    pub fn as_v1(&self) -> String {
        match self {
            Self::Unknown(_) => "TASK_STATE_UNSPECIFIED".to_owned(),
            known => format!(
                "TASK_STATE_{}",
                known.as_str().replace('-', "_").to_uppercase()
            ),
        }
    }

    /// Completed, failed, canceled or rejected: the task can never change again.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Canceled | Self::Rejected
        )
    }

    /// Failed, rejected or canceled: its status message is an error, not chat
    /// (docs/design.md#6-projection-a2a-to-ag-ui).
    pub fn is_failure(&self) -> bool {
        matches!(self, Self::Failed | Self::Rejected | Self::Canceled)
    }

    /// Input- or auth-required: the task waits for the client.
    pub fn is_interrupted(&self) -> bool {
        matches!(self, Self::InputRequired | Self::AuthRequired)
    }
}

impl<'de> Deserialize<'de> for TaskState {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(deserializer)? {
            Value::String(s) => Self::parse(&s),
            other => Self::Unknown(other.to_string()),
        })
    }
}

/// Who sent a message.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Role {
    User,
    #[default]
    Agent,
    Unknown(String),
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Option::<String>::deserialize(deserializer)?.unwrap_or_default();
        Ok(match raw.as_str() {
            "user" | "ROLE_USER" => Self::User,
            "agent" | "ROLE_AGENT" => Self::Agent,
            _ => Self::Unknown(raw),
        })
    }
}

/// What a part carries. A2A 1.0 uses field presence (`text` / `raw` / `url` / `data`);
/// 0.3 uses `kind` with a nested `file` object. Both land here.
#[derive(Debug, Clone, PartialEq)]
pub enum PartContent {
    Text(String),
    /// Inline bytes, base64 as on the wire (never decoded by the gateway).
    Bytes(String),
    /// A file by URL: passed through, never fetched (docs/design.md#9-reliability-and-limits).
    Url(String),
    Data(Value),
    /// A shape we do not know, kept verbatim.
    Unknown(Value),
}

/// One part of a message or artifact.
#[derive(Debug, Clone, PartialEq)]
pub struct Part {
    pub content: PartContent,
    pub media_type: Option<String>,
    pub filename: Option<String>,
    pub metadata: Option<Value>,
}

impl Part {
    /// A plain text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: PartContent::Text(text.into()),
            media_type: None,
            filename: None,
            metadata: None,
        }
    }

    /// A structured data part.
    pub fn data(data: Value) -> Self {
        Self {
            content: PartContent::Data(data),
            media_type: None,
            filename: None,
            metadata: None,
        }
    }

    /// The text if this is a text part.
    pub fn as_text(&self) -> Option<&str> {
        match &self.content {
            PartContent::Text(t) => Some(t),
            _ => None,
        }
    }
}

fn non_empty(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        let Some(obj) = value.as_object() else {
            return Ok(Self {
                content: PartContent::Unknown(value),
                media_type: None,
                filename: None,
                metadata: None,
            });
        };
        let metadata = obj.get("metadata").filter(|m| !m.is_null()).cloned();
        // 0.3 nests file content: {"kind":"file","file":{"bytes"|"uri","mimeType","name"}}.
        if let Some(file) = obj.get("file").and_then(Value::as_object) {
            let content = if let Some(b) = file.get("bytes").and_then(Value::as_str) {
                PartContent::Bytes(b.to_owned())
            } else if let Some(u) = file.get("uri").and_then(Value::as_str) {
                PartContent::Url(u.to_owned())
            } else {
                PartContent::Unknown(value.clone())
            };
            return Ok(Self {
                content,
                media_type: non_empty(file.get("mimeType")),
                filename: non_empty(file.get("name")),
                metadata,
            });
        }
        let content = if let Some(t) = obj.get("text").and_then(Value::as_str) {
            PartContent::Text(t.to_owned())
        } else if let Some(d) = obj.get("data") {
            PartContent::Data(d.clone())
        } else if let Some(b) = obj.get("raw").and_then(Value::as_str) {
            PartContent::Bytes(b.to_owned())
        } else if let Some(u) = obj.get("url").and_then(Value::as_str) {
            PartContent::Url(u.to_owned())
        } else {
            PartContent::Unknown(value.clone())
        };
        Ok(Self {
            content,
            media_type: non_empty(obj.get("mediaType").or_else(|| obj.get("mimeType"))),
            filename: non_empty(obj.get("filename")),
            metadata,
        })
    }
}

/// An A2A message.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct Message {
    #[serde(deserialize_with = "null_default")]
    pub message_id: String,
    #[serde(deserialize_with = "null_default")]
    pub role: Role,
    #[serde(deserialize_with = "null_default")]
    pub parts: Vec<Part>,
    pub context_id: Option<String>,
    pub task_id: Option<String>,
    pub metadata: Option<Value>,
}

impl Message {
    /// The concatenated text of all text parts.
    pub fn text(&self) -> String {
        self.parts.iter().filter_map(Part::as_text).collect()
    }
}

/// A task's status.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    pub state: TaskState,
    #[serde(default)]
    pub message: Option<Message>,
    #[serde(default)]
    pub timestamp: Option<String>,
}

/// An output of a task.
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct Artifact {
    #[serde(deserialize_with = "null_default")]
    pub artifact_id: String,
    pub name: Option<String>,
    pub description: Option<String>,
    #[serde(deserialize_with = "null_default")]
    pub parts: Vec<Part>,
    pub metadata: Option<Value>,
}

/// A task snapshot.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: String,
    #[serde(default)]
    pub context_id: Option<String>,
    pub status: TaskStatus,
    #[serde(default, deserialize_with = "null_default")]
    pub artifacts: Vec<Artifact>,
    #[serde(default, deserialize_with = "null_default")]
    pub history: Vec<Message>,
    #[serde(default)]
    pub metadata: Option<Value>,
}

/// A status change of a task (`statusUpdate` / `status-update`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusUpdate {
    pub task_id: String,
    #[serde(default)]
    pub context_id: Option<String>,
    pub status: TaskStatus,
    #[serde(default)]
    pub metadata: Option<Value>,
}

/// An artifact chunk (`artifactUpdate` / `artifact-update`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactUpdate {
    pub task_id: String,
    #[serde(default)]
    pub context_id: Option<String>,
    pub artifact: Artifact,
    /// Absent means false (ProtoJSON omits defaults).
    #[serde(default, deserialize_with = "null_default")]
    pub append: bool,
    #[serde(default, deserialize_with = "null_default")]
    pub last_chunk: bool,
    #[serde(default)]
    pub metadata: Option<Value>,
}

/// One item of an A2A stream, or the result of a blocking send.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    Task(Task),
    Message(Message),
    StatusUpdate(StatusUpdate),
    ArtifactUpdate(ArtifactUpdate),
    /// Well-formed JSON we could not classify; projected as `RAW`, never a failure.
    Unknown(Value),
}

impl StreamEvent {
    /// The context id this event carries, if any.
    pub fn context_id(&self) -> Option<&str> {
        match self {
            Self::Task(t) => t.context_id.as_deref(),
            Self::Message(m) => m.context_id.as_deref(),
            Self::StatusUpdate(s) => s.context_id.as_deref(),
            Self::ArtifactUpdate(a) => a.context_id.as_deref(),
            Self::Unknown(_) => None,
        }
    }

    /// The task id this event carries, if any.
    pub fn task_id(&self) -> Option<&str> {
        match self {
            Self::Task(t) => Some(&t.id),
            Self::Message(m) => m.task_id.as_deref(),
            Self::StatusUpdate(s) => Some(&s.task_id),
            Self::ArtifactUpdate(a) => Some(&a.task_id),
            Self::Unknown(_) => None,
        }
    }

    /// The task status this event carries: a task's or a status update's.
    pub fn status(&self) -> Option<&TaskStatus> {
        match self {
            Self::Task(t) => Some(&t.status),
            Self::StatusUpdate(s) => Some(&s.status),
            Self::Message(_) | Self::ArtifactUpdate(_) | Self::Unknown(_) => None,
        }
    }
}

/// A JSON-RPC error object returned by an upstream.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RpcError {
    pub code: i64,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub data: Option<Value>,
}

/// A page of `ListTasks` (A2A 1.0 only).
#[derive(Debug, Clone, PartialEq, Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
pub struct TaskPage {
    pub tasks: Vec<Task>,
    pub next_page_token: Option<String>,
}

/// A message the gateway sends upstream, before version encoding.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OutgoingMessage {
    pub message_id: String,
    pub parts: Vec<Part>,
    pub context_id: Option<String>,
    pub task_id: Option<String>,
    /// The message's own metadata (an extension's payload,
    /// docs/design.md#7-human-in-the-loop/§8).
    pub metadata: Option<Value>,
    /// Extension URIs the message uses (`message.extensions`).
    pub extensions: Vec<String>,
}

/// Protocol version of an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum ProtocolVersion {
    #[serde(rename = "1.0")]
    V1,
    #[serde(rename = "0.3")]
    V0_3,
}

impl ProtocolVersion {
    /// Both versions.
    pub const ALL: [ProtocolVersion; 2] = [Self::V1, Self::V0_3];

    /// The header that activates extensions (A2A 1.0 §4.6 `A2A-Extensions`; 0.3
    /// `X-A2A-Extensions`).
    pub fn extensions_header(self) -> reqwest::header::HeaderName {
        use reqwest::header::HeaderName;
        match self {
            Self::V1 => HeaderName::from_static("a2a-extensions"),
            Self::V0_3 => HeaderName::from_static("x-a2a-extensions"),
        }
    }

    /// `"1.0"` or `"0.3"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V1 => "1.0",
            Self::V0_3 => "0.3",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn states_parse_in_both_spellings() {
        assert_eq!(
            TaskState::parse("TASK_STATE_INPUT_REQUIRED"),
            TaskState::InputRequired
        );
        assert_eq!(TaskState::parse("input-required"), TaskState::InputRequired);
        assert_eq!(
            TaskState::parse("TASK_STATE_CANCELLED"),
            TaskState::Canceled
        );
        assert_eq!(
            TaskState::parse("bogus"),
            TaskState::Unknown("bogus".into())
        );
        assert_eq!(
            TaskState::InputRequired.as_v1(),
            "TASK_STATE_INPUT_REQUIRED"
        );
    }

    #[test]
    fn parts_parse_in_both_shapes() {
        let v1: Part =
            serde_json::from_value(json!({"url": "http://x/f", "mediaType": "image/png"})).unwrap();
        assert_eq!(v1.content, PartContent::Url("http://x/f".into()));
        assert_eq!(v1.media_type.as_deref(), Some("image/png"));
        let v03: Part = serde_json::from_value(
            json!({"kind": "file", "file": {"bytes": "AA==", "mimeType": "a/b", "name": "n"}}),
        )
        .unwrap();
        assert_eq!(v03.content, PartContent::Bytes("AA==".into()));
        assert_eq!(v03.filename.as_deref(), Some("n"));
        let odd: Part = serde_json::from_value(json!({"weird": 1})).unwrap();
        assert!(matches!(odd.content, PartContent::Unknown(_)));
    }

    #[test]
    fn absent_and_null_booleans_read_false() {
        let u: ArtifactUpdate = serde_json::from_value(
            json!({"taskId": "t", "artifact": {"artifactId": "a", "parts": null}, "append": null}),
        )
        .unwrap();
        assert!(!u.append && !u.last_chunk);
        assert!(u.artifact.parts.is_empty());
    }
}
