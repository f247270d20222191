//! What an agent card says a caller must present (A2A 1.0 §4.5 `securitySchemes` and
//! `securityRequirements`; 0.3 `securitySchemes` and `security`, OpenAPI-shaped), read into
//! one model, and whether what the gateway is configured to present satisfies it
//! (docs/security.md#the-cards-security).
//!
//! Rules (one home): the requirements are alternatives, each a set of schemes that must all
//! be met; no requirement means nothing is required. A bearer the gateway sends (any
//! `credentials` kind, or an `Authorization` header) meets OAuth2, OpenID Connect and HTTP
//! `bearer` schemes; another HTTP scheme needs an `Authorization` header; an API key in a
//! header needs that header configured (in a query or cookie: never met, the gateway sends
//! neither); mutual TLS needs `tls.client_cert`. A card is foreign text: names are shown
//! through [`crate::redact::Shown`] and at most [`MAX_SCHEMES`] schemes and
//! [`MAX_REQUIREMENTS`] alternatives are read.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

/// The most schemes read from a card.
pub const MAX_SCHEMES: usize = 32;
/// The most alternatives read from a card.
pub const MAX_REQUIREMENTS: usize = 32;

/// A card's security, both versions read into one shape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Security {
    pub schemes: Vec<Scheme>,
    /// Alternatives, each the names of the schemes it needs together.
    pub requirements: Vec<Vec<String>>,
}

/// One declared scheme.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheme {
    pub name: String,
    pub kind: SchemeKind,
}

/// What a scheme asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemeKind {
    /// An API key in a header (`header`), a query parameter or a cookie.
    ApiKey {
        location: String,
        name: String,
    },
    /// An HTTP authentication scheme (`bearer`, `basic`, ...), lower-cased.
    Http {
        scheme: String,
    },
    OAuth2,
    OpenIdConnect,
    MutualTls,
    /// A scheme this gateway does not recognise.
    Unknown,
}

impl SchemeKind {
    /// The scheme's type as `GET /agents/{name}` names it (0.3's spelling).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::ApiKey { .. } => "apiKey",
            Self::Http { .. } => "http",
            Self::OAuth2 => "oauth2",
            Self::OpenIdConnect => "openIdConnect",
            Self::MutualTls => "mutualTLS",
            Self::Unknown => "unknown",
        }
    }
}

/// What the gateway presents to an agent, as configured.
#[derive(Debug, Clone, Default)]
pub struct Presented {
    /// A bearer token on every call (`credentials`, or an `Authorization` header).
    pub bearer: bool,
    /// A static `Authorization` header (any HTTP scheme).
    pub authorization_header: bool,
    /// The names of the configured static headers, lower-cased.
    pub headers: Vec<String>,
    /// A client certificate (`tls.client_cert`).
    pub client_certificate: bool,
}

/// Whether what is presented meets a card's security: as `GET /agents/{name}` shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// The declared schemes: name and type.
    pub schemes: Vec<SchemeView>,
    /// The alternatives the card requires (empty: none).
    pub required: Vec<Vec<String>>,
    /// The first alternative the configuration meets (empty when nothing is required);
    /// `None` when it meets none.
    pub satisfied_by: Option<Vec<String>>,
}

/// One scheme as shown.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct SchemeView {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
}

impl Verdict {
    /// Why the card's requirement is not met, for the start-up warning and `/readyz`.
    pub fn unmet(&self) -> Option<String> {
        if self.satisfied_by.is_some() {
            return None;
        }
        let named: Vec<String> = self
            .required
            .iter()
            .map(|alternative| {
                let parts: Vec<String> = alternative
                    .iter()
                    .map(|name| {
                        let kind = self
                            .schemes
                            .iter()
                            .find(|s| &s.name == name)
                            .map_or("undeclared", |s| s.kind);
                        format!("{} ({kind})", crate::redact::Shown(name))
                    })
                    .collect();
                parts.join(" and ")
            })
            .collect();
        Some(format!(
            "the card requires {}; nothing configured for the agent (credentials, headers, \
             tls.client_cert) satisfies it",
            named.join(" or ")
        ))
    }
}

impl Security {
    /// Reads a card's `securitySchemes` and requirements (1.0 `securityRequirements`, else
    /// 0.3 `security`).
    pub fn read(schemes: &BTreeMap<String, Value>, v1: &[Value], v0_3: &[Value]) -> Self {
        let schemes = schemes
            .iter()
            .take(MAX_SCHEMES)
            .map(|(name, raw)| Scheme {
                name: name.clone(),
                kind: kind_of(raw),
            })
            .collect();
        // 1.0: [{"schemes": {"name": {"list": [scopes]}}}]; 0.3: [{"name": [scopes]}].
        let names = |v: &Value| -> Vec<String> {
            let map = v.get("schemes").unwrap_or(v);
            map.as_object()
                .map(|m| m.keys().take(MAX_SCHEMES).cloned().collect())
                .unwrap_or_default()
        };
        // a2a-sdk 1.3.0 serves both spellings side by side: 1.0's when present.
        let listed = if v1.is_empty() { v0_3 } else { v1 };
        let requirements = listed.iter().take(MAX_REQUIREMENTS).map(names).collect();
        Self {
            schemes,
            requirements,
        }
    }

    /// Whether `presented` meets this security.
    pub fn verdict(&self, presented: &Presented) -> Verdict {
        let met = |name: &String| {
            self.schemes
                .iter()
                .find(|s| &s.name == name)
                .is_some_and(|s| meets(presented, &s.kind))
        };
        let satisfied_by = if self.requirements.is_empty() {
            Some(Vec::new())
        } else {
            self.requirements
                .iter()
                .find(|alternative| alternative.iter().all(met))
                .cloned()
        };
        Verdict {
            schemes: self
                .schemes
                .iter()
                .map(|s| SchemeView {
                    name: s.name.clone(),
                    kind: s.kind.as_str(),
                })
                .collect(),
            required: self.requirements.clone(),
            satisfied_by,
        }
    }
}

