//! AG-UI's HTTP+Protobuf encoding of events (docs/mapping.md#encodings): each event one
//! `ag_ui.Event` of `@ag-ui/proto` 1.0.0 (`proto/agui/`, generated into [`wire`]), framed
//! as a 4-byte big-endian length and the message. Pure data: an [`Event`] in, bytes out.
//!
//! The message is the one `@ag-ui/proto`'s own `decode` turns back into the event the SSE
//! encoding writes as JSON: the oneof arm and `base_event.type` name the event (the decoder
//! rejects a frame where they differ), `RUN_FINISHED.outcome` is a string beside its
//! `interrupts` and `pending_tool_call_ids`, JSON values are `google.protobuf.Value`s and
//! JSON objects `Struct`s. A message's fields AG-UI's `Message` does not declare are left
//! out: a client strips them from the SSE encoding too. Where the schema wants an object
//! and the event holds something else (never, from the projector), the object is left out
//! (metadata) or empty (activity content), as `@ag-ui/proto`'s encoder does.
//!
//! Events arrive by value: their strings move into the message, nothing is copied but the
//! JSON values (`google.protobuf.Value` owns its tree).

use prost::Message as _;
use serde_json::{Map, Value};

use super::event::{Interrupt, Message, Outcome, SubagentOutcome, TokenUsage, ToolCall};
use super::Event;

/// The media type of the encoding (`@ag-ui/proto`'s `AGUI_MEDIA_TYPE`). `@ag-ui/client`
/// decodes a response as protobuf only when its `Content-Type` is exactly this.
pub(crate) const MEDIA_TYPE: &str = "application/vnd.ag-ui.event+proto";

/// The messages generated from `proto/agui/` (package `ag_ui`).
#[allow(
    unreachable_pub,
    dead_code,
    missing_debug_implementations,
    clippy::all,
    clippy::pedantic
)]
pub(crate) mod wire {
    include!(concat!(env!("OUT_DIR"), "/ag_ui.rs"));
}

use wire::event::Event as Arm;
use wire::EventType as Type;

/// Appends one frame for `event` to `out`: its message's length (4 bytes, big-endian),
/// then the message.
pub(crate) fn encode_frame(event: Event, out: &mut Vec<u8>) {
    let message = message(event);
    let len = message.encoded_len();
    // A message of 4 GiB cannot be framed; events are bounded far below that
    // (`limits.max_event_bytes`, `limits.max_state_bytes`).
    let Ok(prefix) = u32::try_from(len) else {
        let code = crate::error::RunError::Internal.code();
        return encode_frame(Event::run_error(code, "event too large to encode"), out);
    };
    out.reserve(4 + len);
    out.extend_from_slice(&prefix.to_be_bytes());
    // Writing into a `Vec` cannot run out of room.
    let _ = message.encode(out);
}

