//! The state document of a run: its layout, its patch operations, and the shadow that
//! checks and applies them. The one home of every state path the gateway owns and of the
//! rules that keep the document safe (docs/design.md#6-projection-a2a-to-ag-ui,
//! docs/design.md#9-reliability-and-limits; `docs/mapping.md`).
//!
//! Layout:
//! - `/a2a` is the gateway's: `/a2a/contextId`, `/a2a/task` ([`TaskEntry`]: `{id, state,
//!   message, updatedAt}`), `/a2a/pendingInterrupts/<interruptId>`. Agents' patches never write
//!   there; the client sends it back and the gateway reads it ([`ClientView`]).
//! - `/view/artifacts/<artifactId>`: artifacts (or the pointer in an artifact's
//!   `metadata.path`, never under `/a2a`).
//! - Everything else belongs to the app ([`app_part`]), the rest of `/view` included: the
//!   lane forwards it, an agent's snapshot replaces it.
//!
//! Operations are RFC 6902 operations, typed ([`Op`] is `json_patch::PatchOperation`,
//! pointers are `jsonptr` pointers, so escaping has one implementation).
//!
//! Safety, by construction: every patch is checked before it is applied, against the
//! document as it is, and refused whole if one operation would
//! - use a pointer of more than `limits.max_state_depth` segments,
//! - `copy` from the root or from an ancestor of its target (or `move` into itself),
//! - nest the document deeper than the pointer depth plus [`MAX_VALUE_NESTING`],
//! - grow the document past its byte budget (or, for an agent's patch, grow the agent's
//!   share past `limits.max_state_bytes`); the size of a `copy` is measured on its source.
//!
//! A refused patch is never applied, so the document stays what the client holds; the
//! projector turns a [`Refusal::Limit`] into `RUN_ERROR limit_exceeded` and an
//! [`Refusal::Invalid`] patch into a `RAW` note. Sizes and depths are measured without
//! recursion, and the document is dismantled without recursion when dropped.

use std::borrow::Cow;

use json_patch::jsonptr::{Pointer, PointerBuf};
use json_patch::{AddOperation, PatchOperation};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use crate::a2a::model::TaskState;
use crate::agui::event::RawJson;

/// One RFC 6902 operation.
pub(crate) type Op = PatchOperation;

/// How deep a value may nest below its pointer: serde_json refuses to parse anything deeper
/// (its recursion limit), so no value from a client or an upstream is deeper.
pub(crate) const MAX_VALUE_NESTING: usize = 128;

/// The pointers the gateway owns. Nothing else spells them.
pub(crate) mod layout {
    use json_patch::jsonptr::{Pointer, PointerBuf};

    /// The gateway's subtree.
    pub(crate) const A2A: &str = "a2a";
    /// `/a2a/contextId`.
    pub(crate) const CONTEXT_ID: &str = "contextId";
    /// `/a2a/task`.
    pub(crate) const TASK: &str = "task";
    /// `/a2a/pendingInterrupts`.
    pub(crate) const PENDING_INTERRUPTS: &str = "pendingInterrupts";
    /// `/view`, whose `artifacts` member is the gateway's.
    pub(crate) const VIEW: &str = "view";
    /// `/view/artifacts`.
    pub(crate) const ARTIFACTS: &str = "artifacts";
    /// `/a2a/stateDigests`: digests of the app state's members as last projected, for a
    /// state patch on the next run (`docs/forwarding.md`).
    pub(crate) const STATE_DIGESTS: &str = "stateDigests";

    /// `/a2a/stateDigests`.
    pub(crate) fn state_digests() -> PointerBuf {
        PointerBuf::from_tokens([A2A, STATE_DIGESTS])
    }

    /// `/a2a/task`.
    pub(crate) fn task() -> PointerBuf {
        PointerBuf::from_tokens([A2A, TASK])
    }

    /// `/a2a/pendingInterrupts`.
    pub(crate) fn pending_interrupts() -> PointerBuf {
        PointerBuf::from_tokens([A2A, PENDING_INTERRUPTS])
    }

