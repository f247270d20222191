//! JWT verification for inbound auth ([`super`]): the `auth.jwt` keys (HS256 secrets, RS256 /
//! ES256 keys of the JWKS file, parsed at start by `crate::config::inbound`) made ready to
//! verify, and a token checked against them by `jsonwebtoken`: only keys of the algorithm the
//! token's header names are tried (an RSA key is never used as an HMAC secret), the `kid`
//! when both name one; `iss`, `aud`, `exp` and `nbf` with [`LEEWAY_S`] of leeway. A verified
//! token's caller is its identity claim (bounded, no control characters: it keys bindings and
//! is logged) with the scopes of its scopes claim (a space-separated string or an array).
//! A refusal says only "invalid" or "expired"; nothing of the token is logged.

use jsonwebtoken::Validation;
use serde_json::{Map, Value};

use super::Caller;
use crate::config::inbound::{JwtKey, JwtSettings, MAX_IDENTITY_BYTES};
use crate::error::Rejection;
use crate::ids::CallerId;

/// Clock skew tolerated on `exp` and `nbf`, in seconds.
const LEEWAY_S: u64 = 30;

/// One key a JWT may be signed with, ready to verify.
pub(super) struct VerifyKey {
    key: JwtKey,
    /// `iss`, `aud`, `exp`, `nbf`, leeway, and this key's algorithm only.
    validation: Validation,
}

impl std::fmt::Debug for VerifyKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.key.fmt(f)
    }
}

/// `auth.jwt`, ready to verify.
#[derive(Debug)]
pub(super) struct JwtVerifier {
    keys: Vec<VerifyKey>,
    identity_claim: String,
    scopes_claim: String,
}

impl JwtVerifier {
    pub(super) fn new(c: &JwtSettings) -> Self {
        let keys = c
            .keys
            .iter()
            .cloned()
            .map(|key| {
                let mut validation = Validation::new(key.alg);
                validation.set_issuer(&[&c.issuer]);
                validation.set_audience(&[&c.audience]);
                validation.set_required_spec_claims(&["exp", "iss", "aud"]);
                validation.validate_nbf = true;
                validation.leeway = LEEWAY_S;
                VerifyKey { key, validation }
            })
            .collect();
        Self {
            keys,
            identity_claim: c.identity_claim.clone(),
            scopes_claim: c.scopes_claim.clone(),
        }
    }

    pub(super) fn verify(&self, token: &str) -> Result<Caller, Rejection> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| Rejection::Invalid)?;
        // The header names the algorithm and maybe the key; only keys of that algorithm
        // are tried (an RS256 key is never used as an HMAC secret).
        let candidates = self.keys.iter().filter(|k| {
            k.key.alg == header.alg
                && match (&header.kid, &k.key.kid) {
                    (Some(want), Some(have)) => want == have,
                    _ => true,
                }
        });
        for key in candidates {
            match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key.key, &key.validation) {
                Ok(data) => return self.caller(data.claims),
                Err(e) => match e.kind() {
                    jsonwebtoken::errors::ErrorKind::InvalidSignature => continue,
                    // Claims are checked after the signature: this token was signed by us.
                    jsonwebtoken::errors::ErrorKind::ExpiredSignature => {
                        return Err(Rejection::Expired)
                    }
                    kind => {
                        tracing::debug!(?kind, "JWT refused");
                        return Err(Rejection::Invalid);
                    }
                },
            }
        }
        Err(Rejection::Invalid)
    }

    fn caller(&self, mut claims: Map<String, Value>) -> Result<Caller, Rejection> {
        let name = match claims.remove(&self.identity_claim) {
            Some(Value::String(s)) if valid_identity(&s) => s,
            _ => {
                tracing::debug!(claim = %self.identity_claim, "JWT without a usable identity claim");
                return Err(Rejection::Invalid);
            }
        };
        let scopes = match claims.remove(&self.scopes_claim) {
            Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
            Some(Value::Array(items)) => items
                .into_iter()
                .filter_map(|v| match v {
                    Value::String(s) => Some(s),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        Ok(Caller {
            id: CallerId::new(name),
            scopes,
            token: None,
        })
    }
}

/// A JWT identity: non-empty, bounded, no control characters (it keys bindings and is logged).
fn valid_identity(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_IDENTITY_BYTES && !s.chars().any(char::is_control)
}
