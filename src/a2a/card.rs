//! Agent cards: where to find them, and which interface (binding, protocol version, URL,
//! tenant) they select.
//!
//! Discovery (A2A 1.0 §8.2): `URL/.well-known/agent-card.json`, falling back to the 0.2
//! `agent.json`, or the card URL itself when the configured URL names a `.json` file.
//!
//! Selection (docs/bindings.md): the card's interfaces in the card's order — a 1.0 card's
//! `supportedInterfaces`, then a 0.3 card's top-level `url` (its `preferredTransport`) and
//! `additionalInterfaces` — filtered to what the gateway speaks ([`SPOKEN`]) and to the
//! agent's pins (`agents[].binding`, `agents[].protocol`), A2A 1.0 before 0.3 (a stable sort:
//! the card's order holds within a version). The selected interface's `tenant` goes on every
//! call unless `agents[].tenant` overrides it. Card URLs are used only when they stay on the
//! configured origin, whatever the binding (docs/design.md#9-reliability-and-limits): a card
//! cannot redirect the gateway to another host. Data only: no I/O here.

use std::fmt::Write as _;

use serde::Deserialize;
use serde_json::Value;
use url::Url;

use super::model::ProtocolVersion;

pub mod security;

/// The parts of an agent card the gateway uses.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AgentCard {
    pub name: String,
    pub description: String,
    pub version: Option<String>,
    pub provider: Option<Provider>,
    pub documentation_url: Option<String>,
    /// Media types the agent accepts, for every skill.
    #[serde(deserialize_with = "crate::json::null_default")]
    pub default_input_modes: Vec<String>,
    /// Media types the agent answers with, for every skill.
    #[serde(deserialize_with = "crate::json::null_default")]
    pub default_output_modes: Vec<String>,
    pub supported_interfaces: Vec<Interface>,
    /// 0.3 / 0.2 only.
    pub url: Option<String>,
    /// 0.3 / 0.2 only.
    pub protocol_version: Option<String>,
    /// 0.3 only.
    pub preferred_transport: Option<String>,
    /// 0.3 only: more `{url, transport}` of the same agent.
    pub additional_interfaces: Vec<LegacyInterface>,
    pub capabilities: Capabilities,
    pub skills: Vec<Skill>,
    /// Declared schemes by name (both versions; read by [`security`]).
    pub security_schemes: std::collections::BTreeMap<String, Value>,
    /// 1.0: the alternatives a caller must meet.
    pub security_requirements: Vec<Value>,
    /// 0.3: the same, OpenAPI-shaped.
    pub security: Vec<Value>,
    /// 0.3: an extended card is served to authenticated callers.
    pub supports_authenticated_extended_card: Option<bool>,
}

/// A 1.0 `AgentInterface`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Interface {
    pub url: String,
    pub protocol_binding: String,
    pub protocol_version: String,
    /// Sent on every call when set (A2A 1.0 §4.4: the path segment of HTTP+JSON, the
    /// request field of JSON-RPC and gRPC).
    pub tenant: String,
}

/// A 0.3 `AgentInterface` (`additionalInterfaces`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LegacyInterface {
    pub url: String,
    pub transport: String,
}

/// `capabilities`; absent booleans are false.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Capabilities {
    pub streaming: Option<bool>,
    pub push_notifications: Option<bool>,
    pub extensions: Vec<Value>,
    /// 1.0: an extended card is served to authenticated callers.
    pub extended_agent_card: Option<bool>,
}

/// `AgentProvider`: who offers the agent.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Provider {
    pub organization: String,
    pub url: Option<String>,
}

/// One advertised skill, as `GET /agents` shows it (fields in alphabetical order: the order
/// in which the gateway has always written them).
#[derive(Debug, Clone, Default, Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Skill {
    pub description: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
    pub id: String,
    pub name: String,
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

/// An A2A protocol binding (A2A 1.0 §5), as cards spell it in `protocolBinding` (0.3:
/// `transport`, `preferredTransport`). The one home of the bindings' names: the card's
/// ([`Binding::as_str`], also the metrics' `binding` label and the traces'), and the
/// configuration's `agents[].binding` ([`Binding::config_name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Binding {
    JsonRpc,
    HttpJson,
    Grpc,
}

impl Binding {
    /// Every binding.
    pub const ALL: [Binding; 3] = [Self::JsonRpc, Self::HttpJson, Self::Grpc];

