//! The shadow of the client's state document for one run.
//!
//! Every `STATE_DELTA` the projector emits is first applied here with the `json-patch` crate,
//! so a delta that would not apply on the client is never sent (a failed patch is only a
//! console warning in `@ag-ui/client` 1.0.0 and the state silently diverges). Deltas are
//! targeted (`add` one member, append one part), so the cost per upstream event is
//! proportional to that event, not to the document.

use serde_json::{json, Map, Value};

/// Escapes one JSON-pointer segment (RFC 6901 §4: `~` -> `~0`, `/` -> `~1`).
pub fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// Whether `pointer` is a syntactically valid, non-root JSON pointer.
pub fn is_pointer(pointer: &str) -> bool {
    pointer.starts_with('/') && {
        let mut chars = pointer.chars();
        let mut ok = true;
        while let Some(c) = chars.next() {
            if c == '~' && !matches!(chars.next(), Some('0' | '1')) {
                ok = false;
                break;
            }
        }
        ok
    }
}

/// An `add` operation.
pub fn add(path: impl Into<String>, value: Value) -> Value {
    json!({"op": "add", "path": path.into(), "value": value})
}

/// A `remove` operation.
pub fn remove(path: impl Into<String>) -> Value {
    json!({"op": "remove", "path": path.into()})
}

/// The run's view of the client state.
#[derive(Debug, Clone)]
pub struct Shadow {
    doc: Value,
}

impl Shadow {
    /// Starts from the client's state with the gateway's subtrees merged in: foreign keys
    /// are kept, `/a2a` and `/view/artifacts` always exist, `/a2a/pendingInterrupts` starts
    /// empty (a new run resolves whatever was pending), `/a2a/contextId` is set when known.
    pub fn new(client_state: Option<&Value>, context_id: Option<&str>) -> Self {
        let mut root = match client_state {
            Some(Value::Object(m)) => m.clone(),
            _ => Map::new(),
        };
        let a2a = object_entry(&mut root, "a2a");
        a2a.insert("pendingInterrupts".into(), json!({}));
        if let Some(c) = context_id {
            a2a.insert("contextId".into(), json!(c));
        }
        let view = object_entry(&mut root, "view");
        object_entry(view, "artifacts");
        Self {
            doc: Value::Object(root),
        }
    }

    /// The whole document, for a `STATE_SNAPSHOT`.
    pub fn snapshot(&self) -> Value {
        self.doc.clone()
    }

    /// The value at `pointer`, if any.
    pub fn get(&self, pointer: &str) -> Option<&Value> {
        self.doc.pointer(pointer)
    }

    /// `add {}` operations for every missing container above `pointer`, so that an `add`
    /// at `pointer` applies. Returns `None` when a parent exists but is not an object.
    pub fn parents_of(&self, pointer: &str) -> Option<Vec<Value>> {
        let mut ops = Vec::new();
        let mut at = String::new();
        let segments: Vec<&str> = pointer.split('/').skip(1).collect();
        for seg in &segments[..segments.len().saturating_sub(1)] {
            at.push('/');
            at.push_str(seg);
            match self.doc.pointer(&at) {
                Some(Value::Object(_)) => {}
                Some(_) => return None,
                None => ops.push(add(at.clone(), json!({}))),
            }
        }
        Some(ops)
    }

    /// Applies `ops` atomically; on success they are safe to emit as one `STATE_DELTA`.
    ///
    /// The gateway's own deltas are single `add`s whose parents exist (checked by
    /// [`Shadow::parents_of`]); they are applied in place, costing the size of the value.
    /// Anything else (an agent's patch) goes through the `json-patch` crate.
    pub fn apply(&mut self, ops: &[Value]) -> Result<(), String> {
        if let [op] = ops {
            if let Some(()) = self.add_in_place(op) {
                return Ok(());
            }
        }
        let patch: json_patch::Patch =
            serde_json::from_value(Value::Array(ops.to_vec())).map_err(|e| e.to_string())?;
        json_patch::patch(&mut self.doc, &patch).map_err(|e| e.to_string())
    }

    /// RFC 6902 `add` of one member or array element (`-` appends); `None` if `op` is not
    /// such an add or its parent is missing (left to the general path).
    fn add_in_place(&mut self, op: &Value) -> Option<()> {
        if op.get("op")?.as_str()? != "add" {
            return None;
        }
        let path = op.get("path")?.as_str()?;
        let value = op.get("value")?;
        let (parent, last) = path.rsplit_once('/')?;
        let last = last.replace("~1", "/").replace("~0", "~");
        match self.doc.pointer_mut(parent)? {
            Value::Object(m) => {
                m.insert(last, value.clone());
            }
            Value::Array(a) if last == "-" => a.push(value.clone()),
            _ => return None,
        }
        Some(())
    }

    /// Replaces the document (an agent's `agui-state-snapshot`), keeping the gateway's
    /// subtrees.
    pub fn replace_app_state(&mut self, app: &Value) {
        let mut root = match app {
            Value::Object(m) => m.clone(),
            _ => Map::new(),
        };
        if let Value::Object(cur) = &self.doc {
            for key in ["a2a", "view"] {
                if let Some(v) = cur.get(key) {
                    root.insert(key.into(), v.clone());
                }
            }
        }
        self.doc = Value::Object(root);
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

    #[test]
    fn merges_client_state_and_keeps_foreign_keys() {
        let s = Shadow::new(
            Some(&json!({"app": 1, "view": {"x": 2}, "a2a": {"pendingInterrupts": {"old": {}}}})),
            Some("c"),
        );
        assert_eq!(
            s.snapshot(),
            json!({"app": 1, "view": {"x": 2, "artifacts": {}}, "a2a": {"pendingInterrupts": {}, "contextId": "c"}})
        );
    }

    #[test]
    fn in_place_adds_match_rfc_6902() {
        let mut fast = Shadow::new(None, None);
        let mut slow = fast.doc.clone();
        for op in [
            add("/a2a/task", json!({"id": "t"})),
            add("/a2a/task", json!({"id": "u"})),
            add("/view/artifacts/a~1b", json!({"parts": []})),
            add("/view/artifacts/a~1b/parts/-", json!(1)),
        ] {
            fast.apply(std::slice::from_ref(&op)).unwrap();
            let patch: json_patch::Patch = serde_json::from_value(json!([op])).unwrap();
            json_patch::patch(&mut slow, &patch).unwrap();
        }
        assert_eq!(fast.doc, slow);
        assert!(fast.apply(&[add("/missing/x", json!(1))]).is_err());
    }

    #[test]
    fn parents_are_created_and_pointers_checked() {
        let s = Shadow::new(None, None);
        assert_eq!(s.parents_of("/docs/report/x").unwrap().len(), 2);
        assert!(is_pointer("/a~1b"));
        assert!(!is_pointer("/a~2b"));
        assert!(!is_pointer("a"));
        assert_eq!(escape("a/b~c"), "a~1b~0c");
    }
}
