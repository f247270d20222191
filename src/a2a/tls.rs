//! TLS of every upstream connection (docs/security.md#upstream-trust): the card fetch and
//! unary calls (reqwest), streams read by [`super::direct`], and gRPC channels all use one
//! rustls configuration per agent, built here from its trust ([`TlsTrust`], parsed from
//! `agents[].tls` by `crate::config::upstream`).
//!
//! Rules (one home):
//! - Trusted roots: the built-in web roots (webpki-roots), the operating system's store
//!   (rustls-native-certs, read once per process; a store that cannot be read is a warning,
//!   not a failure), and `tls.ca_file`.
//! - `tls.server_name`: the agent's certificate is verified against that name instead of
//!   the URL's host; it is also the SNI where the gateway opens the connection itself
//!   (direct streams, gRPC). reqwest sends the URL's host as SNI (it has no override).
//! - mTLS: `tls.client_cert` / `client_key` are offered to every server that asks.
//! - ALPN per transport: `h2` and `http/1.1` for reqwest (HTTP/2 where the agent offers it),
//!   `http/1.1` for direct streams, `h2` for gRPC.
//! - A refused handshake is explained by its reason ([`explain`]: unknown CA, expired, name
//!   mismatch, a client certificate required or refused), never with key material.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, WebPkiServerVerifier};
use rustls::sign::CertifiedKey;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// What one agent's connections trust and present (`agents[].tls`, parsed).
#[derive(Debug, Clone, Default)]
pub struct TlsTrust {
    /// Roots trusted besides the OS store and the built-in ones (`ca_file`).
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// The client certificate and key (mTLS), if any.
    pub client_identity: Option<ClientIdentity>,
    /// The name to verify in place of the URL's host.
    pub server_name: Option<ServerName<'static>>,
}

/// An mTLS client certificate chain and its key.
#[derive(Clone)]
pub struct ClientIdentity {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: Arc<PrivateKeyDer<'static>>,
}

impl std::fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientIdentity")
            .field("certificates", &self.chain.len())
            .field("key", &"[redacted]")
            .finish()
    }
}

/// One agent's TLS, one configuration per transport (they differ only in ALPN).
#[derive(Debug, Clone)]
pub struct AgentTls {
    /// reqwest's: HTTP/2 or HTTP/1.1.
    pub(crate) http: Arc<ClientConfig>,
    /// Direct streams: HTTP/1.1.
    pub(crate) http1: Arc<ClientConfig>,
    /// gRPC: HTTP/2.
    pub(crate) h2: Arc<ClientConfig>,
    /// The name sent as SNI and verified where the gateway connects itself.
    pub(crate) server_name: Option<ServerName<'static>>,
    /// The client certificate presented, and whether a server asked for one.
    client_certificate: Arc<ClientCertificate>,
}

