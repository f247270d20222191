//! Message parts in the projection (docs/mapping.md): an agent message's text into AG-UI
//! text messages (the reply rule decides which message each piece joins), its data parts into
//! tool calls and results (once per call id), A2UI surfaces, and an agent's own state updates
//! (`agui-state-snapshot` / `agui-state-delta`, docs/design.md#8-forwarding-lane); anything
//! else kept as a `RAW` note. Also what a part is as state (`part_json`) and its size.

use serde_json::{json, Value};

use super::super::dialect::{self};
use super::super::reply::{self, Piece, Step, Voice};
use super::super::state::{add, layout, Op, Refusal, Writer};
use super::super::tools::{self, ToolItem};
use super::Projector;
use crate::a2a::model::{Message, Part, PartContent, Role};
use crate::agui::{self, Event};
use crate::error::RunError;
use json_patch::jsonptr::PointerBuf;

/// docs/design.md#8-forwarding-lane: an agent's update of the app's shared state.
pub(super) const AGENT_STATE_SNAPSHOT: &str = "agui-state-snapshot";
pub(super) const AGENT_STATE_DELTA: &str = "agui-state-delta";

/// A data part that acts on its own wherever it comes: a tool call or result, a state
/// update, an A2UI operation.
pub(super) fn is_agent_update(data: &Value, part: &Part) -> bool {
    tools::read(data, part.metadata.as_ref()).is_some()
        || matches!(
            data.get("type").and_then(Value::as_str),
            Some(AGENT_STATE_SNAPSHOT | AGENT_STATE_DELTA)
        )
        || a2ui_operation(data).is_some()
}

pub(super) fn raw_event(event: Value) -> Event {
    Event::Raw {
        event,
        source: Some("a2a".into()),
    }
}

/// `(surfaceId, operation)` if `data` is an A2UI surface operation.
pub(super) fn a2ui_operation(data: &Value) -> Option<(String, &Value)> {
    const OPS: [&str; 4] = [
        "beginRendering",
        "surfaceUpdate",
        "dataModelUpdate",
        "deleteSurface",
    ];
    let obj = data.as_object()?;
    OPS.iter().find_map(|op| {
        let body = obj.get(*op)?;
        let surface = body.get("surfaceId")?.as_str()?;
        Some((surface.to_owned(), data))
    })
}

/// A part as it appears in projected state (`docs/mapping.md`).
pub(super) fn part_json(part: &Part) -> Value {
    let mut obj = match &part.content {
        PartContent::Text(t) => json!({"type": "text", "text": t}),
        PartContent::Data(d) => json!({"type": "data", "data": d}),
        PartContent::Bytes(b) => json!({"type": "file", "bytes": b}),
        PartContent::Url(u) => json!({"type": "file", "url": u}),
        PartContent::Unknown(v) => json!({"type": "unknown", "raw": v}),
    };
    if let Some(m) = &part.media_type {
        obj["mediaType"] = json!(m);
    }
    if let Some(f) = &part.filename {
        obj["filename"] = json!(f);
    }
    if let Some(m) = &part.metadata {
        obj["metadata"] = m.clone();
    }
    obj
}

pub(super) fn part_size(part: &Part) -> usize {
    match &part.content {
        PartContent::Text(t) | PartContent::Bytes(t) | PartContent::Url(t) => t.len(),
        PartContent::Data(v) | PartContent::Unknown(v) => v.to_string().len(),
    }
}