    /// The card spelling: `JSONRPC`, `HTTP+JSON`, `GRPC`.
    pub fn as_str(self) -> &'static str {
        self.spellings().0
    }

    /// The configuration's spelling (`agents[].binding`): the card's in lower case.
    pub fn config_name(self) -> &'static str {
        self.spellings().1
    }

    /// Both spellings; a test holds the second to the first in lower case.
    fn spellings(self) -> (&'static str, &'static str) {
        match self {
            Self::JsonRpc => ("JSONRPC", "jsonrpc"),
            Self::HttpJson => ("HTTP+JSON", "http+json"),
            Self::Grpc => ("GRPC", "grpc"),
        }
    }

    /// A card's spelling, in any case; `None` for a custom binding.
    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|b| b.as_str().eq_ignore_ascii_case(raw.trim()))
    }

    /// The configuration's spelling, exactly; `None` for any other.
    pub fn of_config(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.config_name() == raw)
    }
}

/// The bindings and protocol versions the gateway speaks: the one place a binding joins
/// (0.3's HTTP+JSON was ProtoJSON of another proto, `/v1/...` paths: not spoken).
pub const SPOKEN: &[(Binding, ProtocolVersion)] = &[
    (Binding::JsonRpc, ProtocolVersion::V1),
    (Binding::JsonRpc, ProtocolVersion::V0_3),
    (Binding::HttpJson, ProtocolVersion::V1),
    (Binding::Grpc, ProtocolVersion::V1),
];

/// Whether the gateway speaks `binding` in some version.
pub fn speaks(binding: Binding) -> bool {
    SPOKEN.iter().any(|(b, _)| *b == binding)
}

/// What an agent's configuration fixes about the selection (`agents[].protocol`,
/// `agents[].binding`, `agents[].tenant`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pins {
    pub version: Option<ProtocolVersion>,
    pub binding: Option<Binding>,
    pub tenant: Option<String>,
}

/// The interface a card selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    pub url: Url,
    pub version: ProtocolVersion,
    pub binding: Binding,
    /// Sent on every call (A2A 1.0 §4.4); never empty.
    pub tenant: Option<String>,
}

