//! A2A task history -> AG-UI `Message[]` ([`event::Message`], what a `MESSAGES_SNAPSHOT`
//! carries): the one function that rebuilds a conversation (reattach, pick-up), and the merge
//! with the messages the client holds. Agent turns keep their A2A messageIds, user turns the
//! ids the client sent (docs/design.md#4-threads-and-contexts), and an artifact's text is the
//! message the live projection streamed for it ([`artifact_message_id`]), so a snapshot
//! carries the ids the client already holds. The agent's reasoning (thought parts) is a
//! `reasoning` message under the id its live reasoning events had. Pure.

use serde_json::Value;

use super::dialect;
use super::reply::{self, Piece, Step, Voice, Voices};
use super::tools::{self, ToolItem};
use crate::a2a::model::{Artifact, Message, PartContent, Role, Task};
use crate::agui::{self, event};

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

/// Rebuilds one conversation with the live projection's rules: answer and reasoning text
/// through [`Voices`] (one reply, one message), tool calls and results through [`tools`].
#[derive(Default)]
struct Rebuild {
    out: Vec<event::Message>,
    voices: Voices,
    seen_tools: std::collections::HashSet<String>,
}

impl Rebuild {
    fn steps(&mut self, steps: Vec<(Voice, Step)>) {
        for (voice, step) in steps {
            match step {
                Step::Start { id } => {
                    let role = match voice {
                        Voice::Answer => agui::Role::Assistant,
                        Voice::Reasoning => agui::Role::Reasoning,
                    };
                    self.out.push(event::Message::text(id, role, ""));
                }
                Step::Content { id, delta } => {
                    let message = self.out.iter_mut().rev().find(|m| m.id == id);
                    if let Some(Some(Value::String(content))) = message.map(|m| &mut m.content) {
                        content.push_str(&delta);
                    }
                }
                Step::End { .. } => {}
            }
        }
    }

    fn close(&mut self) {
        let steps = self.voices.close();
        self.steps(steps);
    }

    fn tool(&mut self, item: ToolItem) {
        self.close();
        match item {
            ToolItem::Call { id, name, args, .. } => {
                if self.seen_tools.insert(id.clone()) {
                    self.out.push(event::Message::tool_call(id, name, args));
                }
            }
            ToolItem::Result { id, content, .. } => {
                let message_id = tools::result_message_id(&id);
                if self.seen_tools.insert(message_id.clone()) {
                    self.out
                        .push(event::Message::tool_result(message_id, id, content));
                }
            }
        }
    }

    fn message(&mut self, m: &Message) {
        if m.role == Role::User {
            let steps = self.voices.new_turn();
            self.steps(steps);
            let text = m.text();
            if !text.is_empty() {
                let message = event::Message::text(&m.message_id, agui::Role::User, text);
                self.out.push(message);
            }
            return;
        }
        let (text, reasoning) = dialect::split_text(&m.parts);
        let piece = Piece::Message {
            complete: reply::marked_complete(m.metadata.as_ref()),
        };
        // In the live projection's order: reasoning, calls, text.
        if !reasoning.is_empty() && !m.message_id.is_empty() {
            let steps = self
                .voices
                .piece(Voice::Reasoning, &m.message_id, &reasoning, piece);
            self.steps(steps);
        }
        for part in &m.parts {
            if let PartContent::Data(d) = &part.content {
                if let Some(item) = tools::read(d, part.metadata.as_ref()) {
                    self.tool(item);
                }
            }
        }
        if !text.is_empty() && !m.message_id.is_empty() {
            let steps = self
                .voices
                .piece(Voice::Answer, &m.message_id, &text, piece);
            self.steps(steps);
        }
    }

    fn artifact(&mut self, task_id: &str, artifact: &Artifact) {
        let (text, reasoning) = dialect::split_text(&artifact.parts);
        let id = artifact_message_id(task_id, &artifact_key(task_id, artifact));
        let piece = Piece::Artifact {
            append: false,
            last: true,
        };
        let steps = self.voices.piece(Voice::Reasoning, &id, &reasoning, piece);
        self.steps(steps);
        let steps = self.voices.piece(Voice::Answer, &id, &text, piece);
        self.steps(steps);
        // After the text, as the live projection reads it (`tools` module header).
        for item in tools::in_parts(&artifact.parts) {
            self.tool(item);
        }
    }
}

/// The conversation of `tasks` (oldest first): each task's history, its artifacts, then its
/// current status message, read with the live projection's rules
/// (docs/design.md#4-threads-and-contexts, docs/design.md#6-projection-a2a-to-ag-ui), so the
/// ids and texts, and the tool calls wherever they travelled (messages or artifacts), are
/// those the client was shown live.
pub(crate) fn messages(tasks: &[&Task]) -> Vec<event::Message> {
    let mut rebuild = Rebuild::default();
    let mut seen = std::collections::HashSet::new();
    for task in tasks {
        for m in &task.history {
            if seen.insert(m.message_id.clone()) {
                rebuild.message(m);
            }
        }
        for artifact in &task.artifacts {
            rebuild.artifact(&task.id, artifact);
        }
        if let Some(m) = &task.status.message {
            if seen.insert(m.message_id.clone()) && !task.status.state.is_failure() {
                rebuild.message(m);
            }
        }
    }
    rebuild.close();
    rebuild.out
}

