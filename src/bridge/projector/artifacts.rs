//! Artifacts in the projection (docs/mapping.md, artifact rows): each artifact's object at
//! its state path (`/view/artifacts/<key>`, or where its metadata points, never deeper than
//! `limits.max_state_depth`), chunks appended or replacing, the run's artifact bytes counted
//! against `limits.max_artifact_bytes_per_run`, an artifact's text also streamed as one
//! message (one reply, one message) and tool calls in its data parts shown once per call id.

use serde_json::{json, Map, Value};

use super::super::dialect;
use super::super::history;
use super::super::reply::{Piece, Voice};
use super::super::state::{self, add, layout, Refusal, Writer};
use super::super::tools;
use super::parts::{part_json, part_size, raw_event};
use super::Projector;
use crate::a2a::model::{Artifact, ArtifactUpdate};
use crate::agui::Event;
use crate::error::RunError;
use json_patch::jsonptr::PointerBuf;

#[derive(Debug)]
pub(super) struct ArtifactTrack {
    pub(super) pointer: PointerBuf,
    pub(super) text: String,
    pub(super) message_id: String,
    /// Its last chunk came (or it arrived whole).
    pub(super) complete: bool,
}

/// The artifact object at its state path (`docs/mapping.md`).
pub(super) fn artifact_state(
    key: &str,
    task_id: &str,
    artifact: &Artifact,
    text: &str,
    complete: bool,
) -> Value {
    let mut obj = Map::new();
    obj.insert("artifactId".into(), json!(key));
    obj.insert("taskId".into(), json!(task_id));
    if let Some(n) = &artifact.name {
        obj.insert("name".into(), json!(n));
    }
    if let Some(d) = &artifact.description {
        obj.insert("description".into(), json!(d));
    }
    let parts = artifact.parts.iter().map(part_json).collect();
    obj.insert("parts".into(), Value::Array(parts));
    obj.insert("text".into(), json!(text));
    obj.insert("complete".into(), json!(complete));
    if let Some(m) = &artifact.metadata {
        obj.insert("metadata".into(), m.clone());
    }
    Value::Object(obj)
}

/// Where an artifact lives: its `metadata.path` if that is a pointer outside `/a2a`,
/// else `/view/artifacts/<id>` (docs/design.md#6-projection-a2a-to-ag-ui).
pub(super) fn artifact_pointer(key: &str, metadata: Option<&Value>) -> PointerBuf {
    metadata
        .and_then(|m| m.get("path"))
        .and_then(Value::as_str)
        .and_then(state::parse_pointer)
        .filter(|p| !layout::is_gateway_owned(p))
        .unwrap_or_else(|| layout::artifact(key))
}

impl Projector {
    pub(super) fn on_artifact_update(&mut self, update: &ArtifactUpdate, out: &mut Vec<Event>) {
        self.saw_task = true;
        self.on_artifact(
            &update.task_id,
            &update.artifact,
            update.append,
            update.last_chunk,
            out,
        );
    }

    /// docs/design.md#6-projection-a2a-to-ag-ui artifact row: the artifact lives at
    /// `/view/artifacts/<id>` (or its metadata `path`); `append` adds parts at `/parts/-`;
    /// `lastChunk` sets `complete` and the final `text`. Text parts also stream as an
    /// assistant text message, and tool call and result parts become tool call events.
    pub(super) fn on_artifact(
        &mut self,
        task_id: &str,
        artifact: &Artifact,
        append: bool,
        last_chunk: bool,
        out: &mut Vec<Event>,
    ) {
        let size: usize = artifact.parts.iter().map(part_size).sum();
        self.artifact_bytes += size;
        if self.artifact_bytes > self.frame.max_artifact_bytes {
            let msg = format!(
                "artifacts of this run exceed limits.max_artifact_bytes_per_run ({} bytes)",
                self.frame.max_artifact_bytes
            );
            out.extend(self.fail(&RunError::LimitExceeded(msg)));
            return;
        }
        let key = history::artifact_key(task_id, artifact);
        // The artifact's `text` is its answer; its thought parts stream as reasoning.
        let (chunk_text, reasoning) = dialect::split_text(&artifact.parts);
        let known = self.artifacts.contains_key(&key);
        let mut ops = Vec::new();
        if append && known {
            let track = &self.artifacts[&key];
            let append_at = layout::artifact_part_append(&track.pointer);
            for part in &artifact.parts {
                ops.push(add(append_at.clone(), part_json(part)));
            }
        } else {
            let pointer = artifact_pointer(&key, artifact.metadata.as_ref());
            let Some(shadow) = self.phase.shadow() else {
                return;
            };
            // docs/design.md#6-projection-a2a-to-ag-ui: never deeper than max_state_depth;
            // checked before any parent is made.
            if let Err(Refusal::Limit(reason) | Refusal::Invalid(reason)) =
                shadow.check_depth(&pointer)
            {
                out.extend(self.fail(&RunError::LimitExceeded(reason)));
                return;
            }
            let Some(parents) = shadow.parents_of(&pointer) else {
                out.push(raw_event(json!({"gatewayNote": "artifact path blocked by a non-object", "path": pointer.as_str()})));
                return;
            };
            let obj = artifact_state(&key, task_id, artifact, &chunk_text, last_chunk);
            ops.extend(parents);
            ops.push(add(pointer.clone(), obj));
            let message_id = history::artifact_message_id(task_id, &key);
            let track = self.artifacts.entry(key.clone()).or_insert(ArtifactTrack {
                pointer: pointer.clone(),
                text: String::new(),
                message_id,
                complete: false,
            });
            track.pointer = pointer;
            track.text = chunk_text.clone();
            track.complete = last_chunk;
        }
        let track = self.artifacts.get_mut(&key).expect("tracked above");
        if append && known {
            track.text.push_str(&chunk_text);
        }
        if last_chunk && append && known {
            track.complete = true;
            let at = |field| layout::artifact_field(&track.pointer, field);
            ops.push(add(at("complete"), json!(true)));
            ops.push(add(at("text"), json!(track.text)));
        }
        let message_id = track.message_id.clone();
        self.delta(ops, Writer::Gateway, out);
        if self.phase.is_finished() {
            return;
        }
        let piece = Piece::Artifact {
            append: append && known,
            last: last_chunk,
        };
        let steps = self
            .voices
            .piece(Voice::Reasoning, &message_id, &reasoning, piece);
        self.emit_steps(steps, out);
        let steps = self
            .voices
            .piece(Voice::Answer, &message_id, &chunk_text, piece);
        self.emit_steps(steps, out);
        // ADK's new executor sends its function calls and responses as artifacts: tool calls
        // as in a message, after the chunk's text (`tools` module header).
        for item in tools::in_parts(&artifact.parts) {
            if self.phase.is_finished() {
                return;
            }
            self.on_tool(item, out);
        }
    }

    /// A completed task's artifacts are complete, `lastChunk` or not: each one still open
    /// gets `complete: true` and its final `text`.
    pub(super) fn complete_artifacts(&mut self, out: &mut Vec<Event>) {
        let mut ops = Vec::new();
        let mut open: Vec<&mut ArtifactTrack> = self
            .artifacts
            .values_mut()
            .filter(|a| !a.complete)
            .collect();
        open.sort_by(|a, b| a.pointer.cmp(&b.pointer));
        for track in open {
            track.complete = true;
            let at = |field| layout::artifact_field(&track.pointer, field);
            ops.push(add(at("complete"), json!(true)));
            ops.push(add(at("text"), json!(track.text)));
        }
        self.delta(ops, Writer::Gateway, out);
    }
}
