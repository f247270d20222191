//! A2A task history -> AG-UI `Message[]`: the one function that rebuilds a conversation
//! (reattach, pick-up). Agent turns keep their A2A messageIds, user turns the ids the client
//! sent (DESIGN §4), and an artifact's text is the message the live projection streamed for
//! it ([`artifact_message_id`]), so a snapshot carries the ids the client already holds.

use serde_json::{json, Value};

use crate::a2a::model::{Artifact, Message, Part, Role, Task};
use crate::agui::event::{ASSISTANT, USER};

/// The key of an artifact within its task (an artifact without an id gets one).
pub(crate) fn artifact_key(task_id: &str, artifact: &Artifact) -> String {
    if artifact.artifact_id.is_empty() {
        format!("{task_id}-artifact")
    } else {
        artifact.artifact_id.clone()
    }
}

/// The AG-UI id of the assistant message that carries an artifact's text.
pub(crate) fn artifact_message_id(task_id: &str, artifact_key: &str) -> String {
    format!("{task_id}:{artifact_key}")
}

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

/// The conversation of `tasks` (oldest first): each task's history, the text of its
/// artifacts, then its current status message.
pub(crate) fn messages(tasks: &[&Task]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for task in tasks {
        for m in &task.history {
            if seen.insert(m.message_id.clone()) {
                out.extend(to_agui(m));
            }
        }
        for artifact in &task.artifacts {
            let text: String = artifact.parts.iter().filter_map(Part::as_text).collect();
            let id = artifact_message_id(&task.id, &artifact_key(&task.id, artifact));
            if !text.is_empty() && seen.insert(id.clone()) {
                out.push(json!({"id": id, "role": "assistant", "content": text}));
            }
        }
        if let Some(m) = &task.status.message {
            if seen.insert(m.message_id.clone()) {
                out.extend(to_agui(m));
            }
        }
    }
    out
}

/// The client's own turns that the A2A history `a2a` does not hold (on a pick-up: the new
/// user message), in order, as `(id, role, text)`: user and assistant text only.
pub(crate) fn unheld_turns<'a>(
    client: &'a [crate::agui::input::Message],
    a2a: &[Value],
) -> Vec<(&'a str, &'static str, String)> {
    client
        .iter()
        .filter(|m| !a2a.iter().any(|u| u["id"] == m.id.as_str()))
        .filter_map(|m| {
            let role = match m.role.as_str() {
                "user" => USER,
                "assistant" => ASSISTANT,
                _ => return None,
            };
            let text = match m.content.as_ref()? {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter(|p| p["type"] == "text")
                    .filter_map(|p| p["text"].as_str())
                    .collect(),
                _ => return None,
            };
            Some((m.id.as_str(), role, text))
        })
        .collect()
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

    #[test]
    fn the_turns_a2a_does_not_hold_are_the_clients_new_ones() {
        let client: Vec<crate::agui::input::Message> = serde_json::from_value(serde_json::json!([
            {"id": "m1", "role": "user", "content": "Investigate"},
            {"id": "act", "role": "activity", "activityType": "x", "content": {}},
            {"id": "new", "role": "user", "content": [{"type": "text", "text": "and now?"}]}
        ]))
        .unwrap();
        let upstream = vec![
            json!({"id": "m1", "role": "user", "content": "Investigate"}),
            json!({"id": "a1", "role": "assistant", "content": "Found it"}),
        ];
        assert_eq!(
            unheld_turns(&client, &upstream),
            [("new", USER, "and now?".to_owned())]
        );
    }
}