fn parse_version(v: &str) -> Option<ProtocolVersion> {
    match v.trim().split('.').next()? {
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

/// One interface a card offers, as written.
#[derive(Debug, Clone, Copy)]
struct Offer<'a> {
    binding: &'a str,
    version: &'a str,
    url: &'a str,
    tenant: &'a str,
}

/// How many distinct offers a not-ready reason names (a card may list any number).
const MAX_NAMED_OFFERS: usize = 8;

impl AgentCard {
    /// Every interface the card offers, in the card's order: 1.0 `supportedInterfaces`,
    /// then the 0.3 top-level `url` (`preferredTransport`, JSONRPC when absent) and
    /// `additionalInterfaces`.
    fn offers(&self) -> Vec<Offer<'_>> {
        let mut offers: Vec<Offer<'_>> = self
            .supported_interfaces
            .iter()
            .map(|i| Offer {
                binding: &i.protocol_binding,
                version: &i.protocol_version,
                url: &i.url,
                tenant: &i.tenant,
            })
            .collect();
        let legacy_version = self.protocol_version.as_deref().unwrap_or("0.3");
        if let Some(url) = &self.url {
            offers.push(Offer {
                binding: self.preferred_transport.as_deref().unwrap_or("JSONRPC"),
                version: legacy_version,
                url,
                tenant: "",
            });
            offers.extend(self.additional_interfaces.iter().map(|i| Offer {
                binding: &i.transport,
                version: legacy_version,
                url: &i.url,
                tenant: "",
            }));
        }
        offers
    }

    /// Picks the interface to call: the first offer the gateway speaks that the pins allow,
    /// 1.0 before 0.3. A version pin the card does not list falls back to JSON-RPC at
    /// `fallback` (the configured URL); URLs off `origin` are replaced by `fallback`, never
    /// followed. `Err`: why nothing fits, naming what the card offered (for `/readyz`).
    pub fn select(&self, pins: &Pins, origin: &Url, fallback: &Url) -> Result<Selection, String> {
        let offers = self.offers();
        let mut usable: Vec<(Binding, ProtocolVersion, Offer<'_>)> = offers
            .iter()
            .filter_map(|o| Some((Binding::parse(o.binding)?, parse_version(o.version)?, *o)))
            .filter(|(b, v, _)| SPOKEN.contains(&(*b, *v)))
            .filter(|(b, _, _)| pins.binding.is_none_or(|p| p == *b))
            .filter(|(_, v, _)| pins.version.is_none_or(|p| p == *v))
            .collect();
        // The card's order is its preference; among versions, 1.0 first.
        usable.sort_by_key(|(_, v, _)| *v != ProtocolVersion::V1);
        let pinned_tenant = pins.tenant.clone().filter(|t| !t.is_empty());
        let Some((binding, version, offer)) = usable.first() else {
            // A version the card does not list: JSON-RPC at the configured URL (as before
            // bindings were selectable).
            return match (pins.version, pins.binding) {
                (Some(version), None | Some(Binding::JsonRpc)) => Ok(Selection {
                    url: fallback.clone(),
                    version,
                    binding: Binding::JsonRpc,
                    tenant: pinned_tenant,
                }),
                _ => Err(unusable(&offers, pins)),
            };
        };
        let url = Url::parse(offer.url)
            .ok()
            .filter(|u| same_origin(u, origin))
            .unwrap_or_else(|| {
                tracing::warn!(card_url = %crate::redact::Shown(offer.url), "agent card names an endpoint off the configured origin; using the configured URL");
                fallback.clone()
            });
        let tenant =
            pinned_tenant.or_else(|| Some(offer.tenant.to_owned()).filter(|t| !t.is_empty()));
        Ok(Selection {
            url,
            version: *version,
            binding: *binding,
            tenant,
        })
    }

    /// Whether the card declares the extension `uri` (`capabilities.extensions[].uri`).
    pub fn declares_extension(&self, uri: &str) -> bool {
        self.capabilities
            .extensions
            .iter()
            .any(|e| e.get("uri").and_then(Value::as_str) == Some(uri))
    }

    /// The card's security, both versions read into one model.
    pub fn security(&self) -> security::Security {
        security::Security::read(
            &self.security_schemes,
            &self.security_requirements,
            &self.security,
        )
    }

    /// Whether the card says an extended card is served to authenticated callers (1.0
    /// `capabilities.extendedAgentCard`, 0.3 `supportsAuthenticatedExtendedCard`).
    pub fn has_extended_card(&self) -> bool {
        self.capabilities.extended_agent_card == Some(true)
            || self.supports_authenticated_extended_card == Some(true)
    }

    /// Whether the agent streams (absent means no, A2A 1.0 §8.1).
    pub fn streaming(&self) -> bool {
        self.capabilities.streaming.unwrap_or(false)
    }
}

/// Why no offer fits: what the card offered (cut and escaped: a card is foreign text),
/// what the gateway speaks, and the pins that narrowed it.
fn unusable(offers: &[Offer<'_>], pins: &Pins) -> String {
    let mut named: Vec<String> = Vec::new();
    for o in offers {
        let one = format!(
            "{} ({})",
            crate::redact::Shown(o.binding.trim()),
            crate::redact::Shown(o.version.trim())
        );
        if !named.contains(&one) {
            named.push(one);
        }
    }
    let mut reason = match named.len() {
        0 => "the card offers no interface".to_owned(),
        n if n > MAX_NAMED_OFFERS => format!(
            "the card offers {} and {} more",
            named[..MAX_NAMED_OFFERS].join(", "),
            n - MAX_NAMED_OFFERS
        ),
        _ => format!("the card offers {}", named.join(", ")),
    };
    let _ = write!(reason, "; the gateway speaks {}", spoken());
    if let Some(b) = pins.binding {
        let _ = write!(reason, "; agents[].binding pins {}", b.as_str());
    }
    if let Some(v) = pins.version {
        let _ = write!(reason, "; agents[].protocol pins {}", v.as_str());
    }
    reason
}

/// [`SPOKEN`] as a reason names it: `JSONRPC (1.0, 0.3), HTTP+JSON (1.0)`.
pub fn spoken() -> String {
    let mut out: Vec<(Binding, Vec<&str>)> = Vec::new();
    for (b, v) in SPOKEN {
        match out.iter_mut().find(|(seen, _)| seen == b) {
            Some((_, versions)) => versions.push(v.as_str()),
            None => out.push((*b, vec![v.as_str()])),
        }
    }
    out.iter()
        .map(|(b, vs)| format!("{} ({})", b.as_str(), vs.join(", ")))
        .collect::<Vec<_>>()
        .join(", ")
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

    fn pins(version: Option<ProtocolVersion>, binding: Option<Binding>) -> Pins {
        Pins {
            version,
            binding,
            tenant: None,
        }
    }

    fn card(interfaces: serde_json::Value) -> AgentCard {
        serde_json::from_value(serde_json::json!({"name": "c", "supportedInterfaces": interfaces}))
            .unwrap()
    }

    #[test]
    fn dual_card_prefers_v1_and_can_be_pinned() {
        let card: AgentCard = serde_json::from_str(SHARED_CARD).unwrap();
        let origin = url("http://127.0.0.1:60749/");
        let sel = card.select(&Pins::default(), &origin, &origin).unwrap();
        assert_eq!(
            (sel.version, sel.binding),
            (ProtocolVersion::V1, Binding::JsonRpc)
        );
        let sel = card
            .select(&pins(Some(ProtocolVersion::V0_3), None), &origin, &origin)
            .unwrap();
        assert_eq!(sel.version, ProtocolVersion::V0_3);
        assert!(card.streaming());
    }

    #[test]
    fn a_binding_pin_picks_that_interface() {
        let card: AgentCard = serde_json::from_str(SHARED_CARD).unwrap();
        let origin = url("http://127.0.0.1:60749/");
        let sel = card
            .select(&pins(None, Some(Binding::HttpJson)), &origin, &origin)
            .unwrap();
        assert_eq!(
            (sel.binding, sel.version, sel.url.as_str()),
            (
                Binding::HttpJson,
                ProtocolVersion::V1,
                "http://127.0.0.1:60749/rest"
            ),
            "HTTP+JSON 0.3 is not spoken: the 1.0 interface"
        );
        let refused = card
            .select(
                &pins(Some(ProtocolVersion::V0_3), Some(Binding::HttpJson)),
                &origin,
                &origin,
            )
            .unwrap_err();
        assert!(
            refused.contains("agents[].binding pins HTTP+JSON"),
            "{refused}"
        );
    }

    /// The card's order decides, among what the gateway speaks: GRPC first then JSONRPC
    /// (a2a-sdk's sample) selects gRPC, a pin JSON-RPC; HTTP+JSON first is taken.
    #[test]
    fn the_card_order_decides_among_spoken_bindings() {
        let origin = url("http://h:1/");
        let grpc_first = card(serde_json::json!([
            {"url": "http://h:1/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
            {"url": "http://h:1/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": "http://h:1/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
        ]));
        let sel = grpc_first
            .select(&Pins::default(), &origin, &origin)
            .unwrap();
        assert_eq!((sel.binding, sel.url.path()), (Binding::Grpc, "/grpc"));
        let sel = grpc_first
            .select(&pins(None, Some(Binding::JsonRpc)), &origin, &origin)
            .unwrap();
        assert_eq!((sel.binding, sel.url.path()), (Binding::JsonRpc, "/rpc"));
        let rest_first = card(serde_json::json!([
            {"url": "http://h:1/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
            {"url": "http://h:1/rest", "protocolBinding": "http+json", "protocolVersion": "1.0"},
            {"url": "http://h:1/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ]));
        let sel = rest_first
            .select(&Pins::default(), &origin, &origin)
            .unwrap();
        assert_eq!(
            (sel.binding, sel.version, sel.url.path()),
            (Binding::HttpJson, ProtocolVersion::V1, "/rest"),
            "1.0 before 0.3, then the card's order (any case)"
        );
        let pinned = rest_first
            .select(&pins(None, Some(Binding::JsonRpc)), &origin, &origin)
            .unwrap();
        assert_eq!(
            (pinned.binding, pinned.version),
            (Binding::JsonRpc, ProtocolVersion::V1)
        );
    }

    /// A Vertex-AI-Agent-Engine-shaped card: HTTP+JSON only, under a path prefix, with a
    /// tenant; `agents[].tenant` overrides it.
    #[test]
    fn the_interface_tenant_is_selected_and_can_be_overridden() {
        let origin = url("https://h/");
        let rest_only = card(
            serde_json::json!([{"url": "https://h/v1/projects/p/agents/a",
            "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0", "tenant": "acme"}]),
        );
        let sel = rest_only
            .select(&Pins::default(), &origin, &origin)
            .unwrap();
        assert_eq!(
            (sel.binding, sel.tenant.as_deref(), sel.url.path()),
            (Binding::HttpJson, Some("acme"), "/v1/projects/p/agents/a")
        );
        let over = Pins {
            tenant: Some("other".into()),
            ..Pins::default()
        };
        let sel = rest_only.select(&over, &origin, &origin).unwrap();
        assert_eq!(sel.tenant.as_deref(), Some("other"));
        let untenanted = card(
            serde_json::json!([{"url": "https://h/", "protocolBinding": "JSONRPC",
            "protocolVersion": "1.0", "tenant": ""}]),
        );
        let sel = untenanted
            .select(&Pins::default(), &origin, &origin)
            .unwrap();
        assert_eq!(sel.tenant, None, "an empty tenant is none");
    }

    #[test]
    fn a_card_with_nothing_spoken_names_what_it_offers() {
        let origin = url("http://h:1/");
        let grpc_only = card(serde_json::json!([
            {"url": "http://h:1/", "protocolBinding": "GRPC", "protocolVersion": "0.3"},
            {"url": "http://h:1/", "protocolBinding": "GRPC", "protocolVersion": "0.3"},
            {"url": "http://h:1/", "protocolBinding": "HTTP+JSON", "protocolVersion": "0.3"},
            {"url": "http://h:1/", "protocolBinding": "urn:x\nforged", "protocolVersion": "2"}
        ]));
        let reason = grpc_only
            .select(&Pins::default(), &origin, &origin)
            .unwrap_err();
        assert_eq!(
            reason,
            "the card offers GRPC (0.3), HTTP+JSON (0.3), urn:x\\nforged (2); \
             the gateway speaks JSONRPC (1.0, 0.3), HTTP+JSON (1.0), GRPC (1.0)"
        );
        let empty = card(serde_json::json!([]));
        assert!(empty
            .select(&Pins::default(), &origin, &origin)
            .unwrap_err()
            .starts_with("the card offers no interface;"));
        // A version pin still falls back to JSON-RPC at the configured URL.
        let sel = grpc_only
            .select(&pins(Some(ProtocolVersion::V1), None), &origin, &origin)
            .unwrap();
        assert_eq!((sel.binding, sel.url), (Binding::JsonRpc, origin));
    }

    #[test]
    fn off_origin_urls_are_not_followed() {
        let card: AgentCard = serde_json::from_str(SHARED_CARD).unwrap();
        let origin = url("http://127.0.0.1:9999/");
        let sel = card.select(&Pins::default(), &origin, &origin).unwrap();
        assert_eq!(sel.url, origin);
        let rest = card
            .select(&pins(None, Some(Binding::HttpJson)), &origin, &origin)
            .unwrap();
        assert_eq!(
            (rest.binding, rest.url),
            (Binding::HttpJson, origin),
            "on every binding"
        );
    }

    #[test]
    fn legacy_card_selects_v0_3() {
        let card: AgentCard =
            serde_json::from_str(include_str!("../../fixtures/a2a/js_0_2/agent-card.json"))
                .unwrap();
        let origin = Url::parse(card.url.as_deref().unwrap()).unwrap();
        let sel = card.select(&Pins::default(), &origin, &origin).unwrap();
        assert_eq!(sel.version, ProtocolVersion::V0_3);
    }

    /// A 0.3 card preferring another transport is called on a JSON-RPC interface it lists in
    /// `additionalInterfaces`.
    #[test]
    fn legacy_additional_interfaces_are_offers() {
        let card: AgentCard = serde_json::from_value(serde_json::json!({"name": "l",
            "url": "http://h:1/grpc", "preferredTransport": "GRPC", "protocolVersion": "0.3.0",
            "additionalInterfaces": [{"url": "http://h:1/rpc", "transport": "JSONRPC"}]}))
        .unwrap();
        let origin = url("http://h:1/");
        let sel = card.select(&Pins::default(), &origin, &origin).unwrap();
        assert_eq!(
            (sel.binding, sel.version, sel.url.path()),
            (Binding::JsonRpc, ProtocolVersion::V0_3, "/rpc")
        );
    }

    /// The configuration names a binding as the card does, in lower case; each reads back.
    #[test]
    fn each_binding_has_one_spelling_per_place() {
        for b in Binding::ALL {
            assert_eq!(b.config_name(), b.as_str().to_ascii_lowercase(), "{b:?}");
            assert_eq!(Binding::parse(b.as_str()), Some(b));
            assert_eq!(Binding::parse(b.config_name()), Some(b));
            assert_eq!(Binding::of_config(b.config_name()), Some(b));
            assert_eq!(
                Binding::of_config(b.as_str()),
                None,
                "{b:?}: the config's is lower case"
            );
        }
        assert_eq!(Binding::parse("soap"), None);
        // The words that list the configuration's values list exactly these.
        let names: Vec<&str> = Binding::ALL.map(Binding::config_name).to_vec();
        let root = env!("CARGO_MANIFEST_DIR");
        let docs = std::fs::read_to_string(format!("{root}/docs/bindings.md")).unwrap();
        let listed = format!("`agents[].binding: auto | {}`", names.join(" | "));
        assert!(docs.contains(&listed), "docs/bindings.md: {listed}");
        let example =
            std::fs::read_to_string(format!("{root}/config/gateway.example.yaml")).unwrap();
        let listed = format!("# {} (docs/bindings.md)", names.join(" | "));
        assert!(
            example.contains(&listed),
            "config/gateway.example.yaml: {listed}"
        );
    }
}