impl Projector {
    /// Projects an agent message's parts: text through the reply rule ([`Replies`]), tool
    /// calls, state and A2UI data parts into their events, the rest as `RAW`. `asking`: the
    /// message is a question, whose other data parts are the interrupt's request.
    pub(super) fn on_message(&mut self, msg: &Message, asking: bool, out: &mut Vec<Event>) {
        if msg.role == Role::User {
            return;
        }
        let (text, reasoning) = dialect::split_text(&msg.parts);
        let id = (!text.is_empty() || !reasoning.is_empty()).then(|| self.message_id_of(msg));
        let piece = Piece::Message {
            complete: reply::marked_complete(msg.metadata.as_ref()),
        };
        // The model thinks before it acts: its reasoning first, then its calls, then its text.
        if let (Some(id), false) = (&id, reasoning.is_empty()) {
            let steps = self.voices.piece(Voice::Reasoning, id, &reasoning, piece);
            self.emit_steps(steps, out);
        }
        for part in &msg.parts {
            match &part.content {
                PartContent::Text(_) => {}
                // A question's own data is its request; calls and state updates still apply.
                PartContent::Data(d) if asking && !is_agent_update(d, part) => {}
                PartContent::Data(d) => self.on_data_part(d, part, out),
                _ => out.push(raw_event(json!({"part": part_json(part)}))),
            }
        }
        if let (Some(id), false) = (id, text.is_empty()) {
            let steps = self.voices.piece(Voice::Answer, &id, &text, piece);
            self.emit_steps(steps, out);
        }
    }

    /// The id of an agent message's text: its messageId, or one made up for a message
    /// without one.
    fn message_id_of(&mut self, msg: &Message) -> String {
        if msg.message_id.is_empty() {
            self.anonymous += 1;
            format!(
                "{}-message-{}",
                self.frame.task_id.as_deref().unwrap_or("a2a"),
                self.anonymous
            )
        } else {
            msg.message_id.clone()
        }
    }

    /// Turns reply steps into text events (the answer) and reasoning events (the thoughts:
    /// one reasoning span per reasoning message), counting new text of both against
    /// `limits.max_text_bytes_per_run`.
    pub(super) fn emit_steps(&mut self, steps: Vec<(Voice, Step)>, out: &mut Vec<Event>) {
        for step in steps {
            match step {
                (Voice::Answer, Step::Start { id }) => out.push(Event::TextMessageStart {
                    message_id: id,
                    role: agui::Role::Assistant,
                }),
                (Voice::Reasoning, Step::Start { id }) => {
                    out.push(Event::ReasoningStart {
                        message_id: id.clone(),
                    });
                    out.push(Event::ReasoningMessageStart {
                        message_id: id,
                        role: agui::Role::Reasoning,
                    });
                }
                (voice, Step::Content { id, delta }) => {
                    if !self.charge_text(delta.len(), out) {
                        return;
                    }
                    out.push(match voice {
                        Voice::Answer => Event::TextMessageContent {
                            message_id: id,
                            delta,
                        },
                        Voice::Reasoning => Event::ReasoningMessageContent {
                            message_id: id,
                            delta,
                        },
                    });
                }
                (Voice::Answer, Step::End { id }) => {
                    out.push(Event::TextMessageEnd { message_id: id })
                }
                (Voice::Reasoning, Step::End { id }) => {
                    out.push(Event::ReasoningMessageEnd {
                        message_id: id.clone(),
                    });
                    out.push(Event::ReasoningEnd { message_id: id });
                }
            }
        }
    }

    /// Closes the open text or reasoning message (a tool call, an interrupt, the run's end).
    pub(super) fn close_messages(&mut self, out: &mut Vec<Event>) {
        let steps = self.voices.close();
        self.emit_steps(steps, out);
    }