/// The `ag_ui.Event` of `event`.
pub(crate) fn message(event: Event) -> wire::Event {
    let arm = match event {
        Event::RunStarted {
            thread_id,
            run_id,
            metadata,
        } => Arm::RunStarted(wire::RunStartedEvent {
            base_event: Some(base_with(Type::RunStarted, metadata.as_ref())),
            thread_id,
            run_id,
            ..Default::default()
        }),
        Event::RunFinished {
            thread_id,
            run_id,
            outcome,
            usage,
        } => {
            let mut finished = wire::RunFinishedEvent {
                base_event: Some(base(Type::RunFinished)),
                thread_id,
                run_id,
                usage: usages(usage),
                ..Default::default()
            };
            // `@ag-ui/proto`: no outcome is `""`; the outcome's payload rides beside it.
            match outcome {
                None => {}
                Some(Outcome::Success {
                    pending_tool_call_ids,
                }) => {
                    finished.outcome = "success".into();
                    finished.pending_tool_call_ids = pending_tool_call_ids;
                }
                Some(Outcome::Interrupt { interrupts }) => {
                    finished.outcome = "interrupt".into();
                    finished.interrupts = interrupts.into_iter().map(interrupt).collect();
                }
                Some(Outcome::Cancelled) => finished.outcome = "cancelled".into(),
            }
            Arm::RunFinished(finished)
        }
        Event::RunError {
            message,
            code,
            usage,
        } => Arm::RunError(wire::RunErrorEvent {
            base_event: Some(base(Type::RunError)),
            code,
            message,
            usage: usages(usage),
        }),
        Event::TextMessageStart { message_id, role } => {
            Arm::TextMessageStart(wire::TextMessageStartEvent {
                base_event: Some(base(Type::TextMessageStart)),
                message_id,
                role: Some(role.as_str().to_owned()),
                ..Default::default()
            })
        }
        Event::TextMessageContent { message_id, delta } => {
            Arm::TextMessageContent(wire::TextMessageContentEvent {
                base_event: Some(base(Type::TextMessageContent)),
                message_id,
                delta,
                subagent_run_id: None,
            })
        }
        Event::TextMessageEnd { message_id } => Arm::TextMessageEnd(wire::TextMessageEndEvent {
            base_event: Some(base(Type::TextMessageEnd)),
            message_id,
            subagent_run_id: None,
        }),
        Event::ToolCallStart {
            tool_call_id,
            tool_call_name,
        } => Arm::ToolCallStart(wire::ToolCallStartEvent {
            base_event: Some(base(Type::ToolCallStart)),
            tool_call_id,
            tool_call_name,
            ..Default::default()
        }),
        Event::ToolCallArgs {
            tool_call_id,
            delta,
        } => Arm::ToolCallArgs(wire::ToolCallArgsEvent {
            base_event: Some(base(Type::ToolCallArgs)),
            tool_call_id,
            delta,
            subagent_run_id: None,
        }),
        Event::ToolCallEnd { tool_call_id } => Arm::ToolCallEnd(wire::ToolCallEndEvent {
            base_event: Some(base(Type::ToolCallEnd)),
            tool_call_id,
            subagent_run_id: None,
        }),
        Event::ReasoningStart { message_id } => Arm::ReasoningStart(wire::ReasoningStartEvent {
            base_event: Some(base(Type::ReasoningStart)),
            message_id,
            subagent_run_id: None,
        }),
        Event::ReasoningMessageStart { message_id, role } => {
            Arm::ReasoningMessageStart(wire::ReasoningMessageStartEvent {
                base_event: Some(base(Type::ReasoningMessageStart)),
                message_id,
                role: role.as_str().to_owned(),
                subagent_run_id: None,
            })
        }
        Event::ReasoningMessageContent { message_id, delta } => {
            Arm::ReasoningMessageContent(wire::ReasoningMessageContentEvent {
                base_event: Some(base(Type::ReasoningMessageContent)),
                message_id,
                delta,
                subagent_run_id: None,
            })
        }
        Event::ReasoningMessageEnd { message_id } => {
            Arm::ReasoningMessageEnd(wire::ReasoningMessageEndEvent {
                base_event: Some(base(Type::ReasoningMessageEnd)),
                message_id,
                subagent_run_id: None,
            })
        }
        Event::ReasoningEnd { message_id } => Arm::ReasoningEnd(wire::ReasoningEndEvent {
            base_event: Some(base(Type::ReasoningEnd)),
            message_id,
            subagent_run_id: None,
        }),
        Event::ToolCallResult {
            message_id,
            tool_call_id,
            content,
            role,
        } => Arm::ToolCallResult(wire::ToolCallResultEvent {
            base_event: Some(base(Type::ToolCallResult)),
            message_id,
            tool_call_id,
            content: Some(content),
            role: Some(role.as_str().to_owned()),
            ..Default::default()
        }),
        Event::StateSnapshot { snapshot } => {
            // The snapshot is held as text (`RawJson`), valid JSON by construction.
            let value: Value = serde_json::from_str(snapshot.0.get()).unwrap_or_default();
            Arm::StateSnapshot(wire::StateSnapshotEvent {
                base_event: Some(base(Type::StateSnapshot)),
                snapshot: Some(crate::json::to_protobuf(&value)),
                subagent_run_id: None,
            })
        }
        Event::StateDelta { delta } => Arm::StateDelta(wire::StateDeltaEvent {
            base_event: Some(base(Type::StateDelta)),
            delta: delta.into_iter().map(patch_operation).collect(),
            subagent_run_id: None,
        }),
        Event::MessagesSnapshot { messages } => {
            Arm::MessagesSnapshot(wire::MessagesSnapshotEvent {
                base_event: Some(base(Type::MessagesSnapshot)),
                messages: messages.into_iter().map(snapshot_message).collect(),
            })
        }
        Event::ActivitySnapshot {
            message_id,
            activity_type,
            content,
            replace,
        } => Arm::ActivitySnapshot(wire::ActivitySnapshotEvent {
            base_event: Some(base(Type::ActivitySnapshot)),
            message_id,
            activity_type,
            content: Some(object(&content).unwrap_or_default()),
            replace,
            subagent_run_id: None,
        }),
        Event::ActivityDelta {
            message_id,
            activity_type,
            patch,
        } => Arm::ActivityDelta(wire::ActivityDeltaEvent {
            base_event: Some(base(Type::ActivityDelta)),
            message_id,
            activity_type,
            patch: patch.into_iter().map(patch_operation).collect(),
            subagent_run_id: None,
        }),
        Event::Custom { name, value } => Arm::Custom(wire::CustomEvent {
            base_event: Some(base(Type::Custom)),
            name,
            value: Some(crate::json::to_protobuf(&value)),
            subagent_run_id: None,
        }),
        Event::SubagentStarted {
            subagent_run_id,
            name,
            parent_tool_call_id,
            metadata,
        } => Arm::SubagentStarted(wire::SubagentStartedEvent {
            base_event: Some(base_with(Type::SubagentStarted, metadata.as_ref())),
            subagent_run_id,
            name,
            parent_tool_call_id,
            ..Default::default()
        }),
        Event::SubagentFinished {
            subagent_run_id,
            result,
            outcome,
            metadata,
        } => {
            // `@ag-ui/proto`: the outcome's type as a string, its interrupts beside it.
            let (outcome, interrupt_ids) = match outcome {
                None => (String::new(), Vec::new()),
                Some(SubagentOutcome::Success) => ("success".to_owned(), Vec::new()),
                Some(SubagentOutcome::Suspended { interrupt_ids }) => {
                    ("suspended".to_owned(), interrupt_ids)
                }
            };
            Arm::SubagentFinished(wire::SubagentFinishedEvent {
                base_event: Some(base_with(Type::SubagentFinished, metadata.as_ref())),
                subagent_run_id,
                result: result.as_ref().map(crate::json::to_protobuf),
                outcome,
                interrupt_ids,
            })
        }
        Event::SubagentError {
            subagent_run_id,
            message,
            code,
            metadata,
        } => Arm::SubagentError(wire::SubagentErrorEvent {
            base_event: Some(base_with(Type::SubagentError, metadata.as_ref())),
            subagent_run_id,
            message,
            code,
        }),
        Event::Raw { event, source } => Arm::Raw(wire::RawEvent {
            base_event: Some(base(Type::Raw)),
            event: Some(crate::json::to_protobuf(&event)),
            source,
            subagent_run_id: None,
        }),
    };
    wire::Event { event: Some(arm) }
}

