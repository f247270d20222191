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
pub(crate) fn messages(tasks: &[&Task]) -> Vec<Value> {
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

/// A complete `MESSAGES_SNAPSHOT` for a client that holds `client` messages: theirs in
/// their order (a snapshot deletes what it leaves out), each replaced by the A2A version when
/// the ids match, then the A2A messages the client has not seen, in A2A order. Activity
/// messages are client-only and left out (the client keeps them).
pub(crate) fn merge(client: &[crate::agui::input::Message], a2a: Vec<Value>) -> Vec<Value> {
    let mut upstream: Vec<Option<Value>> = a2a.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(client.len() + upstream.len());
    for m in client.iter().filter(|m| m.role != "activity") {
        let same = upstream
            .iter_mut()
            .find(|u| u.as_ref().is_some_and(|u| u["id"] == m.id.as_str()));
        match same {
            Some(slot) => out.extend(slot.take()),
            None => out.push(m.to_json()),
        }
    }
    out.extend(upstream.into_iter().flatten());
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

    #[test]
    fn merge_keeps_client_messages_and_appends_unseen_ones() {
        let client: Vec<crate::agui::input::Message> = serde_json::from_value(serde_json::json!([
            {"id": "old", "role": "user", "content": "earlier turn", "name": "me"},
            {"id": "u", "role": "user", "content": "slow"},
            {"id": "act", "role": "activity", "activityType": "x", "content": {}},
            {"id": "a1", "role": "assistant", "content": "tick 1"}
        ]))
        .unwrap();
        let upstream = vec![
            json!({"id": "u", "role": "user", "content": "slow"}),
            json!({"id": "a1", "role": "assistant", "content": "tick 1"}),
            json!({"id": "a2", "role": "assistant", "content": "tick 2"}),
        ];
        let merged = merge(&client, upstream);
        let ids: Vec<&str> = merged.iter().map(|m| m["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["old", "u", "a1", "a2"]);
        assert_eq!(merged[0]["name"], "me", "client fields are kept");
    }
}