    pub(super) fn on_data_part(&mut self, data: &Value, part: &Part, out: &mut Vec<Event>) {
        if let Some(item) = tools::read(data, part.metadata.as_ref()) {
            self.on_tool(item, out);
            return;
        }
        match data.get("type").and_then(Value::as_str) {
            // docs/design.md#8-forwarding-lane: an agent may update the app's shared state.
            Some(AGENT_STATE_SNAPSHOT) => {
                let (Some(snapshot), Some(shadow)) =
                    (data.get("snapshot"), self.phase.running_mut())
                else {
                    return;
                };
                match shadow.replace_app_state(snapshot.clone()) {
                    Ok(()) => out.push(Event::StateSnapshot {
                        snapshot: shadow.snapshot(),
                    }),
                    Err(Refusal::Limit(reason) | Refusal::Invalid(reason)) => {
                        out.extend(self.fail(&RunError::LimitExceeded(reason)))
                    }
                }
            }
            Some(AGENT_STATE_DELTA) => {
                let patch = data.get("patch").cloned().unwrap_or(Value::Null);
                let Ok(ops) = serde_json::from_value::<Vec<Op>>(patch) else {
                    out.push(raw_event(json!({"gatewayNote": "state patch skipped",
                        "reason": "not an RFC 6902 patch", "part": part_json(part)})));
                    return;
                };
                // The gateway's own subtree is not the agent's to edit (nor to move away).
                let (own, foreign): (Vec<Op>, Vec<Op>) = ops.into_iter().partition(|op| {
                    layout::is_gateway_owned(op.path())
                        || matches!(op, json_patch::PatchOperation::Move(m) if layout::is_gateway_owned(&m.from))
                });
                if !own.is_empty() {
                    out.push(raw_event(
                        json!({"gatewayNote": "patch of /a2a ignored", "patch": own}),
                    ));
                }
                self.delta(foreign, Writer::Agent, out);
            }
            // Its schema is surfaced on the interrupt; nothing to stream.
            Some(dialect::GATEWAY_REQUEST) => {}
            _ => {
                if let Some((surface, op)) = a2ui_operation(data) {
                    self.on_a2ui(surface, op, out);
                } else {
                    out.push(raw_event(json!({"part": part_json(part)})));
                }
            }
        }
    }

    /// docs/design.md#6-projection-a2a-to-ag-ui tool-call row: a call becomes
    /// `TOOL_CALL_START/ARGS/END` (closing the text
    /// before it), a result `TOOL_CALL_RESULT`; each once per run, however often the
    /// upstream repeats it (ADK sends a call in its partial and its final event, and again in
    /// the task's history or artifacts), from a message or an artifact alike.
    pub(super) fn on_tool(&mut self, item: ToolItem, out: &mut Vec<Event>) {
        match item {
            ToolItem::Call {
                id,
                name,
                args,
                subagent_session,
            } => {
                if !self.tool_calls.insert(id.clone()) {
                    return;
                }
                self.close_messages(out);
                out.push(Event::ToolCallStart {
                    tool_call_id: id.clone(),
                    tool_call_name: name.clone(),
                });
                out.push(Event::ToolCallArgs {
                    tool_call_id: id.clone(),
                    delta: args,
                });
                out.push(Event::ToolCallEnd {
                    tool_call_id: id.clone(),
                });
                // docs/mapping.md#delegation-to-other-agents: the sub-agent starts inside
                // the call that delegates.
                self.on_delegating_call(&id, &name, subagent_session.as_deref(), out);
            }
            ToolItem::Result {
                id,
                content,
                name,
                report,
            } => {
                if !self.tool_results.insert(id.clone()) {
                    return;
                }
                self.close_messages(out);
                self.on_delegation_result(&id, name.as_deref(), &report, out);
                out.push(Event::ToolCallResult {
                    message_id: tools::result_message_id(&id),
                    tool_call_id: id,
                    content,
                    role: agui::Role::Tool,
                });
            }
        }
    }

    /// A2UI surface operations become one activity message per surface.
    pub(super) fn on_a2ui(&mut self, surface: String, op: &Value, out: &mut Vec<Event>) {
        const KIND: &str = "a2ui-surface";
        if self.surfaces.insert(surface.clone()) {
            out.push(Event::ActivitySnapshot {
                message_id: surface,
                activity_type: KIND.into(),
                content: json!({"operations": [op]}),
                replace: None,
            });
        } else {
            out.push(Event::ActivityDelta {
                message_id: surface,
                activity_type: KIND.into(),
                patch: vec![add(
                    PointerBuf::from_tokens(["operations", "-"]),
                    op.clone(),
                )],
            });
        }
    }
}