/// A run's token usage as `ag_ui.Usage` entries (counts are bounded by 2^53 - 1 where they
/// are summed, `src/bridge/usage.rs`, so they fit `int64`).
fn usages(usage: Option<Vec<TokenUsage>>) -> Vec<wire::Usage> {
    let count = |n: Option<u64>| n.map(|n| i64::try_from(n).unwrap_or(i64::MAX));
    usage
        .unwrap_or_default()
        .into_iter()
        .map(|u| wire::Usage {
            input_tokens: count(u.input_tokens),
            output_tokens: count(u.output_tokens),
            total_tokens: count(u.total_tokens),
            reasoning_tokens: count(u.reasoning_tokens),
            cached_input_tokens: count(u.cached_input_tokens),
            ..Default::default()
        })
        .collect()
}

/// The fields every event carries: its type (which must agree with the oneof arm).
fn base(kind: Type) -> wire::BaseEvent {
    wire::BaseEvent {
        r#type: kind as i32,
        ..Default::default()
    }
}

fn base_with(kind: Type, metadata: Option<&Value>) -> wire::BaseEvent {
    wire::BaseEvent {
        metadata: metadata.and_then(object),
        ..base(kind)
    }
}

/// A JSON object as a `Struct`; anything else is none.
fn object(v: &Value) -> Option<prost_types::Struct> {
    v.as_object().map(crate::json::to_protobuf_struct)
}