fn meets(presented: &Presented, kind: &SchemeKind) -> bool {
    match kind {
        SchemeKind::OAuth2 | SchemeKind::OpenIdConnect => presented.bearer,
        SchemeKind::Http { scheme } if scheme == "bearer" => presented.bearer,
        SchemeKind::Http { .. } => presented.authorization_header,
        SchemeKind::ApiKey { location, name } => {
            location == "header" && presented.headers.contains(&name.to_ascii_lowercase())
        }
        SchemeKind::MutualTls => presented.client_certificate,
        SchemeKind::Unknown => false,
    }
}

/// A scheme's kind: 1.0 names it by its one member (`oauth2SecurityScheme`, ...), 0.3 by
/// `type`.
fn kind_of(raw: &Value) -> SchemeKind {
    let text = |v: &Value, key: &str| {
        v.get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_ascii_lowercase()
    };
    let api_key = |v: &Value| SchemeKind::ApiKey {
        location: text(v, "location").max(text(v, "in")),
        name: v
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    };
    if let Some(v) = raw.get("apiKeySecurityScheme") {
        return api_key(v);
    }
    if let Some(v) = raw.get("httpAuthSecurityScheme") {
        return SchemeKind::Http {
            scheme: text(v, "scheme"),
        };
    }
    if raw.get("oauth2SecurityScheme").is_some() {
        return SchemeKind::OAuth2;
    }
    if raw.get("openIdConnectSecurityScheme").is_some() {
        return SchemeKind::OpenIdConnect;
    }
    if raw.get("mtlsSecurityScheme").is_some() {
        return SchemeKind::MutualTls;
    }
    match text(raw, "type").as_str() {
        "apikey" => api_key(raw),
        "http" => SchemeKind::Http {
            scheme: text(raw, "scheme"),
        },
        "oauth2" => SchemeKind::OAuth2,
        "openidconnect" => SchemeKind::OpenIdConnect,
        "mutualtls" => SchemeKind::MutualTls,
        _ => SchemeKind::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schemes(v: Value) -> BTreeMap<String, Value> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn both_versions_read_into_one_model() {
        let v1 = Security::read(
            &schemes(json!({
                "oauth": {"oauth2SecurityScheme": {"flows": {"clientCredentials": {"tokenUrl": "x"}}}},
                "key": {"apiKeySecurityScheme": {"location": "header", "name": "X-Api-Key"}},
                "mtls": {"mtlsSecurityScheme": {}},
            })),
            &[
                json!({"schemes": {"oauth": {"list": ["a"]}}}),
                json!({"schemes": {"mtls": {"list": []}, "key": {"list": []}}}),
            ],
            &[],
        );
        let v0_3 = Security::read(
            &schemes(json!({
                "oauth": {"type": "oauth2", "flows": {}},
                "key": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
                "mtls": {"type": "mutualTLS"},
            })),
            &[],
            &[json!({"oauth": ["a"]}), json!({"mtls": [], "key": []})],
        );
        assert_eq!(v1, v0_3);
        assert_eq!(v1.requirements, [vec!["oauth"], vec!["key", "mtls"]]);
    }

    #[test]
    fn alternatives_are_met_whole_or_not_at_all() {
        let security = Security::read(
            &schemes(json!({
                "oauth": {"type": "oauth2"},
                "key": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
                "mtls": {"type": "mutualTLS"},
                "cookie": {"type": "apiKey", "in": "cookie", "name": "sid"},
            })),
            &[],
            &[
                json!({"mtls": [], "key": []}),
                json!({"oauth": []}),
                json!({"cookie": []}),
            ],
        );
        let none = security.verdict(&Presented::default());
        assert_eq!(none.satisfied_by, None);
        let shown = none.unmet().unwrap();
        assert!(
            shown.contains("key (apiKey) and mtls (mutualTLS) or oauth (oauth2)"),
            "{shown}"
        );
        let key_only = Presented {
            headers: vec!["x-api-key".into()],
            ..Default::default()
        };
        assert_eq!(security.verdict(&key_only).satisfied_by, None);
        let key_and_cert = Presented {
            client_certificate: true,
            ..key_only
        };
        assert_eq!(
            security.verdict(&key_and_cert).satisfied_by,
            Some(vec!["key".to_owned(), "mtls".to_owned()])
        );
        let bearer = Presented {
            bearer: true,
            ..Default::default()
        };
        assert_eq!(
            security.verdict(&bearer).satisfied_by,
            Some(vec!["oauth".to_owned()])
        );
        assert_eq!(security.verdict(&bearer).unmet(), None);
    }

    #[test]
    fn no_requirement_is_met_by_nothing_and_unknown_schemes_never() {
        let declared_only = Security::read(&schemes(json!({"o": {"type": "oauth2"}})), &[], &[]);
        assert_eq!(
            declared_only.verdict(&Presented::default()).satisfied_by,
            Some(vec![])
        );
        let unknown = Security::read(
            &schemes(json!({"weird": {"type": "x-custom"}})),
            &[],
            &[json!({"weird": []}), json!({"undeclared": []})],
        );
        let everything = Presented {
            bearer: true,
            authorization_header: true,
            headers: vec!["weird".into()],
            client_certificate: true,
        };
        assert_eq!(unknown.verdict(&everything).satisfied_by, None);
    }
}
