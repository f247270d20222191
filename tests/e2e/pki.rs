//! Certificates and keys made by the identity tests (tests/identity/README.md), with rcgen on
//! ring: a private CA, server certificates signed by it (for 127.0.0.1 + localhost, for another
//! name, expired), one signed by a CA nobody trusts, a client certificate for mTLS, and an
//! ECDSA P-256 key pair for RFC 7523 `private_key_jwt` (PKCS#8 PEM, SPKI PEM and public JWK).
//! Everything is written as PEM files into a directory of the test's own, removed on drop.
//! TEST-ONLY keys: made fresh per [`Pki::create`], never reused outside the test.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, PKCS_ECDSA_P256_SHA256,
};
use serde_json::{json, Value};

use crate::binary::TempDir;

/// The name of the certificate that is valid for another host than 127.0.0.1 (reach it with
/// `tls.server_name` or a resolver override).
pub const OTHER_NAME: &str = "agent.internal";
/// The `kid` of the private_key_jwt key's JWK.
pub const CLIENT_JWK_KID: &str = "client-key-1";

/// A certificate (PEM chain of one) and its private key (PKCS#8 PEM), as files.
#[derive(Debug, Clone)]
pub struct CertKey {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl CertKey {
    /// Certificate then key in one PEM buffer, as `reqwest::Identity::from_pem` takes it.
    pub fn identity_pem(&self) -> Vec<u8> {
        let mut pem = std::fs::read(&self.cert).unwrap();
        pem.extend(std::fs::read(&self.key).unwrap());
        pem
    }
}

/// The files of one test's PKI; the directory is removed when this is dropped.
#[derive(Debug)]
pub struct Pki {
    pub dir: TempDir,
    /// The private CA's certificate (PEM): what `tls.ca_file` and `--tls-client-ca` get.
    pub ca: PathBuf,
    /// Signed by the CA for 127.0.0.1 and localhost, serverAuth.
    pub server: CertKey,
    /// Signed by the CA for [`OTHER_NAME`] only.
    pub other_name: CertKey,
    /// Signed by the CA for 127.0.0.1 and localhost, valid 2020-01-01 to 2021-01-01.
    pub expired: CertKey,
    /// For 127.0.0.1 and localhost, signed by a CA of its own that nothing trusts.
    pub unknown_ca: CertKey,
    /// That untrusted CA's certificate.
    pub unknown_ca_root: PathBuf,
    /// Signed by the CA, clientAuth (CN `agui-gateway`): the gateway's mTLS identity.
    pub client: CertKey,
    /// Signed by the untrusted CA, clientAuth: a client certificate the agent refuses.
    pub foreign_client: CertKey,
    /// The private_key_jwt signing key: ECDSA P-256, PKCS#8 PEM (ES256).
    pub jwt_key: PathBuf,
    /// Its public half as SPKI PEM (`oauth_server.mjs --client-public-key`).
    pub jwt_public_pem: PathBuf,
    /// Its public half as a JWK (kid [`CLIENT_JWK_KID`], alg ES256); also accepted there.
    pub jwt_public_jwk: PathBuf,
}

fn ca_params(name: &str) -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = date_time_ymd(2020, 1, 1);
    params.not_after = date_time_ymd(2049, 12, 31);
    params
}