/// True if `client` holds a turn before its newest user message (a user or assistant
/// message, or a tool result): a client that holds none may be a second device on the thread
/// ([`super::context::ContextSource::history_to_read`]).
pub(crate) fn holds_earlier_turns(client: &[crate::agui::input::Message]) -> bool {
    use agui::Role::{Assistant, Tool, User};
    let newest_user = client.iter().rposition(|m| m.role == User);
    client
        .iter()
        .enumerate()
        .any(|(i, m)| Some(i) != newest_user && matches!(m.role, User | Assistant | Tool))
}

/// The client's own turns that the A2A history `a2a` does not hold (on a pick-up: the new
/// user message), in order, as `(id, role, text)`: user and assistant text only.
pub(crate) fn unheld_turns<'a>(
    client: &'a [crate::agui::input::Message],
    a2a: &[event::Message],
) -> Vec<(&'a str, agui::Role, String)> {
    client
        .iter()
        .filter(|m| !a2a.iter().any(|u| u.id == m.id))
        .filter_map(|m| {
            let role = match &m.role {
                role @ (agui::Role::User | agui::Role::Assistant) => role.clone(),
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
/// the ids match (an assistant message also stands for an A2A one with the same text), then
/// the A2A messages the client has not seen, in A2A order. Activity
/// messages are client-only and left out (the client keeps them).
pub(crate) fn merge(
    client: &[crate::agui::input::Message],
    a2a: Vec<event::Message>,
) -> Vec<event::Message> {
    let mut upstream: Vec<Option<event::Message>> = a2a.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(client.len() + upstream.len());
    for m in client.iter().filter(|m| m.role != agui::Role::Activity) {
        let same = upstream
            .iter_mut()
            .find(|u| u.as_ref().is_some_and(|u| u.id == m.id));
        match same {
            Some(slot) => out.extend(slot.take()),
            None => {
                // The same reply under another id (fasta2a's history names the reply with an
                // id its stream never showed): the client's copy stands for it.
                let text = m.content.as_ref().and_then(Value::as_str);
                if let (true, Some(text)) = (m.role == agui::Role::Assistant, text) {
                    let twin = upstream.iter_mut().find(|u| {
                        u.as_ref().is_some_and(|u| {
                            u.role == agui::Role::Assistant
                                && u.text_content().is_some_and(|c| reply::same_text(c, text))
                        })
                    });
                    if let Some(twin) = twin {
                        twin.take();
                    }
                }
                out.push(event::Message::from(m));
            }
        }
    }
    out.extend(upstream.into_iter().flatten());
    out
}

/// The conversation a CopilotKit `connect` restores (the one home of it: CopilotKit's thread
/// `messages`, `state` and `events` routes read the same, docs/copilotkit.md): the messages the
/// client holds (`client`) merged with every turn of the thread's tasks (`tasks`, newest first
/// as `ListTasks` answers), complete and in order.
pub(crate) fn restored(
    client: &[crate::agui::input::Message],
    tasks: &[Task],
) -> Vec<event::Message> {
    let oldest_first: Vec<&Task> = tasks.iter().rev().collect();
    merge(client, messages(&oldest_first))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::a2a::model::ProtocolVersion;
    use agui::Role::{Assistant, User};

    fn text(id: &str, role: agui::Role, text: &str) -> event::Message {
        event::Message::text(id, role, text)
    }

    #[test]
    fn completed_task_history_becomes_messages() {
        let raw = include_str!("../../fixtures/a2a/v1/get-completed.json");
        let env: Value = serde_json::from_str(raw).unwrap();
        let task = ProtocolVersion::V1
            .decode_task(&env["result"].to_string())
            .unwrap();
        let msgs = messages(&[&task]);
        assert_eq!(msgs[0].role, User);
        assert_eq!(msgs[0].id, "msg-stream-echo");
        let contents: Vec<&str> = msgs[1..]
            .iter()
            .map(|m| m.text_content().unwrap())
            .collect();
        assert_eq!(contents, ["hello brave world "], "one reply, one message");
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
            text("u", User, "slow"),
            text("a1", Assistant, "tick 1"),
            text("a2", Assistant, "tick 2"),
        ];
        let merged = merge(&client, upstream);
        let ids: Vec<&str> = merged.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["old", "u", "a1", "a2"]);
        let live = serde_json::from_value::<Vec<crate::agui::input::Message>>(serde_json::json!([
            {"id": "u", "role": "user", "content": "tool"},
            {"id": "T:art", "role": "assistant", "content": "It is sunny in Paris."}
        ]))
        .unwrap();
        let history = vec![
            text("u", User, "tool"),
            text("fresh", Assistant, "It is sunny in Paris.\n"),
        ];
        let ids: Vec<String> = merge(&live, history).iter().map(|m| m.id.clone()).collect();
        assert_eq!(ids, ["u", "T:art"], "the same reply is not shown twice");
        assert_eq!(merged[0].rest["name"], "me", "client fields are kept");
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
            text("m1", User, "Investigate"),
            text("a1", Assistant, "Found it"),
        ];
        assert_eq!(
            unheld_turns(&client, &upstream),
            [("new", User, "and now?".to_owned())]
        );
    }
}