    /// `/a2a/pendingInterrupts/<id>`.
    pub(crate) fn pending_interrupt(id: &str) -> PointerBuf {
        PointerBuf::from_tokens([A2A, PENDING_INTERRUPTS, id])
    }

    /// `/view/artifacts/<id>`.
    pub(crate) fn artifact(id: &str) -> PointerBuf {
        PointerBuf::from_tokens([VIEW, ARTIFACTS, id])
    }

    /// `<artifact>/parts/-`: appends one part.
    pub(crate) fn artifact_part_append(artifact: &Pointer) -> PointerBuf {
        artifact.concat(&PointerBuf::from_tokens(["parts", "-"]))
    }

    /// `<artifact>/<field>`.
    pub(crate) fn artifact_field(artifact: &Pointer, field: &str) -> PointerBuf {
        artifact.with_trailing_token(field)
    }

    /// `/a2a` and everything under it: the gateway's, never an agent's or a path's.
    pub(crate) fn is_gateway_owned(pointer: &Pointer) -> bool {
        pointer.first().is_some_and(|t| t.decoded() == A2A)
    }

    /// The gateway's parts of the document, by member path: `/a2a` and `/view/artifacts`.
    /// Everything else is the app's state ([`super::app_part`]): what the lane forwards and
    /// what an agent's snapshot replaces (`docs/forwarding.md`, `docs/mapping.md`); the rest
    /// of `/view` is the app's too.
    pub(crate) const GATEWAY_PARTS: [&[&str]; 2] = [&[A2A], &[VIEW, ARTIFACTS]];
}

/// The app's part of a state document: a copy without the gateway's parts
/// ([`layout::GATEWAY_PARTS`]); a member left empty by taking them out (a `/view` holding
/// only artifacts) is left out too.
pub(crate) fn app_part(doc: &Map<String, Value>) -> Map<String, Value> {
    fn without(map: &Map<String, Value>, parts: &[&[&str]]) -> Map<String, Value> {
        let mut out = Map::new();
        for (key, value) in map {
            let below: Vec<&[&str]> = parts
                .iter()
                .filter(|p| p.first() == Some(&key.as_str()))
                .map(|p| &p[1..])
                .collect();
            if below.iter().any(|p| p.is_empty()) {
                continue;
            }
            match value {
                Value::Object(inner) if !below.is_empty() => {
                    let rest = without(inner, &below);
                    if !rest.is_empty() {
                        out.insert(key.clone(), Value::Object(rest));
                    }
                }
                _ => {
                    out.insert(key.clone(), value.clone());
                }
            }
        }
        out
    }
    without(doc, &layout::GATEWAY_PARTS)
}

/// Takes the member at `path` out of `map` (`None` if some step is missing or not an object).
fn take_at(map: &mut Map<String, Value>, path: &[&str]) -> Option<Value> {
    let (last, parents) = path.split_last()?;
    let mut at = map;
    for key in parents {
        at = at.get_mut(*key)?.as_object_mut()?;
    }
    at.remove(*last)
}

/// The object at `path` in `map`, made (over anything that is not an object) where missing.
fn object_at<'a>(map: &'a mut Map<String, Value>, path: &[&str]) -> &'a mut Map<String, Value> {
    path.iter().fold(map, |at, key| object_entry(at, key))
}

/// An `add` operation.
pub(crate) fn add(path: PointerBuf, value: Value) -> Op {
    PatchOperation::Add(AddOperation { path, value })
}

/// A `replace` operation.
pub(crate) fn replace(path: PointerBuf, value: Value) -> Op {
    PatchOperation::Replace(json_patch::ReplaceOperation { path, value })
}

/// Parses a pointer from foreign text (an artifact's `metadata.path`): `None` unless it is a
/// valid, non-root pointer.
pub(crate) fn parse_pointer(raw: &str) -> Option<PointerBuf> {
    PointerBuf::parse(raw).ok().filter(|p| !p.is_root())
}

