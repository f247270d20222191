//! Agent cards: where to find them, and which endpoint and protocol version they select.
//!
//! Discovery (A2A 1.0 §8.2): `URL/.well-known/agent-card.json`, falling back to the 0.2
//! `agent.json`, or the card URL itself when the configured URL names a `.json` file.
//! Version selection: a 1.0 card lists `supportedInterfaces` (first JSONRPC entry we speak
//! wins, 1.0 preferred); a 0.3 card has top-level `url` + `protocolVersion`. Card URLs are
//! used only when they stay on the configured origin (docs/design.md#9-reliability-and-limits): a
//! card cannot redirect the
//! gateway to another host.

use serde::Deserialize;
use serde_json::Value;
use url::Url;

use super::model::ProtocolVersion;

/// The parts of an agent card the gateway uses.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentCard {
    pub name: String,
    pub description: String,
    pub version: Option<String>,
    pub supported_interfaces: Vec<Interface>,
    /// 0.3 / 0.2 only.
    pub url: Option<String>,
    /// 0.3 / 0.2 only.
    pub protocol_version: Option<String>,
    /// 0.3 only.
    pub preferred_transport: Option<String>,
    pub capabilities: Capabilities,
    pub skills: Vec<Skill>,
}

/// A 1.0 `AgentInterface`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Interface {
    pub url: String,
    pub protocol_binding: String,
    pub protocol_version: String,
}

/// `capabilities`; absent booleans are false.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Capabilities {
    pub streaming: Option<bool>,
    pub extensions: Vec<Value>,
}

/// One advertised skill.
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Skill {
    pub id: String,
    pub name: String,
    pub description: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
}

/// The card URLs to try for a configured agent URL, in order.
pub fn card_urls(configured: &Url) -> Vec<Url> {
    if configured.path().ends_with(".json") {
        return vec![configured.clone()];
    }
    let mut base = configured.clone();
    if !base.path().ends_with('/') {
        base.set_path(&format!("{}/", base.path()));
    }
    [".well-known/agent-card.json", ".well-known/agent.json"]
        .iter()
        .filter_map(|p| base.join(p).ok())
        .collect()
}

/// The JSON-RPC endpoint a card selects, if it selects one we can use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    pub url: Url,
    pub version: ProtocolVersion,
}

fn parse_version(v: &str) -> Option<ProtocolVersion> {
    match v.split('.').next()? {
        "1" => Some(ProtocolVersion::V1),
        // 0.2 agents speak the 0.3 JSON-RPC method names and shapes.
        "0" => Some(ProtocolVersion::V0_3),
        _ => None,
    }
}

fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str() == b.host_str()
        && a.port_or_known_default() == b.port_or_known_default()
}

impl AgentCard {
    /// Picks endpoint and version. `pinned` restricts the version; URLs off `origin` are
    /// replaced by `fallback` (the configured base URL), never followed.
    pub fn select(
        &self,
        pinned: Option<ProtocolVersion>,
        origin: &Url,
        fallback: &Url,
    ) -> Option<Selection> {
        let mut candidates: Vec<(ProtocolVersion, &str)> = self
            .supported_interfaces
            .iter()
            .filter(|i| i.protocol_binding.eq_ignore_ascii_case("JSONRPC"))
            .filter_map(|i| Some((parse_version(&i.protocol_version)?, i.url.as_str())))
            .collect();
        // The card's order is its preference, but we prefer 1.0 when both are offered.
        candidates.sort_by_key(|(v, _)| *v != ProtocolVersion::V1);
        let legacy_transport_ok = self
            .preferred_transport
            .as_deref()
            .is_none_or(|t| t.eq_ignore_ascii_case("JSONRPC"));
        if let (Some(url), true) = (&self.url, legacy_transport_ok) {
            let version = self
                .protocol_version
                .as_deref()
                .and_then(parse_version)
                .unwrap_or(ProtocolVersion::V0_3);
            candidates.push((version, url));
        }
        let (version, raw_url) = candidates
            .into_iter()
            .find(|(v, _)| pinned.is_none_or(|p| p == *v))
            .or_else(|| pinned.map(|p| (p, fallback.as_str())))?;
        let url = Url::parse(raw_url)
            .ok()
            .filter(|u| same_origin(u, origin))
            .unwrap_or_else(|| {
                tracing::warn!(card_url = %crate::redact::Shown(raw_url), "agent card names an endpoint off the configured origin; using the configured URL");
                fallback.clone()
            });
        Some(Selection { url, version })
    }

    /// Whether the card declares the extension `uri` (`capabilities.extensions[].uri`).
    pub fn declares_extension(&self, uri: &str) -> bool {
        self.capabilities
            .extensions
            .iter()
            .any(|e| e.get("uri").and_then(Value::as_str) == Some(uri))
    }

    /// Whether the agent streams (absent means no, A2A 1.0 §8.1).
    pub fn streaming(&self) -> bool {
        self.capabilities.streaming.unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    const SHARED_CARD: &str = include_str!("../../fixtures/a2a/agent-card.json");

    #[test]
    fn card_urls_cover_both_paths_and_direct_cards() {
        let urls = card_urls(&url("http://h:1/agent"));
        assert_eq!(
            urls[0].as_str(),
            "http://h:1/agent/.well-known/agent-card.json"
        );
        assert_eq!(urls[1].as_str(), "http://h:1/agent/.well-known/agent.json");
        assert_eq!(card_urls(&url("http://h:1/c.json")).len(), 1);
    }

    #[test]
    fn dual_card_prefers_v1_and_can_be_pinned() {
        let card: AgentCard = serde_json::from_str(SHARED_CARD).unwrap();
        let origin = url("http://127.0.0.1:60749/");
        let sel = card.select(None, &origin, &origin).unwrap();
        assert_eq!(sel.version, ProtocolVersion::V1);
        let sel = card
            .select(Some(ProtocolVersion::V0_3), &origin, &origin)
            .unwrap();
        assert_eq!(sel.version, ProtocolVersion::V0_3);
        assert!(card.streaming());
    }

    #[test]
    fn off_origin_urls_are_not_followed() {
        let card: AgentCard = serde_json::from_str(SHARED_CARD).unwrap();
        let origin = url("http://127.0.0.1:9999/");
        let sel = card.select(None, &origin, &origin).unwrap();
        assert_eq!(sel.url, origin);
    }

    #[test]
    fn legacy_card_selects_v0_3() {
        let card: AgentCard =
            serde_json::from_str(include_str!("../../fixtures/a2a/js_0_2/agent-card.json"))
                .unwrap();
        let origin = Url::parse(card.url.as_deref().unwrap()).unwrap();
        let sel = card.select(None, &origin, &origin).unwrap();
        assert_eq!(sel.version, ProtocolVersion::V0_3);
    }
}
