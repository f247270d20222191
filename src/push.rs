//! A2A push notifications received (docs/design.md#the-live-inbox): the token a task's
//! pushes must carry, the registration the run path sends upstream, and what a push body
//! may be. No I/O here: the HTTP handler (`crate::http::push`) reads the request, the
//! binding store keeps the registrations, the inbox applies what a push says.
//!
//! Invariants: a token is 32 random bytes from the OS ([`token`]), written URL-safe; the
//! store keeps only its SHA-256 [`digest`], so a store dump reveals no token; a presented
//! token is compared with the registered digest in constant time ([`matches`]). Nothing
//! here logs or echoes a token.

use base64::Engine as _;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use crate::a2a::model::{ProtocolVersion, StreamEvent};

/// The header some SDKs send the config's `token` in (the others send it as `Authorization:
/// Bearer`, from the config's `authentication`).
pub(crate) const TOKEN_HEADER: &str = "x-a2a-notification-token";

/// The path of the push route under the gateway's public URL: `/a2a/push/<agent>`.
pub(crate) const PATH_PREFIX: &str = "/a2a/push/";

/// The registration the gateway sends upstream for one task: where to push, and the
/// task's fresh token (set both as the config's `token` and as its `authentication` with
/// scheme `Bearer`).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Registration {
    pub url: String,
    pub token: String,
}

/// Never prints the token.
impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("url", &self.url)
            .field("token", &"[redacted]")
            .finish()
    }
}

/// A registration for a task of `agent`: `<public_url>/a2a/push/<agent>` and a fresh token.
/// The caller stores it with `Store::put_push_token` and sends it with the task's push
/// configuration.
pub(crate) fn registration(agent: &str, public_url: &url::Url) -> Registration {
    Registration {
        url: url(public_url, agent),
        token: token(),
    }
}

/// `<public_url>/a2a/push/<agent>` (a path in `public_url` is kept; agent names are plain,
/// `crate::config` checks them).
pub(crate) fn url(public_url: &url::Url, agent: &str) -> String {
    let base = public_url.as_str().trim_end_matches('/');
    format!("{base}{PATH_PREFIX}{agent}")
}

