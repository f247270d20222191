//! Reading JSON the way both protocols are written: a `null` field reads like an absent one
//! ([`null_default`], for serde), and a string member counts only when it says something
//! ([`str_at`]). Shared by the AG-UI input, the A2A model and the bridge's readers of
//! framework data, so each rule has one home. JSON as `google.protobuf.Value`
//! ([`to_protobuf`]) for both protobuf encodings: the A2A gRPC binding and AG-UI's
//! HTTP+Protobuf.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// `null` reads as the default, like an absent field (`#[serde(deserialize_with)]`).
pub(crate) fn null_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// `v` as a `google.protobuf.Value`. Numbers become doubles, as in JavaScript (an integer
/// beyond 2^53 loses precision, as it does in `JSON.parse`).
pub(crate) fn to_protobuf(v: &Value) -> prost_types::Value {
    use prost_types::value::Kind;
    let kind = match v {
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or_default()),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Array(items) => Kind::ListValue(prost_types::ListValue {
            values: items.iter().map(to_protobuf).collect(),
        }),
        Value::Object(map) => Kind::StructValue(to_protobuf_struct(map)),
    };
    prost_types::Value { kind: Some(kind) }
}

/// A JSON object as a `google.protobuf.Struct`.
pub(crate) fn to_protobuf_struct(map: &serde_json::Map<String, Value>) -> prost_types::Struct {
    prost_types::Struct {
        fields: map
            .iter()
            .map(|(k, v)| (k.clone(), to_protobuf(v)))
            .collect(),
    }
}

/// The string at `key` of `v`, if it is a non-empty string.
pub(crate) fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}
