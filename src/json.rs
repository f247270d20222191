//! Reading JSON the way both protocols are written: a `null` field reads like an absent one
//! ([`null_default`], for serde), and a string member counts only when it says something
//! ([`str_at`]). Shared by the AG-UI input, the A2A model and the bridge's readers of
//! framework data, so each rule has one home.

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

/// The string at `key` of `v`, if it is a non-empty string.
pub(crate) fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}
