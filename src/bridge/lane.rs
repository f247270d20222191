//! The forwarding lane AG-UI -> A2A (docs/design.md#5-run-options cues,
//! docs/design.md#8-forwarding-lane; `docs/forwarding.md`): what the frontend knows —
//! readable context, frontend tools, system and developer messages, the app's state —
//! carried in the outgoing A2A message's own `metadata` under the gateway's extension URIs.
//! Pure; the message itself is [`super::request`]'s.
//!
//! Invariants: with no cue on, nothing is added (a plain agent sees byte for byte the message
//! it saw before); the extension is activated (`message.extensions`, and from there the
//! `A2A-Extensions` header) only for data actually sent, and only when the agent's card
//! declares the extension or its config forces it; the gateway's own parts of the state
//! (`/a2a`, `/view/artifacts`: [`state::app_part`]) are never forwarded as app state.

use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::state::{self, ClientView, Op};
use crate::a2a::model::OutgoingMessage;
use crate::agui::{Role, RunAgentInput};
use crate::config::ForwardCue;

/// Context, tools, system and developer messages: `{"context", "tools", "system",
/// "developer"}` (only the keys sent).
pub(crate) const CONTEXT_EXTENSION: &str = "urn:agui-a2a-gateway:ext:agui-context:v1";
/// The app's state: `{"state": {...}}` or `{"patch": [...]}`.
pub(crate) const STATE_EXTENSION: &str = "urn:agui-a2a-gateway:ext:shared-state:v1";

/// How the app's state travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StateForm {
    Whole,
    /// RFC 6902 ops since the gateway's last projection (whole when there is none).
    Patch,
}

/// The cues of one run: the agent's `forward` defaults, overridden by `forwardedProps.a2a`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Cues {
    pub context: bool,
    pub tools: bool,
    pub system: bool,
    pub developer: bool,
    pub state: Option<StateForm>,
}

impl Cues {
    /// The agent's defaults (`forward: [...]`).
    pub(crate) fn defaults(forward: &[ForwardCue]) -> Self {
        let has = |c| forward.contains(&c);
        Self {
            context: has(ForwardCue::Context),
            tools: has(ForwardCue::Tools),
            system: has(ForwardCue::System),
            developer: has(ForwardCue::Developer),
            state: if has(ForwardCue::StatePatch) {
                Some(StateForm::Patch)
            } else if has(ForwardCue::State) {
                Some(StateForm::Whole)
            } else {
                None
            },
        }
    }

    /// These cues with a run's overrides applied.
    pub(crate) fn with(mut self, o: &CueOverrides) -> Self {
        let set = |slot: &mut bool, v: Option<bool>| *slot = v.unwrap_or(*slot);
        set(&mut self.context, o.context);
        set(&mut self.tools, o.tools);
        set(&mut self.system, o.system);
        set(&mut self.developer, o.developer);
        if let Some(state) = o.state {
            self.state = state;
        }
        self
    }
}

/// A run's own cues (`forwardedProps.a2a`): `None` keeps the agent's default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CueOverrides {
    /// `forwardContext`.
    pub context: Option<bool>,
    /// `forwardTools`.
    pub tools: Option<bool>,
    /// `includeSystemMessages`.
    pub system: Option<bool>,
    /// `includeDeveloperMessages`.
    pub developer: Option<bool>,
    /// `forwardState`: `true`/`"whole"`, `"patch"`, or `false`.
    pub state: Option<Option<StateForm>>,
}

/// The text of the transcript's messages of `role`, in order.
fn contents_of(input: &RunAgentInput, role: Role) -> Vec<Value> {
    input
        .messages
        .iter()
        .filter(|m| m.role == role)
        .filter_map(|m| m.content.clone())
        .collect()
}

/// The app's own state: the client's state without the gateway's parts
/// ([`state::app_part`]); a state that is not an object has none.
pub(crate) fn app_state(state: Option<&Value>) -> Map<String, Value> {
    match state {
        Some(Value::Object(m)) => state::app_part(m),
        _ => Map::new(),
    }
}

/// A stable digest of a JSON value (its serialization: object keys sorted, as serde_json's
/// map keeps them), the same on every replica and version.
fn digest(value: &Value) -> String {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    let hash = Sha256::digest(&bytes);
    hash.iter().take(12).map(|b| format!("{b:02x}")).collect()
}

/// Digests of the app state's top-level members, kept at `/a2a/stateDigests` so the next
/// run can tell what changed since this projection.
pub(crate) fn digests(app: &Map<String, Value>) -> Value {
    Value::Object(
        app.iter()
            .map(|(k, v)| (k.clone(), Value::String(digest(v))))
            .collect(),
    )
}

/// The changes of `app` since the projection whose digests are `before`, per top-level
/// member: `add` for new or changed members, `remove` for members gone.
pub(crate) fn patch_since(app: &Map<String, Value>, before: &Map<String, Value>) -> Vec<Op> {
    let mut ops = Vec::new();
    for (k, v) in app {
        if before.get(k).and_then(Value::as_str) != Some(digest(v).as_str()) {
            ops.push(super::state::add(
                json_patch::jsonptr::PointerBuf::from_tokens([k.as_str()]),
                v.clone(),
            ));
        }
    }
    for k in before.keys().filter(|k| !app.contains_key(*k)) {
        ops.push(json_patch::PatchOperation::Remove(
            json_patch::RemoveOperation {
                path: json_patch::jsonptr::PointerBuf::from_tokens([k.as_str()]),
            },
        ));
    }
    ops
}