fn leaf_params(cn: &str, names: &[&str], purpose: ExtendedKeyUsagePurpose) -> CertificateParams {
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let mut params = CertificateParams::new(names).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![purpose];
    params.use_authority_key_identifier_extension = true;
    params.not_before = date_time_ymd(2020, 1, 1);
    params.not_after = date_time_ymd(2049, 12, 31);
    params
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Signs `params` for a new key with `issuer`; writes `<name>.crt` and `<name>.key`.
fn issue(
    dir: &Path,
    name: &str,
    params: &CertificateParams,
    issuer: &Issuer<'_, KeyPair>,
) -> CertKey {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
    let cert = params.signed_by(&key, issuer).unwrap();
    CertKey {
        cert: write(dir, &format!("{name}.crt"), &cert.pem()),
        key: write(dir, &format!("{name}.key"), &key.serialize_pem()),
    }
}

/// The public JWK of a P-256 key (RFC 7518 6.2.1: x and y of the uncompressed point).
fn p256_jwk(key: &KeyPair, kid: &str) -> Value {
    let raw = key.public_key_raw();
    assert_eq!((raw.len(), raw[0]), (65, 4), "an uncompressed P-256 point");
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    json!({"kty": "EC", "crv": "P-256", "x": b64(&raw[1..33]), "y": b64(&raw[33..65]),
        "kid": kid, "alg": "ES256", "use": "sig"})
}

impl Pki {
    /// A fresh PKI in a directory of its own.
    pub fn create() -> Self {
        let temp = TempDir::new("pki");
        let dir = temp.path().to_owned();
        let server_names = ["127.0.0.1", "localhost"];
        let server_auth = ExtendedKeyUsagePurpose::ServerAuth;
        let client_auth = ExtendedKeyUsagePurpose::ClientAuth;

        let ca_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
        let params = ca_params("agui-a2a-gateway test CA");
        let ca = write(&dir, "ca.crt", &params.self_signed(&ca_key).unwrap().pem());
        let ca_issuer = Issuer::new(params, ca_key);

        let other_key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
        let params = ca_params("unknown test CA");
        let unknown_ca_root = write(
            &dir,
            "unknown-ca.crt",
            &params.self_signed(&other_key).unwrap().pem(),
        );
        let other_issuer = Issuer::new(params, other_key);

        let server = issue(
            &dir,
            "server",
            &leaf_params("127.0.0.1", &server_names, server_auth.clone()),
            &ca_issuer,
        );
        let other_name = issue(
            &dir,
            "other-name",
            &leaf_params(OTHER_NAME, &[OTHER_NAME], server_auth.clone()),
            &ca_issuer,
        );
        let mut expired_params = leaf_params("127.0.0.1", &server_names, server_auth.clone());
        expired_params.not_before = date_time_ymd(2020, 1, 1);
        expired_params.not_after = date_time_ymd(2021, 1, 1);
        let expired = issue(&dir, "expired", &expired_params, &ca_issuer);
        let unknown_ca = issue(
            &dir,
            "unknown-ca-server",
            &leaf_params("127.0.0.1", &server_names, server_auth),
            &other_issuer,
        );
        let client = issue(
            &dir,
            "client",
            &leaf_params("agui-gateway", &[], client_auth.clone()),
            &ca_issuer,
        );
        let foreign_client = issue(
            &dir,
            "foreign-client",
            &leaf_params("intruder", &[], client_auth),
            &other_issuer,
        );

        let jwt = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).unwrap();
        let jwt_key = write(&dir, "client-jwt.key", &jwt.serialize_pem());
        let jwt_public_pem = write(&dir, "client-jwt.pub.pem", &jwt.public_key_pem());
        let jwt_public_jwk = write(
            &dir,
            "client-jwt.jwk.json",
            &p256_jwk(&jwt, CLIENT_JWK_KID).to_string(),
        );
        Self {
            dir: temp,
            ca,
            server,
            other_name,
            expired,
            unknown_ca,
            unknown_ca_root,
            client,
            foreign_client,
            jwt_key,
            jwt_public_pem,
            jwt_public_jwk,
        }
    }

    /// A reqwest client (rustls) that trusts only this PKI's CA and, with `identity`,
    /// presents `identity` as its client certificate.
    pub fn client(&self, identity: Option<&CertKey>) -> reqwest::Client {
        let ca = reqwest::Certificate::from_pem(&std::fs::read(&self.ca).unwrap()).unwrap();
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .tls_built_in_root_certs(false)
            .add_root_certificate(ca)
            .timeout(std::time::Duration::from_secs(20));
        if let Some(id) = identity {
            builder = builder.identity(reqwest::Identity::from_pem(&id.identity_pem()).unwrap());
        }
        builder.build().unwrap()
    }
}