fn interrupt(i: Interrupt) -> wire::Interrupt {
    wire::Interrupt {
        id: i.id,
        reason: i.reason,
        message: i.message,
        tool_call_id: i.tool_call_id,
        response_schema: i.response_schema.as_ref().map(crate::json::to_protobuf),
        metadata: i.metadata.as_ref().map(crate::json::to_protobuf),
        ..Default::default()
    }
}

fn patch_operation(op: json_patch::PatchOperation) -> wire::JsonPatchOperation {
    use json_patch::PatchOperation as Op;
    use wire::JsonPatchOperationType as Kind;
    let (kind, path, from, value) = match op {
        Op::Add(o) => (Kind::Add, o.path, None, Some(o.value)),
        Op::Remove(o) => (Kind::Remove, o.path, None, None),
        Op::Replace(o) => (Kind::Replace, o.path, None, Some(o.value)),
        Op::Move(o) => (Kind::Move, o.path, Some(o.from), None),
        Op::Copy(o) => (Kind::Copy, o.path, Some(o.from), None),
        Op::Test(o) => (Kind::Test, o.path, None, Some(o.value)),
    };
    wire::JsonPatchOperation {
        op: kind as i32,
        path: path.as_str().to_owned(),
        from: from.map(|f| f.as_str().to_owned()),
        value: value.as_ref().map(crate::json::to_protobuf),
    }
}

/// A snapshot message as AG-UI's one `Message` (the union of every role's fields): text
/// content in `content`, content parts in `content_parts`, an activity's object in
/// `activity_content`.
fn snapshot_message(m: Message) -> wire::Message {
    let Message {
        content,
        id,
        role,
        tool_call_id,
        tool_calls,
        mut rest,
    } = m;
    let text = |key: &str, rest: &mut Map<String, Value>| match rest.remove(key) {
        Some(Value::String(s)) => Some(s),
        _ => None,
    };
    let mut wire = wire::Message {
        id,
        role: role.as_str().to_owned(),
        tool_call_id,
        name: text("name", &mut rest),
        error: text("error", &mut rest),
        encrypted_value: text("encryptedValue", &mut rest),
        subagent_run_id: text("subagentRunId", &mut rest),
        activity_type: text("activityType", &mut rest),
        metadata: rest.get("metadata").and_then(object),
        ..Default::default()
    };
    wire.tool_calls = if tool_calls.is_empty() {
        // An echoed client message keeps its calls as it sent them.
        rest.get("toolCalls")
            .and_then(Value::as_array)
            .map(|calls| calls.iter().filter_map(echoed_tool_call).collect())
            .unwrap_or_default()
    } else {
        tool_calls.into_iter().map(tool_call).collect()
    };
    match content {
        Some(Value::Array(parts)) => {
            wire.content_parts = parts.iter().filter_map(content_part).collect();
        }
        Some(content) if role == super::Role::Activity => {
            wire.activity_content = Some(object(&content).unwrap_or_default());
        }
        Some(Value::String(s)) => wire.content = Some(s),
        // Content AG-UI's `Message` cannot hold (a number, an object outside an activity):
        // left out, as a client strips it from the SSE encoding.
        Some(_) | None => {}
    }
    wire
}

fn tool_call(call: ToolCall) -> wire::ToolCall {
    wire::ToolCall {
        id: call.id,
        r#type: call.kind.to_owned(),
        function: Some(wire::tool_call::Function {
            name: call.function.name,
            arguments: call.function.arguments,
        }),
        ..Default::default()
    }
}

