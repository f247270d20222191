//! A2A task history -> AG-UI `Message[]` (for `MESSAGES_SNAPSHOT` on reattach). Agent turns
//! keep their A2A messageIds and user turns the ids the client sent (DESIGN §4), so the
//! snapshot replaces the client's messages instead of duplicating them.

use serde_json::{json, Value};

use crate::a2a::model::{Message, Role, Task};

fn to_agui(m: &Message) -> Option<Value> {
    let text = m.text();
    match m.role {
        Role::User => Some(json!({"id": m.message_id, "role": "user", "content": text})),
        Role::Agent if !text.is_empty() => {
            Some(json!({"id": m.message_id, "role": "assistant", "content": text}))
        }
        _ => None,
    }
}

/// The conversation of `tasks` (oldest first), with each task's current status message.
pub fn messages(tasks: &[&Task]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for task in tasks {
        let status_msg = task.status.message.iter();
        for m in task.history.iter().chain(status_msg) {
            if seen.insert(m.message_id.clone()) {
                out.extend(to_agui(m));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::model::ProtocolVersion;

    #[test]
    fn completed_task_history_becomes_messages() {
        let raw = include_str!("../../fixtures/a2a/v1/get-completed.json");
        let env: Value = serde_json::from_str(raw).unwrap();
        let task = ProtocolVersion::V1
            .decode_task(&env["result"].to_string())
            .unwrap();
        let msgs = messages(&[&task]);
        assert_eq!(msgs[0]["role"], "user");
        assert_eq!(msgs[0]["id"], "msg-stream-echo");
        let contents: Vec<&str> = msgs[1..]
            .iter()
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        assert_eq!(
            contents,
            ["hello ", "brave ", "world ", "hello brave world"]
        );
    }
}
