//! The `auth` section (inbound auth, docs/design.md#11-security), parsed: what
//! [`crate::auth`] checks callers against. API keys are kept as SHA-256 digests
//! ([`key_digest`]), never as the keys; a JWT's verification keys are read here, from the
//! JWKS file (RS256/ES256 signing keys) or the HS256 secret, so a key that cannot be used is a
//! configuration problem named at start, not a surprise on the first request.
//!
//! Validation goes on past a problem, like the rest of the configuration: every key is
//! checked, and all their problems are named at once. What it never does: echo a key, a
//! secret or a flag that may hold one.

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{
    err, resolve_reference, AuthConfig, ConfigError, ConfigErrors, JwtConfig, Problems, Secret,
};
use crate::redact::Shown;

/// The longest caller identity (it keys bindings and shows in logs).
pub(crate) const MAX_IDENTITY_BYTES: usize = 256;
/// The shortest API key accepted: guessing must be hopeless, and a mistyped
/// `--api-key KEY` (no `NAME=`) must not pass with a stub such as `=`.
const MIN_API_KEY_BYTES: usize = 16;
/// RFC 7518 §3.2: an HS256 key at least as long as the hash output.
const MIN_HS256_SECRET_BYTES: usize = 32;

/// Inbound auth, parsed: the API keys and the JWT's keys; neither means no inbound auth
/// (every request is the one anonymous caller).
#[derive(Debug, Default)]
pub(crate) struct AuthSettings {
    pub(crate) api_keys: Vec<ApiKey>,
    pub(crate) jwt: Option<JwtSettings>,
}

impl AuthSettings {
    /// Whether any inbound auth is configured.
    pub(crate) fn is_configured(&self) -> bool {
        !self.api_keys.is_empty() || self.jwt.is_some()
    }
}

/// One inbound API key: only its digest is kept.
#[derive(Clone)]
pub(crate) struct ApiKey {
    pub(crate) name: String,
    pub(crate) scopes: Vec<String>,
    /// [`key_digest`] of the key.
    pub(crate) digest: [u8; 32],
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKey")
            .field("name", &self.name)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

/// `auth.jwt`, parsed: the claims a token must carry and the keys it may be signed with.
#[derive(Debug)]
pub(crate) struct JwtSettings {
    pub(crate) issuer: String,
    pub(crate) audience: String,
    pub(crate) identity_claim: String,
    pub(crate) scopes_claim: String,
    /// At least one.
    pub(crate) keys: Vec<JwtKey>,
}

/// One key a JWT may be signed with, and the algorithm it is used with (only that one).
#[derive(Clone)]
pub(crate) struct JwtKey {
    pub(crate) kid: Option<String>,
    pub(crate) alg: Algorithm,
    pub(crate) key: DecodingKey,
}

impl std::fmt::Debug for JwtKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtKey")
            .field("kid", &self.kid)
            .field("alg", &self.alg)
            .finish_non_exhaustive()
    }
}

/// The digest API keys are kept and compared as (SHA-256): of a configured key here, of a
/// presented token in [`crate::auth`].
pub(crate) fn key_digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// Caller names and scopes: printable, no whitespace, bounded.
fn valid_word(s: &str, max: usize) -> bool {
    !s.is_empty() && s.len() <= max && s.chars().all(|c| !c.is_whitespace() && !c.is_control())
}

/// Parses `auth` and the `--api-key NAME=REF` flags (added to the file's keys), resolving
/// references and reading the JWKS file. Errors name the key.
pub(crate) fn parse(file: &AuthConfig, flag_keys: &[Secret]) -> Result<AuthSettings, ConfigErrors> {
    let mut problems = Problems::default();
    let mut entries = Vec::new();
    for (i, k) in file.api_keys.iter().enumerate() {
        let at = format!("auth.api_keys[{i}]");
        entries.push((at, k.name.clone(), k.key.expose(), k.scopes.clone()));
    }
    for raw in flag_keys {
        // The flag may hold a literal key: never echo it.
        let Some((name, reference)) = raw.expose().split_once('=') else {
            problems.push(err(
                "--api-key",
                "must be NAME=REF (REF: env:VAR, file:/path or the key)",
            ));
            continue;
        };
        entries.push((
            "--api-key".to_owned(),
            name.to_owned(),
            reference,
            Vec::new(),
        ));
    }
    let mut api_keys: Vec<ApiKey> = Vec::new();
    for (at, name, reference, scopes) in entries {
        if let Some(key) = problems.take(api_key(&at, name, reference, scopes)) {
            if let Some(other) = api_keys.iter().find(|k| k.name == key.name) {
                problems.push(err(
                    format!("{at}.name"),
                    format!("the name {:?} is used twice", other.name),
                ));
            } else if let Some(other) = api_keys.iter().find(|k| k.digest == key.digest) {
                problems.push(err(
                    format!("{at}.key"),
                    format!(
                        "the same key is configured for {:?} and {:?}",
                        other.name, key.name
                    ),
                ));
            } else {
                api_keys.push(key);
            }
        }
    }
    let jwt = match &file.jwt {
        Some(c) => problems.take(jwt(c)),
        None => None,
    };
    problems.finish()?;
    Ok(AuthSettings { api_keys, jwt })
}