/// A fresh token: 32 random bytes from the OS, base64url without padding (43 characters).
pub(crate) fn token() -> String {
    let mut bytes = [0u8; 32];
    // The OS's generator does not fail on any platform the gateway runs on; if it ever did,
    // a token of zeros would be guessable, so this panics instead.
    getrandom::fill(&mut bytes).expect("the OS random number generator answers");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The SHA-256 of `token`, hex: what the store keeps.
pub(crate) fn digest(token: &str) -> String {
    let hash = Sha256::digest(token.as_bytes());
    hash.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `presented` is the token whose digest is `registered`, in time independent of
/// where they differ.
pub(crate) fn matches(presented: &str, registered: &str) -> bool {
    let presented = digest(presented);
    presented.as_bytes().ct_eq(registered.as_bytes()).into()
}

/// The token a push carries: `X-A2A-Notification-Token`, else `Authorization: Bearer`.
pub(crate) fn presented_token(headers: &axum::http::HeaderMap) -> Option<&str> {
    if let Some(t) = headers.get(TOKEN_HEADER).and_then(|v| v.to_str().ok()) {
        return Some(t.trim()).filter(|t| !t.is_empty());
    }
    let auth = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = auth.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

/// A push body: a 1.0 `StreamResponse` (`{"task"|"statusUpdate"|"artifactUpdate"|
/// "message": ...}`) or a 0.3 `Task` (`kind: "task"`, or any 0.3 stream object), read by the
/// bindings' own parsers. `None`: not one of them.
pub(crate) fn parse(body: &[u8]) -> Option<StreamEvent> {
    let text = std::str::from_utf8(body).ok()?;
    [ProtocolVersion::V1, ProtocolVersion::V0_3]
        .into_iter()
        .map(|v| v.decode_event(text))
        .find(|e| !matches!(e, StreamEvent::Unknown(_)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderMap, HeaderValue};

    #[test]
    fn tokens_are_fresh_urlsafe_and_only_their_digest_matches() {
        let (a, b) = (token(), token());
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        let d = digest(&a);
        assert_eq!(d.len(), 64);
        assert!(matches(&a, &d));
        assert!(!matches(&b, &d));
        assert!(!matches("", &d));
        assert!(!matches(&a, ""));
        assert!(!matches(&d, &d), "the digest itself is no token");
    }

    #[test]
    fn the_registration_points_at_the_push_route_and_hides_its_token() {
        let base = url::Url::parse("https://gw.internal:8443/base/").unwrap();
        let r = registration("ref", &base);
        assert_eq!(r.url, "https://gw.internal:8443/base/a2a/push/ref");
        let shown = format!("{r:?}");
        assert!(!shown.contains(&r.token), "{shown}");
        let plain = url::Url::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(url(&plain, "a"), "http://127.0.0.1:8080/a2a/push/a");
    }

    #[test]
    fn the_token_is_read_from_either_header() {
        let mut h = HeaderMap::new();
        assert_eq!(presented_token(&h), None);
        h.insert("authorization", HeaderValue::from_static("Bearer abc"));
        assert_eq!(presented_token(&h), Some("abc"));
        h.insert(TOKEN_HEADER, HeaderValue::from_static("xyz"));
        assert_eq!(presented_token(&h), Some("xyz"));
        let mut basic = HeaderMap::new();
        basic.insert("authorization", HeaderValue::from_static("Basic abc"));
        assert_eq!(presented_token(&basic), None);
        let mut empty = HeaderMap::new();
        empty.insert("authorization", HeaderValue::from_static("Bearer  "));
        assert_eq!(presented_token(&empty), None);
    }

    #[test]
    fn bodies_of_both_versions_parse_and_garbage_does_not() {
        let v1_task = br#"{"task": {"id": "t1", "contextId": "c1",
            "status": {"state": "TASK_STATE_INPUT_REQUIRED", "timestamp": "2026-01-01T00:00:00Z"}}}"#;
        let e = parse(v1_task).unwrap();
        assert!(matches!(&e, StreamEvent::Task(t) if t.id == "t1"), "{e:?}");
        let v1_status = br#"{"statusUpdate": {"taskId": "t1", "contextId": "c1",
            "status": {"state": "TASK_STATE_COMPLETED"}}}"#;
        let e = parse(v1_status).unwrap();
        assert_eq!(e.task_id(), Some("t1"));
        assert!(matches!(e, StreamEvent::StatusUpdate(_)));
        let v1_artifact = br#"{"artifactUpdate": {"taskId": "t2", "contextId": "c1",
            "artifact": {"artifactId": "a", "parts": [{"text": "x"}]}}}"#;
        assert_eq!(parse(v1_artifact).unwrap().task_id(), Some("t2"));
        let v1_message = br#"{"message": {"messageId": "m", "role": "ROLE_AGENT",
            "taskId": "t3", "parts": [{"text": "x"}]}}"#;
        assert_eq!(parse(v1_message).unwrap().task_id(), Some("t3"));
        let v03_task = br#"{"kind": "task", "id": "t4", "contextId": "c4",
            "status": {"state": "input-required", "timestamp": "2026-01-01T00:00:00Z"}}"#;
        let e = parse(v03_task).unwrap();
        assert!(matches!(&e, StreamEvent::Task(t) if t.id == "t4"), "{e:?}");
        for garbage in [
            &b""[..],
            b"not json",
            b"{}",
            b"[]",
            b"{\"task\": 1}",
            b"{\"kind\": \"task\"}",
            b"\xff\xfe",
            b"{\"other\": {}}",
        ] {
            assert!(
                parse(garbage).is_none(),
                "{:?}",
                String::from_utf8_lossy(garbage)
            );
        }
    }
}