/// Who writes a patch: the gateway's own projection, or an agent (`agui-state-delta`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Writer {
    Gateway,
    Agent,
}

/// Why a patch was not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// It would break a limit (`RUN_ERROR limit_exceeded`).
    Limit(String),
    /// It does not apply (a missing parent, a failed `test`): skipped with a `RAW` note.
    Invalid(String),
}

/// The limits a document is held to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StateLimits {
    /// `limits.max_state_depth`: segments of any pointer.
    pub max_depth: usize,
    /// `limits.max_state_bytes`: what agents may add (and what a snapshot may hold).
    pub max_agent_bytes: usize,
    /// The whole document (client state, agent state, artifacts, the task).
    pub max_bytes: usize,
}

impl Default for StateLimits {
    fn default() -> Self {
        let defaults = crate::config::Limits::default();
        Self::from_config(&defaults)
    }
}

impl StateLimits {
    /// The document's limits from `limits`: artifacts are held in state as parts and, once
    /// complete, as text, so the document may hold the client's state, twice the artifact
    /// budget and one event's worth of task status.
    pub(crate) fn from_config(limits: &crate::config::Limits) -> Self {
        Self {
            max_depth: limits.max_state_depth.get(),
            max_agent_bytes: limits.max_state_bytes.get(),
            max_bytes: limits
                .max_state_bytes
                .get()
                .saturating_add(limits.max_artifact_bytes_per_run.get().saturating_mul(2))
                .saturating_add(limits.max_event_bytes.get()),
        }
    }
}

/// The `/a2a/task` entry: the run's task as last shown. The projector writes it, the client
/// sends it back ([`ClientView`]) and the run's span reads its state; this type is the one
/// spelling of its members.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TaskEntry<'a> {
    #[serde(borrow)]
    pub id: Cow<'a, str>,
    /// The state in the lowercase 0.3 spelling ([`TaskState::as_str`]); empty if missing.
    #[serde(borrow, default)]
    pub state: Cow<'a, str>,
    /// The status message's text, when it has some.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Cow<'a, str>>,
    /// The status's timestamp, as the upstream wrote it.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<Cow<'a, str>>,
}

impl<'a> TaskEntry<'a> {
    /// The entry of a state document (`None` when it has none, or a malformed one).
    pub(crate) fn of(doc: &'a Value) -> Option<Self> {
        Self::in_a2a(doc.get(layout::A2A)?.as_object()?)
    }

    fn in_a2a(a2a: &'a Map<String, Value>) -> Option<Self> {
        Self::deserialize(a2a.get(layout::TASK)?).ok()
    }

    /// The entry as a JSON value, to be written at [`layout::task`].
    pub(crate) fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("strings serialize")
    }
}

/// What the gateway reads back from the client's state (`state.a2a`, as it projected it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ClientView<'a>(Option<&'a Map<String, Value>>);

impl<'a> ClientView<'a> {
    /// The view of `state` (absent or malformed reads as empty).
    pub(crate) fn of(state: Option<&'a Value>) -> Self {
        Self(
            state
                .and_then(|s| s.get(layout::A2A))
                .and_then(Value::as_object),
        )
    }

