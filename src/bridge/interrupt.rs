//! Interrupts: A2A `input-required` / `auth-required` as AG-UI interrupt outcomes
//! (docs/design.md#7-human-in-the-loop, `docs/identity.md`).
//!
//! The interrupt id is derived from A2A ids only — `a2a:<taskId>:<statusMessageId>` (or the
//! state name when the status has no message) — so any replica can recognise it and recover
//! the task it belongs to without stored state. [`InterruptId`] is the one place that writes
//! and reads it: everything else holds the parsed value and compares by what it names, never
//! by splitting the string.

use std::fmt;

use serde::{Serialize, Serializer};
use serde_json::{json, Map, Value};

use super::dialect;
use crate::a2a::model::{TaskState, TaskStatus};
use crate::agui::Interrupt;

/// `activityType` of the interrupt activity message.
pub(crate) const ACTIVITY_TYPE: &str = "INPUT_REQUIRED";
const PREFIX: &str = "a2a:";

/// The id of an open question: the task it belongs to and the question within the task (the
/// status message id, or the state name when the status has no message).
///
/// Written `a2a:<taskId>:<tail>`, the task id as it is and the tail with `%` written `%25`
/// and `:` written `%3A`. The tail holds no `:`, so the last `:` always separates the two:
/// any task id (`:`, `%`, any Unicode) and any tail round-trip. An id whose tail has neither
/// `:` nor `%` — every status message id the gateway has met, whatever its task id — is
/// written as before this encoding existed, so pending interrupt ids that clients hold stay
/// valid. Reading is lenient about a `%` not followed by `25` or `3A` (kept as it is), so a
/// tail with a bare `%` minted before still reads the same; such an id is then written with
/// `%25` ([`fmt::Display`] is canonical). Two ids are the same question when they name the
/// same task and tail, however they were spelled.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct InterruptId {
    task_id: String,
    tail: String,
}

impl InterruptId {
    /// The id of the question `status` of `task_id` asks.
    pub(crate) fn of_status(task_id: &str, status: &TaskStatus) -> Self {
        let tail = status
            .message
            .as_ref()
            .map(|m| m.message_id.as_str())
            .filter(|id| !id.is_empty())
            .unwrap_or(status.state.as_str());
        Self {
            task_id: task_id.to_owned(),
            tail: tail.to_owned(),
        }
    }

    /// Reads an id; `None` if it is not one of ours (no `a2a:` prefix, no separator, or an
    /// empty task id).
    pub(crate) fn parse(raw: &str) -> Option<Self> {
        let (task_id, tail) = raw.strip_prefix(PREFIX)?.rsplit_once(':')?;
        (!task_id.is_empty()).then(|| Self {
            task_id: task_id.to_owned(),
            tail: unescape(tail),
        })
    }

    /// The task the question belongs to.
    pub(crate) fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The status message that asked the question, or the task state's name when it had
    /// none.
    pub(crate) fn tail(&self) -> &str {
        &self.tail
    }
}

impl fmt::Display for InterruptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PREFIX}{}:", self.task_id)?;
        let mut rest = self.tail.as_str();
        while let Some(i) = rest.find(['%', ':']) {
            f.write_str(&rest[..i])?;
            f.write_str(if rest.as_bytes()[i] == b'%' {
                "%25"
            } else {
                "%3A"
            })?;
            rest = &rest[i + 1..];
        }
        f.write_str(rest)
    }
}

impl Serialize for InterruptId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// The tail as written: `%25` is `%`, `%3A` (or `%3a`) is `:`, any other `%` is itself.
fn unescape(tail: &str) -> String {
    let mut out = String::with_capacity(tail.len());
    let mut rest = tail;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (c, used) = match after.get(..2) {
            Some("25") => ('%', 3),
            Some("3A" | "3a") => (':', 3),
            _ => ('%', 1),
        };
        out.push(c);
        rest = &rest[i + used..];
    }
    out.push_str(rest);
    out
}

/// An open question of an A2A task.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pending {
    pub id: InterruptId,
    pub task_id: String,
    pub context_id: String,
    /// `input_required` or `a2a:auth_required`.
    pub reason: &'static str,
    /// The question, in words (from the status text, or made from the request's data).
    pub message: Option<String>,
    /// The call the question is about (an ADK long-running call, a kagent approval).
    pub tool_call_id: Option<String>,
    /// The data of the request's data part(s), if the agent sent any
    /// (docs/design.md#7-human-in-the-loop).
    pub request: Option<Value>,
    pub response_schema: Option<Value>,
}