impl AgentTls {
    /// The TLS of an agent that trusts `trust`; `Err` names why rustls refused it (a key
    /// that does not match its certificate, ...).
    pub fn new(trust: &TlsTrust) -> Result<Self, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = match &trust.extra_roots[..] {
            [] => default_roots(),
            extra => {
                let mut roots = (*default_roots()).clone();
                for root in extra {
                    roots
                        .add(root.clone())
                        .map_err(|e| format!("tls.ca_file: a certificate cannot be a root: {e}"))?;
                }
                Arc::new(roots)
            }
        };
        let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|e| format!("tls: {e}"))?;
        let verifier: Arc<dyn ServerCertVerifier> = match &trust.server_name {
            Some(name) => Arc::new(VerifyAs {
                inner: webpki,
                name: name.clone(),
            }),
            None => webpki,
        };
        let key = match &trust.client_identity {
            Some(id) => Some(Arc::new(
                CertifiedKey::from_der(id.chain.clone(), id.key.clone_key(), &provider)
                    .map_err(|e| format!("tls.client_cert / tls.client_key: {e}"))?,
            )),
            None => None,
        };
        let client_certificate = Arc::new(ClientCertificate {
            key,
            asked: AtomicBool::new(false),
        });
        let base = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("tls: {e}"))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_client_cert_resolver(client_certificate.clone());
        let with_alpn = |alpn: &[&[u8]]| {
            let mut config = base.clone();
            config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
            Arc::new(config)
        };
        Ok(Self {
            http: with_alpn(&[b"h2", b"http/1.1"]),
            http1: with_alpn(&[b"http/1.1"]),
            h2: with_alpn(&[b"h2"]),
            server_name: trust.server_name.clone(),
            client_certificate,
        })
    }

    /// Why a connection to this agent failed, if TLS explains it: [`explain`], or, when the
    /// agent asked for a client certificate and the connection was then cut (TLS 1.3 servers
    /// refuse a missing or untrusted one after the handshake, and their alert is often lost
    /// to the reset), that.
    pub fn explain(&self, e: &(dyn std::error::Error + 'static)) -> Option<String> {
        explain(e).or_else(|| {
            let cut = io_kinds(e).any(|k| {
                use std::io::ErrorKind::*;
                matches!(
                    k,
                    UnexpectedEof | ConnectionReset | BrokenPipe | ConnectionAborted
                )
            });
            if !cut || !self.client_certificate.asked.load(Ordering::Relaxed) {
                return None;
            }
            Some(match self.client_certificate.key {
                None => "TLS: the agent asks for a client certificate and none is configured \
                         (tls.client_cert, tls.client_key); it closed the connection"
                    .to_owned(),
                Some(_) => "TLS: the agent asked for a client certificate and closed the \
                            connection on the gateway's: it may not trust it (tls.client_cert)"
                    .to_owned(),
            })
        })
    }

    /// `builder` using this TLS (reqwest's own roots and settings replaced).
    pub fn reqwest(&self, builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
        builder.use_preconfigured_tls((*self.http).clone())
    }

    /// The name to send as SNI and verify for a connection to `host`.
    pub(crate) fn name_for(&self, host: &str) -> Result<ServerName<'static>, String> {
        match &self.server_name {
            Some(name) => Ok(name.clone()),
            None => ServerName::try_from(host.to_owned())
                .map_err(|_| format!("{host:?} is not a name TLS can verify")),
        }
    }
}

/// The protocol a connection the gateway opens itself will speak (its ALPN offer).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Alpn {
    /// Direct streams.
    Http1,
    /// gRPC.
    H2,
}

impl AgentTls {
    /// The TLS of agents without `tls` settings (the OS store and the built-in roots),
    /// built once per process.
    pub fn default_trust() -> &'static AgentTls {
        static DEFAULT: OnceLock<AgentTls> = OnceLock::new();
        DEFAULT.get_or_init(|| {
            AgentTls::new(&TlsTrust::default()).expect("the default TLS configuration builds")
        })
    }

    /// A connection to `url`'s host and port: TLS for `https://` (SNI and the verified
    /// name from [`AgentTls::name_for`]), plain TCP otherwise; `TCP_NODELAY` on. The caller
    /// bounds the time it takes (`timeouts.connect`).
    pub(crate) async fn connect(&self, url: &url::Url, alpn: Alpn) -> std::io::Result<Connection> {
        let invalid = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidInput, m);
        let host = url
            .host_str()
            .ok_or_else(|| invalid("the URL has no host".into()))?;
        let port = url
            .port_or_known_default()
            .ok_or_else(|| invalid("the URL has no port".into()))?;
        // IPv6 literals come bracketed in the URL; the socket address wants them bare.
        let bare_host = host.trim_start_matches('[').trim_end_matches(']');
        let tcp = TcpStream::connect((bare_host, port)).await?;
        tcp.set_nodelay(true)?;
        if url.scheme() != "https" {
            return Ok(Connection::Plain(tcp));
        }
        let config = match alpn {
            Alpn::Http1 => &self.http1,
            Alpn::H2 => &self.h2,
        };
        let name = self.name_for(bare_host).map_err(invalid)?;
        let tls = tokio_rustls::TlsConnector::from(config.clone())
            .connect(name, tcp)
            .await?;
        Ok(Connection::Tls(Box::new(tls)))
    }
}