/// One API key entry (`at` names it in errors): its name, the key its reference resolves to
/// (16+ bytes of visible ASCII) and its scopes.
fn api_key(
    at: &str,
    name: String,
    reference: &str,
    scopes: Vec<String>,
) -> Result<ApiKey, ConfigErrors> {
    let mut problems = Problems::default();
    if !valid_word(&name, MAX_IDENTITY_BYTES) {
        problems.push(err(
            format!("{at}.name"),
            format!(
                "{:?} must be 1-{MAX_IDENTITY_BYTES} bytes without spaces",
                Shown(&name).to_string()
            ),
        ));
    }
    if scopes
        .iter()
        .any(|scope| !valid_word(scope, MAX_IDENTITY_BYTES))
    {
        problems.push(err(
            format!("{at}.scopes"),
            "a scope must be a word without spaces",
        ));
    }
    if let Some(key) = problems.take(resolve_reference(&format!("{at}.key"), reference)) {
        if key.len() < MIN_API_KEY_BYTES {
            problems.push(err(
                format!("{at}.key"),
                format!("the key must be at least {MIN_API_KEY_BYTES} bytes"),
            ));
        } else if !key.bytes().all(|b| b.is_ascii_graphic()) {
            problems.push(err(
                format!("{at}.key"),
                "the key must be visible ASCII without spaces (it travels in a header)",
            ));
        }
        problems.finish()?;
        return Ok(ApiKey {
            name,
            scopes,
            digest: key_digest(key.as_bytes()),
        });
    }
    Err(problems.into())
}

/// `auth.jwt`: its claims, and its keys from exactly one of `jwks_file` and `hs256_secret`.
fn jwt(c: &JwtConfig) -> Result<JwtSettings, ConfigError> {
    for (key, v) in [
        ("issuer", &c.issuer),
        ("audience", &c.audience),
        ("identity_claim", &c.identity_claim),
        ("scopes_claim", &c.scopes_claim),
    ] {
        if v.trim().is_empty() {
            return Err(err(format!("auth.jwt.{key}"), "must not be empty"));
        }
    }
    let keys = match (&c.jwks_file, &c.hs256_secret) {
        (Some(_), Some(_)) => {
            return Err(err("auth.jwt", "set jwks_file or hs256_secret, not both"));
        }
        (None, None) => {
            return Err(err(
                "auth.jwt",
                "needs jwks_file (RS256/ES256 public keys) or hs256_secret (HS256)",
            ));
        }
        (None, Some(reference)) => {
            let key = "auth.jwt.hs256_secret";
            let secret = resolve_reference(key, reference.expose())?;
            if secret.len() < MIN_HS256_SECRET_BYTES {
                return Err(err(
                    key,
                    format!("the secret must be at least {MIN_HS256_SECRET_BYTES} bytes"),
                ));
            }
            vec![JwtKey {
                kid: None,
                alg: Algorithm::HS256,
                key: DecodingKey::from_secret(secret.as_bytes()),
            }]
        }
        (Some(path), None) => read_jwks(path)?,
    };
    Ok(JwtSettings {
        issuer: c.issuer.clone(),
        audience: c.audience.clone(),
        identity_claim: c.identity_claim.clone(),
        scopes_claim: c.scopes_claim.clone(),
        keys,
    })
}