impl Pending {
    /// The question of an interrupted status, read in its dialect (`asked`).
    pub(crate) fn from_status(
        task_id: &str,
        context_id: &str,
        status: &TaskStatus,
        asked: dialect::Question,
    ) -> Self {
        let reason = if status.state == TaskState::AuthRequired {
            "a2a:auth_required"
        } else {
            "input_required"
        };
        Self {
            id: InterruptId::of_status(task_id, status),
            task_id: task_id.to_owned(),
            context_id: context_id.to_owned(),
            reason,
            message: asked.text,
            tool_call_id: asked.tool_call_id,
            request: asked.request,
            response_schema: asked.response_schema,
        }
    }

    fn base(&self) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("taskId".into(), json!(self.task_id));
        m.insert("contextId".into(), json!(self.context_id));
        m.insert("reason".into(), json!(self.reason));
        if let Some(msg) = &self.message {
            m.insert("message".into(), json!(msg));
        }
        if let Some(id) = &self.tool_call_id {
            m.insert("toolCallId".into(), json!(id));
        }
        if let Some(r) = &self.request {
            m.insert("request".into(), r.clone());
        }
        m
    }

    /// The entry at `/a2a/pendingInterrupts/<id>`: with its `responseSchema`, so any client
    /// holding the state (the console, a reload) can build the answer's form.
    pub(crate) fn state_entry(&self) -> Value {
        let mut m = self.base();
        m.insert("id".into(), json!(self.id));
        if let Some(schema) = &self.response_schema {
            m.insert("responseSchema".into(), schema.clone());
        }
        Value::Object(m)
    }

    /// `ACTIVITY_SNAPSHOT.content` at `stage`.
    pub(crate) fn activity_content(&self, stage: &str) -> Value {
        let mut m = self.base();
        m.insert("stage".into(), json!(stage));
        Value::Object(m)
    }
}

impl From<&Pending> for Interrupt {
    fn from(p: &Pending) -> Self {
        Interrupt {
            id: p.id.to_string(),
            reason: p.reason.to_owned(),
            message: p.message.clone(),
            tool_call_id: p.tool_call_id.clone(),
            response_schema: p.response_schema.clone(),
            metadata: Some(json!({"a2a": {"taskId": p.task_id, "contextId": p.context_id}})),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::model::Message;

    fn asked(message_id: &str) -> TaskStatus {
        TaskStatus {
            state: TaskState::InputRequired,
            message: Some(Message {
                message_id: message_id.into(),
                ..Default::default()
            }),
            timestamp: None,
        }
    }

    #[test]
    fn ids_without_colon_or_percent_in_the_tail_are_written_as_before() {
        let id = InterruptId::of_status("T", &asked("m1"));
        assert_eq!(id.to_string(), "a2a:T:m1");
        // Task ids are written as they are: ids minted before keep their spelling.
        assert_eq!(
            InterruptId::of_status("t:1", &asked("m1")).to_string(),
            "a2a:t:1:m1"
        );
        let without_message = TaskStatus {
            message: None,
            ..asked("")
        };
        assert_eq!(
            InterruptId::of_status("T", &without_message).to_string(),
            "a2a:T:input-required"
        );
    }

    #[test]
    fn any_task_id_and_tail_round_trip() {
        let odd = [
            "T",
            "t:1",
            "a:b:c",
            ":",
            "%",
            "%3A",
            "%25:",
            "50%",
            "ünï:cødé✓",
            "a2a:T:q",
            "",
        ];
        for task in odd.iter().filter(|t| !t.is_empty()) {
            for tail in odd {
                let id = InterruptId::of_status(task, &asked(tail));
                let written = id.to_string();
                let read = InterruptId::parse(&written).unwrap_or_else(|| panic!("{written}"));
                assert_eq!(read, id, "{written}");
                assert_eq!(read.task_id(), *task);
                assert_eq!(read.to_string(), written, "written once, one way");
            }
        }
        let id = InterruptId::of_status("t:1", &asked("m:2%"));
        assert_eq!(id.to_string(), "a2a:t:1:m%3A2%25");
        assert_eq!(id.tail(), "m:2%");
    }

    #[test]
    fn ids_not_ours_are_refused() {
        for raw in ["other", "a2a:", "a2a:T", "a2a::q", "A2A:T:q", ""] {
            assert_eq!(InterruptId::parse(raw), None, "{raw}");
        }
    }

    #[test]
    fn a_bare_percent_reads_as_itself_and_spellings_name_one_question() {
        let read = InterruptId::parse("a2a:T:50%off").unwrap();
        assert_eq!(read.tail(), "50%off");
        assert_eq!(read.to_string(), "a2a:T:50%25off");
        assert_eq!(
            InterruptId::parse("a2a:T:m%3a1"),
            InterruptId::parse("a2a:T:m%3A1")
        );
        assert_eq!(
            serde_json::to_value(&read).unwrap(),
            serde_json::json!("a2a:T:50%25off")
        );
    }
}