    /// `/a2a/contextId`.
    pub(crate) fn context_id(self) -> Option<&'a str> {
        self.0?.get(layout::CONTEXT_ID)?.as_str()
    }

    /// `/a2a/task`.
    pub(crate) fn task(self) -> Option<TaskEntry<'a>> {
        TaskEntry::in_a2a(self.0?)
    }

    /// `/a2a/task/id`.
    pub(crate) fn task_id(self) -> Option<&'a str> {
        match self.task()?.id {
            Cow::Borrowed(id) => Some(id),
            // Read from a `Value`, a string is always borrowed.
            Cow::Owned(_) => None,
        }
    }

    /// `/a2a/task/id` when `/a2a/task/state` says the task waits for input.
    pub(crate) fn waiting_task_id(self) -> Option<&'a str> {
        let task = self.task()?;
        let state = TaskState::parse(&task.state);
        state.is_interrupted().then(|| self.task_id()).flatten()
    }

    /// The entries under `/a2a/pendingInterrupts` (none if the member is missing).
    pub(crate) fn pending_interrupt_entries(self) -> Vec<&'a Value> {
        self.0
            .and_then(|a2a| a2a.get(layout::PENDING_INTERRUPTS)?.as_object())
            .map(|m| m.values().collect())
            .unwrap_or_default()
    }

    /// `/a2a/stateDigests`, if present.
    pub(crate) fn state_digests(self) -> Option<&'a Map<String, Value>> {
        self.0?.get(layout::STATE_DIGESTS)?.as_object()
    }

    /// The ids under `/a2a/pendingInterrupts`, if the member exists.
    pub(crate) fn pending_interrupts(self) -> Option<Vec<&'a str>> {
        let pending = self.0?.get(layout::PENDING_INTERRUPTS)?.as_object()?;
        Some(pending.keys().map(String::as_str).collect())
    }
}

/// Size and nesting of a value, measured without recursion.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Measure {
    /// Approximate bytes of its compact JSON.
    pub bytes: usize,
    /// Levels of arrays and objects (a scalar is 0).
    pub depth: usize,
}

/// Measures `value` with an explicit stack (a deep value cannot overflow ours).
pub(crate) fn measure(value: &Value) -> Measure {
    let mut m = Measure::default();
    let mut stack = vec![(value, 0usize)];
    while let Some((v, level)) = stack.pop() {
        m.bytes += match v {
            Value::Null | Value::Bool(_) => 5,
            Value::Number(_) => 8,
            Value::String(s) => s.len() + 2,
            Value::Array(items) => {
                m.depth = m.depth.max(level + 1);
                stack.extend(items.iter().map(|i| (i, level + 1)));
                items.len() + 2
            }
            Value::Object(map) => {
                m.depth = m.depth.max(level + 1);
                stack.extend(map.values().map(|i| (i, level + 1)));
                map.keys().map(|k| k.len() + 4).sum::<usize>() + 2
            }
        };
    }
    m
}