/// The RS256/ES256 signing keys of a JWKS file. Keys for other uses or algorithms are
/// skipped; a key that is not a JWK at all, or no usable key, is an error.
fn read_jwks(path: &std::path::Path) -> Result<Vec<JwtKey>, ConfigError> {
    let key = "auth.jwt.jwks_file";
    let shown = path.display();
    let text =
        std::fs::read_to_string(path).map_err(|e| err(key, format!("cannot read {shown}: {e}")))?;
    #[derive(serde::Deserialize)]
    struct Set {
        keys: Vec<Value>,
    }
    let set: Set = serde_json::from_str(&text).map_err(|e| {
        err(
            key,
            format!("{shown} is not a JWKS document ({{\"keys\": [...]}}): {e}"),
        )
    })?;
    let mut out = Vec::new();
    for (j, raw) in set.keys.into_iter().enumerate() {
        let jwk: Jwk = serde_json::from_value(raw)
            .map_err(|e| err(key, format!("{shown}: keys[{j}] is not a JWK: {e}")))?;
        if matches!(jwk.common.public_key_use, Some(ref u) if *u != PublicKeyUse::Signature) {
            continue;
        }
        let alg = match (&jwk.algorithm, jwk.common.key_algorithm) {
            (AlgorithmParameters::RSA(_), None | Some(KeyAlgorithm::RS256)) => Algorithm::RS256,
            (AlgorithmParameters::EllipticCurve(p), None | Some(KeyAlgorithm::ES256))
                if p.curve == EllipticCurve::P256 =>
            {
                Algorithm::ES256
            }
            _ => continue,
        };
        let decoding = DecodingKey::from_jwk(&jwk)
            .map_err(|e| err(key, format!("{shown}: keys[{j}] cannot be used: {e}")))?;
        out.push(JwtKey {
            kid: jwk.common.key_id,
            alg,
            key: decoding,
        });
    }
    if out.is_empty() {
        return Err(err(
            key,
            format!("{shown} holds no RS256 or ES256 signing key"),
        ));
    }
    Ok(out)
}

/// What the auth tests of this module and of `crate::auth` share: the fixture issuer,
/// audience and secret, and an `auth` section parsed from YAML and flags.
#[cfg(test)]
pub(crate) mod test_support {
    use super::*;

    pub(crate) const ISS: &str = "https://issuer.test";
    pub(crate) const AUD: &str = "agui-a2a-gateway";
    pub(crate) const HS_SECRET: &str = "0123456789abcdef0123456789abcdef-test";

    pub(crate) fn fixture(name: &str) -> String {
        format!("{}/fixtures/auth/{name}", env!("CARGO_MANIFEST_DIR"))
    }

