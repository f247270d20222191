//! Interrupts: A2A `input-required` / `auth-required` as AG-UI interrupt outcomes
//! (docs/design.md#7-human-in-the-loop,
//! `docs/identity.md`).
//!
//! The interrupt id is derived from A2A ids only — `a2a:<taskId>:<statusMessageId>` (or the
//! state name when the status has no message) — so any replica can recognise it and recover
//! the task it belongs to without stored state.

use serde_json::{json, Map, Value};

use super::dialect;
use crate::a2a::model::{TaskState, TaskStatus};
use crate::agui::Interrupt;

/// `activityType` of the interrupt activity message.
pub(crate) const ACTIVITY_TYPE: &str = "INPUT_REQUIRED";
const PREFIX: &str = "a2a:";

/// An open question of an A2A task.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Pending {
    pub id: String,
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

/// The interrupt id for a task's status.
pub(crate) fn interrupt_id(task_id: &str, status: &TaskStatus) -> String {
    let tail = status
        .message
        .as_ref()
        .map(|m| m.message_id.as_str())
        .filter(|id| !id.is_empty())
        .unwrap_or(status.state.as_str());
    format!("{PREFIX}{task_id}:{tail}")
}

/// The task id inside an interrupt id, if it is one of ours.
pub(crate) fn task_of(interrupt_id: &str) -> Option<&str> {
    let rest = interrupt_id.strip_prefix(PREFIX)?;
    let (task, _) = rest.rsplit_once(':')?;
    (!task.is_empty()).then_some(task)
}

/// The status message id inside an interrupt id, if it names one.
pub(crate) fn message_of(interrupt_id: &str) -> Option<&str> {
    let rest = interrupt_id.strip_prefix(PREFIX)?;
    let (_, message) = rest.rsplit_once(':')?;
    (!message.is_empty()).then_some(message)
}

impl Pending {
    /// The question of an interrupted status, read in its dialect (`asked`).
    pub(crate) fn from_status(
        task_id: &str,
        context_id: &str,
        status: &TaskStatus,
        asked: dialect::Request,
    ) -> Self {
        let reason = if status.state == TaskState::AuthRequired {
            "a2a:auth_required"
        } else {
            "input_required"
        };
        Self {
            id: interrupt_id(task_id, status),
            task_id: task_id.to_owned(),
            context_id: context_id.to_owned(),
            reason,
            message: asked.question,
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
            id: p.id.clone(),
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

    #[test]
    fn ids_round_trip_to_the_task() {
        let status = TaskStatus {
            state: TaskState::InputRequired,
            message: Some(Message {
                message_id: "m1".into(),
                ..Default::default()
            }),
            timestamp: None,
        };
        let id = interrupt_id("t:1", &status);
        assert_eq!(id, "a2a:t:1:m1");
        assert_eq!(task_of(&id), Some("t:1"));
        assert_eq!(task_of("other"), None);
    }
}