/// What the run's cues carry: entries for the outgoing message's `metadata`
/// (extension URI -> payload); empty with no cue on.
pub(crate) fn carry(input: &RunAgentInput, cues: &Cues) -> Map<String, Value> {
    let mut metadata = Map::new();
    let mut context = Map::new();
    if cues.context {
        context.insert("context".into(), Value::Array(input.context.clone()));
    }
    if cues.tools {
        context.insert("tools".into(), Value::Array(input.tools.clone()));
    }
    if cues.system {
        context.insert(
            "system".into(),
            Value::Array(contents_of(input, Role::System)),
        );
    }
    if cues.developer {
        context.insert(
            "developer".into(),
            Value::Array(contents_of(input, Role::Developer)),
        );
    }
    if !context.is_empty() {
        metadata.insert(CONTEXT_EXTENSION.into(), Value::Object(context));
    }
    if let Some(form) = cues.state {
        let app = app_state(input.state.as_ref());
        let before = ClientView::of(input.state.as_ref()).state_digests();
        let payload = match (form, before) {
            (StateForm::Patch, Some(before)) => json!({"patch": patch_since(&app, before)}),
            _ => json!({"state": app}),
        };
        metadata.insert(STATE_EXTENSION.into(), payload);
    }
    metadata
}

/// Puts the carried entries on `message` and activates their extensions — those the card
/// declares (`declared`), or all of them when the config forces it.
pub(crate) fn attach(
    message: &mut OutgoingMessage,
    carried: &Map<String, Value>,
    declared: impl Fn(&str) -> bool,
    force: bool,
) {
    if carried.is_empty() {
        return;
    }
    let metadata = message
        .metadata
        .get_or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(m) = metadata {
        m.extend(carried.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    for uri in carried.keys() {
        if (force || declared(uri)) && !message.extensions.contains(uri) {
            message.extensions.push(uri.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(v: Value) -> RunAgentInput {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn no_cue_carries_nothing() {
        let i = input(json!({"threadId": "t", "runId": "r", "messages": [],
            "context": [{"description": "d", "value": "v"}], "state": {"x": 1}}));
        assert!(carry(&i, &Cues::default()).is_empty());
        let mut m = OutgoingMessage::default();
        attach(&mut m, &carry(&i, &Cues::default()), |_| true, true);
        assert_eq!(m, OutgoingMessage::default(), "the message is untouched");
    }

    #[test]
    fn cues_carry_their_keys_and_activate_only_declared_extensions() {
        let i = input(json!({"threadId": "t", "runId": "r",
            "messages": [{"id": "s", "role": "system", "content": "be brief"},
                         {"id": "u", "role": "user", "content": "hi"}],
            "tools": [{"name": "pick", "description": "", "parameters": {}}],
            "context": [{"description": "page", "value": "home"}],
            "state": {"todo": [1], "a2a": {"contextId": "c"}, "view": {"artifacts": {}}}}));
        let cues = Cues {
            context: true,
            tools: true,
            system: true,
            developer: false,
            state: Some(StateForm::Whole),
        };
        let c = carry(&i, &cues);
        assert_eq!(
            c[CONTEXT_EXTENSION],
            json!({"context": [{"description": "page", "value": "home"}],
                "tools": [{"name": "pick", "description": "", "parameters": {}}],
                "system": ["be brief"]})
        );
        assert_eq!(c[STATE_EXTENSION], json!({"state": {"todo": [1]}}));
        let mut m = OutgoingMessage::default();
        attach(&mut m, &c, |uri| uri == STATE_EXTENSION, false);
        assert_eq!(
            m.extensions,
            [STATE_EXTENSION],
            "only the declared one is activated"
        );
        assert!(m.metadata.as_ref().unwrap()[CONTEXT_EXTENSION].is_object());
        let mut forced = OutgoingMessage::default();
        attach(&mut forced, &c, |_| false, true);
        assert_eq!(forced.extensions.len(), 2);
    }

    #[test]
    fn a_state_patch_names_only_what_changed_since_the_last_projection() {
        let before = json!({"a": 1, "b": [2], "gone": true});
        let digests = digests(before.as_object().unwrap());
        let i = input(json!({"threadId": "t", "runId": "r", "messages": [],
            "state": {"a": 1, "b": [3], "new": "x", "a2a": {"stateDigests": digests}}}));
        let cues = Cues {
            state: Some(StateForm::Patch),
            ..Cues::default()
        };
        let c = carry(&i, &cues);
        assert_eq!(
            c[STATE_EXTENSION],
            json!({"patch": [
                {"op": "add", "path": "/b", "value": [3]},
                {"op": "add", "path": "/new", "value": "x"},
                {"op": "remove", "path": "/gone"}
            ]})
        );
        // Without an earlier projection the whole state goes.
        let first =
            input(json!({"threadId": "t", "runId": "r", "messages": [], "state": {"a": 1}}));
        assert_eq!(
            carry(&first, &cues)[STATE_EXTENSION],
            json!({"state": {"a": 1}})
        );
    }
}
