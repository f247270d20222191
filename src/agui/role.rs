//! AG-UI message roles (`@ag-ui/core` 1.0 `Message.role`), parsed once where a message
//! enters ([`super::input::Message`]) and written where one leaves (events, snapshots).
//!
//! Invariants: the seven roles AG-UI 1.0 names are variants; any other spelling (a newer
//! role, a client's own) is kept in [`Role::Other`] exactly as sent and written back
//! unchanged, so a client's message round-trips whatever its role. Spellings are
//! case-sensitive, as AG-UI's are (`"User"` is an unknown role, not `user`). Code outside
//! this module compares roles by variant, never by string.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The role of an AG-UI message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Role {
    User,
    Assistant,
    System,
    Developer,
    /// A tool result.
    Tool,
    /// A client-side activity message (interrupt forms, A2UI surfaces): never sent upstream.
    Activity,
    /// The agent's reasoning (thought parts, `docs/mapping.md`): AG-UI 1.0, and `@ag-ui/core`
    /// 0.0.48 and 0.0.59 alike.
    Reasoning,
    /// A role AG-UI 1.0 does not name, as the client spelled it.
    Other(String),
}

impl Role {
    /// The wire spelling.
    pub(crate) fn as_str(&self) -> &str {
        match self {
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::System => "system",
            Self::Developer => "developer",
            Self::Tool => "tool",
            Self::Activity => "activity",
            Self::Reasoning => "reasoning",
            Self::Other(other) => other,
        }
    }
}

impl From<String> for Role {
    fn from(raw: String) -> Self {
        match raw.as_str() {
            "user" => Self::User,
            "assistant" => Self::Assistant,
            "system" => Self::System,
            "developer" => Self::Developer,
            "tool" => Self::Tool,
            "activity" => Self::Activity,
            "reasoning" => Self::Reasoning,
            _ => Self::Other(raw),
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Role {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn known_roles_parse_to_their_variant_and_back() {
        for (raw, role) in [
            ("user", Role::User),
            ("assistant", Role::Assistant),
            ("system", Role::System),
            ("developer", Role::Developer),
            ("tool", Role::Tool),
            ("activity", Role::Activity),
            ("reasoning", Role::Reasoning),
        ] {
            let parsed: Role = serde_json::from_value(json!(raw)).unwrap();
            assert_eq!(parsed, role);
            assert_eq!(serde_json::to_value(&parsed).unwrap(), json!(raw));
        }
    }

    #[test]
    fn unknown_roles_round_trip_unchanged() {
        for raw in ["thinking", "User", "", "rôle:x"] {
            let parsed: Role = serde_json::from_value(json!(raw)).unwrap();
            assert_eq!(parsed, Role::Other(raw.to_owned()));
            assert_eq!(serde_json::to_value(&parsed).unwrap(), json!(raw));
        }
        assert!(serde_json::from_value::<Role>(json!(1)).is_err());
    }
}