/// Drops `value` with an explicit stack: serde_json's own drop recurses once per level.
pub(crate) fn drop_flat(value: Value) {
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

/// The run's view of the client state, patched exactly as the client's copy is.
#[derive(Debug)]
pub(crate) struct Shadow {
    doc: Value,
    limits: StateLimits,
    /// Upper bound of the document's size ([`Measure::bytes`]).
    bytes: usize,
    /// Upper bound of what agents' patches added.
    agent_bytes: usize,
    /// Upper bound of the document's nesting.
    depth: usize,
}

impl Drop for Shadow {
    fn drop(&mut self) {
        drop_flat(std::mem::take(&mut self.doc));
    }
}

impl Shadow {
    /// Starts from the client's state with the gateway's subtrees merged in: foreign keys
    /// are kept, `/a2a` and `/view/artifacts` always exist, `/a2a/pendingInterrupts` keeps
    /// the client's entries (an interrupt is resolved only once the upstream accepted the
    /// answer, docs/design.md#7-human-in-the-loop), `/a2a/contextId` is set when known.
    pub(crate) fn new(
        client_state: Option<Value>,
        context_id: Option<&str>,
        limits: StateLimits,
    ) -> Self {
        let mut root = match client_state {
            Some(Value::Object(m)) => m,
            Some(other) => {
                drop_flat(other);
                Map::new()
            }
            None => Map::new(),
        };
        for part in layout::GATEWAY_PARTS {
            object_at(&mut root, part);
        }
        let a2a = object_at(&mut root, &[layout::A2A]);
        if !a2a
            .get(layout::PENDING_INTERRUPTS)
            .is_some_and(Value::is_object)
        {
            a2a.insert(layout::PENDING_INTERRUPTS.into(), json!({}));
        }
        if let Some(c) = context_id {
            a2a.insert(layout::CONTEXT_ID.into(), json!(c));
        }
        let doc = Value::Object(root);
        let m = measure(&doc);
        Self {
            doc,
            limits,
            bytes: m.bytes,
            agent_bytes: 0,
            depth: m.depth,
        }
    }

    /// The whole document serialized, for a `STATE_SNAPSHOT` (no copy of the value tree).
    pub(crate) fn snapshot(&self) -> RawJson {
        // Serializing a `Value` cannot fail: its keys are strings.
        RawJson(serde_json::value::to_raw_value(&self.doc).expect("a Value serializes"))
    }

    /// The document.
    pub(crate) fn doc(&self) -> &Value {
        &self.doc
    }

    /// `add {}` operations for every missing container above `pointer`, so that an `add`
    /// at `pointer` applies. `None` when a parent exists but is not an object.
    pub(crate) fn parents_of(&self, pointer: &Pointer) -> Option<Vec<Op>> {
        let mut ops = Vec::new();
        let mut at = PointerBuf::new();
        let count = pointer.count();
        for token in pointer.tokens().take(count.saturating_sub(1)) {
            at.push_back(token);
            match at.resolve(&self.doc) {
                Ok(Value::Object(_)) => {}
                Ok(_) => return None,
                Err(_) => ops.push(add(at.clone(), json!({}))),
            }
        }
        Some(ops)
    }

    /// Checks `pointer` against `limits.max_state_depth`.
    pub(crate) fn check_depth(&self, pointer: &Pointer) -> Result<(), Refusal> {
        if pointer.count() > self.limits.max_depth {
            return Err(Refusal::Limit(format!(
                "a state path of {} segments exceeds limits.max_state_depth ({})",
                pointer.count(),
                self.limits.max_depth
            )));
        }
        Ok(())
    }

    /// Checks `ops` against the limits (module header), then applies them atomically. On
    /// `Err` the document is unchanged.
    pub(crate) fn apply(&mut self, ops: &[Op], writer: Writer) -> Result<(), Refusal> {
        let mut growth = 0usize;
        let mut shrink = 0usize;
        let mut depth = self.depth;
        let mut touched: Vec<&Pointer> = Vec::new();
        let untouched = |p: &Pointer, touched: &[&Pointer]| {
            touched
                .iter()
                .all(|t| !t.starts_with(p) && !p.starts_with(t))
        };
        for op in ops {
            let path = op.path();
            self.check_depth(path)?;
            // What the op puts at `path`, and what it overwrites or removes there.
            let (put, overwrites) = match op {
                PatchOperation::Add(o) => (Some(measure(&o.value)), true),
                PatchOperation::Replace(o) => (Some(measure(&o.value)), true),
                PatchOperation::Remove(_) => (None, true),
                PatchOperation::Test(_) => (None, false),
                PatchOperation::Copy(json_patch::CopyOperation { from, .. })
                | PatchOperation::Move(json_patch::MoveOperation { from, .. }) => {
                    self.check_depth(from)?;
                    let is_copy = matches!(op, PatchOperation::Copy(_));
                    if path.starts_with(from) && (is_copy || path != from.as_ptr()) {
                        let what = if is_copy { "copy" } else { "move" };
                        return Err(Refusal::Limit(format!(
                            "a {what} from {:?} into itself ({:?}) is refused",
                            from.as_str(),
                            path.as_str()
                        )));
                    }
                    // Measured on the source as it is; if an earlier op of this patch
                    // changed it, the whole document bounds it.
                    let source = match from.resolve(&self.doc) {
                        Ok(v) if untouched(from, &touched) => measure(v),
                        _ => Measure {
                            bytes: self.bytes + growth,
                            depth,
                        },
                    };
                    if is_copy {
                        (Some(source), true)
                    } else {
                        touched.push(from);
                        (
                            Some(Measure {
                                bytes: 0,
                                depth: source.depth,
                            }),
                            true,
                        )
                    }
                }
            };
            if overwrites && untouched(path, &touched) {
                if let Ok(old) = path.resolve(&self.doc) {
                    shrink += measure(old).bytes;
                }
            }
            if let Some(put) = put {
                growth += put.bytes;
                depth = depth.max(path.count() + put.depth);
            }
            touched.push(path);
            let nesting = self.limits.max_depth + MAX_VALUE_NESTING;
            if depth > nesting {
                return Err(Refusal::Limit(format!(
                    "a state patch would nest the state {depth} levels deep (limit {nesting})"
                )));
            }
            let total = self.bytes.saturating_add(growth).saturating_sub(shrink);
            if total > self.limits.max_bytes {
                return Err(Refusal::Limit(format!(
                    "a state patch would grow the state past {} bytes",
                    self.limits.max_bytes
                )));
            }
            if writer == Writer::Agent
                && self.agent_bytes.saturating_add(growth) > self.limits.max_agent_bytes
            {
                return Err(Refusal::Limit(format!(
                    "the agent's state patches exceed limits.max_state_bytes ({} bytes)",
                    self.limits.max_agent_bytes
                )));
            }
        }
        json_patch::patch(&mut self.doc, ops).map_err(|e| Refusal::Invalid(e.to_string()))?;
        self.bytes = self.bytes.saturating_add(growth).saturating_sub(shrink);
        if writer == Writer::Agent {
            self.agent_bytes = self.agent_bytes.saturating_add(growth);
        }
        self.depth = depth;
        Ok(())
    }

    /// Replaces the app's part of the document ([`app_part`]) with an agent's
    /// `agui-state-snapshot`, keeping the gateway's parts: what the snapshot holds there is
    /// not the agent's to set. Refused past `limits.max_state_bytes`.
    pub(crate) fn replace_app_state(&mut self, app: Value) -> Result<(), Refusal> {
        let m = measure(&app);
        if m.bytes > self.limits.max_agent_bytes {
            drop_flat(app);
            return Err(Refusal::Limit(format!(
                "the agent's state snapshot exceeds limits.max_state_bytes ({} bytes)",
                self.limits.max_agent_bytes
            )));
        }
        let mut root = match app {
            Value::Object(m) => m,
            other => {
                drop_flat(other);
                Map::new()
            }
        };
        for part in layout::GATEWAY_PARTS {
            if let Some(theirs) = take_at(&mut root, part) {
                drop_flat(theirs);
            }
        }
        if let Value::Object(cur) = &mut self.doc {
            for part in layout::GATEWAY_PARTS {
                if let Some(ours) = take_at(cur, part) {
                    let (last, parents) = part.split_last().expect("a part is a non-empty path");
                    object_at(&mut root, parents).insert((*last).into(), ours);
                }
            }
        }
        drop_flat(std::mem::replace(&mut self.doc, Value::Object(root)));
        let whole = measure(&self.doc);
        self.bytes = whole.bytes;
        self.depth = whole.depth;
        self.agent_bytes = m.bytes;
        Ok(())
    }
}

fn object_entry<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = map.entry(key).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    slot.as_object_mut().expect("just made an object")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(v: Value) -> Vec<Op> {
        serde_json::from_value(v).unwrap()
    }

    fn shadow() -> Shadow {
        Shadow::new(None, None, StateLimits::default())
    }

    #[test]
    fn merges_client_state_and_keeps_foreign_keys() {
        let s = Shadow::new(
            Some(json!({"app": 1, "view": {"x": 2}, "a2a": {"pendingInterrupts": {"old": {}}}})),
            Some("c"),
            StateLimits::default(),
        );
        assert_eq!(
            s.doc(),
            &json!({"app": 1, "view": {"x": 2, "artifacts": {}}, "a2a": {"pendingInterrupts": {"old": {}}, "contextId": "c"}}),
            "pending interrupts stay until the upstream accepts an answer"
        );
    }

    /// One rule for what is the app's: the lane forwards [`app_part`] of the client's state,
    /// and an agent's snapshot replaces exactly that part of the shadow — `/view` members
    /// other than `artifacts` included — while `/a2a` and `/view/artifacts` stay the
    /// gateway's whatever the snapshot holds there.
    #[test]
    fn the_app_part_is_what_the_lane_forwards_and_an_agent_snapshot_replaces() {
        let client = json!({"todo": [1], "view": {"mode": "list", "artifacts": {"a": {"text": "x"}}},
            "a2a": {"contextId": "c", "pendingInterrupts": {}}});
        assert_eq!(
            Value::Object(app_part(client.as_object().unwrap())),
            json!({"todo": [1], "view": {"mode": "list"}})
        );
        assert_eq!(
            super::super::lane::app_state(Some(&client)),
            app_part(client.as_object().unwrap())
        );
        // A `/view` with nothing of the app's in it is not the app's.
        let only_artifacts = json!({"view": {"artifacts": {}}, "n": 1});
        assert_eq!(
            Value::Object(app_part(only_artifacts.as_object().unwrap())),
            json!({"n": 1})
        );
        for snapshot in [
            json!({"todo": [2], "view": {"mode": "grid"}}),
            json!({"todo": [2]}),
            json!({"view": {"mode": "grid", "artifacts": {"forged": {}}}, "a2a": {"contextId": "forged"}}),
            json!("not an object"),
        ] {
            let mut s = Shadow::new(Some(client.clone()), Some("c"), StateLimits::default());
            let before = s.doc().clone();
            s.replace_app_state(snapshot.clone()).unwrap();
            let doc = s.doc().as_object().unwrap();
            let expected = match &snapshot {
                Value::Object(m) => app_part(m),
                _ => Map::new(),
            };
            assert_eq!(app_part(doc), expected, "{snapshot}");
            assert_eq!(doc["a2a"], before["a2a"], "{snapshot}");
            assert_eq!(
                doc["view"]["artifacts"], before["view"]["artifacts"],
                "{snapshot}"
            );
        }
        // A `/view` that is not an object cannot hold the artifacts: it becomes one.
        let mut s = Shadow::new(Some(client.clone()), Some("c"), StateLimits::default());
        s.replace_app_state(json!({"view": 1, "n": 2})).unwrap();
        assert_eq!(
            s.doc()["view"],
            json!({"artifacts": client["view"]["artifacts"]})
        );
        assert_eq!(s.doc()["n"], 2);
    }

    #[test]
    fn layout_pointers_are_escaped() {
        assert_eq!(layout::task().as_str(), "/a2a/task");
        assert_eq!(
            layout::pending_interrupt("a2a:T/1~x").as_str(),
            "/a2a/pendingInterrupts/a2a:T~11~0x"
        );
        let art = layout::artifact("a/b");
        assert_eq!(art.as_str(), "/view/artifacts/a~1b");
        assert_eq!(
            layout::artifact_part_append(&art).as_str(),
            "/view/artifacts/a~1b/parts/-"
        );
        assert!(layout::is_gateway_owned(&layout::task()));
        assert!(!layout::is_gateway_owned(&parse_pointer("/a2ax").unwrap()));
        assert!(parse_pointer("").is_none());
        assert!(parse_pointer("a").is_none());
        assert!(parse_pointer("/a~2b").is_none());
    }

    #[test]
    fn the_client_view_reads_what_the_gateway_wrote() {
        let state = json!({"a2a": {"contextId": "c", "task": {"id": "T", "state": "input-required"},
            "pendingInterrupts": {"i1": {}, "i2": {}}}});
        let v = ClientView::of(Some(&state));
        assert_eq!(v.context_id(), Some("c"));
        assert_eq!(v.waiting_task_id(), Some("T"));
        assert_eq!(v.pending_interrupts().unwrap().len(), 2);
        let working = json!({"a2a": {"task": {"id": "T", "state": "working"}}});
        assert_eq!(ClientView::of(Some(&working)).waiting_task_id(), None);
        assert_eq!(ClientView::of(None).context_id(), None);
    }

    #[test]
    fn parents_are_created_for_a_new_path() {
        let s = shadow();
        let p = parse_pointer("/docs/report/x").unwrap();
        assert_eq!(s.parents_of(&p).unwrap().len(), 2);
    }

    #[test]
    fn a_refused_or_failed_patch_leaves_the_document_unchanged() {
        let mut s = shadow();
        let before = s.doc().clone();
        let bad = ops(
            json!([{"op": "add", "path": "/x", "value": 1}, {"op": "add", "path": "/missing/y", "value": 1}]),
        );
        assert!(matches!(
            s.apply(&bad, Writer::Agent),
            Err(Refusal::Invalid(_))
        ));
        assert_eq!(s.doc(), &before);
    }

    #[test]
    fn copy_bombs_are_refused_before_anything_is_copied() {
        let mut s = shadow();
        let bomb: Vec<Value> = (0..22)
            .map(|i| json!({"op": "copy", "from": "", "path": format!("/k{i}")}))
            .collect();
        let refusal = s
            .apply(&ops(Value::Array(bomb)), Writer::Agent)
            .unwrap_err();
        assert!(matches!(refusal, Refusal::Limit(m) if m.contains("into itself")));
        // Doubling without copying from an ancestor: /a into /b, then /b back under /a.
        let mut s = shadow();
        s.apply(
            &ops(json!([{"op": "add", "path": "/a", "value": {"x": "y".repeat(1000)}}])),
            Writer::Agent,
        )
        .unwrap();
        let mut doubling = Vec::new();
        for i in 0..30 {
            doubling.push(json!({"op": "copy", "from": "/a", "path": format!("/b{i}")}));
            doubling
                .push(json!({"op": "copy", "from": format!("/b{i}"), "path": format!("/a/c{i}")}));
        }
        let refusal = s
            .apply(&ops(Value::Array(doubling)), Writer::Agent)
            .unwrap_err();
        assert!(matches!(refusal, Refusal::Limit(m) if m.contains("max_state_bytes")));
    }

    #[test]
    fn deep_paths_and_nesting_are_refused() {
        let mut s = shadow();
        let deep = format!("/{}", vec!["a"; 33].join("/"));
        let op = ops(json!([{"op": "add", "path": deep, "value": 1}]));
        assert!(matches!(
            s.apply(&op, Writer::Gateway),
            Err(Refusal::Limit(_))
        ));
        // Each copy may nest the document a little deeper; the sum is bounded.
        s.apply(
            &ops(json!([{"op": "add", "path": "/n", "value": {}}])),
            Writer::Agent,
        )
        .unwrap();
        let chain = format!("/{}", vec!["d"; 30].join("/"));
        let mut refused = false;
        for _ in 0..20 {
            let mut step = s
                .parents_of(&parse_pointer(&format!("/m{chain}")).unwrap())
                .unwrap();
            step.push(PatchOperation::Copy(json_patch::CopyOperation {
                from: parse_pointer("/n").unwrap(),
                path: parse_pointer(&format!("/m{chain}")).unwrap(),
            }));
            step.push(PatchOperation::Move(json_patch::MoveOperation {
                from: parse_pointer("/m").unwrap(),
                path: parse_pointer("/n/m").unwrap(),
            }));
            if let Err(Refusal::Limit(_)) = s.apply(&step, Writer::Agent) {
                refused = true;
                break;
            }
        }
        assert!(refused, "nesting grew without bound");
    }

    #[test]
    fn replacing_a_member_does_not_count_twice() {
        let mut s = Shadow::new(
            None,
            None,
            StateLimits {
                max_depth: 32,
                max_agent_bytes: 1_000_000,
                max_bytes: 10_000,
            },
        );
        for i in 0..1000 {
            let task = json!({"id": "t", "state": "working", "message": format!("tick {i} {}", "x".repeat(100))});
            s.apply(&[add(layout::task(), task)], Writer::Gateway)
                .unwrap();
        }
    }

    #[test]
    fn measuring_and_dropping_do_not_recurse() {
        let mut v = json!(1);
        for _ in 0..100_000 {
            v = Value::Array(vec![v]);
        }
        assert_eq!(measure(&v).depth, 100_000);
        drop_flat(v);
    }
}