    pub(crate) fn build(yaml: &str, flags: &[&str]) -> Result<AuthSettings, ConfigErrors> {
        let file: AuthConfig = serde_yaml_ng::from_str(yaml).unwrap();
        let flags: Vec<Secret> = flags.iter().map(|f| f.parse().unwrap()).collect();
        parse(&file, &flags)
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::*;

    fn temp_file(name: &str, text: &str) -> String {
        let path = std::env::temp_dir().join(format!("auth-test-{}-{name}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }

    fn jwt_unset() -> String {
        format!("jwt: {{issuer: '{ISS}', audience: {AUD}, hs256_secret: env:AUTH_TEST_UNSET_D}}")
    }

    #[test]
    fn config_errors_name_the_key() {
        let key = |yaml: &str, flags: &[&str]| build(yaml, flags).unwrap_err()[0].key.clone();
        assert_eq!(
            key("api_keys: [{name: a, key: key-one-0123456789}, {name: a, key: key-two-0123456789}]", &[]),
            "auth.api_keys[1].name"
        );
        assert_eq!(
            key(
                "api_keys: [{name: a, key: key-one-0123456789}]",
                &["a=key-two-0123456789"]
            ),
            "--api-key.name"
        );
        assert_eq!(
            key("api_keys: [{name: a, key: key-one-0123456789}, {name: b, key: key-one-0123456789}]", &[]),
            "auth.api_keys[1].key"
        );
        assert_eq!(
            key("api_keys: [{name: a, key: ''}]", &[]),
            "auth.api_keys[0].key"
        );
        assert_eq!(
            key("api_keys: [{name: a, key: 'has space 0123456789'}]", &[]),
            "auth.api_keys[0].key"
        );
        assert_eq!(
            key("api_keys: [{name: '', key: key-0123456789abc}]", &[]),
            "auth.api_keys[0].name"
        );
        assert_eq!(
            key("api_keys: [{name: a, key: env:AUTH_TEST_UNSET_VAR}]", &[]),
            "auth.api_keys[0].key"
        );
        assert_eq!(
            key(
                "api_keys: [{name: a, key: key-0123456789abc, scopes: ['a b']}]",
                &[]
            ),
            "auth.api_keys[0].scopes"
        );
        assert_eq!(key("{}", &["no-equals-sign"]), "--api-key");
        // Every key is checked: each unset reference is named, not only the first.
        let unset = build(
            &format!("api_keys: [{{name: a, key: env:AUTH_TEST_UNSET_A}}, {{name: b, key: env:AUTH_TEST_UNSET_B}}]\n{}",
                jwt_unset()),
            &["c=env:AUTH_TEST_UNSET_C"],
        )
        .unwrap_err();
        let named: Vec<_> = unset
            .iter()
            .map(|e| (e.key.as_str(), e.message.as_str()))
            .collect();
        assert_eq!(
            named,
            [
                (
                    "auth.api_keys[0].key",
                    "environment variable AUTH_TEST_UNSET_A is not set"
                ),
                (
                    "auth.api_keys[1].key",
                    "environment variable AUTH_TEST_UNSET_B is not set"
                ),
                (
                    "--api-key.key",
                    "environment variable AUTH_TEST_UNSET_C is not set"
                ),
                (
                    "auth.jwt.hs256_secret",
                    "environment variable AUTH_TEST_UNSET_D is not set"
                ),
            ]
        );
        assert_eq!(key("{}", &["a="]), "--api-key.key");
        assert_eq!(key("{}", &["a=short-key"]), "--api-key.key");
        // A key with `=` in it but no NAME= is caught by the length rule.
        assert_eq!(key("{}", &["c2VjcmV0c2VjcmV0=="]), "--api-key.key");
        let jwt = |rest: &str| format!("jwt: {{issuer: '{ISS}', audience: {AUD}{rest}}}");
        assert_eq!(key(&jwt(""), &[]), "auth.jwt");
        assert_eq!(
            key(
                &jwt(&format!(", hs256_secret: '{HS_SECRET}', jwks_file: /x")),
                &[]
            ),
            "auth.jwt"
        );
        assert_eq!(
            key(&jwt(", hs256_secret: short"), &[]),
            "auth.jwt.hs256_secret"
        );
        assert_eq!(
            key(&jwt(", hs256_secret: env:AUTH_TEST_UNSET_VAR"), &[]),
            "auth.jwt.hs256_secret"
        );
        assert_eq!(
            key(
                &format!("jwt: {{issuer: '', audience: {AUD}, hs256_secret: '{HS_SECRET}'}}"),
                &[]
            ),
            "auth.jwt.issuer"
        );
        let missing = jwt(", jwks_file: /nonexistent/jwks.json");
        assert_eq!(key(&missing, &[]), "auth.jwt.jwks_file");
        for (name, text) in [
            ("not-json", "nope"),
            ("no-keys", "{\"keys\": []}"),
            ("not-a-jwk", "{\"keys\": [{\"kty\": \"RSA\"}]}"),
            ("only-enc", "{\"keys\": [{\"kty\": \"RSA\", \"use\": \"enc\", \"n\": \"AQAB\", \"e\": \"AQAB\"}]}"),
            ("only-hmac", "{\"keys\": [{\"kty\": \"oct\", \"k\": \"c2VjcmV0\"}]}"),
        ] {
            let path = temp_file(name, text);
            let errors = build(&jwt(&format!(", jwks_file: '{path}'")), &[]).unwrap_err();
            assert_eq!(errors[0].key, "auth.jwt.jwks_file", "{name}: {errors}");
            let _ = std::fs::remove_file(path);
        }
        // Keys the gateway cannot use are skipped when a usable one remains.
        let mixed = temp_file(
            "mixed",
            &std::fs::read_to_string(fixture("jwks.json"))
                .unwrap()
                .replacen(
                    "\"keys\": [",
                    "\"keys\": [{\"kty\": \"oct\", \"k\": \"c2VjcmV0\"},",
                    1,
                ),
        );
        assert!(build(&jwt(&format!(", jwks_file: '{mixed}'")), &[]).is_ok());
        let _ = std::fs::remove_file(mixed);
    }
}