/// A client's call as it sent it (`{id, type, function: {name, arguments}}`); one without
/// an id is not a call.
fn echoed_tool_call(call: &Value) -> Option<wire::ToolCall> {
    let str_at = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
    let function = call.get("function").unwrap_or(&Value::Null);
    Some(wire::ToolCall {
        id: str_at(call, "id")?,
        r#type: str_at(call, "type").unwrap_or_else(|| "function".into()),
        function: Some(wire::tool_call::Function {
            name: str_at(function, "name").unwrap_or_default(),
            arguments: str_at(function, "arguments").unwrap_or_default(),
        }),
        metadata: call.get("metadata").and_then(object),
        encrypted_value: str_at(call, "encryptedValue"),
    })
}

/// One content part of a client's message (AG-UI 1.0 `InputContent`); a kind the schema
/// has no arm for is left out, as `@ag-ui/proto`'s encoder does. The retired `binary`
/// part rides as a document marked `legacyBinary`, as there.
fn content_part(part: &Value) -> Option<wire::InputContent> {
    use wire::input_content::Part;
    let str_at = |key: &str| part.get(key).and_then(Value::as_str).map(str::to_owned);
    let metadata = || part.get("metadata").map(crate::json::to_protobuf);
    let media = || part.get("source").and_then(source);
    let arm = match part.get("type").and_then(Value::as_str)? {
        "text" => Part::Text(wire::TextInputPart {
            text: str_at("text").unwrap_or_default(),
            id: str_at("id"),
            metadata: metadata(),
        }),
        "image" => Part::Image(wire::ImageInputPart {
            source: media(),
            metadata: metadata(),
            id: str_at("id"),
        }),
        "audio" => Part::Audio(wire::AudioInputPart {
            source: media(),
            metadata: metadata(),
            id: str_at("id"),
        }),
        "video" => Part::Video(wire::VideoInputPart {
            source: media(),
            metadata: metadata(),
            id: str_at("id"),
        }),
        "document" => Part::Document(wire::DocumentInputPart {
            source: media(),
            metadata: metadata(),
            id: str_at("id"),
        }),
        "binary" => {
            use wire::input_content_source::Source;
            let mime_type = str_at("mimeType");
            let source = if let Some(data) = str_at("data") {
                Source::Data(wire::InputContentDataSource {
                    value: data,
                    mime_type: mime_type.unwrap_or_default(),
                })
            } else {
                Source::Url(wire::InputContentUrlSource {
                    value: str_at("url").or_else(|| str_at("id"))?,
                    mime_type,
                })
            };
            let mut marker = Map::new();
            marker.insert("legacyBinary".into(), Value::Bool(true));
            for key in ["filename", "id"] {
                if let Some(v) = part.get(key) {
                    marker.insert(key.into(), v.clone());
                }
            }
            Part::Document(wire::DocumentInputPart {
                source: Some(wire::InputContentSource {
                    source: Some(source),
                }),
                metadata: Some(crate::json::to_protobuf(&Value::Object(marker))),
                id: None,
            })
        }
        _ => return None,
    };
    Some(wire::InputContent { part: Some(arm) })
}

/// A media part's `source`: `{type: "data" | "url" | "file", value, mimeType?, provider?}`.
fn source(source: &Value) -> Option<wire::InputContentSource> {
    use wire::input_content_source::Source;
    let str_at = |key: &str| source.get(key).and_then(Value::as_str).map(str::to_owned);
    let value = str_at("value").unwrap_or_default();
    let arm = match source.get("type").and_then(Value::as_str)? {
        "data" => Source::Data(wire::InputContentDataSource {
            value,
            mime_type: str_at("mimeType").unwrap_or_default(),
        }),
        "url" => Source::Url(wire::InputContentUrlSource {
            value,
            mime_type: str_at("mimeType"),
        }),
        "file" => Source::File(wire::InputContentFileSource {
            value,
            provider: str_at("provider"),
            mime_type: str_at("mimeType"),
        }),
        _ => return None,
    };
    Some(wire::InputContentSource { source: Some(arm) })
}

#[cfg(test)]
#[path = "proto_tests.rs"]
mod tests;