/// A connection the gateway opens itself (direct streams, gRPC): plain TCP, or TLS over it.
#[derive(Debug)]
pub(crate) enum Connection {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for Connection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(io) => Pin::new(io).poll_read(cx, buf),
            Self::Tls(io) => Pin::new(io.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Connection {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(io) => Pin::new(io).poll_write(cx, buf),
            Self::Tls(io) => Pin::new(io.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(io) => Pin::new(io).poll_flush(cx),
            Self::Tls(io) => Pin::new(io.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Self::Plain(io) => Pin::new(io).poll_shutdown(cx),
            Self::Tls(io) => Pin::new(io.as_mut()).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(io) => Pin::new(io).poll_write_vectored(cx, bufs),
            Self::Tls(io) => Pin::new(io.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(io) => io.is_write_vectored(),
            Self::Tls(io) => io.is_write_vectored(),
        }
    }
}

/// Presents the configured client certificate (mTLS), and remembers that a server asked
/// for one ([`AgentTls::explain`]).
#[derive(Debug)]
struct ClientCertificate {
    key: Option<Arc<CertifiedKey>>,
    asked: AtomicBool,
}

impl ResolvesClientCert for ClientCertificate {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[rustls::SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        self.asked.store(true, Ordering::Relaxed);
        self.key.clone()
    }

    fn has_certs(&self) -> bool {
        self.key.is_some()
    }
}

/// The kinds of the `io::Error`s in `e`'s chain (opening wrapped ones).
fn io_kinds<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = std::io::ErrorKind> + 'a {
    let mut stack = vec![e];
    std::iter::from_fn(move || {
        while let Some(e) = stack.pop() {
            if let Some(next) = e.source() {
                stack.push(next);
            }
            if let Some(io) = e.downcast_ref::<std::io::Error>() {
                if let Some(inner) = io.get_ref() {
                    stack.push(inner);
                }
                return Some(io.kind());
            }
        }
        None
    })
}

/// The built-in roots and the OS store's, read and parsed once per process and shared by
/// every agent without `tls.ca_file` (parsed, the OS store is some 200 KiB: one copy per
/// agent would make each agent cost that much).
fn default_roots() -> Arc<RootCertStore> {
    static ROOTS: OnceLock<Arc<RootCertStore>> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let mut roots = RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            let found = rustls_native_certs::load_native_certs();
            if !found.errors.is_empty() {
                tracing::warn!(
                    errors = found.errors.len(),
                    loaded = found.certs.len(),
                    "the OS trust store could not be read whole; upstream TLS trusts the \
                     built-in roots, what was read, and tls.ca_file"
                );
            }
            roots.add_parsable_certificates(found.certs);
            Arc::new(roots)
        })
        .clone()
}

/// Verifies the server's certificate against a configured name (`tls.server_name`) rather
/// than the one the connection was opened with; otherwise exactly the WebPKI verifier.
#[derive(Debug)]
struct VerifyAs {
    inner: Arc<WebPkiServerVerifier>,
    name: ServerName<'static>,
}

impl ServerCertVerifier for VerifyAs {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.inner
            .verify_server_cert(end_entity, intermediates, &self.name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

/// Why a TLS handshake failed, in the operator's terms, if `e` (or an error it wraps) is a
/// TLS error. Names settings to check; never shows certificate or key material.
pub fn explain(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    explain_for(
        e,
        "the agent",
        "the OS store, the built-in roots, tls.ca_file",
    )
}

/// [`explain`], naming `peer` (the agent, the Redis server) as the one that refused and
/// `roots` as what it trusts.
pub(crate) fn explain_for(
    e: &(dyn std::error::Error + 'static),
    peer: &str,
    roots: &str,
) -> Option<String> {
    tls_error(e).map(|e| reason(e, peer, roots))
}

/// The TLS error in `e`'s chain: in a source, or wrapped in an `io::Error` (tokio-rustls
/// wraps it in one, hyper-rustls that in another; `io::Error::source` skips the wrapped
/// error itself, so each is opened), or shared in an `Arc` (the `redis` crate's errors hand
/// theirs on as `Arc<dyn Error>`, which no downcast sees through, so it is opened too).
fn tls_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    type Shared = Arc<dyn std::error::Error + Send + Sync>;
    let mut next = Some(e);
    while let Some(e) = next {
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        let wrapped: Option<&(dyn std::error::Error + 'static)> = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map(|inner| inner as _)
            .or_else(|| e.downcast_ref::<Shared>().map(|shared| &**shared as _));
        if let Some(tls) = wrapped.and_then(tls_error) {
            return Some(tls);
        }
        next = e.source();
    }
    None
}

fn reason(e: &rustls::Error, peer: &str, roots: &str) -> String {
    use rustls::AlertDescription as Alert;
    match e {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer => {
                format!("TLS: {peer}'s certificate is signed by an unknown CA (trusted: {roots})")
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                format!("TLS: {peer}'s certificate has expired")
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                format!("TLS: {peer}'s certificate is not valid yet")
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                format!(
                    "TLS: {peer}'s certificate does not name the host it was reached at \
                     (tls.server_name sets the name to verify)"
                )
            }
            CertificateError::Revoked => format!("TLS: {peer}'s certificate is revoked"),
            other => format!("TLS: {peer}'s certificate was refused ({other:?})"),
        },
        rustls::Error::AlertReceived(
            alert @ (Alert::CertificateRequired
            | Alert::BadCertificate
            | Alert::UnknownCA
            | Alert::UnsupportedCertificate
            | Alert::CertificateUnknown
            | Alert::AccessDenied),
        ) => format!(
            "TLS: {peer} refused the handshake ({alert:?}): it requires a client \
             certificate it trusts (tls.client_cert, tls.client_key)"
        ),
        other => format!("TLS: {other}"),
    }
}

/// For tests: a CA and a server certificate for 127.0.0.1 it signs (DER), and the
/// server's key.
#[cfg(test)]
pub(crate) fn test_pki() -> (
    rustls_pki_types::CertificateDer<'static>,
    rustls_pki_types::CertificateDer<'static>,
    rustls_pki_types::PrivateKeyDer<'static>,
) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let private = rustls_pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap();
    (ca_cert.der().clone(), leaf.der().clone(), private)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_errors_are_explained_through_io_and_source_chains() {
        let unknown = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        // As reqwest's chain holds it: tokio-rustls's io::Error inside hyper-rustls's.
        let wrapped = std::io::Error::new(std::io::ErrorKind::InvalidData, unknown);
        let wrapped = std::io::Error::other(wrapped);
        let shown = explain(&wrapped).unwrap();
        assert!(shown.contains("signed by an unknown CA"), "{shown}");
        let alert = rustls::Error::AlertReceived(rustls::AlertDescription::CertificateRequired);
        assert!(explain(&alert).unwrap().contains("tls.client_cert"));
        let name = rustls::Error::InvalidCertificate(CertificateError::NotValidForName);
        assert!(explain(&name).unwrap().contains("tls.server_name"));
        let plain = std::io::Error::other("connection refused");
        assert_eq!(explain(&plain), None);
    }

    /// Agents without `tls.ca_file` share one parsed root store; an agent's own roots go
    /// into a copy, which the shared one never sees.
    #[test]
    fn the_default_roots_are_shared_and_extra_roots_stay_an_agents_own() {
        assert!(Arc::ptr_eq(&default_roots(), &default_roots()));
        let shared = default_roots().len();
        let (ca, _, _) = test_pki();
        let own = AgentTls::new(&TlsTrust {
            extra_roots: vec![ca],
            ..Default::default()
        });
        assert!(own.is_ok());
        assert_eq!(default_roots().len(), shared);
    }

    #[test]
    fn the_default_trust_builds_and_a_server_name_is_used_for_every_host() {
        let tls = AgentTls::new(&TlsTrust::default()).unwrap();
        assert_eq!(
            tls.http.alpn_protocols,
            [b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        assert_eq!(tls.h2.alpn_protocols, [b"h2".to_vec()]);
        assert_eq!(tls.http1.alpn_protocols, [b"http/1.1".to_vec()]);
        assert_eq!(
            tls.name_for("127.0.0.1").unwrap(),
            ServerName::try_from("127.0.0.1").unwrap()
        );
        let named = AgentTls::new(&TlsTrust {
            server_name: Some(ServerName::try_from("agent.internal").unwrap()),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(
            named.name_for("10.0.0.5").unwrap(),
            ServerName::try_from("agent.internal").unwrap()
        );
    }
}
